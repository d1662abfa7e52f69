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
//! declared table in one read transaction: the session table's new rows,
//! then which sessions have new rows in the other tables (by each table's
//! [`Incremental`] mark, or, when the adapter declares
//! [`Database::changes`], by the sessions whose change token moved), then
//! session by session those rows through the table's session column,
//! handing each session's rows (JSON objects) to the caller before the
//! next session is read: one session's rows in memory at a time.
//!
//! With a change query, the session table's rows of sessions whose token
//! did not move are passed over (not turned into records), so a capture
//! after one session grew costs that session, not the whole table.
//!
//! A database with a change query whose files moved but whose sessions
//! did not (a checkpoint, another project's session growing) costs that
//! one query: it runs first, on its own, and when no session of interest
//! has a moved token nothing else is read. [`Snapshot::queries`] counts
//! the SQL statements a read ran (SQLite's trace hook), so tests and the
//! bench prove it by count.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use git_session_adapters::source::{Database, Incremental, Row, Table};
use rusqlite::{Connection, OpenFlags, types::ValueRef};

use super::cursor::{RowSession, Stamp};
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

/// Holds what one read of a database produced besides its sessions.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The tables' new high-water marks (rowid or column value).
    pub marks: BTreeMap<String, i64>,
    /// What the reader noticed but read anyway (a newer schema version).
    pub warnings: Vec<String>,
    /// How many SQL statements the read ran (retries included).
    pub queries: u64,
    /// Sessions read whose only rows were their whole-read rows as the
    /// caller last took them ([`RowSession::whole`]): not handed over.
    pub unchanged: usize,
}

thread_local! {
    /// Statements run on this thread's connections, counted by SQLite's
    /// trace hook ([`count_statement`]).
    static STATEMENTS: Cell<u64> = const { Cell::new(0) };
}

/// Counts one statement SQLite starts running (the trace hook).
fn count_statement(event: rusqlite::trace::TraceEvent<'_>) {
    if matches!(event, rusqlite::trace::TraceEvent::Stmt(..)) {
        STATEMENTS.with(|c| c.set(c.get() + 1));
    }
}

/// Returns how many statements this thread's connections have run.
fn statements() -> u64 {
    STATEMENTS.with(Cell::get)
}

/// Holds one session's new rows, handed to the caller of [`read`].
#[derive(Debug)]
pub struct SessionRows {
    /// The session key (the value of [`Table::session`], as text).
    pub key: String,
    /// Its new rows, in declaration order of their tables, then by rowid.
    pub rows: Vec<Row>,
    /// Its change token ([`Database::changes`]), when the adapter declares
    /// a change query.
    pub token: Option<String>,
    /// Per [`Incremental::Column`] table, the highest column value among
    /// `rows` (the session's own mark, for a database with a change query).
    pub highs: BTreeMap<String, i64>,
}

/// Says what a read is to look at.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    /// The tables' marks from the last read ([`Snapshot::marks`]).
    pub marks: &'a BTreeMap<String, i64>,
    /// What the caller knows of each session: a key it does not know gets
    /// its session-table row even when the table's mark had passed it; a
    /// key it knows as another project's (`session: None`) is skipped; a
    /// key whose change token is unchanged is not read; `seen` holds the
    /// session's own marks.
    pub known: &'a BTreeMap<String, RowSession>,
    /// Reads this one session only.
    pub only: Option<&'a str>,
}

impl Scope<'_> {
    fn skip(&self, key: &str) -> bool {
        self.only.is_some_and(|o| o != key)
            || self.known.get(key).is_some_and(|s| s.session.is_none())
    }
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
    conn.trace_v2(
        rusqlite::trace::TraceEventCodes::SQLITE_TRACE_STMT,
        Some(count_statement),
    );
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

