//! Unit tests over the rows of the real client's sample database
//! (`fixtures/opencode/oracle-sample`, see its `CASE.md`).

use git_session_schema::{Agent, Event, SessionHeader};
use serde_json::{Map, Value, json};

use super::*;
use crate::RenderHead;

const ROWS: &str = include_str!("../../../fixtures/opencode/oracle-sample/rows.json");
const EXPORT: &str = include_str!("../../../fixtures/opencode/oracle-sample/export.json");
const AUTHENTIC: &str = "ses_dd9bef97bffevgJiskCcm7yFfU";
const MINIMAL: &str = "ses_0handcrafted0minimal0001";

/// Returns the rows of one session in OpenCode's read order: the session,
/// messages by (time_created, id), each followed by its parts by id.
fn session_rows(id: &str) -> Vec<Row> {
    let all: Value = serde_json::from_str(ROWS).unwrap();
    let table = |name: &str| -> Vec<Map<String, Value>> {
        all[name]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_object().unwrap().clone())
            .collect()
    };
    let mut out = Vec::new();
    for s in table("session") {
        if s["id"] == id {
            out.push(Row {
                table: Table::Session,
                columns: s,
            });
        }
    }
    let mut messages: Vec<_> = table("message")
        .into_iter()
        .filter(|m| m["session_id"] == id)
        .collect();
    messages.sort_by_key(|m| {
        (
            m["time_created"].as_i64(),
            m["id"].as_str().unwrap().to_owned(),
        )
    });
    let mut parts: Vec<_> = table("part")
        .into_iter()
        .filter(|p| p["session_id"] == id)
        .collect();
    parts.sort_by_key(|p| p["id"].as_str().unwrap().to_owned());
    for m in messages {
        let mid = m["id"].clone();
        out.push(Row {
            table: Table::Message,
            columns: m,
        });
        for p in parts.iter().filter(|p| p["message_id"] == mid) {
            out.push(Row {
                table: Table::Part,
                columns: p.clone(),
            });
        }
    }
    out
}

fn kinds_of(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let sub = e
                .payload
                .get("opencode")
                .and_then(Value::as_str)
                .map(|s| format!(":{s}"))
                .unwrap_or_default();
            format!("{}{sub}", e.kind)
        })
        .collect()
}

/// Returns the comparable identity of events: origin, kind, payload.
fn identity(events: &[Event]) -> Vec<(Option<String>, String, Value, Option<u64>)> {
    events
        .iter()
        .map(|e| {
            (
                e.origin.as_ref().and_then(|o| o.native_id.clone()),
                e.kind.clone(),
                e.payload.clone(),
                e.parent_seq,
            )
        })
        .collect()
}

