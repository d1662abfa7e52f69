//! What `list` (and any other listing, such as an MCP tool) shows of each
//! session: the cheap stat, a derived title and the time of the last event.
//!
//! For a session whose tip moved since the last listing, reads the header
//! and tip commit, the chunk holding the last event and, only for a
//! session without a native title, the first events up to the first user
//! prompt (at most [`TITLE_SCAN`] events); never the whole log. What that
//! finds, and the session's metadata, is kept in the store's local summary
//! index (`Store::list_with`), so a session whose refs did not move opens
//! no object.

use git_session_schema::{SessionId, kinds};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::{SessionStat, Store, StoreError, StoreResult};

/// How many leading events are searched for a first user prompt.
pub const TITLE_SCAN: u64 = 64;

/// What a listing derives from a session's events at its tip (kept in the
/// summary index).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct FromEvents {
    /// The `ts` of the last event, as stored.
    last_event: Option<String>,
    /// The first user prompt, one line; only looked for without a native
    /// title.
    first_prompt: Option<String>,
}

/// Holds what a listing shows of one session.
#[derive(Clone, Debug)]
pub struct SessionSummary {
    /// Header, tip and counts.
    pub stat: SessionStat,
    /// The native title, else the first user prompt: one line, trimmed.
    pub title: Option<String>,
    /// The `ts` of the last event, as stored.
    pub last_event: Option<String>,
    /// Seconds since the epoch of the last activity: the last event's
    /// time, else (no events, or a time that does not parse) the tip
    /// commit's.
    pub last_activity: i64,
    /// What the user set (`tag`, `note`, `pin`, `hide`, `title`, `task`);
    /// a title set there is [`SessionSummary::title`].
    pub meta: git_session_schema::Meta,
}

/// Returns the summary of every session, pinned ones first, then newest
/// activity first; sessions that cannot be read come last, with their
/// error, in id order.
pub fn summaries(store: &Store) -> StoreResult<Vec<(SessionId, StoreResult<SessionSummary>)>> {
    let mut rows: Vec<(SessionId, StoreResult<SessionSummary>)> = store
        .list_with(&|id, stat| from_events(store, id, stat))?
        .into_iter()
        .map(|(id, listed)| {
            let summary = listed.map(|l| summarize(l.stat, l.meta, l.derived));
            (id, summary)
        })
        .collect();
    rows.sort_by(|(a_id, a), (b_id, b)| match (a, b) {
        (Ok(a), Ok(b)) => (b.meta.pinned, b.last_activity)
            .cmp(&(a.meta.pinned, a.last_activity))
            .then_with(|| a_id.cmp(b_id)),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a_id.cmp(b_id),
    });
    Ok(rows)
}

fn from_events(store: &Store, id: &SessionId, stat: &SessionStat) -> StoreResult<FromEvents> {
    match read_from_events(store, id, stat) {
        // Encrypted, and no key here to read it with: listed with what its
        // header says (a clone that only syncs it is not broken).
        Err(StoreError::Sealed { .. }) => Ok(FromEvents {
            last_event: None,
            first_prompt: None,
        }),
        other => other,
    }
}

fn read_from_events(store: &Store, id: &SessionId, stat: &SessionStat) -> StoreResult<FromEvents> {
    let last_event = match stat.events.checked_sub(1) {
        Some(last) => match store.lines(id, last, Some(last))?.next() {
            Some(line) => line?.decode().ok().map(|e| e.ts),
            None => None,
        },
        None => None,
    };
    let first_prompt = match stat.header.title.as_deref().and_then(one_line) {
        Some(_) => None,
        None => first_prompt(store, id, stat.events)?,
    };
    Ok(FromEvents {
        last_event,
        first_prompt,
    })
}

fn summarize(
    stat: SessionStat,
    meta: git_session_schema::Meta,
    from: FromEvents,
) -> SessionSummary {
    let last_activity = from
        .last_event
        .as_deref()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_second())
        .unwrap_or(stat.updated);
    let title = meta
        .title
        .clone()
        .or_else(|| stat.header.title.as_deref().and_then(one_line))
        .or(from.first_prompt);
    SessionSummary {
        stat,
        title,
        last_event: from.last_event,
        last_activity,
        meta,
    }
}

fn first_prompt(store: &Store, id: &SessionId, events: u64) -> StoreResult<Option<String>> {
    if events == 0 {
        return Ok(None);
    }
    for line in store.lines(id, 0, Some(TITLE_SCAN.min(events) - 1))? {
        let Ok(event) = line?.decode() else { continue };
        if event.kind != kinds::MESSAGE_USER {
            continue;
        }
        if let Some(t) = event
            .payload
            .get("text")
            .and_then(Value::as_str)
            .and_then(one_line)
        {
            return Ok(Some(t));
        }
    }
    Ok(None)
}

