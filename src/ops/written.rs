//! The native sessions git-session wrote (`resume`, `handoff`), so that
//! capture knows them when the agent continues them: only the records
//! after what was written are new, and they belong to the canonical
//! session the file was written from (a resume), to a fork of it when that
//! session has moved on meanwhile, or to a child session linked to it by
//! lineage (a handoff), never to a new unrelated session repeating the
//! history.
//!
//! Kept as local state in `<git common dir>/session/written/<agent>.json`,
//! one entry per native file (by absolute path, as capture's cursors):
//! the native files are on this machine, so the record of writing them is
//! too; it is never pushed. Losing it is safe in the way losing cursors is:
//! the file is then captured as any other (see `capture`).

use std::collections::BTreeMap;
use std::path::Path;

use git_session_schema::{Agent, SessionId};
use serde::{Deserialize, Serialize};

use super::OpResult;
use crate::native::cursor::{tail_hash, write_atomic};

/// How a native session came to be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WrittenBy {
    /// `resume`: the file continues `session` itself.
    Resume,
    /// `handoff`: the file continues in another agent, as a child of
    /// `session` forked at `seq`.
    Handoff,
}

/// Records one native file git-session wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenFile {
    /// The canonical session the file holds.
    pub session: String,
    /// The last canonical seq the file holds (for a handoff, the `handoff`
    /// event's seq, where the child forks).
    pub seq: u64,
    /// The native session id written.
    pub native_id: String,
    /// The file's size as written: later bytes are the agent's.
    pub size: u64,
    /// Hash of the bytes before `size` (see [`tail_hash`]), to tell the
    /// written file from one rewritten since.
    pub tail: String,
    /// Resume or handoff.
    pub by: WrittenBy,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct WrittenIndex {
    version: u32,
    files: BTreeMap<String, WrittenFile>,
}

const VERSION: u32 = 1;

fn index_path(state_dir: &Path, agent: &Agent) -> std::path::PathBuf {
    state_dir.join("written").join(format!("{agent}.json"))
}

/// Holds the written files of one agent.
#[derive(Debug, Default)]
pub struct Written {
    files: BTreeMap<String, WrittenFile>,
}

impl Written {
    /// Loads the record for `agent`; empty when missing or unreadable.
    pub fn load(state_dir: &Path, agent: &Agent) -> Written {
        let files = std::fs::read(index_path(state_dir, agent))
            .ok()
            .and_then(|b| serde_json::from_slice::<WrittenIndex>(&b).ok())
            .filter(|i| i.version == VERSION)
            .map(|i| i.files)
            .unwrap_or_default();
        Written { files }
    }

    /// Returns what git-session wrote at `key` (the file's absolute path),
    /// if the file still starts with exactly that (`abs` is the file, `size`
    /// its size now).
    pub fn lookup(&self, key: &str, abs: &Path, size: u64) -> OpResult<Option<&WrittenFile>> {
        let Some(entry) = self.files.get(key) else {
            return Ok(None);
        };
        if size < entry.size || tail_hash(abs, entry.size)? != entry.tail {
            return Ok(None);
        }
        Ok(Some(entry))
    }
}

/// Says what [`record`] records.
pub struct Record<'a> {
    /// The agent written for.
    pub agent: &'a Agent,
    /// Its store root.
    pub root: &'a Path,
    /// Every file written, absolute.
    pub files: &'a [std::path::PathBuf],
    /// The canonical session written from.
    pub session: &'a SessionId,
    /// See [`WrittenFile::seq`].
    pub seq: u64,
    /// The native session id written.
    pub native_id: &'a str,
    /// Resume or handoff.
    pub by: WrittenBy,
}

/// Records the native session files just written (the file sources the
/// adapter would capture), replacing older entries for the same paths.
pub fn record(
    state_dir: &Path,
    adapter: &dyn git_session_adapters::Adapter,
    what: &Record<'_>,
) -> OpResult<()> {
    let path = index_path(state_dir, what.agent);
    let mut index = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<WrittenIndex>(&b).ok())
        .filter(|i| i.version == VERSION)
        .unwrap_or_default();
    index.version = VERSION;
    let mut changed = false;
    for file in what.files {
        let Ok(rel) = file.strip_prefix(what.root) else {
            continue;
        };
        // File sources only (JSONL, zstd-framed): capture reads those per
        // file; a database's sessions are known by their rows.
        if !matches!(
            crate::native::source_for(adapter, rel),
            Some(
                git_session_adapters::Source::Jsonl { .. }
                    | git_session_adapters::Source::ZstdJsonl { .. }
            )
        ) {
            continue;
        }
        let size = std::fs::metadata(file)
            .map_err(super::OpError::io(file))?
            .len();
        index.files.insert(
            file.to_string_lossy().into_owned(),
            WrittenFile {
                session: what.session.to_string(),
                seq: what.seq,
                native_id: what.native_id.to_owned(),
                size,
                tail: tail_hash(file, size)?,
                by: what.by,
            },
        );
        changed = true;
    }
    if changed {
        write_atomic(
            &path,
            &serde_json::to_vec(&index).expect("the record serializes"),
        )?;
    }
    Ok(())
}
