//! Native sources: what an adapter declares about where its records live,
//! and the records the root crate hands it.
//!
//! An adapter never opens a store. It declares its sources as data
//! ([`Source`]): JSONL files, zstd-framed JSONL files, or SQLite databases
//! with the tables it reads and the key that makes reading them incremental.
//! The root crate (`src/native/`) finds the sources, reads what is new since
//! its cursor, and calls [`crate::Adapter::parse`] with [`Records`]: complete
//! records only, each with its native position ([`Position`]).
//!
//! One record is one JSON value: a line of a JSONL file, a line of a decoded
//! zstd frame, or a database row turned into a JSON object by the reader
//! (see [`Table`] for how columns map to JSON).

use std::path::{Path, PathBuf};

/// Declares one kind of native source an adapter reads.
#[derive(Clone, Copy, Debug)]
pub enum Source {
    /// Newline-delimited JSON files, appended by the agent; one record per
    /// line, cursor = byte offset of the first unread line.
    Jsonl {
        /// Glob patterns relative to the store root (`*` stays within one
        /// path component, `**` crosses them), e.g. `projects/*/*.jsonl`.
        files: &'static [&'static str],
    },
    /// Files of concatenated Zstandard frames (RFC 8878), each frame holding
    /// whole JSONL lines; cursor = byte offset of the next frame. The reader
    /// verifies each frame's content checksum; a torn last frame (EOF inside
    /// it) is left for the next capture, a complete frame that fails to
    /// decode is handled as `corrupt` says.
    ZstdJsonl {
        /// Glob patterns relative to the store root, as for [`Source::Jsonl`].
        files: &'static [&'static str],
        /// What a complete frame that fails validation does to the file.
        corrupt: Corrupt,
    },
    /// SQLite databases holding many sessions as rows.
    Sqlite(&'static Database),
    /// A directory tree of JSON files, one record per file, read as the
    /// rows of a database ([`JsonTree`]).
    JsonTree(&'static JsonTree),
}

impl Source {
    /// Returns the glob patterns of the source's files.
    pub fn globs(&self) -> &'static [&'static str] {
        match self {
            Source::Jsonl { files } | Source::ZstdJsonl { files, .. } => files,
            Source::Sqlite(db) => db.files,
            // A tree is one directory, found by its name ([`JsonTree::dir`]).
            Source::JsonTree(_) => &[],
        }
    }
}

/// Declares what a complete zstd frame that fails validation (bad magic,
/// checksum, block, size, or a line not ending inside its frame) does to
/// its file: the agent's own rule, so capture sees what the agent loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Corrupt {
    /// The frames before it are captured; the file is reported with a
    /// warning (`CaptureReport::skipped_sources`) and read no further.
    KeepPrefix,
    /// The whole file is refused, as the agent refuses to load it (DeepSeek
    /// Harness): nothing of it is captured in that run, and capture reports
    /// the file as skipped with the reason (`CaptureReport::skipped`).
    RefuseFile,
}

/// Declares a SQLite database an adapter reads sessions from.
///
/// The reader opens it read-only, reads each table in one snapshot, and
/// groups rows by session ([`Table::session`]). A database that fails
/// [`Database::requires`] or [`Database::version`] is skipped with a warning
/// naming the file ("unknown schema"); the other sources are still captured.
#[derive(Clone, Copy, Debug)]
pub struct Database {
    /// Glob patterns of the database file relative to the store root
    /// (e.g. `state.db`, `opencode*.db`).
    pub files: &'static [&'static str],
    /// Tables (and their columns) that must exist, checked before reading.
    pub requires: &'static [(&'static str, &'static [&'static str])],
    /// A schema version check: a query returning one integer, and the
    /// inclusive range of versions this adapter understands.
    pub version: Option<SchemaVersion>,
    /// The tables to read, in the order their rows are handed to the
    /// adapter within one session. The first one is the session table.
    pub tables: &'static [Table],
    /// A query returning one row per session: its key and a change token
    /// (text) that moves whenever any of the session's rows in the other
    /// tables is added or changed (e.g. its `time_updated` and event
    /// sequence). When given, only sessions whose token moved are read
    /// from the other tables, each after its own marks, so a database where
    /// one session grew is not scanned table-wide ([`Incremental::Column`]
    /// tables often have no index on their column). Without it, the reader
    /// finds the sessions with new rows by each table's mark.
    pub changes: Option<&'static str>,
    /// The session table's column naming the repository the agent filed a
    /// session under, by its root commit hash (OpenCode's `project_id`).
    /// When given, a new session belongs to this repository only when its
    /// directory does and this column holds the repository's root commit
    /// (or [`Project::unbound`]); a session whose directory is inside but
    /// whose project is another repository's is skipped with a warning.
    pub project: Option<Project>,
}

