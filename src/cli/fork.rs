//! `git session fork`: branch a session at a seq.

use std::io::Write;

use git_session_schema::SessionId;

use super::{CommandError, Env, short, status};
use crate::ops;

/// Start a new session from a session's history up to a seq.
///
/// The fork's ref shares the parent's commits up to the fork point, like a
/// git branch; its header records the parent and the inherited event count.
/// Prints the new session id.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// Keep events up to and including this seq (default: all).
    #[arg(long, value_name = "SEQ")]
    at: Option<u64>,
    /// Id for the new session (default: a new time-ordered UUID).
    #[arg(long, value_name = "ID")]
    id: Option<SessionId>,
    /// Print a JSON object instead of text (docs/json.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    let summary = ops::fork::fork(&store, &env.clock, &id, args.at, args.id)?;
    status(format!(
        "Forked {id} at seq {} (commit {}) into {}",
        summary.at,
        short(&summary.parent_commit),
        summary.id
    ));
    if args.json {
        return super::print_json(
            out,
            &serde_json::json!({
                "id": summary.id,
                "parent": id,
                "at": summary.at,
                "parent_commit": summary.parent_commit.to_string(),
                "commit": summary.commit.to_string(),
            }),
        );
    }
    writeln!(out, "{}", summary.id)?;
    Ok(())
}
