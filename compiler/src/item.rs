//! The pieces a compiled context is made of: items with a priority and
//! provenance, and the record of what was left out and why.
//!
//! Items hold text as the session wrote it; making that text safe to embed
//! is the renderers' job (`render.rs`), not this module's.

use serde::{Serialize, Serializer};

/// Ranks an item for the budget (seed 000 §7.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Priority {
    /// Always kept, verbatim: current task, open todos, decisions, blockers.
    P0,
    /// Kept by recency up to about 60 % of the budget: edits, commands,
    /// constraints, working-tree state.
    P1,
    /// Fills what is left: summarized conversation excerpts.
    P2,
}

/// Says what an item is about; also the section it is rendered in.
///
/// The declaration order is the order sections appear in the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    /// The latest user request (P0).
    Task,
    /// A command whose latest run failed (P0).
    Blocker,
    /// A todo that is not done (P0).
    Todo,
    /// A recorded decision (P0).
    Decision,
    /// What a session merged back into this one did (`session.merge`, P0).
    Merged,
    /// Working-tree facts the caller passed in (P1).
    GitState,
    /// A snapshot of the working state (`git session checkpoint`, P1).
    Checkpoint,
    /// A constraint: a memory write or a user-stated rule (P1).
    Constraint,
    /// The summary an agent wrote when it compacted its context (P1).
    CompactionSummary,
    /// A file the session edited, with its latest diff (P1).
    FileEdit,
    /// A command and its outcome (P1).
    Command,
    /// A todo that was finished (P1).
    DoneTodo,
    /// An extract of one conversation message (P2).
    Excerpt,
    /// A summary produced by an external summarizer (P2).
    Summary,
}

impl ItemKind {
    /// Returns the stable snake_case name used in JSON and dropped lists.
    pub fn name(self) -> &'static str {
        match self {
            ItemKind::Task => "task",
            ItemKind::Blocker => "blocker",
            ItemKind::Todo => "todo",
            ItemKind::Decision => "decision",
            ItemKind::Merged => "merged",
            ItemKind::GitState => "git_state",
            ItemKind::Checkpoint => "checkpoint",
            ItemKind::Constraint => "constraint",
            ItemKind::CompactionSummary => "compaction_summary",
            ItemKind::FileEdit => "file_edit",
            ItemKind::Command => "command",
            ItemKind::DoneTodo => "done_todo",
            ItemKind::Excerpt => "excerpt",
            ItemKind::Summary => "summary",
        }
    }
}

/// Holds one entry of a compiled context.
///
/// `label` is a one-line description (a path, a command, a todo); `body`,
/// when present, is multi-line text kept as written (a request, a diff, an
/// output tail). Both come from the session and are untrusted: renderers
/// flatten labels and fence bodies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Item {
    /// How the budget treats the item.
    pub priority: Priority,
    /// What the item is about.
    pub kind: ItemKind,
    /// One line of description.
    pub label: String,
    /// Multi-line text kept as written, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The events the item was built from, ascending: its citations.
    pub seqs: Vec<u64>,
}

impl Item {
    /// Returns the newest event the item cites (0 when it cites none).
    pub fn latest_seq(&self) -> u64 {
        self.seqs.last().copied().unwrap_or(0)
    }
}

/// Says why something from the session is not in the compiled context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The item did not fit in its priority's share of the budget.
    Budget,
    /// Events of a type the compiler does not turn into context (native
    /// records, reasoning, raw tool traffic already covered by derived
    /// `command.run` / `file.edit` events, ...).
    NotContext,
    /// A message with no text (for example an image only).
    Empty,
    /// An older form of something the context holds in a newer one (an
    /// earlier compaction summary).
    Superseded,
    /// An excerpt an external summarizer was given but did not cite.
    NotSummarized,
}

/// Records one thing that was cut, with provenance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Dropped {
    /// An item kind (`file_edit`, `excerpt`, ...) or, for events never made
    /// into items, the event type (`meta`, `message.thinking`, ...).
    pub what: String,
    /// The priority of a cut item; `None` for events never made into items.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// Why it was cut.
    pub reason: DropReason,
    /// For a cut item, the start of its label (a path, a command), so a
    /// reader sees what went without looking the seqs up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The events concerned, ascending.
    #[serde(serialize_with = "ser_ranges")]
    pub seqs: Vec<u64>,
}

fn ser_ranges<S: Serializer>(seqs: &[u64], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&seq_ranges(seqs, usize::MAX))
}

/// Returns `seqs` (ascending) as compact ranges, `3-5,9,12`.
///
/// With more than `max_parts` ranges, keeps the first two and the last
/// `max_parts - 2` around an ellipsis, so a citation stays one short line
/// however many events an item folds together.
pub fn seq_ranges(seqs: &[u64], max_parts: usize) -> String {
    let mut parts: Vec<(u64, u64)> = Vec::new();
    for &s in seqs {
        match parts.last_mut() {
            Some((_, end)) if s == *end + 1 => *end = s,
            Some((_, end)) if s == *end => {}
            _ => parts.push((s, s)),
        }
    }
    let show = |(a, b): &(u64, u64)| {
        if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        }
    };
    if parts.len() <= max_parts.max(3) {
        return parts.iter().map(show).collect::<Vec<_>>().join(",");
    }
    let tail = max_parts.max(3) - 2;
    let mut out: Vec<String> = parts[..2].iter().map(show).collect();
    out.push("…".to_owned());
    out.extend(parts[parts.len() - tail..].iter().map(show));
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_ranges_fold_runs_and_elide_the_middle() {
        assert_eq!(seq_ranges(&[], 6), "");
        assert_eq!(seq_ranges(&[3, 4, 5, 9, 12], 6), "3-5,9,12");
        let many: Vec<u64> = (0..40).map(|n| n * 2).collect();
        assert_eq!(seq_ranges(&many, 6), "0,2,…,72,74,76,78");
    }
}