/// Declares a directory tree of JSON files (one object per file) that holds
/// the same records as a [`Database`] (OpenCode before 1.2: `storage/`,
/// which OpenCode migrates into its database on first start):
///
/// ```text
/// <dir>/<sessions>/<group>/<session id>.json
/// <dir>/<messages>/<session id>/<message id>.json
/// <dir>/<parts>/<message id>/<part id>.json
/// ```
///
/// The reader (`src/native/tree.rs`) turns each file into a row of
/// [`JsonTree::database`]'s tables with [`JsonTree::row`] and hands the
/// rows to [`crate::Adapter::parse`] as [`Records::Rows`], session by
/// session, so the adapter's one row mapping serves both. Ids come from
/// file names and must pass [`JsonTree::valid`] before they name a
/// directory; the cursor is each file's size and mtime, so an unchanged
/// tree costs `stat`s and no parse.
#[derive(Clone, Copy, Debug)]
pub struct JsonTree {
    /// The tree's directory, relative to the store root (`storage`).
    pub dir: &'static str,
    /// The database whose rows the files stand for (its tables, session
    /// table first, and its [`Database::project`] rule).
    pub database: &'static Database,
    /// The directory of session files, by group (`session`).
    pub sessions: &'static str,
    /// The directory of message files, by session id (`message`).
    pub messages: &'static str,
    /// The directory of part files, by message id (`part`).
    pub parts: &'static str,
    /// Says whether a file name (without `.json`) is a valid id of the
    /// given table (`session`, `message`, `part`), or a group name
    /// (`group`): only then does it become a path.
    pub valid: fn(table: &str, id: &str) -> bool,
    /// Turns one file's object into the row `table` would hold (`ids`: the
    /// id, session id and, for parts, message id, taken from the path), or
    /// says why it cannot.
    pub row: TreeRow,
}

/// Turns one tree file's object into a row of a table ([`JsonTree::row`]).
pub type TreeRow = fn(
    table: &str,
    ids: &TreeIds<'_>,
    object: serde_json::Value,
) -> Result<serde_json::Map<String, serde_json::Value>, String>;

/// Holds the ids a tree file's path gives its record ([`JsonTree::row`]).
#[derive(Clone, Copy, Debug)]
pub struct TreeIds<'a> {
    /// The record's own id (its file name).
    pub id: &'a str,
    /// The session it belongs to.
    pub session: &'a str,
    /// The message a part belongs to (its directory), for parts.
    pub message: Option<&'a str>,
}

/// Declares how a session row names its repository ([`Database::project`]).
#[derive(Clone, Copy, Debug)]
pub struct Project {
    /// The session table's column holding the root commit hash.
    pub column: &'static str,
    /// The value the agent writes for a directory that had no commit yet
    /// (OpenCode: `global`), accepted when the directory belongs.
    pub unbound: &'static str,
}

/// Declares how a database says which schema it has.
#[derive(Clone, Copy, Debug)]
pub struct SchemaVersion {
    /// A `SELECT` returning one integer, e.g. `SELECT version FROM schema_version`.
    pub query: &'static str,
    /// The lowest version the adapter reads.
    pub min: i64,
    /// The highest version the adapter knows.
    pub max: i64,
    /// Whether a version above `max` is still read, with a warning, when
    /// every table and column in [`Database::requires`] exists (the agent
    /// only added to its schema); otherwise it is skipped like one below
    /// `min`.
    pub read_newer: bool,
}

