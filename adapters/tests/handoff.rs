//! What a handoff carries to every target: failed tool results marked in
//! the target's own way, tool calls mapped to the target's vocabulary with
//! what has no counterpart named, and loss lines with their seqs.

use git_session_adapters::registry::ADAPTERS;
use git_session_adapters::{Adapter, ChangeSet, RenderRequest, tools};
use git_session_schema::{Agent, Event, Level, SessionHeader, SessionId, kinds};
use serde_json::{Value, json};

fn event(seq: u64, agent: &Agent, kind: &str, payload: Value) -> Event {
    let actor = match kind {
        kinds::MESSAGE_USER => "user",
        kinds::TOOL_RESULT => "tool",
        _ => "agent",
    };
    let mut e = Event::new(
        seq,
        format!("2026-12-01T10:00:{seq:02}Z"),
        agent.clone(),
        actor,
        kind,
        Level::History,
        payload,
    );
    e.parent_seq = seq.checked_sub(1);
    e
}

/// The source agent for a render to `target`: another agent, so the
/// target takes the foreign path.
fn source_for(target: &Agent) -> Agent {
    if *target == Agent::Claude {
        Agent::Codex
    } else {
        Agent::Claude
    }
}

/// A shell call and its result, failed or not, between two messages.
fn shell_session(source: &Agent, failed: bool) -> Vec<Event> {
    let (name, arguments) = match source {
        Agent::Codex => (
            "exec_command",
            json!({"cmd": "cargo test", "workdir": "/w"}),
        ),
        _ => (
            "Bash",
            json!({"command": "cargo test", "description": "Run the tests"}),
        ),
    };
    let (output, flag) = if failed {
        ("Exit code 101\ntest result: FAILED", true)
    } else {
        ("test result: ok", false)
    };
    vec![
        event(
            0,
            source,
            kinds::MESSAGE_USER,
            json!({"text": "run the tests"}),
        ),
        event(
            1,
            source,
            kinds::TOOL_CALL,
            json!({"call_id": "call_1", "name": name, "arguments": arguments}),
        ),
        event(
            2,
            source,
            kinds::TOOL_RESULT,
            json!({"call_id": "call_1", "name": name, "output": output, "is_error": flag}),
        ),
        event(3, source, kinds::MESSAGE_ASSISTANT, json!({"text": "done"})),
    ]
}

fn render(target: &dyn Adapter, events: &[Event]) -> ChangeSet {
    let source = events[0].agent.clone();
    let header = SessionHeader::new(
        SessionId::new("s-handoff").unwrap(),
        source,
        "2026-12-01T10:00:00Z",
    );
    let native_id = target.new_native_id("0f0f0000-0000-4000-8000-00000000000a", 1_795_000_000_000);
    target
        .render(RenderRequest {
            header: &header,
            events,
            artifacts: &[],
            native_id: &native_id,
            cwd: "/w/repo",
            now: "2026-12-01T11:00:00Z",
        })
        .unwrap_or_else(|e| panic!("{} renders: {e}", target.agent()))
}

/// Everything a render wrote, as text with nested JSON strings unescaped.
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

/// How each target marks a failed result: its own field, or the text.
fn failure_mark(agent: &Agent) -> &'static str {
    match agent {
        Agent::Claude => "\"is_error\":true",
        Agent::Codex => "Process exited with code 101",
        Agent::Pi | Agent::Dsh => "\"isError\":true",
        Agent::Opencode => "\"status\":\"error\"",
        Agent::Hermes => "\"error\":\"exit code 101\"",
        other => panic!("no failure mark known for {other}"),
    }
}

#[test]
fn a_failed_result_arrives_marked_at_every_target_and_a_passing_one_does_not() {
    for target in ADAPTERS {
        let agent = target.agent();
        let source = source_for(&agent);
        let mark = failure_mark(&agent);
        let failed = dump(&render(*target, &shell_session(&source, true)));
        assert!(
            failed.contains(mark),
            "{agent}: the failed result is not marked with {mark:?}:\n{failed}"
        );
        let passed = dump(&render(*target, &shell_session(&source, false)));
        assert!(
            !passed.contains(mark),
            "{agent}: a passing result is marked failed:\n{passed}"
        );
    }
}

