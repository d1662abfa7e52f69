//! Tests of the Claude Code adapter beyond the conformance suite
//! (`tests/it/conformance.rs` checks every fixture case under
//! `fixtures/claude/<case>/`: goldens `canonical.jsonl`,
//! `canonical.<agent-id>.jsonl` and `facts.json`, slicing, the L0 and L2
//! round trips, mutations): a render into another directory, foreign
//! sessions, forks, numbering, bad input, streaming.
//!
//! Each case has `native/` (a copy of a store root: `projects/<dir>/...`)
//! and a `CASE.md`.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use git_session_adapters::claude::{Claude, project_dir_name};
use git_session_adapters::{
    Adapter, FileSink, ParseInput, ParseMemo, Parsed, Records, RenderHead, RenderRequest,
};
use git_session_schema::{Agent, ArtifactId, Event, Level, SessionHeader, SessionId, kinds};
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/claude")
}

/// Returns every file under `dir`, relative to it, sorted.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("fixture dir is readable") {
            let path = entry.expect("fixture entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(dir).expect("under dir").to_path_buf());
            }
        }
    }
    out.sort();
    out
}

struct Transcript {
    case: String,
    source: String,
    bytes: Vec<u8>,
}

fn transcripts() -> Vec<Transcript> {
    let mut out = Vec::new();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixtures/claude exists")
        .map(|e| e.expect("case entry").path())
        .filter(|p| p.join("native").is_dir())
        .collect();
    cases.sort();
    for case in cases {
        let native = case.join("native");
        for rel in walk(&native) {
            if !Claude.is_session_file(&rel) {
                continue;
            }
            out.push(Transcript {
                case: case
                    .file_name()
                    .and_then(|s| s.to_str())
                    .expect("case name")
                    .to_owned(),
                source: rel.to_str().expect("utf-8 path").replace('\\', "/"),
                bytes: std::fs::read(native.join(&rel)).expect("fixture readable"),
            });
        }
    }
    assert!(
        out.len() >= 8,
        "expected the fixture cases, found {}",
        out.len()
    );
    out
}

fn parse(source: &str, bytes: &[u8]) -> Parsed {
    Claude.parse(ParseInput {
        records: Records::lines(bytes, 0, 0),
        next_seq: 0,
        state: None,
        source,
        session: None,
        sidecar: None,
        memo: Default::default(),
    })
}

fn header(parsed: &Parsed) -> SessionHeader {
    let mut h = SessionHeader::new(
        SessionId::new("fixture-session").expect("valid id"),
        Agent::Claude,
        parsed.session.created.clone().unwrap_or_default(),
    );
    h.native_id = parsed.session.native_id.clone();
    h.cwd = parsed.session.cwd.clone();
    h.title = parsed.session.title.clone();
    h
}

