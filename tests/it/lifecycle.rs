//! The session lifecycle across two clones: metadata (tags, notes, pins,
//! hiding, titles) kept in refs/session-meta/<id> and synced with the
//! sessions.

use std::path::{Path, PathBuf};

use crate::support::*;

struct Clones {
    a: Repo,
    b: PathBuf,
}

impl Clones {
    fn new() -> Clones {
        let a = Repo::new();
        let remote = a.outside("remote.git");
        a.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
        a.git(&[
            "remote",
            "add",
            "origin",
            &format!("file://{}", remote.display()),
        ]);
        a.git(&["push", "-q", "origin", "main"]);
        let b = a.outside("clone-b");
        a.git(&["clone", "-q", remote.to_str().unwrap(), b.to_str().unwrap()]);
        a.git(&["config", "session.remote", "origin"]);
        a.git_in(&b)
            .args(["config", "session.remote", "origin"])
            .output()
            .unwrap();
        Clones { a, b }
    }

    fn on(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.a.session_in(dir).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "git session {args:?} in {}: {}{}",
            dir.display(),
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.a.git_in(dir).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
        text(&out.stdout).trim_end().to_owned()
    }

    fn list(&self, dir: &Path, extra: &[&str]) -> Vec<serde_json::Value> {
        let mut args = vec!["list", "--json"];
        args.extend(extra);
        serde_json::from_str::<serde_json::Value>(&self.on(dir, &args))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }
}

#[test]
fn tags_edited_on_both_clones_converge() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    c.a.import(&c.a.write_jsonl("s.jsonl", &session_lines("s-meta", 4)));
    c.on(&a, &["push"]);
    c.on(&b, &["fetch"]);
    // Concurrent edits: both clones tag, one titles, the other pins and notes.
    c.on(&a, &["tag", "s-meta", "from-a", "shared"]);
    c.on(&a, &["title", "s-meta", "Fix the login bug"]);
    c.on(&b, &["tag", "s-meta", "from-b"]);
    c.on(&b, &["tag", "s-meta", "--remove", "nothing-yet"]);
    c.on(&b, &["pin", "s-meta"]);
    c.on(&b, &["note", "s-meta", "see PR 12"]);
    c.on(&a, &["sync"]);
    let synced = c.on(&b, &["sync"]);
    assert!(
        synced.contains("meta      s-meta: metadata merged"),
        "{synced}"
    );
    c.on(&a, &["sync"]);
    let meta_ref = |dir: &Path| c.git(dir, &["rev-parse", "refs/session-meta/s-meta"]);
    assert_eq!(meta_ref(&a), meta_ref(&b), "the metadata refs differ");
    for dir in [&a, &b] {
        assert_eq!(c.on(dir, &["tag", "s-meta"]), "from-a\nfrom-b\nshared\n");
        assert_eq!(c.on(dir, &["title", "s-meta"]), "Fix the login bug\n");
        assert!(c.on(dir, &["note", "s-meta"]).contains("see PR 12"));
        let row = &c.list(dir, &[])[0];
        assert_eq!(row["title"], "Fix the login bug");
        assert_eq!(row["pinned"], true);
        assert_eq!(
            row["tags"],
            serde_json::json!(["from-a", "from-b", "shared"])
        );
        let text_list = c.on(dir, &["list"]);
        assert!(
            text_list.contains("[pinned] #from-a #from-b #shared"),
            "{text_list}"
        );
        // Every change of both clones is in the history, newest first.
        let log = c.on(dir, &["log", "--meta", "s-meta"]);
        assert_eq!(log.lines().count(), 6, "{log}");
        assert!(log.lines().next().unwrap().contains("note"), "{log}");
        assert!(log.contains("tag +from-a +shared") && log.contains("tag +from-b"));
    }
    // A later edit wins over an earlier one, whichever clone made it.
    c.on(&b, &["title", "s-meta", "Login bug, take two"]);
    c.on(&b, &["sync"]);
    c.on(&a, &["sync"]);
    assert_eq!(c.on(&a, &["title", "s-meta"]), "Login bug, take two\n");
    // Hidden sessions leave the listing, not the repository.
    c.on(&a, &["hide", "s-meta"]);
    assert!(c.list(&a, &[]).is_empty());
    assert_eq!(c.list(&a, &["--all"])[0]["hidden"], true);
    c.on(&a, &["hide", "--off", "s-meta"]);
    assert_eq!(c.list(&a, &[]).len(), 1);
}

#[test]
fn bad_metadata_values_are_refused_and_nothing_is_written() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("s.jsonl", &session_lines("s-bad", 2)));
    let err = repo.fails(&["tag", "s-bad", "two words"], 1);
    assert!(
        err.contains("\"two words\"") && err.contains("nothing was written"),
        "{err}"
    );
    repo.fails(&["title", "s-bad", "line\nbreak"], 1);
    let refs = repo.git(&["for-each-ref", "refs/session-meta/"]);
    assert!(refs.is_empty(), "{refs}");
    repo.fails(&["tag", "no-such-session", "x"], 1);
}

/// Writes a metadata commit by hand in clone `dir` and force-pushes it
/// over the remote's metadata of session `id`, as a hostile remote could.
fn forge_meta(c: &Clones, dir: &Path, id: &str, change: &str, state: &str) {
    let blob = |content: &str| {
        let out =
            c.a.git_in(dir)
                .args(["hash-object", "-w", "--stdin"])
                .write_stdin(content.to_owned())
                .output()
                .unwrap();
        text(&out.stdout).trim().to_owned()
    };
    let tree_text = format!(
        "100644 blob {}\tchange.json\n100644 blob {}\tmeta.json\n",
        blob(change),
        blob(state)
    );
    let out =
        c.a.git_in(dir)
            .args(["mktree"])
            .write_stdin(tree_text)
            .output()
            .unwrap();
    let tree = text(&out.stdout).trim().to_owned();
    let forged = c.git(
        dir,
        &[
            "commit-tree",
            &tree,
            "-m",
            &format!("meta: forged\n\nSession-Id: {id}"),
        ],
    );
    c.git(
        dir,
        &[
            "push",
            "-q",
            "-f",
            "origin",
            &format!("{}:refs/session-meta/{id}", forged.trim()),
        ],
    );
}

