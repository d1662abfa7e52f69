//! Pi sessions from the installed binary, without the real client: capture
//! from a fake `~/.pi/agent` built from `fixtures/pi/` (every branch, read
//! only, incremental, bad lines reported with file:line), `show --tree`,
//! and write-back guards against hostile ids. The real clients check the
//! write-backs in `oracle.rs`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::*;

/// Places the session file of `fixtures/pi/<case>` into `home`'s store as
/// run in `cwd`; returns the file.
fn place(case: &str, store: &Path, cwd: &Path) -> PathBuf {
    let dir = fixtures().join("pi").join(case).join("native/sessions");
    let sub = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = std::fs::read_dir(&sub)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let body = std::fs::read_to_string(&file).unwrap();
    let header: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    let cwd_text = cwd.to_string_lossy().into_owned();
    let target = store
        .join("sessions")
        .join(git_session_adapters::pi::session_dir_name(&cwd_text))
        .join(file.file_name().unwrap());
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    let old = header["cwd"].as_str().unwrap();
    std::fs::write(&target, body.replace(old, &cwd_text)).unwrap();
    // Files beside it (the schovest fork's .jsonl.meta sidecar) come too.
    for entry in std::fs::read_dir(&sub).unwrap() {
        let p = entry.unwrap().path();
        if p != file {
            std::fs::copy(&p, target.with_file_name(p.file_name().unwrap())).unwrap();
        }
    }
    target
}

fn hash_tree(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                let digest = Sha256::digest(std::fs::read(entry.path()).unwrap());
                out.push((entry.path(), format!("{digest:x}")));
            }
        }
    }
    out.sort();
    out
}

