//! Native capture (`git session import`): find the agent sessions that ran
//! in this repository, map their new records to canonical events with the
//! agent's adapter, and append them, one batch commit per changed session.
//!
//! Agent stores are only ever read. Each native file has a cursor (see
//! [`crate::native::cursor`]): an unchanged file costs one `stat`; a grown file is
//! read from its cursor, complete lines only (a line the agent is still
//! writing waits for the next capture); a rewritten or truncated file, or
//! one whose cursor was lost, is re-read whole and reconciled by native ids
//! so nothing is appended twice. Events others appended to the session in
//! between (a handoff's, an `append`) do not force a re-read: the parse
//! numbers the file's events in file order and a [`SeqMap`] maps them, and
//! their parents, to the stored seqs.
//!
//! A new file's session facts (its cwd above all) come from a bounded
//! streaming scan: the adapter parses it batch by batch from the start
//! until it has them, at most [`SCAN_BYTES`] of whole records. A file whose
//! cwd is not found is never passed over in silence: it is reported in
//! [`CaptureReport::skipped_sources`] with the reason and its cursor keeps
//! the reason for `doctor`. A session belongs to the innermost repository
//! holding its cwd ([`owns`]).
//!
//! A file that `resume` or `handoff` wrote (see [`super::written`]) is not
//! a new session: what was written is already stored, so only the agent's
//! records after it are appended, to the session it came from, a fork of
//! it, or the handoff's child.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};

use git_session_adapters::source::Corrupt;
use git_session_adapters::{Adapter, NativeSession, ParseInput, ParseMemo, Source, Warning};
use git_session_schema::{Agent, Event, SessionHeader, SessionId, SpawnedBy};
use gix::ObjectId;
use serde_json::Value;
use sha2::{Digest, Sha256};

mod rows;

use super::canonical::commit_info;
use super::progress::{Progress, Silent};
use super::written::{Written, WrittenBy, WrittenFile};
use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::native::cursor::{CursorIndex, FileCursor, FileState, SeqMap, head_hash, tail_hash};
use crate::native::jsonl::{JsonlReader, ReadPosition, RecordReader};
use crate::native::zstd::FramedReader;
use crate::store::{BatchSink, Scrubbed, Scrubber, SeqMode, Store, StoreError};

/// One parsed block on its way to the writer: the adapter's output with
/// its events, sealed by the reader (see [`BlockReader::writes`]) or left
/// for the writer to redact.
struct Block {
    parsed: git_session_adapters::Parsed,
    events: Vec<Pending>,
}

/// An event of a [`Block`], redacted by the reader or left to the writer.
enum Pending {
    Done(Scrubbed),
    Raw(Event),
    Taken,
}

impl Pending {
    /// Redacts a raw event now (on the calling thread) and returns it.
    fn scrubbed(&mut self, scrubber: Scrubber) -> &mut Scrubbed {
        if let Pending::Raw(_) = self
            && let Pending::Raw(e) = std::mem::replace(self, Pending::Taken)
        {
            *self = Pending::Done(scrubber.seal(e));
        }
        match self {
            Pending::Done(s) => s,
            _ => unreachable!("a taken event is always put back redacted"),
        }
    }
}

/// How much of a new file is scanned, at most, for its session facts
/// (which project it belongs to). Records are read whole, so a first
/// record longer than this is still read; the scan stops after it.
pub const SCAN_BYTES: u64 = 16 << 20;

/// What a scan for session facts found: the facts and the adapter's
/// reason when it refuses the file, or why no facts were found (`None`:
/// an empty file).
type ScanResult = Result<(NativeSession, Option<String>), Option<String>>;

/// What the scan of a new file found.
enum Identity {
    /// This repository's session, with its facts.
    Ours(SessionId, NativeSession),
    /// Another repository's session (its cwd is elsewhere), or an empty file.
    Elsewhere,
    /// No session facts: why, for the warning (the file is not captured).
    Unknown(String),
}

/// Says what to capture.
pub struct CaptureRequest<'a> {
    /// Agents to capture; empty means every agent that has an adapter.
    pub agents: Vec<Agent>,
    /// The user's home directory (agent stores default to it).
    pub home: PathBuf,
    /// Looks up an environment variable (an agent's store override).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// How patient database reads are.
    pub sqlite: crate::native::sqlite::Options,
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
    /// One-based line number (for a database row: its rowid).
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
    /// Native files skipped with a warning by an earlier capture and not
    /// changed since (`doctor` lists them with the reason).
    pub skipped_earlier: usize,
    /// Files that failed; the others were still captured.
    pub skipped: Vec<SkippedFile>,
    /// Sources skipped with a warning because they cannot be read now or
    /// by this build (a database locked past the wait, corrupt, or of an
    /// unknown schema; a corrupt frame): nothing of them was captured, the
    /// others were, and capture still succeeds.
    pub skipped_sources: Vec<SkippedFile>,
    /// Records kept out of the log with a reason.
    pub warnings: Vec<CaptureWarning>,
    /// Agent stores that do not exist here (nothing to capture from them).
    pub missing: Vec<(Agent, PathBuf)>,
    /// SQL statements run on agent databases (an unchanged database costs
    /// none, one whose files moved but whose sessions did not costs one).
    pub queries: u64,
}

/// Captures the sessions of every requested agent that ran in this repository.
pub fn capture(
    store: &Store,
    clock: &Clock,
    request: &CaptureRequest<'_>,
) -> OpResult<CaptureReport> {
    capture_reporting(store, clock, request, &Silent)
}

/// Like [`capture`], telling `progress` how many native files there are
/// and how many are done.
pub fn capture_reporting(
    store: &Store,
    clock: &Clock,
    request: &CaptureRequest<'_>,
    progress: &dyn Progress,
) -> OpResult<CaptureReport> {
    let adapters: Vec<&dyn Adapter> = git_session_adapters::registry::ADAPTERS
        .iter()
        .copied()
        .filter(|a| request.agents.is_empty() || request.agents.contains(&a.agent()))
        .collect();
    capture_with_progress(store, clock, request, &adapters, progress)
}

/// Captures with the given adapters (the registry's, or test adapters);
/// `request.agents` is not consulted.
pub fn capture_with(
    store: &Store,
    clock: &Clock,
    request: &CaptureRequest<'_>,
    adapters: &[&dyn Adapter],
) -> OpResult<CaptureReport> {
    capture_with_progress(store, clock, request, adapters, &Silent)
}

