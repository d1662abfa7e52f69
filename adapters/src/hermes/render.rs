//! Canonical events to `state.db` rows (see the module docs of [`super`]).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use base64::Engine as _;
use git_session_schema::{Agent, ArtifactId, Event, kinds};
use serde_json::{Map, Value, json};

use super::{ARTIFACT_MARK, DATABASE, NATIVE_KEY, time, wire};
use crate::{ChangeSet, RenderError, RenderHead, RowWrite};

/// Hermes' own call ids look like OpenAI's; longer or odd ones are renamed.
const MAX_CALL_ID: usize = 64;

/// The assistant row written between two consecutive user messages.
pub(super) const SEPARATOR: &str = "(noted)";

/// Columns write-back computes itself; a captured value is not kept.
const COMPUTED: &[&str] = &[
    "id",
    "parent_session_id",
    "cwd",
    "git_repo_root",
    "message_count",
    "tool_call_count",
];

/// Holds one `sessions` row being written and its counters.
struct Segment {
    /// The captured session id, when the row came from Hermes.
    old_id: Option<String>,
    row: Map<String, Value>,
    messages: u64,
    tool_calls: u64,
}

struct Writer<'a> {
    head: RenderHead<'a>,
    /// Whether sessions keep their captured ids (same agent, not a fork).
    same_ids: bool,
    segments: Vec<Segment>,
    /// Captured session id -> written id.
    ids: HashMap<String, String>,
    /// Message rows in replay order, with their segment.
    messages: Vec<(usize, Map<String, Value>)>,
    /// The loss report: every event and field not carried, by seq.
    losses: crate::loss::Losses,
    /// An assistant row still taking tool calls (foreign events).
    pending: Option<Map<String, Value>>,
    pending_calls: Vec<Value>,
    /// Reasoning waiting for the next assistant row (foreign events), the
    /// seqs of its events, and their `reasoning-opaque-dropped` lines (said
    /// once the text is written).
    reasoning: Option<String>,
    reasoning_seqs: Vec<u64>,
    reasoning_opaque: Vec<String>,
    /// Foreign call ids -> written call ids, until answered.
    call_ids: HashMap<String, (String, String)>,
    used_call_ids: HashSet<String>,
    model: Option<String>,
    first_user: Option<String>,
    last_ts: Option<f64>,
}

/// Renders `events` as rows for `state.db`.
pub fn render(
    head: RenderHead<'_>,
    events: &mut dyn Iterator<Item = Event>,
) -> Result<ChangeSet, RenderError> {
    if !valid_id(head.native_id) {
        return Err(RenderError::Request(format!(
            "{:?} cannot be a Hermes session id",
            head.native_id
        )));
    }
    let same_ids = head.header.agent == Agent::Hermes
        && head.header.native_id.as_deref() == Some(head.native_id);
    let mut w = Writer {
        head,
        same_ids,
        segments: Vec::new(),
        ids: HashMap::new(),
        messages: Vec::new(),
        losses: crate::loss::Losses::default(),
        pending: None,
        pending_calls: Vec::new(),
        reasoning: None,
        reasoning_seqs: Vec::new(),
        reasoning_opaque: Vec::new(),
        call_ids: HashMap::new(),
        used_call_ids: HashSet::new(),
        model: None,
        first_user: None,
        last_ts: None,
    };
    for event in events {
        w.event(event)?;
    }
    w.finish()
}

/// Says whether `id` is safe as a Hermes session id (it ends up in
/// `hermes chat --resume <id>` and in file names Hermes derives from it).
pub(super) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !id.starts_with('.')
}