fn import(repo: &Repo) -> (String, String) {
    let out = repo
        .session()
        .args(["import", "--home", repo.home.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

#[test]
fn pi_capture_keeps_every_branch_reads_only_and_shows_the_tree() {
    let repo = Repo::new();
    let store = repo.home.join(".pi/agent");
    place("branched-1.6.0", &store, &repo.root);
    place("crafted-every-type", &store, &repo.root);
    let bad = place("crafted-bad-input", &store, &repo.root);
    // Another project's session stays out.
    place("roundtrip-1.6.0", &store, Path::new("/elsewhere/project"));
    let before = hash_tree(&store);
    let (out, err) = import(&repo);
    assert_eq!(hash_tree(&store), before, "the Pi store is read only");
    assert!(
        out.contains("01a2337a-81f9-7633-ac81-a49f201350c5"),
        "{out}"
    );
    assert!(
        out.contains("0c0ffee0-0000-4000-8000-000000000001"),
        "{out}"
    );
    assert!(
        out.contains("0bad0000-0000-4000-8000-000000000002"),
        "{out}"
    );
    assert!(
        !out.contains("01a22640-cc36"),
        "another project's session: {out}"
    );
    // Bad lines: file:line (one-based) and what happened; nothing dropped.
    let bad = bad.display().to_string();
    for (line, what) in [
        (3, "not valid JSON"),
        (5, "orphaned branch"),
        (7, "duplicate entry id"),
        (8, "no id"),
        (9, "not a JSON object"),
    ] {
        assert!(
            err.contains(&format!("{bad}:{line}: ")) && err.contains(what),
            "{what} at {line}: {err}"
        );
    }
    assert_eq!(repo.events("0bad0000").len(), 11);

    // Both branches, drawn under the entry they branch from, leaf marked.
    let tree = repo.ok(&["show", "01a2337a", "--tree"]);
    let branch = |text: &str| {
        tree.lines()
            .find(|l| l.contains(text))
            .unwrap_or_else(|| panic!("{text} missing: {tree}"))
            .to_owned()
    };
    assert!(
        branch("Please write hello into note.txt").starts_with("|- "),
        "{tree}"
    );
    assert!(branch("Branch summary").starts_with("`- "), "{tree}");
    assert!(branch("say hi").starts_with("   "), "{tree}");
    assert!(
        tree.lines().last().unwrap().ends_with("<- active leaf"),
        "{tree}"
    );
    assert_eq!(tree.matches("<- active leaf").count(), 1);
    // Orphans are their own roots, still shown.
    let tree = repo.ok(&["show", "0bad0000", "--tree"]);
    assert!(
        tree.lines()
            .any(|l| l.trim_start().starts_with("4  message.user") && l.contains("an orphan")),
        "{tree}"
    );
}

#[test]
fn pi_capture_is_incremental_and_appends_only_new_entries() {
    let repo = Repo::new();
    let store = repo.home.join(".pi/agent");
    let file = place("crafted-every-type", &store, &repo.root);
    import(&repo);
    let id = "0c0ffee0-0000-4000-8000-000000000001";
    let before = repo.events(id).len();
    // Pi appends: 100 more entries on the active branch.
    let mut body = std::fs::read_to_string(&file).unwrap();
    let mut parent = "a5".to_owned();
    for i in 0..100 {
        let id = format!("n{i:07}");
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let content = if role == "user" {
            json!(format!("prompt {i}"))
        } else {
            json!([{"type": "text", "text": format!("answer {i}")}])
        };
        let e = json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-11-30T10:00:04.000Z",
            "message": {"role": role, "content": content, "usage": {}}});
        body.push_str(&format!("{e}\n"));
        parent = id;
    }
    std::fs::write(&file, body).unwrap();
    let (out, _) = import(&repo);
    assert!(out.contains("100 events"), "{out}");
    let events = repo.events(id);
    assert_eq!(events.len(), before + 100);
    // The new entries continue the tree from the old leaf.
    let a5 = events
        .iter()
        .find(|e| e["origin"]["native_id"] == "a5")
        .unwrap();
    let first = events
        .iter()
        .find(|e| e["origin"]["native_id"] == "n0000000")
        .unwrap();
    assert_eq!(first["parent_seq"], a5["seq"]);
    // Nothing new: nothing written.
    let refs = repo.git(&["for-each-ref", "refs/sessions/"]);
    let (out, err) = import(&repo);
    assert!(
        out.is_empty() && err.contains("0 sessions; 1 unchanged"),
        "{out}{err}"
    );
    assert_eq!(repo.git(&["for-each-ref", "refs/sessions/"]), refs);
}

/// Pi rewrites a session file in place (when it migrates an older file,
/// or replaces one without a header): a file that now holds another
/// session is captured as that session, not appended to the one it held,
/// which stays as stored; what is appended later goes to the new one.
#[test]
fn a_session_file_rewritten_with_another_session_is_captured_as_that_session() {
    let repo = Repo::new();
    let store = repo.home.join(".pi/agent");
    let file = place("crafted-every-type", &store, &repo.root);
    import(&repo);
    let old = "0c0ffee0-0000-4000-8000-000000000001";
    let new = "0c0ffee0-0000-4000-8000-0000000000f2";
    let before = repo.events(old);
    // The new header first, the rest as it was: the same size, the same
    // last bytes.
    let body = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, body.replace(old, new)).unwrap();
    let (out, _) = import(&repo);
    assert!(out.contains(new), "{out}");
    assert_eq!(repo.events(old), before, "the session the file held stays");
    let captured = repo.events(new).len();
    assert!(captured > 0);
    // Pi goes on appending to the rewritten file: to the new session.
    let mut body = std::fs::read_to_string(&file).unwrap();
    body.push_str(&format!(
        "{}\n",
        json!({"type": "message", "id": "c0000001", "parentId": null, "timestamp": "2026-11-30T10:00:09.000Z",
               "message": {"role": "user", "content": "after the rewrite", "usage": {}}})
    ));
    std::fs::write(&file, body).unwrap();
    import(&repo);
    assert_eq!(repo.events(new).len(), captured + 1);
    assert_eq!(repo.events(old), before);
}

