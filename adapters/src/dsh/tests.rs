//! Adapter tests over the real logs in `fixtures/dsh/` and hostile input.

use std::path::{Path, PathBuf};

use git_session_schema::{Agent, Event, SessionHeader, SessionId, kinds};
use serde_json::{Value, json};

use super::*;
use crate::{ParseInput, RenderRequest};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/dsh")
}

/// Returns every log of a case: (store-relative path, decoded JSONL).
fn logs(case: &str) -> Vec<(String, Vec<u8>)> {
    let root = fixtures().join(case).join("native");
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let bytes = std::fs::read(&p).unwrap();
                out.push((rel, zstd::decode_all(&bytes[..]).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn parse_bytes(bytes: &[u8], first_line: u64, next_seq: u64, state: Option<Value>) -> Parsed {
    Dsh.parse(ParseInput {
        records: crate::Records::lines(bytes, first_line, 0),
        next_seq,
        state,
        source: "test.jsonl",
        session: None,
        sidecar: None,
        memo: Default::default(),
    })
}

fn count(events: &[Event], kind: &str) -> usize {
    events.iter().filter(|e| e.kind == kind).count()
}

const CASES: [&str; 6] = [
    "01-roundtrip",
    "02-resumed",
    "03-crafted-minimal",
    "04-crafted-full",
    "05-fork",
    "06-subagent-unseeded",
];

#[test]
fn real_logs_parse_without_warnings() {
    for case in CASES {
        for (rel, bytes) in logs(case) {
            assert!(Dsh.is_session_file(Path::new(&rel)), "{rel}");
            let p = parse_bytes(&bytes, 0, 0, None);
            assert!(p.warnings.is_empty(), "{case} {rel}: {:?}", p.warnings);
            let lines = bytes.iter().filter(|&&b| b == b'\n').count();
            let primaries = p
                .events
                .iter()
                .filter(|e| e.payload.get(NATIVE_KEY).is_some())
                .count();
            assert_eq!(
                primaries, lines,
                "{case} {rel}: one primary event per record"
            );
            for (i, e) in p.events.iter().enumerate() {
                assert_eq!(e.seq, i as u64);
                assert_eq!(e.agent, Agent::Dsh);
            }
            assert!(
                p.session
                    .cwd
                    .as_deref()
                    .unwrap()
                    .starts_with("/tmp/oracle-sample/")
            );
        }
    }
}

#[test]
fn authentic_session_maps_messages_tools_and_derived_events() {
    let (_, bytes) = logs("01-roundtrip").remove(0);
    let p = parse_bytes(&bytes, 0, 0, None);
    let e = &p.events;
    assert_eq!(count(e, kinds::SESSION_START), 1);
    assert_eq!(count(e, kinds::MESSAGE_USER), 1);
    assert_eq!(count(e, kinds::MESSAGE_THINKING), 2);
    assert_eq!(count(e, kinds::MESSAGE_ASSISTANT), 2);
    assert_eq!(count(e, kinds::TOOL_CALL), 1);
    assert_eq!(count(e, kinds::TOOL_RESULT), 1);
    assert_eq!(count(e, kinds::COMMAND_RUN), 1);
    let user = e.iter().find(|e| e.kind == kinds::MESSAGE_USER).unwrap();
    assert_eq!(user.payload["text"], "Please write hello into note.txt");
    let call = e.iter().find(|e| e.kind == kinds::TOOL_CALL).unwrap();
    assert_eq!(call.payload["name"], "bash");
    assert_eq!(
        call.payload["arguments"]["command"],
        "echo hello > note.txt"
    );
    let result = e.iter().find(|e| e.kind == kinds::TOOL_RESULT).unwrap();
    assert_eq!(result.parent_seq, Some(call.seq));
    assert_eq!(result.payload["output"], "(no output)");
    let run = e.iter().find(|e| e.kind == kinds::COMMAND_RUN).unwrap();
    assert_eq!(run.payload["command"], "echo hello > note.txt");
    assert_eq!(run.payload["exit_code"], 0);
    // The runtime context is injected, not something the user said.
    let injected = e
        .iter()
        .filter(|e| e.payload.get("injected") == Some(&json!(true)))
        .count();
    assert_eq!(injected, 1);
    assert_eq!(p.session.title.as_deref(), Some("Mock summary"));
    assert_eq!(
        p.session.native_id.as_deref(),
        Some("session-afae3098-de93-42e2-b9d2-348986bedfe1")
    );
    assert_eq!(
        p.session.created.as_deref(),
        Some("2026-11-29T07:57:49.106Z")
    );
    // Origins by dsh seq, unique.
    let ids: std::collections::HashSet<_> = e
        .iter()
        .map(|e| e.origin.as_ref().unwrap().native_id.clone().unwrap())
        .collect();
    assert_eq!(ids.len(), e.len());
}

#[test]
fn seeded_fork_reports_its_inherited_prefix_and_parent() {
    let logs = logs("05-fork");
    let (_, child) = logs.iter().find(|(r, _)| r.contains("6ee32dd4")).unwrap();
    let p = parse_bytes(child, 0, 0, None);
    assert_eq!(inherited_records(&p.state), Some(28));
    assert_eq!(
        p.session.parent.as_ref().unwrap().native_id,
        "session-80e2f1b4-4b57-46b9-826e-03b07abf7ca8"
    );
    let (_, parent) = logs.iter().find(|(r, _)| r.contains("80e2f1b4")).unwrap();
    let pp = parse_bytes(parent, 0, 0, None);
    assert_eq!(inherited_records(&pp.state), None);
    assert!(
        pp.events
            .iter()
            .any(|e| e.payload["dsh"] == "subagent/catalog")
    );
    let (_, unseeded) = &logs_of("06-subagent-unseeded", "96f358e1");
    assert_eq!(
        inherited_records(&parse_bytes(unseeded, 0, 0, None).state),
        None
    );
}

fn logs_of(case: &str, id: &str) -> (String, Vec<u8>) {
    logs(case)
        .into_iter()
        .find(|(r, _)| r.contains(id))
        .unwrap()
}

#[test]
fn split_parses_equal_the_whole_parse() {
    for case in CASES {
        for (rel, bytes) in logs(case) {
            let whole = parse_bytes(&bytes, 0, 0, None);
            let nl: Vec<usize> = bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i)
                .collect();
            for cut_line in [1, nl.len() / 2, nl.len() - 1] {
                let cut = nl[cut_line - 1] + 1;
                let a = parse_bytes(&bytes[..cut], 0, 0, None);
                let b = parse_bytes(
                    &bytes[cut..],
                    cut_line as u64,
                    a.events.len() as u64,
                    Some(a.state.clone()),
                );
                let mut joined = a.events.clone();
                joined.extend(b.events);
                assert_eq!(joined, whole.events, "{case} {rel} cut at line {cut_line}");
                assert_eq!(b.session, whole.session);
            }
        }
    }
}

fn header(agent: Agent, id: &str) -> SessionHeader {
    let mut h = SessionHeader::new(
        SessionId::new(id).unwrap(),
        agent,
        "2026-11-29T07:57:49.106Z".to_owned(),
    );
    h.cwd = Some("/old/project".into());
    h
}

/// Renders in memory; returns the change set, the plain log and its path.
fn render(events: &[Event], native_id: &str, cwd: &str) -> (ChangeSet, Vec<u8>, PathBuf) {
    let h = header(Agent::Dsh, "s-1");
    let changes = Dsh
        .render(RenderRequest {
            header: &h,
            events,
            artifacts: &[],
            native_id,
            cwd,
            now: "2026-12-01T00:00:00Z",
        })
        .unwrap();
    assert_eq!(changes.files.len(), 1);
    let file = &changes.files[0];
    // A framed file whose frame 0 is the header line alone.
    let ends = file.frames.as_ref().expect("a framed file");
    let first_nl = file.bytes.iter().position(|&b| b == b'\n').unwrap();
    assert_eq!(
        ends[0],
        first_nl + 1,
        "frame 0 holds exactly the header line"
    );
    for end in ends {
        assert_eq!(file.bytes[end - 1], b'\n', "a line never spans frames");
    }
    (changes.clone(), file.bytes.clone(), file.path.clone())
}

/// Returns the records of a rendered (plain) log.
fn records(plain: &[u8]) -> Vec<Value> {
    plain
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

#[test]
fn native_logs_render_back_record_for_record() {
    for case in CASES {
        for (rel, bytes) in logs(case) {
            let parsed = parse_bytes(&bytes, 0, 0, None);
            let original: Vec<Value> = bytes
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).unwrap())
                .collect();
            let id = original[0]["id"].as_str().unwrap().to_owned();
            let (changes, out, path) = render(&parsed.events, &id, "/new/place");
            assert!(changes.losses.is_empty(), "{case}: {:?}", changes.losses);
            let back = records(&out);
            assert_eq!(back.len(), original.len(), "{case} {rel}");
            let mut want_header = original[0].clone();
            want_header["cwd"] = json!("/new/place");
            assert_eq!(back[0], want_header);
            assert_eq!(back[1..], original[1..], "{case} {rel}");
            assert_eq!(
                path,
                PathBuf::from(format!(
                    "sessions/--new-place--/{}/session.v4.jsonl.zstd",
                    wire::encode_segment(&id)
                ))
            );
            // Parsing the render gives the same events again.
            let again = parse_bytes(&out, 0, 0, None);
            assert_eq!(again.events.len(), parsed.events.len());
        }
    }
}

/// A Claude-like session: prompt, thinking, text, a shell call, its result,
/// a final reply, a second prompt.
fn foreign_events() -> Vec<Event> {
    let ev = |seq: u64, actor: &str, kind: &str, payload: Value| {
        Event::new(
            seq,
            format!("2026-11-29T08:00:0{seq}.000Z"),
            Agent::Claude,
            actor,
            kind,
            git_session_schema::Level::History,
            payload,
        )
    };
    vec![
        ev(
            0,
            "system",
            kinds::SESSION_START,
            json!({"cwd": "/old/project"}),
        ),
        ev(
            1,
            "user",
            kinds::MESSAGE_USER,
            json!({"text": "Please write hello into note.txt"}),
        ),
        ev(
            2,
            "agent:claude",
            kinds::MESSAGE_THINKING,
            json!({"text": "A note file."}),
        ),
        ev(
            3,
            "agent:claude",
            kinds::MESSAGE_ASSISTANT,
            json!({"text": "I'll write it."}),
        ),
        ev(
            4,
            "agent:claude",
            kinds::TOOL_CALL,
            json!({"call_id": "toolu_1", "name": "Bash", "arguments": {"command": "echo hello > note.txt"}}),
        ),
        ev(
            5,
            "tool",
            kinds::TOOL_RESULT,
            json!({"call_id": "toolu_1", "output": "(no output)"}),
        ),
        ev(
            6,
            "agent:claude",
            kinds::COMMAND_RUN,
            json!({"command": "echo hello > note.txt"}),
        ),
        ev(
            7,
            "agent:claude",
            kinds::MESSAGE_ASSISTANT,
            json!({"text": "Done."}),
        ),
        ev(8, "user", kinds::MESSAGE_USER, json!({"text": "And now?"})),
        ev(
            9,
            "agent:claude",
            kinds::TOOL_CALL,
            json!({"call_id": "toolu_2", "name": "Grep", "arguments": {"pattern": "x"}}),
        ),
    ]
}

/// Checks the rules dsh applies on every load (formats/dsh.md).
fn assert_dsh_accepts(records: &[Value]) {
    let h = records[0].as_object().unwrap();
    for k in h.keys() {
        assert!(
            wire::HEADER_KEYS.contains(&k.as_str()) || k == wire::HEADER_KEY_PRESET,
            "header key {k}"
        );
    }
    let (mut turn, mut step, mut turn_open, mut step_open) = (0, 0, false, false);
    let mut first_surface = None;
    let mut pending: Vec<String> = Vec::new();
    for (i, r) in records[1..].iter().enumerate() {
        let m = r.as_object().unwrap();
        for k in m.keys() {
            assert!(
                wire::ENVELOPE_KEYS.contains(&k.as_str()),
                "envelope key {k}"
            );
        }
        assert_eq!(r["seq"], i as u64, "dense seqs");
        let kind = r["type"].as_str().unwrap();
        assert!(
            wire::is_known_type(kind) || r["ignorable"] == true,
            "{kind}"
        );
        let surface = wire::SURFACE_TYPES.contains(&kind);
        assert_eq!(surface, m.contains_key("surfaceOp"), "{kind} surfaceOp");
        if surface && first_surface.is_none() {
            first_surface = Some(kind.to_owned());
        }
        let d = &r["data"];
        match kind {
            "turn/start" => {
                assert!(!turn_open);
                turn += 1;
                assert_eq!(d["turn"], turn);
                turn_open = true;
                step = 0;
            }
            "step/start" => {
                assert!(turn_open && !step_open);
                step += 1;
                assert_eq!(d["step"], step);
                step_open = true;
            }
            "step/end" => {
                assert!(
                    step_open && pending.is_empty(),
                    "step/end with pending calls"
                );
                step_open = false;
            }
            "turn/end" => {
                assert!(turn_open && !step_open);
                turn_open = false;
            }
            "assistant/message" => {
                assert!(step_open);
                assert!(d["stream"].is_array());
                assert!(d["message"]["id"].is_string());
                for b in d["message"]["content"].as_array().unwrap() {
                    if b["type"] == "tool-call" {
                        pending.push(b["id"].as_str().unwrap().to_owned());
                    }
                }
            }
            "tool/call" => assert!(pending.contains(&d["callId"].as_str().unwrap().to_owned())),
            "tool/result" => {
                let id = d["message"]["toolCallId"].as_str().unwrap();
                assert_eq!(d["message"]["role"], "tool");
                pending.retain(|p| p != id);
            }
            "user/message" => assert!(d["id"].is_string()),
            _ => {}
        }
    }
    assert!(!turn_open, "turns are closed");
    assert_eq!(first_surface.as_deref(), Some("system/message"));
}

#[test]
fn foreign_sessions_become_logs_dsh_accepts() {
    let (changes, out, path) = render(&foreign_events(), "session-new", "/new/place");
    assert_eq!(
        path,
        PathBuf::from("sessions/--new-place--/session-new/session.v4.jsonl.zstd")
    );
    let recs = records(&out);
    assert_dsh_accepts(&recs);
    let kinds_written: Vec<&str> = recs[1..]
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds_written,
        [
            "turn/start",
            "step/start",
            "system/message",
            "user/message",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end",
            "turn/start",
            "step/start",
            "user/message",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "turn/end",
            "plugin:git-session/import",
        ]
    );
    // The shell call became dsh's bash; the reply kept thinking and text.
    let reply = &recs[5]["data"]["message"]["content"];
    assert_eq!(
        reply[0],
        json!({"type": "reasoning", "text": "A note file."})
    );
    assert_eq!(reply[2]["name"], "bash");
    let args: Value = serde_json::from_str(reply[2]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["command"], "echo hello > note.txt");
    assert_eq!(recs[6]["data"]["arguments"], reply[2]["arguments"]);
    // The result cites its tool/call, as dsh writes it.
    assert_eq!(recs[7]["sourceEventSeqs"], json!([recs[6]["seq"]]));
    // The unanswered call got dsh's own repair result, and it is reported.
    assert_eq!(recs[18]["data"]["error"]["code"], "TOOL_OUTCOME_UNKNOWN");
    assert!(
        changes
            .losses
            .iter()
            .any(|l| l.starts_with("tool-result-orphaned:"))
    );
    // Claude's Grep is dsh's grep (the registry's vocabulary), not unmapped.
    assert!(
        !changes
            .losses
            .iter()
            .any(|l| l.starts_with("tool-unmapped:")),
        "{:?}",
        changes.losses
    );
    assert!(
        recs.iter()
            .any(|r| r["type"] == "tool/call" && r["data"]["name"] == "grep"),
        "Grep is written as dsh's grep"
    );
    assert_eq!(recs[21]["ignorable"], true);
    assert!(
        changes
            .resume_command
            .contains("dsh headless --session-id session-new")
    );
    // Parsed back, the conversation is the same.
    let back = parse_bytes(&out, 0, 0, None);
    assert!(back.warnings.is_empty(), "{:?}", back.warnings);
    let users: Vec<&Value> = back
        .events
        .iter()
        .filter(|e| e.kind == kinds::MESSAGE_USER)
        .map(|e| &e.payload["text"])
        .collect();
    assert_eq!(
        users,
        [
            &json!("Please write hello into note.txt"),
            &json!("And now?")
        ]
    );
    assert_eq!(count(&back.events, kinds::TOOL_CALL), 2);
    assert_eq!(count(&back.events, kinds::MESSAGE_THINKING), 1);
}

