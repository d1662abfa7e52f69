//! Write-back: an adapter's [`ChangeSet`] applied to the agent's store.
//!
//! * **Files** are rendered into temporary files beside their targets
//!   ([`TempFiles`], a [`FileSink`]; zstd-framed files are compressed frame
//!   by frame with content checksums), compared with whatever is already
//!   there, and moved in with a rename that refuses to replace.
//! * **Index lines** are appended to shared index files, never rewriting
//!   what they hold ([`append_lines`]).
//! * **Rows** ([`apply_rows`]) go into each database in one transaction,
//!   after one backup of that database per operation (not one per row),
//!   into `.git/session/backups/`, pruned to the last [`KEEP_BACKUPS`] per
//!   database name. Never while another process holds the database
//!   ([`holder`]: `/proc` on Linux, a SQLite lock probe elsewhere); rows are
//!   inserted, never updated or deleted. Consecutive rows of one table that
//!   need no lookup go in by multi-row statements (see `Pending`: FTS5
//!   triggers make one statement per row slow).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use git_session_adapters::{ChangeSet, FileSink, RowWrite};
use serde_json::Value;

use super::sqlite::quote_ident;
use super::{NativeError, NativeResult};

/// How many backups of each database are kept.
pub const KEEP_BACKUPS: usize = 5;

/// Receives rendered files as temporary files beside their targets; they
/// are compared with what exists and renamed into place only at the end.
///
/// Temp files are named `.git-session-<pid>-…`; a write-back that was
/// killed leaves its temp files behind, and the next one into the same
/// directory removes those whose writer is gone ([`TempFiles::sweep`]).
pub struct TempFiles {
    root: PathBuf,
    files: Vec<TempFile>,
    /// Directories already cleared of a killed write-back's temp files.
    swept: Vec<PathBuf>,
}

/// Starts the name of every temp file write-back makes; the writer's pid
/// and a `-` follow, so a later run can tell whose it is.
const TEMP_PREFIX: &str = ".git-session-";

/// Temp files without a pid in their name (older versions) are removed
/// once they are this old.
const STALE_UNNAMED: std::time::Duration = std::time::Duration::from_secs(3600);

struct TempFile {
    target: PathBuf,
    tmp: tempfile::NamedTempFile,
    /// For a framed file: the content of the frame being written.
    frame: Option<Vec<u8>>,
}

impl TempFiles {
    /// Starts an empty set of files under the store `root`.
    pub fn new(root: &Path) -> TempFiles {
        TempFiles {
            root: root.to_owned(),
            files: Vec::new(),
            swept: Vec::new(),
        }
    }

    /// Removes the temp files a killed write-back left in `dir`: those whose
    /// writer is no longer running (a live pid may be a concurrent resume),
    /// and unnamed ones past [`STALE_UNNAMED`]. Only regular files and
    /// symlinks named like ours are touched; failures are ignored (the
    /// files are debris, not data).
    fn sweep(&mut self, dir: &Path) {
        if self.swept.iter().any(|d| d == dir) {
            return;
        }
        self.swept.push(dir.to_owned());
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(TEMP_PREFIX)) else {
                continue;
            };
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                continue;
            }
            let stale = match rest.split_once('-').map(|(pid, _)| pid.parse::<u32>()) {
                Some(Ok(pid)) => pid != std::process::id() && !process_exists(pid),
                _ => meta
                    .modified()
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > STALE_UNNAMED),
            };
            if stale {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Returns the targets that exist with different bytes, each with the
    /// temporary file holding what the render wanted there.
    pub fn conflicting(&mut self) -> NativeResult<Vec<(PathBuf, PathBuf)>> {
        self.flush()?;
        let mut out = Vec::new();
        for f in &self.files {
            if !f.target.exists() {
                continue;
            }
            if !same_content(&f.target, f.tmp.path())? {
                out.push((f.target.clone(), f.tmp.path().to_owned()));
            }
        }
        Ok(out)
    }

    /// Leaves the existing file at `path` as it is (it holds the session).
    pub fn keep_existing(&mut self, path: &Path) {
        self.files.retain(|f| f.target != path);
    }

    /// Returns the files [`TempFiles::persist`] will move into place (those
    /// whose target does not exist yet), each with its size as rendered.
    pub fn planned(&mut self) -> NativeResult<Vec<(PathBuf, u64)>> {
        self.flush()?;
        let mut out = Vec::new();
        for f in &self.files {
            if f.target.exists() {
                continue;
            }
            let size = f
                .tmp
                .as_file()
                .metadata()
                .map_err(NativeError::io(f.tmp.path()))?
                .len();
            out.push((f.target.clone(), size));
        }
        Ok(out)
    }

    /// Returns whether every target already exists.
    pub fn all_present(&self) -> bool {
        self.files.iter().all(|f| f.target.is_file())
    }

    /// Moves every file whose target does not exist yet into place, with a
    /// rename that never replaces; returns the files written.
    pub fn persist(mut self) -> NativeResult<Vec<PathBuf>> {
        self.flush()?;
        let mut written = Vec::new();
        for f in self.files {
            if f.target.exists() {
                continue;
            }
            f.tmp
                .as_file()
                .sync_all()
                .map_err(NativeError::io(&f.target))?;
            f.tmp
                .persist_noclobber(&f.target)
                .map_err(|e| NativeError::Io {
                    path: f.target.clone(),
                    source: e.error,
                })?;
            written.push(f.target);
        }
        Ok(written)
    }

    /// Compresses the open frame of every framed file.
    fn flush(&mut self) -> NativeResult<()> {
        for f in &mut self.files {
            if let Some(frame) = &mut f.frame
                && !frame.is_empty()
            {
                let bytes = compress_frame(frame).map_err(NativeError::io(&f.target))?;
                std::io::Write::write_all(&mut f.tmp, &bytes)
                    .map_err(NativeError::io(&f.target))?;
                frame.clear();
            }
        }
        Ok(())
    }

    fn start(&mut self, path: &Path, framed: bool) -> Result<(), String> {
        let target = contained_path(&self.root, path).map_err(|e| e.to_string())?;
        let dir = target.parent().ok_or("a native file needs a directory")?;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let dir = dir.to_owned();
        self.sweep(&dir);
        let tmp = tempfile::Builder::new()
            .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
            .tempfile_in(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        self.files.push(TempFile {
            target,
            tmp,
            frame: framed.then(Vec::new),
        });
        Ok(())
    }
}

/// Returns whether a process with this pid exists (Linux `/proc`; elsewhere
/// every pid counts as running, so nothing named by pid is removed).
fn process_exists(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.is_dir() || proc.join(pid.to_string()).exists()
}

/// Returns one zstd frame with a content checksum holding `content`.
pub fn compress_frame(content: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3)?;
    enc.include_checksum(true)?;
    std::io::Write::write_all(&mut enc, content)?;
    enc.finish()
}

