//! `git session watch`: capture continuously while agents work.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use git_session_schema::Agent;

use super::{CommandError, Env, escape_line, status};
use crate::ops;
use crate::ops::watch::{WatchEvent, WatchRequest};

/// Capture sessions as the agents write them, until interrupted.
///
/// Captures what is new, then waits on each agent's store (inotify or the
/// platform's file events, no polling: idle, it uses no CPU) and, once
/// writes pause for --debounce, captures what changed: new lines, new
/// session files and directories, SQLite sources through their -wal file.
/// Incremental from the capture cursors, like `import`. Prints one line per
/// session that received events. Stores that do not exist when it starts
/// are not watched (restart it once the agent has run). `git session
/// status` shows whether it runs; one runs per repository (a second is
/// refused). SIGTERM, SIGINT (Ctrl-C) or SIGHUP stop it cleanly once the
/// capture in progress is done, exit 0; a second signal stops it at once.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only watch these agents (repeatable).
    #[arg(long = "agent", value_name = "AGENT", value_parser = super::agent_parser())]
    agents: Vec<Agent>,
    /// Home directory whose agent stores are watched (default: $HOME).
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Quiet time after a write before capturing, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 30)]
    debounce: u64,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let home = env.agent_home(args.home)?;
    let lookup = |name: &str| std::env::var(name).ok();
    let request = WatchRequest {
        agents: args.agents,
        home,
        env: &lookup,
        debounce: Duration::from_millis(args.debounce.max(1)),
        pid: std::process::id(),
        stop_on_signals: true,
    };
    let mut on_event = |event: WatchEvent<'_>| -> bool {
        match event {
            WatchEvent::Watching(roots) => {
                if roots.is_empty() {
                    status("no agent store exists here yet; nothing to watch");
                    return false;
                }
                for (agent, root) in roots {
                    status(format!("watching {agent}: {}", root.display()));
                }
            }
            WatchEvent::Captured(Ok(report)) => {
                for s in &report.sessions {
                    if writeln!(
                        out,
                        "{}  {:<8} +{} events ({} in all)",
                        s.id, s.agent, s.appended, s.events
                    )
                    .and_then(|()| out.flush())
                    .is_err()
                    {
                        return false;
                    }
                }
                for skipped in report.skipped.iter().chain(&report.skipped_sources) {
                    status(format!(
                        "skipped {}: {}",
                        escape_line(&skipped.path.to_string_lossy()),
                        escape_line(&skipped.reason)
                    ));
                }
            }
            WatchEvent::Captured(Err(e)) => {
                status(format!("capture failed: {}", escape_line(&e.to_string())));
            }
            WatchEvent::Stopped(signal) => {
                status(format!(
                    "stopped by {signal}; every change seen was captured"
                ));
            }
        }
        true
    };
    ops::watch::watch(&store, &env.clock, &request, &mut on_event)?;
    Ok(())
}
