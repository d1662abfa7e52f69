//! Publishing many batches together: a capture that creates hundreds of
//! sessions (the first import of an agent's whole store) writes their
//! objects into one pack and moves their refs in one ref transaction,
//! instead of a handful of loose object files and a ref file per session.
//!
//! A bulk store ([`Store::bulk`]) is the same store with two differences
//! until [`Store::flush`]:
//!
//! - **Objects.** Objects (trees, commits, headers, event chunks and
//!   artifacts under [`LOOSE_FROM`] bytes) are kept in memory (gix's object
//!   memory, readable by this store as if written); larger blobs (an event
//!   near the size limit) are written loose. When the objects held reach
//!   [`MEMORY_BYTES`] (checked as each blob is written, so a long session's
//!   chunks do not pile up within its one batch), or at a flush, they are
//!   written as one pack (zlib level 1, no deltas; commits, trees, then
//!   blobs smallest first) with its index, both made here from the objects
//!   in memory (no `git index-pack` reading the pack back). Every
//!   [`MERGE_EVERY`] such packs are merged into one as the capture goes, and
//!   once it is through [`Store::merge_packs`] makes all of them one, so
//!   memory stays bounded and the pack count does not grow with the size
//!   of an import. (Chunks were once written loose from 1 MiB on: a
//!   400k-record session's hundred chunks then had the pack step's `git
//!   pack-objects` inflate and deflate them all again, 4 s of a 7 s
//!   import.) The store is opened with room for [`super::ODB_SLOTS`] packs:
//!   gix's default, 32, leaves a pack written after the 32nd unseen by the
//!   process that wrote it.
//! - **Refs.** A published batch is remembered with the session lock it
//!   was written under; the lock stays held, so the per-session writer
//!   semantics are those of a plain append. [`Store::tip`] sees the
//!   remembered tip. Every [`PENDING_REFS`] sessions, when the objects are
//!   flushed, and at [`Store::flush`], the remembered refs move in one
//!   transaction, each by compare-and-swap from the tip it was written on.
//!
//! Crash safety is the plain store's ordering: objects first (a pack no
//! ref points into is garbage `git gc` prunes), refs last. A killed
//! capture leaves the sessions of the flushes before it, whole, and none
//! of the rest; the capture cursors, saved after the flush, then read the
//! rest again. Dropping a bulk store without flushing publishes nothing.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use gix::ObjectId;
use gix::objs::Kind;
use gix::refs::Target;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};

use super::lock::SessionLock;
use super::{Store, StoreError, StoreResult, git};

/// Blobs at least this long are written loose even in a bulk store (an
/// event chunk closes once it holds 4 MiB, `CHUNK_BYTES` in `append.rs`).
pub const LOOSE_FROM: usize = 16 << 20;

/// How many packs a bulk store's flushes write before they are merged
/// into one, during the capture.
pub const MERGE_EVERY: usize = 32;

/// The in-memory objects of a bulk store are packed when they reach this
/// many bytes (bounds the memory a bulk capture holds).
pub const MEMORY_BYTES: usize = 4 << 20;

/// Fewer objects than this are written loose at a flush, not packed.
pub const PACK_FROM: usize = 64;

/// Refs held back at most before they are published (each holds its
/// session lock, a file descriptor, until then).
pub const PENDING_REFS: usize = 256;

/// What a bulk store holds back until the flush.
#[derive(Default)]
pub(crate) struct Bulk {
    /// Pending ref updates by ref name, in the order first published.
    refs: Vec<PendingRef>,
    by_name: HashMap<String, usize>,
    /// Bytes of the objects held in memory (about).
    bytes: usize,
    /// Blobs written loose since the last flush (they count towards the
    /// next pack of loose session objects, see `pack.rs`).
    loose: u64,
    /// The packs flushes wrote, with their entries, until
    /// [`Store::merge_packs`] merges them into one: first those merged
    /// during the capture, then the flushes' own since.
    packs: Vec<WrittenPack>,
    /// How many of `packs` the capture leaves as they are until its end:
    /// its merges so far (and packs a failed merge left).
    merged: usize,
}

/// A pack a flush wrote: its path and what its index names.
struct WrittenPack {
    path: std::path::PathBuf,
    entries: Vec<Entry>,
}

struct PendingRef {
    name: String,
    /// The tip the first batch was built on (`None`: the ref is new).
    expected: Option<ObjectId>,
    new: ObjectId,
    message: String,
    _lock: SessionLock,
}

impl Store {
    /// Returns a bulk view of this store (see the module docs): what it
    /// writes is published at [`Store::flush`], not batch by batch.
    pub fn bulk(&self) -> Store {
        Store {
            repo: self.repo.clone().with_object_memory(),
            state_dir: self.state_dir.clone(),
            scrubber: self.scrubber,
            limits: self.limits,
            commit_signer: self.commit_signer.clone(),
            keys: self.keys.clone(),
            after_commit: self.after_commit,
            bulk: Some(RefCell::new(Bulk::default())),
        }
    }

    /// Says whether capture uses a bulk store: `session.bulkCapture`,
    /// true unless set to false.
    pub fn bulk_capture(&self) -> bool {
        self.repo
            .config_snapshot()
            .boolean("session.bulkCapture")
            .unwrap_or(true)
    }

    /// Says whether this is a bulk store.
    pub fn is_bulk(&self) -> bool {
        self.bulk.is_some()
    }

