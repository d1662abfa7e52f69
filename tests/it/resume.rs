//! `git session resume` without the real clients: where files go, never
//! overwriting, forks, and the Codex database row. (The real clients check
//! the content in `oracle.rs`.)

use std::path::{Path, PathBuf};

use crate::support::*;

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
        // The store written is another home's: the command says so.
        format!(
            "cd {} && HOME={} claude --resume {ROUNDTRIP}",
            repo.root.display(),
            home.display()
        )
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

#[test]
fn resuming_in_another_agent_again_continues_the_copy_written_before() {
    let repo = Repo::new();
    captured_claude(&repo);
    let home = repo.outside("codex-home");
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let home_arg = home.to_str().unwrap();
    let resume = || repo.ok(&["resume", ROUNDTRIP, "--agent", "codex", "--home", home_arg]);
    let first = resume();
    assert!(first.contains("codex resume "), "{first}");
    assert_eq!(resume(), first);
    let rollouts = codex_rollouts(&home);
    assert_eq!(rollouts.len(), 1, "{rollouts:?}");
    let file = &rollouts[0];
    let turn = |text: &str| {
        format!(
            r#"{{"timestamp":"2026-01-02T00:00:00.000Z","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"{text}"}}]}}}}"#
        ) + "\n"
    };
    // Codex continued it, and the turn was captured into the session:
    // the copy holds the whole session, and is the one to resume.
    let mut body = std::fs::read_to_string(file).unwrap();
    body.push_str(&turn("NEXT-Q: and now?"));
    std::fs::write(file, &body).unwrap();
    repo.ok(&["import", "--home", home_arg]);
    assert_eq!(
        repo.events(ROUNDTRIP).last().unwrap()["payload"]["text"],
        "NEXT-Q: and now?"
    );
    assert_eq!(resume(), first);
    assert_eq!(codex_rollouts(&home).len(), 1);
    assert_eq!(std::fs::read_to_string(file).unwrap(), body);
    // Continued again and not captured: that copy holds more than the
    // session and stays as it is; the write-back makes a new one.
    body.push_str(&turn("LATER-Q: not captured"));
    std::fs::write(file, &body).unwrap();
    let other = resume();
    assert_ne!(other, first);
    assert_eq!(codex_rollouts(&home).len(), 2);
    assert_eq!(std::fs::read_to_string(file).unwrap(), body);
    // Its own resume again is that new copy.
    assert_eq!(resume(), other);
    assert_eq!(codex_rollouts(&home).len(), 2);
    // A fork asks for a new copy, and gets one.
    repo.ok(&[
        "resume", ROUNDTRIP, "--agent", "codex", "--fork", "--home", home_arg,
    ]);
    assert_eq!(codex_rollouts(&home).len(), 3);
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
    // Said once, with the backup's path and how many are kept.
    let said = text(&out.stderr);
    assert_eq!(said.matches("database backup: ").count(), 1, "{said}");
    assert!(
        said.contains(".git/session/backups/state_5.sqlite.")
            && said.contains("the last 5 of each database are kept"),
        "{said}"
    );
    let doctor = repo.ok(&["doctor"]);
    assert!(
        doctor.contains("backup     state_5.sqlite: ")
            && doctor.contains(".git/session/backups/state_5.sqlite."),
        "{doctor}"
    );

    // Again: nothing written, no second row or index line, no backup.
    let again = repo
        .session()
        .args([
            "resume",
            CODEX_ID,
            "--home",
            home.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(!text(&again.stderr).contains("database backup"));
    let doc: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(doc["backups"], serde_json::json!([]), "{doc}");
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

#[test]
fn a_killed_resume_leaves_temp_files_the_next_one_removes() {
    let repo = Repo::new();
    captured_claude(&repo);
    let home = repo.outside("home-b");
    let project = git_session_adapters::claude::project_dir_name(repo.root.to_str().unwrap());
    let dir = home.join(".claude/projects").join(project);
    std::fs::create_dir_all(&dir).unwrap();
    // A resume killed mid-write: its pid is gone.
    let mut done = std::process::Command::new("true").spawn().unwrap();
    let dead = done.id();
    done.wait().unwrap();
    let killed = dir.join(format!(".git-session-{dead}-AbCd12"));
    std::fs::write(&killed, vec![b'x'; 1 << 16]).unwrap();
    // One of a resume still running (this test's own pid stands in).
    let running = dir.join(format!(".git-session-{}-EfGh34", std::process::id()));
    std::fs::write(&running, b"in progress").unwrap();
    // One left by an older version (no pid), long ago; and a fresh one.
    let old = dir.join(".git-session-Zz9Yy8");
    std::fs::write(&old, b"old").unwrap();
    let touched = std::process::Command::new("touch")
        .args(["-d", "2 days ago"])
        .arg(&old)
        .status()
        .unwrap();
    assert!(touched.success());
    let fresh = dir.join(".git-session-Qq1Ww2");
    std::fs::write(&fresh, b"fresh").unwrap();
    // Someone else's file that merely looks similar stays.
    let other = dir.join("git-session-notes.txt");
    std::fs::write(&other, b"mine").unwrap();

    repo.ok(&["resume", "d050", "--home", home.to_str().unwrap()]);
    assert!(!killed.exists(), "a dead writer's temp file stays");
    assert!(!old.exists(), "an old unnamed temp file stays");
    assert!(running.exists() && fresh.exists() && other.exists());
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".git-session-"))
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
}

/// Returns how many events the roundtrip fixture, and the same session
/// continued by one more turn, give when captured on their own.
fn claude_counts() -> (usize, usize) {
    let count = |resumed: bool| {
        let repo = Repo::new();
        captured_claude(&repo);
        if !resumed {
            return repo.events(ROUNDTRIP).len();
        }
        let source = repo.outside("source");
        let file = source.join(format!(
            ".claude/projects/-tmp-oracle-sample-claude-project/{ROUNDTRIP}.jsonl"
        ));
        std::fs::write(&file, continued_text(&repo)).unwrap();
        repo.ok(&["import", "--home", source.to_str().unwrap()]);
        repo.events(ROUNDTRIP).len()
    };
    (count(false), count(true))
}

/// Returns the roundtrip session continued by one more turn, as the client
/// wrote it (`fixtures/capture/claude-resumed.jsonl`), placed in `repo`.
fn continued_text(repo: &Repo) -> String {
    std::fs::read_to_string(fixtures().join("capture/claude-resumed.jsonl"))
        .unwrap()
        .replace(
            "/tmp/oracle-sample/claude/project",
            repo.root.to_str().unwrap(),
        )
}

/// Appends the turn the client added in `claude-resumed.jsonl` to the
/// native file at `file`, linked to that file's last record, as the client
/// links a resumed session's next prompt.
fn continue_natively(repo: &Repo, file: &Path) {
    let mut all = std::fs::read_to_string(file).unwrap();
    let last = all
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v["uuid"].as_str().map(str::to_owned))
        .unwrap();
    // In the fixture the new prompt names the roundtrip's last record.
    let fixture_last = "9c8de382-";
    let turn = continued_text(repo)
        .lines()
        .skip(34)
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    let at = turn
        .find(&format!("\"parentUuid\":\"{fixture_last}"))
        .expect("the new prompt names the old leaf");
    let end = at + turn[at..].find("\",").unwrap() + 1;
    all.push_str(&turn[..at]);
    all.push_str(&format!("\"parentUuid\":\"{last}\""));
    all.push_str(&turn[end..]);
    std::fs::write(file, all).unwrap();
}

