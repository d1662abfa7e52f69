//! Canonical events to a Claude Code transcript, streamed.
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
//! The events are read once, in seq order, and each line goes to the sink
//! as soon as it is complete: a native message line waits only for the
//! events of its own blocks, a minimal record only for the events it merges
//! (an assistant turn's text and calls, a run of tool results). Besides
//! that one line the render keeps the ids the guards below need, never the
//! session.
//!
//! The silent failures of `claude --resume` (formats/claude.md §5.1, §6) are
//! guarded here on the way out rather than trusted: every chain record links
//! to the previous one, tool ids and message ids are made unique where two
//! different calls or turns share one, and every line ends with a newline.
//! Each guard looks only backwards (ids already written), so none needs to
//! see later events. One more keeps the whole session on the path the
//! client sends: a record that continues the session from an earlier point
//! than the record before it (a second continuation captured elsewhere, or
//! native turns after events git-session appended) is linked after that
//! record, and the loss report says how many were (see `Continuations`).
//!
//! It does not write `agent-<id>.meta.json`, `~/.claude.json` or
//! `history.jsonl`: none is needed to resume.

use std::collections::{BTreeSet, HashMap, HashSet};

use git_session_schema::{Agent, ArtifactId, Event, kinds};
use serde_json::{Map, Value, json};

use super::{NATIVE_KEY, transcript_path};
use crate::{ChangeSet, FileSink, RenderError, RenderHead};

/// Event types that only restate a tool call and its result.
const DERIVED: [&str; 5] = [
    kinds::COMMAND_RUN,
    kinds::FILE_EDIT,
    kinds::FILE_READ,
    kinds::TODO_ADD,
    kinds::TODO_UPDATE,
];

/// Bytes of finished lines held before they go to the sink: one write per
/// line would cost a system call each on a file sink, and a bounded buffer
/// keeps memory flat however long the session is.
const FLUSH_BYTES: usize = 64 * 1024;

