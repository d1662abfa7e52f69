//! `merge`: bring what a session B did back into the session A it came
//! from, without merging logs.
//!
//! Appends to A one `session.merge` event (agent `git-session`, actor
//! `system`) naming B, B's tip commit and the seqs of B it covers (from
//! where B branched off A's history to B's end), with the compiler's
//! facts of those events (decisions, open todos, blockers, files edited,
//! commands and their outcome, each citing B's seqs) and a summary text
//! built from them. A's next `compile`, `handoff` or `resume` brief carries
//! it as a P0 item. Both logs stay as they are.

use git_session_schema::{Agent, Event, Level, SessionId, kinds};
use serde_json::json;

use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::store::{SeqMode, Store, StoreError};

/// Reports a merge back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeOutcome {
    /// The `session.merge` event in A.
    pub seq: u64,
    /// B's first seq covered.
    pub since: u64,
    /// B's last seq covered.
    pub last: u64,
    /// The summary recorded.
    pub summary: String,
}

/// Returns the first seq of `from` that is its own, not history it shares
/// with `into` (through any chain of forks); 0 when they are unrelated.
fn branch_point(store: &Store, from: &SessionId, into: &SessionId) -> OpResult<u64> {
    let mut cur = from.clone();
    // Bounded: a lineage chain longer than this is not one to walk.
    for _ in 0..64 {
        let Some(l) = store.header(&cur)?.lineage else {
            return Ok(0);
        };
        if l.parent_session == *into {
            return Ok(l.inherited_events);
        }
        if store.tip(&l.parent_session)?.is_none() {
            return Ok(0);
        }
        cur = l.parent_session;
    }
    Ok(0)
}

/// Appends to `into` the result of `from` since it branched.
pub fn merge(
    store: &Store,
    clock: &Clock,
    from: &SessionId,
    into: &SessionId,
) -> OpResult<MergeOutcome> {
    if from == into {
        return Err(OpError::Conflict {
            message: format!("{from} cannot be merged into itself"),
            hint: None,
        });
    }
    store.stat(into)?;
    let b = store.stat(from)?;
    let since = branch_point(store, from, into)?;
    if since >= b.events {
        return Err(OpError::Conflict {
            message: format!(
                "{from} has nothing of its own to merge: its {} events are all shared with {into}",
                b.events
            ),
            hint: None,
        });
    }
    let last = b.events - 1;
    let mut events = Vec::new();
    for line in store.lines(from, since, Some(last))? {
        let line = line?;
        events.push(line.decode().map_err(|e| StoreError::Corrupt {
            id: from.clone(),
            message: format!("seq {}: {e}", line.seq),
        })?);
    }
    let facts = git_session_compiler::merge_facts(&events);
    let mut summary = String::new();
    for f in &facts {
        let cite = git_session_compiler::seq_ranges(&f.seqs, 8);
        summary += &format!("- {}: {} [{from} seq {cite}]\n", f.kind.name(), f.label);
    }
    if facts.is_empty() {
        summary = format!(
            "- {} events, no decisions, edits or commands recorded [{from} seq {since}..{last}]\n",
            events.len()
        );
    }
    let payload = json!({
        "session": from,
        "agent": b.header.agent,
        "tip": b.tip.to_string(),
        "since_seq": since,
        "last_seq": last,
        "summary": summary,
        "facts": facts,
        "provenance": format!("git-session merge: compiled from events {since}..{last} of session {from} at commit {}", b.tip),
    });
    let mut event = Event::new(
        0,
        clock.now_rfc3339(),
        Agent::GitSession,
        "system",
        kinds::SESSION_MERGE,
        Level::Context,
        payload,
    );
    event.refs.push(format!("session:{from}@{}", b.tip));
    let info = super::canonical::commit_info(store, clock);
    let outcome = store.append(into, SeqMode::Assign, &info, |sink| {
        sink.push(event.clone())?;
        Ok::<_, OpError>(())
    })?;
    Ok(MergeOutcome {
        seq: outcome.seq.map(|(a, _)| a).unwrap_or_default(),
        since,
        last,
        summary,
    })
}
