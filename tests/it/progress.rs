//! Progress: the counts the ops report (native files, events, fetched
//! sessions) and the bar the cli draws from them, only on a terminal.

use std::cell::RefCell;
use std::path::PathBuf;

use git_session::clock::Clock;
use git_session::ops;
use git_session::ops::progress::Progress;
use git_session::store::Store;
use git_session_schema::{Agent, SessionId};

use crate::support::*;

const CLAUDE_ID: &str = "d05046d2-74b1-4451-90dc-37fbd42c25e6";

/// One stage as the op reported it.
#[derive(Debug, PartialEq, Eq)]
struct Stage {
    what: String,
    unit: &'static str,
    total: u64,
    done: u64,
}

/// Records every stage with its total (including `more`) and done count.
#[derive(Default)]
struct Recorder(RefCell<Vec<Stage>>);

impl Progress for Recorder {
    fn stage(&self, what: &str, unit: &'static str, total: u64) {
        self.0.borrow_mut().push(Stage {
            what: what.to_owned(),
            unit,
            total,
            done: 0,
        });
    }
    fn more(&self, n: u64) {
        self.0.borrow_mut().last_mut().expect("a stage").total += n;
    }
    fn done(&self, n: u64) {
        self.0.borrow_mut().last_mut().expect("a stage").done += n;
    }
}

fn stage(what: &str, unit: &'static str, total: u64, done: u64) -> Stage {
    Stage {
        what: what.into(),
        unit,
        total,
        done,
    }
}

/// A home with the Claude and Codex fixtures, recorded as run in `repo`.
fn two_agents(repo: &Repo) -> PathBuf {
    let source = claude_home(repo);
    copy_tree(
        &fixtures().join("codex/function-tools/native"),
        &source.join(".codex"),
        "/tmp/oracle-sample/codex/project",
        repo.root.to_str().unwrap(),
    );
    source
}

fn clock() -> Clock {
    Clock::fixed(jiff::Timestamp::from_second(1_800_000_000).unwrap())
}

fn capture(repo: &Repo, home: &std::path::Path) -> Vec<Stage> {
    let store = Store::discover(&repo.root).unwrap();
    let recorder = Recorder::default();
    let request = ops::capture::CaptureRequest {
        agents: vec![Agent::Claude, Agent::Codex],
        home: home.to_owned(),
        env: &|_| None,
        sqlite: Default::default(),
    };
    let report = ops::capture::capture_reporting(&store, &clock(), &request, &recorder).unwrap();
    assert!(report.skipped.is_empty(), "{report:?}");
    recorder.0.into_inner()
}

#[test]
fn capture_counts_every_native_file_of_every_agent() {
    let repo = Repo::new();
    let home = two_agents(&repo);
    let first = capture(&repo, &home);
    assert_eq!(
        first,
        [stage("Capturing agent sessions", "files", 2, 2)],
        "one Claude and one Codex file"
    );
    // Unchanged files are still work done (looked at, nothing new).
    assert_eq!(capture(&repo, &home), first);
    // An agent with no store adds nothing.
    let empty = repo.outside("empty-home");
    std::fs::create_dir_all(&empty).unwrap();
    assert_eq!(
        capture(&repo, &empty),
        [stage("Capturing agent sessions", "files", 0, 0)]
    );
}

