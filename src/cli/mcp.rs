//! `git session mcp`: the MCP server on stdin/stdout.

use std::io::Write;
use std::path::PathBuf;

use super::{CommandError, Env};

/// Serve the Model Context Protocol on stdin/stdout, for an agent.
///
/// Tools: list, show, search, compile, status, which (read-only), and
/// handoff, import, init (the writers; init and import are idempotent).
/// Session text is returned as JSON data naming its session and seq, with
/// a notice that it is data, not instructions. Register it with
/// `git session init --mcp claude|codex`, or by hand: the command is
/// `git-session mcp`, run in the repository. Logs nothing on stdout but
/// protocol messages.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Home directory whose agent stores import and handoff use (default: $HOME).
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
}

pub fn run(args: Args, env: &Env, _out: &mut dyn Write) -> Result<(), CommandError> {
    // Fail before serving when there is no repository here.
    env.store()?;
    let home = env.agent_home(args.home)?;
    let binary = std::env::current_exe()
        .map_err(|e| CommandError::failure(format!("cannot locate git-session itself: {e}")))?;
    let cwd = env.cwd.clone();
    let cx = crate::mcp::Context {
        home,
        clock: env.clock,
        binary,
        open: Box::new(move || {
            let env = Env {
                cwd: cwd.clone(),
                clock: crate::clock::Clock::system(),
                ui: Default::default(),
            };
            env.store().map_err(crate::mcp::describe)
        }),
    };
    crate::mcp::serve_stdio(cx).map_err(|e| CommandError::failure(format!("mcp: {e}")))
}
