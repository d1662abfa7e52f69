//! Appending batches: create, append and fork. Each is exactly one commit
//! on the session ref, made under the session lock and published with a
//! compare-and-swap ref update.
//!
//! Crash safety comes from ordering: blobs, trees and the commit are written
//! first (unreferenced until the end, so a crash leaves only garbage that
//! `git gc` prunes), and the ref moves last, atomically. A reader sees the
//! old tip or the new one, never a half batch.

use std::collections::BTreeMap;

use git_session_schema::codec::{seal_in_place, split_checksum};
use git_session_schema::event::chain_checksum;
use git_session_schema::{
    ArtifactId, ContentBody, Event, Lineage, SEALED_FORMAT, SessionHeader, SessionId,
};
use gix::ObjectId;
use gix::objs::tree::EntryKind;
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;

use super::crypt::{Keys, is_sealed, unframe};
use super::lock::SessionLock;
use super::refs::{self, artifact_path, chunk_path};
use super::trailers::Trailers;
use super::{Store, StoreError, StoreResult, git};

/// A chunk is sealed once it reaches this size; a batch may hold several.
///
/// Bounds the memory a batch needs (one chunk in flight) and keeps blobs a
/// size git packs and diffs comfortably.
pub const CHUNK_BYTES: usize = 4 << 20;

/// How many times a lost compare-and-swap is retried before giving up.
const CAS_ATTEMPTS: usize = 8;

/// Says how the seqs of appended events are decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqMode {
    /// The store numbers events from the current end; their own seq and
    /// checksum are ignored. Concurrent appenders both land, in some order.
    Assign,
    /// Each event must carry exactly the next seq; a given checksum must
    /// match the one the store computes. Used for canonical imports.
    Exact,
}

/// Redacts what the store writes: every event pushed into a batch and the
/// header of a new session go through it, whoever produced them (capture,
/// canonical import, `append`, handoff). On unless `session.redact=false`.
/// The rules are `crate::security::redact`.
#[derive(Clone, Copy, Debug)]
pub struct Scrubber {
    on: bool,
}

impl Scrubber {
    /// A scrubber that redacts (`on`) or passes events through.
    pub fn new(on: bool) -> Scrubber {
        Scrubber { on }
    }

    /// Says whether it redacts.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Redacts `event` in place; returns whether anything was replaced.
    pub fn scrub(&self, event: &mut Event) -> bool {
        self.on && crate::security::Redactor::shared().redact(event) > 0
    }

    /// Redacts the free text of a header in place.
    pub fn scrub_header(&self, header: &mut SessionHeader) -> bool {
        self.on && crate::security::Redactor::shared().redact_header(header) > 0
    }

    /// Redacts `event` (on any thread) into a value the sink takes as is.
    pub fn seal(&self, mut event: Event) -> Scrubbed {
        self.scrub(&mut event);
        Scrubbed { event, body: None }
    }

    /// Redacts `event` and writes its content here too, all but the seq
    /// and parent the sink gives it (a [`ContentBody`]), then frees its
    /// payload: for the thread that parsed the event, while its tree is
    /// in that core's cache, so the writer never walks the tree and the
    /// tree is freed by the thread that allocated it. The event's
    /// `payload` is then null (see [`Scrubbed::event`]).
    pub fn seal_written(&self, event: Event) -> Scrubbed {
        let mut sealed = self.seal(event);
        sealed.body = Some(sealed.event.content_body());
        sealed.event.payload = serde_json::Value::Null;
        sealed
    }
}

/// An event that went through a [`Scrubber`]: [`BatchSink::push_scrubbed`]
/// stores it without redacting again, so capture can redact on its parsing
/// thread while the writer seals.
#[derive(Debug)]
pub struct Scrubbed {
    event: Event,
    /// The content already written ([`Scrubber::seal_written`]).
    body: Option<ContentBody>,
}

impl Scrubbed {
    /// The redacted event. Its `payload` is null when the content was
    /// written where it was sealed ([`Scrubber::seal_written`]): the
    /// stored bytes hold it, the event no longer does.
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// Points the event at another parent (capture maps a native file's
    /// seqs to the stored ones); the parent is no redacted content.
    pub fn relink(&mut self, parent_seq: Option<u64>) {
        self.event.parent_seq = parent_seq;
    }
}

/// Holds facts recorded in every batch commit besides the events.
#[derive(Clone, Debug, Default)]
pub struct CommitInfo {
    /// Commit time, seconds since the epoch (from the caller's clock).
    pub time: i64,
    /// The code commit that was HEAD at capture.
    pub code_commit: Option<ObjectId>,
    /// Whether the post-commit hook is capturing (the records led to
    /// `code_commit`), not a capture between commits.
    pub after_commit: bool,
    /// A commit the batch commit also points at, as its second parent, so
    /// it travels with the session (a `checkpoint`'s snapshot of the work
    /// tree). Readers follow first parents only; ignored for a first commit.
    pub attach: Option<ObjectId>,
}

/// Reports what an append wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendOutcome {
    /// The new tip, or `None` when the batch was empty and nothing was written.
    pub commit: Option<ObjectId>,
    /// The seq range appended, inclusive.
    pub seq: Option<(u64, u64)>,
    /// Event count after the append.
    pub events: u64,
}

