//! Session metadata (title, tags, notes, pinned, hidden, task): one ref per
//! session, `refs/session-meta/<id>`, one commit per change.
//!
//! A change commit's tree holds `change.json` (the [`MetaChange`]) and
//! `meta.json` (the state after it, so a reader looks at the tip only). Two
//! clones that changed the same session concurrently are reconciled by a
//! merge commit whose `meta.json` replays every change of both sides in
//! `(time, commit id)` order: last writer wins per field, and the history of
//! both stays reachable (`log --meta`). The merge commit is deterministic
//! (parents sorted, fixed committer, the later tip's time), so two clones
//! that merge the same pair write the same commit.
//!
//! A fetched metadata ref is untrusted: before it is adopted every commit
//! of its history is checked (a commit within size, naming the session,
//! only `change.json`/`meta.json` blobs within size, valid changes, at most
//! [`MAX_META_COMMITS`] commits) and its tip's `meta.json` must be what its
//! changes replay to. Otherwise it stays in the remote-tracking namespace.

use std::collections::{HashMap, HashSet};

use git_session_schema::{Meta, MetaChange, SessionId};
use gix::ObjectId;
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;

use super::refs;
use super::sync::tracking_name;
use super::{Store, StoreError, StoreResult, git};

/// Most commits one session's metadata history may have.
pub const MAX_META_COMMITS: usize = 10_000;
/// Largest `change.json` or metadata commit read.
const MAX_CHANGE: u64 = 64 << 10;
/// Largest `meta.json` read.
const MAX_STATE: u64 = 1 << 20;

/// One change in a session's metadata history.
#[derive(Clone, Debug)]
pub struct MetaEntry {
    /// The commit that made it.
    pub commit: ObjectId,
    /// Who made it: the commit's author, `Name <email>`.
    pub author: String,
    /// The change.
    pub change: MetaChange,
}

/// Says what reconciling one fetched metadata ref did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaReconciled {
    /// Both sides are the same, or ours has everything theirs has.
    Unchanged,
    /// New here.
    Created,
    /// Theirs had more; ours moved forward.
    FastForwarded,
    /// Both changed: a merge commit holds both histories.
    Merged,
    /// Not adopted, and why.
    Quarantined(String),
}

impl Store {
    /// Returns the tip of a session's metadata, if it has any.
    pub fn meta_tip(&self, id: &SessionId) -> StoreResult<Option<ObjectId>> {
        let name = refs::meta_ref(id);
        let Some(mut r) = self.repo.try_find_reference(name.as_str()).map_err(git)? else {
            return Ok(None);
        };
        Ok(Some(r.peel_to_id().map_err(git)?.detach()))
    }

    /// Returns a session's metadata (empty when it has none).
    pub fn meta(&self, id: &SessionId) -> StoreResult<Meta> {
        match self.meta_tip(id)? {
            Some(tip) => self.meta_state_at(id, tip),
            None => Ok(Meta::default()),
        }
    }

    /// Records `change` as one commit on the session's metadata ref (made
    /// at `time`, signed like any session commit) and returns the new state.
    pub fn change_meta(&self, id: &SessionId, change: &MetaChange, time: i64) -> StoreResult<Meta> {
        change.validate().map_err(StoreError::Refused)?;
        let _lock = self.lock_state(&format!("meta-{id}"))?;
        let old = self.meta_tip(id)?;
        let mut meta = match old {
            Some(tip) => self.meta_state_at(id, tip)?,
            None => Meta::default(),
        };
        meta.apply(change);
        let change_blob = self
            .repo
            .write_blob(serde_json::to_vec(change).expect("plain data serializes"))
            .map_err(git)?
            .detach();
        let tree = self.meta_tree(Some(change_blob), &meta)?;
        let message = format!(
            "{}\n\n{}: {id}\n",
            one_line_subject(&change.describe()),
            refs::TRAILER_SESSION
        );
        let commit = self.write_commit(time, &message, tree, old)?;
        self.set_meta_ref(id, old, commit, "git session: metadata")?;
        Ok(meta)
    }

