//! Canonical events to one OpenCode session: its `session`, `message` and
//! `part` rows, or the same as an `opencode export` document.
//!
//! Rows captured from OpenCode come back as captured: every event that
//! carries a row under `payload.native` contributes it, a later version of
//! a row (an update event) replacing the earlier one, and the session row
//! is moved to the requested id and directory. Under another session id (a
//! fork) every message and part id gets the same suffix, so the ids stay
//! unique in the database and keep their order.
//!
//! Events without a row (another agent's session, or events git-session
//! added) are written the way OpenCode writes a turn: a user message with
//! a text part per `message.user`; one assistant message per model request
//! (`reasoning`, `text` and `tool` parts, a new message after tool
//! results), each with `parentID` = its user message and the `time`
//! objects OpenCode needs (`formats/opencode.md`); tool parts completed
//! with their result. A reasoning part ends in a blank line: OpenCode sends
//! another model's reasoning as text, joined to the text after it. Shell
//! calls become `bash`, Claude Code's file tools
//! OpenCode's `read`/`write`/`edit`/`grep`/`glob`; other tools keep their
//! name and are reported as `tool-unmapped`.

use std::collections::HashMap;

use git_session_schema::{ArtifactId, Event, kinds};
use serde_json::{Map, Value, json};

use super::wire::{Row, Table, ptr, session_columns, session_info};
use super::{NATIVE_KEY, ids, rfc3339_to_ms};
use crate::{RenderError, RenderHead};

/// The client version written into sessions git-session makes.
pub const WRITTEN_VERSION: &str = "1.18.33";

/// Holds a rendered session: rows in insert order, and what was lost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NativeDoc {
    /// The `session` row's columns (JSON columns as text). `project_id`
    /// and `path` are left for the writer, which knows the repository.
    pub session: Map<String, Value>,
    /// `message` rows, `data` as an object, in OpenCode's read order.
    pub messages: Vec<Row>,
    /// `part` rows, `data` as an object, grouped by message, in id order.
    pub parts: Vec<Row>,
    /// The loss report (see [`crate::ChangeSet::losses`]).
    pub losses: Vec<String>,
}

impl NativeDoc {
    /// Returns the session id.
    pub fn id(&self) -> &str {
        self.session.get("id").and_then(Value::as_str).unwrap_or("")
    }

    /// Returns the `opencode export` document `opencode import` reads.
    pub fn export(&self) -> Value {
        let info = session_info(&self.session);
        let sid = self.id();
        let mut by_message: HashMap<&str, Vec<Value>> = HashMap::new();
        for p in &self.parts {
            let mut obj = p.data().unwrap_or_default();
            obj.insert("id".into(), json!(p.id()));
            obj.insert("sessionID".into(), json!(sid));
            obj.insert("messageID".into(), json!(p.text("message_id")));
            by_message
                .entry(p.text("message_id").unwrap_or(""))
                .or_default()
                .push(Value::Object(obj));
        }
        let messages: Vec<Value> = self
            .messages
            .iter()
            .map(|m| {
                let mut obj = m.data().unwrap_or_default();
                self.complete_for_import(&mut obj);
                obj.insert("id".into(), json!(m.id()));
                obj.insert("sessionID".into(), json!(sid));
                let mut parts = by_message.remove(m.id()).unwrap_or_default();
                for p in &mut parts {
                    complete_part_for_import(p);
                }
                json!({"info": obj, "parts": parts})
            })
            .collect();
        json!({"info": info, "messages": messages})
    }

    /// Adds what `opencode import` requires of a message and the database
    /// does not (rows OpenCode itself accepts may lack them): `agent` and
    /// `model` on user messages; `mode`, `agent`, `path`, `cost`, `tokens`,
    /// `modelID` and `providerID` on assistant messages.
    fn complete_for_import(&self, obj: &mut Map<String, Value>) {
        let model: Value = self
            .session
            .get("model")
            .and_then(Value::as_str)
            .and_then(|m| serde_json::from_str(m).ok())
            .unwrap_or(Value::Null);
        let model_id = model.get("id").cloned().unwrap_or(json!("unknown"));
        let provider = model.get("providerID").cloned().unwrap_or(json!("unknown"));
        let agent = self.session.get("agent").cloned().unwrap_or(json!("build"));
        let dir = self.session.get("directory").cloned().unwrap_or(json!(""));
        let user = obj.get("role").and_then(Value::as_str) == Some("user");
        let mut fill = |k: &str, v: Value| {
            if obj.get(k).is_none_or(Value::is_null) {
                obj.insert(k.into(), v);
            }
        };
        if user {
            fill("agent", agent);
            fill(
                "model",
                json!({"providerID": provider, "modelID": model_id}),
            );
        } else {
            fill("mode", agent.clone());
            fill("agent", agent);
            fill("path", json!({"cwd": dir, "root": dir}));
            fill("cost", json!(0));
            fill(
                "tokens",
                json!({"total": 0, "input": 0, "output": 0, "reasoning": 0, "cache": {"write": 0, "read": 0}}),
            );
            fill("modelID", model_id);
            fill("providerID", provider);
        }
    }

