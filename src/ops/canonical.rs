//! The canonical interchange file: `import --canonical`, `export
//! --canonical` and `append`. It is how the store is filled and read before
//! any agent adapter is involved, and how sessions move between tools.
//!
//! An import is one batch: any bad line aborts it with `file:line` and the
//! ref does not move. Re-importing a file whose events are already stored is
//! a no-op; a file that continues a stored session appends only the rest.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use git_session_schema::codec::{self, Record};
use git_session_schema::{ArtifactId, Event, SessionHeader, SessionId};
use gix::ObjectId;
use serde_json::Value;

use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::store::{BatchSink, CommitInfo, SeqMode, Store, StoreError};

/// Reports what an import or append did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportSummary {
    /// The session written to.
    pub id: SessionId,
    /// Whether the session was created.
    pub created: bool,
    /// Events appended.
    pub appended: u64,
    /// Events already stored and skipped.
    pub skipped: u64,
    /// Event count afterwards.
    pub events: u64,
    /// The new batch commit, if one was written.
    pub commit: Option<ObjectId>,
}

/// Returns the commit facts for a batch written now.
pub fn commit_info(store: &Store, clock: &Clock) -> CommitInfo {
    CommitInfo {
        time: clock.now().as_second(),
        code_commit: store.code_head(),
        after_commit: store.after_commit(),
        attach: None,
    }
}

/// Imports a canonical interchange file (header line, then events and
/// artifacts) as one batch.
///
/// `reseal` recomputes checksums instead of requiring the file's to match,
/// for files written by another tool.
pub fn import(store: &Store, clock: &Clock, path: &Path, reseal: bool) -> OpResult<ImportSummary> {
    let mut header = read_header(path)?;
    // Compared with the stored header as the store would have written it.
    store.scrubber().scrub_header(&mut header);
    let id = header.id.clone();
    let info = commit_info(store, clock);
    let existing = match store.tip(&id)? {
        None => None,
        Some(_) => {
            let stored = store.header(&id)?;
            if stored != header {
                return Err(OpError::Conflict {
                    message: format!("session {id} already exists with a different header"),
                    hint: Some(
                        "give the imported session another id in its header line, or fork the stored one"
                            .into(),
                    ),
                });
            }
            Some(store.stat(&id)?.events)
        }
    };
    let mut skipped = 0;
    let produce = |sink: &mut BatchSink<'_>| -> OpResult<()> {
        skipped = 0;
        let mut refs = ArtifactRefs::default();
        let mut reseal_from_here = false;
        let mut stored = match existing {
            Some(n) if n > 0 => Some(store.lines(&id, 0, Some(n - 1))?),
            _ => None,
        };
        for_each_line(path, |line_no, line| {
            if line_no == 1 {
                return Ok(());
            }
            let at = |message: String, hint: Option<&str>| OpError::Line {
                path: path.to_owned(),
                line: line_no,
                message,
                hint: hint.map(str::to_owned),
            };
            match codec::decode_record(line).map_err(|e| at(e.to_string(), None))? {
                Record::Header(_) => Err(at("a second header line".into(), None)),
                Record::Artifact { data, .. } => {
                    refs.added(sink.add_artifact(&data)?);
                    Ok(())
                }
                Record::Event(mut event) => {
                    if let Some(next) = stored.as_mut().and_then(|s| s.next()) {
                        let next = next?;
                        let mut have = next
                            .decode()
                            .map_err(|e| at(format!("stored seq {}: {e}", next.seq), None))?;
                        // The store redacted what it keeps: compare like with
                        // like, and the stored chain then differs from the
                        // file's.
                        if sink.scrubber().scrub(&mut event) {
                            reseal_from_here = true;
                        }
                        if event.checksum.is_none() || reseal || reseal_from_here {
                            have.checksum = None;
                            event.checksum = None;
                        }
                        if event.seq != next.seq || event != have {
                            return Err(at(
                                format!(
                                    "seq {} differs from the event already stored at seq {}",
                                    event.seq, next.seq
                                ),
                                Some(
                                    "the stored session has diverged from this file; fork it and import the rest there",
                                ),
                            ));
                        }
                        skipped += 1;
                        return Ok(());
                    }
                    if reseal {
                        event.checksum = None;
                    }
                    refs.wanted(&event, line_no);
                    sink.push(event).map_err(|e| match e {
                        StoreError::SeqMismatch { .. } => at(e.to_string(), Some("event seqs must be contiguous from 0")),
                        StoreError::ChecksumMismatch { .. } => at(
                            e.to_string(),
                            Some("the event was changed after it was sealed; pass --reseal to recompute checksums"),
                        ),
                        other => other.into(),
                    })?;
                    Ok(())
                }
            }
        })?;
        refs.check(store, &id, existing.is_some(), path)
    };
    let outcome = match existing {
        None => store.create(&header, SeqMode::Exact, &info, produce)?,
        Some(_) => store.append(&id, SeqMode::Exact, &info, produce)?,
    };
    let appended = outcome.seq.map_or(0, |(a, b)| b - a + 1);
    Ok(ImportSummary {
        id,
        created: existing.is_none(),
        appended,
        skipped,
        events: outcome.events,
        commit: outcome.commit,
    })
}

