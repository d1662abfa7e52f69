//! Hermes Agent: capture from `state.db` (read-only, incremental, bad rows,
//! schemas), write-back into a database Hermes created, and the real client
//! (`shared/oracle/hermes-*`) resuming what was written with the same
//! history as the original.

use std::path::{Path, PathBuf};
use std::process::Command;

use rusqlite::Connection;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::oracle::{prefix, resume_check, shared_oracle, turns};
use crate::support::*;

const AUTHENTIC: &str = "20261129_074216_cd438c";
const SAMPLE_SESSIONS: [&str; 3] = [AUTHENTIC, "hc_crafted_full", "hc_crafted_minimal"];

fn sample_db() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/samples/hermes/oracle/state.db")
}

fn db_of(home: &Path) -> PathBuf {
    home.join(".hermes/state.db")
}

/// Copies the sample database into `home`, its sessions recorded as run in
/// `cwd`.
fn place_sample(home: &Path, cwd: &Path) -> PathBuf {
    let db = db_of(home);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::copy(sample_db(), &db).unwrap();
    let c = Connection::open(&db).unwrap();
    c.execute(
        "UPDATE sessions SET cwd = ?1, git_repo_root = NULL",
        [cwd.to_str().unwrap()],
    )
    .unwrap();
    db
}