    /// Returns every change of a session's metadata, newest first (replay
    /// order reversed), with who made it.
    pub fn meta_log(&self, id: &SessionId) -> StoreResult<Vec<MetaEntry>> {
        let Some(tip) = self.meta_tip(id)? else {
            return Ok(Vec::new());
        };
        let mut entries: Vec<MetaEntry> = self
            .meta_changes(id, &[tip])?
            .into_iter()
            .map(|(commit, change)| {
                let author = self
                    .repo
                    .find_commit(commit)
                    .ok()
                    .and_then(|c| c.author().ok().map(|a| format!("{} <{}>", a.name, a.email)))
                    .unwrap_or_default();
                MetaEntry {
                    commit,
                    author,
                    change,
                }
            })
            .collect();
        entries.sort_by(|a, b| {
            (b.change.time.as_str(), b.commit.to_string())
                .cmp(&(a.change.time.as_str(), a.commit.to_string()))
        });
        Ok(entries)
    }

    /// Returns the ids of every session with metadata.
    pub fn meta_ids(&self) -> StoreResult<Vec<SessionId>> {
        self.ids_under(refs::META_PREFIX)
    }

    /// Returns the fetched metadata refs of `remote`: id and tip.
    pub fn tracking_meta(&self, remote: &str) -> StoreResult<Vec<(SessionId, ObjectId)>> {
        let prefix = refs::tracking_meta_prefix(&tracking_name(remote));
        let mut out = Vec::new();
        for id in self.ids_under(&prefix)? {
            let name = format!("{prefix}{id}");
            let Ok(Some(mut r)) = self.repo.try_find_reference(name.as_str()) else {
                continue;
            };
            let Ok(tip) = r.peel_to_id() else { continue };
            out.push((id, tip.detach()));
        }
        Ok(out)
    }

    /// Brings the local metadata of `id` in line with a fetched tip (see
    /// the module docs); never loses a change of either side.
    pub fn reconcile_meta(&self, id: &SessionId, theirs: ObjectId) -> StoreResult<MetaReconciled> {
        let _lock = self.lock_state(&format!("meta-{id}"))?;
        let ours = self.meta_tip(id)?;
        if ours == Some(theirs) {
            return Ok(MetaReconciled::Unchanged);
        }
        if let Some(o) = ours
            && self.meta_ancestors(o)?.contains(&theirs)
        {
            return Ok(MetaReconciled::Unchanged);
        }
        let their_changes = match self.meta_changes(id, &[theirs]) {
            Ok(c) => c,
            Err(StoreError::Corrupt { message, .. }) => {
                return Ok(MetaReconciled::Quarantined(message));
            }
            Err(e) => return Err(e),
        };
        let hexes: Vec<String> = their_changes.iter().map(|(c, _)| c.to_string()).collect();
        let replayed = Meta::replay(
            their_changes
                .iter()
                .zip(&hexes)
                .map(|((_, ch), h)| (ch, h.as_str())),
        );
        match self.meta_state_at(id, theirs) {
            Ok(stated) if stated == replayed => {}
            Ok(_) => {
                return Ok(MetaReconciled::Quarantined(format!(
                    "its meta.json (commit {theirs}) is not what its changes replay to"
                )));
            }
            Err(StoreError::Corrupt { message, .. }) => {
                return Ok(MetaReconciled::Quarantined(message));
            }
            Err(e) => return Err(e),
        }
        let Some(ours) = ours else {
            self.set_meta_ref(id, None, theirs, "git session: metadata from remote")?;
            return Ok(MetaReconciled::Created);
        };
        if self.meta_ancestors(theirs)?.contains(&ours) {
            self.set_meta_ref(id, Some(ours), theirs, "git session: metadata from remote")?;
            return Ok(MetaReconciled::FastForwarded);
        }
        // Both changed: replay the union of both histories.
        let mut all: HashMap<ObjectId, MetaChange> = their_changes.into_iter().collect();
        all.extend(self.meta_changes(id, &[ours])?);
        let hexes: Vec<(ObjectId, String)> = all.keys().map(|c| (*c, c.to_string())).collect();
        let meta = Meta::replay(hexes.iter().map(|(c, h)| (&all[c], h.as_str())));
        let tree = self.meta_tree(None, &meta)?;
        let mut parents = [ours, theirs];
        parents.sort();
        let time = parents
            .iter()
            .filter_map(|p| self.repo.find_commit(*p).ok()?.time().ok())
            .max_by_key(|t| t.seconds)
            .unwrap_or_default();
        let sig = gix::actor::Signature {
            name: "git-session".into(),
            email: "git-session@localhost".into(),
            time,
        };
        let mut buf = gix::date::parse::TimeBuf::default();
        let sig = sig.to_ref(&mut buf);
        let message = format!(
            "merge concurrent metadata changes\n\n{}: {id}\n",
            refs::TRAILER_SESSION
        );
        let merge = self
            .repo
            .new_commit_as(sig, sig, &message, tree, parents)
            .map_err(git)?
            .id;
        self.set_meta_ref(id, Some(ours), merge, "git session: merge metadata")?;
        Ok(MetaReconciled::Merged)
    }