    /// Returns the rows to insert, session first, with the project and
    /// the path inside it filled in.
    pub fn rows(&self, project_id: &str, path: &str) -> Vec<Row> {
        let mut session = self.session.clone();
        session.insert("project_id".into(), json!(project_id));
        session.insert("path".into(), json!(path));
        let mut out = vec![Row {
            table: Table::Session,
            columns: session,
        }];
        for r in self.messages.iter().chain(self.parts.iter()) {
            out.push(Row {
                table: r.table,
                columns: r.to_insert(),
            });
        }
        out
    }
}

/// Renders canonical events as one OpenCode session; see the module docs.
pub fn render_session(
    head: RenderHead<'_>,
    events: &mut dyn Iterator<Item = Event>,
) -> Result<NativeDoc, RenderError> {
    if !ids::valid("ses", head.native_id) {
        return Err(RenderError::Request(format!(
            "{:?} is not an OpenCode session id (ses_ followed by letters, digits or _)",
            head.native_id
        )));
    }
    let mut r = Renderer {
        head,
        session: None,
        messages: Vec::new(),
        parts: Vec::new(),
        index: HashMap::new(),
        losses: crate::loss::Losses::default(),
        synth: Synth::default(),
    };
    for event in events {
        r.event(event);
    }
    r.finish()
}

struct Renderer<'a> {
    head: RenderHead<'a>,
    session: Option<Map<String, Value>>,
    messages: Vec<Row>,
    parts: Vec<Row>,
    /// (table, id) -> index into `messages` / `parts`.
    index: HashMap<(Table, String), usize>,
    /// The loss report: every event and field not carried, by seq.
    losses: crate::loss::Losses,
    synth: Synth,
}

/// The state of the message being synthesized from rowless events.
#[derive(Default)]
struct Synth {
    counter: u64,
    last_ms: i64,
    user: Option<String>,
    /// The open assistant message: index into `messages`.
    assistant: Option<usize>,
    /// A tool result came since the last assistant output: the next
    /// output is a new model request.
    after_result: bool,
    /// Open tool parts by call id: index into `parts`.
    calls: HashMap<String, usize>,
    /// The messages (index into `messages`) that hold a tool part, so
    /// closing one does not scan every part written so far.
    with_tools: std::collections::HashSet<usize>,
    /// The first user text, for a title.
    first_text: Option<String>,
}