impl FileSink for TempFiles {
    fn begin(&mut self, path: &Path) -> Result<(), String> {
        self.start(path, false)
    }

    fn begin_framed(&mut self, path: &Path) -> Result<(), String> {
        self.start(path, true)
    }

    fn end_frame(&mut self) -> Result<(), String> {
        let f = self.files.last_mut().ok_or("end_frame before begin")?;
        if let Some(frame) = &mut f.frame
            && !frame.is_empty()
        {
            let bytes =
                compress_frame(frame).map_err(|e| format!("{}: {e}", f.target.display()))?;
            std::io::Write::write_all(&mut f.tmp, &bytes)
                .map_err(|e| format!("{}: {e}", f.target.display()))?;
            frame.clear();
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        let f = self.files.last_mut().ok_or("write before begin")?;
        match &mut f.frame {
            Some(frame) => {
                frame.extend_from_slice(bytes);
                Ok(())
            }
            None => std::io::Write::write_all(&mut f.tmp, bytes)
                .map_err(|e| format!("{}: {e}", f.target.display())),
        }
    }
}

/// Takes the agent's lock files ([`ChangeSet::locks`]: exclusive,
/// non-blocking `flock`s, each created when missing); refuses when the
/// agent holds one. The locks are released when the returned files are
/// dropped, so hold them until the change set is applied.
///
/// [`ChangeSet::locks`]: git_session_adapters::ChangeSet::locks
pub fn take_locks(root: &Path, locks: &[PathBuf]) -> NativeResult<Vec<std::fs::File>> {
    let mut held = Vec::new();
    for rel in locks {
        let path = contained_path(root, rel)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(NativeError::io(dir))?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(NativeError::io(&path))?;
        match file.try_lock() {
            Ok(()) => held.push(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(NativeError::Locked { path });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(NativeError::io(&path)(e)),
        }
    }
    Ok(held)
}

/// Returns `root/relative` after checking that it stays inside `root`:
/// `relative` must be relative and made only of plain names (no `..`, no
/// root, no prefix, no control characters), so the joined path is inside
/// `root` lexically; symlinks the user made inside their own store are
/// theirs and followed. Every write-back path goes through here.
pub fn contained_path(root: &Path, relative: &Path) -> NativeResult<PathBuf> {
    use std::path::Component;
    let refuse = |why: &'static str| NativeError::Outside {
        root: root.to_owned(),
        relative: relative.to_owned(),
        why,
    };
    if relative.as_os_str().is_empty() {
        return Err(refuse("empty path"));
    }
    for c in relative.components() {
        match c {
            Component::Normal(name) if !name.to_string_lossy().chars().any(char::is_control) => {}
            Component::Normal(_) => return Err(refuse("control characters in a file name")),
            _ => {
                return Err(refuse(
                    "only plain names are allowed (no .., no absolute path)",
                ));
            }
        }
    }
    let target = root.join(relative);
    if !target.starts_with(root) {
        return Err(refuse("it leaves the store root"));
    }
    Ok(target)
}

/// Compares two files by content, streaming.
fn same_content(a: &Path, b: &Path) -> NativeResult<bool> {
    use std::io::Read;
    let (ma, mb) = (
        std::fs::metadata(a).map_err(NativeError::io(a))?,
        std::fs::metadata(b).map_err(NativeError::io(b))?,
    );
    if ma.len() != mb.len() {
        return Ok(false);
    }
    let mut ra = std::io::BufReader::new(std::fs::File::open(a).map_err(NativeError::io(a))?);
    let mut rb = std::io::BufReader::new(std::fs::File::open(b).map_err(NativeError::io(b))?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = ra.read(&mut ba).map_err(NativeError::io(a))?;
        if n == 0 {
            return Ok(true);
        }
        rb.read_exact(&mut bb[..n]).map_err(NativeError::io(b))?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// Appends whole lines to an index file, creating it if needed; a last
/// line without its newline gets one first.
pub fn append_lines(path: &Path, bytes: &[u8]) -> NativeResult<()> {
    use std::io::{Read, Seek, SeekFrom};
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(NativeError::io(dir))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(NativeError::io(path))?;
    let len = file.metadata().map_err(NativeError::io(path))?.len();
    let mut data = Vec::with_capacity(bytes.len() + 1);
    if len > 0 {
        let mut last = [0u8; 1];
        let mut reader = std::fs::File::open(path).map_err(NativeError::io(path))?;
        reader
            .seek(SeekFrom::Start(len - 1))
            .map_err(NativeError::io(path))?;
        reader
            .read_exact(&mut last)
            .map_err(NativeError::io(path))?;
        if last[0] != b'\n' {
            data.push(b'\n');
        }
    }
    data.extend_from_slice(bytes);
    std::io::Write::write_all(&mut file, &data).map_err(NativeError::io(path))
}

/// Reports what [`apply_rows`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowsOutcome {
    /// Rows inserted.
    pub inserted: usize,
    /// Databases whose session row was already there with the same values
    /// (the session is in place; nothing was written to them).
    pub present: Vec<PathBuf>,
    /// Rows or databases left alone, with the reason (the session still
    /// resumes where the agent does not need them).
    pub skipped: Vec<String>,
    /// Backups made, one per database written.
    pub backups: Vec<PathBuf>,
}

/// Says where backups go and what time it is (for their names).
pub struct Backups<'a> {
    /// The directory (`.git/session/backups`).
    pub dir: &'a Path,
    /// Milliseconds since the epoch, for the backup's name.
    pub now_ms: i64,
}

/// Applies the change set's rows, database by database, in order.
///
/// For each database: when it does not exist, its rows are skipped if they
/// are only index rows (the agent indexes the files on first use) and the
/// write-back fails if one is a session row. When another process holds it,
/// the same. Otherwise: the session row decides whether the session is
/// already there (same values: nothing written; different: an error naming
/// the database, see [`NativeError::Exists`]); then one backup, then every
/// row in one transaction.
pub fn apply_rows(
    root: &Path,
    changes: &ChangeSet,
    backups: &Backups<'_>,
) -> NativeResult<RowsOutcome> {
    let mut outcome = RowsOutcome::default();
    let mut order: Vec<&Path> = Vec::new();
    let mut by_db: BTreeMap<&Path, Vec<&RowWrite>> = BTreeMap::new();
    for row in &changes.rows {
        // Paths a row records are the agent's to open later: same rule.
        for name in &row.root_relative {
            if let Some(Value::String(s)) = row.columns.get(name) {
                contained_path(root, Path::new(s))?;
            }
        }
        if !by_db.contains_key(row.database.as_path()) {
            order.push(&row.database);
        }
        by_db.entry(&row.database).or_default().push(row);
    }
    for rel in order {
        let rows = &by_db[rel];
        let db = contained_path(root, rel)?;
        let needed = rows.iter().any(|r| r.session_row);
        if !db.is_file() {
            if needed {
                return Err(NativeError::Source {
                    path: db,
                    message: "the agent's database does not exist yet; run the agent once so it creates it, then resume again".into(),
                });
            }
            continue;
        }
        if let Some(pid) = holder(&db) {
            let message = format!(
                "{} is open in process {pid}; close the agent and run resume again",
                db.display()
            );
            if needed {
                return Err(NativeError::Source { path: db, message });
            }
            outcome.skipped.push(format!(
                "{message} (the session resumes by id, but appears in the picker only after that)"
            ));
            continue;
        }
        match write_database(root, &db, rows, backups)? {
            DbWrite::Present => outcome.present.push(db),
            DbWrite::Written {
                inserted,
                backup,
                skipped,
            } => {
                outcome.inserted += inserted;
                outcome.backups.extend(backup);
                outcome.skipped.extend(skipped);
            }
        }
    }
    Ok(outcome)
}

enum SessionState {
    Present,
    Absent,
}

/// Says whether the session row of `rows` is already in `db`: the same
/// values (present), none (absent), or different ones (an error).
fn session_state(
    conn: &rusqlite::Connection,
    db: &Path,
    rows: &[&RowWrite],
    columns_of: &BTreeMap<&str, Vec<String>>,
    root: &Path,
) -> NativeResult<SessionState> {
    let sql = |e: rusqlite::Error| NativeError::Source {
        path: db.to_owned(),
        message: e.to_string(),
    };
    let Some(session) = rows.iter().find(|r| r.session_row) else {
        return Ok(SessionState::Absent);
    };
    let cols = &columns_of[session.table.as_str()];
    if cols.is_empty() {
        return Err(NativeError::Source {
            path: db.to_owned(),
            message: format!(
                "the database has no table {}; unknown schema, nothing written",
                session.table
            ),
        });
    }
    let Some(existing) = existing_row(conn, session, root).map_err(sql)? else {
        return Ok(SessionState::Absent);
    };
    let same = session.columns.iter().all(|(name, v)| {
        !cols.contains(name)
            || existing.get(name).is_some_and(|have| {
                same_value(have, &to_sql(v, name, session, root))
                    || (session.numbered.contains(name) && same_lineage(have, v))
            })
    });
    if same {
        Ok(SessionState::Present)
    } else {
        Err(NativeError::Exists {
            path: db.to_owned(),
            what: format!("a different session row in table {}", session.table),
        })
    }
}

/// Returns the columns of each table the rows name (empty: no such table).
fn table_columns<'r>(
    conn: &rusqlite::Connection,
    db: &Path,
    rows: &[&'r RowWrite],
) -> NativeResult<BTreeMap<&'r str, Vec<String>>> {
    let sql = |e: rusqlite::Error| NativeError::Source {
        path: db.to_owned(),
        message: e.to_string(),
    };
    let mut columns_of = BTreeMap::new();
    for row in rows {
        if columns_of.contains_key(row.table.as_str()) {
            continue;
        }
        let mut stmt = conn
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .map_err(sql)?;
        let names: Vec<String> = stmt
            .query_map([&row.table], |r| r.get(0))
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        columns_of.insert(row.table.as_str(), names);
    }
    Ok(columns_of)
}