    fn set_meta_ref(
        &self,
        id: &SessionId,
        old: Option<ObjectId>,
        new: ObjectId,
        why: &str,
    ) -> StoreResult<()> {
        let expected = match old {
            Some(o) => PreviousValue::MustExistAndMatch(Target::Object(o)),
            None => PreviousValue::MustNotExist,
        };
        self.repo
            .reference(refs::meta_ref(id).as_str(), new, expected, why)
            .map_err(|_| StoreError::Contended(id.clone()))?;
        Ok(())
    }

    fn meta_tree(&self, change: Option<ObjectId>, meta: &Meta) -> StoreResult<ObjectId> {
        use gix::objs::tree::{Entry, EntryKind};
        let state = self
            .repo
            .write_blob(serde_json::to_vec(meta).expect("plain data serializes"))
            .map_err(git)?
            .detach();
        let mut entries = Vec::new();
        if let Some(c) = change {
            entries.push(Entry {
                mode: EntryKind::Blob.into(),
                filename: refs::META_CHANGE_PATH.into(),
                oid: c,
            });
        }
        entries.push(Entry {
            mode: EntryKind::Blob.into(),
            filename: refs::META_STATE_PATH.into(),
            oid: state,
        });
        Ok(self
            .repo
            .write_object(gix::objs::Tree { entries })
            .map_err(git)?
            .detach())
    }

    /// Reads the `meta.json` of a metadata commit.
    pub(super) fn meta_state_at(&self, id: &SessionId, commit: ObjectId) -> StoreResult<Meta> {
        let blob = self
            .meta_blob(id, commit, refs::META_STATE_PATH, MAX_STATE)?
            .ok_or_else(|| StoreError::Corrupt {
                id: id.clone(),
                message: format!("metadata commit {commit} has no {}", refs::META_STATE_PATH),
            })?;
        serde_json::from_slice(&blob).map_err(|e| StoreError::Corrupt {
            id: id.clone(),
            message: format!(
                "{} of metadata commit {commit} does not parse: {e}",
                refs::META_STATE_PATH
            ),
        })
    }

    fn meta_blob(
        &self,
        id: &SessionId,
        commit: ObjectId,
        path: &str,
        limit: u64,
    ) -> StoreResult<Option<Vec<u8>>> {
        let tree = self.commit_tree(commit)?;
        let Some(entry) = self
            .repo
            .find_tree(tree)
            .map_err(git)?
            .lookup_entry_by_path(path)
            .map_err(git)?
        else {
            return Ok(None);
        };
        self.bounded_blob(
            id,
            entry.object_id(),
            &format!("metadata {path}"),
            limit,
            "fixed",
        )
        .map(Some)
    }

