//! `git session import`: bring sessions into the store.

use std::io::Write;
use std::path::PathBuf;

use super::{CommandError, Env, short, status};
use crate::ops;

/// Import a session from a canonical JSONL file.
///
/// The file is what `git session export --canonical` writes: a header line,
/// then artifact and event lines. The whole file is one batch: a bad line
/// aborts the import naming file:line, and nothing is written. Importing a
/// file again is a no-op; a file that continues a stored session appends
/// only the new events.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The canonical interchange file to import.
    #[arg(long, value_name = "FILE", required = true)]
    canonical: PathBuf,
    /// Recompute checksums instead of requiring the file's to match.
    #[arg(long)]
    reseal: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let s = ops::canonical::import(&store, &env.clock, &args.canonical, args.reseal)?;
    match s.commit {
        Some(c) => status(format!(
            "{} session {}: {} new events, {} already stored (commit {})",
            if s.created { "Created" } else { "Updated" },
            s.id,
            s.appended,
            s.skipped,
            short(&c)
        )),
        None => status(format!(
            "Session {} is up to date ({} events)",
            s.id, s.events
        )),
    }
    writeln!(out, "{}", s.id)?;
    Ok(())
}
