//! Tests of the Hermes adapter over rows exported from the real client's
//! `state.db` (`fixtures/hermes/<case>/records.jsonl`, made by
//! `fixtures/hermes/export.py`) and hand-made rows for what the samples do
//! not hold (compression chains, bad rows, images, rewinds).

use std::path::Path;

use git_session_schema::{Agent, ArtifactId, Event, SessionHeader, SessionId, kinds};
use serde_json::{Map, Value, json};

use super::*;
use crate::{Adapter, RenderRequest};

const NOW: &str = "2026-12-01T10:00:00.000Z";
const CWD: &str = "/elsewhere/project";

fn records(case: &str) -> Vec<Record> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/hermes")
        .join(case)
        .join("records.jsonl");
    let bytes = std::fs::read(&path).expect("fixture exists");
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| Record::from_line(l).expect("fixture records parse"))
        .collect()
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object"),
    }
}

fn session(v: Value) -> Record {
    Record {
        table: Table::Sessions,
        row: obj(v),
    }
}

fn message(v: Value) -> Record {
    Record {
        table: Table::Messages,
        row: obj(v),
    }
}

fn kinds_of(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

fn header_for(parsed: &Parsed) -> SessionHeader {
    let native = parsed.session.native_id.clone().expect("native id");
    let mut h = SessionHeader::new(
        SessionId::new(native.clone()).unwrap(),
        Agent::Hermes,
        parsed.session.created.clone().unwrap_or_else(|| NOW.into()),
    );
    h.native_id = Some(native);
    h.cwd = parsed.session.cwd.clone();
    h.title = parsed.session.title.clone();
    h
}

fn render_with(
    header: &SessionHeader,
    events: &[Event],
    artifacts: &[(ArtifactId, Vec<u8>)],
    native_id: &str,
) -> Result<ChangeSet, RenderError> {
    Hermes.render(RenderRequest {
        header,
        events,
        artifacts,
        native_id,
        cwd: CWD,
        now: NOW,
    })
}

/// Returns the rows of a change set as (table, columns).
/// A Claude history event at `NOW` (a foreign session handed to Hermes).
fn ev(seq: u64, kind: &str, payload: Value) -> Event {
    Event::new(
        seq,
        NOW,
        Agent::Claude,
        "x",
        kind,
        git_session_schema::Level::History,
        payload,
    )
}

fn rows(changes: &ChangeSet) -> Vec<(&str, &Map<String, Value>)> {
    changes
        .rows
        .iter()
        .map(|r| (r.table.as_str(), &r.columns))
        .collect()
}

#[test]
fn authentic_session_maps_to_events() {
    let parsed = parse_records(records("roundtrip"), 0, None);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert_eq!(
        kinds_of(&parsed.events),
        [
            kinds::SESSION_START,
            kinds::MESSAGE_USER,
            kinds::MESSAGE_THINKING,
            kinds::MESSAGE_ASSISTANT,
            kinds::TOOL_CALL,
            kinds::TOOL_RESULT,
            kinds::COMMAND_RUN,
            kinds::MESSAGE_ASSISTANT,
            kinds::MESSAGE_USER,
            kinds::MESSAGE_ASSISTANT,
        ]
    );
    let s = &parsed.session;
    assert_eq!(s.native_id.as_deref(), Some("20261129_074216_cd438c"));
    assert_eq!(s.cwd.as_deref(), Some("/tmp/oracle-sample/hermes/project"));
    assert_eq!(s.created.as_deref(), Some("2026-11-29T07:42:21.355Z"));
    let call = &parsed.events[4];
    assert_eq!(call.payload["name"], json!("terminal"));
    assert_eq!(
        call.payload["arguments"],
        json!({"command": "echo hello > note.txt"})
    );
    assert_eq!(
        call.payload["hermes"]["response_item_id"],
        json!("fc_mock000001")
    );
    let result = &parsed.events[5];
    assert_eq!(result.parent_seq, Some(call.seq));
    let run = &parsed.events[6];
    assert_eq!(run.payload["command"], json!("echo hello > note.txt"));
    assert_eq!(run.payload["exit_code"], json!(0));
    assert_eq!(run.parent_seq, Some(result.seq));
    // The row's first event keeps the row; the others point at it.
    assert_eq!(parsed.events[2].payload[NATIVE_KEY]["row"]["id"], json!(2));
    assert!(parsed.events[3].payload.get(NATIVE_KEY).is_none());
    let origins: Vec<_> = parsed
        .events
        .iter()
        .map(|e| e.origin.clone().unwrap().native_id.unwrap())
        .collect();
    let unique: std::collections::HashSet<_> = origins.iter().collect();
    assert_eq!(unique.len(), origins.len(), "{origins:?}");
    assert_eq!(origins[3], "20261129_074216_cd438c#2/message.assistant");
}

#[test]
fn split_parse_equals_whole_parse() {
    for case in ["roundtrip", "crafted-minimal", "crafted-full"] {
        let all = records(case);
        let whole = parse_records(all.clone(), 0, None);
        for cut in 1..all.len() {
            let first = parse_records(all[..cut].to_vec(), 0, None);
            let second = parse_records(
                all[cut..].to_vec(),
                first.events.len() as u64,
                Some(first.state.clone()),
            );
            let mut events = first.events.clone();
            events.extend(second.events);
            assert_eq!(events, whole.events, "{case} cut at {cut}");
            assert_eq!(second.session, whole.session, "{case} cut at {cut}");
        }
    }
}

#[test]
fn adapter_parse_reads_record_lines() {
    let lines: Vec<u8> = records("crafted-full")
        .iter()
        .flat_map(|r| {
            let mut l = r.to_line();
            l.push(b'\n');
            l
        })
        .chain(b"not a record\n".iter().copied())
        .collect();
    let parsed = Hermes.parse(crate::ParseInput {
        records: crate::Records::lines(&lines, 0, 0),
        next_seq: 0,
        state: None,
        source: "state.db",
        session: None,
        sidecar: None,
        memo: Default::default(),
    });
    assert_eq!(
        parsed.events.len(),
        parse_records(records("crafted-full"), 0, None).events.len()
    );
    assert_eq!(parsed.warnings.len(), 1);
    assert_eq!(parsed.warnings[0].line, 5);
}

#[test]
fn render_writes_the_captured_rows_back() {
    for case in ["roundtrip", "crafted-minimal", "crafted-full"] {
        let input = records(case);
        let parsed = parse_records(input.clone(), 0, None);
        let header = header_for(&parsed);
        let native = header.native_id.clone().unwrap();
        let changes = render_with(&header, &parsed.events, &[], &native).unwrap();
        assert_eq!(
            changes.resume_command,
            format!("hermes chat --resume {native}")
        );
        assert!(changes.losses.is_empty(), "{case}: {:?}", changes.losses);
        let out = rows(&changes);
        assert_eq!(out.len(), input.len(), "{case}");
        for (record, (table, row)) in input.iter().zip(&out) {
            let mut want = record.row.clone();
            match record.table {
                Table::Sessions => {
                    assert_eq!(*table, "sessions");
                    want.insert("cwd".into(), json!(CWD));
                    want.insert("git_repo_root".into(), Value::Null);
                    want.insert("parent_session_id".into(), Value::Null);
                    let messages = input.iter().filter(|r| r.table == Table::Messages).count();
                    want.insert("message_count".into(), json!(messages));
                    want.insert("tool_call_count".into(), json!(1));
                }
                Table::Messages => {
                    assert_eq!(*table, "messages");
                    want.remove("id");
                }
            }
            assert_eq!(*row, &want, "{case}");
        }
        // And the rows parse to the same history again.
        let again: Vec<Record> = changes
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut row = r.columns.clone();
                if r.table == "messages" {
                    row.insert("id".into(), json!(i));
                }
                Record {
                    table: if r.table == "sessions" {
                        Table::Sessions
                    } else {
                        Table::Messages
                    },
                    row,
                }
            })
            .collect();
        let reparsed = parse_records(again, 0, None);
        assert_eq!(
            kinds_of(&reparsed.events),
            kinds_of(&parsed.events),
            "{case}"
        );
        for (a, b) in reparsed.events.iter().zip(&parsed.events) {
            let strip = |e: &Event| {
                let mut p = e.payload.clone();
                if let Value::Object(m) = &mut p {
                    m.remove(NATIVE_KEY);
                    m.remove("cwd");
                    m.remove("derived_from");
                }
                p
            };
            assert_eq!(strip(a), strip(b), "{case}");
        }
    }
}