    /// Writes what a bulk store holds: the objects as one pack, then every
    /// held ref in one transaction. A no-op on a plain store.
    pub fn flush(&self) -> StoreResult<()> {
        let Some(bulk) = &self.bulk else {
            return Ok(());
        };
        self.flush_objects()?;
        let pending = {
            let mut b = bulk.borrow_mut();
            b.by_name.clear();
            std::mem::take(&mut b.refs)
        };
        let loose = std::mem::take(&mut bulk.borrow_mut().loose);
        if pending.is_empty() {
            return Ok(());
        }
        let edits: Vec<RefEdit> = pending
            .iter()
            .map(|p| RefEdit {
                change: Change::Update {
                    log: LogChange {
                        mode: RefLog::AndReference,
                        force_create_reflog: false,
                        message: p.message.as_str().into(),
                    },
                    expected: match p.expected {
                        Some(t) => PreviousValue::MustExistAndMatch(Target::Object(t)),
                        None => PreviousValue::MustNotExist,
                    },
                    new: Target::Object(p.new),
                },
                name: p
                    .name
                    .as_str()
                    .try_into()
                    .expect("session ref names are valid"),
                deref: false,
            })
            .collect();
        if let Err(e) = self.edit_session_refs(edits.clone()) {
            // The locks are held, so only a writer that bypasses them (or
            // a ref lock left by a killed git) gets here: publish the
            // others one by one and name those that could not be.
            let mut failed = Vec::new();
            for (edit, p) in edits.into_iter().zip(&pending) {
                if let Err(e) = self.repo.edit_reference(edit) {
                    failed.push(format!("{}: {e}", p.name));
                }
            }
            if !failed.is_empty() {
                return Err(StoreError::Refused(format!(
                    "{} of {} session refs could not be published ({e}); the others were: {}; capture again to retry",
                    failed.len(),
                    pending.len(),
                    failed.join("; ")
                )));
            }
        }
        drop(pending);
        self.after_batches(loose);
        Ok(())
    }

    /// Merges the packs the flushes of this bulk store wrote into one (see
    /// [`merge_packs`]): a first import of a thousand sessions leaves one
    /// pack, not one per [`MEMORY_BYTES`] of objects, so git's
    /// `gc.autoPackLimit` (50 packs) stays far off. Called once a capture
    /// is through with the bulk store, after its last [`Store::flush`].
    /// Everything is published before; a merge that fails leaves the packs
    /// as they were, every object still in one of them.
    pub fn merge_packs(&self) -> StoreResult<()> {
        let Some(bulk) = &self.bulk else {
            return Ok(());
        };
        let packs = {
            let mut b = bulk.borrow_mut();
            b.merged = 0;
            std::mem::take(&mut b.packs)
        };
        if packs.len() < 2 {
            return Ok(());
        }
        let odb: &gix::odb::Handle = &self.repo.objects;
        merge_packs(&odb.store_ref().path().join("pack"), &packs).map(drop)
    }

    /// The tip a bulk store published for `name` and holds back, if any.
    pub(crate) fn pending_tip(&self, name: &str) -> Option<ObjectId> {
        let b = self.bulk.as_ref()?.borrow();
        b.by_name.get(name).map(|&i| b.refs[i].new)
    }

    /// Whether this bulk store holds `name`'s lock already (a second batch
    /// of a session it published): taking it again would wait forever.
    pub(crate) fn holds_lock(&self, name: &str) -> bool {
        self.pending_tip(name).is_some()
    }

    /// Holds back the publication of `new` on `name` (built on `tip`),
    /// keeping `lock` until the flush; flushes when enough are held.
    /// Returns false on a plain store (the caller publishes).
    pub(crate) fn defer_ref(
        &self,
        name: &str,
        tip: Option<ObjectId>,
        new: ObjectId,
        message: &str,
        lock: Option<SessionLock>,
    ) -> StoreResult<bool> {
        let Some(bulk) = &self.bulk else {
            return Ok(false);
        };
        let full = {
            let mut b = bulk.borrow_mut();
            match b.by_name.get(name).copied() {
                // A later batch of a held session: the ref still moves
                // once, from the tip it had before the first.
                Some(i) => b.refs[i].new = new,
                None => {
                    let lock = lock.expect("a new pending ref comes with its lock");
                    let i = b.refs.len();
                    b.refs.push(PendingRef {
                        name: name.to_owned(),
                        expected: tip,
                        new,
                        message: message.lines().next().unwrap_or("").to_owned(),
                        _lock: lock,
                    });
                    b.by_name.insert(name.to_owned(), i);
                }
            }
            b.refs.len() >= PENDING_REFS || b.bytes >= MEMORY_BYTES
        };
        if full {
            self.flush()?;
        }
        Ok(true)
    }

    /// Writes `bytes` as a blob: into memory in a bulk store when small,
    /// else loose.
    pub(crate) fn write_blob_sized(&self, bytes: &[u8]) -> StoreResult<ObjectId> {
        match &self.bulk {
            Some(bulk) if bytes.len() < LOOSE_FROM => {
                let id = self.repo.write_blob(bytes).map_err(git)?.detach();
                let full = {
                    let mut b = bulk.borrow_mut();
                    b.bytes += bytes.len();
                    b.bytes >= MEMORY_BYTES
                };
                if full {
                    // Objects only: refs move when their batch is published.
                    self.flush_objects()?;
                }
                Ok(id)
            }
            Some(bulk) => {
                bulk.borrow_mut().loose += 1;
                let odb: &gix::odb::Handle = &self.repo.objects;
                Ok(gix::objs::Write::write_buf(odb, Kind::Blob, bytes).map_err(git)?)
            }
            None => Ok(self.repo.write_blob(bytes).map_err(git)?.detach()),
        }
    }

