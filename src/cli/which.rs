//! `git session which`: the sessions that led to a commit.

use std::io::Write;

use serde_json::json;

use super::{CommandError, Env, escape_line, short};
use crate::ops;

/// Show which sessions (and seq ranges) led to a commit.
///
/// Lists the capture batches taken with that commit as HEAD, which the
/// post-commit hook records right after each commit: what the agents did up
/// to it.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A commit (anything git rev-parse takes).
    commit: String,
    /// Print a JSON array.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let commit = store.resolve_commit(&args.commit)?;
    let batches = ops::which::which(&store, commit)?;
    if args.json {
        let rows: Vec<_> = batches
            .iter()
            .map(|b| json!({"session": b.session, "agent": b.agent, "seq": b.seq.map(|(a, z)| json!([a, z])), "batch": b.batch.to_string()}))
            .collect();
        serde_json::to_writer_pretty(&mut *out, &rows).map_err(std::io::Error::from)?;
        writeln!(out)?;
        return Ok(());
    }
    if batches.is_empty() {
        super::status(format!(
            "No session batch was captured at {}",
            short(&commit)
        ));
    }
    for b in &batches {
        let range = b
            .seq
            .map_or("no events".to_owned(), |(a, z)| format!("seq {a}..{z}"));
        writeln!(
            out,
            "{}  {:<7} {range}",
            escape_line(&b.session.to_string()),
            escape_line(&b.agent.to_string())
        )?;
    }
    Ok(())
}