impl Renderer<'_> {
    fn event(&mut self, event: Event) {
        let native = event
            .payload
            .get(NATIVE_KEY)
            .filter(|_| event.agent == git_session_schema::Agent::Opencode)
            .and_then(Row::from_native);
        if let Some(row) = native {
            self.native_row(row, &event);
            return;
        }
        if event.agent == git_session_schema::Agent::Opencode
            && event.origin.as_ref().is_some_and(|o| o.native_id.is_some())
        {
            // Derived from a captured row (a tool result, command.run, …):
            // the row itself is what is written.
            return;
        }
        match event.kind.as_str() {
            kinds::MESSAGE_USER => self.user(&event),
            kinds::MESSAGE_ASSISTANT => {
                let text = event.payload.get("text").and_then(Value::as_str);
                match text {
                    Some(t) if !t.is_empty() => {
                        let part = json!({"type": "text", "text": t, "time": self.span(&event)});
                        self.assistant_part(&event, part);
                    }
                    _ => self.losses.line(format!(
                        "message-empty: event {} has no text OpenCode can show",
                        event.seq
                    )),
                }
            }
            kinds::MESSAGE_THINKING => {
                let text = event
                    .payload
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if text.is_empty() {
                    self.losses.line(format!(
                        "thinking-dropped: event {} carries only provider-bound reasoning",
                        event.seq
                    ));
                } else {
                    self.losses
                        .extend(crate::tools::opaque_reasoning_loss(&event, &super::SPEC));
                    // OpenCode replays the reasoning of another model (this
                    // message's model is not the one resuming) as a text
                    // part, and joins a message's text parts with nothing
                    // between them: without a break, the reasoning runs
                    // into the answer after it ("…shell command.I'll …").
                    let text = if text.ends_with(char::is_whitespace) {
                        text.to_owned()
                    } else {
                        format!("{text}\n\n")
                    };
                    let part =
                        json!({"type": "reasoning", "text": text, "time": self.span(&event)});
                    self.assistant_part(&event, part);
                }
            }
            kinds::TOOL_CALL => self.tool_call(&event),
            kinds::TOOL_RESULT => self.tool_result(&event),
            kinds::SESSION_START => {}
            kinds::COMMAND_RUN
            | kinds::FILE_EDIT
            | kinds::FILE_READ
            | kinds::TODO_ADD
            | kinds::TODO_UPDATE => self.losses.add(
                "derived-event-folded",
                event.seq,
                format!(
                    "{} not written on its own: its tool call and result carry it",
                    event.kind
                ),
            ),
            _ => {
                if let Some((note, loss)) = crate::tools::web_search_note(&event, &super::SPEC) {
                    let part = json!({"type": "text", "text": note, "time": self.span(&event)});
                    self.assistant_part(&event, part);
                    self.losses.line(loss);
                    return;
                }
                self.losses.add(
                    "event-unmapped",
                    event.seq,
                    format!(
                        "{} has no OpenCode form; not written",
                        crate::loss::what(&event)
                    ),
                );
            }
        }
    }

    fn native_row(&mut self, mut row: Row, event: &Event) {
        match row.table {
            Table::Session => {
                if self.session.is_none() || event.kind != kinds::SESSION_START {
                    self.session = Some(row.columns);
                }
            }
            Table::Message | Table::Part => {
                if row.data().is_err() {
                    self.losses.line(format!(
                        "unparsed-line-omitted: {} row {} had unreadable data and is not written",
                        row.table.name(),
                        row.id()
                    ));
                    return;
                }
                if row.table == Table::Part {
                    self.restore_artifact(&mut row);
                }
                let key = (row.table, row.id().to_owned());
                let list = if row.table == Table::Message {
                    &mut self.messages
                } else {
                    &mut self.parts
                };
                match self.index.get(&key) {
                    Some(&i) => list[i] = row,
                    None => {
                        self.index.insert(key, list.len());
                        list.push(row);
                    }
                }
                if let Some(ms) = self.messages.last().and_then(|m| m.int("time_created")) {
                    self.synth.last_ms = self.synth.last_ms.max(ms);
                }
            }
            Table::Project => {}
        }
    }

    /// Puts a file part's bytes back into its `data:` URL.
    fn restore_artifact(&mut self, row: &mut Row) {
        use base64::Engine as _;
        let Some(Value::Object(data)) = row.columns.get_mut("data") else {
            return;
        };
        let Some(hex) = data
            .get("url")
            .and_then(Value::as_str)
            .and_then(|u| u.strip_prefix("artifact:"))
            .map(str::to_owned)
        else {
            return;
        };
        let head = data
            .remove("gitSessionDataUrl")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "data:application/octet-stream;base64".into());
        let id = ArtifactId::parse(&format!("sha256:{hex}"));
        match id.and_then(|id| (self.head.artifact)(&id)) {
            Some(bytes) => {
                let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                data.insert("url".into(), json!(format!("{head},{b64}")));
            }
            None => self.losses.line(format!(
                "image-omitted: the bytes of file part {} are not in the log",
                row.columns.get("id").and_then(Value::as_str).unwrap_or("")
            )),
        }
    }

    fn ms(&mut self, event: &Event) -> i64 {
        let ms = rfc3339_to_ms(&event.ts).unwrap_or(self.synth.last_ms);
        let ms = ms.max(self.synth.last_ms);
        self.synth.last_ms = ms;
        ms
    }

    fn span(&mut self, event: &Event) -> Value {
        let ms = self.ms(event);
        json!({"start": ms, "end": ms})
    }

    fn next_id(&mut self, prefix: &str, ms: i64) -> String {
        self.synth.counter += 1;
        let seed = format!("{}/{prefix}/{}", self.head.native_id, self.synth.counter);
        ids::ascending(prefix, ms, self.synth.counter, &seed)
    }

    fn push_message(&mut self, ms: i64, data: Map<String, Value>) -> usize {
        let id = self.next_id("msg", ms);
        let mut columns = Map::new();
        columns.insert("id".into(), json!(id));
        columns.insert("session_id".into(), json!(self.head.native_id));
        columns.insert("time_created".into(), json!(ms));
        columns.insert("time_updated".into(), json!(ms));
        columns.insert("data".into(), Value::Object(data));
        self.index.insert((Table::Message, id), self.messages.len());
        self.messages.push(Row {
            table: Table::Message,
            columns,
        });
        self.messages.len() - 1
    }

    fn push_part(&mut self, message: usize, ms: i64, data: Value) -> usize {
        let id = self.next_id("prt", ms);
        let mid = self.messages[message].id().to_owned();
        if data.get("type").and_then(Value::as_str) == Some("tool") {
            self.synth.with_tools.insert(message);
        }
        let mut columns = Map::new();
        columns.insert("id".into(), json!(id));
        columns.insert("message_id".into(), json!(mid));
        columns.insert("session_id".into(), json!(self.head.native_id));
        columns.insert("time_created".into(), json!(ms));
        columns.insert("time_updated".into(), json!(ms));
        columns.insert("data".into(), data);
        self.parts.push(Row {
            table: Table::Part,
            columns,
        });
        self.parts.len() - 1
    }

    fn user(&mut self, event: &Event) {
        let ms = self.ms(event);
        self.close_assistant();
        let message = match self.synth.user.clone().and_then(|id| {
            // Consecutive user events share one message.
            let last = self.messages.last()?;
            (last.id() == id).then_some(self.messages.len() - 1)
        }) {
            Some(i) => i,
            None => {
                let data = json!({"role": "user", "time": {"created": ms}, "agent": "build"});
                let i = self.push_message(ms, data.as_object().cloned().unwrap_or_default());
                self.synth.user = Some(self.messages[i].id().to_owned());
                i
            }
        };
        let text = event.payload.get("text").and_then(Value::as_str);
        if let Some(text) = text {
            if self.synth.first_text.is_none() && !text.trim().is_empty() {
                self.synth.first_text = Some(text.to_owned());
            }
            self.push_part(message, ms, json!({"type": "text", "text": text}));
        }
        // Every image (a text's too) is a file part with a data URL.
        let mut ids: Vec<ArtifactId> = event
            .refs
            .iter()
            .filter_map(|r| ArtifactId::from_ref(r))
            .collect();
        if ids.is_empty()
            && let Some(id) = event
                .payload
                .pointer("/image/artifact")
                .and_then(Value::as_str)
                .and_then(ArtifactId::parse)
        {
            ids.push(id);
        }
        let images = !ids.is_empty();
        for (i, id) in ids.into_iter().enumerate() {
            let media = crate::images::media_type(&event.payload, i);
            if let Some(b64) = crate::images::encode(&self.head, &mut self.losses, event.seq, &id) {
                let part = json!({
                    "type": "file",
                    "mime": media,
                    "filename": "image",
                    "url": format!("data:{media};base64,{b64}"),
                });
                self.push_part(message, ms, part);
            }
        }
        if text.is_none() && !images {
            self.losses.line(format!(
                "message-empty: user event {} has no text OpenCode can show",
                event.seq
            ));
        }
        // git-session's own message (a handoff's brief) is a message of its
        // own: folded into the next user message, the client would send the
        // source's first request before it.
        if event.agent == git_session_schema::Agent::GitSession {
            self.synth.user = None;
        }
    }

    /// Returns the assistant message the next output goes to.
    fn assistant(&mut self, ms: i64) -> usize {
        if let Some(i) = self.synth.assistant
            && !self.synth.after_result
        {
            return i;
        }
        self.close_assistant();
        let mut data = json!({
            "role": "assistant",
            "time": {"created": ms, "completed": ms},
            "mode": "build",
            "agent": "build",
            "path": {"cwd": self.head.cwd, "root": self.head.cwd},
            "cost": 0,
            "tokens": {"total": 0, "input": 0, "output": 0, "reasoning": 0, "cache": {"write": 0, "read": 0}},
            "finish": "stop",
        });
        if let Some(user) = &self.synth.user {
            data["parentID"] = json!(user);
        }
        let i = self.push_message(ms, data.as_object().cloned().unwrap_or_default());
        self.synth.assistant = Some(i);
        self.synth.after_result = false;
        i
    }

    fn assistant_part(&mut self, event: &Event, part: Value) {
        let ms = self.ms(event);
        let m = self.assistant(ms);
        self.push_part(m, ms, part);
        self.complete(m, ms);
    }

    /// Moves an assistant message's completion time to `ms`.
    fn complete(&mut self, message: usize, ms: i64) {
        if let Some(Value::Object(d)) = self.messages[message].columns.get_mut("data") {
            d.insert(
                "time".into(),
                json!({"created": ptr(d, "/time/created").cloned().unwrap_or(json!(ms)), "completed": ms}),
            );
        }
        self.messages[message]
            .columns
            .insert("time_updated".into(), json!(ms));
    }

    fn close_assistant(&mut self) {
        let Some(m) = self.synth.assistant.take() else {
            return;
        };
        // Calls never answered: OpenCode replays an unfinished call as
        // interrupted; write it finished with that error.
        let open: Vec<(String, usize)> = self.synth.calls.drain().collect();
        let mut has_tool = false;
        for (call, i) in open {
            has_tool = true;
            if let Some(Value::Object(d)) = self.parts[i].columns.get_mut("data") {
                let input = ptr(d, "/state/input").cloned().unwrap_or_else(|| json!({}));
                let ms = ptr(d, "/state/time/start").cloned().unwrap_or(json!(0));
                d.insert(
                    "state".into(),
                    json!({"status": "error", "input": input, "error": "Tool execution was interrupted",
                           "time": {"start": ms, "end": ms}}),
                );
            }
            self.losses.line(format!(
                "tool-result-missing: call {call} has no result; written as interrupted"
            ));
        }
        has_tool |= self.synth.with_tools.contains(&m);
        if let Some(Value::Object(d)) = self.messages[m].columns.get_mut("data") {
            d.insert(
                "finish".into(),
                json!(if has_tool { "tool-calls" } else { "stop" }),
            );
        }
    }

    fn tool_call(&mut self, event: &Event) {
        let p = &event.payload;
        let name = p.get("name").and_then(Value::as_str).unwrap_or("");
        let args = p.get("arguments").cloned().unwrap_or(json!({}));
        let call_id = p
            .get("call_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let t = crate::tools::translate(&super::SPEC, &event.agent, name, &args);
        self.losses
            .extend(t.losses(event.seq, event.agent.as_str(), &super::SPEC));
        let (tool, input) = (t.name, t.arguments);
        let ms = self.ms(event);
        let m = self.assistant(ms);
        let part = json!({
            "type": "tool",
            "tool": tool,
            "callID": call_id,
            "state": {"status": "pending", "input": input, "time": {"start": ms}},
        });
        let i = self.push_part(m, ms, part);
        self.complete(m, ms);
        self.synth.calls.insert(call_id, i);
    }

    fn tool_result(&mut self, event: &Event) {
        let p = &event.payload;
        let call_id = p.get("call_id").and_then(Value::as_str).unwrap_or("");
        let Some(i) = self.synth.calls.remove(call_id) else {
            self.losses.line(format!(
                "tool-result-orphaned: result event {} answers no call OpenCode has",
                event.seq
            ));
            return;
        };
        let mut output = match p.get("output") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        // A tool state holds text only: a result's image is named there.
        for id in event.refs.iter().filter_map(|r| ArtifactId::from_ref(r)) {
            let mark = crate::images::placeholder(
                &mut self.losses,
                event.seq,
                &id,
                "OpenCode",
                "tool.result",
            );
            output.push('\n');
            output.push_str(&mark);
        }
        let error = crate::tools::failure(p).is_some();
        let end = self.ms(event);
        if let Some(Value::Object(d)) = self.parts[i].columns.get_mut("data") {
            let input = ptr(d, "/state/input").cloned().unwrap_or_else(|| json!({}));
            let start = ptr(d, "/state/time/start").cloned().unwrap_or(json!(end));
            let title = input
                .get("command")
                .or_else(|| input.get("filePath"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let state = if error {
                json!({"status": "error", "input": input, "error": output,
                       "time": {"start": start, "end": end}})
            } else {
                json!({"status": "completed", "input": input, "output": output,
                       "title": title, "metadata": {},
                       "time": {"start": start, "end": end}})
            };
            d.insert("state".into(), state);
        }
        self.synth.after_result = true;
    }

    fn finish(mut self) -> Result<NativeDoc, RenderError> {
        self.close_assistant();
        if self.messages.is_empty() {
            return Err(RenderError::Empty(
                "the session has no messages OpenCode can show".into(),
            ));
        }
        let head = self.head;
        // Parts whose message is not written would break the session.
        let known: std::collections::HashSet<String> =
            self.messages.iter().map(|m| m.id().to_owned()).collect();
        let mut parts = Vec::with_capacity(self.parts.len());
        for p in std::mem::take(&mut self.parts) {
            if known.contains(p.text("message_id").unwrap_or("")) {
                parts.push(p);
            } else {
                self.losses.line(format!(
                    "unparsed-line-omitted: part {} belongs to no message and is not written",
                    p.id()
                ));
            }
        }
        let first_ms = self
            .messages
            .iter()
            .filter_map(|m| m.int("time_created"))
            .min()
            .unwrap_or(0);
        let last_ms = self
            .messages
            .iter()
            .chain(parts.iter())
            .filter_map(|m| m.int("time_updated"))
            .max()
            .unwrap_or(first_ms);
        let mut session = match self.session.take() {
            Some(s) => s,
            None => {
                let title = head
                    .header
                    .title
                    .clone()
                    .or_else(|| self.synth.first_text.clone())
                    .unwrap_or_else(|| "Resumed session".into());
                let title: String = title
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(80)
                    .collect();
                session_columns(
                    json!({
                        "slug": "git-session",
                        "title": title,
                        "version": WRITTEN_VERSION,
                        "agent": "build",
                        "time": {"created": first_ms, "updated": last_ms},
                    })
                    .as_object()
                    .expect("an object"),
                )
            }
        };
        let old = session
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        session.insert("id".into(), json!(head.native_id));
        session.insert("directory".into(), json!(head.cwd));
        session.remove("project_id");
        session.remove("path");
        session.remove("workspace_id");
        let mut messages = self.messages;
        // Another id: every row moves, and message/part ids get one suffix.
        let suffix = if !old.is_empty() && old != head.native_id {
            Some(ids::base62(head.native_id, 6))
        } else {
            None
        };
        let rekey = |id: &str| match &suffix {
            Some(s) if !id.is_empty() => format!("{id}{s}"),
            _ => id.to_owned(),
        };
        for m in &mut messages {
            let id = rekey(m.id());
            m.columns.insert("id".into(), json!(id));
            m.columns.insert("session_id".into(), json!(head.native_id));
            if let Some(Value::Object(d)) = m.columns.get_mut("data")
                && let Some(parent) = d.get("parentID").and_then(Value::as_str)
            {
                let parent = rekey(parent);
                d.insert("parentID".into(), json!(parent));
            }
        }
        for p in &mut parts {
            let id = rekey(p.id());
            let mid = rekey(p.text("message_id").unwrap_or(""));
            p.columns.insert("id".into(), json!(id));
            p.columns.insert("message_id".into(), json!(mid));
            p.columns.insert("session_id".into(), json!(head.native_id));
        }
        messages
            .sort_by(|a, b| (a.int("time_created"), a.id()).cmp(&(b.int("time_created"), b.id())));
        let order: HashMap<String, usize> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id().to_owned(), i))
            .collect();
        parts.sort_by(|a, b| {
            let ka = order.get(a.text("message_id").unwrap_or("")).copied();
            let kb = order.get(b.text("message_id").unwrap_or("")).copied();
            (ka, a.id()).cmp(&(kb, b.id()))
        });
        Ok(NativeDoc {
            session,
            messages,
            parts,
            losses: self.losses.into_lines(),
        })
    }
}

/// Adds what `opencode import` requires of a finished tool state: `title`
/// and `metadata` (completed), `time` (completed and error).
fn complete_part_for_import(part: &mut Value) {
    let Some(state) = part.get_mut("state").and_then(Value::as_object_mut) else {
        return;
    };
    let status = state
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let status = status.as_str();
    if matches!(status, "completed" | "error") && !state.contains_key("time") {
        state.insert("time".into(), json!({"start": 0, "end": 0}));
    }
    if status == "completed" {
        state.entry("title").or_insert_with(|| json!(""));
        state.entry("metadata").or_insert_with(|| json!({}));
    }
}
