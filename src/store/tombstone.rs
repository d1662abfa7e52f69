//! Tombstones: how a removed session stays removed across clones.
//!
//! `git session rm <id>` deletes `refs/sessions/<id>` and writes
//! `refs/session-tombstones/<id>`, a commit with the empty tree whose
//! trailers are `Session-Id: <id>` and `Removed-Tip: <last tip>`. Push
//! sends tombstones (and deletes the remote's session ref); fetch brings
//! the remote's into `refs/remotes/<remote>/session-tombstones/`, and
//! [`Store::adopt_tombstones`] makes each valid one local and removes the
//! local session it names. [`Store::reconcile`] never creates or updates
//! a session that has a tombstone, so a copy left in a remote-tracking ref
//! or on a clone that has not synced yet cannot bring it back.
//!
//! A tombstone names an id, not a history: the id is retired for good.

use git_session_schema::SessionId;
use gix::ObjectId;
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;

use super::lock::SessionLock;
use super::refs;
use super::sync::tracking_name;
use super::{Store, StoreError, StoreResult, git};

/// What adopting fetched tombstones did: the local sessions removed, and
/// the fetched tombstones refused (id and why).
pub type Adopted = (Vec<SessionId>, Vec<(SessionId, String)>);

impl Store {
    /// Returns the tombstone commit of `id`, if the session was removed.
    pub fn tombstone(&self, id: &SessionId) -> StoreResult<Option<ObjectId>> {
        let name = refs::tombstone_ref(id);
        let Some(mut r) = self.repo.try_find_reference(name.as_str()).map_err(git)? else {
            return Ok(None);
        };
        Ok(Some(r.peel_to_id().map_err(git)?.detach()))
    }

    /// Returns the ids of every removed session.
    pub fn tombstones(&self) -> StoreResult<Vec<SessionId>> {
        self.ids_under(refs::TOMBSTONES_PREFIX)
    }

