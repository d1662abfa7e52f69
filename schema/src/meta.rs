//! User-editable metadata of a session: title, tags, notes, pinned, hidden
//! and task, kept apart from the (immutable) header and the (append-only)
//! event log, because people change them after the fact and on several
//! clones at once.
//!
//! Each edit is one [`MetaChange`]: a time and one operation. The state is
//! what replaying every change in order of `(time, tiebreak)` gives, so two
//! clones that edited the same session concurrently converge on the same
//! state once they have each other's changes (last writer wins per field;
//! tag additions and removals apply in that order, so a tag added on one
//! clone and another added on the other both stay). An operation this build
//! does not know is kept in history and skipped on replay, so a newer
//! writer's changes never make an older reader fail.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Longest title, in characters.
pub const MAX_TITLE: usize = 200;
/// Longest tag, in characters.
pub const MAX_TAG: usize = 64;
/// Most tags on one session.
pub const MAX_TAGS: usize = 64;
/// Longest note, in bytes.
pub const MAX_NOTE: usize = 4096;
/// Most notes kept on one session (the oldest go first).
pub const MAX_NOTES: usize = 256;
/// Longest task name, in characters.
pub const MAX_TASK: usize = 64;

/// One edit of a session's metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaChange {
    /// RFC 3339 UTC time of the edit (the replay order).
    pub time: String,
    /// The operation.
    #[serde(flatten)]
    pub op: MetaOp,
}

/// What one change does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum MetaOp {
    /// Sets (or, with `None`, clears) the title shown instead of the
    /// derived one.
    Title {
        /// The new title.
        title: Option<String>,
    },
    /// Adds and removes tags.
    Tag {
        /// Tags added.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        add: Vec<String>,
        /// Tags removed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        remove: Vec<String>,
    },
    /// Adds a note.
    Note {
        /// The note's text.
        text: String,
    },
    /// Removes every note.
    NoteClear,
    /// Pins (or unpins) the session.
    Pin {
        /// Pinned after the change.
        on: bool,
    },
    /// Hides (or shows again) the session in listings.
    Hide {
        /// Hidden after the change.
        on: bool,
    },
    /// Puts the session in a task (or, with `None`, in none).
    Task {
        /// The task's name.
        task: Option<String>,
    },
    /// The lead moves to `agent` (written by `handoff`, with the
    /// receipt's signer when it is signed).
    Owner {
        /// The agent that leads from now on.
        agent: String,
        /// Who signed the handoff receipt, when it is signed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// The `handoff` event that moved it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
    },
    /// Capture found `agent`, which does not lead, appending seqs
    /// `first..=last`.
    Foreign {
        /// The agent that appended.
        agent: String,
        /// First seq it appended.
        first: u64,
        /// Last seq it appended.
        last: u64,
    },
    /// An operation written by a newer build: kept, skipped on replay.
    #[serde(other)]
    Unknown,
}

/// Most foreign appends kept (the oldest go first).
pub const MAX_FOREIGN: usize = 64;

/// Who leads a session, set by a handoff.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The agent.
    pub agent: String,
    /// The signer of the handoff receipt, when signing was on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The `handoff` event that made it lead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// When.
    pub time: String,
}

/// Events a non-leading agent appended, found by capture.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Foreign {
    /// The agent.
    pub agent: String,
    /// First seq.
    pub first: u64,
    /// Last seq.
    pub last: u64,
    /// When capture found them.
    pub time: String,
}

/// One note with the time it was added.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// When it was added.
    pub time: String,
    /// The text.
    pub text: String,
}

/// The metadata of one session: every change replayed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The user's title, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Tags, sorted.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub tags: BTreeSet<String>,
    /// Notes, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Note>,
    /// Pinned.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// Hidden from listings.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    /// The task the session belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Who leads, once a handoff moved the lead (before that, the agent
    /// of the header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// Appends by agents that did not lead, since the lead last moved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign: Vec<Foreign>,
}

impl Meta {
    /// Returns the agent that leads: the owner a handoff set, else `creator`
    /// (the header's agent).
    pub fn lead<'a>(&'a self, creator: &'a str) -> &'a str {
        self.owner.as_ref().map_or(creator, |o| o.agent.as_str())
    }

