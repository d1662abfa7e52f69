//! `git session push`: send sessions to a remote.

use std::io::Write;

use super::{CommandError, Env, status};
use crate::ops;

/// Send every session (and handoff receipts) to the sessions remote, never
/// forcing (except over the remote's copy of a purged history).
///
/// Sessions go only to the remote chosen for them: `git config
/// session.remote`, or once `--to NAME`, which records NAME (and its URL, as
/// session.remoteUrl). It may be a separate repository so transcripts stay
/// out of a public code repository. Refused, before anything is sent: no
/// remote chosen yet, any other remote or URL, the chosen remote now
/// pointing elsewhere than when it was chosen, and a target that looks like
/// a fork of it (same repository name, another owner). If the remote has
/// appended to a session too, the push of that session is refused: run
/// `git session sync`, which reconciles first.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remote name or URL; must be the sessions remote.
    remote: Option<String>,
    /// Choose this remote for sessions (recorded as session.remote) and push.
    #[arg(long, value_name = "NAME", conflicts_with = "remote")]
    to: Option<String>,
    /// Print a JSON object instead of text (docs/json.md); a refused push
    /// still exits 1 after it.
    #[arg(long)]
    json: bool,
    /// Push the full blobs of session ID's lazy artifacts
    /// (`refs/session-artifacts/ID`, written with `session.syncArtifacts
    /// head`) instead of sessions, so others can `git session fetch
    /// --artifacts ID`.
    #[arg(long, value_name = "ID")]
    artifacts: Option<String>,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let dest = match (&args.to, &args.remote) {
        (Some(name), _) => ops::sync::Destination::ChooseNow(name),
        (None, Some(name)) => ops::sync::Destination::Named(name),
        (None, None) => ops::sync::Destination::Chosen,
    };
    let (chosen, pinned) = crate::config::chosen_remote(&store);
    let remote = ops::sync::consent(&store, dest, chosen.as_deref(), pinned.as_deref())?;
    if let Some(query) = &args.artifacts {
        let id = store.resolve(query)?;
        let progress = super::progress::Progress::start(
            &format!("Pushing full artifacts of {id} to {remote}"),
            args.json,
        );
        let refused = ops::sync::push_artifacts(&store, &remote, &id);
        progress.finish();
        let refused = refused?;
        if args.json {
            super::print_json(
                out,
                &serde_json::json!({"remote": remote, "session": id, "pushed": refused.is_none(), "reason": refused}),
            )?;
        }
        return match refused {
            None => {
                status(format!("Pushed the full artifacts of {id} to {remote}"));
                Ok(())
            }
            Some(reason) => Err(CommandError::failure(format!(
                "{remote} refused refs/session-artifacts/{id} ({reason}): it holds full artifacts of {id} this clone lacks"
            ))
            .hint(format!(
                "another clone published full artifacts of {id} there first; git session fetch --artifacts {id} {remote} brings those and merges them with this clone's, then push --artifacts again"
            ))),
        };
    }
    // Removals (tombstones) still travel when no session is left.
    if store.session_ids()?.is_empty() && store.tombstones()?.is_empty() {
        if args.json {
            super::print_json(
                out,
                &serde_json::json!({"remote": remote, "pushed": false, "rejected": []}),
            )?;
        }
        status(format!(
            "Nothing to push to {remote}: this repository has no sessions yet (`git session import` captures them)"
        ));
        return Ok(());
    }
    let progress =
        super::progress::Progress::start(&format!("Pushing sessions to {remote}"), args.json);
    let rejected = ops::sync::push(&store, &remote);
    progress.finish();
    let rejected = rejected?;
    if args.json {
        super::print_json(
            out,
            &serde_json::json!({"remote": remote, "pushed": rejected.is_empty(),
                "rejected": rejected.iter().map(|r| serde_json::json!({"refname": r.refname, "reason": r.reason})).collect::<Vec<_>>()}),
        )?;
    }
    if rejected.is_empty() {
        status(format!("Pushed sessions to {remote}"));
        return Ok(());
    }
    for r in rejected.iter().filter(|_| !args.json) {
        writeln!(out, "rejected {} ({})", r.refname, r.reason)?;
    }
    Err(CommandError::failure(format!(
        "{remote} refused {}: it has events this clone lacks",
        super::count(rejected.len() as u64, "ref")
    ))
    .hint(format!(
        "git session sync {remote} fetches, reconciles and pushes again without losing anything"
    )))
}