#[test]
fn fork_gets_new_ids_and_an_unused_title() {
    let parsed = parse_records(records("crafted-full"), 0, None);
    let header = header_for(&parsed);
    let changes = render_with(&header, &parsed.events, &[], "fork-1").unwrap();
    let out = rows(&changes);
    assert_eq!(out[0].1["id"], json!("fork-1"));
    assert_eq!(out[0].1["title"], json!("Hand-crafted full (fork-1)"));
    assert!(
        out[1..]
            .iter()
            .all(|(_, r)| r["session_id"] == json!("fork-1"))
    );
}

#[test]
fn hostile_native_id_is_refused() {
    let parsed = parse_records(records("crafted-full"), 0, None);
    let header = header_for(&parsed);
    for bad in ["../x", "", "a b", ".hidden", "x\u{1b}[2J"] {
        assert!(matches!(
            render_with(&header, &parsed.events, &[], bad),
            Err(RenderError::Request(_))
        ));
    }
}

fn chain_records() -> Vec<Record> {
    vec![
        session(
            json!({"id": "s1", "source": "cli", "started_at": 100.0, "cwd": "/p",
                        "end_reason": "compression", "ended_at": 110.0, "title": "chain"}),
        ),
        message(
            json!({"id": 1, "session_id": "s1", "role": "user", "content": "first", "timestamp": 101.0}),
        ),
        message(
            json!({"id": 2, "session_id": "s1", "role": "assistant", "content": "one", "timestamp": 102.0}),
        ),
        session(
            json!({"id": "s2", "source": "cli", "started_at": 111.0, "cwd": "/p",
                        "parent_session_id": "s1", "title": "chain #2"}),
        ),
        message(
            json!({"id": 3, "session_id": "s2", "role": "user", "content": "[summary] first/one", "timestamp": 111.0}),
        ),
        message(
            json!({"id": 4, "session_id": "s2", "role": "user", "content": "second", "timestamp": 112.0}),
        ),
        message(
            json!({"id": 5, "session_id": "s2", "role": "assistant", "content": "two", "timestamp": 113.0}),
        ),
    ]
}

