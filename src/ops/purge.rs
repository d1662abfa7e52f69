//! `git session purge`: the escape hatch when a secret was stored anyway.
//!
//! The session is rewritten as a new history (one root commit, see
//! `Store::replace_history`) without the secret, ending with a
//! `session.purge` event that says what was removed (which seqs, how many
//! strings, the old tip), never the secret or the pattern that found it.
//! With `--seq N` event N keeps its envelope (seq, time, agent, origin, so
//! capture never imports it again) and loses its content: it becomes a
//! `meta` event `{"purged": {"type": <old type>}}`. With `--match REGEX`
//! every match in any string of any event (payload, native record, refs,
//! unknown fields, object keys) and in the header's title and cwd becomes
//! `[PURGED]`. The store recomputes the chain, re-signs when commits are
//! signed, and records the replaced tip in the new root, which is how
//! sync refuses the old history and replaces it on remotes.

use std::collections::BTreeSet;

use git_session_schema::{Event, Level, SessionHeader, SessionId};
use gix::ObjectId;
use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value, json};

use super::{OpError, OpResult};
use crate::store::{CommitInfo, Store, StoreError};

/// What replaces each match of `--match`.
pub const PURGED: &str = "[PURGED]";

/// The largest compiled `--match` pattern (bounds a hostile pattern).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// What to remove.
#[derive(Clone, Debug)]
pub enum What {
    /// The content of the event with this seq.
    Seq(u64),
    /// Every match of this pattern.
    Match(Regex),
}

impl What {
    /// Compiles a `--match` pattern; refuses one that is invalid, too
    /// large, or matches the empty string (it would match everywhere).
    pub fn pattern(pattern: &str) -> Result<What, String> {
        let re = RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| format!("--match {pattern:?} is not a valid regex: {e}"))?;
        if re.is_match("") {
            return Err(format!(
                "--match {pattern:?} matches the empty string, so it would match everywhere; give the secret or a pattern that needs at least one character"
            ));
        }
        Ok(What::Match(re))
    }
}

/// What a purge did.
#[derive(Clone, Debug)]
pub struct Purged {
    /// The tip of the replaced history.
    pub old_tip: ObjectId,
    /// The tip of the new one.
    pub new_tip: ObjectId,
    /// The seqs whose events changed.
    pub seqs: Vec<u64>,
    /// How many strings were replaced (`--match`; 1 per event for `--seq`).
    pub replaced: usize,
    /// Whether the header (title, cwd) changed.
    pub header: bool,
    /// Local sessions forked from this one before a purged event (or any,
    /// when the header changed): they hold copies of it and must be purged
    /// too.
    pub forks: Vec<SessionId>,
}

