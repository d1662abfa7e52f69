//! Native capture (`git session import`): find the agent sessions that ran
//! in this repository, map their new records to canonical events with the
//! agent's adapter, and append them, one batch commit per changed session.
//!
//! Agent stores are only ever read. Each native file has a cursor (see
//! [`super::cursor`]): an unchanged file costs one `stat`; a grown file is
//! read from its cursor, complete lines only (a line the agent is still
//! writing waits for the next capture); a rewritten or truncated file, or
//! one whose cursor was lost, is re-read whole and reconciled by native ids
//! so nothing is appended twice.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use git_session_adapters::{Adapter, NativeSession, ParseInput, Records, Warning};
use git_session_schema::{Agent, Event, SessionHeader, SessionId, SpawnedBy};
use gix::ObjectId;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::canonical::commit_info;
use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::native::FileKind;
use crate::native::cursor::{CursorIndex, FileCursor, tail_hash};
use crate::native::jsonl::JsonlReader;
use crate::native::zstd::ZstdReader;
use crate::store::{BatchSink, SeqMode, Store, StoreError};

/// How much of a new file is read to learn which project it belongs to.
const PEEK_BYTES: u64 = 1 << 20;

/// Says what to capture.
pub struct CaptureRequest<'a> {
    /// Agents to capture; empty means every agent that has an adapter.
    pub agents: Vec<Agent>,
    /// The user's home directory (agent stores default to it).
    pub home: PathBuf,
    /// Looks up an environment variable (an agent's store override).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Whether secrets are redacted before anything is stored (the default;
    /// `git config session.redact false` turns it off).
    pub redact: bool,
}

/// Reports one session that received events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedSession {
    /// The canonical session.
    pub id: SessionId,
    /// Its agent.
    pub agent: Agent,
    /// The native file, absolute.
    pub source: PathBuf,
    /// Whether this capture created the session.
    pub created: bool,
    /// Events appended now.
    pub appended: u64,
    /// The session's event count afterwards.
    pub events: u64,
    /// The batch commit.
    pub commit: Option<ObjectId>,
}

/// Reports one native file that could not be captured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedFile {
    /// The native file.
    pub path: PathBuf,
    /// Why, and what to do.
    pub reason: String,
}

/// Reports a record the adapter could not map; the rest was captured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureWarning {
    /// The native file.
    pub path: PathBuf,
    /// One-based line number.
    pub line: u64,
    /// What the adapter said.
    pub message: String,
}

/// Holds the outcome of a capture; partial success is a value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureReport {
    /// Sessions that received events (or were created).
    pub sessions: Vec<CapturedSession>,
    /// Native files of this repository with nothing new.
    pub unchanged: usize,
    /// Files that failed; the others were still captured.
    pub skipped: Vec<SkippedFile>,
    /// Records kept out of the log with a reason.
    pub warnings: Vec<CaptureWarning>,
    /// Agent stores that do not exist here (nothing to capture from them).
    pub missing: Vec<(Agent, PathBuf)>,
}

/// Captures the sessions of every requested agent that ran in this repository.
pub fn capture(
    store: &Store,
    clock: &Clock,
    request: &CaptureRequest<'_>,
) -> OpResult<CaptureReport> {
    let agents: Vec<Agent> = if request.agents.is_empty() {
        git_session_adapters::registry::ADAPTERS
            .iter()
            .map(|a| a.agent())
            .collect()
    } else {
        request.agents.clone()
    };
    let worktrees = store.worktree_paths();
    let mut report = CaptureReport::default();
    // Compiled only when some file has new records to read.
    let redactor = std::sync::OnceLock::new();
    for agent in agents {
        let Some(adapter) = git_session_adapters::registry::adapter(&agent) else {
            continue;
        };
        let root = adapter.store_root(request.env, &request.home);
        if !root.is_dir() {
            report.missing.push((agent.clone(), root));
            continue;
        }
        store.ensure_state_dir()?;
        // One capture of an agent at a time: cursors are read and written
        // around the appends.
        let _lock = store.lock_state(&format!("capture-{agent}"))?;
        let mut cursors = CursorIndex::load(store.state_dir(), agent.as_str());
        let files = crate::native::discover(adapter, &root);
        // Parents before sub-agents, older before newer: stable order.
        for rel in files {
            let abs = root.join(&rel);
            let rel_text = rel.to_string_lossy().into_owned();
            let mut job = FileJob {
                store,
                clock,
                adapter,
                redactor: request.redact.then_some(&redactor),
                root: &root,
                agent: &agent,
                abs: &abs,
                rel: &rel_text,
                kind: crate::native::file_kind(adapter, &rel),
                worktrees: &worktrees,
                cursors: &mut cursors,
                report: &mut report,
            };
            if let Err(e) = job.run() {
                report.skipped.push(SkippedFile {
                    path: abs.clone(),
                    reason: e.to_string(),
                });
            }
        }
        cursors.save()?;
    }
    Ok(report)
}

