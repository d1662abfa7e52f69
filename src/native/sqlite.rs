//! SQLite sources: a database an agent keeps many sessions in, read
//! without ever writing to it.
//!
//! # Opening a database the agent may be writing
//!
//! A `mode=ro` connection never takes a write lock, but SQLite still
//! *creates* `-wal` and `-shm` beside a WAL-mode database when they are
//! missing, and a read-only connection cannot checkpoint them away on
//! close, so they would stay in the agent's directory. So [`open`] picks
//! one of two ways by what is there:
//!
//! * **`-wal` and `-shm` exist** (the agent has the database open): open
//!   with `mode=ro`. SQLite uses the agent's WAL index, creates nothing, and
//!   the read transaction is a consistent snapshot while the agent writes.
//! * **no `-wal`** (no connection is open, everything is in the main file),
//!   or a `-wal` without its `-shm`: open with `mode=ro&immutable=1`, which
//!   reads the main file alone and creates nothing. Because `immutable`
//!   would not notice an agent that starts writing meanwhile, the read is
//!   checked afterwards: when the main file's size or mtime changed, or a
//!   `-wal` appeared, the read is thrown away and done again (then the WAL
//!   way applies). Rows still only in a `-wal` without `-shm` come on a
//!   later capture, once the agent has checkpointed them.
//!
//! A database in rollback-journal mode is opened with `mode=ro`, which
//! creates no files either. `SQLITE_BUSY` is retried for a bounded time
//! ([`Options::wait`]); past it, the source is skipped with a warning.
//!
//! # Reading
//!
//! [`read`] checks the adapter's schema declaration, then reads every
//! declared table in one read transaction: the rows that are new per the
//! table's [`Incremental`], grouped by session key, each row a JSON object.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use git_session_adapters::source::{Database, Incremental, Row, Table};
use rusqlite::{Connection, OpenFlags, types::ValueRef};

use super::cursor::Stamp;
use super::{NativeError, NativeResult};

/// Says how patient the reader is.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// How long `SQLITE_BUSY` is retried before the source is skipped.
    pub wait: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            wait: Duration::from_secs(2),
        }
    }
}

/// Holds what one read of a database produced.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// New rows by session key, sessions in the order they first appear,
    /// rows in declaration order of their tables, then by rowid.
    pub sessions: Vec<(String, Vec<Row>)>,
    /// The tables' new high-water marks (rowid or column value).
    pub marks: BTreeMap<String, i64>,
    /// What the reader noticed but read anyway (a newer schema version).
    pub warnings: Vec<String>,
}

/// Returns the stamps of a database and its `-wal`: together they say
/// whether anything changed since the last read, for two `stat`s.
pub fn stamps(db: &Path) -> (Stamp, Stamp) {
    (Stamp::of(db), Stamp::of(&sidecar(db, "-wal")))
}

/// Returns `<db><suffix>` (`-wal`, `-shm`, `-journal`).
pub fn sidecar(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Says how a database was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `mode=ro`, using the agent's WAL index (or a rollback database).
    ReadOnly,
    /// `mode=ro&immutable=1`, to be verified after the read.
    Immutable,
}

/// Opens `db` read-only without creating anything beside it (see the
/// module docs), returning the connection and how it was opened.
fn open(db: &Path, options: &Options) -> NativeResult<(Connection, Mode)> {
    let wal = sidecar(db, "-wal").exists();
    let shm = sidecar(db, "-shm").exists();
    let mode = if (wal && shm) || !is_wal_mode(db)? {
        Mode::ReadOnly
    } else {
        Mode::Immutable
    };
    let mut uri = String::from("file:");
    uri.push_str(&uri_path(db));
    uri.push_str(match mode {
        Mode::ReadOnly => "?mode=ro",
        Mode::Immutable => "?mode=ro&immutable=1",
    });
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(&uri, flags).map_err(|e| source_error(db, &e))?;
    conn.busy_timeout(options.wait)
        .map_err(|e| source_error(db, &e))?;
    Ok((conn, mode))
}

/// Returns whether the database file's header says WAL mode (bytes 18 and
/// 19 are 2). A file too short to have a header is not WAL.
fn is_wal_mode(db: &Path) -> NativeResult<bool> {
    use std::io::Read;
    let mut header = [0u8; 20];
    let mut file = std::fs::File::open(db).map_err(NativeError::io(db))?;
    match file.read_exact(&mut header) {
        Ok(()) => Ok(header[18] == 2 || header[19] == 2),
        Err(_) => Ok(false),
    }
}