/// Receives one batch's events and artifacts and writes them as chunk blobs.
///
/// Created by the store for each attempt; the caller's producer pushes into
/// it. Nothing is visible until the store publishes the commit.
pub struct BatchSink<'r> {
    store: &'r Store,
    mode: SeqMode,
    next_seq: u64,
    first_seq: u64,
    prev: Option<String>,
    /// The chain as the producer's events had it before redaction: given
    /// checksums are checked against it.
    given_prev: Option<String>,
    scrubber: Scrubber,
    chunk: Vec<u8>,
    chunk_first: u64,
    next_chunk: u64,
    scratch: Vec<u8>,
    entries: Vec<(String, ObjectId)>,
    artifacts: BTreeMap<ArtifactId, ObjectId>,
    /// Full blobs of artifacts stored as heads (`session.syncArtifacts
    /// head`), for `refs/session-artifacts/<id>`.
    full: Vec<(ArtifactId, ObjectId)>,
    /// Whether artifacts over [`super::HEAD_BYTES`] are stored as heads.
    lazy: bool,
    /// For an encrypted session: the keys chunks and artifacts are sealed
    /// with, the session (for errors) and the chain value before the
    /// chunk in flight.
    sealed: Option<(&'r Keys, SessionId)>,
    chunk_prev: Option<String>,
}

impl<'r> BatchSink<'r> {
    fn new(
        store: &'r Store,
        mode: SeqMode,
        state: &Trailers,
        scrubber: Scrubber,
        sealed: Option<(&'r Keys, SessionId)>,
    ) -> BatchSink<'r> {
        BatchSink {
            sealed,
            chunk_prev: state.checksum.clone(),
            store,
            mode,
            next_seq: state.events,
            first_seq: state.events,
            prev: state.checksum.clone(),
            given_prev: state.checksum.clone(),
            scrubber,
            chunk: Vec::new(),
            chunk_first: state.events,
            next_chunk: state.chunks,
            scratch: Vec::new(),
            entries: Vec::new(),
            artifacts: BTreeMap::new(),
            full: Vec::new(),
            lazy: false,
        }
    }

    /// Returns the seq the next pushed event gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Returns the checksum of the last event in the log so far.
    pub fn last_checksum(&self) -> Option<&str> {
        self.prev.as_deref()
    }

    /// Returns the scrubber this sink applies.
    pub fn scrubber(&self) -> Scrubber {
        self.scrubber
    }

    /// Redacts and seals `event` into the log and returns its seq.
    pub fn push(&mut self, mut event: Event) -> StoreResult<u64> {
        self.push_mut(&mut event)
    }

    /// Like [`BatchSink::push`], redacting and sealing the caller's event
    /// in place (its payload may change; its seq and checksum are set), so
    /// the caller decides where it is freed.
    ///
    /// With [`SeqMode::Exact`], a given checksum is checked against the
    /// event as given, chained over the events as given: redaction changes
    /// what is stored, not what the producer must prove.
    pub fn push_mut(&mut self, event: &mut Event) -> StoreResult<u64> {
        let given = event.checksum.take();
        self.number(event)?;
        self.scratch.clear();
        event.write_content(&mut self.scratch);
        let as_given = chain_checksum(self.given_prev.as_deref(), &self.scratch);
        if self.mode == SeqMode::Exact
            && let Some(given) = given.filter(|g| *g != as_given)
        {
            return Err(StoreError::ChecksumMismatch {
                seq: event.seq,
                given,
                computed: as_given,
            });
        }
        let same_chain = self.given_prev == self.prev;
        self.given_prev = Some(as_given.clone());
        let sum = if self.scrubber.scrub(event) {
            self.scratch.clear();
            event.write_content(&mut self.scratch);
            chain_checksum(self.prev.as_deref(), &self.scratch)
        } else if same_chain {
            as_given
        } else {
            chain_checksum(self.prev.as_deref(), &self.scratch)
        };
        self.store(event, sum, true)
    }

    /// Seals an event the caller already redacted with this store's
    /// scrubber (see [`Scrubber::seal`]); in place, as `push_mut`.
    ///
    /// The content is written straight into the chunk and hashed there:
    /// one copy of it, however long the event.
    pub fn push_scrubbed(&mut self, scrubbed: &mut Scrubbed) -> StoreResult<u64> {
        let event = &mut scrubbed.event;
        let given = event.checksum.take();
        self.number(event)?;
        let start = self.chunk.len();
        match &scrubbed.body {
            Some(body) => body.write_content(event.seq, event.parent_seq, &mut self.chunk),
            None => event.write_content(&mut self.chunk),
        }
        let sum = chain_checksum(self.prev.as_deref(), &self.chunk[start..]);
        if self.mode == SeqMode::Exact
            && let Some(given) = given.filter(|g| *g != sum)
        {
            self.chunk.truncate(start);
            return Err(StoreError::ChecksumMismatch {
                seq: event.seq,
                given,
                computed: sum,
            });
        }
        self.given_prev = Some(sum.clone());
        self.close(event, sum, start, scrubbed.body.is_none())
    }

    fn number(&self, event: &mut Event) -> StoreResult<()> {
        match self.mode {
            SeqMode::Assign => event.seq = self.next_seq,
            SeqMode::Exact if event.seq != self.next_seq => {
                return Err(StoreError::SeqMismatch {
                    expected: self.next_seq,
                    found: event.seq,
                });
            }
            SeqMode::Exact => {}
        }
        Ok(())
    }

    /// Stores `event`, whose content the caller left in `scratch` (it
    /// computed `sum` over those bytes): serialized once, hashed and
    /// stored as the same bytes. `whole`: the event still holds its
    /// payload (see [`Scrubber::seal_written`]).
    fn store(&mut self, event: &mut Event, sum: String, whole: bool) -> StoreResult<u64> {
        let start = self.chunk.len();
        self.chunk.extend_from_slice(&self.scratch);
        if self.scratch.capacity() > CHUNK_BYTES {
            // A long event's room is not kept for the short ones after it.
            self.scratch = Vec::new();
        }
        self.close(event, sum, start, whole)
    }

