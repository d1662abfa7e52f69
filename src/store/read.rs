//! Reading sessions back: chunk listing, streaming event lines by seq range,
//! batch history and artifacts. Reads need no work tree and no lock; they see
//! whatever tip the ref has when they start.

use git_session_schema::codec::{CodecError, decode_event};
use git_session_schema::{ArtifactId, Event, SessionId};
use gix::ObjectId;

use super::refs::{self, parse_chunk_path};
use super::trailers::Trailers;
use super::{Store, StoreError, StoreResult, git};

/// Holds one chunk blob of a session tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Chunk number, from the path.
    pub index: u64,
    /// Seq of its first event, from the file name.
    pub first_seq: u64,
    /// The blob.
    pub blob: ObjectId,
    /// Its path in the tree.
    pub path: String,
}

/// Holds one stored event line, as it is in git (without the newline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredLine {
    /// The event's seq (its position in the log).
    pub seq: u64,
    /// The exact stored bytes.
    pub bytes: Vec<u8>,
}

impl StoredLine {
    /// Parses the line into an event.
    pub fn decode(&self) -> Result<Event, CodecError> {
        decode_event(&self.bytes)
    }
}

/// Describes one batch commit of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchInfo {
    /// The commit.
    pub commit: ObjectId,
    /// Its commit time, seconds since the epoch.
    pub time: i64,
    /// What its trailers say.
    pub trailers: Trailers,
}

impl Store {
    /// Lists the chunks of a session tree in seq order.
    pub(crate) fn chunks(&self, id: &SessionId, tree: ObjectId) -> StoreResult<Vec<Chunk>> {
        let mut out = Vec::new();
        let root = self.repo.find_tree(tree).map_err(git)?;
        let Some(events) = root.lookup_entry_by_path(refs::EVENTS_DIR).map_err(git)? else {
            return Ok(out);
        };
        let corrupt = |what: &str| StoreError::Corrupt {
            id: id.clone(),
            message: format!("unexpected entry {what} in {}/", refs::EVENTS_DIR),
        };
        for (l1, t1) in self.subtrees(events.object_id())? {
            for (l2, t2) in self.subtrees(t1)? {
                let tree = self.repo.find_tree(t2).map_err(git)?;
                for entry in tree.decode().map_err(git)?.entries.iter() {
                    let name = entry.filename.to_string();
                    let (index, first_seq) = parse_chunk_path(&l1, &l2, &name)
                        .ok_or_else(|| corrupt(&format!("{l1}/{l2}/{name}")))?;
                    out.push(Chunk {
                        index,
                        first_seq,
                        blob: entry.oid.to_owned(),
                        path: format!("{}/{l1}/{l2}/{name}", refs::EVENTS_DIR),
                    });
                }
            }
        }
        out.sort_by_key(|c| c.index);
        Ok(out)
    }

    fn subtrees(&self, tree: ObjectId) -> StoreResult<Vec<(String, ObjectId)>> {
        let tree = self.repo.find_tree(tree).map_err(git)?;
        let decoded = tree.decode().map_err(git)?;
        Ok(decoded
            .entries
            .iter()
            .filter(|e| e.mode.is_tree())
            .map(|e| (e.filename.to_string(), e.oid.to_owned()))
            .collect())
    }