#[test]
fn fetched_metadata_is_checked_before_it_is_adopted() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    c.a.import(&c.a.write_jsonl("s.jsonl", &session_lines("s-trust", 2)));
    c.on(&a, &["tag", "s-trust", "good"]);
    c.on(&a, &["push"]);
    // A tag with a terminal escape, pushed by hand from the other clone.
    forge_meta(
        &c,
        &b,
        "s-trust",
        r#"{"time":"2030-01-01T00:00:00.000Z","op":"tag","add":["\u001b]0;pwned\u0007"]}"#,
        r#"{"tags":["\u001b]0;pwned\u0007"]}"#,
    );
    let fetched = c.on(&a, &["fetch"]);
    assert!(
        fetched.contains("quarantined refs/remotes/origin/session-meta/s-trust: metadata:")
            && fetched.contains("no spaces, commas or control characters"),
        "{fetched}"
    );
    assert!(
        !fetched.contains('\u{1b}'),
        "escape printed raw: {fetched:?}"
    );
    assert_eq!(c.on(&a, &["tag", "s-trust"]), "good\n");
    // A state that does not follow from its changes is refused too.
    forge_meta(
        &c,
        &b,
        "s-trust",
        r#"{"time":"2030-01-01T00:00:00.000Z","op":"pin","on":true}"#,
        r#"{"tags":["admin"],"pinned":true}"#,
    );
    let fetched = c.on(&a, &["fetch"]);
    assert!(
        fetched.contains("is not what its changes replay to"),
        "{fetched}"
    );
    assert_eq!(c.on(&a, &["tag", "s-trust"]), "good\n");
}

fn sha_of(path: &Path) -> Option<String> {
    use sha2::Digest;
    std::fs::read(path)
        .ok()
        .map(|b| format!("{:x}", sha2::Sha256::digest(b)))
}

#[test]
fn a_checkpoint_is_restored_byte_identical_in_a_fresh_clone() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    // Code both clones share.
    std::fs::write(a.join("kept.txt"), "kept\n").unwrap();
    std::fs::write(a.join("edited.txt"), "old\n").unwrap();
    std::fs::write(a.join("gone.txt"), "to be deleted\n").unwrap();
    std::fs::write(a.join(".gitignore"), "*.log\n").unwrap();
    c.git(&a, &["add", "."]);
    c.git(&a, &["commit", "-q", "-m", "code"]);
    c.git(&a, &["push", "-q", "origin", "main"]);
    c.git(&b, &["pull", "-q", "origin", "main"]);
    c.a.import(&c.a.write_jsonl("s.jsonl", &session_lines("s-cp", 3)));
    // The working state: unstaged, staged, partly staged, untracked,
    // ignored, deleted, binary, in a subdirectory.
    std::fs::write(a.join("edited.txt"), "new\n").unwrap();
    std::fs::write(a.join("staged.txt"), "staged\n").unwrap();
    c.git(&a, &["add", "staged.txt"]);
    std::fs::create_dir_all(a.join("src/deep")).unwrap();
    std::fs::write(a.join("src/deep/untracked.rs"), "fn main() {}\n").unwrap();
    std::fs::write(a.join("bin.dat"), [0u8, 159, 146, 150, 255, 10, 13]).unwrap();
    std::fs::write(a.join("debug.log"), "ignored\n").unwrap();
    std::fs::remove_file(a.join("gone.txt")).unwrap();
    let index = a.join(".git/index");
    let before = (
        c.git(&a, &["status", "--porcelain"]),
        sha_of(&index),
        c.git(
            &a,
            &[
                "for-each-ref",
                "--format=%(refname) %(objectname)",
                "refs/heads",
                "refs/tags",
            ],
        ),
        c.git(&a, &["stash", "list"]),
    );
    let seq = c.on(&a, &["checkpoint", "s-cp", "-m", "before the refactor"]);
    let seq = seq.trim();
    assert_eq!(seq, "3");
    let after = (
        c.git(&a, &["status", "--porcelain"]),
        sha_of(&index),
        c.git(
            &a,
            &[
                "for-each-ref",
                "--format=%(refname) %(objectname)",
                "refs/heads",
                "refs/tags",
            ],
        ),
        c.git(&a, &["stash", "list"]),
    );
    assert_eq!(
        before, after,
        "checkpoint touched the index, work tree or refs"
    );
    // show and compile cite it.
    let shown = c.on(&a, &["show", "s-cp"]);
    assert!(
        shown.contains("checkpoint") && shown.contains("5 files changed: before the refactor"),
        "{shown}"
    );
    let brief = c.on(&a, &["compile", "s-cp", "--for", "codex"]);
    assert!(
        brief.contains("Checkpoints")
            && brief.contains("before the refactor")
            && brief.contains("--restore <session> 3"),
        "{brief}"
    );
    c.on(&a, &["push"]);
    // A fresh clone restores it.
    c.on(&b, &["fetch"]);
    c.on(&b, &["verify", "s-cp"]);
    std::fs::write(b.join("kept.txt"), "local change\n").unwrap();
    let err =
        c.a.session_in(&b)
            .args(["checkpoint", "--restore", "s-cp", seq])
            .output()
            .unwrap();
    assert!(!err.status.success());
    assert!(
        text(&err.stderr).contains(
            "the work tree has 1 local change (first:  M kept.txt); nothing was restored: \
             commit or stash them first (`git stash -u` also keeps untracked files), then restore again"
        ),
        "{}",
        text(&err.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(b.join("kept.txt")).unwrap(),
        "local change\n"
    );
    c.git(&b, &["checkout", "kept.txt"]);
    let err =
        c.a.session_in(&b)
            .args(["checkpoint", "--restore", "s-cp", "1"])
            .output()
            .unwrap();
    assert!(
        text(&err.stderr).contains("not a checkpoint"),
        "{}",
        text(&err.stderr)
    );
    c.on(&b, &["checkpoint", "--restore", "s-cp", seq]);
    for f in [
        "kept.txt",
        "edited.txt",
        "staged.txt",
        "src/deep/untracked.rs",
        "bin.dat",
        ".gitignore",
    ] {
        assert_eq!(sha_of(&a.join(f)), sha_of(&b.join(f)), "{f} differs");
        assert!(sha_of(&b.join(f)).is_some(), "{f} missing");
    }
    assert!(!b.join("gone.txt").exists(), "a deleted file came back");
    assert!(!b.join("debug.log").exists(), "an ignored file travelled");
}

