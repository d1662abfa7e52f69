//! `git session list`: every session of this repository, cheaply.

use std::io::Write;

use serde_json::json;

use super::{CommandError, Env, escape_line, format_time};

/// List the sessions stored in this repository.
///
/// Reads only each session's header and tip commit, never its events. The
/// id shown is the ref's name; a header naming another id is flagged, and a
/// session that cannot be read is listed as BROKEN with the reason.
/// Agent-authored text (titles) is printed with control characters escaped.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let sessions = store.list()?;
    if args.json {
        let rows: Vec<_> = sessions
            .iter()
            .map(|(id, s)| match s {
                Ok(s) => {
                    let mut row = json!({
                        "id": id,
                        "agent": s.header.agent,
                        "native_id": s.header.native_id,
                        "title": s.header.title,
                        "created": s.header.created,
                        "updated": format_time(s.updated),
                        "events": s.events,
                        "tip": s.tip.to_string(),
                        "parent": s.header.lineage.as_ref().map(|l| &l.parent_session),
                    });
                    if s.header.id != *id {
                        row["header_id"] = json!(s.header.id);
                    }
                    row
                }
                Err(e) => json!({"id": id, "broken": e.to_string()}),
            })
            .collect();
        serde_json::to_writer_pretty(&mut *out, &rows).map_err(std::io::Error::from)?;
        writeln!(out)?;
        return Ok(());
    }
    for (id, s) in &sessions {
        match s {
            Ok(s) => {
                writeln!(
                    out,
                    "{id}  {:<8} {:>7} events  {}  {}{}",
                    escape_line(s.header.agent.as_str()),
                    s.events,
                    format_time(s.updated),
                    escape_line(s.header.title.as_deref().unwrap_or("")),
                    if s.header.id == *id {
                        String::new()
                    } else {
                        format!(
                            "  [header names {}: not this session]",
                            escape_line(s.header.id.as_str())
                        )
                    }
                )?;
            }
            Err(e) => writeln!(
                out,
                "{id}  BROKEN: {} (git session verify {id} for details)",
                escape_line(&e.to_string())
            )?,
        }
    }
    Ok(())
}