#[test]
fn pi_agent_dir_comes_from_pi_coding_agent_dir() {
    let repo = Repo::new();
    let dir = repo.outside("pi-agent-dir");
    place("crafted-minimal", &dir, &repo.root);
    let out = repo
        .session()
        .args(["import", "--agent", "pi"])
        .env("PI_CODING_AGENT_DIR", &dir)
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains("0b1e5e55-0000-4000-8000-00000000c0de"),
        "{}",
        text(&out.stderr)
    );
    // And resume writes there.
    let fresh = repo.outside("pi-fresh-dir");
    let out = repo
        .session()
        .args(["resume", "0b1e5e55", "--fork"])
        .env("PI_CODING_AGENT_DIR", &fresh)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(fresh.join("sessions").is_dir());
}

#[test]
fn agent_text_with_terminal_escapes_is_escaped_when_shown() {
    let repo = Repo::new();
    let lines = vec![
        json!({"header": {"format": 1, "id": "esc-1", "agent": "pi", "native_id": "esc-1",
            "cwd": repo.root, "created": "2026-01-01T00:00:00Z"}}),
        json!({"seq": 0, "ts": "2026-01-01T00:00:00Z", "agent": "pi", "actor": "user",
            "type": "message.user", "level": 0, "payload": {"text": "hi \u{1b}[31mred\u{7}"}}),
    ];
    let path = repo.write_jsonl("esc.jsonl", &lines);
    repo.ok(&["import", "--canonical", path.to_str().unwrap(), "--reseal"]);
    for args in [vec!["show", "esc-1"], vec!["show", "esc-1", "--tree"]] {
        let shown = repo.ok(&args);
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
            "{shown:?}"
        );
        assert!(shown.contains("\\u{1b}[31mred\\u{7}"), "{shown}");
    }
}

#[test]
fn a_hostile_pi_native_id_never_becomes_a_path() {
    let repo = Repo::new();
    let lines = vec![
        json!({"header": {"format": 1, "id": "evil-1", "agent": "pi", "native_id": "../../../escaped",
            "cwd": repo.root, "created": "2026-01-01T00:00:00Z"}}),
        json!({"seq": 0, "ts": "2026-01-01T00:00:00Z", "agent": "pi", "actor": "user",
            "type": "message.user", "level": 0, "payload": {"text": "hi"}}),
    ];
    let path = repo.write_jsonl("evil.jsonl", &lines);
    repo.ok(&["import", "--canonical", path.to_str().unwrap(), "--reseal"]);
    let fresh = repo.outside("evil-home");
    let err = repo.fails(&["resume", "evil-1", "--home", fresh.to_str().unwrap()], 1);
    assert!(err.contains("cannot name a Pi session file"), "{err}");
    assert!(
        !fresh.exists() || hash_tree(&fresh).is_empty(),
        "nothing written"
    );
    assert!(!repo.outside("escaped.jsonl").exists());
}