/// Hands `id` off to `to` with its store in `home`; returns the target's native id.
fn hand_off(c: &Clones, id: &str, to: &str, home: &Path) -> String {
    let out = c.on(
        &c.a.root,
        &["handoff", id, "--to", to, "--home", home.to_str().unwrap()],
    );
    let native = out.trim().rsplit(' ').next().unwrap().to_owned();
    c.on(&c.a.root, &["import", "--home", home.to_str().unwrap()]);
    native
}

fn owner_of(c: &Clones, dir: &Path, id: &str) -> String {
    c.list(dir, &[])
        .into_iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed"))["owner"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn the_lead_moves_with_each_handoff_and_a_non_owner_write_is_flagged() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    captured_claude(&c.a);
    assert_eq!(owner_of(&c, &a, ROUNDTRIP), "claude");
    // claude -> codex: the source session is led by codex now, and the
    // child holding Codex's continuation is codex's from the start.
    let codex_home = c.a.outside("codex-home");
    let child = hand_off(&c, ROUNDTRIP, "codex", &codex_home);
    assert_eq!(owner_of(&c, &a, ROUNDTRIP), "codex");
    assert_eq!(owner_of(&c, &a, &child), "codex");
    // codex -> claude, from the child.
    let claude_home = c.a.outside("claude-home");
    let grandchild = hand_off(&c, &child, "claude", &claude_home);
    assert_eq!(owner_of(&c, &a, &child), "claude");
    assert_eq!(owner_of(&c, &a, &grandchild), "claude");
    assert_eq!(owner_of(&c, &a, ROUNDTRIP), "codex");
    let status = c.on(&a, &["status"]);
    assert!(
        status.contains(&format!(
            "lead       {ROUNDTRIP}  led by codex since the handoff at seq"
        )) && status.contains(&format!("lead       {child}  led by claude")),
        "{status}"
    );
    assert!(!status.contains("warning"), "{status}");
    let list = c.on(&a, &["list"]);
    assert!(list.contains("[led by codex]"), "{list}");
    // Claude goes on in the original session, which codex leads now.
    let source =
        c.a.outside("source")
            .join(".claude/projects/-tmp-oracle-sample-claude-project")
            .join(format!("{ROUNDTRIP}.jsonl"));
    let mut body = std::fs::read_to_string(&source).unwrap();
    body.push_str(
        &serde_json::json!({
            "parentUuid": "9c8de382-806c-4500-b4cb-61b26ac5d2da",
            "isSidechain": false,
            "type": "user",
            "message": {"role": "user", "content": "keep going here"},
            "uuid": "11111111-2222-4333-8444-555555555555",
            "timestamp": "2026-11-29T08:00:00.000Z",
            "cwd": a.to_str().unwrap(),
            "sessionId": ROUNDTRIP,
            "version": "2.1.332",
            "userType": "external"
        })
        .to_string(),
    );
    body.push('\n');
    std::fs::write(&source, body).unwrap();
    let source_home = c.a.outside("source");
    c.on(&a, &["import", "--home", source_home.to_str().unwrap()]);
    let status = c.on(&a, &["status"]);
    assert!(
        status.contains("warning  claude appended seq")
            && status.contains("but does not lead it (codex does)"),
        "{status}"
    );
    let log = c.on(&a, &["log", "--meta", ROUNDTRIP]);
    assert!(
        log.contains("claude, which does not lead, appended"),
        "{log}"
    );
    // The lead travels with the sessions.
    c.on(&a, &["push", "--to", "origin"]);
    c.on(&b, &["fetch"]);
    assert_eq!(owner_of(&c, &b, ROUNDTRIP), "codex");
    assert_eq!(owner_of(&c, &b, &child), "claude");
    assert!(
        c.on(&b, &["status"])
            .contains("warning  claude appended seq")
    );
}

/// Captures the Claude roundtrip in A and hands it off to Codex with a
/// signed receipt (signer test@example.com).
fn signed_hand_off_to_codex(c: &Clones) {
    captured_claude(&c.a);
    let key = keygen(&c.a.outside(""), "id_lead", "");
    c.a.git(&["config", "session.signingKey", key.to_str().unwrap()]);
    hand_off(c, ROUNDTRIP, "codex", &c.a.outside("codex-home"));
}