fn session_count(repo: &Repo) -> usize {
    repo.git(&["for-each-ref", "refs/sessions/"])
        .lines()
        .count()
}

#[test]
fn a_resumed_session_the_agent_continued_grows_by_its_new_records_only() {
    let (base, whole) = claude_counts();
    let new = whole - base;
    let repo = Repo::new();
    captured_claude(&repo);
    // Events of git-session's own are written as minimal records, which
    // the agent's file then holds under uuids of the render's.
    let note = repo.write_jsonl("note.jsonl", &[event(0), event(1)]);
    repo.ok(&["append", ROUNDTRIP, note.to_str().unwrap()]);
    let n = repo.events(ROUNDTRIP).len();
    assert_eq!(n, base + 2);
    let project = git_session_adapters::claude::project_dir_name(repo.root.to_str().unwrap());
    let home = repo.outside("home-b");
    repo.ok(&["resume", ROUNDTRIP, "--home", home.to_str().unwrap()]);
    let file = home
        .join(".claude/projects")
        .join(&project)
        .join(format!("{ROUNDTRIP}.jsonl"));
    let before = std::fs::read(&file).unwrap();
    // Nothing of the agent's yet: nothing to capture.
    assert_eq!(repo.ok(&["import", "--home", home.to_str().unwrap()]), "");
    continue_natively(&repo, &file);
    let grown = std::fs::read(&file).unwrap();
    repo.ok(&["import", "--home", home.to_str().unwrap()]);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        grown,
        "capture wrote the store"
    );
    assert!(grown.starts_with(&before));
    let events = repo.events(ROUNDTRIP);
    assert_eq!(events.len(), n + new, "not exactly the new records");
    assert_eq!(session_count(&repo), 1);
    // The new prompt's parent is the last event written, a note.
    let prompt = events[n..]
        .iter()
        .find(|e| e["type"] == "message.user")
        .unwrap();
    assert_eq!(prompt["parent_seq"].as_u64(), Some(n as u64 - 1));
    assert_eq!(repo.ok(&["import", "--home", home.to_str().unwrap()]), "");

    // Written again elsewhere, and the session moves on before the agent
    // continues there: the agent's turn becomes a fork at the point written.
    let home_c = repo.outside("home-c");
    repo.ok(&["resume", ROUNDTRIP, "--home", home_c.to_str().unwrap()]);
    let at = repo.events(ROUNDTRIP).len() as u64 - 1;
    repo.ok(&["append", ROUNDTRIP, note.to_str().unwrap()]);
    let file_c = home_c
        .join(".claude/projects")
        .join(&project)
        .join(format!("{ROUNDTRIP}.jsonl"));
    continue_natively(&repo, &file_c);
    let out = repo.ok(&["import", "--home", home_c.to_str().unwrap()]);
    let fork = out.split_whitespace().next().expect("a fork was reported");
    assert_ne!(fork, ROUNDTRIP);
    assert_eq!(session_count(&repo), 2);
    let shown: serde_json::Value =
        serde_json::from_str(&repo.ok(&["show", fork, "--json"])).unwrap();
    assert_eq!(shown["header"]["lineage"]["parent_session"], ROUNDTRIP);
    assert_eq!(shown["header"]["lineage"]["fork_seq"].as_u64(), Some(at));
    assert_eq!(
        shown["events"].as_array().unwrap().len() as u64,
        at + 1 + new as u64
    );
    assert_eq!(repo.events(ROUNDTRIP).len() as u64, at + 3);
    // Local state is rebuildable: without cursors, the same fork is found
    // again and nothing is added twice.
    let refs = repo.git(&["for-each-ref", "refs/sessions/"]);
    std::fs::remove_dir_all(repo.root.join(".git/session/capture")).unwrap();
    let again_c = repo.ok(&["import", "--home", home_c.to_str().unwrap()]);
    let again_b = repo.ok(&["import", "--home", home.to_str().unwrap()]);
    assert_eq!(
        repo.git(&["for-each-ref", "refs/sessions/"]),
        refs,
        "{again_c}{again_b}"
    );
    repo.ok(&["verify"]);
    repo.fsck();
}

