//! `which`: the sessions whose records led to a commit.
//!
//! A batch belongs to the first commit made after the records it holds.
//! Each batch records the code commit that was HEAD when it was captured
//! (`Code-Commit`) and when it was captured relative to it (`Captured`):
//!
//! - `after-commit`: the post-commit hook captured it right after that
//!   commit was made, so its records led to that commit;
//! - `before-commit`: captured while that commit was HEAD (`import`,
//!   `watch`, agent hooks, resume and handoff), so its records were made
//!   after it and belong to the next commit made on top of it (listed under
//!   each child commit; while that commit is still HEAD they are pending);
//! - no `Captured` trailer (batches written before it was recorded): listed
//!   under the HEAD they were captured at, as "captured at HEAD".
//!
//! A history `purge` rewrote is one root commit; it keeps the trailers of
//! the batches it replaced (`Purged-Batch`), so their records stay listed
//! under the commits they led to (as that root commit), and only the
//! purge's own event is attributed to the HEAD it was made at.

use git_session_schema::SessionId;
use gix::ObjectId;

use super::OpResult;
use crate::store::Store;

/// Says why a batch is attributed to the commit asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attribution {
    /// The commit's post-commit hook captured it.
    PostCommit,
    /// Captured while a parent of the commit was HEAD, before the commit
    /// was made.
    BeforeCommit,
    /// A batch without the `Captured` trailer, captured while the commit was HEAD.
    AtHead,
}

impl Attribution {
    /// Returns the name used in `--json` output.
    pub fn as_str(self) -> &'static str {
        match self {
            Attribution::PostCommit => "post-commit",
            Attribution::BeforeCommit => "before-commit",
            Attribution::AtHead => "at-head",
        }
    }
}

/// Holds one batch attributed to the commit asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitBatch {
    /// The session.
    pub session: SessionId,
    /// Its agent.
    pub agent: String,
    /// The batch's seq range, inclusive.
    pub seq: Option<(u64, u64)>,
    /// The batch commit on the session ref.
    pub batch: ObjectId,
    /// The code commit that was HEAD when it was captured.
    pub head: ObjectId,
    /// Why it belongs to the commit.
    pub attribution: Attribution,
}

/// Holds what `which` found for a commit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Which {
    /// The batches whose records led to the commit, by session and seq.
    pub batches: Vec<CommitBatch>,
    /// When the commit is HEAD: batches captured since it was made, which
    /// belong to the next commit.
    pub pending: Vec<CommitBatch>,
}

/// Returns the batches whose records led to `commit`, and those captured
/// after it while it was HEAD.
pub fn which(store: &Store, commit: ObjectId) -> OpResult<Which> {
    let parents = store.commit_parents(commit)?;
    // Batches captured after a commit that is no longer HEAD are listed
    // under the commit made on top of it.
    let is_head = store.code_head() == Some(commit);
    let mut found = Which::default();
    for id in store.session_ids()? {
        for b in store.batches(&id)? {
            for part in store.batch_parts(&b)? {
                let (seq, after) = (part.seq, part.after_commit);
                // A batch that added no events (a fork's first commit,
                // which only shares its parent's history) led to nothing.
                let (Some(head), Some(_)) = (part.code_commit, seq) else {
                    continue;
                };
                let row = |attribution| CommitBatch {
                    session: id.clone(),
                    agent: b.trailers.agent.clone(),
                    seq,
                    batch: b.commit,
                    head,
                    attribution,
                };
                match (head == commit, after) {
                    (true, Some(true)) => found.batches.push(row(Attribution::PostCommit)),
                    (true, None) => found.batches.push(row(Attribution::AtHead)),
                    (true, Some(false)) if is_head => {
                        found.pending.push(row(Attribution::BeforeCommit))
                    }
                    (false, Some(false)) if parents.contains(&head) => {
                        found.batches.push(row(Attribution::BeforeCommit))
                    }
                    _ => {}
                }
            }
        }
    }
    let order = |a: &CommitBatch, b: &CommitBatch| (&a.session, a.seq).cmp(&(&b.session, b.seq));
    found.batches.sort_by(order);
    found.pending.sort_by(order);
    Ok(found)
}