/// Returns the canonical id of a native session: the native id itself when
/// it is a valid session id (so the agent's resume command and `git session show
/// <id>` name the same thing), else a stable hash of agent and native id.
pub fn canonical_id(agent: &Agent, native_id: &str) -> SessionId {
    if let Ok(id) = SessionId::new(native_id) {
        return id;
    }
    // Keep it readable (a sub-agent's "<session>/agent-<id>" becomes
    // "<session>-agent-<id>-<hash>"); the hash keeps distinct native ids
    // distinct after the replacement.
    let digest = Sha256::digest(format!("{agent}\n{native_id}").as_bytes());
    let hash: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    let mut readable: String = native_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    readable.truncate(SessionId::MAX_LEN - 10);
    let readable = readable.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    SessionId::new(format!("{readable}-{hash}"))
        .or_else(|_| SessionId::new(format!("{agent}-{hash}")))
        .expect("agent names and hex make valid ids")
}

struct FileJob<'a> {
    store: &'a Store,
    clock: &'a Clock,
    adapter: &'a dyn Adapter,
    /// Set when secrets are to be redacted; built on first use.
    redactor: Option<&'a std::sync::OnceLock<crate::redact::Redactor>>,
    /// The agent's store root.
    root: &'a Path,
    agent: &'a Agent,
    abs: &'a Path,
    rel: &'a str,
    /// How the file is read (JSONL lines or zstd frames).
    kind: FileKind,
    worktrees: &'a [PathBuf],
    cursors: &'a mut CursorIndex,
    report: &'a mut CaptureReport,
}

/// What reading a file from a cursor produced.
struct Fed {
    offset: u64,
    lines: u64,
    frames: u64,
    state: Value,
    warnings: Vec<Warning>,
}

