//! Tests of the Codex adapter beyond the conformance suite
//! (`tests/it/conformance.rs` checks every case under
//! `fixtures/codex/<case>/`: goldens `canonical.jsonl` and `facts.json`,
//! slicing, the L0 and L2 round trips, mutations): parse details, renders
//! into another directory, a second render byte-identical to the first,
//! the threads row, and the foreign-session writer.
//!
//! Each fixture case holds one rollout under `native/` (the path it had
//! under `CODEX_HOME`).

use std::path::{Path, PathBuf};

use git_session_schema::{Agent, Event, Level, SessionHeader, SessionId, kinds};
use serde_json::{Value, json};

use super::*;
use crate::{Records, RenderRequest};

const NOW: &str = "2026-12-01T10:00:00.000Z";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/codex")
}

/// Holds one fixture case: its name, rollout path (relative to the store
/// root) and bytes.
struct Case {
    name: String,
    relative: PathBuf,
    bytes: Vec<u8>,
}

fn rollouts_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rollouts_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

fn cases() -> Vec<Case> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixtures/codex exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("native").is_dir())
        .collect();
    names.sort();
    let cases: Vec<Case> = names
        .into_iter()
        .flat_map(|dir| {
            let native = dir.join("native");
            let mut files = Vec::new();
            rollouts_under(&native, &mut files);
            files.sort();
            assert!(!files.is_empty(), "{}: no rollout", dir.display());
            let dir_name = dir.file_name().unwrap().to_string_lossy().into_owned();
            // A thread of several files (a rotated one) is one case per file.
            let several = files.len() > 1;
            files
                .into_iter()
                .map(|file| {
                    let relative = file
                        .strip_prefix(&native)
                        .expect("under native/")
                        .to_owned();
                    Case {
                        name: if several {
                            format!("{dir_name}/{}", relative.display())
                        } else {
                            dir_name.clone()
                        },
                        bytes: std::fs::read(&file).expect("readable fixture"),
                        relative,
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect();
    // A renamed fixture directory must not silently shrink coverage.
    for wanted in [
        "default-model-roundtrip",
        "function-tools",
        "compacted-remote",
        "compacted-local",
        "forked",
        "crafted-minimal",
    ] {
        assert!(
            cases.iter().any(|c| c.name == wanted),
            "fixture {wanted} missing"
        );
    }
    cases
}

fn parse_bytes(bytes: &[u8], first_line: u64, next_seq: u64, state: Option<Value>) -> Parsed {
    parse_source("sessions/test.jsonl", bytes, first_line, next_seq, state)
}

/// [`parse_bytes`] of a file at `source` in the store.
fn parse_source(
    source: &str,
    bytes: &[u8],
    first_line: u64,
    next_seq: u64,
    state: Option<Value>,
) -> Parsed {
    Codex.parse(ParseInput {
        records: Records::lines(bytes, first_line, 0),
        next_seq,
        state,
        source,
        session: None,
        sidecar: None,
        memo: Default::default(),
    })
}

fn header_for(parsed: &Parsed) -> SessionHeader {
    let mut header = SessionHeader::new(
        SessionId::new("test-session").unwrap(),
        Agent::Codex,
        parsed.session.created.clone().unwrap_or_else(|| NOW.into()),
    );
    header.native_id = parsed.session.native_id.clone();
    header.cwd = parsed.session.cwd.clone();
    header
}

fn render_parsed(parsed: &Parsed, native_id: &str, cwd: &str) -> ChangeSet {
    let header = header_for(parsed);
    Codex
        .render(RenderRequest {
            header: &header,
            events: &parsed.events,
            artifacts: &[],
            native_id,
            cwd,
            now: NOW,
        })
        .expect("a captured rollout renders")
}

fn json_lines(bytes: &[u8]) -> Vec<Value> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .map(|l| serde_json::from_slice(l).expect("valid JSON line"))
        .collect()
}

/// Applies to a captured line what render documents it changes (the
/// thread header and the provider pin), so the comparison checks
/// everything else exactly.
fn expected_meta(line: &mut Value) {
    if line["payload"]["type"] == "thread_settings_applied" {
        line["payload"]["thread_settings"]
            .as_object_mut()
            .unwrap()
            .remove("model_provider_id");
    }
    if line["type"] == "session_meta" {
        let p = line["payload"].as_object_mut().unwrap();
        p.remove("model_provider");
        if !matches!(
            p.get("source").and_then(Value::as_str),
            Some("cli" | "vscode")
        ) {
            p.insert("source".into(), json!("cli"));
        }
    }
}

/// Returns the first differing leaf of two JSON values, for readable failures.
fn short_diff(a: &Value, b: &Value) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                let (p, q) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                if p != q || x.contains_key(k) != y.contains_key(k) {
                    return format!("{k}: {}", short_diff(p, q));
                }
            }
            String::new()
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                if p != q {
                    return format!("[{i}]: {}", short_diff(p, q));
                }
            }
            String::new()
        }
        _ => {
            let cut = |v: &Value| v.to_string().chars().take(300).collect::<String>();
            format!("{} != {}", cut(a), cut(b))
        }
    }
}

