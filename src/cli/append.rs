//! `git session append`: plumbing to add events to a session.

use std::io::Write;
use std::path::PathBuf;

use super::{CommandError, Env, short, status};
use crate::ops;

/// Append the events of a JSONL file to a session as one batch.
///
/// Events are numbered after the session's current end (their own seq and
/// checksum are ignored), so concurrent appenders all land, in some order.
/// Lines may also be artifact lines as `export --canonical` writes them.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// JSONL file of events.
    file: PathBuf,
    /// Print a JSON object instead of text (docs/json.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    let s = ops::canonical::append(&store, &env.clock, &id, &args.file)?;
    match (s.commit, s.appended) {
        (Some(c), n) => status(format!(
            "Appended {} to {} (commit {}); {} in all",
            super::count(n, "event"),
            s.id,
            short(&c),
            s.events
        )),
        (None, _) => status(format!("Nothing to append to {}", s.id)),
    }
    if args.json {
        return super::print_json(
            out,
            &serde_json::json!({
                "id": s.id,
                "appended": s.appended,
                "skipped": s.skipped,
                "events": s.events,
                "commit": s.commit.map(|c| c.to_string()),
            }),
        );
    }
    writeln!(out, "{}", s.events)?;
    Ok(())
}
