//! Purged histories: how a session rewritten by `git session purge` keeps
//! its old history out.
//!
//! [`Store::replace_history`] writes the new history as one root commit
//! whose `Purged-Tip` trailers name every history it replaces. Those
//! trailers travel with the session itself, so every clone that has the
//! new history knows what it replaced:
//!
//! - [`Store::reconcile`] refuses a fetched history related to a purged
//!   tip (the tip, one of its ancestors or a descendant), and
//! - adopts a fetched replacement whose purged tips include the local tip
//!   (or a descendant of it), moving the local ref to it; a local session
//!   with commits after the purged tip is left alone and reported;
//! - [`Store::push_sessions`] replaces the remote's copy of a purged
//!   session with `--force-with-lease` on the tip last fetched from it:
//!   the one force-push git-session makes.

use std::collections::HashSet;

use gix::ObjectId;

use gix::refs::Target;
use gix::refs::transaction::PreviousValue;

use super::refs;
use super::sync::tracking_name;
use super::{Store, StoreError, StoreResult, git};

/// How far a purged-tip trailer list may go (bounds a hostile root commit).
const MAX_PURGED: usize = 1024;

/// How many `Purged-Batch` trailers a root commit may carry (bounds a
/// hostile one; a longer history keeps the attribution of its first ones).
const MAX_PURGED_BATCHES: usize = 1 << 16;

/// One batch of a history a purge replaced, as its new root records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PurgedBatch {
    /// Its seq range, inclusive.
    pub seq: (u64, u64),
    /// The code commit that was HEAD when it was captured.
    pub code_commit: ObjectId,
    /// As [`super::trailers::Trailers::after_commit`].
    pub after_commit: Option<bool>,
}

/// What one batch (or, in a purged root, one replaced batch) says about
/// how its records were captured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchPart {
    /// The seq range, inclusive; `None` for a commit that adds no events.
    pub seq: Option<(u64, u64)>,
    /// The code commit that was HEAD at capture.
    pub code_commit: Option<ObjectId>,
    /// As [`super::trailers::Trailers::after_commit`].
    pub after_commit: Option<bool>,
}

impl PurgedBatch {
    /// Returns its trailer line (without the newline).
    pub(crate) fn to_trailer(&self) -> String {
        let when = match self.after_commit {
            Some(true) => "after-commit",
            Some(false) => "before-commit",
            None => "-",
        };
        format!(
            "{}: {}..{} {} {when}",
            refs::TRAILER_PURGED_BATCH,
            self.seq.0,
            self.seq.1,
            self.code_commit
        )
    }

    fn parse(value: &str) -> Option<PurgedBatch> {
        let mut parts = value.split(' ');
        let (a, b) = parts.next()?.split_once("..")?;
        let code_commit = ObjectId::from_hex(parts.next()?.as_bytes()).ok()?;
        let after_commit = match parts.next()? {
            "after-commit" => Some(true),
            "before-commit" => Some(false),
            _ => None,
        };
        Some(PurgedBatch {
            seq: (a.parse().ok()?, b.parse().ok()?),
            code_commit,
            after_commit,
        })
    }
}

impl Store {
    /// Returns the tips the history ending at `tip` replaced (the
    /// `Purged-Tip` trailers of its root commit); empty for a history no
    /// purge wrote.
    pub fn purged_tips(&self, tip: ObjectId) -> StoreResult<Vec<ObjectId>> {
        let root = *self
            .first_parent_chain(tip)?
            .last()
            .expect("a chain holds its tip");
        self.root_purged_tips(root)
    }

    /// The `Purged-Tip` trailers of `root`'s message.
    pub(crate) fn root_purged_tips(&self, root: ObjectId) -> StoreResult<Vec<ObjectId>> {
        let header = self.repo.find_header(root).map_err(git)?;
        if header.kind() != gix::objs::Kind::Commit || header.size() > 1 << 20 {
            return Ok(Vec::new());
        }
        let commit = self.repo.find_commit(root).map_err(git)?;
        let message = commit.message_raw().map_err(git)?.to_vec();
        let key = format!("{}: ", refs::TRAILER_PURGED_TIP);
        Ok(String::from_utf8_lossy(&message)
            .lines()
            .filter_map(|l| l.strip_prefix(&key))
            .filter_map(|hex| ObjectId::from_hex(hex.trim().as_bytes()).ok())
            .take(MAX_PURGED)
            .collect())
    }

