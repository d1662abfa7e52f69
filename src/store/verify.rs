//! `verify`: proves a session reads back exactly as it was written.
//!
//! Checks, in order: the header (format, id); chunk numbering; every event's
//! seq and hash-chain link, against the bytes on disk; the tip's trailers
//! against the log; that each batch commit only added chunks (sealed chunks
//! are never rewritten) and that their seq ranges are contiguous; and that
//! artifacts hash to their names and every referenced artifact exists.
//! A report names the seq of each bad event, the first one first.

use std::collections::BTreeSet;

use git_session_schema::codec::{split_checksum, stored_checksum};
use git_session_schema::{ArtifactId, SessionId};
use gix::ObjectId;

use git_session_schema::SEALED_FORMAT;

use super::crypt;
use super::refs;
use super::{Store, StoreError, StoreResult, git};

/// More problems than this are summarized; the first ones matter most.
const MAX_PROBLEMS: usize = 20;

/// Describes one thing wrong with a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The first affected seq, when the problem is in an event.
    pub seq: Option<u64>,
    /// What is wrong.
    pub message: String,
}

/// Holds the outcome of verifying one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// The session.
    pub id: SessionId,
    /// Events read.
    pub events: u64,
    /// The session's own batch commits.
    pub batches: u64,
    /// Everything found wrong; empty when the session is intact.
    pub problems: Vec<Problem>,
    /// Encrypted chunks checked without being opened (no identity here
    /// is a recipient): their place in the chain, seqs and ciphertext
    /// hash were checked, not the events inside.
    pub sealed_unread: u64,
}

impl VerifyReport {
    /// Returns whether nothing was found wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, seq: Option<u64>, message: impl Into<String>) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(Problem {
                seq,
                message: message.into(),
            });
        }
    }
}

impl Store {
    /// Verifies one session; problems are in the report, not errors.
    ///
    /// Errors are only for a session that does not exist or a repository
    /// that cannot be read at all.
    pub fn verify(&self, id: &SessionId) -> StoreResult<VerifyReport> {
        let tip = self.existing_tip(id)?;
        Ok(self.verify_at(id, tip))
    }

    /// Verifies the history ending at `tip` as session `id` (a local tip, or
    /// a fetched one before it may become a session ref). Never fails:
    /// whatever cannot be read is a problem in the report.
    pub fn verify_at(&self, id: &SessionId, tip: ObjectId) -> VerifyReport {
        let mut report = VerifyReport {
            id: id.clone(),
            events: 0,
            batches: 0,
            problems: Vec::new(),
            sealed_unread: 0,
        };
        if let Err(e) = self.verify_inner(id, tip, None, &mut report) {
            report.problem(None, e.to_string());
        }
        report
    }

    /// Like [`Store::verify_at`] for a `tip` whose first-parent history
    /// contains `base`, a commit of this session already trusted here (the
    /// local tip): only what came after `base` is checked (its batches,
    /// their new chunks chained on from `base`'s last checksum, new
    /// artifacts), plus the header, the layout and the tip's trailers, so
    /// the cost follows what was fetched, not the session's length.
    pub fn verify_since(&self, id: &SessionId, base: ObjectId, tip: ObjectId) -> VerifyReport {
        let mut report = VerifyReport {
            id: id.clone(),
            events: 0,
            batches: 0,
            problems: Vec::new(),
            sealed_unread: 0,
        };
        if let Err(e) = self.verify_inner(id, tip, Some(base), &mut report) {
            report.problem(None, e.to_string());
        }
        report
    }