/// Returns the JSON objects of a transcript, skipping what the client
/// skips too (blank and malformed lines).
fn json_lines(bytes: &[u8]) -> Vec<Value> {
    bytes
        .split(|&b| b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter(Value::is_object)
        .collect()
}

#[test]
fn render_into_another_directory_moves_project_dir_and_cwd() {
    for t in transcripts() {
        let parsed = parse(&t.source, &t.bytes);
        let native_id = parsed.session.native_id.clone().expect("native id");
        let old = parsed
            .session
            .cwd
            .clone()
            .unwrap_or_else(|| "/nowhere".to_owned());
        let h = header(&parsed);
        let change = Claude
            .render(RenderRequest {
                header: &h,
                events: &parsed.events,
                artifacts: &parsed.artifacts,
                native_id: &native_id,
                cwd: "/srv/elsewhere/checkout",
                now: "2026-11-29T10:00:00Z",
            })
            .expect("renders");
        let file = &change.files[0];
        assert!(
            file.path.starts_with(
                Path::new("projects").join(project_dir_name("/srv/elsewhere/checkout"))
            ),
            "{}: {:?}",
            t.source,
            file.path
        );
        for line in json_lines(&file.bytes) {
            if let Some(cwd) = line.get("cwd").and_then(Value::as_str) {
                assert!(
                    !cwd.starts_with(&old),
                    "{}: cwd {cwd} not remapped",
                    t.source
                );
                assert!(
                    cwd.starts_with("/srv/elsewhere/checkout"),
                    "{}: cwd {cwd}",
                    t.source
                );
            }
        }
    }
}

fn render_events(
    h: &SessionHeader,
    events: &[Event],
    native_id: &str,
) -> git_session_adapters::ChangeSet {
    Claude
        .render(RenderRequest {
            header: h,
            events,
            artifacts: &[],
            native_id,
            cwd: "/work/repo",
            now: "2026-11-29T10:00:00Z",
        })
        .expect("renders")
}

/// Returns a session as another agent would have captured it: no Claude
/// records, tool ids Claude would not write, reasoning, a derived event.
fn foreign_events() -> Vec<Event> {
    let mut events = Vec::new();
    let mut push = |kind: &str, actor: &str, payload: Value| {
        let seq = events.len() as u64;
        let ts = format!("2026-11-29T09:00:{seq:02}Z");
        events.push(Event::new(
            seq,
            ts,
            Agent::Codex,
            actor,
            kind,
            Level::History,
            payload,
        ));
    };
    push(
        kinds::MESSAGE_USER,
        "user",
        json!({"text": "Q1: list the files"}),
    );
    push(
        kinds::MESSAGE_THINKING,
        "agent:codex",
        json!({"text": "private reasoning"}),
    );
    push(
        kinds::MESSAGE_ASSISTANT,
        "agent:codex",
        json!({"text": "A1: running ls"}),
    );
    push(
        kinds::TOOL_CALL,
        "agent:codex",
        json!({"call_id": "call.1", "name": "shell", "arguments": "{\"command\":[\"ls\"]}"}),
    );
    push(
        kinds::TOOL_RESULT,
        "tool",
        json!({"call_id": "call.1", "output": "README.md", "is_error": false}),
    );
    push(
        kinds::COMMAND_RUN,
        "tool",
        json!({"command": "ls", "exit_code": 0}),
    );
    // The same foreign id again, for a different call.
    push(
        kinds::TOOL_CALL,
        "agent:codex",
        json!({"call_id": "call.1", "name": "shell", "arguments": {"command": ["pwd"]}}),
    );
    push(
        kinds::TOOL_RESULT,
        "tool",
        json!({"call_id": "call.1", "output": "/work/repo", "is_error": true}),
    );
    push(
        kinds::MESSAGE_ASSISTANT,
        "agent:codex",
        json!({"text": "A2: done"}),
    );
    push(
        kinds::TOOL_CALL,
        "agent:codex",
        json!({"call_id": "call_2", "name": "shell", "arguments": {}}),
    );
    push(kinds::MESSAGE_USER, "user", json!({"text": "Q2: and now?"}));
    push(
        kinds::DECISION,
        "agent:codex",
        json!({"conclusion": "stop"}),
    );
    events
}

#[test]
fn foreign_session_renders_a_minimal_linked_transcript() {
    let mut h = SessionHeader::new(
        SessionId::new("s1").expect("valid"),
        Agent::Codex,
        "2026-11-29T09:00:00Z",
    );
    h.title = Some("handed over".into());
    let id = "7d6c5b4a-3928-4716-a5b4-c3d2e1f0a9b8";
    let change = render_events(&h, &foreign_events(), id);
    assert_eq!(
        change.files[0].path,
        PathBuf::from(format!("projects/-work-repo/{id}.jsonl"))
    );
    assert_eq!(change.resume_command, format!("claude --resume {id}"));
    let bytes = &change.files[0].bytes;
    assert!(bytes.ends_with(b"\n"));
    let lines = json_lines(bytes);
    assert_eq!(
        lines.len(),
        bytes.iter().filter(|b| **b == b'\n').count(),
        "one JSON object per line"
    );

    // sessionId everywhere, and an unbroken chain from a single root.
    let mut previous: Option<String> = None;
    for line in &lines {
        assert_eq!(line["sessionId"], json!(id));
        if let Some(uuid) = line.get("uuid").and_then(Value::as_str) {
            assert_eq!(
                line["parentUuid"].as_str().map(str::to_owned),
                previous,
                "{line}"
            );
            previous = Some(uuid.to_owned());
        }
    }
    // Tool ids are unique, API-safe, and every tool_use is answered.
    let blocks: Vec<&Value> = lines
        .iter()
        .filter_map(|l| l["message"]["content"].as_array())
        .flatten()
        .collect();
    let uses: Vec<&str> = blocks
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .filter_map(|b| b["id"].as_str())
        .collect();
    let results: Vec<&str> = blocks
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .filter_map(|b| b["tool_use_id"].as_str())
        .collect();
    assert_eq!(uses.len(), 3);
    let unique: std::collections::BTreeSet<&str> = uses.iter().copied().collect();
    assert_eq!(unique.len(), uses.len(), "{uses:?}");
    assert!(uses.iter().all(|u| {
        u.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }));
    assert_eq!(results, uses, "each call answered, in order");
    assert!(
        !blocks.iter().any(|b| b["type"] == "thinking"),
        "foreign reasoning is not sent as thinking"
    );
    assert_eq!(
        lines.last().map(|l| l["customTitle"].clone()),
        Some(json!("handed over"))
    );
    assert!(
        change.losses.iter().any(|l| l.contains("message.thinking")),
        "{:?}",
        change.losses
    );
    assert!(
        change.losses.iter().any(|l| l.contains("decision")),
        "{:?}",
        change.losses
    );
    // A derived event is carried by its call and result, and said so
    // with its seq, like every event not written on its own.
    assert!(
        change
            .losses
            .iter()
            .filter(|l| l.contains("command.run"))
            .all(|l| l.starts_with("derived-event-folded: seq")),
        "{:?}",
        change.losses
    );

    // L0: what Claude gets back parses to the same conversation.
    let parsed = parse(&change.files[0].path.to_string_lossy(), bytes);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let texts = |events: &[Event]| -> Vec<(String, Value)> {
        events
            .iter()
            .filter_map(|e| {
                let p = &e.payload;
                let body = match e.kind.as_str() {
                    kinds::MESSAGE_USER | kinds::MESSAGE_ASSISTANT => p["text"].clone(),
                    // A shell call becomes Claude Code's Bash: the command is
                    // what must survive, not the other agent's tool shape.
                    kinds::TOOL_CALL => match p["name"]
                        .as_str()
                        .zip(Some(&p["arguments"]))
                        .and_then(|(n, a)| {
                            let a = match a {
                                Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
                                other => other.clone(),
                            };
                            git_session_adapters::shell_command(n, &a)
                        }) {
                        Some(cmd) => json!(["shell command", cmd]),
                        None => json!([p["name"], p["arguments"]]),
                    },
                    kinds::TOOL_RESULT => json!([p["output"], p["is_error"]]),
                    _ => return None,
                };
                Some((e.kind.clone(), body))
            })
            .collect()
    };
    let mut expected = texts(&foreign_events());
    // The call left open before the next prompt gets a synthetic answer.
    expected.insert(
        8,
        (
            kinds::TOOL_RESULT.to_owned(),
            json!(["[no result was recorded for this call]", true]),
        ),
    );
    assert_eq!(texts(&parsed.events), expected);
    let names: Vec<&str> = parsed
        .events
        .iter()
        .filter(|e| e.kind == kinds::TOOL_CALL)
        .filter_map(|e| e.payload["name"].as_str())
        .collect();
    // Shell calls with a command become Bash; one without stays as it was.
    assert_eq!(names, ["Bash", "Bash", "shell"]);
}

#[test]
fn fork_renders_under_the_new_id() {
    let fixture = fixtures().join("roundtrip/native/projects/-tmp-oracle-sample-claude-project");
    let source =
        "projects/-tmp-oracle-sample-claude-project/d05046d2-74b1-4451-90dc-37fbd42c25e6.jsonl";
    let bytes =
        std::fs::read(fixture.join("d05046d2-74b1-4451-90dc-37fbd42c25e6.jsonl")).expect("fixture");
    let parsed = parse(source, &bytes);
    let fork = "11111111-2222-4333-8444-555555555555";
    let change = render_events(&header(&parsed), &parsed.events, fork);
    assert_eq!(
        change.files[0].path,
        PathBuf::from(format!("projects/-work-repo/{fork}.jsonl"))
    );
    for line in json_lines(&change.files[0].bytes) {
        assert_eq!(line["sessionId"], json!(fork));
    }
}

#[test]
fn seqs_are_contiguous_from_next_seq_and_parents_point_back() {
    let fixture = fixtures().join("crafted-rich/native/projects/-home-dev-proj");
    let name = "5f0c1a2b-3c4d-4e5f-8a6b-7c8d9e0f1a2b.jsonl";
    let bytes = std::fs::read(fixture.join(name)).expect("fixture");
    let parsed = Claude.parse(ParseInput {
        records: Records::lines(&bytes, 40, 0),
        next_seq: 100,
        state: None,
        source: &format!("projects/-home-dev-proj/{name}"),
        session: None,
        sidecar: None,
        memo: Default::default(),
    });
    for (i, e) in parsed.events.iter().enumerate() {
        assert_eq!(e.seq, 100 + i as u64);
        if let Some(p) = e.parent_seq {
            assert!((100..e.seq).contains(&p), "event {} parent {p}", e.seq);
        }
        let line = e
            .origin
            .as_ref()
            .and_then(|o| o.native_seq)
            .expect("native line");
        assert!(line >= 40, "line numbers start at first_line");
    }
    assert_eq!(parsed.warnings.len(), 1);
    assert_eq!(
        parsed.warnings[0].line, 46,
        "the bad line is named by its number in the file"
    );
}

#[test]
fn bad_lines_are_warnings_and_the_rest_is_kept() {
    let bytes = b"{\"type\":\"user\",\"uuid\":\"u1\",\"parentUuid\":null,\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n[1,2]\n{\"type\":\"user\",\"message\":{\"content\":7}}\n\n{\"type\":\"assistant\",\"uuid\":5}\n{\"type\":\"assistant\",\"uuid\":\"a1\",\"parentUuid\":\"u1\",\"message\":{\"role\":\"assistant\",\"content\":\"yo\"}}\n";
    let parsed = parse("projects/-p/s.jsonl", bytes);
    let lines: Vec<u64> = parsed.warnings.iter().map(|w| w.line).collect();
    assert_eq!(lines, [1, 4], "{:?}", parsed.warnings);
    let kinds: Vec<&str> = parsed.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            kinds::MESSAGE_USER,
            kinds::META,
            kinds::META,
            kinds::META,
            kinds::MESSAGE_ASSISTANT
        ]
    );
    // The line that is not an object is kept, marked unparsed.
    assert_eq!(parsed.events[1].payload["unparsed"], "[1,2]");
    assert_eq!(parsed.events[4].parent_seq, Some(0));
}