/// Percent-encodes a path for a `file:` URI.
fn uri_path(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'%' | b'?' | b'#' => out.push_str(&format!("%{b:02X}")),
            _ => out.push(b as char),
        }
    }
    out
}

/// Reads what is new in `db` since `marks`, as `decl` declares.
///
/// `first_seen(key)` says whether a session key is new to the caller: for
/// those, the session table's row is fetched even when its own cursor had
/// passed it. `skip(key)` drops a session's rows (another project's).
pub fn read(
    db: &Path,
    decl: &Database,
    marks: &BTreeMap<String, i64>,
    first_seen: &dyn Fn(&str) -> bool,
    skip: &dyn Fn(&str) -> bool,
    options: &Options,
) -> NativeResult<Snapshot> {
    let deadline = Instant::now() + options.wait;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let before = stamps(db);
        let result = (|| -> Result<(Snapshot, Mode), ReadError> {
            let (conn, mode) = open(db, options)?;
            let snapshot = read_open(&conn, db, decl, marks, first_seen, skip)?;
            Ok((snapshot, mode))
        })();
        match result {
            Ok((snapshot, Mode::ReadOnly)) => return Ok(snapshot),
            Ok((snapshot, Mode::Immutable)) => {
                // Nothing may have changed under an immutable read.
                let after = stamps(db);
                if after.0 == before.0 && !sidecar(db, "-wal").exists() {
                    return Ok(snapshot);
                }
                if attempts >= 5 || Instant::now() >= deadline {
                    return Err(NativeError::Source {
                        path: db.to_owned(),
                        message: "the database kept changing while it was read; skipped, the next capture reads it".into(),
                    });
                }
            }
            Err(Busy(_)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e.into_native()),
        }
    }
}

/// Reads the tables on an open connection, in one read transaction.
fn read_open(
    conn: &Connection,
    db: &Path,
    decl: &Database,
    marks: &BTreeMap<String, i64>,
    first_seen: &dyn Fn(&str) -> bool,
    skip: &dyn Fn(&str) -> bool,
) -> Result<Snapshot, ReadError> {
    let err = |e: rusqlite::Error| ReadError::from_sqlite(db, e);
    // A deferred transaction whose first SELECT takes the snapshot; every
    // later query of this read sees the same database state.
    conn.execute_batch("BEGIN").map_err(err)?;
    let (present, warning) = check_schema(conn, db, decl)?;
    let mut snapshot = Snapshot {
        warnings: warning.into_iter().collect(),
        ..Snapshot::default()
    };
    let mut order: Vec<String> = Vec::new();
    let mut by_session: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for (i, table) in decl.tables.iter().enumerate() {
        let mark = marks.get(table.name).copied();
        let cols = &present[i];
        let (sql, mark_value) = select(table, cols, mark);
        let mut stmt = conn.prepare(&sql).map_err(err)?;
        let mut rows = match mark_value {
            Some(m) => stmt.query([m]),
            None => stmt.query([]),
        }
        .map_err(err)?;
        let mut high = mark.unwrap_or(i64::MIN);
        let mut seen_keys = Vec::new();
        while let Some(r) = rows.next().map_err(err)? {
            let (key, row, position) = row_json(r, table, cols).map_err(err)?;
            high = high.max(position);
            if skip(&key) {
                continue;
            }
            if i == 0 {
                seen_keys.push(key.clone());
            }
            if !by_session.contains_key(&key) {
                order.push(key.clone());
            }
            by_session.entry(key).or_default().push(row);
        }
        drop(rows);
        if high != i64::MIN {
            snapshot.marks.insert(table.name.to_owned(), high);
        }
        if i == 0 {
            continue;
        }
        // A session met for the first time in this table whose session row
        // was not among the new ones: fetch that row, so the adapter gets
        // the session's facts first.
        let session_table = &decl.tables[0];
        for key in order.clone() {
            if !first_seen(&key) {
                continue;
            }
            let rows = by_session.get(&key).expect("ordered keys have rows");
            if rows.iter().any(|r| r.table == session_table.name) {
                continue;
            }
            let head = session_rows(conn, session_table, &present[0], &key).map_err(err)?;
            let rows = by_session.get_mut(&key).expect("ordered keys have rows");
            rows.splice(0..0, head);
        }
    }
    conn.execute_batch("COMMIT").map_err(err)?;
    for key in order {
        let mut rows = by_session.remove(&key).unwrap_or_default();
        // Declaration order of tables, then rowid: stable and documented.
        let rank = |t: &str| decl.tables.iter().position(|d| d.name == t).unwrap_or(0);
        rows.sort_by_key(|r| (rank(r.table), r.rowid));
        rows.dedup_by(|a, b| a.table == b.table && a.rowid == b.rowid);
        snapshot.sessions.push((key, rows));
    }
    Ok(snapshot)
}