    fn verify_inner(
        &self,
        id: &SessionId,
        tip: ObjectId,
        base: Option<ObjectId>,
        report: &mut VerifyReport,
    ) -> StoreResult<()> {
        match self.repo.find_header(tip) {
            Ok(h) if h.kind() == gix::objs::Kind::Commit => {}
            Ok(h) => {
                report.problem(
                    None,
                    format!("the ref points at a {}, not a commit", h.kind()),
                );
                return Ok(());
            }
            Err(e) => {
                report.problem(None, format!("tip {tip} cannot be read: {e}"));
                return Ok(());
            }
        }
        let header = match self.header_at(id, tip) {
            Ok(h) => h,
            Err(e) => {
                report.problem(None, e.to_string());
                return Ok(());
            }
        };
        if header.id != *id {
            report.problem(
                None,
                format!("header names session {}, the ref is {id}", header.id),
            );
        }
        let tree = self.commit_tree(tip)?;
        self.check_layout(tree, true, report)?;
        let chunks = match self.chunks(id, tree) {
            Ok(c) => c,
            Err(e) => {
                report.problem(None, e.to_string());
                return Ok(());
            }
        };

        // Where reading starts: from the beginning, or after `base`, whose
        // chunks the history check proves unchanged in every later batch.
        let (base_chunks, base_events, base_checksum, base_artifacts) = match base {
            Some(b) => {
                let t = self.trailers_at(id, b)?;
                let arts = self.artifacts_in(self.commit_tree(b)?)?;
                (t.chunks, t.events, t.checksum, arts)
            }
            None => (0, 0, None, Vec::new()),
        };
        if base.is_some()
            && self.header_blob(self.commit_tree(base.expect("some"))?)?
                != self.header_blob(tree)?
        {
            report.problem(
                None,
                format!("{} differs from the trusted base's", refs::HEADER_PATH),
            );
        }

        // Events: seq contiguity and the hash chain over the stored bytes.
        let mut prev: Option<String> = base_checksum;
        let mut count = base_events;
        let mut referenced = BTreeSet::new();
        for (i, chunk) in chunks.iter().enumerate() {
            if (i as u64) < base_chunks {
                if chunk.index != i as u64 {
                    report.problem(
                        None,
                        format!("chunk {} is out of place (expected chunk {i})", chunk.path),
                    );
                }
                continue;
            }
            if chunk.index != i as u64 || chunk.first_seq != count {
                report.problem(
                    Some(count),
                    format!(
                        "chunk {} is out of place (expected chunk {i} starting at seq {count})",
                        chunk.path
                    ),
                );
            }
            let what = format!("chunk {}", chunk.path);
            let data = match self.bounded_blob(
                id,
                chunk.blob,
                &what,
                self.limits.chunk,
                "session.maxChunkSize",
            ) {
                Ok(d) => d,
                Err(e) => {
                    report.problem(Some(chunk.first_seq), e.to_string());
                    return Ok(());
                }
            };
            let encrypted = header.format == SEALED_FORMAT;
            let mut sealed_end = None;
            let data = if crypt::is_sealed(&data) {
                if !encrypted {
                    report.problem(
                        Some(count),
                        format!("{what} is encrypted in a session that is not"),
                    );
                }
                let clear = match crypt::unframe(&data) {
                    Ok((clear, _)) => clear,
                    Err(e) => {
                        report.problem(Some(count), format!("{what}: {e}"));
                        return Ok(());
                    }
                };
                // The chain across chunks, checked from the clear line.
                if clear.first != Some(count) || clear.prev != prev {
                    report.problem(
                        Some(count),
                        format!(
                            "{what} does not continue the chain (it says it starts at seq {} after {})",
                            clear.first.map_or("?".into(), |f| f.to_string()),
                            clear.prev.as_deref().unwrap_or("nothing")
                        ),
                    );
                }
                let (Some(n), Some(last)) = (clear.count, clear.last.clone()) else {
                    report.problem(
                        Some(count),
                        format!("{what} lacks its seq count or last checksum"),
                    );
                    return Ok(());
                };
                match self.keys.open_blob(
                    id,
                    &what,
                    &data,
                    self.limits.chunk,
                    "session.maxChunkSize",
                ) {
                    Ok(plain) => {
                        sealed_end = Some((count + n, last));
                        plain
                    }
                    Err(StoreError::Sealed { .. }) => {
                        report.sealed_unread += 1;
                        count += n;
                        prev = Some(last);
                        continue;
                    }
                    Err(e) => {
                        report.problem(Some(count), e.to_string());
                        return Ok(());
                    }
                }
            } else {
                if encrypted {
                    report.problem(
                        Some(count),
                        format!("{what} is plaintext in an encrypted session"),
                    );
                }
                data
            };
            if data.last().is_some_and(|&b| b != b'\n') {
                report.problem(
                    None,
                    format!("chunk {} lacks its final newline", chunk.path),
                );
            }
            for line in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let seq = count;
                count += 1;
                if line.len() as u64 > self.limits.event {
                    report.problem(
                        Some(seq),
                        format!(
                            "seq {seq}: event is {} bytes, over the limit of {} (session.maxEventSize)",
                            line.len(),
                            self.limits.event
                        ),
                    );
                    // The chain goes on from its stored checksum: the
                    // next event is judged on its own, not failed for this.
                    prev = split_checksum(line).map(|(_, sum)| sum.to_owned());
                    continue;
                }
                let event = match git_session_schema::codec::decode_event(line) {
                    Ok(e) => e,
                    Err(e) => {
                        report.problem(Some(seq), format!("seq {seq}: not a valid event: {e}"));
                        prev = None;
                        continue;
                    }
                };
                if event.seq != seq {
                    report.problem(
                        Some(seq),
                        format!("seq {seq}: event says seq {}", event.seq),
                    );
                }
                let Some((head, sum)) = split_checksum(line) else {
                    report.problem(
                        Some(seq),
                        format!("seq {seq}: no checksum at the end of the line"),
                    );
                    prev = None;
                    continue;
                };
                let want = stored_checksum(prev.as_deref(), head);
                if want != sum {
                    report.problem(
                        Some(seq),
                        format!("seq {seq}: checksum mismatch: the event was changed after it was written"),
                    );
                }
                // Chain on from what is stored, so one bad event is reported
                // once instead of failing every later link.
                prev = Some(sum.to_owned());
                referenced.extend(event.refs.iter().filter_map(|r| ArtifactId::from_ref(r)));
            }
            if let Some((end, last)) = sealed_end
                && (end != count || prev.as_deref() != Some(last.as_str()))
            {
                report.problem(
                    Some(count),
                    format!("{what}: its clear line does not match the events inside"),
                );
            }
        }
        report.events = count;