#[test]
fn a_session_without_messages_is_not_rendered() {
    let h = SessionHeader::new(
        SessionId::new("s1").expect("valid"),
        Agent::Codex,
        "2026-11-29T09:00:00Z",
    );
    let events = vec![Event::new(
        0,
        "2026-11-29T09:00:00Z",
        Agent::Codex,
        "system",
        kinds::META,
        Level::Native,
        json!({}),
    )];
    let err = Claude
        .render(RenderRequest {
            header: &h,
            events: &events,
            artifacts: &[],
            native_id: "7d6c5b4a-3928-4716-a5b4-c3d2e1f0a9b8",
            cwd: "/w",
            now: "2026-11-29T10:00:00Z",
        })
        .expect_err("nothing to write");
    assert!(matches!(err, git_session_adapters::RenderError::Empty(_)));
}

#[test]
fn a_session_id_the_client_would_refuse_is_an_error() {
    let h = SessionHeader::new(
        SessionId::new("s1").expect("valid"),
        Agent::Codex,
        "2026-11-29T09:00:00Z",
    );
    let err = Claude
        .render(RenderRequest {
            header: &h,
            events: &foreign_events(),
            artifacts: &[],
            native_id: "my-crafted-session",
            cwd: "/w",
            now: "2026-11-29T10:00:00Z",
        })
        .expect_err("not a UUID");
    assert!(
        matches!(err, git_session_adapters::RenderError::Request(_)),
        "{err}"
    );
}

