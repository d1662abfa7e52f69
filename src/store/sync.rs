//! Sync with ordinary git remotes: the `git` binary moves refs (gix cannot
//! push, and git honours the user's credentials, ssh config and insteadOf),
//! and reconciliation turns fetched session refs into local ones.
//!
//! Conflict-free by construction: a fetched session that extends the local
//! one fast-forwards it; one the local side extends waits for the push; and
//! when both appended (a divergence) the remote's history keeps the session
//! id while the local tail becomes a fork session. The fork's commits are
//! built only from the diverged commits themselves (their trees, trailers,
//! author and time, with a fixed committer), so every clone that does the
//! same reconciliation gets byte-identical commits. Nothing is
//! force-pushed: the remote's events stay where they are, ours move to the
//! fork, and both end up everywhere. The one exception is a history
//! `git session purge` replaced (`purge.rs`). A remote that itself dropped
//! commits it had published (its tip as last fetched or pushed, kept in
//! the remote-tracking ref) was force-pushed over, and is not followed
//! (see [`Reconciled::Rewritten`]).

use std::collections::HashSet;

use git_session_schema::{Lineage, SessionHeader, SessionId};
use gix::ObjectId;
use gix::objs::tree::EntryKind;
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;

use super::lock::SessionLock;
use super::refs;
use super::trailers::Trailers;
use super::{Store, StoreError, StoreResult, git};

/// Says what reconciling one fetched session did locally.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reconciled {
    /// The session was new here and was created from the remote.
    Created,
    /// Both sides are the same.
    Unchanged,
    /// The remote had more; the local ref moved forward.
    FastForwarded,
    /// The local side has more; a push will send it.
    LocalAhead,
    /// The remote's history replaces the local one: a `git session purge`
    /// elsewhere rewrote it, and the local session had nothing after the
    /// purged tip.
    Replaced,
    /// Both appended: the local tail is now the fork session `fork`, and the
    /// session itself follows the remote.
    Diverged {
        /// The fork holding the local tail.
        fork: SessionId,
    },
    /// The fetched history failed verification, or is unrelated to the
    /// local one: it stays in the remote-tracking ref only, and the local
    /// session (if any) is untouched.
    Quarantined {
        /// Why, naming the problem.
        reason: String,
        /// Whether it is a conflict with an existing local session (the
        /// remote's ref cannot be pushed over without force).
        conflict: bool,
    },
    /// The session was removed (`git session rm`); its tombstone keeps
    /// the fetched copy out.
    Removed,
    /// The remote's history no longer holds `published`, the tip it had
    /// when last fetched, which the local session holds: it was rewritten
    /// (force-pushed), not appended to. The local session is untouched and
    /// the remote's history stays out, like a quarantined conflict.
    Rewritten {
        /// The remote's tip as last fetched.
        published: ObjectId,
        /// Why, naming the commit and its events.
        reason: String,
    },
}

/// Says how a push went for one ref.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushRejection {
    /// The ref the remote refused.
    pub refname: String,
    /// git's reason, e.g. `fetch first`.
    pub reason: String,
}

