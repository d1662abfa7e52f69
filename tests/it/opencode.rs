//! OpenCode: capture from its SQLite store (and from the JSON `storage/`
//! tree of older releases, built here from the same sample rows by
//! `fake_tree`), and write-back that the real client
//! (`opencode run --session`) continues.
//!
//! Stores are built from `fixtures/opencode/oracle-sample` (the client's own
//! schema and rows) with the recorded project moved into the test repo. The
//! real-client tests (`*_resume_*`) run `shared/oracle/opencode-*.sh` against
//! the mock model and compare the `turns` the client sent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::oracle::{prefix as oracle_prefix, resume_check, shared_oracle, turns};
use crate::support::*;

const RECORDED_CWD: &str = "/tmp/oracle-sample/opencode/project";
const RECORDED_PROJECT: &str = "339b79cf39b89bf4409a44344b9f1a5dfea2ed58";
const AUTHENTIC: &str = "ses_dd9bef97bffevgJiskCcm7yFfU";
const SAMPLE_SESSIONS: [&str; 3] = [
    AUTHENTIC,
    "ses_0handcrafted0minimal0001",
    "ses_0handcrafted0full000001",
];

fn fixture() -> PathBuf {
    fixtures().join("opencode/oracle-sample")
}

/// Returns the database path under a HOME.
fn db_path(home: &Path) -> PathBuf {
    home.join(".local/share/opencode/opencode.db")
}

/// Returns the root commit of the repository at `dir` (OpenCode's project id).
fn root_commit(dir: &Path) -> String {
    let out = Command::new("git")
        .args(["rev-list", "--max-parents=0", "HEAD"])
        .current_dir(dir)
        .output()
        .unwrap();
    let roots = text(&out.stdout);
    let mut roots: Vec<&str> = roots.split_whitespace().collect();
    roots.sort();
    roots.first().map(|s| (*s).to_owned()).unwrap_or_default()
}

/// Builds `HOME/.local/share/opencode/opencode.db` with the client's schema
/// and the sample's rows, recorded as run in `cwd` (project `project`).
fn fake_store(home: &Path, cwd: &Path, project: &str) -> PathBuf {
    let db = db_path(home);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(&std::fs::read_to_string(fixture().join("schema.sql")).unwrap())
        .unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    let cwd = cwd.to_str().unwrap();
    let rows: Value =
        serde_json::from_slice(&std::fs::read(fixture().join("rows.json")).unwrap()).unwrap();
    for table in ["migration", "project", "session", "message", "part"] {
        for row in rows[table].as_array().unwrap() {
            insert(&conn, table, row.as_object().unwrap(), cwd, project);
        }
    }
    drop(conn);
    db
}

fn insert(
    conn: &rusqlite::Connection,
    table: &str,
    row: &Map<String, Value>,
    cwd: &str,
    project: &str,
) {
    let names: Vec<&String> = row.keys().collect();
    let values: Vec<rusqlite::types::Value> = row
        .values()
        .map(|v| match v {
            Value::Null => rusqlite::types::Value::Null,
            Value::Number(n) if n.is_i64() => rusqlite::types::Value::Integer(n.as_i64().unwrap()),
            Value::Number(n) => rusqlite::types::Value::Real(n.as_f64().unwrap()),
            Value::String(s) => rusqlite::types::Value::Text(
                s.replace(RECORDED_CWD, cwd)
                    .replace(RECORDED_PROJECT, project),
            ),
            other => rusqlite::types::Value::Text(other.to_string()),
        })
        .collect();
    let sql = format!(
        "INSERT INTO \"{table}\" ({}) VALUES ({})",
        names
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", "),
        vec!["?"; names.len()].join(", ")
    );
    conn.execute(&sql, rusqlite::params_from_iter(values))
        .unwrap();
}

/// Returns every file under `dir` with its SHA-256.
fn hash_tree(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let digest = Sha256::digest(std::fs::read(&path).unwrap());
                out.insert(
                    path.clone(),
                    digest.iter().map(|b| format!("{b:02x}")).collect(),
                );
            }
        }
    }
    out
}