#[test]
fn a_failure_known_only_by_its_exit_code_is_marked_too() {
    for target in ADAPTERS {
        let agent = target.agent();
        let source = source_for(&agent);
        let mut events = shell_session(&source, true);
        // No is_error, only the code (as Pi's or Hermes' derived facts have).
        events[2].payload = json!({"call_id": "call_1", "output": "FAILED", "exit_code": 101});
        let text = dump(&render(*target, &events));
        assert!(text.contains(failure_mark(&agent)), "{agent}:\n{text}");
    }
}

#[test]
fn codex_reads_back_the_failure_it_was_given() {
    use git_session_adapters::codex::Codex;
    let changes = render(&Codex, &shell_session(&Agent::Claude, true));
    let file = &changes.files[0];
    let parsed = Codex.parse(git_session_adapters::ParseInput {
        records: git_session_adapters::Records::Lines {
            bytes: &file.bytes,
            first_line: 0,
            offset: 0,
        },
        next_seq: 0,
        state: None,
        source: file.path.to_str().unwrap(),
        session: None,
        sidecar: None,
        memo: Default::default(),
    });
    let result = parsed
        .events
        .iter()
        .find(|e| e.kind == kinds::TOOL_RESULT)
        .expect("a tool.result");
    assert_eq!(result.payload["is_error"], true, "{:?}", result.payload);
    assert_eq!(result.payload["exit_code"], 101);
    let run = parsed
        .events
        .iter()
        .find(|e| e.kind == kinds::COMMAND_RUN)
        .expect("a command.run");
    assert_eq!(run.payload["exit_code"], 101);
}

#[test]
fn marking_reads_back() {
    let f = tools::failure(&json!({"is_error": true, "output": "boom"})).unwrap();
    assert!(tools::marked_failed(&tools::mark_failed("boom", f, true)));
}

fn spec(agent: &Agent) -> &'static git_session_adapters::AgentSpec {
    git_session_adapters::adapter(agent).unwrap().spec()
}

#[test]
fn a_call_maps_to_the_targets_tool_of_its_kind_with_arguments_renamed() {
    // Claude's Edit is OpenCode's edit, Pi's edit and Hermes' patch.
    let edit = json!({"file_path": "src/a.rs", "old_string": "a", "new_string": "b"});
    let t = tools::translate(spec(&Agent::Opencode), &Agent::Claude, "Edit", &edit);
    assert_eq!(t.name, "edit");
    assert_eq!(
        t.arguments,
        json!({"filePath": "src/a.rs", "oldString": "a", "newString": "b"})
    );
    let t = tools::translate(spec(&Agent::Pi), &Agent::Claude, "Edit", &edit);
    assert_eq!(
        (t.name.as_str(), &t.arguments),
        (
            "edit",
            &json!({"path": "src/a.rs", "oldText": "a", "newText": "b"})
        )
    );
    let t = tools::translate(spec(&Agent::Hermes), &Agent::Claude, "Edit", &edit);
    assert_eq!(t.name, "patch");
    assert_eq!(t.arguments["old_string"], "a");
    // Read and search keep path and pattern.
    let t = tools::translate(
        spec(&Agent::Claude),
        &Agent::Opencode,
        "read",
        &json!({"filePath": "x"}),
    );
    assert_eq!(
        (t.name.as_str(), &t.arguments),
        ("Read", &json!({"file_path": "x"}))
    );
    let t = tools::translate(
        spec(&Agent::Opencode),
        &Agent::Claude,
        "Grep",
        &json!({"pattern": "fn main", "glob": "*.rs"}),
    );
    assert_eq!(
        (t.name.as_str(), &t.arguments),
        ("grep", &json!({"pattern": "fn main", "include": "*.rs"}))
    );
    assert!(t.dropped.is_empty());
}