/// Like [`capture_with`], telling `progress` about the native files: their
/// number grows as each agent's store is discovered, one is done when it
/// was captured, found unchanged or skipped.
pub fn capture_with_progress(
    store: &Store,
    clock: &Clock,
    request: &CaptureRequest<'_>,
    adapters: &[&dyn Adapter],
    progress: &dyn Progress,
) -> OpResult<CaptureReport> {
    progress.stage("Capturing agent sessions", "files", 0);
    // Objects and refs of all batches are written together (one pack, one
    // ref transaction per flush; see `store::bulk`), before the cursors
    // that say they were captured.
    // `session.bulkCapture=false` publishes batch by batch instead.
    let plain = store;
    let bulk = store.bulk_capture().then(|| store.bulk());
    let store = bulk.as_ref().unwrap_or(store);
    let worktrees = store.worktree_paths();
    let mut report = CaptureReport::default();
    for &adapter in adapters {
        let agent = adapter.agent();
        let root = adapter.store_root(request.env, &request.home);
        // Directories besides the store root the agent was told to keep
        // sessions in (environment, settings), each scanned flat.
        let extra =
            crate::native::extra_dirs(adapter, &root, request.env, &request.home, &worktrees);
        if !root.is_dir() && extra.is_empty() {
            report.missing.push((agent.clone(), root));
            continue;
        }
        store.ensure_state_dir()?;
        // One capture of an agent at a time: cursors are read and written
        // around the appends.
        let _lock = store.lock_state(&format!("capture-{agent}"))?;
        let mut cursors = CursorIndex::load(store.state_dir(), agent.as_str());
        let written = Written::load(store.state_dir(), &agent);
        let mut sources = vec![(root.clone(), crate::native::discover(adapter, &root))];
        for dir in extra {
            let files = crate::native::discover_flat(adapter, &dir);
            sources.push((dir, files));
        }
        // Parents before sub-agents, older before newer: stable order. A
        // new child whose parent is not stored yet waits for the end of the
        // list (its parent may come later in it), once.
        let mut queue: std::collections::VecDeque<(&PathBuf, &PathBuf, bool)> = sources
            .iter()
            .flat_map(|(root, files)| files.iter().map(move |rel| (root, rel, true)))
            .collect();
        progress.more(queue.len() as u64);
        while let Some((root, rel, may_defer)) = queue.pop_front() {
            let abs = root.join(rel);
            let rel_text = rel.to_string_lossy().into_owned();
            let key = abs.to_string_lossy().into_owned();
            if let Some(Source::Sqlite(decl)) = crate::native::source_for(adapter, rel) {
                let mut job = rows::DbJob {
                    store,
                    clock,
                    adapter,
                    decl,
                    agent: &agent,
                    abs: &abs,
                    rel: &rel_text,
                    key: &key,
                    worktrees: &worktrees,
                    cursors: &mut cursors,
                    report: &mut report,
                    written: &written,
                    options: request.sqlite,
                    root: None,
                    spent: None,
                    tree: None,
                };
                if let Err(e) = job.run() {
                    report.skipped.push(SkippedFile {
                        path: abs.clone(),
                        reason: e.to_string(),
                    });
                }
                progress.done(1);
                continue;
            }
            let corrupt = match crate::native::source_for(adapter, rel) {
                Some(Source::ZstdJsonl { corrupt, .. }) => Some(corrupt),
                _ => None,
            };
            let mut job = FileJob {
                framed: corrupt.is_some(),
                corrupt: corrupt.unwrap_or(Corrupt::KeepPrefix),
                refused: RefCell::new(None),
                may_defer,
                deferred: false,
                store,
                clock,
                adapter,
                root,
                agent: &agent,
                abs: &abs,
                rel: &rel_text,
                key: &key,
                worktrees: &worktrees,
                cursors: &mut cursors,
                written: &written,
                report: &mut report,
            };
            let result = job.run();
            if job.deferred {
                queue.push_back((root, rel, false));
                continue;
            }
            progress.done(1);
            if let Err(e) = result {
                // A file the agent itself would refuse is a source this
                // build cannot read, not a failure of the capture.
                let (list, reason) = match job.refused.take() {
                    Some(reason) => (&mut report.skipped_sources, reason),
                    None => (&mut report.skipped, e.to_string()),
                };
                list.push(SkippedFile {
                    path: abs.clone(),
                    reason,
                });
            }
        }
        // A JSON tree beside the databases (OpenCode's older `storage/`)
        // comes after them: a session both hold is the database's.
        for source in adapter.spec().sources {
            let Source::JsonTree(tree) = source else {
                continue;
            };
            let abs = crate::native::tree::dir_of(&root, tree);
            if !abs.is_dir() {
                continue;
            }
            let mut job = rows::DbJob {
                store,
                clock,
                adapter,
                decl: tree.database,
                agent: &agent,
                abs: &abs,
                rel: tree.dir,
                key: &abs.to_string_lossy(),
                worktrees: &worktrees,
                cursors: &mut cursors,
                report: &mut report,
                written: &written,
                options: request.sqlite,
                root: None,
                spent: None,
                tree: Some(tree),
            };
            if let Err(e) = job.run() {
                report.skipped.push(SkippedFile {
                    path: abs.clone(),
                    reason: e.to_string(),
                });
            }
        }
        store.flush()?;
        cursors.save()?;
        if let Err(e) = store.merge_packs() {
            report.warnings.push(CaptureWarning {
                path: store.repo().objects.store_ref().path().join("pack"),
                line: 0,
                message: format!("the capture's packs were left unmerged: {e}"),
            });
        }
    }
    // Everything below writes through the plain store: a bulk store keeps
    // new objects in memory until its next flush, and there is none after
    // this point.
    let store = plain;
    // A session capture started from another (a handoff's target, a
    // continuation fork) is in its parent's task.
    for s in report.sessions.iter().filter(|s| s.created) {
        // Metadata is best effort here: what was captured stays captured.
        let Some(parent) = store.header(&s.id)?.lineage.map(|l| l.parent_session) else {
            continue;
        };
        let task = store.meta(&parent).ok().and_then(|m| m.task);
        if task.is_some() && store.meta(&s.id).is_ok_and(|m| m.task.is_none()) {
            let change = git_session_schema::MetaChange {
                time: clock.now_rfc3339(),
                op: git_session_schema::MetaOp::Task { task },
            };
            let _ = store.change_meta(&s.id, &change, clock.now().as_second());
        }
    }
    // A session led by another agent (a handoff moved the lead) that this
    // agent appended to: recorded in its metadata, and `status` warns.
    for s in report
        .sessions
        .iter()
        .filter(|s| !s.created && s.appended > 0)
    {
        let lead = store
            .meta(&s.id)
            .ok()
            .and_then(|m| m.owner)
            .map(|o| o.agent);
        if lead.is_some_and(|l| l != s.agent.as_str()) {
            let change = git_session_schema::MetaChange {
                time: clock.now_rfc3339(),
                op: git_session_schema::MetaOp::Foreign {
                    agent: s.agent.to_string(),
                    first: s.events - s.appended,
                    last: s.events - 1,
                },
            };
            let _ = store.change_meta(&s.id, &change, clock.now().as_second());
        }
    }
    // Keep the search index current for what changed, when there is one
    // (it is rebuildable: search refreshes it anyway, so a failure here
    // costs only time).
    if store.index_dir().is_dir() && !report.sessions.is_empty() {
        let ids: Vec<SessionId> = report.sessions.iter().map(|s| s.id.clone()).collect();
        let _ = store.refresh_index(Some(&ids), git_session_adapters::registry::is_native_key);
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

/// Returns the id of the fork that holds an agent's continuation of a
/// session resume wrote, when that session moved on meanwhile: UUID-shaped,
/// from the session, the native id and a stamp of what was written (the
/// file's bytes, a database session's marks).
fn derived_fork_id(parent: &SessionId, native_id: &str, stamp: &str) -> SessionId {
    let digest = Sha256::digest(format!("{parent}\n{native_id}\n{stamp}").as_bytes());
    let h: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    SessionId::new(format!(
        "{}-{}-8{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[16..20],
        &h[20..32]
    ))
    .expect("hex and dashes make a valid id")
}

struct FileJob<'a> {
    store: &'a Store,
    clock: &'a Clock,
    adapter: &'a dyn Adapter,
    /// The agent's store root.
    root: &'a Path,
    agent: &'a Agent,
    abs: &'a Path,
    rel: &'a str,
    /// The file's key in the cursors and the record of written files: its
    /// absolute path, so files under the same relative path in two agent
    /// homes (`--home`) are never taken for one another.
    key: &'a str,
    worktrees: &'a [PathBuf],
    cursors: &'a mut CursorIndex,
    /// The native sessions git-session wrote for this agent.
    written: &'a Written,
    report: &'a mut CaptureReport,
    /// Whether the file is zstd frames ([`Source::ZstdJsonl`]).
    framed: bool,
    /// What a corrupt frame does to the file (zstd frames only).
    corrupt: Corrupt,
    /// Why the file is refused as a whole, once known (a corrupt frame of a
    /// [`Corrupt::RefuseFile`] source, or [`Parsed::refused`]): the capture
    /// of it fails and it is reported as a skipped source.
    ///
    /// [`Parsed::refused`]: git_session_adapters::Parsed::refused
    refused: RefCell<Option<String>>,
    /// Whether a new child whose parent is not stored yet may wait.
    may_defer: bool,
    /// Set when it waits: the file is captured again at the end of the run.
    deferred: bool,
}

/// What reading a file from a cursor produced.
struct Fed {
    pos: ReadPosition,
    state: Value,
    warnings: Vec<Warning>,
    /// Why the reader stopped early (a corrupt frame), if it did.
    problem: Option<String>,
}

/// Says which of the events read are already stored.
#[derive(Clone, Copy)]
enum Known<'k> {
    /// None: every event is appended.
    Nothing,
    /// Events whose key (see [`dedup_key`]) is here are stored at that
    /// seq already and are not appended again.
    Stored(&'k HashMap<String, u64>),
    /// Every event was written by git-session from the stored session: none
    /// is appended; each maps to the stored event with its key, else to
    /// `fallback` (the last event written), so the agent's later records
    /// point at a stored parent.
    Written {
        keys: &'k HashMap<String, u64>,
        fallback: u64,
    },
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
        let cursor = self.cursors.files.get(self.key).cloned();
        if let Some(c) = &cursor
            && c.size == size
            && c.mtime_ns == mtime_ns
        {
            if c.session.is_some() {
                self.report.unchanged += 1;
            } else if c.skipped.is_some() {
                self.report.skipped_earlier += 1;
            }
            return Ok(());
        }
        // Whether the file still holds what its cursor says was read.
        let read_on = match &cursor {
            Some(c) if c.session.is_some() && size >= c.offset => {
                tail_hash(self.abs, c.offset)? == c.tail
                    && (c.head.is_empty() || head_hash(self.abs, c.offset)? == c.head)
            }
            _ => false,
        };
        // A file git-session wrote, not read since (a cursor that does not
        // fit it belongs to an earlier file under the same path).
        if !read_on
            && let Some(w) = self.written.lookup(self.key, self.abs, size)?.cloned()
            && let Ok(parent) = SessionId::new(w.session.as_str())
            && self.store.tip(&parent)?.is_some()
        {
            return self.continue_written(&w, &parent, size, mtime_ns);
        }
        // The session facts, when the scan that identified the file found them.
        let mut facts = None;
        // The session the cursor feeds, unless the file was rewritten with
        // another session in it (Pi rewrites a file in place when it
        // migrates it): then the file is identified again, and the session
        // it held stays as it was stored.
        let kept = match cursor.as_ref().and_then(|c| c.session.clone()) {
            Some(id) => {
                let id = SessionId::new(id).map_err(|e| OpError::Conflict {
                    message: e.to_string(),
                    hint: None,
                })?;
                (read_on || !self.holds_another(&id)?).then_some(id)
            }
            None => None,
        };
        let id = match kept {
            Some(id) => id,
            None => match self.identify()? {
                Identity::Ours(id, session) => {
                    facts = Some(session);
                    id
                }
                Identity::Elsewhere => {
                    self.remember_foreign(size, mtime_ns);
                    return Ok(());
                }
                Identity::Unknown(reason) => {
                    // Named now, listed by `doctor` until the file changes.
                    self.report.skipped_sources.push(SkippedFile {
                        path: self.abs.to_owned(),
                        reason: reason.clone(),
                    });
                    self.remember_foreign(size, mtime_ns);
                    if let Some(c) = self.cursors.files.get_mut(self.key) {
                        c.skipped = Some(reason);
                    }
                    return Ok(());
                }
            },
        };
        let stored = self
            .store
            .tip(&id)?
            .map(|_| self.store.stat(&id))
            .transpose()?;
        // The saved state, when the file can be read on from its cursor:
        // it only grew, and the session holds at least what the file gave
        // it (events appended by others since are fine, see `SeqMap`).
        let resumable: Option<FileState> = match (&cursor, &stored) {
            (Some(c), Some(s)) if read_on && s.events >= c.events => {
                self.cursors.load_state(self.key)
            }
            _ => None,
        };
        let info = commit_info(self.store, self.clock);
        let mut seqs = SeqMap::default();
        let (outcome, fed) = if let Some(state) = resumable {
            let c = cursor.as_ref().expect("resumable implies a cursor");
            let s = stored.as_ref().expect("resumable implies a stored session");
            seqs = state.seqs;
            // Events appended by others since this file's last batch are
            // checked too, in case one of them is a record read here.
            let others = if s.events > c.events {
                self.stored_keys(&id, c.events)?
            } else {
                HashMap::new()
            };
            let known = if others.is_empty() {
                Known::Nothing
            } else {
                Known::Stored(&others)
            };
            let mut fed = None;
            let outcome =
                self.store
                    .append(&id, SeqMode::Assign, &info, |sink: &mut BatchSink<'_>| {
                        let mut attempt = seqs.clone();
                        fed = Some(self.feed(
                            sink,
                            ReadPosition {
                                offset: c.offset,
                                lines: c.lines,
                                frames: c.frames,
                            },
                            None,
                            Some(state.adapter.clone()),
                            &mut attempt,
                            known,
                        )?);
                        seqs = attempt;
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
            let known = self.stored_keys(&id, 0)?;
            let mut fed = None;
            let outcome =
                self.store
                    .append(&id, SeqMode::Assign, &info, |sink: &mut BatchSink<'_>| {
                        seqs = SeqMap::default();
                        fed = Some(self.feed(
                            sink,
                            ReadPosition::default(),
                            None,
                            None,
                            &mut seqs,
                            Known::Stored(&known),
                        )?);
                        Ok::<_, OpError>(())
                    })?;
            (outcome, fed)
        } else {
            let mut fed = None;
            // The header needs the session facts, which the scan that
            // identified the file gave (else scan again: a cursor whose
            // session is gone); the batch parses the file again.
            let session = match facts {
                Some(s) => s,
                None => self.scan()?.map(|(s, _)| s).unwrap_or_default(),
            };
            if let Some(parent) = &session.parent {
                let parent_id = canonical_id(self.agent, &parent.native_id);
                if self.store.tip(&parent_id)?.is_none() {
                    if self.may_defer {
                        self.deferred = true;
                        return Ok(());
                    }
                } else if let Some((at, keys)) = self.inherited_prefix(&parent_id)? {
                    return self.create_fork(&id, &session, &parent_id, at, &keys, size, mtime_ns);
                }
            }
            let header = self.header(&id, &session);
            let outcome = self.store.create(
                &header,
                SeqMode::Assign,
                &info,
                |sink: &mut BatchSink<'_>| {
                    seqs = SeqMap::default();
                    fed = Some(self.feed(
                        sink,
                        ReadPosition::default(),
                        None,
                        None,
                        &mut seqs,
                        Known::Nothing,
                    )?);
                    Ok::<_, OpError>(())
                },
            )?;
            (outcome, fed)
        };
        let fed = fed.expect("the producer ran");
        self.finish(FileDone {
            id,
            created: stored.is_none(),
            size,
            mtime_ns,
            fed,
            seqs,
            outcome,
        })
    }

    /// Captures a native session git-session wrote, seen for the first
    /// time (see [`super::written`]): what was written is already stored,
    /// so only the agent's records after it are appended, to the session it
    /// was written from, to a fork of it when that session moved on since
    /// (a resume), or to a child forked at the handoff (a handoff).
    fn continue_written(
        &mut self,
        w: &WrittenFile,
        parent: &SessionId,
        size: u64,
        mtime_ns: i128,
    ) -> OpResult<()> {
        if size == w.size && w.by == WrittenBy::Resume {
            // Nothing of the agent's yet; looked at again when it grows. (A
            // handoff's child is made at once, so its id names a session.)
            self.remember_foreign(size, mtime_ns);
            return Ok(());
        }
        let stat = self.store.stat(parent)?;
        let id = match w.by {
            WrittenBy::Resume if stat.events == w.seq + 1 => parent.clone(),
            // The session moved on since; unless by this very continuation
            // (captured before, its cursor since lost), the agent's records
            // go to a fork. Its id is derived from what was written, so such
            // a capture finds the same fork again.
            WrittenBy::Resume if self.continued_here(parent, w)? => parent.clone(),
            WrittenBy::Resume => derived_fork_id(parent, &w.native_id, &w.tail),
            WrittenBy::Handoff => canonical_id(self.agent, &w.native_id),
        };
        let info = commit_info(self.store, self.clock);
        let created = self.store.tip(&id)?.is_none();
        if created {
            // The new session holds this agent's records under its native
            // id: a handoff's child, or the fork of a resume into another
            // agent (or the same one), is this agent's.
            let agent = self.agent.clone();
            let native_id = w.native_id.clone();
            let shape = move |h: &mut SessionHeader| {
                h.agent = agent.clone();
                h.native_id = Some(native_id.clone());
            };
            self.store
                .fork_as(parent, w.seq, &id, &self.clock.now_rfc3339(), &info, &shape)?;
        }
        let keys = self.stored_keys(&id, 0)?;
        let mut seqs = SeqMap::default();
        let mut fed = None;
        let outcome =
            self.store
                .append(&id, SeqMode::Assign, &info, |sink: &mut BatchSink<'_>| {
                    seqs = SeqMap::default();
                    let ours = self.feed(
                        sink,
                        ReadPosition::default(),
                        Some(w.size),
                        None,
                        &mut seqs,
                        Known::Written {
                            keys: &keys,
                            fallback: w.seq,
                        },
                    )?;
                    let mut theirs = self.feed(
                        sink,
                        ours.pos,
                        None,
                        Some(ours.state),
                        &mut seqs,
                        Known::Stored(&keys),
                    )?;
                    theirs.warnings.splice(0..0, ours.warnings);
                    fed = Some(theirs);
                    Ok::<_, OpError>(())
                })?;
        let fed = fed.expect("the producer ran");
        self.finish(FileDone {
            id,
            created,
            size,
            mtime_ns,
            fed,
            seqs,
            outcome,
        })
    }

    /// Returns where a new child's history leaves its parent's, when the
    /// child starts with copies of the parent's records (a seeded fork:
    /// the adapter gives the copied records the parent's origins): the last
    /// parent seq the child holds, and the parent's events up to it by key.
    fn inherited_prefix(
        &self,
        parent: &SessionId,
    ) -> OpResult<Option<(u64, HashMap<String, u64>)>> {
        let mut keys = self.stored_keys(parent, 0)?;
        let reader = BlockReader {
            adapter: self.adapter,
            scrubber: self.store.scrubber(),
            path: self.abs,
            rel: self.rel,
            from: ReadPosition::default(),
            end: None,
            framed: self.framed,
            first_seq: 0,
            writes: false,
        };
        let (child, _, _) = read_keys(reader, None)?;
        // Only events named by a native id count: a line number or a
        // payload hash can match by chance between two files.
        let named = |k: &&String| !k.starts_with('\n') && k.split('\n').count() == 3;
        let Some(at) = child
            .iter()
            .filter(named)
            .filter_map(|k| keys.get(k).copied())
            .max()
        else {
            return Ok(None);
        };
        keys.retain(|_, seq| *seq <= at);
        Ok(Some((at, keys)))
    }

    /// Captures a new child that inherited its parent's history up to
    /// `at` as a canonical fork of the parent there: the inherited events
    /// are the parent's (shared, not appended again), the child's own
    /// follow.
    #[allow(clippy::too_many_arguments)]
    fn create_fork(
        &mut self,
        id: &SessionId,
        session: &NativeSession,
        parent: &SessionId,
        at: u64,
        inherited: &HashMap<String, u64>,
        size: u64,
        mtime_ns: i128,
    ) -> OpResult<()> {
        let info = commit_info(self.store, self.clock);
        let own = session.clone();
        let shape = move |h: &mut SessionHeader| {
            h.native_id = own.native_id.clone();
            h.cwd = own.cwd.clone();
            h.title = own.title.clone();
        };
        let created = session
            .created
            .clone()
            .unwrap_or_else(|| self.clock.now_rfc3339());
        self.store
            .fork_as(parent, at, id, &created, &info, &shape)?;
        let mut seqs = SeqMap::default();
        let mut fed = None;
        let outcome =
            self.store
                .append(id, SeqMode::Assign, &info, |sink: &mut BatchSink<'_>| {
                    seqs = SeqMap::default();
                    fed = Some(self.feed(
                        sink,
                        ReadPosition::default(),
                        None,
                        None,
                        &mut seqs,
                        Known::Stored(inherited),
                    )?);
                    Ok::<_, OpError>(())
                })?;
        let fed = fed.expect("the producer ran");
        self.finish(FileDone {
            id: id.clone(),
            created: true,
            size,
            mtime_ns,
            fed,
            seqs,
            outcome,
        })
    }

    /// Returns whether `parent` already holds the first record the agent
    /// added after what resume wrote (`w`).
    fn continued_here(&self, parent: &SessionId, w: &WrittenFile) -> OpResult<bool> {
        let reader = |from, end| BlockReader {
            adapter: self.adapter,
            scrubber: self.store.scrubber(),
            path: self.abs,
            rel: self.rel,
            from,
            end,
            framed: self.framed,
            first_seq: 0,
            writes: false,
        };
        let (_, pos, state) = read_keys(reader(ReadPosition::default(), Some(w.size)), None)?;
        let (theirs, _, _) = read_keys(reader(pos, None), Some(state))?;
        let Some(first) = theirs.first() else {
            return Ok(false);
        };
        Ok(self.stored_keys(parent, w.seq + 1)?.contains_key(first))
    }

    /// Remembers cheaply that the file feeds nothing (another project's, or
    /// one git-session wrote that has nothing new).
    fn remember_foreign(&mut self, size: u64, mtime_ns: i128) {
        self.cursors.files.insert(
            self.key.to_owned(),
            FileCursor {
                size,
                mtime_ns,
                ..FileCursor::default()
            },
        );
    }

    /// Saves the cursor and state after a batch and reports it.
    fn finish(&mut self, done: FileDone) -> OpResult<()> {
        let FileDone {
            id,
            created,
            size,
            mtime_ns,
            fed,
            seqs,
            outcome,
        } = done;
        for w in &fed.warnings {
            self.report.warnings.push(CaptureWarning {
                path: self.abs.to_owned(),
                line: w.line + 1,
                message: w.message.clone(),
            });
        }
        if let Some(problem) = &fed.problem {
            self.report.skipped_sources.push(SkippedFile {
                path: self.abs.to_owned(),
                reason: format!(
                    "{problem}; the frames before it were captured, the rest is skipped"
                ),
            });
        }
        self.cursors.save_state(
            self.key,
            &FileState {
                adapter: fed.state,
                seqs,
            },
        )?;
        write_states(self.store, self.cursors)?;
        self.cursors.files.insert(
            self.key.to_owned(),
            FileCursor {
                size,
                mtime_ns,
                offset: fed.pos.offset,
                lines: fed.pos.lines,
                frames: fed.pos.frames,
                tail: tail_hash(self.abs, fed.pos.offset)?,
                head: head_hash(self.abs, fed.pos.offset)?,
                session: Some(id.to_string()),
                events: outcome.events,
                skipped: None,
            },
        );
        let appended = outcome.seq.map_or(0, |(a, b)| b - a + 1);
        if outcome.commit.is_some() || created {
            self.report.sessions.push(CapturedSession {
                id,
                agent: self.agent.clone(),
                source: self.abs.to_owned(),
                created,
                appended,
                events: outcome.events,
                commit: outcome.commit,
            });
        } else {
            self.report.unchanged += 1;
        }
        Ok(())
    }

    /// Says whether the file, rewritten since its cursor, now holds
    /// another native session than `id` was captured from.
    fn holds_another(&self, id: &SessionId) -> OpResult<bool> {
        let Some(stored) = self
            .store
            .tip(id)?
            .map(|_| self.store.stat(id))
            .transpose()?
        else {
            return Ok(false);
        };
        let Ok((session, _)) = self.scan()? else {
            return Ok(false);
        };
        Ok(session
            .native_id
            .is_some_and(|native| Some(native.as_str()) != stored.header.native_id.as_deref()))
    }

    /// Decides from a scan of a new file whether it ran in this
    /// repository, and if so returns its canonical id and session facts.
    fn identify(&self) -> OpResult<Identity> {
        let (session, refused) = match self.scan()? {
            Ok(found) => found,
            Err(Some(reason)) => return Ok(Identity::Unknown(reason)),
            Err(None) => return Ok(Identity::Elsewhere),
        };
        if !inside(self.worktrees, &session) {
            return Ok(Identity::Elsewhere);
        }
        // A session of this repository that this build cannot read is
        // refused with the adapter's reason, never read half-way.
        if let Some(reason) = refused {
            return Err(self.refuse(reason));
        }
        let native = session.native_id.clone().unwrap_or_else(|| {
            Path::new(self.rel)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        Ok(Identity::Ours(canonical_id(self.agent, &native), session))
    }

    /// Finds the session facts of a file (its cwd above all) by parsing it
    /// from the start, batch by batch, until the adapter has them: a
    /// bounded streaming scan (at most [`SCAN_BYTES`] of whole records,
    /// one batch in memory), so a long first record or facts a few records
    /// in are found, with the adapter's reason when it refuses the file as
    /// a whole. Returns why they were not found (`None`: an empty file,
    /// nothing to capture yet).
    fn scan(&self) -> OpResult<ScanResult> {
        let mut reader: Box<dyn RecordReader> = if self.framed {
            Box::new(FramedReader::open(self.abs, 0, 0, 0)?)
        } else {
            Box::new(JsonlReader::open(self.abs, 0, 0)?)
        };
        let sidecar = self
            .adapter
            .sidecar(Path::new(self.rel))
            .and_then(|rel| std::fs::read(self.root.join(rel)).ok());
        let mut state = None;
        let mut memo = ParseMemo::default();
        let mut next_seq = 0;
        let mut first_warning = None;
        while let Some(batch) = reader.next_batch()? {
            let mut parsed = self.adapter.parse(ParseInput {
                records: batch,
                next_seq,
                state: state.take(),
                source: self.rel,
                session: None,
                sidecar: sidecar.as_deref(),
                memo,
            });
            memo = std::mem::take(&mut parsed.memo);
            next_seq += parsed.events.len() as u64;
            if first_warning.is_none() {
                first_warning = parsed
                    .warnings
                    .first()
                    .map(|w| format!("line {}: {}", w.line + 1, w.message));
            }
            if parsed.refused.is_some() || parsed.session.cwd.is_some() {
                return Ok(Ok((parsed.session, parsed.refused)));
            }
            state = Some(parsed.state);
            if reader.position().offset >= SCAN_BYTES {
                break;
            }
        }
        let pos = reader.position();
        let records = pos.lines;
        let size = std::fs::metadata(self.abs)
            .map_err(OpError::io(self.abs))?
            .len();
        let mut reason = if pos.offset == 0 && size == 0 {
            return Ok(Err(None));
        } else if pos.offset == 0 {
            format!(
                "no complete record in its {size} bytes, so no working directory to tell which \
                 repository it belongs to (looked at again when the file changes)"
            )
        } else if pos.offset >= SCAN_BYTES && pos.offset < size {
            format!(
                "no working directory in its first {records} records ({} MiB), so not captured: \
                 which repository it belongs to is unknown",
                pos.offset >> 20
            )
        } else {
            format!(
                "no working directory in any of its {records} records, so not captured: which \
                 repository it belongs to is unknown"
            )
        };
        if let Some(problem) = reader.problem() {
            reason.push_str(&format!("; {problem}"));
        }
        if let Some(w) = first_warning {
            reason.push_str(&format!(" (first problem: {w})"));
        }
        Ok(Err(Some(reason)))
    }

    /// Remembers that the file is refused as a whole and returns the error
    /// that ends its capture.
    fn refuse(&self, reason: String) -> OpError {
        let message = format!("{reason}; nothing of this file is captured until it is readable");
        *self.refused.borrow_mut() = Some(message.clone());
        OpError::Conflict {
            message,
            hint: None,
        }
    }

    fn header(&self, id: &SessionId, session: &NativeSession) -> SessionHeader {
        header_for(self.clock, self.agent, id, session)
    }

    /// Returns the dedup keys of the events stored in `id` from seq `from`
    /// on, each with its seq.
    fn stored_keys(&self, id: &SessionId, from: u64) -> OpResult<HashMap<String, u64>> {
        stored_keys_from(self.store, id, from)
    }

    /// Reads the file from `range.0` (to `range.1`, or its end) in blocks
    /// of whole lines, parses them and pushes the events into `sink`,
    /// leaving out those `known` says are stored; `seqs` maps each event's
    /// file seq to its stored one and is extended as events are read.
    ///
    /// Reading, parsing, redacting and serializing run on a second thread
    /// (see [`BlockReader::writes`]), ahead of the hashing, compressing and
    /// writing here, so the two halves of a capture share the machine's
    /// cores. The bounded channel keeps at most [`BLOCKS_IN_FLIGHT`] sealed
    /// blocks in memory.
    fn feed(
        &self,
        sink: &mut BatchSink<'_>,
        from: ReadPosition,
        end: Option<u64>,
        state: Option<Value>,
        seqs: &mut SeqMap,
        known: Known<'_>,
    ) -> OpResult<Fed> {
        // The parse numbers events in file order from 0 (see `SeqMap`), so
        // its parent links stay valid from one capture to the next.
        let reader = BlockReader {
            adapter: self.adapter,
            scrubber: sink.scrubber(),
            path: self.abs,
            rel: self.rel,
            from,
            end,
            framed: self.framed,
            first_seq: seqs.len(),
            writes: true,
        };
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel(BLOCKS_IN_FLIGHT);
            // Sealed events go back to the reader to be freed on the thread
            // that allocated them: freeing them here cost a third of the
            // import's CPU in malloc's cross-thread bookkeeping.
            let (spent_tx, spent_rx) = std::sync::mpsc::channel();
            let producer = scope.spawn(move || reader.run(state, tx, spent_rx));
            let mut warnings = Vec::new();
            let mut failed = None;
            while let Ok(mut block) = rx.recv() {
                let parsed = &mut block.parsed;
                if let Err(e) =
                    self.push_block(sink, &parsed.artifacts, &mut block.events, seqs, known)
                {
                    // Dropping the receiver stops the reader at its next block.
                    failed = Some(e);
                    break;
                }
                warnings.append(&mut parsed.warnings);
                let _ = spent_tx.send(block);
            }
            drop(spent_tx);
            let read = producer.join().expect("the block reader does not panic");
            if let Some(e) = failed {
                return Err(e);
            }
            let (pos, state, problem, refused) = read?;
            if let Some(reason) = refused {
                return Err(self.refuse(reason));
            }
            if let (Some(problem), Corrupt::RefuseFile) = (&problem, self.corrupt) {
                return Err(self.refuse(format!(
                    "{problem} (the agent refuses such a log as a whole)"
                )));
            }
            Ok(Fed {
                pos,
                state,
                warnings,
                problem,
            })
        })
    }

    fn push_block(
        &self,
        sink: &mut BatchSink<'_>,
        artifacts: &[(git_session_schema::ArtifactId, Vec<u8>)],
        events: &mut [Pending],
        seqs: &mut SeqMap,
        known: Known<'_>,
    ) -> OpResult<()> {
        let scrubber = sink.scrubber();
        if !matches!(known, Known::Written { .. }) {
            for (id, bytes) in artifacts {
                let stored = sink.add_artifact(bytes)?;
                debug_assert_eq!(&stored, id);
            }
        }
        for event in events {
            let event = event.scrubbed(scrubber);
            let e = event.event();
            debug_assert_eq!(e.seq, seqs.len(), "the parse numbers in file order");
            let stored = match known {
                Known::Nothing => None,
                Known::Stored(keys) => keys.get(&dedup_key(e)).copied(),
                Known::Written { keys, fallback } => {
                    Some(keys.get(&dedup_key(e)).copied().unwrap_or(fallback))
                }
            };
            if let Some(seq) = stored {
                seqs.push(seq);
                continue;
            }
            let parent = e.parent_seq.and_then(|p| seqs.get(p));
            event.relink(parent);
            let seq = sink.push_scrubbed(event)?;
            seqs.push(seq);
        }
        Ok(())
    }
}

