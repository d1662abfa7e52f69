//! Write-back of a session that lives in a database (OpenCode's
//! `opencode.db`): the rows of a [`git_session_adapters::ChangeSet`] that
//! hold the session itself, and the agent's own importer tried first.
//!
//! * **Never over another session.** The row marked `session_row` decides:
//!   present with the same values (JSON text compared as JSON) and every
//!   other row present too, the session is in place and nothing is
//!   written; present otherwise, the write-back is refused (`--fork`).
//! * **The agent's importer first.** When the change set names one
//!   ([`NativeImport`]) and its program is on `PATH`, the document is
//!   written to a temporary file and the program run from the session's
//!   directory; it succeeded when the session row is there afterwards.
//! * **Rows as the fallback**, into an existing database only (the agent
//!   creates and migrates its own), whose tables have the columns written,
//!   never while another process has it open, after one backup, in one
//!   transaction; a row whose key is present is left alone.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use git_session_adapters::{NativeImport, RepoFact, RowWrite};
use serde_json::Value;

use super::resume::{NativeTarget, backup, open_by_other_process};
use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::store::Store;

/// How long an agent's importer may run.
const IMPORT_TIMEOUT: Duration = Duration::from_secs(120);

/// Holds what the root crate knows about the repository a session is
/// written for (see [`RepoFact`]).
pub(crate) struct RepoFacts {
    pub root_commit: Option<String>,
    pub worktree: Option<PathBuf>,
    pub cwd: PathBuf,
}

/// Returns `row` with its repository facts and store-relative paths filled in.
pub(crate) fn fill(row: &RowWrite, facts: &RepoFacts, root: &Path) -> RowWrite {
    let mut row = row.clone();
    for (column, fact) in &row.repo {
        let value = match fact {
            RepoFact::RootCommit(otherwise) => facts
                .root_commit
                .clone()
                .unwrap_or_else(|| (*otherwise).to_owned()),
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
        row.columns.insert(column.clone(), Value::String(value));
    }
    for column in &row.root_relative {
        if let Some(Value::String(s)) = row.columns.get(column) {
            let abs = root.join(s).to_string_lossy().into_owned();
            row.columns.insert(column.clone(), Value::String(abs));
        }
    }
    row.repo.clear();
    row.root_relative.clear();
    row
}

/// Says whether a database session is already there.
pub(crate) enum Presence {
    /// Not there: write it.
    Absent,
    /// There, with the same content: nothing to do.
    InPlace,
    /// Another session under the id, in this database.
    Different(PathBuf),
}

/// Checks the session row (and the others) of `rows` against the database.
pub(crate) fn in_place(root: &Path, rows: &[RowWrite]) -> OpResult<Presence> {
    let Some(session) = rows.iter().find(|r| r.session_row) else {
        return Ok(Presence::Absent);
    };
    let db = root.join(&session.database);
    if !db.is_file() {
        return Ok(Presence::Absent);
    }
    let conn = crate::native::sqlite::open(&db)?;
    let sql = |e: rusqlite::Error| conflict(&db, e);
    let Some(stored) = fetch(&conn, session).map_err(sql)? else {
        return Ok(Presence::Absent);
    };
    let same = session
        .columns
        .iter()
        .all(|(column, want)| stored.get(column).is_none_or(|have| same_value(have, want)));
    if !same {
        return Ok(Presence::Different(db));
    }
    for row in rows
        .iter()
        .filter(|r| !r.session_row && r.database == session.database)
    {
        if fetch(&conn, row).map_err(sql)?.is_none() && row.table != "project" {
            return Ok(Presence::Different(db));
        }
    }
    Ok(Presence::InPlace)
}

/// Returns the stored row with `row`'s key, as JSON values by column.
fn fetch(
    conn: &rusqlite::Connection,
    row: &RowWrite,
) -> rusqlite::Result<Option<serde_json::Map<String, Value>>> {
    let have = crate::native::sqlite::table_columns(conn, &row.table)?;
    if have.is_empty() || row.key.is_empty() {
        return Ok(None);
    }
    let cond: Vec<String> = row
        .key
        .iter()
        .map(|k| format!("{} = ?", quote_ident(k)))
        .collect();
    let sql = format!(
        "SELECT * FROM {} WHERE {}",
        quote_ident(&row.table),
        cond.join(" AND ")
    );
    let keys: Vec<rusqlite::types::Value> = row
        .key
        .iter()
        .map(|k| sql_value(row.columns.get(k).unwrap_or(&Value::Null)))
        .collect();
    let mut stmt = conn.prepare(&sql)?;
    let names: Vec<String> = stmt
        .column_names()
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let mut q = stmt.query(rusqlite::params_from_iter(keys.iter()))?;
    let Some(r) = q.next()? else {
        return Ok(None);
    };
    let mut out = serde_json::Map::new();
    for (i, name) in names.iter().enumerate() {
        let v = match r.get_ref(i)? {
            rusqlite::types::ValueRef::Null => Value::Null,
            rusqlite::types::ValueRef::Integer(n) => n.into(),
            rusqlite::types::ValueRef::Real(f) => {
                serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
            }
            rusqlite::types::ValueRef::Text(t) => {
                Value::String(String::from_utf8_lossy(t).into_owned())
            }
            rusqlite::types::ValueRef::Blob(_) => Value::Null,
        };
        out.insert(name.clone(), v);
    }
    Ok(Some(out))
}

/// Compares a stored value with a rendered one: numbers by value, JSON
/// text as JSON, objects against the text the database holds.
fn same_value(have: &Value, want: &Value) -> bool {
    let parse = |v: &Value| match v {
        Value::String(s) => serde_json::from_str::<Value>(s).unwrap_or_else(|_| v.clone()),
        other => other.clone(),
    };
    let (a, b) = (parse(have), parse(want));
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b || (a.is_null() && b.is_null()),
    }
}

