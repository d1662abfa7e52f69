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
///
/// Lazy artifacts: with `git config session.syncArtifacts head` (default
/// `full`), an artifact over 4 KiB is stored in the session as its head
/// (first 4 KiB, SHA-256 and size) and its full blob apart, in
/// `refs/session-artifacts/<id>`, which plain push and fetch leave out. The
/// writer publishes the full blobs with `git session push --artifacts ID`;
/// `git session fetch --artifacts ID` brings them, checking each against its
/// head (size from the object header before reading it, then its SHA-256)
/// and refusing any that does not match. When two clones both published
/// full artifacts of one session, fetching merges the remote's (every
/// entry checked) with this clone's, so the next `push --artifacts` goes
/// through. Readers that need a missing full blob (`resume`, `handoff`,
/// `export`) name the command to run.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remote name or URL (default: session.remote, else origin).
    remote: Option<String>,
    /// Fetch the full blobs of session ID's lazy artifacts instead of
    /// sessions (ID, unique prefix or session URI).
    #[arg(long, value_name = "ID")]
    artifacts: Option<String>,
    /// Print a JSON object instead of text (docs/json.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let remote = args
        .remote
        .unwrap_or_else(|| crate::config::sessions_remote(&store));
    if let Some(query) = &args.artifacts {
        return fetch_artifacts(&store, env, &remote, query, args.json, out);
    }
    let progress =
        super::progress::Progress::start(&format!("Fetching sessions from {remote}"), args.json);
    let report = ops::sync::fetch_reporting(&store, &remote, &trust(&store, &remote), &progress);
    progress.finish();
    let report = report?;
    if args.json {
        let mut doc = fetch_json(&report);
        doc["remote"] = remote.as_str().into();
        return super::print_json(out, &doc);
    }
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

/// `fetch --artifacts ID`: prints each artifact adopted or refused; fails
/// when any full blob is refused or missing on the remote.
fn fetch_artifacts(
    store: &crate::store::Store,
    env: &Env,
    remote: &str,
    query: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    use crate::store::human_size;
    let id = store.resolve(query)?;
    let progress = super::progress::Progress::start(
        &format!("Fetching full artifacts of {id} from {remote}"),
        json,
    );
    let report = ops::sync::fetch_artifacts(store, &env.clock, remote, &id);
    progress.finish();
    let report = report?;
    if json {
        super::print_json(
            out,
            &serde_json::json!({
                "remote": remote,
                "session": id,
                "adopted": report.adopted.iter().map(|(a, n)| serde_json::json!({"artifact": a.to_string(), "size": n})).collect::<Vec<_>>(),
                "present": report.present,
                "refused": report.refused.iter().map(|(a, why)| serde_json::json!({"artifact": a.to_string(), "reason": why})).collect::<Vec<_>>(),
                "missing": report.missing.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                "merged": report.merged,
                "unmerged": report.unmerged,
            }),
        )?;
    } else {
        for (art, size) in &report.adopted {
            writeln!(out, "fetched   {art} ({})", human_size(*size))?;
        }
        for (art, why) in &report.refused {
            writeln!(out, "refused   {art}: {}", escape_line(why))?;
        }
        for art in &report.missing {
            writeln!(out, "missing   {art}: {remote} does not have its full blob")?;
        }
        if report.merged {
            writeln!(
                out,
                "merged    {remote}'s full artifacts of {id} with this clone's: git session push --artifacts {id} publishes both"
            )?;
        }
        if let Some(why) = &report.unmerged {
            writeln!(out, "diverged  {}", escape_line(why))?;
        }
    }
    if !report.refused.is_empty() {
        return Err(CommandError::failure(format!(
            "{} from {remote} did not match {}: not adopted",
            super::count(report.refused.len() as u64, "full artifact"),
            if report.refused.len() == 1 { "its head" } else { "their heads" }
        ))
        .hint(format!(
            "the remote's refs/session-artifacts/{id} was changed or damaged; ask whoever captured {id} to run git session push --artifacts {id} again"
        )));
    }
    if !report.missing.is_empty() {
        return Err(CommandError::failure(format!(
            "{remote} lacks the full blob of {} of {id}",
            super::count(report.missing.len() as u64, "artifact")
        ))
        .hint(format!(
            "whoever captured {id} publishes them with git session push --artifacts {id}"
        )));
    }
    status(format!(
        "Full artifacts of {id}: {} fetched, {} here already",
        report.adopted.len(),
        report.present
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

/// Returns the `--json` document of a fetch (docs/json.md), without the remote.
pub(crate) fn fetch_json(report: &ops::sync::FetchReport) -> serde_json::Value {
    use serde_json::json;
    let changed: Vec<_> = report
        .changed
        .iter()
        .filter_map(|(id, what)| {
            let (change, fork) = match what {
                Reconciled::Created => ("created", None),
                Reconciled::FastForwarded => ("fast_forwarded", None),
                Reconciled::Diverged { fork } => ("diverged", Some(fork)),
                Reconciled::Replaced => ("replaced", None),
                Reconciled::Unchanged
                | Reconciled::LocalAhead
                | Reconciled::Removed
                | Reconciled::Quarantined { .. }
                | Reconciled::Rewritten { .. } => return None,
            };
            Some(json!({"id": id, "change": change, "fork": fork}))
        })
        .collect();
    json!({
        "changed": changed,
        "unchanged": report.unchanged,
        "removed": report.removed,
        "quarantined": report.quarantined.iter().map(|q| json!({"refname": q.refname, "id": q.id,
            "tip": q.tip, "reason": q.reason, "conflict": q.conflict})).collect::<Vec<_>>(),
    })
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
            | Reconciled::Quarantined { .. }
            | Reconciled::Rewritten { .. } => {}
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
        // `refs/remotes/<remote>/sessions/<id>`: the remote's name.
        let remote = q
            .refname
            .strip_prefix("refs/remotes/")
            .and_then(|r| r.split_once('/'))
            .map_or("<remote>", |(remote, _)| remote);
        let what = if q.refname.contains("/session-tombstones/") {
            format!(
                "the tombstone is not applied here; inspect it with git log {}",
                escape_line(&q.refname)
            )
        } else if q.conflict {
            format!(
                "the local session {0} is kept and the remote's history stays out (inspect it with git log {1}); git push --force {2} refs/sessions/{0} puts the local one back on the remote, git session rm {0} removes the session here and on the remote",
                escape_line(&q.id),
                escape_line(&q.refname),
                escape_line(remote)
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