    /// Writes the objects a bulk store holds in memory as one pack.
    fn flush_objects(&self) -> StoreResult<()> {
        let Some(bulk) = &self.bulk else {
            return Ok(());
        };
        let held = std::mem::take(&mut bulk.borrow_mut().bytes);
        let Some(objects) = self.repo.objects.reset_object_memory() else {
            return Ok(());
        };
        if objects.len() < PACK_FROM && held < MEMORY_BYTES {
            // A batch or two (an incremental capture): loose objects, not
            // one more small pack per capture.
            let odb: &gix::odb::Handle = &self.repo.objects;
            for (kind, data) in objects.values() {
                gix::objs::Write::write_buf(odb, *kind, data).map_err(git)?;
            }
            bulk.borrow_mut().loose += objects.len().div_ceil(5) as u64;
            return Ok(());
        }
        let odb: &gix::odb::Handle = &self.repo.objects;
        let dir = odb.store_ref().path().join("pack");
        let pack = write_indexed_pack(&dir, &objects)?;
        let mut b = bulk.borrow_mut();
        b.packs.push(pack);
        if b.packs.len() - b.merged >= MERGE_EVERY {
            let at = b.merged;
            // A merge that fails leaves the packs as they are (every object
            // is still in one of them) and is not tried again before the
            // final merge, which a flush each would make quadratic.
            match merge_packs(&dir, &b.packs[at..]) {
                Ok(merged) => {
                    b.packs.truncate(at);
                    b.packs.push(merged);
                    b.merged += 1;
                }
                Err(_) => b.merged = b.packs.len(),
            }
        }
        Ok(())
    }
}

/// Writes `objects` into `dir` as a pack and its index (what `git
/// index-pack` would make of the pack, without reading it back): the pack
/// first, each file synced and renamed into place, so a pack is only
/// ever seen with its whole index.
fn write_indexed_pack(dir: &Path, objects: &gix::odb::memory::Storage) -> StoreResult<WrittenPack> {
    let mut pack = temp_in(dir, "tmp_pack_")?;
    let (entries, sum) = {
        let out = std::io::BufWriter::with_capacity(1 << 16, pack.as_file_mut());
        write_pack(out, objects).map_err(io_at(pack.path()))?
    };
    publish_pack(dir, pack, entries, &sum)
}

/// Returns a temporary file in `dir` named `<prefix>…`.
fn temp_in(dir: &Path, prefix: &str) -> StoreResult<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempfile_in(dir)
        .map_err(io_at(dir))
}

/// Returns a mapping of an I/O error to a [`StoreError`] naming `path`.
fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + use<> {
    let path = path.to_owned();
    move |source| StoreError::Io { path, source }
}

/// Writes the index of the whole temporary `pack` (checksum `sum`, objects
/// `entries`), then moves both into place under `dir`, pack first, each
/// synced and read-only.
fn publish_pack(
    dir: &Path,
    pack: tempfile::NamedTempFile,
    entries: Vec<Entry>,
    sum: &gix::hash::ObjectId,
) -> StoreResult<WrittenPack> {
    let mut index = temp_in(dir, "tmp_idx_")?;
    {
        let out = std::io::BufWriter::with_capacity(1 << 16, index.as_file_mut());
        write_index(out, &entries, sum).map_err(io_at(index.path()))?;
    }
    let name = format!("pack-{}", sum.to_hex());
    for (file, ext) in [(pack, "pack"), (index, "idx")] {
        let path = dir.join(format!("{name}.{ext}"));
        file.as_file().sync_all().map_err(io_at(&path))?;
        // Read-only, as git leaves its packs.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o444))
                .map_err(io_at(&path))?;
        }
        file.persist(&path).map_err(|e| StoreError::Io {
            path: path.clone(),
            source: e.error,
        })?;
    }
    Ok(WrittenPack {
        path: dir.join(format!("{name}.pack")),
        entries,
    })
}

/// Merges `packs` (written by [`write_pack`]: whole objects, no deltas,
/// so an entry's bytes do not depend on where it sits) into one pack in
/// `dir`: their entries are copied one after the other under a new header
/// and checksum, each entry's offset moved by where its pack's entries now
/// start (CRCs stay), and the new index written. Only once the merged
/// pack and its index are in place are the old ones removed, index
/// first: a reader sees every object in one pack or the other throughout.
/// A pack that is no longer as written (its size changed) stops the merge
/// before anything is removed.
fn merge_packs(dir: &Path, packs: &[WrittenPack]) -> StoreResult<WrittenPack> {
    use std::io::{Read, Seek, SeekFrom};
    const HEADER: u64 = 12;
    const TRAILER: u64 = 20;
    let count: usize = packs.iter().map(|p| p.entries.len()).sum();
    let count = u32::try_from(count)
        .map_err(|_| StoreError::Refused("too many objects for one pack; left unmerged".into()))?;
    let mut merged = temp_in(dir, "tmp_pack_")?;
    let mut entries = Vec::with_capacity(count as usize);
    let sum = {
        let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
        let mut out = std::io::BufWriter::with_capacity(1 << 16, merged.as_file_mut());
        let head = pack_header(count);
        hasher.update(&head);
        out.write_all(&head).map_err(io_at(dir))?;
        let mut offset = HEADER;
        let mut buf = vec![0u8; 1 << 16];
        for pack in packs {
            let mut file = std::fs::File::open(&pack.path).map_err(io_at(&pack.path))?;
            let len = file.metadata().map_err(io_at(&pack.path))?.len();
            let body = len.checked_sub(HEADER + TRAILER).ok_or_else(|| {
                StoreError::Refused(format!(
                    "{} is shorter than a pack; packs left unmerged",
                    pack.path.display()
                ))
            })?;
            if pack
                .entries
                .iter()
                .any(|e| e.offset < HEADER || e.offset >= HEADER + body)
            {
                return Err(StoreError::Refused(format!(
                    "{} is not the pack this capture wrote; packs left unmerged",
                    pack.path.display()
                )));
            }
            file.seek(SeekFrom::Start(HEADER))
                .map_err(io_at(&pack.path))?;
            let mut left = body;
            while left > 0 {
                let n = (left as usize).min(buf.len());
                file.read_exact(&mut buf[..n]).map_err(io_at(&pack.path))?;
                hasher.update(&buf[..n]);
                out.write_all(&buf[..n]).map_err(io_at(dir))?;
                left -= n as u64;
            }
            entries.extend(pack.entries.iter().map(|e| Entry {
                id: e.id,
                crc: e.crc,
                offset: e.offset - HEADER + offset,
            }));
            offset += body;
        }
        let sum = hasher
            .try_finalize()
            .map_err(|e| StoreError::Refused(format!("hashing the merged pack: {e}")))?;
        out.write_all(sum.as_slice()).map_err(io_at(dir))?;
        out.flush().map_err(io_at(dir))?;
        sum
    };
    let written = publish_pack(dir, merged, entries, &sum)?;
    for pack in packs.iter().filter(|p| p.path != written.path) {
        for ext in ["idx", "pack"] {
            let path = pack.path.with_extension(ext);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_at(&path)(e)),
            }
        }
    }
    Ok(written)
}