#[test]
fn a_log_written_under_a_new_id_names_itself_in_its_receipts() {
    let (_, bytes) = logs_of("01-roundtrip", "afae3098");
    let events = parse_bytes(&bytes, 0, 0, None).events;
    let (_, out, path) = render(&events, "fork-1", "/p");
    assert!(path.to_string_lossy().contains("/fork-1/"));
    let recs = records(&out);
    assert_eq!(recs[0]["id"], "fork-1");
    let receipts: Vec<&Value> = recs
        .iter()
        .filter(|r| r["type"] == "session-log-deepseek/delivery-accepted")
        .map(|r| &r["data"]["sessionId"])
        .collect();
    assert_eq!(receipts.len(), 3);
    assert!(receipts.iter().all(|id| *id == "fork-1"), "{receipts:?}");
    // A seeded fork's inherited receipts name its parent and stay so.
    let (_, child) = logs_of("05-fork", "6ee32dd4");
    let events = parse_bytes(&child, 0, 0, None).events;
    let (_, out, _) = render(&events, "6ee32dd4-c950-4642-b03c-e0afa213a72f", "/p");
    let original: Vec<Value> = records(&child);
    assert_eq!(records(&out)[1..], original[1..]);
}

#[test]
fn foreign_events_continue_a_native_log() {
    let (_, bytes) = logs_of("01-roundtrip", "afae3098");
    let mut events = parse_bytes(&bytes, 0, 0, None).events;
    let n = events.len() as u64;
    let mut more = foreign_events();
    more.retain(|e| e.kind != kinds::SESSION_START);
    for (i, e) in more.iter_mut().enumerate() {
        e.seq = n + i as u64;
    }
    events.extend(more);
    let (_, out, _) = render(
        &events,
        "session-afae3098-de93-42e2-b9d2-348986bedfe1",
        "/p",
    );
    let recs = records(&out);
    assert_dsh_accepts(&recs);
    // The native turn was 1, so the imported prompt opens turn 2, and no
    // second system prompt is written.
    let starts: Vec<&Value> = recs
        .iter()
        .filter(|r| r["type"] == "turn/start")
        .map(|r| &r["data"]["turn"])
        .collect();
    assert_eq!(starts, [&json!(1), &json!(2), &json!(3)]);
    assert_eq!(
        recs.iter()
            .filter(|r| r["type"] == "system/message")
            .count(),
        1
    );
}

