//! Write-back (`git session resume`): render a canonical session into an
//! agent's native store so that the agent's own resume continues it.
//!
//! Never overwrites: a native session that already exists with the same
//! bytes is left alone (resuming twice is a no-op); one with different bytes
//! is refused unless the caller asks for a fork, which writes the session
//! under a new id and records that fork in the canonical log. Files are
//! written through a temporary file and a rename that refuses to replace.
//! Database rows go only into an existing database, not while another
//! process has it open, after a backup, and never replace a row.

use std::path::{Path, PathBuf};

use git_session_adapters::{ChangeSet, FileSink, RenderHead, RowWrite};
use git_session_schema::{Agent, Event, SessionHeader, SessionId};
use serde_json::Value;

use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::store::{Store, StoreError};

/// Says what to resume where.
pub struct ResumeRequest<'a> {
    /// The canonical session.
    pub id: SessionId,
    /// The agent to write for (default: the session's own agent).
    pub agent: Option<Agent>,
    /// The user's home directory (agent stores default to it).
    pub home: PathBuf,
    /// Looks up an environment variable (an agent's store override).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Write under a new native id, recorded as a fork.
    pub fork: bool,
}

/// Reports a write-back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResumeOutcome {
    /// The agent written for.
    pub agent: Agent,
    /// The canonical session written (the fork, when one was made).
    pub session: SessionId,
    /// The native session id to resume.
    pub native_id: String,
    /// Files created, absolute.
    pub written: Vec<PathBuf>,
    /// Whether the native session was already there, identical.
    pub unchanged: bool,
    /// The directory to run the agent from.
    pub cwd: PathBuf,
    /// The agent's resume command.
    pub command: String,
    /// What the target cannot hold.
    pub losses: Vec<String>,
    /// What the user must know about the target (said once).
    pub notices: Vec<String>,
    /// Database rows skipped, with the reason (the session still resumes by id).
    pub skipped_rows: Vec<String>,
}

/// Renders `request.id` into the agent's store.
pub fn resume(
    store: &Store,
    clock: &Clock,
    request: &ResumeRequest<'_>,
) -> OpResult<ResumeOutcome> {
    let header = store.header(&request.id)?;
    let agent = request
        .agent
        .clone()
        .unwrap_or_else(|| header.agent.clone());
    let adapter = adapter_for(&agent)?;
    let root = adapter.store_root(request.env, &request.home);
    let cwd = target_cwd(store, &header)?;
    let same_agent_native = header
        .native_id
        .clone()
        .filter(|_| header.agent == agent && !request.fork);
    let native_id = same_agent_native.unwrap_or_else(|| new_native_id(clock));
    let session = if request.fork {
        // The fork gets the new native id as its canonical id too, so
        // `git session show <id>` and the agent's resume name the same thing.
        // A fresh native id cannot conflict, so the fork is recorded first.
        let fork_id = SessionId::new(native_id.clone()).expect("a uuid is a valid session id");
        super::fork::fork(store, clock, &request.id, None, Some(fork_id.clone()))?;
        fork_id
    } else {
        request.id.clone()
    };
    let mut events = StoredEvents {
        lines: store.lines(&request.id, 0, None)?,
        id: request.id.clone(),
        error: None,
    };
    let target = NativeTarget {
        adapter,
        root: &root,
        header: &header,
        artifacts_of: &request.id,
        native_id: &native_id,
        cwd: &cwd,
    };
    let result = write_native(store, clock, &target, &mut events);
    if let Some(e) = events.error {
        return Err(e);
    }
    let Written {
        changes,
        written,
        unchanged,
        skipped_rows,
    } = result.map_err(|e| match e {
        OpError::NativeExists {
            native_id, path, ..
        } => OpError::NativeExists {
            native_id,
            path,
            hint: Some(format!(
                "git session resume {} --fork writes it under a new id (recorded as a fork)",
                request.id
            )),
        },
        other => other,
    })?;
    Ok(ResumeOutcome {
        agent,
        session,
        native_id,
        written,
        unchanged,
        cwd,
        command: changes.resume_command.clone(),
        losses: changes.losses.clone(),
        notices: changes.notices.clone(),
        skipped_rows,
    })
}