/// Returns a hash of every file of the store (the database and its WAL).
fn store_hash(home: &Path) -> String {
    let mut h = Sha256::new();
    let mut names: Vec<_> = std::fs::read_dir(home.join(".hermes"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    for p in names {
        h.update(p.to_string_lossy().as_bytes());
        h.update(std::fs::read(&p).unwrap());
    }
    format!("{:x}", h.finalize())
}

fn import(repo: &Repo, home: &Path) -> std::process::Output {
    repo.session()
        .args([
            "import",
            "--agent",
            "hermes",
            "--home",
            home.to_str().unwrap(),
        ])
        .output()
        .unwrap()
}

/// Makes an empty `state.db` the way Hermes does it: by Hermes itself.
pub(crate) fn init_hermes_home(home: &Path) {
    std::fs::create_dir_all(home.join(".hermes")).unwrap();
    let python = prefix().join("pkgs/hermes-venv/bin/python");
    let out = Command::new(python)
        .args([
            "-c",
            "from hermes_state import SessionDB; SessionDB().close()",
        ])
        .env("HOME", home)
        .env("HERMES_HOME", home.join(".hermes"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(db_of(home).is_file());
}

/// Makes a `state.db` with Hermes' schema without running Hermes: the
/// sample's schema, no rows (for tests that do not need the client).
fn empty_hermes_db(home: &Path) {
    let db = db_of(home);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::copy(sample_db(), &db).unwrap();
    let c = Connection::open(&db).unwrap();
    c.execute_batch("DELETE FROM messages; DELETE FROM session_model_usage; DELETE FROM sessions;")
        .unwrap();
}

fn count(db: &Path, sql: &str) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

#[test]
fn hermes_import_captures_this_repos_sessions_read_only() {
    let repo = Repo::new();
    let home = repo.outside("hermes-home");
    let db = place_sample(&home, &repo.root);
    // One session ran elsewhere; one in a subdirectory of the repo.
    let c = Connection::open(&db).unwrap();
    c.execute(
        "UPDATE sessions SET cwd = '/somewhere/else' WHERE id = 'hc_crafted_full'",
        [],
    )
    .unwrap();
    let sub = repo.root.join("sub");
    c.execute(
        "UPDATE sessions SET cwd = ?1 WHERE id = 'hc_crafted_minimal'",
        [sub.to_str().unwrap()],
    )
    .unwrap();
    drop(c);
    let before = store_hash(&home);
    let out = import(&repo, &home);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(printed.contains(AUTHENTIC), "{printed}");
    assert!(printed.contains("hc_crafted_minimal"), "{printed}");
    assert!(!printed.contains("hc_crafted_full"), "{printed}");
    assert_eq!(
        store_hash(&home),
        before,
        "capture wrote to the Hermes store"
    );

    let events = repo.events(AUTHENTIC);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds[0], "session.start");
    assert!(kinds.contains(&"command.run"), "{kinds:?}");
    let shown: Value = serde_json::from_str(&repo.ok(&["show", AUTHENTIC, "--json"])).unwrap();
    assert_eq!(shown["header"]["agent"], "hermes");
    assert_eq!(shown["header"]["cwd"], repo.root.to_str().unwrap());

    // Nothing new: nothing appended.
    let again = import(&repo, &home);
    assert!(again.status.success());
    assert_eq!(text(&again.stdout).trim(), "", "{}", text(&again.stderr));
}

#[test]
fn hermes_import_appends_new_messages_and_session_changes() {
    let repo = Repo::new();
    let home = repo.outside("hermes-home");
    let db = place_sample(&home, &repo.root);
    assert!(import(&repo, &home).status.success());
    let before = repo.events(AUTHENTIC).len();
    let c = Connection::open(&db).unwrap();
    c.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, 'user', 'one more thing', 1795938300.0)",
        [AUTHENTIC],
    )
    .unwrap();
    c.execute(
        "UPDATE sessions SET title = 'Named later', message_count = 7 WHERE id = ?1",
        [AUTHENTIC],
    )
    .unwrap();
    drop(c);
    let out = import(&repo, &home);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let events = repo.events(AUTHENTIC);
    let new: Vec<&Value> = events[before..].iter().collect();
    let kinds: Vec<&str> = new.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"message.user"), "{kinds:?}");
    assert!(
        new.iter()
            .any(|e| e["payload"]["changed"]["title"] == "Named later"),
        "{new:?}"
    );
    // The other sessions did not change.
    assert!(
        !text(&out.stdout).contains("hc_crafted"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn hermes_bad_rows_are_warnings_and_the_rest_is_captured() {
    let repo = Repo::new();
    let home = repo.outside("hermes-home");
    let db = place_sample(&home, &repo.root);
    let c = Connection::open(&db).unwrap();
    c.execute(
        "INSERT INTO messages (session_id, role, content, tool_calls, timestamp) VALUES ('hc_crafted_full', 'assistant', 'Let me look.', '[{not json', 1795938220.0)",
        [],
    )
    .unwrap();
    let bad_calls = c.last_insert_rowid();
    c.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('hc_crafted_full', 'tool', '{}', 1795938221.0)",
        [],
    )
    .unwrap();
    let orphan = c.last_insert_rowid();
    // A session whose parent row does not exist (Hermes' foreign key
    // makes that rare: a parent deleted without its children).
    c.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    c.execute(
        "INSERT INTO sessions (id, source, started_at, cwd, parent_session_id) VALUES ('lost_child', 'cli', 1795938230.0, ?1, 'gone\u{1b}[2J')",
        [repo.root.to_str().unwrap()],
    )
    .unwrap();
    c.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('lost_child', 'user', 'hi\u{1b}[2J', 1795938231.0)",
        [],
    )
    .unwrap();
    // A column of the wrong type costs the session nothing but that column.
    c.execute(
        "UPDATE sessions SET started_at = 'yesterday' WHERE id = 'hc_crafted_full'",
        [],
    )
    .unwrap();
    drop(c);
    let out = import(&repo, &home);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "messages row {bad_calls}: tool_calls is not valid JSON"
        )),
        "{err}"
    );
    assert!(
        err.contains("sessions row \"hc_crafted_full\": started_at of an unexpected type"),
        "{err}"
    );
    // A warning that names its row itself points at no line 0.
    assert!(
        err.contains("state.db: session lost_child continues") && !err.contains("state.db:0"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "messages row {orphan}: tool row without tool_call_id"
        )),
        "{err}"
    );
    assert!(err.contains("gone"), "{err}");
    assert!(!err.contains('\u{1b}'), "control characters printed: {err}");
    let events = repo.events("hc_crafted_full");
    let metas = events
        .iter()
        .filter(|e| e["type"] == "meta" && e["payload"]["native"]["table"] == "messages")
        .count();
    assert_eq!(metas, 2);
    assert!(text(&out.stdout).contains("lost_child"));
}

