//! `git session init`: prepare this repository for sessions.

use std::io::Write;

use super::{CommandError, Env};

/// Prepare this repository for git-session.
///
/// Creates the local state directory under the git common dir (shared by all
/// worktrees, never pushed) and checks that the repository is one git-session
/// can write. Safe to run again.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let created = store.ensure_state_dir()?;
    let verb = if created {
        "Initialized"
    } else {
        "Already initialized"
    };
    writeln!(out, "{verb} git-session in {}", store.state_dir().display())?;
    Ok(())
}
