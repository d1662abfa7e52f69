//! Transcript lines to canonical events.
//!
//! | line | events |
//! | --- | --- |
//! | `user`, string content | `message.user` (actor `system` for `isMeta` harness text and the `isCompactSummary` summary) |
//! | `user`/`assistant` blocks | one event per block: `text` → `message.user`/`message.assistant`, `thinking`/`redacted_thinking` → `message.thinking`, `tool_use` → `tool.call`, `tool_result` → `tool.result`, `image` → `message.user` with an artifact, anything else → `meta` |
//! | after a `tool_result` | derived `command.run`, `file.edit`, `file.read`, `todo.*` (see `derive.rs`) |
//! | `system` `compact_boundary` | `checkpoint` |
//! | `custom-title`, old `summary` | `session.title` |
//! | every other line (`attachment`, other `system`, `progress`, side records) | `meta` |
//!
//! Levels: what another agent can rely on. Prompts, answers, tool calls and
//! results are L0; thinking text, summaries, titles, checkpoints and derived
//! events are L1; harness text, attachments, encrypted thinking and side
//! records only matter to Claude itself and are L2.
//!
//! It does not judge whether the conversation tree is sound (missing parents
//! just get no `parent_seq`) and does not read sibling files.

use std::collections::BTreeMap;

use git_session_schema::{Agent, ArtifactId, Event, Level, Origin, kinds};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::uuids::UuidIndex;
use super::wire::{Block, Content, Envelope, ToolUseResult};
use super::{NATIVE_KEY, SESSION_TITLE, derive};
use crate::{NativeParent, NativeSession, ParseInput, ParseState, Parsed, Warning, object};

/// Timestamp for records that carry none and follow nothing that did
/// (hand-made files): the epoch says "unknown" without inventing a time.
const UNKNOWN_TS: &str = "1970-01-01T00:00:00Z";

/// The state key of the packed uuid index (see `uuids.rs`).
const UUID_INDEX_KEY: &str = "uuid_index";

/// Memory carried between parses of one file (see `ParseState`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default)]
pub(super) struct State {
    /// Each chain record's uuid and the seq of its last event, for
    /// `parent_seq` of later records (parents may be far back: branches,
    /// compaction). Kept out of serde: it travels as the one string
    /// [`UUID_INDEX_KEY`] so that it is never decoded as a whole.
    #[serde(skip)]
    uuids: UuidIndex,
    /// Tool calls still waiting for their result, by tool id.
    pending: BTreeMap<String, derive::PendingCall>,
    /// The todo list as the last `TodoWrite` left it.
    pub(super) todos: Vec<derive::Todo>,
    /// The last timestamp seen, for records without one.
    last_ts: Option<String>,
    /// Session facts found so far.
    session: Facts,
}

/// Holds what the header will want, accumulated over calls.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default)]
struct Facts {
    native_id: Option<String>,
    cwd: Option<String>,
    title: Option<String>,
    /// A `custom-title` was seen; it beats generated `summary` titles.
    title_is_custom: bool,
    created: Option<String>,
    parent: Option<String>,
}