/// Returns the sessions of task `task` as a timeline: by creation time,
/// each session followed by the sessions forked from it (a handoff's
/// target after its source), whatever their clocks say.
pub fn task_timeline(store: &Store, task: &str) -> StoreResult<Vec<(SessionId, SessionSummary)>> {
    let mut rows: Vec<(SessionId, SessionSummary)> = summaries(store)?
        .into_iter()
        .filter_map(|(id, s)| s.ok().map(|s| (id, s)))
        .filter(|(_, s)| s.meta.task.as_deref() == Some(task))
        .collect();
    rows.sort_by(|(a_id, a), (b_id, b)| {
        (a.stat.header.created.as_str(), a_id).cmp(&(b.stat.header.created.as_str(), b_id))
    });
    let ids: std::collections::HashSet<SessionId> = rows.iter().map(|(id, _)| id.clone()).collect();
    let parent = |s: &SessionSummary| {
        s.stat
            .header
            .lineage
            .as_ref()
            .map(|l| l.parent_session.clone())
            .filter(|p| ids.contains(p))
    };
    let mut out = Vec::new();
    let mut stack: Vec<usize> = (0..rows.len())
        .filter(|&i| parent(&rows[i].1).is_none())
        .rev()
        .collect();
    let mut placed = vec![false; rows.len()];
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut placed[i], true) {
            continue;
        }
        out.push(i);
        let children: Vec<usize> = (0..rows.len())
            .filter(|&j| parent(&rows[j].1).as_ref() == Some(&rows[i].0))
            .collect();
        stack.extend(children.into_iter().rev());
    }
    // A lineage cycle (hand-made headers) leaves sessions unplaced: last.
    out.extend((0..rows.len()).filter(|&i| !placed[i]));
    let mut rows: Vec<Option<(SessionId, SessionSummary)>> = rows.into_iter().map(Some).collect();
    Ok(out.into_iter().filter_map(|i| rows[i].take()).collect())
}

/// Returns the URI of a session, `session://<org>/<project>/<task>/<id>`:
/// org and project from the sessions remote's URL (its last two path
/// components), else `local` and the work tree's name; `-` for no task.
pub fn session_uri(store: &Store, id: &SessionId, task: Option<&str>) -> String {
    let clean = |s: &str| -> String {
        let c: String = s
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        if c.is_empty() { "-".into() } else { c }
    };
    let remote = crate::config::sessions_remote(store);
    let (org, project) = match store.remote_push_url(&remote) {
        Some(url) => {
            let path = url.rsplit_once(':').map_or(url.as_str(), |(_, p)| p);
            let mut parts = path
                .trim_end_matches('/')
                .trim_end_matches(".git")
                .rsplit('/')
                .filter(|p| !p.is_empty());
            let project = parts.next().unwrap_or("-").to_owned();
            let org = parts.next().unwrap_or("local").to_owned();
            (org, project)
        }
        None => (
            "local".to_owned(),
            store
                .work_dir()
                .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "-".into()),
        ),
    };
    format!(
        "{}{}/{}/{}/{id}",
        crate::store::refs::URI_SCHEME,
        clean(&org),
        clean(&project),
        task.map_or("-".to_owned(), clean)
    )
}

/// Returns the first non-blank line of `text`, trimmed, with runs of
/// whitespace made single spaces; `None` if there is none.
pub fn one_line(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Returns, for each id, the length in characters of its shortest prefix
/// that no other id starts with (the whole id when it is a prefix of
/// another), but at least `min` (or the whole id, if shorter).
pub fn unique_prefix_lengths(ids: &[SessionId], min: usize) -> Vec<usize> {
    let mut sorted: Vec<&str> = ids.iter().map(SessionId::as_str).collect();
    sorted.sort_unstable();
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    ids.iter()
        .map(|id| {
            let id = id.as_str();
            let at = sorted.partition_point(|s| *s < id);
            let before = at.checked_sub(1).map_or(0, |i| common(sorted[i], id));
            let after = sorted.get(at + 1).map_or(0, |s| common(s, id));
            let len = id.chars().count();
            (before.max(after) + 1).max(min).min(len)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<SessionId> {
        names.iter().map(|n| SessionId::new(*n).unwrap()).collect()
    }

    #[test]
    fn prefixes_are_the_shortest_unique_ones() {
        let list = ids(&[
            "019ad5b2-aaaa",
            "019ad5b2-abcd",
            "3f1c",
            "019ad5b2-abcd-fork-0123",
            "x",
        ]);
        assert_eq!(unique_prefix_lengths(&list, 1), vec![11, 13, 1, 14, 1]);
        assert_eq!(unique_prefix_lengths(&list, 4), vec![11, 13, 4, 14, 1]);
    }

    #[test]
    fn one_line_takes_the_first_non_blank_line() {
        assert_eq!(
            one_line("\n  fix   the\tbug \nmore").as_deref(),
            Some("fix the bug")
        );
        assert_eq!(one_line(" \n\t"), None);
    }
}
