//! The loss report misses nothing: for random canonical sessions over the
//! whole event vocabulary, rendered for each of the six targets by another
//! agent, every field of every source event the target does not carry is
//! named by a loss line with its seq and a code that fits the field, and
//! every loss line naming a seq names a field that was not carried (or
//! carried only as text, for the codes that say so).
//!
//! "Carried" is measured, not declared: each field's value is a unique
//! marker (image bytes are unique too), and a field is carried when its
//! marker is in what the render wrote (files, rows, the import document,
//! nested JSON unescaped). A failed result is carried when the target's
//! failure mark is written next to its output.
//!
//! The generator is seeded (no new dependency): `LOSS_SEEDS=N` runs N
//! sessions per target (default 40); a failure names the seed.

use std::collections::{BTreeMap, BTreeSet};

use git_session_adapters::loss::{code_of, seqs_of};
use git_session_adapters::registry::ADAPTERS;
use git_session_adapters::{Adapter, ChangeSet, RenderRequest};
use git_session_schema::{Agent, ArtifactId, Event, Level, SessionHeader, SessionId, kinds};
use serde_json::{Value, json};

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// One field of a source event: what it is, and how to see it arrived.
#[derive(Clone, Debug)]
struct Field {
    seq: u64,
    name: String,
    /// The text whose presence in the render says the field is carried.
    marker: String,
    /// The loss codes that may report this field as not carried.
    codes: &'static [&'static str],
    /// A failed result: carried only with the target's failure mark.
    failure: bool,
}

/// Codes whose line says a field was carried as text only: the field's
/// marker is there and the line is still right.
const AS_TEXT: &[&str] = &[
    "argument-dropped",
    "tool-unmapped",
    "web-search-as-text",
    "tool-result-orphaned",
    "image-omitted",
];

/// Codes a line may carry about an event without naming a field the test
/// tracks (the session's shape, ids).
const SHAPE: &[&str] = &[
    "tool-id-renamed",
    "message-id-renamed",
    "uuid-assigned",
    "block-relinked",
    "continuation-relinked",
    "tool-result-missing",
];

const OTHER_EVENT: &[&str] = &["event-unmapped", "derived-event-folded"];

struct Session {
    events: Vec<Event>,
    artifacts: Vec<(ArtifactId, Vec<u8>)>,
    fields: Vec<Field>,
}

struct Gen<'r> {
    rng: &'r mut Rng,
    source: Agent,
    events: Vec<Event>,
    artifacts: Vec<(ArtifactId, Vec<u8>)>,
    fields: Vec<Field>,
}