    /// Returns the batches of the histories `commit` replaced, if it is the
    /// root a purge wrote (its `Purged-Batch` trailers), in seq order.
    pub fn purged_batches(&self, commit: ObjectId) -> StoreResult<Vec<PurgedBatch>> {
        let header = self.repo.find_header(commit).map_err(git)?;
        if header.kind() != gix::objs::Kind::Commit || header.size() > 16 << 20 {
            return Ok(Vec::new());
        }
        let c = self.repo.find_commit(commit).map_err(git)?;
        let message = c.message_raw().map_err(git)?.to_vec();
        let key = format!("{}: ", refs::TRAILER_PURGED_BATCH);
        Ok(String::from_utf8_lossy(&message)
            .lines()
            .filter_map(|l| l.strip_prefix(&key))
            .filter_map(PurgedBatch::parse)
            .take(MAX_PURGED_BATCHES)
            .collect())
    }

    /// Returns how the records of batch `b` were captured, in seq order:
    /// its own trailers, or for the root of a purged history the batches
    /// it replaced, then what the purge added.
    pub fn batch_parts(&self, b: &super::BatchInfo) -> StoreResult<Vec<BatchPart>> {
        let mut out = Vec::new();
        let mut from = 0;
        // Only a history's first batch (seq 0 on) can be a purge's root.
        let root = b.trailers.seq.is_some_and(|(a, _)| a == 0);
        let replaced = if root {
            self.purged_batches(b.commit)?
        } else {
            Vec::new()
        };
        for p in replaced {
            from = from.max(p.seq.1 + 1);
            out.push(BatchPart {
                seq: Some(p.seq),
                code_commit: Some(p.code_commit),
                after_commit: p.after_commit,
            });
        }
        let own = b
            .trailers
            .seq
            .map(|(a, z)| (from.max(a), z))
            .filter(|(a, z)| a <= z);
        if from == 0 || own.is_some() {
            out.push(BatchPart {
                seq: own,
                code_commit: b.trailers.code_commit,
                after_commit: b.trailers.after_commit,
            });
        }
        Ok(out)
    }

