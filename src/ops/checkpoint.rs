//! `checkpoint`: record the working state in a session, and put it back.
//!
//! A checkpoint is one `checkpoint` event (agent `git-session`, actor
//! `system`) whose payload names the snapshot: `tree` (the work tree's
//! files), `index_tree` (what was staged), `commit` (the parentless commit
//! holding the tree, the batch commit's second parent, so push carries
//! it), `base` (the code `HEAD`), the message and the files changed from
//! `base`. The store makes the snapshot without touching the user's index,
//! work tree or refs; restoring refuses over local changes.

use git_session_schema::{Agent, Event, Level, SessionId, kinds};
use gix::ObjectId;
use serde_json::{Value, json};

use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::store::{SeqMode, Store};

/// Files listed in a checkpoint event (the count is always complete).
const LISTED_FILES: usize = 200;

/// Reports a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The `checkpoint` event.
    pub seq: u64,
    /// The snapshot's tree.
    pub tree: ObjectId,
    /// The commit holding it.
    pub commit: ObjectId,
    /// Files that differ from `HEAD`.
    pub changed: Vec<(char, String)>,
}

/// Snapshots the working state into session `id`.
pub fn create(
    store: &Store,
    clock: &Clock,
    id: &SessionId,
    message: Option<&str>,
) -> OpResult<Checkpoint> {
    store.stat(id)?;
    let now = clock.now_rfc3339();
    let subject = match message {
        Some(m) => format!(
            "checkpoint of {id}: {}",
            super::list::one_line(m).unwrap_or_default()
        ),
        None => format!("checkpoint of {id}"),
    };
    let head = store.code_head();
    let mut body = format!("{subject}\n\nSession-Id: {id}\n");
    if let Some(h) = head {
        body += &format!("Code-Commit: {h}\n");
    }
    let snap = store.snapshot_worktree(clock.now().as_second(), &body)?;
    let files: Vec<Value> = snap
        .changed
        .iter()
        .take(LISTED_FILES)
        .map(|(s, p)| json!({"status": s.to_string(), "path": p}))
        .collect();
    let payload = json!({
        "tree": snap.tree.to_string(),
        "index_tree": snap.index_tree.to_string(),
        "commit": snap.commit.to_string(),
        "base": snap.base.map(|b| b.to_string()),
        "message": message,
        "files_changed": snap.changed.len(),
        "files": files,
    });
    let mut event = Event::new(
        0,
        now,
        Agent::GitSession,
        "system",
        kinds::CHECKPOINT,
        Level::Context,
        payload,
    );
    event.refs.push(format!("git:{}", snap.tree));
    let mut info = super::canonical::commit_info(store, clock);
    info.attach = Some(snap.commit);
    let outcome = store.append(id, SeqMode::Assign, &info, |sink| {
        sink.push(event.clone())?;
        Ok::<_, OpError>(())
    })?;
    let seq = outcome.seq.map(|(a, _)| a).unwrap_or_default();
    Ok(Checkpoint {
        seq,
        tree: snap.tree,
        commit: snap.commit,
        changed: snap.changed,
    })
}

/// Puts the files of the checkpoint at `seq` of session `id` back into
/// the work tree; returns the files written or removed.
pub fn restore(store: &Store, id: &SessionId, seq: u64) -> OpResult<Vec<(char, String)>> {
    let stat = store.stat(id)?;
    if seq >= stat.events {
        return Err(crate::store::StoreError::NoSuchSeq {
            id: id.clone(),
            events: stat.events,
            seq,
        }
        .into());
    }
    let event = store
        .lines(id, seq, Some(seq))?
        .next()
        .transpose()?
        .and_then(|l| l.decode().ok());
    let tree = event
        .as_ref()
        .filter(|e| e.kind == kinds::CHECKPOINT)
        .and_then(|e| e.payload.get("tree")?.as_str())
        .and_then(|t| ObjectId::from_hex(t.as_bytes()).ok());
    let Some(tree) = tree else {
        return Err(OpError::Conflict {
            message: format!(
                "seq {seq} of {id} is not a checkpoint made by git session checkpoint"
            ),
            hint: Some(format!(
                "git session show {id} --type checkpoint lists its checkpoints"
            )),
        });
    };
    if !store.repo().has_object(tree) {
        return Err(OpError::Conflict {
            message: format!("the snapshot tree {tree} of seq {seq} is not in this repository"),
            hint: Some(
                "fetch the session again (git session fetch); its tree travels with it".into(),
            ),
        });
    }
    Ok(store.restore_worktree(tree)?)
}
