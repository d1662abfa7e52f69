//! Canonical events to a Claude Code transcript.
//!
//! Events that came from Claude carry their record under `payload.claude`
//! (see the module docs of `claude`); those lines are written back as they
//! were, with the content rebuilt from the events, `sessionId` set to the
//! target id on every line and `cwd` moved to the render's working
//! directory. Events without a Claude record (another agent's session, or
//! events appended by git-session) are written as minimal `user`/`assistant`
//! records chained after the last line, the shape formats/claude.md §5.1
//! shows the client accepts.
//!
//! The silent failures of `claude --resume` (formats/claude.md §5.1, §6) are
//! guarded here on the way out rather than trusted: every chain record links
//! to the previous one, tool ids and message ids are made unique where two
//! different calls or turns share one, and every line ends with a newline.
//!
//! It does not write `agent-<id>.meta.json`, `~/.claude.json` or
//! `history.jsonl`: none is needed to resume.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use git_session_schema::{Agent, ArtifactId, Event, kinds};
use serde_json::{Map, Value, json};

use super::{NATIVE_KEY, transcript_path};
use crate::{ChangeSet, FileWrite, RenderError, RenderRequest};

/// Event types that only restate a tool call and its result.
const DERIVED: [&str; 5] = [
    kinds::COMMAND_RUN,
    kinds::FILE_EDIT,
    kinds::FILE_READ,
    kinds::TODO_ADD,
    kinds::TODO_UPDATE,
];