fn rollout_of(changes: &ChangeSet) -> &FileWrite {
    assert_eq!(changes.files.len(), 1, "one rollout per render");
    &changes.files[0]
}

#[test]
fn parse_numbers_every_line_once_and_contiguously() {
    for case in cases() {
        let parsed = parse_bytes(&case.bytes, 0, 7, None);
        for (i, e) in parsed.events.iter().enumerate() {
            assert_eq!(e.seq, 7 + i as u64, "{}", case.name);
        }
        // Exactly one event per line carries the line: nothing dropped,
        // nothing written twice on render.
        let lines = json_lines(&case.bytes);
        let carried: Vec<&Value> = parsed
            .events
            .iter()
            .filter_map(|e| e.payload.get(NATIVE_KEY))
            .collect();
        assert_eq!(carried.len(), lines.len(), "{}", case.name);
        for (a, b) in carried.iter().zip(&lines) {
            assert_eq!(*a, b, "{}", case.name);
        }
        let id = case.relative.to_string_lossy();
        let native = parsed.session.native_id.as_deref().expect("native id");
        assert!(id.ends_with(&format!("{native}.jsonl")), "{}", case.name);
        assert_eq!(
            parsed.session.cwd.as_deref(),
            Some("/tmp/oracle-sample/codex/project")
        );
    }
}

#[test]
fn parse_maps_the_default_model_turn() {
    let case = cases()
        .into_iter()
        .find(|c| c.name == "default-model-roundtrip")
        .unwrap();
    let parsed = parse_bytes(&case.bytes, 0, 0, None);
    let kinds_seen: Vec<&str> = parsed
        .events
        .iter()
        .filter(|e| e.kind != kinds::META)
        .map(|e| e.kind.as_str())
        .collect();
    assert_eq!(
        kinds_seen,
        [
            kinds::SESSION_START,
            kinds::MESSAGE_USER,
            kinds::MESSAGE_THINKING,
            kinds::MESSAGE_ASSISTANT,
            kinds::TOOL_CALL,
            kinds::COMMAND_RUN,
            kinds::TOOL_RESULT,
            kinds::MESSAGE_THINKING,
            kinds::MESSAGE_ASSISTANT,
        ]
    );
    let user = parsed
        .events
        .iter()
        .find(|e| e.kind == kinds::MESSAGE_USER)
        .unwrap();
    assert_eq!(user.payload["text"], "Please write hello into note.txt");
    assert_eq!(user.level, Level::History);
    let run = parsed
        .events
        .iter()
        .find(|e| e.kind == kinds::COMMAND_RUN)
        .unwrap();
    assert_eq!(run.payload["cmd"], "echo hello > note.txt");
    assert_eq!(run.payload["exit_code"], 0);
    let call = parsed
        .events
        .iter()
        .find(|e| e.kind == kinds::TOOL_CALL)
        .unwrap();
    let result = parsed
        .events
        .iter()
        .find(|e| e.kind == kinds::TOOL_RESULT)
        .unwrap();
    assert_eq!(result.parent_seq, Some(call.seq));
    assert_eq!(call.payload["name"], "exec");
    assert_eq!(call.payload["freeform"], true);
    // Harness context is kept, but not as something the user said.
    assert!(parsed.events.iter().any(|e| {
        e.kind == kinds::META
            && e.payload["injected"] == true
            && e.payload["text"]
                .as_str()
                .unwrap()
                .starts_with("<environment_context>")
    }));
}

#[test]
fn parse_derives_command_run_from_function_tool_output() {
    let case = cases()
        .into_iter()
        .find(|c| c.name == "function-tools")
        .unwrap();
    let parsed = parse_bytes(&case.bytes, 0, 0, None);
    let call = parsed
        .events
        .iter()
        .find(|e| e.kind == kinds::TOOL_CALL)
        .unwrap();
    assert_eq!(call.payload["name"], "exec_command");
    assert_eq!(
        call.payload["arguments"],
        json!({"cmd": "echo hello > note.txt"})
    );
    let runs: Vec<&Event> = parsed
        .events
        .iter()
        .filter(|e| e.kind == kinds::COMMAND_RUN)
        .collect();
    // The UI reported the command as well: exactly one command.run per run.
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].payload["exit_code"], 0);
}

