//! `git session sync`: fetch, reconcile, push.

use std::io::Write;

use super::{CommandError, Env, status};
use crate::ops;

/// Fetch, reconcile and push sessions until the remote has them all.
///
/// Safe to run on any number of clones in any order: afterwards each has
/// every event captured anywhere, and their session refs are identical.
/// Never force-pushes; divergent appends become fork sessions.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remote name or URL (default: session.remote, else origin).
    remote: Option<String>,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let remote = args
        .remote
        .unwrap_or_else(|| crate::config::sessions_remote(&store));
    let report = ops::sync::sync(&store, &remote)?;
    super::fetch::print_changes(out, &report.fetched.changed)?;
    status(format!(
        "Synced with {remote} ({} changed here)",
        report.fetched.changed.len()
    ));
    Ok(())
}