impl FileJob<'_> {
    fn run(&mut self) -> OpResult<()> {
        let meta = std::fs::metadata(self.abs).map_err(OpError::io(self.abs))?;
        let size = meta.len();
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        let cursor = self.cursors.files.get(self.rel).cloned();
        if let Some(c) = &cursor
            && c.size == size
            && c.mtime_ns == mtime_ns
        {
            if c.session.is_some() {
                self.report.unchanged += 1;
            }
            return Ok(());
        }
        let id = match cursor.as_ref().and_then(|c| c.session.clone()) {
            Some(id) => SessionId::new(id).map_err(|e| OpError::Conflict {
                message: e.to_string(),
                hint: None,
            })?,
            None => match self.identify(size)? {
                Some(id) => id,
                None => {
                    // Another project's session: remember that cheaply.
                    self.cursors.files.insert(
                        self.rel.to_owned(),
                        FileCursor {
                            size,
                            mtime_ns,
                            ..FileCursor::default()
                        },
                    );
                    return Ok(());
                }
            },
        };
        let stored = self
            .store
            .tip(&id)?
            .map(|_| self.store.stat(&id))
            .transpose()?;
        let incremental = match (&cursor, &stored) {
            (Some(c), Some(s))
                if c.session.is_some() && s.events == c.events && size >= c.offset =>
            {
                tail_hash(self.abs, c.offset)? == c.tail
            }
            _ => false,
        };
        let info = commit_info(self.store, self.clock);
        let (outcome, fed) = if incremental {
            let c = cursor.as_ref().expect("incremental implies a cursor");
            let state = self.cursors.load_state(self.rel);
            let mut fed = None;
            let outcome =
                self.store
                    .append(&id, SeqMode::Exact, &info, |sink: &mut BatchSink<'_>| {
                        fed = Some(self.feed(
                            sink,
                            (c.offset, c.frames, c.lines),
                            state.clone(),
                            None,
                        )?);
                        Ok::<_, OpError>(())
                    })?;
            (outcome, fed)
        } else if let Some(s) = &stored {
            // A new cursor for a stored session, or a rewritten file:
            // re-read everything and keep only records not yet stored.
            let header = &s.header;
            if header.agent != *self.agent {
                return Err(OpError::Conflict {
                    message: format!(
                        "session id {id} is already used by a {} session",
                        header.agent
                    ),
                    hint: None,
                });
            }
            let known = self.stored_keys(&id)?;
            let mut fed = None;
            let outcome =
                self.store
                    .append(&id, SeqMode::Assign, &info, |sink: &mut BatchSink<'_>| {
                        fed = Some(self.feed(sink, (0, 0, 0), None, Some(&known))?);
                        Ok::<_, OpError>(())
                    })?;
            (outcome, fed)
        } else {
            let mut fed = None;
            let mut session = NativeSession::default();
            // The header needs the session facts, which a first parse of the
            // head already gave; parse again inside the batch.
            let head = self.peek(size)?;
            if let Some(h) = head {
                session = h;
            }
            let header = self.header(&id, &session);
            let outcome = self.store.create(
                &header,
                SeqMode::Exact,
                &info,
                |sink: &mut BatchSink<'_>| {
                    fed = Some(self.feed(sink, (0, 0, 0), None, None)?);
                    Ok::<_, OpError>(())
                },
            )?;
            (outcome, fed)
        };
        let fed = fed.expect("the producer ran");
        for w in &fed.warnings {
            self.report.warnings.push(CaptureWarning {
                path: self.abs.to_owned(),
                line: w.line + 1,
                message: w.message.clone(),
            });
        }
        self.cursors.save_state(self.rel, &fed.state)?;
        self.cursors.files.insert(
            self.rel.to_owned(),
            FileCursor {
                size,
                mtime_ns,
                offset: fed.offset,
                lines: fed.lines,
                frames: fed.frames,
                tail: tail_hash(self.abs, fed.offset)?,
                session: Some(id.to_string()),
                events: outcome.events,
            },
        );
        let appended = outcome.seq.map_or(0, |(a, b)| b - a + 1);
        if outcome.commit.is_some() {
            self.report.sessions.push(CapturedSession {
                id,
                agent: self.agent.clone(),
                source: self.abs.to_owned(),
                created: stored.is_none(),
                appended,
                events: outcome.events,
                commit: outcome.commit,
            });
        } else {
            self.report.unchanged += 1;
        }
        Ok(())
    }

    /// Decides from the head of a new file whether it ran in this
    /// repository, and if so returns its canonical id.
    fn identify(&self, size: u64) -> OpResult<Option<SessionId>> {
        let (session, refused) = self.peek_facts(size)?;
        let Some(session) = session else {
            return Ok(None);
        };
        let inside = session
            .cwd
            .as_deref()
            .is_some_and(|cwd| self.worktrees.iter().any(|w| Path::new(cwd).starts_with(w)));
        if !inside {
            return Ok(None);
        }
        // A session of this repository that this build cannot read is
        // skipped with the adapter's reason, never read half-way.
        if let Some(reason) = refused {
            return Err(OpError::Conflict {
                message: reason,
                hint: None,
            });
        }
        let native = session.native_id.clone().unwrap_or_else(|| {
            Path::new(self.rel)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        Ok(Some(canonical_id(self.agent, &native)))
    }

    /// Parses the first complete lines of the file for its session facts.
    fn peek(&self, size: u64) -> OpResult<Option<NativeSession>> {
        Ok(self.peek_facts(size)?.0)
    }

    /// Parses the first complete records of the file (the first frame of a
    /// framed file) for its session facts, and says whether the adapter
    /// refuses the file.
    fn peek_facts(&self, size: u64) -> OpResult<(Option<NativeSession>, Option<String>)> {
        let frames;
        let buf;
        let records = match self.kind {
            FileKind::Jsonl => {
                buf = JsonlReader::head(self.abs, size.min(PEEK_BYTES))?;
                if buf.is_empty() {
                    return Ok((None, None));
                }
                Records::lines(&buf, 0, 0)
            }
            FileKind::Zstd => {
                let Some(bytes) = ZstdReader::head(self.abs)? else {
                    return Ok((None, None));
                };
                frames = [git_session_adapters::source::Frame {
                    index: 0,
                    offset: 0,
                    first_line: 0,
                    bytes,
                }];
                Records::Frames(&frames)
            }
        };
        let sidecar = self
            .adapter
            .sidecar(Path::new(self.rel))
            .and_then(|rel| std::fs::read(self.root.join(rel)).ok());
        let parsed = self.adapter.parse(ParseInput {
            records,
            next_seq: 0,
            state: None,
            source: self.rel,
            session: None,
            sidecar: sidecar.as_deref(),
        });
        let s = parsed.session;
        Ok((
            (s.cwd.is_some() || s.native_id.is_some()).then_some(s),
            parsed.refused,
        ))
    }

    fn header(&self, id: &SessionId, session: &NativeSession) -> SessionHeader {
        let created = session
            .created
            .clone()
            .unwrap_or_else(|| self.clock.now_rfc3339());
        let mut header = SessionHeader::new(id.clone(), self.agent.clone(), created);
        header.native_id = session.native_id.clone();
        header.cwd = session.cwd.clone();
        header.title = session.title.clone();
        header.spawned_by = session.parent.as_ref().map(|p| SpawnedBy {
            session: canonical_id(self.agent, &p.native_id),
            call: p.spawned_by.clone(),
            extra: Default::default(),
        });
        header
    }

    /// Returns the dedup keys of the events already stored in `id`.
    fn stored_keys(&self, id: &SessionId) -> OpResult<HashSet<String>> {
        let mut keys = HashSet::new();
        for line in self.store.lines(id, 0, None)? {
            let line = line?;
            let event = line.decode().map_err(|e| StoreError::Corrupt {
                id: id.clone(),
                message: format!("seq {}: {e}", line.seq),
            })?;
            keys.insert(dedup_key(&event));
        }
        Ok(keys)
    }

    /// Reads the file from `offset` in blocks of whole lines, parses them
    /// and pushes the events into `sink`; with `skip`, events whose key is
    /// in it are left out (reconciling a re-read file).
    ///
    /// Reading and parsing run on a second thread, one block ahead of the
    /// sealing and writing here, so the two halves of a capture share the
    /// machine's cores. The bounded channel keeps at most two parsed blocks
    /// in memory.
    fn feed(
        &self,
        sink: &mut BatchSink<'_>,
        (offset, first_frame, first_line): (u64, u64, u64),
        state: Option<Value>,
        skip: Option<&HashSet<String>>,
    ) -> OpResult<Fed> {
        // A re-read is numbered as the first read of the file was, from 0,
        // so the events it keeps point at the stored seqs of their parents;
        // the store then renumbers what is kept after the current end.
        let first_seq = if skip.is_some() { 0 } else { sink.next_seq() };
        let reader = BlockReader {
            adapter: self.adapter,
            redactor: self
                .redactor
                .map(|r| r.get_or_init(crate::redact::Redactor::new)),
            path: self.abs,
            rel: self.rel,
            kind: self.kind,
            offset,
            first_frame,
            first_line,
            first_seq,
        };
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel(2);
            // Sealed events go back to the reader to be freed on the thread
            // that allocated them: freeing them here cost a third of the
            // import's CPU in malloc's cross-thread bookkeeping.
            let (spent_tx, spent_rx) = std::sync::mpsc::channel();
            let producer = scope.spawn(move || reader.run(state, tx, spent_rx));
            let mut warnings = Vec::new();
            let mut failed = None;
            for parsed in rx {
                let mut parsed: git_session_adapters::Parsed = parsed;
                if let Err(e) = self.push_block(sink, &parsed.artifacts, &mut parsed.events, skip) {
                    // Dropping the receiver stops the reader at its next block.
                    failed = Some(e);
                    break;
                }
                warnings.append(&mut parsed.warnings);
                let _ = spent_tx.send(parsed);
            }
            drop(spent_tx);
            let read = producer.join().expect("the block reader does not panic");
            if let Some(e) = failed {
                return Err(e);
            }
            let (pos, state) = read?;
            Ok(Fed {
                offset: pos.offset,
                lines: pos.lines,
                frames: pos.frames,
                state,
                warnings,
            })
        })
    }

    fn push_block(
        &self,
        sink: &mut BatchSink<'_>,
        artifacts: &[(git_session_schema::ArtifactId, Vec<u8>)],
        events: &mut [Event],
        skip: Option<&HashSet<String>>,
    ) -> OpResult<()> {
        for (id, bytes) in artifacts {
            let stored = sink.add_artifact(bytes)?;
            debug_assert_eq!(&stored, id);
        }
        for event in events {
            if skip.is_some_and(|s| s.contains(&dedup_key(event))) {
                continue;
            }
            sink.push_mut(event)?;
        }
        Ok(())
    }
}