#[test]
fn a_timeout_changes_unit_between_seconds_and_milliseconds() {
    let t = tools::translate(
        spec(&Agent::Claude),
        &Agent::Pi,
        "bash",
        &json!({"command": "sleep 1", "timeout": 30}),
    );
    assert_eq!(t.arguments, json!({"command": "sleep 1", "timeout": 30000}));
    let t = tools::translate(
        spec(&Agent::Hermes),
        &Agent::Claude,
        "Bash",
        &json!({"command": "sleep 1", "timeout": 1500}),
    );
    assert_eq!(t.arguments["timeout"], 2);
}

#[test]
fn untranslatable_arguments_become_a_note_and_a_loss_line_with_the_seq() {
    let t = tools::translate(
        spec(&Agent::Claude),
        &Agent::Codex,
        "exec_command",
        &json!({"cmd": "ls", "workdir": "/w/sub", "yield_time_ms": 1000, "max_output_tokens": 600}),
    );
    assert_eq!(t.name, "Bash");
    assert_eq!(t.arguments["command"], "ls");
    let note = t.arguments[tools::NOTE_KEY].as_str().unwrap();
    for part in [
        "workdir=/w/sub",
        "yield_time_ms=1000",
        "max_output_tokens=600",
    ] {
        assert!(note.contains(part), "{note}");
    }
    let losses = t.losses(7, "codex", spec(&Agent::Claude));
    assert_eq!(losses.len(), 3, "{losses:?}");
    assert!(
        losses
            .iter()
            .all(|l| l.starts_with("argument-dropped: seq 7: codex argument ")),
        "{losses:?}"
    );
    // Where the target has the place (OpenCode's bash takes a workdir and a
    // description), nothing is dropped.
    let t = tools::translate(
        spec(&Agent::Opencode),
        &Agent::Claude,
        "Bash",
        &json!({"command": "ls", "description": "List files"}),
    );
    assert!(t.dropped.is_empty(), "{:?}", t.dropped);
    assert_eq!(t.arguments["description"], "List files");
}

#[test]
fn an_apply_patch_to_a_target_that_edits_by_strings_is_run_as_a_shell_call() {
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-old\n+new\n*** End Patch";
    for target in [Agent::Claude, Agent::Pi, Agent::Opencode, Agent::Dsh] {
        let t = tools::translate(spec(&target), &Agent::Codex, "apply_patch", &json!(patch));
        let shell = spec(&target)
            .tool_for(git_session_adapters::ToolKind::Shell)
            .unwrap();
        assert_eq!(t.name, shell, "{target}");
        let script = t.arguments["command"].as_str().unwrap();
        assert!(
            script.starts_with("apply_patch <<'PATCH'\n*** Begin Patch"),
            "{script}"
        );
        assert!(script.contains("+new"), "{script}");
    }
    // Hermes' patch tool takes a patch: it goes there.
    let t = tools::translate(
        spec(&Agent::Hermes),
        &Agent::Codex,
        "apply_patch",
        &json!(patch),
    );
    assert_eq!(
        (t.name.as_str(), t.arguments["patch"].as_str()),
        ("patch", Some(patch))
    );
}

#[test]
fn a_handoff_render_reports_dropped_arguments_with_their_seq() {
    // Through a real render: Claude's Bash description to Codex.
    let changes = render(
        &git_session_adapters::codex::Codex,
        &shell_session(&Agent::Claude, false),
    );
    assert!(
        changes
            .losses
            .iter()
            .any(|l| l.starts_with("argument-dropped: seq 1: claude argument \"description\"")),
        "{:?}",
        changes.losses
    );
    let text = dump(&changes);
    assert!(text.contains("description=Run the tests"), "{text}");
}

/// The public moredip session in the older layout: the sub-agent's
/// records inline, `isSidechain: true` (tests/data/README.md).
const INLINE_SIDECHAIN: &[u8] = include_bytes!("data/claude-inline-sidechain.jsonl");
/// The sub-agent's own tool call (a WebSearch), which only its records hold.
const SUBAGENT_CALL: &str = "toolu_01PQqfNyi6Re4Pmw55BUHr5i";

