//! SQLite sources: an agent's database, read without ever writing to it.
//!
//! * **Read-only, no files left behind.** A database in WAL mode that has
//!   a `-wal` file (the agent has it open, or did not checkpoint) is opened
//!   `mode=ro`, sharing the agent's `-shm`. One without a `-wal` is opened
//!   `immutable=1`: `mode=ro` alone would create `-wal` and `-shm` beside
//!   it and leave them there. Should the database change during an
//!   immutable read (a writer checkpointed into the file: its stamp
//!   moved), the rest is read `mode=ro`.
//! * **One snapshot.** Every query of a capture runs in one read
//!   transaction, so rows of one session are consistent with each other.
//! * **Bounded waits.** `SQLITE_BUSY` is retried for up to
//!   [`BUSY_TIMEOUT`]; past that, or on `SQLITE_CORRUPT` or an unknown
//!   schema, the database is skipped with a message naming it.
//! * **Incremental by session.** A declared change query
//!   ([`Database::changes`]) returns one token per session (e.g. its
//!   `time_updated` and event sequence); only sessions whose token moved
//!   are read, each whole through the tables' session index. An unchanged
//!   database (same stamps for the file and its `-wal`) costs no query.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use git_session_adapters::source::{Database, Row};
use rusqlite::{Connection, OpenFlags, types::ValueRef};

use super::cursor::Stamp;
use super::{NativeError, NativeResult};

/// How long a read waits for a writer's lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Returns the stamps of a database and its `-wal`.
pub fn stamps(path: &Path) -> (Stamp, Stamp) {
    (Stamp::of(path), Stamp::of(&wal_path(path)))
}

fn wal_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    name.into()
}

/// Opens `path` read-only, WAL-safe, leaving no file beside it.
pub fn open(path: &Path) -> NativeResult<Connection> {
    open_mode(path, !wal_path(path).exists())
}

fn open_mode(path: &Path, immutable: bool) -> NativeResult<Connection> {
    let mut uri = String::from("file:");
    for b in path.to_string_lossy().bytes() {
        match b {
            b'?' | b'#' | b'%' => uri.push_str(&format!("%{b:02X}")),
            _ => uri.push(b as char),
        }
    }
    uri.push_str(if immutable {
        "?mode=ro&immutable=1"
    } else {
        "?mode=ro"
    });
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(&uri, flags).map_err(|e| source_error(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| source_error(path, e))?;
    Ok(conn)
}

fn source_error(path: &Path, e: rusqlite::Error) -> NativeError {
    let what = match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => format!(
            "locked by another process for more than {} s ({e}); skipped, run the capture again",
            BUSY_TIMEOUT.as_secs()
        ),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            format!("the database is damaged ({e}); skipped, nothing was read from it")
        }
        _ => format!("cannot read the database ({e}); skipped"),
    };
    NativeError::Source {
        path: path.to_owned(),
        message: what,
    }
}