fn continued_in(root: &Path) -> String {
    std::fs::read_to_string(fixtures().join("capture/claude-resumed.jsonl"))
        .unwrap()
        .replace("/tmp/oracle-sample/claude/project", root.to_str().unwrap())
}

/// Returns the turn the client added in `claude-resumed.jsonl` (lines 35
/// on), made another turn when `other`: new uuids and ids, and the prompt
/// `Now append moon` instead of `Now append world`.
pub(crate) fn added_turn(root: &Path, other: bool) -> String {
    let text = continued_in(root);
    let mut turn = text.lines().skip(34).collect::<Vec<_>>().join("\n") + "\n";
    if other {
        let uuids: Vec<String> = turn
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["uuid"].as_str().map(str::to_owned))
            .collect();
        for u in uuids {
            turn = turn.replace(&u, &format!("{}beef", &u[..u.len() - 4]));
        }
        turn = turn
            .replace("msg_mock_", "msg_mockb_")
            .replace("toolu_", "toolu_b")
            .replace("Now append world", "Now append moon");
    }
    turn
}

/// Returns the user prompts (string contents) on the path the client
/// sends: from the last record with a uuid back to the root.
pub(crate) fn prompts_on_path(file: &Path) -> Vec<String> {
    let records: Vec<serde_json::Value> = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["uuid"].is_string())
        .collect();
    let by_uuid: std::collections::HashMap<&str, &serde_json::Value> = records
        .iter()
        .map(|r| (r["uuid"].as_str().unwrap(), r))
        .collect();
    let mut out = Vec::new();
    let mut at = records.last();
    while let Some(r) = at {
        if r["type"] == "user"
            && let Some(t) = r["message"]["content"].as_str()
        {
            out.push(t.to_owned());
        }
        at = r["parentUuid"]
            .as_str()
            .and_then(|p| by_uuid.get(p).copied());
    }
    out.reverse();
    out
}