    /// Applies one change (changes must come in replay order).
    pub fn apply(&mut self, change: &MetaChange) {
        match &change.op {
            MetaOp::Title { title } => self.title = title.clone(),
            MetaOp::Tag { add, remove } => {
                for t in remove {
                    self.tags.remove(t);
                }
                for t in add {
                    if self.tags.len() < MAX_TAGS {
                        self.tags.insert(t.clone());
                    }
                }
            }
            MetaOp::Note { text } => {
                self.notes.push(Note {
                    time: change.time.clone(),
                    text: text.clone(),
                });
                if self.notes.len() > MAX_NOTES {
                    self.notes.remove(0);
                }
            }
            MetaOp::NoteClear => self.notes.clear(),
            MetaOp::Pin { on } => self.pinned = *on,
            MetaOp::Hide { on } => self.hidden = *on,
            MetaOp::Task { task } => self.task = task.clone(),
            MetaOp::Owner { agent, key, seq } => {
                self.owner = Some(Owner {
                    agent: agent.clone(),
                    key: key.clone(),
                    seq: *seq,
                    time: change.time.clone(),
                });
                self.foreign.clear();
            }
            MetaOp::Foreign { agent, first, last } => {
                self.foreign.push(Foreign {
                    agent: agent.clone(),
                    first: *first,
                    last: *last,
                    time: change.time.clone(),
                });
                if self.foreign.len() > MAX_FOREIGN {
                    self.foreign.remove(0);
                }
            }
            MetaOp::Unknown => {}
        }
    }

    /// Returns the state `changes` give, sorted by time and then by the
    /// tiebreak each comes with (the store passes the commit id), so every
    /// clone replays the same changes in the same order.
    pub fn replay<'a>(changes: impl IntoIterator<Item = (&'a MetaChange, &'a str)>) -> Meta {
        let mut sorted: Vec<(&MetaChange, &str)> = changes.into_iter().collect();
        sorted.sort_by(|a, b| a.0.time.cmp(&b.0.time).then_with(|| a.1.cmp(b.1)));
        let mut meta = Meta::default();
        for (c, _) in sorted {
            meta.apply(c);
        }
        meta
    }

    /// Returns whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Meta::default()
    }
}

impl MetaChange {
    /// Checks every value against the limits and character rules; the
    /// error says which value and why. Applied to changes typed here and
    /// to every change fetched from a remote before it is adopted.
    pub fn validate(&self) -> Result<(), String> {
        if self.time.len() > 40 || self.time.chars().any(char::is_control) {
            return Err("the change's time is not a time".into());
        }
        match &self.op {
            MetaOp::Title { title: Some(t) } => validate_title(t),
            MetaOp::Tag { add, remove } => {
                if add.len() + remove.len() > MAX_TAGS {
                    return Err(format!("more than {MAX_TAGS} tags in one change"));
                }
                add.iter().chain(remove).try_for_each(|t| validate_tag(t))
            }
            MetaOp::Note { text } => validate_note(text),
            MetaOp::Task { task: Some(t) } => validate_task(t),
            MetaOp::Owner { agent, key, .. } => {
                validate_agent(agent)?;
                match key {
                    Some(k) if k.len() > 512 || k.chars().any(char::is_control) => {
                        Err("an owner's key is one line of at most 512 bytes".into())
                    }
                    _ => Ok(()),
                }
            }
            MetaOp::Foreign { agent, first, last } => {
                validate_agent(agent)?;
                if first > last {
                    return Err("a foreign append's first seq is after its last".into());
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Returns a one-line description of the change, for `log --meta`
    /// (values as stored: escape before printing).
    pub fn describe(&self) -> String {
        match &self.op {
            MetaOp::Title { title: Some(t) } => format!("title {t:?}"),
            MetaOp::Title { title: None } => "title cleared".into(),
            MetaOp::Tag { add, remove } => {
                let mut parts: Vec<String> = add.iter().map(|t| format!("+{t}")).collect();
                parts.extend(remove.iter().map(|t| format!("-{t}")));
                format!("tag {}", parts.join(" "))
            }
            MetaOp::Note { text } => format!("note {text:?}"),
            MetaOp::NoteClear => "notes cleared".into(),
            MetaOp::Pin { on: true } => "pinned".into(),
            MetaOp::Pin { on: false } => "unpinned".into(),
            MetaOp::Hide { on: true } => "hidden".into(),
            MetaOp::Hide { on: false } => "shown".into(),
            MetaOp::Task { task: Some(t) } => format!("task {t}"),
            MetaOp::Task { task: None } => "task cleared".into(),
            MetaOp::Owner { agent, seq, .. } => match seq {
                Some(s) => format!("led by {agent} (handoff at seq {s})"),
                None => format!("led by {agent}"),
            },
            MetaOp::Foreign { agent, first, last } => {
                format!("{agent}, which does not lead, appended seq {first}..{last}")
            }
            MetaOp::Unknown => "a change this version does not know".into(),
        }
    }
}

/// A title: 1 to [`MAX_TITLE`] characters, no control characters.
pub fn validate_title(t: &str) -> Result<(), String> {
    if t.trim().is_empty() || t.chars().count() > MAX_TITLE {
        return Err(format!("a title has 1 to {MAX_TITLE} characters"));
    }
    if t.chars().any(char::is_control) {
        return Err("a title is one line without control characters".into());
    }
    Ok(())
}

/// A tag: 1 to [`MAX_TAG`] characters, none of them whitespace, control
/// characters or commas.
pub fn validate_tag(t: &str) -> Result<(), String> {
    if t.is_empty() || t.chars().count() > MAX_TAG {
        return Err(format!("tag {t:?}: a tag has 1 to {MAX_TAG} characters"));
    }
    if t.chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == ',')
    {
        return Err(format!(
            "tag {t:?}: no spaces, commas or control characters in a tag"
        ));
    }
    Ok(())
}

/// A note: 1 to [`MAX_NOTE`] bytes; newlines and tabs are the only control
/// characters.
pub fn validate_note(t: &str) -> Result<(), String> {
    if t.trim().is_empty() || t.len() > MAX_NOTE {
        return Err(format!("a note has 1 to {MAX_NOTE} bytes"));
    }
    if t.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err("a note has no control characters other than newline and tab".into());
    }
    Ok(())
}

/// An agent name: 1 to 64 characters of `[a-z0-9._-]`.
pub fn validate_agent(a: &str) -> Result<(), String> {
    let ok = !a.is_empty()
        && a.len() <= 64
        && a.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(format!("agent {a:?} is not an agent name"))
    }
}

/// A task name: 1 to [`MAX_TASK`] characters of `[A-Za-z0-9._-]`, starting
/// with a letter or digit (it is one component of a session URI).
pub fn validate_task(t: &str) -> Result<(), String> {
    let ok = !t.is_empty()
        && t.chars().count() <= MAX_TASK
        && t.starts_with(|c: char| c.is_ascii_alphanumeric())
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "task {t:?}: a task name has 1 to {MAX_TASK} characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(time: &str, op: MetaOp) -> MetaChange {
        MetaChange {
            time: time.into(),
            op,
        }
    }