#[test]
fn parse_keeps_compactions_as_checkpoints() {
    for (name, remote) in [("compacted-remote", true), ("compacted-local", false)] {
        let case = cases().into_iter().find(|c| c.name == name).unwrap();
        let parsed = parse_bytes(&case.bytes, 0, 0, None);
        let cp = parsed
            .events
            .iter()
            .find(|e| e.kind == kinds::CHECKPOINT)
            .unwrap_or_else(|| panic!("{name}: no checkpoint"));
        assert_eq!(cp.payload["remote"], remote, "{name}");
        assert_eq!(cp.payload["reason"], "compaction");
        let retained = cp.payload["retained_user_messages"].as_array().unwrap();
        assert!(
            retained
                .iter()
                .any(|t| t == "Please write hello into note.txt"),
            "{name}"
        );
        if !remote {
            assert!(
                cp.payload["summary"]
                    .as_str()
                    .unwrap()
                    .starts_with("Another language model")
            );
        }
    }
}

#[test]
fn parse_links_a_fork_to_its_parent() {
    let case = cases().into_iter().find(|c| c.name == "forked").unwrap();
    let parsed = parse_bytes(&case.bytes, 0, 0, None);
    assert_eq!(
        parsed.session.parent,
        Some(NativeParent {
            native_id: "01a22641-1298-70e1-90e6-4b6faeb436bb".into(),
            spawned_by: None,
            continues: false,
        })
    );
}

#[test]
fn render_moves_thread_settings_but_not_history_to_the_new_cwd() {
    let case = cases()
        .into_iter()
        .find(|c| c.name == "function-tools")
        .unwrap();
    let parsed = parse_bytes(&case.bytes, 0, 0, None);
    let new_id = "11111111-2222-7333-8444-555555555555";
    let changes = render_parsed(&parsed, new_id, "/home/u/repo");
    let file = rollout_of(&changes);
    assert!(
        file.path
            .to_string_lossy()
            .ends_with(&format!("-{new_id}.jsonl"))
    );
    let old = "/tmp/oracle-sample/codex/project";
    let mut want = json_lines(&case.bytes);
    want.iter_mut().for_each(expected_meta);
    let moved = |v: &mut Value| {
        let text = v.to_string().replace(old, "/home/u/repo");
        *v = serde_json::from_str(&text).unwrap();
    };
    for line in &mut want {
        let settings = line["payload"]["type"] == "thread_settings_applied";
        if line["type"] == "turn_context" || line["type"] == "session_meta" || settings {
            moved(&mut line["payload"]);
        }
    }
    let meta = &mut want[0]["payload"];
    meta["id"] = json!(new_id);
    meta["session_id"] = json!(new_id);
    let got = json_lines(&file.bytes);
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g == w, "line {i} differs:\n{}", short_diff(g, w));
    }
    // What the model was told about the old directory stays history.
    assert!(
        got.iter()
            .any(|l| l["type"] == "world_state" && l.to_string().contains(old))
    );
    assert!(
        got.iter()
            .any(|l| l["type"] == "response_item" && l.to_string().contains(old))
    );
}

#[test]
fn round_trip_gives_the_same_events() {
    // A segment of a rotated thread loses its `rollout_reference` line in a
    // render: the conformance suite checks it up to that remap.
    for case in cases().into_iter().filter(|c| !c.name.contains('/')) {
        let first = parse_bytes(&case.bytes, 0, 0, None);
        let id = first.session.native_id.clone().unwrap();
        let cwd = first.session.cwd.clone().unwrap();
        let changes = render_parsed(&first, &id, &cwd);
        let second = parse_bytes(&rollout_of(&changes).bytes, 0, 0, None);
        assert!(second.warnings.is_empty(), "{}", case.name);
        assert_eq!(first.events.len(), second.events.len(), "{}", case.name);
        for (a, b) in first.events.iter().zip(&second.events) {
            // Only the documented rewrites may differ.
            let mut a = a.clone();
            if let Some(native) = a.payload.get_mut(NATIVE_KEY) {
                expected_meta(native);
            }
            if a.kind == kinds::SESSION_START {
                let p = a.payload.as_object_mut().unwrap();
                p.remove("model_provider");
                p.insert("source".into(), b.payload["source"].clone());
            }
            assert!(
                &a == b,
                "{}: event {} differs after a round trip",
                case.name,
                a.seq
            );
        }
        // And a second render is byte-identical to the first.
        let again = render_parsed(&second, &id, &cwd);
        assert_eq!(
            rollout_of(&again).bytes,
            rollout_of(&changes).bytes,
            "{}",
            case.name
        );
    }
}

#[test]
fn render_describes_the_threads_row() {
    let case = cases()
        .into_iter()
        .find(|c| c.name == "crafted-minimal")
        .unwrap();
    let parsed = parse_bytes(&case.bytes, 0, 0, None);
    let id = parsed.session.native_id.clone().unwrap();
    let changes = render_parsed(&parsed, &id, "/home/u/repo");
    assert_eq!(changes.rows.len(), 1);
    let row = &changes.rows[0];
    assert_eq!(row.database, PathBuf::from("state_5.sqlite"));
    assert_eq!(row.table, "threads");
    assert_eq!(row.columns["id"], json!(id));
    assert_eq!(row.columns["cwd"], "/home/u/repo");
    assert_eq!(row.columns["source"], "cli");
    assert_eq!(row.columns["history_mode"], "legacy");
    assert_eq!(row.columns["model_provider"], "");
    assert_eq!(
        row.columns["first_user_message"],
        "CRAFTED-Q1: please list the files"
    );
    assert_eq!(
        row.columns["rollout_path"].as_str().map(PathBuf::from),
        Some(rollout_of(&changes).path.clone())
    );
    assert!(
        changes.appends.is_empty(),
        "no title, no session_index entry"
    );
}

