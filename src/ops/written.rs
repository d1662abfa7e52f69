//! The native sessions git-session wrote (`resume`, `handoff`), so that
//! capture knows them when the agent continues them: only the records
//! after what was written are new, and they belong to the canonical
//! session the file was written from (a resume), to a fork of it when that
//! session has moved on meanwhile, or to a child session linked to it by
//! lineage (a handoff), never to a new unrelated session repeating the
//! history.
//!
//! Kept as local state in `<git common dir>/session/written/<agent>.json`,
//! one entry per native file (by absolute path, as capture's cursors) and
//! one per database session (by the database's absolute path and the
//! session's key): the native sessions are on this machine, so the record
//! of writing them is too; it is never pushed. Losing it is safe in the
//! way losing cursors is: the session is then captured as any other (see
//! `capture`).
//!
//! A database session is told apart from what the agent added to it by
//! its rows: per table other than the session table, the highest `rowid`
//! of the session's rows right after the write, and for a table read by a
//! column (rows updated in place, e.g. OpenCode's `time_updated`) the
//! highest value of that column among them. A row at or below both is one
//! git-session wrote; a row the agent added or touched since is above one
//! of them (a `rowid` SQLite handed out again after a delete still carries
//! the agent's newer time).

use std::collections::BTreeMap;
use std::path::Path;

use git_session_adapters::RowWrite;
use git_session_adapters::source::{Database, Incremental, Row, Source};
use git_session_schema::{Agent, SessionId};
use serde::{Deserialize, Serialize};

use super::OpResult;
use crate::native::cursor::{tail_hash, write_atomic};
use crate::native::sqlite;

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

/// Records one database session git-session wrote (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenRows {
    /// The canonical session the rows hold.
    pub session: String,
    /// As [`WrittenFile::seq`].
    pub seq: u64,
    /// The native session id written (the root of a chain written as
    /// several sessions).
    pub native_id: String,
    /// Per table, the highest `rowid` of the session's rows as written.
    pub rowids: BTreeMap<String, i64>,
    /// Per table read by a column, the highest value of that column among
    /// the session's rows as written.
    #[serde(default)]
    pub columns: BTreeMap<String, i64>,
    /// Resume or handoff.
    pub by: WrittenBy,
}

impl WrittenRows {
    /// Returns whether `row` (of the database `decl`) is one git-session
    /// wrote: a session-table row, or one at or below the marks.
    pub fn wrote(&self, decl: &Database, row: &Row) -> bool {
        let Some(table) = decl.tables.iter().find(|t| t.name == row.table) else {
            return false;
        };
        if table.incremental == Incremental::Whole {
            return true;
        }
        if self.rowids.get(row.table).is_none_or(|m| row.rowid > *m) {
            return false;
        }
        match table.incremental {
            Incremental::Column(column) => {
                let Some(mark) = self.columns.get(row.table) else {
                    return false;
                };
                column_value(row, column).is_some_and(|v| v <= *mark)
            }
            _ => true,
        }
    }

    /// Returns a digest of what was written, to tell two writes of one
    /// session apart.
    pub fn stamp(&self) -> String {
        let text = serde_json::to_string(&(&self.rowids, &self.columns)).expect("marks serialize");
        tail_of(text.as_bytes())
    }
}

/// Returns the integer value of `column` in `row`, if it has one.
fn column_value(row: &Row, column: &str) -> Option<i64> {
    let v: serde_json::Value = serde_json::from_slice(&row.json).ok()?;
    let v = v.get(column)?;
    v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))
}