/// Reads what is new in `db` within `scope`, as `decl` declares, handing
/// each session's rows to `visit` as soon as they are read (one session's
/// rows in memory at a time).
///
/// A read of a database opened `immutable` (see the module docs) checks
/// before each session that the files did not change meanwhile; if they
/// did, the read starts again and sessions already visited may be visited
/// again with the same rows (the caller's cursor drops them).
pub fn read(
    db: &Path,
    decl: &Database,
    scope: Scope<'_>,
    options: &Options,
    visit: &mut dyn FnMut(SessionRows),
) -> NativeResult<Snapshot> {
    let deadline = Instant::now() + options.wait;
    let mut attempts = 0;
    let counted = statements();
    loop {
        attempts += 1;
        let before = stamps(db);
        let result = (|| -> Result<Snapshot, ReadError> {
            let (conn, mode) = open(db, options)?;
            let unchanged = || {
                mode == Mode::ReadOnly
                    || (stamps(db).0 == before.0 && !sidecar(db, "-wal").exists())
            };
            read_open(&conn, db, decl, scope, &unchanged, visit)
        })();
        match result {
            Ok(mut snapshot) => {
                snapshot.queries = statements() - counted;
                return Ok(snapshot);
            }
            Err(ReadError::Changed) => {
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

/// Reads like [`read`] and returns every session's rows at once (for
/// tests and small databases).
pub fn read_all(
    db: &Path,
    decl: &Database,
    scope: Scope<'_>,
    options: &Options,
) -> NativeResult<(Snapshot, Vec<SessionRows>)> {
    let mut sessions: Vec<SessionRows> = Vec::new();
    let snapshot = read(db, decl, scope, options, &mut |s| {
        // A restarted read hands a session again: keep the last.
        sessions.retain(|o| o.key != s.key);
        sessions.push(s);
    })?;
    Ok((snapshot, sessions))
}

/// Holds a session key as read (its text, and the value to bind).
struct Key {
    text: String,
    value: rusqlite::types::Value,
}

/// Reads the tables on an open connection, in one read transaction: the
/// session table's new rows first, then which sessions have new rows in
/// each other table (or a moved change token), then session by session
/// those rows, through the tables' session index.
fn read_open(
    conn: &Connection,
    db: &Path,
    decl: &Database,
    scope: Scope<'_>,
    unchanged: &dyn Fn() -> bool,
    visit: &mut dyn FnMut(SessionRows),
) -> Result<Snapshot, ReadError> {
    let err = |e: rusqlite::Error| ReadError::from_sqlite(db, e);
    if let (Some(q), None) = (decl.changes, scope.only)
        && nothing_moved(conn, q, scope)
    {
        if !unchanged() {
            return Err(ReadError::Changed);
        }
        return Ok(Snapshot {
            marks: scope.marks.clone(),
            ..Snapshot::default()
        });
    }
    // A deferred transaction whose first SELECT takes the snapshot; every
    // later query of this read sees the same database state.
    conn.execute_batch("BEGIN").map_err(err)?;
    let (present, warning) = check_schema(conn, db, decl)?;
    let mut snapshot = Snapshot {
        warnings: warning.into_iter().collect(),
        ..Snapshot::default()
    };
    let mut order: Vec<Key> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut add = |order: &mut Vec<Key>, key: Key| -> usize {
        *index.entry(key.text.clone()).or_insert_with(|| {
            order.push(key);
            order.len() - 1
        })
    };
    // Which sessions moved (the change query), read first so that the
    // session table's unmoved rows are passed over.
    let tokens: Option<HashMap<String, String>> = match decl.changes {
        Some(q) => {
            let mut stmt = conn.prepare(q).map_err(err)?;
            let mut rows = stmt.query([]).map_err(err)?;
            let mut out = HashMap::new();
            while let Some(r) = rows.next().map_err(err)? {
                let key = key_of(r.get_ref(0).map_err(err)?);
                let token = match r.get_ref(1).map_err(err)? {
                    ValueRef::Null => String::new(),
                    v => key_of(v).text,
                };
                out.insert(key.text, token);
            }
            Some(out)
        }
        None => None,
    };
    // The session table's new rows (of moved sessions, with a change
    // query), kept: they are small.
    let session_table = &decl.tables[0];
    let mut heads: HashMap<String, Vec<Row>> = HashMap::new();
    {
        let mark = scope.marks.get(session_table.name).copied();
        let (sql, mark_value) = select(session_table, &present[0], mark, false);
        let mut stmt = conn.prepare(&sql).map_err(err)?;
        let mut rows = match mark_value {
            Some(m) => stmt.query([m]),
            None => stmt.query([]),
        }
        .map_err(err)?;
        let mut high = mark.unwrap_or(i64::MIN);
        let key_column = 2 + present[0].len();
        while let Some(r) = rows.next().map_err(err)? {
            if let Some(tokens) = &tokens {
                // A known session whose token did not move has nothing new:
                // its row is not turned into a record at all.
                let key = key_of(r.get_ref(key_column).map_err(err)?).text;
                if scope.skip(&key)
                    || tokens.get(&key).is_some_and(|t| {
                        scope.known.get(&key).and_then(|s| s.token.as_ref()) == Some(t)
                    })
                {
                    high = high.max(position_of(r).map_err(err)?);
                    continue;
                }
            }
            let (row, position) = row_json(r, session_table, &present[0]).map_err(err)?;
            let key = key_of(r.get_ref(key_column).map_err(err)?);
            high = high.max(position);
            if scope.skip(&key.text) {
                continue;
            }
            heads.entry(key.text.clone()).or_default().push(row);
            add(&mut order, key);
        }
        if high != i64::MIN {
            snapshot.marks.insert(session_table.name.to_owned(), high);
        }
    }
    // Per other table, the sessions with rows to read.
    let mut wanted: Vec<HashSet<String>> = vec![HashSet::new(); decl.tables.len()];
    for (i, table) in decl.tables.iter().enumerate().skip(1) {
        if let Some(tokens) = &tokens {
            // A change query says which sessions moved: those are read,
            // by their own marks ([`RowSession::seen`]).
            for key in &order {
                if tokens.get(&key.text).is_some_and(|t| {
                    scope.known.get(&key.text).and_then(|s| s.token.as_ref()) != Some(t)
                }) {
                    wanted[i].insert(key.text.clone());
                }
            }
            continue;
        }
        let mark = scope.marks.get(table.name).copied();
        let pos = position_expr(table);
        let name = quote_ident(table.name);
        let high: Option<i64> = conn
            .query_row(&format!("SELECT max({pos}) FROM {name}"), [], |r| r.get(0))
            .map_err(err)?;
        let Some(high) = high else { continue };
        snapshot.marks.insert(table.name.to_owned(), high);
        let filter = match (table.incremental, mark) {
            (Incremental::RowId, Some(_)) => " WHERE rowid > ?1".to_owned(),
            (Incremental::Column(_), Some(_)) => format!(" WHERE {pos} >= ?1"),
            _ => String::new(),
        };
        if matches!(table.incremental, Incremental::RowId) && mark.is_some_and(|m| high <= m) {
            continue;
        }
        let session = quote_ident(table.session);
        let sql = format!(
            "SELECT {session}, min(rowid) FROM {name}{filter} GROUP BY {session} ORDER BY 2"
        );
        let mut stmt = conn.prepare(&sql).map_err(err)?;
        let mut rows = match (filter.is_empty(), mark) {
            (false, Some(m)) => stmt.query([m]),
            _ => stmt.query([]),
        }
        .map_err(err)?;
        while let Some(r) = rows.next().map_err(err)? {
            let key = key_of(r.get_ref(0).map_err(err)?);
            if scope.skip(&key.text) {
                continue;
            }
            wanted[i].insert(key.text.clone());
            add(&mut order, key);
        }
    }
    // Session by session.
    let rank = |t: &str| decl.tables.iter().position(|d| d.name == t).unwrap_or(0);
    let mut statements = Vec::with_capacity(decl.tables.len());
    for (i, table) in decl.tables.iter().enumerate() {
        // The session table's statement fetches a session's row whole.
        let by_mark = i > 0 && (tokens.is_some() || scope.marks.contains_key(table.name));
        let (sql, _) = select(table, &present[i], by_mark.then_some(0), true);
        statements.push(conn.prepare(&sql).map_err(err)?);
    }
    for key in order {
        let mut rows = heads.remove(&key.text).unwrap_or_default();
        if rows.is_empty() && !scope.known.contains_key(&key.text) {
            // A session met for the first time whose session row was not
            // among the new ones: fetch that row, so the adapter gets the
            // session's facts first.
            fetch(
                &mut statements[0],
                &key,
                None,
                session_table,
                &present[0],
                &mut rows,
            )
            .map_err(err)?;
        }
        let mut highs = BTreeMap::new();
        for (i, table) in decl.tables.iter().enumerate().skip(1) {
            if !wanted[i].contains(&key.text) {
                continue;
            }
            let mark = if tokens.is_some() {
                Some(
                    scope
                        .known
                        .get(&key.text)
                        .and_then(|s| s.seen.get(table.name).copied())
                        .unwrap_or(i64::MIN),
                )
            } else {
                scope.marks.get(table.name).copied()
            };
            let high = fetch(
                &mut statements[i],
                &key,
                mark,
                table,
                &present[i],
                &mut rows,
            )
            .map_err(err)?;
            if let (Incremental::Column(_), Some(h)) = (table.incremental, high) {
                highs.insert(table.name.to_owned(), h);
            }
        }
        if rows.is_empty() {
            continue;
        }
        // Declaration order of tables, then rowid: stable and documented.
        rows.sort_by_key(|r| (rank(r.table), r.rowid));
        rows.dedup_by(|a, b| a.table == b.table && a.rowid == b.rowid);
        if !unchanged() {
            return Err(ReadError::Changed);
        }
        let token = tokens.as_ref().and_then(|t| t.get(&key.text).cloned());
        // A captured session whose only rows are its whole-read ones, as
        // they were when last taken (without a change query every session
        // row comes again): nothing to hand over.
        if token.is_none()
            && highs.is_empty()
            && rows.iter().all(|r| is_whole(decl, r.table))
            && scope.known.get(&key.text).is_some_and(|k| {
                k.session.is_some() && k.whole.is_some() && k.whole == whole_digest(decl, &rows)
            })
        {
            snapshot.unchanged += 1;
            continue;
        }
        visit(SessionRows {
            key: key.text,
            rows,
            token,
            highs,
        });
    }
    drop(statements);
    conn.execute_batch("COMMIT").map_err(err)?;
    Ok(snapshot)
}

/// Says whether `table` is read whole each time ([`Incremental::Whole`]).
pub fn is_whole(decl: &Database, table: &str) -> bool {
    decl.tables
        .iter()
        .any(|t| t.name == table && t.incremental == Incremental::Whole)
}

/// Returns a digest of the rows of whole-read tables among `rows`, if any
/// (what [`RowSession::whole`] keeps).
pub fn whole_digest(decl: &Database, rows: &[Row]) -> Option<String> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let mut any = false;
    for r in rows.iter().filter(|r| is_whole(decl, r.table)) {
        any = true;
        h.update(r.table.as_bytes());
        h.update([0]);
        h.update(&r.json);
        h.update([0]);
    }
    any.then(|| format!("{:x}", h.finalize()))
}

/// Says whether the change query `q`, run alone (one statement, its own
/// snapshot), shows every session of interest with the token the caller
/// knows: then nothing was added or changed that a full read would hand
/// over. Any doubt (an error, a session not known yet) says no, and the
/// full read, which checks the schema first, decides.
fn nothing_moved(conn: &Connection, q: &str, scope: Scope<'_>) -> bool {
    let Ok(mut stmt) = conn.prepare(q) else {
        return false;
    };
    let Ok(mut rows) = stmt.query([]) else {
        return false;
    };
    loop {
        match rows.next() {
            Ok(Some(r)) => {
                let (Ok(k), Ok(t)) = (r.get_ref(0), r.get_ref(1)) else {
                    return false;
                };
                let key = key_of(k).text;
                if scope.skip(&key) {
                    continue;
                }
                let token = match t {
                    ValueRef::Null => String::new(),
                    v => key_of(v).text,
                };
                let known = scope.known.get(&key).and_then(|s| s.token.as_deref());
                if known != Some(token.as_str()) {
                    return false;
                }
            }
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}

/// Returns the SQL expression of a table's cursor position.
fn position_expr(table: &Table) -> String {
    match table.incremental {
        Incremental::Column(c) => quote_ident(c),
        _ => "rowid".to_owned(),
    }
}

/// Returns the query for a table's rows (after the mark `?1` when `mark`
/// is given; of one session `?2` when `by_session`) and the mark it takes.
fn select(
    table: &Table,
    columns: &[&str],
    mark: Option<i64>,
    by_session: bool,
) -> (String, Option<i64>) {
    let mut cols = String::from("rowid, ");
    cols.push_str(&position_expr(table));
    for c in columns {
        cols.push_str(", ");
        cols.push_str(&quote_ident(c));
    }
    cols.push_str(", ");
    cols.push_str(&quote_ident(table.session));
    let name = quote_ident(table.name);
    let mut conds = Vec::new();
    if mark.is_some() {
        match table.incremental {
            Incremental::RowId => conds.push("rowid > ?1".to_owned()),
            Incremental::Column(c) => conds.push(format!("{} >= ?1", quote_ident(c))),
            Incremental::Whole => {}
        }
    }
    if by_session {
        conds.push(format!("{} = ?2", quote_ident(table.session)));
    }
    let mark = if conds.iter().any(|c| c.contains("?1")) {
        mark
    } else {
        None
    };
    let filter = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    (
        format!("SELECT {cols} FROM {name}{filter} ORDER BY rowid"),
        mark,
    )
}

/// Appends one session's rows of `table` to `out` (after `mark` when the
/// statement has one, see [`select`]); returns the highest position read.
fn fetch(
    stmt: &mut rusqlite::Statement<'_>,
    key: &Key,
    mark: Option<i64>,
    table: &Table,
    columns: &[&str],
    out: &mut Vec<Row>,
) -> rusqlite::Result<Option<i64>> {
    // `?1` (the mark) may be absent from the statement; binding it is harmless.
    let mut rows = stmt.query(rusqlite::params![mark.unwrap_or(i64::MIN), key.value])?;
    let mut high = None;
    while let Some(r) = rows.next()? {
        let (row, position) = row_json(r, table, columns)?;
        high = Some(high.map_or(position, |h: i64| h.max(position)));
        out.push(row);
    }
    Ok(high)
}

/// Returns a selected row's cursor position (see [`row_json`]).
fn position_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<i64> {
    let rowid: i64 = r.get(0)?;
    Ok(match r.get_ref(1)? {
        ValueRef::Integer(i) => i,
        ValueRef::Real(f) => f as i64,
        _ => rowid,
    })
}

/// Turns a selected row (rowid, position, columns..., session) into the
/// record and its cursor position. The record's JSON is written straight
/// from SQLite's values, byte for byte what serializing them as a
/// `serde_json` object (columns in order, then `$rowid`) gives, without
/// building the object; the text of a [`Table::json_objects`] column that
/// is a JSON object goes in as it is (checked, not parsed into a value).
fn row_json(
    r: &rusqlite::Row<'_>,
    table: &Table,
    columns: &[&str],
) -> rusqlite::Result<(Row, i64)> {
    let rowid: i64 = r.get(0)?;
    let position = position_of(r)?;
    let mut json = Vec::with_capacity(256);
    json.push(b'{');
    for (i, c) in columns.iter().enumerate() {
        write_json(&mut json, *c);
        json.push(b':');
        match r.get_ref(2 + i)? {
            ValueRef::Null => json.extend_from_slice(b"null"),
            ValueRef::Integer(n) => write_json(&mut json, &n),
            ValueRef::Text(t) if table.json_objects.contains(c) && is_json_object(t) => {
                json.extend_from_slice(t)
            }
            ValueRef::Text(t) => write_json(&mut json, &*String::from_utf8_lossy(t)),
            v => write_json(&mut json, &value_json(v)),
        }
        json.push(b',');
    }
    json.extend_from_slice(b"\"$rowid\":");
    write_json(&mut json, &rowid);
    json.push(b'}');
    Ok((
        Row {
            table: table.name,
            rowid,
            json,
        },
        position,
    ))
}

/// Says whether `text` is one JSON object (valid UTF-8, nothing after it
/// but whitespace), so it can stand in a record as it is.
fn is_json_object(text: &[u8]) -> bool {
    text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
        && std::str::from_utf8(text).is_ok()
        && serde_json::from_slice::<serde::de::IgnoredAny>(text).is_ok()
}

/// Appends `value` as compact JSON.
fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(out, value).expect("JSON values serialize");
}

/// Returns a session key's text and the value to bind it by.
fn key_of(v: ValueRef<'_>) -> Key {
    let text = match v {
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Null => String::new(),
        ValueRef::Blob(b) => String::from_utf8_lossy(b).into_owned(),
    };
    Key {
        text,
        value: v.into(),
    }
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

/// Says why a read failed: busy (retried), the files of an immutable read
/// changed (read again), or anything else.
enum ReadError {
    Busy(NativeError),
    Changed,
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
            ReadError::Changed => NativeError::Source {
                path: PathBuf::new(),
                message: "the database changed while it was read".into(),
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The record written straight from SQLite's values is, byte for byte,
    /// the `serde_json` object of them (what the records' digests and the
    /// adapters were made with).
    #[test]
    fn a_row_is_written_as_the_json_object_of_its_values() {
        let conn = Connection::open_in_memory().expect("db");
        conn.execute_batch(
            "CREATE TABLE t (a, b, c, d, e, f, s);
             INSERT INTO t VALUES (NULL, -42, 1.5, 'q\"\\\n\u{7}é\u{2028}', X'00ff10', CAST(X'ff41' AS TEXT), 'k');
             INSERT INTO t VALUES (9223372036854775807, 0.1, 1e300, '', X'', 3, 7);",
        )
        .expect("rows");
        let table = Table {
            name: "t",
            columns: &["a", "b", "c", "d", "e", "f"],
            session: "s",
            incremental: Incremental::RowId,
            json_objects: &[],
        };
        let (sql, _) = select(&table, table.columns, None, false);
        let mut stmt = conn.prepare(&sql).expect("select");
        let mut rows = stmt.query([]).expect("query");
        let mut seen = 0;
        while let Some(r) = rows.next().expect("row") {
            let (row, position) = row_json(r, &table, table.columns).expect("record");
            let mut obj = serde_json::Map::new();
            for (i, c) in table.columns.iter().enumerate() {
                obj.insert(
                    (*c).to_owned(),
                    value_json(r.get_ref(2 + i).expect("value")),
                );
            }
            obj.insert("$rowid".into(), row.rowid.into());
            let expected = serde_json::to_vec(&serde_json::Value::Object(obj)).expect("json");
            assert_eq!(
                String::from_utf8_lossy(&row.json),
                String::from_utf8_lossy(&expected)
            );
            assert_eq!(position, row.rowid);
            seen += 1;
        }
        assert_eq!(seen, 2);
    }

    /// A `json_objects` column holding a JSON object is the object in the
    /// record (parsed once by the adapter); any other text stays a string,
    /// so a bad value is still the adapter's to report, and the record
    /// always parses.
    #[test]
    fn a_json_object_column_is_the_object_and_other_text_stays_a_string() {
        let conn = Connection::open_in_memory().expect("db");
        conn.execute_batch("CREATE TABLE t (data, s);")
            .expect("table");
        let texts = [
            " {\"type\":\"text\",\"text\":\"a \\\"quoted\\\" line\\n\",\"n\":[1,2.5,null]}\n",
            "{\"open\": ",
            "{\"a\":1} {\"b\":2}",
            "[1,2]",
            "42",
            "not json",
            "",
        ];
        for t in texts {
            conn.execute("INSERT INTO t VALUES (?1, 'k')", [t])
                .expect("row");
        }
        conn.execute(
            "INSERT INTO t VALUES (CAST(X'7b2261223a22ff227d' AS TEXT), 'k')",
            [],
        )
        .expect("invalid utf-8");
        let table = Table {
            name: "t",
            columns: &["data"],
            session: "s",
            incremental: Incremental::RowId,
            json_objects: &["data"],
        };
        let (sql, _) = select(&table, table.columns, None, false);
        let mut stmt = conn.prepare(&sql).expect("select");
        let mut rows = stmt.query([]).expect("query");
        let mut records = Vec::new();
        while let Some(r) = rows.next().expect("row") {
            let (row, _) = row_json(r, &table, table.columns).expect("record");
            let v: serde_json::Value = serde_json::from_slice(&row.json).expect("a record parses");
            records.push(v["data"].clone());
        }
        assert_eq!(
            records[0],
            serde_json::from_str::<serde_json::Value>(texts[0]).expect("object")
        );
        for (i, t) in texts.iter().enumerate().skip(1) {
            assert_eq!(records[i], serde_json::json!(t), "{t:?} stays text");
        }
        assert_eq!(records[7], serde_json::json!("{\"a\":\"\u{fffd}\"}"));
    }
}