/// The roundtrip session's row of `status --json`'s leads in `dir`.
fn lead_of(c: &Clones, dir: &Path) -> serde_json::Value {
    let status: serde_json::Value =
        serde_json::from_str(&c.on(dir, &["status", "--json"])).unwrap();
    status["leads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["session"] == ROUNDTRIP)
        .cloned()
        .unwrap_or_else(|| panic!("no lead for {ROUNDTRIP}: {status}"))
}

#[test]
fn a_signed_handoff_records_the_signer_as_the_lead_on_both_clones() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    signed_hand_off_to_codex(&c);
    let lead = |dir: &Path| lead_of(&c, dir);
    let here = lead(&a);
    assert_eq!(here["owner"], "codex", "{here}");
    assert_eq!(here["key"], "test@example.com", "{here}");
    let status = c.on(&a, &["status"]);
    assert!(
        status.contains("led by codex") && status.contains("test@example.com"),
        "{status}"
    );
    // The signed lead travels with the sessions.
    c.on(&a, &["push", "--to", "origin"]);
    c.on(&b, &["fetch"]);
    let there = lead(&b);
    assert_eq!(
        (&there["owner"], &there["key"]),
        (&here["owner"], &here["key"]),
        "{there}"
    );
    // A later unsigned handoff names no key.
    c.a.git(&["config", "--unset", "session.signingKey"]);
    hand_off(&c, ROUNDTRIP, "pi", &c.a.outside("pi-home"));
    let unsigned = lead(&a);
    assert_eq!(unsigned["owner"], "pi", "{unsigned}");
    assert!(unsigned["key"].is_null(), "{unsigned}");
}

/// Metadata is a claim anyone who can push may write: a lead it names is
/// shown with a warning unless the log holds the handoff and, for a
/// claimed signer, a receipt of it that signer signed.
#[test]
fn a_lead_forged_in_fetched_metadata_is_flagged_not_shown_as_fact() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    signed_hand_off_to_codex(&c);
    c.on(&a, &["push", "--to", "origin"]);
    let lead = lead_of(&c, &a);
    assert!(
        lead["unconfirmed"].is_null(),
        "the real lead is confirmed: {lead}"
    );
    let seq = lead["handoff_seq"].as_u64().unwrap();
    c.on(&b, &["fetch"]);
    for (year, agent, at, signer, why) in [
        // A seq that holds no handoff.
        (
            2030,
            "pi",
            1,
            "test@example.com",
            "seq 1 is no handoff to pi".to_owned(),
        ),
        // The real handoff, another signer claimed.
        (
            2031,
            "codex",
            seq,
            "mallory@example.com",
            format!(
                "no receipt of the handoff at seq {seq} with a good signature by mallory@example.com"
            ),
        ),
    ] {
        let owner = serde_json::json!({"agent": agent, "key": signer, "seq": at,
                                       "time": format!("{year}-01-01T00:00:00.000Z")});
        let mut change = owner.clone();
        change["op"] = "owner".into();
        change.as_object_mut().unwrap().remove("time");
        change["time"] = owner["time"].clone();
        forge_meta(
            &c,
            &b,
            ROUNDTRIP,
            &change.to_string(),
            &serde_json::json!({"owner": owner}).to_string(),
        );
        c.on(&a, &["fetch"]);
        let status = c.on(&a, &["status"]);
        assert!(
            status.contains(&format!(
                "led by {agent} since the handoff at seq {at}, receipt signed by {signer}"
            )) && status.contains(&format!(
                "warning  the metadata claims this lead, the log does not confirm it: {why}"
            )),
            "{status}"
        );
    }
}

fn typed(kind: &str, payload: serde_json::Value) -> serde_json::Value {
    let mut e = event(0);
    e["type"] = kind.into();
    e["actor"] = "agent:codex".into();
    e["agent"] = "codex".into();
    e["payload"] = payload;
    e.as_object_mut().unwrap().remove("origin");
    e
}

#[test]
fn a_merge_back_summary_appears_in_the_compiled_brief() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    c.a.import(&c.a.write_jsonl("s.jsonl", &session_lines("s-main", 4)));
    c.on(&a, &["fork", "s-main", "--id", "s-side"]);
    let work = c.a.write_jsonl(
        "side.jsonl",
        &[
            typed("decision", serde_json::json!({"text": "Use a token bucket for the rate limiter"})),
            typed("file.edit", serde_json::json!({"path": "src/limit.rs", "diff": "+pub struct Bucket;\n"})),
            typed("command.run", serde_json::json!({"command": "cargo test limit", "exit_code": 0, "output_tail": "ok"})),
            typed("command.run", serde_json::json!({"command": "cargo clippy", "exit_code": 1, "output_tail": "warning: unused"})),
        ],
    );
    c.on(&a, &["append", "s-side", work.to_str().unwrap()]);
    let before = c.on(&a, &["compile", "s-main", "--for", "claude"]);
    assert!(!before.contains("token bucket"), "{before}");
    let printed = c.on(&a, &["merge", "s-side", "--into", "s-main"]);
    assert!(
        printed.contains("decision: Use a token bucket"),
        "{printed}"
    );
    // Only what the side session did: its inherited events 0..3 are not cited.
    assert!(
        printed.contains("[s-side seq 4]") && !printed.contains("seq 0"),
        "{printed}"
    );
    let events: serde_json::Value =
        serde_json::from_str(&c.on(&a, &["show", "s-main", "--json"])).unwrap();
    let merge = events["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(merge["type"], "session.merge");
    assert_eq!(merge["payload"]["session"], "s-side");
    assert_eq!(merge["payload"]["since_seq"], 4);
    assert_eq!(
        merge["payload"]["tip"],
        c.git(&a, &["rev-parse", "refs/sessions/s-side"]).as_str()
    );
    // No log merge: the side session is untouched, the main one grew by one.
    assert_eq!(events["events"].as_array().unwrap().len(), 5);
    // The brief of the main session carries it, here and in another clone.
    c.on(&a, &["push"]);
    c.on(&b, &["fetch"]);
    for dir in [&a, &b] {
        let brief = c.on(dir, &["compile", "s-main", "--for", "claude"]);
        assert!(
            brief.contains("Merged back from other sessions")
                && brief.contains("session s-side (claude) merged back")
                && brief.contains("Use a token bucket")
                && brief.contains("src/limit.rs")
                && brief.contains("cargo clippy")
                && brief.contains("exit 1"),
            "{brief}"
        );
    }
    let err = c.a.fails(&["merge", "s-main", "--into", "s-main"], 1);
    assert!(err.contains("into itself"), "{err}");
}