#[test]
fn compression_chain_is_one_session_and_renders_as_a_chain() {
    let rows_of = |r: &[Record]| -> Vec<SessionRow> {
        r.iter()
            .filter(|r| r.table == Table::Sessions)
            .map(|r| serde_json::from_value(Value::Object(r.row.clone())).unwrap())
            .collect()
    };
    let mut all = rows_of(&chain_records());
    all.push(SessionRow {
        id: "b1".into(),
        parent_session_id: Some("s1".into()),
        model_config: Some(r#"{"_branched_from": "s1"}"#.into()),
        ..Default::default()
    });
    let groups = chains(&all);
    assert_eq!(groups["s1"], ["s1", "s2"]);
    assert_eq!(groups["b1"], ["b1"]);

    let parsed = parse_records(chain_records(), 0, None);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert_eq!(parsed.session.native_id.as_deref(), Some("s1"));
    assert_eq!(parsed.session.title.as_deref(), Some("chain #2"));
    let cp = parsed
        .events
        .iter()
        .find(|e| e.kind == kinds::CHECKPOINT)
        .unwrap();
    assert_eq!(cp.payload["session"], json!("s2"));
    assert_eq!(cp.payload["reason"], json!("compression"));

    let header = header_for(&parsed);
    let same = render_with(&header, &parsed.events, &[], "s1").unwrap();
    let out = rows(&same);
    let sessions: Vec<_> = out.iter().filter(|(t, _)| *t == "sessions").collect();
    assert_eq!(sessions.len(), 2);
    assert_eq!(sessions[0].1["end_reason"], json!("compression"));
    assert_eq!(sessions[1].1["id"], json!("s2"));
    assert_eq!(sessions[1].1["parent_session_id"], json!("s1"));
    assert_eq!(sessions[1].1["message_count"], json!(3));
    let fork = render_with(&header, &parsed.events, &[], "f").unwrap();
    let out = rows(&fork);
    assert_eq!(out[0].1["id"], json!("f"));
    assert_eq!(out[1].1["id"], json!("f-1"));
    assert_eq!(out[1].1["parent_session_id"], json!("f"));
    assert_eq!(out[2].1["session_id"], json!("f"));
    assert_eq!(out[6].1["session_id"], json!("f-1"));
}

#[test]
fn branch_names_its_parent() {
    let parsed = parse_records(
        vec![session(
            json!({"id": "b1", "source": "cli", "started_at": 1.0,
                             "parent_session_id": "s1",
                             "model_config": "{\"_branched_from\": \"s1\"}"}),
        )],
        0,
        None,
    );
    assert_eq!(parsed.session.parent.unwrap().native_id, "s1");
    assert_eq!(parsed.events[0].payload["link"], json!("branch"));
}

#[test]
fn bad_rows_are_warnings_and_meta_and_the_rest_is_captured() {
    let parsed = parse_records(
        vec![
            session(json!({"id": "s", "source": "cli", "started_at": 1.0})),
            message(
                json!({"id": 7, "session_id": "s", "role": "user", "content": "hi", "timestamp": 2.0}),
            ),
            message(
                json!({"id": 8, "session_id": "s", "role": "assistant", "content": "Let me look.",
                           "tool_calls": "[{not json", "timestamp": 3.0}),
            ),
            message(
                json!({"id": 9, "session_id": "s", "role": "tool", "content": "{}", "timestamp": 4.0}),
            ),
            message(
                json!({"id": 10, "session_id": "s", "role": "tool", "content": "{}",
                           "tool_call_id": "nobody", "timestamp": 4.5}),
            ),
            message(json!({"id": "eleven", "session_id": "s", "role": "user"})),
            message(
                json!({"id": 12, "session_id": "s", "role": "assistant", "content": "done", "timestamp": 5.0}),
            ),
        ],
        0,
        None,
    );
    let warned: Vec<&str> = parsed.warnings.iter().map(|w| w.message.as_str()).collect();
    assert_eq!(warned.len(), 4, "{warned:?}");
    assert!(warned[0].starts_with("messages row 8: tool_calls is not valid JSON"));
    assert!(warned[1].starts_with("messages row 9: tool row without tool_call_id"));
    assert!(warned[2].starts_with("messages row 10: result for unknown call id"));
    assert!(warned[3].starts_with("messages row 0: not understood"));
    assert_eq!(
        kinds_of(&parsed.events),
        [
            kinds::SESSION_START,
            kinds::MESSAGE_USER,
            kinds::META,
            kinds::META,
            kinds::TOOL_RESULT,
            kinds::META,
            kinds::MESSAGE_ASSISTANT,
        ]
    );
    // Each bad row is kept whole, so write-back loses none of them.
    assert_eq!(
        parsed.events[2].payload[NATIVE_KEY]["row"]["tool_calls"],
        json!("[{not json")
    );
    let header = header_for(&parsed);
    let changes = render_with(&header, &parsed.events, &[], "s").unwrap();
    assert_eq!(changes.rows.len(), 7);
}

#[test]
fn rewound_and_compacted_rows_are_kept_but_not_live() {
    let parsed = parse_records(
        vec![
            session(json!({"id": "s", "source": "cli", "started_at": 1.0})),
            message(
                json!({"id": 1, "session_id": "s", "role": "user", "content": "old", "active": 0, "compacted": 1, "timestamp": 2.0}),
            ),
            message(
                json!({"id": 2, "session_id": "s", "role": "user", "content": "undone", "active": 0, "compacted": 0, "timestamp": 3.0}),
            ),
            message(
                json!({"id": 3, "session_id": "s", "role": "user", "content": "live", "active": 1, "compacted": 0, "timestamp": 4.0}),
            ),
        ],
        0,
        None,
    );
    assert_eq!(
        kinds_of(&parsed.events),
        [
            kinds::SESSION_START,
            kinds::META,
            kinds::META,
            kinds::MESSAGE_USER
        ]
    );
    assert_eq!(parsed.events[1].payload["compacted"], json!(true));
    assert_eq!(parsed.events[2].payload["rewound"], json!(true));
    let header = header_for(&parsed);
    let changes = render_with(&header, &parsed.events, &[], "s").unwrap();
    let out = rows(&changes);
    assert_eq!(out[1].1["active"], json!(0));
    assert_eq!(out[0].1["message_count"], json!(1));
}

#[test]
fn images_become_artifacts_and_come_back() {
    let png = [0x89u8, b'P', b'N', b'G', 1, 2, 3];
    let data = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, png);
    let content = format!(
        "\u{0}json:{}",
        json!([{"type": "text", "text": "what is this"},
               {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}}])
    );
    let input = vec![
        session(json!({"id": "s", "source": "cli", "started_at": 1.0})),
        message(
            json!({"id": 1, "session_id": "s", "role": "user", "content": content, "timestamp": 2.0}),
        ),
    ];
    let parsed = parse_records(input, 0, None);
    assert_eq!(parsed.artifacts.len(), 1);
    assert_eq!(parsed.artifacts[0].1, png);
    let user = &parsed.events[1];
    assert_eq!(user.payload["text"], json!("what is this"));
    assert_eq!(user.refs, [parsed.artifacts[0].0.to_ref()]);
    let kept = user.payload[NATIVE_KEY]["row"]["content"].as_str().unwrap();
    assert!(!kept.contains(&data), "image bytes stored twice");
    let header = header_for(&parsed);
    let changes = render_with(&header, &parsed.events, &parsed.artifacts, "s").unwrap();
    assert_eq!(rows(&changes)[1].1["content"], json!(content));
}

