//! `git session fetch`: bring sessions from a remote.

use std::io::Write;

use super::{CommandError, Env, escape_line, status};
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
    let report = ops::sync::fetch(&store, &remote, &trust(&store, &remote))?;
    print_changes(out, &report.changed)?;
    print_removed(out, &report.removed)?;
    print_meta(out, &report.meta)?;
    print_quarantine(out, &report.quarantined)?;
    status(format!(
        "Fetched from {remote}: {} changed, {} unchanged{}",
        report.changed.len(),
        report.unchanged,
        match report.quarantined.len() {
            0 => String::new(),
            n => format!(", {n} quarantined"),
        }
    ));
    Ok(())
}

/// Returns what fetched history from `remote` must prove, from git config.
pub(crate) fn trust(store: &crate::store::Store, remote: &str) -> ops::sync::Trust {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let name = crate::store::tracking_name(remote);
    ops::sync::Trust {
        require_signed: crate::config::require_signed(store, Some(&name)),
        allowed_signers: crate::config::allowed_signers(store, home.as_deref()),
    }
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
            Reconciled::Replaced => writeln!(
                out,
                "purged    {id}: the remote's purged history replaced the local one"
            )?,
            Reconciled::Unchanged
            | Reconciled::LocalAhead
            | Reconciled::Removed
            | Reconciled::Quarantined { .. } => {}
        }
    }
    Ok(())
}

/// Prints the sessions whose metadata a fetch changed.
pub(crate) fn print_meta(
    out: &mut dyn Write,
    meta: &[(git_session_schema::SessionId, crate::store::MetaReconciled)],
) -> std::io::Result<()> {
    use crate::store::MetaReconciled as M;
    for (id, what) in meta {
        let what = match what {
            M::Created | M::FastForwarded => "metadata updated",
            M::Merged => "metadata merged with local changes (git session log --meta)",
            M::Unchanged | M::Quarantined(_) => continue,
        };
        writeln!(out, "meta      {id}: {what}")?;
    }
    Ok(())
}

pub(crate) fn print_removed(
    out: &mut dyn Write,
    removed: &[git_session_schema::SessionId],
) -> std::io::Result<()> {
    for id in removed {
        writeln!(out, "removed   {id}: a fetched tombstone removed it")?;
    }
    Ok(())
}

/// Prints each quarantined ref with its reason and what to do.
pub(crate) fn print_quarantine(
    out: &mut dyn Write,
    list: &[ops::sync::Quarantine],
) -> std::io::Result<()> {
    for q in list {
        writeln!(
            out,
            "quarantined {}: {}",
            escape_line(&q.refname),
            escape_line(&q.reason)
        )?;
        let what = if q.conflict {
            format!(
                "the local session {0} is kept; inspect the remote's with git log {1}; if the remote is right, git session rm {0} here and fetch again (the id is then retired everywhere)",
                escape_line(&q.id),
                escape_line(&q.refname)
            )
        } else {
            format!(
                "not a session here; inspect it with git log {}, and ask whoever pushed it to fix or delete it on the remote",
                escape_line(&q.refname)
            )
        };
        writeln!(out, "  what to do: {what}")?;
    }
    Ok(())
}