#[test]
fn a_corrupt_session_meta_leaves_the_thread_id_of_the_file_name() {
    // The client looks a thread up by the last 36 characters of its file
    // name; with the first line cut in half, that is still its id.
    let case = cases()
        .into_iter()
        .find(|c| c.name == "crafted-minimal")
        .unwrap();
    let thread = "01a22641-0894-7711-86db-74d58edefe49";
    let source = format!("sessions/2026/11/29/rollout-2026-11-29T07-42-10-{thread}.jsonl");
    let first = case.bytes.iter().position(|&b| b == b'\n').unwrap();
    let mut bytes = case.bytes[..first / 2].to_vec();
    bytes.extend_from_slice(&case.bytes[first..]);
    let parse = |bytes: &[u8], source: &str| parse_source(source, bytes, 0, 0, None);
    let cut = parse(&bytes, &source);
    assert_eq!(cut.session.native_id.as_deref(), Some(thread));
    assert_eq!(cut.warnings[0].line, 0);
    assert!(
        !cut.warnings[0].message.contains("rollout-"),
        "the capture names the file, the warning need not: {}",
        cut.warnings[0].message
    );
    for e in &cut.events {
        let origin = e.origin.as_ref().unwrap().native_id.as_deref().unwrap();
        assert!(origin.starts_with(thread), "{origin}");
    }
    // An intact session_meta still names the thread, whatever the file is
    // called, and a name without a UUID gives no id of its own.
    let whole = parse(&case.bytes, &source);
    let named = parse(&case.bytes, "sessions/test.jsonl");
    assert_eq!(whole.session.native_id, named.session.native_id);
    assert!(named.session.native_id.is_some());
    assert_eq!(parse(&bytes, "sessions/test.jsonl").session.native_id, None);
}

#[test]
fn one_bad_line_is_a_warning() {
    let case = cases()
        .into_iter()
        .find(|c| c.name == "crafted-minimal")
        .unwrap();
    let mut bytes = Vec::new();
    for (i, line) in case.bytes.split(|&b| b == b'\n').enumerate() {
        if i == 2 {
            bytes.extend_from_slice(b"{not json\n");
        }
        bytes.extend_from_slice(line);
        bytes.push(b'\n');
    }
    let good = parse_bytes(&case.bytes, 0, 0, None);
    let bad = parse_bytes(&bytes, 0, 0, None);
    assert_eq!(bad.warnings.len(), 1);
    assert_eq!(bad.warnings[0].line, 2);
    // The bad line is kept, marked unparsed; everything else is as before.
    assert_eq!(bad.events.len(), good.events.len() + 1);
    let kept = bad
        .events
        .iter()
        .find(|e| e.payload.get("unparsed").is_some())
        .unwrap();
    assert_eq!(
        (kept.kind.as_str(), kept.payload["unparsed"].as_str()),
        (kinds::META, Some("{not json"))
    );
    let texts = |p: &Parsed| -> Vec<Value> {
        p.events
            .iter()
            .filter(|e| e.payload.get("unparsed").is_none())
            .map(|e| e.payload.clone())
            .collect()
    };
    assert_eq!(texts(&bad), texts(&good));
    // Written back, the bad line is there again, as it was.
    let mut sink = crate::MemorySink::default();
    let header = header_for(&bad);
    let lookup = |_: &git_session_schema::ArtifactId| None;
    let head = crate::RenderHead {
        header: &header,
        artifact: &lookup,
        native_id: header.native_id.as_deref().unwrap_or_default(),
        cwd: "/work",
        now: "2026-01-01T00:00:00.000Z",
    };
    Codex
        .render_to(head, &mut bad.events.clone().into_iter(), &mut sink)
        .unwrap();
    let text = String::from_utf8(sink.files[0].bytes.clone()).unwrap();
    assert!(text.lines().any(|l| l == "{not json"), "{text}");
}