#[test]
fn render_into_a_subdirectory_of_the_old_cwd_moves_each_cwd_once() {
    let fixture = fixtures().join("crafted-rich/native/projects/-home-dev-proj");
    let name = "5f0c1a2b-3c4d-4e5f-8a6b-7c8d9e0f1a2b.jsonl";
    let bytes = std::fs::read(fixture.join(name)).expect("fixture");
    let parsed = parse(&format!("projects/-home-dev-proj/{name}"), &bytes);
    let mut events = parsed.events.clone();
    // A message appended by another agent after the Claude part.
    let seq = events.len() as u64;
    events.push(Event::new(
        seq,
        "2026-11-29T09:00:00Z",
        Agent::Codex,
        "user",
        kinds::MESSAGE_USER,
        Level::History,
        json!({"text": "more"}),
    ));
    let change = Claude
        .render(RenderRequest {
            header: &header(&parsed),
            events: &events,
            artifacts: &parsed.artifacts,
            native_id: "5f0c1a2b-3c4d-4e5f-8a6b-7c8d9e0f1a2b",
            cwd: "/home/dev/proj/sub",
            now: "2026-11-29T10:00:00Z",
        })
        .expect("renders");
    let lines = json_lines(&change.files[0].bytes);
    for line in &lines {
        if let Some(cwd) = line.get("cwd") {
            assert_eq!(cwd, &json!("/home/dev/proj/sub"));
        }
    }
    let last = lines
        .iter()
        .rev()
        .find(|l| l.get("uuid").is_some())
        .expect("a chain line");
    assert_eq!(last["message"]["content"], json!("more"));
    let leaf = lines
        .iter()
        .rev()
        .filter(|l| l.get("uuid").is_some())
        .nth(1)
        .expect("the Claude leaf");
    assert_eq!(
        last["parentUuid"], leaf["uuid"],
        "appended message continues the Claude chain"
    );
}

