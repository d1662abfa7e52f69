//! Capture from a database that holds many sessions (OpenCode's
//! `opencode.db`): the database half of [`super::capture`].
//!
//! An unchanged database (same stamps for the file and its `-wal`) costs
//! two `stat`s and no query. Otherwise one read-only snapshot returns every
//! session's change token and the rows of the sessions whose token moved
//! ([`crate::native::sqlite`]); each such session is parsed with the
//! adapter state kept for it, and appended as one batch. A session is this
//! repository's when its `cwd` is inside one of its work trees; others are
//! remembered as foreign, cheaply. When a session's state is lost, or its
//! log grew elsewhere, its rows are parsed afresh and reconciled by origin,
//! so nothing is appended twice. Nothing is ever written to the database.

use git_session_adapters::source::{Database, Records, Source};
use git_session_adapters::{Adapter, ParseInput};
use git_session_schema::{Agent, SessionId};

use super::canonical::commit_info;
use super::capture::{
    CaptureReport, CaptureWarning, CapturedSession, canonical_id, dedup_key, session_header,
    stored_keys,
};
use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::native::cursor::{CursorIndex, RowSession};
use crate::store::{BatchSink, SeqMode, Store};

/// Returns the database declaration `rel` (relative to the store root)
/// is a file of, if it is one.
pub(crate) fn database_of(adapter: &dyn Adapter, rel: &str) -> Option<&'static Database> {
    let rel = rel.replace('\\', "/");
    adapter.spec().sources.iter().find_map(|s| match s {
        Source::Sqlite(db)
            if db
                .files
                .iter()
                .any(|g| git_session_adapters::source::glob_match(g, &rel)) =>
        {
            Some(*db)
        }
        _ => None,
    })
}

/// Captures the sessions of one database.
pub(crate) struct DbJob<'a> {
    pub store: &'a Store,
    pub clock: &'a Clock,
    pub adapter: &'a dyn Adapter,
    /// Set when secrets are to be redacted; built on first use.
    pub redactor: Option<&'a std::sync::OnceLock<crate::redact::Redactor>>,
    pub agent: &'a Agent,
    pub db: &'static Database,
    pub abs: &'a std::path::Path,
    pub rel: &'a str,
    pub worktrees: &'a [std::path::PathBuf],
    pub cursors: &'a mut CursorIndex,
    pub report: &'a mut CaptureReport,
}

