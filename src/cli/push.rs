//! `git session push`: send sessions to a remote.

use std::io::Write;

use super::{CommandError, Env, status};
use crate::ops;

/// Send every session (and handoff receipts) to a remote, never forcing.
///
/// The remote is REMOTE, else `git config session.remote`, else origin; it
/// may be a separate repository so transcripts stay out of a public code
/// repository. If the remote has appended to a session too, the push of that
/// session is refused: run `git session sync`, which reconciles first.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remote name or URL.
    remote: Option<String>,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let remote = args
        .remote
        .unwrap_or_else(|| crate::config::sessions_remote(&store));
    let rejected = ops::sync::push(&store, &remote)?;
    if rejected.is_empty() {
        status(format!("Pushed sessions to {remote}"));
        return Ok(());
    }
    for r in &rejected {
        writeln!(out, "rejected {} ({})", r.refname, r.reason)?;
    }
    Err(CommandError::failure(format!(
        "{remote} refused {} refs: it has events this clone lacks",
        rejected.len()
    ))
    .hint(format!(
        "git session sync {remote} fetches, reconciles and pushes again without losing anything"
    )))
}