fn import(repo: &Repo, home: &Path) -> (String, String) {
    let out = repo
        .session()
        .args([
            "import",
            "--agent",
            "opencode",
            "--home",
            home.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "import failed: {}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn opencode_capture_reads_every_session_of_the_repo_and_never_writes_the_store() {
    let repo = Repo::new();
    let home = repo.outside("oc-home");
    let db = fake_store(&home, &repo.root, &root_commit(&repo.root));
    let store = db.parent().unwrap().to_owned();
    let before = hash_tree(&store);
    let (out, err) = import(&repo, &home);
    for id in SAMPLE_SESSIONS {
        assert!(out.contains(id), "{id} not captured: {out}{err}");
    }
    assert_eq!(hash_tree(&store), before, "capture changed the store");
    let events = repo.events(AUTHENTIC);
    let k = kinds(&events);
    for kind in [
        "session.start",
        "message.user",
        "message.thinking",
        "message.assistant",
        "tool.call",
        "tool.result",
        "command.run",
        "checkpoint",
    ] {
        assert!(k.contains(&kind.to_owned()), "no {kind} in {k:?}");
    }
    let user = events.iter().find(|e| e["type"] == "message.user").unwrap();
    assert_eq!(user["payload"]["text"], "Please write hello into note.txt");
    // Nothing new: nothing appended.
    let (again, _) = import(&repo, &home);
    assert!(
        !again.contains("ses_"),
        "an unchanged store appended: {again}"
    );
    assert_eq!(repo.events(AUTHENTIC).len(), events.len());
    assert_eq!(hash_tree(&store), before);
}

#[test]
fn opencode_capture_skips_sessions_of_other_projects() {
    let repo = Repo::new();
    let home = repo.outside("oc-home");
    let elsewhere = repo.outside("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    fake_store(
        &home,
        &elsewhere,
        "0000000000000000000000000000000000000000",
    );
    let (out, _) = import(&repo, &home);
    assert!(!out.contains("ses_"), "{out}");
}

/// Adds a message row to the sample session `AUTHENTIC`, as OpenCode does.
fn insert_message(conn: &rusqlite::Connection, id: &str, t: i64, data: &str) {
    conn.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
        rusqlite::params![id, AUTHENTIC, t, data],
    )
    .unwrap();
}

/// Adds a part row of `message` to the sample session `AUTHENTIC`.
fn insert_part(conn: &rusqlite::Connection, id: &str, message: &str, t: i64, data: &str) {
    conn.execute(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
        rusqlite::params![id, message, AUTHENTIC, t, data],
    )
    .unwrap();
}

#[test]
fn opencode_capture_takes_new_rows_and_finished_tools_incrementally() {
    let repo = Repo::new();
    let home = repo.outside("oc-home");
    let db = fake_store(&home, &repo.root, &root_commit(&repo.root));
    import(&repo, &home);
    let before = repo.events(AUTHENTIC).len();
    // OpenCode continues the session: a user message, an assistant message
    // whose tool is still running (held back), then it finishes.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let t = 1_795_938_200_000i64;
    insert_message(
        &conn,
        "msg_3000000000001aaaaaaaaaaaaaa",
        t,
        r#"{"role":"user","time":{"created":1795938200000}}"#,
    );
    insert_part(
        &conn,
        "prt_3000000000001aaaaaaaaaaaaaa",
        "msg_3000000000001aaaaaaaaaaaaaa",
        t,
        r#"{"type":"text","text":"Now list the files"}"#,
    );
    insert_message(
        &conn,
        "msg_3000000000002aaaaaaaaaaaaaa",
        t + 10,
        r#"{"role":"assistant","parentID":"msg_3000000000001aaaaaaaaaaaaaa","time":{"created":1795938200010}}"#,
    );
    insert_part(
        &conn,
        "prt_3000000000002aaaaaaaaaaaaaa",
        "msg_3000000000002aaaaaaaaaaaaaa",
        t + 11,
        r#"{"type":"tool","tool":"bash","callID":"call_x","state":{"status":"running","input":{"command":"ls"},"time":{"start":1795938200011}}}"#,
    );
    // OpenCode touches the session with every change (and appends to its
    // event sequence); capture reads only sessions that moved.
    let touch = |t: i64| {
        conn.execute(
            "UPDATE session SET time_updated = ?1 WHERE id = ?2",
            rusqlite::params![t, AUTHENTIC],
        )
        .unwrap();
    };
    touch(t + 12);
    let (out, _) = import(&repo, &home);
    assert!(out.contains(AUTHENTIC), "{out}");
    let mid = repo.events(AUTHENTIC);
    assert_eq!(
        kinds(&mid[before..]),
        ["meta", "message.user"],
        "the running request waits"
    );
    conn.execute(
        "UPDATE part SET time_updated = ?1, data = ?2 WHERE id = 'prt_3000000000002aaaaaaaaaaaaaa'",
        rusqlite::params![
            t + 20,
            r#"{"type":"tool","tool":"bash","callID":"call_x","state":{"status":"completed","input":{"command":"ls"},"output":"note.txt","metadata":{"exit":0},"title":"ls","time":{"start":1795938200011,"end":1795938200020}}}"#
        ],
    )
    .unwrap();
    conn.execute(
        "UPDATE message SET time_updated = ?1, data = ?2 WHERE id = 'msg_3000000000002aaaaaaaaaaaaaa'",
        rusqlite::params![
            t + 21,
            r#"{"role":"assistant","parentID":"msg_3000000000001aaaaaaaaaaaaaa","time":{"created":1795938200010,"completed":1795938200021},"finish":"tool-calls"}"#
        ],
    )
    .unwrap();
    touch(t + 22);
    drop(conn);
    import(&repo, &home);
    let after = repo.events(AUTHENTIC);
    assert_eq!(
        kinds(&after[mid.len()..]),
        ["meta", "tool.call", "tool.result", "command.run"]
    );
    let call = &after[mid.len() + 1];
    assert_eq!(
        call["payload"]["status"], "completed",
        "the final state, once"
    );
}

/// Runs `import --json` and returns its document.
fn import_json(repo: &Repo, home: &Path) -> Value {
    let out = repo
        .session()
        .args([
            "import",
            "--json",
            "--agent",
            "opencode",
            "--home",
            home.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "import failed: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Moves a file's mtime forward by `secs` seconds, content unchanged.
fn touch_file(path: &Path, secs: u64) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    let mtime = file.metadata().unwrap().modified().unwrap();
    file.set_modified(mtime + std::time::Duration::from_secs(secs))
        .unwrap();
}

#[test]
fn opencode_unchanged_database_costs_at_most_one_query() {
    let repo = Repo::new();
    let home = repo.outside("oc-home");
    let db = fake_store(&home, &repo.root, &root_commit(&repo.root));
    // Another project's session in the same database.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated) \
         SELECT 'ses_0otherproject000000000001', project_id, 'other', '/elsewhere/project', 'Other', version, time_created, time_updated \
         FROM session WHERE id = ?1",
        [AUTHENTIC],
    )
    .unwrap();
    drop(conn);
    let first = import_json(&repo, &home);
    assert_eq!(first["sessions"].as_array().unwrap().len(), 3, "{first}");
    assert!(first["queries"].as_u64().unwrap() > 1, "{first}");
    // Files unchanged: two stats, no query.
    let again = import_json(&repo, &home);
    assert_eq!(again["queries"], 0, "{again}");
    // Files moved, sessions did not (a checkpoint rewrote the file): the
    // change query alone.
    touch_file(&db, 5);
    let moved = import_json(&repo, &home);
    assert_eq!(moved["queries"], 1, "{moved}");
    assert_eq!(moved["sessions"], serde_json::json!([]), "{moved}");
    // Another project's session moved: still the one query.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE session SET time_updated = time_updated + 1 WHERE id = 'ses_0otherproject000000000001'",
        [],
    )
    .unwrap();
    drop(conn);
    let foreign = import_json(&repo, &home);
    assert_eq!(foreign["queries"], 1, "{foreign}");
    // One of ours moved: it is read and appended to.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE session SET title = 'Renamed', time_updated = time_updated + 1 WHERE id = ?1",
        [AUTHENTIC],
    )
    .unwrap();
    drop(conn);
    let grown = import_json(&repo, &home);
    assert!(grown["queries"].as_u64().unwrap() > 1, "{grown}");
    assert_eq!(
        grown["sessions"][0]["id"]
            .as_str()
            .map(|s| s.contains(AUTHENTIC)),
        Some(true),
        "{grown}"
    );
}

/// Adds a session row copied from the authentic one with another id,
/// directory and project id.
fn add_session_row(conn: &rusqlite::Connection, id: &str, directory: &str, project: &str) {
    // The session's project row (a foreign key).
    conn.execute(
        "INSERT OR IGNORE INTO project (id, worktree, vcs, time_created, time_updated, sandboxes) VALUES (?1, '/', 'git', 0, 0, '[]')",
        [project],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated) \
         SELECT ?1, ?2, 'copy', ?3, 'Copy', version, time_created, time_updated FROM session WHERE id = ?4",
        rusqlite::params![id, project, directory, AUTHENTIC],
    )
    .unwrap();
}

#[test]
fn opencode_sessions_belong_by_directory_and_project_row() {
    let repo = Repo::new();
    let home = repo.outside("oc-home");
    let root = root_commit(&repo.root);
    let db = fake_store(&home, &repo.root, &root);
    let sub = repo.root.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let elsewhere = repo.outside("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let inside = repo.root.to_str().unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    // Ours: a subdirectory, and a session from before the first commit.
    add_session_row(
        &conn,
        "ses_0subdirectory000000000001",
        sub.to_str().unwrap(),
        &root,
    );
    add_session_row(&conn, "ses_0beforefirstcommit0000001", inside, "global");
    // Hostile: another directory under our project id, a path that climbs
    // out of the repository, our directory under another project's id, and
    // a project id carrying a terminal escape.
    add_session_row(
        &conn,
        "ses_0outsidedirectory0000001",
        elsewhere.to_str().unwrap(),
        &root,
    );
    add_session_row(
        &conn,
        "ses_0climbsout00000000000001",
        &format!("{inside}/../elsewhere"),
        &root,
    );
    add_session_row(
        &conn,
        "ses_0otherprojectid000000001",
        inside,
        "1111111111111111111111111111111111111111",
    );
    add_session_row(
        &conn,
        "ses_0escapeinproject00000001",
        inside,
        "\u{1b}[31mred",
    );
    drop(conn);
    let (out, err) = import(&repo, &home);
    for id in SAMPLE_SESSIONS.iter().chain(&[
        "ses_0subdirectory000000000001",
        "ses_0beforefirstcommit0000001",
    ]) {
        assert!(out.contains(id), "{id} not captured: {out}{err}");
    }
    for id in [
        "ses_0outsidedirectory0000001",
        "ses_0climbsout00000000000001",
        "ses_0otherprojectid000000001",
        "ses_0escapeinproject00000001",
    ] {
        assert!(!out.contains(id), "{id} captured: {out}");
    }
    assert!(
        err.contains("session ses_0otherprojectid000000001 ran in this repository but is filed under project 1111111111111111111111111111111111111111"),
        "{err}"
    );
    assert!(err.contains(&format!("root commit {root}")), "{err}");
    assert!(err.contains("ses_0escapeinproject00000001"), "{err}");
    assert!(
        !err.contains('\u{1b}'),
        "a raw escape reached the terminal: {err:?}"
    );
    // Remembered as another project's: when the database moves again, no
    // second warning, nothing of them captured.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE session SET title = 'Renamed', time_updated = time_updated + 1 WHERE id = ?1",
        [AUTHENTIC],
    )
    .unwrap();
    drop(conn);
    let (again, err) = import(&repo, &home);
    assert!(again.contains(AUTHENTIC), "{again}");
    assert!(!again.contains("ses_0otherprojectid"), "{again}");
    assert!(!err.contains("filed under project"), "{err}");
}