/// Two machines continue one Claude session: the repository `a` captured
/// the roundtrip fixture; a clone `b` resumes it into its own HOME, the
/// client adds a turn there, `b` captures and pushes; meanwhile the
/// original file on `a` gets another turn, and `a` fetches and captures.
/// Returns `a`; the session then holds both continuations.
pub(crate) fn two_continuations() -> Repo {
    let a = Repo::new();
    captured_claude(&a);
    let source = a.outside("source");
    let remote = a.outside("remote.git");
    a.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    a.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    a.git(&["push", "-q", "origin", "main"]);
    a.ok(&["push", "--to", "origin"]);
    let b = a.outside("clone-b");
    a.git(&["clone", "-q", remote.to_str().unwrap(), b.to_str().unwrap()]);
    let on_b = |args: &[&str]| {
        let out = a.session_in(&b).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    on_b(&["fetch"]);
    let home_b = a.outside("home-b");
    on_b(&["resume", ROUNDTRIP, "--home", home_b.to_str().unwrap()]);
    let dir_b = git_session_adapters::claude::project_dir_name(b.to_str().unwrap());
    let file_b = home_b
        .join(".claude/projects")
        .join(dir_b)
        .join(format!("{ROUNDTRIP}.jsonl"));
    let mut body = std::fs::read_to_string(&file_b).unwrap();
    body.push_str(&added_turn(&b, false));
    std::fs::write(&file_b, body).unwrap();
    on_b(&["import", "--home", home_b.to_str().unwrap()]);
    on_b(&["push", "--to", "origin"]);

    let file_a = source.join(format!(
        ".claude/projects/-tmp-oracle-sample-claude-project/{ROUNDTRIP}.jsonl"
    ));
    let mut body = std::fs::read_to_string(&file_a).unwrap();
    body.push_str(&added_turn(&a.root, true));
    std::fs::write(&file_a, body).unwrap();
    a.ok(&["fetch"]);
    a.ok(&["import", "--home", source.to_str().unwrap()]);
    a
}

/// The session got events of git-session's own (`append`), then the agent
/// continued its native file, which capture appended after them. Returns
/// the repository.
pub(crate) fn append_then_native_turn() -> Repo {
    let repo = Repo::new();
    captured_claude(&repo);
    let mut note = event(0);
    note["payload"]["text"] = "APPENDED-NOTE: the tests must pass".into();
    let note = repo.write_jsonl("note.jsonl", &[note]);
    repo.ok(&["append", ROUNDTRIP, note.to_str().unwrap()]);
    let source = repo.outside("source");
    let file = source.join(format!(
        ".claude/projects/-tmp-oracle-sample-claude-project/{ROUNDTRIP}.jsonl"
    ));
    std::fs::write(&file, continued_text(&repo)).unwrap();
    repo.ok(&["import", "--home", source.to_str().unwrap()]);
    repo
}

/// Resumes `ROUNDTRIP` into a fresh HOME; returns it, the file and stderr.
pub(crate) fn resume_fresh(repo: &Repo, tag: &str) -> (PathBuf, PathBuf, String) {
    let home = repo.outside(&format!("fresh-{tag}"));
    let out = repo
        .session()
        .args(["resume", ROUNDTRIP, "--home", home.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dir = git_session_adapters::claude::project_dir_name(repo.root.to_str().unwrap());
    let file = home
        .join(".claude/projects")
        .join(dir)
        .join(format!("{ROUNDTRIP}.jsonl"));
    (home, file, text(&out.stderr))
}

#[test]
fn two_continuations_of_one_session_resume_as_one_chain() {
    let repo = two_continuations();
    let events = repo.events(ROUNDTRIP);
    let prompts: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "message.user")
        .filter_map(|e| e["payload"]["text"].as_str())
        .filter(|t| t.starts_with("Now append"))
        .collect();
    assert_eq!(prompts, ["Now append world", "Now append moon"]);
    let (_, file, stderr) = resume_fresh(&repo, "c");
    let path = prompts_on_path(&file);
    let world = path.iter().position(|p| p == "Now append world");
    let moon = path.iter().position(|p| p == "Now append moon");
    assert!(
        world.is_some() && moon.is_some() && world < moon,
        "both continuations, in canonical order, on the path the client sends: {path:?}"
    );
    assert!(stderr.contains("continuation-relinked"), "{stderr}");
}

#[test]
fn native_turns_after_an_append_resume_after_the_appended_events() {
    let repo = append_then_native_turn();
    let (_, file, stderr) = resume_fresh(&repo, "c");
    let path = prompts_on_path(&file);
    let note = path.iter().position(|p| p.starts_with("APPENDED-NOTE"));
    let world = path.iter().position(|p| p == "Now append world");
    assert!(
        note.is_some() && world.is_some() && note < world,
        "the appended note is off the path: {path:?}"
    );
    assert!(stderr.contains("continuation-relinked"), "{stderr}");
}
