//! Native capture (`git session import`) from fake agent stores built from
//! `fixtures/`: only this repository's sessions, read-only sources,
//! incremental and idempotent, torn tails and rewritten files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::support::*;

const CLAUDE_CWD: &str = "/tmp/oracle-sample/claude/project";
const CODEX_CWD: &str = "/tmp/oracle-sample/codex/project";
/// Returns every file under `dir` with the SHA-256 of its bytes.
fn hash_tree(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                let digest = Sha256::digest(std::fs::read(entry.path()).unwrap());
                out.insert(entry.path(), format!("{digest:x}"));
            }
        }
    }
    out
}

fn claude_home(repo: &Repo) -> PathBuf {
    repo.home.join(".claude")
}

fn capture(repo: &Repo) -> String {
    repo.ok(&["import", "--home", repo.home.to_str().unwrap()])
}

fn session_refs(repo: &Repo) -> String {
    repo.git(&[
        "for-each-ref",
        "--format=%(refname) %(objectname)",
        "refs/sessions/",
    ])
}

#[test]
fn captures_only_this_repositorys_sessions_and_never_writes_the_store() {
    let repo = Repo::new();
    let root = repo.root.to_str().unwrap().to_owned();
    let store = claude_home(&repo);
    std::fs::create_dir_all(store.join("projects")).unwrap();
    // Ours: a session at the root, and one with a sub-agent started in a
    // subdirectory.
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &store,
        CLAUDE_CWD,
        &root,
    );
    copy_tree(
        &fixtures().join("claude/subagent/native"),
        &store,
        CLAUDE_CWD,
        &format!("{root}/sub"),
    );
    // Another project's session, and a project whose path only shares a prefix.
    copy_tree(
        &fixtures().join("claude/named/native"),
        &store,
        CLAUDE_CWD,
        "/elsewhere/project",
    );
    let other = store.join("projects/-other");
    std::fs::create_dir_all(&other).unwrap();
    copy_tree(
        &fixtures().join("claude/crafted-minimal/native/projects"),
        &other.parent().unwrap().join("x"),
        CLAUDE_CWD,
        &format!("{root}-sibling"),
    );
    let before = hash_tree(&repo.home);

    let out = capture(&repo);
    assert_eq!(
        hash_tree(&repo.home),
        before,
        "capture wrote into the agent store"
    );
    let ids: Vec<&str> = out
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{out}");
    assert!(
        ids.contains(&ROUNDTRIP) && ids.contains(&"60a416f8-90ad-40ae-b345-680a6c3b3c64"),
        "{out}"
    );
    let child = ids
        .iter()
        .find(|i| i.contains("agent-a3be7a38af014e4b8"))
        .expect("sub-agent session");
    let shown: serde_json::Value =
        serde_json::from_str(&repo.ok(&["show", child, "--json"])).unwrap();
    assert_eq!(
        shown["header"]["spawned_by"]["session"],
        "60a416f8-90ad-40ae-b345-680a6c3b3c64"
    );
    assert_eq!(shown["header"]["cwd"], format!("{root}/sub"));

    // The captured events are the adapter's parse of the file.
    let golden =
        std::fs::read_to_string(fixtures().join("claude/roundtrip/canonical.jsonl")).unwrap();
    let events = repo.events(ROUNDTRIP);
    assert_eq!(events.len(), golden.lines().count());
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    for kind in [
        "message.user",
        "message.assistant",
        "message.thinking",
        "tool.call",
        "tool.result",
        "command.run",
        "meta",
    ] {
        assert!(types.contains(&kind), "no {kind} in {types:?}");
    }
    repo.ok(&["verify"]);
    repo.fsck();

    // Nothing new: nothing written.
    let refs = session_refs(&repo);
    assert_eq!(capture(&repo), "");
    assert_eq!(session_refs(&repo), refs);
}

