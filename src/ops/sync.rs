//! `push`, `fetch` and `sync` of sessions over ordinary git remotes.
//!
//! Fetch brings the remote's session refs into `refs/remotes/<remote>/
//! sessions/*` and reconciles each with the local ref (see
//! [`Store::reconcile`]); a divergence leaves the local tail in a fork
//! session, and the capture cursors that fed it are pointed at the fork so
//! the agent's next records land there instead of being appended again.
//! Push never forces. Sync repeats fetch-then-push until the remote accepts
//! everything, so two clones that both sync end with identical refs.

use git_session_schema::SessionId;

use super::{OpError, OpResult};
use crate::native::cursor::CursorIndex;
use crate::store::{PushRejection, Reconciled, StateLock, Store};

/// How many fetch-and-push rounds sync tries before giving up.
const ROUNDS: usize = 5;

/// Reports what a fetch changed locally.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchReport {
    /// Sessions that changed here, and how.
    pub changed: Vec<(SessionId, Reconciled)>,
    /// Sessions that were already the same.
    pub unchanged: usize,
}

/// Reports a sync.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Everything fetched over all rounds.
    pub fetched: FetchReport,
    /// Fetch-and-push rounds used.
    pub rounds: usize,
}

/// Fetches `remote` and reconciles every fetched session.
pub fn fetch(store: &Store, remote: &str) -> OpResult<FetchReport> {
    store.ensure_state_dir()?;
    store.fetch_sessions(remote)?;
    // Captures must not run between moving a ref and re-pointing cursors.
    let _locks = capture_locks(store)?;
    let mut report = FetchReport::default();
    for (id, tip) in store.tracking_sessions(remote)? {
        match store.reconcile(&id, tip)? {
            Reconciled::Unchanged | Reconciled::LocalAhead => report.unchanged += 1,
            Reconciled::Diverged { fork } => {
                repoint_cursors(store, &id, &fork)?;
                report.changed.push((id, Reconciled::Diverged { fork }));
            }
            other => report.changed.push((id, other)),
        }
    }
    store.merge_notes(remote)?;
    Ok(report)
}

/// Pushes every session; returns the refs the remote refused.
pub fn push(store: &Store, remote: &str) -> OpResult<Vec<PushRejection>> {
    Ok(store.push_sessions(remote)?)
}

/// Fetches, reconciles and pushes until the remote has everything.
pub fn sync(store: &Store, remote: &str) -> OpResult<SyncReport> {
    let mut report = SyncReport::default();
    for round in 1..=ROUNDS {
        let fetched = fetch(store, remote)?;
        report.fetched.unchanged = fetched.unchanged;
        report.fetched.changed.extend(fetched.changed);
        report.rounds = round;
        let rejected = push(store, remote)?;
        if rejected.is_empty() {
            return Ok(report);
        }
    }
    Err(OpError::Conflict {
        message: format!(
            "{remote} kept changing while syncing ({ROUNDS} rounds); nothing was lost"
        ),
        hint: Some("run git session sync again".into()),
    })
}

fn capture_locks(store: &Store) -> OpResult<Vec<StateLock>> {
    git_session_adapters::registry::ADAPTERS
        .iter()
        .map(|a| a.agent())
        .map(|a| {
            store
                .lock_state(&format!("capture-{a}"))
                .map_err(OpError::from)
        })
        .collect()
}

/// Points every capture cursor that fed `from` at `to`.
fn repoint_cursors(store: &Store, from: &SessionId, to: &SessionId) -> OpResult<()> {
    for agent in git_session_adapters::registry::ADAPTERS
        .iter()
        .map(|a| a.agent())
    {
        let mut index = CursorIndex::load(store.state_dir(), agent.as_str());
        let mut changed = false;
        let sessions = index.files.values_mut().map(|c| &mut c.session).chain(
            index
                .databases
                .values_mut()
                .flat_map(|d| d.sessions.values_mut().map(|s| &mut s.session)),
        );
        for session in sessions {
            if session.as_deref() == Some(from.as_str()) {
                *session = Some(to.to_string());
                changed = true;
            }
        }
        if changed {
            index.save()?;
        }
    }
    Ok(())
}