/// Builds a session as another agent (here shaped like Claude Code) would
/// have captured it.
fn foreign_events() -> Vec<Event> {
    let long_id = format!("toolu_{}", "x".repeat(70));
    let e = |seq: u64, actor: &str, kind: &str, payload: Value| {
        Event::new(
            seq,
            format!("2026-11-20T08:00:0{seq}.000Z"),
            Agent::Claude,
            actor,
            kind,
            Level::History,
            payload,
        )
    };
    vec![
        e(
            0,
            "system",
            kinds::SESSION_START,
            json!({"cwd": "/elsewhere"}),
        ),
        e(
            1,
            "user",
            kinds::MESSAGE_USER,
            json!({"text": "Please write hello into note.txt"}),
        ),
        e(
            2,
            "agent:claude",
            kinds::MESSAGE_THINKING,
            json!({"text": "A shell command will do."}),
        ),
        e(
            3,
            "agent:claude",
            kinds::MESSAGE_ASSISTANT,
            json!({"text": "I'll create the note."}),
        ),
        e(
            4,
            "agent:claude",
            kinds::TOOL_CALL,
            json!({"call_id": long_id, "name": "Bash",
            "arguments": {"command": "echo hello > note.txt", "description": "Write a note"}}),
        ),
        e(
            5,
            "tool",
            kinds::TOOL_RESULT,
            json!({"call_id": long_id, "output": "(no output)"}),
        ),
        e(
            6,
            "agent:claude",
            kinds::COMMAND_RUN,
            json!({"cmd": "echo hello > note.txt", "exit_code": 0}),
        ),
        e(
            7,
            "agent:claude",
            kinds::MESSAGE_ASSISTANT,
            json!({"text": "Done: the note was written."}),
        ),
    ]
}

#[test]
fn foreign_session_becomes_a_minimal_legacy_rollout() {
    let events = foreign_events();
    let mut header = SessionHeader::new(
        SessionId::new("s1").unwrap(),
        Agent::Claude,
        "2026-11-20T08:00:00Z",
    );
    header.title = Some("Write a note".into());
    let id = "01a22641-0000-7000-8000-000000000001";
    let changes = Codex
        .render(RenderRequest {
            header: &header,
            events: &events,
            artifacts: &[],
            native_id: id,
            cwd: "/home/u/repo",
            now: NOW,
        })
        .unwrap();
    let file = rollout_of(&changes);
    assert_eq!(
        file.path,
        PathBuf::from(format!(
            "sessions/2026/11/20/rollout-2026-11-20T08-00-00-{id}.jsonl"
        ))
    );
    let lines = json_lines(&file.bytes);
    let meta = &lines[0];
    assert_eq!(meta["type"], "session_meta");
    assert_eq!(meta["payload"]["id"], id);
    assert_eq!(meta["payload"]["cwd"], "/home/u/repo");
    assert_eq!(meta["payload"]["source"], "cli");
    assert!(meta["payload"].get("model_provider").is_none());
    assert!(meta["payload"].get("history_mode").is_none());
    for line in &lines {
        assert!(line["timestamp"].is_string(), "{line}");
        assert!(line.get("ordinal").is_none(), "{line}");
        if line["payload"]["type"] == "message" {
            assert!(line["payload"]["content"].is_array(), "{line}");
        }
        if let Some(call) = line["payload"]["call_id"].as_str() {
            assert!(call.len() <= 64, "{call}");
        }
    }
    assert!(lines.iter().any(|l| l["payload"]["type"] == "user_message"));
    assert!(
        changes
            .losses
            .iter()
            .any(|l| l.starts_with("thinking-dropped: seq "))
    );
    assert!(
        changes
            .losses
            .iter()
            .any(|l| l.starts_with("derived-event-folded: seq ") && l.contains("command.run"))
    );
    assert_eq!(changes.appends.len(), 1);
    assert_eq!(
        changes.appends[0].path,
        PathBuf::from("session_index.jsonl")
    );

    // L0: what was said and done comes back from the rendered rollout.
    let back = parse_bytes(&file.bytes, 0, 0, None);
    assert!(back.warnings.is_empty(), "{:?}", back.warnings);
    let turns = |evs: &[Event]| -> Vec<(String, Value, Value)> {
        evs.iter()
            .filter(|e| {
                matches!(
                    e.kind.as_str(),
                    kinds::MESSAGE_USER
                        | kinds::MESSAGE_ASSISTANT
                        | kinds::TOOL_CALL
                        | kinds::TOOL_RESULT
                )
            })
            .map(|e| {
                let p = &e.payload;
                let body = p
                    .get("text")
                    .or_else(|| p.get("output"))
                    .cloned()
                    .unwrap_or(Value::Null);
                // A shell call is mapped to Codex's own shell tool: what must
                // survive is the command, not the argument shape.
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                let call = p.get("arguments").map(|a| {
                    crate::shell_command(name, a)
                        .map(Value::String)
                        .unwrap_or_else(|| a.clone())
                });
                (e.kind.clone(), body, call.unwrap_or(Value::Null))
            })
            .collect()
    };
    assert_eq!(turns(&back.events), turns(&events));
    let call = back
        .events
        .iter()
        .find(|e| e.kind == kinds::TOOL_CALL)
        .unwrap();
    // Claude's Bash arrives as Codex's own shell tool; its description,
    // which exec_command has no place for, is a note the model sees.
    assert_eq!(call.payload["name"], "exec_command");
    assert_eq!(
        call.payload["arguments"],
        json!({"cmd": "echo hello > note.txt",
               "note": "[arguments of the original Bash call: description=Write a note]"})
    );
    let result = back
        .events
        .iter()
        .find(|e| e.kind == kinds::TOOL_RESULT)
        .unwrap();
    assert_eq!(result.parent_seq, Some(call.seq));
}