#[test]
fn incremental_capture_appends_only_new_records_as_one_batch() {
    let repo = Repo::new();
    let root = repo.root.to_str().unwrap().to_owned();
    let store = claude_home(&repo);
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &store,
        CLAUDE_CWD,
        &root,
    );
    let file = store.join(format!(
        "projects/-tmp-oracle-sample-claude-project/{ROUNDTRIP}.jsonl"
    ));
    capture(&repo);
    let first = repo.events(ROUNDTRIP).len();

    // The agent appends a turn, the last line still being written.
    let full = std::fs::read_to_string(fixtures().join("capture/claude-resumed.jsonl"))
        .unwrap()
        .replace(CLAUDE_CWD, &root);
    let cut = full.trim_end().rfind('\n').unwrap() + 20;
    std::fs::write(&file, &full[..cut]).unwrap();
    let out = capture(&repo);
    assert!(out.contains(ROUNDTRIP), "{out}");
    let partial = repo.events(ROUNDTRIP).len();
    assert!(partial > first);
    assert_eq!(
        repo.git(&["rev-list", "--count", &format!("refs/sessions/{ROUNDTRIP}")]),
        "2"
    );

    // The line is finished: only it is added.
    std::fs::write(&file, &full).unwrap();
    capture(&repo);
    assert_eq!(
        repo.git(&["rev-list", "--count", &format!("refs/sessions/{ROUNDTRIP}")]),
        "3"
    );

    // Same result as capturing the finished file in one go.
    let other = Repo::new();
    let other_root = other.root.to_str().unwrap().to_owned();
    let other_store = claude_home(&other);
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &other_store,
        CLAUDE_CWD,
        &other_root,
    );
    let other_file = other_store.join(format!(
        "projects/-tmp-oracle-sample-claude-project/{ROUNDTRIP}.jsonl"
    ));
    std::fs::write(&other_file, full.replace(&root, &other_root)).unwrap();
    capture(&other);
    let strip = |events: Vec<serde_json::Value>, root: &str| -> Vec<String> {
        events
            .into_iter()
            .map(|mut e| {
                e.as_object_mut().unwrap().remove("checksum");
                e.to_string().replace(root, "[ROOT]")
            })
            .collect()
    };
    assert_eq!(
        strip(repo.events(ROUNDTRIP), &root),
        strip(other.events(ROUNDTRIP), &other_root)
    );
    repo.ok(&["verify"]);
}

#[test]
fn a_rewritten_file_or_lost_cursors_never_duplicate_events() {
    let repo = Repo::new();
    let root = repo.root.to_str().unwrap().to_owned();
    let store = claude_home(&repo);
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &store,
        CLAUDE_CWD,
        &root,
    );
    let file = store.join(format!(
        "projects/-tmp-oracle-sample-claude-project/{ROUNDTRIP}.jsonl"
    ));
    capture(&repo);
    let n = repo.events(ROUNDTRIP).len();

    // Local state is rebuildable: without cursors, nothing is added twice.
    std::fs::remove_dir_all(repo.root.join(".git/session/capture")).unwrap();
    capture(&repo);
    assert_eq!(repo.events(ROUNDTRIP).len(), n);

    // The file is rewritten with the resumed version (same prefix, different
    // bytes before the cursor because of a changed first line).
    let full = std::fs::read_to_string(fixtures().join("capture/claude-resumed.jsonl"))
        .unwrap()
        .replace(CLAUDE_CWD, &root);
    let mut lines: Vec<&str> = full.lines().collect();
    lines.remove(1);
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    capture(&repo);
    let events = repo.events(ROUNDTRIP);
    let mut origins: Vec<String> = events.iter().map(|e| e["origin"].to_string()).collect();
    let total = origins.len();
    origins.sort();
    origins.dedup();
    assert_eq!(origins.len(), total, "an event was captured twice");
    assert!(total > n);
    repo.ok(&["verify"]);
}