/// A task set after a handoff takes the handoff's child (made before) in
/// too, and a child put in another task stays there; taking the session
/// out takes its children that shared the task out with it.
#[test]
fn a_task_set_after_a_handoff_takes_the_existing_child_in() {
    let c = Clones::new();
    let a = c.a.root.clone();
    captured_claude(&c.a);
    let child = hand_off(&c, ROUNDTRIP, "codex", &c.a.outside("codex-home"));
    let grandchild = hand_off(&c, &child, "claude", &c.a.outside("claude-home"));
    let said =
        c.a.session()
            .args(["task", "fix-login", ROUNDTRIP])
            .output()
            .unwrap();
    assert!(said.status.success());
    assert_eq!(text(&said.stderr).trim(), "3 sessions in task fix-login");
    let in_task = |task: &str| -> Vec<String> {
        let mut ids: Vec<String> = c
            .list(&a, &["--task", task])
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let mut all = vec![ROUNDTRIP.to_owned(), child.clone(), grandchild.clone()];
    all.sort();
    assert_eq!(in_task("fix-login"), all);
    // A child in a task of its own stays there when its parent moves.
    c.on(&a, &["task", "side", &grandchild]);
    c.on(&a, &["task", "fix-login", "--remove", ROUNDTRIP]);
    assert_eq!(in_task("fix-login"), Vec::<String>::new());
    assert_eq!(in_task("side"), [grandchild]);
}

#[test]
fn a_task_lists_three_agents_sessions_in_order() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    captured_claude(&c.a);
    c.on(&a, &["task", "fix-login", ROUNDTRIP]);
    // The handoff's target session is in the task too.
    let child = hand_off(&c, ROUNDTRIP, "codex", &c.a.outside("codex-home"));
    let mut pi = session_lines("s-pi", 4);
    pi[0]["header"]["agent"] = "pi".into();
    pi[0]["header"]["created"] = "2026-12-01T00:00:00Z".into();
    c.a.import(&c.a.write_jsonl("pi.jsonl", &pi));
    c.a.import(&c.a.write_jsonl("other.jsonl", &session_lines("s-other", 2)));
    c.on(&a, &["task", "fix-login", "s-pi"]);
    c.on(&a, &["push"]);
    c.on(&b, &["fetch"]);
    for dir in [&a, &b] {
        let listed: Vec<String> = c
            .list(dir, &["--task", "fix-login"])
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(listed.len(), 3, "{listed:?}");
        assert!(!listed.contains(&"s-other".to_owned()));
        let timeline: serde_json::Value =
            serde_json::from_str(&c.on(dir, &["show", "--task", "fix-login", "--json"])).unwrap();
        let order: Vec<(&str, &str)> = timeline["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["agent"].as_str().unwrap(), s["id"].as_str().unwrap()))
            .collect();
        assert_eq!(
            order,
            [
                ("claude", ROUNDTRIP),
                ("codex", child.as_str()),
                ("pi", "s-pi")
            ]
        );
        let text_timeline = c.on(dir, &["show", "--task", "fix-login"]);
        assert!(
            text_timeline.starts_with("task     fix-login\n"),
            "{text_timeline}"
        );
        assert_eq!(text_timeline.lines().count(), 4, "{text_timeline}");
    }
    // The session URI names the task, and every command takes it.
    let shown = c.on(&a, &["show", ROUNDTRIP]);
    let uri = shown
        .lines()
        .find_map(|l| l.strip_prefix("uri      "))
        .unwrap_or_else(|| panic!("{shown}"))
        .to_owned();
    assert!(
        uri.starts_with("session://") && uri.ends_with(&format!("/remote/fix-login/{ROUNDTRIP}")),
        "{uri}"
    );
    let by_uri: serde_json::Value =
        serde_json::from_str(&c.on(&b, &["show", &uri, "--json"])).unwrap();
    assert_eq!(by_uri["uri"], uri.as_str());
    assert_eq!(by_uri["header"]["id"], ROUNDTRIP);
    c.on(&b, &["tag", &uri, "via-uri"]);
    assert_eq!(c.on(&b, &["tag", ROUNDTRIP]), "via-uri\n");
    c.on(&b, &["log", &uri]);
    let err = c.a.fails(&["show", "session://only/two"], 1);
    assert!(err.contains("not a session URI"), "{err}");
    let err = c.a.fails(&["task", "../escape", "s-pi"], 1);
    assert!(err.contains("task name"), "{err}");
}

/// Returns `n` incompressible bytes (xorshift), the same for a seed.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Sums the sizes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let m = e.metadata().unwrap();
        total += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    total
}

/// Imports session `id` whose event 2 shows `bytes` as a PNG artifact.
fn import_with_artifact(c: &Clones, id: &str, bytes: &[u8]) -> String {
    use base64::Engine;
    use sha2::Digest;
    let art = format!("sha256:{:x}", sha2::Sha256::digest(bytes));
    let mut lines = session_lines(id, 2);
    lines.insert(
        1,
        serde_json::json!({"artifact": {"id": art, "base64": base64::engine::general_purpose::STANDARD.encode(bytes)}}),
    );
    let mut image = event(2);
    image["type"] = serde_json::json!("message.user");
    image["actor"] = serde_json::json!("user");
    image["payload"] = serde_json::json!({"image": {"media_type": "image/png", "artifact": art}});
    image["refs"] = serde_json::json!([format!("artifact:{art}")]);
    lines.push(image);
    c.a.import(&c.a.write_jsonl(&format!("{id}.jsonl"), &lines));
    art
}

