//! `git session purge`: a stored secret is rewritten out of the session's
//! history, here and on the remote, and the old history stays out.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::*;

/// A fake credential no redaction rule knows (so it is stored, as a leak
/// the rules missed would be).
const LEAK: &str = "zq7Vb-leak-Kp2Wm-4411";

/// Whether any object of the repository at `dir` holds `needle`.
fn objects_hold(repo: &Repo, dir: &Path, needle: &str) -> bool {
    let out = repo
        .git_in(dir)
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    String::from_utf8_lossy(&out.stdout).contains(needle)
}

fn prune(repo: &Repo, dir: &Path) {
    for args in [
        &["reflog", "expire", "--expire=now", "--all"][..],
        &["gc", "-q", "--prune=now"][..],
    ] {
        let out = repo.git_in(dir).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    }
}

fn rev(repo: &Repo, dir: &Path, name: &str) -> String {
    let out = repo
        .git_in(dir)
        .args(["rev-parse", "--verify", "-q", name])
        .output()
        .unwrap();
    text(&out.stdout).trim().to_owned()
}

fn on(repo: &Repo, dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = repo.session_in(dir).args(args).output().unwrap();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

fn ok_on(repo: &Repo, dir: &Path, args: &[&str]) -> String {
    let (ok, out, err) = on(repo, dir, args);
    assert!(ok, "git session {args:?} in {}: {err}", dir.display());
    out
}

fn events_on(repo: &Repo, dir: &Path, id: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(&ok_on(repo, dir, &["show", id, "--json"])).unwrap();
    v["events"].as_array().unwrap().clone()
}

/// A repository with a remote and a second clone, both choosing it; the
/// session `s-leak` holds `LEAK` in event 4 and in the title, pushed and
/// fetched by both.
fn leaked() -> (Repo, PathBuf, PathBuf) {
    let a = Repo::new();
    let remote = a.outside("remote.git");
    a.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    let url = format!("file://{}", remote.display());
    a.git(&["remote", "add", "origin", &url]);
    a.git(&["push", "-q", "origin", "main"]);
    let b = a.outside("clone-b");
    a.git(&["clone", "-q", remote.to_str().unwrap(), b.to_str().unwrap()]);
    for dir in [&a.root, &b] {
        let out = a
            .git_in(dir)
            .args(["config", "session.remote", "origin"])
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    // Redaction off: the secret is stored, as one the rules miss would be.
    a.git(&["config", "session.redact", "false"]);
    let mut lines = session_lines("s-leak", 8);
    lines[0]["header"]["title"] = format!("deploy with {LEAK}").into();
    lines[5]["payload"]["text"] = format!("the key is {LEAK}, keep it").into();
    a.import(&a.write_jsonl("s.jsonl", &lines));
    ok_on(&a, &a.root.clone(), &["push"]);
    ok_on(&a, &b, &["fetch"]);
    assert!(objects_hold(&a, &b, LEAK));
    (a, b, remote)
}

#[test]
fn purge_match_rewrites_the_secret_out_here_on_the_remote_and_on_other_clones() {
    let (a, b, remote) = leaked();
    let root = a.root.clone();
    let before = events_on(&a, &root, "s-leak");
    let old_tip = rev(&a, &root, "refs/sessions/s-leak");
    let (ok, out, err) = on(
        &a,
        &root,
        &["purge", "s-leak", "--match", "zq7Vb-leak-[A-Za-z0-9]+-4411"],
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("purged s-leak: 2 replaced in seq 4 and the header"),
        "{out}"
    );
    for step in [
        "Rotate the credential",
        "agent's own files",
        "git gc --prune=now",
        "ask the host",
    ] {
        assert!(err.contains(step), "purge must say {step:?}: {err}");
    }
    let after = events_on(&a, &root, "s-leak");
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after[4]["payload"]["text"], "the key is [PURGED], keep it");
    // Everything else, ids and origins included, is as it was.
    for (x, y) in before.iter().zip(&after) {
        assert_eq!(x["seq"], y["seq"]);
        assert_eq!(x["origin"], y["origin"]);
        if x["seq"] != 4 {
            assert_eq!(x["payload"], y["payload"]);
        }
    }
    let tomb = after.last().unwrap();
    assert_eq!(tomb["type"], "session.purge");
    assert_eq!(tomb["payload"]["purged_tip"], old_tip.as_str());
    assert_eq!(tomb["payload"]["seqs"], serde_json::json!([4]));
    assert!(
        !tomb.to_string().contains("zq7Vb"),
        "the tombstone names no secret: {tomb}"
    );
    let shown = ok_on(&a, &root, &["list"]);
    assert!(
        shown.contains("[PURGED]") && !shown.contains(LEAK),
        "{shown}"
    );
    ok_on(&a, &root, &["verify", "s-leak"]);

    // Sync refuses the remote's old copy and replaces it there.
    ok_on(&a, &root, &["sync"]);
    let new_tip = rev(&a, &root, "refs/sessions/s-leak");
    assert_ne!(new_tip, old_tip);
    assert_eq!(rev(&a, &remote, "refs/sessions/s-leak"), new_tip);
    prune(&a, &root);
    prune(&a, &remote);
    assert!(
        !objects_hold(&a, &root, LEAK),
        "a local object still holds the secret"
    );
    assert!(
        !objects_hold(&a, &remote, LEAK),
        "a remote object still holds the secret"
    );

    // The other clone follows the purged history.
    let fetched = ok_on(&a, &b, &["sync"]);
    assert!(fetched.contains("purged    s-leak"), "{fetched}");
    assert_eq!(rev(&a, &b, "refs/sessions/s-leak"), new_tip);
    assert_eq!(events_on(&a, &b, "s-leak"), after);
    ok_on(&a, &b, &["verify", "s-leak"]);
    prune(&a, &b);
    assert!(
        !objects_hold(&a, &b, LEAK),
        "clone b still holds the secret"
    );
}

#[test]
fn old_history_is_refused_where_the_purge_is_known() {
    let (a, b, remote) = leaked();
    let root = a.root.clone();
    let old_tip = rev(&a, &root, "refs/sessions/s-leak");
    ok_on(&a, &root, &["purge", "s-leak", "--seq", "4"]);
    ok_on(&a, &root, &["sync"]);
    let new_tip = rev(&a, &root, "refs/sessions/s-leak");

    // Clone b appended to the old history before it synced: its tail is
    // kept, the old history does not go back to the remote.
    let more = a.write_jsonl("more.jsonl", &[event(0)]);
    ok_on(&a, &b, &["append", "s-leak", more.to_str().unwrap()]);
    let (_, out, err) = on(&a, &b, &["sync"]);
    assert!(
        format!("{out}{err}").contains("commits after that tip"),
        "b must be told why: {out}{err}"
    );
    assert_eq!(rev(&a, &remote, "refs/sessions/s-leak"), new_tip);

    // Someone puts the old history back on the remote: a syncs it away.
    a.git_in(&remote)
        .args(["update-ref", "refs/sessions/s-leak", &old_tip])
        .output()
        .unwrap();
    let (_, out, err) = on(&a, &root, &["sync"]);
    assert!(
        format!("{out}{err}").contains("the purged history replaced the old one on origin"),
        "a must say it replaced the old history: {out}{err}"
    );
    assert_eq!(rev(&a, &root, "refs/sessions/s-leak"), new_tip);
    assert_eq!(rev(&a, &remote, "refs/sessions/s-leak"), new_tip);
}

#[test]
fn purge_seq_empties_one_event_and_keeps_its_envelope() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("s.jsonl", &session_lines("s-one", 6)));
    let before = repo.events("s-one");
    let out = repo.ok(&["purge", "s-one", "--seq", "2"]);
    assert!(out.contains("1 replaced in seq 2"), "{out}");
    let after = repo.events("s-one");
    assert_eq!(after.len(), 7);
    assert_eq!(after[2]["type"], "meta");
    assert_eq!(
        after[2]["payload"],
        serde_json::json!({"purged": {"type": "tool.call"}})
    );
    assert_eq!(after[2]["origin"], before[2]["origin"]);
    assert_eq!(after[2]["ts"], before[2]["ts"]);
    for i in [0, 1, 3, 4, 5] {
        assert_eq!(after[i]["payload"], before[i]["payload"]);
    }
    assert_eq!(after[6]["payload"]["seqs"], serde_json::json!([2]));
    repo.ok(&["verify", "s-one"]);
}

