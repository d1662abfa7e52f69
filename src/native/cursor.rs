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
//!   feeds ([`DbCursor`]).
//!
//! `index.json` holds one small entry per source (so an unchanged store
//! costs one `stat` per file, two for a database and its WAL); the
//! adapter's parse state lives in its own file under `state/`, one per file
//! or per (database, session), read only when there is something new.
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
    /// The canonical session it feeds; `None` for a file of another project.
    pub session: Option<String>,
    /// The session's event count right after this file's last batch.
    pub events: u64,
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
}

/// Records one native session of a database.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowSession {
    /// The canonical session it feeds; `None` for another project's session.
    pub session: Option<String>,
    /// The session's event count right after this session's last batch.
    pub events: u64,
}

/// Holds the cursors of one agent.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct CursorIndex {
    /// Cursor format; other values are discarded (state is rebuildable).
    pub version: u32,
    /// File cursors by path relative to the agent's store root.
    pub files: BTreeMap<String, FileCursor>,
    /// Database cursors by path relative to the agent's store root.
    #[serde(default)]
    pub databases: BTreeMap<String, DbCursor>,
    #[serde(skip)]
    dir: PathBuf,
}

const VERSION: u32 = 1;

impl CursorIndex {
    /// Loads the index for `agent`, or an empty one when missing or unreadable.
    pub fn load(state_dir: &Path, agent: &str) -> CursorIndex {
        let dir = state_dir.join("capture").join(agent);
        let mut index = std::fs::read(dir.join("index.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<CursorIndex>(&b).ok())
            .filter(|i| i.version == VERSION)
            .unwrap_or_default();
        index.version = VERSION;
        index.dir = dir;
        index
    }

    /// Writes the index atomically.
    pub fn save(&self) -> NativeResult<()> {
        write_atomic(
            &self.dir.join("index.json"),
            &serde_json::to_vec(self).expect("cursors serialize"),
        )
    }

    /// Returns the saved adapter state of a file (or of `<db>#<session>`
    /// for a database session), if any.
    pub fn load_state(&self, rel: &str) -> Option<Value> {
        let bytes = std::fs::read(self.state_path(rel)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Saves the adapter state of a file atomically.
    pub fn save_state(&self, rel: &str, state: &Value) -> NativeResult<()> {
        write_atomic(
            &self.state_path(rel),
            &serde_json::to_vec(state).expect("state serializes"),
        )
    }

    fn state_path(&self, rel: &str) -> PathBuf {
        let digest = Sha256::digest(rel.as_bytes());
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join("state").join(format!("{name}.json"))
    }
}

/// Returns the hex SHA-256 of up to [`TAIL_BYTES`] bytes of `path` before `offset`.
pub fn tail_hash(path: &Path, offset: u64) -> NativeResult<String> {
    let start = offset.saturating_sub(TAIL_BYTES);
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
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(NativeError::io(dir))?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(NativeError::io(path))?;
    tmp.persist(path).map_err(|e| NativeError::Io {
        path: path.to_owned(),
        source: e.error,
    })?;
    Ok(())
}