impl Store {
    /// Fetches `remote`'s sessions and receipts into the tracking namespace.
    pub fn fetch_sessions(&self, remote: &str) -> StoreResult<()> {
        let mut args = vec![
            // Objects above this are streamed, never inflated whole in
            // memory, while git receives them: a fetched decompression
            // bomb costs disk, not RAM, and verification then refuses it
            // from its header (see `Limits`).
            "-c".to_owned(),
            "core.bigFileThreshold=16m".to_owned(),
            "fetch".to_owned(),
            "--quiet".to_owned(),
            "--no-write-fetch-head".to_owned(),
            // Only within our refspecs: a session deleted on the remote
            // (by a tombstone's push) leaves no stale tracking ref.
            "--prune".to_owned(),
            remote.to_owned(),
        ];
        args.extend(refs::fetch_refspecs(&tracking_name(remote)));
        let out = self.run_git_network(&args)?;
        if !out.status.success() {
            return Err(StoreError::Remote(format!(
                "git fetch {remote} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// Returns the fetched refs of `remote` under its sessions namespace
    /// whose names are no session id, each with why: never read, only
    /// reported.
    pub fn tracking_invalid(&self, remote: &str) -> StoreResult<Vec<(String, String)>> {
        let prefix = refs::tracking_prefix(&tracking_name(remote));
        let platform = self.repo.references().map_err(git)?;
        let mut out = Vec::new();
        for r in platform.prefixed(prefix.as_str()).map_err(git)? {
            let Ok(r) = r else { continue };
            let name = r.name().as_bstr().to_string();
            if let Some(Err(e)) = name.strip_prefix(&prefix).map(SessionId::new) {
                out.push((name, e.to_string()));
            }
        }
        Ok(out)
    }

    /// Returns the fetched session refs of `remote`: id and tip.
    pub fn tracking_sessions(&self, remote: &str) -> StoreResult<Vec<(SessionId, ObjectId)>> {
        let prefix = refs::tracking_prefix(&tracking_name(remote));
        let platform = self.repo.references().map_err(git)?;
        let mut out = Vec::new();
        for r in platform.prefixed(prefix.as_str()).map_err(git)? {
            // A ref git itself cannot read names nothing to reconcile.
            let Ok(mut r) = r else { continue };
            let name = r.name().as_bstr().to_string();
            let Some(id) = name
                .strip_prefix(&prefix)
                .and_then(|s| SessionId::new(s).ok())
            else {
                continue;
            };
            let Ok(tip) = r.peel_to_id() else { continue };
            out.push((id, tip.detach()));
        }
        Ok(out)
    }

    /// Pushes every local session, every tombstone (deleting the remote's
    /// copy of each removed session it still has, as last fetched) and the
    /// receipts notes, if any, to `remote` without force (except the
    /// remote's copies of purged histories, replaced with a lease: see
    /// `purge.rs`); returns the refs the remote refused.
    pub fn push_sessions(&self, remote: &str) -> StoreResult<Vec<PushRejection>> {
        // Loose session objects are packed first (see `pack.rs`): the push
        // then sends that pack's data as it is instead of compressing every
        // chunk again. A failed pack only makes the push slower.
        let _ = self.pack_pending();
        let mut args = vec![
            "push".to_owned(),
            "--porcelain".to_owned(),
            remote.to_owned(),
            format!("{0}*:{0}*", refs::SESSIONS_PREFIX),
        ];
        let tombstones = self.tombstones()?;
        let receipts = self
            .repo
            .try_find_reference(refs::RECEIPTS_NOTES_REF)
            .map_err(git)?
            .is_some();
        let meta = !self.meta_ids()?.is_empty();
        // Nothing of ours to send: git would fail with "No refs in common
        // and none specified" for the empty glob.
        if self.session_ids()?.is_empty() && tombstones.is_empty() && !receipts && !meta {
            return Ok(Vec::new());
        }
        if meta {
            args.push(format!("{0}*:{0}*", refs::META_PREFIX));
        }
        if !tombstones.is_empty() {
            args.push(format!("{0}*:{0}*", refs::TOMBSTONES_PREFIX));
            let theirs: HashSet<SessionId> = self
                .tracking_sessions(remote)?
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            for id in tombstones.iter().filter(|id| theirs.contains(id)) {
                args.push(format!(":{}", refs::session_ref(id)));
            }
        }
        if receipts {
            args.push(format!("{0}:{0}", refs::RECEIPTS_NOTES_REF));
        }
        let replaced = self.push_replacements(remote)?;
        let pushed_tips: std::collections::HashMap<SessionId, ObjectId> = self
            .session_tips()?
            .into_iter()
            .filter_map(|(id, tip)| Some((id, tip.ok()?)))
            .collect();
        let out = self.run_git_network(&args)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        self.track_pushed(remote, &stdout, &pushed_tips)?;
        let mut rejected: Vec<PushRejection> = stdout
            .lines()
            .filter(|l| l.starts_with('!'))
            .filter_map(|l| {
                let mut parts = l.split('\t');
                let _flag = parts.next()?;
                let spec = parts.next()?;
                let reason = parts.next().unwrap_or("").to_owned();
                Some(PushRejection {
                    refname: spec.split(':').nth(1).unwrap_or(spec).to_owned(),
                    reason,
                })
            })
            .collect();
        rejected.extend(
            replaced
                .into_iter()
                .map(|(refname, reason)| PushRejection { refname, reason }),
        );
        if !out.status.success() && rejected.is_empty() {
            return Err(StoreError::Remote(format!(
                "git push {remote} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(rejected)
    }

    /// Moves `remote`'s tracking refs of the sessions a push sent (git's
    /// `--porcelain` lines, `stdout`) to what it sent, as git does for its
    /// own remote-tracking branches: the remote has that tip now, so a
    /// later fetch judges the remote's history against it (see
    /// [`Reconciled::Rewritten`]). `before` holds the local tips read
    /// before the push; a session captured into meanwhile is left for the
    /// next fetch, since which of its tips went is not known.
    fn track_pushed(
        &self,
        remote: &str,
        stdout: &str,
        before: &std::collections::HashMap<SessionId, ObjectId>,
    ) -> StoreResult<()> {
        use gix::refs::transaction::{Change, LogChange, RefEdit, RefLog};
        let prefix = refs::tracking_prefix(&tracking_name(remote));
        let mut edits = Vec::new();
        for line in stdout.lines() {
            let mut parts = line.split('\t');
            let (Some(flag), Some(spec)) = (parts.next(), parts.next()) else {
                continue;
            };
            if !matches!(flag, " " | "+" | "*" | "=") {
                continue;
            }
            let Some(id) = spec
                .split_once(':')
                .and_then(|(_, to)| to.strip_prefix(refs::SESSIONS_PREFIX))
                .and_then(|id| SessionId::new(id).ok())
            else {
                continue;
            };
            let Some(sent) = before.get(&id).copied() else {
                continue;
            };
            if self.tip(&id)? != Some(sent) {
                continue;
            }
            edits.push(RefEdit {
                change: Change::Update {
                    log: LogChange {
                        mode: RefLog::AndReference,
                        force_create_reflog: false,
                        message: "git session: pushed".into(),
                    },
                    expected: PreviousValue::Any,
                    new: Target::Object(sent),
                },
                name: format!("{prefix}{id}").try_into().map_err(
                    |e: gix::validate::reference::name::Error| {
                        StoreError::Git(gix::Error::from_error(e))
                    },
                )?,
                deref: false,
            });
        }
        if !edits.is_empty() {
            self.edit_session_refs(edits).map_err(|message| {
                StoreError::Remote(format!(
                    "pushed, but recording what was pushed failed: {message}"
                ))
            })?;
        }
        Ok(())
    }

    /// Merges the remote's receipts notes into ours (union of both; git's
    /// `cat_sort_uniq` strategy, so no note is ever overwritten).
    pub fn merge_notes(&self, remote: &str) -> StoreResult<()> {
        let theirs = format!(
            "{}receipts",
            refs::tracking_notes_prefix(&tracking_name(remote))
        );
        let Some(mut theirs_ref) = self.repo.try_find_reference(theirs.as_str()).map_err(git)?
        else {
            return Ok(());
        };
        let theirs_id = theirs_ref.peel_to_id().map_err(git)?.detach();
        let ours = self
            .repo
            .try_find_reference(refs::RECEIPTS_NOTES_REF)
            .map_err(git)?;
        let Some(mut ours) = ours else {
            self.repo
                .reference(
                    refs::RECEIPTS_NOTES_REF,
                    theirs_id,
                    PreviousValue::MustNotExist,
                    "git session: receipts from remote",
                )
                .map_err(git)?;
            return self.keep_local_receipts(&std::collections::HashMap::new());
        };
        let ours_id = ours.peel_to_id().map_err(git)?.detach();
        if ours_id == theirs_id {
            return Ok(());
        }
        let before: std::collections::HashMap<ObjectId, Vec<u8>> =
            self.receipt_notes()?.into_iter().collect();
        let out = self.receipt_notes_git(&[
            "merge".into(),
            "--quiet".into(),
            "-s".into(),
            "cat_sort_uniq".into(),
            theirs,
        ])?;
        if !out.status.success() {
            return Err(StoreError::Remote(format!(
                "merging fetched receipts failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        self.keep_local_receipts(&before)
    }

    /// After a merge of fetched receipts: puts back every receipt line this
    /// clone had that the merge dropped (git fast-forwards a notes ref that
    /// descends from ours, so a remote that removed or replaced a note
    /// would remove it here too), and removes notes the remote added on
    /// anything but a session commit (receipts are only ever on those).
    fn keep_local_receipts(
        &self,
        before: &std::collections::HashMap<ObjectId, Vec<u8>>,
    ) -> StoreResult<()> {
        let lines = |body: &[u8]| -> std::collections::BTreeSet<Vec<u8>> {
            body.split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec)
                .collect()
        };
        let after: std::collections::HashMap<ObjectId, Vec<u8>> =
            self.receipt_notes()?.into_iter().collect();
        for (commit, old) in before {
            let now = after.get(commit).map(|b| lines(b)).unwrap_or_default();
            let old = lines(old);
            if old.is_subset(&now) {
                continue;
            }
            // The union, sorted, as the merge's cat_sort_uniq writes it.
            let mut body = Vec::new();
            for line in old.union(&now) {
                body.extend_from_slice(line);
                body.push(b'\n');
            }
            let time = self
                .repo
                .find_commit(*commit)
                .ok()
                .and_then(|c| c.time().ok())
                .map_or(0, |t| t.seconds);
            self.write_receipt_note(*commit, &body, time, true)?;
        }
        for commit in after.keys().filter(|c| !before.contains_key(*c)) {
            if !self.is_session_commit(*commit) {
                self.remove_receipt_note(*commit)?;
            }
        }
        Ok(())
    }

    /// Says whether `commit` is a session commit (its message carries the
    /// session trailers).
    fn is_session_commit(&self, commit: ObjectId) -> bool {
        self.repo
            .find_header(commit)
            .is_ok_and(|h| h.kind() == gix::objs::Kind::Commit && h.size() <= 1 << 20)
            && self
                .repo
                .find_commit(commit)
                .ok()
                .and_then(|c| c.message_raw().ok().and_then(|m| Trailers::parse(m)))
                .is_some()
    }

    /// Brings the local session `id` in line with a fetched tip.
    ///
    /// Nothing new becomes a session ref unverified: the fetched history
    /// must pass [`Store::verify_at`] as session `id` (header naming `id`,
    /// a known format, append-only batches, an unbroken chain and seqs,
    /// layout and size limits), keep the local header unchanged, and share
    /// history with the local session. Otherwise it is
    /// [`Reconciled::Quarantined`] and stays in the remote-tracking ref.
    ///
    /// `published` is the remote's tip as last fetched, if known: a
    /// history that split from the local one is followed (the local tail
    /// becoming a fork) only when it still holds that tip. Sessions only
    /// grow on a remote, so one that lost commits it had published, and
    /// that this clone holds, was force-pushed over, and following it
    /// would hand the session's id (and the agents that resume it) to
    /// whoever rewrote it.
    pub fn reconcile(
        &self,
        id: &SessionId,
        theirs: ObjectId,
        published: Option<ObjectId>,
    ) -> StoreResult<Reconciled> {
        let _lock = SessionLock::acquire(&self.state_dir, id)?;
        if self.tombstone(id)?.is_some() {
            return Ok(Reconciled::Removed);
        }
        let name = refs::session_ref(id);
        let ours = self.tip(id)?;
        if ours == Some(theirs) {
            return Ok(Reconciled::Unchanged);
        }
        let ours_vec = match ours {
            Some(o) => self.first_parent_chain(o)?,
            None => Vec::new(),
        };
        let ours_chain: HashSet<ObjectId> = ours_vec.iter().copied().collect();
        if ours_chain.contains(&theirs) {
            return Ok(Reconciled::LocalAhead);
        }
        // A fetched tip that extends the local one is checked from there
        // on (the local history is ours already); anything else in full.
        let theirs_chain = self.first_parent_chain(theirs).unwrap_or_default();
        // History this clone purged never comes back (see `purge.rs`).
        if let Some(root) = ours_vec.last() {
            let purged = self.root_purged_tips(*root)?;
            let theirs_set: HashSet<ObjectId> = theirs_chain.iter().copied().collect();
            if !purged.is_empty() && self.in_purged_history(theirs, &theirs_set, &purged) {
                return Ok(Reconciled::Quarantined {
                    reason: "it is history purged here (git session purge); the next push replaces it on the remote".into(),
                    conflict: false,
                });
            }
        }
        let report = match ours.filter(|o| theirs_chain.contains(o)) {
            Some(o) => self.verify_since(id, o, theirs),
            None => self.verify_at(id, theirs),
        };
        if !report.is_ok() {
            // History and structure first: they say what the pusher did;
            // the event problems that follow from it come after.
            let mut problems = report.problems.clone();
            problems.sort_by_key(|p| p.seq.is_some());
            let mut reason: Vec<String> =
                problems.iter().take(3).map(|p| p.message.clone()).collect();
            if report.problems.len() > 3 {
                reason.push(format!("{} more", report.problems.len() - 3));
            }
            return Ok(Reconciled::Quarantined {
                reason: reason.join("; "),
                conflict: ours.is_some(),
            });
        }
        let Some(ours) = ours else {
            self.repo
                .reference(
                    name.as_str(),
                    theirs,
                    PreviousValue::MustNotExist,
                    "git session: fetched",
                )
                .map_err(git)?;
            return Ok(Reconciled::Created);
        };
        // A purge elsewhere replaced the history we have: follow it, unless
        // we added to the purged history since (that tail is ours alone).
        if let Some(root) = theirs_chain.last()
            && !theirs_chain.contains(&ours)
        {
            let purged = self.root_purged_tips(*root)?;
            if purged
                .iter()
                .any(|p| *p == ours || self.chain_contains(*p, ours))
            {
                if let Some(why) = self.purge_mismatch(id, ours, theirs)? {
                    return Ok(Reconciled::Quarantined {
                        reason: format!(
                            "it claims to replace this session's history by purge, but {why}"
                        ),
                        conflict: true,
                    });
                }
                self.repo
                    .reference(
                        name.as_str(),
                        theirs,
                        PreviousValue::MustExistAndMatch(Target::Object(ours)),
                        "git session: purged history from remote",
                    )
                    .map_err(git)?;
                return Ok(Reconciled::Replaced);
            }
            if let Some(p) = purged.iter().find(|p| ours_chain.contains(*p)) {
                return Ok(Reconciled::Quarantined {
                    reason: format!(
                        "the remote's history replaces this session's by purge (it names tip {p}), but the local session has commits after that tip; they are kept here: export what you need, then `git session rm` this session and fetch again"
                    ),
                    conflict: true,
                });
            }
        }
        let (ours_header, theirs_header) = (
            self.header_blob(self.commit_tree(ours)?)?,
            self.header_blob(self.commit_tree(theirs)?)?,
        );
        if ours_header != theirs_header {
            return Ok(Reconciled::Quarantined {
                reason: format!(
                    "its {} differs from the local session's (a header is written once)",
                    refs::HEADER_PATH
                ),
                conflict: true,
            });
        }
        let expected = PreviousValue::MustExistAndMatch(Target::Object(ours));
        if theirs_chain.contains(&ours) {
            self.repo
                .reference(
                    name.as_str(),
                    theirs,
                    expected,
                    "git session: fast-forward from remote",
                )
                .map_err(git)?;
            return Ok(Reconciled::FastForwarded);
        }
        // The newest commit of theirs that we have too: where the two split.
        let Some(base) = theirs_chain
            .iter()
            .find(|c| ours_chain.contains(*c))
            .copied()
        else {
            return Ok(Reconciled::Quarantined {
                reason: "its history is unrelated to the local session's (no common commit); the local session is kept".into(),
                conflict: true,
            });
        };
        if let Some(published) =
            published.filter(|p| ours_chain.contains(p) && !theirs_chain.contains(p))
        {
            let had = self.trailers_at(id, published)?.events;
            return Ok(Reconciled::Rewritten {
                published,
                reason: format!(
                    "the remote rewrote its history: it no longer has commit {} ({had} events), which it had when last fetched and this clone holds; events were dropped, not appended (a force-push), so the local session is kept and the remote's copy stays out",
                    &published.to_hex().to_string()[..12]
                ),
            });
        }
        let fork = self.fork_divergence(id, ours, Some(base))?;
        self.repo
            .reference(
                name.as_str(),
                theirs,
                expected,
                "git session: follow remote after divergence",
            )
            .map_err(git)?;
        Ok(Reconciled::Diverged { fork })
    }

    /// Points `remote`'s tracking ref of `id` back at `tip`, its value
    /// before a fetch that brought a rewritten history: the next fetch then
    /// judges the rewrite against the same published tip again.
    pub fn restore_tracking(&self, remote: &str, id: &SessionId, tip: ObjectId) -> StoreResult<()> {
        let name = format!("{}{id}", refs::tracking_prefix(&tracking_name(remote)));
        self.repo
            .reference(
                name.as_str(),
                tip,
                PreviousValue::Any,
                "git session: keep the published tip over a rewritten history",
            )
            .map_err(git)?;
        Ok(())
    }

    /// Returns `tip` and its first-parent ancestors, newest first. Session
    /// histories are linear, so this is the whole history.
    pub(crate) fn first_parent_chain(&self, tip: ObjectId) -> StoreResult<Vec<ObjectId>> {
        let mut seen = Vec::new();
        let mut cursor = Some(tip);
        while let Some(c) = cursor {
            seen.push(c);
            cursor = self
                .repo
                .find_commit(c)
                .map_err(git)?
                .parent_ids()
                .next()
                .map(|p| p.detach());
        }
        Ok(seen)
    }

    /// Writes the local tail `ours` (since `base`) as a fork session and
    /// returns its id. Deterministic: the same inputs give the same commits.
    fn fork_divergence(
        &self,
        id: &SessionId,
        ours: ObjectId,
        base: Option<ObjectId>,
    ) -> StoreResult<SessionId> {
        let tip_commit = self.repo.find_commit(ours).map_err(git)?;
        let signature = {
            let author = tip_commit.author().map_err(git)?;
            gix::actor::Signature {
                name: "git-session".into(),
                email: "git-session@localhost".into(),
                time: author
                    .time()
                    .map_err(|e| StoreError::Git(gix::Error::from_error(e)))?,
            }
        };
        let hex = ours.to_hex().to_string();
        let stem: String = id.as_str().chars().take(SessionId::MAX_LEN - 18).collect();
        let fork = SessionId::new(format!("{stem}-fork-{}", &hex[..12]))
            .expect("an id stem, a word and hex make an id");
        if self.tip(&fork)?.is_some() {
            // Reconciled before (or by another clone that pushed it): the
            // fork holds exactly this tail already.
            return Ok(fork);
        }
        // As stored: an encrypted header's sealed members are copied
        // verbatim, so every clone writes the same fork, key or not.
        let parent_header = self.stored_header_at(id, ours)?;
        let tip = self.trailers_at(id, ours)?;
        let base_state = base
            .map(|b| self.trailers_at(id, b).map(|t| (b, t)))
            .transpose()?
            .filter(|(_, t)| t.events > 0);
        let mut header = SessionHeader::new(
            fork.clone(),
            parent_header.agent.clone(),
            parent_header.created.clone(),
        );
        header.native_id = parent_header.native_id.clone();
        header.cwd = parent_header.cwd.clone();
        header.title = parent_header.title.clone();
        header.spawned_by = parent_header.spawned_by.clone();
        header.format = parent_header.format;
        if let Some(sealed) = parent_header.extra.get(super::crypt::SEALED_MEMBER) {
            header
                .extra
                .insert(super::crypt::SEALED_MEMBER.into(), sealed.clone());
        }
        header.lineage = base_state.as_ref().map(|(b, t)| Lineage {
            parent_session: id.clone(),
            parent_commit: b.to_string(),
            fork_seq: t.events - 1,
            inherited_events: t.events,
            extra: Default::default(),
        });
        if base_state.is_none() {
            header.extra.insert(
                "diverged_from".into(),
                serde_json::Value::String(id.to_string()),
            );
        }
        let header_blob = self
            .repo
            .write_blob(self.keys.header_bytes(&header)?)
            .map_err(git)?
            .detach();
        let with_header = |commit: ObjectId| -> StoreResult<ObjectId> {
            let tree = self.commit_tree(commit)?;
            let mut editor = self.repo.edit_tree(tree).map_err(git)?;
            editor
                .upsert(refs::HEADER_PATH, EntryKind::Blob, header_blob)
                .map_err(git)?;
            Ok(editor.write().map_err(git)?.detach())
        };
        let mut buf = gix::date::parse::TimeBuf::default();
        let sig = signature.to_ref(&mut buf);
        let mut parent = None;
        let mut first_seq = 0;
        if let Some((b, t)) = &base_state {
            let trailers = Trailers {
                session: fork.to_string(),
                agent: header.agent.to_string(),
                seq: None,
                events: t.events,
                chunks: t.chunks,
                checksum: t.checksum.clone(),
                code_commit: None,
                after_commit: None,
                fork: Some((id.to_string(), t.events - 1)),
            };
            let message = trailers.to_message(&format!(
                "fork {id} at seq {}: divergent local history",
                t.events - 1
            ));
            let c = self
                .repo
                .new_commit_as(sig, sig, &message, with_header(*b)?, [*b])
                .map_err(git)?
                .id;
            parent = Some(c);
            first_seq = t.events;
        }
        let trailers = Trailers {
            session: fork.to_string(),
            agent: header.agent.to_string(),
            seq: (tip.events > first_seq).then(|| (first_seq, tip.events - 1)),
            events: tip.events,
            chunks: tip.chunks,
            checksum: tip.checksum.clone(),
            code_commit: tip.code_commit,
            after_commit: tip.after_commit,
            fork: None,
        };
        let subject = match trailers.seq {
            Some((a, b)) => format!(
                "append {} events (seq {a}..{b}) that diverged from {id}",
                b - a + 1
            ),
            None => format!("create session diverged from {id}"),
        };
        let message = trailers.to_message(&subject);
        let tree = with_header(ours)?;
        let mut commit = self
            .repo
            .new_commit_as(sig, sig, &message, tree, parent)
            .map_err(git)?
            .id;
        // The local tail's checkpoint snapshots (its second parents) stay
        // reachable from the fork, on one more commit every clone makes alike.
        let attached = self.attached_since(ours, base)?;
        if let Some(message) = self.carrier(&trailers, attached.len()) {
            commit = self
                .repo
                .new_commit_as(
                    sig,
                    sig,
                    &message,
                    tree,
                    std::iter::once(commit).chain(attached),
                )
                .map_err(git)?
                .id;
        }
        self.repo
            .reference(
                refs::session_ref(&fork).as_str(),
                commit,
                PreviousValue::MustNotExist,
                "git session: divergence",
            )
            .map_err(git)?;
        Ok(fork)
    }
}

/// Returns the name used for `remote` under `refs/remotes/`: the remote's
/// own name, or for a URL a stable name derived from it.
pub fn tracking_name(remote: &str) -> String {
    let plain = !remote.is_empty()
        && remote
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !remote.starts_with('.');
    if plain {
        return remote.to_owned();
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(remote.as_bytes());
    let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("url-{hex}")
}