    #[test]
    fn replay_is_last_writer_wins_in_time_order() {
        let a = change(
            "2026-01-01T00:00:02.000Z",
            MetaOp::Title {
                title: Some("late".into()),
            },
        );
        let b = change(
            "2026-01-01T00:00:01.000Z",
            MetaOp::Title {
                title: Some("early".into()),
            },
        );
        let t1 = change(
            "2026-01-01T00:00:03.000Z",
            MetaOp::Tag {
                add: vec!["x".into()],
                remove: vec![],
            },
        );
        let t2 = change(
            "2026-01-01T00:00:04.000Z",
            MetaOp::Tag {
                add: vec!["y".into()],
                remove: vec![],
            },
        );
        let one = Meta::replay([(&a, "1"), (&b, "2"), (&t1, "3"), (&t2, "4")]);
        let other = Meta::replay([(&t2, "4"), (&t1, "3"), (&b, "2"), (&a, "1")]);
        assert_eq!(one, other);
        assert_eq!(one.title.as_deref(), Some("late"));
        assert_eq!(one.tags.iter().collect::<Vec<_>>(), ["x", "y"]);
    }

    #[test]
    fn unknown_operations_read_and_are_skipped() {
        let c: MetaChange =
            serde_json::from_str(r#"{"time":"2026-01-01T00:00:00.000Z","op":"colour","hue":3}"#)
                .unwrap();
        assert_eq!(c.op, MetaOp::Unknown);
        assert!(Meta::replay([(&c, "a")]).is_empty());
    }

    #[test]
    fn hostile_values_are_refused() {
        assert!(validate_tag("a b").is_err());
        assert!(validate_tag("\u{1b}[2J").is_err());
        assert!(validate_tag(&"x".repeat(65)).is_err());
        assert!(validate_title("two\nlines").is_err());
        assert!(validate_task("../up").is_err());
        assert!(validate_task("fix-login.2").is_ok());
        assert!(validate_note(&"n".repeat(MAX_NOTE + 1)).is_err());
        let c = change(
            "2026-01-01T00:00:00.000Z",
            MetaOp::Tag {
                add: vec!["ok".into(), "not ok".into()],
                remove: vec![],
            },
        );
        assert!(c.validate().unwrap_err().contains("not ok"));
    }
}