#[test]
fn hermes_databases_with_unknown_schemas() {
    let repo = Repo::new();
    // Newer, with the columns we need: read, with a warning.
    let newer = repo.outside("newer");
    let db = place_sample(&newer, &repo.root);
    Connection::open(&db)
        .unwrap()
        .execute("UPDATE schema_version SET version = 23", [])
        .unwrap();
    let out = import(&repo, &newer);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("23"), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(AUTHENTIC));

    // A column we need is missing: refused, naming it, nothing guessed.
    let repo = Repo::new();
    let broken = repo.outside("broken");
    let db = place_sample(&broken, &repo.root);
    let c = Connection::open(&db).unwrap();
    for t in ["", "_trigram"] {
        for op in ["insert", "delete", "update"] {
            c.execute_batch(&format!("DROP TRIGGER messages_fts{t}_{op}"))
                .unwrap();
        }
    }
    c.execute_batch("ALTER TABLE messages DROP COLUMN tool_calls")
        .unwrap();
    drop(c);
    let out = import(&repo, &broken);
    let err = text(&out.stderr);
    assert!(err.contains("no column tool_calls"), "{err}");
    assert!(err.contains("state.db"), "{err}");
    assert_eq!(text(&out.stdout).trim(), "");

    // Not a database at all.
    let repo = Repo::new();
    let corrupt = repo.outside("corrupt");
    std::fs::create_dir_all(corrupt.join(".hermes")).unwrap();
    std::fs::write(db_of(&corrupt), b"this is not sqlite\n").unwrap();
    let out = import(&repo, &corrupt);
    assert!(
        text(&out.stderr).contains("state.db"),
        "{}",
        text(&out.stderr)
    );
}

/// Inserts a compression chain: `chain_s1` (ended by compression)
/// continued by `chain_s2`, which holds the summary and the newer turns.
fn craft_chain(db: &Path, cwd: &Path) {
    let c = Connection::open(db).unwrap();
    let cwd = cwd.to_str().unwrap();
    c.execute(
        "INSERT INTO sessions (id, source, started_at, ended_at, end_reason, cwd, title, model, message_count) VALUES ('chain_s1', 'cli', 1795938300.0, 1795938310.0, 'compression', ?1, 'Chain', 'mock-model', 4)",
        [cwd],
    )
    .unwrap();
    c.execute(
        "INSERT INTO sessions (id, source, started_at, cwd, parent_session_id, title, model, message_count) VALUES ('chain_s2', 'cli', 1795938311.0, ?1, 'chain_s1', 'Chain #2', 'mock-model', 3)",
        [cwd],
    )
    .unwrap();
    let rows = [
        ("chain_s1", "user", "First task: list the files"),
        ("chain_s1", "assistant", "There are two files."),
        ("chain_s1", "user", "Now count them"),
        ("chain_s1", "assistant", "Two."),
        (
            "chain_s2",
            "user",
            "[CONTEXT COMPACTION] Earlier: listed two files and counted them.",
        ),
        ("chain_s2", "user", "Second task: name them"),
        ("chain_s2", "assistant", "file1 and file2."),
    ];
    for (i, (sid, role, content)) in rows.iter().enumerate() {
        c.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![sid, role, content, 1795938300.0 + i as f64],
        )
        .unwrap();
    }
}

#[test]
fn hermes_compression_chain_is_captured_as_one_session() {
    let repo = Repo::new();
    let home = repo.outside("hermes-home");
    let db = place_sample(&home, &repo.root);
    craft_chain(&db, &repo.root);
    let out = import(&repo, &home);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("chain_s1"));
    assert!(
        !text(&out.stdout).contains("chain_s2"),
        "{}",
        text(&out.stdout)
    );
    let events = repo.events("chain_s1");
    let cp: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "checkpoint")
        .collect();
    assert_eq!(cp.len(), 1);
    assert_eq!(cp[0]["payload"]["session"], "chain_s2");
    let last = events.last().unwrap();
    assert_eq!(last["payload"]["text"], "file1 and file2.");

    // The continuation goes on: appended to the same session.
    Connection::open(&db)
        .unwrap()
        .execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('chain_s2', 'user', 'Third task', 1795938400.0)",
            [],
        )
        .unwrap();
    let out = import(&repo, &home);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("chain_s1"),
        "{}",
        text(&out.stdout)
    );
    let events = repo.events("chain_s1");
    assert_eq!(events.last().unwrap()["payload"]["text"], "Third task");
    let shown = repo.ok(&["list"]);
    assert!(!shown.contains("chain_s2"), "{shown}");
}

