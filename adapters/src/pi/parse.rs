//! Pi session lines to canonical events.
//!
//! | line | events |
//! | --- | --- |
//! | header (`type: "session"`, line 1) | `session.start` |
//! | `message` user / assistant | one event per content block: `text` → `message.user` / `message.assistant`, `image` → `message.user` with an artifact, `thinking` → `message.thinking`, `toolCall` → `tool.call`, another block → `meta`; a string content → one `message.user` |
//! | `message` toolResult | `tool.result`, then derived `command.run` (bash), `file.edit` (edit, write), `file.read` (read) |
//! | `message` bashExecution (a user `!cmd`) | `command.run` |
//! | `message` custom, `custom_message` | `message.user` from actor `system` |
//! | `compaction`, `branch_summary` | `checkpoint` |
//! | `session_info` | `session.title` |
//! | `model_change`, `thinking_level_change`, `custom`, `label`, `usage`, `context_edit`, `message` system, any other type (e.g. the schovest fork's `subagent_run`) | `meta` with the whole entry |
//! | a line that is no JSON object | `meta` with the raw line (`unparsed`) and a warning |
//!
//! Levels: prompts, answers, tool calls and results are L0; thinking,
//! summaries, titles, checkpoints, commands, harness messages and derived
//! events are L1; everything only Pi itself reads is L2.
//!
//! The tree: the first event of an entry gets as `parent_seq` the last event
//! of the entry its `parentId` names; the events of one entry form a chain.
//! An entry whose `parentId` names no earlier entry starts an orphaned
//! subtree: it is kept (as Pi keeps it in the file), gets no `parent_seq`,
//! and a warning names its line. Duplicate ids and entries without an id
//! are kept and reported the same way; later entries link to the last
//! entry of an id, as Pi's index does.
//!
//! Old files: a header without `version` is v1, whose entries have no ids.
//! They are mapped as Pi's own migration would (formats/pi.md): each entry
//! gets an id (here the deterministic `v1-<n>` for the n-th entry of Pi's
//! entry list, where Pi draws random ones) and the previous entry as parent,
//! a compaction's `firstKeptEntryIndex` becomes `firstKeptEntryId`, and v1/v2
//! `hookMessage` roles become `custom`. The native file is not touched.

use std::collections::BTreeMap;

use git_session_schema::{Agent, ArtifactId, Event, Level, Origin, kinds};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::derive::{self, PendingCall, ResultView};
use super::{NATIVE_KEY, VERSION};
use crate::claude::uuids::UuidIndex;
use crate::{NativeParent, NativeSession, ParseState, Parsed, Warning, object};

/// Timestamp for entries that carry none and follow nothing that did.
const UNKNOWN_TS: &str = "1970-01-01T00:00:00Z";

/// The state key of the packed id index.
const ID_INDEX_KEY: &str = "id_index";

/// Memory carried between parses of one file.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default)]
struct State {
    /// Entry ids and the seq of their entry's last event; travels as the
    /// one string [`ID_INDEX_KEY`].
    #[serde(skip)]
    ids: UuidIndex,
    /// Tool calls still waiting for their result, by call id.
    pending: BTreeMap<String, PendingCall>,
    /// The last timestamp seen, for entries without one.
    last_ts: Option<String>,
    /// The first non-blank line was handled.
    header_seen: bool,
    /// The header's format version (1 when it has none).
    version: u64,
    /// For v1 files: entries in Pi's list so far (the header is entry 0),
    /// and the id given to the last one.
    entries: u64,
    prev_id: Option<String>,
    session: Facts,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default)]
struct Facts {
    native_id: Option<String>,
    cwd: Option<String>,
    title: Option<String>,
    created: Option<String>,
    /// The native id of the session this one was forked or cloned from.
    parent: Option<String>,
}