/// Appends the events (and artifacts) of a JSONL file to `id` as one batch,
/// numbering them after the current end; their own seq and checksum, if any,
/// are ignored.
pub fn append(
    store: &Store,
    clock: &Clock,
    id: &SessionId,
    path: &Path,
) -> OpResult<ImportSummary> {
    let info = commit_info(store, clock);
    let outcome = store.append(
        id,
        SeqMode::Assign,
        &info,
        |sink: &mut BatchSink<'_>| -> OpResult<()> {
            let mut refs = ArtifactRefs::default();
            for_each_line(path, |line_no, line| {
                let at = |message: String| OpError::Line {
                    path: path.to_owned(),
                    line: line_no,
                    message,
                    hint: None,
                };
                match codec::decode_record(line) {
                    Ok(Record::Artifact { data, .. }) => {
                        refs.added(sink.add_artifact(&data)?);
                        return Ok(());
                    }
                    Ok(Record::Event(event)) => {
                        refs.wanted(&event, line_no);
                        sink.push(event)?;
                        return Ok(());
                    }
                    Ok(Record::Header(_)) => {
                        return Err(at("a header line; `append` takes events only".into()));
                    }
                    // Events written by hand may leave out `seq`: it is assigned anyway.
                    Err(_) => {}
                }
                let mut value: Value =
                    serde_json::from_slice(line).map_err(|e| at(e.to_string()))?;
                if let Some(obj) = value.as_object_mut() {
                    obj.entry("seq").or_insert(Value::from(0));
                }
                let event: Event = serde_json::from_value(value).map_err(|e| at(e.to_string()))?;
                refs.wanted(&event, line_no);
                sink.push(event)?;
                Ok(())
            })?;
            refs.check(store, id, true, path)
        },
    )?;
    Ok(ImportSummary {
        id: id.clone(),
        created: false,
        appended: outcome.seq.map_or(0, |(a, b)| b - a + 1),
        skipped: 0,
        events: outcome.events,
        commit: outcome.commit,
    })
}

/// Writes a session as a canonical interchange file: the header line,
/// artifact lines, then the stored event lines byte for byte.
pub fn export(store: &Store, id: &SessionId, out: &mut dyn Write) -> OpResult<()> {
    let mut header = store.header(id)?;
    if header.format == git_session_schema::SEALED_FORMAT {
        // The interchange file is plaintext: an encrypted session exports
        // opened (reading its events needs the identity anyway).
        header.format = git_session_schema::FORMAT_VERSION;
    }
    let io = |source| OpError::Io {
        path: "<output>".into(),
        source,
    };
    let mut line = Vec::new();
    codec::encode_header_line(&header, &mut line);
    line.push(b'\n');
    out.write_all(&line).map_err(io)?;
    for (art, blob) in store.artifacts(id)? {
        line.clear();
        codec::encode_artifact_line(&art, &store.artifact_bytes(id, blob)?, &mut line);
        line.push(b'\n');
        out.write_all(&line).map_err(io)?;
    }
    for stored in store.lines(id, 0, None)? {
        let stored = stored?;
        out.write_all(&stored.bytes).map_err(io)?;
        out.write_all(b"\n").map_err(io)?;
    }
    out.flush().map_err(io)
}