/// Checks that the tables and columns the adapter declares exist; the
/// message names what is missing and the newest migration when known.
pub fn check_schema(conn: &Connection, path: &Path, db: &Database) -> NativeResult<()> {
    let mut missing = Vec::new();
    for (table, columns) in db.requires {
        let have = table_columns(conn, table).map_err(|e| source_error(path, e))?;
        if have.is_empty() {
            missing.push(format!("table {table}"));
            continue;
        }
        for c in *columns {
            if !have.iter().any(|h| h == c) {
                missing.push(format!("{table}.{c}"));
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    if missing.len() == db.requires.len() && missing.iter().all(|m| m.starts_with("table ")) {
        return Err(NativeError::Source {
            path: path.to_owned(),
            message: "holds none of the agent's tables yet (the agent may be creating it); \
                      skipped, run the capture again later"
                .into(),
        });
    }
    let version = db
        .newest_migration
        .and_then(|q| conn.query_row(q, [], |r| r.get::<_, String>(0)).ok())
        .map(|m| format!(" (newest migration {m})"))
        .unwrap_or_default();
    Err(NativeError::Source {
        path: path.to_owned(),
        message: format!(
            "unknown schema{version}: missing {}; skipped. This git-session does not know this \
             version of the agent's database: upgrade git-session",
            missing.join(", ")
        ),
    })
}

/// Holds one read-only snapshot of a database: every query of a capture
/// runs in its read transaction, so rows are consistent with each other,
/// and one session's rows are read at a time (memory stays bounded by the
/// largest session, not the database).
pub struct Snapshot<'d> {
    conn: Connection,
    path: std::path::PathBuf,
    db: &'d Database,
    /// Opened `immutable=1` (no `-wal` at the start), with the file's stamp.
    immutable: Option<Stamp>,
}

impl<'d> Snapshot<'d> {
    /// Opens `path` read-only, checks the schema and starts the read.
    pub fn open(path: &Path, db: &'d Database) -> NativeResult<Snapshot<'d>> {
        let immutable = !wal_path(path).exists();
        let conn = open_mode(path, immutable)?;
        check_schema(&conn, path, db)?;
        conn.execute_batch("BEGIN")
            .map_err(|e| source_error(path, e))?;
        Ok(Snapshot {
            conn,
            path: path.to_owned(),
            db,
            immutable: immutable.then(|| Stamp::of(path)),
        })
    }

    /// Returns every session's change token ([`Database::changes`]).
    pub fn tokens(&self) -> NativeResult<BTreeMap<String, String>> {
        let path = &self.path;
        let err = |e| source_error(path, e);
        let Some(changes) = self.db.changes else {
            return Err(NativeError::Source {
                path: path.clone(),
                message: "the adapter declares no change query; this reader reads \
                          databases session by session"
                    .into(),
            });
        };
        let mut out = BTreeMap::new();
        let mut stmt = self.conn.prepare(changes).map_err(err)?;
        let mut rows = stmt.query([]).map_err(err)?;
        while let Some(r) = rows.next().map_err(err)? {
            let id: String = r.get(0).map_err(err)?;
            out.insert(id, value_text(r.get_ref(1).map_err(err)?));
        }
        Ok(out)
    }

    /// Returns every row of one session: table by table in the declared
    /// order, each in rowid order, as JSON objects (see [`Row`]).
    pub fn rows(&mut self, session: &str) -> NativeResult<Vec<Row>> {
        if let Some(stamp) = self.immutable
            && Stamp::of(&self.path) != stamp
        {
            // A writer checkpointed into the file during a read that took
            // no lock: go on as a reader the writer knows about.
            let _ = self.conn.execute_batch("COMMIT");
            self.conn = open_mode(&self.path, false)?;
            self.conn
                .execute_batch("BEGIN")
                .map_err(|e| source_error(&self.path, e))?;
            self.immutable = None;
        }
        let path = &self.path;
        let err = |e| source_error(path, e);
        let mut rows = Vec::new();
        for table in self.db.tables {
            // Optional columns an older schema lacks are left out.
            let have = table_columns(&self.conn, table.name).map_err(err)?;
            let cols: Vec<&'static str> = table
                .columns
                .iter()
                .copied()
                .filter(|c| have.iter().any(|h| h == c))
                .collect();
            let sql = format!(
                "SELECT rowid, {} FROM {} WHERE {} = ?1 ORDER BY rowid",
                cols.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", "),
                quote(table.name),
                quote(table.session),
            );
            let mut stmt = self.conn.prepare_cached(&sql).map_err(err)?;
            let mut q = stmt.query([session]).map_err(err)?;
            while let Some(r) = q.next().map_err(err)? {
                let rowid: i64 = r.get(0).map_err(err)?;
                let mut obj = serde_json::Map::new();
                for (i, c) in cols.iter().enumerate() {
                    obj.insert((*c).to_owned(), json_value(r.get_ref(i + 1).map_err(err)?));
                }
                obj.insert("$rowid".into(), rowid.into());
                rows.push(Row {
                    table: table.name,
                    rowid,
                    json: serde_json::to_vec(&obj).expect("rows serialize"),
                });
            }
        }
        Ok(rows)
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        let _ = self.conn.execute_batch("COMMIT");
    }
}

fn value_text(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Blob(b) => format!("{} bytes", b.len()),
    }
}

fn json_value(v: ValueRef<'_>) -> serde_json::Value {
    match v {
        ValueRef::Null => serde_json::Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => {
            serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, Into::into)
        }
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned().into(),
        ValueRef::Blob(b) => serde_json::json!({
            "$blob_hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        }),
    }
}

/// Returns the column names of `table` (none when it does not exist).
pub fn table_columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    conn.prepare("SELECT name FROM pragma_table_info(?1)")?
        .query_map([table], |r| r.get::<_, String>(0))?
        .collect()
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