/// Checks, without writing, that no database holds a different session
/// under the session rows' keys; run before any file is moved into place.
pub fn check_rows(root: &Path, changes: &ChangeSet) -> NativeResult<()> {
    let mut by_db: BTreeMap<&Path, Vec<&RowWrite>> = BTreeMap::new();
    for row in changes.rows.iter().filter(|r| r.session_row) {
        by_db.entry(&row.database).or_default().push(row);
    }
    for (rel, rows) in by_db {
        let db = contained_path(root, rel)?;
        if !db.is_file() {
            continue;
        }
        let conn = rusqlite::Connection::open_with_flags(
            &db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| NativeError::Source {
            path: db.clone(),
            message: e.to_string(),
        })?;
        let columns_of = table_columns(&conn, &db, &rows)?;
        session_state(&conn, &db, &rows, &columns_of, root)?;
    }
    Ok(())
}

enum DbWrite {
    Present,
    Written {
        inserted: usize,
        backup: Option<PathBuf>,
        skipped: Vec<String>,
    },
}

/// Writes one database's rows in one transaction, after one backup.
fn write_database(
    root: &Path,
    db: &Path,
    rows: &[&RowWrite],
    backups: &Backups<'_>,
) -> NativeResult<DbWrite> {
    let sql = |e: rusqlite::Error| NativeError::Source {
        path: db.to_owned(),
        message: e.to_string(),
    };
    let mut conn = rusqlite::Connection::open(db).map_err(sql)?;
    // Fail fast rather than wait on an agent we did not see.
    conn.busy_timeout(std::time::Duration::from_millis(500))
        .map_err(sql)?;
    let columns_of = table_columns(&conn, db, rows)?;
    // The session row first: is the session already there?
    match session_state(&conn, db, rows, &columns_of, root)? {
        SessionState::Present => return Ok(DbWrite::Present),
        SessionState::Absent => {}
    }
    // Nothing to insert (every keyed row is there): no backup, no write.
    let mut any_new = false;
    for row in rows {
        if columns_of[row.table.as_str()].is_empty() {
            continue;
        }
        if row.key.is_empty() || existing_rowid(&conn, row, root).map_err(sql)?.is_none() {
            any_new = true;
            break;
        }
    }
    if !any_new {
        return Ok(DbWrite::Written {
            inserted: 0,
            backup: None,
            skipped: Vec::new(),
        });
    }
    let backup = backup(&conn, db, backups)?;
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sql)?;
    let mut labels: BTreeMap<&str, i64> = BTreeMap::new();
    let mut inserted = 0;
    let mut skipped = Vec::new();
    let mut pending: Option<Pending<'_>> = None;
    let mut defaults = BTreeMap::new();
    for row in rows {
        let cols = &columns_of[row.table.as_str()];
        if cols.is_empty() {
            skipped.push(format!("{} has no table {}", db.display(), row.table));
            continue;
        }
        // A row nothing refers back to, with no key to look up and no
        // unique value to number, waits to go in with the rows of its table
        // after it, in one statement. Any other row reads the database
        // first, so the rows waiting go in before it.
        let batched = row.key.is_empty() && row.assigns.is_none() && row.numbered.is_empty();
        if !batched && let Some(batch) = pending.take() {
            inserted += batch.insert(&tx, &mut defaults).map_err(sql)?;
        }
        if !row.key.is_empty()
            && let Some(rowid) = existing_rowid(&tx, row, root).map_err(sql)?
        {
            if let Some(label) = &row.assigns {
                labels.insert(label, rowid);
            }
            continue;
        }
        let mut names = Vec::new();
        let mut values = Vec::new();
        for (name, v) in &row.columns {
            if cols.contains(name) {
                names.push(quote_ident(name));
                let value = match v {
                    Value::String(s) if row.numbered.contains(name) => {
                        match next_in_lineage(&tx, &row.table, name, s).map_err(sql)? {
                            Some(next) => rusqlite::types::Value::Text(next),
                            None => to_sql(v, name, row, root),
                        }
                    }
                    _ => to_sql(v, name, row, root),
                };
                values.push(value);
            }
        }
        for (column, label) in &row.refs {
            let Some(&rowid) = labels.get(label.as_str()) else {
                return Err(NativeError::Source {
                    path: db.to_owned(),
                    message: format!(
                        "row of {} refers to {label:?}, which no earlier row assigns",
                        row.table
                    ),
                });
            };
            names.push(quote_ident(column));
            values.push(rusqlite::types::Value::Integer(rowid));
        }
        if batched {
            if pending
                .as_ref()
                .is_some_and(|p| p.table != row.table.as_str() || !p.has_room(names.len()))
                && let Some(batch) = pending.take()
            {
                inserted += batch.insert(&tx, &mut defaults).map_err(sql)?;
            }
            pending
                .get_or_insert_with(|| Pending::new(&row.table))
                .push(names, values);
            continue;
        }
        insert_one(&tx, &row.table, &names, &values).map_err(sql)?;
        inserted += 1;
        if let Some(label) = &row.assigns {
            labels.insert(label, tx.last_insert_rowid());
        }
    }
    if let Some(batch) = pending.take() {
        inserted += batch.insert(&tx, &mut defaults).map_err(sql)?;
    }
    tx.commit().map_err(sql)?;
    Ok(DbWrite::Written {
        inserted,
        backup: Some(backup),
        skipped,
    })
}

