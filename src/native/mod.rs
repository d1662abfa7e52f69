//! Native sources: the only code that reads or writes agent stores.
//!
//! Adapters (`git-session-adapters`) are pure: each declares its sources as
//! data ([`git_session_adapters::Source`]) and maps records to events. This
//! module executes those declarations:
//!
//! * [`discover`] finds the source files under an agent's store root by the
//!   adapter's globs, and [`extra_dirs`] the directories besides it the
//!   adapter declares ([`git_session_adapters::ExtraDir`]), whose files
//!   [`discover_flat`] lists;
//! * one reader per source kind yields complete records with their native
//!   positions and a new cursor: [`jsonl`] (byte offsets, complete lines
//!   only), [`zstd`] (frame by frame, checksum-verified, a torn last frame
//!   left for the next capture) and [`sqlite`] (read-only, one snapshot,
//!   incremental by row id or column, rows grouped by session) and
//!   [`tree`] (a directory of JSON files read as a database's rows, one
//!   `stat` per unchanged file);
//! * [`cursor`] keeps how far each source was read, as local rebuildable
//!   state (an unchanged source costs one `stat`);
//! * write-back applies an adapter's [`git_session_adapters::ChangeSet`]
//!   atomically: files by temporary file and no-clobber rename, database
//!   rows in one transaction after one backup.
//!
//! Agent stores are read-only to capture: readers open files for reading
//! only and databases with `mode=ro`.

pub mod agent_config;
pub mod apply;
pub mod cursor;
pub mod jsonl;
pub mod sqlite;
pub mod tree;
pub mod watch;
pub mod zstd;

use std::path::{Path, PathBuf};

use git_session_adapters::{Adapter, Source};

/// Says why a native source could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    /// A file could not be used.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A different native session is already where one would be written.
    #[error("{path}: {what} is already there")]
    Exists {
        /// The file or database in the way.
        path: PathBuf,
        /// What is in the way.
        what: String,
    },
    /// A source is unreadable as its kind (a corrupt frame, a database
    /// SQLite refuses, an unknown schema); the other sources are still read.
    #[error("{path}: {message}")]
    Source {
        /// The source.
        path: PathBuf,
        /// What is wrong and what was done about it.
        message: String,
    },
    /// A write-back path would leave the agent's store (a hostile or
    /// malformed id or path in a session); nothing was written.
    #[error("refusing to write {relative:?} under {}: {why}", root.display())]
    Outside {
        /// The store root.
        root: PathBuf,
        /// The path the change set named.
        relative: PathBuf,
        /// Why it was refused.
        why: &'static str,
    },
    /// The agent holds its write lock on the session (it is running on
    /// it); nothing was written.
    #[error("the agent is running on this session (it holds {}); nothing was written", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
}

/// Shorthand for native-source results.
pub type NativeResult<T> = Result<T, NativeError>;

impl NativeError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> NativeError + '_ {
        move |source| NativeError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// Returns the source declaration a discovered file belongs to: the first
/// of the adapter's sources with a glob that matches it.
pub fn source_for(adapter: &dyn Adapter, rel: &Path) -> Option<Source> {
    let text = rel.to_string_lossy().replace('\\', "/");
    adapter
        .spec()
        .sources
        .iter()
        .find(|s| {
            s.globs()
                .iter()
                .any(|g| git_session_adapters::source::glob_match(g, &text))
        })
        .copied()
}

/// How deep under an agent's store root source files are looked for.
const MAX_DEPTH: usize = 8;

/// Returns the files under `root` that one of the adapter's sources
/// declares, relative and sorted (parents before sub-agents, older before
/// newer: a stable order).
pub fn discover(adapter: &dyn Adapter, root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_owned(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() && depth < MAX_DEPTH {
                stack.push((path, depth + 1));
            } else if kind.is_file()
                && let Ok(rel) = path.strip_prefix(root)
                && adapter.is_session_file(rel)
            {
                out.push(rel.to_owned());
            }
        }
    }
    out.sort();
    out
}

/// The largest settings file read to resolve an [`ExtraDir`]: a settings
/// file is small, and a bigger one names no directory.
///
/// [`ExtraDir`]: git_session_adapters::ExtraDir
const MAX_SETTINGS_BYTES: u64 = 1 << 20;

/// Returns the existing directories, besides the store root `root`, where
/// the adapter says the agent may keep session files (its
/// [`Adapter::extra_dirs`] resolved with `env`, `home` and the repository's
/// work trees `projects`). Settings files are read only, and only up to
/// [`MAX_SETTINGS_BYTES`]; a directory inside `root` is left out (its files
/// are already found there).
pub fn extra_dirs(
    adapter: &dyn Adapter,
    root: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    home: &Path,
    projects: &[PathBuf],
) -> Vec<PathBuf> {
    let decls = adapter.extra_dirs();
    if decls.is_empty() {
        return Vec::new();
    }
    let read = |path: &Path| -> Option<Vec<u8>> {
        use std::io::Read;
        let file = std::fs::File::open(path).ok()?;
        let mut bytes = Vec::new();
        file.take(MAX_SETTINGS_BYTES + 1)
            .read_to_end(&mut bytes)
            .ok()?;
        (bytes.len() as u64 <= MAX_SETTINGS_BYTES).then_some(bytes)
    };
    git_session_adapters::source::resolve_extra_dirs(decls, root, env, home, projects, &read)
        .into_iter()
        .filter(|d| d.is_dir() && !d.starts_with(root))
        .collect()
}

/// Returns the session files directly in `dir` (an [`extra_dirs`]
/// directory), by bare name, sorted.
pub fn discover_flat(adapter: &dyn Adapter, dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| PathBuf::from(e.file_name()))
        .filter(|name| adapter.is_session_file(name))
        .collect();
    out.sort();
    out
}