#[test]
fn pi_session_dirs_from_the_environment_and_settings_are_captured() {
    let repo = Repo::new();
    // PI_CODING_AGENT_SESSION_DIR: session files directly in the directory.
    let env_dir = repo.outside("pi-env-sessions");
    let placed = place("crafted-minimal", &repo.outside("scratch-a"), &repo.root);
    std::fs::create_dir_all(&env_dir).unwrap();
    std::fs::copy(&placed, env_dir.join("whatever.jsonl")).unwrap();
    // settings.json sessionDir, with ~ for the home.
    let placed = place("crafted-every-type", &repo.outside("scratch-b"), &repo.root);
    let settings_dir = repo.home.join("my-pi-sessions");
    std::fs::create_dir_all(&settings_dir).unwrap();
    std::fs::copy(&placed, settings_dir.join(placed.file_name().unwrap())).unwrap();
    let agent = repo.home.join(".pi/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("settings.json"),
        r#"{"sessionDir": "~/my-pi-sessions"}"#,
    )
    .unwrap();
    let out = repo
        .session()
        .args(["import", "--agent", "pi"])
        .env("PI_CODING_AGENT_SESSION_DIR", &env_dir)
        .output()
        .unwrap();
    let printed = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        printed.contains("0b1e5e55-0000-4000-8000-00000000c0de"),
        "{printed}"
    );
    assert!(
        printed.contains("0c0ffee0-0000-4000-8000-000000000001"),
        "{printed}"
    );
    // Incremental there too: nothing new, nothing written.
    let again = repo
        .session()
        .args(["import", "--agent", "pi"])
        .env("PI_CODING_AGENT_SESSION_DIR", &env_dir)
        .output()
        .unwrap();
    assert!(
        text(&again.stderr).contains("0 sessions; 2 unchanged"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn a_forked_pi_session_links_to_the_session_it_came_from() {
    let repo = Repo::new();
    let store = repo.home.join(".pi/agent");
    let parent = place("roundtrip-1.6.0", &store, &repo.root);
    // What `pi --fork` writes: a new file whose header names the source.
    let body = std::fs::read_to_string(&parent).unwrap();
    let mut lines: Vec<String> = body.lines().map(str::to_owned).collect();
    let mut header: Value = serde_json::from_str(&lines[0]).unwrap();
    header["id"] = json!("01a22640-ffff-7000-8000-00000000f0f0");
    header["parentSession"] = json!(parent);
    lines[0] = header.to_string();
    let child = parent
        .with_file_name("2026-11-30T00-00-00-000Z_01a22640-ffff-7000-8000-00000000f0f0.jsonl");
    std::fs::write(&child, lines.join("\n") + "\n").unwrap();
    import(&repo);
    let shown: Value =
        serde_json::from_str(&repo.ok(&["show", "01a22640-ffff", "--json"])).unwrap();
    // The fork copies every entry of the parent: it is a canonical fork of
    // the parent's session, sharing exactly the copied prefix.
    let lineage = &shown["header"]["lineage"];
    assert_eq!(
        lineage["parent_session"], "01a22640-cc36-7053-9435-ced9260305c0",
        "{shown}"
    );
    let parent_events = serde_json::from_str::<Value>(&repo.ok(&[
        "show",
        "01a22640-cc36",
        "--json",
    ]))
    .unwrap()["events"]
        .as_array()
        .unwrap()
        .len() as u64;
    assert_eq!(lineage["inherited_events"], parent_events, "{shown}");
}

#[test]
fn pi_project_session_dir_is_captured_and_an_oversized_settings_file_is_ignored() {
    let repo = Repo::new();
    // A project's .pi/settings.json: a relative sessionDir is taken from
    // the work tree.
    let placed = place("crafted-minimal", &repo.outside("scratch-a"), &repo.root);
    std::fs::create_dir_all(repo.root.join(".pi/sessions-here")).unwrap();
    std::fs::copy(&placed, repo.root.join(".pi/sessions-here/s.jsonl")).unwrap();
    std::fs::write(
        repo.root.join(".pi/settings.json"),
        r#"{"sessionDir": ".pi/sessions-here"}"#,
    )
    .unwrap();
    // A hostile agent settings file past the size bound names no directory
    // (and is not read whole): its session is not captured, capture goes on.
    let placed = place("crafted-every-type", &repo.outside("scratch-b"), &repo.root);
    let hidden = repo.home.join("hidden-sessions");
    std::fs::create_dir_all(&hidden).unwrap();
    std::fs::copy(&placed, hidden.join("h.jsonl")).unwrap();
    let agent = repo.home.join(".pi/agent");
    std::fs::create_dir_all(&agent).unwrap();
    let mut big = br#"{"sessionDir": "~/hidden-sessions", "pad": ""#.to_vec();
    big.extend(std::iter::repeat_n(b'x', 2 << 20));
    big.extend_from_slice(b"\"}");
    std::fs::write(agent.join("settings.json"), &big).unwrap();
    let out = repo
        .session()
        .args(["import", "--agent", "pi"])
        .output()
        .unwrap();
    let printed = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        printed.contains("0b1e5e55-0000-4000-8000-00000000c0de"),
        "{printed}"
    );
    assert!(
        !printed.contains("0c0ffee0-0000-4000-8000-000000000001"),
        "{printed}"
    );
}