/// Inserts one row, with a statement prepared once per table and column
/// set.
fn insert_one(
    tx: &rusqlite::Connection,
    table: &str,
    names: &[String],
    values: &[rusqlite::types::Value],
) -> rusqlite::Result<()> {
    let insert = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        quote_ident(table),
        names.join(", "),
        vec!["?"; names.len()].join(", ")
    );
    tx.prepare_cached(&insert)?
        .execute(rusqlite::params_from_iter(values.iter()))?;
    Ok(())
}

/// The most rows, and bound values, one multi-row `INSERT` takes.
const BATCH_ROWS: usize = 500;
const BATCH_VALUES: usize = 30_000;

/// Consecutive rows of one table, inserted by one multi-row statement.
///
/// One statement per row costs more than its row where the table has
/// triggers into full-text indexes (Hermes' `messages`): SQLite opens a
/// statement savepoint for each, and FTS5 writes its pending index to disk
/// at every savepoint. A 10k-message handoff spent half its time there.
/// Rows keep their order, so the ids the database assigns are those of
/// one insert per row.
struct Pending<'a> {
    table: &'a str,
    rows: Vec<(Vec<String>, Vec<rusqlite::types::Value>)>,
    values: usize,
}

impl<'a> Pending<'a> {
    fn new(table: &'a str) -> Self {
        Pending {
            table,
            rows: Vec::new(),
            values: 0,
        }
    }

