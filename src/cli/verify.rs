//! `git session verify`: check hash chains, seqs and history.

use std::io::Write;

use serde_json::json;

use super::{CommandError, Env};

/// Check that sessions read back exactly as written.
///
/// Verifies each event's seq and hash-chain link against the stored bytes,
/// that batch commits only ever added events, the tip's trailers, and the
/// artifacts. Names the seq of the first bad event. Exits 1 if anything is wrong.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix (default: every session).
    session: Option<String>,
    /// Print a JSON array of reports.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let ids = match &args.session {
        Some(q) => vec![store.resolve(q)?],
        None => store.session_ids()?,
    };
    let mut reports = Vec::with_capacity(ids.len());
    for id in &ids {
        reports.push(store.verify(id)?);
    }
    let bad = reports.iter().filter(|r| !r.is_ok()).count();
    if args.json {
        let rows: Vec<_> = reports
            .iter()
            .map(|r| {
                json!({
                    "id": r.id,
                    "ok": r.is_ok(),
                    "events": r.events,
                    "batches": r.batches,
                    "problems": r.problems.iter().map(|p| json!({"seq": p.seq, "message": p.message})).collect::<Vec<_>>(),
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut *out, &rows).map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else {
        for r in &reports {
            if r.is_ok() {
                writeln!(
                    out,
                    "ok      {} ({} events, {} batches)",
                    r.id, r.events, r.batches
                )?;
            } else {
                writeln!(out, "FAILED  {}", r.id)?;
                for p in &r.problems {
                    writeln!(out, "  {}", p.message)?;
                }
            }
        }
    }
    if bad > 0 {
        let first = reports
            .iter()
            .find(|r| !r.is_ok())
            .and_then(|r| r.problems.first().map(|p| (r, p)));
        let detail = match first {
            Some((r, p)) => match p.seq {
                Some(seq) => format!("; first bad event: {} seq {seq}", r.id),
                None => format!("; first problem in {}", r.id),
            },
            None => String::new(),
        };
        return Err(CommandError::failure(format!(
            "{bad} of {} sessions failed verification{detail}",
            reports.len()
        )));
    }
    Ok(())
}
