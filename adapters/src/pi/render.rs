//! Canonical events to a Pi session file, streamed.
//!
//! The file always starts with a valid v3 header (`type, version, id,
//! timestamp, cwd`) carrying the target id and this machine's repository
//! path: Pi 0.73.1 truncates and replaces a file whose header it cannot
//! read, and both versions refuse a header `cwd` that does not exist.
//!
//! Events that came from Pi carry their entry under `payload.pi` (see the
//! module docs of `pi`); those entries are written back in seq order, which
//! is the order of the original file, with their own ids and `parentId`s and
//! the content rebuilt from the events, so every branch is there and the
//! active leaf is again the last line. Lines kept unparsed go back as they
//! were (Pi skips them, as it did in the original).
//!
//! Events without a Pi entry (another agent's session, or events appended
//! by git-session) become minimal entries chained after the last line
//! written: user text, an assistant message per turn (text and tool calls,
//! with `api`/`provider`/`model`, a full `usage` object, which 0.73.1 needs,
//! and a `stopReason`), and one `toolResult` per result, all with content
//! as arrays (formats/pi.md, "Writer advice"). Thinking from another agent
//! is not written: its signature is bound to that agent's model.

use std::collections::{HashMap, HashSet};

use git_session_schema::{Agent, ArtifactId, Event, kinds};
use serde_json::{Map, Value, json};

use super::{NATIVE_KEY, VERSION, is_valid_session_id, session_path};
use crate::{ChangeSet, FileSink, RenderError, RenderHead};

/// Event types that only restate a tool call and its result.
const DERIVED: [&str; 5] = [
    kinds::COMMAND_RUN,
    kinds::FILE_EDIT,
    kinds::FILE_READ,
    kinds::TODO_ADD,
    kinds::TODO_UPDATE,
];

/// Bytes of finished lines held before they go to the sink.
const FLUSH_BYTES: usize = 64 * 1024;

/// Pi's own tools: a foreign call under one of these names needs no report.
const PI_TOOLS: [&str; 7] = ["bash", "read", "edit", "write", "grep", "find", "ls"];

/// Renders a session, streaming (see [`crate::Adapter::render_to`]).
pub(super) fn render_to(
    head: RenderHead<'_>,
    events: &mut dyn Iterator<Item = Event>,
    out: &mut dyn FileSink,
) -> Result<ChangeSet, RenderError> {
    if !is_valid_session_id(head.native_id) {
        return Err(RenderError::Request(format!(
            "{:?} cannot name a Pi session file (letters, digits, '-', '_' and '.' only)",
            head.native_id
        )));
    }
    let mut events = events.peekable();
    // The header's timestamp names the file, so it is known before the
    // first byte is written.
    let header_record = events
        .peek()
        .filter(|e| e.agent == Agent::Pi && e.kind == kinds::SESSION_START)
        .and_then(|e| e.payload.pointer(&format!("/{NATIVE_KEY}/record")))
        .and_then(Value::as_object)
        .cloned();
    // A Pi header without a timestamp (both versions resume one) stays
    // without: the file is then named by the id alone, as it was.
    let created = match &header_record {
        Some(r) => r
            .get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_owned),
        None => Some(head.header.created.clone()),
    };
    out.begin(&session_path(
        head.cwd,
        created.as_deref().unwrap_or_default(),
        head.native_id,
    ))
    .map_err(RenderError::Sink)?;
    let mut w = Writer {
        head,
        sink: out,
        buf: Vec::with_capacity(FLUSH_BYTES + FLUSH_BYTES / 4),
        failed: None,
        ids: HashSet::new(),
        last_id: None,
        open: None,
        wrote_message: false,
        foreign: Foreign::default(),
        losses: crate::loss::Losses::default(),
    };
    w.header(header_record.as_ref(), created.as_deref());
    if header_record.is_some() {
        events.next();
    }
    for event in events {
        let pi = event.agent == Agent::Pi;
        let unparsed = (pi && event.kind == kinds::META)
            .then(|| event.payload.get("unparsed").and_then(Value::as_str))
            .flatten();
        if let Some(raw) = unparsed {
            w.close();
            w.flush_foreign();
            w.raw(raw);
        } else if pi && event.payload.get(NATIVE_KEY).is_some_and(Value::is_object) {
            w.native(event)?;
        } else {
            w.close();
            w.foreign_event(event);
        }
        if let Some(e) = w.failed.take() {
            return Err(RenderError::Sink(e));
        }
    }
    w.close();
    w.flush_foreign();
    w.flush();
    if let Some(e) = w.failed.take() {
        return Err(RenderError::Sink(e));
    }
    if !w.wrote_message {
        return Err(RenderError::Empty(
            "no user or assistant message to write".to_owned(),
        ));
    }
    let losses = w.losses.into_lines();
    Ok(ChangeSet {
        resume_command: format!("pi --session {}", head.native_id),
        losses,
        ..Default::default()
    })
}