#[test]
fn opencode_bad_rows_are_warnings_and_the_rest_is_captured() {
    let repo = Repo::new();
    let home = repo.outside("oc-home");
    let db = fake_store(&home, &repo.root, &root_commit(&repo.root));
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE part SET data = '{oops' WHERE id = 'prt_2264120ba001ZTqOJJQ0MXc6m5'",
        [],
    )
    .unwrap();
    conn.execute(
        "UPDATE message SET data = 'not json' WHERE id = 'msg_7b1f7a1d676603'",
        [],
    )
    .unwrap();
    drop(conn);
    let (out, err) = import(&repo, &home);
    assert!(out.contains(AUTHENTIC), "{out}");
    assert!(
        err.contains("table part row prt_2264120ba001ZTqOJJQ0MXc6m5: data is not valid JSON"),
        "{err}"
    );
    assert!(
        err.contains("table message row msg_7b1f7a1d676603"),
        "{err}"
    );
    let k = kinds(&repo.events(AUTHENTIC));
    assert!(
        k.contains(&"tool.result".to_owned()),
        "the rest is there: {k:?}"
    );
}

#[test]
fn opencode_unknown_schema_is_refused_with_a_clear_message() {
    let repo = Repo::new();
    let home = repo.outside("oc-home");
    let db = db_path(&home);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE session (id text primary key, directory text);
         CREATE TABLE message (id text primary key, session_id text, body text);",
    )
    .unwrap();
    drop(conn);
    let (out, err) = import(&repo, &home);
    assert!(!out.contains("ses_"), "{out}");
    assert!(err.contains("opencode.db"), "{err}");
    assert!(err.to_lowercase().contains("schema"), "{err}");
}

/// Runs the real client once in `home` so that it creates its database.
pub(crate) fn init_client_db(home: &Path, cwd: &Path) {
    let bin = oracle_prefix().join("bin/opencode");
    let out = Command::new(&bin)
        .args(["session", "list"])
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .output()
        .unwrap();
    assert!(
        db_path(home).is_file(),
        "opencode made no database: {}",
        text(&out.stderr)
    );
}

/// Returns PATH with or without the oracle's `bin/` (where `opencode` is).
fn path_with_client(with: bool) -> String {
    let bin = oracle_prefix().join("bin");
    let base = std::env::var("PATH").unwrap_or_default();
    let rest: Vec<&str> = base
        .split(':')
        .filter(|p| Path::new(p) != bin && !Path::new(p).join("opencode").exists())
        .collect();
    if with {
        format!("{}:{}", bin.display(), rest.join(":"))
    } else {
        rest.join(":")
    }
}