/// Declares one table read from a [`Database`].
///
/// Each row becomes one record: a JSON object with one member per column of
/// [`Table::columns`] (integers and reals as numbers, text as strings,
/// NULL as null, blobs as `{"$blob": "<base64>"}`), plus `"$rowid"`. A
/// column of [`Table::json_objects`] whose text is a JSON object is that
/// object, not a string of it.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    /// The table name.
    pub name: &'static str,
    /// The columns to select. One the table lacks is left out of the
    /// records; list the columns that must exist in [`Database::requires`].
    pub columns: &'static [&'static str],
    /// The column naming the native session a row belongs to (the primary
    /// key on the session table, e.g. `id`; `session_id` on messages).
    pub session: &'static str,
    /// How new rows are found.
    pub incremental: Incremental,
    /// Text columns that hold a JSON object (OpenCode's `data`): the record
    /// holds the object itself, so the adapter parses it once, not a string
    /// to parse again. Text that is not a JSON object (not valid JSON, an
    /// array, a number) stays a string.
    pub json_objects: &'static [&'static str],
}

/// Says how the reader finds the rows added (or changed) since its cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incremental {
    /// Rows whose `rowid` is above the cursor: for append-only tables
    /// (`INTEGER PRIMARY KEY AUTOINCREMENT` message tables).
    RowId,
    /// Rows whose integer column (e.g. `time_updated`) is at or above the
    /// cursor: for tables whose rows are updated in place. A row may be
    /// handed over again after an update; the adapter's origins make the
    /// re-delivered events deduplicate.
    Column(&'static str),
    /// Every row of the session, each time the database changed: for small
    /// session tables whose counters the agent updates.
    Whole,
}

/// Holds a batch of complete records of one source, for one session.
#[derive(Clone, Copy, Debug)]
pub enum Records<'a> {
    /// Whole lines of a JSONL file (each ending in `\n`, except possibly the
    /// last line of a file the agent finished without one).
    Lines {
        /// The lines.
        bytes: &'a [u8],
        /// Zero-based line number of the first line.
        first_line: u64,
        /// Byte offset of the first line in the file.
        offset: u64,
    },
    /// Decoded zstd frames, each holding whole lines.
    Frames(&'a [Frame]),
    /// Database rows, each a JSON object (see [`Table`]).
    Rows(&'a [Row]),
}

/// Holds one decoded zstd frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Zero-based index of the frame in its file.
    pub index: u64,
    /// Byte offset of the frame's first byte in the (compressed) file.
    pub offset: u64,
    /// Zero-based line number (across the whole decoded file) of the
    /// frame's first line.
    pub first_line: u64,
    /// The decoded content: whole JSONL lines.
    pub bytes: Vec<u8>,
}

/// Holds one database row as a JSON object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The table it came from (one of the adapter's [`Table::name`]s).
    pub table: &'static str,
    /// Its `rowid`.
    pub rowid: i64,
    /// The row as a JSON object, columns by name.
    pub json: Vec<u8>,
}

/// Names where a record sits in its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// A line of a JSONL file.
    Line {
        /// Zero-based line number.
        line: u64,
        /// Byte offset of the line.
        offset: u64,
    },
    /// A line inside a zstd frame.
    Frame {
        /// Zero-based frame index.
        frame: u64,
        /// Byte offset of the frame in the file.
        offset: u64,
        /// Zero-based line number across the decoded file.
        line: u64,
    },
    /// A database row.
    Row {
        /// Its table.
        table: &'static str,
        /// Its `rowid`.
        rowid: i64,
    },
}

impl Position {
    /// Returns the number used for `origin.native_seq` and in warnings: the
    /// line number for file records, the `rowid` for rows.
    pub fn ordinal(&self) -> u64 {
        match *self {
            Position::Line { line, .. } | Position::Frame { line, .. } => line,
            Position::Row { rowid, .. } => rowid.max(0) as u64,
        }
    }
}

/// Holds one record and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's bytes: one JSON value, without the line's `\n` (a
    /// trailing `\r` is removed too).
    pub bytes: &'a [u8],
    /// Its position.
    pub pos: Position,
}