/// Renders a session, streaming (see [`crate::Adapter::render_to`]).
pub(super) fn render_to(
    head: RenderHead<'_>,
    events: &mut dyn Iterator<Item = Event>,
    out: &mut dyn FileSink,
) -> Result<ChangeSet, RenderError> {
    let session_id = head
        .native_id
        .split_once('/')
        .map_or(head.native_id, |(s, _)| s)
        .to_owned();
    // The client refuses a non-UUID before looking for the file
    // (formats/claude.md §5), and the id becomes the file's path.
    crate::Adapter::validate_native_id(&super::Claude, head.native_id)
        .map_err(RenderError::Request)?;
    out.begin(&transcript_path(head.cwd, head.native_id))
        .map_err(RenderError::Sink)?;
    let mut w = Writer {
        head,
        out: Output {
            sink: out,
            buf: Vec::with_capacity(FLUSH_BYTES + FLUSH_BYTES / 4),
            failed: None,
            session_id: session_id.clone(),
            native_id: head.native_id.to_owned(),
            ids: UniqueIds::default(),
            links: Links::default(),
            continuations: Continuations::default(),
            branches: Branches::default(),
            native_line: None,
            last_uuid: None,
            wrote_message: false,
            id_losses: Vec::new(),
        },
        old_cwd: head.header.cwd.clone(),
        open: None,
        open_line: None,
        foreign: Foreign::default(),
        losses: crate::loss::Losses::default(),
        native_records: 0,
    };
    for event in events {
        if w.old_cwd.is_none() {
            // The first kept record with a cwd names the captured directory;
            // records before it have no cwd to move.
            w.old_cwd = event
                .payload
                .pointer(&format!("/{NATIVE_KEY}/record/cwd"))
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        let native = event.agent == Agent::Claude
            && event.payload.get(NATIVE_KEY).is_some_and(Value::is_object);
        let unparsed = (event.agent == Agent::Claude && event.kind == kinds::META)
            .then(|| event.payload.get("unparsed").and_then(Value::as_str))
            .flatten();
        if let Some(raw) = unparsed {
            // A line that was not a record goes back as it was: the client
            // skips such lines, and the file stays the agent's own.
            w.close();
            w.out.raw(raw);
        } else if native {
            w.native(event)?;
        } else {
            w.close();
            w.foreign_event(event);
        }
        if let Some(e) = w.out.failed.take() {
            return Err(RenderError::Sink(e));
        }
    }
    w.close();
    w.flush_foreign();
    if w.native_records == 0
        && let Some(title) = &head.header.title
    {
        w.out
            .line(obj(json!({"type": "custom-title", "customTitle": title})));
    }
    w.out.flush();
    if let Some(e) = w.out.failed.take() {
        return Err(RenderError::Sink(e));
    }
    let Writer { out, losses, .. } = w;
    if !out.wrote_message {
        return Err(RenderError::Empty(
            "no user or assistant message to write".to_owned(),
        ));
    }
    let mut losses = losses.into_lines();
    losses.extend(out.id_losses);
    let inactive = out.branches.off_path(out.last_uuid.as_deref());
    if inactive > 0 {
        losses.push(format!(
            "branch-inactive: {inactive} message record(s) are on branches of the conversation that claude --resume does not follow (it sends the path to the last record); they stay in the file and in the log"
        ));
    }
    if out.continuations.relinked > 0 {
        losses.push(format!(
            "continuation-relinked: {} record(s) continued the session from an earlier point (captured elsewhere, or after events appended by git-session); each was linked after the record before it, so the client sends every turn in the session's order",
            out.continuations.relinked
        ));
    }
    if out.links.linked > 0 {
        losses.push(format!(
            "uuid-assigned: {} message line(s) had no uuid; given one and linked in file order so the client sends them",
            out.links.linked
        ));
    }
    if head.native_id.contains('/') {
        losses.push(
            "subagent-meta-omitted: the sub-agent's agent-<id>.meta.json is not part of the session and was not written"
                .to_owned(),
        );
    }
    Ok(ChangeSet {
        resume_command: super::SPEC.resume_command(&session_id),
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

/// Claude Code's own tools: a foreign call under one of these names needs
/// no report.
const CLAUDE_TOOLS: [&str; 12] = [
    "Bash",
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "Glob",
    "Grep",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
    "Task",
    "Agent",
];

/// Holds finished lines on their way to the sink, and the guards that look
/// at every line in file order.
struct Output<'s> {
    sink: &'s mut dyn FileSink,
    buf: Vec<u8>,
    /// The sink's first error; later lines are dropped and the render fails.
    failed: Option<String>,
    session_id: String,
    /// The target's native id, which seeds the uuids given to lines.
    native_id: String,
    ids: UniqueIds,
    links: Links,
    continuations: Continuations,
    branches: Branches,
    /// The capture line number of the native record [`Output::line`] gets
    /// next, set just before it is called for one.
    native_line: Option<Option<u64>>,
    /// The `uuid` of the last line that came with one, which minimal records
    /// link to.
    last_uuid: Option<String>,
    /// A `user` or `assistant` line was written; without one there is no
    /// session to resume.
    wrote_message: bool,
    /// Losses of the id guards, reported after the render's own.
    id_losses: Vec<String>,
}

impl Output<'_> {
    /// Guards, serializes and queues one finished line.
    fn line(&mut self, mut line: Map<String, Value>) {
        match self.native_line.take() {
            Some(no) => self
                .continuations
                .native(&mut line, no, self.last_uuid.as_deref()),
            None if line.contains_key("uuid") => self.continuations.foreign(),
            None => {}
        }
        if let Some(uuid) = line.get("uuid").and_then(Value::as_str) {
            self.continuations.written(uuid);
            self.branches.add(&line, uuid);
            self.last_uuid = Some(uuid.to_owned());
        }
        self.wrote_message |= matches!(
            line.get("type").and_then(Value::as_str),
            Some("user" | "assistant")
        );
        self.ids.fix(&mut line, &mut self.id_losses);
        self.links.fix(&mut line, &self.native_id);
        line.insert("sessionId".into(), json!(self.session_id));
        git_session_schema::json::write_object(&mut self.buf, &line);
        self.buf.push(b'\n');
        if self.buf.len() >= FLUSH_BYTES {
            self.flush();
        }
    }

    /// Queues a line exactly as given (a line kept unparsed at capture).
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
}

/// Holds the render in progress.
struct Writer<'a, 's> {
    head: RenderHead<'a>,
    out: Output<'s>,
    /// The directory the session was captured in, moved to `head.cwd` in
    /// kept records (never in records written here, which already have it).
    old_cwd: Option<String>,
    /// A native message line whose blocks are still being collected.
    open: Option<Map<String, Value>>,
    /// The capture line number of `open`.
    open_line: Option<u64>,
    foreign: Foreign,
    /// The loss report: every event and field not carried, by seq.
    losses: crate::loss::Losses,
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
    call_ids: HashMap<String, String>,
    /// Every tool id written for a call, to keep them unique.
    written_ids: HashSet<String>,
    /// Tool ids written whose result has not been written yet.
    unanswered: Vec<String>,
    counter: u64,
}

impl Writer<'_, '_> {
    /// Writes back one event that carries a Claude record or block.
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
        if let Some(Value::Object(mut record)) = native.remove("record") {
            self.close();
            self.flush_foreign();
            self.native_records += 1;
            let line_no = event.origin.as_ref().and_then(|o| o.native_seq);
            if let (Some(old), Some(Value::String(cwd))) = (&self.old_cwd, record.get_mut("cwd"))
                && let Some(rest) = cwd.strip_prefix(old.as_str())
                && (rest.is_empty() || rest.starts_with('/'))
            {
                *cwd = format!("{}{rest}", self.head.cwd);
            }
            if native.get("content").and_then(Value::as_str) == Some("string") {
                let text = event
                    .payload
                    .get_mut("text")
                    .map(Value::take)
                    .unwrap_or_else(|| json!(""));
                set_content(&mut record, text);
                self.out.native_line = Some(line_no);
                self.out.line(record);
            } else if native.contains_key("block") {
                let block = self.block(&mut event, native);
                set_content(&mut record, Value::Array(vec![block]));
                self.open = Some(record);
                self.open_line = line_no;
            } else {
                self.out.native_line = Some(line_no);
                self.out.line(record);
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
            // A block whose line was lost: write it like a foreign event
            // rather than drop it.
            self.losses.line(format!(
                "block-relinked: event {}: content block without its record, written as a new message",
                event.seq
            ));
            self.foreign_event(event);
            return Ok(());
        }
        let block = self.block(&mut event, native);
        match self
            .open
            .as_mut()
            .and_then(|r| r.get_mut("message"))
            .and_then(|m| m.get_mut("content"))
            .and_then(Value::as_array_mut)
        {
            Some(blocks) => blocks.push(block),
            None => {
                // `set_content` made the content a list when the line was
                // opened, so this is unreachable; keep the block anyway.
                if let Some(record) = self.open.as_mut() {
                    set_content(record, Value::Array(vec![block]));
                }
            }
        }
        Ok(())
    }

    /// Rebuilds a content block from an event and its kept skeleton; takes
    /// what it needs out of the event's payload instead of copying it.
    fn block(&mut self, event: &mut Event, mut native: Map<String, Value>) -> Value {
        let mut block = match native.remove("block") {
            Some(Value::Object(b)) => b,
            _ => Map::new(),
        };
        let absent: BTreeSet<&str> = native
            .get("absent")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let seq = event.seq;
        let mut images = event.refs.iter().filter_map(|r| ArtifactId::from_ref(r));
        let p = &mut event.payload;
        let mut take = |key: &str| p.get_mut(key).map(Value::take);
        match event.kind.as_str() {
            kinds::MESSAGE_USER | kinds::MESSAGE_ASSISTANT => {
                if let Some(text) = take("text") {
                    block.insert("text".into(), text);
                } else if take("image").is_some() {
                    let data = images.next().and_then(|id| {
                        crate::images::encode(&self.head, &mut self.losses, seq, &id)
                    });
                    if let Some(Value::Object(source)) = block.get_mut("source") {
                        source.insert("data".into(), json!(data.unwrap_or_default()));
                    }
                }
            }
            kinds::MESSAGE_THINKING => {
                if take("redacted").and_then(|v| v.as_bool()) == Some(true) {
                    block.insert(
                        "data".into(),
                        take("opaque")
                            .and_then(|mut o| o.get_mut("data").map(Value::take))
                            .unwrap_or(Value::Null),
                    );
                } else {
                    block.insert("thinking".into(), take("text").unwrap_or_else(|| json!("")));
                    if let Some(sig) =
                        take("opaque").and_then(|mut o| o.get_mut("signature").map(Value::take))
                    {
                        block.insert("signature".into(), sig);
                    }
                }
            }
            kinds::TOOL_CALL => {
                block.insert("id".into(), take("call_id").unwrap_or(Value::Null));
                block.insert("name".into(), take("name").unwrap_or(Value::Null));
                block.insert(
                    "input".into(),
                    take("arguments").unwrap_or_else(|| json!({})),
                );
            }
            kinds::TOOL_RESULT => {
                block.insert("tool_use_id".into(), take("call_id").unwrap_or(Value::Null));
                if !absent.contains("is_error") {
                    block.insert("is_error".into(), take("is_error").unwrap_or(json!(false)));
                }
                let output = take("output").unwrap_or_else(|| json!(""));
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
                                    let data = images.next().and_then(|id| {
                                        crate::images::encode(
                                            &self.head,
                                            &mut self.losses,
                                            seq,
                                            &id,
                                        )
                                    });
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

    /// Queues the native message line being assembled, if any.
    fn close(&mut self) {
        if let Some(record) = self.open.take() {
            self.out.native_line = Some(self.open_line.take());
            self.out.line(record);
        }
    }

    fn foreign_event(&mut self, event: Event) {
        let event = &event;
        let p = &event.payload;
        match event.kind.as_str() {
            kinds::MESSAGE_USER => {
                let text = p.get("text").and_then(Value::as_str).unwrap_or("");
                let mut content = vec![json!({"type": "text", "text": text})];
                content.extend(self.image_blocks(event));
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
                // A call becomes Claude Code's tool of the same kind, its
                // arguments renamed; what has no counterpart is named.
                let t = crate::tools::translate(&super::SPEC, &event.agent, name, &input);
                if !t.mapped && !CLAUDE_TOOLS.contains(&name) {
                    self.losses.add(
                        "tool-unmapped",
                        event.seq,
                        format!("a call to {name}, which Claude Code does not have; written under its own name"),
                    );
                }
                self.losses.extend(
                    t.losses(event.seq, event.agent.as_str(), &super::SPEC)
                        .into_iter()
                        .filter(|l| !l.starts_with("tool-unmapped")),
                );
                let (name, input) = (t.name, t.arguments);
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
                // Claude Code marks a failure with `is_error` and starts a
                // failed command's text with its exit code.
                let failure = crate::tools::failure(p);
                let is_error = failure.is_some();
                let output = match failure {
                    Some(f @ crate::tools::Failure { exit_code: Some(_) })
                        if crate::tools::exit_code_in(&output).is_none() =>
                    {
                        crate::tools::mark_failed(&output, f, false)
                    }
                    _ => output,
                };
                let written = self.foreign.call_ids.get(call_id).cloned();
                match written.filter(|id| self.foreign.unanswered.contains(id)) {
                    Some(id) => {
                        self.flush_assistant();
                        self.foreign.unanswered.retain(|u| *u != id);
                        // A result's images are image blocks of its content.
                        let images = self.image_blocks(event);
                        let content = if images.is_empty() {
                            json!(output)
                        } else {
                            let mut c = vec![json!({"type": "text", "text": output})];
                            c.extend(images);
                            Value::Array(c)
                        };
                        self.foreign
                            .results
                            .push(json!({"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error}));
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
                    "message.thinking ({}) not written: Claude Code sends back only its own signed thinking",
                    event.agent
                ),
            ),
            // Claude's own derived events come back from the lines written.
            kind if DERIVED.contains(&kind) && event.agent == Agent::Claude => {}
            kind if DERIVED.contains(&kind) => self.losses.add(
                "derived-event-folded",
                event.seq,
                format!("{kind} not written on its own: its tool call and result carry it"),
            ),
            _ => {
                if let Some((note, loss)) = crate::tools::web_search_note(event, &super::SPEC) {
                    self.flush_results();
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
                    format!(
                        "{} has no Claude Code record; not written",
                        crate::loss::what(event)
                    ),
                );
            }
        }
    }

    /// Returns the image blocks of an event's image artifacts (`refs`),
    /// each with its media type (`payload.images[]`, else `payload.image`).
    fn image_blocks(&mut self, event: &Event) -> Vec<Value> {
        let mut out = Vec::new();
        let ids = event.refs.iter().filter_map(|r| ArtifactId::from_ref(r));
        for (i, id) in ids.enumerate() {
            let Some(data) = crate::images::encode(&self.head, &mut self.losses, event.seq, &id)
            else {
                continue;
            };
            let media = crate::images::media_type(&event.payload, i);
            out.push(json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}));
        }
        out
    }

    /// Returns a tool id the API accepts and no earlier call used.
    fn tool_id(&mut self, call_id: &str, seq: u64) -> String {
        let usable = !call_id.is_empty()
            && call_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            && !self.foreign.written_ids.contains(call_id);
        let id = if usable {
            call_id.to_owned()
        } else {
            let hash =
                ArtifactId::of(format!("{}:{seq}:{call_id}", self.head.native_id).as_bytes());
            format!("toolu_gs{}", &hash.hex()[..24])
        };
        self.foreign.written_ids.insert(id.clone());
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
            .unwrap_or_else(|| self.head.now.to_owned());
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
            .unwrap_or_else(|| self.head.now.to_owned());
        self.push_chain("user", &ts, Value::Array(blocks));
    }

    /// Appends a minimal chain record linked to the last chain record.
    fn push_chain(&mut self, role: &str, ts: &str, content: Value) {
        let parent = self.out.last_uuid.clone();
        self.foreign.counter += 1;
        let uuid = derived_uuid(&format!(
            "{}:{}:{role}",
            self.head.native_id, self.foreign.counter
        ));
        let mut message = json!({"role": role, "content": content});
        if role == "assistant" {
            message["type"] = json!("message");
        }
        self.out.line(obj(json!({
            "type": role,
            "uuid": uuid,
            "parentUuid": parent,
            "isSidechain": false,
            "userType": "external",
            "cwd": self.head.cwd,
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
pub(super) fn is_uuid(id: &str) -> bool {
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
///
/// Sees the lines one at a time in file order and keeps only ids: every
/// tool id and message id written so far, and the renames still to apply.
#[derive(Default)]
struct UniqueIds {
    tool_ids: HashSet<String>,
    /// Old id to new id, applied to the next result naming it.
    renamed_results: HashMap<String, String>,
    /// Each assistant message id and the turn it was first written in.
    message_turn: HashMap<String, usize>,
    renamed_messages: HashMap<(String, usize), String>,
    turn: usize,
}

impl UniqueIds {
    /// Renames the ids of `line` that an earlier line already used.
    fn fix(&mut self, line: &mut Map<String, Value>, losses: &mut Vec<String>) {
        let is_assistant = line.get("type").and_then(Value::as_str) == Some("assistant");
        let is_user = line.get("type").and_then(Value::as_str) == Some("user");
        let Some(message) = line.get_mut("message").and_then(Value::as_object_mut) else {
            return;
        };
        let blocks: &mut [Value] = match message.get_mut("content") {
            Some(Value::Array(b)) => b,
            _ => &mut [],
        };
        let is_prompt = is_user
            && !blocks
                .iter()
                .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"));
        for block in blocks.iter_mut().filter_map(Value::as_object_mut) {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => {
                    let Some(id) = block.get("id").and_then(Value::as_str) else {
                        continue;
                    };
                    if !self.tool_ids.contains(id) {
                        self.tool_ids.insert(id.to_owned());
                        continue;
                    }
                    let id = id.to_owned();
                    let mut n = 2;
                    while self.tool_ids.contains(&format!("{id}_{n}")) {
                        n += 1;
                    }
                    let new = format!("{id}_{n}");
                    self.tool_ids.insert(new.clone());
                    losses.push(format!(
                        "tool-id-renamed: tool id {id} was used by two calls; the later one was renamed {new}"
                    ));
                    block.insert("id".into(), json!(new));
                    self.renamed_results.insert(id, new);
                }
                Some("tool_result") => {
                    let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
                        continue;
                    };
                    if let Some(new) = self.renamed_results.remove(id) {
                        block.insert("tool_use_id".into(), json!(new));
                    }
                }
                _ => {}
            }
        }
        if is_prompt {
            self.turn += 1;
        }
        if !is_assistant {
            return;
        }
        let Some(id) = message.get("id").and_then(Value::as_str) else {
            return;
        };
        let turn = self.turn;
        let first = match self.message_turn.get(id) {
            Some(&first) => first,
            None => {
                self.message_turn.insert(id.to_owned(), turn);
                turn
            }
        };
        if first != turn {
            let id = id.to_owned();
            let new = self
                .renamed_messages
                .entry((id.clone(), turn))
                .or_insert_with(|| {
                    losses.push(format!(
                        "message-id-renamed: message id {id} was reused in a later turn; renamed there"
                    ));
                    format!("{id}_t{turn}")
                })
                .clone();
            message.insert("id".into(), json!(new));
        }
    }
}

/// Keeps every continuation of the session on the one path the client
/// sends (formats/claude.md §3: root to leaf by `parentUuid`).
///
/// A canonical session can hold two continuations of one native session:
/// the same file continued on two machines and captured on both, or turns
/// the agent added after git-session appended events of its own. Their
/// records name a parent from before the other continuation, so written
/// as they were they would be sibling branches and the client would send
/// only one. Records are grouped in runs ("epochs"): a new run starts at a
/// record written here (foreign events) and at a native record whose
/// capture line number is not after the previous one's (another capture of
/// the file). A native record whose parent is in an earlier run, and is
/// not the record just before it, is linked to the record just before it.
/// Within one run the links are the agent's own and stay as they are (a
/// branch the user made in one file stays a branch).
#[derive(Default)]
struct Continuations {
    epoch: u32,
    /// The capture line number of the last native record in this run.
    last_line: Option<u64>,
    /// The run each uuid written so far was written in.
    written: HashMap<String, u32>,
    /// Records linked anew, for the loss report.
    relinked: usize,
}

impl Continuations {
    /// Marks a record written here: what follows is a new run.
    fn foreign(&mut self) {
        self.epoch += 1;
        self.last_line = None;
    }

    /// Relinks a native record from capture line `no` if it continues from
    /// an earlier run; `last` is the uuid of the line before it.
    fn native(&mut self, line: &mut Map<String, Value>, no: Option<u64>, last: Option<&str>) {
        if let Some(no) = no {
            if self.last_line.is_some_and(|prev| no <= prev) {
                self.epoch += 1;
            }
            self.last_line = Some(no);
        }
        let Some(last) = last else {
            return;
        };
        let Some(parent) = line.get("parentUuid").and_then(Value::as_str) else {
            // A root after other records (a brief written first, a Claude
            // session handed back to Claude) would start a second tree. Compaction boundaries and sub-agent roots keep
            // their null parent.
            let root = line.get("parentUuid").is_some_and(Value::is_null)
                && !line.contains_key("logicalParentUuid")
                && line.get("isSidechain").and_then(Value::as_bool) != Some(true);
            if root {
                line.insert("parentUuid".into(), json!(last));
                self.relinked += 1;
            }
            return;
        };
        if parent != last && self.written.get(parent).is_some_and(|&e| e < self.epoch) {
            line.insert("parentUuid".into(), json!(last));
            self.relinked += 1;
        }
    }

    fn written(&mut self, uuid: &str) {
        self.written.insert(uuid.to_owned(), self.epoch);
    }
}

/// Remembers the conversation tree as written (uuids and parents only), to
/// count the messages a resume will not send: those off the path from the
/// last record back to the root, as on a branch the user made by editing
/// an earlier prompt. Compaction boundaries are followed through their
/// `logicalParentUuid` (what precedes them was summarized, not dropped);
/// sidechain records belong to sub-agents and are not counted.
#[derive(Default)]
struct Branches {
    /// Each uuid's parent and whether it is a user or assistant message.
    nodes: HashMap<String, (Option<String>, bool)>,
}

impl Branches {
    fn add(&mut self, line: &Map<String, Value>, uuid: &str) {
        let parent = line
            .get("parentUuid")
            .and_then(Value::as_str)
            .or_else(|| line.get("logicalParentUuid").and_then(Value::as_str))
            .map(str::to_owned);
        let message = matches!(
            line.get("type").and_then(Value::as_str),
            Some("user" | "assistant")
        ) && line.get("isSidechain").and_then(Value::as_bool) != Some(true);
        self.nodes.insert(uuid.to_owned(), (parent, message));
    }

    /// Returns how many messages are not on the path from `leaf` to the root.
    fn off_path(&self, leaf: Option<&str>) -> usize {
        let mut on = HashSet::new();
        let mut at = leaf.map(str::to_owned);
        while let Some(uuid) = at {
            if !on.insert(uuid.clone()) {
                break;
            }
            at = self.nodes.get(&uuid).and_then(|(p, _)| p.clone());
        }
        self.nodes
            .iter()
            .filter(|(uuid, (_, message))| *message && !on.contains(*uuid))
            .count()
    }
}

/// Gives `user`/`assistant` lines without a `uuid` (hand-made files) one,
/// linked to the previous chain line: without the links the client
/// silently sends only the last message (formats/claude.md §5.1). Lines
/// that have a `uuid` keep their links as written, even a parent that is
/// not in the file, which the client tolerates and which old clients wrote
/// on purpose (a resumed session pointing into the previous file).
#[derive(Default)]
struct Links {
    /// The uuid of the last line that has one, after linking.
    last: Option<String>,
    /// Lines seen, for the seed of a derived uuid.
    index: usize,
    /// Lines that were given a uuid, for the loss report.
    linked: usize,
}

impl Links {
    fn fix(&mut self, line: &mut Map<String, Value>, native_id: &str) {
        let is_message = matches!(
            line.get("type").and_then(Value::as_str),
            Some("user" | "assistant")
        );
        if is_message && !line.get("uuid").is_some_and(Value::is_string) {
            line.insert(
                "uuid".into(),
                json!(derived_uuid(&format!("{native_id}:line:{}", self.index))),
            );
            line.insert("parentUuid".into(), json!(self.last));
            self.linked += 1;
        }
        if let Some(uuid) = line.get("uuid").and_then(Value::as_str) {
            self.last = Some(uuid.to_owned());
        }
        self.index += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(values: Vec<Value>) -> Vec<Map<String, Value>> {
        values.into_iter().map(obj).collect()
    }

    #[test]
    fn messages_without_uuids_are_linked_in_file_order() {
        let mut lines = lines(vec![
            json!({"type":"user","message":{"content":"q"}}),
            json!({"type":"last-prompt","lastPrompt":"q"}),
            json!({"type":"assistant","message":{"content":"a"}}),
        ]);
        let mut links = Links::default();
        for line in &mut lines {
            links.fix(line, "s");
        }
        assert_eq!(lines[0]["parentUuid"], Value::Null);
        assert_eq!(lines[2]["parentUuid"], lines[0]["uuid"]);
        assert!(
            lines[1].get("uuid").is_none(),
            "side records stay as they are"
        );
        assert_eq!(links.linked, 2);
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
        let mut lines = lines(vec![
            json!({"type":"user","message":{"content":"q1"}}),
            json!({"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1"}]}}),
            json!({"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1"}]}}),
            json!({"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"same turn"}]}}),
            json!({"type":"user","message":{"content":"q2"}}),
            json!({"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1"}]}}),
            json!({"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1"}]}}),
        ]);
        let mut losses = Vec::new();
        let mut ids = UniqueIds::default();
        for line in &mut lines {
            ids.fix(line, &mut losses);
        }
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
