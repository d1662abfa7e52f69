//! `which`: the sessions whose capture batches were taken at a commit.
//!
//! A batch records the code commit that was HEAD when it was captured; the
//! post-commit hook captures right after a commit, so the batches that name
//! a commit hold what the agents did up to it.

use git_session_schema::SessionId;
use gix::ObjectId;

use super::OpResult;
use crate::store::Store;

/// Holds one batch captured at the commit asked about.
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
}

/// Returns every batch of every session captured at `commit`.
pub fn which(store: &Store, commit: ObjectId) -> OpResult<Vec<CommitBatch>> {
    let mut out = Vec::new();
    for id in store.session_ids()? {
        for b in store.batches(&id)? {
            if b.trailers.code_commit == Some(commit) {
                out.push(CommitBatch {
                    session: id.clone(),
                    agent: b.trailers.agent.clone(),
                    seq: b.trailers.seq,
                    batch: b.commit,
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.session, a.seq).cmp(&(&b.session, b.seq)));
    Ok(out)
}