#[test]
fn purge_refuses_bad_requests_and_changes_nothing() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("s.jsonl", &session_lines("s-bad", 4)));
    let tip = repo.git(&["rev-parse", "refs/sessions/s-bad"]);
    let err = repo.fails(&["purge", "s-bad", "--match", ""], 2);
    assert!(err.contains("matches the empty string"), "{err}");
    let err = repo.fails(&["purge", "s-bad", "--match", "a*"], 2);
    assert!(err.contains("matches the empty string"), "{err}");
    let err = repo.fails(&["purge", "s-bad", "--match", "(unclosed"], 2);
    assert!(err.contains("not a valid regex"), "{err}");
    let err = repo.fails(&["purge", "s-bad", "--match", "x{4000}{4000}"], 2);
    assert!(err.contains("not a valid regex"), "{err}");
    let err = repo.fails(&["purge", "s-bad", "--seq", "99"], 1);
    assert!(err.contains("no seq 99"), "{err}");
    let err = repo.fails(&["purge", "s-bad", "--match", "no-such-text-anywhere"], 1);
    assert!(err.contains("nothing was rewritten"), "{err}");
    repo.fails(&["purge", "s-bad"], 2);
    assert_eq!(repo.git(&["rev-parse", "refs/sessions/s-bad"]), tip);
}