#[test]
fn hermes_resume_writes_rows_only_into_a_hermes_database() {
    let repo = Repo::new();
    let home = repo.outside("hermes-home");
    place_sample(&home, &repo.root);
    assert!(import(&repo, &home).status.success());

    // No state.db: Hermes must create it, we never do.
    let fresh = repo.outside("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    let err = repo.fails(&["resume", AUTHENTIC, "--home", fresh.to_str().unwrap()], 1);
    assert!(err.contains("state.db"), "{err}");
    assert!(!db_of(&fresh).exists());

    // A database of a schema this build does not know: refused, untouched.
    empty_hermes_db(&fresh);
    let db = db_of(&fresh);
    Connection::open(&db)
        .unwrap()
        .execute("UPDATE schema_version SET version = 21", [])
        .unwrap();
    let before = std::fs::read(&db).unwrap();
    let err = repo.fails(&["resume", AUTHENTIC, "--home", fresh.to_str().unwrap()], 1);
    assert!(
        err.contains("version 21") && err.contains("run Hermes Agent once"),
        "{err}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);
    Connection::open(&db)
        .unwrap()
        .execute("UPDATE schema_version SET version = 22", [])
        .unwrap();

    let printed = repo.ok(&["resume", AUTHENTIC, "--home", fresh.to_str().unwrap()]);
    assert!(
        printed.contains(&format!("hermes chat --resume {AUTHENTIC}")),
        "{printed}"
    );
    let db = db_of(&fresh);
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM messages WHERE session_id = '{AUTHENTIC}'")
        ),
        6
    );
    assert_eq!(
        count(
            &db,
            &format!("SELECT message_count FROM sessions WHERE id = '{AUTHENTIC}'")
        ),
        6
    );
    let cwd: String = Connection::open(&db)
        .unwrap()
        .query_row("SELECT cwd FROM sessions WHERE id = ?1", [AUTHENTIC], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(cwd, repo.root.to_str().unwrap());
    // Full-text search rows came from Hermes' own triggers.
    assert!(count(&db, "SELECT count(*) FROM messages_fts") >= 6);

    // Again: already there, nothing written twice.
    repo.ok(&["resume", AUTHENTIC, "--home", fresh.to_str().unwrap()]);
    assert_eq!(count(&db, "SELECT count(*) FROM messages"), 6);

    // Hermes continued it (a row and its counter, as Hermes does): never
    // overwritten; --fork writes a new session.
    let c = Connection::open(&db).unwrap();
    c.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, 'user', 'next', 1.0)",
        [AUTHENTIC],
    )
    .unwrap();
    c.execute(
        "UPDATE sessions SET message_count = message_count + 1 WHERE id = ?1",
        [AUTHENTIC],
    )
    .unwrap();
    drop(c);
    let err = repo.fails(&["resume", AUTHENTIC, "--home", fresh.to_str().unwrap()], 1);
    assert!(
        err.contains("already exists") && err.contains("--fork"),
        "{err}"
    );
    assert_eq!(count(&db, "SELECT count(*) FROM messages"), 7);
    let printed = repo.ok(&[
        "resume",
        AUTHENTIC,
        "--fork",
        "--home",
        fresh.to_str().unwrap(),
    ]);
    let fork = printed.trim().rsplit(' ').next().unwrap().to_owned();
    assert_ne!(fork, AUTHENTIC);
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM messages WHERE session_id = '{fork}'")
        ),
        6
    );
    // A backup was taken before the first write.
    let backups = repo.root.join(".git/session/backups");
    assert!(std::fs::read_dir(backups).unwrap().count() >= 1);
}

#[test]
fn hermes_compression_chain_resumes_as_a_chain() {
    let repo = Repo::new();
    let home = repo.outside("hermes-home");
    let db = place_sample(&home, &repo.root);
    craft_chain(&db, &repo.root);
    let out = import(&repo, &home);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("chain_s1"));
    assert!(
        !text(&out.stdout).contains("chain_s2"),
        "{}",
        text(&out.stdout)
    );
    let events = repo.events("chain_s1");
    let cp: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "checkpoint")
        .collect();
    assert_eq!(cp.len(), 1);
    assert_eq!(cp[0]["payload"]["session"], "chain_s2");
    let shown = repo.ok(&["show", "chain_s1"]);
    assert!(shown.contains("checkpoint"), "{shown}");

    let fresh = repo.outside("fresh");
    empty_hermes_db(&fresh);
    repo.ok(&["resume", "chain_s1", "--home", fresh.to_str().unwrap()]);
    let db = db_of(&fresh);
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM sessions WHERE id = 'chain_s2' AND parent_session_id = 'chain_s1'"
        ),
        1
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM sessions WHERE id = 'chain_s1' AND end_reason = 'compression'"
        ),
        1
    );
}

// ------------------------------------------------------------ real client