struct Writer<'a, 's> {
    head: RenderHead<'a>,
    sink: &'s mut dyn FileSink,
    buf: Vec<u8>,
    failed: Option<String>,
    /// Every entry id written, so that ids given here are unique.
    ids: HashSet<String>,
    /// The id of the last entry written, which new entries link to.
    last_id: Option<String>,
    /// A kept message entry whose content blocks are still being collected.
    open: Option<Map<String, Value>>,
    wrote_message: bool,
    foreign: Foreign,
    /// The loss report: every event and field not carried, by seq.
    losses: crate::loss::Losses,
}

/// Holds the state of writing events that have no Pi entry.
#[derive(Default)]
struct Foreign {
    /// The assistant message being assembled (text and tool calls).
    assistant: Vec<Value>,
    assistant_ts: Option<String>,
    model: Option<Value>,
    /// Canonical call id to the call id written, and the calls written
    /// whose result is still to come (with their tool names).
    call_ids: HashMap<String, String>,
    written_calls: HashSet<String>,
    unanswered: Vec<(String, String)>,
    counter: u64,
}

impl Writer<'_, '_> {
    /// Writes the header: the kept one (when the session came from Pi)
    /// with the target's id, this repository's path and version 3.
    fn header(&mut self, kept: Option<&Map<String, Value>>, created: Option<&str>) {
        let mut h = Map::new();
        h.insert("type".into(), json!("session"));
        h.insert("version".into(), json!(VERSION));
        h.insert("id".into(), json!(self.head.native_id));
        if let Some(created) = created {
            h.insert("timestamp".into(), json!(created));
        }
        h.insert("cwd".into(), json!(self.head.cwd));
        if let Some(kept) = kept {
            for (k, v) in kept {
                if !h.contains_key(k) {
                    h.insert(k.clone(), v.clone());
                }
            }
        }
        self.line(&h);
    }

    fn line(&mut self, entry: &Map<String, Value>) {
        git_session_schema::json::write_object(&mut self.buf, entry);
        self.buf.push(b'\n');
        if self.buf.len() >= FLUSH_BYTES {
            self.flush();
        }
    }

    /// Queues a kept entry, noting its id for the links of later entries.
    fn entry(&mut self, entry: Map<String, Value>) {
        if let Some(id) = entry.get("id").and_then(Value::as_str) {
            self.ids.insert(id.to_owned());
            self.last_id = Some(id.to_owned());
        }
        if entry.get("type").and_then(Value::as_str) == Some("message") {
            self.wrote_message |= matches!(
                entry
                    .get("message")
                    .and_then(|m| m.get("role"))
                    .and_then(Value::as_str),
                Some("user" | "assistant")
            );
        }
        self.line(&entry);
    }

