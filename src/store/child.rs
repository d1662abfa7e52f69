//! The `git` children of this process: each runs in its own process group,
//! and a signal that ends this process ends that group first, so a killed
//! `sync` never leaves a `git fetch` running that holds ref locks the next
//! `sync` trips over.
//!
//! SIGINT, SIGTERM and SIGHUP are blocked in the thread that first runs git
//! (and so in every thread it starts later) and taken by one waiter thread:
//! it sends SIGTERM to the running child's group (git removes its lock files
//! on SIGTERM), waits briefly for it, and exits with `128 + signal`, as the
//! default action would have. Children are spawned with those signals
//! unblocked (a child inherits the spawning thread's mask), so they stay
//! killable.
//!
//! SIGKILL cannot be forwarded. For that case network commands leave a
//! record under `<state dir>/children/` while they run: the next run ends
//! a recorded child whose parent is gone before it starts its own. The
//! record is written right after the spawn (the child's pid is not known
//! before), so a SIGKILL in between leaves a child no record names.
//!
//! Linux and other Unix only; nothing here is needed for correctness of
//! the log (git's own ref updates are atomic), only to leave no debris.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal, kill, killpg};
use nix::unistd::Pid;

use super::{StoreError, StoreResult};

/// The process group of the git child running now; 0 when none.
static CHILD: AtomicI32 = AtomicI32::new(0);
static WAITER: Once = Once::new();
/// Set once a signal was taken: this process is on its way out.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// How long a signalled child gets to exit before this process does.
const GRACE: Duration = Duration::from_secs(2);

/// Runs `cmd` to completion in its own process group, ending the group if
/// this process is told to stop; with `record`, also leaves the record that
/// lets a later run end it after a SIGKILL.
pub(crate) fn run(cmd: Command, record: Option<&Path>) -> StoreResult<Output> {
    run_with_stdin(cmd, record, Stdio::null())
}

/// Like [`run`], with `stdin` as the child's standard input (a file the
/// caller wrote, say).
pub(crate) fn run_with_stdin(
    mut cmd: Command,
    record: Option<&Path>,
    stdin: Stdio,
) -> StoreResult<Output> {
    install_waiter();
    if let Some(dir) = record {
        end_orphans(dir);
    }
    use std::os::unix::process::CommandExt;
    cmd.process_group(0)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let io = |source| StoreError::Io {
        path: PathBuf::from("git"),
        source,
    };
    // A child inherits the spawning thread's signal mask, which blocks the
    // signals the waiter takes: unblock them in this thread while it
    // spawns (a signal in that moment takes its default action here).
    let signals = forwarded();
    let _ = signals.thread_unblock();
    let spawned = cmd.spawn();
    let _ = signals.thread_block();
    let child = spawned.map_err(io)?;
    let pid = child.id() as i32;
    CHILD.store(pid, Ordering::SeqCst);
    let file = record.and_then(|dir| write_record(dir, pid));
    let out = child.wait_with_output();
    CHILD.store(0, Ordering::SeqCst);
    if STOPPING.load(Ordering::SeqCst) {
        // The child ended because this process is stopping: the waiter
        // exits with the signal's code; reporting git's failure instead
        // would race it.
        loop {
            std::thread::park();
        }
    }
    if let Some(f) = file {
        let _ = std::fs::remove_file(f);
    }
    out.map_err(io)
}

fn install_waiter() {
    WAITER.call_once(|| {
        let set = forwarded();
        if set.thread_block().is_err() {
            return;
        }
        std::thread::spawn(move || {
            loop {
                let Ok(signal) = set.wait() else {
                    continue;
                };
                STOPPING.store(true, Ordering::SeqCst);
                let pid = CHILD.load(Ordering::SeqCst);
                if pid > 0 {
                    end_group(pid);
                }
                std::process::exit(128 + signal as i32);
            }
        });
    });
}

/// Returns the signals that end this process and its git child.
fn forwarded() -> SigSet {
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    set
}

/// Sends SIGTERM to the group `pid` leads and waits up to [`GRACE`] for
/// its leader to be gone (or a zombie, which its parent reaps).
fn end_group(pid: i32) {
    let _ = killpg(Pid::from_raw(pid), Signal::SIGTERM);
    let step = Duration::from_millis(20);
    let mut waited = Duration::ZERO;
    while waited < GRACE && running(pid) {
        std::thread::sleep(step);
        waited += step;
    }
}

/// Returns whether `pid` is alive and not a zombie.
fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesized command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z'),
        Err(_) => kill(Pid::from_raw(pid), None).is_ok(),
    }
}

/// Records `pid` (a child of this process) in `dir`; returns the file.
fn write_record(dir: &Path, pid: i32) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).ok()?;
    let file = dir.join(format!("{}.pid", std::process::id()));
    std::fs::write(&file, format!("{pid}\n")).ok()?;
    Some(file)
}

/// Ends the recorded git children whose parent is gone, and removes their
/// records. A record whose parent still runs belongs to a concurrent run
/// and is left alone.
fn end_orphans(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let parent = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<i32>().ok());
        let child = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        let (Some(parent), Some(child)) = (parent, child) else {
            let _ = std::fs::remove_file(&path);
            continue;
        };
        if parent as u32 != std::process::id() && running(parent) {
            continue;
        }
        // The pid may have been reused since: only a git process that
        // still leads its own group is ended.
        if running(child) && is_git_group_leader(child) {
            end_group(child);
        }
        let _ = std::fs::remove_file(&path);
    }
}

fn is_git_group_leader(pid: i32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
    let is_git = Path::new(std::str::from_utf8(argv0).unwrap_or(""))
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("git"));
    is_git && nix::unistd::getpgid(Some(Pid::from_raw(pid))).is_ok_and(|g| g.as_raw() == pid)
}
