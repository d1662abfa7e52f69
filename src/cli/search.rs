//! `git session search`: find text in every session of this repository.

use std::io::Write;

use git_session_schema::Agent;

use super::{CommandError, Env, escape_line};
use crate::ops;

/// Search the events of every session for a regex (or, with -F, a literal).
///
/// The pattern is matched against each event's text: every string of its
/// payload (prompts, replies, tool inputs and outputs), line breaks read as
/// spaces; keys and ids are not text, nor is the agent's own record kept
/// beside an event's fields (but in meta events, which are only that). Prints one line per matching event:
/// session, seq, type and a snippet (agent-authored text, control
/// characters escaped). Meta events (agent bookkeeping records) are left
/// out, as `show` leaves them out, unless --all. Searches through a local index under
/// .git/session/search/ (never pushed, rebuildable: delete it at no loss),
/// brought up to date first and by every capture. Exits 1 when nothing
/// matched (as `git grep` does), 0 when something did.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The regex (Rust regex syntax), or the text with -F.
    pattern: String,
    /// Take the pattern as literal text.
    #[arg(short = 'F', long)]
    fixed_strings: bool,
    /// Ignore case.
    #[arg(short = 'i', long)]
    ignore_case: bool,
    /// Only sessions of this agent (repeatable).
    #[arg(long = "agent", value_name = "AGENT", value_parser = super::agent_parser())]
    agents: Vec<Agent>,
    /// Only events of this type (repeatable); `tool.*` takes a namespace.
    #[arg(long = "type", value_name = "TYPE")]
    types: Vec<String>,
    /// Only events since this time: RFC 3339, a date (UTC), or an age such as 2h, 3d, 1w.
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// Only this session (repeatable; unique prefixes work).
    #[arg(long = "session", value_name = "ID")]
    sessions: Vec<String>,
    /// Also search sessions fetched from other clones and not (yet) taken
    /// in: every remote's remote-tracking session refs.
    #[arg(long)]
    all_clones: bool,
    /// Stop after this many hits.
    #[arg(long, value_name = "N")]
    max: Option<usize>,
    /// Also match meta events (agent bookkeeping records, hidden by
    /// default as in `show`; `--type meta` searches only those).
    #[arg(long)]
    all: bool,
    /// Print a JSON array of hits (docs/json.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let since = match &args.since {
        Some(text) => Some(parse_since(text, env.clock.now()).ok_or_else(|| {
            CommandError::usage(format!(
                "--since {text:?} is not a time (RFC 3339), a date (2026-01-31) or an age (2h, 3d, 1w)"
            ))
        })?),
        None => None,
    };
    let sessions = args
        .sessions
        .iter()
        .map(|s| store.resolve(s))
        .collect::<Result<Vec<_>, _>>()?;
    let request = ops::search::SearchRequest {
        pattern: args.pattern,
        literal: args.fixed_strings,
        ignore_case: args.ignore_case,
        agents: args.agents,
        types: args.types,
        since,
        sessions,
        all_clones: args.all_clones,
        max: args.max,
        meta: args.all,
    };
    let report = ops::search::search(&store, &request)?;
    if args.json {
        // Times as everywhere in --json: RFC 3339 (null for an event without one).
        let hits: Vec<serde_json::Value> = report
            .hits
            .iter()
            .map(|h| {
                let mut row = serde_json::to_value(h).unwrap_or_default();
                row["ts"] = (h.ts != 0)
                    .then(|| super::format_time(h.ts))
                    .map_or(serde_json::Value::Null, serde_json::Value::from);
                row
            })
            .collect();
        super::print_json(out, &serde_json::Value::Array(hits))?;
    } else {
        let name = |h: &ops::search::Hit| {
            format!(
                "{}{}",
                h.remote
                    .as_deref()
                    .map(|r| format!("{}:", escape_line(r)))
                    .unwrap_or_default(),
                escape_line(&h.session)
            )
        };
        // One column for the session whatever the length of its id.
        let width = report
            .hits
            .iter()
            .map(|h| name(h).chars().count())
            .max()
            .unwrap_or(0);
        for h in &report.hits {
            writeln!(
                out,
                "{:<width$}  {:>6}  {:<18} {}",
                name(h),
                h.seq,
                escape_line(&h.kind),
                escape_line(&h.snippet)
            )?;
        }
    }
    super::status(format!(
        "{} in {} of {}{}",
        super::count(report.hits.len() as u64, "hit"),
        super::count(report.events as u64, "event"),
        super::count(report.sessions as u64, "session"),
        if report.truncated {
            " (stopped at --max)"
        } else {
            ""
        }
    ));
    if report.hits.is_empty() {
        return Err(CommandError::quiet(1));
    }
    Ok(())
}

/// Parses `--since`: a timestamp, a date at UTC midnight, or an age before `now`.
fn parse_since(text: &str, now: jiff::Timestamp) -> Option<i64> {
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return Some(t.as_second());
    }
    if let Ok(d) = text.parse::<jiff::civil::Date>() {
        return d
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp().as_second());
    }
    let span = text.parse::<jiff::Span>().ok()?;
    now.to_zoned(jiff::tz::TimeZone::UTC)
        .checked_sub(span)
        .ok()
        .map(|z| z.timestamp().as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_times_dates_and_ages() {
        let now: jiff::Timestamp = "2026-01-10T00:00:00Z".parse().unwrap();
        let day = 86_400;
        assert_eq!(
            parse_since("2026-01-09T00:00:00Z", now),
            Some(now.as_second() - day)
        );
        assert_eq!(parse_since("2026-01-09", now), Some(now.as_second() - day));
        assert_eq!(parse_since("1d", now), Some(now.as_second() - day));
        assert_eq!(parse_since("2h", now), Some(now.as_second() - 7200));
        assert_eq!(parse_since("1w", now), Some(now.as_second() - 7 * day));
        assert_eq!(parse_since("yesterday-ish", now), None);
    }
}