/// Receives a streamed render and counts the bytes it has been sent, which
/// the event iterator below reads at every pull.
struct CountingSink {
    received: Rc<Cell<usize>>,
    bytes: Vec<u8>,
    begun: usize,
}

impl FileSink for CountingSink {
    fn begin(&mut self, _path: &Path) -> Result<(), String> {
        self.begun += 1;
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.bytes.extend_from_slice(bytes);
        self.received.set(self.bytes.len());
        Ok(())
    }
}

#[test]
fn render_streams_lines_to_the_sink_while_events_are_still_coming() {
    let t = transcripts()
        .into_iter()
        .find(|t| t.case == "roundtrip")
        .expect("the roundtrip case");
    let parsed = parse(&t.source, &t.bytes);
    let native_id = parsed.session.native_id.clone().expect("native id");
    let cwd = parsed.session.cwd.clone().expect("cwd");
    let h = header(&parsed);
    let one = Claude
        .render(RenderRequest {
            header: &h,
            events: &parsed.events,
            artifacts: &parsed.artifacts,
            native_id: &native_id,
            cwd: &cwd,
            now: "2026-11-29T10:00:00Z",
        })
        .expect("renders");
    let copy_bytes = one.files[0].bytes.len();

    // The session 40 times over (about 6 MB of transcript), generated lazily
    // so the test holds one copy; repeated ids only make the guards rename.
    const COPIES: usize = 40;
    let per_copy = parsed.events.len();
    let received = Rc::new(Cell::new(0usize));
    let mut lagging = Vec::new();
    let seen = Rc::clone(&received);
    let mut events = (0..COPIES * per_copy).map(|i| {
        let (copy, k) = (i / per_copy, i % per_copy);
        if k == 0 && copy > 0 {
            // Every earlier copy is complete, so its lines must be out, but
            // for what the render may hold back: one line and a buffer
            // (64 KiB); 256 KiB leaves room for the longest line.
            let due = (copy - 1) * copy_bytes;
            if seen.get() + 256 * 1024 < due {
                lagging.push((copy, seen.get(), due));
            }
        }
        let mut e = parsed.events[k].clone();
        e.seq = i as u64;
        e
    });
    let lookup = |id: &ArtifactId| {
        parsed
            .artifacts
            .iter()
            .find(|(a, _)| a == id)
            .map(|(_, b)| b.clone())
    };
    let head = RenderHead {
        header: &h,
        artifact: &lookup,
        native_id: &native_id,
        cwd: &cwd,
        now: "2026-11-29T10:00:00Z",
    };
    let mut sink = CountingSink {
        received: Rc::clone(&received),
        bytes: Vec::new(),
        begun: 0,
    };
    let change = Claude
        .render_to(head, &mut events, &mut sink)
        .expect("renders");
    drop(events);
    assert!(
        lagging.is_empty(),
        "lines held back until later events were pulled (copy, bytes sent, bytes due): {lagging:?}"
    );
    assert_eq!(sink.begun, 1);
    assert!(
        change.files.is_empty(),
        "a streaming render sends its files"
    );
    let lines = json_lines(&sink.bytes);
    assert_eq!(lines.len(), COPIES * json_lines(&one.files[0].bytes).len());
    // The first copy is written exactly as a render of the session alone.
    assert_eq!(&sink.bytes[..copy_bytes], &one.files[0].bytes[..]);
}