#[test]
fn changed_session_rows_become_updates() {
    let first = parse_records(
        vec![session(
            json!({"id": "s", "source": "cli", "started_at": 1.0, "title": null, "message_count": 0}),
        )],
        0,
        None,
    );
    let same = parse_records(
        vec![session(
            json!({"id": "s", "source": "cli", "started_at": 1.0, "title": null, "message_count": 0}),
        )],
        1,
        Some(first.state.clone()),
    );
    assert!(same.events.is_empty());
    let changed = parse_records(
        vec![session(
            json!({"id": "s", "source": "cli", "started_at": 1.0, "title": "Named", "message_count": 4, "ended_at": 9.0}),
        )],
        1,
        Some(first.state),
    );
    assert_eq!(kinds_of(&changed.events), [kinds::META]);
    assert_eq!(
        changed.events[0].payload["changed"],
        json!({"title": "Named", "message_count": 4, "ended_at": 9.0})
    );
    assert_eq!(changed.session.title.as_deref(), Some("Named"));
}

#[test]
fn foreign_session_becomes_hermes_rows() {
    let header = SessionHeader::new(SessionId::new("c1").unwrap(), Agent::Claude, NOW);
    let events = vec![
        ev(
            0,
            kinds::MESSAGE_USER,
            json!({"text": "Please write hello into note.txt"}),
        ),
        ev(1, kinds::MESSAGE_THINKING, json!({"text": "A note file."})),
        ev(
            2,
            kinds::MESSAGE_ASSISTANT,
            json!({"text": "I'll do it.", "model": "claude-x"}),
        ),
        ev(
            3,
            kinds::TOOL_CALL,
            json!({"call_id": "toolu_1", "name": "Bash", "arguments": {"command": "echo hello > note.txt"}}),
        ),
        ev(
            4,
            kinds::TOOL_RESULT,
            json!({"call_id": "toolu_1", "output": "", "is_error": false}),
        ),
        ev(
            5,
            kinds::COMMAND_RUN,
            json!({"command": "echo hello > note.txt"}),
        ),
        ev(
            6,
            kinds::MESSAGE_ASSISTANT,
            json!({"text": "Done: the note was written."}),
        ),
    ];
    let changes = render_with(&header, &events, &[], "n1").unwrap();
    let out = rows(&changes);
    assert_eq!(out.len(), 5);
    let s = out[0].1;
    assert_eq!(s["id"], json!("n1"));
    assert_eq!(s["title"], json!("Please write hello into note.txt"));
    assert_eq!(s["model"], json!("claude-x"));
    assert_eq!(s["message_count"], json!(4));
    assert_eq!(s["tool_call_count"], json!(1));
    assert_eq!(s["cwd"], json!(CWD));
    let a = out[2].1;
    assert_eq!(a["reasoning"], json!("A note file."));
    assert_eq!(a["finish_reason"], json!("tool_calls"));
    let calls = wire::tool_calls(a["tool_calls"].as_str().unwrap()).unwrap();
    assert_eq!(calls[0].function.name, "terminal");
    assert_eq!(
        calls[0].function.arguments,
        r#"{"command":"echo hello > note.txt"}"#
    );
    assert_eq!(out[3].1["tool_call_id"], json!("toolu_1"));
    assert_eq!(out[3].1["role"], json!("tool"));
    assert_eq!(out[4].1["content"], json!("Done: the note was written."));
    assert!(
        changes
            .losses
            .iter()
            .any(|l| l.starts_with("derived-event-folded"))
    );
}