/// Parses complete lines of a session file (see [`crate::Adapter::parse`]);
/// takes plain values so that it does not depend on the input struct.
pub(super) fn parse(
    bytes: &[u8],
    first_line: u64,
    next_seq: u64,
    state: Option<ParseState>,
    source: &str,
    mut memo: crate::ParseMemo,
) -> Parsed {
    let mut warnings = Vec::new();
    let mut state = match state {
        None | Some(Value::Null) => State::default(),
        Some(mut value) => {
            let ids = match value.as_object_mut().and_then(|m| m.remove(ID_INDEX_KEY)) {
                Some(Value::String(packed)) => UuidIndex::from_packed(packed),
                _ => UuidIndex::default(),
            };
            match State::deserialize(value) {
                Ok(mut s) => {
                    s.ids = ids;
                    s
                }
                Err(e) => {
                    warnings.push(Warning {
                        line: first_line,
                        message: format!(
                            "previous parse state unreadable ({e}); starting from empty state"
                        ),
                    });
                    State::default()
                }
            }
        }
    };
    state.ids.reuse_map(&mut memo);
    let mut p = Parser {
        events: Vec::new(),
        artifacts: Vec::new(),
        warnings,
        next_seq,
        state,
        source,
    };
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            for (no, line) in (first_line..).zip(text.split('\n')) {
                if !is_blank(line.as_bytes()) {
                    p.line(no, line.as_bytes(), serde_json::from_str(line));
                }
            }
        }
        Err(_) => {
            for (no, line) in (first_line..).zip(bytes.split(|&b| b == b'\n')) {
                if !is_blank(line) {
                    p.line(no, line, serde_json::from_slice(line));
                }
            }
        }
    }
    let f = &p.state.session;
    let session = NativeSession {
        // A file whose header has no id is still a session of this repo:
        // it is named by its file, which only git-session does (Pi itself
        // refuses or replaces such a file).
        native_id: f.native_id.clone().or_else(|| file_stem(source)),
        cwd: f.cwd.clone(),
        title: f.title.clone(),
        created: f.created.clone(),
        parent: f.parent.clone().map(|native_id| NativeParent {
            native_id,
            spawned_by: None,
            continues: false,
        }),
    };
    p.state.ids.keep_map(&mut memo);
    let ids = std::mem::take(&mut p.state.ids).into_packed();
    let mut state = serde_json::to_value(&p.state).expect("the parse state is plain data");
    if let Value::Object(m) = &mut state {
        m.insert(ID_INDEX_KEY.into(), Value::String(ids));
    }
    let mut parsed = Parsed {
        events: p.events,
        artifacts: p.artifacts,
        warnings: p.warnings,
        state,
        memo,
        ..Default::default()
    };
    parsed.session = session;
    parsed
}

/// Returns the file's name without `.jsonl` and without Pi's `<ts>_` prefix.
fn file_stem(source: &str) -> Option<String> {
    let name = source.rsplit(['/', '\\']).next()?.strip_suffix(".jsonl")?;
    let id = name.rsplit_once('_').map_or(name, |(_, id)| id);
    (!id.is_empty()).then(|| id.to_owned())
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
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

struct Parser<'a> {
    events: Vec<Event>,
    artifacts: Vec<(ArtifactId, Vec<u8>)>,
    warnings: Vec<Warning>,
    next_seq: u64,
    state: State,
    source: &'a str,
}

/// Holds what the events of one line share.
struct Line {
    no: u64,
    ts: String,
    id: Option<String>,
    made: usize,
    /// The seq of this line's previous event, or of the parent entry's last.
    parent: Option<u64>,
}

