//! Tests of the Pi adapter beyond the conformance suite
//! (`tests/it/conformance.rs` checks every fixture case under
//! `fixtures/pi/<case>/`: goldens `canonical.jsonl` and `facts.json`,
//! slicing, the L0 and L2 round trips, mutations): Pi's own write-back
//! rules (header, key order, v1/v2 migration, fixed point), trees,
//! foreign sessions, hostile ids, bad input.
//!
//! Each case has `native/` (a copy of a store root: `sessions/<dir>/...`)
//! and a `CASE.md`.

use std::path::{Path, PathBuf};

use git_session_adapters::pi::{NATIVE_KEY, Pi, session_dir_name};
use git_session_adapters::{Adapter, ParseInput, Parsed, Records, RenderError, RenderRequest};
use git_session_schema::{Agent, Event, Level, SessionHeader, SessionId, kinds};
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/pi")
}

struct Case {
    name: String,
    source: String,
    bytes: Vec<u8>,
}

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

fn cases() -> Vec<Case> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixtures/pi exists")
        .map(|e| e.expect("case entry").path())
        .filter(|p| p.join("native").is_dir())
        .collect();
    dirs.sort();
    let mut out = Vec::new();
    for dir in dirs {
        let native = dir.join("native");
        let files: Vec<PathBuf> = walk(&native)
            .into_iter()
            .filter(|rel| Pi.is_session_file(rel))
            .collect();
        assert_eq!(
            files.len(),
            1,
            "one session file per case in {}",
            dir.display()
        );
        let rel = &files[0];
        out.push(Case {
            name: dir.file_name().unwrap().to_string_lossy().into_owned(),
            source: rel.to_string_lossy().replace('\\', "/"),
            bytes: std::fs::read(native.join(rel)).expect("fixture readable"),
        });
    }
    assert!(
        out.len() >= 11,
        "expected the fixture cases, found {}",
        out.len()
    );
    out
}

fn parse(source: &str, bytes: &[u8]) -> Parsed {
    Pi.parse(ParseInput {
        records: Records::Lines {
            bytes,
            first_line: 0,
            offset: 0,
        },
        session: None,
        next_seq: 0,
        state: None,
        source,
        sidecar: None,
        memo: Default::default(),
    })
}

fn header_for(parsed: &Parsed) -> SessionHeader {
    let s = &parsed.session;
    let native = s.native_id.clone().unwrap();
    let mut h = SessionHeader::new(
        SessionId::new(native.clone()).unwrap(),
        Agent::Pi,
        s.created
            .clone()
            .unwrap_or_else(|| "2026-12-01T00:00:00.000Z".into()),
    );
    h.native_id = Some(native);
    h.cwd = s.cwd.clone();
    h
}

/// Renders parsed events as their own session (same id and cwd).
fn render(parsed: &Parsed, cwd: &str) -> (PathBuf, Vec<u8>, Vec<String>) {
    let header = header_for(parsed);
    let changes = Pi
        .render(RenderRequest {
            header: &header,
            events: &parsed.events,
            artifacts: &parsed.artifacts,
            native_id: header.native_id.as_deref().unwrap(),
            cwd,
            now: "2026-12-01T00:00:00Z",
        })
        .expect("renders");
    assert_eq!(changes.files.len(), 1);
    let f = changes.files.into_iter().next().unwrap();
    (f.path, f.bytes, changes.losses)
}

/// Lines of a file as JSON values (raw text for lines that are not JSON).
fn lines(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.to_owned())))
        .collect()
}