    /// Streams the stored lines of `id` with `from <= seq <= to`.
    ///
    /// Only the chunks overlapping the range are read, one at a time, so
    /// memory stays at one chunk whatever the session's size.
    pub fn lines(&self, id: &SessionId, from: u64, to: Option<u64>) -> StoreResult<LineIter<'_>> {
        let tip = self.existing_tip(id)?;
        self.lines_at(id, tip, from, to)
    }

    /// Like [`Store::lines`], at a given commit of the session.
    pub fn lines_at(
        &self,
        id: &SessionId,
        commit: ObjectId,
        from: u64,
        to: Option<u64>,
    ) -> StoreResult<LineIter<'_>> {
        let chunks = self.chunks(id, self.commit_tree(commit)?)?;
        // Keep the chunk that contains `from` and every later one that can
        // still be inside the range.
        let start = chunks
            .partition_point(|c| c.first_seq <= from)
            .saturating_sub(1);
        let chunks: Vec<Chunk> = chunks
            .into_iter()
            .skip(start)
            .take_while(|c| to.is_none_or(|t| c.first_seq <= t))
            .collect();
        Ok(LineIter {
            store: self,
            id: id.clone(),
            chunks: chunks.into_iter(),
            data: Vec::new(),
            pos: 0,
            seq: 0,
            from,
            to,
        })
    }

    /// Returns the parents of a code commit.
    pub fn commit_parents(&self, commit: ObjectId) -> StoreResult<Vec<ObjectId>> {
        let c = self.repo.find_commit(commit).map_err(git)?;
        Ok(c.parent_ids().map(|p| p.detach()).collect())
    }

    /// Returns the session's own batch commits, newest first, ending with
    /// its first commit (a fork's first commit; inherited ones are left out).
    pub fn batches(&self, id: &SessionId) -> StoreResult<Vec<BatchInfo>> {
        self.batches_at(id, self.existing_tip(id)?)
    }

    /// Like [`Store::batches`], for the history ending at `tip`.
    pub fn batches_at(&self, id: &SessionId, tip: ObjectId) -> StoreResult<Vec<BatchInfo>> {
        let mut out = Vec::new();
        let mut cursor = Some(tip);
        while let Some(commit) = cursor {
            let c = self.repo.find_commit(commit).map_err(git)?;
            let trailers = Trailers::parse(c.message_raw().map_err(git)?);
            let Some(trailers) = trailers.filter(|t| t.session == id.as_str()) else {
                break;
            };
            let is_fork = trailers.fork.is_some();
            out.push(BatchInfo {
                commit,
                time: c.time().map_err(git)?.seconds,
                trailers,
            });
            if is_fork {
                break;
            }
            cursor = c.parent_ids().next().map(|p| p.detach());
        }
        Ok(out)
    }

    /// Lists the artifacts of a session: id and blob.
    pub fn artifacts(&self, id: &SessionId) -> StoreResult<Vec<(ArtifactId, ObjectId)>> {
        let tree = self.commit_tree(self.existing_tip(id)?)?;
        self.artifacts_in(tree)
    }

    pub(crate) fn artifacts_in(&self, tree: ObjectId) -> StoreResult<Vec<(ArtifactId, ObjectId)>> {
        let root = self.repo.find_tree(tree).map_err(git)?;
        let Some(dir) = root
            .lookup_entry_by_path(refs::ARTIFACTS_DIR)
            .map_err(git)?
        else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (_, sub) in self.subtrees(dir.object_id())? {
            let tree = self.repo.find_tree(sub).map_err(git)?;
            for e in tree.decode().map_err(git)?.entries.iter() {
                if let Some(art) = ArtifactId::parse(&format!("sha256:{}", e.filename)) {
                    out.push((art, e.oid.to_owned()));
                }
            }
        }
        Ok(out)
    }

    /// Returns the bytes of artifact blob `blob` of session `id`, opened
    /// when it is sealed (encrypted sessions), refusing one over the
    /// artifact size limit before inflating it.
    ///
    /// For a head (`session.syncArtifacts head`), the full blob from
    /// `refs/session-artifacts/`, checked against the head; when only the
    /// head is here, [`StoreError::HeadOnly`] says what to run.
    pub fn artifact_bytes(&self, id: &SessionId, blob: ObjectId) -> StoreResult<Vec<u8>> {
        let data = self.blob(blob)?;
        if super::artifacts::is_head(&data) {
            return self.full_artifact(id, &data);
        }
        if !super::crypt::is_sealed(&data) {
            return Ok(data);
        }
        self.keys.open_blob(
            id,
            &format!("artifact blob {blob}"),
            &data,
            self.limits.artifact,
            "session.maxArtifactSize",
        )
    }

    /// Returns the bytes of a blob (an artifact or a note), refusing one
    /// over the artifact size limit before inflating it.
    pub fn blob(&self, blob: ObjectId) -> StoreResult<Vec<u8>> {
        let size = self.repo.find_header(blob).map_err(git)?.size();
        if size > self.limits.artifact {
            return Err(StoreError::TooLarge {
                what: format!("object {blob}"),
                size,
                limit: self.limits.artifact,
                setting: "session.maxArtifactSize".into(),
            });
        }
        Ok(self.repo.find_blob(blob).map_err(git)?.detach().data)
    }
}

/// Streams stored lines, one chunk in memory at a time.
pub struct LineIter<'s> {
    store: &'s Store,
    id: SessionId,
    chunks: std::vec::IntoIter<Chunk>,
    data: Vec<u8>,
    pos: usize,
    seq: u64,
    from: u64,
    to: Option<u64>,
}

impl Iterator for LineIter<'_> {
    type Item = StoreResult<StoredLine>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.to.is_some_and(|t| self.seq > t) && !self.data.is_empty() {
                return None;
            }
            if self.pos >= self.data.len() {
                let chunk = self.chunks.next()?;
                let what = format!("chunk {} (from seq {})", chunk.path, chunk.first_seq);
                match self.store.bounded_blob(
                    &self.id,
                    chunk.blob,
                    &what,
                    self.store.limits.chunk,
                    "session.maxChunkSize",
                ) {
                    Ok(data) if super::crypt::is_sealed(&data) => {
                        match self.store.keys.open_blob(
                            &self.id,
                            &what,
                            &data,
                            self.store.limits.chunk,
                            "session.maxChunkSize",
                        ) {
                            Ok(plain) => self.data = plain,
                            Err(e) => {
                                self.chunks = Vec::new().into_iter();
                                return Some(Err(e));
                            }
                        }
                    }
                    Ok(data) => self.data = data,
                    Err(e) => {
                        self.chunks = Vec::new().into_iter();
                        return Some(Err(e));
                    }
                }
                self.pos = 0;
                self.seq = chunk.first_seq;
                continue;
            }
            let rest = &self.data[self.pos..];
            let len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
            if len as u64 > self.store.limits.event {
                let seq = self.seq;
                self.chunks = Vec::new().into_iter();
                self.data = Vec::new();
                self.pos = 0;
                return Some(Err(StoreError::TooLarge {
                    what: format!("session {}: seq {seq}", self.id),
                    size: len as u64,
                    limit: self.store.limits.event,
                    setting: "session.maxEventSize".into(),
                }));
            }
            let line = &rest[..len];
            self.pos += len + 1;
            let seq = self.seq;
            self.seq += 1;
            if seq < self.from {
                continue;
            }
            if self.to.is_some_and(|t| seq > t) {
                return None;
            }
            return Some(Ok(StoredLine {
                seq,
                bytes: line.to_vec(),
            }));
        }
    }
}