/// Renders a session (see [`crate::Adapter::render`]).
pub(super) fn render(req: RenderRequest<'_>) -> Result<ChangeSet, RenderError> {
    let session_id = req
        .native_id
        .split_once('/')
        .map_or(req.native_id, |(s, _)| s);
    if !is_uuid(session_id) {
        // The client refuses anything else before looking for the file
        // (formats/claude.md §5), so the session could never be resumed.
        return Err(RenderError::Request(format!(
            "Claude Code session ids are UUIDs, not {session_id:?}"
        )));
    }
    let old_cwd = req.header.cwd.clone().or_else(|| {
        req.events.iter().find_map(|e| {
            e.payload
                .pointer(&format!("/{NATIVE_KEY}/record/cwd"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
    });
    let mut w = Writer {
        req: &req,
        old_cwd,
        lines: Vec::new(),
        open: None,
        foreign: Foreign::default(),
        losses: Vec::new(),
        skipped: BTreeMap::new(),
        native_records: 0,
    };
    for event in req.events {
        match event.payload.get(NATIVE_KEY).and_then(Value::as_object) {
            Some(native) if event.agent == Agent::Claude => w.native(event, native)?,
            _ => {
                w.close();
                w.foreign_event(event);
            }
        }
    }
    w.close();
    w.flush_foreign();
    if w.native_records == 0
        && let Some(title) = &req.header.title
    {
        w.lines
            .push(obj(json!({"type": "custom-title", "customTitle": title})));
    }
    let Writer {
        mut lines,
        mut losses,
        skipped,
        ..
    } = w;
    if !lines.iter().any(|l| {
        matches!(
            l.get("type").and_then(Value::as_str),
            Some("user" | "assistant")
        )
    }) {
        return Err(RenderError::Empty(
            "no user or assistant message to write".to_owned(),
        ));
    }
    for (kind, n) in skipped {
        losses.push(format!(
            "{n} {kind} event(s) have no Claude Code record and were not written"
        ));
    }
    make_ids_unique(&mut lines, &mut losses);
    link_unlinked_messages(&mut lines, req.native_id, &mut losses);
    let mut bytes = Vec::new();
    for mut line in lines {
        line.insert("sessionId".into(), json!(session_id));
        serde_json::to_writer(&mut bytes, &Value::Object(line))
            .expect("JSON values always serialize");
        bytes.push(b'\n');
    }
    if req.native_id.contains('/') {
        losses.push(
            "the sub-agent's agent-<id>.meta.json is not part of the session and was not written"
                .to_owned(),
        );
    }
    Ok(ChangeSet {
        files: vec![FileWrite {
            path: transcript_path(req.cwd, req.native_id),
            bytes,
        }],
        resume_command: format!("claude --resume {session_id}"),
        losses,
        ..Default::default()
    })
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Holds the render in progress.
struct Writer<'r, 'a> {
    req: &'r RenderRequest<'a>,
    /// The directory the session was captured in, moved to `req.cwd` in
    /// kept records (never in records written here, which already have it).
    old_cwd: Option<String>,
    lines: Vec<Map<String, Value>>,
    /// A native message line whose blocks are still being collected.
    open: Option<Map<String, Value>>,
    foreign: Foreign,
    losses: Vec<String>,
    /// Events with no Claude form, counted by type for the loss report.
    skipped: BTreeMap<String, usize>,
    native_records: usize,
}

/// Holds the state of writing events that have no Claude record.
#[derive(Default)]
struct Foreign {
    /// The assistant message being assembled (text and tool_use blocks).
    assistant: Vec<Value>,
    assistant_ts: Option<String>,
    /// Tool results waiting to be written as one user message.
    results: Vec<Value>,
    results_ts: Option<String>,
    /// Canonical call id to the tool id written.
    call_ids: BTreeMap<String, String>,
    /// Tool ids written whose result has not been written yet.
    unanswered: Vec<String>,
    counter: u64,
}

impl Writer<'_, '_> {
    /// Writes back one event that carries a Claude record or block.
    fn native(&mut self, event: &Event, native: &Map<String, Value>) -> Result<(), RenderError> {
        if let Some(Value::Object(record)) = native.get("record") {
            self.close();
            self.flush_foreign();
            self.native_records += 1;
            let mut record = record.clone();
            if let (Some(old), Some(Value::String(cwd))) = (&self.old_cwd, record.get_mut("cwd"))
                && let Some(rest) = cwd.strip_prefix(old.as_str())
                && (rest.is_empty() || rest.starts_with('/'))
            {
                *cwd = format!("{}{rest}", self.req.cwd);
            }
            if native.get("content").and_then(Value::as_str) == Some("string") {
                let text = event
                    .payload
                    .get("text")
                    .cloned()
                    .unwrap_or_else(|| json!(""));
                set_content(&mut record, text);
                self.lines.push(record);
            } else if native.contains_key("block") {
                set_content(&mut record, Value::Array(vec![self.block(event, native)]));
                self.open = Some(record);
            } else {
                self.lines.push(record);
            }
            return Ok(());
        }
        if !native.contains_key("block") {
            return Err(RenderError::Event {
                seq: event.seq,
                message: format!("payload.{NATIVE_KEY} has neither a record nor a block"),
            });
        }
        let block = self.block(event, native);
        match self
            .open
            .as_mut()
            .and_then(|r| r.get_mut("message"))
            .and_then(|m| m.get_mut("content"))
            .and_then(Value::as_array_mut)
        {
            Some(blocks) => blocks.push(block),
            None => {
                // A block whose line was lost: write it like a foreign event
                // rather than drop it.
                self.losses.push(format!(
                    "event {}: content block without its record, written as a new message",
                    event.seq
                ));
                self.foreign_event(event);
            }
        }
        Ok(())
    }

    /// Rebuilds a content block from an event and its kept skeleton.
    fn block(&mut self, event: &Event, native: &Map<String, Value>) -> Value {
        let mut block = native
            .get("block")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let absent: BTreeSet<&str> = native
            .get("absent")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let p = &event.payload;
        let mut images = event.refs.iter().filter_map(|r| ArtifactId::from_ref(r));
        match event.kind.as_str() {
            kinds::MESSAGE_USER | kinds::MESSAGE_ASSISTANT => {
                if let Some(text) = p.get("text") {
                    block.insert("text".into(), text.clone());
                } else if p.get("image").is_some() {
                    let data = images
                        .next()
                        .and_then(|id| self.artifact_base64(event.seq, &id));
                    if let Some(Value::Object(source)) = block.get_mut("source") {
                        source.insert("data".into(), json!(data.unwrap_or_default()));
                    }
                }
            }
            kinds::MESSAGE_THINKING => {
                if p.get("redacted").and_then(Value::as_bool) == Some(true) {
                    block.insert(
                        "data".into(),
                        p.pointer("/opaque/data").cloned().unwrap_or(Value::Null),
                    );
                } else {
                    block.insert(
                        "thinking".into(),
                        p.get("text").cloned().unwrap_or_else(|| json!("")),
                    );
                    if let Some(sig) = p.pointer("/opaque/signature") {
                        block.insert("signature".into(), sig.clone());
                    }
                }
            }
            kinds::TOOL_CALL => {
                block.insert(
                    "id".into(),
                    p.get("call_id").cloned().unwrap_or(Value::Null),
                );
                block.insert("name".into(), p.get("name").cloned().unwrap_or(Value::Null));
                block.insert(
                    "input".into(),
                    p.get("arguments").cloned().unwrap_or_else(|| json!({})),
                );
            }
            kinds::TOOL_RESULT => {
                block.insert(
                    "tool_use_id".into(),
                    p.get("call_id").cloned().unwrap_or(Value::Null),
                );
                if !absent.contains("is_error") {
                    block.insert(
                        "is_error".into(),
                        p.get("is_error").cloned().unwrap_or(json!(false)),
                    );
                }
                let output = p.get("output").cloned().unwrap_or_else(|| json!(""));
                match block.get_mut("content") {
                    _ if absent.contains("content") => {}
                    Some(Value::Array(items)) => {
                        for item in items.iter_mut().filter_map(Value::as_object_mut) {
                            match item.get("type").and_then(Value::as_str) {
                                Some("text") if !item.contains_key("text") => {
                                    item.insert("text".into(), output.clone());
                                }
                                Some("image") => {
                                    let Some(Value::Object(source)) = item.get_mut("source") else {
                                        continue;
                                    };
                                    if source.contains_key("data") {
                                        continue;
                                    }
                                    let data = images
                                        .next()
                                        .and_then(|id| self.artifact_base64(event.seq, &id));
                                    source.insert("data".into(), json!(data.unwrap_or_default()));
                                }
                                _ => {}
                            }
                        }
                    }
                    Some(_) => {}
                    None => {
                        block.insert("content".into(), output);
                    }
                }
            }
            // `meta` blocks (types we do not map) were kept whole.
            _ => {}
        }
        Value::Object(block)
    }

    fn artifact_base64(&mut self, seq: u64, id: &ArtifactId) -> Option<String> {
        match self.req.artifacts.iter().find(|(a, _)| a == id) {
            Some((_, bytes)) => Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
            None => {
                self.losses.push(format!(
                    "event {seq}: artifact {id} not provided; image written empty"
                ));
                None
            }
        }
    }

    /// Writes the native message line being assembled, if any.
    fn close(&mut self) {
        if let Some(record) = self.open.take() {
            self.lines.push(record);
        }
    }

    /// Writes an event that has no Claude record as a minimal record.
    fn foreign_event(&mut self, event: &Event) {
        let p = &event.payload;
        match event.kind.as_str() {
            kinds::MESSAGE_USER => {
                let text = p.get("text").and_then(Value::as_str).unwrap_or("");
                let mut content = vec![json!({"type": "text", "text": text})];
                for id in event.refs.iter().filter_map(|r| ArtifactId::from_ref(r)) {
                    if let Some(data) = self.artifact_base64(event.seq, &id) {
                        let media = p
                            .pointer("/image/media_type")
                            .cloned()
                            .unwrap_or(json!("image/png"));
                        content.push(json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}));
                    }
                }
                self.flush_foreign();
                self.answer_unanswered(&event.ts);
                let content = if content.len() == 1 {
                    json!(text)
                } else {
                    Value::Array(content)
                };
                self.push_chain("user", &event.ts, content);
            }
            kinds::MESSAGE_ASSISTANT => {
                self.flush_results();
                let text = p.get("text").and_then(Value::as_str).unwrap_or("");
                self.foreign
                    .assistant
                    .push(json!({"type": "text", "text": text}));
                self.foreign
                    .assistant_ts
                    .get_or_insert_with(|| event.ts.clone());
            }
            kinds::TOOL_CALL => {
                self.flush_results();
                let call_id = p.get("call_id").and_then(Value::as_str).unwrap_or("");
                let id = self.tool_id(call_id, event.seq);
                let name = p.get("name").and_then(Value::as_str).unwrap_or("tool");
                let input = match p.get("arguments") {
                    Some(Value::Object(m)) => Value::Object(m.clone()),
                    // The API wants an object; a JSON string is unwrapped,
                    // anything else is wrapped.
                    Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                        Ok(Value::Object(m)) => Value::Object(m),
                        _ => json!({ "input": s }),
                    },
                    Some(Value::Null) | None => json!({}),
                    Some(other) => json!({ "input": other }),
                };
                self.foreign.unanswered.push(id.clone());
                self.foreign
                    .assistant
                    .push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                self.foreign
                    .assistant_ts
                    .get_or_insert_with(|| event.ts.clone());
            }
            kinds::TOOL_RESULT => {
                let call_id = p.get("call_id").and_then(Value::as_str).unwrap_or("");
                let output = match p.get("output") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                let is_error = p.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                let written = self.foreign.call_ids.get(call_id).cloned();
                match written.filter(|id| self.foreign.unanswered.contains(id)) {
                    Some(id) => {
                        self.flush_assistant();
                        self.foreign.unanswered.retain(|u| *u != id);
                        self.foreign
                            .results
                            .push(json!({"type": "tool_result", "tool_use_id": id, "content": output, "is_error": is_error}));
                        self.foreign
                            .results_ts
                            .get_or_insert_with(|| event.ts.clone());
                    }
                    None => {
                        // A result without its call would break the pairing
                        // the API checks; keep it readable as text instead.
                        self.flush_foreign();
                        let text = format!("[tool result for {call_id}]\n{output}");
                        self.push_chain("user", &event.ts, json!(text));
                        self.losses.push(format!(
                            "event {}: tool result without a written call, kept as text",
                            event.seq
                        ));
                    }
                }
            }
            kinds::MESSAGE_THINKING => {
                *self
                    .skipped
                    .entry(format!("{} ({})", event.kind, event.agent))
                    .or_default() += 1;
            }
            kind if DERIVED.contains(&kind) => {}
            kind => {
                *self.skipped.entry(kind.to_owned()).or_default() += 1;
            }
        }
    }

    /// Returns a tool id the API accepts and no earlier call used.
    fn tool_id(&mut self, call_id: &str, seq: u64) -> String {
        let usable = !call_id.is_empty()
            && call_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            && !self.foreign.call_ids.values().any(|v| v == call_id);
        let id = if usable {
            call_id.to_owned()
        } else {
            let hash = ArtifactId::of(format!("{}:{seq}:{call_id}", self.req.native_id).as_bytes());
            format!("toolu_gs{}", &hash.hex()[..24])
        };
        self.foreign.call_ids.insert(call_id.to_owned(), id.clone());
        id
    }

    /// Answers calls left open before a new user prompt: the API refuses a
    /// history where a tool_use is not followed by its result.
    fn answer_unanswered(&mut self, ts: &str) {
        if self.foreign.unanswered.is_empty() {
            return;
        }
        self.flush_assistant();
        for id in std::mem::take(&mut self.foreign.unanswered) {
            self.foreign
                .results
                .push(json!({"type": "tool_result", "tool_use_id": id,
                "content": "[no result was recorded for this call]", "is_error": true}));
        }
        self.foreign.results_ts.get_or_insert_with(|| ts.to_owned());
        self.flush_results();
    }

    fn flush_foreign(&mut self) {
        self.flush_assistant();
        self.flush_results();
    }

    fn flush_assistant(&mut self) {
        if self.foreign.assistant.is_empty() {
            return;
        }
        let blocks = std::mem::take(&mut self.foreign.assistant);
        let ts = self
            .foreign
            .assistant_ts
            .take()
            .unwrap_or_else(|| self.req.now.to_owned());
        self.push_chain("assistant", &ts, Value::Array(blocks));
    }

    fn flush_results(&mut self) {
        if self.foreign.results.is_empty() {
            return;
        }
        let blocks = std::mem::take(&mut self.foreign.results);
        let ts = self
            .foreign
            .results_ts
            .take()
            .unwrap_or_else(|| self.req.now.to_owned());
        self.push_chain("user", &ts, Value::Array(blocks));
    }

    /// Appends a minimal chain record linked to the last chain record.
    fn push_chain(&mut self, role: &str, ts: &str, content: Value) {
        let parent = self
            .lines
            .iter()
            .rev()
            .find_map(|l| l.get("uuid").and_then(Value::as_str).map(str::to_owned));
        self.foreign.counter += 1;
        let uuid = derived_uuid(&format!(
            "{}:{}:{role}",
            self.req.native_id, self.foreign.counter
        ));
        let mut message = json!({"role": role, "content": content});
        if role == "assistant" {
            message["type"] = json!("message");
        }
        self.lines.push(obj(json!({
            "type": role,
            "uuid": uuid,
            "parentUuid": parent,
            "isSidechain": false,
            "userType": "external",
            "cwd": self.req.cwd,
            "timestamp": ts,
            "message": message,
        })));
    }
}

fn set_content(record: &mut Map<String, Value>, content: Value) {
    if let Some(Value::Object(m)) = record.get_mut("message") {
        m.insert("content".into(), content);
    } else {
        record.insert("message".into(), json!({ "content": content }));
    }
}

/// Returns whether `id` has the 8-4-4-4-12 hex shape of a UUID.
fn is_uuid(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Returns a UUID-shaped id (version 4 layout) derived from `seed`, so a
/// render is deterministic without a random source.
fn derived_uuid(seed: &str) -> String {
    let id = ArtifactId::of(seed.as_bytes());
    let h = id.hex();
    // The variant nibble must be 8, 9, a or b in the RFC 4122 layout.
    let nibble = u8::from_str_radix(&h[16..17], 16).unwrap_or(0);
    let variant = ['8', '9', 'a', 'b'][usize::from(nibble & 3)];
    format!(
        "{}-{}-4{}-{variant}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// Renames ids the client would silently conflate (formats/claude.md §5.1):
/// a `tool_use` id used by an earlier, different call (the later call and
/// its result would be dropped), and an assistant `message.id` seen in an
/// earlier turn (the two messages would be merged). Records of one API
/// response legitimately share a `message.id` and are left alone.
fn make_ids_unique(lines: &mut [Map<String, Value>], losses: &mut Vec<String>) {
    let mut tool_ids = BTreeSet::new();
    // Old id to new id, applied to the next result naming it.
    let mut renamed_results: BTreeMap<String, String> = BTreeMap::new();
    let mut message_turn: BTreeMap<String, usize> = BTreeMap::new();
    let mut renamed_messages: BTreeMap<(String, usize), String> = BTreeMap::new();
    let mut turn = 0usize;
    for line in lines.iter_mut() {
        let kind = line
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let Some(message) = line.get_mut("message").and_then(Value::as_object_mut) else {
            continue;
        };
        let blocks: &mut [Value] = match message.get_mut("content") {
            Some(Value::Array(b)) => b,
            _ => &mut [],
        };
        let is_prompt = kind == "user"
            && !blocks
                .iter()
                .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"));
        for block in blocks.iter_mut().filter_map(Value::as_object_mut) {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => {
                    let Some(id) = block.get("id").and_then(Value::as_str).map(str::to_owned)
                    else {
                        continue;
                    };
                    if tool_ids.insert(id.clone()) {
                        continue;
                    }
                    let mut n = 2;
                    while tool_ids.contains(&format!("{id}_{n}")) {
                        n += 1;
                    }
                    let new = format!("{id}_{n}");
                    tool_ids.insert(new.clone());
                    losses.push(format!(
                        "tool id {id} was used by two calls; the later one was renamed {new}"
                    ));
                    block.insert("id".into(), json!(new));
                    renamed_results.insert(id, new);
                }
                Some("tool_result") => {
                    let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
                        continue;
                    };
                    if let Some(new) = renamed_results.remove(id) {
                        block.insert("tool_use_id".into(), json!(new));
                    }
                }
                _ => {}
            }
        }
        if is_prompt {
            turn += 1;
        }
        if kind != "assistant" {
            continue;
        }
        let Some(id) = message.get("id").and_then(Value::as_str).map(str::to_owned) else {
            continue;
        };
        let first = *message_turn.entry(id.clone()).or_insert(turn);
        if first != turn {
            let new = renamed_messages
                .entry((id.clone(), turn))
                .or_insert_with(|| {
                    losses.push(format!(
                        "message id {id} was reused in a later turn; renamed there"
                    ));
                    format!("{id}_t{turn}")
                })
                .clone();
            message.insert("id".into(), json!(new));
        }
    }
}

/// Gives `user`/`assistant` lines without a `uuid` (hand-made files) one,
/// linked to the previous chain line: without the links the client
/// silently sends only the last message (formats/claude.md §5.1). Lines
/// that have a `uuid` keep their links as written, even a parent that is
/// not in the file, which the client tolerates and which old clients wrote
/// on purpose (a resumed session pointing into the previous file).
fn link_unlinked_messages(
    lines: &mut [Map<String, Value>],
    native_id: &str,
    losses: &mut Vec<String>,
) {
    let mut last: Option<String> = None;
    let mut linked = 0usize;
    for (i, line) in lines.iter_mut().enumerate() {
        let is_message = matches!(
            line.get("type").and_then(Value::as_str),
            Some("user" | "assistant")
        );
        if is_message && !line.get("uuid").is_some_and(Value::is_string) {
            line.insert(
                "uuid".into(),
                json!(derived_uuid(&format!("{native_id}:line:{i}"))),
            );
            line.insert("parentUuid".into(), json!(last));
            linked += 1;
        }
        if let Some(uuid) = line.get("uuid").and_then(Value::as_str) {
            last = Some(uuid.to_owned());
        }
    }
    if linked > 0 {
        losses.push(format!(
            "{linked} message line(s) had no uuid; given one and linked in file order so the client sends them"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_without_uuids_are_linked_in_file_order() {
        let mut lines: Vec<Map<String, Value>> = [
            json!({"type":"user","message":{"content":"q"}}),
            json!({"type":"last-prompt","lastPrompt":"q"}),
            json!({"type":"assistant","message":{"content":"a"}}),
        ]
        .into_iter()
        .map(obj)
        .collect();
        let mut losses = Vec::new();
        link_unlinked_messages(&mut lines, "s", &mut losses);
        assert_eq!(lines[0]["parentUuid"], Value::Null);
        assert_eq!(lines[2]["parentUuid"], lines[0]["uuid"]);
        assert!(
            lines[1].get("uuid").is_none(),
            "side records stay as they are"
        );
        assert_eq!(losses.len(), 1);
    }

    #[test]
    fn derived_uuids_look_like_v4_and_are_stable() {
        let a = derived_uuid("x");
        assert_eq!(a, derived_uuid("x"));
        assert_ne!(a, derived_uuid("y"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }

    #[test]
    fn reused_tool_and_message_ids_are_renamed_once_per_later_use() {
        let mut lines: Vec<Map<String, Value>> = [
            json!({"type":"user","message":{"content":"q1"}}),
            json!({"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1"}]}}),
            json!({"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1"}]}}),
            json!({"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"same turn"}]}}),
            json!({"type":"user","message":{"content":"q2"}}),
            json!({"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1"}]}}),
            json!({"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1"}]}}),
        ]
        .into_iter()
        .map(obj)
        .collect();
        let mut losses = Vec::new();
        make_ids_unique(&mut lines, &mut losses);
        assert_eq!(
            lines[3]["message"]["id"],
            json!("m1"),
            "same turn keeps its id"
        );
        assert_eq!(lines[5]["message"]["id"], json!("m1_t2"));
        assert_eq!(lines[5]["message"]["content"][0]["id"], json!("t1_2"));
        assert_eq!(
            lines[6]["message"]["content"][0]["tool_use_id"],
            json!("t1_2")
        );
        assert_eq!(
            lines[2]["message"]["content"][0]["tool_use_id"],
            json!("t1")
        );
        assert_eq!(losses.len(), 2);
    }
}
