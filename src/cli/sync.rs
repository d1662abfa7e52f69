//! `git session sync`: fetch, reconcile, push.

use std::io::Write;

use super::{CommandError, Env, status};
use crate::ops;

/// Fetch, reconcile and push sessions until the remote has them all.
///
/// Safe to run on any number of clones in any order: afterwards each has
/// every event captured anywhere, and their session refs are identical.
/// Never force-pushes; divergent appends become fork sessions. A fetched
/// history that fails verification or is unrelated to the local session is
/// quarantined (shown with its reason) and never replaces a session.
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
    let report = ops::sync::sync(&store, &remote, &super::fetch::trust(&store, &remote))?;
    super::fetch::print_changes(out, &report.fetched.changed)?;
    super::fetch::print_removed(out, &report.fetched.removed)?;
    super::fetch::print_quarantine(out, &report.fetched.quarantined)?;
    for r in &report.held {
        writeln!(
            out,
            "not pushed {}: the remote holds a conflicting history (see quarantined above)",
            super::escape_line(&r.refname)
        )?;
    }
    status(format!(
        "Synced with {remote} ({} changed here{})",
        report.fetched.changed.len(),
        match report.fetched.quarantined.len() {
            0 => String::new(),
            n => format!(", {n} quarantined"),
        }
    ));
    Ok(())
}