#[test]
fn resume_and_handoff_count_the_events_they_write() {
    let repo = Repo::new();
    let home = two_agents(&repo);
    capture(&repo, &home);
    let store = Store::discover(&repo.root).unwrap();
    let id = SessionId::new(CLAUDE_ID.to_owned()).unwrap();
    let events = store.stat(&id).unwrap().events;
    assert!(events > 3, "{events}");
    let target = repo.outside("target");
    std::fs::create_dir_all(target.join(".claude")).unwrap();
    std::fs::create_dir_all(target.join(".codex")).unwrap();

    let recorder = Recorder::default();
    let request = ops::resume::ResumeRequest {
        id: id.clone(),
        agent: None,
        home: target.clone(),
        env: &|_| None,
        fork: false,
    };
    ops::resume::resume_reporting(&store, &clock(), &request, &recorder).unwrap();
    assert_eq!(
        recorder.0.into_inner(),
        [stage("Writing the session back", "events", events, events)]
    );

    let recorder = Recorder::default();
    let request = ops::handoff::HandoffRequest {
        id: id.clone(),
        to: Agent::Codex,
        note: None,
        budget: git_session_compiler::DEFAULT_BUDGET,
        history: Default::default(),
        summarizer_cmd: None,
        home: target,
        env: &|_| None,
        key: None,
        key_origin: String::new(),
        signer: None,
    };
    ops::handoff::handoff_reporting(&store, &clock(), &request, &recorder).unwrap();
    assert_eq!(
        recorder.0.into_inner(),
        [
            stage("Compiling the brief", "events", 0, 0),
            // The whole history follows the brief (--history full).
            stage("Writing the handoff", "events", events, events),
        ]
    );
}

#[test]
fn fetch_and_sync_count_the_sessions_they_verify() {
    let repo = Repo::new();
    let home = two_agents(&repo);
    capture(&repo, &home);
    let remote = repo.outside("remote.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    let url = format!("file://{}", remote.display());
    repo.git(&["remote", "add", "origin", &url]);
    repo.ok(&["push", "--to", "origin"]);
    let clone = repo.outside("clone");
    repo.git(&[
        "clone",
        "-q",
        remote.to_str().unwrap(),
        clone.to_str().unwrap(),
    ]);
    let store = Store::discover(&clone).unwrap();
    let trust = ops::sync::Trust::default();

    let recorder = Recorder::default();
    let report = ops::sync::fetch_reporting(&store, "origin", &trust, &recorder).unwrap();
    assert_eq!(report.changed.len(), 2);
    assert_eq!(
        recorder.0.into_inner(),
        [
            stage("Fetching sessions from origin", "refs", 0, 0),
            stage("Verifying fetched sessions", "sessions", 2, 2),
        ]
    );

    let recorder = Recorder::default();
    ops::sync::sync_reporting(&store, "origin", &trust, &recorder).unwrap();
    assert_eq!(
        recorder.0.into_inner(),
        [
            stage("Fetching sessions from origin", "refs", 0, 0),
            stage("Verifying fetched sessions", "sessions", 2, 2),
            stage("Pushing sessions to origin", "refs", 0, 0),
        ]
    );
}

/// Runs `git-session ARGS` under a pseudo-terminal (util-linux `script`)
/// and returns what it drew.
fn on_terminal(repo: &Repo, args: &str) -> String {
    let bin = assert_cmd::cargo::cargo_bin!("git-session");
    let out = repo
        .program_in("script", &repo.root)
        .args(["-qc", &format!("{} {args}", bin.display()), "/dev/null"])
        .env("GIT_SESSION_PROGRESS_DELAY_MS", "0")
        .env("TERM", "xterm")
        .output()
        .expect("util-linux script runs");
    text(&out.stdout)
}

#[test]
fn import_draws_its_counts_on_a_terminal_only() {
    let repo = Repo::new();
    let home = two_agents(&repo);
    let home = home.to_str().unwrap();
    let drawn = on_terminal(&repo, &format!("import --home {home}"));
    assert!(
        drawn.contains("Capturing agent sessions") && drawn.contains("2/2 files"),
        "{drawn:?}"
    );
    // -q and --json: no bar.
    for quiet in [
        format!("-q import --home {home}"),
        format!("import --json --home {home}"),
    ] {
        let drawn = on_terminal(&repo, &quiet);
        assert!(!drawn.contains("Capturing"), "{quiet}: {drawn:?}");
    }
    // Not a terminal: the output is what it always was, no bar, no
    // control characters.
    let out = repo
        .session()
        .args(["import", "--home", home])
        .env("GIT_SESSION_PROGRESS_DELAY_MS", "0")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = text(&out.stderr);
    assert_eq!(stderr, "Captured 0 sessions; 2 unchanged\n");
    assert!(!stderr.contains('\r') && !stderr.contains('\u{1b}'));
}