#[test]
fn render_writes_every_entry_back_in_file_order() {
    for c in cases() {
        let parsed = parse(&c.source, &c.bytes);
        let cwd = parsed.session.cwd.clone().unwrap();
        let (path, bytes, _) = render(&parsed, &cwd);
        let native = lines(&c.bytes);
        let written = lines(&bytes);
        let header = &written[0];
        assert_eq!(header["type"], "session", "{}", c.name);
        assert_eq!(header["version"], 3, "{}", c.name);
        assert_eq!(header["id"], json!(parsed.session.native_id), "{}", c.name);
        assert_eq!(header["cwd"], json!(cwd), "{}", c.name);
        let keys: Vec<&str> = header
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys[..3], ["type", "version", "id"], "{}", c.name);
        assert_eq!(written.len(), native.len(), "{}: one line per line", c.name);
        let migrated = native[0]
            .get("version")
            .and_then(Value::as_u64)
            .unwrap_or(1)
            < 3;
        if migrated {
            // Written as Pi's migration leaves it: every entry linked.
            for (n, e) in written.iter().enumerate().skip(1) {
                if e.is_object() {
                    assert!(e["id"].is_string(), "{} line {n}: {e}", c.name);
                    assert!(e.get("parentId").is_some(), "{} line {n}", c.name);
                    assert_ne!(e.pointer("/message/role"), Some(&json!("hookMessage")));
                }
            }
        } else {
            assert_eq!(written[1..], native[1..], "{}: entries differ", c.name);
            if native[0].get("timestamp").is_some() {
                assert_eq!(Path::new(&c.source), path, "{}: same file name", c.name);
            }
            // Key order of entries as Pi writes them (the schovest loader
            // peeks the first "id" of a line).
            for (n, line) in String::from_utf8_lossy(&bytes).lines().enumerate().skip(1) {
                if let Ok(Value::Object(e)) = serde_json::from_str::<Value>(line)
                    && e.contains_key("id")
                {
                    let keys: Vec<&str> = e.keys().map(String::as_str).collect();
                    assert_eq!(keys[..2], ["type", "id"], "{} line {n}", c.name);
                }
            }
        }
        // A render is a fixed point: capturing and rendering it again
        // gives the same file.
        let again = parse(&path.to_string_lossy(), &bytes);
        let (path2, bytes2, _) = render(&again, &cwd);
        assert_eq!(path2, path, "{}", c.name);
        assert_eq!(
            String::from_utf8_lossy(&bytes2),
            String::from_utf8_lossy(&bytes),
            "{}",
            c.name
        );
        let kinds = |p: &Parsed| p.events.iter().map(|e| e.kind.clone()).collect::<Vec<_>>();
        assert_eq!(kinds(&again), kinds(&parsed), "{}: same events", c.name);
    }
}

#[test]
fn a_render_into_another_directory_moves_the_header_cwd() {
    let c = cases()
        .into_iter()
        .find(|c| c.name == "roundtrip-1.6.0")
        .unwrap();
    let parsed = parse(&c.source, &c.bytes);
    let (path, bytes, losses) = render(&parsed, "/home/me/repo");
    assert!(losses.is_empty(), "{losses:?}");
    assert!(path.starts_with(Path::new("sessions").join(session_dir_name("/home/me/repo"))));
    assert_eq!(lines(&bytes)[0]["cwd"], "/home/me/repo");
}

fn by_native<'a>(p: &'a Parsed, id: &str) -> &'a Event {
    p.events
        .iter()
        .find(|e| e.origin.as_ref().and_then(|o| o.native_id.as_deref()) == Some(id))
        .unwrap_or_else(|| panic!("no event for {id}"))
}

/// The seq of the last event made from entry `id` (the one children link to).
fn last_of(p: &Parsed, id: &str) -> u64 {
    p.events
        .iter()
        .filter(|e| {
            e.origin
                .as_ref()
                .and_then(|o| o.native_id.as_deref())
                .is_some_and(|n| n == id || n.strip_prefix(id).is_some_and(|r| r.starts_with('#')))
        })
        .map(|e| e.seq)
        .max()
        .unwrap()
}