    /// Returns the attributed batches of the history ending at `tip`, in
    /// seq order (what a purge of it records as `Purged-Batch`).
    pub(crate) fn batch_attributions(
        &self,
        id: &super::SessionId,
        tip: ObjectId,
    ) -> StoreResult<Vec<PurgedBatch>> {
        let mut out = Vec::new();
        for b in self.batches_at(id, tip)?.into_iter().rev() {
            for p in self.batch_parts(&b)? {
                if let (Some(seq), Some(code_commit)) = (p.seq, p.code_commit) {
                    out.push(PurgedBatch {
                        seq,
                        code_commit,
                        after_commit: p.after_commit,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Says whether `descendant`'s first-parent history contains
    /// `ancestor`; false when `descendant` is not here.
    pub(crate) fn chain_contains(&self, descendant: ObjectId, ancestor: ObjectId) -> bool {
        self.first_parent_chain(descendant)
            .is_ok_and(|chain| chain.contains(&ancestor))
    }

    /// Says whether `commit` belongs to one of the histories `purged`
    /// names: it is one of the tips, an ancestor or a descendant of one.
    pub(crate) fn in_purged_history(
        &self,
        commit: ObjectId,
        commit_chain: &HashSet<ObjectId>,
        purged: &[ObjectId],
    ) -> bool {
        purged
            .iter()
            .any(|p| commit_chain.contains(p) || self.chain_contains(*p, commit))
    }

    /// Says why the fetched history at `theirs` cannot replace the local
    /// one at `ours` as a purge, if it cannot: every local event must be
    /// there under the same envelope (seq, time, origin; only content may
    /// change), and the new history must end with a `session.purge` event.
    /// A remote can thus rewrite the content of events, never drop, add or
    /// reorder them; with `session.requireSigned` only an allowed signer
    /// can do even that.
    pub(crate) fn purge_mismatch(
        &self,
        id: &super::SessionId,
        ours: ObjectId,
        theirs: ObjectId,
    ) -> StoreResult<Option<String>> {
        let decode = |line: super::read::StoredLine| -> StoreResult<git_session_schema::Event> {
            line.decode().map_err(|e| StoreError::Corrupt {
                id: id.clone(),
                message: format!("seq {}: {e}", line.seq),
            })
        };
        let mut new = self.lines_at(id, theirs, 0, None)?;
        let mut last_kind = None;
        for line in self.lines_at(id, ours, 0, None)? {
            let old = decode(line?)?;
            let Some(line) = new.next() else {
                return Ok(Some(format!(
                    "it has fewer events than the local session (seq {} is missing)",
                    old.seq
                )));
            };
            let new = decode(line?)?;
            if (new.seq, &new.ts, &new.origin) != (old.seq, &old.ts, &old.origin) {
                return Ok(Some(format!(
                    "its event at seq {} is not the local one with content removed",
                    old.seq
                )));
            }
        }
        for line in new {
            last_kind = Some(decode(line?)?.kind);
        }
        if last_kind.as_deref() != Some("session.purge") {
            return Ok(Some("it does not end with a session.purge event".into()));
        }
        Ok(None)
    }

    /// Returns the local sessions whose copy on `remote` (as last fetched)
    /// is a history they replaced by purge: (id, remote tip, local tip).
    pub(crate) fn purged_on_remote(
        &self,
        remote: &str,
    ) -> StoreResult<Vec<(super::SessionId, ObjectId, ObjectId)>> {
        let mut out = Vec::new();
        for (id, theirs) in self.tracking_sessions(remote)? {
            let Some(ours) = self.tip(&id)? else { continue };
            if ours == theirs {
                continue;
            }
            // Walk back from ours: reaching theirs is an ordinary
            // fast-forward (the usual case, stopped early); reaching the
            // root means the histories differ, and the root says whether
            // it replaced theirs.
            let mut cursor = Some(ours);
            let mut root = ours;
            let mut ahead = false;
            while let Some(c) = cursor {
                if c == theirs {
                    ahead = true;
                    break;
                }
                root = c;
                cursor = self
                    .repo
                    .find_commit(c)
                    .map_err(git)?
                    .parent_ids()
                    .next()
                    .map(|p| p.detach());
            }
            if ahead {
                continue;
            }
            let purged = self.root_purged_tips(root)?;
            if purged.is_empty() {
                continue;
            }
            let theirs_chain: HashSet<ObjectId> = self
                .first_parent_chain(theirs)
                .unwrap_or_default()
                .into_iter()
                .collect();
            if self.in_purged_history(theirs, &theirs_chain, &purged) {
                out.push((id, theirs, ours));
            }
        }
        Ok(out)
    }

    /// Replaces, on `remote`, each purged history [`Store::purged_on_remote`]
    /// names with the local one, leased on the tip last fetched (a remote
    /// that moved since refuses). Returns git's refusals.
    pub(crate) fn push_replacements(&self, remote: &str) -> StoreResult<Vec<(String, String)>> {
        let replace = self.purged_on_remote(remote)?;
        if replace.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = vec!["push".to_owned(), "--porcelain".to_owned()];
        for (id, theirs, _) in &replace {
            args.push(format!(
                "--force-with-lease={}:{theirs}",
                refs::session_ref(id)
            ));
        }
        args.push(remote.to_owned());
        for (id, _, _) in &replace {
            let name = refs::session_ref(id);
            args.push(format!("+{name}:{name}"));
        }
        let out = self.run_git_network(&args)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let rejected: Vec<(String, String)> = stdout
            .lines()
            .filter(|l| l.starts_with('!'))
            .filter_map(|l| {
                let mut parts = l.split('\t');
                let _flag = parts.next()?;
                let spec = parts.next()?;
                let reason = parts.next().unwrap_or("").to_owned();
                Some((spec.split(':').nth(1).unwrap_or(spec).to_owned(), reason))
            })
            .collect();
        if out.status.success() || !rejected.is_empty() {
            // The remote now has ours: so does its tracking ref, so the old
            // history is referenced nowhere here and `git gc` can drop it.
            let prefix = refs::tracking_prefix(&tracking_name(remote));
            for (id, theirs, ours) in &replace {
                if rejected.iter().any(|(r, _)| *r == refs::session_ref(id)) {
                    continue;
                }
                // git push moved it already when the remote's fetch
                // refspec maps session refs (as `init` sets up).
                let name = format!("{prefix}{id}");
                let current = self
                    .repo
                    .try_find_reference(name.as_str())
                    .map_err(git)?
                    .and_then(|r| r.target().try_id().map(|i| i.to_owned()));
                if current == Some(*ours) {
                    continue;
                }
                self.repo
                    .reference(
                        name.as_str(),
                        *ours,
                        PreviousValue::MustExistAndMatch(Target::Object(*theirs)),
                        "git session: purged history pushed",
                    )
                    .map_err(git)?;
            }
        }
        if !out.status.success() && rejected.is_empty() {
            return Err(StoreError::Remote(format!(
                "git push {remote} (replacing purged histories) failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(rejected)
    }
}