/// Returns the query for a table's new rows and the cursor value it takes.
fn select(table: &Table, columns: &[&str], mark: Option<i64>) -> (String, Option<i64>) {
    let mut cols = String::from("rowid");
    if let Incremental::Column(c) = table.incremental {
        cols.push_str(", ");
        cols.push_str(&quote_ident(c));
    } else {
        cols.push_str(", rowid");
    }
    for c in columns {
        cols.push_str(", ");
        cols.push_str(&quote_ident(c));
    }
    cols.push_str(", ");
    cols.push_str(&quote_ident(table.session));
    let name = quote_ident(table.name);
    match (table.incremental, mark) {
        (Incremental::RowId, Some(m)) => (
            format!("SELECT {cols} FROM {name} WHERE rowid > ?1 ORDER BY rowid"),
            Some(m),
        ),
        (Incremental::Column(c), Some(m)) => (
            format!(
                "SELECT {cols} FROM {name} WHERE {} >= ?1 ORDER BY {}, rowid",
                quote_ident(c),
                quote_ident(c)
            ),
            Some(m),
        ),
        _ => (format!("SELECT {cols} FROM {name} ORDER BY rowid"), None),
    }
}

/// Returns every row of the session table for `key`.
fn session_rows(
    conn: &Connection,
    table: &Table,
    columns: &[&str],
    key: &str,
) -> rusqlite::Result<Vec<Row>> {
    let (sql, _) = select(table, columns, None);
    let sql = sql.replace(
        " ORDER BY rowid",
        &format!(
            " WHERE CAST({} AS TEXT) = ?1 ORDER BY rowid",
            quote_ident(table.session)
        ),
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([key])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(row_json(r, table, columns)?.1);
    }
    Ok(out)
}

/// Turns a selected row (rowid, position, columns..., session) into the
/// session key, the record, and its cursor position.
fn row_json(
    r: &rusqlite::Row<'_>,
    table: &Table,
    columns: &[&str],
) -> rusqlite::Result<(String, Row, i64)> {
    let rowid: i64 = r.get(0)?;
    let position: i64 = match r.get_ref(1)? {
        ValueRef::Integer(i) => i,
        ValueRef::Real(f) => f as i64,
        _ => rowid,
    };
    let mut obj = serde_json::Map::with_capacity(columns.len() + 1);
    for (i, c) in columns.iter().enumerate() {
        obj.insert((*c).to_owned(), value_json(r.get_ref(2 + i)?));
    }
    obj.insert("$rowid".into(), rowid.into());
    let key = match r.get_ref(2 + columns.len())? {
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Null => String::new(),
        ValueRef::Blob(b) => String::from_utf8_lossy(b).into_owned(),
    };
    let json = serde_json::to_vec(&serde_json::Value::Object(obj)).expect("JSON values serialize");
    Ok((
        key,
        Row {
            table: table.name,
            rowid,
            json,
        },
        position,
    ))
}

/// Maps one SQLite value to JSON (see [`git_session_adapters::source::Table`]).
fn value_json(v: ValueRef<'_>) -> serde_json::Value {
    match v {
        ValueRef::Null => serde_json::Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => serde_json::Number::from_f64(f)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned().into(),
        ValueRef::Blob(b) => serde_json::json!({
            "$blob": base64::engine::general_purpose::STANDARD.encode(b)
        }),
    }
}