/// Reads a native file from an offset in blocks of whole lines and parses
/// them in order, carrying the adapter's state from block to block.
struct BlockReader<'a> {
    adapter: &'a dyn Adapter,
    /// Redacts each event before it leaves this thread, when set.
    redactor: Option<&'a crate::redact::Redactor>,
    path: &'a Path,
    rel: &'a str,
    kind: FileKind,
    offset: u64,
    first_frame: u64,
    first_line: u64,
    first_seq: u64,
}

impl BlockReader<'_> {
    /// Sends each block's parse to `tx`; returns the bytes and lines
    /// consumed (complete lines only) and the final state.
    fn run(
        self,
        mut state: Option<Value>,
        tx: std::sync::mpsc::SyncSender<git_session_adapters::Parsed>,
        spent: std::sync::mpsc::Receiver<git_session_adapters::Parsed>,
    ) -> OpResult<(crate::native::jsonl::ReadPosition, Value)> {
        let mut reader = crate::native::open_reader(
            self.kind,
            self.path,
            self.offset,
            self.first_frame,
            self.first_line,
        )?;
        let mut next_seq = self.first_seq;
        while let Some(records) = reader.next_batch()? {
            let mut parsed = self.adapter.parse(ParseInput {
                records,
                next_seq,
                state: state.take(),
                source: self.rel,
                session: None,
                sidecar: None,
            });
            if let Some(reason) = parsed.refused.take() {
                return Err(OpError::Conflict {
                    message: format!("{}: {reason}", self.path.display()),
                    hint: None,
                });
            }
            next_seq += parsed.events.len() as u64;
            if let Some(r) = self.redactor {
                for event in &mut parsed.events {
                    r.redact(event);
                }
            }
            state = Some(std::mem::take(&mut parsed.state));
            if tx.send(parsed).is_err() {
                // The writer stopped; its error is the one reported.
                break;
            }
            while let Ok(done) = spent.try_recv() {
                drop(done);
            }
        }
        // Free the last blocks here too, once the writer is through with
        // them; it stops returning blocks when it has seen the last one.
        drop(tx);
        for done in spent.iter() {
            drop(done);
        }
        Ok((reader.position(), state.unwrap_or(Value::Null)))
    }
}