/// Fails every write, like a full disk.
struct FailingSink;

impl FileSink for FailingSink {
    fn begin(&mut self, _path: &Path) -> Result<(), String> {
        Ok(())
    }

    fn write(&mut self, _bytes: &[u8]) -> Result<(), String> {
        Err("disk full".into())
    }
}

#[test]
fn a_failing_sink_fails_the_render() {
    let h = SessionHeader::new(
        SessionId::new("s1").expect("valid"),
        Agent::Codex,
        "2026-11-29T09:00:00Z",
    );
    let lookup = |_: &ArtifactId| None;
    let head = RenderHead {
        header: &h,
        artifact: &lookup,
        native_id: "7d6c5b4a-3928-4716-a5b4-c3d2e1f0a9b8",
        cwd: "/w",
        now: "2026-11-29T10:00:00Z",
    };
    let err = Claude
        .render_to(head, &mut foreign_events().into_iter(), &mut FailingSink)
        .expect_err("the sink failed");
    assert!(
        matches!(&err, git_session_adapters::RenderError::Sink(m) if m == "disk full"),
        "{err}"
    );
}

#[test]
fn a_foreign_call_id_used_three_times_gets_three_distinct_tool_ids() {
    let h = SessionHeader::new(
        SessionId::new("s1").expect("valid"),
        Agent::Codex,
        "2026-11-29T09:00:00Z",
    );
    let mut events = Vec::new();
    for round in 0..3u64 {
        let ts = format!("2026-11-29T09:00:0{round}Z");
        for (kind, actor, payload) in [
            (kinds::MESSAGE_USER, "user", json!({"text": "go"})),
            (
                kinds::TOOL_CALL,
                "agent:codex",
                json!({"call_id": "call_2", "name": "shell", "arguments": {}}),
            ),
            (
                kinds::TOOL_RESULT,
                "tool",
                json!({"call_id": "call_2", "output": "ok", "is_error": false}),
            ),
        ] {
            let seq = events.len() as u64;
            events.push(Event::new(
                seq,
                ts.clone(),
                Agent::Codex,
                actor,
                kind,
                Level::History,
                payload,
            ));
        }
    }
    let change = render_events(&h, &events, "7d6c5b4a-3928-4716-a5b4-c3d2e1f0a9b8");
    let lines = json_lines(&change.files[0].bytes);
    let block_ids = |key: &str| -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| l["message"]["content"].as_array())
            .flatten()
            .filter_map(|b| b.get(key).and_then(Value::as_str).map(str::to_owned))
            .collect()
    };
    let calls = block_ids("id");
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0], "call_2", "the first use keeps the foreign id");
    assert!(
        calls[0] != calls[1] && calls[1] != calls[2] && calls[0] != calls[2],
        "{calls:?}"
    );
    assert_eq!(
        block_ids("tool_use_id"),
        calls,
        "each result names its call"
    );
    // The render made the ids unique itself; the last-resort guard had
    // nothing to rename.
    assert!(
        !change
            .losses
            .iter()
            .any(|l| l.contains("used by two calls")),
        "{:?}",
        change.losses
    );
}

