//! Session metadata edits: `tag`, `note`, `pin`, `hide`, `title`, `task`.
//!
//! Each edit is one [`MetaChange`] stamped with the clock and recorded by
//! the store as one commit on the session's metadata ref
//! (`refs/session-meta/<id>`); sync carries it and merges concurrent edits
//! last-writer-wins (see `store/meta.rs`).

use git_session_schema::{Meta, MetaChange, MetaOp, SessionId};

use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::store::{MetaEntry, Store};

/// Records `op` on session `id` (which must exist) and returns the
/// metadata after it.
pub fn change(store: &Store, clock: &Clock, id: &SessionId, op: MetaOp) -> OpResult<Meta> {
    store.stat(id)?;
    let change = MetaChange {
        time: clock.now_rfc3339(),
        op,
    };
    change.validate().map_err(|message| OpError::Conflict {
        message,
        hint: Some("nothing was written".into()),
    })?;
    Ok(store.change_meta(id, &change, clock.now().as_second())?)
}

/// Returns a session's metadata.
pub fn get(store: &Store, id: &SessionId) -> OpResult<Meta> {
    Ok(store.meta(id)?)
}

/// Returns a session's metadata history, newest first.
pub fn log(store: &Store, id: &SessionId) -> OpResult<Vec<MetaEntry>> {
    Ok(store.meta_log(id)?)
}

/// Puts sessions `ids` in task `task` (or, with `None`, in none): one
/// change per session.
pub fn set_task(
    store: &Store,
    clock: &Clock,
    task: Option<&str>,
    ids: &[SessionId],
) -> OpResult<()> {
    for id in ids {
        change(
            store,
            clock,
            id,
            MetaOp::Task {
                task: task.map(str::to_owned),
            },
        )?;
    }
    Ok(())
}