/// Copies the sample database into two homes (the original moved to a
/// scratch project, and a source recorded as run in the repo), captures
/// from the source, resumes every session into a home Hermes initialised,
/// and compares what Hermes sends for each with the original.
#[test]
fn every_hermes_sample_resumes_with_the_same_history() {
    let repo = Repo::new();
    let original = repo.outside("original-home");
    let original_project = repo.outside("original-project");
    std::fs::create_dir_all(&original_project).unwrap();
    let odb = place_sample(&original, &original_project);
    craft_chain(&odb, &original_project);
    let source = repo.outside("source-home");
    let sdb = place_sample(&source, &repo.root);
    craft_chain(&sdb, &repo.root);
    assert!(import(&repo, &source).status.success());

    let fresh = repo.outside("fresh-home");
    init_hermes_home(&fresh);
    for id in SAMPLE_SESSIONS.iter().chain(&["chain_s1"]) {
        let printed = repo.ok(&["resume", id, "--home", fresh.to_str().unwrap()]);
        assert!(
            printed.contains(&format!("hermes chat --resume {id}")),
            "{printed}"
        );
    }
    let roots = [original_project.as_path(), repo.root.as_path()];
    for id in SAMPLE_SESSIONS.iter().chain(&["chain_s1"]) {
        let want = resume_check("hermes", &original, id, &original_project);
        let got = resume_check("hermes", &fresh, id, &repo.root);
        assert_eq!(turns(&got, &roots), turns(&want, &roots), "session {id}");
        assert!(!turns(&want, &roots).is_empty());
    }
    // The chain resumed at its tip, with the newer turns.
    let tip = resume_check("hermes", &fresh, "chain_s1", &repo.root);
    assert!(
        turns(&tip, &roots)
            .iter()
            .any(|t| t.contains("file1 and file2")),
        "{tip:#}"
    );

    // Listed by Hermes with its title and workspace.
    let list = Command::new(prefix().join("bin/hermes"))
        .args(["sessions", "list"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &fresh)
        .env("HERMES_HOME", fresh.join(".hermes"))
        .env("TERM", "dumb")
        .output()
        .unwrap();
    let listed = text(&list.stdout);
    assert!(list.status.success(), "{}", text(&list.stderr));
    assert!(listed.contains("Hand-crafted full"), "{listed}");
    assert!(listed.contains("repo"), "{listed}");
}

#[test]
fn hermes_fresh_session_survives_capture_and_resume() {
    let repo = Repo::new();
    let home = repo.outside("agent-home");
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new("bash")
        .arg(shared_oracle().join("hermes-roundtrip.sh"))
        .arg(&home)
        .arg(&repo.root)
        .env("ORACLE_PREFIX", prefix())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hermes roundtrip failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let session = made["session_id"].as_str().unwrap().to_owned();
    let captured = import(&repo, &home);
    assert!(
        text(&captured.stdout).contains(&session),
        "{}",
        text(&captured.stderr)
    );
    let fresh = repo.outside("fresh-home");
    init_hermes_home(&fresh);
    repo.ok(&["resume", &session, "--home", fresh.to_str().unwrap()]);
    // Resuming again before the agent ran is a no-op.
    repo.ok(&["resume", &session, "--home", fresh.to_str().unwrap()]);
    let want = resume_check("hermes", &home, &session, &repo.root);
    let got = resume_check("hermes", &fresh, &session, &repo.root);
    let roots = [repo.root.as_path()];
    let want = turns(&want, &roots);
    assert_eq!(turns(&got, &roots), want);
    assert!(
        want.iter().any(|t| t.contains("echo hello > note.txt")),
        "{want:?}"
    );

    // Hermes appended to the written session: never overwritten; --fork
    // writes the history under a new id that resumes too.
    let err = repo.fails(&["resume", &session, "--home", fresh.to_str().unwrap()], 1);
    assert!(
        err.contains("already exists") && err.contains("--fork"),
        "{err}"
    );
    // Hermes continued the session it was given: captured from there, the
    // session grows by that turn only (no new session, nothing twice).
    let before = repo.events(&session);
    let refs = ref_count(&repo);
    let out = import(&repo, &fresh);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(ref_count(&repo), refs, "{}", text(&out.stdout));
    let added = repo.events(&session)[before.len()..].to_vec();
    let probes: Vec<&Value> = added
        .iter()
        .filter(|e| e["type"] == "message.user")
        .collect();
    assert_eq!(probes.len(), 1, "{added:#?}");
    assert!(
        probes[0]["payload"]["text"]
            .as_str()
            .unwrap()
            .starts_with("ORACLE_RESUME_PROBE"),
        "{added:#?}"
    );
    let printed = repo.ok(&[
        "resume",
        &session,
        "--fork",
        "--home",
        fresh.to_str().unwrap(),
    ]);
    let fork = printed.trim().rsplit(' ').next().unwrap().to_owned();
    assert_ne!(fork, session);
    // The fork holds the session as captured: its history and the turn
    // Hermes added, which the check's own prompt follows.
    let forked = resume_check("hermes", &fresh, &fork, &repo.root);
    let continued = turns(&got, &roots);
    let forked = turns(&forked, &roots);
    assert!(forked.starts_with(&want), "{forked:#?}");
    assert_eq!(
        forked
            .iter()
            .filter(|t| t.contains("ORACLE_RESUME_PROBE"))
            .count(),
        continued
            .iter()
            .filter(|t| t.contains("ORACLE_RESUME_PROBE"))
            .count()
            + 1,
        "{forked:#?}"
    );
    // The fork did not take over the original's resume.
    let original = resume_check("hermes", &fresh, &session, &repo.root);
    assert!(turns(&original, &roots).len() > want.len());
}

/// A capture whose batches could not be published (here: a ref lock held
/// by someone else) leaves the parse state where the published batches
/// left it, so the next capture reads the same rows again and stores what
/// a capture that never failed would have: the session row's change too.
#[test]
fn hermes_capture_that_could_not_publish_leaves_the_parse_state_as_it_was() {
    let repo = Repo::new();
    let home = repo.outside("hermes-home");
    let db = place_sample(&home, &repo.root);
    assert!(import(&repo, &home).status.success());
    let before = repo.events(AUTHENTIC).len();
    let c = Connection::open(&db).unwrap();
    c.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, 'user', 'one more thing', 1795938300.0)",
        [AUTHENTIC],
    )
    .unwrap();
    c.execute(
        "UPDATE sessions SET title = 'Named later', message_count = 7 WHERE id = ?1",
        [AUTHENTIC],
    )
    .unwrap();
    drop(c);
    let lock = repo
        .root
        .join(".git/refs/sessions")
        .join(format!("{AUTHENTIC}.lock"));
    std::fs::write(&lock, "").unwrap();
    let failed = import(&repo, &home);
    assert!(!failed.status.success(), "{}", text(&failed.stdout));
    assert_eq!(repo.events(AUTHENTIC).len(), before);
    std::fs::remove_file(&lock).unwrap();
    let out = import(&repo, &home);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let events = repo.events(AUTHENTIC);
    let new: Vec<&Value> = events[before..].iter().collect();
    assert!(new.iter().any(|e| e["type"] == "message.user"), "{new:?}");
    assert!(
        new.iter()
            .any(|e| e["payload"]["changed"]["title"] == "Named later"),
        "the retried capture lost the session row's change: {new:?}"
    );
}

