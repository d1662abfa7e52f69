//! Native sources through the capture layer, with small test adapters:
//! a SQLite store (many sessions in one database, incremental by row id,
//! read while a writer appends in WAL mode) and its bad inputs.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use git_session::clock::Clock;
use git_session::native::sqlite::Options;
use git_session::ops::capture::{CaptureReport, CaptureRequest, capture_with};
use git_session::store::Store;
use git_session_adapters::registry::{AgentSpec, TokenizerFamily};
use git_session_adapters::source::{Database, Incremental, SchemaVersion, Table};
use git_session_adapters::{
    Adapter, ChangeSet, FileSink, NativeSession, ParseInput, Parsed, Position, RenderError,
    RenderHead, Source, Warning,
};
use git_session_schema::{Agent, Event, Level, Origin};
use serde_json::{Value, json};

use crate::support::*;

// ------------------------------------------------------------ the adapter

static DB: Database = Database {
    files: &["*.db"],
    requires: &[("schema_version", &["version"])],
    version: Some(SchemaVersion {
        query: "SELECT version FROM schema_version",
        min: 1,
        max: 2,
        read_newer: false,
    }),
    tables: &[
        Table {
            name: "sessions",
            columns: &["id", "cwd", "title"],
            session: "id",
            incremental: Incremental::Whole,
        },
        Table {
            name: "messages",
            columns: &["id", "role", "content"],
            session: "session_id",
            incremental: Incremental::RowId,
        },
    ],
};

static SOURCES: [Source; 1] = [Source::Sqlite(&DB)];

static SPEC: LazyLock<AgentSpec> = LazyLock::new(|| AgentSpec {
    agent: Agent::Other("testdb".into()),
    display: "Test DB agent",
    env: &[],
    default_store: ".testdb",
    sources: &SOURCES,
    tools: &[],
    tokenizer: TokenizerFamily::ClaudeEstimate,
    resume: "testdb resume {id}",
});

/// Maps `sessions` rows to session facts and each `messages` row to one
/// message event.
struct TestDb;

impl Adapter for TestDb {
    fn spec(&self) -> &'static AgentSpec {
        &SPEC
    }

    fn store_root(&self, _env: &dyn Fn(&str) -> Option<String>, home: &Path) -> PathBuf {
        home.join(".testdb")
    }

    fn parse(&self, input: ParseInput<'_>) -> Parsed {
        let mut session: NativeSession = input
            .state
            .as_ref()
            .and_then(|s| {
                Some(NativeSession {
                    native_id: s.get("id")?.as_str().map(str::to_owned),
                    cwd: s.get("cwd")?.as_str().map(str::to_owned),
                    ..NativeSession::default()
                })
            })
            .unwrap_or_default();
        let mut out = Parsed::default();
        let mut seq = input.next_seq;
        for record in input.records.iter() {
            let Position::Row { table, rowid } = record.pos else {
                out.warnings.push(Warning {
                    line: record.pos.ordinal(),
                    message: "not a row".into(),
                });
                continue;
            };
            let row: Value = match serde_json::from_slice(record.bytes) {
                Ok(v) => v,
                Err(e) => {
                    out.warnings.push(Warning {
                        line: rowid as u64,
                        message: e.to_string(),
                    });
                    continue;
                }
            };
            if table == "sessions" {
                session.native_id = row["id"].as_str().map(str::to_owned);
                session.cwd = row["cwd"].as_str().map(str::to_owned);
                session.title = row["title"].as_str().map(str::to_owned);
                continue;
            }
            let role = row["role"].as_str().unwrap_or("user");
            let mut event = Event::new(
                seq,
                "2026-01-01T00:00:00Z",
                SPEC.agent.clone(),
                if role == "user" {
                    "user"
                } else {
                    "agent:testdb"
                },
                format!("message.{role}"),
                Level::History,
                json!({ "text": row["content"] }),
            );
            event.origin = Some(Origin {
                agent: SPEC.agent.clone(),
                native_id: Some(format!("m{}", row["id"])),
                native_seq: Some(rowid as u64),
                extra: Default::default(),
            });
            out.events.push(event);
            seq += 1;
        }
        out.state = json!({ "id": session.native_id, "cwd": session.cwd });
        out.session = session;
        out
    }

    fn render_to(
        &self,
        _head: RenderHead<'_>,
        _events: &mut dyn Iterator<Item = Event>,
        _out: &mut dyn FileSink,
    ) -> Result<ChangeSet, RenderError> {
        Err(RenderError::Request("the test adapter only reads".into()))
    }
}