/// Checks the declared tables, required columns and schema version;
/// returns, per declared table, the columns of [`Table::columns`] it has,
/// and a warning for a newer version that is read anyway.
fn check_schema(
    conn: &Connection,
    db: &Path,
    decl: &Database,
) -> Result<(Vec<Vec<&'static str>>, Option<String>), ReadError> {
    let err = |e: rusqlite::Error| ReadError::from_sqlite(db, e);
    let unknown = |what: String| {
        ReadError::Other(NativeError::Source {
            path: db.to_owned(),
            message: format!("unknown schema ({what}); skipped, nothing read from it"),
        })
    };
    let columns_of = |table: &str| -> Result<Vec<String>, ReadError> {
        let mut stmt = conn
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .map_err(err)?;
        let have: Vec<String> = stmt
            .query_map([table], |r| r.get(0))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        Ok(have)
    };
    let mut needs: Vec<(&str, Vec<&str>)> = decl
        .requires
        .iter()
        .map(|(t, cols)| (*t, cols.to_vec()))
        .collect();
    for t in decl.tables {
        let mut cols = vec![t.session];
        if let Incremental::Column(c) = t.incremental {
            cols.push(c);
        }
        needs.push((t.name, cols));
    }
    for (table, cols) in needs {
        let have = columns_of(table)?;
        if have.is_empty() {
            return Err(unknown(format!("no table {table}")));
        }
        if let Some(missing) = cols.iter().find(|c| !have.iter().any(|h| h == *c)) {
            return Err(unknown(format!("table {table} has no column {missing}")));
        }
    }
    let mut present = Vec::with_capacity(decl.tables.len());
    for t in decl.tables {
        let have = columns_of(t.name)?;
        present.push(
            t.columns
                .iter()
                .copied()
                .filter(|c| have.iter().any(|h| h == c))
                .collect(),
        );
    }
    let mut warning = None;
    if let Some(v) = &decl.version {
        let version: i64 =
            conn.query_row(v.query, [], |r| r.get(0))
                .map_err(|e| match ReadError::from_sqlite(db, e) {
                    ReadError::Other(_) => unknown(format!("`{}` failed", v.query)),
                    busy => busy,
                })?;
        if version > v.max && v.read_newer {
            warning = Some(format!(
                "schema version {version} is newer than {} (the newest this build knows); read because every column it needs is there",
                v.max
            ));
        } else if version < v.min || version > v.max {
            return Err(unknown(format!(
                "version {version}, this build reads {}..={}",
                v.min, v.max
            )));
        }
    }
    Ok((present, warning))
}

/// Says why a read failed: busy (retried) or anything else.
enum ReadError {
    Busy(NativeError),
    Other(NativeError),
}
use ReadError::Busy;

impl ReadError {
    fn from_sqlite(db: &Path, e: rusqlite::Error) -> ReadError {
        let busy = matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        );
        let native = source_error(db, &e);
        if busy {
            ReadError::Busy(native)
        } else {
            ReadError::Other(native)
        }
    }

    fn into_native(self) -> NativeError {
        match self {
            ReadError::Busy(e) => match e {
                NativeError::Source { path, message } => NativeError::Source {
                    path,
                    message: format!(
                        "{message}; still locked after the wait, skipped: the next capture reads it"
                    ),
                },
                other => other,
            },
            ReadError::Other(e) => e,
        }
    }
}

impl From<NativeError> for ReadError {
    fn from(e: NativeError) -> ReadError {
        ReadError::Other(e)
    }
}

/// Describes a SQLite error on `db` for a warning.
fn source_error(db: &Path, e: &rusqlite::Error) -> NativeError {
    let what = match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseCorrupt) => "the database is corrupt (SQLITE_CORRUPT)",
        Some(rusqlite::ErrorCode::NotADatabase) => "not a SQLite database (SQLITE_NOTADB)",
        Some(rusqlite::ErrorCode::DatabaseBusy) => "the database is locked (SQLITE_BUSY)",
        Some(rusqlite::ErrorCode::DatabaseLocked) => "the database is locked (SQLITE_LOCKED)",
        Some(rusqlite::ErrorCode::CannotOpen) => "the database cannot be opened (SQLITE_CANTOPEN)",
        _ => "SQLite refused to read it",
    };
    NativeError::Source {
        path: db.to_owned(),
        message: format!("{what}: {e}"),
    }
}

/// Quotes an SQL identifier.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Checks that `db` holds the schema `decl` reads (tables, required
/// columns, version), without writing: write-back inserts rows only into a
/// database the agent itself created and migrated. Returns a warning for a
/// newer version that is accepted ([`SchemaVersion::read_newer`]).
///
/// [`SchemaVersion::read_newer`]: git_session_adapters::source::SchemaVersion::read_newer
pub fn check_target(db: &Path, decl: &Database, options: &Options) -> NativeResult<Option<String>> {
    let deadline = Instant::now() + options.wait;
    loop {
        let result = (|| -> Result<Option<String>, ReadError> {
            let (conn, _) = open(db, options)?;
            let (_, warning) = check_schema(&conn, db, decl)?;
            Ok(warning)
        })();
        match result {
            Ok(w) => return Ok(w),
            Err(Busy(_)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e.into_native()),
        }
    }
}