/// A handoff into a database says where the session went, as resume does
/// (`wrote hermes session … by rows inserted into …/state.db`), and its
/// loss report has no count of lines that match nothing shown.
#[test]
fn hermes_handoff_says_which_database_it_wrote() {
    let repo = Repo::new();
    let mut lines = session_lines("s-to-hermes", 4);
    lines[0]["header"]["cwd"] = repo.root.to_str().unwrap().into();
    lines.push(
        serde_json::json!({"seq": 4, "ts": "2026-01-01T00:00:04Z", "agent": "claude",
        "actor": "agent:claude", "type": "meta", "level": 2, "payload": {"record": "attachment"},
        "origin": {"agent": "claude", "native_id": "uuid-4", "native_seq": 4}}),
    );
    repo.import(&repo.write_jsonl("s.jsonl", &lines));
    let home = repo.outside("hermes-target");
    empty_hermes_db(&home);
    let out = repo
        .session()
        .args(["handoff", "s-to-hermes", "--to", "hermes", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let db = db_of(&home);
    assert!(
        err.lines().any(|l| l.starts_with("wrote hermes session ")
            && l.ends_with(&format!("by rows inserted into {}", db.display()))),
        "{err}"
    );
    assert!(err.contains("\nloss report:\n"), "{err}");
}

/// Appends a turn to session `native` of `db` as Hermes does when it
/// continues it: a user row and an assistant row, ids from the database.
fn continue_in_hermes(db: &Path, native: &str, prompt: &str) {
    let c = Connection::open(db).unwrap();
    for (role, text, at) in [
        ("user", prompt, 1_900_000_000.0),
        ("assistant", "ANSWER: done.", 1_900_000_001.0),
    ] {
        c.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![native, role, text, at],
        )
        .unwrap();
    }
    c.execute(
        "UPDATE sessions SET message_count = message_count + 2 WHERE id = ?1",
        [native],
    )
    .unwrap();
}

/// Returns each event's text, or its type when it has none.
fn said(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            e["payload"]["text"]
                .as_str()
                .map_or_else(|| e["type"].as_str().unwrap().to_owned(), str::to_owned)
        })
        .collect()
}