fn fails_on(c: &Clones, dir: &Path, args: &[&str]) -> String {
    let out = c.a.session_in(dir).args(args).output().unwrap();
    assert!(
        !out.status.success(),
        "git session {args:?} succeeded: {}",
        text(&out.stdout)
    );
    text(&out.stderr) + &text(&out.stdout)
}

#[test]
fn a_session_with_a_50_mb_artifact_pushes_the_head_only_and_fetches_the_rest_on_demand() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    c.git(&a, &["config", "session.syncArtifacts", "head"]);
    let big = noise(50 << 20, 7);
    let art = import_with_artifact(&c, "s-big", &big);
    c.on(&a, &["verify", "s-big"]);
    // The writer reads its own artifact whole.
    let exported_a = c.on(&a, &["export", "s-big", "--canonical"]);
    assert!(exported_a.contains(&art[..20]));
    let remote = c.a.outside("remote.git").join("objects");
    let before = dir_bytes(&remote);
    c.on(&a, &["push"]);
    let grown = dir_bytes(&remote) - before;
    assert!(
        grown < 1 << 20,
        "the push sent {grown} bytes of objects for a 50 MB artifact"
    );
    c.on(&b, &["fetch"]);
    // Heads verify; readers say what to run.
    c.on(&b, &["verify", "s-big"]);
    let hint = "only its head is here: run git session fetch --artifacts s-big";
    let html = c.on(&b, &["export", "s-big", "--format", "html"]);
    assert!(html.contains("is 52.4 MB, only its head is here"), "{html}");
    let err = fails_on(&c, &b, &["export", "s-big", "--canonical"]);
    assert!(err.contains(hint), "{err}");
    // Not published yet: the remote lacks it and says who publishes it.
    let err = fails_on(&c, &b, &["fetch", "--artifacts", "s-big"]);
    assert!(err.contains("git session push --artifacts s-big"), "{err}");
    c.on(&a, &["push", "--artifacts", "s-big"]);
    let fetched = c.on(&b, &["fetch", "--artifacts", "s-big"]);
    assert!(
        fetched.contains(&format!("fetched   {art} (52.4 MB)")),
        "{fetched}"
    );
    let exported_b = c.on(&b, &["export", "s-big", "--canonical"]);
    assert!(exported_a == exported_b, "the fetched artifact differs");
    c.on(&b, &["verify", "s-big"]);
    // Once here, fetching again has nothing to do.
    let again = c.on(&b, &["fetch", "--artifacts", "s-big", "--json"]);
    let again: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["present"], 1, "{again}");
}

