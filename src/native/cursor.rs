//! Capture cursors: how far each native source has been read, kept as
//! local, rebuildable state under `<git common dir>/session/capture/<agent>/`.
//!
//! Three kinds, one per source kind:
//!
//! * a JSONL file: byte offset after the last complete line ([`FileCursor`]
//!   with `frames == 0`);
//! * a zstd-framed file: byte offset of the next frame and the number of
//!   frames read ([`FileCursor::frames`]);
//! * a SQLite database: per table, the highest row id (or incremental
//!   column value) read, and per native session the canonical session it
//!   feeds ([`DbCursor`]); a JSON tree read as a database keeps the same,
//!   with each file's stamp instead of table marks ([`DbCursor::files`]).
//!
//! `index.json` holds one small entry per source (so an unchanged store
//! costs one `stat` per file, two for a database and its WAL); the
//! adapter's parse state (for a file, with its [`SeqMap`]) lives in its own
//! file under `state/`, one per file or per (database, session), read only
//! when there is something new. States are written with the index, after
//! the batches they describe are published ([`CursorIndex::save_state`]).
//! Losing any of it is safe: capture falls back to re-reading the source
//! and reconciling by native ids, so nothing is appended twice.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{NativeError, NativeResult};

/// Bytes before the cursor that are hashed to notice a rewritten file.
pub const TAIL_BYTES: u64 = 4096;

/// Records what is known about one native file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FileCursor {
    /// File size when last looked at.
    pub size: u64,
    /// Modification time when last looked at, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Bytes consumed: everything up to the last complete line (JSONL), or
    /// up to the last complete frame (zstd-framed).
    pub offset: u64,
    /// Lines consumed (decoded lines, for a framed file).
    pub lines: u64,
    /// Frames consumed; 0 for a JSONL file.
    #[serde(default)]
    pub frames: u64,
    /// SHA-256 (hex) of up to [`TAIL_BYTES`] bytes before `offset`.
    pub tail: String,
    /// SHA-256 (hex) of up to [`TAIL_BYTES`] bytes from the file's start
    /// (not past `offset`): a file rewritten from its first line on (Pi
    /// rewrites a session file in place, new header first) may keep its
    /// tail. Empty in cursors written before it was kept: not checked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub head: String,
    /// The canonical session it feeds; `None` for a file of another project.
    pub session: Option<String>,
    /// The session's event count right after this file's last batch.
    pub events: u64,
    /// Why the file was not captured, when it was skipped with a warning
    /// (no session facts found); `doctor` lists these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// Says whether a file changed since it was last looked at, cheaply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
}

impl Stamp {
    /// Stats `path`; a missing file has the zero stamp.
    pub fn of(path: &Path) -> Stamp {
        match std::fs::metadata(path) {
            Ok(meta) => Stamp {
                size: meta.len(),
                mtime_ns: meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos() as i128),
            },
            Err(_) => Stamp::default(),
        }
    }
}

/// Records what is known about one SQLite database.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DbCursor {
    /// The database file when last read.
    pub db: Stamp,
    /// Its `-wal` file when last read (zero when there was none).
    pub wal: Stamp,
    /// Per table, the highest `rowid` (or incremental column value) read.
    pub tables: BTreeMap<String, i64>,
    /// Per native session key, what it feeds.
    pub sessions: BTreeMap<String, RowSession>,
    /// For a JSON tree read as a database ([`super::tree`]): each file's
    /// stamp when last read, by path relative to the tree.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, Stamp>,
}

/// Records one native session of a database.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowSession {
    /// The canonical session it feeds; `None` for another project's session.
    pub session: Option<String>,
    /// The session's event count right after this session's last batch.
    pub events: u64,
    /// Per append-only table, the highest rowid handed to the adapter for
    /// this session (rows at or below it are never handed over again).
    #[serde(default)]
    pub seen: BTreeMap<String, i64>,
    /// A digest of the rows of [`Incremental::Whole`] tables last handed to
    /// the adapter (the session row): rows read again unchanged are not
    /// parsed again, so an unchanged session costs no store access.
    ///
    /// [`Incremental::Whole`]: git_session_adapters::source::Incremental::Whole
    #[serde(default)]
    pub whole: Option<String>,
    /// The session's change token when it was last read, for a database
    /// whose adapter declares a change query
    /// ([`git_session_adapters::source::Database::changes`]): a session
    /// whose token did not move is not read.
    #[serde(default)]
    pub token: Option<String>,
    /// Set for a session git-session wrote that the agent continued (see
    /// `ops::written`): its parse numbers the session's events from 0, in
    /// row order, and its saved state is a [`FileState`] whose seqs map
    /// them to the stored ones, as a file's; otherwise the parse numbers
    /// events as stored and the state is the adapter's alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mapped: bool,
}