impl Gen<'_> {
    fn seq(&self) -> u64 {
        self.events.len() as u64
    }

    fn marker(&self, what: &str) -> String {
        format!("Mk{}{what}Q", self.seq())
    }

    fn field(&mut self, name: &str, marker: &str, codes: &'static [&'static str]) {
        self.fields.push(Field {
            seq: self.seq(),
            name: name.to_owned(),
            marker: marker.to_owned(),
            codes,
            failure: false,
        });
    }

    fn push(&mut self, kind: &str, payload: Value, refs: Vec<String>) {
        let actor = match kind {
            kinds::MESSAGE_USER => "user",
            kinds::TOOL_RESULT => "tool",
            kinds::MESSAGE_ASSISTANT | kinds::MESSAGE_THINKING | kinds::TOOL_CALL => "agent",
            _ => "system",
        };
        let seq = self.seq();
        let mut e = Event::new(
            seq,
            format!("2026-12-01T10:{:02}:{:02}Z", seq / 60 % 60, seq % 60),
            self.source.clone(),
            actor,
            kind,
            Level::History,
            payload,
        );
        e.refs = refs;
        self.events.push(e);
    }

    /// Returns image refs (0-2), their bytes kept or (sometimes) missing.
    fn images(&mut self, place: &str) -> (Vec<String>, Vec<Value>) {
        let n = [0, 0, 1, 1, 2][self.rng.below(5)];
        let mut refs = Vec::new();
        let mut meta = Vec::new();
        for i in 0..n {
            let bytes = format!("IMG{}-{place}-{i}-bytes", self.seq()).into_bytes();
            let id = ArtifactId::of(&bytes);
            use base64::Engine as _;
            let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
            self.field(&format!("image {i}"), &b64, &["image-omitted"]);
            if !self.rng.chance(15) {
                self.artifacts.push((id.clone(), bytes));
            }
            refs.push(id.to_ref());
            meta.push(json!({"media_type": "image/png", "artifact": id.to_string()}));
        }
        (refs, meta)
    }

    fn user(&mut self) {
        let text = self.marker("user");
        self.field("text", &text, &["message-empty", "event-unmapped"]);
        let (refs, meta) = self.images("user");
        let mut p = json!({ "text": text });
        if let Some(first) = meta.first() {
            p["image"] = first.clone();
            p["images"] = Value::Array(meta);
        }
        self.push(kinds::MESSAGE_USER, p, refs);
    }

    fn assistant(&mut self) {
        let text = self.marker("said");
        self.field("text", &text, &["message-empty", "event-unmapped"]);
        self.push(kinds::MESSAGE_ASSISTANT, json!({ "text": text }), vec![]);
    }

    fn thinking(&mut self) {
        let text = self.marker("thought");
        self.field("text", &text, &["thinking-dropped"]);
        let mut p = json!({ "text": text });
        match self.rng.below(3) {
            0 => {}
            1 => {
                let sig = self.marker("sig");
                self.field(
                    "signature",
                    &sig,
                    &["thinking-dropped", "reasoning-opaque-dropped"],
                );
                p["opaque"] = json!({ "signature": sig });
            }
            _ => {
                // The ciphertext stays in the source's native record: no
                // other agent can carry it.
                self.field(
                    "ciphertext",
                    "\u{0}never written",
                    &["thinking-dropped", "reasoning-opaque-dropped"],
                );
                p["encrypted"] = json!(true);
            }
        }
        self.push(kinds::MESSAGE_THINKING, p, vec![]);
    }

    /// A call of a random tool of any kind, with its own arguments and one
    /// that no agent has, and its result (failed or not, with images).
    fn call(&mut self) {
        let tools: &[(&str, &[&str])] = &[
            ("Bash", &["command", "description"]),
            ("exec_command", &["cmd", "workdir"]),
            ("bash", &["command"]),
            ("terminal", &["command"]),
            ("Read", &["file_path"]),
            ("read_file", &["path"]),
            ("Write", &["file_path", "content"]),
            ("Edit", &["file_path", "old_string", "new_string"]),
            ("edit", &["path", "oldText", "newText"]),
            ("apply_patch", &["input"]),
            ("Grep", &["pattern", "glob"]),
            ("search_files", &["pattern", "path"]),
            ("WebSearch", &["query"]),
            ("web_search", &["query"]),
            ("WebFetch", &["url", "prompt"]),
            ("TodoWrite", &["todos"]),
            ("Task", &["description", "prompt"]),
            ("delegate_task", &["goal"]),
            ("frobnicate", &["widget"]),
        ];
        let (name, keys) = *self.rng.pick(tools);
        let call_id = format!("call_{}", self.seq());
        let mut args = serde_json::Map::new();
        for key in keys {
            let mut value = self.marker(&format!("arg{key}"));
            if name == "apply_patch" {
                value = format!(
                    "*** Begin Patch\n*** Update File: {value}.rs\n@@\n-a\n+b\n*** End Patch"
                );
            }
            let marker = self.marker(&format!("arg{key}"));
            self.field(
                &format!("argument {key}"),
                &marker,
                &["argument-dropped", "tool-unmapped"],
            );
            args.insert((*key).to_owned(), json!(value));
        }
        let extra = self.marker("argextra");
        self.field(
            "argument zz_extra",
            &extra,
            &["argument-dropped", "tool-unmapped"],
        );
        args.insert("zz_extra".into(), json!(extra));
        self.push(
            kinds::TOOL_CALL,
            json!({"call_id": call_id, "name": name, "arguments": args}),
            vec![],
        );
        if self.rng.chance(10) {
            return; // a call without a result
        }
        let output = self.marker("out");
        self.field("output", &output, &["tool-result-orphaned"]);
        let failed = self.rng.chance(35);
        let mut p = json!({"call_id": call_id, "name": name, "output": output, "is_error": failed});
        if failed {
            self.fields.push(Field {
                seq: self.seq(),
                name: "failure".into(),
                marker: output.clone(),
                codes: &[],
                failure: true,
            });
            if self.rng.chance(50) {
                p["exit_code"] = json!(3);
            }
        }
        let (refs, meta) = self.images("result");
        if !meta.is_empty() {
            p["images"] = Value::Array(meta);
        }
        self.push(kinds::TOOL_RESULT, p, refs);
    }

    fn web_search(&mut self) {
        let query = self.marker("query");
        self.field("query", &query, &["web-search-as-text"]);
        self.push(
            kinds::META,
            json!({"codex": "response_item.web_search_call",
                   "web_search": {"action": "search", "query": query, "status": "completed"}}),
            vec![],
        );
    }

    /// Any other event of the vocabulary, its body holding a marker.
    fn other(&mut self) {
        let m = self.marker("body");
        let (kind, p) = match self.rng.below(13) {
            0 => (
                kinds::META,
                json!({"codex": "event_msg.token_count", "usage": m}),
            ),
            1 => (
                kinds::META,
                json!({"record_type": "attachment", "subtype": "hook", "text": m}),
            ),
            2 => (
                kinds::CHECKPOINT,
                json!({"reason": "compaction", "summary": m}),
            ),
            3 => (
                kinds::SESSION_MERGE,
                json!({"from": "s-child", "summary": m}),
            ),
            4 => (kinds::HANDOFF, json!({"to": "codex", "brief": m})),
            5 => (
                kinds::SESSION_FORK,
                json!({"parent": "s-parent", "note": m}),
            ),
            6 => (kinds::DECISION, json!({"conclusion": m})),
            7 => (kinds::MEMORY_WRITE, json!({"text": m})),
            8 => (kinds::CONTEXT_COMPILED, json!({"digest": m})),
            9 => (kinds::COMMAND_RUN, json!({"cmd": m, "exit_code": 0})),
            10 => (kinds::FILE_EDIT, json!({"path": m, "diff": "-a\n+b"})),
            11 => (kinds::TODO_ADD, json!({"text": m})),
            _ => (kinds::SESSION_END, json!({"reason": m})),
        };
        self.field("event", &m, OTHER_EVENT);
        self.push(kind, p, vec![]);
    }
}