/// Returns the directory the agent should run in on this machine: the
/// recorded cwd when it is inside this repository, else this work tree.
pub(crate) fn target_cwd(store: &Store, header: &SessionHeader) -> OpResult<PathBuf> {
    let worktrees = store.worktree_paths();
    if let Some(cwd) = header.cwd.as_deref().map(Path::new)
        && worktrees.iter().any(|w| cwd.starts_with(w))
    {
        return Ok(cwd.to_owned());
    }
    store
        .repo()
        .workdir()
        .map(Path::to_owned)
        .ok_or_else(|| OpError::Conflict {
            message: "this repository has no work tree to resume a session in".into(),
            hint: Some("run git session resume in a clone with a work tree".into()),
        })
}

pub(crate) fn new_native_id(clock: &Clock) -> String {
    super::fork::new_session_id(clock).to_string()
}

pub(crate) fn adapter_for(agent: &Agent) -> OpResult<&'static dyn git_session_adapters::Adapter> {
    git_session_adapters::registry::adapter(agent).ok_or_else(|| OpError::Conflict {
        message: format!("no adapter can write {agent} sessions yet"),
        hint: Some(format!(
            "agents with an adapter: {}",
            git_session_adapters::registry::names().join(", ")
        )),
    })
}

/// Names where and as what a session is written.
pub(crate) struct NativeTarget<'a> {
    pub adapter: &'a dyn git_session_adapters::Adapter,
    /// The agent's store root.
    pub root: &'a Path,
    pub header: &'a SessionHeader,
    /// The session whose artifacts the events reference.
    pub artifacts_of: &'a SessionId,
    pub native_id: &'a str,
    pub cwd: &'a Path,
}

/// Reports what [`write_native`] did.
pub(crate) struct Written {
    pub changes: ChangeSet,
    pub written: Vec<PathBuf>,
    pub unchanged: bool,
    pub skipped_rows: Vec<String>,
}