#[test]
fn captures_codex_rollouts_from_codex_home() {
    let repo = Repo::new();
    let root = repo.root.to_str().unwrap().to_owned();
    let codex_home = repo.outside("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    copy_tree(
        &fixtures().join("codex/function-tools/native"),
        &codex_home,
        CODEX_CWD,
        &root,
    );
    copy_tree(
        &fixtures().join("codex/default-model-roundtrip/native"),
        &codex_home,
        CODEX_CWD,
        "/somewhere/else",
    );
    let before = hash_tree(&codex_home);
    let out = repo
        .session()
        .env("CODEX_HOME", &codex_home)
        .args([
            "import",
            "--agent",
            "codex",
            "--home",
            repo.home.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.starts_with("01a22641-1298-70e1-90e6-4b6faeb436bb  codex"),
        "{stdout}"
    );
    assert_eq!(hash_tree(&codex_home), before);
    let golden =
        std::fs::read_to_string(fixtures().join("codex/function-tools/canonical.jsonl")).unwrap();
    assert_eq!(repo.events("01a22641").len(), golden.lines().count());
    repo.ok(&["verify"]);
}

const ROTATED: &str = "019a1d2e-5b7c-7e01-9c3a-2f4e6a8b0c11";

/// Returns the two files of the rotated fixture thread: the immutable copy
/// of its first segment and the live file after the rotation, relative to
/// the Codex home.
fn rotated_files() -> (PathBuf, PathBuf) {
    let name = format!("rollout-2026-11-29T07-42-10-{ROTATED}.jsonl");
    (
        PathBuf::from(format!("rotated_rollout_segments/{ROTATED}/initial/{name}")),
        PathBuf::from(format!("sessions/2026/11/29/{name}")),
    )
}

fn import_codex(repo: &Repo, codex_home: &Path) -> String {
    let out = repo
        .session()
        .env("CODEX_HOME", codex_home)
        .args([
            "import",
            "--agent",
            "codex",
            "--home",
            repo.home.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// The user texts of a captured session, in order.
fn user_texts(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "message.user")
        .filter_map(|e| e["payload"]["text"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_rotated_codex_thread_is_one_session_whichever_capture_saw_first() {
    let (copy, live) = rotated_files();
    let fixture = fixtures().join("codex/rotated/native");
    let root_of = |repo: &Repo| repo.root.to_str().unwrap().to_owned();

    // Captured once with both files there.
    let both = Repo::new();
    let home = both.outside("codex-home");
    copy_tree(&fixture, &home, CODEX_CWD, &root_of(&both));
    let before = hash_tree(&home);
    let out = import_codex(&both, &home);
    assert!(
        out.lines().all(|l| l.starts_with(ROTATED)),
        "one session for the thread: {out}"
    );
    assert_eq!(hash_tree(&home), before, "the store is read-only");
    let whole = both.events(ROTATED);
    assert_eq!(
        user_texts(&whole),
        [
            "ROTATED-Q1: please list the files",
            "ROTATED-Q2: and the notes?"
        ],
    );
    let golden = |name: &str| {
        std::fs::read_to_string(fixtures().join("codex/rotated").join(name))
            .unwrap()
            .lines()
            .count()
    };
    let stem = format!("rollout-2026-11-29T07-42-10-{ROTATED}");
    assert_eq!(
        whole.len(),
        golden("canonical.jsonl") + golden(&format!("canonical.{stem}.jsonl")),
        "every event of both segments, none twice"
    );
    both.ok(&["verify"]);

    // Captured before the rotation, then after it: the live file was
    // replaced (its lines numbered from 0 again) and its old content moved.
    let step = Repo::new();
    let home = step.outside("codex-home");
    let first = std::fs::read_to_string(fixture.join(&copy))
        .unwrap()
        .replace(CODEX_CWD, &root_of(&step));
    std::fs::create_dir_all(home.join(&live).parent().unwrap()).unwrap();
    // The first capture sees the file before its last turn was written.
    let cut: Vec<&str> = first.lines().collect();
    std::fs::write(home.join(&live), cut[..4].join("\n") + "\n").unwrap();
    import_codex(&step, &home);
    assert_eq!(step.events(ROTATED).len(), 4);
    std::fs::write(home.join(&live), &first).unwrap();
    // The rotation: copy published, live file replaced by its successor.
    std::fs::create_dir_all(home.join(&copy).parent().unwrap()).unwrap();
    std::fs::write(home.join(&copy), &first).unwrap();
    let successor = std::fs::read_to_string(fixture.join(&live))
        .unwrap()
        .replace(CODEX_CWD, &root_of(&step));
    std::fs::write(home.join(&live), successor).unwrap();
    let out = import_codex(&step, &home);
    assert!(out.lines().all(|l| l.starts_with(ROTATED)), "{out}");
    let stepwise = step.events(ROTATED);
    let kinds = |events: &[serde_json::Value]| -> Vec<String> {
        events
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(user_texts(&stepwise), user_texts(&whole));
    assert_eq!(kinds(&stepwise), kinds(&whole), "the same events, in order");
    // Nothing is appended twice on the next capture.
    import_codex(&step, &home);
    assert_eq!(step.events(ROTATED).len(), whole.len());
    step.ok(&["verify"]);
}

#[test]
fn sessions_in_a_linked_worktree_belong_to_the_repository() {
    let repo = Repo::new();
    let wt = repo.outside("feature-wt");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        wt.to_str().unwrap(),
        "-b",
        "feature",
    ]);
    let store = claude_home(&repo);
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &store,
        CLAUDE_CWD,
        wt.to_str().unwrap(),
    );
    let out = capture(&repo);
    assert!(out.contains(ROUNDTRIP), "{out}");
}

#[test]
fn a_bad_native_line_is_a_warning_not_a_lost_session() {
    let repo = Repo::new();
    let root = repo.root.to_str().unwrap().to_owned();
    let store = claude_home(&repo);
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &store,
        CLAUDE_CWD,
        &root,
    );
    let file = store.join(format!(
        "projects/-tmp-oracle-sample-claude-project/{ROUNDTRIP}.jsonl"
    ));
    let mut text_ = std::fs::read_to_string(&file).unwrap();
    text_.insert_str(text_.find('\n').unwrap() + 1, "{this is not json\n");
    std::fs::write(&file, text_).unwrap();
    let out = repo
        .session()
        .args(["import", "--home", repo.home.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains(&format!("{ROUNDTRIP}.jsonl:2:")), "{err}");
    let events = repo.events(ROUNDTRIP);
    assert!(events.len() > 10);
    let kept: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["payload"]["unparsed"].is_string())
        .collect();
    assert_eq!(
        kept.len(),
        1,
        "the bad line is kept as one unparsed meta event"
    );
    assert_eq!(
        (
            kept[0]["type"].as_str(),
            kept[0]["payload"]["unparsed"].as_str()
        ),
        (Some("meta"), Some("{this is not json"))
    );
}

#[test]
fn missing_stores_mean_nothing_to_capture() {
    let repo = Repo::new();
    let out = repo
        .session()
        .args(["import", "--home", repo.home.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    // Nothing found: say where we looked and what to do next.
    assert!(
        err.contains("No agent sessions found for this repository yet")
            && err.contains(".claude does not exist")
            && err.contains(".codex does not exist")
            && err.contains("git session import --canonical FILE"),
        "{err}"
    );
    assert_eq!(text(&out.stdout), "");
    assert_eq!(session_refs(&repo), "");
}

/// Returns every object in the repository, decompressed, as one blob of bytes.
fn all_objects(repo: &Repo) -> Vec<u8> {
    repo.git_in(&repo.root)
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .output()
        .unwrap()
        .stdout
}

fn store_with_secret(repo: &Repo, secret: &str) {
    let root = repo.root.to_str().unwrap().to_owned();
    let store = claude_home(repo);
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &store,
        CLAUDE_CWD,
        &root,
    );
    // Where the agent keeps a session run in this repository.
    let projects = store.join("projects");
    let real = git_session_adapters::claude::project_dir_name(&root);
    std::fs::rename(
        projects.join("-tmp-oracle-sample-claude-project"),
        projects.join(&real),
    )
    .unwrap();
    let file = projects.join(real).join(format!("{ROUNDTRIP}.jsonl"));
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "Please write hello into note.txt",
            &format!("Please write hello into note.txt, the key is {secret}"),
        ),
    )
    .unwrap();
}

#[test]
fn secrets_are_redacted_before_anything_is_stored() {
    let secret = "sk-ant-api03-Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0Lz";
    let repo = Repo::new();
    store_with_secret(&repo, secret);
    capture(&repo);
    assert!(
        !all_objects(&repo)
            .windows(secret.len())
            .any(|w| w == secret.as_bytes()),
        "the secret reached a git object"
    );
    let events = repo.events(ROUNDTRIP);
    let redacted: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e.get("redacted").is_some())
        .collect();
    assert!(!redacted.is_empty());
    assert!(
        redacted
            .iter()
            .all(|e| e["redacted"]["rules"]["anthropic-api-key"].as_u64() >= Some(1)),
        "{redacted:?}"
    );
    let user = events.iter().find(|e| e["type"] == "message.user").unwrap();
    assert!(
        user["payload"]["text"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:anthropic-api-key]"),
        "{user}"
    );
    repo.ok(&["verify"]);
    // The agent's own file holds the same records: resuming here leaves it
    // alone rather than replacing it with the redacted render.
    let out = repo
        .session()
        .args(["resume", ROUNDTRIP, "--home", repo.home.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("already in place"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn redaction_can_be_turned_off() {
    let secret = "sk-ant-api03-Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0Lz";
    let repo = Repo::new();
    repo.git(&["config", "session.redact", "false"]);
    store_with_secret(&repo, secret);
    capture(&repo);
    assert!(
        all_objects(&repo)
            .windows(secret.len())
            .any(|w| w == secret.as_bytes())
    );
}

/// Returns the native file of the roundtrip fixture placed in `repo`'s home.
fn placed_roundtrip(repo: &Repo) -> PathBuf {
    let root = repo.root.to_str().unwrap().to_owned();
    let store = claude_home(repo);
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &store,
        CLAUDE_CWD,
        &root,
    );
    store.join(format!(
        "projects/-tmp-oracle-sample-claude-project/{ROUNDTRIP}.jsonl"
    ))
}

/// Returns the resumed fixture (the roundtrip plus one more turn) for `repo`.
fn resumed_text(repo: &Repo) -> String {
    std::fs::read_to_string(fixtures().join("capture/claude-resumed.jsonl"))
        .unwrap()
        .replace(CLAUDE_CWD, repo.root.to_str().unwrap())
}

/// Asserts that every tool result names its own call as parent, and that no
/// event's parent comes after it.
fn assert_parents(events: &[serde_json::Value]) {
    for e in events {
        let Some(p) = e["parent_seq"].as_u64() else {
            continue;
        };
        assert!(p < e["seq"].as_u64().unwrap(), "{e}");
        if e["type"] == "tool.result" {
            let parent = &events[p as usize];
            assert_eq!(parent["type"], "tool.call", "{e} has parent {parent}");
            assert_eq!(parent["payload"]["call_id"], e["payload"]["call_id"]);
        }
    }
}

#[test]
fn events_appended_between_captures_keep_parents_right_and_the_file_is_read_on() {
    let repo = Repo::new();
    let file = placed_roundtrip(&repo);
    capture(&repo);
    let n = repo.events(ROUNDTRIP).len();
    // Others append to the session between two captures of the file (a
    // handoff does; here `append`).
    let note = repo.write_jsonl("note.jsonl", &[event(0), event(1)]);
    repo.ok(&["append", ROUNDTRIP, note.to_str().unwrap()]);

    // The agent continues the file. A line in the middle, far from its
    // start and from the cursor (the first and last 4 KiB read are
    // checked), is also damaged in place: a re-read from the start would
    // see it (and keep it as a new unparsed record); reading on from the
    // cursor does not.
    let full = resumed_text(&repo);
    let mut lines: Vec<String> = full.lines().map(str::to_owned).collect();
    let mut start = 0;
    let middle = lines
        .iter()
        .position(|l| {
            let at = start;
            start += l.len() + 1;
            at >= 4096
        })
        .expect("a line past the first 4 KiB");
    let before: usize = lines[..=middle].iter().map(|l| l.len() + 1).sum();
    assert!(before + 4096 < std::fs::metadata(&file).unwrap().len() as usize);
    let len = lines[middle].len();
    lines[middle] = format!("{{{}", "x".repeat(len - 1));
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    capture(&repo);

    let events = repo.events(ROUNDTRIP);
    assert!(
        events.iter().all(|e| e["payload"]["unparsed"].is_null()),
        "the file was re-read from the start"
    );
    // Exactly the new records were appended, after the foreign events.
    let other = Repo::new();
    let other_file = placed_roundtrip(&other);
    std::fs::write(&other_file, resumed_text(&other)).unwrap();
    capture(&other);
    let whole = other.events(ROUNDTRIP).len();
    assert_eq!(events.len(), whole + 2);
    assert!(
        events[n + 2..]
            .iter()
            .any(|e| e["type"] == "tool.result" && e["parent_seq"].is_u64())
    );
    // Each new event has the parent it has when the file is captured in
    // one go, moved past the notes where it is a new event too.
    let alone = other.events(ROUNDTRIP);
    for (i, want) in alone.iter().enumerate().skip(n) {
        let moved = want["parent_seq"]
            .as_u64()
            .map(|p| if p >= n as u64 { p + 2 } else { p });
        assert_eq!(events[i + 2]["parent_seq"].as_u64(), moved, "{want}");
        assert_eq!(events[i + 2]["type"], want["type"]);
    }
    assert_parents(&events);
    repo.ok(&["verify"]);

    // And an unchanged file costs nothing more after all this.
    let refs = session_refs(&repo);
    assert_eq!(capture(&repo), "");
    assert_eq!(session_refs(&repo), refs);
}