/// Parses complete transcript lines (see [`crate::Adapter::parse`]).
pub(super) fn parse(input: ParseInput<'_>) -> Parsed {
    let mut warnings = Vec::new();
    let sidecar = input.sidecar;
    let mut state = match input.state {
        None | Some(Value::Null) => State::default(),
        Some(mut value) => {
            let uuids = take_uuid_index(&mut value);
            // By value, so that the strings in the state move instead of
            // being copied.
            match State::deserialize(value) {
                Ok(mut state) => {
                    state.uuids = uuids;
                    state
                }
                Err(e) => {
                    warnings.push(Warning {
                        line: input.records.first_ordinal(),
                        message: format!(
                            "previous parse state unreadable ({e}); starting from empty state"
                        ),
                    });
                    State::default()
                }
            }
        }
    };
    let mut memo = input.memo;
    state.uuids.reuse_map(&mut memo);
    if state.session.native_id.is_none() {
        let (id, parent) = ids_from_source(input.source);
        state.session.native_id = id;
        state.session.parent = parent;
    }
    let mut p = Parser {
        events: Vec::new(),
        artifacts: Vec::new(),
        warnings,
        next_seq: input.next_seq,
        state,
    };
    // One UTF-8 check of the whole block lets the JSON parser skip checking
    // every string again and lets the lines be cut with a vectorized search;
    // a block with invalid UTF-8 is read line by line, each line on its own.
    match input.records {
        crate::Records::Lines {
            bytes, first_line, ..
        } => match std::str::from_utf8(bytes) {
            Ok(text) => {
                for (this, line) in (first_line..).zip(text.split('\n')) {
                    if !is_blank(line.as_bytes()) {
                        p.line(this, line.as_bytes(), serde_json::from_str(line));
                    }
                }
            }
            Err(_) => {
                for (this, line) in (first_line..).zip(bytes.split(|&b| b == b'\n')) {
                    if !is_blank(line) {
                        p.line(this, line, serde_json::from_slice(line));
                    }
                }
            }
        },
        other => {
            for record in other.iter() {
                p.line(
                    record.pos.ordinal(),
                    record.bytes,
                    serde_json::from_slice(record.bytes),
                );
            }
        }
    }
    let facts = &p.state.session;
    let session = NativeSession {
        native_id: facts.native_id.clone(),
        cwd: facts.cwd.clone(),
        title: facts.title.clone(),
        created: facts.created.clone(),
        parent: facts.parent.as_ref().map(|id| NativeParent {
            native_id: id.clone(),
            // The spawning Agent call is named in `agent-<id>.meta.json`,
            // which comes as the sidecar when the caller has it.
            spawned_by: sidecar
                .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok())
                .and_then(|meta| {
                    meta.get("toolUseId")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                }),
            continues: false,
        }),
    };
    p.state.uuids.keep_map(&mut memo);
    let uuids = std::mem::take(&mut p.state.uuids).into_packed();
    let mut state = serde_json::to_value(&p.state).expect("the parse state is plain data");
    if let Value::Object(m) = &mut state {
        m.insert(UUID_INDEX_KEY.into(), Value::String(uuids));
    }
    // Built field by field on top of the default so that fields added to
    // `Parsed` later need no change here.
    let mut parsed = Parsed {
        events: p.events,
        artifacts: p.artifacts,
        warnings: p.warnings,
        state: state as ParseState,
        memo,
        ..Default::default()
    };
    parsed.session = session;
    parsed
}

/// Takes the packed uuid index out of a state value; a state written before
/// the index was packed holds a `uuids` map instead, which is converted.
fn take_uuid_index(state: &mut Value) -> UuidIndex {
    let Some(m) = state.as_object_mut() else {
        return UuidIndex::default();
    };
    match m.remove(UUID_INDEX_KEY) {
        Some(Value::String(packed)) => UuidIndex::from_packed(packed),
        _ => {
            let mut index = UuidIndex::default();
            if let Some(Value::Object(old)) = m.remove("uuids") {
                let mut entries: Vec<(u64, &str)> = old
                    .iter()
                    .filter_map(|(uuid, seq)| Some((seq.as_u64()?, uuid.as_str())))
                    .collect();
                // In file order, as if the records were parsed again.
                entries.sort_unstable();
                for (seq, uuid) in entries {
                    index.insert(uuid, seq);
                }
            }
            index
        }
    }
}

