//! The loss report through the binary: a captured Codex session with an
//! image in a prompt and a web search, handed off to Claude Code, arrives
//! with the image as an image block and the search as a note, and the
//! report names the search's seq (`web-search-as-text`).

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::*;

const THREAD: &str = "01a22641-0000-7000-8000-00000000c0de";

/// Writes a Codex rollout run in the repository: a prompt with an image,
/// a web search, an answer.
fn codex_session(repo: &Repo, image: &[u8]) -> std::path::PathBuf {
    let home = repo.outside("codex-home");
    let dir = home.join("sessions/2026/12/01");
    std::fs::create_dir_all(&dir).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(image);
    let cwd = repo.root.to_str().unwrap();
    let lines = [
        json!({"timestamp": "2026-12-01T10:00:00.000Z", "type": "session_meta",
               "payload": {"id": THREAD, "cwd": cwd, "timestamp": "2026-12-01T10:00:00.000Z",
                           "originator": "codex_cli_rs", "cli_version": "0.171.0", "source": "cli"}}),
        json!({"timestamp": "2026-12-01T10:00:01.000Z", "type": "response_item",
               "payload": {"type": "message", "role": "user", "content": [
                   {"type": "input_text", "text": "What does this chart show, and is it current?"},
                   {"type": "input_image", "image_url": format!("data:image/png;base64,{b64}")}]}}),
        json!({"timestamp": "2026-12-01T10:00:02.000Z", "type": "response_item",
               "payload": {"type": "web_search_call", "id": "ws_1", "status": "completed",
                           "action": {"type": "search", "query": "rust release schedule 2026"}}}),
        json!({"timestamp": "2026-12-01T10:00:03.000Z", "type": "response_item",
               "payload": {"type": "message", "role": "assistant", "content": [
                   {"type": "output_text", "text": "It shows the release train; it is current."}]}}),
    ];
    let mut body = String::new();
    for l in &lines {
        body.push_str(&l.to_string());
        body.push('\n');
    }
    std::fs::write(
        dir.join(format!("rollout-2026-12-01T10-00-00-{THREAD}.jsonl")),
        body,
    )
    .unwrap();
    home
}

/// Returns the one transcript under a Claude home.
fn transcript(home: &std::path::Path) -> Vec<Value> {
    let mut stack = vec![home.join(".claude/projects")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "jsonl") {
                return std::fs::read_to_string(path)
                    .unwrap()
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
            }
        }
    }
    panic!("no transcript under {}", home.display());
}

#[test]
fn a_codex_image_and_web_search_reach_claude_and_the_report_names_the_search() {
    let repo = Repo::new();
    let image = b"\x89PNG\r\n\x1a\nchart bytes for the handoff test";
    let codex_home = codex_session(&repo, image);
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
    let events = repo.events(THREAD);
    let search_seq = events
        .iter()
        .find(|e| e["payload"]["codex"] == "response_item.web_search_call")
        .map(|e| e["seq"].as_u64().unwrap())
        .expect("the web search was captured");
    assert_eq!(
        events[search_seq as usize]["payload"]["web_search"]["query"],
        "rust release schedule 2026"
    );

    let claude_home = repo.outside("claude-home");
    let out = repo
        .session()
        .args([
            "handoff",
            THREAD,
            "--to",
            "claude",
            "--home",
            claude_home.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let losses: Vec<&str> = report["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        losses
            .iter()
            .any(|l| l.starts_with(&format!("web-search-as-text: seq {search_seq}: "))),
        "{losses:?}"
    );
    assert!(
        !losses.iter().any(|l| l.starts_with("image-omitted")),
        "{losses:?}"
    );

    let lines = transcript(&claude_home);
    let b64 = base64::engine::general_purpose::STANDARD.encode(image);
    let blocks: Vec<&Value> = lines
        .iter()
        .filter_map(|l| l["message"]["content"].as_array())
        .flatten()
        .collect();
    assert!(
        blocks
            .iter()
            .any(|b| b["type"] == "image" && b["source"]["data"] == b64.as_str()),
        "no image block: {lines:?}"
    );
    assert!(
        blocks.iter().any(|b| b["type"] == "text"
            && b["text"].as_str().is_some_and(
                |t| t.contains("web search (search): query \"rust release schedule 2026\"")
            )),
        "no web search note: {lines:?}"
    );
}