    /// Stores `event`, whose content is the end of the chunk from `start`
    /// (`sum` is its checksum): seals it there. `whole`: the event still
    /// holds its payload (see [`Scrubber::seal_written`]).
    fn close(
        &mut self,
        event: &mut Event,
        sum: String,
        start: usize,
        whole: bool,
    ) -> StoreResult<u64> {
        debug_assert!(
            !whole || {
                let mut content = Vec::new();
                event.write_content(&mut content);
                content == self.chunk[start..]
            }
        );
        if start == 0 {
            self.chunk_first = event.seq;
            self.chunk_prev.clone_from(&self.prev);
        }
        seal_in_place(&mut self.chunk, &sum);
        let size = (self.chunk.len() - start) as u64;
        if size > self.store.limits.event {
            // Stored, it would make the session unreadable (reading
            // refuses lines over the limit before parsing them).
            self.chunk.truncate(start);
            return Err(StoreError::EventTooLarge {
                seq: event.seq,
                size,
                limit: self.store.limits.event,
            });
        }
        self.chunk.push(b'\n');
        self.prev = Some(sum.clone());
        event.checksum = Some(sum);
        self.next_seq += 1;
        if self.chunk.len() >= CHUNK_BYTES {
            self.seal_chunk()?;
        }
        Ok(event.seq)
    }

    /// Stores `bytes` as an artifact of the session and returns its id.
    pub fn add_artifact(&mut self, bytes: &[u8]) -> StoreResult<ArtifactId> {
        let id = ArtifactId::of(bytes);
        if !self.artifacts.contains_key(&id) {
            let stored = match &self.sealed {
                Some((keys, session)) => keys.seal_artifact(session, bytes)?,
                None => bytes.to_vec(),
            };
            // A blob that reads as a head is stored as one whatever the
            // setting, so no artifact is ever mistaken for a head.
            let as_head =
                (self.lazy && bytes.len() > super::HEAD_BYTES) || super::artifacts::is_head(bytes);
            let blob = if as_head {
                let (full, head) = self.store.write_full_artifact(
                    self.sealed.as_ref().map(|(_, s)| s),
                    bytes,
                    &stored,
                )?;
                self.full.push((id.clone(), full));
                self.store.write_blob_sized(&head)?
            } else {
                self.store.write_blob_sized(&stored)?
            };
            self.artifacts.insert(id.clone(), blob);
        }
        Ok(id)
    }

    fn seal_chunk(&mut self) -> StoreResult<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let blob = match &self.sealed {
            Some((keys, session)) => {
                let sealed = keys.seal_chunk(
                    session,
                    &self.chunk,
                    self.chunk_first,
                    self.next_seq - self.chunk_first,
                    self.chunk_prev.as_deref(),
                    self.prev.as_deref(),
                )?;
                self.store.write_blob_sized(&sealed)?
            }
            None => self.store.write_blob_sized(&self.chunk)?,
        };
        self.entries
            .push((chunk_path(self.next_chunk, self.chunk_first), blob));
        self.next_chunk += 1;
        self.chunk.clear();
        if self.chunk.capacity() > 2 * CHUNK_BYTES {
            // A long event's room is not kept for the chunks after it.
            self.chunk = Vec::new();
        }
        Ok(())
    }
}