/// Returns the header of a version-2 pack of `count` objects.
fn pack_header(count: u32) -> [u8; 12] {
    let mut head = [0u8; 12];
    head[..4].copy_from_slice(b"PACK");
    head[4..8].copy_from_slice(&2u32.to_be_bytes());
    head[8..].copy_from_slice(&count.to_be_bytes());
    head
}

/// One object of a pack as its index names it: id, CRC-32 of its packed
/// bytes, offset in the pack.
struct Entry {
    id: ObjectId,
    crc: u32,
    offset: u64,
}

/// Writes the version-2 index of a pack whose objects are `entries` and
/// whose checksum is `pack` (git's `Documentation/gitformat-pack.txt`).
fn write_index(
    mut out: impl Write,
    entries: &[Entry],
    pack: &gix::hash::ObjectId,
) -> std::io::Result<()> {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    let mut put = |out: &mut dyn Write, bytes: &[u8]| -> std::io::Result<()> {
        hasher.update(bytes);
        out.write_all(bytes)
    };
    let mut entries: Vec<&Entry> = entries.iter().collect();
    entries.sort_by_key(|e| e.id);
    put(&mut out, b"\xfftOc")?;
    put(&mut out, &2u32.to_be_bytes())?;
    let mut fanout = [0u32; 256];
    for e in &entries {
        fanout[e.id.as_slice()[0] as usize] += 1;
    }
    let mut total = 0u32;
    for n in fanout {
        total += n;
        put(&mut out, &total.to_be_bytes())?;
    }
    for e in &entries {
        put(&mut out, e.id.as_slice())?;
    }
    for e in &entries {
        put(&mut out, &e.crc.to_be_bytes())?;
    }
    // Offsets from 2 GiB on go to a table of 8-byte offsets.
    let mut large = Vec::new();
    for e in &entries {
        let small = match u32::try_from(e.offset) {
            Ok(o) if o < 0x8000_0000 => o,
            _ => {
                large.push(e.offset);
                0x8000_0000 | (large.len() as u32 - 1)
            }
        };
        put(&mut out, &small.to_be_bytes())?;
    }
    for o in large {
        put(&mut out, &o.to_be_bytes())?;
    }
    put(&mut out, pack.as_slice())?;
    let sum = hasher.try_finalize().map_err(std::io::Error::other)?;
    out.write_all(sum.as_slice())?;
    out.flush()
}

/// Writes `objects` as a version-2 pack of whole (undeltified) objects;
/// returns what its index names and the pack's checksum.
fn write_pack(
    mut out: impl Write,
    objects: &gix::odb::memory::Storage,
) -> std::io::Result<(Vec<Entry>, gix::hash::ObjectId)> {
    use gix::zlib::stream::deflate::{Compress, FlushCompress};
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    let mut put = |out: &mut dyn Write, bytes: &[u8]| -> std::io::Result<()> {
        hasher.update(bytes);
        out.write_all(bytes)
    };
    let count = u32::try_from(objects.len()).map_err(std::io::Error::other)?;
    let head = pack_header(count);
    put(&mut out, &head)?;
    let mut compress = Compress::new(gix::zlib::Compression::BEST_SPEED);
    let mut scratch = vec![0u8; 1 << 16];
    let mut entry = Vec::new();
    let mut entries = Vec::with_capacity(objects.len());
    let mut offset = head.len() as u64;
    // Commits, then trees, then blobs smallest first (git's own order, near
    // enough): what reading a session's tip touches (its commit, trees and
    // header) lies together at the front, not spread through the chunks.
    let mut order: Vec<_> = objects.iter().collect();
    order.sort_by_key(|(_, (kind, data))| {
        let rank = match kind {
            Kind::Commit => 0,
            Kind::Tree => 1,
            Kind::Blob => 2,
            Kind::Tag => 3,
        };
        (rank, data.len())
    });
    for (id, (kind, data)) in order {
        entry.clear();
        let code: u8 = match kind {
            Kind::Commit => 1,
            Kind::Tree => 2,
            Kind::Blob => 3,
            Kind::Tag => 4,
        };
        // Type and size: 4 bits of size in the first byte, then 7 per byte.
        let mut size = data.len() as u64;
        let mut byte = (code << 4) | (size & 0x0f) as u8;
        size >>= 4;
        while size > 0 {
            entry.push(byte | 0x80);
            byte = (size & 0x7f) as u8;
            size >>= 7;
        }
        entry.push(byte);
        compress.reset();
        let mut input = data.as_slice();
        loop {
            let (read, wrote) = (compress.total_in(), compress.total_out());
            let status = compress
                .compress(input, &mut scratch, FlushCompress::Finish)
                .map_err(std::io::Error::other)?;
            let produced = (compress.total_out() - wrote) as usize;
            entry.extend_from_slice(&scratch[..produced]);
            input = &input[(compress.total_in() - read) as usize..];
            if status == gix::zlib::Status::StreamEnd {
                break;
            }
        }
        put(&mut out, &entry)?;
        entries.push(Entry {
            id: *id,
            crc: crc32fast::hash(&entry),
            offset,
        });
        offset += entry.len() as u64;
    }
    let sum = hasher.try_finalize().map_err(std::io::Error::other)?;
    out.write_all(sum.as_slice())?;
    out.flush()?;
    Ok((entries, sum))
}