/// Returns the id of the one session in a Hermes database.
fn only_session(db: &Path) -> String {
    Connection::open(db)
        .unwrap()
        .query_row("SELECT id FROM sessions", [], |r| r.get(0))
        .unwrap()
}

fn ref_count(repo: &Repo) -> usize {
    repo.git(&["for-each-ref", "refs/sessions/"])
        .lines()
        .count()
}

/// A session `resume` wrote into a Hermes database, then continued by
/// Hermes, grows by Hermes' rows only: never captured as a new session
/// repeating the history; to a fork when the session moved on meanwhile;
/// and nothing twice when the capture cursors are lost.
#[test]
fn a_session_resumed_into_hermes_and_continued_there_grows_by_its_new_rows_only() {
    let repo = Repo::new();
    captured_claude(&repo);
    let n = repo.events(ROUNDTRIP).len();
    let home = repo.outside("hermes-home");
    empty_hermes_db(&home);
    let db = db_of(&home);
    let resume = |home: &Path| {
        repo.ok(&[
            "resume",
            ROUNDTRIP,
            "--agent",
            "hermes",
            "--home",
            home.to_str().unwrap(),
        ])
    };
    resume(&home);
    let native = only_session(&db);
    // Nothing of Hermes' yet: nothing new.
    assert!(import(&repo, &home).status.success());
    assert_eq!(ref_count(&repo), 1);
    assert_eq!(repo.events(ROUNDTRIP).len(), n);

    continue_in_hermes(&db, &native, "NEXT-Q: and now?");
    let out = import(&repo, &home);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(ref_count(&repo), 1, "{}", text(&out.stdout));
    // Hermes' two rows, and the session row's new counter as a change.
    assert_eq!(
        said(&repo.events(ROUNDTRIP)[n..]),
        ["meta", "NEXT-Q: and now?", "ANSWER: done."]
    );
    assert_eq!(text(&import(&repo, &home).stdout), "");
    // Hermes goes on: read on from the cursor, parents as stored.
    continue_in_hermes(&db, &native, "THIRD-Q: more?");
    assert!(import(&repo, &home).status.success());
    let events = repo.events(ROUNDTRIP);
    assert_eq!(
        said(&events[n..]),
        [
            "meta",
            "NEXT-Q: and now?",
            "ANSWER: done.",
            "meta",
            "THIRD-Q: more?",
            "ANSWER: done."
        ]
    );
    let total = events.len();
    // Without cursors nothing is added twice.
    std::fs::remove_dir_all(repo.root.join(".git/session/capture")).unwrap();
    assert!(import(&repo, &home).status.success());
    assert_eq!(repo.events(ROUNDTRIP).len(), total);
    assert_eq!(ref_count(&repo), 1);

    // Written again elsewhere; the session moves on before Hermes continues
    // there: Hermes' turn is a fork, Hermes', at the point written.
    let other = repo.outside("hermes-other");
    empty_hermes_db(&other);
    resume(&other);
    let at = repo.events(ROUNDTRIP).len() as u64 - 1;
    let note = repo.write_jsonl("note.jsonl", &[event(0)]);
    repo.ok(&["append", ROUNDTRIP, note.to_str().unwrap()]);
    let other_db = db_of(&other);
    let native = only_session(&other_db);
    assert!(import(&repo, &other).status.success());
    assert_eq!(ref_count(&repo), 1, "a fork before Hermes added anything");
    continue_in_hermes(&other_db, &native, "FORK-Q: elsewhere?");
    let out = import(&repo, &other);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(ref_count(&repo), 2, "{}", text(&out.stdout));
    let listed: Value = serde_json::from_str(&repo.ok(&["list", "--json"])).unwrap();
    let fork = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] != ROUNDTRIP)
        .unwrap();
    assert_eq!(fork["agent"], "hermes", "{fork}");
    let shown: Value =
        serde_json::from_str(&repo.ok(&["show", fork["id"].as_str().unwrap(), "--json"])).unwrap();
    assert_eq!(shown["header"]["lineage"]["parent_session"], ROUNDTRIP);
    assert_eq!(shown["header"]["lineage"]["fork_seq"].as_u64(), Some(at));
    let forked = shown["events"].as_array().unwrap();
    // Not taken before Hermes added to it: the session row as it is now
    // counts as written.
    assert_eq!(
        said(&forked[at as usize + 1..]),
        ["FORK-Q: elsewhere?", "ANSWER: done."]
    );
    let refs = repo.git(&["for-each-ref", "refs/sessions/"]);
    std::fs::remove_dir_all(repo.root.join(".git/session/capture")).unwrap();
    assert!(import(&repo, &other).status.success());
    assert!(import(&repo, &home).status.success());
    assert_eq!(repo.git(&["for-each-ref", "refs/sessions/"]), refs);
    repo.ok(&["verify"]);
    repo.fsck();
}

