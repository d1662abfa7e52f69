//! `git session verify`: check hash chains, seqs, history and receipts.

use std::io::Write;

use serde_json::json;

use super::{CommandError, Env, escape_line, short};
use crate::ops;

/// Check that sessions read back exactly as written, and their receipts.
///
/// Verifies each event's seq and hash-chain link against the stored bytes,
/// that batch commits only ever added events, the tip's trailers, the
/// artifacts, and every handoff receipt: that it matches the handoff event
/// in the log and, when signed, that the SSH signature is valid and (with
/// gpg.ssh.allowedSignersFile) made by a key allowed for its signer. With
/// an allowed-signers file, a handoff whose receipt is missing, stripped or
/// unsigned is a failure. Also checks that the header never changed, that
/// the tree holds only the layout's paths, and each batch commit's SSH
/// signature (git's own, as `git verify-commit` checks it): a bad or
/// not-allowed one fails, a missing one fails with session.requireSigned.
/// The tip of each good session is remembered in .git/session/verified/;
/// a later tip that no longer contains it (or the --since commit) is
/// reported as a rollback. Names the seq of the first bad event. Exits 1
/// if anything is wrong.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix (default: every session).
    session: Option<String>,
    /// A session commit the tip must still contain (rollback check).
    #[arg(long, value_name = "COMMIT")]
    since: Option<String>,
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
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let allowed = crate::config::allowed_signers(&store, home.as_deref());
    let since = args
        .since
        .as_deref()
        .map(|rev| store.resolve_commit(rev))
        .transpose()?;
    let policy = ops::verify::Policy {
        allowed_signers: allowed.as_deref(),
        require_signed: crate::config::require_signed(&store, None),
        since,
    };
    let verdicts = ops::verify::verify(&store, &ids, policy)?;
    let bad = verdicts.iter().filter(|v| !v.is_ok()).count();
    if args.json {
        let rows: Vec<_> = verdicts
            .iter()
            .map(|v| {
                let r = &v.store;
                json!({
                    "id": r.id,
                    "ok": v.is_ok(),
                    "events": r.events,
                    "batches": r.batches,
                    "signed_batches": v.signed,
                    "sealed_unread": r.sealed_unread,
                    "problems": r.problems.iter().map(|p| json!({"seq": p.seq, "message": p.message}))
                        .chain(v.problems.iter().map(|p| json!({"seq": null, "message": p})))
                        .collect::<Vec<_>>(),
                    "receipts": v.receipts.iter().map(|c| json!({
                        "commit": c.commit.to_string(), "seq": c.seq, "ok": c.problem.is_none(),
                        "problem": c.problem, "signature": c.signature,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut *out, &rows).map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else {
        for v in &verdicts {
            let r = &v.store;
            let signed = match v.signed {
                0 => String::new(),
                n if n == r.batches => ", all signed".to_owned(),
                n => format!(", {n} signed"),
            };
            let sealed = match r.sealed_unread {
                0 => String::new(),
                n => format!(
                    ", {} encrypted to others: structure only",
                    super::count(n, "chunk")
                ),
            };
            if v.is_ok() {
                writeln!(
                    out,
                    "ok      {} ({}, {}{signed}{sealed})",
                    r.id,
                    super::count(r.events, "event"),
                    super::count(r.batches, "batch")
                )?;
            } else {
                writeln!(out, "FAILED  {}", r.id)?;
                for p in &r.problems {
                    writeln!(out, "  {}", escape_line(&p.message))?;
                }
                for p in &v.problems {
                    writeln!(out, "  {}", escape_line(p))?;
                }
            }
            for c in &v.receipts {
                let seq = c.seq.map(|s| format!("seq {s}")).unwrap_or_default();
                match &c.problem {
                    None => writeln!(out, "  receipt {} {seq}: {}", short(&c.commit), c.signature)?,
                    Some(p) => writeln!(
                        out,
                        "  receipt {} {seq}: BAD: {}",
                        short(&c.commit),
                        escape_line(p)
                    )?,
                }
            }
        }
    }
    if bad > 0 {
        let first = verdicts.iter().find(|v| !v.is_ok()).map(|v| {
            match v.store.problems.first().and_then(|p| p.seq) {
                Some(seq) => format!("; first bad event: {} seq {seq}", v.store.id),
                None => format!("; first problem in {}", v.store.id),
            }
        });
        return Err(CommandError::failure(format!(
            "{bad} of {} sessions failed verification{}",
            verdicts.len(),
            first.unwrap_or_default()
        )));
    }
    Ok(())
}