#[test]
fn the_authentic_session_maps_every_part() {
    let parsed = parse_rows(session_rows(AUTHENTIC), 0, None);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert_eq!(
        kinds_of(&parsed.events),
        [
            "session.start",
            "meta:message",
            "message.user",
            "meta:message",
            "meta:step-start",
            "message.thinking",
            "message.assistant",
            "tool.call",
            "tool.result",
            "command.run",
            "meta:step-finish",
            "checkpoint",
            "meta:message",
            "meta:step-start",
            "message.assistant",
            "meta:step-finish",
            "meta:message",
            "message.user",
            "meta:message",
            "meta:step-start",
            "message.assistant",
            "meta:step-finish",
        ]
    );
    let s = &parsed.session;
    assert_eq!(s.native_id.as_deref(), Some(AUTHENTIC));
    assert_eq!(
        s.cwd.as_deref(),
        Some("/tmp/oracle-sample/opencode/project")
    );
    assert_eq!(s.title.as_deref(), Some("Mock title"));
    assert_eq!(s.created.as_deref(), Some("2026-11-29T07:42:05.444Z"));
    let ev = |kind: &str| parsed.events.iter().find(|e| e.kind == kind).unwrap();
    assert_eq!(
        ev("message.user").payload["text"],
        "Please write hello into note.txt"
    );
    assert_eq!(ev("message.user").actor, "user");
    let call = ev("tool.call");
    assert_eq!(call.payload["name"], "bash");
    assert_eq!(call.payload["call_id"], "call_mock000003");
    assert_eq!(
        call.payload["arguments"],
        json!({"command": "echo hello > note.txt"})
    );
    let result = ev("tool.result");
    assert_eq!(result.parent_seq, Some(call.seq));
    assert_eq!(result.payload["output"], "(no output)");
    assert_eq!(result.payload["is_error"], false);
    let run = ev("command.run");
    assert_eq!(run.payload["cmd"], "echo hello > note.txt");
    assert_eq!(run.payload["exit_code"], 0);
    let cp = ev("checkpoint");
    assert_eq!(
        cp.payload["snapshot"],
        "4c1036ce15f0e17a146e8f22b786bd39df6cd98d"
    );
    let msg = &parsed.events[3];
    assert_eq!(msg.payload["model"], "mock-model");
    assert_eq!(msg.payload["provider"], "mock");
    assert_eq!(msg.payload["tokens"]["input"], 100);
    assert_eq!(msg.payload["finish"], "tool-calls");
    // Seqs are contiguous and every event names its row.
    for (i, e) in parsed.events.iter().enumerate() {
        assert_eq!(e.seq, i as u64);
        assert_eq!(e.agent, Agent::Opencode);
        assert!(e.origin.as_ref().unwrap().native_id.is_some());
    }
}

#[test]
fn parsing_in_slices_gives_the_events_of_one_parse() {
    let rows = session_rows(AUTHENTIC);
    let whole = parse_rows(rows.clone(), 0, None);
    for cut in [1, 3, 7, 12, 20, rows.len() - 1] {
        let first = parse_rows(rows[..cut].to_vec(), 0, None);
        let second = parse_rows(
            rows[cut..].to_vec(),
            first.events.len() as u64,
            Some(first.state.clone()),
        );
        let mut events = first.events;
        events.extend(second.events);
        assert_eq!(identity(&events), identity(&whole.events), "cut at {cut}");
    }
    // Handing everything again adds nothing.
    let again = parse_rows(rows, whole.events.len() as u64, Some(whole.state));
    assert!(again.events.is_empty(), "{:?}", kinds_of(&again.events));
}

#[test]
fn a_message_still_being_written_waits_and_is_not_torn() {
    let rows = session_rows(AUTHENTIC);
    // The first assistant message as it looked mid-request: not completed,
    // its tool part running, no step-finish yet.
    let cut = rows
        .iter()
        .position(|r| r.table == Table::Part && r.text("data").unwrap().contains("\"tool\""))
        .unwrap();
    let mut early: Vec<Row> = rows[..=cut].to_vec();
    let msg = early
        .iter_mut()
        .rev()
        .find(|r| r.table == Table::Message)
        .unwrap();
    let mut data = msg.data().unwrap();
    data["time"].as_object_mut().unwrap().remove("completed");
    msg.columns
        .insert("data".into(), json!(Value::Object(data).to_string()));
    let tool = early.last_mut().unwrap();
    tool.columns.insert(
        "data".into(),
        json!(
            json!({"type": "tool", "tool": "bash", "callID": "call_mock000003",
                     "state": {"status": "running", "input": {"command": "echo hello > note.txt"},
                               "time": {"start": 1}}})
            .to_string()
        ),
    );
    let first = parse_rows(early, 0, None);
    assert_eq!(
        kinds_of(&first.events),
        ["session.start", "meta:message", "message.user"],
        "the open assistant message is held back"
    );
    // The next capture sees the final rows (only the changed and new ones).
    let second = parse_rows(
        rows[cut - 4..].to_vec(),
        first.events.len() as u64,
        Some(first.state),
    );
    let mut events = first.events;
    events.extend(second.events);
    let whole = parse_rows(rows, 0, None);
    assert_eq!(identity(&events), identity(&whole.events));
}

