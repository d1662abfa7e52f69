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
/// change per session. The sessions started from one of them (a
/// handoff's child, a fork, a continuation, at any depth) that were in
/// the task it was in before follow it, as the sessions started later
/// would (they take their parent's task when they are made); one put in
/// another task stays there. Returns every session moved, `ids` first.
pub fn set_task(
    store: &Store,
    clock: &Clock,
    task: Option<&str>,
    ids: &[SessionId],
) -> OpResult<Vec<SessionId>> {
    let rows: Vec<(SessionId, Option<SessionId>, Option<String>)> = super::list::summaries(store)?
        .into_iter()
        .filter_map(|(id, s)| {
            let s = s.ok()?;
            let parent = s.stat.header.lineage.map(|l| l.parent_session);
            Some((id, parent, s.meta.task))
        })
        .collect();
    let task_of = |id: &SessionId| {
        rows.iter()
            .find(|(i, ..)| i == id)
            .and_then(|(.., t)| t.clone())
    };
    let mut moved: Vec<SessionId> = Vec::new();
    // Each named session, then its children that shared its old task.
    let mut queue: Vec<(SessionId, Option<String>)> =
        ids.iter().map(|id| (id.clone(), task_of(id))).collect();
    queue.reverse();
    while let Some((id, before)) = queue.pop() {
        if moved.contains(&id) {
            continue;
        }
        change(
            store,
            clock,
            &id,
            MetaOp::Task {
                task: task.map(str::to_owned),
            },
        )?;
        for (child, _, child_task) in rows.iter().filter(|(_, p, _)| p.as_ref() == Some(&id)) {
            if *child_task == before && !ids.contains(child) {
                queue.push((child.clone(), before.clone()));
            }
        }
        moved.push(id);
    }
    Ok(moved)
}