/// Holds the cursors of one agent.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CursorIndex {
    /// Cursor format; other values are discarded (state is rebuildable).
    pub version: u32,
    /// File cursors by the native file's absolute path, so files under the
    /// same relative path in two agent homes (`--home`) are never taken for
    /// one another.
    pub files: BTreeMap<String, FileCursor>,
    /// Database cursors (a JSON tree's too) by the absolute path of the
    /// database (the tree's directory), as files are keyed.
    #[serde(default)]
    pub databases: BTreeMap<String, DbCursor>,
    #[serde(skip)]
    dir: PathBuf,
    /// States saved since the last write, by state file: written with the
    /// index ([`CursorIndex::save`]), after the batches they describe are
    /// published (see [`CursorIndex::save_state`]).
    #[serde(skip)]
    pending: BTreeMap<PathBuf, Vec<u8>>,
    /// Bytes in `pending`.
    #[serde(skip)]
    pending_bytes: usize,
}

/// Version 2: file keys are absolute paths; parses number a file's events
/// from 0 in file order and a file's state carries a [`SeqMap`] to the
/// stored seqs.
const VERSION: u32 = 2;

/// Maps the seqs a native file's parse gives its events (from 0, in file
/// order) to the seqs they are stored at.
///
/// The two differ once anything else was appended to the session between
/// two captures of the file (a handoff's events, an `append`, another
/// file), or when a re-read keeps only some events. Parents are numbered
/// the way the parse numbers them, so each stored event's `parent_seq` is
/// mapped through here too. Kept as runs of consecutive seqs: one run for
/// a file that is the whole session, one more per interruption.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqMap {
    /// `(file seq, stored seq)` at the start of each run, file seqs rising.
    runs: Vec<(u64, u64)>,
    /// File seqs mapped so far (the next one the parse gives).
    len: u64,
}

impl SeqMap {
    /// Returns the next file seq, the number of events mapped so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Returns whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maps the next file seq to `stored`.
    pub fn push(&mut self, stored: u64) {
        let file = self.len;
        let continues = self
            .runs
            .last()
            .is_some_and(|&(f, s)| s.checked_add(file - f) == Some(stored));
        if !continues {
            self.runs.push((file, stored));
        }
        self.len += 1;
    }

    /// Returns the stored seq of file seq `file`, if it was mapped.
    pub fn get(&self, file: u64) -> Option<u64> {
        if file >= self.len {
            return None;
        }
        let i = self.runs.partition_point(|&(f, _)| f <= file);
        let (f, s) = self.runs[i.checked_sub(1)?];
        Some(s + (file - f))
    }
}

/// Holds what a later capture of one file needs: the adapter's parse state
/// and the seq map.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FileState {
    /// The adapter's state after the last complete line read.
    pub adapter: Value,
    /// File seqs to stored seqs.
    pub seqs: SeqMap,
}