#[test]
fn hostile_records_are_kept_with_warnings() {
    let input = b"{\"type\":\"session\",\"version\":4,\"id\":\"s\",\"createdAt\":1,\"cwd\":\"/p\",\"isSeeded\":false,\"delegationDepth\":0}\n\
{\"type\":\"git-session/marker\",\"seq\":0,\"time\":2,\"data\":{}}\n\
not json at all\n\
{\"type\":\"turn/start\",\"seq\":2,\"time\":3,\"data\":{\"turn\":1},\"uuid\":\"x\"}\n\
{\"type\":\"tool/result\",\"seq\":3,\"time\":4,\"data\":{\"message\":{\"toolCallId\":\"nope\",\"content\":\"\\u001b[2Jboom\"}}}\n\
[1,2]\n";
    let p = parse_bytes(input, 0, 0, None);
    let joined: Vec<&str> = p.warnings.iter().map(|w| w.message.as_str()).collect();
    assert!(
        joined
            .iter()
            .any(|w| w.contains("unknown to dsh") && w.contains("git-session/marker")),
        "{joined:?}"
    );
    assert!(joined.iter().any(|w| w.contains("not JSON")));
    assert!(
        joined
            .iter()
            .any(|w| w.contains("seq gap (expected 1, got 2)"))
    );
    assert!(
        joined
            .iter()
            .any(|w| w.contains("unexpected field \"uuid\""))
    );
    assert!(joined.iter().any(|w| w.contains("not a JSON object")));
    // Nothing is lost: every line is an event.
    assert_eq!(p.events.len(), 6);
    assert_eq!(p.events[1].payload["unknown"], true);
    // Written back, the unknown type is marked ignorable, the unparsed
    // lines are reported, and a record after a gap is refused (dsh would).
    let gap = render_err(&p.events);
    assert!(gap.to_string().contains("seq gap"), "{gap}");
    let (changes, out, _) = render(&p.events[..3], "s", "/p");
    assert!(
        changes
            .losses
            .iter()
            .any(|l| l.starts_with("unparsed-line-omitted:"))
    );
    assert!(
        changes
            .losses
            .iter()
            .any(|l| l.contains("git-session/marker"))
    );
    let recs = records(&out);
    assert_eq!(recs[1]["ignorable"], true);
    assert_eq!(
        recs[1].as_object().unwrap().keys().collect::<Vec<_>>(),
        ["type", "seq", "time", "data", "ignorable"]
    );
}

