//! Capture from a SQLite source: one database, many sessions.
//!
//! An unchanged database costs two `stat`s (the file and its `-wal`); one
//! whose files moved but whose sessions did not, one query (the adapter's
//! change query, [`crate::native::sqlite`]). A
//! changed one is read once, in one snapshot ([`crate::native::sqlite`]),
//! session by session (the reading thread at most [`SESSIONS_IN_FLIGHT`]
//! sessions ahead of the capture), and each
//! session with new rows becomes one batch: a new session of
//! this repository is created, a known one appended to, another project's
//! (by directory, and by the project column the adapter may declare: OpenCode
//! files sessions under the repository's root commit) remembered and
//! skipped from then on. Per session, the cursor keeps the
//! highest rowid of each append-only table handed to the adapter, so rows
//! read again after a failed capture are not appended twice, and a digest
//! of its whole-read rows (the session row), so a session whose row came
//! again unchanged costs nothing more.
//!
//! A new native session that continues another one (the adapter says so
//! with [`git_session_adapters::NativeParent::continues`], e.g. Hermes'
//! compression split) is appended to the canonical session its parent
//! feeds; sessions arrive in the session table's row order, so the parent
//! is known first. A parent this capture does not know leaves the child a
//! session of its own, with a warning.
//!
//! A new native session git-session wrote (`resume`, `handoff`: see
//! [`crate::ops::written`]) is not a new canonical session: its rows as
//! written are stored already, and only the agent's rows after them are
//! appended, to the session written from, a fork of it, or the handoff's
//! child ([`DbJob::continue_written`]).
//!
//! A JSON tree read as a database's rows ([`crate::native::tree`],
//! OpenCode's older `storage/`) goes through the same per-session capture
//! ([`DbJob::run_tree`]): its cursor is each file's stamp instead of table
//! marks, and it is read after the adapter's databases, so a session a
//! database also holds (the agent migrated it) is the database's alone.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Condvar, Mutex};

use git_session_adapters::source::{Database, Incremental, JsonTree, Row};
use git_session_adapters::{Adapter, ParseInput, Parsed, Records};
use git_session_schema::{Agent, SessionId};

use super::{
    Balance, CaptureReport, CaptureWarning, CapturedSession, Pending, SHARE_OF, SkippedFile,
    canonical_id, dedup_key, header_for, inside, seal_share, stored_keys, stored_keys_from,
};
use crate::clock::Clock;
use crate::native::cursor::{CursorIndex, FileState, RowSession, SeqMap};
use crate::native::sqlite::{self, is_whole, whole_digest};
use crate::ops::written::{Written, WrittenBy, WrittenRows};
use crate::ops::{OpError, OpResult};
use crate::store::{BatchSink, Scrubber, SeqMode, Store};

/// Names everything one database capture needs.
pub(super) struct DbJob<'a> {
    pub store: &'a Store,
    pub clock: &'a Clock,
    pub adapter: &'a dyn Adapter,
    pub decl: &'static Database,
    pub agent: &'a Agent,
    pub abs: &'a Path,
    pub rel: &'a str,
    /// The source's key in the cursors and the record of written sessions:
    /// its absolute path, so databases under the same relative path in two
    /// agent homes (`--home`) are never taken for one another.
    pub key: &'a str,
    pub worktrees: &'a [std::path::PathBuf],
    pub cursors: &'a mut CursorIndex,
    pub report: &'a mut CaptureReport,
    /// The native sessions git-session wrote for this agent.
    pub written: &'a Written,
    pub options: sqlite::Options,
    /// This repository's root commit, asked for once when a new session's
    /// project is checked ([`DbJob::same_project`]).
    pub root: Option<Option<String>>,
    /// What the last session's capture is through with, to be freed on
    /// the reading thread.
    pub spent: Option<Spent>,
    /// Set when the source is a JSON tree read as `decl`'s rows
    /// ([`DbJob::run_tree`]); `abs` is then the tree's directory.
    pub tree: Option<&'static JsonTree>,
}

/// Sessions the reading thread may hand over ahead of the capture, at
/// most (see [`DbJob::run`]).
const SESSIONS_IN_FLIGHT: usize = 6;

/// Bytes of rows the sessions handed over ahead may hold together; one
/// session is always let through, however long.
const ROWS_IN_FLIGHT: usize = 4 << 20;

/// One session as the reading thread hands it over: its rows and, for a
/// session the cursor does not know yet, the parse of its first batch.
struct Prepared {
    rows: sqlite::SessionRows,
    probe: Option<Probe>,
    /// Its rows' bytes, counted in [`InFlight`].
    bytes: usize,
}

/// The bytes of rows handed to the capture and not taken by it yet.
#[derive(Default)]
struct InFlight {
    held: Mutex<Held>,
    taken: Condvar,
}

#[derive(Default)]
struct Held {
    bytes: usize,
    /// The capture takes no more (it is through, or it panicked).
    closed: bool,
}