impl CursorIndex {
    /// Loads the index for `agent`, or an empty one when missing or unreadable.
    pub fn load(state_dir: &Path, agent: &str) -> CursorIndex {
        let dir = state_dir.join("capture").join(agent);
        let mut index = std::fs::read(dir.join("index.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<CursorIndex>(&b).ok())
            .filter(|i| i.version == VERSION)
            .unwrap_or_default();
        // Database cursors were once keyed by the path relative to the
        // agent's store root, shared by every home: such a cursor may be
        // another home's, so it is dropped (the sessions are read again,
        // and what is stored already is not appended twice).
        index
            .databases
            .retain(|key, _| Path::new(key).is_absolute());
        index.version = VERSION;
        index.dir = dir;
        index
    }

    /// Writes the states saved since the last write, then the index, each
    /// atomically.
    pub fn save(&mut self) -> NativeResult<()> {
        self.write_states()?;
        write_atomic(
            &self.dir.join("index.json"),
            &serde_json::to_vec(self).expect("cursors serialize"),
        )
    }

    /// Returns the saved state of a file ([`FileState`]) or of
    /// `<db>#<session>` for a database session (the adapter's state), if any.
    pub fn load_state<T: serde::de::DeserializeOwned>(&self, rel: &str) -> Option<T> {
        let path = self.state_path(rel);
        match self.pending.get(&path) {
            Some(bytes) => serde_json::from_slice(bytes).ok(),
            None => serde_json::from_slice(&std::fs::read(path).ok()?).ok(),
        }
    }

    /// Saves the state of a file or database session. It is held until
    /// [`CursorIndex::write_states`] (at the latest [`CursorIndex::save`]):
    /// a bulk capture publishes its batches at its flush, and a state
    /// written before them would describe records the store does not hold
    /// if the capture ended in between (a later capture would read on from
    /// the old cursor with the new state). The caller writes them once
    /// [`CursorIndex::pending_bytes`] grows large, after a flush.
    pub fn save_state<T: Serialize>(&mut self, rel: &str, state: &T) -> NativeResult<()> {
        let bytes = serde_json::to_vec(state).expect("state serializes");
        let path = self.state_path(rel);
        self.pending_bytes += bytes.len();
        if let Some(old) = self.pending.insert(path, bytes) {
            self.pending_bytes -= old.len();
        }
        Ok(())
    }

    /// Returns the bytes of the states saved and not written yet.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Writes the states saved since the last write, each atomically; the
    /// caller has published the batches they describe.
    pub fn write_states(&mut self) -> NativeResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let dir = self.dir.join("state");
        std::fs::create_dir_all(&dir).map_err(NativeError::io(&dir))?;
        for (path, bytes) in std::mem::take(&mut self.pending) {
            write_file_atomic(&path, &bytes)?;
        }
        self.pending_bytes = 0;
        Ok(())
    }

    fn state_path(&self, rel: &str) -> PathBuf {
        let digest = Sha256::digest(rel.as_bytes());
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join("state").join(format!("{name}.json"))
    }
}

/// Returns the hex SHA-256 of up to [`TAIL_BYTES`] bytes of `path` before `offset`.
pub fn tail_hash(path: &Path, offset: u64) -> NativeResult<String> {
    range_hash(path, offset.saturating_sub(TAIL_BYTES), offset)
}

/// Returns the hex SHA-256 of up to [`TAIL_BYTES`] bytes from the start of
/// `path`, not past `offset`.
pub fn head_hash(path: &Path, offset: u64) -> NativeResult<String> {
    range_hash(path, 0, offset.min(TAIL_BYTES))
}

/// Returns the hex SHA-256 of the bytes `start..offset` of `path`.
fn range_hash(path: &Path, start: u64, offset: u64) -> NativeResult<String> {
    let mut file = std::fs::File::open(path).map_err(NativeError::io(path))?;
    file.seek(SeekFrom::Start(start))
        .map_err(NativeError::io(path))?;
    let mut buf = vec![0; (offset - start) as usize];
    file.read_exact(&mut buf).map_err(NativeError::io(path))?;
    Ok(Sha256::digest(&buf)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> NativeResult<()> {
    let dir = path.parent().expect("state files live in a directory");
    std::fs::create_dir_all(dir).map_err(NativeError::io(dir))?;
    write_file_atomic(path, bytes)
}

/// [`write_atomic`] into a directory that exists.
fn write_file_atomic(path: &Path, bytes: &[u8]) -> NativeResult<()> {
    let dir = path.parent().expect("state files live in a directory");
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(NativeError::io(dir))?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(NativeError::io(path))?;
    tmp.persist(path).map_err(|e| NativeError::Io {
        path: path.to_owned(),
        source: e.error,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_map_keeps_runs_and_maps_every_pushed_seq() {
        let mut map = SeqMap::default();
        for s in [0, 1, 2, 5, 6, 3, 9] {
            map.push(s);
        }
        let mapped: Vec<Option<u64>> = (0..8).map(|f| map.get(f)).collect();
        assert_eq!(
            mapped,
            vec![
                Some(0),
                Some(1),
                Some(2),
                Some(5),
                Some(6),
                Some(3),
                Some(9),
                None
            ]
        );
        assert_eq!(map.runs.len(), 4);
        assert_eq!(map.len(), 7);
    }

    #[test]
    fn states_reach_the_disk_with_the_index_and_not_before() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = CursorIndex::load(dir.path(), "hermes");
        index
            .save_state("state.db#s1", &serde_json::json!({"calls": 1}))
            .unwrap();
        let file = index.state_path("state.db#s1");
        assert!(
            !file.exists(),
            "a state was written before its batch was published"
        );
        // This capture reads its own saved state.
        let state: Value = index.load_state("state.db#s1").unwrap();
        assert_eq!(state["calls"], 1);
        assert!(index.pending_bytes() > 0);
        index
            .save_state("state.db#s1", &serde_json::json!({"calls": 2}))
            .unwrap();
        index.save().unwrap();
        assert_eq!(index.pending_bytes(), 0);
        let again = CursorIndex::load(dir.path(), "hermes");
        let state: Value = again.load_state("state.db#s1").unwrap();
        assert_eq!(state["calls"], 2);
    }
}