    fn raw(&mut self, text: &str) {
        self.buf.extend_from_slice(text.as_bytes());
        self.buf.push(b'\n');
        if self.buf.len() >= FLUSH_BYTES {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.failed.is_none()
            && !self.buf.is_empty()
            && let Err(e) = self.sink.write(&self.buf)
        {
            self.failed = Some(e);
        }
        self.buf.clear();
    }

    fn close(&mut self) {
        if let Some(record) = self.open.take() {
            self.entry(record);
        }
    }

    /// Writes back one event that carries a Pi entry or content block.
    fn native(&mut self, mut event: Event) -> Result<(), RenderError> {
        let Some(Value::Object(mut native)) = event
            .payload
            .as_object_mut()
            .and_then(|p| p.remove(NATIVE_KEY))
        else {
            return Err(RenderError::Event {
                seq: event.seq,
                message: format!("payload.{NATIVE_KEY} is not an object"),
            });
        };
        if event.kind == kinds::SESSION_START {
            // A header in the middle of a log (a second file's, or a
            // session appended to): there is one header per file.
            self.losses.line(format!(
                "event-unmapped: event {}: a second session header was not written",
                event.seq
            ));
            return Ok(());
        }
        if let Some(Value::Object(mut record)) = native.remove("record") {
            self.close();
            self.flush_foreign();
            match native.get("content").and_then(Value::as_str) {
                Some("string") => {
                    let text = event.payload.get_mut("text").map(Value::take);
                    set_content(&mut record, text.unwrap_or_else(|| json!("")));
                    self.entry(record);
                }
                Some("items") => {
                    let items = match native.remove("items") {
                        Some(Value::Array(items)) => items,
                        _ => Vec::new(),
                    };
                    let content = self.items(&mut event, items);
                    set_content(&mut record, Value::Array(content));
                    self.entry(record);
                }
                Some("blocks") => {
                    let block = self.block(&mut event, native);
                    set_content(&mut record, Value::Array(vec![block]));
                    self.open = Some(record);
                }
                _ => self.entry(record),
            }
            return Ok(());
        }
        if !native.contains_key("block") {
            return Err(RenderError::Event {
                seq: event.seq,
                message: format!("payload.{NATIVE_KEY} has neither a record nor a block"),
            });
        }
        if self.open.is_none() {
            self.losses.line(format!(
                "block-relinked: event {}: content block without its entry, written as a new message",
                event.seq
            ));
            event.payload.as_object_mut().map(|p| p.remove(NATIVE_KEY));
            self.foreign_event(event);
            return Ok(());
        }
        let block = self.block(&mut event, native);
        if let Some(blocks) = self
            .open
            .as_mut()
            .and_then(|r| r.get_mut("message"))
            .and_then(|m| m.get_mut("content"))
            .and_then(Value::as_array_mut)
        {
            blocks.push(block);
        }
        Ok(())
    }

    /// Rebuilds a content block from an event and its kept skeleton, whose
    /// lifted fields wait as `null` in their places.
    fn block(&mut self, event: &mut Event, mut native: Map<String, Value>) -> Value {
        let mut block = match native.remove("block") {
            Some(Value::Object(mut b)) => {
                if let Some(whole) = b.remove("whole") {
                    return whole;
                }
                b
            }
            Some(other) => return other,
            None => Map::new(),
        };
        let seq = event.seq;
        let first_image = event.refs.iter().find_map(|r| ArtifactId::from_ref(r));
        let p = &mut event.payload;
        let mut take = |key: &str| p.get_mut(key).map(Value::take);
        let fill = |block: &mut Map<String, Value>, key: &str, v: Option<Value>| {
            if let Some(slot) = block.get_mut(key) {
                *slot = v.unwrap_or(Value::Null);
            }
        };
        match event.kind.as_str() {
            kinds::MESSAGE_USER | kinds::MESSAGE_ASSISTANT => {
                if block.contains_key("data") {
                    let data = first_image.and_then(|id| {
                        crate::images::encode(&self.head, &mut self.losses, seq, &id)
                    });
                    fill(&mut block, "data", Some(json!(data.unwrap_or_default())));
                } else {
                    fill(&mut block, "text", take("text"));
                }
            }
            kinds::MESSAGE_THINKING => {
                fill(&mut block, "thinking", take("text"));
                let sig = take("opaque").and_then(|mut o| o.get_mut("signature").map(Value::take));
                fill(&mut block, "thinkingSignature", sig);
            }
            kinds::TOOL_CALL => {
                fill(&mut block, "id", take("call_id"));
                fill(&mut block, "name", take("name"));
                fill(&mut block, "arguments", take("arguments"));
            }
            _ => {}
        }
        Value::Object(block)
    }

    /// Rebuilds a tool result's content list.
    fn items(&mut self, event: &mut Event, mut items: Vec<Value>) -> Vec<Value> {
        let seq = event.seq;
        let output = event
            .payload
            .get_mut("output")
            .map(Value::take)
            .unwrap_or_else(|| json!(""));
        let mut images = event.refs.iter().filter_map(|r| ArtifactId::from_ref(r));
        for item in items.iter_mut().filter_map(Value::as_object_mut) {
            match item.get("type").and_then(Value::as_str) {
                Some("text") if item.get("text") == Some(&Value::Null) => {
                    item.insert("text".into(), output.clone());
                }
                Some("image") if item.get("data") == Some(&Value::Null) => {
                    let data = images.next().and_then(|id| {
                        crate::images::encode(&self.head, &mut self.losses, seq, &id)
                    });
                    item.insert("data".into(), json!(data.unwrap_or_default()));
                }
                _ => {}
            }
        }
        items
    }

    /// Returns a fresh entry id, unique in the file.
    fn new_id(&mut self) -> String {
        loop {
            self.foreign.counter += 1;
            let hash = ArtifactId::of(
                format!("{}:{}", self.head.native_id, self.foreign.counter).as_bytes(),
            );
            let id = hash.hex()[..8].to_owned();
            if !self.ids.contains(&id) {
                return id;
            }
        }
    }

    /// Appends a minimal entry linked to the last one written.
    fn push_entry(&mut self, ts: &str, message: Value) {
        let id = self.new_id();
        let mut e = Map::new();
        e.insert("type".into(), json!("message"));
        e.insert("id".into(), json!(id));
        e.insert("parentId".into(), json!(self.last_id));
        e.insert("timestamp".into(), json!(ts));
        e.insert("message".into(), message);
        self.entry(e);
    }

    fn foreign_event(&mut self, event: Event) {
        let p = &event.payload;
        match event.kind.as_str() {
            kinds::MESSAGE_USER => {
                self.flush_foreign();
                self.answer_unanswered(&event.ts);
                let mut content = Vec::new();
                if let Some(text) = p.get("text").and_then(Value::as_str) {
                    content.push(json!({"type": "text", "text": text}));
                }
                content.extend(self.image_items(&event));
                if content.is_empty() {
                    content.push(json!({"type": "text", "text": ""}));
                }
                self.push_entry(&event.ts, json!({"role": "user", "content": content}));
            }
            kinds::MESSAGE_ASSISTANT => {
                let text = p.get("text").and_then(Value::as_str).unwrap_or("");
                if !self.foreign.unanswered.is_empty() {
                    // Text after calls starts the next turn.
                    self.flush_assistant();
                }
                self.foreign
                    .assistant
                    .push(json!({"type": "text", "text": text}));
                self.foreign
                    .assistant_ts
                    .get_or_insert_with(|| event.ts.clone());
                if let Some(m) = p.get("model").filter(|m| m.is_string()) {
                    self.foreign.model = Some(m.clone());
                }
            }
            kinds::TOOL_CALL => {
                let call_id = p.get("call_id").and_then(Value::as_str).unwrap_or("");
                let id = self.call_id(call_id, event.seq);
                let mut name = p
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("tool")
                    .to_owned();
                let mut arguments = match p.get("arguments") {
                    Some(Value::Object(m)) => Value::Object(m.clone()),
                    Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                        Ok(Value::Object(m)) => Value::Object(m),
                        _ => json!({ "input": s }),
                    },
                    Some(Value::Null) | None => json!({}),
                    Some(other) => json!({ "input": other }),
                };
                let t = crate::tools::translate(&super::SPEC, &event.agent, &name, &arguments);
                if !t.mapped && !PI_TOOLS.contains(&name.as_str()) {
                    self.losses.add(
                        "tool-unmapped",
                        event.seq,
                        format!(
                            "a call to {name}, which Pi does not have; written under its own name"
                        ),
                    );
                }
                self.losses.extend(
                    t.losses(event.seq, event.agent.as_str(), &super::SPEC)
                        .into_iter()
                        .filter(|l| !l.starts_with("tool-unmapped")),
                );
                (name, arguments) = (t.name, t.arguments);
                self.foreign.unanswered.push((id.clone(), name.clone()));
                self.foreign.assistant.push(
                    json!({"type": "toolCall", "id": id, "name": name, "arguments": arguments}),
                );
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
                // Pi keeps `isError` but sends the model only the text, so
                // a failure is said in the text too.
                let failure = crate::tools::failure(p);
                let is_error = failure.is_some();
                let output = match failure {
                    Some(f) => crate::tools::mark_failed(&output, f, false),
                    None => output,
                };
                let written = self.foreign.call_ids.get(call_id).cloned();
                let open = written.and_then(|id| {
                    let at = self.foreign.unanswered.iter().position(|(u, _)| *u == id)?;
                    Some(self.foreign.unanswered.remove(at))
                });
                self.flush_assistant();
                match open {
                    Some((id, name)) => {
                        // A result's images are image items of its content.
                        let mut content = vec![json!({"type": "text", "text": output})];
                        content.extend(self.image_items(&event));
                        self.push_entry(
                            &event.ts,
                            json!({"role": "toolResult", "toolCallId": id, "toolName": name,
                                "content": content, "isError": is_error}),
                        )
                    }
                    None => {
                        // A result without its call would be sent without
                        // the call it answers; keep it readable as text.
                        let text = format!("[tool result for {call_id}]\n{output}");
                        self.push_entry(
                            &event.ts,
                            json!({"role": "user", "content": [{"type": "text", "text": text}]}),
                        );
                        self.losses.line(format!(
                            "tool-result-orphaned: event {}: tool result without a written call, kept as text",
                            event.seq
                        ));
                    }
                }
            }
            kinds::MESSAGE_THINKING => self.losses.add(
                "thinking-dropped",
                event.seq,
                format!(
                    "message.thinking ({}) not written: Pi sends back only its own signed thinking",
                    event.agent
                ),
            ),
            // Pi's own derived events come back from the entries written.
            kind if DERIVED.contains(&kind) && event.agent == Agent::Pi => {}
            kind if DERIVED.contains(&kind) => self.losses.add(
                "derived-event-folded",
                event.seq,
                format!("{kind} not written on its own: its tool call and result carry it"),
            ),
            _ => {
                if let Some((note, loss)) = crate::tools::web_search_note(&event, &super::SPEC) {
                    if !self.foreign.unanswered.is_empty() {
                        self.flush_assistant();
                    }
                    self.foreign
                        .assistant
                        .push(json!({"type": "text", "text": note}));
                    self.foreign
                        .assistant_ts
                        .get_or_insert_with(|| event.ts.clone());
                    self.losses.line(loss);
                    return;
                }
                self.losses.add(
                    "event-unmapped",
                    event.seq,
                    format!("{} has no Pi entry; not written", crate::loss::what(&event)),
                );
            }
        }
    }

