//! Images and web searches across agents: an image in a prompt or a tool
//! result reaches every target in the target's own image form, or as a
//! placeholder naming the artifact with an `image-omitted` line; a Codex
//! `web_search_call` reaches every other target as a note in the history
//! with a `web-search-as-text` line.

use base64::Engine as _;
use git_session_adapters::codex::Codex;
use git_session_adapters::registry::ADAPTERS;
use git_session_adapters::{Adapter, ChangeSet, ParseInput, Records, RenderRequest};
use git_session_schema::{Agent, ArtifactId, Event, Level, SessionHeader, SessionId, kinds};
use serde_json::{Value, json};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\nnot really a png, but unique bytes";

fn event(seq: u64, agent: &Agent, kind: &str, payload: Value) -> Event {
    let actor = match kind {
        kinds::MESSAGE_USER => "user",
        kinds::TOOL_RESULT => "tool",
        _ => "agent",
    };
    Event::new(
        seq,
        format!("2026-12-01T10:00:{seq:02}Z"),
        agent.clone(),
        actor,
        kind,
        Level::History,
        payload,
    )
}

fn source_for(target: &Agent) -> Agent {
    if *target == Agent::Codex {
        Agent::Claude
    } else {
        Agent::Codex
    }
}

/// A prompt with an image, a read call whose result holds one too.
fn image_session(source: &Agent) -> Vec<Event> {
    let id = ArtifactId::of(PNG);
    let image = json!({"media_type": "image/png", "artifact": id.to_string()});
    let mut prompt = event(
        0,
        source,
        kinds::MESSAGE_USER,
        json!({"text": "what is in this picture?", "image": image, "images": [image]}),
    );
    prompt.refs = vec![id.to_ref()];
    let mut result = event(
        2,
        source,
        kinds::TOOL_RESULT,
        json!({"call_id": "call_1", "name": "Read", "output": "the screenshot", "images": [image]}),
    );
    result.refs = vec![id.to_ref()];
    vec![
        prompt,
        event(
            1,
            source,
            kinds::TOOL_CALL,
            json!({"call_id": "call_1", "name": "Read", "arguments": {"file_path": "/w/shot.png"}}),
        ),
        result,
        event(
            3,
            source,
            kinds::MESSAGE_ASSISTANT,
            json!({"text": "a cat"}),
        ),
    ]
}

fn render(
    target: &dyn Adapter,
    events: &[Event],
    artifacts: &[(ArtifactId, Vec<u8>)],
) -> ChangeSet {
    let header = SessionHeader::new(
        SessionId::new("s-media").unwrap(),
        events[0].agent.clone(),
        "2026-12-01T10:00:00Z",
    );
    let native_id = target.new_native_id("0f0f0000-0000-4000-8000-00000000000c", 1_795_000_000_000);
    target
        .render(RenderRequest {
            header: &header,
            events,
            artifacts,
            native_id: &native_id,
            cwd: "/w/repo",
            now: "2026-12-01T11:00:00Z",
        })
        .unwrap_or_else(|e| panic!("{} renders: {e}", target.agent()))
}

fn dump(changes: &ChangeSet) -> String {
    let mut out = String::new();
    for f in changes.files.iter().chain(&changes.appends) {
        out.push_str(&String::from_utf8_lossy(&f.bytes));
        out.push('\n');
    }
    for r in &changes.rows {
        out.push_str(&Value::Object(r.columns.clone()).to_string());
        out.push('\n');
    }
    if let Some(i) = &changes.import {
        out.push_str(&String::from_utf8_lossy(&i.document));
    }
    for _ in 0..3 {
        out = out.replace("\\\\", "\\").replace("\\\"", "\"");
    }
    out
}

/// The form each target writes an image in, for a prompt and a result:
/// `None` where it has none (a placeholder names the artifact instead).
fn image_forms(agent: &Agent) -> (Option<&'static str>, Option<&'static str>) {
    match agent {
        Agent::Claude => (Some("\"type\":\"image\""), Some("\"type\":\"image\"")),
        Agent::Codex => (Some("\"input_image\""), Some("\"input_image\"")),
        Agent::Pi => (
            Some("\"mimeType\":\"image/png\""),
            Some("\"mimeType\":\"image/png\""),
        ),
        Agent::Opencode => (Some("\"type\":\"file\""), None),
        Agent::Hermes => (Some("\"image_url\""), None),
        Agent::Dsh => (None, None),
        other => panic!("no image form known for {other}"),
    }
}

#[test]
fn an_image_reaches_every_target_in_its_form_or_as_a_named_placeholder() {
    let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    let id = ArtifactId::of(PNG);
    for target in ADAPTERS {
        let agent = target.agent();
        let events = image_session(&source_for(&agent));
        let changes = render(*target, &events, &[(id.clone(), PNG.to_vec())]);
        let text = dump(&changes);
        let (prompt, result) = image_forms(&agent);
        let expected = usize::from(prompt.is_some()) + usize::from(result.is_some());
        assert_eq!(
            text.contains(&b64),
            expected > 0,
            "{agent}: image bytes written:\n{text}"
        );
        for form in [prompt, result].into_iter().flatten() {
            assert!(text.contains(form), "{agent}: no {form} in\n{text}");
        }
        let placeholders = text.matches(&format!("[image: {id}]")).count();
        assert_eq!(
            placeholders > 0,
            expected < 2,
            "{agent}: placeholders:\n{text}"
        );
        let omitted: Vec<u64> = changes
            .losses
            .iter()
            .filter(|l| l.starts_with("image-omitted: "))
            .flat_map(|l| git_session_adapters::loss::seqs_of(l))
            .collect();
        let want: Vec<u64> = match (prompt, result) {
            (None, None) => vec![0, 2],
            (Some(_), None) => vec![2],
            _ => vec![],
        };
        assert_eq!(omitted, want, "{agent}: {:?}", changes.losses);
    }
}