/// Returns a chain of `n` prompt lines, then one line whose parent is line
/// `branch_from` (a rewind far back), as one transcript.
fn long_chain(n: usize, branch_from: usize) -> Vec<u8> {
    let uuid = |i: usize| format!("00000000-0000-4000-8000-{i:012}");
    let mut out = String::new();
    for i in 0..n {
        let parent = if i == 0 {
            Value::Null
        } else {
            json!(uuid(i - 1))
        };
        let line = json!({"type": "user", "uuid": uuid(i), "parentUuid": parent,
            "timestamp": "2026-11-29T09:00:00.000Z",
            "message": {"role": "user", "content": format!("prompt {i}")}});
        out.push_str(&format!("{line}\n"));
    }
    let line = json!({"type": "user", "uuid": uuid(n), "parentUuid": uuid(branch_from),
        "timestamp": "2026-11-29T09:00:00.000Z",
        "message": {"role": "user", "content": "edited prompt"}});
    out.push_str(&format!("{line}\n"));
    out.into_bytes()
}

/// Parses `bytes` in one call per slice, each ending after line `ends[i]`
/// (1-based), as an incremental capture does: the state goes through JSON
/// text as `ops` stores it, and with `carry` the memo goes from one call to
/// the next as within one capture.
fn parse_in_slices(source: &str, bytes: &[u8], ends: &[usize], carry: bool) -> Vec<Event> {
    let line_ends: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    let mut events = Vec::new();
    let (mut state, mut memo) = (None, ParseMemo::default());
    let (mut start, mut first_line) = (0, 0);
    for &line in ends {
        let end = line_ends[line - 1];
        let mut parsed = Claude.parse(ParseInput {
            records: Records::lines(&bytes[start..end], first_line, 0),
            next_seq: events.len() as u64,
            state: state.take(),
            source,
            session: None,
            sidecar: None,
            memo: std::mem::take(&mut memo),
        });
        if carry {
            memo = std::mem::take(&mut parsed.memo);
        }
        let text = serde_json::to_string(&parsed.state).expect("state serializes");
        state = Some(serde_json::from_str(&text).expect("state parses"));
        events.extend(parsed.events);
        start = end;
        first_line = line as u64;
    }
    events
}

#[test]
fn far_back_parents_are_found_across_incremental_parses() {
    let source = "projects/-p/7d6c5b4a-3928-4716-a5b4-c3d2e1f0a9b8.jsonl";
    // Far more records than the parser checks from the end before it
    // looks the uuid up in the whole index.
    let bytes = long_chain(500, 3);
    let whole = parse(source, &bytes);
    let last = whole.events.last().expect("events");
    assert_eq!(last.parent_seq, Some(3), "the branch hangs off line 3");
    // Cut into several calls, as an incremental capture does.
    let events = parse_in_slices(source, &bytes, &[100, 400, 501], false);
    assert_eq!(events, whole.events);
    // A state written before the index was packed (a `uuids` map) still
    // links the next call's lines.
    let old_state = json!({"uuids": {"00000000-0000-4000-8000-000000000003": 3}});
    let line = json!({"type": "user", "uuid": "00000000-0000-4000-8000-999999999999",
        "parentUuid": "00000000-0000-4000-8000-000000000003",
        "timestamp": "2026-11-29T09:00:00.000Z",
        "message": {"role": "user", "content": "later"}});
    let bytes = format!("{line}\n");
    let parsed = Claude.parse(ParseInput {
        records: Records::lines(bytes.as_bytes(), 501, 0),
        next_seq: 501,
        state: Some(old_state),
        source,
        session: None,
        sidecar: None,
        memo: Default::default(),
    });
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert_eq!(parsed.events[0].parent_seq, Some(3));
}