#[test]
fn a_tool_that_finishes_later_gives_its_result_once() {
    let rows = session_rows(MINIMAL);
    let tool_at = rows
        .iter()
        .position(|r| r.text("data").is_some_and(|d| d.contains("\"tool\"")))
        .unwrap();
    let mut pending = rows.clone();
    pending[tool_at].columns.insert(
        "data".into(),
        json!(
            json!({"type": "tool", "tool": "bash", "callID": "call_hc_1",
                     "state": {"status": "pending", "input": {}, "raw": ""}})
            .to_string()
        ),
    );
    pending[tool_at]
        .columns
        .insert("time_updated".into(), json!(1));
    // All messages of the minimal session are complete, so the pending part
    // is taken as it is.
    let first = parse_rows(pending, 0, None);
    let calls = first
        .events
        .iter()
        .filter(|e| e.kind == "tool.call")
        .count();
    assert_eq!(calls, 1);
    assert!(!first.events.iter().any(|e| e.kind == "tool.result"));
    let second = parse_rows(
        vec![rows[tool_at].clone()],
        first.events.len() as u64,
        Some(first.state.clone()),
    );
    assert_eq!(kinds_of(&second.events), ["tool.result", "command.run"]);
    let result = &second.events[0];
    let call = first.events.iter().find(|e| e.kind == "tool.call").unwrap();
    assert_eq!(result.parent_seq, Some(call.seq));
    assert_eq!(result.payload["output"], "file1\nfile2");
    assert_eq!(
        result.payload[NATIVE_KEY]["row"]["data"]["state"]["status"],
        "completed"
    );
    // Another change to the same part is an update event, not a duplicate.
    let mut again = rows[tool_at].clone();
    again.columns.insert("time_updated".into(), json!(99));
    let third = parse_rows(vec![again], 0, Some(second.state));
    assert_eq!(kinds_of(&third.events), ["meta:part.updated"]);
    assert_eq!(third.events[0].parent_seq, Some(call.seq));
}

#[test]
fn bad_rows_are_warnings_and_the_rest_is_captured() {
    let mut rows = session_rows(MINIMAL);
    let text_at = rows.iter().position(|r| r.table == Table::Part).unwrap();
    rows[text_at]
        .columns
        .insert("data".into(), json!("{not json\u{1b}[31m"));
    let msg_at = rows
        .iter()
        .rposition(|r| r.table == Table::Message)
        .unwrap();
    rows[msg_at].columns.insert("data".into(), json!("[1,2"));
    rows.push(Row {
        table: Table::Part,
        columns: json!({"id": "prt_orphan\u{7}", "message_id": "msg_gone", "session_id": MINIMAL,
                        "time_created": 5, "time_updated": 5, "data": "{\"type\":\"text\",\"text\":\"x\"}"})
        .as_object()
        .unwrap()
        .clone(),
    });
    let parsed = parse_rows(rows, 0, None);
    let messages: Vec<&str> = parsed.warnings.iter().map(|w| w.message.as_str()).collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(messages[0].starts_with("table part row prt_7b1f7a1d676601: data is not valid JSON"));
    assert!(messages.iter().any(|m| {
        m.starts_with("table message row msg_22641c1df001qJnKFFWeNckcN4: data is not valid JSON")
    }));
    assert!(
        messages
            .iter()
            .any(|m| m.contains("row prt_orphan\\u{7}: its message \"msg_gone\" is missing"))
    );
    assert!(messages.iter().all(|m| !m.chars().any(char::is_control)));
    let k = kinds_of(&parsed.events);
    assert!(k.contains(&"meta:part.unreadable".to_owned()));
    assert!(k.contains(&"meta:message.unreadable".to_owned()));
    assert!(k.contains(&"meta:part.orphaned".to_owned()));
    // The rest is there: the tool call, its result, both assistant texts.
    assert!(k.contains(&"tool.result".to_owned()));
    assert_eq!(k.iter().filter(|k| *k == "message.assistant").count(), 3);
}