#[test]
fn an_image_whose_bytes_are_missing_is_reported_with_its_seq() {
    for target in ADAPTERS {
        let agent = target.agent();
        let events = image_session(&source_for(&agent));
        let changes = render(*target, &events, &[]);
        let seqs: Vec<u64> = changes
            .losses
            .iter()
            .filter(|l| l.starts_with("image-omitted: "))
            .flat_map(|l| git_session_adapters::loss::seqs_of(l))
            .collect();
        assert!(seqs.contains(&0), "{agent}: {:?}", changes.losses);
    }
}

/// Parses rollout lines as Codex.
fn parse_codex(lines: &[Value]) -> git_session_adapters::Parsed {
    let mut bytes = Vec::new();
    for l in lines {
        bytes.extend(serde_json::to_vec(l).unwrap());
        bytes.push(b'\n');
    }
    Codex.parse(ParseInput {
        records: Records::Lines {
            bytes: &bytes,
            first_line: 0,
            offset: 0,
        },
        next_seq: 0,
        state: None,
        source: "sessions/2026/12/01/rollout-2026-12-01T10-00-00-01a22641-0000-7000-8000-000000000009.jsonl",
        session: None,
        sidecar: None,
        memo: Default::default(),
    })
}

fn codex_lines() -> Vec<Value> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    vec![
        json!({"timestamp": "2026-12-01T10:00:00.000Z", "type": "session_meta",
               "payload": {"id": "01a22641-0000-7000-8000-000000000009", "cwd": "/w/repo",
                           "timestamp": "2026-12-01T10:00:00.000Z", "cli_version": "0.171.0"}}),
        json!({"timestamp": "2026-12-01T10:00:01.000Z", "type": "response_item",
               "payload": {"type": "message", "role": "user", "content": [
                   {"type": "input_text", "text": "what is the weather in Oslo?"},
                   {"type": "input_image", "image_url": format!("data:image/png;base64,{b64}")}]}}),
        json!({"timestamp": "2026-12-01T10:00:02.000Z", "type": "response_item",
               "payload": {"type": "web_search_call", "id": "ws_1", "status": "completed",
                           "action": {"type": "search", "query": "weather Oslo today"}}}),
        json!({"timestamp": "2026-12-01T10:00:03.000Z", "type": "response_item",
               "payload": {"type": "message", "role": "assistant", "content": [
                   {"type": "output_text", "text": "Rainy, 4 degrees."}]}}),
    ]
}

#[test]
fn codex_parses_prompt_images_into_artifacts_and_web_searches_into_their_query() {
    let parsed = parse_codex(&codex_lines());
    let id = ArtifactId::of(PNG);
    assert_eq!(parsed.artifacts, vec![(id.clone(), PNG.to_vec())]);
    let prompt = parsed
        .events
        .iter()
        .find(|e| e.kind == kinds::MESSAGE_USER)
        .unwrap();
    assert_eq!(prompt.refs, vec![id.to_ref()]);
    assert_eq!(prompt.payload["image"]["media_type"], "image/png");
    assert_eq!(prompt.payload["text"], "what is the weather in Oslo?");
    let search = parsed
        .events
        .iter()
        .find(|e| e.payload["codex"] == "response_item.web_search_call")
        .unwrap();
    assert_eq!(
        search.payload["web_search"],
        json!({"action": "search", "query": "weather Oslo today", "status": "completed"})
    );
}

#[test]
fn a_codex_web_search_reaches_every_other_target_as_a_note_with_a_loss_line() {
    let parsed = parse_codex(&codex_lines());
    for target in ADAPTERS {
        let agent = target.agent();
        if agent == Agent::Codex {
            continue;
        }
        let changes = render(*target, &parsed.events, &parsed.artifacts);
        let text = dump(&changes);
        assert!(
            text.contains("codex ran a web search (search): query \"weather Oslo today\""),
            "{agent}: no note in\n{text}"
        );
        let seq = parsed
            .events
            .iter()
            .find(|e| e.payload["codex"] == "response_item.web_search_call")
            .unwrap()
            .seq;
        assert!(
            changes
                .losses
                .iter()
                .any(|l| l.starts_with(&format!("web-search-as-text: seq {seq}: "))),
            "{agent}: {:?}",
            changes.losses
        );
        // The prompt's image went along where the target holds images.
        let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
        assert_eq!(
            text.contains(&b64),
            image_forms(&agent).0.is_some(),
            "{agent}:\n{text}"
        );
    }
}

#[test]
fn codex_writes_the_web_search_back_as_it_was() {
    let lines = codex_lines();
    let parsed = parse_codex(&lines);
    let changes = render(&Codex, &parsed.events, &parsed.artifacts);
    let text = String::from_utf8_lossy(&changes.files[0].bytes).into_owned();
    assert!(text.contains("\"web_search_call\""), "{text}");
    assert!(text.contains("\"input_image\""), "{text}");
    assert!(changes.losses.is_empty(), "{:?}", changes.losses);
}
