//! `git session which`: the sessions that led to a commit.

use std::io::Write;

use serde_json::json;

use super::{CommandError, Env, escape_line, short};
use crate::ops;
use crate::ops::which::{Attribution, CommitBatch};

/// Show which sessions (and seq ranges) led to a commit.
///
/// A capture batch belongs to the first commit made after the records it
/// holds. The post-commit hook captures right after each commit, so its
/// batch belongs to that commit. A batch captured between commits (by
/// `git session import`, `watch`, an agent's hook, resume or handoff) holds
/// records made while the commit before was HEAD, so it belongs to the next
/// commit made on top of that one; until it is made, `which HEAD` lists it
/// as pending. Batches written before git-session recorded which kind they
/// are are listed under the HEAD they were captured at ("captured at
/// HEAD").
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A commit (anything git rev-parse takes).
    commit: String,
    /// Print a JSON array (docs/json.md).
    #[arg(long)]
    json: bool,
}

/// Returns one batch as a `which --json` row (docs/json.md), shared with
/// the MCP tool.
pub(crate) fn row(b: &CommitBatch) -> serde_json::Value {
    json!({"session": b.session, "agent": b.agent, "seq": b.seq.map(|(a, z)| json!([a, z])),
           "batch": b.batch.to_string(), "captured": b.attribution.as_str(),
           "head": b.head.to_string()})
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let commit = store.resolve_commit(&args.commit)?;
    let found = ops::which::which(&store, commit)?;
    if args.json {
        let mut rows: Vec<_> = found.batches.iter().map(row).collect();
        rows.extend(found.pending.iter().map(|b| {
            let mut r = row(b);
            r["pending"] = true.into();
            r
        }));
        return super::print_json(out, &serde_json::Value::Array(rows));
    }
    if found.batches.is_empty() {
        super::status(format!("No session batch led to commit {}", short(&commit)));
    } else {
        super::status(format!(
            "Session batches that led to commit {}:",
            short(&commit)
        ));
    }
    // Each row says how it relates to the commit, so stdout alone (the
    // headings are status lines) never lists a pending batch as one that
    // led to it.
    // Columns as wide as their widest cell (ids differ in length by agent).
    let all = || found.batches.iter().chain(&found.pending);
    let id_w = all()
        .map(|b| escape_line(b.session.as_str()).chars().count())
        .max()
        .unwrap_or(0);
    let agent_w = all()
        .map(|b| escape_line(&b.agent).chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let line = |out: &mut dyn Write, b: &CommitBatch, pending: bool| -> std::io::Result<()> {
        let range = b
            .seq
            .map_or("no events".to_owned(), |(a, z)| format!("seq {a}..{z}"));
        let how = match b.attribution {
            Attribution::PostCommit => "captured by its post-commit hook".to_owned(),
            Attribution::BeforeCommit if pending => {
                "captured since it was made: pending, belongs to the next commit".to_owned()
            }
            Attribution::BeforeCommit => {
                format!("captured before it, at HEAD {}", short(&b.head))
            }
            Attribution::AtHead => "captured at HEAD".to_owned(),
        };
        writeln!(
            out,
            "{:<id_w$}  {:<agent_w$}  {range}  ({how})",
            escape_line(b.session.as_str()),
            escape_line(&b.agent)
        )
    };
    for b in &found.batches {
        line(out, b, false)?;
    }
    if !found.pending.is_empty() {
        super::status(format!(
            "Captured since {} while it was HEAD, so they belong to the next commit:",
            short(&commit)
        ));
        for b in &found.pending {
            line(out, b, true)?;
        }
    }
    Ok(())
}