#[test]
fn every_entry_type_maps_and_the_tree_keeps_its_branches() {
    let c = cases()
        .into_iter()
        .find(|c| c.name == "crafted-every-type")
        .unwrap();
    let p = parse(&c.source, &c.bytes);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.session.title.as_deref(), Some("Every entry type"));
    let kind = |id: &str| by_native(&p, id).kind.clone();
    assert_eq!(kind("m1"), kinds::META);
    assert_eq!(by_native(&p, "m1").payload["record_type"], "model_change");
    assert_eq!(kind("u1"), kinds::MESSAGE_USER);
    assert_eq!(kind("u1#1"), kinds::MESSAGE_USER, "the image");
    assert!(by_native(&p, "u1#1").payload["image"]["artifact"].is_string());
    assert_eq!(kind("a1"), kinds::MESSAGE_THINKING);
    let opaque = &by_native(&p, "a1").payload["opaque"];
    assert_eq!(opaque["signature"], "reasoning_content");
    assert_eq!(opaque["model"], "mock-model");
    assert_eq!(kind("a1#2"), kinds::TOOL_CALL);
    assert_eq!(kind("r4"), kinds::TOOL_RESULT);
    assert_eq!(by_native(&p, "r4").payload["is_error"], true);
    assert_eq!(by_native(&p, "r4").refs.len(), 1, "the result's image");
    assert_eq!(kind("b1"), kinds::COMMAND_RUN);
    assert_eq!(kind("c1"), kinds::CHECKPOINT);
    assert_eq!(by_native(&p, "c1").payload["first_kept"], "r2");
    assert_eq!(kind("x2"), kinds::MESSAGE_USER);
    assert_eq!(by_native(&p, "x2").actor, "system");
    assert_eq!(kind("x3"), kinds::MESSAGE_USER);
    assert_eq!(kind("s1"), "session.title");
    for (id, t) in [
        ("x1", "custom"),
        ("l1", "label"),
        ("g1", "usage"),
        ("e1", "context_edit"),
        ("sr1", "subagent_run"),
        ("t1", "thinking_level_change"),
    ] {
        assert_eq!(kind(id), kinds::META, "{id}");
        assert_eq!(by_native(&p, id).payload["record_type"], t, "{id}");
        assert_eq!(by_native(&p, id).level, Level::Native);
    }
    let derived: Vec<&str> = p
        .events
        .iter()
        .filter(|e| e.payload.get("derived_from").is_some())
        .map(|e| e.kind.as_str())
        .collect();
    assert_eq!(
        derived,
        [
            kinds::FILE_READ,
            kinds::FILE_EDIT,
            kinds::FILE_EDIT,
            kinds::COMMAND_RUN
        ]
    );
    // The tree: the branch summary hangs off t1, beside the first branch.
    assert_eq!(by_native(&p, "bs1").parent_seq, Some(last_of(&p, "t1")));
    assert_eq!(by_native(&p, "sy1").parent_seq, Some(last_of(&p, "t1")));
    assert_eq!(by_native(&p, "u2").parent_seq, Some(last_of(&p, "bs1")));
    assert_eq!(by_native(&p, "r1").parent_seq, Some(last_of(&p, "a1")));
    // The active leaf is the last entry event, as it is Pi's last line.
    let last = p
        .events
        .iter()
        .rev()
        .find(|e| e.payload.get(NATIVE_KEY).is_some())
        .unwrap();
    assert_eq!(
        last.origin.as_ref().unwrap().native_id.as_deref(),
        Some("a5")
    );
}

#[test]
fn bad_lines_are_kept_and_reported_with_their_line() {
    let c = cases()
        .into_iter()
        .find(|c| c.name == "crafted-bad-input")
        .unwrap();
    let p = parse(&c.source, &c.bytes);
    let warned = |line: u64, what: &str| {
        assert!(
            p.warnings
                .iter()
                .any(|w| w.line == line && w.message.contains(what)),
            "no warning {what:?} on line {line}: {:?}",
            p.warnings
        )
    };
    warned(2, "not valid JSON");
    warned(4, "orphaned branch");
    warned(6, "duplicate entry id");
    warned(7, "no id");
    warned(8, "not a JSON object");
    assert_eq!(p.warnings.len(), 5, "{:?}", p.warnings);
    // Nothing dropped: the unparsable lines as meta, the orphans as events.
    let unparsed: Vec<&Event> = p
        .events
        .iter()
        .filter(|e| e.payload.get("unparsed").is_some())
        .collect();
    assert_eq!(unparsed.len(), 2);
    assert!(unparsed.iter().all(|e| e.kind == kinds::META));
    assert_eq!(by_native(&p, "o1").parent_seq, None);
    assert_eq!(by_native(&p, "o2").parent_seq, Some(last_of(&p, "o1")));
    // Later entries link to the last entry of a duplicated id, as Pi's index.
    let dup = p
        .events
        .iter()
        .filter(|e| e.origin.as_ref().and_then(|o| o.native_id.as_deref()) == Some("a1"))
        .map(|e| e.seq)
        .max()
        .unwrap();
    assert_eq!(by_native(&p, "u3").parent_seq, Some(dup));
    // The schovest sidecar is not a session file.
    assert!(!Pi.is_session_file(Path::new(&format!("{}.meta", c.source))));
}