fn header(native: &str) -> SessionHeader {
    let mut h = SessionHeader::new(
        git_session_schema::SessionId::new(native).unwrap(),
        Agent::Opencode,
        "2026-11-29T07:42:05.444Z",
    );
    h.native_id = Some(native.into());
    h
}

fn render(events: &[Event], header: &SessionHeader, native_id: &str, cwd: &str) -> NativeDoc {
    let none = |_: &git_session_schema::ArtifactId| None;
    let head = RenderHead {
        header,
        artifact: &none,
        native_id,
        cwd,
        now: "2026-12-01T00:00:00Z",
    };
    render_session(head, &mut events.iter().cloned()).unwrap()
}

#[test]
fn captured_rows_render_back_as_they_were() {
    for id in [AUTHENTIC, MINIMAL, "ses_0handcrafted0full000001"] {
        let rows = session_rows(id);
        let parsed = parse_rows(rows.clone(), 0, None);
        let doc = render(&parsed.events, &header(id), id, "/elsewhere/project");
        assert!(doc.losses.is_empty(), "{:?}", doc.losses);
        let written = doc.rows("proj", "");
        assert_eq!(written.len(), rows.len());
        // Session, then messages, then parts: parents before children.
        let order: Vec<Table> = written.iter().map(|w| w.table).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted);
        for r in &rows {
            let w = written
                .iter()
                .find(|w| w.table == r.table && w.id() == r.id())
                .unwrap_or_else(|| panic!("{id}: row {} not written", r.id()));
            let mut expected = r.columns.clone();
            if r.table == Table::Session {
                expected.insert("directory".into(), json!("/elsewhere/project"));
                expected.insert("project_id".into(), json!("proj"));
                expected.insert("path".into(), json!(""));
                // A workspace of another machine is not carried over.
                expected.remove("workspace_id");
            }
            // JSON text may differ in spacing; compare the values.
            let norm = |m: &Map<String, Value>| {
                let mut m = m.clone();
                if let Some(Value::String(d)) = m.get("data") {
                    m.insert("data".into(), serde_json::from_str(d).unwrap());
                }
                m
            };
            assert_eq!(norm(&w.columns), norm(&expected), "{id}: row {}", r.id());
        }
    }
}

#[test]
fn the_export_document_matches_opencode_export() {
    let parsed = parse_rows(session_rows(AUTHENTIC), 0, None);
    let doc = render(
        &parsed.events,
        &header(AUTHENTIC),
        AUTHENTIC,
        "/tmp/oracle-sample/opencode/project",
    );
    let mut session = doc.session.clone();
    session.insert(
        "project_id".into(),
        json!("339b79cf39b89bf4409a44344b9f1a5dfea2ed58"),
    );
    session.insert("path".into(), json!(""));
    let doc = NativeDoc { session, ..doc };
    let expected: Value = serde_json::from_str(EXPORT).unwrap();
    assert_eq!(doc.export(), expected);
}

#[test]
fn a_fork_moves_every_row_and_keeps_the_order() {
    let rows = session_rows(AUTHENTIC);
    let parsed = parse_rows(rows.clone(), 0, None);
    let fork = "ses_0fork0000000000000000001";
    let doc = render(&parsed.events, &header(AUTHENTIC), fork, "/p");
    assert_eq!(doc.id(), fork);
    let old: Vec<&str> = rows
        .iter()
        .filter(|r| r.table == Table::Part)
        .map(Row::id)
        .collect();
    let new: Vec<&str> = doc.parts.iter().map(Row::id).collect();
    assert_eq!(old.len(), new.len());
    for (o, n) in old.iter().zip(&new) {
        assert!(n.starts_with(o) && n != o, "{o} -> {n}");
    }
    let mut sorted = new.clone();
    sorted.sort();
    assert_eq!(sorted, new, "part ids keep their order");
    let message_ids: Vec<&str> = doc.messages.iter().map(Row::id).collect();
    for m in &doc.messages {
        assert_eq!(m.text("session_id"), Some(fork));
        if let Some(parent) = m.data().unwrap().get("parentID").and_then(Value::as_str) {
            assert!(
                message_ids.contains(&parent),
                "parentID {parent} follows the move"
            );
        }
    }
    for p in &doc.parts {
        assert!(message_ids.contains(&p.text("message_id").unwrap()));
    }
}