impl DbJob<'_> {
    pub fn run(&mut self) -> OpResult<()> {
        // Stamps before the read: a change during it is read next time.
        let (db_stamp, wal_stamp) = crate::native::sqlite::stamps(self.abs);
        let mut cursor = self
            .cursors
            .databases
            .get(self.rel)
            .cloned()
            .unwrap_or_default();
        let ours = |c: &crate::native::cursor::DbCursor| {
            c.sessions.values().filter(|s| s.session.is_some()).count()
        };
        if cursor.db == db_stamp && cursor.wal == wal_stamp && db_stamp.size > 0 {
            self.report.unchanged += ours(&cursor);
            return Ok(());
        }
        let known: std::collections::BTreeMap<String, String> = cursor
            .sessions
            .iter()
            .map(|(k, s)| (k.clone(), s.token.clone()))
            .collect();
        // Locked, damaged, or a schema this build does not know: a warning,
        // and the other sources are still captured.
        let warn = |report: &mut CaptureReport, message: String| {
            report.warnings.push(CaptureWarning {
                path: self.abs.to_owned(),
                line: 0,
                message,
            });
        };
        let snapshot = crate::native::sqlite::Snapshot::open(self.abs, self.db)
            .and_then(|s| s.tokens().map(|t| (s, t)));
        let (mut snapshot, tokens) = match snapshot {
            Ok(pair) => pair,
            Err(crate::native::NativeError::Source { message, .. }) => {
                warn(self.report, message);
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let changed: Vec<(String, String)> = tokens
            .iter()
            .filter(|(id, t)| known.get(*id) != Some(*t))
            .map(|(id, t)| (id.clone(), t.clone()))
            .collect();
        let mut moved = 0;
        let mut complete = true;
        for (native, token) in changed {
            let entry = cursor.sessions.get(&native).cloned();
            if let Some(RowSession { session: None, .. }) = entry {
                // Another project's session: it does not move here.
                cursor.sessions.insert(
                    native,
                    RowSession {
                        session: None,
                        events: 0,
                        token,
                    },
                );
                continue;
            }
            let rows = match snapshot.rows(&native) {
                Ok(rows) => rows,
                Err(crate::native::NativeError::Source { message, .. }) => {
                    // The next capture reads this session (and what
                    // follows) again: its token is not stored.
                    warn(self.report, message);
                    complete = false;
                    break;
                }
                Err(e) => return Err(e.into()),
            };
            let fed = self.session(&native, &rows, entry.as_ref())?;
            moved += usize::from(fed.is_some());
            cursor.sessions.insert(
                native,
                RowSession {
                    events: fed.as_ref().map_or(0, |(_, n)| *n),
                    session: fed.map(|(id, _)| id.to_string()),
                    token,
                },
            );
        }
        drop(snapshot);
        // Sessions gone from the database are forgotten (their logs stay).
        cursor.sessions.retain(|k, _| tokens.contains_key(k));
        self.report.unchanged += ours(&cursor).saturating_sub(moved);
        if complete {
            cursor.db = db_stamp;
            cursor.wal = wal_stamp;
        }
        self.cursors.databases.insert(self.rel.to_owned(), cursor);
        Ok(())
    }

    /// Parses and appends one session's rows; returns its canonical id and
    /// event count, or `None` for a session of another project.
    fn session(
        &mut self,
        native: &str,
        rows: &[git_session_adapters::source::Row],
        entry: Option<&RowSession>,
    ) -> OpResult<Option<(SessionId, u64)>> {
        let state_key = format!("{}#{native}", self.rel);
        let id = match entry.and_then(|e| e.session.clone()) {
            Some(id) => Some(SessionId::new(id).map_err(|e| OpError::Conflict {
                message: e.to_string(),
                hint: None,
            })?),
            None => None,
        };
        let stat = |id: &SessionId| -> OpResult<_> {
            Ok(self
                .store
                .tip(id)?
                .map(|_| self.store.stat(id))
                .transpose()?)
        };
        let stored = match &id {
            Some(id) => stat(id)?,
            None => None,
        };
        let state = self.cursors.load_state(&state_key);
        // Incremental only when the state and the log agree.
        let incremental = match (&stored, entry, &state) {
            (Some(s), Some(e), Some(_)) => s.events == e.events,
            _ => false,
        };
        let next_seq = if incremental {
            stored.as_ref().map_or(0, |s| s.events)
        } else {
            0
        };
        let mut parsed = self.adapter.parse(ParseInput {
            records: Records::Rows(rows),
            next_seq,
            state: if incremental { state } else { None },
            source: self.rel,
            session: Some(native),
            sidecar: None,
        });
        let id = match id {
            Some(id) => id,
            None => {
                let inside = parsed.session.cwd.as_deref().is_some_and(|cwd| {
                    self.worktrees
                        .iter()
                        .any(|w| std::path::Path::new(cwd).starts_with(w))
                });
                if !inside {
                    return Ok(None);
                }
                canonical_id(
                    self.agent,
                    parsed.session.native_id.as_deref().unwrap_or(native),
                )
            }
        };
        // A session captured before whose cursor was lost: reconcile.
        let stored = match stored {
            Some(s) => Some(s),
            None => stat(&id)?,
        };
        if let Some(r) = self.redactor {
            let r = r.get_or_init(crate::redact::Redactor::new);
            for event in &mut parsed.events {
                r.redact(event);
            }
        }
        for w in &parsed.warnings {
            self.report.warnings.push(CaptureWarning {
                path: self.abs.to_owned(),
                line: w.line,
                message: w.message.clone(),
            });
        }
        let info = commit_info(self.store, self.clock);
        let artifacts = std::mem::take(&mut parsed.artifacts);
        let mut events = std::mem::take(&mut parsed.events);
        let produce = |sink: &mut BatchSink<'_>,
                       skip: Option<&std::collections::HashSet<String>>| {
            for (_, bytes) in &artifacts {
                sink.add_artifact(bytes)?;
            }
            for event in events.iter_mut() {
                if skip.is_some_and(|s| s.contains(&dedup_key(event))) {
                    continue;
                }
                sink.push_mut(event)?;
            }
            Ok::<_, OpError>(())
        };
        let outcome = match &stored {
            Some(s) if s.header.agent != *self.agent => {
                return Err(OpError::Conflict {
                    message: format!(
                        "session id {id} is already used by a {} session",
                        s.header.agent
                    ),
                    hint: None,
                });
            }
            Some(_) if incremental => {
                let mut produce = produce;
                self.store
                    .append(&id, SeqMode::Exact, &info, |sink| produce(sink, None))?
            }
            Some(_) => {
                let known = stored_keys(self.store, &id)?;
                let mut produce = produce;
                self.store.append(&id, SeqMode::Assign, &info, |sink| {
                    produce(sink, Some(&known))
                })?
            }
            None => {
                let header = session_header(self.clock, self.agent, &id, &parsed.session);
                let mut produce = produce;
                self.store
                    .create(&header, SeqMode::Exact, &info, |sink| produce(sink, None))?
            }
        };
        self.cursors.save_state(&state_key, &parsed.state)?;
        if outcome.commit.is_some() {
            let appended = outcome.seq.map_or(0, |(a, b)| b - a + 1);
            self.report.sessions.push(CapturedSession {
                id: id.clone(),
                agent: self.agent.clone(),
                source: self.abs.to_owned(),
                created: stored.is_none(),
                appended,
                events: outcome.events,
                commit: outcome.commit,
            });
        }
        Ok(Some((id, outcome.events)))
    }
}