/// Returns the session id and, for a sub-agent transcript, the parent id,
/// from a path like `projects/<dir>/<id>.jsonl` or
/// `projects/<dir>/<id>/subagents/agent-<a>.jsonl`.
fn ids_from_source(source: &str) -> (Option<String>, Option<String>) {
    let parts: Vec<&str> = source
        .split(['/', '\\'])
        .filter(|s| !s.is_empty())
        .collect();
    let stem = |file: &str| file.strip_suffix(".jsonl").map(str::to_owned);
    match parts.as_slice() {
        [.., session, "subagents", file] if file.starts_with("agent-") => match stem(file) {
            Some(agent) => (
                Some(format!("{session}/{agent}")),
                Some((*session).to_owned()),
            ),
            None => (None, None),
        },
        [.., file] => (stem(file), None),
        [] => (None, None),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Holds one parse in progress.
struct Parser {
    events: Vec<Event>,
    artifacts: Vec<(ArtifactId, Vec<u8>)>,
    warnings: Vec<Warning>,
    next_seq: u64,
    state: State,
}

/// Holds what every event of one line shares.
struct Line {
    no: u64,
    ts: String,
    uuid: Option<String>,
    /// Events made from this line so far (for `#k` native ids).
    made: usize,
    /// The seq of this line's previous event, or the parent record's.
    parent: Option<u64>,
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

impl Parser {
    /// Maps one line, given as the JSON parser read it.
    fn line(&mut self, no: u64, raw: &[u8], value: serde_json::Result<Value>) {
        match value {
            Ok(Value::Object(record)) => self.record(no, record),
            Ok(other) => self.unparsed(
                no,
                raw,
                format!("not a JSON object ({})", type_name(&other)),
            ),
            Err(e) => match crate::lossy_json(raw) {
                Some(record) => {
                    self.warn(
                        no,
                        "not valid UTF-8: the invalid bytes were replaced by U+FFFD".into(),
                    );
                    self.record(no, record)
                }
                None => self.unparsed(no, raw, format!("not valid JSON ({e})")),
            },
        }
    }

    /// Keeps a line that is not a record as a `meta` event marked
    /// unparsed, so nothing of the file is lost; a warning names the line.
    fn unparsed(&mut self, no: u64, raw: &[u8], why: String) {
        self.warn(no, format!("{why}; kept as an unparsed meta event"));
        let mut line = Line {
            no,
            ts: self
                .state
                .last_ts
                .clone()
                .unwrap_or_else(|| UNKNOWN_TS.to_owned()),
            uuid: None,
            made: 0,
            parent: None,
        };
        let payload = serde_json::json!({ "unparsed": String::from_utf8_lossy(raw), "error": why });
        self.push(&mut line, "system", kinds::META, Level::History, payload);
    }

    fn warn(&mut self, line: u64, message: String) {
        self.warnings.push(Warning { line, message });
    }

    /// Appends one event for `line` and returns its seq.
    fn push(
        &mut self,
        line: &mut Line,
        actor: &str,
        kind: &str,
        level: Level,
        payload: Value,
    ) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut event = Event::new(
            seq,
            line.ts.clone(),
            Agent::Claude,
            actor,
            kind,
            level,
            payload,
        );
        event.parent_seq = line.parent;
        let native_id = line.uuid.as_ref().map(|uuid| match line.made {
            0 => uuid.clone(),
            k => format!("{uuid}#{k}"),
        });
        event.origin = Some(origin(native_id, line.no));
        line.made += 1;
        // Events of one line form a chain; only uuid-less side records stand
        // apart from the tree.
        if line.uuid.is_some() {
            line.parent = Some(seq);
        }
        self.events.push(event);
        seq
    }

    fn record(&mut self, no: u64, mut record: Map<String, Value>) {
        // The content is rebuilt from events, so it leaves the record first.
        let content = record
            .get_mut("message")
            .and_then(Value::as_object_mut)
            .and_then(|m| m.remove("content"));
        let mut value = Value::Object(record);
        let env = match Envelope::deserialize(&value) {
            Ok(env) => env,
            Err(e) => {
                restore_content(&mut value, content);
                self.warn(
                    no,
                    format!("unexpected record shape ({e}); kept as a meta event"),
                );
                let ts = self
                    .state
                    .last_ts
                    .clone()
                    .unwrap_or_else(|| UNKNOWN_TS.to_owned());
                // Still a tree node if it has a usable uuid: later lines may
                // name it as their parent.
                let uuid = value.get("uuid").and_then(Value::as_str).map(str::to_owned);
                let mut line = Line {
                    no,
                    ts,
                    uuid: uuid.clone(),
                    made: 0,
                    parent: None,
                };
                let kind = value.get("type").cloned().unwrap_or(Value::Null);
                let seq = self.push(
                    &mut line,
                    "system",
                    kinds::META,
                    Level::Native,
                    meta_payload(kind, value),
                );
                if let Some(uuid) = uuid {
                    self.state.uuids.insert(&uuid, seq);
                }
                return;
            }
        };
        self.note_facts(&env);
        let ts = env
            .timestamp
            .clone()
            .or_else(|| self.state.last_ts.clone())
            .unwrap_or_else(|| UNKNOWN_TS.to_owned());
        let parent = env
            .parent_uuid
            .as_ref()
            .or(env.logical_parent_uuid.as_ref())
            .and_then(|p| self.state.uuids.get(p));
        let mut line = Line {
            no,
            ts,
            uuid: env.uuid.clone(),
            made: 0,
            parent: env.uuid.as_ref().and(parent),
        };
        let kind = env.kind.as_deref().unwrap_or("");
        match (kind, content) {
            ("user" | "assistant", Some(content)) => {
                match Content::from_value(content) {
                    Ok(parsed) => self.message(&mut line, &env, value, parsed),
                    Err(content) => {
                        // Neither a string nor a list: keep it whole.
                        restore_content(&mut value, Some(content));
                        self.push(
                            &mut line,
                            "system",
                            kinds::META,
                            Level::Native,
                            meta_payload(json!(kind), value),
                        );
                    }
                }
            }
            (_, content) => {
                restore_content(&mut value, content);
                self.other(&mut line, &env, value);
            }
        }
        if let (Some(uuid), Some(last)) = (&env.uuid, line.parent)
            && line.made > 0
        {
            self.state.uuids.insert(uuid, last);
        }
        // A sub-agent's record inside the main file (the older layout):
        // its events say so, so that no other agent gets them as main-line
        // turns. A `subagents/` transcript is the sub-agent's own session.
        if env.is_sidechain == Some(true) && self.state.session.parent.is_none() {
            let made = line.made;
            let at = self.events.len().saturating_sub(made);
            for event in &mut self.events[at..] {
                if let Value::Object(p) = &mut event.payload {
                    p.insert("sidechain".into(), Value::Bool(true));
                    if let Some(a) = &env.agent_id {
                        p.insert("subagent".into(), json!(a));
                    }
                }
            }
        }
    }

    fn note_facts(&mut self, env: &Envelope) {
        let facts = &mut self.state.session;
        if let Some(ts) = &env.timestamp {
            facts.created.get_or_insert_with(|| ts.clone());
            self.state.last_ts = Some(ts.clone());
        }
        if facts.cwd.is_none() {
            facts.cwd = env.cwd.clone();
        }
        if facts.native_id.is_none() {
            // No usable file name: fall back to what the lines say.
            facts.native_id = match (&env.session_id, &env.agent_id, env.is_sidechain) {
                (Some(s), Some(a), Some(true)) => {
                    facts.parent = Some(s.clone());
                    Some(format!("{s}/agent-{a}"))
                }
                (Some(s), _, _) => Some(s.clone()),
                _ => None,
            };
        }
        match env.kind.as_deref() {
            Some("custom-title") => {
                if let Some(t) = &env.custom_title {
                    facts.title = Some(t.clone());
                    facts.title_is_custom = true;
                }
            }
            Some("summary") if !facts.title_is_custom => {
                if let Some(t) = &env.summary {
                    facts.title = Some(t.clone());
                }
            }
            _ => {}
        }
    }

    /// Maps a line that is not a user or assistant message.
    fn other(&mut self, line: &mut Line, env: &Envelope, record: Value) {
        let kind = env.kind.clone().map(Value::String).unwrap_or(Value::Null);
        match (env.kind.as_deref(), env.subtype.as_deref()) {
            (Some("system"), Some("compact_boundary")) => {
                let mut payload = json!({"reason": "compaction"});
                if let Some(trigger) = record.pointer("/compactMetadata/trigger") {
                    payload["trigger"] = trigger.clone();
                }
                payload[NATIVE_KEY] = object([("record", record)]);
                self.push(line, "system", kinds::CHECKPOINT, Level::Context, payload);
            }
            (Some("custom-title"), _) | (Some("summary"), _)
                if env.custom_title.is_some() || env.summary.is_some() =>
            {
                let title = env.custom_title.clone().or_else(|| env.summary.clone());
                let source = if env.custom_title.is_some() {
                    "custom"
                } else {
                    "summary"
                };
                let payload = object([
                    ("title", json!(title)),
                    ("source", json!(source)),
                    (NATIVE_KEY, object([("record", record)])),
                ]);
                let actor = if source == "custom" { "user" } else { "system" };
                self.push(line, actor, SESSION_TITLE, Level::Context, payload);
            }
            _ => {
                self.push(
                    line,
                    "system",
                    kinds::META,
                    Level::Native,
                    meta_payload(kind, record),
                );
            }
        }
    }

    /// Maps a user or assistant line, one event per content block.
    fn message(&mut self, line: &mut Line, env: &Envelope, record: Value, content: Content) {
        let assistant = env.kind.as_deref() == Some("assistant");
        let harness = env.is_meta == Some(true);
        let summary = env.is_compact_summary == Some(true);
        let (actor, text_level) = match (assistant, harness, summary) {
            (true, _, _) => ("agent:claude", Level::History),
            (false, _, true) => ("system", Level::Context),
            (false, true, _) => ("system", Level::Native),
            (false, false, false) => ("user", Level::History),
        };
        let text_kind = if assistant {
            kinds::MESSAGE_ASSISTANT
        } else {
            kinds::MESSAGE_USER
        };
        let model = env.message.as_ref().and_then(|m| m.model.clone());
        let text_payload = |text: String| {
            let mut p = object([("text", Value::String(text))]);
            if let Some(m) = &model {
                p["model"] = json!(m);
            }
            if summary {
                p["compact_summary"] = json!(true);
            }
            p
        };
        let mut record = Some(record);
        match content {
            Content::Text(text) => {
                let mut payload = text_payload(text);
                payload[NATIVE_KEY] = object([
                    ("record", record.take().unwrap_or(Value::Null)),
                    ("content", json!("string")),
                ]);
                self.push(line, actor, text_kind, text_level, payload);
            }
            Content::Blocks(blocks) if blocks.is_empty() => {
                let mut whole = record.take().unwrap_or(Value::Null);
                restore_content(&mut whole, Some(Value::Array(Vec::new())));
                let kind = env.kind.clone().map(Value::String).unwrap_or(Value::Null);
                self.push(
                    line,
                    "system",
                    kinds::META,
                    Level::Native,
                    meta_payload(kind, whole),
                );
            }
            Content::Blocks(blocks) => {
                let tool_use_result = record
                    .as_ref()
                    .and_then(|r| r.get("toolUseResult"))
                    .and_then(|t| ToolUseResult::deserialize(t).ok());
                let results_in_line = blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                    .count();
                let mut finished = Vec::new();
                for block in blocks {
                    let mapped = self.block(
                        Block::from_value(block),
                        actor,
                        text_kind,
                        text_level,
                        &text_payload,
                    );
                    let MappedBlock {
                        actor,
                        kind,
                        level,
                        mut payload,
                        refs,
                        native,
                        result,
                    } = mapped;
                    let mut native = native;
                    if let Some(r) = record.take() {
                        native.insert("record".into(), r);
                    }
                    payload[NATIVE_KEY] = Value::Object(native);
                    let seq = self.push(line, actor, kind, level, payload);
                    if let Some(event) = self.events.last_mut() {
                        event.refs = refs;
                    }
                    if let Some(r) = result {
                        finished.push((seq, r));
                    }
                }
                // Richer events come after the line's own, so that a
                // renderer can rebuild the line from a contiguous run.
                for (result_seq, r) in finished {
                    let Some(call) = self.state.pending.remove(&r.call_id) else {
                        continue;
                    };
                    let view = (results_in_line == 1)
                        .then_some(tool_use_result.as_ref())
                        .flatten();
                    // An Agent/Task result names the sub-agent whose
                    // transcript is parsed as its own session: record that
                    // session's native id so the two can be linked.
                    if let (Some(agent), Some(session)) = (
                        view.and_then(|v| v.agent_id.as_ref()),
                        self.state.session.native_id.as_ref(),
                    ) && let Some(event) =
                        self.events.iter_mut().rev().find(|e| e.seq == result_seq)
                    {
                        // Nested sub-agents live beside their parent, under the
                        // main session's `subagents/` folder.
                        let main = session.split('/').next().unwrap_or(session);
                        event.payload["spawned_session"] = json!(format!("{main}/agent-{agent}"));
                    }
                    let derived = derive::derive(&call, &r, view, &mut self.state.todos);
                    for (i, d) in derived.into_iter().enumerate() {
                        let mut payload = d.payload;
                        payload["derived_from"] =
                            json!({"call_seq": call.seq, "result_seq": result_seq});
                        let seq = self.next_seq;
                        self.next_seq += 1;
                        let mut event = Event::new(
                            seq,
                            line.ts.clone(),
                            Agent::Claude,
                            "tool",
                            d.kind,
                            Level::Context,
                            payload,
                        );
                        event.parent_seq = Some(result_seq);
                        let suffix = if i == 0 {
                            String::new()
                        } else {
                            format!("/{i}")
                        };
                        event.origin = Some(origin(
                            Some(format!("{}/{}{suffix}", r.call_id, d.kind)),
                            line.no,
                        ));
                        self.events.push(event);
                    }
                }
            }
        }
    }

    /// Maps one content block to an event body.
    fn block(
        &mut self,
        block: Block,
        actor: &'static str,
        text_kind: &'static str,
        text_level: Level,
        text_payload: &dyn Fn(String) -> Value,
    ) -> MappedBlock {
        let mut out = MappedBlock {
            actor,
            kind: text_kind,
            level: text_level,
            payload: Value::Null,
            refs: Vec::new(),
            native: Map::new(),
            result: None,
        };
        match block {
            Block::Text(b) => {
                out.payload = text_payload(b.text);
                out.native.insert("block".into(), Value::Object(b.extra));
            }
            Block::Thinking(b) => {
                out.kind = kinds::MESSAGE_THINKING;
                out.level = Level::Context;
                out.payload = object([("text", Value::String(b.thinking))]);
                if let Some(sig) = b.signature {
                    // Bound to Claude: only Anthropic's API accepts it.
                    out.payload["opaque"] = object([
                        ("agent", json!("claude")),
                        ("signature", Value::String(sig)),
                    ]);
                }
                out.native.insert("block".into(), Value::Object(b.extra));
            }
            Block::RedactedThinking(b) => {
                out.kind = kinds::MESSAGE_THINKING;
                out.level = Level::Native;
                out.payload = object([
                    ("redacted", Value::Bool(true)),
                    (
                        "opaque",
                        object([("agent", json!("claude")), ("data", Value::String(b.data))]),
                    ),
                ]);
                out.native.insert("block".into(), Value::Object(b.extra));
            }
            Block::ToolUse(b) => {
                out.kind = kinds::TOOL_CALL;
                out.level = Level::History;
                out.payload = object([
                    ("call_id", Value::String(b.id.clone())),
                    ("name", Value::String(b.name.clone())),
                    ("arguments", b.input.clone()),
                ]);
                out.native.insert("block".into(), Value::Object(b.extra));
                self.state.pending.insert(
                    b.id.clone(),
                    derive::PendingCall {
                        name: b.name,
                        input: b.input,
                        seq: self.next_seq,
                    },
                );
            }
            Block::ToolResult(b) => {
                out.actor = "tool";
                out.kind = kinds::TOOL_RESULT;
                out.level = Level::History;
                let mut skeleton = b.extra;
                let mut absent = Vec::new();
                let output = match b.content {
                    None => {
                        absent.push(json!("content"));
                        String::new()
                    }
                    Some(Value::String(s)) => s,
                    Some(Value::Array(items)) => {
                        let (output, items) = self.result_items(items, &mut out.refs);
                        skeleton.insert("content".into(), Value::Array(items));
                        output
                    }
                    Some(other) => {
                        // Not a shape the API defines; the renderer writes it back as is.
                        let text = other.to_string();
                        skeleton.insert("content".into(), other);
                        text
                    }
                };
                let is_error = match b.is_error {
                    Some(e) => e,
                    None => {
                        absent.push(json!("is_error"));
                        false
                    }
                };
                out.payload = object([
                    ("call_id", Value::String(b.tool_use_id.clone())),
                    ("output", Value::String(output.clone())),
                    ("is_error", Value::Bool(is_error)),
                ]);
                out.native.insert("block".into(), Value::Object(skeleton));
                if !absent.is_empty() {
                    out.native.insert("absent".into(), Value::Array(absent));
                }
                out.result = Some(derive::ResultView {
                    call_id: b.tool_use_id,
                    output,
                    is_error,
                });
            }
            Block::Image(b) => match self.image(b.source.data.as_deref()) {
                Some(id) => {
                    out.payload = json!({"image": {"media_type": b.source.media_type, "artifact": id.to_string()}});
                    out.refs.push(id.to_ref());
                    let mut skeleton = b.extra;
                    let mut source = b.source.extra;
                    source.insert("type".into(), json!("base64"));
                    if let Some(m) = b.source.media_type {
                        source.insert("media_type".into(), json!(m));
                    }
                    skeleton.insert("source".into(), Value::Object(source));
                    out.native.insert("block".into(), Value::Object(skeleton));
                }
                None => {
                    out.kind = kinds::META;
                    out.level = Level::Native;
                    out.payload = json!({"block_type": "image"});
                    let mut whole = b.extra;
                    whole.insert("source".into(), image_source_value(b.source));
                    out.native.insert("block".into(), Value::Object(whole));
                }
            },
            Block::Other(v) => {
                out.kind = kinds::META;
                out.level = Level::Native;
                out.payload = json!({"block_type": v.get("type")});
                out.native.insert("block".into(), v);
            }
        }
        out
    }

    /// Returns a tool result's text and its list with the text (when there is
    /// exactly one text block) and the image bytes taken out.
    fn result_items(
        &mut self,
        mut items: Vec<Value>,
        refs: &mut Vec<String>,
    ) -> (String, Vec<Value>) {
        let texts: Vec<usize> = items
            .iter()
            .enumerate()
            .filter(|(_, i)| {
                i.get("type").and_then(Value::as_str) == Some("text")
                    && i.get("text").is_some_and(Value::is_string)
            })
            .map(|(n, _)| n)
            .collect();
        let output = texts
            .iter()
            .filter_map(|&n| items[n].get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        if let [only] = texts.as_slice()
            && let Some(obj) = items[*only].as_object_mut()
        {
            obj.remove("text");
        }
        for item in &mut items {
            let is_image = item.get("type").and_then(Value::as_str) == Some("image")
                && item.pointer("/source/type").and_then(Value::as_str) == Some("base64");
            if !is_image {
                continue;
            }
            let data = item
                .pointer("/source/data")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let Some(id) = self.image(data.as_deref()) {
                if let Some(source) = item.get_mut("source").and_then(Value::as_object_mut) {
                    source.remove("data");
                }
                refs.push(id.to_ref());
            }
        }
        (output, items)
    }

    /// Decodes base64 image bytes into an artifact; `None` keeps them inline.
    fn image(&mut self, data: Option<&str>) -> Option<ArtifactId> {
        crate::images::decode(data?, &mut self.artifacts)
    }
}

/// Holds one block's event body before it is numbered.
struct MappedBlock {
    actor: &'static str,
    kind: &'static str,
    level: Level,
    payload: Value,
    refs: Vec<String>,
    native: Map<String, Value>,
    result: Option<derive::ResultView>,
}

fn origin(native_id: Option<String>, line: u64) -> Origin {
    Origin {
        agent: Agent::Claude,
        native_id,
        native_seq: Some(line),
        extra: BTreeMap::new(),
    }
}

/// Returns the body of a `meta` event: the record's type (and its subtype
/// or attachment type, for readers that only skim) plus the whole record.
fn meta_payload(kind: Value, record: Value) -> Value {
    let mut payload = object([("record_type", kind)]);
    let subtype = record
        .get("subtype")
        .or_else(|| record.pointer("/attachment/type"))
        .or_else(|| record.pointer("/data/type"))
        .filter(|v| v.is_string());
    if let Some(sub) = subtype {
        payload["subtype"] = sub.clone();
    }
    payload[NATIVE_KEY] = object([("record", record)]);
    payload
}

fn restore_content(record: &mut Value, content: Option<Value>) {
    if let (Some(c), Some(m)) = (
        content,
        record.get_mut("message").and_then(Value::as_object_mut),
    ) {
        m.insert("content".into(), c);
    }
}

fn image_source_value(source: super::wire::ImageSource) -> Value {
    let mut map = source.extra;
    if let Some(k) = source.kind {
        map.insert("type".into(), json!(k));
    }
    if let Some(m) = source.media_type {
        map.insert("media_type".into(), json!(m));
    }
    if let Some(d) = source.data {
        map.insert("data".into(), json!(d));
    }
    Value::Object(map)
}