#[cfg(test)]
pub(crate) mod tests {
    use git_session_schema::event::Level;
    use git_session_schema::{Agent, Event, SessionHeader, SessionId};

    use super::*;
    use crate::store::{CommitInfo, SeqMode};

    pub(crate) fn store(dir: &Path) -> Store {
        let repo = gix::init(dir).unwrap();
        Store::from_repo(repo).unwrap()
    }

    fn create(store: &Store, i: usize) -> SessionId {
        let texts = (0..3).map(|n| format!("session {i} message {n}"));
        create_session(
            store,
            &format!("bulk-{i:03}"),
            "message.user",
            "text",
            texts,
        )
    }

    /// Creates session `id` in one batch: one `kind` event per text, the
    /// text under `field`.
    pub(crate) fn create_session(
        store: &Store,
        id: &str,
        kind: &str,
        field: &str,
        texts: impl Iterator<Item = String>,
    ) -> SessionId {
        let texts: Vec<String> = texts.collect();
        let id = SessionId::new(id).unwrap();
        let header = SessionHeader::new(id.clone(), Agent::Claude, "2026-01-01T00:00:00Z");
        let info = CommitInfo {
            time: 1_767_225_600,
            code_commit: None,
            attach: None,
            after_commit: false,
        };
        store
            .create(&header, SeqMode::Assign, &info, |sink| {
                for text in &texts {
                    sink.push(Event::new(
                        0,
                        "2026-01-01T00:00:00Z",
                        Agent::Claude,
                        "user",
                        kind,
                        Level::History,
                        serde_json::json!({ field: text }),
                    ))?;
                }
                Ok::<_, StoreError>(())
            })
            .unwrap();
        id
    }

    /// Appends one `message.user` event ("more") to `id` in its own batch.
    fn append_more(store: &Store, id: &SessionId) {
        let info = CommitInfo {
            time: 1_767_225_601,
            code_commit: None,
            attach: None,
            after_commit: false,
        };
        store
            .append(id, SeqMode::Assign, &info, |sink| {
                sink.push(Event::new(
                    0,
                    "2026-01-01T00:00:01Z",
                    Agent::Claude,
                    "user",
                    "message.user",
                    Level::History,
                    serde_json::json!({ "text": "more" }),
                ))
                .map(|_| ())
            })
            .unwrap();
    }

    fn lock_is_free(store: &Store, id: &SessionId) -> bool {
        let path = store.state_dir.join("locks").join(format!("{id}.lock"));
        std::fs::File::open(path).unwrap().try_lock().is_ok()
    }

    #[test]
    fn nothing_is_published_before_the_flush_and_the_locks_are_held_until_then() {
        let dir = tempfile::tempdir().unwrap();
        let plain = store(dir.path());
        let bulk = plain.bulk();
        let id = create(&bulk, 0);
        // The bulk store reads its own batch; nothing is on disk yet.
        assert_eq!(bulk.stat(&id).unwrap().events, 3);
        assert!(plain.tip(&id).unwrap().is_none());
        assert!(!lock_is_free(&plain, &id));
        // A second batch of the held session does not wait for its own lock.
        append_more(&bulk, &id);
        // Dropped without a flush (a killed capture): nothing was published.
        drop(bulk);
        assert!(plain.tip(&id).unwrap().is_none());
        assert!(lock_is_free(&plain, &id));
        assert!(plain.session_ids().unwrap().is_empty());
    }

