//! `git session watch`: a session created after it started (in a new
//! project directory) is captured, and so are later appends; status sees
//! it running. Agent stores stay untouched.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

const CLAUDE_ID: &str = "d05046d2-74b1-4451-90dc-37fbd42c25e6";

/// Ends the watch when the test ends, pass or fail (by its own pid).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn event_count(repo: &Repo) -> usize {
    let out = repo
        .session()
        .args(["show", CLAUDE_ID, "--json"])
        .output()
        .unwrap();
    if !out.status.success() {
        return 0;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["events"].as_array().unwrap().len()
}

fn hash_tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn watch_captures_a_session_created_after_it_started() {
    let repo = Repo::new();
    let projects = repo.home.join(".claude/projects");
    std::fs::create_dir_all(&projects).unwrap();
    let mut cmd = repo.spawnable_in(&repo.root);
    cmd.args(["watch", "--agent", "claude"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Running(cmd.spawn().unwrap());
    let stderr = BufReader::new(child.0.stderr.take().unwrap());
    let mut lines = stderr.lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("watching claude: "), "{first}");
    let status: serde_json::Value = serde_json::from_str(&repo.ok(&["status", "--json"])).unwrap();
    assert_eq!(status["watch"], child.0.id(), "{status}");
    // A second watch of the same repository is refused, naming the first,
    // and leaves it the one status reports.
    let mut second = repo.spawnable_in(&repo.root);
    second
        .args(["watch", "--agent", "claude"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut second = Running(second.spawn().unwrap());
    let mut ended = None;
    wait_for("the second watch to be refused", || {
        ended = second.0.try_wait().unwrap();
        ended.is_some()
    });
    assert_eq!(ended.unwrap().code(), Some(1));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut second.0.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("already running") && err.contains(&format!("pid {}", child.0.id())),
        "{err}"
    );
    let status: serde_json::Value = serde_json::from_str(&repo.ok(&["status", "--json"])).unwrap();
    assert_eq!(status["watch"], child.0.id(), "{status}");

    // A new project directory and session file, written after the start.
    let staged = repo.outside("staged");
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &staged,
        "/tmp/oracle-sample/claude/project",
        repo.root.to_str().unwrap(),
    );
    let from = std::fs::read_dir(staged.join("projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let dir = projects.join(from.file_name().unwrap());
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join(format!("{CLAUDE_ID}.jsonl"));
    let body = std::fs::read_to_string(from.join(format!("{CLAUDE_ID}.jsonl"))).unwrap();
    // The first user record (the one with the cwd) first, the rest later.
    let cut = body.match_indices('\n').nth(2).unwrap().0 + 1;
    let (head, tail) = body.split_at(cut);
    std::fs::write(&file, head).unwrap();
    wait_for("the new session", || event_count(&repo) > 0);
    let before = event_count(&repo);

    // The agent goes on writing: the rest is captured too.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    std::io::Write::write_all(&mut f, tail.as_bytes()).unwrap();
    drop(f);
    wait_for("the appended records", || event_count(&repo) > before);
    let snapshot = hash_tree(&repo.home.join(".claude"));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        snapshot,
        hash_tree(&repo.home.join(".claude")),
        "the store is only read"
    );

    // SIGTERM (a service manager's stop) ends it cleanly: exit 0, not
    // death by signal (which git reports as an error), and no pid file.
    let pid = nix::unistd::Pid::from_raw(child.0.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut ended = None;
    wait_for("the watch to stop", || {
        ended = child.0.try_wait().unwrap();
        ended.is_some()
    });
    assert_eq!(ended.unwrap().code(), Some(0), "{:?}", ended);
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(
        rest.iter().any(|l| l.starts_with("stopped by SIGTERM")),
        "{rest:?}"
    );
    assert!(!repo.root.join(".git/session/watch.pid").exists());
    let status: serde_json::Value = serde_json::from_str(&repo.ok(&["status", "--json"])).unwrap();
    assert!(status["watch"].is_null(), "{status}");
    drop(child);
}