#[test]
fn adapter_parse_reads_database_rows() {
    let all = records("roundtrip");
    let rows: Vec<crate::source::Row> = all
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut row = r.row.clone();
            row.insert("$rowid".into(), json!(i));
            crate::source::Row {
                table: if r.table == Table::Sessions {
                    "sessions"
                } else {
                    "messages"
                },
                rowid: i as i64,
                json: serde_json::to_vec(&row).unwrap(),
            }
        })
        .collect();
    let parsed = Hermes.parse(crate::ParseInput {
        records: crate::Records::Rows(&rows),
        next_seq: 0,
        state: None,
        source: "state.db",
        session: Some(AUTHENTIC_ID),
        sidecar: None,
        memo: Default::default(),
    });
    let whole = parse_records(all, 0, None);
    assert_eq!(parsed.events, whole.events);
    assert!(
        parsed.events[1].payload[NATIVE_KEY]["row"]
            .get("$rowid")
            .is_none()
    );
}

const AUTHENTIC_ID: &str = "20261129_074216_cd438c";

#[test]
fn a_continuation_parsed_alone_points_at_the_session_it_continues() {
    let chain = chain_records();
    let second = parse_records(chain[3..].to_vec(), 0, None);
    assert!(second.warnings.is_empty(), "{:?}", second.warnings);
    assert_eq!(second.session.native_id.as_deref(), Some("s2"));
    let parent = second.session.parent.clone().unwrap();
    assert_eq!(parent.native_id, "s1");
    assert!(parent.continues);
    assert_eq!(second.events[0].kind, kinds::CHECKPOINT);
    // Its events are those of the whole-chain parse after the first session.
    let whole = parse_records(chain.clone(), 0, None);
    let first = parse_records(chain[..3].to_vec(), 0, None);
    let strip = |e: &Event| {
        let mut e = e.clone();
        e.seq = 0;
        e.parent_seq = None;
        e
    };
    assert_eq!(
        whole.events[first.events.len()..]
            .iter()
            .map(strip)
            .collect::<Vec<_>>(),
        second.events.iter().map(strip).collect::<Vec<_>>()
    );
    // A branch and a tool session are sessions of their own.
    let tool = parse_records(
        vec![session(
            json!({"id": "t", "source": "tool", "started_at": 1.0, "parent_session_id": "s1"}),
        )],
        0,
        None,
    );
    assert!(!tool.session.parent.unwrap().continues);
    assert_eq!(tool.events[0].kind, kinds::SESSION_START);
    assert_eq!(tool.events[0].payload["tool_session"], json!(true));
}