// ------------------------------------------------------------ helpers

fn store_dir(repo: &Repo) -> PathBuf {
    let dir = repo.home.join(".testdb");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Creates a database in WAL mode with the test schema.
fn create_db(path: &Path, version: i64) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.pragma_update(None, "journal_mode", "wal").unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE schema_version(version INTEGER);
         INSERT INTO schema_version VALUES ({version});
         CREATE TABLE sessions(id TEXT PRIMARY KEY, cwd TEXT, title TEXT);
         CREATE TABLE messages(id INTEGER PRIMARY KEY AUTOINCREMENT,
                               session_id TEXT NOT NULL, role TEXT, content TEXT);"
    ))
    .unwrap();
    conn
}

fn add_session(conn: &rusqlite::Connection, id: &str, cwd: &Path) {
    conn.execute(
        "INSERT INTO sessions(id, cwd, title) VALUES (?1, ?2, 'a title')",
        rusqlite::params![id, cwd.to_string_lossy()],
    )
    .unwrap();
}

fn add_message(conn: &rusqlite::Connection, session: &str, text: &str) {
    conn.execute(
        "INSERT INTO messages(session_id, role, content) VALUES (?1, 'user', ?2)",
        rusqlite::params![session, text],
    )
    .unwrap();
}

fn capture(repo: &Repo, wait: Duration) -> CaptureReport {
    let store = Store::discover(&repo.root).unwrap();
    let clock = Clock::fixed(jiff::Timestamp::from_second(EPOCH).unwrap());
    let request = CaptureRequest {
        agents: Vec::new(),
        home: repo.home.clone(),
        env: &|_| None,
        redact: true,
        sqlite: Options { wait },
    };
    capture_with(&store, &clock, &request, &[&TestDb]).unwrap()
}