    /// Returns every commit reachable from `tip` (all parents), bounded.
    fn meta_ancestors(&self, tip: ObjectId) -> StoreResult<HashSet<ObjectId>> {
        let mut seen = HashSet::new();
        let mut todo = vec![tip];
        while let Some(c) = todo.pop() {
            if !seen.insert(c) || seen.len() > MAX_META_COMMITS {
                continue;
            }
            let commit = self.repo.find_commit(c).map_err(git)?;
            todo.extend(commit.parent_ids().map(|p| p.detach()));
        }
        Ok(seen)
    }

    /// Walks the history from `tips` and returns each change commit with
    /// its change, checking every commit on the way (the module docs say
    /// what); a failed check is [`StoreError::Corrupt`] naming the commit.
    fn meta_changes(
        &self,
        id: &SessionId,
        tips: &[ObjectId],
    ) -> StoreResult<Vec<(ObjectId, MetaChange)>> {
        let corrupt = |message: String| StoreError::Corrupt {
            id: id.clone(),
            message,
        };
        let mut seen = HashSet::new();
        let mut todo: Vec<ObjectId> = tips.to_vec();
        let mut out = Vec::new();
        while let Some(c) = todo.pop() {
            if !seen.insert(c) {
                continue;
            }
            if seen.len() > MAX_META_COMMITS {
                return Err(corrupt(format!(
                    "its metadata history has more than {MAX_META_COMMITS} commits"
                )));
            }
            let header = self
                .repo
                .find_header(c)
                .map_err(|e| corrupt(format!("metadata commit {c} cannot be read: {e}")))?;
            if header.kind() != gix::objs::Kind::Commit || header.size() > MAX_CHANGE {
                return Err(corrupt(format!(
                    "metadata object {c} is not a commit of at most {MAX_CHANGE} bytes"
                )));
            }
            let commit = self.repo.find_commit(c).map_err(git)?;
            let message = commit.message_raw().map_err(git)?.to_string();
            let names = message
                .lines()
                .filter_map(|l| l.strip_prefix(&format!("{}: ", refs::TRAILER_SESSION)))
                .next_back();
            if names != Some(id.as_str()) {
                return Err(corrupt(format!(
                    "metadata commit {c} does not name session {id} in a {} trailer",
                    refs::TRAILER_SESSION
                )));
            }
            let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
            if parents.len() > 2 {
                return Err(corrupt(format!(
                    "metadata commit {c} has more than two parents"
                )));
            }
            let tree = self.repo.find_tree(self.commit_tree(c)?).map_err(git)?;
            for entry in tree.iter() {
                let entry = entry.map_err(git)?;
                let name = entry.filename().to_string();
                if !entry.mode().is_blob()
                    || (name != refs::META_CHANGE_PATH && name != refs::META_STATE_PATH)
                {
                    return Err(corrupt(format!(
                        "metadata commit {c} holds {name:?}, which is not part of the layout"
                    )));
                }
            }
            let change = self.meta_blob(id, c, refs::META_CHANGE_PATH, MAX_CHANGE)?;
            match (change, parents.len()) {
                (Some(bytes), 0 | 1) => {
                    let change: MetaChange = serde_json::from_slice(&bytes).map_err(|e| {
                        corrupt(format!(
                            "{} of metadata commit {c} does not parse: {e}",
                            refs::META_CHANGE_PATH
                        ))
                    })?;
                    change
                        .validate()
                        .map_err(|why| corrupt(format!("metadata commit {c}: {why}")))?;
                    out.push((c, change));
                }
                (None, 2) => {}
                _ => {
                    return Err(corrupt(format!(
                        "metadata commit {c} is neither one change nor a merge"
                    )));
                }
            }
            todo.extend(parents);
        }
        Ok(out)
    }
}

fn one_line_subject(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(72)
        .collect();
    format!("meta: {line}")
}