impl Writer<'_> {
    fn loss(&mut self, what: impl Into<String>) {
        self.losses.once(what);
    }

    fn event(&mut self, event: Event) -> Result<(), RenderError> {
        let ts = time::from_rfc3339(&event.ts);
        if ts.is_some() {
            self.last_ts = ts;
        }
        let from_hermes = event.agent == Agent::Hermes
            || event
                .origin
                .as_ref()
                .is_some_and(|o| o.agent == Agent::Hermes);
        let native = event
            .payload
            .get(NATIVE_KEY)
            .and_then(Value::as_object)
            .filter(|_| from_hermes);
        if let Some(native) = native {
            let table = native.get("table").and_then(Value::as_str).unwrap_or("");
            let row = native.get("row").and_then(Value::as_object).cloned();
            let Some(row) = row else {
                return Err(RenderError::Event {
                    seq: event.seq,
                    message: "Hermes native record without a row".into(),
                });
            };
            self.flush();
            match table {
                "sessions" => self.session_row(row),
                "messages" => self.message_row(row),
                other => self.loss(format!("event-unmapped: Hermes {other} row not written")),
            }
            return Ok(());
        }
        if from_hermes {
            if event.payload.get("hermes").and_then(Value::as_str) == Some("sessions.update") {
                self.session_update(&event.payload);
            }
            // Derived events and other parts of a row that is written whole.
            return Ok(());
        }
        self.foreign(&event)
    }

    // ------------------------------------------------------------ faithful

    fn session_row(&mut self, mut row: Map<String, Value>) {
        let old_id = row.get("id").and_then(Value::as_str).map(str::to_owned);
        let id = if self.segments.is_empty() {
            self.head.native_id.to_owned()
        } else if self.same_ids
            && let Some(old) = old_id.as_deref().filter(|o| valid_id(o))
        {
            old.to_owned()
        } else {
            format!("{}-{}", self.head.native_id, self.segments.len())
        };
        if let Some(old) = &old_id {
            self.ids.insert(old.clone(), id.clone());
        }
        let old_cwd = row.get("cwd").and_then(Value::as_str).map(str::to_owned);
        let old_root = row
            .get("git_repo_root")
            .and_then(Value::as_str)
            .map(str::to_owned);
        // Only a parent written in this change set is named: another one
        // may be missing from the target database, and the column is a
        // foreign key (a branch keeps `_branched_from` in `model_config`).
        let parent = row
            .get("parent_session_id")
            .and_then(Value::as_str)
            .and_then(|p| self.ids.get(p).cloned());
        row.insert("id".into(), json!(id));
        row.insert("parent_session_id".into(), json!(parent));
        row.insert("cwd".into(), json!(self.head.cwd));
        // The repository root moves with the cwd, keeping the subdirectory.
        let root = match (old_cwd.as_deref(), old_root.as_deref()) {
            (Some(c), Some(r)) => c
                .strip_prefix(r)
                .and_then(|sub| self.head.cwd.strip_suffix(sub))
                .map(str::to_owned),
            _ => None,
        };
        row.insert("git_repo_root".into(), json!(root));
        if !self.same_ids {
            // A new id is a new session; the captured title stays with the
            // original (titles are unique).
            if let Some(Value::String(t)) = row.get("title") {
                let t = format!("{t} ({id})");
                row.insert("title".into(), json!(t));
            }
        }
        self.segments.push(Segment {
            old_id,
            row,
            messages: 0,
            tool_calls: 0,
        });
    }

    fn session_update(&mut self, payload: &Value) {
        let Some(session) = payload.get("session").and_then(Value::as_str) else {
            return;
        };
        let Some(changed) = payload.get("changed").and_then(Value::as_object) else {
            return;
        };
        let same_ids = self.same_ids;
        if let Some(seg) = self
            .segments
            .iter_mut()
            .find(|s| s.old_id.as_deref() == Some(session))
        {
            for (k, v) in changed {
                if COMPUTED.contains(&k.as_str()) || (k == "title" && !same_ids) {
                    continue;
                }
                seg.row.insert(k.clone(), v.clone());
            }
        }
    }

    fn message_row(&mut self, mut row: Map<String, Value>) {
        let seg = match row.get("session_id").and_then(Value::as_str) {
            Some(old) => self
                .segments
                .iter()
                .rposition(|s| s.old_id.as_deref() == Some(old)),
            None => None,
        };
        let seg = match seg {
            Some(s) => s,
            None => self.current(),
        };
        row.remove("id");
        let id = self.segments[seg].row["id"].clone();
        row.insert("session_id".into(), id);
        if let Some(Value::String(content)) = row.get("content")
            && content.contains(ARTIFACT_MARK)
        {
            let restored = self.restore_images(content);
            row.insert("content".into(), json!(restored));
        }
        self.count(seg, &row);
        self.messages.push((seg, row));
    }

    /// Puts image bytes back where parse left artifact references.
    fn restore_images(&mut self, content: &str) -> String {
        let Some(json) = content.strip_prefix(wire::MULTIMODAL_PREFIX) else {
            return content.to_owned();
        };
        let Ok(Value::Array(mut parts)) = serde_json::from_str::<Value>(json) else {
            return content.to_owned();
        };
        for part in &mut parts {
            let Some(url) = part.pointer("/image_url/url").and_then(Value::as_str) else {
                continue;
            };
            let Some((prefix, reference)) = url.split_once(ARTIFACT_MARK) else {
                continue;
            };
            let bytes = ArtifactId::parse(reference).and_then(|id| (self.head.artifact)(&id));
            match bytes {
                Some(b) => {
                    let data = base64::engine::general_purpose::STANDARD.encode(b);
                    part["image_url"]["url"] = json!(format!("{prefix}{data}"));
                }
                None => self
                    .loss("image-omitted: an image artifact is missing; its reference was written"),
            }
        }
        format!("{}{}", wire::MULTIMODAL_PREFIX, Value::Array(parts))
    }

    fn count(&mut self, seg: usize, row: &Map<String, Value>) {
        let live = row.get("active").and_then(Value::as_i64).unwrap_or(1) != 0;
        let s = &mut self.segments[seg];
        if live {
            s.messages += 1;
        }
        if let Some(Value::String(calls)) = row.get("tool_calls")
            && let Ok(calls) = wire::tool_calls(calls)
        {
            s.tool_calls += calls.len() as u64;
        }
    }

    /// Returns the segment new rows go to, making one from the header when
    /// the events brought no Hermes session row.
    fn current(&mut self) -> usize {
        if self.segments.is_empty() {
            let started = time::from_rfc3339(&self.head.header.created)
                .or_else(|| time::from_rfc3339(self.head.now))
                .unwrap_or(0.0);
            let mut row = Map::new();
            row.insert("id".into(), json!(self.head.native_id));
            row.insert("source".into(), json!("cli"));
            row.insert("started_at".into(), json!(started));
            row.insert("cwd".into(), json!(self.head.cwd));
            if let Some(t) = &self.head.header.title {
                row.insert("title".into(), json!(t));
            }
            self.segments.push(Segment {
                old_id: None,
                row,
                messages: 0,
                tool_calls: 0,
            });
        }
        self.segments.len() - 1
    }

    // ------------------------------------------------------------ foreign

    fn ts(&self) -> f64 {
        self.last_ts
            .or_else(|| time::from_rfc3339(self.head.now))
            .unwrap_or(0.0)
    }

    fn push_message(&mut self, row: Map<String, Value>) {
        let seg = self.current();
        let mut row = row;
        row.insert("session_id".into(), self.segments[seg].row["id"].clone());
        row.entry("timestamp").or_insert(json!(self.ts()));
        self.count(seg, &row);
        self.messages.push((seg, row));
    }

    /// Writes the assistant row that was taking tool calls.
    fn flush(&mut self) {
        let Some(mut row) = self.pending.take() else {
            return;
        };
        let calls = std::mem::take(&mut self.pending_calls);
        let finish = if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        if !calls.is_empty() {
            row.insert("tool_calls".into(), json!(Value::Array(calls).to_string()));
        }
        row.entry("finish_reason").or_insert(json!(finish));
        self.push_message(row);
    }

    fn assistant_row(&mut self, text: &str) -> Map<String, Value> {
        let mut row = Map::new();
        row.insert("role".into(), json!("assistant"));
        row.insert("content".into(), json!(text));
        row.insert("timestamp".into(), json!(self.ts()));
        if let Some(r) = self.reasoning.take() {
            row.insert("reasoning".into(), json!(r));
        }
        self.reasoning_seqs.clear();
        for line in std::mem::take(&mut self.reasoning_opaque) {
            self.loss(line);
        }
        row
    }

    /// Reports the reasoning no assistant row took: Hermes keeps reasoning
    /// on the assistant message it led to, and none followed it (a user
    /// message came next, or the session ended).
    fn drop_reasoning(&mut self) {
        self.reasoning = None;
        self.reasoning_opaque.clear();
        for seq in std::mem::take(&mut self.reasoning_seqs) {
            self.losses.add(
                "thinking-dropped",
                seq,
                "message.thinking with no assistant message after it not written (Hermes keeps reasoning on the assistant row it led to)",
            );
        }
    }

    fn foreign(&mut self, event: &Event) -> Result<(), RenderError> {
        let p = &event.payload;
        match event.kind.as_str() {
            kinds::MESSAGE_USER => {
                self.flush();
                self.drop_reasoning();
                let text = payload_text(p);
                // Every image artifact (`refs`, else the one `image` or
                // content block naming one) is an `image_url` part of
                // Hermes' multimodal content.
                let mut images: Vec<Value> = event
                    .refs
                    .iter()
                    .filter_map(|r| ArtifactId::from_ref(r))
                    .enumerate()
                    .map(|(i, id)| {
                        json!({"artifact": id.to_string(), "media_type": crate::images::media_type(p, i)})
                    })
                    .collect();
                if images.is_empty()
                    && let Some(img) = p.get("image").or_else(|| {
                        p.get("content")
                            .and_then(Value::as_array)
                            .and_then(|c| c.iter().find(|b| b.get("artifact").is_some()))
                    })
                {
                    images.push(img.clone());
                }
                let mut parts = Vec::new();
                for img in &images {
                    match self.image_part(img) {
                        Some(part) => parts.push(part),
                        None => self.losses.add(
                            "image-omitted",
                            event.seq,
                            "message.user image not written (artifact missing)",
                        ),
                    }
                }
                let content = if parts.is_empty() {
                    text.clone()
                } else {
                    if !text.is_empty() {
                        parts.insert(0, json!({"type": "text", "text": text}));
                    }
                    format!("{}{}", wire::MULTIMODAL_PREFIX, Value::Array(parts))
                };
                if content.is_empty() {
                    self.losses.add(
                        "message-empty",
                        event.seq,
                        "message.user without text not written",
                    );
                    return Ok(());
                }
                if self.first_user.is_none() && !text.is_empty() {
                    self.first_user = Some(text);
                }
                // Hermes sends consecutive user rows as one turn; an
                // assistant row between them keeps each its own turn (the
                // brief and the first user message of a handoff).
                let seg = self.current();
                let follows_user = self
                    .messages
                    .last()
                    .is_some_and(|(s, r)| *s == seg && r.get("role") == Some(&json!("user")));
                if follows_user {
                    let mut ack = self.assistant_row(SEPARATOR);
                    ack.insert("finish_reason".into(), json!("stop"));
                    self.push_message(ack);
                }
                let mut row = Map::new();
                row.insert("role".into(), json!("user"));
                row.insert("content".into(), json!(content));
                row.insert("timestamp".into(), json!(self.ts()));
                self.push_message(row);
            }
            kinds::MESSAGE_THINKING => {
                let text = payload_text(p);
                let opaque = crate::tools::opaque_reasoning_loss(event, &super::SPEC);
                if text.is_empty() {
                    if let Some(line) = opaque {
                        self.loss(line);
                    }
                } else {
                    self.reasoning_opaque.extend(opaque);
                    // Shown to the user; not sent back to the model.
                    self.reasoning = Some(match self.reasoning.take() {
                        Some(r) => format!("{r}\n{text}"),
                        None => text,
                    });
                    self.reasoning_seqs.push(event.seq);
                }
            }
            kinds::MESSAGE_ASSISTANT => {
                self.flush();
                if let Some(m) = p.get("model").and_then(Value::as_str) {
                    self.model = Some(m.to_owned());
                }
                let text = payload_text(p);
                if text.is_empty() {
                    self.losses.add(
                        "message-empty",
                        event.seq,
                        "message.assistant without text not written",
                    );
                    return Ok(());
                }
                self.pending = Some(self.assistant_row(&text));
            }
            kinds::TOOL_CALL => {
                if self.pending.is_none() {
                    self.pending = Some(self.assistant_row(""));
                }
                let mut name = str_field(p, &["name", "tool"]).unwrap_or("tool").to_owned();
                let original = str_field(p, &["call_id", "id", "tool_use_id"])
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("seq{}", event.seq));
                let id = self.call_id(&original, event.seq);
                let mut input = p.get("arguments").cloned().unwrap_or(json!({}));
                let t = crate::tools::translate(&super::SPEC, &event.agent, &name, &input);
                for line in t.losses(event.seq, event.agent.as_str(), &super::SPEC) {
                    self.loss(line);
                }
                (name, input) = (t.name, t.arguments);
                let arguments = match &input {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                self.call_ids.insert(original, (id.clone(), name.clone()));
                self.pending_calls.push(json!({
                    "id": id, "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }));
            }
            kinds::TOOL_RESULT => {
                self.flush();
                let original = str_field(p, &["call_id", "tool_use_id", "id"]).map(str::to_owned);
                let Some((id, name)) = original.and_then(|o| self.call_ids.remove(&o)) else {
                    self.losses.add(
                        "tool-result-orphaned",
                        event.seq,
                        "tool.result without a written tool.call not written",
                    );
                    return Ok(());
                };
                let mut output = ["output", "content", "text", "result"]
                    .iter()
                    .find_map(|k| p.get(*k))
                    .map(output_text)
                    .unwrap_or_default();
                // A tool row holds text only: a result's image is named there.
                for id in event.refs.iter().filter_map(|r| ArtifactId::from_ref(r)) {
                    let mark = crate::images::placeholder(
                        &mut self.losses,
                        event.seq,
                        &id,
                        "Hermes",
                        "tool.result",
                    );
                    output.push('\n');
                    output.push_str(&mark);
                }
                // Hermes tools answer with JSON whose `error` and
                // `exit_code` say a call failed; a failed foreign result
                // is written that way so the model and a parse see it.
                let output = match crate::tools::failure(p) {
                    Some(failure) => json!({
                        "output": output,
                        "exit_code": failure.exit_code,
                        "error": match failure.exit_code {
                            Some(code) => format!("exit code {code}"),
                            None => "the tool call failed".to_owned(),
                        },
                    })
                    .to_string(),
                    None => output,
                };
                let mut row = Map::new();
                row.insert("role".into(), json!("tool"));
                row.insert("content".into(), json!(output));
                row.insert("tool_call_id".into(), json!(id));
                row.insert("tool_name".into(), json!(name));
                row.insert("timestamp".into(), json!(self.ts()));
                self.push_message(row);
            }
            kinds::COMMAND_RUN
            | kinds::FILE_EDIT
            | kinds::FILE_READ
            | kinds::TODO_ADD
            | kinds::TODO_UPDATE => self.losses.add(
                "derived-event-folded",
                event.seq,
                format!(
                    "{} not written on its own: its tool.call and tool.result carry it",
                    event.kind
                ),
            ),
            kinds::SESSION_START => {}
            _ => {
                if let Some((note, loss)) = crate::tools::web_search_note(event, &super::SPEC) {
                    self.flush();
                    self.pending = Some(self.assistant_row(&note));
                    self.losses.line(loss);
                    return Ok(());
                }
                self.losses.add(
                    "event-unmapped",
                    event.seq,
                    format!(
                        "{} has no Hermes form; not written",
                        crate::loss::what(event)
                    ),
                );
            }
        }
        Ok(())
    }

    fn image_part(&self, image: &Value) -> Option<Value> {
        let id = image
            .get("artifact")
            .and_then(Value::as_str)
            .and_then(ArtifactId::parse)?;
        let bytes = (self.head.artifact)(&id)?;
        let media = image
            .get("media_type")
            .and_then(Value::as_str)
            .unwrap_or("image/png");
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        Some(
            json!({"type": "image_url", "image_url": {"url": format!("data:{media};base64,{data}")}}),
        )
    }

    /// Returns a unique call id of at most 64 safe characters for `original`.
    fn call_id(&mut self, original: &str, seq: u64) -> String {
        let safe = original.len() <= MAX_CALL_ID
            && !original.is_empty()
            && original
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let mut id = if safe {
            original.to_owned()
        } else {
            format!("call_gs_{seq}")
        };
        if !self.used_call_ids.insert(id.clone()) {
            id = format!("call_gs_{seq}");
            self.used_call_ids.insert(id.clone());
        }
        if id != original {
            self.loss("tool-id-renamed: call ids Hermes cannot use were renamed");
        }
        id
    }

    // ------------------------------------------------------------ finish

    fn finish(mut self) -> Result<ChangeSet, RenderError> {
        self.flush();
        self.drop_reasoning();
        if self.messages.is_empty() {
            return Err(RenderError::Empty(
                "no user, assistant or tool message to write".into(),
            ));
        }
        let title = self.first_user.as_deref().map(title_of);
        let model = self.model.clone();
        let mut rows = Vec::new();
        let count = self.segments.len();
        for (i, seg) in self.segments.iter_mut().enumerate() {
            let row = &mut seg.row;
            row.insert("message_count".into(), json!(seg.messages));
            row.insert("tool_call_count".into(), json!(seg.tool_calls));
            if row.get("model").is_none_or(Value::is_null)
                && let Some(m) = &model
            {
                row.insert("model".into(), json!(m));
            }
            if row.get("title").is_none_or(Value::is_null)
                && i == 0
                && let Some(t) = &title
            {
                row.insert("title".into(), json!(t));
            }
            // Every segment but the last was split off by compression: the
            // client follows the chain to the tip only from such rows.
            if i + 1 < count {
                row.insert("end_reason".into(), json!("compression"));
                if row.get("ended_at").is_none_or(Value::is_null) {
                    let next = self.messages.iter().find(|(s, _)| *s == i + 1);
                    let at = next
                        .and_then(|(_, m)| m.get("timestamp"))
                        .cloned()
                        .unwrap_or(json!(0.0));
                    row.insert("ended_at".into(), at);
                }
            }
            rows.push(RowWrite {
                database: PathBuf::from(DATABASE),
                table: "sessions".into(),
                key: vec!["id".into()],
                columns: std::mem::take(row),
                session_row: true,
                // Titles are unique: a second handoff of one session (the
                // same first prompt) is written as `<title> #2`, as Hermes
                // names its own duplicates.
                numbered: vec!["title".into()],
                ..Default::default()
            });
        }
        for (_, row) in self.messages {
            rows.push(RowWrite {
                database: PathBuf::from(DATABASE),
                table: "messages".into(),
                // The database assigns the id; rows go in replay order.
                key: Vec::new(),
                columns: row,
                ..Default::default()
            });
        }
        Ok(ChangeSet {
            resume_command: super::SPEC.resume_command(self.head.native_id),
            losses: self.losses.into_lines(),
            rows,
            ..Default::default()
        })
    }
}

/// Returns a title from a first prompt: one line, at most 60 characters.
fn title_of(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut t: String = line.trim().chars().take(60).collect();
    if line.trim().chars().count() > 60 {
        t.push('…');
    }
    t
}

fn str_field<'v>(p: &'v Value, keys: &[&str]) -> Option<&'v str> {
    keys.iter().find_map(|k| p.get(*k).and_then(Value::as_str))
}

/// Returns the text of a canonical message payload (`text`, or `content` as
/// a string or a list of text blocks).
fn payload_text(p: &Value) -> String {
    if let Some(t) = p.get("text").and_then(Value::as_str) {
        return t.to_owned();
    }
    p.get("content").map(output_text).unwrap_or_default()
}

/// Returns the text of a tool output or content value.
fn output_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