#[test]
fn full_artifacts_published_by_both_clones_are_merged_and_both_push() {
    use base64::Engine;
    use sha2::Digest;
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    for dir in [&a, &b] {
        c.git(dir, &["config", "session.syncArtifacts", "head"]);
    }
    let first = noise(300_000, 21);
    let art_a = import_with_artifact(&c, "s-both", &first);
    c.on(&a, &["push"]);
    c.on(&a, &["push", "--artifacts", "s-both"]);
    // Clone B goes on in the session with an artifact of its own, before
    // it has A's full blobs: its artifacts ref starts apart from A's.
    c.on(&b, &["fetch"]);
    let second = noise(300_000, 22);
    let art_b = format!("sha256:{:x}", sha2::Sha256::digest(&second));
    let mut image = event(0);
    image["type"] = serde_json::json!("message.user");
    image["actor"] = serde_json::json!("user");
    image["payload"] = serde_json::json!({"image": {"media_type": "image/png", "artifact": art_b}});
    image["refs"] = serde_json::json!([format!("artifact:{art_b}")]);
    let lines = [
        serde_json::json!({"artifact": {"id": art_b, "base64": base64::engine::general_purpose::STANDARD.encode(&second)}}),
        image,
    ];
    let file = c.a.outside("more.jsonl");
    std::fs::write(
        &file,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    c.on(&b, &["append", "s-both", file.to_str().unwrap()]);
    c.on(&b, &["push"]);
    let err = fails_on(&c, &b, &["push", "--artifacts", "s-both"]);
    assert!(
        err.contains("refused refs/session-artifacts/s-both") && err.contains("merges them"),
        "{err}"
    );
    // Fetching brings A's blob and merges the two refs; the push goes.
    let fetched = c.on(&b, &["fetch", "--artifacts", "s-both"]);
    assert!(
        fetched.contains(&format!("fetched   {art_a}")) && fetched.contains("merged    "),
        "{fetched}"
    );
    c.on(&b, &["push", "--artifacts", "s-both"]);
    // A takes B's merge as it is (a fast-forward, no new commit) and
    // reads both artifacts whole.
    c.on(&a, &["fetch"]);
    let on_a = c.on(&a, &["fetch", "--artifacts", "s-both", "--json"]);
    let on_a: serde_json::Value = serde_json::from_str(&on_a).unwrap();
    assert_eq!(on_a["merged"], false, "{on_a}");
    assert_eq!(on_a["adopted"].as_array().unwrap().len(), 1, "{on_a}");
    let tip = |dir: &Path| c.git(dir, &["rev-parse", "refs/session-artifacts/s-both"]);
    assert_eq!(tip(&a), tip(&b));
    let exported_a = c.on(&a, &["export", "s-both", "--canonical"]);
    let exported_b = c.on(&b, &["export", "s-both", "--canonical"]);
    assert!(
        exported_a == exported_b,
        "the clones read different artifacts"
    );
    for art in [&art_a, &art_b] {
        assert!(exported_a.contains(art.as_str()), "{art} missing");
    }
    c.on(&a, &["verify", "s-both"]);
    c.on(&b, &["verify", "s-both"]);
    // Nothing left to merge: fetching again changes nothing.
    let again = c.on(&b, &["fetch", "--artifacts", "s-both", "--json"]);
    let again: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert_eq!(
        (again["present"].as_u64(), &again["merged"]),
        (Some(2), &serde_json::json!(false)),
        "{again}"
    );
    assert_eq!(tip(&a), tip(&b));
}

#[test]
fn a_forged_full_artifact_is_refused_before_it_is_adopted() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    c.git(&a, &["config", "session.syncArtifacts", "head"]);
    let bytes = noise(200_000, 11);
    let art = import_with_artifact(&c, "s-lazy", &bytes);
    c.on(&a, &["push"]);
    c.on(&b, &["fetch"]);
    let hex = art.trim_start_matches("sha256:");
    let remote = c.a.outside("remote.git");
    // The remote's full-artifacts ref, forged: first a blob of the right
    // size with other bytes, then one far larger than the head declares.
    let forge = |content: &[u8]| {
        let path = c.a.outside("forged.bin");
        std::fs::write(&path, content).unwrap();
        let blob = c.git(&remote, &["hash-object", "-w", path.to_str().unwrap()]);
        let out =
            c.a.git_in(&remote)
                .args(["mktree"])
                .write_stdin(format!("100644 blob {blob}\t{hex}\n"))
                .output()
                .unwrap();
        let tree = text(&out.stdout).trim().to_owned();
        let commit = c.git(&remote, &["commit-tree", &tree, "-m", "forged"]);
        c.git(
            &remote,
            &["update-ref", "refs/session-artifacts/s-lazy", &commit],
        );
    };
    let mut wrong = bytes.clone();
    wrong[100_000] ^= 1;
    forge(&wrong);
    let err = fails_on(&c, &b, &["fetch", "--artifacts", "s-lazy"]);
    assert!(
        err.contains(&format!("refused   {art}")) && err.contains("does not match its head"),
        "{err}"
    );
    forge(&noise(3 << 20, 5));
    let err = fails_on(&c, &b, &["fetch", "--artifacts", "s-lazy"]);
    assert!(
        err.contains("is 3145728 bytes, its head says the artifact is 200000: refused unread"),
        "{err}"
    );
    // Nothing was adopted: the reader still asks for the real one.
    assert!(
        c.git(&b, &["for-each-ref", "refs/session-artifacts"])
            .is_empty()
    );
    let err = fails_on(&c, &b, &["export", "s-lazy", "--canonical"]);
    assert!(err.contains("only its head is here"), "{err}");
    // The writer's push never forces over what is there.
    let err = fails_on(&c, &a, &["push", "--artifacts", "s-lazy"]);
    assert!(
        err.contains("refused refs/session-artifacts/s-lazy"),
        "{err}"
    );
    // Once the remote's copy is the real one, it is taken.
    c.git(
        &remote,
        &["update-ref", "-d", "refs/session-artifacts/s-lazy"],
    );
    c.on(&a, &["push", "--artifacts", "s-lazy"]);
    c.on(&b, &["fetch", "--artifacts", "s-lazy"]);
    let html = c.on(&b, &["export", "s-lazy", "--format", "html"]);
    assert!(!html.contains("only its head"), "{html}");
    c.on(&b, &["verify", "s-lazy"]);
}

#[test]
fn lazy_artifacts_of_an_encrypted_session_travel_sealed_and_verify() {
    use age::secrecy::ExposeSecret;
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    let key = age::x25519::Identity::generate();
    let key_file = c.a.outside("alice.key");
    std::fs::write(&key_file, format!("{}\n", key.to_string().expose_secret())).unwrap();
    for dir in [&a, &b] {
        c.git(
            dir,
            &["config", "session.identity", key_file.to_str().unwrap()],
        );
    }
    c.git(
        &a,
        &["config", "session.recipients", &key.to_public().to_string()],
    );
    c.git(&a, &["config", "session.syncArtifacts", "head"]);
    let mut bytes = b"MARKER-LAZY-SEALED ".repeat(4000);
    bytes.extend(noise(100_000, 3));
    let art = import_with_artifact(&c, "s-sealed", &bytes);
    c.on(&a, &["push"]);
    c.on(&a, &["push", "--artifacts", "s-sealed"]);
    // Neither the head nor the full blob holds the plaintext.
    let remote = c.a.outside("remote.git");
    let all = c.git(&remote, &["rev-list", "--objects", "--all"]);
    for line in all.lines() {
        let oid = line.split(' ').next().unwrap();
        if c.git(&remote, &["cat-file", "-t", oid]) == "blob" {
            let body =
                c.a.git_in(&remote)
                    .args(["cat-file", "blob", oid])
                    .output()
                    .unwrap();
            assert!(
                !String::from_utf8_lossy(&body.stdout).contains("MARKER-LAZY-SEALED"),
                "plaintext on the remote in {oid}"
            );
        }
    }
    c.on(&b, &["fetch"]);
    c.on(&b, &["verify", "s-sealed"]);
    let err = fails_on(&c, &b, &["export", "s-sealed", "--canonical"]);
    assert!(err.contains("only its head is here"), "{err}");
    let fetched = c.on(&b, &["fetch", "--artifacts", "s-sealed"]);
    assert!(fetched.contains(&format!("fetched   {art}")), "{fetched}");
    assert_eq!(
        c.on(&a, &["export", "s-sealed", "--canonical"]),
        c.on(&b, &["export", "s-sealed", "--canonical"])
    );
    c.on(&b, &["verify", "s-sealed"]);
}