impl InFlight {
    /// Counts `bytes` more in flight, first waiting until they fit in
    /// [`ROWS_IN_FLIGHT`] or nothing is in flight (or the capture takes no
    /// more); says whether it waited.
    fn add(&self, bytes: usize) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mut waited = false;
        while !held.closed && held.bytes > 0 && held.bytes + bytes > ROWS_IN_FLIGHT {
            waited = true;
            held = self.taken.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        held.bytes += bytes;
        waited
    }

    /// Counts `bytes` as taken by the capture.
    fn take(&self, bytes: usize) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.bytes = held.bytes.saturating_sub(bytes);
        self.taken.notify_one();
    }

    /// Says the capture takes no more, so the reader waits no longer.
    fn close(&self) {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.taken.notify_all();
    }
}

/// Closes an [`InFlight`] when the capture's loop ends, by unwinding too
/// (a reader left waiting would keep the thread scope from ending).
struct CloseOnDrop<'a>(&'a InFlight);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A new session's first parse (from seq 0, no state: what
/// [`DbJob::session_rows`] would make of the same rows), made on the
/// reading thread; when the session belongs to this repository, its
/// events are sealed there already (see [`super::seal_share`]).
pub(super) struct Probe {
    parsed: Parsed,
    events: Vec<Pending>,
}

impl Probe {
    fn parse(
        adapter: &dyn Adapter,
        rel: &str,
        scrubber: Scrubber,
        worktrees: &[std::path::PathBuf],
        s: &sqlite::SessionRows,
    ) -> Probe {
        let parsed = adapter.parse(ParseInput {
            records: Records::Rows(&s.rows),
            next_seq: 0,
            state: None,
            source: rel,
            session: Some(&s.key),
            sidecar: None,
            memo: Default::default(),
        });
        // Another project's session is never stored: nothing to redact.
        let ours = inside(worktrees, &parsed.session);
        Probe::of(parsed, if ours { SHARE_OF } else { 0 }, scrubber)
    }

    /// Takes the events out of `parsed`, redacting `share` of every
    /// [`SHARE_OF`].
    fn of(mut parsed: Parsed, share: u32, scrubber: Scrubber) -> Probe {
        let events = seal_share(parsed.events.drain(..), share, true, scrubber);
        Probe { parsed, events }
    }
}

/// What a session's capture is through with: freed where it was made.
pub(super) struct Spent {
    _rows: Vec<Row>,
    _events: Vec<Pending>,
}

