//! `git session sync`: fetch, reconcile, push.

use std::io::Write;

use super::{CommandError, Env, status};
use crate::ops;

/// Fetch, reconcile and push sessions until the remote has them all.
///
/// Safe to run on any number of clones in any order: afterwards each has
/// every event captured anywhere, and their session refs are identical.
/// Never force-pushes, except to replace the remote's copy of a history
/// `git session purge` rewrote; divergent appends become fork sessions. A
/// fetched history that fails verification or is unrelated to the local
/// session is quarantined (shown with its reason) and never replaces a
/// session, unless it is a purge of it (same events, content removed,
/// ending with a session.purge event); history purged here is refused.
/// Pushes only to the remote chosen for sessions (see `git session push`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remote name or URL; must be the sessions remote (session.remote).
    remote: Option<String>,
    /// Print a JSON object instead of text (docs/json.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let dest = match &args.remote {
        Some(name) => ops::sync::Destination::Named(name),
        None => ops::sync::Destination::Chosen,
    };
    let (chosen, pinned) = crate::config::chosen_remote(&store);
    let remote = ops::sync::consent(&store, dest, chosen.as_deref(), pinned.as_deref())?;
    let progress =
        super::progress::Progress::start(&format!("Syncing sessions with {remote}"), args.json);
    let report = ops::sync::sync_reporting(
        &store,
        &remote,
        &super::fetch::trust(&store, &remote),
        &progress,
    );
    progress.finish();
    let report = report?;
    if args.json {
        let mut doc = super::fetch::fetch_json(&report.fetched);
        doc["remote"] = remote.as_str().into();
        doc["rounds"] = report.rounds.into();
        doc["replaced"] = report.replaced.iter().map(|id| id.to_string()).collect();
        doc["not_pushed"] = report
            .held
            .iter()
            .map(|r| serde_json::json!({"refname": r.refname, "reason": r.reason}))
            .collect();
        return super::print_json(out, &doc);
    }
    super::fetch::print_changes(out, &report.fetched.changed)?;
    super::fetch::print_removed(out, &report.fetched.removed)?;
    super::fetch::print_meta(out, &report.fetched.meta)?;
    super::fetch::print_quarantine(out, &report.fetched.quarantined)?;
    for id in &report.replaced {
        writeln!(
            out,
            "replaced   {id}: the purged history replaced the old one on {}",
            super::escape_line(&remote)
        )?;
    }
    for r in &report.held {
        writeln!(
            out,
            "not pushed {}: the remote holds a conflicting history (see quarantined above)",
            super::escape_line(&r.refname)
        )?;
    }
    status(format!(
        "Synced with {remote} ({} changed here{}{})",
        report.fetched.changed.len(),
        match report.replaced.len() {
            0 => String::new(),
            n => format!(", {n} replaced there"),
        },
        match report.fetched.quarantined.len() {
            0 => String::new(),
            n => format!(", {n} quarantined"),
        }
    ));
    Ok(())
}