    pub(crate) fn ids_under(&self, prefix: &str) -> StoreResult<Vec<SessionId>> {
        let platform = self.repo.references().map_err(git)?;
        let mut ids = Vec::new();
        for r in platform.prefixed(prefix).map_err(git)? {
            // A ref that cannot be read is skipped here; verify reports it.
            let Ok(r) = r else { continue };
            let name = r.name().as_bstr().to_string();
            if let Some(id) = name
                .strip_prefix(prefix)
                .and_then(|s| SessionId::new(s).ok())
            {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Removes session `id` here and records its tombstone (made at
    /// `time`). Returns the removed tip. The objects stay until `git gc` prunes them.
    pub fn remove_session(&self, id: &SessionId, time: i64) -> StoreResult<ObjectId> {
        let _lock = SessionLock::acquire(&self.state_dir, id)?;
        let tip = self.existing_tip(id)?;
        if self.tombstone(id)?.is_none()
            && let Some(fetched) = self.fetched_tombstone(id)?
        {
            // A remote removed it already (its tombstone was refused while
            // this clone had more): the same tombstone, so the two agree
            // and the push has nothing to replace.
            self.repo
                .reference(
                    refs::tombstone_ref(id).as_str(),
                    fetched,
                    PreviousValue::MustNotExist,
                    "git session: rm, as the remote did",
                )
                .map_err(git)?;
        }
        if self.tombstone(id)?.is_none() {
            let message = format!(
                "remove session {id}\n\n{}: {id}\n{}: {tip}\n",
                refs::TRAILER_SESSION,
                refs::TRAILER_REMOVED_TIP
            );
            let empty = self
                .repo
                .write_object(gix::objs::Tree::empty())
                .map_err(git)?
                .detach();
            let commit = self.write_commit(time, &message, empty, None)?;
            self.repo
                .reference(
                    refs::tombstone_ref(id).as_str(),
                    commit,
                    PreviousValue::MustNotExist,
                    "git session: rm",
                )
                .map_err(git)?;
        }
        self.delete_ref(&refs::session_ref(id), tip)?;
        Ok(tip)
    }

    /// Makes the fetched tombstones of `remote` local (each must be a
    /// commit whose `Session-Id` trailer is the id in its ref name, and
    /// pass `accept`, the caller's signature policy; others are returned
    /// as problems) and removes the sessions they name.
    /// Returns the ids removed here and the tombstones refused.
    ///
    /// `published` gives the remote's tip of a session as last fetched. A
    /// tombstone removes what its remover had: the local session goes only
    /// when its tip is the removed tip, one of that tip's ancestors, or
    /// was on the remote (the remover could have had it). Events captured
    /// here and never pushed are kept, and the tombstone refused with what
    /// to do.
    pub fn adopt_tombstones(
        &self,
        remote: &str,
        accept: &dyn Fn(ObjectId) -> Result<(), String>,
        published: &dyn Fn(&SessionId) -> Option<ObjectId>,
    ) -> StoreResult<Adopted> {
        let prefix = refs::tracking_tombstones_prefix(&tracking_name(remote));
        let mut refused = Vec::new();
        for id in self.ids_under(&prefix)? {
            if self.tombstone(&id)?.is_some() {
                continue;
            }
            let name = format!("{prefix}{id}");
            let Some(mut r) = self.repo.try_find_reference(name.as_str()).map_err(git)? else {
                continue;
            };
            let oid = r.peel_to_id().map_err(git)?.detach();
            match self.tombstone_names(oid) {
                Some((named, removed_tip)) if named == id.as_str() => {
                    if let Err(why) = accept(oid) {
                        refused.push((id.clone(), format!("tombstone {oid} {why}")));
                        continue;
                    }
                    if let Some(ours) = self.tip(&id)? {
                        let covered = |tip: ObjectId| tip == ours || self.chain_contains(tip, ours);
                        if !removed_tip.is_some_and(covered) && !published(&id).is_some_and(covered)
                        {
                            refused.push((
                                id.clone(),
                                format!(
                                    "the remote removed it (git session rm), but this clone has events of it the remover never had (captured here and not pushed); the session is kept here: `git session fork {id}` keeps them under a new id, `git session rm {id}` removes it here too"
                                ),
                            ));
                            continue;
                        }
                    }
                    self.repo
                        .reference(
                            refs::tombstone_ref(&id).as_str(),
                            oid,
                            PreviousValue::MustNotExist,
                            "git session: tombstone from remote",
                        )
                        .map_err(git)?;
                }
                _ => refused.push((
                    id.clone(),
                    format!("tombstone {oid} is not a tombstone commit for {id}"),
                )),
            }
        }
        let mut removed = Vec::new();
        for id in self.tombstones()? {
            let _lock = SessionLock::acquire(&self.state_dir, &id)?;
            if let Some(tip) = self.tip(&id)? {
                self.delete_ref(&refs::session_ref(&id), tip)?;
                removed.push(id);
            }
        }
        Ok((removed, refused))
    }

    /// Returns a fetched tombstone of session `id` (from any remote) that
    /// is one, if there is.
    fn fetched_tombstone(&self, id: &SessionId) -> StoreResult<Option<ObjectId>> {
        let suffix = format!(
            "/{}{id}",
            refs::TOMBSTONES_PREFIX.trim_start_matches("refs/")
        );
        let platform = self.repo.references().map_err(git)?;
        for r in platform.prefixed("refs/remotes/").map_err(git)? {
            let Ok(mut r) = r else { continue };
            if !r.name().as_bstr().to_string().ends_with(&suffix) {
                continue;
            }
            let Ok(oid) = r.peel_to_id().map(|o| o.detach()) else {
                continue;
            };
            if self
                .tombstone_names(oid)
                .is_some_and(|(named, _)| named == id.as_str())
            {
                return Ok(Some(oid));
            }
        }
        Ok(None)
    }

    /// Returns the session a tombstone commit names and the removed tip
    /// it names (when that is an object id), if it is one.
    fn tombstone_names(&self, oid: ObjectId) -> Option<(String, Option<ObjectId>)> {
        let header = self.repo.find_header(oid).ok()?;
        if header.kind() != gix::objs::Kind::Commit || header.size() > 64 << 10 {
            return None;
        }
        let commit = self.repo.find_commit(oid).ok()?;
        let message = commit.message_raw().ok()?.to_string();
        let mut session = None;
        let mut removed = None;
        for line in message.lines() {
            if let Some(v) = line.strip_prefix(&format!("{}: ", refs::TRAILER_SESSION)) {
                session = Some(v.trim().to_owned());
            }
            if let Some(v) = line.strip_prefix(&format!("{}: ", refs::TRAILER_REMOVED_TIP)) {
                removed = Some(ObjectId::from_hex(v.trim().as_bytes()).ok());
            }
        }
        Some((session?, removed?))
    }

    fn delete_ref(&self, name: &str, expected: ObjectId) -> StoreResult<()> {
        use gix::refs::transaction::{Change, RefEdit, RefLog};
        self.repo
            .edit_reference(RefEdit {
                change: Change::Delete {
                    expected: PreviousValue::MustExistAndMatch(Target::Object(expected)),
                    log: RefLog::AndReference,
                },
                name: name
                    .try_into()
                    .map_err(|e: gix::validate::reference::name::Error| {
                        StoreError::Git(gix::Error::from_error(e))
                    })?,
                deref: false,
            })
            .map_err(git)?;
        Ok(())
    }
}
