//! `watch`: capture continuously, within moments of an agent writing.
//!
//! Waits on the agent stores (`native::watch`, no polling: idle costs
//! nothing), gathers the changes of a short quiet period (the debounce),
//! then captures the agents whose store changed, incrementally from the
//! cursors, exactly as `import` does. Records its pid in
//! `.git/session/watch.pid` while it runs (for `status`); one watch a
//! repository (a lock under the state directory), a second is refused.
//!
//! With [`WatchRequest::stop_on_signals`], SIGTERM, SIGINT and SIGHUP end
//! the watch cleanly: the capture in progress, and one of what changed
//! before the signal, finish; the pid file goes; the watch returns. A
//! second signal ends the process at once. The signals are blocked in
//! this thread before any other starts (so every thread the watch starts
//! inherits that) and taken by one thread with `sigwait`: no handler runs
//! in signal context.

use std::path::{Path, PathBuf};
use std::time::Duration;

use git_session_adapters::Adapter;
use git_session_schema::Agent;

use super::OpResult;
use super::capture::{CaptureReport, CaptureRequest};
use crate::clock::Clock;
use crate::native::watch::StoreWatcher;
use crate::store::Store;

/// The file the running watch's pid is in, under the state directory.
pub const PID_FILE: &str = "watch.pid";

/// Says how to watch.
pub struct WatchRequest<'a> {
    /// Agents to watch; empty: every agent whose store exists.
    pub agents: Vec<Agent>,
    /// The user's home (agent stores).
    pub home: PathBuf,
    /// Looks up an environment variable (store overrides).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// How long no change must last before capturing.
    pub debounce: Duration,
    /// This process's id (recorded for `status`).
    pub pid: u32,
    /// End cleanly on SIGTERM, SIGINT or SIGHUP (the command line's watch;
    /// see the module docs).
    pub stop_on_signals: bool,
}

/// What the watch tells its caller.
pub enum WatchEvent<'a> {
    /// Watching these stores now (after the first capture).
    Watching(&'a [(Agent, PathBuf)]),
    /// A capture ran (or failed).
    Captured(&'a OpResult<CaptureReport>),
    /// The watch stopped on this signal, its last capture done.
    Stopped(&'static str),
}

/// Captures once, then after every change until the watcher ends;
/// `on_event` returning false stops it.
pub fn watch(
    store: &Store,
    clock: &Clock,
    request: &WatchRequest<'_>,
    on_event: &mut dyn FnMut(WatchEvent<'_>) -> bool,
) -> OpResult<()> {
    let adapters: Vec<&dyn Adapter> = git_session_adapters::registry::ADAPTERS
        .iter()
        .copied()
        .filter(|a| request.agents.is_empty() || request.agents.contains(&a.agent()))
        .filter(|a| a.store_root(request.env, &request.home).is_dir())
        .collect();
    let roots: Vec<(Agent, PathBuf)> = adapters
        .iter()
        .map(|a| (a.agent(), a.store_root(request.env, &request.home)))
        .collect();
    store.ensure_state_dir()?;
    // One watch a repository: a second would capture the same changes and
    // take the pid file `status` reads from the first.
    let Some(_only) = store.try_lock_state("watch")? else {
        let pid = running(store).map_or_else(String::new, |p| format!(" (pid {p})"));
        return Err(super::OpError::Conflict {
            message: format!("a watch is already running in this repository{pid}"),
            hint: Some(
                "one watch captures every agent; stop that one first to start another".into(),
            ),
        });
    };
    let pid_path = store.state_dir().join(PID_FILE);
    std::fs::write(&pid_path, request.pid.to_string()).map_err(super::OpError::io(&pid_path))?;
    let _pid = PidFile(pid_path);
    // Before the watcher's thread and the captures' start: they inherit
    // the blocked signals, and only the signal thread takes them.
    let signals = if request.stop_on_signals {
        Some(block_stop_signals()?)
    } else {
        None
    };
    let watcher = StoreWatcher::new(roots.iter().map(|(_, r)| r.clone()).collect())?;
    if let Some(set) = signals {
        let stopper = watcher.stopper();
        std::thread::spawn(move || {
            let Ok(first) = set.wait() else { return };
            stopper.stop(first.as_str());
            // A second signal: the user does not want to wait.
            if let Ok(second) = set.wait() {
                std::process::exit(128 + second as i32);
            }
        });
    }
    let capture = |agents: Vec<Agent>| {
        super::capture::capture(
            store,
            clock,
            &CaptureRequest {
                agents,
                home: request.home.clone(),
                env: request.env,
                sqlite: Default::default(),
            },
        )
    };
    // What changed before the watch was in place.
    let first = capture(roots.iter().map(|(a, _)| a.clone()).collect());
    if !on_event(WatchEvent::Captured(&first)) || !on_event(WatchEvent::Watching(&roots)) {
        return Ok(());
    }
    let relevant = |i: usize, path: &Path, _dir: bool| {
        let root = &roots[i].1;
        let Ok(rel) = path.strip_prefix(root) else {
            return false;
        };
        let name = rel.to_string_lossy();
        adapters[i].is_session_file(rel)
            || in_tree(adapters[i], rel)
            || name.ends_with("-wal")
            || name.ends_with(".db")
            || path.is_dir()
    };
    while let Some(changed) =
        watcher.next_change(request.debounce, request.debounce * 10, &relevant)
    {
        if changed.is_empty() {
            continue;
        }
        let agents = changed.iter().map(|&i| roots[i].0.clone()).collect();
        let result = capture(agents);
        if !on_event(WatchEvent::Captured(&result)) {
            break;
        }
    }
    if let Some(signal) = watcher.stopped() {
        on_event(WatchEvent::Stopped(signal));
    }
    Ok(())
}

/// Blocks SIGTERM, SIGINT and SIGHUP in this thread; returns the set for
/// `sigwait`.
fn block_stop_signals() -> OpResult<nix::sys::signal::SigSet> {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(signal);
    }
    set.thread_block().map_err(|e| super::OpError::Conflict {
        message: format!("cannot block the signals that stop the watch: {e}"),
        hint: None,
    })?;
    Ok(set)
}

/// Removes the pid file when the watch ends.
struct PidFile(PathBuf);

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Returns the pid of the running watch of this repository, if any.
pub fn running(store: &Store) -> Option<u32> {
    let text = std::fs::read_to_string(store.state_dir().join(PID_FILE)).ok()?;
    let pid: i32 = text.trim().parse().ok()?;
    // Signal 0 checks the process exists.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).ok()?;
    Some(pid as u32)
}

/// Says whether `rel` (relative to the agent's store root) is a file of a
/// JSON tree the adapter reads ([`git_session_adapters::Source::JsonTree`]).
fn in_tree(adapter: &dyn Adapter, rel: &Path) -> bool {
    rel.extension().is_some_and(|e| e == "json")
        && adapter.spec().sources.iter().any(
            |s| matches!(s, git_session_adapters::Source::JsonTree(t) if rel.starts_with(t.dir)),
        )
}