fn event(seq: u64, kind: &str, actor: &str, payload: Value) -> Event {
    Event::new(
        seq,
        format!("2026-11-29T07:42:{:02}Z", 10 + seq),
        Agent::Claude,
        actor,
        kind,
        git_session_schema::Level::History,
        payload,
    )
}

#[test]
fn another_agents_session_becomes_opencode_turns() {
    let events = vec![
        event(0, "session.start", "system", json!({"cwd": "/p"})),
        event(
            1,
            "message.user",
            "user",
            json!({"text": "Please write hello into note.txt"}),
        ),
        event(
            2,
            "message.thinking",
            "agent:claude",
            json!({"text": "A shell command will do."}),
        ),
        event(
            3,
            "message.assistant",
            "agent:claude",
            json!({"text": "I'll write it."}),
        ),
        event(
            4,
            "tool.call",
            "agent:claude",
            json!({"name": "Bash", "call_id": "toolu_1",
              "arguments": {"command": "echo hello > note.txt", "description": "Write"}}),
        ),
        event(
            5,
            "tool.result",
            "tool",
            json!({"call_id": "toolu_1", "output": "", "is_error": false}),
        ),
        event(
            6,
            "command.run",
            "agent:claude",
            json!({"cmd": "echo hello > note.txt"}),
        ),
        event(
            7,
            "tool.call",
            "agent:claude",
            json!({"name": "Frobnicate", "call_id": "toolu_2", "arguments": {}}),
        ),
        event(
            8,
            "message.assistant",
            "agent:claude",
            json!({"text": "Done: the note was written."}),
        ),
    ];
    let mut h = header("ses_0x");
    h.agent = Agent::Claude;
    h.native_id = Some("8c7d…".into());
    let sid = ids::session(1_795_938_130_000, "seed");
    let doc = render(&events, &h, &sid, "/p");
    let shape: Vec<String> = doc
        .messages
        .iter()
        .map(|m| {
            let d = m.data().unwrap();
            let parts: Vec<String> = doc
                .parts
                .iter()
                .filter(|p| p.text("message_id") == Some(m.id()))
                .map(|p| {
                    let pd = p.data().unwrap();
                    let t = pd["type"].as_str().unwrap().to_owned();
                    match t.as_str() {
                        "tool" => format!("tool {} {}", pd["tool"], pd["state"]["status"]),
                        _ => t,
                    }
                })
                .collect();
            format!(
                "{} {} [{}]",
                d["role"].as_str().unwrap(),
                d.get("finish").and_then(Value::as_str).unwrap_or("-"),
                parts.join(", ")
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            "user - [text]",
            "assistant tool-calls [reasoning, text, tool \"bash\" \"completed\"]",
            "assistant tool-calls [tool \"Frobnicate\" \"error\", text]",
        ]
    );
    let user = doc.messages[0].id().to_owned();
    for m in &doc.messages[1..] {
        let d = m.data().unwrap();
        assert_eq!(d["parentID"], json!(user));
        assert!(
            d["time"]["completed"].is_i64(),
            "assistant messages need time.completed"
        );
    }
    let bash = doc
        .parts
        .iter()
        .map(|p| p.data().unwrap())
        .find(|d| d.get("tool") == Some(&json!("bash")))
        .unwrap();
    assert_eq!(
        bash["state"]["input"],
        json!({"command": "echo hello > note.txt", "description": "Write"})
    );
    assert!(
        bash["state"]["time"]["end"].is_i64(),
        "completed states need time"
    );
    // Ids have OpenCode's shapes and sort in write order.
    for m in &doc.messages {
        assert!(
            ids::valid("msg", m.id()) && m.id().len() == 30,
            "{}",
            m.id()
        );
    }
    let pids: Vec<&str> = doc.parts.iter().map(Row::id).collect();
    let mut sorted = pids.clone();
    sorted.sort();
    assert_eq!(pids, sorted);
    // OpenCode sends another model's reasoning as text joined to the next
    // text part: it ends in a blank line so the two stay apart.
    let reasoning = doc
        .parts
        .iter()
        .map(|p| p.data().unwrap())
        .find(|d| d["type"] == "reasoning")
        .unwrap();
    assert_eq!(reasoning["text"], "A shell command will do.\n\n");
    assert_eq!(doc.session["title"], "Please write hello into note.txt");
    assert_eq!(doc.session["directory"], "/p");
    assert!(
        doc.losses.iter().any(|l| l.starts_with("tool-unmapped:")),
        "{:?}",
        doc.losses
    );
    assert!(
        doc.losses
            .iter()
            .any(|l| l.starts_with("tool-result-missing:")),
        "{:?}",
        doc.losses
    );
    // The export carries ids inside the objects.
    let export = doc.export();
    assert_eq!(export["info"]["id"], json!(sid));
    assert_eq!(
        export["messages"][1]["parts"][2]["messageID"],
        json!(doc.messages[1].id())
    );
}

#[test]
fn a_bad_session_id_is_refused() {
    let parsed = parse_rows(session_rows(MINIMAL), 0, None);
    let none = |_: &git_session_schema::ArtifactId| None;
    for bad in ["../x", "ses_a'b", "msg_abc", "ses_"] {
        let h = header(MINIMAL);
        let head = RenderHead {
            header: &h,
            artifact: &none,
            native_id: bad,
            cwd: "/p",
            now: "2026-12-01T00:00:00Z",
        };
        assert!(
            render_session(head, &mut parsed.events.iter().cloned()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn a_command_that_exits_non_zero_is_a_failed_result_with_its_exit_code() {
    // The real client stores a command that ran and failed as `completed`
    // with `metadata.exit`; only an interrupted or refused tool is `error`.
    let mut rows = session_rows(MINIMAL);
    let tool_at = rows
        .iter()
        .position(|r| r.text("data").is_some_and(|d| d.contains("\"tool\"")))
        .unwrap();
    let output = "cat: missing.txt: No such file or directory\n";
    rows[tool_at].columns.insert(
        "data".into(),
        json!(
            json!({"type": "tool", "tool": "bash", "callID": "call_hc_1",
                 "state": {"status": "completed", "input": {"command": "cat missing.txt"},
                           "output": output, "title": "cat missing.txt",
                           "metadata": {"output": output, "exit": 1, "truncated": false},
                           "time": {"start": 1, "end": 2}}})
            .to_string()
        ),
    );
    let parsed = parse_rows(rows, 0, None);
    let result = parsed
        .events
        .iter()
        .find(|e| e.kind == "tool.result")
        .unwrap();
    assert_eq!(result.payload["is_error"], true);
    assert_eq!(result.payload["exit_code"], 1);
    assert_eq!(result.payload["output"], output);
    let failure = crate::tools::failure(&result.payload).expect("marked failed");
    assert_eq!(failure.exit_code, Some(1));
    let run = parsed
        .events
        .iter()
        .find(|e| e.kind == "command.run")
        .unwrap();
    assert_eq!(run.payload["exit_code"], 1);
}

#[test]
fn a_handoff_brief_is_a_user_message_of_its_own_before_the_history() {
    let mut brief = event(0, "message.user", "user", json!({"text": "BRIEF"}));
    brief.agent = Agent::GitSession;
    brief.ts = "2026-12-01T00:00:00Z".into();
    let events = vec![
        brief,
        event(1, "message.user", "user", json!({"text": "first request"})),
        event(
            2,
            "message.assistant",
            "agent:claude",
            json!({"text": "ok"}),
        ),
    ];
    let doc = render(
        &events,
        &header("ses_0brief000000000000000001"),
        "ses_0brief000000000000000001",
        "/p",
    );
    let texts = |mid: &str| -> Vec<String> {
        doc.parts
            .iter()
            .filter(|p| p.text("message_id") == Some(mid))
            .filter_map(|p| {
                p.columns
                    .get("data")?
                    .get("text")?
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    };
    let users: Vec<&Row> = doc
        .messages
        .iter()
        .filter(|m| m.columns.get("data").and_then(|d| d.get("role")) == Some(&json!("user")))
        .collect();
    assert_eq!(users.len(), 2, "{:?}", doc.messages);
    assert_eq!(texts(users[0].id()), ["BRIEF"]);
    assert_eq!(texts(users[1].id()), ["first request"]);
    assert!(
        doc.messages[0].id() == users[0].id(),
        "the brief's message sorts first"
    );
}

#[test]
fn storage_files_become_the_rows_the_database_holds() {
    use crate::source::TreeIds;
    // Each sample message and part, written as a tree file (its `data`
    // plus its ids), becomes its row again: the same columns the parse
    // reads, the same `data`.
    let all: Value = serde_json::from_str(ROWS).unwrap();
    for table in ["message", "part"] {
        let mut n = 0;
        for row in all[table].as_array().unwrap() {
            let mut object: Map<String, Value> =
                serde_json::from_str(row["data"].as_str().unwrap()).unwrap();
            object.insert("id".into(), row["id"].clone());
            object.insert("sessionID".into(), row["session_id"].clone());
            if table == "part" {
                object.insert("messageID".into(), row["message_id"].clone());
            }
            let ids = TreeIds {
                id: row["id"].as_str().unwrap(),
                session: row["session_id"].as_str().unwrap(),
                message: row["message_id"].as_str(),
            };
            let got = storage::row(table, &ids, Value::Object(object)).unwrap();
            let data = |r: &Map<String, Value>| -> Value {
                serde_json::from_str(r["data"].as_str().unwrap()).unwrap()
            };
            assert_eq!(data(&got), data(row.as_object().unwrap()), "{}", row["id"]);
            for column in ["id", "session_id", "message_id"] {
                assert_eq!(
                    got.get(column),
                    row.get(column),
                    "{column} of {}",
                    row["id"]
                );
            }
            n += 1;
        }
        assert!(n > 0);
    }
    // A session file in its JSON names.
    let ids = TreeIds {
        id: AUTHENTIC,
        session: AUTHENTIC,
        message: None,
    };
    let session = storage::row(
        "session",
        &ids,
        json!({"id": AUTHENTIC, "projectID": "abc", "directory": "/w", "title": "T",
               "version": "0.15.0", "parentID": "ses_parent",
               "time": {"created": 5, "updated": 9}}),
    )
    .unwrap();
    assert_eq!(session["project_id"], "abc");
    assert_eq!(session["parent_id"], "ses_parent");
    assert_eq!(session["directory"], "/w");
    assert_eq!(session["time_created"], 5);
    assert_eq!(session["time_updated"], 9);
    // A file whose id is not its name, or no object, is refused.
    assert!(storage::row("session", &ids, json!({"id": "../../x"})).is_err());
    assert!(storage::row("part", &ids, json!([1])).is_err());
}

#[test]
fn storage_names_become_paths_only_when_they_are_ids() {
    assert!(storage::valid("session", AUTHENTIC));
    assert!(storage::valid("group", "global"));
    assert!(storage::valid(
        "group",
        "339b79cf39b89bf4409a44344b9f1a5dfea2ed58"
    ));
    for hostile in ["..", "ses_../x", "ses_a/b", "ses_a\u{1b}", "", "ses_a.b"] {
        assert!(!storage::valid("session", hostile), "{hostile:?}");
        assert!(!storage::valid("group", hostile), "{hostile:?}");
    }
    assert!(!storage::valid("message", "prt_x"));
    assert!(!storage::valid("part", "msg_x"));
    assert!(!storage::valid("other", "ses_x"));
}