#[test]
fn render_refuses_what_codex_cannot_resume() {
    let events = foreign_events();
    let header = SessionHeader::new(
        SessionId::new("s1").unwrap(),
        Agent::Claude,
        "2026-11-20T08:00:00Z",
    );
    let bad_id = Codex.render(RenderRequest {
        header: &header,
        events: &events,
        artifacts: &[],
        native_id: "not-a-uuid",
        cwd: "/r",
        now: NOW,
    });
    assert!(matches!(bad_id, Err(RenderError::Request(_))));
    let only_thinking = [events[2].clone()];
    let empty = Codex.render(RenderRequest {
        header: &header,
        events: &only_thinking,
        artifacts: &[],
        native_id: "01a22641-0000-7000-8000-000000000001",
        cwd: "/r",
        now: NOW,
    });
    assert!(matches!(empty, Err(RenderError::Empty(_))));
}

#[test]
fn apply_patch_calls_become_file_edits() {
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** Update File: src/b.rs\n@@\n-old\n+new\n*** End Patch\n";
    let call = json!({"timestamp": "2026-11-29T08:00:00.000Z", "type": "response_item",
        "payload": {"type": "custom_tool_call", "name": "apply_patch", "input": patch, "call_id": "c1"}});
    let out = json!({"timestamp": "2026-11-29T08:00:01.000Z", "type": "response_item",
        "payload": {"type": "custom_tool_call_output", "call_id": "c1", "output": "Success."}});
    let bytes = format!("{call}\n{out}\n");
    let parsed = parse_bytes(bytes.as_bytes(), 0, 0, None);
    let edits: Vec<&Event> = parsed
        .events
        .iter()
        .filter(|e| e.kind == kinds::FILE_EDIT)
        .collect();
    assert_eq!(edits.len(), 2);
    assert_eq!(edits[0].payload["path"], "a.txt");
    assert_eq!(edits[0].payload["diff"], "*** Add File: a.txt\n+hello\n");
    assert_eq!(edits[1].payload["path"], "src/b.rs");
    assert_eq!(edits[1].parent_seq, Some(1));
    assert!(edits.iter().all(|e| e.payload.get(NATIVE_KEY).is_none()));
}

#[test]
fn session_files_are_rollouts_under_sessions() {
    let yes = [
        "sessions/2026/11/29/rollout-2026-11-29T07-42-05-01a22641-0894-7711-86db-74d58edefe49.jsonl",
        "sessions/rollout-01a22641-0894-7711-86db-74d58edefe49.jsonl",
        "archived_sessions/rollout-2026-11-29T07-42-05-01a22641-0894-7711-86db-74d58edefe49.jsonl",
    ];
    let no = [
        "sessions/2026/11/29/01a22641-0894-7711-86db-74d58edefe49.jsonl",
        "history.jsonl",
        "session_index.jsonl",
        "sessions/2026/11/29/rollout-notes.jsonl",
        "other/rollout-01a22641-0894-7711-86db-74d58edefe49.jsonl",
    ];
    for p in yes {
        assert!(Codex.is_session_file(Path::new(p)), "{p}");
    }
    for p in no {
        assert!(!Codex.is_session_file(Path::new(p)), "{p}");
    }
    let home = Path::new("/home/u");
    assert_eq!(
        Codex.store_root(&|_| None, home),
        PathBuf::from("/home/u/.codex")
    );
    let env = |k: &str| (k == "CODEX_HOME").then(|| "/x/codex".to_owned());
    assert_eq!(Codex.store_root(&env, home), PathBuf::from("/x/codex"));
}

#[test]
fn small_helpers() {
    assert!(is_injected(
        "<environment_context>\n  <cwd>/x</cwd>\n</environment_context>"
    ));
    assert!(!is_injected("<b>bold</b> but more"));
    assert!(!is_injected("Please write hello"));
    assert_eq!(
        exit_code("Chunk ID: x\nProcess exited with code 3\nOutput:\nhi"),
        Some(3)
    );
    assert_eq!(
        command_output("Process exited with code 0\nOutput:\nhi\n"),
        "hi\n"
    );
    assert_eq!(tail("abcdef", 3), "def");
    assert_eq!(tail("ééé", 3), "é");
    let s = FileStamp::parse("2026-11-29T07:42:05.987Z").unwrap();
    assert_eq!(s.file_time, "2026-11-29T07-42-05");
    assert_eq!(s.epoch_ms, 1_795_938_125_987);
    assert!(FileStamp::parse("2026-11-29T07:42:05+02:00").is_none());
    assert!(is_uuid("01a22641-0894-7711-86db-74d58edefe49"));
    assert!(!is_uuid("01a22641-0894-7711-86db-74d58edefe4"));
}