/// Returns the identity (see [`dedup_key`]) of every event `adapter` reads
/// from the native file at `path`, in order.
pub(crate) fn native_keys(adapter: &dyn Adapter, path: &Path, rel: &str) -> OpResult<Vec<String>> {
    let reader = BlockReader {
        adapter,
        redactor: None,
        path,
        rel,
        kind: crate::native::file_kind(adapter, Path::new(rel)),
        offset: 0,
        first_frame: 0,
        first_line: 0,
        first_seq: 0,
    };
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel(2);
        // Nothing is returned to the reader here: the keys are all we keep.
        let (_, spent_rx) = std::sync::mpsc::channel();
        let producer = scope.spawn(move || reader.run(None, tx, spent_rx));
        let keys: Vec<String> = rx
            .into_iter()
            .flat_map(|parsed: git_session_adapters::Parsed| parsed.events)
            .map(|e| dedup_key(&e))
            .collect();
        producer.join().expect("the block reader does not panic")?;
        Ok(keys)
    })
}

/// Returns what identifies an event across re-reads of its native file:
/// its origin (native id or position, and type, since one record can give
/// several events), or for events without one, a hash of type and body.
fn dedup_key(event: &Event) -> String {
    match &event.origin {
        Some(o) if o.native_id.is_some() || o.native_seq.is_some() => format!(
            "{}\n{}\n{}",
            o.native_id.as_deref().unwrap_or(""),
            o.native_seq.map(|n| n.to_string()).unwrap_or_default(),
            event.kind,
        ),
        _ => {
            let digest = Sha256::digest(event.payload.to_string().as_bytes());
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            format!("{}\n{hex}", event.kind)
        }
    }
}