fn inline_sidechain_events() -> Vec<Event> {
    let parsed = git_session_adapters::claude::Claude.parse(git_session_adapters::ParseInput {
        records: git_session_adapters::Records::Lines {
            bytes: INLINE_SIDECHAIN,
            first_line: 0,
            offset: 0,
        },
        next_seq: 0,
        state: None,
        source: "projects/-p/4b2030ed-5563-49ea-b703-6a002f2d3cc8.jsonl",
        session: None,
        sidecar: None,
        memo: Default::default(),
    });
    parsed.events
}

#[test]
fn inline_sidechain_records_are_marked_as_the_sub_agents() {
    let events = inline_sidechain_events();
    let marked: Vec<&Event> = events
        .iter()
        .filter(|e| e.payload["sidechain"] == true)
        .collect();
    assert!(!marked.is_empty());
    assert!(marked.iter().all(|e| e.payload["subagent"] == "a2018e5"));
    // Exactly the events of the six sidechain lines (lines 5 to 10).
    assert!(marked.iter().all(|e| {
        let line = e.origin.as_ref().unwrap().native_seq.unwrap();
        (5..=10).contains(&line)
    }));
    let main_calls: Vec<&str> = events
        .iter()
        .filter(|e| e.kind == kinds::TOOL_CALL && e.payload["sidechain"] != true)
        .filter_map(|e| e.payload["name"].as_str())
        .collect();
    assert_eq!(main_calls, ["Task"]);
}

#[test]
fn sub_agent_turns_stay_out_of_another_agents_main_line() {
    let events = inline_sidechain_events();
    let sidechain = events
        .iter()
        .filter(|e| e.payload["sidechain"] == true)
        .count();
    for target in ADAPTERS {
        let agent = target.agent();
        let mut fold = tools::SubAgentFold::new(&agent);
        let kept: Vec<Event> = events.iter().filter(|e| fold.keep(e)).cloned().collect();
        let text = dump(&render(*target, &kept));
        if agent == Agent::Claude {
            // Claude's own form: written back as sidechain records.
            assert_eq!(kept.len(), events.len());
            assert!(fold.losses().is_empty());
            assert_eq!(text.matches("\"isSidechain\":true").count(), 6, "{text}");
            continue;
        }
        assert_eq!(kept.len(), events.len() - sidechain, "{agent}");
        let losses = fold.losses();
        assert_eq!(losses.len(), 1, "{agent}: {losses:?}");
        assert!(
            losses[0].starts_with("subagent-folded: seqs ")
                && losses[0].contains(&format!("({sidechain} events of sub-agent a2018e5)")),
            "{losses:?}"
        );
        assert!(
            !text.contains(SUBAGENT_CALL),
            "{agent}: the sub-agent's call is in the main line"
        );
        // Without the fold the sub-agent's call would be there: the check
        // above can fail.
        let unfolded = dump(&render(*target, &events));
        assert!(unfolded.contains(SUBAGENT_CALL), "{agent}: control");
        // The spawning call's result, the sub-agent's answer, is there.
        let task_result = kept
            .iter()
            .find(|e| e.kind == kinds::TOOL_RESULT)
            .and_then(|e| e.payload["output"].as_str())
            .unwrap();
        let probe: String = task_result.chars().take(40).collect();
        assert!(text.contains(&probe), "{agent}: {probe:?} missing");
    }
}