/// The record of what resume wrote is the store's, not the agent's: when
/// it names a session that is gone (removed after the resume), or rows
/// that Hermes has since deleted, the capture neither fails nor invents a
/// continuation: the database session is captured for what it holds.
#[test]
fn a_written_session_that_is_gone_or_rewritten_in_hermes_is_captured_as_it_is() {
    let repo = Repo::new();
    captured_claude(&repo);
    let resume = |home: &Path| {
        empty_hermes_db(home);
        repo.ok(&[
            "resume",
            ROUNDTRIP,
            "--agent",
            "hermes",
            "--home",
            home.to_str().unwrap(),
        ]);
        only_session(&db_of(home))
    };
    let every_text = || -> Vec<String> {
        repo.git(&[
            "for-each-ref",
            "--format=%(refname:strip=2)",
            "refs/sessions/",
        ])
        .lines()
        .flat_map(|s| said(&repo.events(s)))
        .collect()
    };

    // Hermes deletes every written row and writes the conversation anew
    // (new rowids, other text): the written marks no longer describe the
    // rows, and what is there now is taken once, nothing doubled.
    let other = repo.outside("hermes-other");
    let native = resume(&other);
    let before = repo.events(ROUNDTRIP);
    Connection::open(db_of(&other))
        .unwrap()
        .execute("DELETE FROM messages WHERE session_id = ?1", [&native])
        .unwrap();
    continue_in_hermes(&db_of(&other), &native, "REWRITTEN: from scratch");
    let out = import(&repo, &other);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let texts = every_text();
    assert_eq!(
        texts
            .iter()
            .filter(|t| *t == "REWRITTEN: from scratch")
            .count(),
        1,
        "{texts:?}"
    );
    // What was stored before is as it was.
    assert_eq!(repo.events(ROUNDTRIP)[..before.len()], before[..]);
    assert_eq!(text(&import(&repo, &other).stdout), "");

    // The canonical session is removed; Hermes goes on with its copy.
    let home = repo.outside("hermes-home");
    let native = resume(&home);
    repo.ok(&["rm", ROUNDTRIP]);
    continue_in_hermes(&db_of(&home), &native, "AFTER-RM: still there?");
    let refs = ref_count(&repo);
    let out = import(&repo, &home);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(ref_count(&repo), refs + 1, "{}", text(&out.stdout));
    let texts = every_text();
    assert_eq!(
        texts
            .iter()
            .filter(|t| *t == "AFTER-RM: still there?")
            .count(),
        1,
        "{texts:?}"
    );
    assert_eq!(text(&import(&repo, &home).stdout), "");
    repo.ok(&["verify"]);
    repo.fsck();
}

/// A session handed off to Hermes and continued there: the child forked
/// at the handoff holds Hermes' rows after what was written, nothing else.
#[test]
fn a_session_handed_off_to_hermes_and_continued_there_feeds_the_child_only() {
    let repo = Repo::new();
    captured_claude(&repo);
    let home = repo.outside("hermes-home");
    empty_hermes_db(&home);
    repo.ok(&[
        "handoff",
        ROUNDTRIP,
        "--to",
        "hermes",
        "--home",
        home.to_str().unwrap(),
    ]);
    let at = repo.events(ROUNDTRIP).len() as u64 - 1;
    let db = db_of(&home);
    let native = only_session(&db);
    let out = import(&repo, &home);
    assert!(text(&out.stdout).contains(&native), "{}", text(&out.stdout));
    assert_eq!(ref_count(&repo), 2);
    let child = repo.events(&native);
    assert_eq!(
        child.len() as u64,
        at + 1,
        "the child holds the parent's history"
    );
    continue_in_hermes(&db, &native, "NEXT-Q: and now?");
    assert!(import(&repo, &home).status.success());
    assert_eq!(ref_count(&repo), 2);
    assert_eq!(
        said(&repo.events(&native)[child.len()..]),
        ["meta", "NEXT-Q: and now?", "ANSWER: done."]
    );
    assert_eq!(repo.events(ROUNDTRIP).len() as u64, at + 1);
    repo.ok(&["verify"]);
}
