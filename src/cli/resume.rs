//! `git session resume`: write a session back for its agent.

use std::io::Write;
use std::path::PathBuf;

use git_session_schema::Agent;

use super::{CommandError, Env, status};
use crate::ops;
use crate::ops::resume::ResumeRequest;

/// Write a session into an agent's own store so the agent resumes it.
///
/// Renders the canonical session in the agent's native format (its files,
/// index entries or database rows, in the agent's own store) with this
/// machine's repository as the working directory, and prints the command
/// that continues it.
/// Never overwrites a native session: one that exists with other content is
/// refused unless --fork writes it under a new id, recorded as a fork.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// Agent to write for (default: the session's own agent).
    #[arg(long, value_name = "AGENT", value_parser = super::agent_parser())]
    agent: Option<Agent>,
    /// Home directory whose agent store is written (default: $HOME).
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Write under a new native id and record it as a fork of the session.
    #[arg(long)]
    fork: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    let home = env.agent_home(args.home)?;
    let lookup = |name: &str| std::env::var(name).ok();
    let request = ResumeRequest {
        id,
        agent: args.agent,
        home,
        env: &lookup,
        fork: args.fork,
    };
    let outcome = ops::resume::resume(&store, &env.clock, &request)?;
    if outcome.unchanged {
        status(format!(
            "{} session {} is already in place",
            outcome.agent, outcome.native_id
        ));
    } else {
        for path in &outcome.written {
            status(format!("wrote {}", path.display()));
        }
        if let Some(via) = &outcome.via {
            status(format!(
                "wrote {} session {} by {via}",
                outcome.agent, outcome.native_id
            ));
        }
    }
    if outcome.session.as_str() != args.session && args.fork {
        status(format!("recorded as fork {}", outcome.session));
    }
    for loss in &outcome.losses {
        status(format!("not carried over: {loss}"));
    }
    for skipped in &outcome.skipped_rows {
        status(format!("warning: {skipped}"));
    }
    for notice in &outcome.notices {
        status(format!("note: {notice}"));
    }
    status("Continue with:");
    writeln!(
        out,
        "cd {} && {}",
        shell_quote(&outcome.cwd.to_string_lossy()),
        outcome.command
    )?;
    Ok(())
}

pub(crate) use crate::ops::shell_quote;