/// Purges `what` from session `id`; `ts` is the purge event's time.
/// Nothing is written when nothing matches.
pub fn purge(
    store: &Store,
    id: &SessionId,
    what: &What,
    ts: &str,
    info: &CommitInfo,
) -> OpResult<Purged> {
    let mut seqs = Vec::new();
    let mut replaced = 0;
    let mut header_changed = false;
    let (old_tip, new_tip) = store.replace_history(
        id,
        info,
        |old: ObjectId, mut header: SessionHeader, mut events: Vec<Event>| {
            match what {
                What::Seq(n) => {
                    let Some(e) = events.iter_mut().find(|e| e.seq == *n) else {
                        return Err(OpError::from(StoreError::NoSuchSeq {
                            id: id.clone(),
                            events: events.len() as u64,
                            seq: *n,
                        }));
                    };
                    let kind = std::mem::replace(&mut e.kind, "meta".into());
                    e.level = Level::History;
                    e.payload = json!({ "purged": { "type": kind } });
                    e.refs.clear();
                    e.extra.clear();
                    if let Some(o) = e.origin.as_mut() {
                        o.extra.clear();
                    }
                    seqs.push(*n);
                    replaced = 1;
                }
                What::Match(re) => {
                    for field in [&mut header.title, &mut header.cwd] {
                        if let Some(text) = field.as_mut() {
                            header_changed |= replace_in(re, text, &mut replaced);
                        }
                    }
                    for v in header.extra.values_mut() {
                        header_changed |= replace_value(re, v, &mut replaced);
                    }
                    for e in events.iter_mut() {
                        if purge_event(re, e, &mut replaced) {
                            seqs.push(e.seq);
                        }
                    }
                }
            }
            if seqs.is_empty() && !header_changed {
                return Err(OpError::Conflict {
                    message: format!("nothing in session {id} matches; nothing was rewritten"),
                    hint: Some(
                        "`git session show` prints the events; --seq N purges one whole event"
                            .into(),
                    ),
                });
            }
            let last = events.last().map(|e| (e.seq + 1, e.agent.clone()));
            let (seq, agent) = last.unwrap_or((0, header.agent.clone()));
            let mut tomb = Event::new(
                seq,
                ts,
                agent,
                "git-session",
                "session.purge",
                Level::History,
                json!({
                    "purged_tip": old.to_string(),
                    "seqs": seqs,
                    "replaced": replaced,
                    "header": header_changed,
                }),
            );
            tomb.parent_seq = seq.checked_sub(1);
            events.push(tomb);
            Ok((header, events))
        },
    )?;
    // A fork holds copies of the events before its fork point (and of the
    // header's title and cwd), not of what was appended here after it.
    let mut forks = Vec::new();
    for other in store.session_ids()? {
        if let Ok(h) = store.header(&other)
            && h.lineage.is_some_and(|l| {
                l.parent_session == *id
                    && (header_changed || seqs.iter().any(|&s| s < l.inherited_events))
            })
        {
            forks.push(other);
        }
    }
    Ok(Purged {
        old_tip,
        new_tip,
        seqs,
        replaced,
        header: header_changed,
        forks,
    })
}

fn purge_event(re: &Regex, e: &mut Event, n: &mut usize) -> bool {
    let mut changed = replace_value(re, &mut e.payload, n);
    for r in e.refs.iter_mut() {
        changed |= replace_in(re, r, n);
    }
    for v in e.extra.values_mut() {
        changed |= replace_value(re, v, n);
    }
    if let Some(o) = e.origin.as_mut() {
        for v in o.extra.values_mut() {
            changed |= replace_value(re, v, n);
        }
    }
    changed
}

fn replace_in(re: &Regex, text: &mut String, n: &mut usize) -> bool {
    let found = re.find_iter(text).count();
    if found == 0 {
        return false;
    }
    *n += found;
    *text = re.replace_all(text, PURGED).into_owned();
    true
}

/// Replaces matches in every string and object key of `value` (JSON kept
/// as text is searched as text: a match inside it is replaced there).
fn replace_value(re: &Regex, value: &mut Value, n: &mut usize) -> bool {
    match value {
        Value::String(s) => replace_in(re, s, n),
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |c, v| replace_value(re, v, n) | c),
        Value::Object(map) => {
            let mut changed = false;
            for v in map.values_mut() {
                changed |= replace_value(re, v, n);
            }
            if map.keys().any(|k| re.is_match(k)) {
                let old = std::mem::take(map);
                let mut clean = Map::new();
                for (mut k, v) in old {
                    replace_in(re, &mut k, n);
                    clean.insert(k, v);
                }
                *map = clean;
                changed = true;
            }
            changed
        }
        _ => false,
    }
}

/// The seqs as a short list for messages (`3, 7, 9-12`).
pub fn seq_list(seqs: &[u64]) -> String {
    let set: BTreeSet<u64> = seqs.iter().copied().collect();
    let mut parts = Vec::new();
    let mut it = set.into_iter().peekable();
    while let Some(a) = it.next() {
        let mut b = a;
        while it.peek() == Some(&(b + 1)) {
            b = it.next().expect("peeked");
        }
        parts.push(if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        });
    }
    parts.join(", ")
}