/// What a capture of one file wrote, for its cursor and the report.
struct FileDone {
    id: SessionId,
    created: bool,
    size: u64,
    mtime_ns: i128,
    fed: Fed,
    seqs: SeqMap,
    outcome: crate::store::AppendOutcome,
}

/// Reads a native file from an offset in blocks of whole lines and parses
/// them in order, carrying the adapter's state from block to block.
struct BlockReader<'a> {
    adapter: &'a dyn Adapter,
    /// Redacts the events this thread seals (the store's scrubber; the
    /// writer redacts the others, see [`Block`]).
    scrubber: Scrubber,
    path: &'a Path,
    rel: &'a str,
    /// Where to start: a line start (JSONL) or a frame start.
    from: ReadPosition,
    /// Where to stop (a line or frame boundary), or the end of the file.
    end: Option<u64>,
    framed: bool,
    first_seq: u64,
    /// Seals every event on this thread (redacted, and serialized as far
    /// as the writer's numbering allows: [`Scrubber::seal_written`]) while
    /// the block's trees are in this core's cache, so the writer only
    /// hashes, compresses and writes bytes. Otherwise (a read for dedup
    /// keys only) every other event is redacted here, the rest by the
    /// receiver.
    writes: bool,
}

/// Sealed blocks on their way from the reading thread to the writer, at
/// most. Blocks are small (see [`crate::native::jsonl::BLOCK_BYTES`]) and,
/// sealed, hold bytes rather than trees, while the writer works in bursts
/// (a chunk of 4 MiB is compressed and hashed at once): with two in flight
/// the reader waited out every burst. The reader sealing every event with
/// 32 in flight (about 2.5 MiB of sealed events) took 0.82x the wall time
/// of a share moved by the waits with eight, on the Claude import of 100k
/// records.
const BLOCKS_IN_FLIGHT: usize = 32;