#[test]
fn a_header_without_id_is_captured_and_written_back_valid() {
    let c = cases()
        .into_iter()
        .find(|c| c.name == "crafted-header-without-id")
        .unwrap();
    let p = parse(&c.source, &c.bytes);
    assert!(p.warnings[0].message.contains("no id"), "{:?}", p.warnings);
    assert_eq!(p.warnings[0].line, 0);
    assert_eq!(
        p.session.native_id.as_deref(),
        Some("0e0e0000-0000-4000-8000-000000000003")
    );
    let (_, bytes, _) = render(&p, "/tmp/x");
    assert_eq!(
        lines(&bytes)[0]["id"],
        "0e0e0000-0000-4000-8000-000000000003"
    );
}

#[test]
fn v1_files_are_linked_as_pis_migration_links_them() {
    let c = cases()
        .into_iter()
        .find(|c| c.name == "public-pi-mono-v1")
        .unwrap();
    let p = parse(&c.source, &c.bytes);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    // Line n is entry n of Pi's list: id v1-n, parent the previous entry.
    assert_eq!(by_native(&p, "v1-2").parent_seq, Some(last_of(&p, "v1-1")));
    assert_eq!(by_native(&p, "v1-1").parent_seq, None);
    let compaction = by_native(&p, "v1-359");
    assert_eq!(compaction.kind, kinds::CHECKPOINT);
    assert_eq!(compaction.payload["first_kept"], "v1-293");
    let record = &compaction.payload[NATIVE_KEY]["record"];
    assert!(record.get("firstKeptEntryIndex").is_none());
    assert_eq!(p.events[0].payload["version"], 1);
    // `branchedFrom` names the session it was forked from.
    let parent = p.session.parent.as_ref().map(|p| p.native_id.as_str());
    let from = p.events[0].payload[NATIVE_KEY]["record"]["branchedFrom"]
        .as_str()
        .unwrap();
    assert!(
        from.ends_with(&format!("_{}.jsonl", parent.unwrap())),
        "{from}"
    );
    let v2 = cases()
        .into_iter()
        .find(|c| c.name == "crafted-v2")
        .unwrap();
    let p = parse(&v2.source, &v2.bytes);
    assert_eq!(
        by_native(&p, "h1").payload[NATIVE_KEY]["record"]["message"]["role"],
        "custom"
    );
}

fn event(seq: u64, agent: Agent, kind: &str, payload: Value) -> Event {
    let actor = match kind {
        kinds::MESSAGE_USER => "user",
        kinds::TOOL_RESULT => "tool",
        _ => "agent:claude",
    };
    Event::new(
        seq,
        "2026-12-01T10:00:00Z",
        agent,
        actor,
        kind,
        Level::History,
        payload,
    )
}