/// Capture parses a file in small blocks and hands the uuid index's map
/// from one call to the next in the `ParseMemo`: every parent lookup must
/// come out as in one whole parse, with the memo carried or not, also for
/// records added to the index after the map was kept.
#[test]
fn a_map_kept_between_calls_links_records_as_a_whole_parse_does() {
    let source = "projects/-p/7d6c5b4a-3928-4716-a5b4-c3d2e1f0a9b8.jsonl";
    let uuid = |i: usize| format!("00000000-0000-4000-8000-{i:012}");
    let mut bytes = long_chain(300, 3);
    // Each of these hangs off a record 97 lines back: past the recent
    // entries the index checks before its map.
    for i in 301..420 {
        let line = json!({"type": "user", "uuid": uuid(i), "parentUuid": uuid(i - 97),
            "timestamp": "2026-11-29T09:00:00.000Z",
            "message": {"role": "user", "content": format!("far {i}")}});
        bytes.extend_from_slice(format!("{line}\n").as_bytes());
    }
    let whole = parse(source, &bytes);
    assert_eq!(whole.events.last().unwrap().parent_seq, Some(419 - 97));
    for carry in [false, true] {
        let events = parse_in_slices(source, &bytes, &[50, 305, 330, 331, 390, 420], carry);
        assert_eq!(events, whole.events, "memo carried: {carry}");
    }
}

#[test]
fn a_sub_agent_names_its_meta_file_and_the_spawning_call_comes_from_it() {
    use git_session_adapters::Adapter;
    let rel = std::path::Path::new("projects/-p/s1/subagents/agent-a1.jsonl");
    assert_eq!(
        Claude.sidecar(rel),
        Some(std::path::PathBuf::from(
            "projects/-p/s1/subagents/agent-a1.meta.json"
        ))
    );
    assert_eq!(
        Claude.sidecar(std::path::Path::new("projects/-p/s1.jsonl")),
        None
    );
    let line = b"{\"type\":\"user\",\"uuid\":\"u1\",\"parentUuid\":null,\"isSidechain\":true,\"message\":{\"role\":\"user\",\"content\":\"go\"}}\n";
    let parsed = Claude.parse(ParseInput {
        records: Records::lines(line, 0, 0),
        next_seq: 0,
        state: None,
        source: "projects/-p/s1/subagents/agent-a1.jsonl",
        session: None,
        sidecar: Some(br#"{"agentType":"general-purpose","toolUseId":"toolu_spawn_1"}"#),
        memo: Default::default(),
    });
    let parent = parsed.session.parent.expect("a sub-agent has a parent");
    assert_eq!(parent.native_id, "s1");
    assert_eq!(parent.spawned_by.as_deref(), Some("toolu_spawn_1"));
}

#[test]
fn a_branch_the_user_made_stays_and_its_inactive_messages_are_reported() {
    // The user edited the first answer's follow-up: u3 branches from a1.
    let lines = [
        r#"{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"Q1"}}"#,
        r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","message":{"role":"assistant","content":[{"type":"text","text":"A1"}]}}"#,
        r#"{"type":"user","uuid":"u2","parentUuid":"a1","message":{"role":"user","content":"Q2 first try"}}"#,
        r#"{"type":"assistant","uuid":"a2","parentUuid":"u2","message":{"role":"assistant","content":[{"type":"text","text":"A2"}]}}"#,
        r#"{"type":"user","uuid":"u3","parentUuid":"a1","message":{"role":"user","content":"Q2 edited"}}"#,
        r#"{"type":"assistant","uuid":"a3","parentUuid":"u3","message":{"role":"assistant","content":[{"type":"text","text":"A3"}]}}"#,
    ];
    let bytes = (lines.join("\n") + "\n").into_bytes();
    let source = "projects/-p/11111111-2222-4333-8444-555555555555.jsonl";
    let parsed = parse(source, &bytes);
    let change = render_events(
        &header(&parsed),
        &parsed.events,
        "11111111-2222-4333-8444-555555555555",
    );
    let written = json_lines(&change.files[0].bytes);
    let parents: Vec<&str> = written
        .iter()
        .map(|l| l["parentUuid"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(parents, ["-", "u1", "a1", "u2", "a1", "u3"], "links kept");
    let branch: Vec<&String> = change
        .losses
        .iter()
        .filter(|l| l.starts_with("branch-inactive: 2 "))
        .collect();
    assert_eq!(branch.len(), 1, "{:?}", change.losses);
    assert!(
        !change
            .losses
            .iter()
            .any(|l| l.starts_with("continuation-relinked")),
        "{:?}",
        change.losses
    );
}