/// The unit of a reading thread's share of the sealing (see [`seal_share`]
/// and [`Balance`]).
const SHARE_OF: u32 = 64;
/// How far one wait moves the share.
const SHARE_STEP: u32 = 4;

/// Takes `events` on their way to the writer, sealing `share` of every
/// [`SHARE_OF`] of them here, spread evenly; with `written`, sealed events
/// are also serialized as far as the writer's numbering allows
/// ([`Scrubber::seal_written`]) while this core has their trees in cache.
/// An event whose dedup key needs its payload (no native id or seq in its
/// origin) keeps it: the writer may have to compare it with stored events.
fn seal_share(
    events: impl Iterator<Item = Event>,
    share: u32,
    written: bool,
    scrubber: Scrubber,
) -> Vec<Pending> {
    let mut due = 0;
    events
        .map(|e| {
            due += share;
            if due >= SHARE_OF {
                due -= SHARE_OF;
                Pending::Done(if written && keyed_by_origin(&e) {
                    scrubber.seal_written(e)
                } else {
                    scrubber.seal(e)
                })
            } else {
                Pending::Raw(e)
            }
        })
        .collect()
}

/// Splits a capture's work between its reading thread and its writer:
/// the reader's share (0 to `max`) moves a step up whenever the reader
/// finds the channel to the writer full, and down whenever the writer finds
/// it empty, so whichever side waits for the other hands it work. What the
/// share means is the caller's (how many of every [`SHARE_OF`] new
/// sessions of a database the reader parses and seals). Counting waits
/// balanced the two threads better
/// than weighing them by how long each waited (measured on the OpenCode
/// bench: 1.10x the wall time).
struct Balance {
    share: AtomicU32,
    max: u32,
}

