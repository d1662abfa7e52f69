//! What the store leaves in git: one commit per batch whose diff is the
//! batch, trailers, no work-tree or index changes, bare and worktree repos.

use crate::support::*;

#[test]
fn each_append_is_one_commit_whose_diff_is_the_batch() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-batches", 3)));
    for round in 0..3 {
        let file = repo.write_jsonl(
            &format!("b{round}.jsonl"),
            &(0..2).map(event).collect::<Vec<_>>(),
        );
        repo.ok(&["append", "s-batches", file.to_str().unwrap()]);
    }
    assert_eq!(
        repo.git(&["rev-list", "--count", "refs/sessions/s-batches"]),
        "4"
    );
    // Every batch commit only adds one new chunk file; nothing is rewritten.
    let log = repo.git(&["log", "--format=%H", "refs/sessions/s-batches"]);
    let commits: Vec<&str> = log.lines().collect();
    for (i, c) in commits.iter().enumerate() {
        let changes = repo.git(&[
            "diff-tree",
            "--root",
            "-r",
            "--no-commit-id",
            "--name-status",
            c,
        ]);
        let statuses: Vec<&str> = changes
            .lines()
            .map(|l| l.split('\t').next().unwrap())
            .collect();
        assert!(
            statuses.iter().all(|s| *s == "A"),
            "commit {c} modified files: {changes}"
        );
        let added_chunks = changes.lines().filter(|l| l.contains("events/")).count();
        assert_eq!(added_chunks, 1, "commit {i}: {changes}");
    }
    // The orphan history shares nothing with the code history.
    let root = repo.git(&["rev-list", "--max-parents=0", "refs/sessions/s-batches"]);
    assert_eq!(root, *commits.last().unwrap());
    let message = repo.git(&["log", "-1", "--format=%B", "refs/sessions/s-batches"]);
    let head = repo.git(&["rev-parse", "HEAD"]);
    for trailer in [
        "Session-Id: s-batches",
        "Session-Agent: claude",
        "Session-Seq: 7..8",
        "Session-Events: 9",
    ] {
        assert!(
            message.contains(trailer),
            "{trailer} missing from {message}"
        );
    }
    assert!(
        message.contains(&format!("Code-Commit: {head}")),
        "{message}"
    );
    // The chunk is plain JSONL readable with git show.
    let first = repo.git(&["show", "refs/sessions/s-batches:events/00/00/00-0.jsonl"]);
    assert_eq!(first.lines().count(), 3);
    repo.fsck();
}

#[test]
fn writing_never_touches_the_index_or_work_tree() {
    let repo = Repo::new();
    std::fs::write(repo.root.join("tracked.txt"), "v1\n").unwrap();
    repo.git(&["add", "tracked.txt"]);
    std::fs::write(repo.root.join("tracked.txt"), "v2 unstaged\n").unwrap();
    let index_before = std::fs::read(repo.root.join(".git/index")).unwrap();
    let status_before = repo.git(&["status", "--porcelain=v2"]);
    let head_before = repo.git(&["symbolic-ref", "HEAD"]);
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-clean", 5)));
    repo.ok(&["fork", "s-clean", "--at", "2", "--id", "s-clean-fork"]);
    assert_eq!(
        std::fs::read(repo.root.join(".git/index")).unwrap(),
        index_before
    );
    assert_eq!(repo.git(&["status", "--porcelain=v2"]), status_before);
    assert_eq!(repo.git(&["symbolic-ref", "HEAD"]), head_before);
    assert!(
        repo.git(&["branch", "--list"])
            .lines()
            .all(|b| !b.contains("session"))
    );
    // Local state lives in the git dir, not in the work tree.
    assert!(repo.root.join(".git/session").is_dir());
}

#[test]
fn reading_works_in_a_bare_repository_and_worktrees_share_the_store() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-shared", 4)));
    // A linked worktree sees the sessions and writes into the common dir.
    let wt = repo.outside("wt");
    repo.git(&["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "side"]);
    let listed = repo.session_in(&wt).arg("list").output().unwrap();
    assert!(text(&listed.stdout).contains("s-shared"));
    let file = repo.write_jsonl("more.jsonl", &[event(0)]);
    let appended = repo
        .session_in(&wt)
        .args(["append", "s-shared", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(appended.status.success(), "{}", text(&appended.stderr));
    assert_eq!(repo.events("s-shared").len(), 5);
    assert!(
        !wt.join(".git").is_dir(),
        "a worktree has a .git file, not a directory"
    );

    // A bare clone that fetched the session refs can read them.
    let bare = repo.outside("bare.git");
    repo.git(&[
        "clone",
        "-q",
        "--bare",
        repo.root.to_str().unwrap(),
        bare.to_str().unwrap(),
    ]);
    let out = repo
        .git_in(&bare)
        .args([
            "fetch",
            "-q",
            repo.root.to_str().unwrap(),
            "refs/sessions/*:refs/sessions/*",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = repo
        .session_in(&bare)
        .args(["show", "s-sh", "--json"])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(v["events"].as_array().unwrap().len(), 5);
    let verify = repo.session_in(&bare).arg("verify").output().unwrap();
    assert!(verify.status.success(), "{}", text(&verify.stdout));
    // No commit is made in a bare repository: init sets up the rest and
    // installs no post-commit hook there.
    let init = repo.session_in(&bare).arg("init").output().unwrap();
    assert!(init.status.success(), "{}", text(&init.stderr));
    assert!(
        text(&init.stdout).contains("A bare repository: no post-commit hook"),
        "{}",
        text(&init.stdout)
    );
    assert!(!bare.join("hooks/post-commit").exists());
    assert!(bare.join("session").is_dir());
}

#[test]
fn commits_fall_back_to_a_clear_identity_when_none_is_configured() {
    let repo = Repo::bare_dir();
    repo.git(&["init", "-q", "-b", "main", "."]);
    let file = repo.write_jsonl("a.jsonl", &session_lines("s-anon", 1));
    // No user.name anywhere: the session commit still gets written.
    let out = repo
        .anonymous_session_in(&repo.root)
        .args(["import", "--canonical", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        repo.git(&["log", "-1", "--format=%cn <%ce>", "refs/sessions/s-anon"]),
        "git-session <git-session@localhost>"
    );
    let message = repo.git(&["log", "-1", "--format=%B", "refs/sessions/s-anon"]);
    assert!(
        !message.contains("Code-Commit"),
        "an unborn HEAD has no code commit: {message}"
    );
    repo.fsck();
}

#[test]
fn configured_identity_and_pinned_time_are_used() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-who", 1)));
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae> %ct", "refs/sessions/s-who"]),
        format!("Test User <test@example.com> {}", EPOCH + 1)
    );
}