impl<'a> Records<'a> {
    /// Wraps whole lines of a file.
    pub fn lines(bytes: &'a [u8], first_line: u64, offset: u64) -> Records<'a> {
        Records::Lines {
            bytes,
            first_line,
            offset,
        }
    }

    /// Returns the ordinal ([`Position::ordinal`]) of the first record, for
    /// warnings that concern the batch as a whole.
    pub fn first_ordinal(&self) -> u64 {
        match self {
            Records::Lines { first_line, .. } => *first_line,
            Records::Frames(frames) => frames.first().map_or(0, |f| f.first_line),
            Records::Rows(rows) => rows.first().map_or(0, |r| r.rowid.max(0) as u64),
        }
    }

    /// Iterates the records, blank lines left out.
    pub fn iter(&self) -> impl Iterator<Item = Record<'a>> + 'a {
        let lines: Box<dyn Iterator<Item = Record<'a>> + 'a> = match *self {
            Records::Lines {
                bytes,
                first_line,
                offset,
            } => Box::new(split_lines(bytes, first_line, offset, None)),
            Records::Frames(frames) => Box::new(
                frames
                    .iter()
                    .flat_map(|f| split_lines(&f.bytes, f.first_line, f.offset, Some(f.index))),
            ),
            Records::Rows(rows) => Box::new(rows.iter().map(|r| Record {
                bytes: &r.json,
                pos: Position::Row {
                    table: r.table,
                    rowid: r.rowid,
                },
            })),
        };
        lines
    }
}

/// The pieces of `bytes` between newlines, as `bytes.split(|&b| b == b'\n')`
/// gives them (an empty last piece after a final newline), found with
/// `memchr` instead of a byte at a time.
pub(crate) fn split_newlines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(bytes);
    std::iter::from_fn(move || {
        let r = rest?;
        match memchr::memchr(b'\n', r) {
            Some(n) => {
                rest = Some(&r[n + 1..]);
                Some(&r[..n])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// Cuts `bytes` into line records; `frame` is set for lines of a frame.
fn split_lines(
    bytes: &[u8],
    first_line: u64,
    offset: u64,
    frame: Option<u64>,
) -> impl Iterator<Item = Record<'_>> {
    let mut at = 0usize;
    let mut line = first_line;
    std::iter::from_fn(move || {
        loop {
            if at >= bytes.len() {
                return None;
            }
            let rest = &bytes[at..];
            let len = memchr::memchr(b'\n', rest);
            let raw = &rest[..len.unwrap_or(rest.len())];
            let start = at;
            at += len.map_or(rest.len(), |n| n + 1);
            let this = line;
            line += 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let pos = match frame {
                None => Position::Line {
                    line: this,
                    offset: offset + start as u64,
                },
                Some(index) => Position::Frame {
                    frame: index,
                    offset,
                    line: this,
                },
            };
            return Some(Record { bytes: raw, pos });
        }
    })
}

/// Declares a directory besides the store root where an agent can be told
/// to keep its session files, each file directly in it (matched by
/// [`crate::Adapter::is_session_file`] on its bare name). A path `~` or
/// `~/...` is under the home.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtraDir {
    /// The directory an environment variable names (relative: from the
    /// home).
    Env(&'static str),
    /// The string at `key` of the JSON object in `file`, relative to the
    /// store root (relative: from the home).
    StoreSetting {
        /// The settings file, relative to the store root.
        file: &'static str,
        /// The top-level key holding the directory.
        key: &'static str,
    },
    /// The string at `key` of the JSON object in `file`, relative to each
    /// work tree of the repository (relative: from that work tree, where
    /// the agent runs).
    ProjectSetting {
        /// The settings file, relative to a work tree.
        file: &'static str,
        /// The top-level key holding the directory.
        key: &'static str,
    },
}

/// Resolves declared [`ExtraDir`]s, in declaration order without
/// duplicates. `env` looks up a variable, `read` returns a file's bytes
/// (the root crate reads, bounded; `None` when absent or unreadable),
/// `projects` are the repository's work trees. A missing variable, an
/// unreadable or non-JSON settings file, or a key that is not a non-empty
/// string names no directory; none is an error.
pub fn resolve_extra_dirs(
    decls: &[ExtraDir],
    root: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    home: &Path,
    projects: &[PathBuf],
    read: &dyn Fn(&Path) -> Option<Vec<u8>>,
) -> Vec<PathBuf> {
    let expand = |dir: &str, base: &Path| -> PathBuf {
        match dir.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None if dir == "~" => home.to_owned(),
            None => base.join(dir),
        }
    };
    let setting = |file: &Path, key: &str| -> Option<String> {
        let bytes = read(file)?;
        let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        v.get(key)?
            .as_str()
            .filter(|d| !d.is_empty())
            .map(str::to_owned)
    };
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut push = |d: PathBuf| {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    };
    for decl in decls {
        match *decl {
            ExtraDir::Env(var) => {
                if let Some(d) = env(var).filter(|d| !d.is_empty()) {
                    push(expand(&d, home));
                }
            }
            ExtraDir::StoreSetting { file, key } => {
                if let Some(d) = setting(&root.join(file), key) {
                    push(expand(&d, home));
                }
            }
            ExtraDir::ProjectSetting { file, key } => {
                for project in projects {
                    if let Some(d) = setting(&project.join(file), key) {
                        push(expand(&d, project));
                    }
                }
            }
        }
    }
    dirs
}

/// Returns whether `path` (relative, `/`-separated) matches `pattern`, with
/// `*` and `?` inside one component and `**` across components.
///
/// The root crate uses it to find source files; adapters and tests can use
/// it to check their declarations.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match_parts(&pat, &parts)
}

fn match_parts(pat: &[&str], parts: &[&str]) -> bool {
    match pat.split_first() {
        None => parts.is_empty(),
        Some((&"**", rest)) => (0..=parts.len()).any(|skip| match_parts(rest, &parts[skip..])),
        Some((first, rest)) => match parts.split_first() {
            Some((part, tail)) => {
                match_component(first.as_bytes(), part.as_bytes()) && match_parts(rest, tail)
            }
            None => false,
        },
    }
}

fn match_component(pat: &[u8], text: &[u8]) -> bool {
    // Iterative wildcard match with one backtrack point (classic `*` / `?`).
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&b| b == b'*')
}

/// Returns the `**`-free directory prefix of a glob: the directory under
/// the store root the reader starts walking from.
pub fn glob_base(pattern: &str) -> &str {
    let mut end = 0;
    for (i, part) in pattern.split('/').enumerate() {
        if part.contains(['*', '?']) {
            break;
        }
        end = if i == 0 {
            part.len()
        } else {
            end + 1 + part.len()
        };
    }
    // The last literal component may be the file itself.
    &pattern[..end.min(pattern.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_within_and_across_components() {
        assert!(glob_match(
            "projects/*/*.jsonl",
            "projects/-tmp-x/abc.jsonl"
        ));
        assert!(!glob_match("projects/*/*.jsonl", "projects/a/b/abc.jsonl"));
        assert!(glob_match(
            "sessions/**/rollout-*.jsonl",
            "sessions/2026/11/29/rollout-1.jsonl"
        ));
        assert!(glob_match(
            "sessions/**/rollout-*.jsonl",
            "sessions/rollout-1.jsonl"
        ));
        assert!(!glob_match(
            "sessions/**/rollout-*.jsonl",
            "archived/rollout-1.jsonl"
        ));
        assert!(glob_match("opencode*.db", "opencode-beta.db"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
        assert_eq!(glob_base("projects/*/*.jsonl"), "projects");
        assert_eq!(glob_base("state.db"), "state.db");
        assert_eq!(glob_base("**/x"), "");
    }

    #[test]
    fn records_carry_positions_and_skip_blank_lines() {
        let bytes = b"{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":3}";
        let recs: Vec<Record<'_>> = Records::lines(bytes, 10, 100).iter().collect();
        assert_eq!(recs.len(), 3);
        assert_eq!(
            recs[0].pos,
            Position::Line {
                line: 10,
                offset: 100
            }
        );
        assert_eq!(recs[1].bytes, b"{\"b\":2}");
        assert_eq!(
            recs[1].pos,
            Position::Line {
                line: 12,
                offset: 109
            }
        );
        assert_eq!(recs[2].pos.ordinal(), 13);
        let frames = [Frame {
            index: 3,
            offset: 77,
            first_line: 5,
            bytes: b"{}\n{}\n".to_vec(),
        }];
        let recs: Vec<Record<'_>> = Records::Frames(&frames).iter().collect();
        assert_eq!(
            recs[1].pos,
            Position::Frame {
                frame: 3,
                offset: 77,
                line: 6
            }
        );
        let rows = [Row {
            table: "messages",
            rowid: 42,
            json: b"{}".to_vec(),
        }];
        let recs: Vec<Record<'_>> = Records::Rows(&rows).iter().collect();
        assert_eq!(recs[0].pos.ordinal(), 42);
    }

    #[test]
    fn split_newlines_cuts_as_split_does() {
        for text in [
            &b""[..],
            b"\n",
            b"\n\n",
            b"a",
            b"a\n",
            b"a\nb",
            b"\na\n\nb\r\n",
            b"{\"x\":1}\n{}\n   \n{\"y\":\"\\n\"}",
        ] {
            let want: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
            let got: Vec<&[u8]> = split_newlines(text).collect();
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(text));
        }
    }
}