/// Resumes `id` into `home` with or without `opencode` on PATH; returns stdout.
fn resume_into(repo: &Repo, id: &str, home: &Path, with_client: bool) -> String {
    let out = repo
        .session()
        .env("PATH", path_with_client(with_client))
        .args([
            "resume",
            id,
            "--agent",
            "opencode",
            "--home",
            home.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "resume {id} failed: {}",
        text(&out.stderr)
    );
    let printed = text(&out.stdout);
    assert!(printed.contains("--session ses_"), "{printed}");
    printed + &text(&out.stderr)
}

/// The sample store as the client wrote it, in a project of its own: the
/// original a resumed session's history is compared with. Returns its HOME
/// and project directory.
fn original_store(repo: &Repo) -> (PathBuf, PathBuf) {
    let home = repo.outside("original-home");
    let project = repo.outside("original-project");
    std::fs::create_dir_all(&project).unwrap();
    git_init(&project);
    fake_store(&home, &project, &root_commit(&project));
    (home, project)
}

/// Captures the sample, resumes each session into fresh HOMEs by both write
/// paths, and compares the client's history with the original's.
#[test]
fn opencode_samples_resume_with_the_same_history_by_import_and_by_rows() {
    let repo = Repo::new();
    let project = root_commit(&repo.root);
    let (original_home, original_project) = original_store(&repo);
    let source_home = repo.outside("source-home");
    fake_store(&source_home, &repo.root, &project);
    import(&repo, &source_home);

    let by_import = repo.outside("fresh-import");
    let by_rows = repo.outside("fresh-rows");
    std::fs::create_dir_all(&by_import).unwrap();
    init_client_db(&by_rows, &repo.root);
    for id in SAMPLE_SESSIONS {
        let note = resume_into(&repo, id, &by_import, true);
        assert!(
            note.contains("by `opencode import`"),
            "{id} took the import path: {note}"
        );
        let note = resume_into(&repo, id, &by_rows, false);
        assert!(
            note.contains("by rows inserted into"),
            "{id} took the row path: {note}"
        );
        // Twice is a no-op, by either path.
        let again = resume_into(&repo, id, &by_import, true);
        assert!(again.contains("already in place"), "{again}");
        let again = resume_into(&repo, id, &by_rows, false);
        assert!(again.contains("already in place"), "{again}");
    }
    let roots = [original_project.as_path(), repo.root.as_path()];
    for id in SAMPLE_SESSIONS {
        let want = resume_check("opencode", &original_home, id, &original_project);
        assert!(!turns(&want, &roots).is_empty());
        for home in [&by_import, &by_rows] {
            let got = resume_check("opencode", home, id, &repo.root);
            assert_eq!(
                turns(&got, &roots),
                turns(&want, &roots),
                "{id} resumed from {}: history differs",
                home.display()
            );
        }
    }
    // OpenCode continued each session it was given, in both stores:
    // captured from there, each continuation is its prompt once, into the
    // session (the first store captured) or a fork of it (the second, as
    // the session moved on meanwhile), never a new session repeating it.
    let sessions = |repo: &Repo| -> Vec<String> {
        let listed: Value = serde_json::from_str(&repo.ok(&["list", "--json"])).unwrap();
        listed
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    };
    // The probes each session holds, by origin (the samples hold some).
    let probes = |repo: &Repo, ids: &[String]| -> Vec<Vec<String>> {
        ids.iter()
            .map(|id| {
                repo.events(id)
                    .iter()
                    .filter(|e| {
                        e["type"] == "message.user"
                            && e["payload"]["text"]
                                .as_str()
                                .is_some_and(|t| t.starts_with("ORACLE_RESUME_PROBE"))
                    })
                    .map(|e| e["origin"]["native_id"].to_string())
                    .collect()
            })
            .collect()
    };
    let listed = sessions(&repo);
    let had: BTreeSet<String> = probes(&repo, &listed).into_iter().flatten().collect();
    for home in [&by_import, &by_rows] {
        let (out, err) = import(&repo, home);
        assert!(!err.contains("error"), "{out}{err}");
    }
    let after = sessions(&repo);
    assert_eq!(
        after.len(),
        listed.len() + SAMPLE_SESSIONS.len(),
        "{after:?}"
    );
    let each = probes(&repo, &after);
    for (id, held) in after.iter().zip(&each) {
        let distinct: BTreeSet<&String> = held.iter().collect();
        assert_eq!(distinct.len(), held.len(), "{id} holds a probe twice");
    }
    let new: BTreeSet<String> = each
        .into_iter()
        .flatten()
        .filter(|p| !had.contains(p))
        .collect();
    assert_eq!(new.len(), 2 * SAMPLE_SESSIONS.len(), "{new:?}");
    // The resume checks continued the sessions in the fresh stores, so the
    // session under the id has other content now: refused, and --fork
    // writes a new session id (recorded as a fork).
    let out = repo
        .session()
        .env("PATH", path_with_client(false))
        .args([
            "resume",
            AUTHENTIC,
            "--agent",
            "opencode",
            "--home",
            by_rows.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--fork"),
        "{}",
        text(&out.stderr)
    );
    let out = repo
        .session()
        .env("PATH", path_with_client(false))
        .args([
            "resume",
            AUTHENTIC,
            "--agent",
            "opencode",
            "--fork",
            "--home",
            by_rows.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    let fork = printed
        .split_whitespace()
        .find(|w| w.starts_with("ses_") && *w != AUTHENTIC)
        .unwrap_or_else(|| panic!("no new session id in {printed}"))
        .to_owned();
    let conn = rusqlite::Connection::open(db_path(&by_rows)).unwrap();
    let count = |id: &str| -> i64 {
        conn.query_row(
            "SELECT count(*) FROM part WHERE session_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
    };
    // The sample's 14 parts and the 4 of OpenCode's turn, captured above.
    assert_eq!(count(&fork), 18, "the fork has the captured parts");
    assert!(
        count(AUTHENTIC) > 14,
        "the original keeps what the check added"
    );
    drop(conn);
    assert!(repo.ok(&["list"]).contains(&fork), "the fork is recorded");
}

fn git_init(dir: &Path) {
    for args in [
        vec!["init", "-q", "."],
        vec![
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    ] {
        let ok = Command::new("git")
            .args(&args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
}

/// A fresh real session, captured while the client writes it: every
/// capture succeeds, none takes a torn part, and the last one completes it.
#[test]
fn opencode_fresh_roundtrip_captured_while_running_resumes_with_the_same_history() {
    let repo = Repo::new();
    let home = repo.outside("rt-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut child = Command::new("bash")
        .arg(shared_oracle().join("opencode-roundtrip.sh"))
        .arg(&home)
        .arg(&repo.root)
        .env("ORACLE_PREFIX", oracle_prefix())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut captures = 0;
    loop {
        let done = child.try_wait().unwrap().is_some();
        if db_path(&home).is_file() {
            import(&repo, &home);
            captures += 1;
        }
        if done {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "roundtrip failed: {}",
        text(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = report["session_id"].as_str().unwrap().to_owned();
    import(&repo, &home);
    assert!(
        captures > 1,
        "captured only {captures} times during the run"
    );
    // No torn part: every text the log holds is the part's final text.
    let conn = rusqlite::Connection::open(db_path(&home)).unwrap();
    let events = repo.events(&id);
    for e in &events {
        let Some(row) = e["payload"]["native"]["row"].as_object() else {
            continue;
        };
        if e["payload"]["native"]["table"] != "part" || e["type"] == "meta" {
            continue;
        }
        let stored: String = conn
            .query_row(
                "SELECT data FROM part WHERE id = ?1",
                [row["id"].as_str().unwrap()],
                |r| r.get(0),
            )
            .unwrap();
        let stored: Value = serde_json::from_str(&stored).unwrap();
        if let Some(text) = stored.get("text") {
            assert_eq!(&e["payload"]["text"], text, "torn part {}", row["id"]);
        }
    }
    assert!(kinds(&events).contains(&"tool.result".to_owned()));
    drop(conn);
    let fresh = repo.outside("rt-fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    resume_into(&repo, &id, &fresh, true);
    let roots = [repo.root.as_path()];
    let want = resume_check("opencode", &home, &id, &repo.root);
    let got = resume_check("opencode", &fresh, &id, &repo.root);
    assert_eq!(turns(&got, &roots), turns(&want, &roots));
}

/// Builds an empty OpenCode database (the client's schema, no rows) under `home`.
fn empty_store(home: &Path) -> PathBuf {
    let db = db_path(home);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(&std::fs::read_to_string(fixture().join("schema.sql")).unwrap())
        .unwrap();
    db
}

fn resume_rows(repo: &Repo, id: &str, home: &Path) -> std::process::Output {
    repo.session()
        .env("PATH", path_with_client(false))
        .args([
            "resume",
            id,
            "--agent",
            "opencode",
            "--home",
            home.to_str().unwrap(),
        ])
        .output()
        .unwrap()
}

#[test]
fn opencode_rows_write_back_is_guarded() {
    let repo = Repo::new();
    let project = root_commit(&repo.root);
    let source = repo.outside("source-home");
    fake_store(&source, &repo.root, &project);
    import(&repo, &source);

    // No database: refused with what to do.
    let fresh = repo.outside("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    let out = resume_rows(&repo, AUTHENTIC, &fresh);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("run the agent once"),
        "{}",
        text(&out.stderr)
    );

    // Held by another process: refused, nothing written.
    let db = empty_store(&fresh);
    let mut holder = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1]); c.execute('select 1 from session').fetchall(); print('ready', flush=True); time.sleep(60)")
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut ready,
    )
    .unwrap();
    let out = resume_rows(&repo, AUTHENTIC, &fresh);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains(&format!("open in process {}", holder.id())),
        "{}",
        text(&out.stderr)
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let sessions: i64 = conn
        .query_row("SELECT count(*) FROM session", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sessions, 0);
    drop(conn);

    // Free: every row, with the project, in one go; a backup was taken.
    let out = resume_rows(&repo, AUTHENTIC, &fresh);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&format!("opencode --session {AUTHENTIC}")));
    assert!(text(&out.stderr).contains("by rows inserted into"));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (pid, dir, path): (String, String, String) = conn
        .query_row(
            "SELECT project_id, directory, path FROM session WHERE id = ?1",
            [AUTHENTIC],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(pid, project);
    assert_eq!(Path::new(&dir), repo.root);
    assert_eq!(path, "");
    let worktree: String = conn
        .query_row(
            "SELECT worktree FROM project WHERE id = ?1",
            [&project],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(Path::new(&worktree), repo.root);
    let parts: i64 = conn
        .query_row(
            "SELECT count(*) FROM part WHERE session_id = ?1",
            [AUTHENTIC],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(parts, 14);
    // The data columns are JSON objects without the id columns.
    let data: String = conn
        .query_row(
            "SELECT data FROM part WHERE id = 'prt_2264120c3001Am12FPEgjCFdKG'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let data: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(data["state"]["status"], "completed");
    assert!(data.get("id").is_none() && data.get("sessionID").is_none());
    drop(conn);
    let backups = std::fs::read_dir(repo.root.join(".git/session/backups"))
        .unwrap()
        .count();
    assert!(backups >= 1);

    // Again: in place, nothing written.
    let out = resume_rows(&repo, AUTHENTIC, &fresh);
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("already in place"),
        "{}",
        text(&out.stderr)
    );

    // A target whose schema lacks a column is refused before any write.
    let odd = repo.outside("odd");
    let db = empty_store(&odd);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("ALTER TABLE part RENAME COLUMN data TO body")
        .unwrap();
    drop(conn);
    let out = resume_rows(&repo, AUTHENTIC, &odd);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("unknown schema (table part has no column data)"),
        "{}",
        text(&out.stderr)
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let sessions: i64 = conn
        .query_row("SELECT count(*) FROM session", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sessions, 0, "nothing was written");
}

// --- The older JSON `storage/` tree -------------------------------------

/// Returns the storage tree directory under a HOME.
fn tree_path(home: &Path) -> PathBuf {
    home.join(".local/share/opencode/storage")
}

/// Writes `value` as pretty JSON to `path`, making its directory.
fn write_json(path: &Path, value: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

/// Builds `HOME/.local/share/opencode/storage/` as releases before 1.2
/// wrote it, from the sample's rows of `sessions` (as run in `cwd`, project
/// `project`): `project/`, `session/<project>/`, `message/<session>/`,
/// `part/<message>/`, each object its row's `data` plus its ids.
fn fake_tree(home: &Path, cwd: &Path, project: &str, sessions: &[&str]) -> PathBuf {
    let tree = tree_path(home);
    let cwd = cwd.to_str().unwrap();
    let raw = std::fs::read_to_string(fixture().join("rows.json"))
        .unwrap()
        .replace(RECORDED_CWD, cwd)
        .replace(RECORDED_PROJECT, project);
    let rows: Value = serde_json::from_str(&raw).unwrap();
    write_json(
        &tree.join(format!("project/{project}.json")),
        &serde_json::json!({"id": project, "worktree": cwd, "vcs": "git",
            "time": {"created": 1_795_938_100_000i64}}),
    );
    for s in rows["session"].as_array().unwrap() {
        let id = s["id"].as_str().unwrap();
        if !sessions.contains(&id) {
            continue;
        }
        write_json(
            &tree.join(format!("session/{project}/{id}.json")),
            &serde_json::json!({
                "id": id, "projectID": project, "slug": s["slug"], "directory": s["directory"],
                "parentID": s["parent_id"], "title": s["title"], "version": "0.15.0",
                "time": {"created": s["time_created"], "updated": s["time_updated"]},
            }),
        );
    }
    for (table, dir) in [("message", "session_id"), ("part", "message_id")] {
        for r in rows[table].as_array().unwrap() {
            let session = r["session_id"].as_str().unwrap();
            if !sessions.contains(&session) {
                continue;
            }
            let mut object: Map<String, Value> =
                serde_json::from_str(r["data"].as_str().unwrap()).unwrap();
            object.insert("id".into(), r["id"].clone());
            object.insert("sessionID".into(), r["session_id"].clone());
            if table == "part" {
                object.insert("messageID".into(), r["message_id"].clone());
            }
            let path = tree.join(format!(
                "{table}/{}/{}.json",
                r[dir].as_str().unwrap(),
                r["id"].as_str().unwrap()
            ));
            write_json(&path, &Value::Object(object));
        }
    }
    tree
}

/// Returns each event's type and text, the parts of a capture that say
/// what the session holds (not when or from which row it was read).
fn story(events: &[Value]) -> Vec<(String, Value)> {
    events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["payload"]["text"].clone(),
            )
        })
        .collect()
}

#[test]
fn opencode_storage_tree_is_captured_like_the_database_incrementally_and_read_only() {
    let repo = Repo::new();
    let project = root_commit(&repo.root);
    // The same sessions from the database, for comparison.
    let db_repo = Repo::new();
    let db_home = db_repo.outside("oc-home");
    fake_store(&db_home, &db_repo.root, &root_commit(&db_repo.root));
    import(&db_repo, &db_home);

    let home = repo.outside("oc-home");
    let tree = fake_tree(&home, &repo.root, &project, &SAMPLE_SESSIONS);
    assert!(!db_path(&home).exists());
    let before = hash_tree(&tree);
    let (out, err) = import(&repo, &home);
    for id in SAMPLE_SESSIONS {
        assert!(out.contains(id), "{id} not captured: {out}{err}");
        assert_eq!(
            story(&repo.events(id)),
            story(&db_repo.events(id)),
            "{id}: the tree and the database give different events"
        );
    }
    assert_eq!(hash_tree(&tree), before, "capture changed the tree");
    assert!(!db_path(&home).exists(), "capture made a database");
    let events = repo.events(AUTHENTIC);

    // Unchanged: nothing appended, and no file is read again. A file whose
    // size and mtime are as they were is not parsed: garbage of the same
    // length under the old mtime gives no warning.
    let part = tree.join("part/msg_2264107ce001tRx5iw6CXJWsDK/prt_2264107d9001ZjvRrQg7qpgYV5.json");
    let len = std::fs::metadata(&part).unwrap().len() as usize;
    let mtime = std::fs::metadata(&part).unwrap().modified().unwrap();
    std::fs::write(&part, "x".repeat(len)).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&part)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (again, err) = import(&repo, &home);
    assert!(
        !again.contains("ses_"),
        "an unchanged tree appended: {again}"
    );
    assert!(
        !err.contains("prt_2264107d9001"),
        "an unchanged file was read: {err}"
    );
    assert_eq!(repo.events(AUTHENTIC).len(), events.len());

    // OpenCode continues the session: a user message, an assistant message
    // whose tool is still running (held back), then it finishes.
    let t = 1_795_938_200_000i64;
    let (user, assistant) = (
        "msg_3000000000001aaaaaaaaaaaaaa",
        "msg_3000000000002aaaaaaaaaaaaaa",
    );
    write_json(
        &tree.join(format!("message/{AUTHENTIC}/{user}.json")),
        &serde_json::json!({"id": user, "sessionID": AUTHENTIC, "role": "user", "time": {"created": t}}),
    );
    write_json(
        &tree.join(format!("part/{user}/prt_3000000000001aaaaaaaaaaaaaa.json")),
        &serde_json::json!({"id": "prt_3000000000001aaaaaaaaaaaaaa", "sessionID": AUTHENTIC,
            "messageID": user, "type": "text", "text": "Now list the files"}),
    );
    let assistant_file = tree.join(format!("message/{AUTHENTIC}/{assistant}.json"));
    write_json(
        &assistant_file,
        &serde_json::json!({"id": assistant, "sessionID": AUTHENTIC, "role": "assistant",
            "parentID": user, "time": {"created": t + 10}}),
    );
    let tool = tree.join(format!(
        "part/{assistant}/prt_3000000000002aaaaaaaaaaaaaa.json"
    ));
    write_json(
        &tool,
        &serde_json::json!({"id": "prt_3000000000002aaaaaaaaaaaaaa", "sessionID": AUTHENTIC,
            "messageID": assistant, "type": "tool", "tool": "bash", "callID": "call_x",
            "state": {"status": "running", "input": {"command": "ls"}, "time": {"start": t + 11}}}),
    );
    let (out, _) = import(&repo, &home);
    assert!(out.contains(AUTHENTIC), "{out}");
    let mid = repo.events(AUTHENTIC);
    assert_eq!(
        kinds(&mid[events.len()..]),
        ["meta", "message.user"],
        "the running request waits"
    );
    write_json(
        &tool,
        &serde_json::json!({"id": "prt_3000000000002aaaaaaaaaaaaaa", "sessionID": AUTHENTIC,
            "messageID": assistant, "type": "tool", "tool": "bash", "callID": "call_x",
            "state": {"status": "completed", "input": {"command": "ls"}, "output": "note.txt",
                "metadata": {"exit": 0}, "title": "ls", "time": {"start": t + 11, "end": t + 20}}}),
    );
    write_json(
        &assistant_file,
        &serde_json::json!({"id": assistant, "sessionID": AUTHENTIC, "role": "assistant",
            "parentID": user, "time": {"created": t + 10, "completed": t + 21}, "finish": "tool-calls"}),
    );
    import(&repo, &home);
    let after = repo.events(AUTHENTIC);
    assert_eq!(
        kinds(&after[mid.len()..]),
        ["meta", "tool.call", "tool.result", "command.run"]
    );
    assert_eq!(
        after[mid.len() + 1]["payload"]["status"],
        "completed",
        "the final state, once"
    );
    let (again, _) = import(&repo, &home);
    assert!(!again.contains("ses_"), "{again}");
}

#[test]
fn opencode_database_wins_over_the_storage_tree() {
    let repo = Repo::new();
    let project = root_commit(&repo.root);
    let home = repo.outside("oc-home");
    fake_store(&home, &repo.root, &project);
    // OpenCode migrated the tree into its database and left the tree: the
    // same sessions in both, the tree's copy told apart by its title and
    // its first prompt. One session is in the tree only.
    let tree = fake_tree(&home, &repo.root, &project, &SAMPLE_SESSIONS);
    let session_file = tree.join(format!("session/{project}/{AUTHENTIC}.json"));
    let mut s: Value = serde_json::from_slice(&std::fs::read(&session_file).unwrap()).unwrap();
    s["title"] = "STORAGE COPY".into();
    write_json(&session_file, &s);
    let prompt =
        tree.join("part/msg_2264107ce001tRx5iw6CXJWsDK/prt_2264107d9001ZjvRrQg7qpgYV5.json");
    let mut p: Value = serde_json::from_slice(&std::fs::read(&prompt).unwrap()).unwrap();
    p["text"] = "STORAGE COPY".into();
    write_json(&prompt, &p);
    // A message the tree's copy has and the database's has not: not
    // captured either (the database's copy is the session).
    let extra = "msg_3000000000009storagecopy1";
    write_json(
        &tree.join(format!("message/{AUTHENTIC}/{extra}.json")),
        &serde_json::json!({"id": extra, "sessionID": AUTHENTIC, "role": "user",
            "time": {"created": 1_795_938_300_000i64}}),
    );
    write_json(
        &tree.join(format!("part/{extra}/prt_3000000000009storagecopy1.json")),
        &serde_json::json!({"id": "prt_3000000000009storagecopy1", "sessionID": AUTHENTIC,
            "messageID": extra, "type": "text", "text": "STORAGE COPY"}),
    );
    let only = "ses_0storage0only0000000001";
    write_json(
        &tree.join(format!("session/{project}/{only}.json")),
        &serde_json::json!({"id": only, "projectID": project, "slug": "old", "directory": repo.root,
            "title": "From storage", "version": "0.15.0", "time": {"created": 1_795_938_000_000i64, "updated": 1_795_938_000_010i64}}),
    );
    let m = "msg_1000000000001storageonly01";
    write_json(
        &tree.join(format!("message/{only}/{m}.json")),
        &serde_json::json!({"id": m, "sessionID": only, "role": "user", "time": {"created": 1_795_938_000_001i64}}),
    );
    write_json(
        &tree.join(format!("part/{m}/prt_1000000000001storageonly01.json")),
        &serde_json::json!({"id": "prt_1000000000001storageonly01", "sessionID": only, "messageID": m,
            "type": "text", "text": "An old prompt"}),
    );

    let (out, err) = import(&repo, &home);
    for id in SAMPLE_SESSIONS.iter().chain([&only]) {
        assert!(out.contains(id), "{id} not captured: {out}{err}");
        let events = repo.events(id);
        let starts = events
            .iter()
            .filter(|e| e["type"] == "session.start")
            .count();
        assert_eq!(starts, 1, "{id} captured {starts} times");
    }
    let events = repo.events(AUTHENTIC);
    let all = serde_json::to_string(&events).unwrap();
    assert!(
        !all.contains("STORAGE COPY"),
        "the tree's copy was captured"
    );
    assert_eq!(
        events.iter().find(|e| e["type"] == "message.user").unwrap()["payload"]["text"],
        "Please write hello into note.txt"
    );
    let old = repo.events(only);
    assert!(
        old.iter().any(|e| e["payload"]["text"] == "An old prompt"),
        "{old:?}"
    );
    // Nothing new: nothing appended, the tree's copies still not read.
    let (again, _) = import(&repo, &home);
    assert!(!again.contains("ses_"), "{again}");
    assert_eq!(repo.events(AUTHENTIC).len(), events.len());
}

#[test]
fn opencode_storage_tree_hostile_names_and_bad_json_are_warnings() {
    let repo = Repo::new();
    let project = root_commit(&repo.root);
    let home = repo.outside("oc-home");
    let tree = fake_tree(&home, &repo.root, &project, &SAMPLE_SESSIONS);
    // A message that is no JSON, a part whose id tries to leave the tree, a
    // session file and a project directory with control characters and
    // dots in their names, and a session file naming a hostile id.
    let bad_message = format!("message/{AUTHENTIC}/msg_9999999999999badjson0001.json");
    std::fs::write(tree.join(&bad_message), "{not json").unwrap();
    write_json(
        &tree.join("part/msg_2264107ce001tRx5iw6CXJWsDK/prt_9999999999999hostile0001.json"),
        &serde_json::json!({"id": "../../../escape", "type": "text", "text": "evil"}),
    );
    write_json(
        &tree.join(format!("session/{project}/ses_..evil\u{1b}[31m.json")),
        &serde_json::json!({"id": "ses_..evil", "directory": repo.root, "projectID": project}),
    );
    write_json(
        &tree.join("session/evil\u{7}group/ses_0evilgroup000000001.json"),
        &serde_json::json!({"id": "ses_0evilgroup000000001", "directory": repo.root, "projectID": project}),
    );
    let sneaky = "ses_0sneaky00000000000001";
    write_json(
        &tree.join(format!("session/{project}/{sneaky}.json")),
        &serde_json::json!({"id": "../../sneaky", "directory": repo.root, "projectID": project}),
    );
    // A part file larger than any part (sparse: no disk spent).
    let huge = "part/msg_2264107ce001tRx5iw6CXJWsDK/prt_9999999999999huge00000001.json";
    std::fs::File::create(tree.join(huge))
        .unwrap()
        .set_len((64 << 20) + 1)
        .unwrap();
    let before = hash_tree(&tree);
    let out = repo
        .session()
        .args([
            "import",
            "--agent",
            "opencode",
            "--home",
            home.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    for id in SAMPLE_SESSIONS {
        assert!(stdout.contains(id), "{id} not captured: {stdout}{stderr}");
    }
    for named in [
        bad_message.as_str(),
        "prt_9999999999999hostile0001.json",
        "ses_..evil",
        "evil\\u{7}group",
        sneaky,
        "prt_9999999999999huge00000001.json: larger than",
    ] {
        assert!(
            stderr.contains(named),
            "no warning naming {named:?}: {stderr}"
        );
    }
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{7}'),
        "a control character reached the terminal: {stderr:?}"
    );
    assert!(
        !stdout.contains("evil") && !stdout.contains("sneaky"),
        "{stdout}"
    );
    assert!(
        !serde_json::to_string(&repo.events(AUTHENTIC))
            .unwrap()
            .contains("evil")
    );
    assert_eq!(hash_tree(&tree), before, "capture changed the tree");
    assert!(!home.join(".local/share/escape").exists() && !home.join("escape").exists());
}

#[test]
fn opencode_storage_captured_session_resumes_as_rows() {
    let repo = Repo::new();
    let project = root_commit(&repo.root);
    let home = repo.outside("oc-home");
    fake_tree(&home, &repo.root, &project, &SAMPLE_SESSIONS);
    import(&repo, &home);
    // Into an OpenCode of today (a database, no tree), by direct rows.
    let fresh = repo.outside("fresh");
    let db = empty_store(&fresh);
    let out = resume_rows(&repo, AUTHENTIC, &fresh);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&format!("--session {AUTHENTIC}")));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [AUTHENTIC], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT count(*) FROM session WHERE id = ?1"), 1);
    // Every message and part the tree held (the sample's rows).
    let rows: Value =
        serde_json::from_slice(&std::fs::read(fixture().join("rows.json")).unwrap()).unwrap();
    let recorded = |table: &str| {
        rows[table]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["session_id"] == AUTHENTIC)
            .count() as i64
    };
    assert_eq!(
        count("SELECT count(*) FROM message WHERE session_id = ?1"),
        recorded("message")
    );
    assert_eq!(
        count("SELECT count(*) FROM part WHERE session_id = ?1"),
        recorded("part")
    );
    let prompt: String = conn
        .query_row(
            "SELECT data FROM part WHERE session_id = ?1 ORDER BY message_id, id LIMIT 1",
            [AUTHENTIC],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        prompt.contains("Please write hello into note.txt"),
        "{prompt}"
    );
}

#[test]
fn opencode_session_captured_from_the_tree_continues_from_the_database_once_migrated() {
    let repo = Repo::new();
    let project = root_commit(&repo.root);
    let home = repo.outside("oc-home");
    fake_tree(&home, &repo.root, &project, &SAMPLE_SESSIONS);
    import(&repo, &home);
    let before: Vec<usize> = SAMPLE_SESSIONS
        .iter()
        .map(|id| repo.events(id).len())
        .collect();
    // OpenCode 1.2 starts and migrates the tree into its database (the
    // tree stays), then the session goes on in the database only.
    let db = fake_store(&home, &repo.root, &project);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let t = 1_795_938_200_000i64;
    insert_message(
        &conn,
        "msg_3000000000001aaaaaaaaaaaaaa",
        t,
        r#"{"role":"user","time":{"created":1795938200000}}"#,
    );
    insert_part(
        &conn,
        "prt_3000000000001aaaaaaaaaaaaaa",
        "msg_3000000000001aaaaaaaaaaaaaa",
        t,
        r#"{"type":"text","text":"Now in the database"}"#,
    );
    drop(conn);
    import(&repo, &home);
    for (id, n) in SAMPLE_SESSIONS.iter().zip(before) {
        let events = repo.events(id);
        let starts = events
            .iter()
            .filter(|e| e["type"] == "session.start")
            .count();
        assert_eq!(starts, 1, "{id} started twice");
        let users = |events: &[Value]| {
            events
                .iter()
                .filter(|e| e["type"] == "message.user")
                .map(|e| e["payload"]["text"].clone())
                .collect::<Vec<_>>()
        };
        let mut texts = users(&events);
        if *id == AUTHENTIC {
            assert_eq!(texts.pop().unwrap(), "Now in the database");
        }
        assert_eq!(texts, users(&events[..n]), "{id}: a message captured twice");
    }
    let (again, _) = import(&repo, &home);
    assert!(!again.contains("ses_"), "{again}");
}

/// Ends a spawned `git session watch` when the test ends (by its own pid).
struct Watching(std::process::Child);

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn opencode_watch_captures_a_file_written_into_the_storage_tree() {
    use std::io::BufRead;
    let repo = Repo::new();
    let project = root_commit(&repo.root);
    let tree = fake_tree(&repo.home, &repo.root, &project, &[AUTHENTIC]);
    let mut cmd = repo.spawnable_in(&repo.root);
    cmd.args(["watch", "--agent", "opencode"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = Watching(cmd.spawn().unwrap());
    let mut lines = std::io::BufReader::new(child.0.stderr.take().unwrap()).lines();
    loop {
        let line = lines.next().unwrap().unwrap();
        if line.starts_with("watching opencode") {
            break;
        }
    }
    let count = || {
        let out = repo
            .session()
            .args(["show", AUTHENTIC, "--json"])
            .output()
            .unwrap();
        if !out.status.success() {
            return 0;
        }
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["events"].as_array().unwrap().len()
    };
    let started = std::time::Instant::now();
    while count() == 0 {
        assert!(
            started.elapsed().as_secs() < 20,
            "the tree was not captured"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let before = count();
    // A new part file in a directory that exists: only the file changes.
    let message = "msg_22641a4b1001h1hYGApxdYMXJR";
    write_json(
        &tree.join(format!(
            "part/{message}/prt_22641ac0f001zzzzzzzzzzzzzz.json"
        )),
        &serde_json::json!({"id": "prt_22641ac0f001zzzzzzzzzzzzzz", "sessionID": AUTHENTIC,
            "messageID": message, "type": "text", "text": "One more thing."}),
    );
    let started = std::time::Instant::now();
    while count() == before {
        assert!(
            started.elapsed().as_secs() < 20,
            "the new part file was not captured"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(child);
}

#[test]
fn opencode_status_sees_the_storage_tree_and_its_changes() {
    let repo = Repo::new();
    let project = root_commit(&repo.root);
    let home = repo.outside("oc-home");
    let tree = fake_tree(&home, &repo.root, &project, &SAMPLE_SESSIONS);
    let row = |repo: &Repo| -> Value {
        let status = repo
            .session()
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .args(["status", "--json"])
            .output()
            .unwrap();
        assert!(status.status.success(), "{}", text(&status.stderr));
        let v: Value = serde_json::from_slice(&status.stdout).unwrap();
        v["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["agent"] == "opencode")
            .unwrap()
            .clone()
    };
    let tree_text = tree.to_str().unwrap();
    let before = row(&repo);
    assert!(
        before["unseen"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == tree_text),
        "{before}"
    );
    import(&repo, &home);
    let after = row(&repo);
    assert_eq!(after["tracked"], 3, "{after}");
    assert_eq!(after["changed"], serde_json::json!([]), "{after}");
    assert_eq!(after["unseen"], serde_json::json!([]), "{after}");
    let message = "msg_22641a4b1001h1hYGApxdYMXJR";
    write_json(
        &tree.join(format!(
            "part/{message}/prt_22641ac0f001zzzzzzzzzzzzzz.json"
        )),
        &serde_json::json!({"id": "prt_22641ac0f001zzzzzzzzzzzzzz", "sessionID": AUTHENTIC,
            "messageID": message, "type": "text", "text": "One more thing."}),
    );
    let changed = row(&repo);
    assert_eq!(
        changed["changed"],
        serde_json::json!([tree_text]),
        "{changed}"
    );
}

/// A session captured from the older `storage/` tree resumes in today's
/// client (by `opencode import`) with the history the original sends.
#[test]
fn opencode_storage_captured_session_resumes_in_the_real_client() {
    let repo = Repo::new();
    let project = root_commit(&repo.root);
    let (original_home, original_project) = original_store(&repo);
    let source_home = repo.outside("source-home");
    fake_tree(&source_home, &repo.root, &project, &SAMPLE_SESSIONS);
    import(&repo, &source_home);
    let fresh = repo.outside("fresh-import");
    std::fs::create_dir_all(&fresh).unwrap();
    let note = resume_into(&repo, AUTHENTIC, &fresh, true);
    assert!(note.contains("by `opencode import`"), "{note}");
    let roots = [original_project.as_path(), repo.root.as_path()];
    let want = resume_check("opencode", &original_home, AUTHENTIC, &original_project);
    assert!(!turns(&want, &roots).is_empty());
    let got = resume_check("opencode", &fresh, AUTHENTIC, &repo.root);
    assert_eq!(turns(&got, &roots), turns(&want, &roots), "history differs");
}

#[test]
fn opencode_storage_tree_with_its_cursor_lost_appends_nothing_twice() {
    let repo = Repo::new();
    let project = root_commit(&repo.root);
    let home = repo.outside("oc-home");
    let tree = fake_tree(&home, &repo.root, &project, &SAMPLE_SESSIONS);
    import(&repo, &home);
    let before = repo.events(AUTHENTIC);
    // The local capture state is rebuildable: lost, the tree is read again
    // and reconciled by native ids; a message added meanwhile comes once.
    std::fs::remove_dir_all(repo.root.join(".git/session/capture")).unwrap();
    let m = "msg_3000000000001aaaaaaaaaaaaaa";
    write_json(
        &tree.join(format!("message/{AUTHENTIC}/{m}.json")),
        &serde_json::json!({"id": m, "sessionID": AUTHENTIC, "role": "user",
            "time": {"created": 1_795_938_200_000i64}}),
    );
    write_json(
        &tree.join(format!("part/{m}/prt_3000000000001aaaaaaaaaaaaaa.json")),
        &serde_json::json!({"id": "prt_3000000000001aaaaaaaaaaaaaa", "sessionID": AUTHENTIC,
            "messageID": m, "type": "text", "text": "After the loss"}),
    );
    import(&repo, &home);
    let after = repo.events(AUTHENTIC);
    assert_eq!(story(&after[..before.len()]), story(&before));
    assert_eq!(
        story(&after[before.len()..]),
        [
            ("meta".to_owned(), Value::Null),
            ("message.user".to_owned(), Value::from("After the loss"))
        ]
    );
    for id in &SAMPLE_SESSIONS[1..] {
        let events = repo.events(id);
        let starts = events
            .iter()
            .filter(|e| e["type"] == "session.start")
            .count();
        assert_eq!(starts, 1, "{id}");
    }
}

/// A session `resume` wrote into OpenCode's database as rows, then
/// continued by OpenCode (a prompt, a tool that runs, then finishes),
/// grows by OpenCode's rows only, its tool's final state once: never a
/// new session repeating the history, and nothing twice without cursors.
#[test]
fn a_session_resumed_into_opencode_and_continued_there_grows_by_its_new_rows_only() {
    let repo = Repo::new();
    captured_claude(&repo);
    let n = repo.events(ROUNDTRIP).len();
    let home = repo.outside("oc-home");
    let db = empty_store(&home);
    let out = resume_rows(&repo, ROUNDTRIP, &home);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let native: String = conn
        .query_row("SELECT id FROM session", [], |r| r.get(0))
        .unwrap();
    let refs = || {
        repo.git(&["for-each-ref", "refs/sessions/"])
            .lines()
            .count()
    };
    import(&repo, &home);
    assert_eq!(refs(), 1);
    assert_eq!(repo.events(ROUNDTRIP).len(), n, "nothing of OpenCode's yet");

    let t = 1_900_000_000_000i64;
    let row = |table: &str, id: &str, message: Option<&str>, t: i64, data: &str| {
        match message {
            None => conn.execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
                rusqlite::params![id, native, t, data],
            ),
            Some(m) => conn.execute(
                &format!("INSERT INTO {table} (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?4, ?5)"),
                rusqlite::params![id, m, native, t, data],
            ),
        }
        .unwrap();
    };
    let touch = |t: i64| {
        conn.execute(
            "UPDATE session SET time_updated = ?1 WHERE id = ?2",
            rusqlite::params![t, native],
        )
        .unwrap();
    };
    let user = "msg_9000000000001aaaaaaaaaaaaaa";
    let asst = "msg_9000000000002aaaaaaaaaaaaaa";
    row(
        "message",
        user,
        None,
        t,
        r#"{"role":"user","time":{"created":1900000000000}}"#,
    );
    row(
        "part",
        "prt_9000000000001aaaaaaaaaaaaaa",
        Some(user),
        t,
        r#"{"type":"text","text":"NEXT-Q: list the files"}"#,
    );
    row(
        "message",
        asst,
        None,
        t + 10,
        &format!(
            r#"{{"role":"assistant","parentID":"{user}","time":{{"created":1900000000010}}}}"#
        ),
    );
    row(
        "part",
        "prt_9000000000002aaaaaaaaaaaaaa",
        Some(asst),
        t + 11,
        r#"{"type":"tool","tool":"bash","callID":"call_next","state":{"status":"running","input":{"command":"ls"},"time":{"start":1900000000011}}}"#,
    );
    touch(t + 12);
    let (out, err) = import(&repo, &home);
    assert_eq!(refs(), 1, "{out}{err}");
    let mid = repo.events(ROUNDTRIP);
    let new: Vec<String> = kinds(&mid[n..])
        .into_iter()
        .filter(|k| k != "meta")
        .collect();
    assert_eq!(new, ["message.user"], "the running tool waits");
    assert!(
        mid[n..]
            .iter()
            .any(|e| e["payload"]["text"] == "NEXT-Q: list the files")
    );
    conn.execute(
        "UPDATE part SET time_updated = ?1, data = ?2 WHERE id = 'prt_9000000000002aaaaaaaaaaaaaa'",
        rusqlite::params![
            t + 20,
            r#"{"type":"tool","tool":"bash","callID":"call_next","state":{"status":"completed","input":{"command":"ls"},"output":"note.txt","metadata":{"exit":0},"title":"ls","time":{"start":1900000000011,"end":1900000000020}}}"#
        ],
    )
    .unwrap();
    conn.execute(
        "UPDATE message SET time_updated = ?1, data = ?2 WHERE id = ?3",
        rusqlite::params![
            t + 21,
            format!(r#"{{"role":"assistant","parentID":"{user}","time":{{"created":1900000000010,"completed":1900000000021}},"finish":"tool-calls"}}"#),
            asst
        ],
    )
    .unwrap();
    touch(t + 22);
    import(&repo, &home);
    let after = repo.events(ROUNDTRIP);
    let new: Vec<String> = kinds(&after[mid.len()..])
        .into_iter()
        .filter(|k| k != "meta")
        .collect();
    assert_eq!(new, ["tool.call", "tool.result", "command.run"]);
    assert_eq!(refs(), 1);
    // Without cursors nothing is added twice.
    std::fs::remove_dir_all(repo.root.join(".git/session/capture")).unwrap();
    import(&repo, &home);
    assert_eq!(repo.events(ROUNDTRIP).len(), after.len());
    assert_eq!(refs(), 1);
    repo.ok(&["verify"]);
    repo.fsck();
}

/// Another agent's reasoning handed to OpenCode reaches the model apart
/// from the answer after it: OpenCode sends a different model's reasoning
/// as text and joins a message's text parts with nothing between them,
/// which ran "…shell command." into "I'll create …" (real client).
#[test]
fn a_handed_off_sessions_reasoning_reaches_opencode_apart_from_the_answer() {
    let (repo, id) = codex_fixture_repo(
        "default-model-roundtrip",
        "01a22641-0894-7711-86db-74d58edefe49",
    );
    let home = repo.outside("opencode-target");
    std::fs::create_dir_all(&home).unwrap();
    let out = repo
        .session()
        .env("PATH", path_with_client(true))
        .args([
            "handoff",
            &id,
            "--to",
            "opencode",
            "--home",
            home.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let native = report["native_id"].as_str().unwrap();
    let check = resume_check("opencode", &home, native, &repo.root);
    let sent: Vec<&str> = check["turns"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["text"].as_str())
        .collect();
    let reasoning = "I will write the note with a shell command.";
    let answer = "I'll create the note with a shell command.";
    assert!(
        sent.iter().any(|t| t.contains(reasoning)) && sent.iter().any(|t| t.contains(answer)),
        "{sent:#?}"
    );
    assert!(
        !sent
            .iter()
            .any(|t| t.contains(&format!("{reasoning}{answer}"))),
        "the reasoning ran into the answer: {sent:#?}"
    );
}

#[test]
fn a_claude_session_resumed_into_opencode_twice_is_one_opencode_session() {
    let repo = Repo::new();
    root_commit(&repo.root);
    captured_claude(&repo);
    let home = repo.outside("opencode-home");
    let db = empty_store(&home);
    let printed: Vec<String> = (0..2)
        .map(|_| {
            let out = resume_rows(&repo, ROUNDTRIP, &home);
            assert!(out.status.success(), "{}", text(&out.stderr));
            text(&out.stdout)
        })
        .collect();
    assert!(printed[0].contains("--session ses_"), "{}", printed[0]);
    assert_eq!(printed[1], printed[0]);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let sessions: i64 = conn
        .query_row("SELECT count(*) FROM session", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sessions, 1);
}