impl Store {
    /// Creates a session with `header` and a first batch from `produce`.
    ///
    /// The first commit has no parent. `produce` may be called again if the
    /// publication races; it must push the same batch each time.
    pub fn create<E: From<StoreError>>(
        &self,
        header: &SessionHeader,
        mode: SeqMode,
        info: &CommitInfo,
        produce: impl FnMut(&mut BatchSink<'_>) -> Result<(), E>,
    ) -> Result<AppendOutcome, E> {
        let out = self.write_batch(&header.id, Some(header), mode, info, produce)?;
        if !self.is_bulk() {
            self.after_batch();
        }
        Ok(out)
    }

    /// Appends one batch from `produce` to an existing session.
    ///
    /// Serialized with other writers by the session lock; if the ref moves
    /// anyway (a writer that bypassed the lock), the batch is rebuilt on the
    /// new tip and retried, so a lost race never loses a batch. An empty
    /// batch writes nothing.
    pub fn append<E: From<StoreError>>(
        &self,
        id: &SessionId,
        mode: SeqMode,
        info: &CommitInfo,
        produce: impl FnMut(&mut BatchSink<'_>) -> Result<(), E>,
    ) -> Result<AppendOutcome, E> {
        let out = self.write_batch(id, None, mode, info, produce)?;
        if out.commit.is_some() && !self.is_bulk() {
            self.after_batch();
        }
        Ok(out)
    }

    fn write_batch<E: From<StoreError>>(
        &self,
        id: &SessionId,
        create: Option<&SessionHeader>,
        mode: SeqMode,
        info: &CommitInfo,
        mut produce: impl FnMut(&mut BatchSink<'_>) -> Result<(), E>,
    ) -> Result<AppendOutcome, E> {
        let name = refs::session_ref(id);
        // A bulk store keeps the lock of a session it holds back.
        let mut lock = if self.holds_lock(&name) {
            None
        } else {
            Some(SessionLock::acquire(&self.state_dir, id)?)
        };
        for _ in 0..CAS_ATTEMPTS {
            let tip = self.tip(id)?;
            let (state, base_tree, agent, sealed) = match (tip, create) {
                (Some(_), Some(_)) => return Err(StoreError::AlreadyExists(id.clone()).into()),
                (None, None) => {
                    return Err(StoreError::NotFound {
                        query: id.to_string(),
                        suggestions: Vec::new(),
                    }
                    .into());
                }
                (None, Some(h)) => (
                    Trailers::default(),
                    ObjectId::empty_tree(self.repo.object_hash()),
                    h.agent.clone(),
                    self.keys.encrypts(),
                ),
                (Some(t), None) => {
                    // The stored header: its agent and format are clear,
                    // so appending needs no identity.
                    let h = self.stored_header_at(id, t)?;
                    (
                        self.trailers_at(id, t)?,
                        self.commit_tree(t)?,
                        h.agent,
                        h.format == SEALED_FORMAT,
                    )
                }
            };
            let keys = sealed.then(|| (&self.keys, id.clone()));
            let mut sink = BatchSink::new(self, mode, &state, self.scrubber, keys);
            sink.lazy = self.lazy_artifacts();
            produce(&mut sink)?;
            sink.seal_chunk()?;
            if sink.next_seq == state.events && sink.artifacts.is_empty() && create.is_none() {
                return Ok(AppendOutcome {
                    commit: None,
                    seq: None,
                    events: state.events,
                });
            }
            let mut editor = self.repo.edit_tree(base_tree).map_err(git)?;
            if let Some(h) = create {
                let mut h = h.clone();
                self.scrubber.scrub_header(&mut h);
                // Created encrypted exactly when recipients are configured.
                h.format = if sealed {
                    SEALED_FORMAT
                } else {
                    git_session_schema::FORMAT_VERSION
                };
                let blob = self
                    .repo
                    .write_blob(self.keys.header_bytes(&h)?)
                    .map_err(git)?;
                editor
                    .upsert(refs::HEADER_PATH, EntryKind::Blob, blob)
                    .map_err(git)?;
            }
            for (path, blob) in &sink.entries {
                editor
                    .upsert(path.as_str(), EntryKind::Blob, *blob)
                    .map_err(git)?;
            }
            for (art, blob) in &sink.artifacts {
                editor
                    .upsert(artifact_path(art.hex()), EntryKind::Blob, *blob)
                    .map_err(git)?;
            }
            let tree = editor.write().map_err(git)?.detach();
            let seq = (sink.next_seq > sink.first_seq).then(|| (sink.first_seq, sink.next_seq - 1));
            let trailers = Trailers {
                session: id.to_string(),
                agent: agent.to_string(),
                seq,
                events: sink.next_seq,
                chunks: sink.next_chunk,
                checksum: sink.prev.clone(),
                code_commit: info.code_commit,
                after_commit: Some(info.after_commit),
                fork: None,
            };
            let subject = match (create.is_some(), seq) {
                (true, Some((a, b))) => format!("create session with {} events", b - a + 1),
                (true, None) => "create empty session".to_owned(),
                (false, Some((a, b))) => format!("append {} events (seq {a}..{b})", b - a + 1),
                (false, None) => "add artifacts".to_owned(),
            };
            let message = trailers.to_message(&subject);
            // The full blobs' ref first: a crash before the session ref
            // moves leaves it holding a blob no head names yet, harmless.
            self.add_full_artifacts(id, info.time, &sink.full)?;
            match self.publish(&name, tip, tree, &message, info, &mut lock)? {
                Some(commit) => {
                    return Ok(AppendOutcome {
                        commit: Some(commit),
                        seq,
                        events: sink.next_seq,
                    });
                }
                None if create.is_some() => {
                    return Err(StoreError::AlreadyExists(id.clone()).into());
                }
                None => continue,
            }
        }
        Err(StoreError::Contended(id.clone()).into())
    }

    /// Replaces the whole history of `id` by one new root commit (used by
    /// `purge`): `rewrite` gets the header and every event, in seq order,
    /// and returns what the new history holds; seqs are kept as returned
    /// (they must run from 0) and checksums are recomputed, so the chain is
    /// whole again. The artifacts are carried over. The commit message
    /// gets one `Purged-Tip` trailer per history this one replaces (the
    /// old root's, then `old`), and is signed like any batch commit. The
    /// ref moves by compare-and-swap from the tip `rewrite` saw.
    ///
    /// A fork is refused: its first commit shares its parent's chunks, so
    /// rewriting it alone would not remove what it inherited.
    pub fn replace_history<E: From<StoreError>>(
        &self,
        id: &SessionId,
        info: &CommitInfo,
        rewrite: impl FnOnce(
            ObjectId,
            SessionHeader,
            Vec<Event>,
        ) -> Result<(SessionHeader, Vec<Event>), E>,
    ) -> Result<(ObjectId, ObjectId), E> {
        let _lock = SessionLock::acquire(&self.state_dir, id)?;
        let old = self.existing_tip(id)?;
        let header = self.header_at(id, old)?;
        if let Some(l) = &header.lineage {
            return Err(StoreError::Refused(format!(
                "session {id} is a fork of {} and shares its first {} events with it; purge {} first, then fork it again",
                l.parent_session, l.inherited_events, l.parent_session
            ))
            .into());
        }
        let mut events = Vec::new();
        for line in self.lines_at(id, old, 0, None)? {
            let line = line?;
            events.push(line.decode().map_err(|e| {
                StoreError::Refused(format!("session {id}: an event does not decode: {e}"))
            })?);
        }
        let artifacts = self.artifacts_in(self.commit_tree(old)?)?;
        let attributions = self.batch_attributions(id, old)?;
        let mut purged = self.purged_tips(old)?;
        purged.push(old);
        let (header, events) = rewrite(old, header, events)?;
        let keys = (header.format == SEALED_FORMAT).then(|| (&self.keys, id.clone()));
        let mut sink = BatchSink::new(
            self,
            SeqMode::Exact,
            &Trailers::default(),
            self.scrubber,
            keys,
        );
        for mut event in events {
            event.checksum = None;
            sink.push_mut(&mut event)?;
        }
        sink.seal_chunk()?;
        let mut editor = self
            .repo
            .edit_tree(ObjectId::empty_tree(self.repo.object_hash()))
            .map_err(git)?;
        let mut h = header.clone();
        self.scrubber.scrub_header(&mut h);
        let blob = self
            .repo
            .write_blob(self.keys.header_bytes(&h)?)
            .map_err(git)?;
        editor
            .upsert(refs::HEADER_PATH, EntryKind::Blob, blob)
            .map_err(git)?;
        for (path, blob) in &sink.entries {
            editor
                .upsert(path.as_str(), EntryKind::Blob, *blob)
                .map_err(git)?;
        }
        for (art, blob) in &artifacts {
            editor
                .upsert(artifact_path(art.hex()), EntryKind::Blob, *blob)
                .map_err(git)?;
        }
        let tree = editor.write().map_err(git)?.detach();
        let trailers = Trailers {
            session: id.to_string(),
            agent: header.agent.to_string(),
            seq: (sink.next_seq > 0).then(|| (0, sink.next_seq - 1)),
            events: sink.next_seq,
            chunks: sink.next_chunk,
            checksum: sink.prev.clone(),
            code_commit: info.code_commit,
            after_commit: Some(info.after_commit),
            fork: None,
        };
        let mut message = trailers.to_message(&format!(
            "purge: rewrite session with {} events",
            sink.next_seq
        ));
        for p in &purged {
            message += &format!("{}: {p}\n", refs::TRAILER_PURGED_TIP);
        }
        // Which commit each replaced batch led to (`which`) survives the
        // rewrite; the new root's own trailers then only cover what the
        // purge added.
        for b in &attributions {
            message += &b.to_trailer();
            message.push('\n');
        }
        let new = self.write_commit(info.time, &message, tree, None)?;
        // The checkpoint snapshots the old history carried as second
        // parents stay reachable from the new one.
        let attached = self.attached_since(old, None)?;
        let new = match self.carrier(&trailers, attached.len()) {
            Some(message) => self.write_commit_with(
                info.time,
                &message,
                tree,
                std::iter::once(new).chain(attached).collect(),
            )?,
            None => new,
        };
        match self.repo.reference(
            refs::session_ref(id).as_str(),
            new,
            PreviousValue::MustExistAndMatch(Target::Object(old)),
            "git session: purge",
        ) {
            Ok(_) => {}
            Err(e) if e.is_conflict() => return Err(StoreError::Contended(id.clone()).into()),
            Err(e) => return Err(git(e).into()),
        }
        if self.remembered_tip(id).is_some() {
            self.remember_tip(id, Some(new))?;
        }
        Ok((old, new))
    }

    /// Returns the commits attached to the first-parent history from `tip`
    /// down to `stop` (excluded): every parent after the first (the
    /// snapshot commits of checkpoints), oldest batch first, each once.
    pub(crate) fn attached_since(
        &self,
        tip: ObjectId,
        stop: Option<ObjectId>,
    ) -> StoreResult<Vec<ObjectId>> {
        let mut out = Vec::new();
        for commit in self.first_parent_chain(tip)? {
            if Some(commit) == stop {
                break;
            }
            let c = self.repo.find_commit(commit).map_err(git)?;
            for p in c.parent_ids().skip(1).map(|p| p.detach()) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Returns the message of the commit that keeps `attached` snapshot
    /// commits of a replaced history reachable (a history rewrite's new
    /// tip; its first parent is the rewritten tip, the tree the same, no
    /// events added), or `None` when there are none.
    pub(crate) fn carrier(&self, state: &Trailers, attached: usize) -> Option<String> {
        (attached > 0).then(|| {
            let t = Trailers {
                seq: None,
                fork: None,
                ..state.clone()
            };
            t.to_message(&format!(
                "keep {attached} checkpoint snapshot{} of the replaced history",
                if attached == 1 { "" } else { "s" }
            ))
        })
    }

    /// Writes the commit and moves the ref from `tip` to it (a bulk store
    /// holds the move back, with `lock`, until its flush).
    ///
    /// Returns `None` when the ref moved meanwhile (the caller rebuilds).
    fn publish(
        &self,
        name: &str,
        tip: Option<ObjectId>,
        tree: ObjectId,
        message: &str,
        info: &CommitInfo,
        lock: &mut Option<SessionLock>,
    ) -> StoreResult<Option<ObjectId>> {
        let parents: Vec<ObjectId> = match tip {
            Some(t) => std::iter::once(t).chain(info.attach).collect(),
            None => Vec::new(),
        };
        let commit = self.write_commit_with(info.time, message, tree, parents)?;
        if self.is_bulk() {
            self.defer_ref(name, tip, commit, message, lock.take())?;
            return Ok(Some(commit));
        }
        let expected = match tip {
            Some(t) => PreviousValue::MustExistAndMatch(Target::Object(t)),
            None => PreviousValue::MustNotExist,
        };
        let mut stale_lock_cleared = false;
        loop {
            match self.repo.reference(
                name,
                commit,
                expected.clone(),
                message.lines().next().unwrap_or(""),
            ) {
                Ok(_) => return Ok(Some(commit)),
                Err(e) if e.is_conflict() => return Ok(None),
                Err(e) if e.is_retryable() && !stale_lock_cleared => {
                    // We hold the session lock, so no git-session writer owns
                    // the ref lock: it is left by a killed process, or held
                    // for a moment by plain git. Clear it only when old.
                    stale_lock_cleared = true;
                    self.clear_stale_ref_lock(name);
                }
                Err(e) => return Err(git(e)),
            }
        }
    }

    /// Writes a session commit (author = committer = [`Store::signature`]
    /// at `time`) without moving any ref.
    pub(crate) fn write_commit(
        &self,
        time: i64,
        message: &str,
        tree: ObjectId,
        parent: Option<ObjectId>,
    ) -> StoreResult<ObjectId> {
        self.write_commit_with(time, message, tree, parent.into_iter().collect())
    }

    /// [`Store::write_commit`] with any number of parents.
    pub(crate) fn write_commit_with(
        &self,
        time: i64,
        message: &str,
        tree: ObjectId,
        parents: Vec<ObjectId>,
    ) -> StoreResult<ObjectId> {
        let sig = self.signature(time);
        let Some(signer) = &self.commit_signer else {
            let mut buf = gix::date::parse::TimeBuf::default();
            let sig_ref = sig.to_ref(&mut buf);
            return Ok(self
                .repo
                .new_commit_as(sig_ref, sig_ref, message, tree, parents)
                .map_err(git)?
                .id);
        };
        // Signed like `git commit -S`: the signature covers the commit
        // object without its gpgsig header.
        let mut commit = gix::objs::Commit {
            tree,
            parents: parents.into(),
            author: sig.clone(),
            committer: sig,
            encoding: None,
            message: message.into(),
            extra_headers: Vec::new(),
        };
        let mut bytes = Vec::new();
        gix::objs::WriteTo::write_to(&commit, &mut bytes)
            .map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
        let pem = signer(&bytes).map_err(StoreError::Sign)?;
        commit
            .extra_headers
            .push(("gpgsig".into(), pem.trim_end().into()));
        Ok(self.repo.write_object(&commit).map_err(git)?.detach())
    }

    fn clear_stale_ref_lock(&self, name: &str) {
        let path = self.repo.common_dir().join(format!("{name}.lock"));
        let old = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() >= 10);
        if old {
            let _ = std::fs::remove_file(&path);
        }
    }

    /// Returns the committer for session commits: the repo's identity, or a
    /// fixed fallback so that capture works in repos with no `user.name`.
    pub(crate) fn signature(&self, time: i64) -> gix::actor::Signature {
        let (name, email) = match self.repo.committer() {
            Some(Ok(s)) => (s.name.to_owned(), s.email.to_owned()),
            _ => (
                super::FALLBACK_COMMITTER.0.into(),
                super::FALLBACK_COMMITTER.1.into(),
            ),
        };
        gix::actor::Signature {
            name,
            email,
            time: gix::date::Time::new(time, 0),
        }
    }

    /// Creates `new_id` as a fork of `id` keeping events `0..=at`.
    ///
    /// The fork's first commit has as parent the commit of `id` whose batch
    /// contains `at`, so the two refs share history up to there and
    /// `git merge-base` finds the fork point. When `at` falls inside a batch,
    /// the fork's tree holds a truncated copy of that chunk; the parent's
    /// chunks are never changed.
    pub fn fork(
        &self,
        id: &SessionId,
        at: u64,
        new_id: &SessionId,
        created: &str,
        info: &CommitInfo,
    ) -> StoreResult<(SessionHeader, ObjectId)> {
        self.fork_as(id, at, new_id, created, info, &|_| {})
    }

    /// Like [`Store::fork`], with `shape` adjusting the fork's header
    /// (agent, native id) before it is written; id and lineage are the
    /// store's and are set again afterwards.
    pub fn fork_as(
        &self,
        id: &SessionId,
        at: u64,
        new_id: &SessionId,
        created: &str,
        info: &CommitInfo,
        shape: &dyn Fn(&mut SessionHeader),
    ) -> StoreResult<(SessionHeader, ObjectId)> {
        let name = refs::session_ref(new_id);
        if self.holds_lock(&name) {
            return Err(StoreError::AlreadyExists(new_id.clone()));
        }
        let lock = SessionLock::acquire(&self.state_dir, new_id)?;
        if self.tip(new_id)?.is_some() {
            return Err(StoreError::AlreadyExists(new_id.clone()));
        }
        let stat = self.stat(id)?;
        if at >= stat.events {
            return Err(StoreError::NoSuchSeq {
                id: id.clone(),
                events: stat.events,
                seq: at,
            });
        }
        let (base, base_trailers) = self.commit_containing(id, stat.tip, at)?;
        let base_tree = self.commit_tree(base)?;
        let chunks = self.chunks(id, base_tree)?;
        let mut editor = self.repo.edit_tree(base_tree).map_err(git)?;
        let mut kept = 0u64;
        let mut checksum = base_trailers.checksum.clone();
        for (i, chunk) in chunks.iter().enumerate() {
            let next_first = chunks
                .get(i + 1)
                .map_or(base_trailers.events, |c| c.first_seq);
            if chunk.first_seq > at {
                editor.remove(chunk.path.as_str()).map_err(git)?;
                continue;
            }
            kept += 1;
            if next_first > at + 1 {
                // `at` is inside this chunk: keep its first lines only.
                let what = format!("chunk {}", chunk.path);
                let data = self.bounded_blob(
                    id,
                    chunk.blob,
                    &what,
                    self.limits.chunk,
                    "session.maxChunkSize",
                )?;
                let (data, sealed_prev) = if is_sealed(&data) {
                    let prev = unframe(&data)
                        .map_err(|message| StoreError::Corrupt {
                            id: id.clone(),
                            message: format!("{what}: {message}"),
                        })?
                        .0
                        .prev;
                    let open = self.keys.open_blob(
                        id,
                        &what,
                        &data,
                        self.limits.chunk,
                        "session.maxChunkSize",
                    )?;
                    (open, Some(prev))
                } else {
                    (data, None)
                };
                let take = usize::try_from(at + 1 - chunk.first_seq).unwrap_or(usize::MAX);
                let mut end = 0;
                let mut last = None;
                for line in data.split_inclusive(|&b| b == b'\n').take(take) {
                    end += line.len();
                    last = Some(line);
                }
                checksum = last.and_then(split_checksum).map(|(_, s)| s.to_owned());
                let kept = match sealed_prev {
                    // A sealed chunk's copy is sealed again, chained alike.
                    Some(prev) => self.keys.seal_chunk(
                        new_id,
                        &data[..end],
                        chunk.first_seq,
                        at + 1 - chunk.first_seq,
                        prev.as_deref(),
                        checksum.as_deref(),
                    )?,
                    None => data[..end].to_vec(),
                };
                let truncated = self.repo.write_blob(&kept).map_err(git)?;
                editor
                    .upsert(chunk.path.as_str(), EntryKind::Blob, truncated)
                    .map_err(git)?;
            }
        }
        let parent = self.header_at(id, stat.tip)?;
        let mut header = SessionHeader::new(new_id.clone(), parent.agent.clone(), created);
        // A fork holds its parent's chunks: encrypted when they are.
        header.format = parent.format;
        header.native_id = None;
        header.cwd = parent.cwd.clone();
        header.title = parent.title.clone();
        shape(&mut header);
        header.id = new_id.clone();
        header.lineage = Some(Lineage {
            parent_session: id.clone(),
            parent_commit: base.to_string(),
            fork_seq: at,
            inherited_events: at + 1,
            extra: BTreeMap::new(),
        });
        let blob = self
            .repo
            .write_blob(self.keys.header_bytes(&header)?)
            .map_err(git)?;
        editor
            .upsert(refs::HEADER_PATH, EntryKind::Blob, blob)
            .map_err(git)?;
        let tree = editor.write().map_err(git)?.detach();
        let trailers = Trailers {
            session: new_id.to_string(),
            agent: header.agent.to_string(),
            seq: None,
            events: at + 1,
            chunks: kept,
            checksum,
            code_commit: info.code_commit,
            after_commit: Some(info.after_commit),
            fork: Some((id.to_string(), at)),
        };
        let message = trailers.to_message(&format!("fork {id} at seq {at}"));
        let commit = self.write_commit(info.time, &message, tree, Some(base))?;
        if self.defer_ref(&name, None, commit, "fork", Some(lock))? {
            return Ok((header, commit));
        }
        self.repo
            .reference(name.as_str(), commit, PreviousValue::MustNotExist, "fork")
            .map_err(|e| {
                if e.is_conflict() {
                    StoreError::AlreadyExists(new_id.clone())
                } else {
                    git(e)
                }
            })?;
        Ok((header, commit))
    }

    /// Finds the first-parent ancestor of `tip` whose batch contains `seq`.
    fn commit_containing(
        &self,
        id: &SessionId,
        tip: ObjectId,
        seq: u64,
    ) -> StoreResult<(ObjectId, Trailers)> {
        let mut cursor = Some(tip);
        while let Some(commit) = cursor {
            let t = self.trailers_at(id, commit)?;
            let inside = match (t.seq, &t.fork) {
                (Some((a, b)), _) => a <= seq && seq <= b,
                // A fork's first commit adds no events; an earlier seq lies
                // in the inherited history below it.
                (None, _) => false,
            };
            if inside {
                return Ok((commit, t));
            }
            cursor = self
                .repo
                .find_commit(commit)
                .map_err(git)?
                .parent_ids()
                .next()
                .map(|p| p.detach());
        }
        Err(StoreError::Corrupt {
            id: id.clone(),
            message: format!("no batch commit contains seq {seq}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use git_session_schema::event::Level;
    use git_session_schema::{Agent, Event, Origin, SessionHeader, SessionId};

    use super::*;
    use crate::store::test_support::store;

    /// Events as a capture parses them: seqs from the file, a parent chain,
    /// a secret to redact, an origin naming the native record.
    fn parsed(n: u64) -> Vec<Event> {
        (0..n)
            .map(|i| {
                let mut e = Event::new(
                    i,
                    "2026-01-01T00:00:00Z",
                    Agent::Claude,
                    "user",
                    "message.user",
                    Level::History,
                    serde_json::json!({
                        "text": format!("line {i}: export STRIPE=sk_live_4eC39HqLyjWDarjtT1zdp7dc{i:03}"),
                        "n": [i, -1.5, null, true],
                    }),
                );
                e.parent_seq = i.checked_sub(1);
                e.refs = vec![format!("file:src/{i}.rs")];
                e.origin = Some(Origin {
                    agent: Agent::Claude,
                    native_id: Some(format!("uuid-{i}")),
                    native_seq: Some(i),
                    extra: Default::default(),
                });
                e
            })
            .collect()
    }

    fn stored(store: &Store, id: &SessionId) -> Vec<Vec<u8>> {
        store
            .lines(id, 0, None)
            .unwrap()
            .map(|l| l.unwrap().bytes)
            .collect()
    }

    /// Creates session `name` with the batch `produce` pushes and returns
    /// its stored lines.
    fn create_stored(
        store: &Store,
        name: &str,
        mode: SeqMode,
        produce: impl FnMut(&mut BatchSink<'_>) -> StoreResult<()>,
    ) -> Vec<Vec<u8>> {
        let id = SessionId::new(name).unwrap();
        let header = SessionHeader::new(id.clone(), Agent::Claude, "2026-01-01T00:00:00Z");
        store
            .create(&header, mode, &CommitInfo::default(), produce)
            .unwrap();
        stored(store, &id)
    }

    /// An event serialized where it was sealed ([`Scrubber::seal_written`])
    /// is stored as the bytes, and with the checksum, of one the writer
    /// serializes, with the seq and parent the sink gives it (here other
    /// than the parse's: the session already holds events).
    #[test]
    fn an_event_written_where_it_was_sealed_is_stored_as_the_writer_stores_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let scrubber = Scrubber::new(true);
        let info = CommitInfo {
            time: 1_767_225_600,
            ..Default::default()
        };
        let mut sessions = Vec::new();
        for (name, written) in [("by-writer", false), ("by-reader", true)] {
            let id = SessionId::new(name).unwrap();
            let header = SessionHeader::new(id.clone(), Agent::Claude, "2026-01-01T00:00:00Z");
            store
                .create(&header, SeqMode::Assign, &info, |sink| {
                    for e in parsed(2) {
                        sink.push(e)?;
                    }
                    Ok::<_, StoreError>(())
                })
                .unwrap();
            store
                .append(&id, SeqMode::Assign, &info, |sink| {
                    for e in parsed(5) {
                        let parent = e.parent_seq.map(|p| p + 2);
                        let mut sealed = if written {
                            scrubber.seal_written(e)
                        } else {
                            scrubber.seal(e)
                        };
                        assert_eq!(sealed.event().payload.is_null(), written);
                        sealed.relink(parent);
                        sink.push_scrubbed(&mut sealed)?;
                    }
                    Ok::<_, StoreError>(())
                })
                .unwrap();
            sessions.push(stored(&store, &id));
        }
        assert_eq!(sessions[0].len(), 7);
        assert_eq!(sessions[0], sessions[1]);
        let last = String::from_utf8(sessions[1][6].clone()).unwrap();
        assert!(last.starts_with(r#"{"seq":6,"#), "{last}");
        assert!(last.contains(r#""parent_seq":5,"#), "{last}");
        assert!(
            last.contains("[REDACTED:") && !last.contains("sk_live_"),
            "{last}"
        );
    }

    /// A long event (a pasted log) stored through either path is the same
    /// bytes, and the sink does not keep its room for the chunks after it.
    #[test]
    fn a_long_event_is_stored_once_and_its_room_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let scrubber = Scrubber::new(true);
        let long = || {
            let mut e = parsed(1).remove(0);
            e.payload["text"] =
                serde_json::json!("a pasted log line\n".repeat((3 * CHUNK_BYTES) / 18));
            e
        };
        let sessions: Vec<_> = [("long-by-writer", false), ("long-by-reader", true)]
            .into_iter()
            .map(|(name, written)| {
                create_stored(&store, name, SeqMode::Assign, |sink| {
                    for e in [long(), parsed(2).remove(1)] {
                        if written {
                            sink.push_scrubbed(&mut scrubber.seal_written(e))?;
                        } else {
                            sink.push(e)?;
                        }
                        assert!(
                            sink.chunk.capacity() <= 2 * CHUNK_BYTES
                                && sink.scratch.capacity() <= CHUNK_BYTES,
                            "room kept: chunk {}, scratch {}",
                            sink.chunk.capacity(),
                            sink.scratch.capacity()
                        );
                    }
                    Ok(())
                })
            })
            .collect();
        assert_eq!(sessions[0].len(), 2);
        assert!(sessions[0][0].len() > 3 * CHUNK_BYTES - 64);
        assert_eq!(sessions[0], sessions[1]);
    }

    /// A sealed event whose given checksum does not match is refused and
    /// leaves nothing of itself in the chunk: the events pushed after it
    /// are stored as if it had never come.
    #[test]
    fn a_refused_sealed_event_leaves_no_bytes_behind() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let scrubber = Scrubber::new(false);
        let sessions: Vec<_> = [("plain", false), ("after-refusal", true)]
            .into_iter()
            .map(|(name, refused)| {
                create_stored(&store, name, SeqMode::Exact, |sink| {
                    for (i, e) in parsed(2).into_iter().enumerate() {
                        let e = Event {
                            checksum: None,
                            ..e
                        };
                        if refused && i == 0 {
                            let mut bad = e.clone();
                            bad.checksum = Some(format!("sha256:{}", "0".repeat(64)));
                            let err = sink.push_scrubbed(&mut scrubber.seal_written(bad));
                            assert!(matches!(err, Err(StoreError::ChecksumMismatch { .. })));
                        }
                        sink.push_scrubbed(&mut scrubber.seal_written(e))?;
                    }
                    Ok(())
                })
            })
            .collect();
        assert_eq!(sessions[0].len(), 2);
        assert_eq!(sessions[0], sessions[1]);
    }
}