        // The tip's trailers must describe the log.
        match self.trailers_at(id, tip) {
            Ok(t) => {
                if t.session != id.as_str() {
                    report.problem(
                        None,
                        format!("tip commit {tip} belongs to session {}", t.session),
                    );
                }
                if t.events != count {
                    report.problem(
                        None,
                        format!("tip commit says {} events, the log has {count}", t.events),
                    );
                }
                if t.chunks != chunks.len() as u64 {
                    report.problem(
                        None,
                        format!(
                            "tip commit says {} chunks, the tree has {}",
                            t.chunks,
                            chunks.len()
                        ),
                    );
                }
                if t.checksum != prev {
                    report.problem(
                        None,
                        "tip commit's checksum is not the last event's".to_owned(),
                    );
                }
            }
            Err(e) => report.problem(None, e.to_string()),
        }

        self.verify_history(id, tip, base, &header, report)?;
        self.verify_artifacts(
            id,
            header.format,
            tree,
            &base_artifacts,
            &referenced,
            report,
        )?;
        Ok(())
    }

    /// Checks that a session tree holds only the layout's paths: the root
    /// has `header.json` (a blob) and the `events/` and `artifacts/` trees;
    /// with `deep`, every entry below them is a tree or regular blob named
    /// as the layout names it.
    fn check_layout(
        &self,
        tree: ObjectId,
        deep: bool,
        report: &mut VerifyReport,
    ) -> StoreResult<()> {
        let root = self.repo.find_tree(tree).map_err(git)?;
        let root = root.decode().map_err(git)?;
        let is_blob = |m: gix::objs::tree::EntryMode| m.is_blob() && !m.is_executable();
        for e in root.entries.iter() {
            let name = e.filename.to_string();
            let ok = match name.as_str() {
                refs::HEADER_PATH => is_blob(e.mode),
                refs::EVENTS_DIR | refs::ARTIFACTS_DIR => e.mode.is_tree(),
                _ => false,
            };
            if !ok {
                report.problem(
                    None,
                    format!("path {} is outside the session layout", escape_name(&name)),
                );
            }
        }
        if !deep {
            return Ok(());
        }
        let hex2 = |n: &str| {
            n.len() == 2
                && n.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        };
        for e in root.entries.iter().filter(|e| e.mode.is_tree()) {
            let top = e.filename.to_string();
            let (levels, leaf): (usize, fn(&str, &str) -> bool) = match top.as_str() {
                refs::EVENTS_DIR => (2, |_, n| {
                    n.split_once('-').is_some_and(|(h, rest)| {
                        h.len() == 2
                            && rest.strip_suffix(".jsonl").is_some_and(|d| {
                                !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
                            })
                    })
                }),
                refs::ARTIFACTS_DIR => (1, |dir, n| {
                    n.len() == 64
                        && n.starts_with(dir)
                        && n.bytes()
                            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
                }),
                _ => continue,
            };
            let mut stack = vec![(e.oid.to_owned(), top.clone(), 0usize, String::new())];
            while let Some((oid, path, depth, parent_name)) = stack.pop() {
                let t = self.repo.find_tree(oid).map_err(git)?;
                for c in t.decode().map_err(git)?.entries.iter() {
                    let name = c.filename.to_string();
                    let sub = format!("{path}/{name}");
                    let ok = if depth < levels {
                        c.mode.is_tree() && hex2(&name)
                    } else {
                        is_blob(c.mode) && leaf(&parent_name, &name)
                    };
                    if !ok {
                        report.problem(
                            None,
                            format!("path {} is outside the session layout", escape_name(&sub)),
                        );
                    } else if c.mode.is_tree() {
                        stack.push((c.oid.to_owned(), sub, depth + 1, name));
                    }
                }
            }
        }
        Ok(())
    }

    /// Returns the tip `verify` last found good for `id` on this clone.
    pub fn remembered_tip(&self, id: &SessionId) -> Option<ObjectId> {
        let path = self.state_dir.join(refs::VERIFIED_DIR).join(id.as_str());
        let text = std::fs::read_to_string(path).ok()?;
        ObjectId::from_hex(text.trim().as_bytes()).ok()
    }

    /// Remembers `tip` as verified for `id` (`None` forgets, as after a
    /// divergence moved the session to the remote's history).
    pub fn remember_tip(&self, id: &SessionId, tip: Option<ObjectId>) -> StoreResult<()> {
        let dir = self.state_dir.join(refs::VERIFIED_DIR);
        let path = dir.join(id.as_str());
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        match tip {
            Some(tip) => {
                std::fs::create_dir_all(&dir).map_err(io)?;
                std::fs::write(&path, format!("{tip}\n")).map_err(io)
            }
            None => match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
                _ => Ok(()),
            },
        }
    }

    fn verify_history(
        &self,
        id: &SessionId,
        tip: ObjectId,
        base: Option<ObjectId>,
        header: &git_session_schema::SessionHeader,
        report: &mut VerifyReport,
    ) -> StoreResult<()> {
        let mut batches = self.batches_at(id, tip)?;
        let header_blob = self.header_blob(self.commit_tree(tip)?)?;
        let inherited = header.lineage.as_ref().map_or(0, |l| l.inherited_events);
        let mut expected = inherited;
        if let Some(base) = base {
            // Only the batches after the trusted base; it must be among them.
            let Some(at) = batches.iter().position(|b| b.commit == base) else {
                report.problem(
                    None,
                    format!("the history does not contain the trusted commit {base}"),
                );
                return Ok(());
            };
            expected = self.trailers_at(id, base)?.events;
            batches.truncate(at);
            if batches.is_empty() {
                return Ok(());
            }
            // The oldest new batch's parent is `base`: never a first commit.
            for batch in batches.iter().rev() {
                if batch.trailers.fork.is_some() {
                    report.problem(
                        None,
                        format!(
                            "commit {} has fork trailers after the first commit",
                            batch.commit
                        ),
                    );
                }
                self.check_batch(
                    batch,
                    false,
                    header,
                    header_blob,
                    tip,
                    &mut expected,
                    report,
                )?;
            }
            report.batches = batches.len() as u64;
            return Ok(());
        }
        report.batches = batches.len() as u64;
        let last = batches.len().saturating_sub(1);
        for (i, batch) in batches.iter().enumerate().rev() {
            self.check_batch(
                batch,
                i == last,
                header,
                header_blob,
                tip,
                &mut expected,
                report,
            )?;
        }
        Ok(())
    }

    /// Checks one batch commit: same header blob as the tip, root layout,
    /// fork trailers against the lineage (`first`: the session's first
    /// commit), a seq range continuing `expected`, and that it kept every
    /// chunk of its parent unchanged.
    #[allow(clippy::too_many_arguments)]
    fn check_batch(
        &self,
        batch: &super::BatchInfo,
        first: bool,
        header: &git_session_schema::SessionHeader,
        header_blob: Option<ObjectId>,
        tip: ObjectId,
        expected: &mut u64,
        report: &mut VerifyReport,
    ) -> StoreResult<()> {
        let t = &batch.trailers;
        let c = self.repo.find_commit(batch.commit).map_err(git)?;
        let parent = c.parent_ids().next().map(|p| p.detach());
        let tree = self.commit_tree(batch.commit)?;
        // The header is written once: every batch carries the same blob.
        if self.header_blob(tree)? != header_blob {
            report.problem(
                None,
                format!(
                    "commit {} has a different {} than the tip: the header was rewritten",
                    batch.commit,
                    refs::HEADER_PATH
                ),
            );
        }
        if batch.commit != tip {
            self.check_layout(tree, false, report)?;
        }
        if let Some((_, at)) = &t.fork {
            let lineage = header.lineage.as_ref();
            if lineage.map(|l| l.parent_commit.as_str()) != parent.map(|p| p.to_string()).as_deref()
                || lineage.map(|l| l.fork_seq) != Some(*at)
            {
                report.problem(
                    None,
                    format!(
                        "fork commit {} disagrees with the header's lineage",
                        batch.commit
                    ),
                );
            }
        } else if first && parent.is_some() {
            report.problem(
                None,
                format!(
                    "first commit {} has a parent but no fork trailers",
                    batch.commit
                ),
            );
        }
        if let Some((a, b)) = t.seq {
            if a != *expected || b < a || t.events != b + 1 {
                report.problem(
                    Some(a),
                    format!(
                        "commit {} covers seq {a}..{b}, expected it to start at {expected}",
                        batch.commit
                    ),
                );
            }
            *expected = b + 1;
        }
        // Sealed chunks are never rewritten: every chunk of the parent
        // batch must be in this commit unchanged.
        if t.fork.is_none()
            && let Some(p) = parent
        {
            let (pt, ct) = (self.commit_tree(p)?, self.commit_tree(batch.commit)?);
            let (pe, ce) = (self.events_tree(pt)?, self.events_tree(ct)?);
            if let (Some(pe), Some(ce)) = (pe, ce) {
                self.check_kept(pe, ce, refs::EVENTS_DIR, batch.commit, report)?;
            } else if pe.is_some() {
                report.problem(None, format!("commit {} removed the events", batch.commit));
            }
        }
        Ok(())
    }

    pub(crate) fn header_blob(&self, tree: ObjectId) -> StoreResult<Option<ObjectId>> {
        let root = self.repo.find_tree(tree).map_err(git)?;
        Ok(root
            .lookup_entry_by_path(refs::HEADER_PATH)
            .map_err(git)?
            .map(|e| e.object_id()))
    }

    fn events_tree(&self, tree: ObjectId) -> StoreResult<Option<ObjectId>> {
        let root = self.repo.find_tree(tree).map_err(git)?;
        Ok(root
            .lookup_entry_by_path(refs::EVENTS_DIR)
            .map_err(git)?
            .map(|e| e.object_id()))
    }

    /// Checks that everything in `old` is in `new` with the same id.
    fn check_kept(
        &self,
        old: ObjectId,
        new: ObjectId,
        path: &str,
        commit: ObjectId,
        report: &mut VerifyReport,
    ) -> StoreResult<()> {
        if old == new {
            return Ok(());
        }
        let old_tree = self.repo.find_tree(old).map_err(git)?;
        let new_tree = self.repo.find_tree(new).map_err(git)?;
        let new_entries = new_tree.decode().map_err(git)?.entries;
        for e in old_tree.decode().map_err(git)?.entries.iter() {
            let sub = format!("{path}/{}", e.filename);
            match new_entries.iter().find(|n| n.filename == e.filename) {
                None => report.problem(None, format!("commit {commit} removed {sub}")),
                Some(n) if e.mode.is_tree() && n.mode.is_tree() => {
                    self.check_kept(e.oid.to_owned(), n.oid.to_owned(), &sub, commit, report)?
                }
                Some(n) if n.oid != e.oid => {
                    report.problem(None, format!("commit {commit} rewrote sealed chunk {sub}"))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn verify_artifacts(
        &self,
        id: &SessionId,
        header_format: u32,
        tree: ObjectId,
        trusted: &[(ArtifactId, ObjectId)],
        referenced: &BTreeSet<ArtifactId>,
        report: &mut VerifyReport,
    ) -> StoreResult<()> {
        let stored = self.artifacts_in(tree)?;
        // Artifacts of a trusted base must all still be there, unchanged
        // (they are not re-read); anything else is hashed.
        for (art, blob) in trusted {
            if !stored.iter().any(|(a, b)| a == art && b == blob) {
                report.problem(None, format!("artifact {art} was removed or replaced"));
            }
        }
        for (art, blob) in &stored {
            if trusted.iter().any(|(a, b)| a == art && b == blob) {
                continue;
            }
            let what = format!("artifact {art}");
            let bytes = self
                .bounded_blob(
                    id,
                    *blob,
                    &what,
                    self.limits.artifact,
                    "session.maxArtifactSize",
                )
                .and_then(|b| {
                    if !crypt::is_sealed(&b) || super::artifacts::is_head(&b) {
                        return Ok(b);
                    }
                    crypt::unframe(&b).map_err(|message| StoreError::Corrupt {
                        id: id.clone(),
                        message: format!("{what}: {message}"),
                    })?;
                    self.keys.open_blob(
                        id,
                        &what,
                        &b,
                        self.limits.artifact,
                        "session.maxArtifactSize",
                    )
                });
            if let Ok(b) = &bytes
                && super::artifacts::is_head(b)
            {
                if let Some(problem) = self.check_head(id, art, b, header_format) {
                    report.problem(None, problem);
                }
                continue;
            }
            match bytes {
                // Without an identity only the ciphertext hash is checked.
                Err(StoreError::Sealed { .. }) => {}
                Ok(b) if ArtifactId::of(&b) == *art => {}
                Ok(_) => report.problem(None, format!("artifact {art} does not hash to its name")),
                Err(e) => report.problem(None, e.to_string()),
            }
        }
        let have: BTreeSet<&ArtifactId> = stored.iter().map(|(a, _)| a).collect();
        for art in referenced.iter().filter(|a| !have.contains(a)) {
            report.problem(None, format!("artifact {art} is referenced but missing"));
        }
        Ok(())
    }
}

impl Store {
    /// Checks a head blob stored as artifact `art` (`session.syncArtifacts
    /// head`): it names `art`, declares a size within the artifact limit,
    /// and holds the first bytes (sealed in an encrypted session); when the
    /// full blob is here too, that it matches. Returns the problem.
    fn check_head(
        &self,
        id: &SessionId,
        art: &ArtifactId,
        blob: &[u8],
        format: u32,
    ) -> Option<String> {
        let (line, first) = match super::artifacts::parse_head(blob) {
            Ok(h) => h,
            Err(e) => return Some(format!("artifact {art}: {e}")),
        };
        if line.sha256 != art.hex() {
            return Some(format!("artifact {art}: its head names another artifact"));
        }
        if line.size > self.limits.artifact {
            return Some(format!(
                "artifact {art}: its head declares {} bytes, over the limit of {} (session.maxArtifactSize)",
                line.size, self.limits.artifact
            ));
        }
        let want = line.size.min(super::HEAD_BYTES as u64);
        let held = if format == SEALED_FORMAT {
            match crypt::unframe(first) {
                Ok((clear, _)) => clear.size,
                Err(e) => return Some(format!("artifact {art}: its head: {e}")),
            }
        } else {
            if crypt::is_sealed(first) {
                return Some(format!(
                    "artifact {art}: its head is encrypted in a session that is not"
                ));
            }
            first.len() as u64
        };
        if held != want {
            return Some(format!(
                "artifact {art}: its head holds {held} bytes, expected the first {want}"
            ));
        }
        match self.full_artifact(id, blob) {
            Ok(_) | Err(StoreError::HeadOnly { .. }) | Err(StoreError::Sealed { .. }) => None,
            Err(e) => Some(format!("artifact {art}: {e}")),
        }
    }
}

/// Returns a tree entry name with control characters escaped, for messages.
fn escape_name(name: &str) -> String {
    name.chars().flat_map(char::escape_debug).collect()
}