#[test]
fn fork_alone_keeps_its_parent_reference_and_says_so() {
    let case = cases().into_iter().find(|c| c.name == "forked").unwrap();
    let parsed = parse_bytes(&case.bytes, 0, 0, None);
    let id = parsed.session.native_id.clone().unwrap();
    let changes = render_parsed(&parsed, &id, "/r");
    let lines = json_lines(&rollout_of(&changes).bytes);
    assert!(lines[0]["payload"]["history_base"].is_object());
    assert!(
        changes
            .losses
            .iter()
            .any(|l| l.contains("01a22641-1298-70e1-90e6-4b6faeb436bb"))
    );
}

#[test]
fn fork_with_inherited_events_renders_self_contained() {
    // The fork's parent rollout is the compacted-local case (the sample set
    // forked that very thread, and its copy is byte-identical).
    let all = cases();
    let parent = all.iter().find(|c| c.name == "compacted-local").unwrap();
    let fork = all.iter().find(|c| c.name == "forked").unwrap();
    let p = parse_bytes(&parent.bytes, 0, 0, None);
    let f = parse_bytes(&fork.bytes, 0, p.events.len() as u64, None);
    let mut events = p.events.clone();
    events.extend(f.events.iter().cloned());
    let header = header_for(&f);
    let id = f.session.native_id.clone().unwrap();
    let changes = Codex
        .render(RenderRequest {
            header: &header,
            events: &events,
            artifacts: &[],
            native_id: &id,
            cwd: "/tmp/oracle-sample/codex/project",
            now: NOW,
        })
        .unwrap();
    assert!(changes.losses.is_empty(), "{:?}", changes.losses);
    let got = json_lines(&rollout_of(&changes).bytes);
    let parent_lines = json_lines(&parent.bytes);
    let fork_lines = json_lines(&fork.bytes);
    assert_eq!(got.len(), parent_lines.len() + fork_lines.len() - 1);
    let meta = &got[0];
    assert_eq!(meta["ordinal"], 0);
    assert_eq!(meta["payload"]["id"], id.as_str());
    for gone in [
        "history_base",
        "forked_from_id",
        "forked_from_ordinal_exclusive",
    ] {
        assert!(meta["payload"].get(gone).is_none(), "{gone}");
    }
    assert_eq!(
        got.iter().filter(|l| l["type"] == "session_meta").count(),
        1
    );
    let mut want: Vec<Value> = parent_lines[1..].to_vec();
    want.extend(fork_lines[1..].iter().cloned());
    want.iter_mut().for_each(expected_meta);
    assert!(
        got[1..] == want[..],
        "history lines are written as captured"
    );
}

#[test]
fn thread_name_event_gives_the_title() {
    let meta = json!({"timestamp": "2026-11-29T08:00:00.000Z", "type": "session_meta",
        "payload": {"id": "01a22641-0000-7000-8000-000000000009", "timestamp": "2026-11-29T08:00:00.000Z",
                    "cwd": "/r", "originator": "x", "cli_version": "0"}});
    let name = json!({"timestamp": "2026-11-29T08:00:01.000Z", "type": "event_msg",
        "payload": {"type": "thread_name_updated", "thread_id": "x", "thread_name": "Fix the parser"}});
    let first = parse_bytes(format!("{meta}\n").as_bytes(), 0, 0, None);
    assert_eq!(first.session.title, None);
    let next = parse_bytes(format!("{name}\n").as_bytes(), 1, 1, Some(first.state));
    assert_eq!(next.session.title.as_deref(), Some("Fix the parser"));
    assert_eq!(
        next.session.cwd.as_deref(),
        Some("/r"),
        "facts persist across slices"
    );
}

#[test]
fn foreign_events_after_a_paginated_thread_get_ordinals() {
    let case = cases()
        .into_iter()
        .find(|c| c.name == "function-tools")
        .unwrap();
    let mut parsed = parse_bytes(&case.bytes, 0, 0, None);
    let seq = parsed.events.len() as u64;
    parsed.events.push(Event::new(
        seq,
        "2026-11-30T08:00:00Z",
        Agent::Claude,
        "user",
        kinds::MESSAGE_USER,
        Level::History,
        json!({"text": "continued elsewhere"}),
    ));
    let id = parsed.session.native_id.clone().unwrap();
    let changes = render_parsed(&parsed, &id, "/r");
    let lines = json_lines(&rollout_of(&changes).bytes);
    let ordinals: Vec<u64> = lines
        .iter()
        .map(|l| l["ordinal"].as_u64().unwrap())
        .collect();
    let want: Vec<u64> = (0..lines.len() as u64).collect();
    assert_eq!(
        ordinals, want,
        "a paginated rollout needs an ordinal on every line"
    );
    assert_eq!(
        lines[lines.len() - 2]["payload"]["content"][0]["text"],
        "continued elsewhere"
    );
    assert_eq!(
        lines[lines.len() - 2]["timestamp"],
        "2026-11-30T08:00:00.000Z"
    );
}

