//! `git session resume` without the real clients: where files go, never
//! overwriting, forks, and the Codex database row. (The real clients check
//! the content in `oracle.rs`.)

use std::path::{Path, PathBuf};

use crate::support::*;

const ROUNDTRIP: &str = "d05046d2-74b1-4451-90dc-37fbd42c25e6";
const CODEX_ID: &str = "01a22641-1298-70e1-90e6-4b6faeb436bb";

#[test]
fn resume_writes_once_never_overwrites_and_forks_on_request() {
    let repo = Repo::new();
    captured_claude(&repo);
    let home = repo.outside("home-b");
    let out = repo
        .session()
        .args(["resume", "d050", "--home", home.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        format!("cd {} && claude --resume {ROUNDTRIP}", repo.root.display())
    );
    let project = git_session_adapters::claude::project_dir_name(repo.root.to_str().unwrap());
    let file = home
        .join(".claude/projects")
        .join(project)
        .join(format!("{ROUNDTRIP}.jsonl"));
    let written = std::fs::read(&file).unwrap();
    assert!(written.ends_with(b"\n"));

    let again = repo
        .session()
        .args(["resume", "d050", "--home", home.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(again.status.success());
    assert!(
        text(&again.stderr).contains("already in place"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(std::fs::read(&file).unwrap(), written);

    // The agent continued the session: ours no longer matches, and it stays.
    let mut changed = written.clone();
    changed.extend_from_slice(b"{\"type\":\"last-prompt\",\"sessionId\":\"x\"}\n");
    std::fs::write(&file, &changed).unwrap();
    let err = repo.fails(&["resume", "d050", "--home", home.to_str().unwrap()], 1);
    assert!(
        err.contains("already exists") && err.contains("--fork"),
        "{err}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), changed);

    let printed = repo.ok(&["resume", "d050", "--fork", "--home", home.to_str().unwrap()]);
    let fork = printed.trim().rsplit(' ').next().unwrap().to_owned();
    assert_ne!(fork, ROUNDTRIP);
    let shown: serde_json::Value =
        serde_json::from_str(&repo.ok(&["show", &fork, "--json"])).unwrap();
    assert_eq!(shown["header"]["lineage"]["parent_session"], ROUNDTRIP);
    assert_eq!(
        shown["events"].as_array().unwrap().len(),
        repo.events(ROUNDTRIP).len()
    );
    assert!(file.with_file_name(format!("{fork}.jsonl")).is_file());
    repo.fsck();
}

fn codex_repo() -> (Repo, PathBuf) {
    let repo = Repo::new();
    let source = repo.outside("source");
    copy_tree(
        &fixtures().join("codex/function-tools/native"),
        &source.join(".codex"),
        "/tmp/oracle-sample/codex/project",
        repo.root.to_str().unwrap(),
    );
    repo.ok(&[
        "import",
        "--agent",
        "codex",
        "--home",
        source.to_str().unwrap(),
    ]);
    let home = repo.outside("codex-target");
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    (repo, home)
}

fn threads_db(home: &Path) -> PathBuf {
    let db = home.join(".codex/state_5.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE threads (id TEXT PRIMARY KEY, rollout_path TEXT NOT NULL, cwd TEXT NOT NULL,
                               title TEXT NOT NULL DEFAULT '', model_provider TEXT NOT NULL,
                               created_at INTEGER NOT NULL, archived INTEGER NOT NULL DEFAULT 0);",
    )
    .unwrap();
    db
}

#[test]
fn codex_resume_registers_the_thread_once_after_a_backup() {
    let (repo, home) = codex_repo();
    let db = threads_db(&home);
    let out = repo
        .session()
        .args(["resume", CODEX_ID, "--home", home.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!("codex resume {CODEX_ID}")),
        "{}",
        text(&out.stdout)
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (path, cwd, provider): (String, String, String) = conn
        .query_row(
            "SELECT rollout_path, cwd, model_provider FROM threads WHERE id = ?1",
            [CODEX_ID],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert!(
        Path::new(&path).is_absolute() && Path::new(&path).is_file(),
        "{path}"
    );
    assert_eq!(cwd, repo.root.to_str().unwrap());
    assert_eq!(provider, "");
    // (This rollout has no title, so no session_index.jsonl entry.)
    let index =
        std::fs::read_to_string(home.join(".codex/session_index.jsonl")).unwrap_or_default();
    let backups: Vec<_> = std::fs::read_dir(repo.root.join(".git/session/backups"))
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)))
        .collect();
    assert_eq!(backups.len(), 1);
    let doctor = repo.ok(&["doctor"]);
    assert!(
        doctor.contains("backup     state_5.sqlite: ")
            && doctor.contains(".git/session/backups/state_5.sqlite."),
        "{doctor}"
    );

    // Again: nothing written, no second row or index line.
    repo.ok(&["resume", CODEX_ID, "--home", home.to_str().unwrap()]);
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM threads", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 1);
    assert_eq!(
        std::fs::read_to_string(home.join(".codex/session_index.jsonl")).unwrap_or_default(),
        index
    );
}

#[test]
fn codex_database_held_by_a_process_is_left_alone() {
    let (repo, home) = codex_repo();
    let db = threads_db(&home);
    // A stand-in for a running Codex: a process with the database open.
    let mut holder = std::process::Command::new("python3")
        .arg("-c")
        .arg("import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1]); c.execute('select 1 from threads').fetchall(); print('open', flush=True); time.sleep(30)")
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "open");
    let out = repo
        .session()
        .args(["resume", CODEX_ID, "--home", home.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("is open in process"),
        "{}",
        text(&out.stderr)
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM threads", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0);
    assert!(!repo.root.join(".git/session/backups").exists());
}

#[test]
fn a_claude_session_can_be_written_for_codex() {
    let repo = Repo::new();
    captured_claude(&repo);
    let home = repo.outside("codex-home");
    let out = repo
        .session()
        .args([
            "resume",
            ROUNDTRIP,
            "--agent",
            "codex",
            "--home",
            home.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    let id = printed.trim().rsplit(' ').next().unwrap();
    assert_ne!(id, ROUNDTRIP, "a new native id for another agent");
    let sessions = home.join(".codex/sessions");
    let mut found = Vec::new();
    let mut stack = vec![sessions];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p)
            } else {
                found.push(p)
            }
        }
    }
    assert_eq!(found.len(), 1);
    assert!(found[0].to_string_lossy().ends_with(&format!("{id}.jsonl")));
    let rollout = std::fs::read_to_string(&found[0]).unwrap();
    assert!(rollout.contains("Please write hello into note.txt"));
}

#[test]
fn resuming_where_the_session_was_captured_finds_it_in_place() {
    for (agent, fixture, old, id) in [
        (
            "claude",
            "claude/roundtrip/native",
            "/tmp/oracle-sample/claude/project",
            ROUNDTRIP,
        ),
        (
            "codex",
            "codex/function-tools/native",
            "/tmp/oracle-sample/codex/project",
            CODEX_ID,
        ),
    ] {
        let repo = Repo::new();
        let dot = if agent == "claude" {
            ".claude"
        } else {
            ".codex"
        };
        copy_tree(
            &fixtures().join(fixture),
            &repo.home.join(dot),
            old,
            repo.root.to_str().unwrap(),
        );
        if agent == "claude" {
            // The agent keeps a session under the encoding of its cwd.
            let projects = repo.home.join(".claude/projects");
            let real = git_session_adapters::claude::project_dir_name(repo.root.to_str().unwrap());
            std::fs::rename(
                projects.join("-tmp-oracle-sample-claude-project"),
                projects.join(real),
            )
            .unwrap();
        }
        let home = repo.home.to_str().unwrap();
        repo.ok(&["import", "--agent", agent, "--home", home]);
        let before = std::process::Command::new("find")
            .arg(&repo.home)
            .arg("-type")
            .arg("f")
            .output()
            .unwrap()
            .stdout;
        let out = repo
            .session()
            .args(["resume", id, "--home", home])
            .output()
            .unwrap();
        assert!(out.status.success(), "{agent}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("already in place"),
            "{agent}: {}",
            text(&out.stderr)
        );
        let after = std::process::Command::new("find")
            .arg(&repo.home)
            .arg("-type")
            .arg("f")
            .output()
            .unwrap()
            .stdout;
        assert_eq!(
            before, after,
            "{agent}: files were added next to the original"
        );
    }
}