    /// Whether a row of `width` columns still fits the statement.
    fn has_room(&self, width: usize) -> bool {
        self.rows.len() < BATCH_ROWS && self.values + width <= BATCH_VALUES
    }

    fn push(&mut self, names: Vec<String>, values: Vec<rusqlite::types::Value>) {
        self.values += values.len();
        self.rows.push((names, values));
    }

    /// Inserts the rows and returns how many. The statement names every
    /// column any of its rows has; a row without one gets the column's
    /// declared default, as its own insert would. Where a default is not a
    /// plain literal the rows go in one by one instead.
    fn insert(
        self,
        tx: &rusqlite::Connection,
        defaults: &mut BTreeMap<String, BTreeMap<String, Option<String>>>,
    ) -> rusqlite::Result<usize> {
        let n = self.rows.len();
        if n == 1 {
            let (names, values) = &self.rows[0];
            insert_one(tx, self.table, names, values)?;
            return Ok(1);
        }
        let mut union: Vec<&str> = Vec::new();
        for (names, _) in &self.rows {
            for name in names {
                if !union.contains(&name.as_str()) {
                    union.push(name);
                }
            }
        }
        if !defaults.contains_key(self.table) {
            let declared = tx
                .prepare("SELECT name, dflt_value FROM pragma_table_info(?1)")?
                .query_map([self.table], |r| {
                    Ok((quote_ident(&r.get::<_, String>(0)?), r.get(1)?))
                })?
                .collect::<rusqlite::Result<_>>()?;
            defaults.insert(self.table.to_owned(), declared);
        }
        let declared = &defaults[self.table];
        let mut tuples = Vec::with_capacity(n);
        let mut bound = Vec::with_capacity(self.values);
        for (names, values) in &self.rows {
            let mut tuple = Vec::with_capacity(union.len());
            for column in &union {
                if let Some(i) = names.iter().position(|n| n == column) {
                    tuple.push("?".to_owned());
                    bound.push(&values[i]);
                    continue;
                }
                match declared.get(*column).and_then(Option::as_deref) {
                    None => tuple.push("NULL".to_owned()),
                    Some(literal) if is_plain_literal(literal) => tuple.push(literal.to_owned()),
                    Some(_) => {
                        for (names, values) in &self.rows {
                            insert_one(tx, self.table, names, values)?;
                        }
                        return Ok(n);
                    }
                }
            }
            tuples.push(format!("({})", tuple.join(", ")));
        }
        let insert = format!(
            "INSERT INTO {} ({}) VALUES {}",
            quote_ident(self.table),
            union.join(", "),
            tuples.join(", ")
        );
        tx.execute(&insert, rusqlite::params_from_iter(bound))?;
        Ok(n)
    }
}

/// Whether a declared default is a literal that can stand in a statement
/// as written: a number, `NULL` or a quoted string.
fn is_plain_literal(text: &str) -> bool {
    let number = text.strip_prefix('-').unwrap_or(text);
    let quoted = text.len() >= 2
        && text.starts_with('\'')
        && text.ends_with('\'')
        && !text[1..text.len() - 1].replace("''", "").contains('\'');
    text.eq_ignore_ascii_case("null")
        || quoted
        || (!number.is_empty()
            && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && number.bytes().filter(|&b| b == b'.').count() <= 1
            && number.bytes().any(|b| b.is_ascii_digit()))
}

