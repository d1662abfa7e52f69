//! `git session checkpoint`: snapshot the working state into a session, or
//! put a snapshot back.

use std::io::Write;

use super::{CommandError, Env, count, escape_line, short, status};
use crate::ops;

/// Record the working state (staged, unstaged and untracked files that are
/// not ignored) as a `checkpoint` event of a session, or restore one.
///
/// The snapshot is a git tree made the way `git stash create` makes one:
/// the index, the work tree, HEAD and every branch stay as they are. It
/// travels with the session on push. `--restore ID SEQ` writes the
/// checkpoint's files back into a clean work tree (it refuses over local
/// changes) and removes tracked files the checkpoint did not have; the
/// index is left alone, so `git status` shows the restored state as local
/// changes.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// With --restore: the seq of the checkpoint event.
    #[arg(requires = "restore")]
    seq: Option<u64>,
    /// A message recorded with the checkpoint.
    #[arg(short, long, value_name = "MSG", conflicts_with = "restore")]
    message: Option<String>,
    /// Put the checkpoint at SEQ back into the work tree.
    #[arg(long)]
    restore: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    if args.restore {
        let Some(seq) = args.seq else {
            return Err(CommandError::usage("--restore needs the checkpoint's seq")
                .hint(format!("git session checkpoint --restore {id} SEQ")));
        };
        let changes = ops::checkpoint::restore(&store, &id, seq)?;
        for (s, path) in &changes {
            writeln!(out, "{s}  {}", escape_line(path))?;
        }
        status(format!(
            "Restored checkpoint {seq} of {id}: {} {} from HEAD (the index is unchanged)",
            count(changes.len() as u64, "file"),
            if changes.len() == 1 {
                "differs"
            } else {
                "differ"
            }
        ));
        return Ok(());
    }
    let cp = ops::checkpoint::create(&store, &env.clock, &id, args.message.as_deref())?;
    writeln!(out, "{}", cp.seq)?;
    status(format!(
        "Checkpoint {} of {id}: tree {}, {} changed from HEAD; restore with git session checkpoint --restore {id} {}",
        cp.seq,
        short(&cp.tree),
        count(cp.changed.len() as u64, "file"),
        cp.seq
    ));
    Ok(())
}
