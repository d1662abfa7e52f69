//! `git session log`: a session's capture batches.

use std::io::Write;

use serde_json::json;

use super::{CommandError, Env, escape_line, format_time, short};

/// Show a session's capture batches, newest first.
///
/// Each batch is one commit on refs/sessions/<id>; the list ends with the
/// session's first commit (for a fork, the commit that started it).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// Print a JSON array instead of text.
    #[arg(long)]
    json: bool,
    /// Show the history of the session's metadata (tag, note, pin, hide,
    /// title, task) instead: every change of every clone, newest first.
    #[arg(long)]
    meta: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    if args.meta {
        return meta_log(&store, &id, args.json, out);
    }
    let batches = store.batches(&id)?;
    if args.json {
        let rows: Vec<_> = batches
            .iter()
            .map(|b| {
                let t = &b.trailers;
                json!({
                    "commit": b.commit.to_string(),
                    "time": format_time(b.time),
                    "seq": t.seq.map(|(a, z)| json!([a, z])),
                    "events": t.events,
                    "code_commit": t.code_commit.map(|c| c.to_string()),
                    "fork_of": t.fork.as_ref().map(|(p, at)| json!({"session": p, "seq": at})),
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut *out, &rows).map_err(std::io::Error::from)?;
        writeln!(out)?;
        return Ok(());
    }
    for b in &batches {
        let t = &b.trailers;
        let what = match (t.seq, &t.fork) {
            (_, Some((parent, at))) => format!("fork of {} at seq {at}", escape_line(parent)),
            (Some((a, z)), _) => format!("seq {a}..{z} ({})", super::count(z - a + 1, "event")),
            (None, _) => "no events".to_owned(),
        };
        let code = t
            .code_commit
            .map(|c| format!("  code {}", short(&c)))
            .unwrap_or_default();
        writeln!(
            out,
            "{}  {}  {what}{code}",
            short(&b.commit),
            format_time(b.time)
        )?;
    }
    Ok(())
}

fn meta_log(
    store: &crate::store::Store,
    id: &git_session_schema::SessionId,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    let entries = crate::ops::meta::log(store, id)?;
    if json {
        let rows: Vec<_> = entries
            .iter()
            .map(|e| {
                let mut row = serde_json::to_value(&e.change).unwrap_or_default();
                row["commit"] = json!(e.commit.to_string());
                row["author"] = json!(e.author);
                row
            })
            .collect();
        return super::print_json(out, &json!(rows));
    }
    for e in &entries {
        writeln!(
            out,
            "{}  {}  {}  {}",
            short(&e.commit),
            escape_line(&e.change.time),
            escape_line(&e.author),
            escape_line(&e.change.describe())
        )?;
    }
    Ok(())
}