fn render_err(events: &[Event]) -> RenderError {
    let h = header(Agent::Dsh, "s-1");
    Dsh.render(RenderRequest {
        header: &h,
        events,
        artifacts: &[],
        native_id: "s",
        cwd: "/p",
        now: "x",
    })
    .unwrap_err()
}

#[test]
fn newer_and_older_headers_are_refused_with_a_direction() {
    let p = parse_bytes(
        b"{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"cwd\":\"/p\"}\n{\"type\":\"x\"}\n",
        0,
        0,
        None,
    );
    let refused = p.refused.expect("a newer version is refused");
    assert!(refused.contains("upgrade"), "{refused}");
    assert!(p.events.is_empty());
    // The facts still say where it ran, so capture can tell whose it is.
    assert_eq!(p.session.cwd.as_deref(), Some("/p"));
    let p = parse_bytes(
        b"{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1}\n",
        0,
        0,
        None,
    );
    assert!(p.refused.unwrap().contains("no upgrade path"));
}

#[test]
fn a_file_name_that_contradicts_the_header_is_refused() {
    let header = b"{\"type\":\"session\",\"version\":4,\"id\":\"s\",\"createdAt\":1,\"cwd\":\"/p\",\"isSeeded\":false,\"delegationDepth\":0}\n";
    let p = Dsh.parse(ParseInput {
        records: crate::Records::lines(header, 0, 0),
        next_seq: 0,
        state: None,
        source: "sessions/--p--/s/session.jsonl.zstd",
        session: None,
        sidecar: None,
        memo: Default::default(),
    });
    let refused = p.refused.unwrap();
    assert!(
        refused.contains("filename identifies v0, but its header identifies v4"),
        "{refused}"
    );
    let ok = Dsh.parse(ParseInput {
        records: crate::Records::lines(header, 0, 0),
        next_seq: 0,
        state: None,
        source: "sessions/--p--/s/session.v4.jsonl.zstd",
        session: None,
        sidecar: None,
        memo: Default::default(),
    });
    assert!(ok.refused.is_none());
}