impl Parser<'_> {
    fn line(&mut self, no: u64, raw: &[u8], value: serde_json::Result<Value>) {
        let first = !self.state.header_seen;
        self.state.header_seen = true;
        match value {
            Ok(Value::Object(record)) => {
                if first {
                    self.header(no, record);
                } else {
                    self.state.entries += 1;
                    self.entry(no, record);
                }
            }
            Ok(other) => {
                if first {
                    self.no_header(no);
                } else {
                    // Pi's entry list holds every JSON value of the file.
                    self.state.entries += 1;
                }
                self.unparsed(
                    no,
                    raw,
                    format!("not a JSON object ({})", type_name(&other)),
                );
            }
            Err(e) => {
                if first {
                    self.no_header(no);
                }
                self.unparsed(no, raw, format!("not valid JSON ({e})"));
            }
        }
    }

    fn warn(&mut self, line: u64, message: String) {
        self.warnings.push(Warning { line, message });
    }

    fn ts(&self) -> String {
        self.state
            .last_ts
            .clone()
            .unwrap_or_else(|| UNKNOWN_TS.to_owned())
    }

    fn no_header(&mut self, no: u64) {
        self.state.version = VERSION;
        self.warn(
            no,
            format!(
                "{}: the first line is not a Pi session header; the entries are captured, and a write-back gets a new header",
                self.source
            ),
        );
    }

    /// Keeps a line that is no entry as a `meta` event with its raw text;
    /// a write-back puts it back as it was (Pi skips such lines).
    fn unparsed(&mut self, no: u64, raw: &[u8], why: String) {
        self.warn(no, format!("{why}; kept as an unparsed meta event"));
        let mut line = Line {
            no,
            ts: self.ts(),
            id: None,
            made: 0,
            parent: None,
        };
        let payload = json!({"unparsed": String::from_utf8_lossy(raw), "error": why});
        self.push(&mut line, "system", kinds::META, Level::History, payload);
    }

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
        let mut event = Event::new(seq, line.ts.clone(), Agent::Pi, actor, kind, level, payload);
        event.parent_seq = line.parent;
        let native_id = line.id.as_ref().map(|id| match line.made {
            0 => id.clone(),
            k => format!("{id}#{k}"),
        });
        event.origin = Some(origin(native_id, line.no));
        line.made += 1;
        line.parent = Some(seq);
        self.events.push(event);
        seq
    }

    fn header(&mut self, no: u64, record: Map<String, Value>) {
        if record.get("type").and_then(Value::as_str) != Some("session") {
            self.no_header(no);
            self.state.entries += 1;
            self.entry(no, record);
            return;
        }
        let version = match record.get("version") {
            None => 1,
            Some(v) => {
                match v.as_u64() {
                    Some(n @ 1..=3) => n,
                    Some(n) if n > VERSION => {
                        self.warn(
                        no,
                        format!("session format version {n} is newer than {VERSION}; read as version {VERSION}"),
                    );
                        VERSION
                    }
                    _ => {
                        self.warn(no, format!("header version {v} is not a known version; read as version {VERSION}"));
                        VERSION
                    }
                }
            }
        };
        self.state.version = version;
        let facts = &mut self.state.session;
        facts.native_id = record.get("id").and_then(Value::as_str).map(str::to_owned);
        facts.cwd = record.get("cwd").and_then(Value::as_str).map(str::to_owned);
        facts.created = record
            .get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_owned);
        // A fork or clone names its source file (`parentSession`; v1:
        // `branchedFrom`), which Pi names `<time>_<id>.jsonl`.
        facts.parent = ["parentSession", "branchedFrom"]
            .iter()
            .find_map(|k| record.get(*k).and_then(Value::as_str))
            .and_then(file_stem)
            .filter(|id| super::is_valid_session_id(id));
        if let Some(ts) = &facts.created {
            self.state.last_ts = Some(ts.clone());
        }
        if facts.native_id.is_none() {
            self.warn(
                no,
                format!(
                    "{}: the session header has no id (Pi 1.6.0 refuses such a file and 0.73.1 replaces it); captured under the file's name, and a write-back gets a valid header",
                    self.source
                ),
            );
        }
        let payload = object([
            ("cwd", record.get("cwd").cloned().unwrap_or(Value::Null)),
            ("version", json!(version)),
            (NATIVE_KEY, object([("record", Value::Object(record))])),
        ]);
        let mut line = Line {
            no,
            ts: self.ts(),
            id: None,
            made: 0,
            parent: None,
        };
        self.push(
            &mut line,
            "system",
            kinds::SESSION_START,
            Level::Native,
            payload,
        );
    }

    /// Brings a v1/v2 entry to v3 as Pi's migration does.
    fn migrate(&mut self, record: &mut Map<String, Value>) {
        migrate(
            self.state.version,
            self.state.entries,
            &mut self.state.prev_id,
            record,
        );
    }

    fn entry(&mut self, no: u64, mut record: Map<String, Value>) {
        self.migrate(&mut record);
        let ts = record
            .get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(ts) = &ts {
            self.state.last_ts = Some(ts.clone());
        }
        let id = record.get("id").and_then(Value::as_str).map(str::to_owned);
        let parent = match record.get("parentId") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) => match self.state.ids.get(p) {
                Some(seq) => Some(seq),
                None => {
                    self.warn(
                        no,
                        format!(
                            "parentId {p:?} names no earlier entry: this entry starts an orphaned branch (Pi's context stops here); kept"
                        ),
                    );
                    None
                }
            },
            Some(other) => {
                self.warn(
                    no,
                    format!(
                        "parentId is {}; the entry is kept without a parent",
                        type_name(other)
                    ),
                );
                None
            }
        };
        match &id {
            None => self.warn(
                no,
                "entry has no id: nothing can link to it; kept".to_owned(),
            ),
            Some(i) if self.state.ids.get(i).is_some() => self.warn(
                no,
                format!(
                    "duplicate entry id {i:?}: later entries link to this one, as in Pi; both kept"
                ),
            ),
            _ => {}
        }
        let mut line = Line {
            no,
            ts: ts.unwrap_or_else(|| self.ts()),
            id: id.clone(),
            made: 0,
            parent,
        };
        let kind = record
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        match kind.as_str() {
            "message" => self.message(&mut line, record),
            "compaction" | "branch_summary" => {
                let (reason, link, key) = if kind == "compaction" {
                    ("compaction", "first_kept", "firstKeptEntryId")
                } else {
                    ("branch_summary", "from", "fromId")
                };
                let payload = object([
                    ("reason", json!(reason)),
                    (
                        "summary",
                        record.get("summary").cloned().unwrap_or(Value::Null),
                    ),
                    (link, record.get(key).cloned().unwrap_or(Value::Null)),
                    (NATIVE_KEY, object([("record", Value::Object(record))])),
                ]);
                self.push(
                    &mut line,
                    "system",
                    kinds::CHECKPOINT,
                    Level::Context,
                    payload,
                );
            }
            "session_info" => {
                let name = record
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if let Some(n) = &name {
                    self.state.session.title = Some(n.clone());
                }
                let payload = object([
                    ("title", json!(name)),
                    ("source", json!("custom")),
                    (NATIVE_KEY, object([("record", Value::Object(record))])),
                ]);
                self.push(&mut line, "user", "session.title", Level::Context, payload);
            }
            "custom_message" => {
                let text = text_of(record.get("content"));
                let payload = object([
                    ("text", Value::String(text)),
                    (
                        "custom_type",
                        record.get("customType").cloned().unwrap_or(Value::Null),
                    ),
                    (NATIVE_KEY, object([("record", Value::Object(record))])),
                ]);
                self.push(
                    &mut line,
                    "system",
                    kinds::MESSAGE_USER,
                    Level::Context,
                    payload,
                );
            }
            _ => {
                self.meta(&mut line, json!(kind), record, None);
            }
        }
        if let (Some(id), Some(last)) = (&id, line.parent)
            && line.made > 0
        {
            self.state.ids.insert(id, last);
        }
    }

    fn meta(
        &mut self,
        line: &mut Line,
        kind: Value,
        record: Map<String, Value>,
        role: Option<&str>,
    ) {
        let mut payload = object([("record_type", kind)]);
        if let Some(r) = role {
            payload["role"] = json!(r);
        }
        for (from, to) in [
            ("provider", "provider"),
            ("modelId", "model"),
            ("thinkingLevel", "thinking_level"),
        ] {
            if let Some(v) = record.get(from).filter(|v| v.is_string()) {
                payload[to] = v.clone();
            }
        }
        payload[NATIVE_KEY] = object([("record", Value::Object(record))]);
        self.push(line, "system", kinds::META, Level::Native, payload);
    }

    fn message(&mut self, line: &mut Line, mut record: Map<String, Value>) {
        let role = record
            .get("message")
            .and_then(|m| m.get("role"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        match role.as_str() {
            "user" | "assistant" => {}
            "toolResult" => return self.tool_result(line, record),
            "bashExecution" => {
                let message = record.get("message").cloned().unwrap_or(Value::Null);
                return match derive::bash_execution(&message) {
                    Some(mut payload) => {
                        payload[NATIVE_KEY] = object([("record", Value::Object(record))]);
                        self.push(line, "user", kinds::COMMAND_RUN, Level::Context, payload);
                    }
                    None => self.meta(line, json!("message"), record, Some(&role)),
                };
            }
            "custom" => {
                let text = text_of(record.get("message").and_then(|m| m.get("content")));
                let payload = object([
                    ("text", Value::String(text)),
                    (
                        "custom_type",
                        record
                            .get("message")
                            .and_then(|m| m.get("customType"))
                            .cloned()
                            .unwrap_or(Value::Null),
                    ),
                    (NATIVE_KEY, object([("record", Value::Object(record))])),
                ]);
                self.push(line, "system", kinds::MESSAGE_USER, Level::Context, payload);
                return;
            }
            _ => return self.meta(line, json!("message"), record, Some(&role)),
        }
        let assistant = role == "assistant";
        let content = match record.get_mut("message").and_then(|m| m.get_mut("content")) {
            Some(c @ (Value::String(_) | Value::Array(_))) => c.take(),
            _ => return self.meta(line, json!("message"), record, Some(&role)),
        };
        let m = record.get("message");
        let field = |k: &str| m.and_then(|m| m.get(k)).cloned().unwrap_or(Value::Null);
        let (provider, model, api) = (field("provider"), field("model"), field("api"));
        let (actor, kind) = if assistant {
            ("agent:pi", kinds::MESSAGE_ASSISTANT)
        } else {
            ("user", kinds::MESSAGE_USER)
        };
        let text_payload = |text: String| {
            let mut p = object([("text", Value::String(text))]);
            if assistant {
                p["model"] = model.clone();
                p["provider"] = provider.clone();
            }
            p
        };
        match content {
            Value::String(text) => {
                let mut payload = text_payload(text);
                payload[NATIVE_KEY] = object([
                    ("record", Value::Object(record)),
                    ("content", json!("string")),
                ]);
                self.push(line, actor, kind, Level::History, payload);
            }
            Value::Array(blocks) if blocks.is_empty() => {
                set_content(&mut record, Value::Array(Vec::new()));
                self.meta(line, json!("message"), record, Some(&role));
            }
            Value::Array(blocks) => {
                let mut record = Some(record);
                for block in blocks {
                    let Value::Object(mut block) = block else {
                        // Not a block at all: kept whole as a meta block.
                        let payload = object([("block_type", Value::Null)]);
                        self.block_event(
                            line,
                            &mut record,
                            "system",
                            kinds::META,
                            Level::Native,
                            payload,
                            json!({"whole": block}),
                            Vec::new(),
                        );
                        continue;
                    };
                    let btype = block
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    let lift = |block: &mut Map<String, Value>, key: &str| {
                        block.get_mut(key).map(Value::take)
                    };
                    match btype.as_str() {
                        "text" if block.get("text").is_some_and(Value::is_string) => {
                            let text = lift(&mut block, "text").unwrap_or_default();
                            let payload = text_payload(text.as_str().unwrap_or("").to_owned());
                            self.block_event(
                                line,
                                &mut record,
                                actor,
                                kind,
                                Level::History,
                                payload,
                                Value::Object(block),
                                Vec::new(),
                            );
                        }
                        "image"
                            if !assistant && block.get("data").is_some_and(Value::is_string) =>
                        {
                            let data = block.get("data").and_then(Value::as_str).unwrap_or("");
                            match self.image(data) {
                                Some(id) => {
                                    block.insert("data".into(), Value::Null);
                                    let payload = json!({"image": {"media_type": block.get("mimeType"), "artifact": id.to_string()}});
                                    self.block_event(
                                        line,
                                        &mut record,
                                        actor,
                                        kind,
                                        Level::History,
                                        payload,
                                        Value::Object(block),
                                        vec![id.to_ref()],
                                    );
                                }
                                None => {
                                    let payload = json!({"block_type": "image"});
                                    self.block_event(
                                        line,
                                        &mut record,
                                        "system",
                                        kinds::META,
                                        Level::Native,
                                        payload,
                                        json!({"whole": block}),
                                        Vec::new(),
                                    );
                                }
                            }
                        }
                        "thinking"
                            if assistant && block.get("thinking").is_some_and(Value::is_string) =>
                        {
                            let text = lift(&mut block, "thinking").unwrap_or_default();
                            let redacted = block.get("redacted") == Some(&json!(true));
                            let mut payload = object([("text", text)]);
                            if let Some(sig) = lift(&mut block, "thinkingSignature") {
                                payload["opaque"] = object([
                                    ("agent", json!("pi")),
                                    ("signature", sig),
                                    ("api", api.clone()),
                                    ("provider", provider.clone()),
                                    ("model", model.clone()),
                                ]);
                            }
                            let level = if redacted {
                                payload["redacted"] = json!(true);
                                Level::Native
                            } else {
                                Level::Context
                            };
                            self.block_event(
                                line,
                                &mut record,
                                actor,
                                kinds::MESSAGE_THINKING,
                                level,
                                payload,
                                Value::Object(block),
                                Vec::new(),
                            );
                        }
                        "toolCall"
                            if assistant
                                && block.get("id").is_some_and(Value::is_string)
                                && block.get("name").is_some_and(Value::is_string) =>
                        {
                            let call_id = lift(&mut block, "id").unwrap_or_default();
                            let name = lift(&mut block, "name").unwrap_or_default();
                            let arguments =
                                lift(&mut block, "arguments").unwrap_or_else(|| json!({}));
                            self.state.pending.insert(
                                call_id.as_str().unwrap_or("").to_owned(),
                                PendingCall {
                                    name: name.as_str().unwrap_or("").to_owned(),
                                    arguments: arguments.clone(),
                                    seq: self.next_seq,
                                },
                            );
                            let payload = object([
                                ("call_id", call_id),
                                ("name", name),
                                ("arguments", arguments),
                            ]);
                            self.block_event(
                                line,
                                &mut record,
                                actor,
                                kinds::TOOL_CALL,
                                Level::History,
                                payload,
                                Value::Object(block),
                                Vec::new(),
                            );
                        }
                        _ => {
                            let payload = json!({"block_type": btype});
                            self.block_event(
                                line,
                                &mut record,
                                "system",
                                kinds::META,
                                Level::Native,
                                payload,
                                json!({"whole": block}),
                                Vec::new(),
                            );
                        }
                    }
                }
            }
            _ => unreachable!("content is a string or an array"),
        }
    }

    /// Pushes one block's event; the line's record rides on the first.
    #[allow(clippy::too_many_arguments)]
    fn block_event(
        &mut self,
        line: &mut Line,
        record: &mut Option<Map<String, Value>>,
        actor: &str,
        kind: &str,
        level: Level,
        mut payload: Value,
        block: Value,
        refs: Vec<String>,
    ) {
        let mut native = Map::new();
        if let Some(r) = record.take() {
            native.insert("record".into(), Value::Object(r));
            native.insert("content".into(), json!("blocks"));
        }
        native.insert("block".into(), block);
        payload[NATIVE_KEY] = Value::Object(native);
        self.push(line, actor, kind, level, payload);
        if let Some(e) = self.events.last_mut() {
            e.refs = refs;
        }
    }

    fn tool_result(&mut self, line: &mut Line, mut record: Map<String, Value>) {
        let Some(message) = record.get_mut("message").and_then(Value::as_object_mut) else {
            return self.meta(line, json!("message"), record, Some("toolResult"));
        };
        let call_id = message
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let name = message.get("toolName").cloned().unwrap_or(Value::Null);
        let is_error = message
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut refs = Vec::new();
        let mut native = Map::new();
        let output = match message.get_mut("content").map(Value::take) {
            Some(Value::String(s)) => {
                native.insert("content".into(), json!("string"));
                s
            }
            Some(Value::Array(items)) => {
                let (output, items) = self.result_items(items, &mut refs);
                native.insert("content".into(), json!("items"));
                native.insert("items".into(), Value::Array(items));
                output
            }
            other => {
                // No content, or a shape Pi does not write: left in the record.
                let text = other.as_ref().map(Value::to_string).unwrap_or_default();
                match other {
                    Some(v) => {
                        message.insert("content".into(), v);
                    }
                    None => {
                        message.remove("content");
                    }
                }
                text
            }
        };
        let details = message.get("details").cloned();
        native.insert("record".into(), Value::Object(record));
        let payload = object([
            ("call_id", json!(call_id)),
            ("name", name),
            ("output", json!(output)),
            ("is_error", json!(is_error)),
            (NATIVE_KEY, Value::Object(native)),
        ]);
        let result_seq = self.push(line, "tool", kinds::TOOL_RESULT, Level::History, payload);
        if let Some(e) = self.events.last_mut() {
            e.refs = refs;
        }
        let Some(call) = self.state.pending.remove(&call_id) else {
            return;
        };
        let view = ResultView {
            call_id: &call_id,
            output: &output,
            is_error,
            details: details.as_ref(),
        };
        for (i, (kind, mut payload)) in derive::derive(&call, &view).into_iter().enumerate() {
            payload["derived_from"] = json!({"call_seq": call.seq, "result_seq": result_seq});
            let seq = self.next_seq;
            self.next_seq += 1;
            let mut event = Event::new(
                seq,
                line.ts.clone(),
                Agent::Pi,
                "tool",
                kind,
                Level::Context,
                payload,
            );
            event.parent_seq = Some(result_seq);
            let suffix = if i == 0 {
                String::new()
            } else {
                format!("/{i}")
            };
            event.origin = Some(origin(Some(format!("{call_id}/{kind}{suffix}")), line.no));
            self.events.push(event);
        }
    }

    /// Returns a tool result's text and its list with the single text (and
    /// any image bytes, now artifacts) left as `null`.
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
            && let Some(text) = items[*only].get_mut("text")
        {
            *text = Value::Null;
        }
        for item in &mut items {
            if item.get("type").and_then(Value::as_str) != Some("image") {
                continue;
            }
            let Some(data) = item.get("data").and_then(Value::as_str).map(str::to_owned) else {
                continue;
            };
            if let Some(id) = self.image(&data) {
                item["data"] = Value::Null;
                refs.push(id.to_ref());
            }
        }
        (output, items)
    }

    /// Decodes base64 image bytes into an artifact; `None` keeps them inline.
    fn image(&mut self, data: &str) -> Option<ArtifactId> {
        crate::images::decode(data, &mut self.artifacts)
    }
}