/// Renders `events` through the adapter into temporary files, refuses if a
/// different native session is in the way, then moves the files into place
/// and applies the index lines and database rows.
pub(crate) fn write_native(
    store: &Store,
    clock: &Clock,
    target: &NativeTarget<'_>,
    events: &mut dyn Iterator<Item = Event>,
) -> OpResult<Written> {
    let blobs: std::collections::HashMap<_, _> =
        store.artifacts(target.artifacts_of)?.into_iter().collect();
    let artifact =
        |a: &git_session_schema::ArtifactId| blobs.get(a).and_then(|b| store.blob(*b).ok());
    let cwd_text = target.cwd.to_string_lossy();
    let now = clock.now_rfc3339();
    let head = RenderHead {
        header: target.header,
        artifact: &artifact,
        native_id: target.native_id,
        cwd: &cwd_text,
        now: &now,
    };
    let mut files = TempFiles::new(target.root);
    let mut changes = target
        .adapter
        .render_to(head, events, &mut files)
        .map_err(|e| OpError::Conflict {
            message: format!(
                "cannot write {} as a {} session: {e}",
                target.header.id,
                target.adapter.agent()
            ),
            hint: None,
        })?;
    // A command that names the store root (an agent that needs its home
    // in the environment) gets this one.
    changes.resume_command = changes.resume_command.replace(
        "{root}",
        &super::shell_quote(&target.root.to_string_lossy()),
    );
    // The agent's own write lock on the session, held while the files go
    // into place: never write what a running agent owns.
    let _locks = take_locks(target.root, &changes.locks)?;
    // Bytes can differ while the records are the same (the agent's file
    // and our render of it order keys differently, or lack a field the
    // render adds): the adapter decides whether it is the same session.
    let mut conflicts = Vec::new();
    for (path, rendered) in files.conflicting()? {
        let rel = path
            .strip_prefix(target.root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        let same = target.adapter.is_session_file(Path::new(&rel))
            && super::capture::native_keys(target.adapter, &path, &rel)?
                == super::capture::native_keys(target.adapter, &rendered, &rel)?;
        if same {
            files.keep_existing(&path);
        } else {
            conflicts.push(path);
        }
    }
    if let Some(first) = conflicts.first() {
        return Err(OpError::NativeExists {
            native_id: target.native_id.to_owned(),
            path: first.clone(),
            hint: None,
        });
    }
    let unchanged = files.all_present();
    let written = files.persist()?;
    let mut skipped_rows = Vec::new();
    if !unchanged {
        for a in &changes.appends {
            append(&target.root.join(&a.path), &a.bytes)?;
        }
        for row in &changes.rows {
            if let Some(reason) = insert_row(store, clock, target.root, row)? {
                skipped_rows.push(reason);
            }
        }
    }
    Ok(Written {
        changes,
        written,
        unchanged,
        skipped_rows,
    })
}

/// Takes the agent's lock files (exclusive, non-blocking, created when
/// missing); refuses when the agent holds one. The locks are released
/// when the returned files are dropped.
fn take_locks(root: &Path, locks: &[PathBuf]) -> OpResult<Vec<std::fs::File>> {
    let mut held = Vec::new();
    for rel in locks {
        let path = root.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(OpError::io(dir))?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(OpError::io(&path))?;
        match file.try_lock() {
            Ok(()) => held.push(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(OpError::Conflict {
                    message: format!(
                        "the agent is running on this session (it holds {}); nothing was written",
                        path.display()
                    ),
                    hint: Some("close the agent, then run the command again".into()),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(OpError::io(&path)(e)),
        }
    }
    Ok(held)
}

/// Decodes stored lines one at a time; the first error ends the stream and
/// is kept for the caller.
struct StoredEvents<'s> {
    lines: crate::store::LineIter<'s>,
    id: SessionId,
    error: Option<OpError>,
}

impl Iterator for StoredEvents<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if self.error.is_some() {
            return None;
        }
        let decoded = match self.lines.next()? {
            Ok(line) => line.decode().map_err(|e| {
                OpError::from(StoreError::Corrupt {
                    id: self.id.clone(),
                    message: format!("seq {}: {e}", line.seq),
                })
            }),
            Err(e) => Err(e.into()),
        };
        match decoded {
            Ok(event) => Some(event),
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

/// Receives rendered files as temporary files beside their targets; they
/// are compared with what exists and renamed into place only at the end.
struct TempFiles {
    root: PathBuf,
    files: Vec<(PathBuf, tempfile::NamedTempFile)>,
    /// The plain content of the open frame, while the current file is a
    /// framed one (`begin_framed`); each closed frame is compressed into
    /// the temporary file.
    frame: Option<Vec<u8>>,
    /// Targets whose existing file already holds the session.
    kept: Vec<PathBuf>,
}

impl TempFiles {
    fn new(root: &Path) -> TempFiles {
        TempFiles {
            root: root.to_owned(),
            files: Vec::new(),
            frame: None,
            kept: Vec::new(),
        }
    }

    /// Compresses the open frame, if any, into the current file.
    fn close_frame(&mut self) -> Result<(), String> {
        let Some(buf) = self.frame.as_mut().filter(|b| !b.is_empty()) else {
            return Ok(());
        };
        let frame = crate::native::zstd::encode_frame(buf);
        buf.clear();
        let (path, tmp) = self.files.last_mut().ok_or("write before begin")?;
        std::io::Write::write_all(tmp, &frame).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Returns the targets that exist with different bytes, each with the
    /// temporary file holding what the render wanted there.
    fn conflicting(&mut self) -> OpResult<Vec<(PathBuf, PathBuf)>> {
        self.close_frame().map_err(|message| OpError::Conflict {
            message,
            hint: None,
        })?;
        self.frame = None;
        let mut out = Vec::new();
        for (path, tmp) in &mut self.files {
            if !path.exists() {
                continue;
            }
            if !same_content(path, tmp.path())? {
                out.push((path.clone(), tmp.path().to_owned()));
            }
        }
        Ok(out)
    }

    /// Leaves the existing file at `path` as it is (it holds the session).
    fn keep_existing(&mut self, path: &Path) {
        self.files.retain(|(p, _)| p != path);
        self.kept.push(path.to_owned());
    }

    fn all_present(&self) -> bool {
        self.files.iter().all(|(p, _)| p.is_file())
    }

    /// Moves every file whose target does not exist yet into place.
    fn persist(self) -> OpResult<Vec<PathBuf>> {
        let mut written = Vec::new();
        for (path, tmp) in self.files {
            if path.exists() {
                continue;
            }
            tmp.as_file().sync_all().map_err(OpError::io(&path))?;
            tmp.persist_noclobber(&path).map_err(|e| OpError::Io {
                path: path.clone(),
                source: e.error,
            })?;
            written.push(path);
        }
        Ok(written)
    }
}

impl FileSink for TempFiles {
    fn begin(&mut self, path: &Path) -> Result<(), String> {
        self.close_frame()?;
        self.frame = None;
        let target = self.root.join(path);
        let dir = target.parent().ok_or("a native file needs a directory")?;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tmp = tempfile::Builder::new()
            .prefix(".git-session-")
            .tempfile_in(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        self.files.push((target, tmp));
        Ok(())
    }

    fn begin_framed(&mut self, path: &Path) -> Result<(), String> {
        self.begin(path)?;
        self.frame = Some(Vec::new());
        Ok(())
    }

    fn end_frame(&mut self) -> Result<(), String> {
        self.close_frame()
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        if let Some(buf) = &mut self.frame {
            buf.extend_from_slice(bytes);
            return Ok(());
        }
        let (path, tmp) = self.files.last_mut().ok_or("write before begin")?;
        std::io::Write::write_all(tmp, bytes).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Compares two files by content, streaming.
fn same_content(a: &Path, b: &Path) -> OpResult<bool> {
    use std::io::Read;
    let (ma, mb) = (
        std::fs::metadata(a).map_err(OpError::io(a))?,
        std::fs::metadata(b).map_err(OpError::io(b))?,
    );
    if ma.len() != mb.len() {
        return Ok(false);
    }
    let mut ra = std::io::BufReader::new(std::fs::File::open(a).map_err(OpError::io(a))?);
    let mut rb = std::io::BufReader::new(std::fs::File::open(b).map_err(OpError::io(b))?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = ra.read(&mut ba).map_err(OpError::io(a))?;
        if n == 0 {
            return Ok(true);
        }
        rb.read_exact(&mut bb[..n]).map_err(OpError::io(b))?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// Appends whole lines to an index file, creating it if needed.
fn append(path: &Path, bytes: &[u8]) -> OpResult<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(OpError::io(dir))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(OpError::io(path))?;
    // An index whose last line lacks its newline would glue our line to it.
    let len = file.metadata().map_err(OpError::io(path))?.len();
    let mut data = Vec::with_capacity(bytes.len() + 1);
    if len > 0 {
        let mut last = [0u8; 1];
        use std::io::{Read, Seek, SeekFrom};
        let mut reader = std::fs::File::open(path).map_err(OpError::io(path))?;
        reader
            .seek(SeekFrom::Start(len - 1))
            .map_err(OpError::io(path))?;
        reader.read_exact(&mut last).map_err(OpError::io(path))?;
        if last[0] != b'\n' {
            data.push(b'\n');
        }
    }
    data.extend_from_slice(bytes);
    std::io::Write::write_all(&mut file, &data).map_err(OpError::io(path))
}

/// Inserts one row; returns why it was skipped, if it was.
fn insert_row(
    store: &Store,
    clock: &Clock,
    root: &Path,
    row: &RowWrite,
) -> OpResult<Option<String>> {
    let db = root.join(&row.database);
    if !db.is_file() {
        // The agent indexes the files it finds when it creates the database.
        return Ok(None);
    }
    if let Some(pid) = open_by_other_process(&db) {
        return Ok(Some(format!(
            "{} is open in process {pid}; the session resumes by id, but appears in the picker only after that process exits and you run resume again",
            db.display()
        )));
    }
    let sql = |e: rusqlite::Error| OpError::Conflict {
        message: format!("{}: {e}", db.display()),
        hint: None,
    };
    let conn = rusqlite::Connection::open(&db).map_err(sql)?;
    let columns: Vec<String> = {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT name FROM pragma_table_info({})",
                quote_literal(&row.table)
            ))
            .map_err(sql)?;
        let names = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(sql)?;
        names.collect::<Result<_, _>>().map_err(sql)?
    };
    if columns.is_empty() {
        return Ok(Some(format!("{} has no table {}", db.display(), row.table)));
    }
    let value_of = |name: &str| -> Option<rusqlite::types::Value> {
        let v = row.columns.get(name)?;
        let v = match v {
            Value::String(s) if row.root_relative.iter().any(|c| c == name) => {
                Value::String(root.join(s).to_string_lossy().into_owned())
            }
            other => other.clone(),
        };
        Some(match v {
            Value::Null => rusqlite::types::Value::Null,
            Value::Bool(b) => rusqlite::types::Value::Integer(i64::from(b)),
            Value::Number(n) => match n.as_i64() {
                Some(i) => rusqlite::types::Value::Integer(i),
                None => rusqlite::types::Value::Real(n.as_f64().unwrap_or(0.0)),
            },
            Value::String(s) => rusqlite::types::Value::Text(s),
            other => rusqlite::types::Value::Text(other.to_string()),
        })
    };
    let key_values: Vec<rusqlite::types::Value> =
        row.key.iter().filter_map(|k| value_of(k)).collect();
    let exists_sql = format!(
        "SELECT 1 FROM {} WHERE {}",
        quote_ident(&row.table),
        row.key
            .iter()
            .map(|k| format!("{} = ?", quote_ident(k)))
            .collect::<Vec<_>>()
            .join(" AND ")
    );
    let exists = conn
        .prepare(&exists_sql)
        .and_then(|mut s| s.exists(rusqlite::params_from_iter(key_values.iter())))
        .map_err(sql)?;
    if exists {
        return Ok(None);
    }
    backup(store, clock, &conn, &db)?;
    let used: Vec<&String> = columns
        .iter()
        .filter(|c| row.columns.contains_key(c.as_str()))
        .collect();
    let insert = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        quote_ident(&row.table),
        used.iter()
            .map(|c| quote_ident(c))
            .collect::<Vec<_>>()
            .join(", "),
        vec!["?"; used.len()].join(", ")
    );
    let values: Vec<rusqlite::types::Value> = used.iter().filter_map(|c| value_of(c)).collect();
    conn.execute(&insert, rusqlite::params_from_iter(values.iter()))
        .map_err(sql)?;
    Ok(None)
}

/// Copies the database into local state before the first write to it.
fn backup(store: &Store, clock: &Clock, conn: &rusqlite::Connection, db: &Path) -> OpResult<()> {
    let dir = store.state_dir().join("backups");
    std::fs::create_dir_all(&dir).map_err(OpError::io(&dir))?;
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let target = dir.join(format!("{name}.{}", clock.now().as_millisecond()));
    conn.execute("VACUUM INTO ?1", [target.to_string_lossy()])
        .map_err(|e| OpError::Conflict {
            message: format!(
                "could not back up {} before writing to it: {e}",
                db.display()
            ),
            hint: None,
        })?;
    Ok(())
}

/// Returns a process (other than this one) that has `db` or its WAL open.
///
/// Reads `/proc/*/fd` (Linux); elsewhere it finds nothing and relies on
/// SQLite's own locking.
fn open_by_other_process(db: &Path) -> Option<u32> {
    let db = db.canonicalize().ok()?;
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path())
                && (target == db || target == wal)
            {
                return Some(pid);
            }
        }
    }
    None
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