#[test]
fn hostile_native_ids_cannot_escape_the_store() {
    let (_, _, path) = render(&foreign_events(), "../../etc", "/p");
    assert_eq!(
        path,
        PathBuf::from("sessions/--p--/..~002F..~002Fetc/session.v4.jsonl.zstd")
    );
    let h = header(Agent::Dsh, "s-1");
    for bad in ["", "a\nb"] {
        let err = Dsh
            .render(RenderRequest {
                header: &h,
                events: &foreign_events(),
                artifacts: &[],
                native_id: bad,
                cwd: "/p",
                now: "x",
            })
            .unwrap_err();
        assert!(matches!(err, RenderError::Request(_)));
    }
}

#[test]
fn store_root_and_session_files() {
    let env = |k: &str| (k == "DSH_HOME").then(|| "/d".to_owned());
    assert_eq!(Dsh.store_root(&env, Path::new("/h")), PathBuf::from("/d"));
    assert_eq!(
        Dsh.store_root(&|_| None, Path::new("/h")),
        PathBuf::from("/h/.dsh")
    );
    assert!(Dsh.is_session_file(Path::new("sessions/--p--/s/session.v4.jsonl")));
    assert!(Dsh.is_session_file(Path::new("sessions/--p--/s/session.jsonl.zstd")));
    assert!(!Dsh.is_session_file(Path::new("sessions/--p--/s/session.lock")));
    assert!(!Dsh.is_session_file(Path::new("sessions/--p--/s.jsonl")));
    assert!(!Dsh.is_session_file(Path::new("storages/x/s/session.v4.jsonl")));
}