/// Tracks the artifacts a batch references and the ones it adds, so a
/// batch that names an artifact nobody stored is refused before it is
/// published (`verify` would fail on it, and a resume would write the
/// image empty).
#[derive(Default)]
struct ArtifactRefs {
    added: HashSet<ArtifactId>,
    /// Each referenced artifact and the first line that names it.
    wanted: BTreeMap<ArtifactId, u64>,
}

impl ArtifactRefs {
    fn added(&mut self, id: ArtifactId) {
        self.added.insert(id);
    }

    fn wanted(&mut self, event: &Event, line: u64) {
        for id in event.refs.iter().filter_map(|r| ArtifactId::from_ref(r)) {
            self.wanted.entry(id).or_insert(line);
        }
    }

    /// Fails on the first reference that neither this batch nor the stored
    /// session (when there is one) holds.
    fn check(&self, store: &Store, id: &SessionId, stored: bool, path: &Path) -> OpResult<()> {
        let mut missing = self
            .wanted
            .iter()
            .filter(|(a, _)| !self.added.contains(*a))
            .peekable();
        if missing.peek().is_none() {
            return Ok(());
        }
        let have: HashSet<ArtifactId> = if stored {
            store.artifacts(id)?.into_iter().map(|(a, _)| a).collect()
        } else {
            HashSet::new()
        };
        let first = missing
            .filter(|(a, _)| !have.contains(*a))
            .min_by_key(|(_, line)| **line);
        match first {
            None => Ok(()),
            Some((art, line)) => Err(OpError::Line {
                path: path.to_owned(),
                line: *line,
                message: format!(
                    "the event references artifact {art}, which neither this file nor the stored session holds"
                ),
                hint: Some(
                    "add its {\"artifact\": ...} line (export --canonical writes them), or remove the reference"
                        .into(),
                ),
            }),
        }
    }
}

fn read_header(path: &Path) -> OpResult<SessionHeader> {
    let mut lines = LineReader::open(path)?;
    let hint = || {
        Some("a canonical file starts with {\"header\": {...}}, as `git session export --canonical` writes".into())
    };
    let Some((line_no, line)) = lines.next_line()? else {
        return Err(OpError::Line {
            path: path.to_owned(),
            line: 1,
            message: "empty file".into(),
            hint: hint(),
        });
    };
    let message = match codec::decode_record(line) {
        Ok(Record::Header(h)) => return Ok(h),
        Ok(_) => "the first line is not a header line".to_owned(),
        Err(e) => e.to_string(),
    };
    Err(OpError::Line {
        path: path.to_owned(),
        line: line_no,
        message,
        hint: hint(),
    })
}

/// Reads non-blank lines with their one-based numbers (blank lines are
/// counted, so numbers match an editor's).
struct LineReader {
    reader: BufReader<File>,
    buf: Vec<u8>,
    line_no: u64,
    path: std::path::PathBuf,
}

impl LineReader {
    fn open(path: &Path) -> OpResult<LineReader> {
        let file = File::open(path).map_err(OpError::io(path))?;
        Ok(LineReader {
            reader: BufReader::with_capacity(1 << 16, file),
            buf: Vec::new(),
            line_no: 0,
            path: path.to_owned(),
        })
    }

    fn next_line(&mut self) -> OpResult<Option<(u64, &[u8])>> {
        loop {
            self.buf.clear();
            let n = self
                .reader
                .read_until(b'\n', &mut self.buf)
                .map_err(OpError::io(&self.path))?;
            if n == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                break;
            }
        }
        let line = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        Ok(Some((self.line_no, line)))
    }
}

/// Calls `f` with each non-blank line of `path`.
fn for_each_line(path: &Path, mut f: impl FnMut(u64, &[u8]) -> OpResult<()>) -> OpResult<()> {
    let mut lines = LineReader::open(path)?;
    while let Some((line_no, line)) = lines.next_line()? {
        f(line_no, line)?;
    }
    Ok(())
}
