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
            json_objects: &[],
        },
        Table {
            name: "messages",
            columns: &["id", "role", "content"],
            session: "session_id",
            incremental: Incremental::RowId,
            json_objects: &[],
        },
    ],
    changes: None,
    project: None,
};

static SOURCES: [Source; 1] = [Source::Sqlite(&DB)];

static SPEC: LazyLock<AgentSpec> = LazyLock::new(|| AgentSpec {
    agent: Agent::Other("testdb".into()),
    display: "Test DB agent",
    env: &[],
    default_store: ".testdb",
    sources: &SOURCES,
    tools: &[],
    arguments: &[],
    tokenizer: TokenizerFamily::ClaudeEstimate,
    resume: "testdb resume {id}",
    native_key: "native",
    integration: git_session_adapters::registry::Integration::NONE,
});

/// The id rule both test adapters share: letters, digits and `-`.
fn test_native_id(native_id: &str) -> Result<(), String> {
    if !native_id.is_empty()
        && native_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        Ok(())
    } else {
        Err(format!("not a test session id: {native_id:?}"))
    }
}

/// Maps `sessions` rows to session facts and each `messages` row to one
/// message event.
struct TestDb;

impl Adapter for TestDb {
    fn validate_native_id(&self, native_id: &str) -> Result<(), String> {
        test_native_id(native_id)
    }

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

// ------------------------------------------------------------ zstd frames

static FRAMED_SOURCES: [Source; 1] = [Source::ZstdJsonl {
    files: &["sessions/*.jsonl.zst"],
    corrupt: git_session_adapters::source::Corrupt::KeepPrefix,
}];

static FRAMED_SPEC: LazyLock<AgentSpec> = LazyLock::new(|| AgentSpec {
    agent: Agent::Other("testzst".into()),
    display: "Test zstd agent",
    env: &[],
    default_store: ".testzst",
    sources: &FRAMED_SOURCES,
    tools: &[],
    arguments: &[],
    tokenizer: TokenizerFamily::ClaudeEstimate,
    resume: "testzst resume {id}",
    native_key: "native",
    integration: git_session_adapters::registry::Integration::NONE,
});

/// Maps a `{"type":"header","id","cwd"}` line to session facts and every
/// `{"text"}` line to a message; records where each came from.
struct TestFramed;

impl Adapter for TestFramed {
    fn validate_native_id(&self, native_id: &str) -> Result<(), String> {
        test_native_id(native_id)
    }

    fn spec(&self) -> &'static AgentSpec {
        &FRAMED_SPEC
    }

    fn store_root(&self, _env: &dyn Fn(&str) -> Option<String>, home: &Path) -> PathBuf {
        home.join(".testzst")
    }