impl Balance {
    fn new(share: u32, max: u32) -> Balance {
        Balance {
            share: AtomicU32::new(share.min(max)),
            max,
        }
    }

    /// The reader's share now.
    fn share(&self) -> u32 {
        self.share.load(Ordering::Relaxed)
    }

    /// Sends `item` to the writer (the reader takes more when it has to
    /// wait for room); returns false when the writer is gone.
    fn send<T>(&self, tx: &SyncSender<T>, item: T) -> bool {
        match tx.try_send(item) {
            Ok(()) => true,
            Err(TrySendError::Full(item)) => {
                self.step(true);
                tx.send(item).is_ok()
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }

    /// Receives the reader's next item (the reader takes less when the
    /// writer has to wait); `None` when the reader is through.
    fn recv<T>(&self, rx: &Receiver<T>) -> Option<T> {
        match rx.try_recv() {
            Ok(item) => Some(item),
            Err(TryRecvError::Empty) => {
                self.step(false);
                rx.recv().ok()
            }
            Err(TryRecvError::Disconnected) => None,
        }
    }

    /// Counts a wait of the reader outside the channel (for room the
    /// caller bounds), as a wait for room in the channel is counted.
    fn reader_waited(&self) {
        self.step(true);
    }

    fn step(&self, up: bool) {
        let _ = self
            .share
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(if up {
                    (v + SHARE_STEP).min(self.max)
                } else {
                    v.saturating_sub(SHARE_STEP)
                })
            });
    }
}

