//! `git session list`: every session of this repository, newest first.

use std::io::Write;

use git_session_schema::Agent;
use serde_json::json;

use super::{CommandError, Env, count, escape_line, format_time, status};
use crate::ops::list::{SessionSummary, summaries, unique_prefix_lengths};

/// List the sessions stored in this repository, most recent activity first.
///
/// Each line: the session id (its shortest unique prefix, which any
/// command accepts, is highlighted on a terminal), agent, event count,
/// the time of the last event, and a title (the agent's own title, else
/// the first user prompt). Reads each session's header, tip commit and
/// last event, and for a session without a title its first events, never
/// the whole log. A header naming another id is flagged, and a session
/// that cannot be read is listed last as BROKEN with the reason.
/// Agent-authored text (titles) is printed with control characters escaped.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only sessions of these agents (repeatable).
    #[arg(long = "agent", value_name = "AGENT", value_parser = super::agent_parser())]
    agents: Vec<Agent>,
    /// Only sessions active since then: RFC 3339, a date (2026-01-31), or
    /// a span back from now (2d, 12h, "3 weeks", 2.days.ago).
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// Show at most N sessions (the most recent).
    #[arg(long, short = 'n', value_name = "N")]
    limit: Option<usize>,
    /// Print a JSON array instead of a table (docs/json.md).
    #[arg(long)]
    json: bool,
    /// Also list sessions hidden with `git session hide`.
    #[arg(long)]
    all: bool,
    /// Only sessions of this task (`git session task`).
    #[arg(long, value_name = "NAME")]
    task: Option<String>,
}