#[test]
fn another_agents_session_becomes_minimal_entries_both_versions_read() {
    let header = SessionHeader::new(
        SessionId::new("s-foreign").unwrap(),
        Agent::Claude,
        "2026-12-01T10:00:00Z",
    );
    let events = vec![
        event(
            0,
            Agent::Claude,
            kinds::MESSAGE_USER,
            json!({"text": "list files"}),
        ),
        event(
            1,
            Agent::Claude,
            kinds::MESSAGE_THINKING,
            json!({"text": "hmm", "opaque": {"agent": "claude", "signature": "sig"}}),
        ),
        event(
            2,
            Agent::Claude,
            kinds::MESSAGE_ASSISTANT,
            json!({"text": "Looking.", "model": "claude-x"}),
        ),
        event(
            3,
            Agent::Claude,
            kinds::TOOL_CALL,
            json!({"call_id": "toolu_1", "name": "Bash", "arguments": {"command": "ls"}}),
        ),
        event(
            4,
            Agent::Claude,
            kinds::TOOL_RESULT,
            json!({"call_id": "toolu_1", "output": "a\nb", "is_error": false}),
        ),
        event(
            5,
            Agent::Claude,
            kinds::COMMAND_RUN,
            json!({"command": "ls", "derived_from": {"call_seq": 3, "result_seq": 4}}),
        ),
        event(
            6,
            Agent::Claude,
            kinds::TOOL_CALL,
            json!({"call_id": "toolu_2", "name": "WebSearch", "arguments": {"q": "x"}}),
        ),
        event(
            7,
            Agent::Claude,
            kinds::MESSAGE_USER,
            json!({"text": "thanks"}),
        ),
        event(
            8,
            Agent::Claude,
            kinds::MESSAGE_ASSISTANT,
            json!({"text": "You're welcome."}),
        ),
    ];
    let changes = Pi
        .render(RenderRequest {
            header: &header,
            events: &events,
            artifacts: &[],
            native_id: "0f0f0000-0000-4000-8000-000000000009",
            cwd: "/w/repo",
            now: "2026-12-01T11:00:00Z",
        })
        .unwrap();
    assert_eq!(
        changes.resume_command,
        "pi --session 0f0f0000-0000-4000-8000-000000000009"
    );
    let file = &changes.files[0];
    assert_eq!(
        file.path,
        PathBuf::from(
            "sessions/--w-repo--/2026-12-01T10-00-00Z_0f0f0000-0000-4000-8000-000000000009.jsonl"
        )
    );
    let text = String::from_utf8(file.bytes.clone()).unwrap();
    let l = lines(&file.bytes);
    assert_eq!(l[0]["version"], 3);
    let roles: Vec<&str> = l[1..]
        .iter()
        .map(|e| e["message"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "toolResult",
            "user",
            "assistant"
        ]
    );
    // A chain: each entry's parent is the line before; the leaf is last.
    for w in l[1..].windows(2) {
        assert_eq!(w[1]["parentId"], w[0]["id"]);
    }
    assert_eq!(l[1]["parentId"], Value::Null);
    for e in &l[1..] {
        let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["type", "id", "parentId", "timestamp", "message"]);
        assert!(e["message"]["content"].is_array(), "{e}");
        if e["message"]["role"] == "assistant" {
            assert!(
                e["message"]["usage"]["totalTokens"].is_number(),
                "0.73.1 needs usage"
            );
            assert!(e["message"]["api"].is_string() && e["message"]["provider"].is_string());
        }
    }
    // The shell call is Pi's bash; the unanswered call gets Pi's own answer.
    assert_eq!(l[2]["message"]["content"][1]["name"], "bash");
    assert_eq!(
        l[2]["message"]["content"][1]["arguments"],
        json!({"command": "ls"})
    );
    assert_eq!(l[2]["message"]["stopReason"], "toolUse");
    assert_eq!(l[5]["message"]["isError"], true);
    assert!(text.contains("No result provided"));
    assert!(
        changes
            .losses
            .iter()
            .any(|x| x.starts_with("thinking-dropped:")),
        "{:?}",
        changes.losses
    );
    assert!(
        changes
            .losses
            .iter()
            .any(|x| x.starts_with("tool-unmapped:") && x.contains("WebSearch"))
    );
}

#[test]
fn hostile_native_ids_are_refused_before_any_path() {
    let c = cases()
        .into_iter()
        .find(|c| c.name == "crafted-minimal")
        .unwrap();
    let parsed = parse(&c.source, &c.bytes);
    let header = header_for(&parsed);
    for bad in ["../../etc/x", "a/b", "", ".x", "a\nb"] {
        let got = Pi.render(RenderRequest {
            header: &header,
            events: &parsed.events,
            artifacts: &[],
            native_id: bad,
            cwd: "/w",
            now: "2026-12-01T00:00:00Z",
        });
        assert!(
            matches!(got, Err(RenderError::Request(_))),
            "{bad:?}: {got:?}"
        );
    }
}

#[test]
fn a_session_with_nothing_to_say_is_refused() {
    let header = SessionHeader::new(
        SessionId::new("s1").unwrap(),
        Agent::Pi,
        "2026-12-01T10:00:00Z",
    );
    let got = Pi.render(RenderRequest {
        header: &header,
        events: &[],
        artifacts: &[],
        native_id: "s1",
        cwd: "/w",
        now: "2026-12-01T00:00:00Z",
    });
    assert!(matches!(got, Err(RenderError::Empty(_))), "{got:?}");
}