impl BlockReader<'_> {
    /// Sends each block's parse to `tx`; returns how far it read (complete
    /// records only), the final state, and why it stopped early, if it did.
    fn run(
        self,
        mut state: Option<Value>,
        tx: std::sync::mpsc::SyncSender<Block>,
        spent: std::sync::mpsc::Receiver<Block>,
    ) -> OpResult<(ReadPosition, Value, Option<String>, Option<String>)> {
        let mut reader: Box<dyn RecordReader> = if self.framed {
            let r = FramedReader::open(
                self.path,
                self.from.offset,
                self.from.lines,
                self.from.frames,
            )?;
            Box::new(match self.end {
                Some(end) => r.until(end),
                None => r,
            })
        } else {
            let r = JsonlReader::open(self.path, self.from.offset, self.from.lines)?;
            Box::new(match self.end {
                Some(end) => r.until(end),
                None => r,
            })
        };
        let mut next_seq = self.first_seq;
        let mut memo = ParseMemo::default();
        while let Some(records) = reader.next_batch()? {
            let mut parsed = self.adapter.parse(ParseInput {
                records,
                next_seq,
                state: state.take(),
                source: self.rel,
                session: None,
                sidecar: None,
                memo,
            });
            memo = std::mem::take(&mut parsed.memo);
            reader.release();
            if let Some(reason) = parsed.refused.take() {
                // The adapter cannot read the file (a version it does not
                // know, a record it must not skip): nothing more is read.
                drop(tx);
                for done in spent.iter() {
                    drop(done);
                }
                return Ok((reader.position(), Value::Null, None, Some(reason)));
            }
            next_seq += parsed.events.len() as u64;
            let share = if self.writes { SHARE_OF } else { SHARE_OF / 2 };
            let events = seal_share(parsed.events.drain(..), share, self.writes, self.scrubber);
            state = Some(std::mem::take(&mut parsed.state));
            let block = Block { parsed, events };
            if tx.send(block).is_err() {
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
        Ok((
            reader.position(),
            state.unwrap_or(Value::Null),
            reader.problem(),
            None,
        ))
    }
}

/// States saved by a capture are written with the cursor index, after the
/// flush that publishes their batches (see [`CursorIndex::save_state`]),
/// or earlier, after a flush, once they hold this many bytes.
const STATE_BYTES: usize = 4 << 20;

/// Writes the saved states once they hold [`STATE_BYTES`], publishing
/// what they describe first.
fn write_states(store: &Store, cursors: &mut CursorIndex) -> OpResult<()> {
    if cursors.pending_bytes() >= STATE_BYTES {
        store.flush()?;
        cursors.write_states()?;
    }
    Ok(())
}

/// Returns the canonical header of a new native session.
fn header_for(
    clock: &Clock,
    agent: &Agent,
    id: &SessionId,
    session: &NativeSession,
) -> SessionHeader {
    let created = session
        .created
        .clone()
        .unwrap_or_else(|| clock.now_rfc3339());
    let mut header = SessionHeader::new(id.clone(), agent.clone(), created);
    header.native_id = session.native_id.clone();
    header.cwd = session.cwd.clone();
    header.title = session.title.clone();
    header.spawned_by = session.parent.as_ref().map(|p| SpawnedBy {
        session: canonical_id(agent, &p.native_id),
        call: p.spawned_by.clone(),
        extra: Default::default(),
    });
    header
}

/// Returns the dedup keys of the events stored in `id`, each with its seq.
fn stored_keys(store: &Store, id: &SessionId) -> OpResult<HashMap<String, u64>> {
    stored_keys_from(store, id, 0)
}

/// Returns the dedup keys of the events stored in `id` from seq `from` on,
/// each with its (first) seq.
fn stored_keys_from(store: &Store, id: &SessionId, from: u64) -> OpResult<HashMap<String, u64>> {
    let mut keys = HashMap::new();
    for line in store.lines(id, from, None)? {
        let line = line?;
        let event = line.decode().map_err(|e| StoreError::Corrupt {
            id: id.clone(),
            message: format!("seq {}: {e}", line.seq),
        })?;
        keys.entry(dedup_key(&event)).or_insert(line.seq);
    }
    Ok(keys)
}

/// Returns whether a session belongs to this repository: its cwd is
/// inside one of the repository's work trees, and not inside a nested
/// repository there (see [`owns`]).
fn inside(worktrees: &[PathBuf], session: &NativeSession) -> bool {
    session
        .cwd
        .as_deref()
        .is_some_and(|cwd| owns(worktrees, Path::new(cwd)))
}

/// Returns whether `cwd` belongs to this repository: a session belongs to
/// the innermost repository that contains its cwd. So `cwd` (with `.` and
/// `..` resolved lexically first: `<root>/../elsewhere` is not under
/// `<root>`) must be inside one of `worktrees` (the innermost one that
/// contains it, worktrees of this repository included), and no directory
/// between that work tree and `cwd`, `cwd` included, may hold a `.git` of
/// its own (a nested clone, a submodule, another repository's worktree):
/// a dotfiles repository at `~` does not collect every project's sessions.
pub(crate) fn owns(worktrees: &[PathBuf], cwd: &Path) -> bool {
    let Some(cwd) = super::resume::normalized(cwd).filter(|c| c.is_absolute()) else {
        return false;
    };
    let Some(tree) = worktrees
        .iter()
        .filter(|w| cwd.starts_with(w))
        .max_by_key(|w| w.components().count())
    else {
        return false;
    };
    let below = cwd.strip_prefix(tree).expect("starts_with was checked");
    let mut dir = tree.clone();
    for part in below.components() {
        dir.push(part);
        match std::fs::symlink_metadata(dir.join(".git")) {
            Ok(_) => return false,
            // A directory that is gone (or unreadable) has nothing below it.
            Err(_) if !dir.is_dir() => return true,
            Err(_) => {}
        }
    }
    true
}

/// Returns the identity (see [`dedup_key`]) of every event `adapter` reads
/// from the native file at `path`, in order, redacted by `scrubber` as a
/// capture would store them.
pub(crate) fn native_keys(
    adapter: &dyn Adapter,
    scrubber: Scrubber,
    path: &Path,
    rel: &str,
) -> OpResult<Vec<String>> {
    let reader = BlockReader {
        adapter,
        scrubber,
        path,
        rel,
        from: ReadPosition::default(),
        end: None,
        framed: matches!(
            crate::native::source_for(adapter, Path::new(rel)),
            Some(Source::ZstdJsonl { .. })
        ),
        first_seq: 0,
        writes: false,
    };
    Ok(read_keys(reader, None)?.0)
}

/// Runs `reader` and returns the keys of the events it parses, with what
/// [`BlockReader::run`] returns.
fn read_keys(
    reader: BlockReader<'_>,
    state: Option<Value>,
) -> OpResult<(Vec<String>, ReadPosition, Value)> {
    let scrubber = reader.scrubber;
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel(2);
        // Nothing is returned to the reader here: the keys are all we keep.
        let (_, spent_rx) = std::sync::mpsc::channel();
        let producer = scope.spawn(move || reader.run(state, tx, spent_rx));
        let keys: Vec<String> = rx
            .into_iter()
            .flat_map(|block: Block| block.events)
            .map(|mut e| dedup_key(e.scrubbed(scrubber).event()))
            .collect();
        let (pos, state, _, refused) = producer.join().expect("the block reader does not panic")?;
        if let Some(reason) = refused {
            return Err(OpError::Conflict {
                message: reason,
                hint: None,
            });
        }
        Ok((keys, pos, state))
    })
}