#[test]
fn provider_bound_reasoning_follows_one_rule_per_target_with_a_loss_line() {
    for target in ADAPTERS {
        let agent = target.agent();
        let source = source_for(&agent);
        let mut events = shell_session(&source, false);
        let mut thinking = event(
            1,
            &source,
            kinds::MESSAGE_THINKING,
            json!({"text": "PLAIN-REASONING", "opaque": {"signature": "SIG-BYTES"}}),
        );
        thinking.actor = format!("agent:{source}");
        events.insert(1, thinking);
        for (i, e) in events.iter_mut().enumerate() {
            e.seq = i as u64;
        }
        let changes = render(*target, &events);
        let text = dump(&changes);
        assert!(
            !text.contains("SIG-BYTES"),
            "{agent}: a foreign signature was written"
        );
        let carried = text.contains("PLAIN-REASONING");
        let code = if carried {
            "reasoning-opaque-dropped: seq 1:"
        } else {
            "thinking-dropped"
        };
        assert!(
            changes.losses.iter().any(|l| l.starts_with(code)),
            "{agent}: carried={carried}, {:?}",
            changes.losses
        );
    }
}

/// Two calls of one model reply, then their two results.
fn parallel_session(source: &Agent) -> Vec<Event> {
    let (name, a1, a2) = match source {
        Agent::Codex => (
            "exec_command",
            json!({"cmd": "echo one"}),
            json!({"cmd": "echo two"}),
        ),
        _ => (
            "Bash",
            json!({"command": "echo one"}),
            json!({"command": "echo two"}),
        ),
    };
    vec![
        event(0, source, kinds::MESSAGE_USER, json!({"text": "run both"})),
        event(
            1,
            source,
            kinds::MESSAGE_ASSISTANT,
            json!({"text": "running"}),
        ),
        event(
            2,
            source,
            kinds::TOOL_CALL,
            json!({"call_id": "c1", "name": name, "arguments": a1}),
        ),
        event(
            3,
            source,
            kinds::TOOL_CALL,
            json!({"call_id": "c2", "name": name, "arguments": a2}),
        ),
        event(
            4,
            source,
            kinds::TOOL_RESULT,
            json!({"call_id": "c1", "output": "one"}),
        ),
        event(
            5,
            source,
            kinds::TOOL_RESULT,
            json!({"call_id": "c2", "output": "two"}),
        ),
        event(6, source, kinds::MESSAGE_ASSISTANT, json!({"text": "done"})),
    ]
}

#[test]
fn parallel_calls_of_one_reply_stay_parallel_at_every_target() {
    for target in ADAPTERS {
        let agent = target.agent();
        let dump = dump(&render(*target, &parallel_session(&source_for(&agent))));
        let lines: Vec<&str> = dump.lines().collect();
        let with = |needle: &str| -> Vec<usize> {
            lines
                .iter()
                .enumerate()
                .filter(|(_, l)| l.contains(needle))
                .map(|(i, _)| i)
                .collect()
        };
        match agent {
            // Several calls in one message (Claude: results in one user
            // message too).
            Agent::Claude | Agent::Pi | Agent::Hermes | Agent::Dsh => {
                assert!(
                    lines
                        .iter()
                        .any(|l| l.contains("\"id\":\"c1\"") && l.contains("\"id\":\"c2\"")),
                    "{agent}: both calls in one message:\n{dump}"
                );
                if agent == Agent::Claude {
                    assert!(
                        lines.iter().any(|l| l.contains("\"tool_use_id\":\"c1\"")
                            && l.contains("\"tool_use_id\":\"c2\"")),
                        "{agent}: both results in one user message:\n{dump}"
                    );
                }
            }
            // Consecutive function_call items.
            Agent::Codex => {
                let calls = with("\"type\":\"function_call\"");
                assert_eq!(calls.len(), 2, "{dump}");
                assert_eq!(calls[1], calls[0] + 1, "{agent}: consecutive:\n{dump}");
            }
            // Both tool parts in one message.
            Agent::Opencode => {
                let message_of = |call: &str| {
                    let line = lines[with(&format!("\"callID\":\"{call}\""))[0]];
                    let at = line.find("\"message_id\":\"").unwrap() + 14;
                    line[at..].split('"').next().unwrap().to_owned()
                };
                assert_eq!(message_of("c1"), message_of("c2"), "{agent}:\n{dump}");
            }
            other => panic!("no parallel-call shape for {other}"),
        }
    }
}