impl DbJob<'_> {
    /// Captures what is new in the database. A database that cannot be read
    /// (locked past the wait, corrupt, unknown schema) is reported in
    /// [`CaptureReport::skipped_sources`] and its cursor left as it was.
    pub fn run(&mut self) -> OpResult<()> {
        if let Some(tree) = self.tree {
            return self.run_tree(tree);
        }
        let (db_stamp, wal_stamp) = sqlite::stamps(self.abs);
        let mut cursor = self.cursor();
        if cursor.db == db_stamp && cursor.wal == wal_stamp {
            self.report.unchanged += cursor
                .sessions
                .values()
                .filter(|s| s.session.is_some())
                .count();
            return Ok(());
        }
        let known = cursor.sessions.clone();
        let mut sessions = cursor.sessions.clone();
        let mut failed = false;
        let (abs, decl, options) = (self.abs, self.decl, self.options);
        let (adapter, rel, worktrees) = (self.adapter, self.rel, self.worktrees);
        let scrubber = self.store.scrubber();
        let scope = sqlite::Scope {
            marks: &cursor.tables,
            known: &known,
            only: None,
        };
        // The database is read on a second thread, ahead of the capture
        // here, and a share of the new sessions is parsed and sealed there
        // too (see [`Prepared`]): the two halves of a capture share the
        // machine's cores, as a file's do. At most
        // [`SESSIONS_IN_FLIGHT`] sessions holding [`ROWS_IN_FLIGHT`] bytes
        // of rows wait for the capture (any one session gets through):
        // enough that the reader goes on while the capture here writes a
        // pack and publishes its refs (with two, the reader waited there
        // about a third of an OpenCode first import).
        // The reader's share, moved by whichever thread waits for the
        // other: how many of every `SHARE_OF` new sessions it parses and
        // seals; the writer parses and seals the others. Each side seals
        // what it parsed, while the session's trees are in its cache (a
        // share of events redacted by the writer after the reader parsed
        // them cost 1.03x the wall time and 4 MB more).
        let balance = Balance::new(SHARE_OF / 2, SHARE_OF);
        let in_flight = &InFlight::default();
        let read = std::thread::scope(|threads| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Prepared>(SESSIONS_IN_FLIGHT);
            // What the capture is through with goes back to be freed on the
            // thread that allocated it (see `super::FileJob::feed`).
            let (spent_tx, spent_rx) = std::sync::mpsc::channel::<Spent>();
            let (known, balance) = (&known, &balance);
            let reader = threads.spawn(move || {
                let mut due = 0;
                let mut visit = |s: sqlite::SessionRows| {
                    let now = balance.share();
                    due += now.min(SHARE_OF);
                    let here = due >= SHARE_OF;
                    if here {
                        due -= SHARE_OF;
                    }
                    let probe = (here && !known.contains_key(&s.key))
                        .then(|| Probe::parse(adapter, rel, scrubber, worktrees, &s));
                    let bytes = s.rows.iter().map(|r| r.json.len()).sum();
                    if in_flight.add(bytes) {
                        balance.reader_waited();
                    }
                    balance.send(
                        &tx,
                        Prepared {
                            rows: s,
                            probe,
                            bytes,
                        },
                    );
                    while let Ok(done) = spent_rx.try_recv() {
                        drop(done);
                    }
                };
                let read = sqlite::read(abs, decl, scope, &options, &mut visit);
                drop(tx);
                for done in spent_rx.iter() {
                    drop(done);
                }
                read
            });
            let _closing = CloseOnDrop(in_flight);
            while let Some(Prepared {
                rows: s,
                probe,
                bytes,
            }) = balance.recv(&rx)
            {
                in_flight.take(bytes);
                let key = s.key.clone();
                let entry = sessions.get(&key).cloned();
                match self.session(s, entry, &sessions, probe) {
                    Ok(Some(next)) => {
                        sessions.insert(key, next);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        failed = true;
                        self.report.skipped.push(SkippedFile {
                            path: abs.to_owned(),
                            reason: format!("session {key}: {e}"),
                        });
                    }
                }
                if let Some(done) = self.spent.take() {
                    let _ = spent_tx.send(done);
                }
            }
            drop(spent_tx);
            reader.join().expect("the database reader does not panic")
        });
        let snapshot = match read {
            Ok(s) => {
                self.report.queries += s.queries;
                self.report.unchanged += s.unchanged;
                s
            }
            Err(e) => {
                // What was captured before the error stays captured; the
                // database's marks and stamps stay, so the next capture
                // reads the rest.
                cursor.sessions = sessions;
                self.cursors.databases.insert(self.key.to_owned(), cursor);
                self.report.skipped_sources.push(SkippedFile {
                    path: self.abs.to_owned(),
                    reason: source_reason(e),
                });
                return Ok(());
            }
        };
        cursor.sessions = sessions;
        for w in &snapshot.warnings {
            self.report.warnings.push(CaptureWarning {
                path: self.abs.to_owned(),
                line: 0,
                message: w.clone(),
            });
        }
        if !failed {
            // Everything read was handed over: the next read starts after it.
            for (table, mark) in snapshot.marks {
                cursor.tables.insert(table, mark);
            }
            cursor.db = db_stamp;
            cursor.wal = wal_stamp;
        }
        self.cursors.databases.insert(self.key.to_owned(), cursor);
        Ok(())
    }

    /// Returns this source's cursor as last kept (empty when new).
    fn cursor(&self) -> crate::native::cursor::DbCursor {
        self.cursors
            .databases
            .get(self.key)
            .cloned()
            .unwrap_or_default()
    }

    /// Captures what is new in a JSON tree ([`crate::native::tree`]),
    /// session by session, as database rows. A session the agent's
    /// database also holds is left to the database (the agent migrated
    /// it; its database sources are captured first, and their cursors
    /// name every session they hold). A file's stamp is kept once its
    /// session's rows are captured, so a failed session is read again.
    fn run_tree(&mut self, tree: &'static JsonTree) -> OpResult<()> {
        let mut cursor = self.cursor();
        let in_database: std::collections::HashSet<String> = self
            .cursors
            .databases
            .iter()
            .filter(|(db, _)| {
                db.as_str() != self.key && Path::new(db.as_str()).parent() == self.abs.parent()
            })
            .flat_map(|(_, c)| c.sessions.keys().cloned())
            .collect();
        let known = cursor.sessions.clone();
        let mut sessions = cursor.sessions.clone();
        let skip = |key: &str| {
            in_database.contains(key) || known.get(key).is_some_and(|s| s.session.is_none())
        };
        let abs = self.abs.to_owned();
        let mut files = cursor.files.clone();
        let read = crate::native::tree::read(
            &abs,
            tree,
            &cursor.files,
            &skip,
            None,
            &mut |s: crate::native::tree::TreeSession| {
                let key = s.rows.key.clone();
                let entry = sessions.get(&key).cloned();
                match self.session(s.rows, entry, &sessions, None) {
                    Ok(next) => {
                        let ours = next
                            .as_ref()
                            .or(sessions.get(&key))
                            .is_some_and(|n| n.session.is_some());
                        if let Some(next) = next {
                            sessions.insert(key, next);
                        }
                        if ours {
                            files.extend(s.stamps);
                        }
                    }
                    Err(e) => self.report.skipped.push(SkippedFile {
                        path: abs.clone(),
                        reason: format!("session {key}: {e}"),
                    }),
                }
            },
        );
        self.report.unchanged += read
            .unchanged
            .iter()
            .filter(|k| known.get(*k).is_some_and(|s| s.session.is_some()))
            .count();
        for w in read.warnings {
            self.report.warnings.push(CaptureWarning {
                path: self.abs.to_owned(),
                line: 0,
                message: w,
            });
        }
        cursor.sessions = sessions;
        cursor.files = files;
        self.cursors.databases.insert(self.key.to_owned(), cursor);
        Ok(())
    }

    /// Returns every row of one session, read afresh (a lost cursor).
    fn all_rows(&self, key: &str) -> OpResult<Vec<Row>> {
        if let Some(tree) = self.tree {
            let mut rows = Vec::new();
            crate::native::tree::read(
                self.abs,
                tree,
                &BTreeMap::new(),
                &|_| false,
                Some(key),
                &mut |s| rows = s.rows.rows,
            );
            return Ok(rows);
        }
        let scope = sqlite::Scope {
            marks: &BTreeMap::new(),
            known: &BTreeMap::new(),
            only: Some(key),
        };
        Ok(sqlite::read_all(self.abs, self.decl, scope, &self.options)
            .map_err(OpError::from)?
            .1
            .into_iter()
            .find(|s| s.key == key)
            .map(|s| s.rows)
            .unwrap_or_default())
    }

    /// Captures one session's new rows; returns its new cursor entry.
    fn session(
        &mut self,
        read: sqlite::SessionRows,
        entry: Option<RowSession>,
        known: &BTreeMap<String, RowSession>,
        probe: Option<Probe>,
    ) -> OpResult<Option<RowSession>> {
        let sqlite::SessionRows {
            key,
            rows,
            token,
            highs,
        } = read;
        let next = self.session_rows(&key, rows, entry.clone(), known, probe)?;
        if token.is_none() && highs.is_empty() {
            return Ok(next);
        }
        // Everything read of the session was handed over: remember its
        // change token and its own marks, even when nothing was new.
        let Some(mut next) = next.or(entry) else {
            return Ok(None);
        };
        for (table, high) in highs {
            let m = next.seen.entry(table).or_insert(high);
            *m = (*m).max(high);
        }
        if token.is_some() {
            next.token = token;
        }
        Ok(Some(next))
    }

    /// Captures one session's new rows (see [`DbJob::session`]).
    fn session_rows(
        &mut self,
        key: &str,
        rows: Vec<Row>,
        entry: Option<RowSession>,
        known: &BTreeMap<String, RowSession>,
        probe: Option<Probe>,
    ) -> OpResult<Option<RowSession>> {
        let state_key = format!("{}#{key}", self.key);
        // The reading thread's parse is of the rows as read: it stands for
        // a session the cursor does not know only.
        let probe = probe.filter(|_| entry.is_none());
        let rows = match &entry {
            Some(e) => fresh_rows(self.decl, rows, &e.seen),
            None => rows,
        };
        if rows.is_empty() {
            return Ok(None);
        }
        let whole = whole_digest(self.decl, &rows);
        if let Some(e) = &entry
            && e.session.is_some()
            && whole.is_some()
            && e.whole == whole
            && rows.iter().all(|r| is_whole(self.decl, r.table))
        {
            // Only the session row came again, as it was: nothing to parse.
            self.report.unchanged += 1;
            return Ok(None);
        }
        let seen = seen_marks(self.decl, &rows, entry.as_ref().map(|e| &e.seen));
        let info = super::commit_info(self.store, self.clock);
        let (id, stored_events) = match entry.as_ref().and_then(|e| e.session.clone()) {
            Some(id) => {
                let id = session_id(&id)?;
                (
                    id.clone(),
                    self.store
                        .tip(&id)?
                        .map(|_| self.store.stat(&id))
                        .transpose()?,
                )
            }
            None => {
                // A new session: its facts decide whether it is ours. The
                // reading thread parsed it already (the same rows, from
                // seq 0, no state) unless it was known when the read began.
                let mut probe = probe.unwrap_or_else(|| {
                    Probe::of(self.parse(key, &rows, 0, None), 0, self.store.scrubber())
                });
                if !inside(self.worktrees, &probe.parsed.session) || !self.same_project(key, &rows)
                {
                    return Ok(Some(RowSession {
                        session: None,
                        events: 0,
                        seen,
                        ..RowSession::default()
                    }));
                }
                // A session git-session wrote: only the agent's rows are new.
                if let Some(w) = self.written.lookup_rows(self.abs, key).cloned()
                    && let Ok(parent) = SessionId::new(w.session.as_str())
                    && self.store.tip(&parent)?.is_some()
                {
                    drop(probe);
                    return self.continue_written(key, &w, &parent);
                }
                if let Some(parent) = probe.parsed.session.parent.as_ref().filter(|p| p.continues) {
                    match known.get(&parent.native_id).and_then(|p| p.session.clone()) {
                        Some(target) => {
                            return self.continuation(key, rows, &session_id(&target)?, seen, whole);
                        }
                        None => self.report.warnings.push(CaptureWarning {
                            path: self.abs.to_owned(),
                            line: 0,
                            message: format!(
                                "session {key} continues {}, which is not a captured session of this repository; captured as a session of its own",
                                parent.native_id
                            ),
                        }),
                    }
                }
                let native = probe
                    .parsed
                    .session
                    .native_id
                    .clone()
                    .unwrap_or_else(|| key.to_owned());
                let id = canonical_id(self.agent, &native);
                let stored = self
                    .store
                    .tip(&id)?
                    .map(|_| self.store.stat(&id))
                    .transpose()?;
                if stored.is_none() {
                    let header = header_for(self.clock, self.agent, &id, &probe.parsed.session);
                    // The probe is the first batch (both from seq 0). A
                    // retried batch pushes the same events again: they are
                    // sealed in place, and sealing them again gives the same
                    // seqs and checksums.
                    let outcome = self.store.create(
                        &header,
                        SeqMode::Exact,
                        &info,
                        |sink: &mut BatchSink<'_>| {
                            push_pending(sink, &probe.parsed.artifacts, &mut probe.events)
                        },
                    )?;
                    let Probe { parsed, events } = probe;
                    self.spent = Some(Spent {
                        _rows: rows,
                        _events: events,
                    });
                    return self.finish(&id, true, &state_key, parsed, outcome, (seen, whole));
                }
                (id, stored)
            }
        };
        let stored = stored_events.ok_or_else(|| OpError::Conflict {
            message: format!(
                "session {id} was captured from {} but is gone from the store",
                self.rel
            ),
            hint: Some("delete .git/session/capture to capture it again".into()),
        })?;
        if entry.as_ref().is_some_and(|e| e.mapped) {
            return self.mapped_rows(key, &id, rows, (seen, whole));
        }
        let incremental = entry
            .as_ref()
            .is_some_and(|e| e.session.is_some() && e.events == stored.events);
        let mut parsed = None;
        let outcome = if incremental {
            let state = self.cursors.load_state(&state_key);
            self.store
                .append(&id, SeqMode::Exact, &info, |sink: &mut BatchSink<'_>| {
                    let p = self.parse(key, &rows, sink.next_seq(), state.clone());
                    push(sink, &p, None)?;
                    parsed = Some(p);
                    Ok::<_, OpError>(())
                })?
        } else {
            // Cursor lost or the log moved: read the whole session again and
            // keep only what is not stored yet.
            let all = self.all_rows(key)?;
            let seen_all = seen_marks(self.decl, &all, None);
            let keys = stored_keys(self.store, &id)?;
            let outcome =
                self.store
                    .append(&id, SeqMode::Assign, &info, |sink: &mut BatchSink<'_>| {
                        let p = self.parse(key, &all, 0, None);
                        push(sink, &p, Some(&keys))?;
                        parsed = Some(p);
                        Ok::<_, OpError>(())
                    })?;
            let parsed = parsed.take().expect("the producer ran");
            let whole_all = whole_digest(self.decl, &all);
            return self.finish(
                &id,
                false,
                &state_key,
                parsed,
                outcome,
                (seen_all, whole_all),
            );
        };
        let parsed = parsed.expect("the producer ran");
        self.finish(&id, false, &state_key, parsed, outcome, (seen, whole))
    }

    /// Captures a database session git-session wrote, seen for the first
    /// time (see [`crate::ops::written`]): its rows as written are stored
    /// already, so only the agent's are appended: to the session written
    /// from, to a fork of it when that session moved on since (a resume),
    /// or to the child forked at the handoff, as a file's continuation is
    /// (`FileJob::continue_written`). From then on the session's parse
    /// numbers its events from 0 and its state maps them to stored seqs
    /// ([`RowSession::mapped`]).
    ///
    /// A resumed session the agent added nothing to yet is waited for
    /// (nothing kept, read again next time) when its session moved on, and
    /// taken as the session's continuation otherwise. The session row is
    /// counted as written: what the agent changed in it before this first
    /// capture (its counters, a title) is not reported as a change.
    fn continue_written(
        &mut self,
        key: &str,
        w: &WrittenRows,
        parent: &SessionId,
    ) -> OpResult<Option<RowSession>> {
        let state_key = format!("{}#{key}", self.key);
        let all = self.all_rows(key)?;
        let seen = seen_marks(self.decl, &all, None);
        let whole = whole_digest(self.decl, &all);
        let (ours, theirs): (Vec<Row>, Vec<Row>) =
            all.into_iter().partition(|r| w.wrote(self.decl, r));
        let written = self.parse(key, &ours, 0, None);
        drop(ours);
        let added = self.parse(
            key,
            &theirs,
            written.events.len() as u64,
            Some(written.state.clone()),
        );
        let scrubber = self.store.scrubber();
        let key_of = |e: &git_session_schema::Event| dedup_key(scrubber.seal(e.clone()).event());
        let stat = self.store.stat(parent)?;
        let id = match w.by {
            WrittenBy::Resume if stat.events == w.seq + 1 => parent.clone(),
            WrittenBy::Resume if added.events.is_empty() => return Ok(None),
            // Moved on, unless by this very continuation (captured before,
            // its cursor since lost).
            WrittenBy::Resume
                if stored_keys_from(self.store, parent, w.seq + 1)?
                    .contains_key(&key_of(&added.events[0])) =>
            {
                parent.clone()
            }
            WrittenBy::Resume => super::derived_fork_id(parent, &w.native_id, &w.stamp()),
            WrittenBy::Handoff => canonical_id(self.agent, &w.native_id),
        };
        let info = super::commit_info(self.store, self.clock);
        let created = self.store.tip(&id)?.is_none();
        if created {
            // A handoff's child, or the fork of a resume, is this agent's.
            let agent = self.agent.clone();
            let native_id = w.native_id.clone();
            let shape = move |h: &mut git_session_schema::SessionHeader| {
                h.agent = agent.clone();
                h.native_id = Some(native_id.clone());
            };
            self.store
                .fork_as(parent, w.seq, &id, &self.clock.now_rfc3339(), &info, &shape)?;
        }
        let keys = stored_keys(self.store, &id)?;
        let mut seqs = SeqMap::default();
        let outcome =
            self.store
                .append(&id, SeqMode::Assign, &info, |sink: &mut BatchSink<'_>| {
                    seqs = SeqMap::default();
                    // What was written maps to the stored event it came from,
                    // else to the last one written, so the agent's rows point at
                    // stored parents.
                    for e in &written.events {
                        seqs.push(keys.get(&key_of(e)).copied().unwrap_or(w.seq));
                    }
                    push_mapped(sink, &added, &mut seqs, Some(&keys))
                })?;
        let mut parsed = added;
        parsed.warnings.splice(0..0, written.warnings);
        self.finish_mapped(
            &id,
            created,
            &state_key,
            parsed,
            seqs,
            outcome,
            (seen, whole),
        )
    }

    /// Captures the new rows of a session [`DbJob::continue_written`]
    /// took: parsed on from the saved state, numbered as its parse numbers
    /// them, stored through its seq map.
    fn mapped_rows(
        &mut self,
        key: &str,
        id: &SessionId,
        rows: Vec<Row>,
        marks: (BTreeMap<String, i64>, Option<String>),
    ) -> OpResult<Option<RowSession>> {
        let state_key = format!("{}#{key}", self.key);
        let Some(state) = self.cursors.load_state::<FileState>(&state_key) else {
            // The state is gone (the cursor kept): take the session from
            // what was written again; its events already stored are known.
            let w = self.written.lookup_rows(self.abs, key).cloned();
            let parent = w
                .as_ref()
                .and_then(|w| SessionId::new(w.session.as_str()).ok());
            return match (w, parent) {
                (Some(w), Some(parent)) if self.store.tip(&parent)?.is_some() => {
                    self.continue_written(key, &w, &parent)
                }
                _ => Err(OpError::Conflict {
                    message: format!("the capture state of session {key} is gone"),
                    hint: Some("delete .git/session/capture to capture it again".into()),
                }),
            };
        };
        let info = super::commit_info(self.store, self.clock);
        let FileState { adapter, mut seqs } = state;
        let mut parsed = None;
        let outcome =
            self.store
                .append(id, SeqMode::Assign, &info, |sink: &mut BatchSink<'_>| {
                    let p = self.parse(key, &rows, seqs.len(), Some(adapter.clone()));
                    let mut run = seqs.clone();
                    push_mapped(sink, &p, &mut run, None)?;
                    parsed = Some((p, run));
                    Ok::<_, OpError>(())
                })?;
        let (parsed, run) = parsed.expect("the producer ran");
        seqs = run;
        self.finish_mapped(id, false, &state_key, parsed, seqs, outcome, marks)
    }

    /// [`DbJob::finish`] for a mapped session: its state keeps the seq map.
    #[allow(clippy::too_many_arguments)]
    fn finish_mapped(
        &mut self,
        id: &SessionId,
        created: bool,
        state_key: &str,
        mut parsed: Parsed,
        seqs: SeqMap,
        outcome: crate::store::AppendOutcome,
        marks: (BTreeMap<String, i64>, Option<String>),
    ) -> OpResult<Option<RowSession>> {
        parsed.state = serde_json::to_value(FileState {
            adapter: std::mem::take(&mut parsed.state),
            seqs,
        })
        .expect("a parse state serializes");
        let mut next = self.finish(id, created, state_key, parsed, outcome, marks)?;
        if let Some(n) = next.as_mut() {
            n.mapped = true;
        }
        Ok(next)
    }

    /// Appends a new native session that continues another one (see
    /// [`git_session_adapters::NativeParent::continues`]) to the canonical
    /// session its parent feeds, after what is stored.
    fn continuation(
        &mut self,
        key: &str,
        rows: Vec<Row>,
        id: &SessionId,
        seen: BTreeMap<String, i64>,
        whole: Option<String>,
    ) -> OpResult<Option<RowSession>> {
        let state_key = format!("{}#{key}", self.key);
        let info = super::commit_info(self.store, self.clock);
        if self.store.tip(id)?.is_none() {
            return Err(OpError::Conflict {
                message: format!("session {key} continues {id}, which is gone from the store"),
                hint: Some("delete .git/session/capture to capture it again".into()),
            });
        }
        // Rows of the continuation may already be stored (a cursor lost
        // after an earlier capture): origins tell them apart.
        let keys = stored_keys(self.store, id)?;
        let mut parsed = None;
        let outcome = self.store.append(
            id,
            SeqMode::Exact,
            &info,
            |sink: &mut BatchSink<'_>| {
                let p = self.parse(key, &rows, sink.next_seq(), None);
                let scrubber = sink.scrubber();
                if p.events
                    .iter()
                    .any(|e| keys.contains_key(&dedup_key(scrubber.seal(e.clone()).event())))
                {
                    return Err(OpError::Conflict {
                        message: format!(
                            "session {key} is already partly stored in {id}; its cursor was lost"
                        ),
                        hint: Some("delete .git/session/capture and capture again".into()),
                    });
                }
                push(sink, &p, None)?;
                parsed = Some(p);
                Ok::<_, OpError>(())
            },
        )?;
        let parsed = parsed.expect("the producer ran");
        self.finish(id, false, &state_key, parsed, outcome, (seen, whole))
    }

    /// Says whether a new session whose directory belongs to this
    /// repository is filed under it by the agent, when the adapter declares
    /// the column ([`Database::project`]): its value must be this
    /// repository's root commit or the agent's "no commit yet" value. A
    /// session filed under another project is reported and skipped.
    fn same_project(&mut self, key: &str, rows: &[Row]) -> bool {
        let Some(project) = self.decl.project else {
            return true;
        };
        let session_table = self.decl.tables[0].name;
        let value = rows
            .iter()
            .find(|r| r.table == session_table)
            .and_then(|r| serde_json::from_slice::<serde_json::Value>(&r.json).ok())
            .and_then(|v| v.get(project.column)?.as_str().map(str::to_owned));
        let root = self.root.get_or_insert_with(|| self.store.root_commit());
        if value
            .as_deref()
            .is_some_and(|v| v == project.unbound || Some(v) == root.as_deref())
        {
            return true;
        }
        self.report.warnings.push(CaptureWarning {
            path: self.abs.to_owned(),
            line: 0,
            message: format!(
                "session {key} ran in this repository but is filed under project {}, not this repository's ({}); skipped",
                value.as_deref().unwrap_or("(none)"),
                root.as_deref().map_or_else(
                    || format!("no commit yet: {}", project.unbound),
                    |r| format!("root commit {r}")
                ),
            ),
        });
        false
    }

    fn parse(
        &self,
        key: &str,
        rows: &[Row],
        next_seq: u64,
        state: Option<serde_json::Value>,
    ) -> Parsed {
        self.adapter.parse(ParseInput {
            records: Records::Rows(rows),
            next_seq,
            state,
            source: self.rel,
            session: Some(key),
            sidecar: None,
            memo: Default::default(),
        })
    }

    fn finish(
        &mut self,
        id: &SessionId,
        created: bool,
        state_key: &str,
        parsed: Parsed,
        outcome: crate::store::AppendOutcome,
        (seen, whole): (BTreeMap<String, i64>, Option<String>),
    ) -> OpResult<Option<RowSession>> {
        for w in &parsed.warnings {
            self.report.warnings.push(CaptureWarning {
                path: self.abs.to_owned(),
                line: w.line,
                message: w.message.clone(),
            });
        }
        self.cursors.save_state(state_key, &parsed.state)?;
        super::write_states(self.store, self.cursors)?;
        let appended = outcome.seq.map_or(0, |(a, b)| b - a + 1);
        // A fork made with nothing of its own yet (a handoff's child) is
        // new all the same.
        if outcome.commit.is_some() || created {
            self.report.sessions.push(CapturedSession {
                id: id.clone(),
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
        Ok(Some(RowSession {
            session: Some(id.to_string()),
            events: outcome.events,
            seen,
            whole,
            ..RowSession::default()
        }))
    }
}

/// Pushes a parse's artifacts and events, redacted by the store's
/// scrubber, leaving out events whose key (taken after redaction, as the
/// stored ones were) is in `skip`.
fn push(
    sink: &mut BatchSink<'_>,
    parsed: &Parsed,
    skip: Option<&HashMap<String, u64>>,
) -> OpResult<()> {
    for (_, bytes) in &parsed.artifacts {
        sink.add_artifact(bytes)?;
    }
    let scrubber = sink.scrubber();
    for event in &parsed.events {
        let mut event = scrubber.seal(event.clone());
        if skip.is_some_and(|s| s.contains_key(&dedup_key(event.event()))) {
            continue;
        }
        sink.push_scrubbed(&mut event)?;
    }
    Ok(())
}

/// Pushes a parse numbered from `seqs.len()` on (a mapped session's, see
/// [`RowSession::mapped`]): each event is stored with its parent mapped
/// through `seqs`, and `seqs` extended; an event whose key `skip` holds is
/// not stored again but mapped to the stored one.
fn push_mapped(
    sink: &mut BatchSink<'_>,
    parsed: &Parsed,
    seqs: &mut SeqMap,
    skip: Option<&HashMap<String, u64>>,
) -> OpResult<()> {
    for (_, bytes) in &parsed.artifacts {
        sink.add_artifact(bytes)?;
    }
    let scrubber = sink.scrubber();
    for event in &parsed.events {
        let mut event = scrubber.seal(event.clone());
        if let Some(seq) = skip.and_then(|s| s.get(&dedup_key(event.event())).copied()) {
            seqs.push(seq);
            continue;
        }
        let parent = event.event().parent_seq.and_then(|p| seqs.get(p));
        event.relink(parent);
        let seq = sink.push_scrubbed(&mut event)?;
        seqs.push(seq);
    }
    Ok(())
}

/// Pushes a parse's artifacts and its events, redacting those not yet
/// redacted (see [`Pending`]).
fn push_pending(
    sink: &mut BatchSink<'_>,
    artifacts: &[(git_session_schema::ArtifactId, Vec<u8>)],
    events: &mut [Pending],
) -> OpResult<()> {
    for (_, bytes) in artifacts {
        sink.add_artifact(bytes)?;
    }
    let scrubber = sink.scrubber();
    for event in events {
        sink.push_scrubbed(event.scrubbed(scrubber))?;
    }
    Ok(())
}

/// Drops rows of append-only tables this session was already given.
fn fresh_rows(decl: &Database, rows: Vec<Row>, seen: &BTreeMap<String, i64>) -> Vec<Row> {
    rows.into_iter()
        .filter(|r| {
            let append_only = decl
                .tables
                .iter()
                .any(|t| t.name == r.table && t.incremental == Incremental::RowId);
            !append_only || seen.get(r.table).is_none_or(|&m| r.rowid > m)
        })
        .collect()
}

/// Returns the highest rowid per append-only table among `rows` and `prev`.
fn seen_marks(
    decl: &Database,
    rows: &[Row],
    prev: Option<&BTreeMap<String, i64>>,
) -> BTreeMap<String, i64> {
    let mut out = prev.cloned().unwrap_or_default();
    for r in rows {
        if decl
            .tables
            .iter()
            .any(|t| t.name == r.table && t.incremental == Incremental::RowId)
        {
            let m = out.entry(r.table.to_owned()).or_insert(r.rowid);
            *m = (*m).max(r.rowid);
        }
    }
    out
}

fn session_id(text: &str) -> OpResult<SessionId> {
    SessionId::new(text).map_err(|e| OpError::Conflict {
        message: e.to_string(),
        hint: None,
    })
}

/// Returns the reason a source was skipped, for the report.
fn source_reason(e: crate::native::NativeError) -> String {
    match e {
        crate::native::NativeError::Source { message, .. } => message,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_in_flight_wait_for_room_but_one_session_always_gets_through() {
        let in_flight = InFlight::default();
        // One session longer than the whole bound goes through alone.
        assert!(!in_flight.add(ROWS_IN_FLIGHT * 3));
        in_flight.take(ROWS_IN_FLIGHT * 3);
        // Sessions that fit together do not wait.
        assert!(!in_flight.add(ROWS_IN_FLIGHT / 2));
        assert!(!in_flight.add(ROWS_IN_FLIGHT / 2));
        // One more waits until the capture takes one.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| tx.send(in_flight.add(1)).unwrap());
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(rx.try_recv().is_err(), "added past the bound");
            in_flight.take(ROWS_IN_FLIGHT / 2);
            assert!(rx.recv().unwrap(), "the wait is reported");
        });
        assert_eq!(in_flight.held.lock().unwrap().bytes, ROWS_IN_FLIGHT / 2 + 1);
        // A capture that ends (or unwinds) while the reader waits lets it go.
        std::thread::scope(|s| {
            let reader = s.spawn(|| in_flight.add(ROWS_IN_FLIGHT));
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!reader.is_finished(), "added past the bound");
            drop(CloseOnDrop(&in_flight));
            assert!(reader.join().unwrap());
        });
    }
}