/// Splits a value of a numbered column into its base and number:
/// `"name #3"` is `("name", Some(3))` (see [`RowWrite::numbered`]).
fn lineage(value: &str) -> (&str, Option<u64>) {
    match value.rsplit_once(" #") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (base, n.parse().ok())
        }
        _ => (value, None),
    }
}

/// Whether `have` (in the database) is `want` numbered by an earlier write:
/// the same value, or `<base of want> #N`.
fn same_lineage(have: &rusqlite::types::Value, want: &Value) -> bool {
    let (rusqlite::types::Value::Text(have), Value::String(want)) = (have, want) else {
        return false;
    };
    have == want || {
        let (base, n) = lineage(have);
        n.is_some() && base == lineage(want).0
    }
}

/// Returns the value to write in place of `value` in the unique `column`
/// when another row holds it: the next of its lineage, `<base> #N`, N one
/// more than the highest number in use (the unnumbered base counts as 1).
/// `None` when `value` is free.
fn next_in_lineage(
    conn: &rusqlite::Connection,
    table: &str,
    column: &str,
    value: &str,
) -> rusqlite::Result<Option<String>> {
    let (table, column) = (quote_ident(table), quote_ident(column));
    let taken: bool = conn
        .prepare_cached(&format!(
            "SELECT EXISTS (SELECT 1 FROM {table} WHERE {column} = ?1)"
        ))?
        .query_row([value], |r| r.get(0))?;
    if !taken {
        return Ok(None);
    }
    let base = lineage(value).0;
    let escaped = base
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {column} FROM {table} WHERE {column} = ?1 OR {column} LIKE ?2 ESCAPE '\\'"
    ))?;
    let mut highest = 1;
    let mut rows = stmt.query(rusqlite::params![base, format!("{escaped} #%")])?;
    while let Some(r) = rows.next()? {
        let Some(have) = r.get::<_, Option<String>>(0)? else {
            continue;
        };
        if let (b, Some(n)) = lineage(&have)
            && b == base
        {
            highest = highest.max(n);
        }
    }
    Ok(Some(format!("{base} #{}", highest.saturating_add(1))))
}

/// Maps a JSON column value to SQLite (see [`RowWrite`]).
fn to_sql(v: &Value, name: &str, row: &RowWrite, root: &Path) -> rusqlite::types::Value {
    use rusqlite::types::Value as Sql;
    match v {
        Value::String(s) if row.root_relative.iter().any(|c| c == name) => {
            Sql::Text(root.join(s).to_string_lossy().into_owned())
        }
        Value::Null => Sql::Null,
        Value::Bool(b) => Sql::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Sql::Integer(i),
            None => Sql::Real(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Sql::Text(s.clone()),
        Value::Object(m) if m.len() == 1 && m.get("$blob").is_some_and(Value::is_string) => {
            let text = m["$blob"].as_str().unwrap_or_default();
            match base64::engine::general_purpose::STANDARD.decode(text) {
                Ok(bytes) => Sql::Blob(bytes),
                Err(_) => Sql::Text(v.to_string()),
            }
        }
        other => Sql::Text(other.to_string()),
    }
}

fn same_value(a: &rusqlite::types::Value, b: &rusqlite::types::Value) -> bool {
    use rusqlite::types::Value as Sql;
    match (a, b) {
        (Sql::Integer(x), Sql::Real(y)) | (Sql::Real(y), Sql::Integer(x)) => (*x as f64) == *y,
        // JSON text compared as JSON: an agent's own importer may write
        // the same document with other spacing or member order.
        (Sql::Text(x), Sql::Text(y)) if x != y => {
            match (
                serde_json::from_str::<Value>(x),
                serde_json::from_str::<Value>(y),
            ) {
                (Ok(x), Ok(y)) => x == y,
                _ => false,
            }
        }
        _ => a == b,
    }
}

/// Returns the `WHERE` clause and values that find `row` by its key.
fn key_query(row: &RowWrite, root: &Path) -> (String, Vec<rusqlite::types::Value>) {
    let clause = row
        .key
        .iter()
        .map(|k| format!("{} IS ?", quote_ident(k)))
        .collect::<Vec<_>>()
        .join(" AND ");
    let values = row
        .key
        .iter()
        .map(|k| {
            row.columns
                .get(k)
                .map_or(rusqlite::types::Value::Null, |v| to_sql(v, k, row, root))
        })
        .collect();
    (clause, values)
}

fn existing_rowid(
    conn: &rusqlite::Connection,
    row: &RowWrite,
    root: &Path,
) -> rusqlite::Result<Option<i64>> {
    let (clause, values) = key_query(row, root);
    let sql = format!(
        "SELECT rowid FROM {} WHERE {clause} LIMIT 1",
        quote_ident(&row.table)
    );
    // Cached: asked once per keyed row, with the same text for each table.
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
    rows.next()?.map(|r| r.get(0)).transpose()
}

fn existing_row(
    conn: &rusqlite::Connection,
    row: &RowWrite,
    root: &Path,
) -> rusqlite::Result<Option<BTreeMap<String, rusqlite::types::Value>>> {
    if row.key.is_empty() {
        return Ok(None);
    }
    let (clause, values) = key_query(row, root);
    let sql = format!(
        "SELECT * FROM {} WHERE {clause} LIMIT 1",
        quote_ident(&row.table)
    );
    let mut stmt = conn.prepare(&sql)?;
    let names: Vec<String> = stmt
        .column_names()
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
    let Some(r) = rows.next()? else {
        return Ok(None);
    };
    let mut out = BTreeMap::new();
    for (i, name) in names.into_iter().enumerate() {
        out.insert(name, r.get::<_, rusqlite::types::Value>(i)?);
    }
    Ok(Some(out))
}

/// Copies the database into the backups directory (a consistent copy, WAL
/// included, by `VACUUM INTO`) and prunes old backups of the same name.
fn backup(conn: &rusqlite::Connection, db: &Path, backups: &Backups<'_>) -> NativeResult<PathBuf> {
    std::fs::create_dir_all(backups.dir).map_err(NativeError::io(backups.dir))?;
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut target = backups.dir.join(format!("{name}.{}", backups.now_ms));
    let mut n = 1;
    while target.exists() {
        target = backups.dir.join(format!("{name}.{}.{n}", backups.now_ms));
        n += 1;
    }
    conn.execute("VACUUM INTO ?1", [target.to_string_lossy()])
        .map_err(|e| NativeError::Source {
            path: db.to_owned(),
            message: format!("could not back it up before writing to it ({e}); nothing written"),
        })?;
    prune(backups.dir, &name);
    Ok(target)
}

/// Keeps the newest [`KEEP_BACKUPS`] backups of database `name`.
fn prune(dir: &Path, name: &str) {
    let mine: Vec<Backup> = list_backups(dir)
        .into_iter()
        .filter(|b| b.database == name)
        .collect();
    let excess = mine.len().saturating_sub(KEEP_BACKUPS);
    for b in mine.into_iter().take(excess) {
        let _ = std::fs::remove_file(b.path);
    }
}

/// Deletes the backups in `dir` but the newest `keep` of each database
/// (`git session doctor --prune-backups`) and returns the deleted files.
/// Only files named as backups (`<name>.<millis>[.<n>]`) are touched.
pub fn prune_backups(dir: &Path, keep: usize) -> std::io::Result<Vec<PathBuf>> {
    let all = list_backups(dir);
    let mut deleted = Vec::new();
    let databases: std::collections::BTreeSet<&str> =
        all.iter().map(|b| b.database.as_str()).collect();
    for name in databases {
        // Oldest first, so the excess is at the front.
        let mine: Vec<&Backup> = all.iter().filter(|b| b.database == name).collect();
        let excess = mine.len().saturating_sub(keep);
        for b in mine.into_iter().take(excess) {
            std::fs::remove_file(&b.path)?;
            deleted.push(b.path.clone());
        }
    }
    Ok(deleted)
}

/// Describes one database backup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backup {
    /// The backup file.
    pub path: PathBuf,
    /// The database file name it is a copy of.
    pub database: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was made.
    pub modified: std::time::SystemTime,
}