#[test]
fn a_forged_replacement_is_quarantined() {
    // A remote's history that names the local tip as purged but drops
    // events is not a purge: the local session stays.
    let (a, b, remote) = leaked();
    let root = a.root.clone();
    let old_tip = rev(&a, &root, "refs/sessions/s-leak");
    // Forge: a fresh session with the same id and fewer events, its root
    // claiming to purge the old tip.
    let forger = Repo::new();
    forger.import(&forger.write_jsonl("f.jsonl", &session_lines("s-leak", 2)));
    let tree = forger.git(&["rev-parse", "refs/sessions/s-leak^{tree}"]);
    let msg = forger.git(&["log", "-1", "--format=%B", "refs/sessions/s-leak"]);
    let msg = format!("{}\nPurged-Tip: {old_tip}\n", msg.trim_end());
    let forged = forger.git_stdin(&["commit-tree", tree.trim()], msg.as_bytes());
    forger.git(&[
        "push",
        "-q",
        &format!("file://{}", remote.display()),
        &format!("+{}:refs/sessions/s-leak", forged.trim()),
    ]);
    let (_, out, err) = on(&a, &b, &["sync"]);
    assert!(
        format!("{out}{err}").contains("claims to replace"),
        "{out}{err}"
    );
    assert_eq!(rev(&a, &b, "refs/sessions/s-leak"), old_tip);
}

#[test]
fn a_purged_claude_session_still_resumes_without_the_text() {
    const ROUNDTRIP: &str = "d05046d2-74b1-4451-90dc-37fbd42c25e6";
    let repo = Repo::new();
    captured_claude(&repo);
    let out = repo.ok(&["purge", "d050", "--match", "hello into note"]);
    assert!(out.contains("purged d050"), "{out}");
    repo.ok(&["verify"]);
    let home = repo.outside("home-b");
    repo.ok(&["resume", "d050", "--home", home.to_str().unwrap()]);
    let project = git_session_adapters::claude::project_dir_name(repo.root.to_str().unwrap());
    let file = home
        .join(".claude/projects")
        .join(project)
        .join(format!("{ROUNDTRIP}.jsonl"));
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(!written.contains("hello into note"), "{written}");
    assert!(written.contains("Please write [PURGED].txt"), "{written}");
    // Every native record is written back, each still valid JSON.
    let original = std::fs::read_to_string(fixtures().join(format!(
        "claude/roundtrip/native/projects/-tmp-oracle-sample-claude-project/{ROUNDTRIP}.jsonl"
    )))
    .unwrap();
    assert_eq!(written.lines().count(), original.lines().count());
    for line in written.lines() {
        serde_json::from_str::<Value>(line).unwrap();
    }
}