fn tail_of(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct WrittenIndex {
    version: u32,
    files: BTreeMap<String, WrittenFile>,
    /// By `<database's absolute path>#<session key>`.
    #[serde(default)]
    rows: BTreeMap<String, WrittenRows>,
}

fn rows_key(db: &Path, session: &str) -> String {
    format!("{}#{session}", db.to_string_lossy())
}

const VERSION: u32 = 1;

fn index_path(state_dir: &Path, agent: &Agent) -> std::path::PathBuf {
    state_dir.join("written").join(format!("{agent}.json"))
}

/// Holds the written files of one agent.
#[derive(Debug, Default)]
pub struct Written {
    files: BTreeMap<String, WrittenFile>,
    rows: BTreeMap<String, WrittenRows>,
}

impl Written {
    /// Loads the record for `agent`; empty when missing or unreadable.
    pub fn load(state_dir: &Path, agent: &Agent) -> Written {
        let index = load_index(&index_path(state_dir, agent));
        Written {
            files: index.files,
            rows: index.rows,
        }
    }

    /// Returns what git-session wrote as the session `key` of the database
    /// at `db` (absolute), if it did.
    pub fn lookup_rows(&self, db: &Path, key: &str) -> Option<&WrittenRows> {
        self.rows.get(&rows_key(db, key))
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

    /// Returns the native ids `resume` wrote `session` under in the store
    /// at `root` whose file or database is still there, the one holding
    /// the most of the session first.
    pub fn resumed_as(&self, root: &Path, session: &SessionId) -> Vec<String> {
        let files = self
            .files
            .iter()
            .map(|(path, f)| (path.as_str(), &f.session, f.seq, &f.native_id, f.by));
        let rows = self.rows.iter().map(|(key, r)| {
            let db = key.rsplit_once('#').map_or(key.as_str(), |(db, _)| db);
            (db, &r.session, r.seq, &r.native_id, r.by)
        });
        let mut found: Vec<(u64, String)> = files
            .chain(rows)
            .filter(|(path, s, _, _, by)| {
                *by == WrittenBy::Resume
                    && s.as_str() == session.as_str()
                    && Path::new(path).starts_with(root)
                    && Path::new(path).is_file()
            })
            .map(|(_, _, seq, id, _)| (seq, id.clone()))
            .collect();
        found.sort_by(|a, b| b.cmp(a));
        let mut ids: Vec<String> = found.into_iter().map(|(_, id)| id).collect();
        ids.dedup();
        ids
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
    /// The session rows inserted ([`RowWrite::session_row`]; other rows
    /// are ignored): each names a database session written.
    pub rows: &'a [RowWrite],
    /// The canonical session written from.
    pub session: &'a SessionId,
    /// See [`WrittenFile::seq`].
    pub seq: u64,
    /// The native session id written.
    pub native_id: &'a str,
    /// Resume or handoff.
    pub by: WrittenBy,
}

/// Records the native sessions just written (the file sources the adapter
/// would capture, and the database sessions), replacing older entries for
/// the same files and sessions.
pub fn record(
    state_dir: &Path,
    adapter: &dyn git_session_adapters::Adapter,
    what: &Record<'_>,
) -> OpResult<()> {
    let path = index_path(state_dir, what.agent);
    let mut index = load_index(&path);
    index.version = VERSION;
    let mut changed = false;
    for file in what.files {
        let Ok(rel) = file.strip_prefix(what.root) else {
            continue;
        };
        // File sources only (JSONL, zstd-framed): capture reads those per
        // file; a database's sessions are recorded by their rows below.
        if !matches!(
            crate::native::source_for(adapter, rel),
            Some(Source::Jsonl { .. } | Source::ZstdJsonl { .. })
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
    for row in what.rows.iter().filter(|r| r.session_row) {
        let Some(Source::Sqlite(decl)) = crate::native::source_for(adapter, &row.database) else {
            continue;
        };
        let Some(key) = row
            .key
            .first()
            .and_then(|k| row.columns.get(k))
            .and_then(|v| v.as_str())
        else {
            continue;
        };
        let db = what.root.join(&row.database);
        let entry = rows_written(&db, decl, key, what)?;
        index.rows.insert(rows_key(&db, key), entry);
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

/// Reads the marks of the session `key` of `db` as just written.
fn rows_written(db: &Path, decl: &Database, key: &str, what: &Record<'_>) -> OpResult<WrittenRows> {
    let scope = sqlite::Scope {
        marks: &BTreeMap::new(),
        known: &BTreeMap::new(),
        only: Some(key),
    };
    let (_, sessions) = sqlite::read_all(db, decl, scope, &sqlite::Options::default())?;
    let mut rowids = BTreeMap::new();
    let mut columns = BTreeMap::new();
    for row in sessions
        .iter()
        .filter(|s| s.key == key)
        .flat_map(|s| &s.rows)
    {
        let Some(table) = decl.tables.iter().find(|t| t.name == row.table) else {
            continue;
        };
        if table.incremental == Incremental::Whole {
            continue;
        }
        let m = rowids.entry(row.table.to_owned()).or_insert(row.rowid);
        *m = (*m).max(row.rowid);
        if let Incremental::Column(column) = table.incremental
            && let Some(v) = column_value(row, column)
        {
            let m = columns.entry(row.table.to_owned()).or_insert(v);
            *m = (*m).max(v);
        }
    }
    Ok(WrittenRows {
        session: what.session.to_string(),
        seq: what.seq,
        native_id: what.native_id.to_owned(),
        rowids,
        columns,
        by: what.by,
    })
}

fn load_index(path: &Path) -> WrittenIndex {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<WrittenIndex>(&b).ok())
        .filter(|i| i.version == VERSION)
        .unwrap_or_default()
}