/// Titles longer than this are cut (with `…`) in the table.
const TITLE_WIDTH: usize = 72;

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let since = match &args.since {
        Some(text) => Some(parse_since(text, env.clock.now()).ok_or_else(|| {
            CommandError::usage(format!(
                "--since {:?} is not a time: give RFC 3339, a date like 2026-01-31, or a span like 2d or 12h",
                text
            ))
        })?),
        None => None,
    };
    let all = summaries(&store)?;
    let ids: Vec<_> = all.iter().map(|(id, _)| id.clone()).collect();
    let prefixes = unique_prefix_lengths(&ids, 4);
    let total = all.len();
    let mut rows: Vec<(
        usize,
        &git_session_schema::SessionId,
        &Result<SessionSummary, _>,
    )> = all
        .iter()
        .zip(prefixes)
        .map(|((id, s), p)| (p, id, s))
        .filter(|(_, _, s)| match s {
            Ok(s) => {
                (args.agents.is_empty() || args.agents.contains(&s.stat.header.agent))
                    && since.is_none_or(|t| s.last_activity >= t)
                    && (args.all || !s.meta.hidden)
                    && args
                        .task
                        .as_ref()
                        .is_none_or(|t| s.meta.task.as_ref() == Some(t))
            }
            // A broken session is listed unless a filter asks for something
            // it cannot be shown to match.
            Err(_) => args.agents.is_empty() && since.is_none() && args.task.is_none(),
        })
        .collect();
    if let Some(n) = args.limit {
        rows.truncate(n);
    }
    if args.json {
        let rows: Vec<_> = rows
            .iter()
            .map(|(p, id, s)| match s {
                Ok(s) => {
                    let h = &s.stat.header;
                    let mut row = json!({
                        "id": id,
                        "prefix": id.as_str().chars().take(*p).collect::<String>(),
                        "agent": h.agent,
                        "native_id": h.native_id,
                        "title": s.title,
                        "created": h.created,
                        "updated": s.last_event.clone().unwrap_or_else(|| format_time(s.last_activity)),
                        "captured": format_time(s.stat.updated),
                        "events": s.stat.events,
                        "tip": s.stat.tip.to_string(),
                        "parent": h.lineage.as_ref().map(|l| &l.parent_session),
                        "tags": s.meta.tags,
                        "pinned": s.meta.pinned,
                        "hidden": s.meta.hidden,
                        "owner": s.meta.lead(h.agent.as_str()),
                        "task": s.meta.task,
                    });
                    if h.id != **id {
                        row["header_id"] = json!(h.id);
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
    if total == 0 {
        // Sessions a plain `git fetch` brought wait, unverified, under the
        // remote-tracking namespace until `git session fetch` takes them.
        let remote = crate::config::sessions_remote(&store);
        let waiting = store.tracking_sessions(&remote).map_or(0, |t| t.len());
        if waiting > 0 {
            status(format!(
                "No sessions here yet; {} fetched from {remote} wait to be verified: run `git session fetch`.",
                count(waiting as u64, "session")
            ));
            return Ok(());
        }
        status("No sessions in this repository yet.");
        status("Capture your coding agents' sessions here with `git session import`,");
        status(
            "or bring a clone's with `git session fetch` (`git session sync` once a remote is set).",
        );
        return Ok(());
    }
    if rows.is_empty() {
        status(format!(
            "No session matches (of {} in this repository).",
            count(total as u64, "session")
        ));
        return Ok(());
    }
    let paint = env.ui.paint(Some(&store));
    // Column widths come from the rows shown, so long (fork) ids never
    // push later columns out of line.
    let id_width = rows
        .iter()
        .map(|(_, id, _)| id.as_str().chars().count())
        .max()
        .unwrap_or(0);
    let agent_width = rows
        .iter()
        .filter_map(|(_, _, s)| s.as_ref().ok())
        .map(|s| escape_line(s.stat.header.agent.as_str()).chars().count())
        .max()
        .unwrap_or(0);
    let events: Vec<String> = rows
        .iter()
        .map(|(_, _, s)| {
            s.as_ref()
                .map(|s| count(s.stat.events, "event"))
                .unwrap_or_default()
        })
        .collect();
    let events_width = events.iter().map(|e| e.chars().count()).max().unwrap_or(0);
    for ((p, id, s), events) in rows.iter().zip(&events) {
        let (head, tail) = id.as_str().split_at(
            id.as_str()
                .char_indices()
                .nth(*p)
                .map_or(id.as_str().len(), |(i, _)| i),
        );
        let pad = " ".repeat(id_width - id.as_str().chars().count());
        let shown_id = format!("{}{}{pad}", paint.bold(head), paint.dim(tail));
        let line = match s {
            Ok(s) => {
                let h = &s.stat.header;
                // An encrypted session this clone holds no key for: its
                // header keeps the sealed members sealed.
                let sealed = h.extra.contains_key(crate::store::crypt::SEALED_MEMBER);
                let title = match (&s.title, sealed) {
                    (Some(t), _) => escape_line(t).into_owned(),
                    (None, true) => "(encrypted; no key for it here)".to_owned(),
                    (None, false) => String::new(),
                };
                let title = cut(&title, TITLE_WIDTH);
                let flag = if h.id == **id {
                    String::new()
                } else {
                    format!(
                        "  [header names {}: not this session]",
                        escape_line(h.id.as_str())
                    )
                };
                let mut marks = String::new();
                if let Some(o) = s
                    .meta
                    .owner
                    .as_ref()
                    .filter(|o| o.agent != h.agent.as_str())
                {
                    marks += &format!("  [led by {}]", escape_line(&o.agent));
                }
                if s.meta.pinned {
                    marks += "  [pinned]";
                }
                if s.meta.hidden {
                    marks += "  [hidden]";
                }
                for t in &s.meta.tags {
                    marks += &format!(" #{}", escape_line(t));
                }
                format!(
                    "{shown_id}  {:<agent_width$}  {events:>events_width$}  {}  {title}{marks}{flag}",
                    escape_line(h.agent.as_str()),
                    short_time(s.last_activity),
                )
            }
            Err(e) => format!(
                "{shown_id}  {}: {} (git session verify {id} for details)",
                paint.red("BROKEN"),
                escape_line(&e.to_string())
            ),
        };
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// Returns a time as `2026-01-31 14:05` (UTC), the table's width.
fn short_time(seconds: i64) -> String {
    jiff::Timestamp::from_second(seconds)
        .map(|t| t.strftime("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|_| seconds.to_string())
}

/// Returns `text` cut to `width` characters, ending in `…` when cut.
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(width - 1).collect();
    s.push('…');
    s
}

/// Parses `--since`: RFC 3339, a date (midnight UTC), or a span back from
/// `now` ("2d", "12h", "3 weeks", "2.days.ago", "2 days ago").
fn parse_since(text: &str, now: jiff::Timestamp) -> Option<i64> {
    let text = text.trim();
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return Some(t.as_second());
    }
    if let Ok(d) = text.parse::<jiff::civil::Date>() {
        return d
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp().as_second());
    }
    let span_text = text.replace('.', " ");
    let span_text = span_text.trim();
    let span_text = span_text.strip_suffix("ago").unwrap_or(span_text).trim();
    let span: jiff::Span = span_text.parse().ok()?;
    now.to_zoned(jiff::tz::TimeZone::UTC)
        .checked_sub(span.abs())
        .ok()
        .map(|z| z.timestamp().as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_times_dates_and_spans() {
        let now: jiff::Timestamp = "2026-01-10T00:00:00Z".parse().unwrap();
        let day = 86_400;
        let at = |t: &str| t.parse::<jiff::Timestamp>().unwrap().as_second();
        assert_eq!(
            parse_since("2026-01-09T12:00:00Z", now),
            Some(at("2026-01-09T12:00:00Z"))
        );
        assert_eq!(
            parse_since("2026-01-08", now),
            Some(at("2026-01-08T00:00:00Z"))
        );
        assert_eq!(parse_since("2d", now), Some(now.as_second() - 2 * day));
        assert_eq!(
            parse_since("2.days.ago", now),
            Some(now.as_second() - 2 * day)
        );
        assert_eq!(
            parse_since("3 weeks", now),
            Some(now.as_second() - 21 * day)
        );
        assert_eq!(parse_since("12h", now), Some(now.as_second() - 12 * 3600));
        assert_eq!(parse_since("yesterday-ish", now), None);
    }
}