/// Lists the backups in `dir`, oldest first.
pub fn list_backups(dir: &Path) -> Vec<Backup> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<Backup> = entries
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            // `<name>.<millis>` or `<name>.<millis>.<n>`.
            let mut parts: Vec<&str> = file.rsplitn(3, '.').collect();
            parts.reverse();
            let database = match parts.as_slice() {
                [name, ms, n]
                    if ms.bytes().all(|b| b.is_ascii_digit())
                        && n.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    (*name).to_owned()
                }
                [.., ms] if ms.bytes().all(|b| b.is_ascii_digit()) => {
                    file[..file.len() - ms.len() - 1].to_owned()
                }
                _ => return None,
            };
            let meta = e.metadata().ok().filter(|m| m.is_file())?;
            Some(Backup {
                path: e.path(),
                database,
                size: meta.len(),
                modified: meta.modified().ok()?,
            })
        })
        .collect();
    out.sort_by(|a, b| (a.modified, &a.path).cmp(&(b.modified, &b.path)));
    out
}

/// Returns a process other than this one that holds `db` (or its WAL)
/// open: the one check of "is the agent running on this database".
///
/// On Linux it reads `/proc/*/fd`. Elsewhere it probes SQLite's own lock:
/// a write transaction that cannot start at once means another connection
/// is writing (reported as pid 0); an idle open connection is not seen.
pub fn holder(db: &Path) -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        proc_holder(db)
    }
    #[cfg(not(target_os = "linux"))]
    {
        lock_probe(db).then_some(0)
    }
}

#[cfg(target_os = "linux")]
fn proc_holder(db: &Path) -> Option<u32> {
    let db = db.canonicalize().ok()?;
    let wal = super::sqlite::sidecar(&db, "-wal");
    let me = std::process::id();
    // git-session itself is not the agent: a child between fork and exec
    // shows our descriptors for a moment, and another git-session only
    // reads the database.
    let own_exe = std::fs::read_link("/proc/self/exe").ok();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me
            || (own_exe.is_some() && std::fs::read_link(entry.path().join("exe")).ok() == own_exe)
        {
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

/// Returns whether another connection holds a write lock on `db` now.
#[cfg_attr(target_os = "linux", allow(dead_code))]
fn lock_probe(db: &Path) -> bool {
    let Ok(conn) = rusqlite::Connection::open(db) else {
        return false;
    };
    let _ = conn.busy_timeout(std::time::Duration::ZERO);
    match conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK;") {
        Ok(()) => false,
        Err(e) => matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        ),
    }
}