/// After a purge, `which`, `status` and `sync` tell one story: the
/// replaced batches still lead to the commit they led to, only the purge's
/// own event is pending; status says the remote's copy will be replaced,
/// not forked; sync replaces it and does not call it quarantined.
#[test]
fn which_status_and_sync_agree_after_a_purge() {
    let repo = Repo::new();
    let remote = repo.outside("agree.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    repo.ok(&["init"]);
    let mut lines = session_lines("s-agree", 4);
    lines[1]["payload"] = serde_json::json!({"text": format!("the key is {LEAK}")});
    repo.import(&repo.write_jsonl("agree.jsonl", &lines));
    repo.ok(&["push", "--to", "origin"]);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "work"]);
    let before = repo.ok(&["which", "HEAD"]);
    repo.ok(&["purge", "s-agree", "--match", LEAK]);
    let after = repo.ok(&["which", "HEAD"]);
    let head = repo.git(&["rev-parse", "--short=12", "HEAD~1"]);
    assert_eq!(
        before,
        format!("s-agree  claude  seq 0..3  (captured before it, at HEAD {head})\n")
    );
    snapshot(
        &repo,
        "which-after-purge.txt",
        &after.replace(&head, "[HEAD~1]"),
    );
    let rows: Value = serde_json::from_str(&repo.ok(&["which", "HEAD", "--json"])).unwrap();
    let pending: Vec<(Value, bool)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["seq"].clone(), r["pending"] == true))
        .collect();
    assert_eq!(
        pending,
        [
            (serde_json::json!([0, 3]), false),
            (serde_json::json!([4, 4]), true)
        ]
    );

    let status = repo.ok(&["status"]);
    assert!(
        status.contains(
            "s-agree  1 batch (purged here: git session sync or push replaces the remote's copy)"
        ),
        "{status}"
    );
    let s: Value = serde_json::from_str(&repo.ok(&["status", "--json"])).unwrap();
    assert_eq!(
        (&s["unpushed"][0]["replaced"], &s["unpushed"][0]["diverged"]),
        (&Value::Bool(true), &Value::Bool(false))
    );

    let out = repo.session().arg("sync").output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stdout,
        "replaced   s-agree: the purged history replaced the old one on origin\n"
    );
    assert!(!stderr.contains("quarantined"), "{stderr}");
    assert!(repo.ok(&["status"]).contains("unpushed   nothing\n"));
    assert_eq!(
        rev(&repo, &repo.root, "refs/sessions/s-agree"),
        repo.git_in(&repo.root)
            .args([
                "--git-dir",
                remote.to_str().unwrap(),
                "rev-parse",
                "refs/sessions/s-agree"
            ])
            .output()
            .map(|o| text(&o.stdout).trim().to_owned())
            .unwrap()
    );
}

/// Purge names the forks that hold a copy of what it replaced: a fork made
/// before the purged event does not, and is not named.
#[test]
fn purge_names_only_the_forks_that_hold_the_purged_event() {
    let repo = Repo::new();
    let mut lines = session_lines("s-forked", 6);
    lines[2]["payload"] = serde_json::json!({"text": format!("early {LEAK}")});
    lines[6]["payload"] = serde_json::json!({"text": "late marker-Qx9"});
    repo.import(&repo.write_jsonl("forked.jsonl", &lines));
    let before = repo.ok(&["fork", "s-forked", "--at", "0"]);
    let after = repo.ok(&["fork", "s-forked", "--at", "3"]);
    let (before, after) = (before.trim(), after.trim());
    let out = repo.ok(&["purge", "s-forked", "--match", "marker-Qx9"]);
    assert!(!out.contains("fork "), "seq 5 is in neither fork: {out}");
    let out = repo.ok(&["purge", "s-forked", "--match", LEAK]);
    assert!(
        out.contains(&format!("fork {after} holds copies")) && !out.contains(before),
        "seq 1 is in the fork at 3 only: {out}"
    );
}

#[test]
fn a_purged_value_is_left_as_purged_when_redaction_is_on() {
    // Stored with redaction off, purged with it back on: the rewrite goes
    // through redaction, which must not take `[PURGED]` for a password.
    let a = Repo::new();
    a.git(&["config", "session.redact", "false"]);
    let mut lines = session_lines("s-pass", 6);
    lines[3]["payload"]["text"] = "connect with password=hunter2xyz9 please".into();
    lines[3]["payload"]["env"] = serde_json::json!({"password": "hunter2xyz9"});
    a.import(&a.write_jsonl("s.jsonl", &lines));
    a.git(&["config", "--unset", "session.redact"]);
    let root = a.root.clone();
    ok_on(&a, &root, &["purge", "s-pass", "--match", r"hunter2\w*"]);
    let after = events_on(&a, &root, "s-pass");
    assert_eq!(
        after[2]["payload"]["text"],
        "connect with password=[PURGED] please"
    );
    assert_eq!(after[2]["payload"]["env"]["password"], "[PURGED]");
    let (ok, out, err) = on(&a, &root, &["redact", "--check", "s-pass"]);
    assert!(ok, "the purged session has no hit left: {out}{err}");
}