    fn parse(&self, input: ParseInput<'_>) -> Parsed {
        let mut out = Parsed::default();
        let mut session = NativeSession::default();
        if let Some(s) = &input.state {
            session.native_id = s["id"].as_str().map(str::to_owned);
            session.cwd = s["cwd"].as_str().map(str::to_owned);
        }
        let mut seq = input.next_seq;
        for record in input.records.iter() {
            let line: Value = match serde_json::from_slice(record.bytes) {
                Ok(v) => v,
                Err(e) => {
                    out.warnings.push(Warning {
                        line: record.pos.ordinal(),
                        message: e.to_string(),
                    });
                    continue;
                }
            };
            if line["type"] == "header" {
                session.native_id = line["id"].as_str().map(str::to_owned);
                session.cwd = line["cwd"].as_str().map(str::to_owned);
                continue;
            }
            let frame = match record.pos {
                Position::Frame { frame, .. } => Some(frame),
                _ => None,
            };
            let mut event = Event::new(
                seq,
                "2026-01-01T00:00:00Z",
                FRAMED_SPEC.agent.clone(),
                "user",
                "message.user",
                Level::History,
                json!({ "text": line["text"], "frame": frame }),
            );
            event.origin = Some(Origin {
                agent: FRAMED_SPEC.agent.clone(),
                native_id: None,
                native_seq: Some(record.pos.ordinal()),
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

/// Returns one checksummed zstd frame holding `lines`.
fn zstd_frame(lines: &[Value]) -> Vec<u8> {
    let mut text = String::new();
    for l in lines {
        text.push_str(&l.to_string());
        text.push('\n');
    }
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_checksum(true).unwrap();
    std::io::Write::write_all(&mut enc, text.as_bytes()).unwrap();
    enc.finish().unwrap()
}

fn framed_session(repo: &Repo, name: &str, id: &str) -> PathBuf {
    let dir = repo.home.join(".testzst/sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let header = json!({"type": "header", "id": id, "cwd": repo.root});
    std::fs::write(&path, zstd_frame(&[header])).unwrap();
    path
}

fn append(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    std::io::Write::write_all(&mut f, bytes).unwrap();
}

fn capture_framed(repo: &Repo) -> CaptureReport {
    let store = Store::discover(&repo.root).unwrap();
    let clock = Clock::fixed(jiff::Timestamp::from_second(EPOCH).unwrap());
    let request = CaptureRequest {
        agents: Vec::new(),
        home: repo.home.clone(),
        env: &|_| None,
        sqlite: Options::default(),
    };
    capture_with(&store, &clock, &request, &[&TestFramed]).unwrap()
}

fn msg(text: &str) -> Value {
    json!({ "text": text })
}

#[test]
fn framed_capture_is_incremental_by_frame_and_leaves_the_file_as_it_was() {
    let repo = Repo::new();
    let path = framed_session(&repo, "a.jsonl.zst", "z-one");
    append(&path, &zstd_frame(&[msg("one"), msg("two")]));
    let before = std::fs::read(&path).unwrap();
    let first = capture_framed(&repo);
    assert_eq!(first.sessions.len(), 1, "{first:?}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "capture changed the agent's file"
    );
    append(&path, &zstd_frame(&[msg("three")]));
    let second = capture_framed(&repo);
    assert_eq!(second.sessions[0].appended, 1, "{second:?}");
    let events = repo.events("z-one");
    let got: Vec<(String, u64)> = events
        .iter()
        .map(|e| {
            (
                e["payload"]["text"].as_str().unwrap().to_owned(),
                e["payload"]["frame"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [("one".into(), 1), ("two".into(), 1), ("three".into(), 2)]
    );
    assert!(capture_framed(&repo).sessions.is_empty());
}

#[test]
fn a_torn_last_frame_is_left_for_the_next_capture() {
    let repo = Repo::new();
    let path = framed_session(&repo, "t.jsonl.zst", "z-torn");
    append(&path, &zstd_frame(&[msg("whole")]));
    let last = zstd_frame(&[msg("torn"), msg("also torn")]);
    let cut = last.len() / 2;
    append(&path, &last[..cut]);
    let report = capture_framed(&repo);
    assert!(
        report.skipped.is_empty() && report.skipped_sources.is_empty(),
        "{report:?}"
    );
    assert_eq!(texts(&repo, "z-torn"), ["whole"]);
    // The agent finishes the frame: the next capture takes it, once.
    append(&path, &last[cut..]);
    capture_framed(&repo);
    assert_eq!(texts(&repo, "z-torn"), ["whole", "torn", "also torn"]);
    capture_framed(&repo);
    assert_eq!(texts(&repo, "z-torn").len(), 3);
}

#[test]
fn a_corrupt_frame_keeps_what_came_before_and_skips_the_file_with_a_warning() {
    let repo = Repo::new();
    let bad = framed_session(&repo, "bad.jsonl.zst", "z-bad");
    append(&bad, &zstd_frame(&[msg("before")]));
    let offset = std::fs::metadata(&bad).unwrap().len();
    let mut broken = zstd_frame(&[msg(&"z".repeat(300))]);
    let n = broken.len();
    broken[n - 2] ^= 0x55; // inside the content checksum
    append(&bad, &broken);
    append(&bad, &zstd_frame(&[msg("after")]));
    let good = framed_session(&repo, "good.jsonl.zst", "z-good");
    append(&good, &zstd_frame(&[msg("fine")]));
    let report = capture_framed(&repo);
    assert_eq!(report.skipped_sources.len(), 1, "{report:?}");
    let skipped = &report.skipped_sources[0];
    assert!(skipped.path.ends_with("bad.jsonl.zst"));
    assert!(
        skipped.reason.contains(&format!("at byte {offset}")),
        "{}",
        skipped.reason
    );
    assert_eq!(texts(&repo, "z-bad"), ["before"]);
    assert_eq!(texts(&repo, "z-good"), ["fine"]);
}

// ------------------------------------------------------------ write-back

use git_session::native::apply::{self, Backups, TempFiles};
use git_session_adapters::RowWrite;

fn row(table: &str, key: &[&str], columns: Value) -> RowWrite {
    RowWrite {
        database: PathBuf::from("state.db"),
        table: table.into(),
        key: key.iter().map(|k| (*k).to_owned()).collect(),
        columns: columns.as_object().unwrap().clone(),
        ..RowWrite::default()
    }
}

/// A session row, a message whose id the database assigns, and a reply
/// that points at it.
fn session_rows(id: &str, title: &str) -> ChangeSet {
    let mut session = row(
        "sessions",
        &["id"],
        json!({"id": id, "cwd": "/w", "title": title}),
    );
    session.session_row = true;
    let mut first = row(
        "messages",
        &[],
        json!({"session_id": id, "role": "user", "content": "q"}),
    );
    first.assigns = Some("first".into());
    let mut reply = row(
        "messages",
        &[],
        json!({"session_id": id, "role": "assistant", "content": "a"}),
    );
    reply.refs = vec![("parent_id".into(), "first".into())];
    ChangeSet {
        rows: vec![session, first, reply],
        ..ChangeSet::default()
    }
}

fn writable_db(dir: &Path) -> PathBuf {
    let path = dir.join("state.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "journal_mode", "wal").unwrap();
    conn.execute_batch(
        "CREATE TABLE sessions(id TEXT PRIMARY KEY, cwd TEXT, title TEXT);
         CREATE TABLE messages(id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT,
                               role TEXT, content TEXT, parent_id INTEGER);",
    )
    .unwrap();
    path
}

fn hash(path: &Path) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

#[test]
fn rows_go_in_one_transaction_after_one_backup_and_assigned_keys_link_up() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    std::fs::create_dir_all(&root).unwrap();
    let db = writable_db(&root);
    let backups_dir = tmp.path().join("backups");
    let backups = |ms| Backups {
        dir: &backups_dir,
        now_ms: ms,
    };
    let out = apply::apply_rows(&root, &session_rows("s1", "t"), &backups(1)).unwrap();
    assert_eq!(out.inserted, 3);
    assert_eq!(out.backups.len(), 1, "one backup per database, not per row");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (first, parent): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT id FROM messages WHERE role = 'user'),
                    (SELECT parent_id FROM messages WHERE role = 'assistant')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        parent, first,
        "the reply points at the rowid its parent got"
    );
    drop(conn);
    // Again: the session is there, nothing written, no backup.
    let again = apply::apply_rows(&root, &session_rows("s1", "t"), &backups(2)).unwrap();
    assert_eq!(
        (again.inserted, again.backups.len(), again.present.len()),
        (0, 0, 1)
    );
    // A different session under the same id: refused, the database untouched.
    let before = hash(&db);
    let err = apply::check_rows(&root, &session_rows("s1", "other title")).unwrap_err();
    assert!(err.to_string().contains("different session row"), "{err}");
    let err =
        apply::apply_rows(&root, &session_rows("s1", "other title"), &backups(3)).unwrap_err();
    assert!(
        matches!(err, git_session::native::NativeError::Exists { .. }),
        "{err}"
    );
    assert_eq!(hash(&db), before);
    // Many write-backs keep only the last few backups of the database.
    for i in 0..(apply::KEEP_BACKUPS + 2) {
        apply::apply_rows(
            &root,
            &session_rows(&format!("s-{i}"), "t"),
            &backups(10 + i as i64),
        )
        .unwrap();
    }
    let kept = apply::list_backups(&backups_dir);
    assert_eq!(kept.len(), apply::KEEP_BACKUPS, "{kept:?}");
}

/// A unique column the change set numbers (Hermes' `sessions.title`): a
/// taken value is written as the next of its lineage, `<base> #N`; LIKE's
/// wildcards in the base match only themselves; writing the same change
/// set again finds the numbered row the same session.
#[test]
fn a_taken_unique_value_is_written_as_the_next_of_its_lineage() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    std::fs::create_dir_all(&root).unwrap();
    let db = root.join("state.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE sessions(id TEXT PRIMARY KEY, cwd TEXT, title TEXT);
             CREATE UNIQUE INDEX title_unique ON sessions(title) WHERE title IS NOT NULL;
             CREATE TABLE messages(id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT,
                                   role TEXT, content TEXT, parent_id INTEGER);
             INSERT INTO sessions VALUES ('other', '/w', 'aXb #7');",
        )
        .unwrap();
    let backups_dir = tmp.path().join("backups");
    let numbered = |id: &str, title: &str| {
        let mut changes = session_rows(id, title);
        changes.rows[0].numbered = vec!["title".into()];
        changes
    };
    let write = |id: &str, title: &str| {
        let backups = Backups {
            dir: &backups_dir,
            now_ms: 1,
        };
        apply::check_rows(&root, &numbered(id, title)).unwrap();
        apply::apply_rows(&root, &numbered(id, title), &backups).unwrap()
    };
    let title = |id: &str| -> String {
        rusqlite::Connection::open(&db)
            .unwrap()
            .query_row("SELECT title FROM sessions WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .unwrap()
    };
    write("s1", "a_b");
    write("s2", "a_b");
    write("s3", "a_b #2");
    write("s4", "c");
    assert_eq!(
        [title("s1"), title("s2"), title("s3"), title("s4")],
        ["a_b", "a_b #2", "a_b #3", "c"].map(String::from)
    );
    // Again: the session is there under its numbered title; nothing written.
    let again = write("s2", "a_b");
    assert_eq!((again.inserted, again.present.len()), (0, 1));
    // Without the numbering the unique index refuses the row, and nothing
    // of the change set is written.
    let backups = Backups {
        dir: &backups_dir,
        now_ms: 2,
    };
    let err = apply::apply_rows(&root, &session_rows("s5", "a_b"), &backups).unwrap_err();
    assert!(err.to_string().contains("UNIQUE"), "{err}");
}

#[test]
fn a_failing_row_rolls_the_whole_database_back() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    std::fs::create_dir_all(&root).unwrap();
    let db = writable_db(&root);
    let mut changes = session_rows("s1", "t");
    changes.rows[2].refs = vec![("parent_id".into(), "nobody".into())];
    let err = apply::apply_rows(
        &root,
        &changes,
        &Backups {
            dir: &tmp.path().join("backups"),
            now_ms: 1,
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("nobody"), "{err}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let n: i64 = conn
        .query_row(
            "SELECT (SELECT count(*) FROM sessions) + (SELECT count(*) FROM messages)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 0, "the rows before the failing one were rolled back");
}

#[test]
fn rows_are_not_written_while_another_process_holds_the_database() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    std::fs::create_dir_all(&root).unwrap();
    let db = writable_db(&root);
    let mut child = std::process::Command::new("python3")
        .arg("-c")
        .arg("import sqlite3, sys, time\nc = sqlite3.connect(sys.argv[1])\nc.execute('select count(*) from sessions').fetchall()\nprint('open', flush=True)\ntime.sleep(30)")
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "open");
    assert_eq!(apply::holder(&db), Some(child.id()));
    let before = hash(&db);
    let err = apply::apply_rows(
        &root,
        &session_rows("s1", "t"),
        &Backups {
            dir: &tmp.path().join("backups"),
            now_ms: 1,
        },
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("open in process {}", child.id())),
        "{err}"
    );
    assert_eq!(hash(&db), before);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(apply::holder(&db), None);
}

#[test]
fn framed_files_are_written_frame_by_frame_with_checksums() {
    let tmp = tempfile::tempdir().unwrap();
    let mut files = TempFiles::new(tmp.path());
    files
        .begin_framed(Path::new("sessions/x.jsonl.zst"))
        .unwrap();
    files.write(b"{\"type\":\"header\"}\n").unwrap();
    files.end_frame().unwrap();
    files.write(b"{\"text\":\"a\"}\n").unwrap();
    files.write(b"{\"text\":\"b\"}\n").unwrap();
    let written = files.persist().unwrap();
    assert_eq!(written.len(), 1);
    let bytes = std::fs::read(&written[0]).unwrap();
    let mut reader = git_session::native::zstd::FramedReader::open(&written[0], 0, 0, 0).unwrap();
    use git_session::native::jsonl::RecordReader;
    let batch = reader.next_batch().unwrap().unwrap();
    let frames: Vec<u64> = batch
        .iter()
        .map(|r| match r.pos {
            Position::Frame { frame, .. } => frame,
            _ => panic!("not a frame"),
        })
        .collect();
    assert_eq!(frames, [0, 1, 1]);
    assert_eq!(reader.position().offset, bytes.len() as u64);
    assert!(reader.problem().is_none());
}

// ------------------------------------------------- reading by session

/// The test schema with a change token per session (`tick`, moved by the
/// writer with every change, as OpenCode's event sequence is).
static CHANGES_DB: Database = Database {
    files: &["*.db"],
    requires: &[],
    version: None,
    tables: &[
        Table {
            name: "sessions",
            columns: &["id", "cwd", "title"],
            session: "id",
            incremental: Incremental::Whole,
            json_objects: &[],
        },
        Table {
            name: "messages",
            columns: &["id", "role", "content"],
            session: "session_id",
            incremental: Incremental::RowId,
            json_objects: &[],
        },
    ],
    changes: Some("SELECT id, tick FROM sessions"),
    project: None,
};

#[test]
fn sqlite_reader_hands_sessions_one_by_one_and_reads_only_moved_tokens() {
    use git_session::native::cursor::RowSession;
    use git_session::native::sqlite::{Scope, read};
    use std::collections::BTreeMap;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("state.db");
    let conn = create_db(&path, 1);
    conn.execute_batch("ALTER TABLE sessions ADD COLUMN tick INTEGER DEFAULT 0")
        .unwrap();
    for s in ["a", "b", "c"] {
        add_session(&conn, s, tmp.path());
        add_message(&conn, s, &format!("{s} one"));
        add_message(&conn, s, &format!("{s} two"));
    }
    // Each visit sees only its own session's rows: one session in memory.
    let mut visits: Vec<(String, usize)> = Vec::new();
    let marks = BTreeMap::new();
    let known = BTreeMap::new();
    let scope = Scope {
        marks: &marks,
        known: &known,
        only: None,
    };
    read(&path, &CHANGES_DB, scope, &Options::default(), &mut |s| {
        assert!(s.rows.iter().all(|r| {
            let v: Value = serde_json::from_slice(&r.json).unwrap();
            v["id"] == s.key.as_str() || v["content"].as_str().unwrap().starts_with(&s.key)
        }));
        visits.push((s.key.clone(), s.rows.len()));
    })
    .unwrap();
    assert_eq!(visits, [("a".into(), 3), ("b".into(), 3), ("c".into(), 3)]);
    // Remember every session as read at tick 0, messages up to their rowid.
    let mut known = BTreeMap::new();
    for (i, s) in ["a", "b", "c"].iter().enumerate() {
        known.insert(
            s.to_string(),
            RowSession {
                session: Some(format!("canonical-{s}")),
                events: 3,
                seen: [("messages".to_string(), (i as i64 + 1) * 2)].into(),
                whole: None,
                token: Some("0".into()),
                mapped: false,
            },
        );
    }
    // b grows and moves its token; c grows without moving it (not read).
    add_message(&conn, "b", "b three");
    conn.execute("UPDATE sessions SET tick = 1 WHERE id = 'b'", [])
        .unwrap();
    add_message(&conn, "c", "c three");
    let mut grown: Vec<(String, Vec<String>, Option<String>)> = Vec::new();
    let scope = Scope {
        marks: &marks,
        known: &known,
        only: None,
    };
    read(&path, &CHANGES_DB, scope, &Options::default(), &mut |s| {
        let messages = s
            .rows
            .iter()
            .filter(|r| r.table == "messages")
            .map(|r| {
                let v: Value = serde_json::from_slice(&r.json).unwrap();
                v["content"].as_str().unwrap().to_owned()
            })
            .collect();
        grown.push((s.key, messages, s.token));
    })
    .unwrap();
    let b = grown.iter().find(|g| g.0 == "b").unwrap();
    assert_eq!(b.1, ["b three"], "only b's rows after its own mark");
    assert_eq!(b.2.as_deref(), Some("1"));
    for (key, messages, _) in &grown {
        if key != "b" {
            assert!(messages.is_empty(), "{key} was read: {messages:?}");
        }
    }
    drop(conn);
}

/// Rows of one table go in by multi-row statements (one statement per row
/// makes FTS5 flush its index per row): rows with different columns, a
/// column left to a NOT NULL default and a full-text trigger, more rows
/// than one statement takes, a keyed row of another table between them.
/// The database ends exactly as one insert per row leaves it.
#[test]
fn batched_rows_end_as_one_insert_per_row_would_leave_them() {
    let tmp = tempfile::tempdir().unwrap();
    let schema = "CREATE TABLE sessions(id TEXT PRIMARY KEY, cwd TEXT, title TEXT);
         CREATE TABLE messages(id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
             role TEXT NOT NULL, content TEXT, tool_name TEXT, active INTEGER NOT NULL DEFAULT 1,
             note TEXT DEFAULT 'it''s', weight REAL DEFAULT -1.5);
         CREATE VIRTUAL TABLE messages_fts USING fts5(content);
         CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
             INSERT INTO messages_fts(rowid, content) VALUES (new.id, COALESCE(new.content, ''));
         END;";
    let mut rows = Vec::new();
    let mut session = row("sessions", &["id"], json!({"id": "s", "cwd": "/w"}));
    session.session_row = true;
    rows.push(session);
    for i in 0..1200 {
        let columns = match i % 3 {
            0 => json!({"session_id": "s", "role": "user", "content": format!("question {i}")}),
            1 => json!({"session_id": "s", "role": "tool", "tool_name": "bash", "active": 0}),
            _ => json!({"session_id": "s", "role": "assistant", "content": format!("answer {i}"),
                        "note": format!("n{i}")}),
        };
        rows.push(row("messages", &[], columns));
        if i == 700 {
            rows.push(row("sessions", &["id"], json!({"id": "t", "cwd": "/w"})));
        }
    }
    let changes = ChangeSet {
        rows,
        ..ChangeSet::default()
    };
    let root = tmp.path().join("store");
    std::fs::create_dir_all(&root).unwrap();
    rusqlite::Connection::open(root.join("state.db"))
        .unwrap()
        .execute_batch(schema)
        .unwrap();
    let backups_dir = tmp.path().join("backups");
    let out = apply::apply_rows(
        &root,
        &changes,
        &Backups {
            dir: &backups_dir,
            now_ms: 1,
        },
    )
    .unwrap();
    assert_eq!(out.inserted, 1202);
    // The reference: each row by its own INSERT naming only its columns.
    let reference = rusqlite::Connection::open_in_memory().unwrap();
    reference.execute_batch(schema).unwrap();
    for r in &changes.rows {
        let names: Vec<&String> = r.columns.keys().collect();
        let values: Vec<rusqlite::types::Value> = r
            .columns
            .values()
            .map(|v| match v {
                Value::String(s) => rusqlite::types::Value::Text(s.clone()),
                Value::Number(n) => rusqlite::types::Value::Integer(n.as_i64().unwrap()),
                other => panic!("{other}"),
            })
            .collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            r.table,
            names
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            vec!["?"; names.len()].join(", ")
        );
        reference
            .execute(&sql, rusqlite::params_from_iter(values))
            .unwrap();
    }
    let dump = |conn: &rusqlite::Connection| -> Vec<String> {
        let mut out = Vec::new();
        for query in [
            "SELECT id, session_id, role, content, tool_name, active, note, weight FROM messages ORDER BY id",
            "SELECT id, cwd, title FROM sessions ORDER BY id",
            "SELECT rowid, content FROM messages_fts WHERE messages_fts MATCH 'answer' ORDER BY rowid",
        ] {
            let mut stmt = conn.prepare(query).unwrap();
            let n = stmt.column_count();
            let rows = stmt
                .query_map([], |r| {
                    Ok((0..n)
                        .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                        .collect::<Vec<_>>()
                        .join("|"))
                })
                .unwrap();
            out.extend(rows.map(Result::unwrap));
        }
        out
    };
    let written = rusqlite::Connection::open(root.join("state.db")).unwrap();
    let (got, want) = (dump(&written), dump(&reference));
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);
}
