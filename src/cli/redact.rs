//! `git session redact --check`: re-scan stored sessions with the current
//! rules.

use std::io::Write;

use super::{CommandError, Env};
use crate::ops;

/// Re-scan stored sessions for secrets with the current rules.
///
/// Everything git-session stores is redacted when it is written (unless
/// session.redact=false); the rules grow, so a session stored earlier may
/// hold a secret today's rules find. `--check` reads every event and the
/// header of each session (or of one) and prints one line per place with
/// hits: `<id> seq <n>` (or `header`) and the rules with their counts,
/// never the secret. Exits 1 when anything is found. Nothing is rewritten
/// here: `git session purge` rewrites a session when a secret must go.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scan and report; nothing is changed (the only mode).
    #[arg(long)]
    check: bool,
    /// Session id or unique prefix (default: every session).
    session: Option<String>,
    /// Print a JSON object instead of text (docs/json.md); hits still exit 1.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    if !args.check {
        return Err(CommandError::usage("redact only checks: pass --check")
            .hint("stored history is append-only and never rewritten in place"));
    }
    let store = env.store()?;
    let ids = match &args.session {
        Some(q) => vec![store.resolve(q)?],
        None => store.session_ids()?,
    };
    let hits = ops::redact::check(&store, &ids)?;
    if args.json {
        let rows: Vec<_> = hits
            .iter()
            .map(|h| {
                let rules: serde_json::Map<String, serde_json::Value> = h
                    .rules
                    .iter()
                    .map(|(r, n)| (r.clone(), (*n).into()))
                    .collect();
                serde_json::json!({"session": h.session, "seq": h.seq, "rules": rules})
            })
            .collect();
        super::print_json(
            out,
            &serde_json::json!({"checked": ids.len(), "hits": rows}),
        )?;
    }
    for h in hits.iter().filter(|_| !args.json) {
        let place = h
            .seq
            .map_or_else(|| "header".to_owned(), |s| format!("seq {s}"));
        let rules: Vec<String> = h.rules.iter().map(|(r, n)| format!("{r} ×{n}")).collect();
        writeln!(out, "{}  {place}  {}", h.session, rules.join(", "))?;
    }
    if hits.is_empty() {
        super::status(format!(
            "No secrets found in {} session{} with the current rules",
            ids.len(),
            if ids.len() == 1 { "" } else { "s" }
        ));
        return Ok(());
    }
    let sessions: std::collections::BTreeSet<_> = hits.iter().map(|h| &h.session).collect();
    Err(CommandError::failure(format!(
        "secrets found in {} place{} of {} session{}",
        hits.len(),
        if hits.len() == 1 { "" } else { "s" },
        sessions.len(),
        if sessions.len() == 1 { "" } else { "s" },
    ))
    .hint("rotate each credential now: it stays in the session's history here and on any remote it was pushed to; then remove it with `git session purge <id> --seq N` or `--match REGEX`"))
}