fn texts(repo: &Repo, id: &str) -> Vec<String> {
    repo.events(id)
        .iter()
        .map(|e| e["payload"]["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Returns every file of `dir` with a hash of its bytes, sorted. The
/// `-shm` WAL index is shared memory every reader writes its read mark
/// into (that is how the writer knows not to overwrite what is being
/// read), so only its presence counts.
fn snapshot(dir: &Path) -> Vec<(String, String)> {
    use sha2::Digest;
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let hash = if name.ends_with("-shm") {
                "index".to_owned()
            } else {
                format!(
                    "{:x}",
                    sha2::Sha256::digest(std::fs::read(e.path()).unwrap())
                )
            };
            (name, hash)
        })
        .collect();
    out.sort();
    out
}

const WAIT: Duration = Duration::from_millis(300);

// ------------------------------------------------------------ tests

#[test]
fn sqlite_capture_is_incremental_by_row_id_and_skips_other_projects() {
    let repo = Repo::new();
    let dir = store_dir(&repo);
    let conn = create_db(&dir.join("state.db"), 2);
    add_session(&conn, "s-ours", &repo.root);
    add_session(&conn, "s-theirs", Path::new("/elsewhere/project"));
    for i in 0..3 {
        add_message(&conn, "s-ours", &format!("ours {i}"));
        add_message(&conn, "s-theirs", &format!("theirs {i}"));
    }
    drop(conn);
    let first = capture(&repo, WAIT);
    assert!(
        first.skipped.is_empty() && first.skipped_sources.is_empty(),
        "{first:?}"
    );
    assert_eq!(first.sessions.len(), 1, "{first:?}");
    assert!(first.sessions[0].created);
    assert_eq!(texts(&repo, "s-ours"), ["ours 0", "ours 1", "ours 2"]);
    assert!(!repo.ok(&["list"]).contains("s-theirs"));

    let conn = rusqlite::Connection::open(dir.join("state.db")).unwrap();
    add_message(&conn, "s-ours", "ours 3");
    add_message(&conn, "s-theirs", "theirs 3");
    add_message(&conn, "s-ours", "ours 4");
    drop(conn);
    let second = capture(&repo, WAIT);
    assert_eq!(second.sessions.len(), 1, "{second:?}");
    assert_eq!(second.sessions[0].appended, 2);
    assert_eq!(
        texts(&repo, "s-ours"),
        ["ours 0", "ours 1", "ours 2", "ours 3", "ours 4"]
    );
    // Nothing new: no commit, the session counted as unchanged.
    let third = capture(&repo, WAIT);
    assert!(third.sessions.is_empty(), "{third:?}");
    assert_eq!(third.unchanged, 1);
    repo.fsck();
}

#[test]
fn sqlite_capture_after_lost_cursors_appends_nothing_twice() {
    let repo = Repo::new();
    let dir = store_dir(&repo);
    let conn = create_db(&dir.join("state.db"), 1);
    add_session(&conn, "s-lost", &repo.root);
    add_message(&conn, "s-lost", "one");
    drop(conn);
    capture(&repo, WAIT);
    std::fs::remove_dir_all(repo.root.join(".git/session/capture")).unwrap();
    let conn = rusqlite::Connection::open(dir.join("state.db")).unwrap();
    add_message(&conn, "s-lost", "two");
    drop(conn);
    let report = capture(&repo, WAIT);
    assert!(report.skipped.is_empty(), "{report:?}");
    assert_eq!(texts(&repo, "s-lost"), ["one", "two"]);
}

#[test]
fn sqlite_capture_leaves_the_agent_files_byte_identical() {
    let repo = Repo::new();
    let dir = store_dir(&repo);
    let conn = create_db(&dir.join("state.db"), 1);
    add_session(&conn, "s-ro", &repo.root);
    add_message(&conn, "s-ro", "hello");
    drop(conn);
    // The writer closed: only the main file is there (SQLite removed the
    // -wal and -shm), and capture must not create them.
    let before = snapshot(&dir);
    assert_eq!(
        before.len(),
        1,
        "{:?}",
        before.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    capture(&repo, WAIT);
    assert_eq!(snapshot(&dir), before);

    // The agent has it open (WAL and index exist): capture reads through
    // them and leaves every file as it was.
    let writer = rusqlite::Connection::open(dir.join("state.db")).unwrap();
    add_message(&writer, "s-ro", "while open");
    let before = snapshot(&dir);
    assert!(before.iter().any(|f| f.0 == "state.db-wal"));
    let report = capture(&repo, WAIT);
    assert_eq!(report.sessions.len(), 1, "{report:?}");
    assert_eq!(snapshot(&dir), before);
    assert_eq!(texts(&repo, "s-ro"), ["hello", "while open"]);
    drop(writer);
}

#[test]
fn sqlite_capture_during_a_concurrent_wal_writer_misses_nothing() {
    let repo = Repo::new();
    let dir = store_dir(&repo);
    let db = dir.join("state.db");
    let conn = create_db(&db, 1);
    add_session(&conn, "s-live", &repo.root);
    add_message(&conn, "s-live", "msg 0");
    let total = 200;
    let writer = std::thread::spawn(move || {
        for i in 1..total {
            // One transaction per message, as an agent writes them; a long
            // one now and then so a reader meets it half way.
            let text = if i % 25 == 0 {
                format!("msg {i} {}", "x".repeat(100_000))
            } else {
                format!("msg {i}")
            };
            add_message(&conn, "s-live", &text);
            std::thread::sleep(Duration::from_millis(2));
        }
        conn
    });
    let mut captures = 0;
    while !writer.is_finished() {
        let report = capture(&repo, Duration::from_secs(5));
        assert!(
            report.skipped.is_empty()
                && report.skipped_sources.is_empty()
                && report.warnings.is_empty(),
            "{report:?}"
        );
        captures += 1;
    }
    let conn = writer.join().unwrap();
    drop(conn);
    capture(&repo, WAIT);
    let got = texts(&repo, "s-live");
    let want: Vec<String> = (0..total)
        .map(|i| {
            if i % 25 == 0 && i > 0 {
                format!("msg {i} {}", "x".repeat(100_000))
            } else {
                format!("msg {i}")
            }
        })
        .collect();
    assert_eq!(got.len(), want.len(), "after {captures} captures");
    assert!(got == want, "records missing, duplicated or torn");
    assert!(captures > 1, "the captures did not overlap the writer");
}

#[test]
fn a_locked_database_is_skipped_with_a_warning_and_the_others_are_captured() {
    let repo = Repo::new();
    let dir = store_dir(&repo);
    let good = create_db(&dir.join("b-good.db"), 1);
    add_session(&good, "s-good", &repo.root);
    add_message(&good, "s-good", "fine");
    drop(good);
    // A rollback-journal database whose writer holds the exclusive lock.
    let locked = rusqlite::Connection::open(dir.join("a-locked.db")).unwrap();
    locked
        .execute_batch(
            "CREATE TABLE schema_version(version INTEGER); INSERT INTO schema_version VALUES (1);
             CREATE TABLE sessions(id TEXT PRIMARY KEY, cwd TEXT, title TEXT);
             CREATE TABLE messages(id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, role TEXT, content TEXT);",
        )
        .unwrap();
    add_session(&locked, "s-locked", &repo.root);
    locked.execute_batch("BEGIN EXCLUSIVE").unwrap();
    add_message(&locked, "s-locked", "pending");
    let report = capture(&repo, Duration::from_millis(200));
    assert_eq!(report.skipped_sources.len(), 1, "{report:?}");
    let skipped = &report.skipped_sources[0];
    assert!(skipped.path.ends_with("a-locked.db"), "{skipped:?}");
    assert!(skipped.reason.contains("locked"), "{}", skipped.reason);
    assert!(report.skipped.is_empty());
    assert_eq!(texts(&repo, "s-good"), ["fine"]);
    // Once the lock is gone, the next capture reads it.
    locked.execute_batch("COMMIT").unwrap();
    drop(locked);
    let report = capture(&repo, Duration::from_millis(200));
    assert!(report.skipped_sources.is_empty(), "{report:?}");
    assert_eq!(texts(&repo, "s-locked"), ["pending"]);
}

#[test]
fn corrupt_and_unknown_schema_databases_are_skipped_naming_the_file() {
    let repo = Repo::new();
    let dir = store_dir(&repo);
    let good = create_db(&dir.join("good.db"), 1);
    add_session(&good, "s-fine", &repo.root);
    add_message(&good, "s-fine", "kept");
    drop(good);
    // A newer schema than this build reads.
    let newer = create_db(&dir.join("newer.db"), 9);
    add_session(&newer, "s-newer", &repo.root);
    drop(newer);
    // Missing a declared table.
    let odd = rusqlite::Connection::open(dir.join("odd.db")).unwrap();
    odd.execute_batch(
        "CREATE TABLE schema_version(version INTEGER); INSERT INTO schema_version VALUES (1);",
    )
    .unwrap();
    drop(odd);
    // A database whose pages were overwritten.
    let broken = create_db(&dir.join("broken.db"), 1);
    add_session(&broken, "s-broken", &repo.root);
    for i in 0..200 {
        add_message(
            &broken,
            "s-broken",
            &format!("filler {i} {}", "y".repeat(200)),
        );
    }
    drop(broken);
    let mut bytes = std::fs::read(dir.join("broken.db")).unwrap();
    let page = 4096;
    for b in &mut bytes[page * 2..page * 6] {
        *b = 0xA5;
    }
    std::fs::write(dir.join("broken.db"), &bytes).unwrap();
    // Not a database at all.
    std::fs::write(
        dir.join("junk.db"),
        b"\x1b[31mnot sqlite at all, just text\n",
    )
    .unwrap();

    let report = capture(&repo, WAIT);
    let reason = |name: &str| {
        report
            .skipped_sources
            .iter()
            .find(|s| s.path.ends_with(name))
            .map(|s| s.reason.clone())
            .unwrap_or_else(|| panic!("{name} not skipped: {report:?}"))
    };
    assert!(
        reason("newer.db").contains("unknown schema (version 9"),
        "{}",
        reason("newer.db")
    );
    assert!(
        reason("odd.db").contains("unknown schema (no table"),
        "{}",
        reason("odd.db")
    );
    assert!(
        reason("broken.db").contains("corrupt"),
        "{}",
        reason("broken.db")
    );
    assert!(
        reason("junk.db").contains("not a SQLite database"),
        "{}",
        reason("junk.db")
    );
    assert!(report.skipped.is_empty(), "{report:?}");
    assert_eq!(texts(&repo, "s-fine"), ["kept"]);
}