    /// Returns Pi image items for an event's image artifacts (`refs`).
    fn image_items(&mut self, event: &Event) -> Vec<Value> {
        let mut out = Vec::new();
        let ids = event.refs.iter().filter_map(|r| ArtifactId::from_ref(r));
        for (i, id) in ids.enumerate() {
            if let Some(data) = crate::images::encode(&self.head, &mut self.losses, event.seq, &id)
            {
                let media = crate::images::media_type(&event.payload, i);
                out.push(json!({"type": "image", "data": data, "mimeType": media}));
            }
        }
        out
    }

    /// Returns the call id to write: the canonical one unless empty or
    /// already used by another call.
    fn call_id(&mut self, call_id: &str, seq: u64) -> String {
        let id = if !call_id.is_empty() && !self.foreign.written_calls.contains(call_id) {
            call_id.to_owned()
        } else {
            let hash =
                ArtifactId::of(format!("{}:{seq}:{call_id}", self.head.native_id).as_bytes());
            format!("call_gs{}", &hash.hex()[..16])
        };
        self.foreign.written_calls.insert(id.clone());
        self.foreign.call_ids.insert(call_id.to_owned(), id.clone());
        id
    }

    /// Answers calls left open before a new user prompt, as Pi itself
    /// would on replay.
    fn answer_unanswered(&mut self, ts: &str) {
        self.flush_assistant();
        for (id, name) in std::mem::take(&mut self.foreign.unanswered) {
            self.push_entry(
                ts,
                json!({"role": "toolResult", "toolCallId": id, "toolName": name,
                    "content": [{"type": "text", "text": "No result provided"}], "isError": true}),
            );
        }
    }

    fn flush_foreign(&mut self) {
        self.flush_assistant();
    }

    fn flush_assistant(&mut self) {
        if self.foreign.assistant.is_empty() {
            return;
        }
        let blocks = std::mem::take(&mut self.foreign.assistant);
        let calls = blocks
            .iter()
            .any(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"));
        let ts = self
            .foreign
            .assistant_ts
            .take()
            .unwrap_or_else(|| self.head.now.to_owned());
        let model = self
            .foreign
            .model
            .clone()
            .unwrap_or_else(|| json!("unknown"));
        let message = json!({
            "role": "assistant",
            "content": blocks,
            "api": "openai-completions",
            "provider": format!("git-session-{}", self.head.header.agent),
            "model": model,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": if calls { "toolUse" } else { "stop" },
        });
        self.push_entry(&ts, message);
    }
}

fn set_content(record: &mut Map<String, Value>, content: Value) {
    if let Some(Value::Object(m)) = record.get_mut("message") {
        m.insert("content".into(), content);
    }
}