/// Runs the agent's importer; `Ok(Err(why))` when it is missing or failed
/// (the rows are written instead).
pub(crate) fn import(
    import: &NativeImport,
    target: &NativeTarget<'_>,
    rows: &[RowWrite],
) -> OpResult<Result<(), String>> {
    let Some(program) = find_on_path(&import.program, (target.env)("PATH").as_deref()) else {
        return Ok(Err(format!("`{}` is not on PATH", import.program)));
    };
    let dir = tempfile::tempdir().map_err(OpError::io(Path::new("temporary directory")))?;
    let name = Path::new(&import.file_name)
        .file_name()
        .map_or_else(|| PathBuf::from("session.json"), PathBuf::from);
    let file = dir.path().join(name);
    std::fs::write(&file, &import.document).map_err(OpError::io(&file))?;
    let subst = |text: &str| {
        text.replace("{file}", &file.to_string_lossy())
            .replace("{home}", &target.home.to_string_lossy())
            .replace("{root}", &target.root.to_string_lossy())
    };
    let mut cmd = std::process::Command::new(&program);
    cmd.args(import.args.iter().map(|a| subst(a)))
        .current_dir(target.cwd)
        .env("HOME", target.home)
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
    // It worked when the session is there now.
    match in_place(target.root, rows)? {
        Presence::Absent => Ok(Err(format!(
            "`{}` exited 0 but the session is not in {}",
            import.program,
            target.root.display()
        ))),
        _ => Ok(Ok(())),
    }
}

fn find_on_path(program: &str, path: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?).find_map(|dir| {
        let candidate = dir.join(program);
        let meta = std::fs::metadata(&candidate).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
    })
}

/// Inserts `rows` into their database in one transaction after one
/// backup; returns the database written.
pub(crate) fn insert(
    store: &Store,
    clock: &Clock,
    root: &Path,
    rows: &[RowWrite],
) -> OpResult<PathBuf> {
    let Some(first) = rows.first() else {
        return Ok(root.to_owned());
    };
    let db = root.join(&first.database);
    if !db.is_file() {
        return Err(OpError::Conflict {
            message: format!("there is no database at {}", db.display()),
            hint: Some(
                "start the agent once so that it creates and migrates its database, then run resume again"
                    .into(),
            ),
        });
    }
    if let Some(pid) = open_by_other_process(&db) {
        return Err(OpError::Conflict {
            message: format!("{} is open in process {pid}", db.display()),
            hint: Some("quit the agent, then run resume again (or install it on PATH so that its own import is used)".into()),
        });
    }
    let sql = |e: rusqlite::Error| conflict(&db, e);
    let mut conn = rusqlite::Connection::open(&db).map_err(sql)?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
    // Check every table first: an unknown schema writes nothing.
    let mut columns: std::collections::HashMap<String, Vec<String>> = Default::default();
    for row in rows {
        if !columns.contains_key(&row.table) {
            let have = crate::native::sqlite::table_columns(&conn, &row.table).map_err(sql)?;
            columns.insert(row.table.clone(), have);
        }
        let have = &columns[&row.table];
        let missing: Vec<&String> = row
            .columns
            .keys()
            .chain(row.key.iter())
            .filter(|c| !have.contains(c))
            .collect();
        if have.is_empty() || !missing.is_empty() {
            return Err(OpError::Conflict {
                message: format!(
                    "{} has an unknown schema: table {} lacks {}",
                    db.display(),
                    row.table,
                    if have.is_empty() {
                        "everything".to_owned()
                    } else {
                        missing
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
                hint: Some(
                    "upgrade git-session, or let the agent's own import write the session".into(),
                ),
            });
        }
    }
    backup(store, clock, &conn, &db)?;
    let tx = conn.transaction().map_err(sql)?;
    for row in rows {
        if fetch(&tx, row).map_err(sql)?.is_some() {
            continue;
        }
        let names: Vec<&String> = row.columns.keys().collect();
        let insert = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            quote_ident(&row.table),
            names
                .iter()
                .map(|c| quote_ident(c))
                .collect::<Vec<_>>()
                .join(", "),
            vec!["?"; names.len()].join(", ")
        );
        let values: Vec<rusqlite::types::Value> = row.columns.values().map(sql_value).collect();
        tx.execute(&insert, rusqlite::params_from_iter(values.iter()))
            .map_err(sql)?;
    }
    tx.commit().map_err(sql)?;
    Ok(db)
}

fn sql_value(v: &Value) -> rusqlite::types::Value {
    match v {
        Value::Null => rusqlite::types::Value::Null,
        Value::Bool(b) => rusqlite::types::Value::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => rusqlite::types::Value::Integer(i),
            None => rusqlite::types::Value::Real(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => rusqlite::types::Value::Text(s.clone()),
        other => rusqlite::types::Value::Text(other.to_string()),
    }
}

fn conflict(db: &Path, e: rusqlite::Error) -> OpError {
    OpError::Conflict {
        message: format!("{}: {e}", db.display()),
        hint: None,
    }
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
