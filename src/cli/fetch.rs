//! `git session fetch`: bring sessions from a remote.

use std::io::Write;

use super::{CommandError, Env, status};
use crate::ops;
use crate::store::Reconciled;

/// Fetch sessions from a remote and reconcile them with the local ones.
///
/// New sessions are created, longer ones fast-forward. A session that both
/// sides appended to follows the remote, and the local events after the
/// split become a fork session (shown here), so nothing is lost and every
/// clone that syncs ends up with the same refs.
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
    let report = ops::sync::fetch(&store, &remote)?;
    print_changes(out, &report.changed)?;
    status(format!(
        "Fetched from {remote}: {} changed, {} unchanged",
        report.changed.len(),
        report.unchanged
    ));
    Ok(())
}

pub(crate) fn print_changes(
    out: &mut dyn Write,
    changed: &[(git_session_schema::SessionId, Reconciled)],
) -> std::io::Result<()> {
    for (id, what) in changed {
        match what {
            Reconciled::Created => writeln!(out, "new       {id}")?,
            Reconciled::FastForwarded => writeln!(out, "updated   {id}")?,
            Reconciled::Diverged { fork } => {
                writeln!(out, "diverged  {id}: local events kept as fork {fork}")?
            }
            Reconciled::Unchanged | Reconciled::LocalAhead => {}
        }
    }
    Ok(())
}
