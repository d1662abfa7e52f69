//! JSON tree sources: a directory of JSON files, one record per file, read
//! as the rows of a database ([`git_session_adapters::source::JsonTree`]:
//! OpenCode's older `storage/`).
//!
//! ```text
//! <tree>/<sessions>/<group>/<session id>.json
//! <tree>/<messages>/<session id>/<message id>.json
//! <tree>/<parts>/<message id>/<part id>.json
//! ```
//!
//! [`read`] lists the tree session by session and hands each session whose
//! files changed to the caller as [`SessionRows`], as the database reader
//! does: the session file's row (always, like a session table read whole),
//! then the rows of its new or changed message and part files. A file's
//! position is its path relative to the tree and its cursor its [`Stamp`]
//! (size and mtime): a file whose stamp is the one the caller passes is
//! not read, so an unchanged session costs a directory listing and a
//! `stat` per file, and no parse. A session the caller skips (another
//! project's, or one its database holds) costs no more than its name.
//!
//! Names become paths only after the adapter's [`JsonTree::valid`] accepts
//! them (no `..`, `/` or control characters can pass); any other name is
//! a warning naming the file (escaped), as is a file that is no JSON
//! object, is larger than [`MAX_FILE_BYTES`], or whose id disagrees with
//! its name. The rest of the tree is read. Nothing is ever written.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use git_session_adapters::source::{JsonTree, Row, TreeIds};

use super::cursor::Stamp;
use super::sqlite::SessionRows;

/// The largest file read; a larger one is skipped with a warning. Parts
/// may carry a file's bytes as a `data:` URL, so this is generous.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Holds one session a [`read`] hands over.
#[derive(Debug)]
pub struct TreeSession {
    /// Its rows, as the database reader groups them.
    pub rows: SessionRows,
    /// The stamps of every file of the session now (relative paths): the
    /// cursor to keep once the rows are captured.
    pub stamps: Vec<(String, Stamp)>,
}

/// Says what a [`read`] saw besides the sessions it handed over.
#[derive(Debug, Default)]
pub struct TreeRead {
    /// Files that could not be used, each naming the file.
    pub warnings: Vec<String>,
    /// Sessions listed whose files were all unchanged (not handed over).
    pub unchanged: Vec<String>,
    /// Files read and parsed.
    pub files_read: u64,
}

/// Reads the tree at `dir` (see the module docs). `seen` holds the stamps
/// of the files read before (empty: read everything); `skip` says which
/// session keys not to read; `only` reads one session.
pub fn read(
    dir: &Path,
    tree: &JsonTree,
    seen: &BTreeMap<String, Stamp>,
    skip: &dyn Fn(&str) -> bool,
    only: Option<&str>,
    visit: &mut dyn FnMut(TreeSession),
) -> TreeRead {
    let mut out = TreeRead::default();
    let mut groups = names(&dir.join(tree.sessions), "", &mut out.warnings);
    groups.sort();
    for group in groups {
        let group_rel = format!("{}/{group}", tree.sessions);
        if !(tree.valid)("group", &group) {
            out.warnings.push(format!(
                "{}: not a project id; skipped",
                escaped(&group_rel)
            ));
            continue;
        }
        for key in names(&dir.join(&group_rel), ".json", &mut out.warnings) {
            let rel = format!("{group_rel}/{key}.json");
            if !(tree.valid)("session", &key) {
                out.warnings
                    .push(format!("{}: not a session id; skipped", escaped(&rel)));
                continue;
            }
            if skip(&key) || only.is_some_and(|o| o != key) {
                continue;
            }
            session(dir, tree, seen, &key, &rel, &mut out, visit);
        }
    }
    out
}