/// Drops every reflog entry and prunes what no ref reaches.
fn prune_unreachable(c: &Clones, dir: &Path) {
    c.git(dir, &["reflog", "expire", "--expire=now", "--all"]);
    c.git(dir, &["gc", "-q", "--prune=now"]);
}

#[test]
fn a_checkpoint_stays_reachable_through_a_divergence_fork_and_a_purge() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    std::fs::write(a.join("f.txt"), "v1\n").unwrap();
    c.git(&a, &["add", "f.txt"]);
    c.git(&a, &["commit", "-q", "-m", "code"]);
    c.git(&a, &["push", "-q", "origin", "main"]);
    c.a.import(&c.a.write_jsonl("d.jsonl", &session_lines("s-div", 3)));
    c.on(&a, &["push"]);
    c.on(&b, &["fetch"]);
    // A checkpoints while B appends to the same session.
    std::fs::write(a.join("f.txt"), "checkpointed\n").unwrap();
    let seq = c
        .on(&a, &["checkpoint", "s-div", "-m", "mine"])
        .trim()
        .to_owned();
    c.git(&a, &["checkout", "f.txt"]);
    let file = c.a.write_jsonl("more.jsonl", &[event(0)]);
    c.on(&b, &["append", "s-div", file.to_str().unwrap()]);
    c.on(&b, &["push"]);
    let fetched = c.on(&a, &["fetch", "--json"]);
    let fetched: serde_json::Value = serde_json::from_str(&fetched).unwrap();
    let fork = fetched["changed"][0]["fork"].as_str().unwrap().to_owned();
    // Only the fork reaches the snapshot now.
    prune_unreachable(&c, &a);
    c.on(&a, &["verify", &fork]);
    c.on(&a, &["checkpoint", "--restore", &fork, &seq]);
    assert_eq!(
        std::fs::read_to_string(a.join("f.txt")).unwrap(),
        "checkpointed\n"
    );
    c.git(&a, &["checkout", "f.txt"]);
    // Every clone writes the same fork: B reconciles A's push alike.
    c.on(&a, &["push"]);
    c.on(&b, &["fetch"]);
    assert_eq!(
        c.git(&a, &["rev-parse", &format!("refs/sessions/{fork}")]),
        c.git(&b, &["rev-parse", &format!("refs/sessions/{fork}")])
    );
    // A purge rewrites the history and keeps the snapshot.
    c.a.import(&c.a.write_jsonl("p.jsonl", &session_lines("s-purged", 3)));
    std::fs::write(a.join("f.txt"), "before the purge\n").unwrap();
    let seq = c.on(&a, &["checkpoint", "s-purged"]).trim().to_owned();
    c.git(&a, &["checkout", "f.txt"]);
    c.on(&a, &["purge", "s-purged", "--seq", "1"]);
    prune_unreachable(&c, &a);
    c.on(&a, &["verify", "s-purged"]);
    c.on(&a, &["checkpoint", "--restore", "s-purged", &seq]);
    assert_eq!(
        std::fs::read_to_string(a.join("f.txt")).unwrap(),
        "before the purge\n"
    );
}

#[test]
fn a_checkpoint_over_the_size_or_file_limit_is_refused_before_restoring() {
    let c = Clones::new();
    let (a, b) = (c.a.root.clone(), c.b.clone());
    c.a.import(&c.a.write_jsonl("h.jsonl", &session_lines("s-huge", 2)));
    for i in 0..5 {
        std::fs::write(a.join(format!("f{i}.bin")), noise(4000, i + 1)).unwrap();
    }
    let seq = c.on(&a, &["checkpoint", "s-huge"]).trim().to_owned();
    c.on(&a, &["push"]);
    c.on(&b, &["fetch"]);
    c.git(&b, &["config", "session.maxCheckpointSize", "10000"]);
    let err = fails_on(&c, &b, &["checkpoint", "--restore", "s-huge", &seq]);
    assert!(err.contains("session.maxCheckpointSize"), "{err}");
    c.git(&b, &["config", "--unset", "session.maxCheckpointSize"]);
    c.git(&b, &["config", "session.maxCheckpointFiles", "3"]);
    let err = fails_on(&c, &b, &["checkpoint", "--restore", "s-huge", &seq]);
    assert!(err.contains("session.maxCheckpointFiles"), "{err}");
    assert!(
        !b.join("f0.bin").exists(),
        "a refused checkpoint wrote files"
    );
    c.git(&b, &["config", "--unset", "session.maxCheckpointFiles"]);
    c.on(&b, &["checkpoint", "--restore", "s-huge", &seq]);
    assert_eq!(sha_of(&a.join("f4.bin")), sha_of(&b.join("f4.bin")));
}

/// Restoring a checkpoint of one file says "1 file differs", not "differ".
#[test]
fn restoring_one_file_reads_right() {
    let repo = Repo::new();
    let mut lines = session_lines("s-one", 2);
    lines[0]["header"]["cwd"] = repo.root.to_str().unwrap().into();
    repo.import(&repo.write_jsonl("one.jsonl", &lines));
    std::fs::write(repo.root.join("note.txt"), "hello\n").unwrap();
    let seq = repo.ok(&["checkpoint", "s-one", "-m", "one file"]);
    std::fs::remove_file(repo.root.join("note.txt")).unwrap();
    let (out, err, code) = run(&repo, &["checkpoint", "--restore", "s-one", seq.trim()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "A  note.txt\n");
    assert!(
        err.contains(": 1 file differs from HEAD (the index is unchanged)"),
        "{err}"
    );
}