    #[test]
    fn a_flush_packs_the_objects_and_publishes_every_ref() {
        let dir = tempfile::tempdir().unwrap();
        let plain = store(dir.path());
        let bulk = plain.bulk();
        // More than one ref transaction's worth, so a flush happens midway.
        let ids: Vec<SessionId> = (0..PENDING_REFS + 10).map(|i| create(&bulk, i)).collect();
        bulk.flush().unwrap();
        drop(bulk);
        assert_eq!(plain.session_ids().unwrap(), ids);
        for id in &ids {
            assert_eq!(plain.stat(id).unwrap().events, 3);
            assert!(lock_is_free(&plain, id));
            assert!(plain.verify(id).unwrap().problems.is_empty());
        }
        let packs = std::fs::read_dir(dir.path().join(".git/objects/pack"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "pack")
            })
            .count();
        assert!(packs >= 1, "{packs} packs");
        // Each index is the one `git index-pack` makes of its pack.
        let pack_dir = dir.path().join(".git/objects/pack");
        for entry in std::fs::read_dir(&pack_dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "pack") {
                continue;
            }
            assert_index_is_gits(dir.path(), &path);
        }
        git_ok(dir.path(), &["fsck".as_ref(), "--strict".as_ref()]);
    }

    #[test]
    fn many_refs_go_straight_into_packed_refs_and_each_is_still_compared() {
        use crate::store::pack::REFS_TO_PACK;
        let dir = tempfile::tempdir().unwrap();
        let plain = store(dir.path());
        // Sessions published one by one are loose refs.
        let old: Vec<SessionId> = (0..REFS_TO_PACK + 6).map(|i| create(&plain, i)).collect();
        let refs_dir = dir.path().join(".git/refs/sessions");
        let loose = || -> Vec<String> {
            std::fs::read_dir(&refs_dir)
                .map(|d| {
                    d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        assert_eq!(loose().len(), old.len());
        let append_to_all = |bulk: &Store| {
            for id in &old {
                append_more(bulk, id);
            }
        };
        // A bulk flush of many: loose refs updated, new ones created, all
        // into packed-refs, no loose ref or lock file left.
        let bulk = plain.bulk();
        append_to_all(&bulk);
        let new: Vec<SessionId> = (500..510).map(|i| create(&bulk, i)).collect();
        bulk.flush().unwrap();
        drop(bulk);
        assert_eq!(loose(), Vec::<String>::new());
        let packed = std::fs::read_to_string(dir.path().join(".git/packed-refs")).unwrap();
        for id in old.iter().chain(&new) {
            let tip = plain.tip(id).unwrap().unwrap();
            assert!(
                packed.contains(&format!("{tip} refs/sessions/{id}\n")),
                "{id} not packed at {tip}"
            );
        }
        for id in &old {
            assert_eq!(plain.stat(id).unwrap().events, 4, "{id}");
        }
        git_ok(dir.path(), &["fsck".as_ref(), "--strict".as_ref()]);

        // Another writer that ignores the locks moves one ref between the
        // batch and the flush: that ref is refused and named, the others
        // are published against the tips they were built on.
        let bulk = plain.bulk();
        append_to_all(&bulk);
        let moved = &old[3];
        let elsewhere = plain.tip(&old[4]).unwrap().unwrap();
        git_ok(
            dir.path(),
            &[
                "update-ref".as_ref(),
                format!("refs/sessions/{moved}").as_ref(),
                elsewhere.to_string().as_ref(),
            ],
        );
        let refused = bulk.flush().unwrap_err().to_string();
        drop(bulk);
        assert!(
            refused.contains(&format!("refs/sessions/{moved}")),
            "{refused}"
        );
        assert_eq!(plain.tip(moved).unwrap(), Some(elsewhere));
        for id in old.iter().filter(|id| *id != moved) {
            assert_eq!(plain.stat(id).unwrap().events, 5, "{id}");
        }
        git_ok(dir.path(), &["fsck".as_ref(), "--strict".as_ref()]);
    }

    #[test]
    fn new_session_refs_go_into_packed_refs_under_its_lock_alone() {
        use crate::store::pack::{REFS_TO_PACK, RefsWritten};
        use gix::refs::transaction::{Change, LogChange, PreviousValue, RefLog};
        use gix::refs::{Target, transaction::RefEdit};
        let dir = tempfile::tempdir().unwrap();
        let plain = store(dir.path());
        let (one, two) = (create(&plain, 0), create(&plain, 1));
        let (tip, other) = (
            plain.tip(&one).unwrap().unwrap(),
            plain.tip(&two).unwrap().unwrap(),
        );
        // The user's refs, packed with the first session's: a branch and an
        // annotated tag, whose peeled line must survive the rewrite.
        let tip_hex = tip.to_string();
        git_ok(
            dir.path(),
            &["update-ref", "refs/heads/main", &tip_hex].map(std::ffi::OsStr::new),
        );
        git_ok(
            dir.path(),
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "tag",
                "-a",
                "-m",
                "v1",
                "v1",
                &tip_hex,
            ]
            .map(std::ffi::OsStr::new),
        );
        git_ok(
            dir.path(),
            &["pack-refs", "--all"].map(std::ffi::OsStr::new),
        );
        let packed_refs = dir.path().join(".git/packed-refs");
        let before = std::fs::read_to_string(&packed_refs).unwrap();
        assert!(before.contains("\n^"), "{before}");
        let edit = |name: &str, expected: Option<gix::ObjectId>, new: gix::ObjectId| RefEdit {
            change: Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: "capture".into(),
                },
                expected: match expected {
                    Some(t) => PreviousValue::MustExistAndMatch(Target::Object(t)),
                    None => PreviousValue::MustNotExist,
                },
                new: Target::Object(new),
            },
            name: name.try_into().unwrap(),
            deref: false,
        };
        let names: Vec<String> = (0..REFS_TO_PACK)
            .map(|i| format!("refs/sessions/new-{i:03}"))
            .collect();
        // New sessions and a packed one moved on, as a first import's flush.
        let mut edits: Vec<RefEdit> = names.iter().map(|n| edit(n, None, tip)).collect();
        edits.push(edit(&format!("refs/sessions/{one}"), Some(tip), other));
        assert_eq!(
            plain.edit_session_refs_by(edits).unwrap(),
            RefsWritten::PackedOnly
        );
        assert!(!dir.path().join(".git/refs/sessions/new-000").exists());
        assert!(!dir.path().join(".git/refs/sessions/new-000.lock").exists());
        let after = std::fs::read_to_string(&packed_refs).unwrap();
        for line in before.lines().filter(|l| !l.ends_with(&format!("/{one}"))) {
            assert!(
                after.contains(&format!("{line}\n")),
                "{line} lost:\n{after}"
            );
        }
        // git finds every ref (a binary search: the file is sorted).
        for name in [
            names[0].as_str(),
            &names[REFS_TO_PACK / 2],
            &names[REFS_TO_PACK - 1],
        ] {
            assert_eq!(
                git_ok(dir.path(), &["rev-parse", name].map(std::ffi::OsStr::new)),
                tip_hex
            );
        }
        assert_eq!(plain.tip(&one).unwrap(), Some(other));
        git_ok(dir.path(), &["fsck", "--strict"].map(std::ffi::OsStr::new));

        // A ref that is not where the flush expects it: refused whole, the
        // file left as it was.
        let stale: Vec<RefEdit> = names.iter().map(|n| edit(n, None, other)).collect();
        let refused = plain.edit_session_refs_by(stale).unwrap_err();
        assert!(refused.contains("new-000"), "{refused}");
        assert_eq!(std::fs::read_to_string(&packed_refs).unwrap(), after);

        // A loose ref among them: gix's transaction, a lock file per ref.
        git_ok(
            dir.path(),
            &["update-ref", &names[1], &other.to_string()].map(std::ffi::OsStr::new),
        );
        let mut moved: Vec<RefEdit> = names.iter().map(|n| edit(n, Some(tip), other)).collect();
        moved[1] = edit(&names[1], Some(other), tip);
        assert_eq!(
            plain.edit_session_refs_by(moved).unwrap(),
            RefsWritten::Packed
        );
        assert_eq!(
            git_ok(
                dir.path(),
                &["rev-parse", names[0].as_str()].map(std::ffi::OsStr::new)
            ),
            other.to_string()
        );
        assert_eq!(
            git_ok(
                dir.path(),
                &["rev-parse", names[1].as_str()].map(std::ffi::OsStr::new)
            ),
            tip_hex
        );
        git_ok(dir.path(), &["fsck", "--strict"].map(std::ffi::OsStr::new));
    }

    #[test]
    fn a_tip_is_read_under_its_exact_name_loose_then_packed() {
        let dir = tempfile::tempdir().unwrap();
        let plain = store(dir.path());
        let (one, two) = (create(&plain, 0), create(&plain, 1));
        let tip = |id: &SessionId| {
            git_ok(
                dir.path(),
                &["rev-parse", &format!("refs/sessions/{id}")].map(std::ffi::OsStr::new),
            )
        };
        let (first, second) = (tip(&one), tip(&two));
        let name = |id: &SessionId| format!("refs/sessions/{id}");
        let exact = |id: &SessionId| {
            plain
                .exact_tip(&name(id))
                .unwrap()
                .map(|t| t.map(|t| t.to_string()))
        };
        // Loose.
        assert_eq!(exact(&one), Some(Some(first.clone())));
        git_ok(
            dir.path(),
            &["pack-refs", "--all"].map(std::ffi::OsStr::new),
        );
        // Packed only, and a loose file over the packed line wins.
        assert_eq!(exact(&one), Some(Some(first.clone())));
        git_ok(
            dir.path(),
            &["update-ref", &name(&one), &second].map(std::ffi::OsStr::new),
        );
        assert_eq!(exact(&one), Some(Some(second.clone())));
        assert_eq!(plain.tip(&one).unwrap().unwrap().to_string(), second);
        // Missing.
        let none = SessionId::new("bulk-999").unwrap();
        assert_eq!(exact(&none), Some(None));
        assert_eq!(plain.tip(&none).unwrap(), None);
        // A symbolic ref is left to gix, which follows it.
        git_ok(
            dir.path(),
            &["symbolic-ref", &name(&none), &name(&two)].map(std::ffi::OsStr::new),
        );
        assert_eq!(exact(&none), None);
        assert_eq!(plain.tip(&none).unwrap().unwrap().to_string(), second);
    }

    /// Returns the packs under `dir`'s object store.
    fn packs(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut packs: Vec<_> = std::fs::read_dir(dir.join(".git/objects/pack"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "pack"))
            .collect();
        packs.sort();
        packs
    }

    #[test]
    fn the_packs_of_many_flushes_are_merged_into_one_that_git_reads_as_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let plain = store(dir.path());
        let bulk = plain.bulk();
        // Three flushes' worth of sessions, each flush a pack.
        let mut ids = Vec::new();
        for round in 0..3 {
            for i in 0..PACK_FROM {
                ids.push(create(&bulk, round * 100 + i));
            }
            bulk.flush().unwrap();
        }
        let before = packs(dir.path());
        assert_eq!(before.len(), 3, "{before:?}");
        bulk.merge_packs().unwrap();
        let after = packs(dir.path());
        assert_eq!(after.len(), 1, "{after:?}");
        assert!(!before.contains(&after[0]));
        for old in &before {
            assert!(!old.with_extension("idx").exists(), "{}", old.display());
        }
        // The merged index is the one git makes of the merged pack.
        assert_index_is_gits(dir.path(), &after[0]);
        git_ok(dir.path(), &["fsck".as_ref(), "--strict".as_ref()]);
        // The store that wrote the packs, and a new one, read every session.
        drop(bulk);
        let fresh = store_at(dir.path());
        for s in [&plain, &fresh] {
            assert_eq!(s.session_ids().unwrap(), ids);
            for id in &ids {
                assert_eq!(s.stat(id).unwrap().events, 3);
            }
        }
        // Nothing to merge: one pack stays as it is.
        let again = plain.bulk();
        again.merge_packs().unwrap();
        assert_eq!(packs(dir.path()), after);
    }

    /// More packs than gix's default of 32 slots: each is seen by the
    /// store that wrote it (opened as `Store::discover` opens it), during
    /// the capture and after the merges.
    #[test]
    fn every_pack_a_long_capture_writes_is_seen_by_the_store_that_wrote_it() {
        let (dir, plain) = discovered();
        let bulk = plain.bulk();
        let mut ids = Vec::new();
        for round in 0..(3 * MERGE_EVERY + 8) {
            ids.extend(flush_round(&bulk, round));
            // Read back at once, as a tree written next checks its blobs.
            let last = ids.last().unwrap();
            assert!(bulk.repo.has_object(last), "round {round}: {last} unseen");
        }
        // Three merges during the capture, then the flushes since.
        assert_eq!(packs(dir.path()).len(), 3 + 8);
        for id in &ids {
            assert!(bulk.repo.has_object(id), "{id} unseen");
        }
        bulk.merge_packs().unwrap();
        assert_eq!(packs(dir.path()).len(), 1);
        for id in &ids {
            let blob = bulk.repo.find_object(*id).unwrap();
            assert!(blob.data.starts_with(b"round "));
        }
        git_ok(dir.path(), &["fsck".as_ref(), "--strict".as_ref()]);
    }

    /// A session of several 4 MiB chunks in one batch: its chunks go into
    /// the capture's pack as it writes them (no loose chunk for the pack
    /// step's `git pack-objects` to compress again), and read back whole.
    #[test]
    fn a_long_sessions_chunks_go_into_the_pack_not_loose() {
        let (dir, plain) = discovered();
        let bulk = plain.bulk();
        // About 10 MiB: three chunks.
        let text = "a line of tool output ".repeat(1500);
        let events: u64 = 320;
        let outputs = (0..events).map(|n| format!("{n} {text}"));
        let id = create_session(&bulk, "long-session", "tool.result", "output", outputs);
        bulk.flush().unwrap();
        bulk.merge_packs().unwrap();
        // Only the capture's last few objects are loose (fewer than a
        // pack's worth), the last chunk among them; every full chunk is
        // in the pack.
        let loose = loose_sizes(dir.path());
        assert!(loose.len() < PACK_FROM, "{loose:?}");
        let big = loose.iter().filter(|&&n| n >= 1 << 20).count();
        assert!(big <= 1, "loose chunks: {loose:?}");
        assert_eq!(packs(dir.path()).len(), 1);
        drop(bulk);
        let fresh = store_at(dir.path());
        assert_eq!(fresh.stat(&id).unwrap().events, events);
        git_ok(dir.path(), &["fsck".as_ref(), "--strict".as_ref()]);
    }

    /// Returns the size of each loose object of the repository at `dir`.
    fn loose_sizes(dir: &Path) -> Vec<u64> {
        let objects = dir.join(".git/objects");
        let mut sizes = Vec::new();
        for fan in std::fs::read_dir(&objects).unwrap().flatten() {
            let name = fan.file_name().to_string_lossy().into_owned();
            if name.len() != 2 || !fan.path().is_dir() {
                continue;
            }
            for file in std::fs::read_dir(fan.path()).unwrap().flatten() {
                let id = format!("{name}{}", file.file_name().to_string_lossy());
                let out = std::process::Command::new("git")
                    .args(["cat-file", "-s", &id])
                    .current_dir(dir)
                    .output()
                    .unwrap();
                sizes.push(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap());
            }
        }
        sizes
    }

    #[test]
    fn a_pack_changed_under_the_capture_is_left_unmerged() {
        let dir = tempfile::tempdir().unwrap();
        let plain = store(dir.path());
        let bulk = plain.bulk();
        for round in 0..2 {
            for i in 0..PACK_FROM {
                create(&bulk, round * 100 + i);
            }
            bulk.flush().unwrap();
        }
        let before = packs(dir.path());
        assert_eq!(before.len(), 2);
        // Another hand cut a pack short: the merge stops, nothing is removed.
        cut_short(&before[1]);
        let err = bulk.merge_packs().unwrap_err().to_string();
        assert!(err.contains("unmerged"), "{err}");
        assert_eq!(packs(dir.path()), before);
    }

    /// A merge during the capture that fails (a pack cut short under it)
    /// leaves the packs, and is not tried again at every later flush.
    #[test]
    fn a_failed_merge_during_the_capture_is_not_tried_again() {
        let (dir, plain) = discovered();
        let bulk = plain.bulk();
        let flush = |round| drop(flush_round(&bulk, round));
        for round in 0..MERGE_EVERY - 1 {
            flush(round);
        }
        cut_short(&packs(dir.path())[0]);
        flush(MERGE_EVERY);
        assert_eq!(
            packs(dir.path()).len(),
            MERGE_EVERY,
            "nothing merged or removed"
        );
        let held = |b: &Store| {
            let b = b.bulk.as_ref().unwrap().borrow();
            (b.packs.len(), b.merged)
        };
        assert_eq!(held(&bulk), (MERGE_EVERY, MERGE_EVERY));
        for round in 0..MERGE_EVERY {
            flush(MERGE_EVERY + 1 + round);
        }
        // The 32 flushes since are merged; the packs before stay.
        assert_eq!(held(&bulk), (MERGE_EVERY + 1, MERGE_EVERY + 1));
        assert_eq!(packs(dir.path()).len(), MERGE_EVERY + 1);
    }

    /// A new repository, its store opened as `Store::discover` opens one.
    fn discovered() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        gix::init(dir.path()).unwrap();
        let store = Store::discover(dir.path()).unwrap();
        (dir, store)
    }

    /// Writes a pack's worth of small blobs named by `round` into `bulk`
    /// and flushes them; returns their ids.
    fn flush_round(bulk: &Store, round: usize) -> Vec<ObjectId> {
        let ids = (0..PACK_FROM)
            .map(|i| {
                let blob = format!("round {round} blob {i}");
                bulk.write_blob_sized(blob.as_bytes()).unwrap()
            })
            .collect();
        bulk.flush_objects().unwrap();
        ids
    }

    /// Cuts the pack at `path` short, as another hand might.
    fn cut_short(path: &Path) {
        let mut perms = std::fs::metadata(path).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        std::fs::set_permissions(path, perms).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(16)
            .unwrap();
    }

    /// Opens the store of an existing repository.
    fn store_at(dir: &Path) -> Store {
        Store::from_repo(gix::open(dir).unwrap()).unwrap()
    }

    /// Checks that the index beside `pack` is the one `git index-pack`
    /// makes of it.
    fn assert_index_is_gits(dir: &Path, pack: &Path) {
        let theirs = dir.join("theirs.idx");
        git_ok(
            dir,
            &[
                "index-pack".as_ref(),
                "-o".as_ref(),
                theirs.as_os_str(),
                pack.as_os_str(),
            ],
        );
        let ours = std::fs::read(pack.with_extension("idx")).unwrap();
        assert!(
            ours == std::fs::read(&theirs).unwrap(),
            "{}",
            pack.display()
        );
        std::fs::remove_file(&theirs).unwrap();
    }

    /// Runs git in `dir` and fails the test, with git's stderr, if it
    /// fails; returns its trimmed stdout.
    fn git_ok(dir: &Path, args: &[&std::ffi::OsStr]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}
