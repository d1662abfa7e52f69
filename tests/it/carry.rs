//! What a handoff carries, through the binary: a failed command stays
//! failed across claude -> codex -> claude, and `--history` bounds what the
//! target gets after the brief.

use std::path::Path;

use git_session_adapters::{Adapter, ParseInput, Records, RenderRequest};
use git_session_schema::{Agent, SessionHeader, SessionId, kinds};
use serde_json::{Value, json};

use crate::support::*;

fn line(seq: u64, kind: &str, actor: &str, payload: Value) -> Value {
    json!({"seq": seq, "ts": format!("2026-01-01T00:00:{seq:02}Z"), "agent": "claude",
           "actor": actor, "type": kind, "level": 0, "payload": payload,
           "origin": {"agent": "claude", "native_id": format!("u-{seq}"), "native_seq": seq}})
}

/// A Claude session whose `cargo test` failed with exit code 101, then
/// passed after a fix, and a second failing command left unfixed.
fn failing_session(repo: &Repo, id: &str) {
    let mut lines = vec![header(id)];
    lines.extend([
        line(0, kinds::MESSAGE_USER, "user", json!({"text": "make the tests pass"})),
        line(1, kinds::MESSAGE_ASSISTANT, "agent:claude", json!({"text": "Running them."})),
        line(
            2,
            kinds::TOOL_CALL,
            "agent:claude",
            json!({"call_id": "toolu_1", "name": "Bash",
                   "arguments": {"command": "cargo clippy", "description": "Lint"}}),
        ),
        line(
            3,
            kinds::TOOL_RESULT,
            "tool",
            json!({"call_id": "toolu_1", "output": "Exit code 101\nerror: unused variable", "is_error": true}),
        ),
        line(
            4,
            kinds::COMMAND_RUN,
            "agent:claude",
            json!({"call_id": "toolu_1", "command": "cargo clippy", "exit_code": 101, "is_error": true,
                   "output_tail": "error: unused variable"}),
        ),
        line(5, kinds::MESSAGE_ASSISTANT, "agent:claude", json!({"text": "Clippy fails."})),
    ]);
    repo.import(&repo.write_jsonl("failing.jsonl", &lines));
}

fn parse(adapter: &dyn Adapter, bytes: &[u8], source: &str) -> Vec<git_session_schema::Event> {
    let parsed = adapter.parse(ParseInput {
        records: Records::Lines {
            bytes,
            first_line: 0,
            offset: 0,
        },
        next_seq: 0,
        state: None,
        source,
        session: None,
        sidecar: None,
        memo: Default::default(),
    });
    assert!(parsed.refused.is_none(), "{:?}", parsed.refused);
    parsed.events
}

#[test]
fn a_failed_command_stays_failed_across_claude_codex_claude() {
    let repo = Repo::new();
    failing_session(&repo, "s-fail");
    let home = repo.outside("codex-home");
    let out = repo.ok(&[
        "handoff",
        "s-fail",
        "--to",
        "codex",
        "--home",
        home.to_str().unwrap(),
        "--json",
    ]);
    let report: Value = serde_json::from_str(&out).unwrap();
    let files = codex_rollouts(&home);
    assert_eq!(files.len(), 1);
    let bytes = std::fs::read(&files[0]).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    // Codex has no failure field: its own exec words say it.
    assert!(text.contains("Process exited with code 101"), "{text}");
    // Claude's Bash description has no place in exec_command: a note the
    // model sees, and a loss line naming the call's seq in the session.
    assert!(text.contains("description=Lint"), "{text}");
    let losses: Vec<&str> = report["losses"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        losses
            .iter()
            .any(|l| l.starts_with("argument-dropped: seq 2: claude argument \"description\"")),
        "{losses:?}"
    );

    // Codex reads the failure back, and so does Claude after it.
    let codex = git_session_adapters::codex::Codex;
    let events = parse(&codex, &bytes, "sessions/x.jsonl");
    let result = events
        .iter()
        .find(|e| e.kind == kinds::TOOL_RESULT)
        .unwrap();
    assert_eq!(result.payload["is_error"], true, "{:?}", result.payload);
    let claude = git_session_adapters::claude::Claude;
    let header = SessionHeader::new(
        SessionId::new("s-codex").unwrap(),
        Agent::Codex,
        "2026-01-01T00:00:00Z",
    );
    let back = claude
        .render(RenderRequest {
            header: &header,
            events: &events,
            artifacts: &[],
            native_id: "0f0f0000-0000-4000-8000-00000000000b",
            cwd: "/w/repo",
            now: "2026-01-02T00:00:00Z",
        })
        .unwrap();
    let file = &back.files[0];
    let events = parse(&claude, &file.bytes, file.path.to_str().unwrap());
    let header = SessionHeader::new(
        SessionId::new("s-back").unwrap(),
        Agent::Claude,
        "2026-01-01T00:00:00Z",
    );
    let compiled = git_session_compiler::compile(
        &header,
        &events,
        &git_session_compiler::Request {
            target: Agent::Claude,
            budget: 8000,
            format: git_session_compiler::Format::FirstMessage,
            git: Default::default(),
            tokenizer: None,
        },
    )
    .unwrap();
    assert!(
        compiled.text.contains("`cargo clippy` (exit 101"),
        "the brief after claude -> codex -> claude:\n{}",
        compiled.text
    );
}

/// Returns the user and assistant texts of the one rollout under `home`.
fn messages(home: &Path) -> Vec<String> {
    let files = codex_rollouts(home);
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "response_item" && v["payload"]["type"] == "message")
        .map(|v| {
            v["payload"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[test]
fn history_none_starts_the_target_with_the_brief_alone_and_tail_keeps_the_end() {
    let repo = Repo::new();
    failing_session(&repo, "s-hist");
    let handoff = |history: &str| {
        let home = repo.outside(&format!("home-{}", history.replace(':', "-")));
        let out = repo.ok(&[
            "handoff",
            "s-hist",
            "--to",
            "codex",
            "--home",
            home.to_str().unwrap(),
            "--history",
            history,
            "--json",
        ]);
        let report: Value = serde_json::from_str(&out).unwrap();
        (messages(&home), report)
    };
    let (none, report) = handoff("none");
    assert_eq!(none.len(), 1, "{none:?}");
    assert!(
        none[0].contains("make the tests pass"),
        "the brief: {none:?}"
    );
    assert!(
        report["losses"]
            .to_string()
            .contains("history-omitted: seqs 0-5 (6 events)"),
        "{}",
        report["losses"]
    );

    // The last 2 conversation events are the result and the last message;
    // the result brings its call along.
    let (tail, report) = handoff("tail:2");
    assert_eq!(tail.len(), 2, "brief + the last message: {tail:?}");
    assert_eq!(tail[1], "Clippy fails.");
    assert!(
        report["losses"]
            .to_string()
            .contains("history-omitted: seqs 0-1 (2 events)"),
        "{}",
        report["losses"]
    );
    let (full, report) = handoff("full");
    assert_eq!(full.len(), 4, "brief + 3 messages: {full:?}");
    assert!(!report["losses"].to_string().contains("history-omitted"));

    let err = repo.fails(
        &["handoff", "s-hist", "--to", "codex", "--history", "tail:0"],
        2,
    );
    assert!(err.contains("full, none or tail:N"), "{err}");
}