fn session(rng: &mut Rng, source: Agent) -> Session {
    let mut g = Gen {
        rng,
        source,
        events: Vec::new(),
        artifacts: Vec::new(),
        fields: Vec::new(),
    };
    // The session itself: its facts are the target's header, not a field.
    g.push(kinds::SESSION_START, json!({"cwd": "/w/repo"}), vec![]);
    g.user();
    let n = 4 + g.rng.below(14);
    for _ in 0..n {
        match g.rng.below(9) {
            0 => g.user(),
            1 => g.assistant(),
            2 => g.thinking(),
            3 | 4 => g.call(),
            5 => g.web_search(),
            _ => g.other(),
        }
    }
    // Most sessions end with a reply; some with reasoning that no
    // assistant message follows.
    if g.rng.chance(80) {
        g.assistant();
    } else {
        g.thinking();
    }
    Session {
        events: g.events,
        artifacts: g.artifacts,
        fields: g.fields,
    }
}

fn render(target: &dyn Adapter, s: &Session) -> ChangeSet {
    let header = SessionHeader::new(
        SessionId::new("s-loss").unwrap(),
        s.events[0].agent.clone(),
        "2026-12-01T10:00:00Z",
    );
    let native_id = target.new_native_id("0f0f0000-0000-4000-8000-00000000000b", 1_795_000_000_000);
    target
        .render(RenderRequest {
            header: &header,
            events: &s.events,
            artifacts: &s.artifacts,
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

/// Says whether a failed result's output arrived with a failure mark: in
/// the record around it (the target's field) or starting its text.
fn failure_marked(dump: &str, output: &str) -> bool {
    const MARKS: &[&str] = &[
        "\"is_error\":true",
        "\"isError\":true",
        "\"status\":\"error\"",
        "\"error\":\"exit code",
        "\"error\":\"the tool call failed",
        "Process exited with code 3",
        "Exit code 3",
        "error: this tool call failed",
    ];
    dump.match_indices(output).any(|(at, _)| {
        let line_start = dump[..at].rfind('\n').map_or(0, |i| i + 1);
        let line_end = dump[at..].find('\n').map_or(dump.len(), |i| at + i);
        // A record may hold several results (a Claude user message): the
        // window around this one ends at the neighbouring results' text.
        let end = at + output.len();
        let from = dump[line_start..at]
            .rfind("outQ")
            .map_or(line_start, |i| line_start + i + 4);
        let to = dump[end..line_end]
            .find("outQ")
            .and_then(|i| dump[end..end + i].rfind("Mk").map(|j| end + j))
            .unwrap_or(line_end);
        let window = &dump[from..to];
        MARKS.iter().any(|m| window.contains(m))
    })
}

fn check(target: &dyn Adapter, seed: u64, s: &Session) -> Result<(), String> {
    let changes = render(target, s);
    let text = dump(&changes);
    let mut reported: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for line in &changes.losses {
        let code = code_of(line).to_owned();
        for seq in seqs_of(line) {
            reported.entry(seq).or_default().insert(code.clone());
        }
    }
    let mut problems = Vec::new();
    let mut accounted: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for f in &s.fields {
        let carried = if f.failure {
            failure_marked(&text, &f.marker)
        } else {
            text.contains(&f.marker)
        };
        let codes = reported.get(&f.seq).cloned().unwrap_or_default();
        let fitting: Vec<&String> = codes
            .iter()
            .filter(|c| f.codes.contains(&c.as_str()))
            .collect();
        if !carried && fitting.is_empty() {
            problems.push(format!(
                "seq {} ({}): {} not carried and not reported (lines for it: {codes:?}); payload {}",
                f.seq,
                s.events[f.seq as usize].kind,
                f.name,
                s.events[f.seq as usize].payload
            ));
        }
        // A line is accounted for by a field it fits that was not carried,
        // or that was carried as text only.
        for c in fitting {
            if !carried || AS_TEXT.contains(&c.as_str()) {
                accounted.entry(f.seq).or_default().insert(c.clone());
            }
        }
    }
    for (seq, codes) in &reported {
        let Some(event) = s.events.get(*seq as usize) else {
            problems.push(format!(
                "a loss line names seq {seq}, which is not in the session"
            ));
            continue;
        };
        for code in codes {
            let ok = accounted.get(seq).is_some_and(|a| a.contains(code))
                || SHAPE.contains(&code.as_str())
                || (event.kind == kinds::SESSION_START && code == "event-unmapped");
            if !ok {
                problems.push(format!(
                    "seq {seq} ({}): reported as {code}, but every field it could mean arrived",
                    event.kind
                ));
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} from {} (seed {seed}):\n  {}\nlosses:\n  {}",
        target.agent(),
        s.events[0].agent,
        problems.join("\n  "),
        changes.losses.join("\n  ")
    ))
}

#[test]
// The number of sessions is a test knob, not adapter input.
#[allow(clippy::disallowed_methods)]
fn every_field_a_render_leaves_out_is_reported_with_its_seq() {
    let seeds: u64 = std::env::var("LOSS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let mut failures = Vec::new();
    for target in ADAPTERS {
        let agent = target.agent();
        let sources: Vec<Agent> = Agent::KNOWN
            .iter()
            .filter(|a| **a != agent)
            .cloned()
            .collect();
        for seed in 0..seeds {
            let mut rng = Rng(seed * 7919 + agent.as_str().len() as u64);
            let source = rng.pick(&sources).clone();
            let s = session(&mut rng, source);
            if let Err(e) = check(*target, seed, &s) {
                failures.push(e);
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
