//! `git session list`: every session of this repository, cheaply.

use std::io::Write;

use serde_json::json;

use super::{CommandError, Env, format_time};

/// List the sessions stored in this repository.
///
/// Reads only each session's header and tip commit, never its events.
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
            .map(|s| {
                json!({
                    "id": s.header.id,
                    "agent": s.header.agent,
                    "native_id": s.header.native_id,
                    "title": s.header.title,
                    "created": s.header.created,
                    "updated": format_time(s.updated),
                    "events": s.events,
                    "tip": s.tip.to_string(),
                    "parent": s.header.lineage.as_ref().map(|l| &l.parent_session),
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut *out, &rows).map_err(std::io::Error::from)?;
        writeln!(out)?;
        return Ok(());
    }
    for s in &sessions {
        writeln!(
            out,
            "{}  {:<8} {:>7} events  {}  {}",
            s.header.id,
            s.header.agent.as_str(),
            s.events,
            format_time(s.updated),
            s.header.title.as_deref().unwrap_or("")
        )?;
    }
    Ok(())
}
