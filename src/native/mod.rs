//! Native sources: the only code that reads or writes agent stores.
//!
//! Adapters (`git-session-adapters`) are pure: each declares its sources as
//! data ([`git_session_adapters::Source`]) and maps records to events. This
//! module executes those declarations:
//!
//! * [`discover`] finds the source files under an agent's store root by the
//!   adapter's globs;
//! * one reader per source kind yields complete records with their native
//!   positions and a new cursor: [`jsonl`] (byte offsets, complete lines
//!   only), `zstd` (frame by frame, checksum-verified, a torn last frame
//!   left for the next capture: [`zstd`]) and `sqlite` (read-only, one snapshot,
//!   incremental by row id or column, rows grouped by session);
//! * [`cursor`] keeps how far each source was read, as local rebuildable
//!   state (an unchanged source costs one `stat`);
//! * write-back applies an adapter's [`git_session_adapters::ChangeSet`]
//!   atomically: files by temporary file and no-clobber rename, database
//!   rows in one transaction after one backup.
//!
//! Agent stores are read-only to capture: readers open files for reading
//! only and databases with `mode=ro`.

pub mod cursor;
pub mod jsonl;
pub mod zstd;

use std::path::{Path, PathBuf};

use git_session_adapters::{Adapter, Source};

use jsonl::{JsonlReader, RecordReader};

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
    /// A source is unreadable as its kind (a corrupt frame, a database
    /// SQLite refuses, an unknown schema); the other sources are still read.
    #[error("{path}: {message}")]
    Source {
        /// The source.
        path: PathBuf,
        /// What is wrong and what was done about it.
        message: String,
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

/// Says how a source file is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// Newline-delimited JSON.
    Jsonl,
    /// Concatenated zstd frames of JSONL.
    Zstd,
}

/// Returns how the adapter's source file `rel` is read: the kind of the
/// first declared source whose globs match it (JSONL when none does, the
/// case of an adapter that overrides [`Adapter::is_session_file`]).
pub fn file_kind(adapter: &dyn Adapter, rel: &Path) -> FileKind {
    let text = rel.to_string_lossy().replace('\\', "/");
    for source in adapter.spec().sources {
        if source
            .globs()
            .iter()
            .any(|g| git_session_adapters::source::glob_match(g, &text))
        {
            return match source {
                Source::ZstdJsonl { .. } => FileKind::Zstd,
                _ => FileKind::Jsonl,
            };
        }
    }
    FileKind::Jsonl
}

/// Opens the reader for a source file at a cursor (`frames` is ignored for
/// JSONL).
pub fn open_reader(
    kind: FileKind,
    path: &Path,
    offset: u64,
    frames: u64,
    lines: u64,
) -> NativeResult<Box<dyn RecordReader>> {
    Ok(match kind {
        FileKind::Jsonl => Box::new(JsonlReader::open(path, offset, lines)?),
        FileKind::Zstd => Box::new(zstd::ZstdReader::open(path, offset, frames, lines)?),
    })
}