/// Returns what identifies an event across re-reads of its native file:
/// its origin (native id or position, and type, since one record can give
/// several events), or for events without one, a hash of type and body.
fn dedup_key(event: &Event) -> String {
    match &event.origin {
        Some(o) if keyed_by_origin(event) => format!(
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

/// Says whether [`dedup_key`] names `event` by its origin (its native id or
/// seq) rather than by its payload.
fn keyed_by_origin(event: &Event) -> bool {
    event
        .origin
        .as_ref()
        .is_some_and(|o| o.native_id.is_some() || o.native_seq.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader's share goes up when it finds the channel full, down
    /// when the writer finds it empty, and stays within 0 and its bound.
    #[test]
    fn the_side_that_waits_hands_the_other_work() {
        let balance = Balance::new(8, 12);
        let (tx, rx) = std::sync::mpsc::sync_channel::<u32>(1);
        assert!(balance.send(&tx, 1));
        assert_eq!(balance.share(), 8, "room in the channel: no step");
        std::thread::scope(|s| {
            let writer = s.spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                (rx.recv().ok(), rx.recv().ok())
            });
            assert!(
                balance.send(&tx, 2),
                "the channel was full: the reader waited"
            );
            assert_eq!(writer.join().expect("writer"), (Some(1), Some(2)));
        });
        assert_eq!(balance.share(), 12);
        balance.step(true);
        assert_eq!(balance.share(), 12, "bounded above");
        let (tx, rx) = std::sync::mpsc::sync_channel::<u32>(1);
        std::thread::scope(|s| {
            s.spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                tx.send(3).expect("send");
            });
            assert_eq!(balance.recv(&rx), Some(3), "the writer waited");
        });
        assert_eq!(balance.share(), 8);
        assert_eq!(balance.recv(&rx), None, "the reader is through");
        for _ in 0..5 {
            balance.step(false);
        }
        assert_eq!(balance.share(), 0, "bounded below");
    }
}