/// Holds what the root crate knows about the repository a session is
/// written for (see [`git_session_adapters::RepoFact`]).
pub struct RepoFacts {
    /// The root commit hash, `None` before the first commit.
    pub root_commit: Option<String>,
    /// The work tree's root, `None` in a bare repository.
    pub worktree: Option<PathBuf>,
    /// The session's directory.
    pub cwd: PathBuf,
}

/// Fills the columns of every row that name a repository fact
/// ([`RowWrite::repo`]) with the fact's value.
pub fn fill_repo_facts(changes: &mut ChangeSet, facts: &RepoFacts) {
    use git_session_adapters::RepoFact;
    for row in &mut changes.rows {
        for (column, fact) in std::mem::take(&mut row.repo) {
            let value = match fact {
                RepoFact::RootCommit(otherwise) => facts
                    .root_commit
                    .clone()
                    .unwrap_or_else(|| otherwise.to_owned()),
                RepoFact::Worktree => facts
                    .worktree
                    .as_deref()
                    .unwrap_or(&facts.cwd)
                    .to_string_lossy()
                    .into_owned(),
                RepoFact::RelativeCwd => facts
                    .worktree
                    .as_deref()
                    .and_then(|w| facts.cwd.strip_prefix(w).ok())
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            };
            row.columns.insert(column, Value::String(value));
        }
    }
}

/// Says whether every session row of the change set is in its database
/// (by key; the values are compared by [`check_rows`]).
pub fn session_rows_present(root: &Path, changes: &ChangeSet) -> NativeResult<bool> {
    for row in changes.rows.iter().filter(|r| r.session_row) {
        let db = root.join(&row.database);
        if !db.is_file() {
            return Ok(false);
        }
        let conn = rusqlite::Connection::open_with_flags(
            &db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| NativeError::Source {
            path: db.clone(),
            message: e.to_string(),
        })?;
        let found = existing_rowid(&conn, row, root).map_err(|e| NativeError::Source {
            path: db.clone(),
            message: e.to_string(),
        })?;
        if found.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// How long an agent's importer may run.
const IMPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Where and how an agent's importer runs.
pub struct ImportPlace<'a> {
    /// The session's directory (the importer's working directory).
    pub cwd: &'a Path,
    /// The user's home directory (`{home}`, and `HOME`).
    pub home: &'a Path,
    /// The agent's store root (`{root}`).
    pub root: &'a Path,
    /// The `PATH` to find the program on.
    pub path: Option<&'a str>,
}

/// Runs the agent's importer ([`git_session_adapters::NativeImport`]);
/// `Ok(Err(why))` when it is missing or failed (the caller writes the rows
/// instead). The caller checks that the session is there afterwards.
pub fn run_import(
    import: &git_session_adapters::NativeImport,
    place: &ImportPlace<'_>,
) -> NativeResult<Result<(), String>> {
    use std::time::{Duration, Instant};
    let Some(program) = find_on_path(&import.program, place.path) else {
        return Ok(Err(format!("`{}` is not on PATH", import.program)));
    };
    let dir = tempfile::tempdir().map_err(NativeError::io(Path::new("temporary directory")))?;
    let name = Path::new(&import.file_name)
        .file_name()
        .map_or_else(|| PathBuf::from("session.json"), PathBuf::from);
    let file = dir.path().join(name);
    std::fs::write(&file, &import.document).map_err(NativeError::io(&file))?;
    let subst = |text: &str| {
        text.replace("{file}", &file.to_string_lossy())
            .replace("{home}", &place.home.to_string_lossy())
            .replace("{root}", &place.root.to_string_lossy())
    };
    let mut cmd = std::process::Command::new(&program);
    cmd.args(import.args.iter().map(|a| subst(a)))
        .current_dir(place.cwd)
        .env("HOME", place.home)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (name, value) in &import.env {
        cmd.env(name, subst(value));
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Ok(Err(format!("`{}` could not start: {e}", program.display()))),
    };
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > IMPORT_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Err(format!(
                    "`{}` did not finish in {} s",
                    import.program,
                    IMPORT_TIMEOUT.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Ok(Err(format!("`{}`: {e}", import.program))),
        }
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    if !status.success() {
        // The agent's own output: control characters escaped, bounded.
        let last: String = stderr
            .lines()
            .last()
            .unwrap_or("")
            .trim()
            .chars()
            .flat_map(char::escape_debug)
            .take(300)
            .collect();
        return Ok(Err(format!(
            "`{}` failed ({status}): {last}",
            import.program
        )));
    }
    Ok(Ok(()))
}

pub(crate) fn find_on_path(program: &str, path: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?).find_map(|dir| {
        let candidate = dir.join(program);
        let meta = std::fs::metadata(&candidate).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backups_are_listed_by_database_and_pruned_to_the_last_few() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(KEEP_BACKUPS + 3) {
            std::fs::write(dir.path().join(format!("state.db.{}", 1000 + i)), b"x").unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::fs::write(dir.path().join("other.sqlite.5.1"), b"y").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"z").unwrap();
        prune(dir.path(), "state.db");
        let left = list_backups(dir.path());
        let state: Vec<_> = left.iter().filter(|b| b.database == "state.db").collect();
        assert_eq!(state.len(), KEEP_BACKUPS);
        assert!(state[0].path.ends_with(format!("state.db.{}", 1003)));
        assert!(left.iter().any(|b| b.database == "other.sqlite"));
        assert!(!left.iter().any(|b| b.path.ends_with("notes.txt")));
    }
}
