//! `git session purge`: rewrite a session without a leaked secret.

use std::io::Write;

use super::{CommandError, Env, short, status};
use crate::ops;
use crate::ops::purge::What;

/// Rewrite a session without a secret that was stored anyway.
///
/// The escape hatch when redaction missed something (or was off). The
/// session gets a new history: with --seq N, event N keeps its seq and time
/// but its content is gone (it becomes a `meta` event naming its old type);
/// with --match REGEX, every match in any event and in the title and cwd
/// becomes [PURGED]. A final `session.purge` event says which seqs changed
/// and the old tip, never the secret or the pattern. The hash chain is
/// recomputed and commits are signed again when session commits are
/// signed. The new history names the one it replaced, so every clone that
/// has it refuses the old one, and `git session push`/`sync` replace the
/// remote's copy (the only push that overwrites). A fork of the session
/// must be purged on its own.
///
/// Purge cannot reach everything: rotate the credential, remove it from
/// the agent's own files, expire this repository's reflogs and prune
/// (printed after a purge), and ask the host of any remote to drop cached
/// objects; clones and forks made before keep their copy.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("what").required(true))]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// Remove the content of the event with this seq.
    #[arg(long, value_name = "N", group = "what")]
    seq: Option<u64>,
    /// Replace every match of this regex (Rust syntax) with [PURGED].
    #[arg(long = "match", value_name = "REGEX", group = "what")]
    pattern: Option<String>,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let what = match (args.seq, &args.pattern) {
        (Some(n), _) => What::Seq(n),
        (None, Some(p)) => What::pattern(p).map_err(CommandError::usage)?,
        (None, None) => return Err(CommandError::usage("give --seq N or --match REGEX")),
    };
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    let info = ops::canonical::commit_info(&store, &env.clock);
    let done = ops::purge::purge(&store, &id, &what, &env.clock.now_rfc3339(), &info)?;
    let mut places = Vec::new();
    if !done.seqs.is_empty() {
        places.push(format!("seq {}", ops::purge::seq_list(&done.seqs)));
    }
    if done.header {
        places.push("the header".to_owned());
    }
    if !super::ui::is_quiet() {
        writeln!(
            out,
            "purged {id}: {} replaced in {} (was {}, now {})",
            done.replaced,
            places.join(" and "),
            short(&done.old_tip),
            short(&done.new_tip)
        )?;
    }
    for fork in &done.forks {
        writeln!(
            out,
            "fork {fork} holds copies of this session's events: purge it too"
        )?;
    }
    status("Purge rewrote this repository's history only. Still to do:");
    status("  1. Rotate the credential: treat it as compromised.");
    status("  2. Remove it from the agent's own files (its transcript still holds it).");
    status(
        "  3. Drop the old objects here: git reflog expire --expire=now --all && git gc --prune=now",
    );
    status(
        "  4. git session sync replaces the remote's copy; ask the host to drop cached objects, and owners of other clones to sync",
    );
    Ok(())
}