/// Reads one session of the tree whose session file is `rel`.
fn session(
    dir: &Path,
    tree: &JsonTree,
    seen: &BTreeMap<String, Stamp>,
    key: &str,
    rel: &str,
    out: &mut TreeRead,
    visit: &mut dyn FnMut(TreeSession),
) {
    let mut warnings = Vec::new();
    // Every file of the session: (table, relative path, ids), in the order
    // rows are handed over (the session, its messages, their parts).
    let mut files: Vec<(&'static str, String, String, Option<String>)> =
        vec![("session", rel.to_owned(), key.to_owned(), None)];
    let messages_rel = format!("{}/{key}", tree.messages);
    let mut messages = names(&dir.join(&messages_rel), ".json", &mut warnings);
    messages.sort();
    let mut parts = Vec::new();
    for m in messages {
        let m_rel = format!("{messages_rel}/{m}.json");
        if !(tree.valid)("message", &m) {
            warnings.push(format!("{}: not a message id; skipped", escaped(&m_rel)));
            continue;
        }
        let parts_rel = format!("{}/{m}", tree.parts);
        let mut names_of = names(&dir.join(&parts_rel), ".json", &mut warnings);
        names_of.sort();
        for p in names_of {
            let p_rel = format!("{parts_rel}/{p}.json");
            if !(tree.valid)("part", &p) {
                warnings.push(format!("{}: not a part id; skipped", escaped(&p_rel)));
                continue;
            }
            parts.push(("part", p_rel, p, Some(m.clone())));
        }
        files.push(("message", m_rel, m, None));
    }
    files.append(&mut parts);
    let stamps: Vec<(String, Stamp)> = files
        .iter()
        .map(|(_, rel, ..)| (rel.clone(), Stamp::of(&dir.join(rel))))
        .collect();
    let changed: Vec<bool> = stamps
        .iter()
        .map(|(rel, stamp)| seen.get(rel) != Some(stamp))
        .collect();
    if !changed.iter().any(|&c| c) {
        out.unchanged.push(key.to_owned());
        return;
    }
    out.warnings.append(&mut warnings);
    let mut rows = Vec::new();
    for (i, (table, rel, id, message)) in files.iter().enumerate() {
        // The session file is read whole each time, like a session table.
        if i > 0 && !changed[i] {
            continue;
        }
        out.files_read += 1;
        let ids = TreeIds {
            id,
            session: key,
            message: message.as_deref(),
        };
        let row = read_bounded(&dir.join(rel))
            .and_then(|bytes| {
                serde_json::from_slice(&bytes).map_err(|e| format!("not valid JSON ({e})"))
            })
            .and_then(|value| (tree.row)(table, &ids, value));
        match row {
            Ok(columns) => rows.push(Row {
                table: table_name(tree, table),
                rowid: 0,
                json: serde_json::to_vec(&columns).expect("a JSON map serializes"),
            }),
            Err(why) if i == 0 => {
                // Without its session file a session has no directory or
                // project to belong by: it is read again next time.
                out.warnings
                    .push(format!("{}: {why}; session skipped", escaped(rel)));
                return;
            }
            Err(why) => out
                .warnings
                .push(format!("{}: {why}; skipped", escaped(rel))),
        }
    }
    visit(TreeSession {
        rows: SessionRows {
            key: key.to_owned(),
            rows,
            token: None,
            highs: BTreeMap::new(),
        },
        stamps,
    });
}

/// Returns the database table name the tree's `table` stands for (the
/// database's own `&'static str`, as rows of a database carry).
fn table_name(tree: &JsonTree, table: &str) -> &'static str {
    tree.database
        .tables
        .iter()
        .find(|t| t.name == table)
        .map_or("", |t| t.name)
}

/// Returns the names in `dir` ending in `suffix` (without it; `""`: the
/// subdirectories), unsorted. A name that is not UTF-8 is a warning.
fn names(dir: &Path, suffix: &str, warnings: &mut Vec<String>) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if suffix.is_empty() != kind.is_dir() || (!kind.is_dir() && !kind.is_file()) {
            continue;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            warnings.push(format!(
                "{}: a name that is not UTF-8; skipped",
                escaped(&entry.path().to_string_lossy())
            ));
            continue;
        };
        if let Some(stem) = name.strip_suffix(suffix) {
            out.push(stem.to_owned());
        }
    }
    out
}

/// Reads `path`, refusing one larger than [`MAX_FILE_BYTES`].
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
    }
    Ok(bytes)
}

/// Returns a relative path for a warning, control characters escaped.
fn escaped(rel: &str) -> String {
    rel.chars()
        .flat_map(char::escape_default)
        .collect::<String>()
}

/// Returns the tree directory of `tree` under an agent's store `root`.
pub fn dir_of(root: &Path, tree: &JsonTree) -> PathBuf {
    root.join(tree.dir)
}