#[test]
fn a_brief_and_the_first_user_message_stay_two_turns() {
    let header = SessionHeader::new(SessionId::new("c1").unwrap(), Agent::Claude, NOW);
    let ev = |seq: u64, text: &str| {
        Event::new(
            seq,
            NOW,
            Agent::Claude,
            "user",
            kinds::MESSAGE_USER,
            git_session_schema::Level::History,
            json!({ "text": text }),
        )
    };
    let events = vec![
        ev(0, "the brief"),
        ev(1, "Please write hello into note.txt"),
    ];
    let changes = render_with(&header, &events, &[], "h1").unwrap();
    let messages: Vec<(&str, &str)> = rows(&changes)
        .into_iter()
        .filter(|(t, _)| *t == "messages")
        .map(|(_, r)| (r["role"].as_str().unwrap(), r["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        messages,
        vec![
            ("user", "the brief"),
            ("assistant", super::render::SEPARATOR),
            ("user", "Please write hello into note.txt"),
        ]
    );
}

/// Hermes keeps reasoning on the assistant row it led to: reasoning a user
/// message or the end follows is not written, and says so with its seq
/// (not as `reasoning-opaque-dropped`, which would say its text arrived);
/// reasoning an assistant message follows lands on that row.
#[test]
fn reasoning_no_assistant_message_follows_is_reported_as_dropped() {
    let header = SessionHeader::new(SessionId::new("c1").unwrap(), Agent::Claude, NOW);
    let events = vec![
        ev(0, kinds::MESSAGE_USER, json!({"text": "first"})),
        ev(
            1,
            kinds::MESSAGE_THINKING,
            json!({"text": "LOST-BEFORE-USER", "opaque": {"signature": "s"}}),
        ),
        ev(2, kinds::MESSAGE_USER, json!({"text": "second"})),
        ev(3, kinds::MESSAGE_THINKING, json!({"text": "KEPT"})),
        ev(4, kinds::MESSAGE_ASSISTANT, json!({"text": "reply"})),
        ev(5, kinds::MESSAGE_THINKING, json!({"text": "LOST-AT-END"})),
    ];
    let changes = render_with(&header, &events, &[], "h1").unwrap();
    let messages: Vec<&Map<String, Value>> = rows(&changes)
        .into_iter()
        .filter(|(t, _)| *t == "messages")
        .map(|(_, r)| r)
        .collect();
    let reasoning: Vec<&Value> = messages.iter().filter_map(|r| r.get("reasoning")).collect();
    assert_eq!(reasoning, [&json!("KEPT")]);
    let dropped: Vec<&String> = changes
        .losses
        .iter()
        .filter(|l| l.starts_with("thinking-dropped: "))
        .collect();
    assert_eq!(dropped.len(), 1, "{:?}", changes.losses);
    assert!(dropped[0].contains("seqs 1, 5 (2 events)"), "{dropped:?}");
    assert!(
        !changes
            .losses
            .iter()
            .any(|l| l.starts_with("reasoning-opaque-dropped")),
        "{:?}",
        changes.losses
    );
}
