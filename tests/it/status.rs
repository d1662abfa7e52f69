//! `git session status`: captured and new per agent, unpushed batches
//! against the chosen remote, hooks, and the hook log escaped.

use serde_json::Value;

use crate::support::*;

const CLAUDE_ID: &str = "d05046d2-74b1-4451-90dc-37fbd42c25e6";

fn status(repo: &Repo) -> Value {
    serde_json::from_str(&repo.ok(&["status", "--json"])).unwrap()
}

fn claude(s: &Value) -> &Value {
    s["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == "claude")
        .unwrap()
}

fn native_file(repo: &Repo) -> std::path::PathBuf {
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &repo.home.join(".claude"),
        "/tmp/oracle-sample/claude/project",
        repo.root.to_str().unwrap(),
    );
    let dir = repo.home.join(".claude/projects");
    let project = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    project.join(format!("{CLAUDE_ID}.jsonl"))
}

#[test]
fn status_tells_new_captured_and_unpushed() {
    let repo = Repo::new();
    let file = native_file(&repo);
    let s = status(&repo);
    assert_eq!(claude(&s)["unseen"].as_array().unwrap().len(), 1, "{s}");
    assert_eq!(claude(&s)["tracked"], 0);
    assert_eq!(s["sessions"], 0);
    assert_eq!(s["remote"], Value::Null);

    repo.ok(&["import"]);
    let s = status(&repo);
    let c = claude(&s);
    assert_eq!(c["unseen"].as_array().unwrap().len(), 0, "{s}");
    assert_eq!(c["tracked"], 1);
    assert_eq!(c["sessions"], 1);
    assert!(c["changed"].as_array().unwrap().is_empty());
    // No remote chosen: the session is unpushed, all of its batches.
    assert_eq!(s["unpushed"][0]["session"], CLAUDE_ID);
    assert_eq!(s["unpushed"][0]["batches"], 1);

    // The agent writes more: new since the last capture.
    let mut bytes = std::fs::read(&file).unwrap();
    let last = String::from_utf8_lossy(&bytes)
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let mut line: Value = serde_json::from_str(&last).unwrap();
    line["uuid"] = Value::from("0b1d6bbd-0000-4000-8000-000000000001");
    line["parentUuid"] = Value::Null;
    bytes.extend_from_slice(format!("{line}\n").as_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let s = status(&repo);
    assert_eq!(claude(&s)["changed"][0], file.to_str().unwrap(), "{s}");
    let text = repo.ok(&["status"]);
    assert!(text.contains("1 new since the last capture"), "{text}");

    // Pushed to the chosen remote: nothing unpushed; one more batch: one.
    let remote = repo.outside("remote.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    repo.ok(&["init"]);
    repo.ok(&["push", "--to", "origin"]);
    let s = status(&repo);
    assert_eq!(s["remote"], "origin");
    assert_eq!(s["unpushed"], Value::Array(vec![]), "{s}");
    repo.ok(&["import"]);
    let s = status(&repo);
    assert_eq!(claude(&s)["changed"], Value::Array(vec![]), "{s}");
    assert_eq!(s["unpushed"][0]["session"], CLAUDE_ID, "{s}");
    assert_eq!(s["unpushed"][0]["batches"], 1);
    assert_eq!(s["unpushed"][0]["on_remote"], true);
    assert!(
        repo.ok(&["status"])
            .contains("unpushed   1 session, 1 batch\n")
    );
    assert_eq!(
        s["git_hooks"][0],
        serde_json::json!({"hook": "post-commit", "installed": true})
    );
}

#[test]
fn status_escapes_what_the_hook_log_holds() {
    let repo = Repo::new();
    repo.ok(&["init"]);
    let log = repo.root.join(".git/session/hook.log");
    std::fs::write(
        &log,
        "2026-01-01T00:00:00Z capture failed: \x1b]0;owned\x07 evil\n",
    )
    .unwrap();
    let text = repo.ok(&["status"]);
    assert!(!text.contains('\x1b'), "{text}");
    assert!(text.contains("\\u{1b}]0;owned"), "{text}");
    let s = status(&repo);
    assert!(
        s["hook_log"][0]
            .as_str()
            .unwrap()
            .contains("capture failed")
    );
}

#[test]
fn status_and_import_print_aligned_columns_and_counted_nouns() {
    let repo = Repo::new();
    native_file(&repo);
    copy_tree(
        &fixtures().join("codex/function-tools/native"),
        &repo.home.join(".codex"),
        "/tmp/oracle-sample/codex/project",
        repo.root.to_str().unwrap(),
    );
    let (out, err, code) = run(&repo, &["import", "--agent", "claude", "--agent", "codex"]);
    assert_eq!(code, 0, "{err}");
    // Ids of different lengths, agent names of different lengths: one column each.
    snapshot(&repo, "import-two-agents.txt", &format!("{out}--\n{err}"));
    let (out, err, code) = run(&repo, &["status"]);
    assert_eq!(code, 0, "{err}");
    // "1 session", "1 batch": never "1 sessions", "1 batches".
    snapshot(&repo, "status.txt", &out);
}

/// The `lead` rows line up whatever the length of the ids they name.
#[test]
fn status_lead_rows_are_aligned() {
    let repo = Repo::new();
    repo.ok(&["init"]);
    for id in ["s-a", "s-a-longer-id"] {
        let mut lines = session_lines(id, 4);
        lines[0]["header"]["cwd"] = repo.root.to_str().unwrap().into();
        repo.import(&repo.write_jsonl(&format!("{id}.jsonl"), &lines));
        let home = repo.outside(&format!("pi-{id}"));
        repo.ok(&[
            "handoff",
            id,
            "--to",
            "pi",
            "--home",
            home.to_str().unwrap(),
        ]);
    }
    let (out, err, code) = run(&repo, &["status"]);
    assert_eq!(code, 0, "{err}");
    let leads: Vec<&str> = out.lines().filter(|l| l.starts_with("lead ")).collect();
    assert_eq!(
        leads,
        [
            "lead       s-a            led by pi since the handoff at seq 5",
            "lead       s-a-longer-id  led by pi since the handoff at seq 5",
        ],
        "{out}"
    );
}