#[test]
fn a_first_frame_with_more_than_the_header_is_refused() {
    let header = b"{\"type\":\"session\",\"version\":4,\"id\":\"s\",\"createdAt\":1,\"cwd\":\"/p\",\"isSeeded\":false,\"delegationDepth\":0}\n".to_vec();
    let record = b"{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n".to_vec();
    let frame = |index, offset, first_line, bytes| crate::source::Frame {
        index,
        offset,
        first_line,
        bytes,
    };
    let parse = |frames: &[crate::source::Frame]| {
        Dsh.parse(ParseInput {
            records: crate::Records::Frames(frames),
            next_seq: 0,
            state: None,
            source: "sessions/--p--/s/session.v4.jsonl.zstd",
            session: None,
            sidecar: None,
            memo: Default::default(),
        })
    };
    let alone = parse(&[
        frame(0, 0, 0, header.clone()),
        frame(1, 90, 1, record.clone()),
    ]);
    assert!(alone.refused.is_none(), "{:?}", alone.refused);
    let together = parse(&[frame(0, 0, 0, [header, record].concat())]);
    let why = together.refused.expect("refused");
    assert!(
        why.contains("frame at byte 0") && why.contains("exactly the header line"),
        "{why}"
    );
}

#[test]
fn a_seeded_forks_inherited_records_have_the_parents_origins() {
    let bytes = concat!(
        "{\"type\":\"session\",\"version\":4,\"id\":\"child\",\"createdAt\":1,\"cwd\":\"/p\",\"parentSession\":\"parent\",\"isSeeded\":true,\"origin\":\"subagent\",\"delegationDepth\":1}\n",
        "{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n",
        "{\"type\":\"turn/end\",\"seq\":1,\"time\":2,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n",
        "{\"type\":\"session/end-seed\",\"seq\":2,\"time\":3,\"data\":{\"inherited\":true}}\n",
        "{\"type\":\"turn/start\",\"seq\":3,\"time\":4,\"data\":{\"turn\":2}}\n",
    );
    let p = parse_bytes(bytes.as_bytes(), 0, 0, None);
    let origins: Vec<&str> = p
        .events
        .iter()
        .filter_map(|e| e.origin.as_ref()?.native_id.as_deref())
        .collect();
    assert_eq!(
        origins,
        ["child#header", "parent#0", "parent#1", "child#2", "child#3"]
    );
}

#[test]
fn another_agents_native_payload_is_not_taken_for_a_dsh_record() {
    // Codex and Hermes keep their records under `native` too (found by
    // the real-client matrix: hermes -> dsh and codex -> dsh failed).
    let mut events = foreign_events();
    for e in &mut events {
        e.agent = Agent::Hermes;
        e.payload["native"] = serde_json::json!({"table": "messages", "row": {"id": 3}});
    }
    let (_, out, _) = render(&events, "session-new", "/new/place");
    assert_dsh_accepts(&records(&out));
}