/// Brings an entry of a version-`version` file to v3 as Pi's migration
/// does: for v1, the `n`-th entry of Pi's list (the header is entry 0) gets
/// the id [`v1_id`]`(n)` and the previous entry's id (`prev_id`, updated)
/// as parent, a compaction's `firstKeptEntryIndex` becomes
/// `firstKeptEntryId`; for v1 and v2, `hookMessage` roles become `custom`.
pub(super) fn migrate(
    version: u64,
    n: u64,
    prev_id: &mut Option<String>,
    record: &mut Map<String, Value>,
) {
    if version < 2 {
        let id = v1_id(n);
        let parent = prev_id.replace(id.clone());
        // Rebuilt so that the ids come right after `type`, as Pi writes.
        let mut out = Map::with_capacity(record.len() + 2);
        out.insert("type".into(), record.remove("type").unwrap_or(Value::Null));
        out.insert("id".into(), Value::String(id));
        out.insert("parentId".into(), parent.map_or(Value::Null, Value::String));
        record.remove("id");
        record.remove("parentId");
        if out.get("type").and_then(Value::as_str) == Some("compaction")
            && let Some(index) = record.remove("firstKeptEntryIndex")
            && let Some(n) = index.as_u64().filter(|&n| n > 0)
        {
            record.insert("firstKeptEntryId".into(), Value::String(v1_id(n)));
        }
        out.append(record);
        *record = out;
    }
    if version < 3
        && let Some(role) = record.get_mut("message").and_then(|m| m.get_mut("role"))
        && role == "hookMessage"
    {
        *role = json!("custom");
    }
}

/// The id a v1 entry gets: `v1-<n>` for the n-th entry of Pi's list.
fn v1_id(n: u64) -> String {
    format!("v1-{n}")
}

/// Returns the text of a content that is a string or a list of text blocks.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn set_content(record: &mut Map<String, Value>, content: Value) {
    if let Some(m) = record.get_mut("message").and_then(Value::as_object_mut) {
        m.insert("content".into(), content);
    }
}

fn origin(native_id: Option<String>, line: u64) -> Origin {
    Origin {
        agent: Agent::Pi,
        native_id,
        native_seq: Some(line),
        extra: BTreeMap::new(),
    }
}