/// Counts the bytes that reached the sink, shared with whoever watches.
struct CountingSink(std::rc::Rc<std::cell::Cell<usize>>);

impl crate::FileSink for CountingSink {
    fn begin(&mut self, _path: &Path) -> Result<(), String> {
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.0.set(self.0.get() + bytes.len());
        Ok(())
    }
}

#[test]
fn render_streams_lines_before_later_events_are_pulled() {
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    // A long thread: the function-tools turns, forty times over.
    let case = cases()
        .into_iter()
        .find(|c| c.name == "function-tools")
        .unwrap();
    let parsed = parse_bytes(&case.bytes, 0, 0, None);
    let mut events = parsed.events.clone();
    for _ in 0..40 {
        events.extend(parsed.events[1..].iter().cloned());
    }
    let header = header_for(&parsed);
    let id = parsed.session.native_id.clone().unwrap();
    let cwd = parsed.session.cwd.clone().unwrap();
    let lookup = |_: &git_session_schema::ArtifactId| None;
    let head = RenderHead {
        header: &header,
        artifact: &lookup,
        native_id: &id,
        cwd: &cwd,
        now: NOW,
    };
    let written = Rc::new(Cell::new(0usize));
    // What had reached the sink when each event was pulled.
    let seen = RefCell::new(Vec::new());
    let mut pulled = events
        .iter()
        .cloned()
        .inspect(|_| seen.borrow_mut().push(written.get()));
    let mut sink = CountingSink(written.clone());
    Codex.render_to(head, &mut pulled, &mut sink).unwrap();
    let total = written.get();
    assert!(total > 10 * FLUSH_AT, "{total} bytes is too short a test");

    // Every event with a native line adds one line, in order, so what was
    // made before event `i` was pulled is known from the whole file; all
    // but one buffer of it must have reached the sink.
    let whole = render_parsed(
        &Parsed {
            events: events.clone(),
            ..Default::default()
        },
        &id,
        &cwd,
    );
    let file = &rollout_of(&whole).bytes;
    assert_eq!(file.len(), total, "the streamed file is the whole file");
    let mut lines = file.split_inclusive(|&b| b == b'\n').map(<[u8]>::len);
    let mut made = 0usize;
    for (i, (event, &out)) in events.iter().zip(seen.borrow().iter()).enumerate() {
        assert!(
            made < out + FLUSH_AT,
            "event {i}: {made} bytes made, only {out} reached the sink"
        );
        if native_line(event).is_some() {
            made += lines.next().unwrap();
        }
    }
    assert_eq!(made, total);
}

#[test]
fn segment_origins_keep_the_files_of_one_thread_apart() {
    let thread = "019a1d2e-5b7c-7e01-9c3a-2f4e6a8b0c11";
    let meta = |segment: Option<&str>| SessionMeta {
        id: Some(thread.to_owned()),
        segment_id: segment.map(str::to_owned),
        ..SessionMeta::default()
    };
    let live = format!("sessions/2026/11/29/rollout-2026-11-29T07-42-10-{thread}.jsonl");
    // A thread's only file keeps the origins it always had.
    assert_eq!(segment_of(&meta(None), &live), None);
    assert_eq!(
        segment_of(&meta(Some("s-1")), &live).as_deref(),
        Some("s-1")
    );
    // A hostile segment id cannot make a primary origin look derived.
    let odd = segment_of(&meta(Some("a/b#L3\u{1b}")), &live).unwrap();
    assert_eq!(odd, "a_b_L3_");
    // A paginated successor: the rollout id of its name is not the thread's.
    let other = "019a1d40-0000-7000-8000-000000000001";
    let successor = format!("sessions/2026/11/30/rollout-2026-11-30T01-00-00-{other}.jsonl");
    assert_eq!(segment_of(&meta(None), &successor).as_deref(), Some(other));
    let bytes = format!(
        "{{\"timestamp\":\"2026-11-29T08:10:00.000Z\",\"type\":\"session_meta\",\"payload\":{{\"id\":\"{thread}\",\"segment_id\":\"s-2\"}}}}\n"
    );
    let parsed = parse(ParseInput {
        records: crate::Records::lines(bytes.as_bytes(), 0, 0),
        next_seq: 0,
        state: None,
        source: &live,
        session: None,
        sidecar: None,
        memo: Default::default(),
    });
    assert_eq!(
        parsed.events[0]
            .origin
            .as_ref()
            .unwrap()
            .native_id
            .as_deref(),
        Some(format!("{thread}@s-2#L0").as_str())
    );
}
