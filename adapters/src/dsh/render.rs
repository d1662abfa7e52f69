//! Canonical events to a dsh log: `session.v4.jsonl.zstd` under the
//! project key of the cwd, header frame first, then event frames.
//!
//! Events that carry a dsh record ([`super::NATIVE_KEY`]) are written back
//! as dsh wrote them (seqs, turns and message ids unchanged), with the
//! header's `id` and `cwd` set to the requested ones. Events from other
//! agents are turned into the records dsh itself writes, with what dsh
//! checks on every load kept true (formats/dsh.md, "Turn / step rules"):
//!
//! * the surface starts with a `system/message` (gotcha 1: without one the
//!   *second* resume refuses the log for good);
//! * turns and steps are balanced and numbered 1, 2, … (a user message
//!   opens a turn; a model reply after tool results opens a step);
//! * every `tool-call` block is repeated by one `tool/call` record before
//!   its `tool/result`, and no step ends with a call pending: a call
//!   without a result gets the synthetic `TOOL_OUTCOME_UNKNOWN` result dsh's
//!   own crash repair writes;
//! * seqs are dense from 0, only documented header and envelope keys are
//!   written, and no `request/header` (gotcha 2: without dsh's real tool
//!   list it makes dsh re-announce every tool);
//! * git-session's own facts go in one `plugin:git-session/import` record
//!   with `ignorable: true`, which dsh keeps and never sends to the model.
//!
//! The render streams: records are written as they come, in frames of up
//! to [`FRAME_PLAINTEXT`] (the sink compresses each into one checksummed
//! zstd frame); only the assistant reply being assembled (its
//! thinking, text and tool calls become one `assistant/message`) is held.

use std::collections::HashSet;
use std::path::PathBuf;

use git_session_schema::{Agent, ArtifactId, Event, kinds};
use serde_json::{Map, Value, json};

use super::NATIVE_KEY;
use super::parse::unix_ms;
use super::wire;
use crate::{ChangeSet, FileSink, RenderError, RenderHead};

/// Largest plaintext render puts in one frame. dsh's own batches are 88 B
/// to 8 KB; any size works, and a line never spans two frames.
pub const FRAME_PLAINTEXT: usize = 64 * 1024;

/// The system prompt of a session git-session writes for dsh. dsh sends it
/// as the request's `system` and adds its own prompt in the history.
const SYSTEM_PROMPT: &str = "You are a coding agent. This session was written by git-session from an earlier session; its history follows.";

/// Provider and model stamped on assistant messages from other agents:
/// dsh requires both, and these are the ones it was observed to replay.
const PROVIDER: &str = "deepseek-official";
const MODEL: &str = "deepseek-flash";

/// Returns the store-root-relative path of a session's log.
pub fn log_path(native_id: &str, cwd: &str) -> PathBuf {
    PathBuf::from("sessions")
        .join(wire::project_dir(Some(cwd)))
        .join(wire::encode_segment(native_id))
        .join(wire::LOG_FILE)
}

/// Returns the commands that resume a session with dsh.
///
/// `{root}` stands for the store root, which dsh needs as `DSH_HOME`; the
/// root crate fills it in.
pub fn resume_command(native_id: &str) -> String {
    super::SPEC.resume_command(native_id)
}

/// Checks that `id` can be a dsh session id: non-empty, at most 200
/// characters, no control characters. Any other text is safe as a path:
/// it becomes one directory name through [`wire::encode_segment`], which
/// escapes separators and never yields `.` or `..`.
pub fn validate_native_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 200 || id.chars().any(char::is_control) {
        return Err(format!(
            "{:?} cannot be a dsh session id (non-empty, at most 200 characters, no control characters)",
            id.escape_debug().to_string()
        ));
    }
    Ok(())
}

/// Says what dsh does with a session it resumes (gotcha 4).
pub const PRIVACY_NOTE: &str = "dsh uploads the session log to its model provider (DeepSeek) when it resumes a session: the whole history written here, including anything imported from other agents, is sent on the first resume";

pub(super) fn render(
    head: RenderHead<'_>,
    events: &mut dyn Iterator<Item = Event>,
    out: &mut dyn FileSink,
) -> Result<ChangeSet, RenderError> {
    let id = head.native_id;
    validate_native_id(id).map_err(RenderError::Request)?;
    if !head.cwd.starts_with('/') {
        return Err(RenderError::Request(format!(
            "dsh needs an absolute working directory, not {:?}",
            head.cwd
        )));
    }
    let mut w = Writer {
        head,
        out,
        begun: false,
        header_done: false,
        buf: Vec::new(),
        next_seq: 0,
        time: 0,
        turn: 0,
        turn_open: false,
        step: 0,
        step_open: false,
        step_replied: false,
        surface: false,
        draft: None,
        open_calls: Vec::new(),
        call_seqs: Vec::new(),
        turn_call_ids: HashSet::new(),
        renamed_from: None,
        foreign: 0,
        losses: crate::loss::Losses::default(),
    };
    // A canonical fork starts with its parent's events; a seeded dsh fork
    // has its own header right after them, and dsh wants that one first.
    let prefix = w
        .head
        .header
        .lineage
        .as_ref()
        .map_or(0, |l| l.inherited_events);
    let mut held = (prefix > 0).then(Vec::new);
    for event in events {
        let Some(parents) = held.as_mut() else {
            w.event(event)?;
            continue;
        };
        if (parents.len() as u64) < prefix {
            parents.push(event);
            continue;
        }
        let parents = held.take().unwrap_or_default();
        let own_header = is_header(&event);
        if own_header {
            // The fork's own header, then the inherited records (the
            // parent's header among them is not written).
            w.event(event.clone())?;
        }
        for e in parents {
            w.event(e)?;
        }
        if !own_header {
            w.event(event)?;
        }
    }
    for e in held.unwrap_or_default() {
        w.event(e)?;
    }
    w.finish()
}

/// Returns whether `event` holds a dsh header record.
fn is_header(event: &Event) -> bool {
    event.payload.get(NATIVE_KEY).is_some_and(|r| {
        r.get("type").and_then(Value::as_str) == Some("session") && r.get("seq").is_none()
    })
}

/// Holds an assistant reply being assembled from canonical events.
struct Draft {
    blocks: Vec<Value>,
    /// `(call id, name, arguments)` of each tool-call block, in order.
    calls: Vec<(String, String, String)>,
    time: u64,
    seq: u64,
}

struct Writer<'a, 'o> {
    head: RenderHead<'a>,
    out: &'o mut dyn FileSink,
    begun: bool,
    header_done: bool,
    /// Plaintext lines of the frame being filled.
    buf: Vec<u8>,
    next_seq: u64,
    /// The last record's time, Unix ms.
    time: u64,
    turn: u64,
    turn_open: bool,
    step: u64,
    step_open: bool,
    /// The open step already holds a model reply.
    step_replied: bool,
    /// The surface has its `system/message`.
    surface: bool,
    draft: Option<Draft>,
    /// Calls with a `tool/call` record and no result yet.
    open_calls: Vec<String>,
    /// The `tool/call` record seq of each call of the open turn.
    call_seqs: Vec<(String, u64)>,
    /// Call ids used in the open turn (dsh wants them unique per turn).
    turn_call_ids: HashSet<String>,
    /// The captured id, when the log is written under another one (a fork).
    renamed_from: Option<String>,
    /// Events from other agents written.
    foreign: u64,
    /// Events from other agents with no dsh record.
    /// The loss report: every event and field not carried, by seq.
    losses: crate::loss::Losses,
}

impl Writer<'_, '_> {
    fn event(&mut self, mut event: Event) -> Result<(), RenderError> {
        // Other adapters keep their own records under the same key
        // (`native`): only a dsh event's is a dsh record.
        let from_dsh = event.agent == Agent::Dsh
            || event.origin.as_ref().is_some_and(|o| o.agent == Agent::Dsh);
        if from_dsh
            && let Some(Value::Object(record)) = event.payload.get_mut(NATIVE_KEY).map(Value::take)
        {
            return self.native(&event, record);
        }
        if event.origin.as_ref().is_some_and(|o| o.agent == Agent::Dsh) {
            if event.payload.get("unparsed").is_some() {
                self.losses.line(format!(
                    "unparsed-line-omitted: seq {}: a line of the captured log that was not a record is not written (dsh would refuse the log)",
                    event.seq
                ));
            }
            // Otherwise a secondary part or a derived event of a dsh
            // record, written with its primary event.
            return Ok(());
        }
        self.foreign(&event)
    }

    // ------------------------------------------------------------ native

    fn native(&mut self, event: &Event, mut record: Map<String, Value>) -> Result<(), RenderError> {
        if record.get("type").and_then(Value::as_str) == Some("session")
            && !record.contains_key("seq")
        {
            if self.header_done {
                // A later header (a parent's, in a canonical fork) is not a record.
                return Ok(());
            }
            self.renamed_from = record
                .get("id")
                .and_then(Value::as_str)
                .filter(|id| *id != self.head.native_id)
                .map(str::to_owned);
            return self.header(Some(record));
        }
        self.ensure_header()?;
        let kind = record
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let Some(seq) = record.get("seq").and_then(Value::as_u64) else {
            return Err(RenderError::Event {
                seq: event.seq,
                message: "dsh record without seq".into(),
            });
        };
        if seq != self.next_seq {
            return Err(RenderError::Event {
                seq: event.seq,
                message: format!(
                    "dsh record has seq {seq} where {} comes next; dsh refuses a log with a seq gap",
                    self.next_seq
                ),
            });
        }
        if !wire::is_known_type(&kind) && record.get("ignorable") != Some(&Value::Bool(true)) {
            // dsh would refuse the whole log; kept, but marked skippable.
            record.insert("ignorable".into(), Value::Bool(true));
            record = ordered(record);
            self.losses.line(format!(
                "event-unmapped: seq {seq}: dsh record type {kind:?} is unknown to dsh 0.2.1, written with ignorable: true"
            ));
        }
        if let Some(old) = &self.renamed_from {
            rename_session(&kind, &mut record, old, self.head.native_id);
        }
        self.track(&kind, &record);
        if let Some(t) = record.get("time").and_then(Value::as_u64) {
            self.time = t;
        }
        self.next_seq = seq + 1;
        self.line(&Value::Object(record))
    }

    /// Follows turns, steps and the surface through native records, so
    /// foreign events after them continue the numbering.
    fn track(&mut self, kind: &str, record: &Map<String, Value>) {
        let data = record.get("data").unwrap_or(&Value::Null);
        let num = |k: &str| data.get(k).and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "turn/start" => {
                self.turn = num("turn");
                self.turn_open = true;
                self.step = 0;
                self.turn_call_ids.clear();
                self.call_seqs.clear();
            }
            "turn/end" => {
                self.turn_open = false;
                self.step_open = false;
            }
            "step/start" => {
                self.step = num("step");
                self.step_open = true;
                self.step_replied = false;
            }
            "step/end" => self.step_open = false,
            "system/message" => self.surface = true,
            "assistant/message" => self.step_replied = true,
            "tool/call" => {
                if let Some(id) = data.get("callId").and_then(Value::as_str) {
                    if let Some(seq) = record.get("seq").and_then(Value::as_u64) {
                        self.call_seqs.push((id.to_owned(), seq));
                    }
                    self.open_calls.push(id.to_owned());
                    self.turn_call_ids.insert(id.to_owned());
                }
            }
            "tool/result" => {
                if let Some(id) = data.pointer("/message/toolCallId").and_then(Value::as_str) {
                    self.open_calls.retain(|c| c != id);
                }
            }
            _ => {}
        }
    }

    // ------------------------------------------------------------ header

    fn ensure_header(&mut self) -> Result<(), RenderError> {
        if self.header_done {
            return Ok(());
        }
        self.header(None)
    }

    /// Writes the header frame: the captured header with `id` and `cwd`
    /// moved to the requested ones, or a fresh one.
    fn header(&mut self, record: Option<Map<String, Value>>) -> Result<(), RenderError> {
        let created = record
            .as_ref()
            .and_then(|r| r.get("createdAt"))
            .and_then(Value::as_u64)
            .or_else(|| unix_ms(&self.head.header.created))
            .unwrap_or(0);
        let mut h = Map::new();
        h.insert("type".into(), json!("session"));
        h.insert("version".into(), json!(wire::FORMAT_VERSION));
        h.insert("id".into(), json!(self.head.native_id));
        h.insert("createdAt".into(), json!(created));
        h.insert("cwd".into(), json!(self.head.cwd));
        let get = |k: &str| record.as_ref().and_then(|r| r.get(k)).cloned();
        if let Some(p) = get("parentSession").filter(Value::is_string) {
            h.insert("parentSession".into(), p);
        }
        h.insert(
            "isSeeded".into(),
            get("isSeeded")
                .filter(Value::is_boolean)
                .unwrap_or(json!(false)),
        );
        if let Some(o) = get("origin").filter(|v| v == "subagent") {
            h.insert("origin".into(), o);
        }
        h.insert(
            "delegationDepth".into(),
            get("delegationDepth")
                .filter(Value::is_u64)
                .unwrap_or(json!(0)),
        );
        if let Some(p) = get(wire::HEADER_KEY_PRESET).filter(Value::is_string) {
            h.insert(wire::HEADER_KEY_PRESET.into(), p);
        }
        if let Some(r) = &record
            && let Some(k) = r.keys().find(|k| {
                !wire::HEADER_KEYS.contains(&k.as_str()) && k.as_str() != wire::HEADER_KEY_PRESET
            })
        {
            self.losses.line(format!(
                "event-unmapped: header key {k:?} left out: dsh does not list a session whose header has unknown keys"
            ));
        }
        self.time = created;
        let mut line = serde_json::to_vec(&Value::Object(h)).expect("JSON values serialize");
        line.push(b'\n');
        self.begin()?;
        // Frame 0 is the header line alone: dsh lists sessions from it.
        self.write(&line)?;
        self.out.end_frame().map_err(RenderError::Sink)?;
        self.header_done = true;
        Ok(())
    }

    // ------------------------------------------------------------ foreign

    fn foreign(&mut self, event: &Event) -> Result<(), RenderError> {
        let p = &event.payload;
        let text = p.get("text").and_then(Value::as_str).unwrap_or("");
        let time = unix_ms(&event.ts).unwrap_or(self.time);
        match event.kind.as_str() {
            kinds::MESSAGE_USER => {
                self.ensure_header()?;
                self.flush_draft()?;
                self.close_turn(time, "completed")?;
                self.open_turn(time)?;
                // dsh keeps image bytes in its attachment store, which a
                // render does not write: each image is named in the text.
                let mut text = text.to_owned();
                for id in event.refs.iter().filter_map(|r| ArtifactId::from_ref(r)) {
                    let mark = crate::images::placeholder(
                        &mut self.losses,
                        event.seq,
                        &id,
                        "dsh",
                        "message.user",
                    );
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&mark);
                }
                let message = json!({
                    "content": [{"type": "text", "text": text}],
                    "source": {"kind": "user"},
                    "role": "user",
                    "id": self.message_id(event.seq, "user"),
                });
                self.record("user/message", time, message, None, true)?;
                self.foreign += 1;
            }
            kinds::MESSAGE_ASSISTANT | kinds::MESSAGE_THINKING => {
                if text.is_empty() {
                    if event.kind == kinds::MESSAGE_THINKING
                        && crate::tools::opaque_reasoning_loss(event, &super::SPEC).is_some()
                    {
                        self.losses.add(
                            "thinking-dropped",
                            event.seq,
                            "reasoning with only a provider-bound part (no text) not written",
                        );
                    }
                    return Ok(());
                }
                self.reply(time, event.seq)?;
                if event.kind == kinds::MESSAGE_THINKING {
                    self.losses
                        .extend(crate::tools::opaque_reasoning_loss(event, &super::SPEC));
                }
                let block = if event.kind == kinds::MESSAGE_THINKING {
                    json!({"type": "reasoning", "text": text})
                } else {
                    json!({"type": "text", "text": text})
                };
                self.draft
                    .as_mut()
                    .expect("reply() opened a draft")
                    .blocks
                    .push(block);
                self.foreign += 1;
            }
            kinds::TOOL_CALL => {
                self.reply(time, event.seq)?;
                let original = p.get("call_id").and_then(Value::as_str).unwrap_or("");
                let (name, arguments) = self.tool(p, &event.agent, event.seq);
                let id = self.call_id(original, event.seq);
                let draft = self.draft.as_mut().expect("reply() opened a draft");
                draft.blocks.push(
                    json!({"type": "tool-call", "id": id, "name": name, "arguments": arguments}),
                );
                draft.calls.push((id, name, arguments));
                self.foreign += 1;
            }
            kinds::TOOL_RESULT => {
                self.flush_draft()?;
                let original = p.get("call_id").and_then(Value::as_str).unwrap_or("");
                let Some(id) = self
                    .open_calls
                    .iter()
                    .find(|c| {
                        c.as_str() == original
                            || c.strip_prefix(original)
                                .is_some_and(|r| r.starts_with("-gs"))
                    })
                    .cloned()
                else {
                    self.losses.line(format!(
                        "tool-result-orphaned: seq {}: result for call {original:?} has no call in the session; left out (dsh refuses a result without its call)",
                        event.seq
                    ));
                    return Ok(());
                };
                let mut output = p
                    .get("output")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                for id in event.refs.iter().filter_map(|r| ArtifactId::from_ref(r)) {
                    let mark = crate::images::placeholder(
                        &mut self.losses,
                        event.seq,
                        &id,
                        "dsh",
                        "tool.result",
                    );
                    output.push('\n');
                    output.push_str(&mark);
                }
                let is_error = crate::tools::failure(p).is_some();
                self.tool_result(time, &id, &output, is_error, None, event.seq)?;
                self.foreign += 1;
            }
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
                if let Some((note, loss)) = crate::tools::web_search_note(event, &super::SPEC) {
                    self.reply(time, event.seq)?;
                    self.draft
                        .as_mut()
                        .expect("reply() opened a draft")
                        .blocks
                        .push(json!({"type": "text", "text": note}));
                    self.losses.line(loss);
                    self.foreign += 1;
                    return Ok(());
                }
                self.losses.add(
                    "event-unmapped",
                    event.seq,
                    format!(
                        "{} has no dsh record; not written",
                        crate::loss::what(event)
                    ),
                );
            }
        }
        Ok(())
    }

    /// Returns a dsh tool name and its raw JSON arguments for a call.
    fn tool(&mut self, p: &Value, agent: &Agent, seq: u64) -> (String, String) {
        let name = p.get("name").and_then(Value::as_str).unwrap_or("tool");
        let args = p.get("arguments").cloned().unwrap_or(Value::Null);
        let t = crate::tools::translate(&super::SPEC, agent, name, &args);
        self.losses
            .extend(t.losses(seq, agent.as_str(), &super::SPEC));
        let (name, mut args) = (t.name, t.arguments);
        // dsh's bash wants a description; a call without one gets its origin.
        if name == "bash"
            && let Value::Object(m) = &mut args
        {
            m.entry("description").or_insert_with(|| {
                json!(format!(
                    "{} call",
                    p.get("name").and_then(Value::as_str).unwrap_or("tool")
                ))
            });
        }
        let raw = match args {
            Value::String(s) => s,
            other => other.to_string(),
        };
        (name, raw)
    }

    /// Returns a call id unique in the turn.
    fn call_id(&mut self, original: &str, seq: u64) -> String {
        let base = if original.is_empty() {
            format!("call-{seq}")
        } else {
            original.to_owned()
        };
        let mut id = base.clone();
        if self.turn_call_ids.contains(&id) {
            id = format!("{base}-gs{seq}");
            self.losses.line(format!(
                "tool-id-renamed: call id {base:?} repeats in its turn; written as {id:?}"
            ));
        }
        self.turn_call_ids.insert(id.clone());
        id
    }

    /// Makes sure a draft reply is open, in a step of its own.
    fn reply(&mut self, time: u64, seq: u64) -> Result<(), RenderError> {
        self.ensure_header()?;
        if self.draft.is_some() {
            return Ok(());
        }
        if !self.turn_open {
            self.open_turn(time)?;
        } else if self.step_replied || !self.step_open {
            self.close_step(time)?;
            self.open_step(time)?;
        }
        self.draft = Some(Draft {
            blocks: Vec::new(),
            calls: Vec::new(),
            time,
            seq,
        });
        Ok(())
    }

    /// Writes the assembled reply and the `tool/call` of each of its calls.
    fn flush_draft(&mut self) -> Result<(), RenderError> {
        let Some(draft) = self.draft.take() else {
            return Ok(());
        };
        let message = json!({
            "turn": self.turn,
            "step": self.step,
            "message": {
                "role": "assistant",
                "content": draft.blocks,
                "source": {"kind": "model", "provider": PROVIDER, "model": MODEL},
                "id": self.message_id(draft.seq, "assistant"),
            },
            "stream": [],
        });
        self.record("assistant/message", draft.time, message, None, true)?;
        self.step_replied = true;
        for (id, name, arguments) in draft.calls {
            let data = json!({"turn": self.turn, "step": self.step, "callId": id, "name": name, "arguments": arguments});
            self.call_seqs.push((id.clone(), self.next_seq));
            self.record("tool/call", draft.time, data, None, false)?;
            self.open_calls.push(id);
        }
        Ok(())
    }

    fn tool_result(
        &mut self,
        time: u64,
        id: &str,
        output: &str,
        is_error: bool,
        code: Option<&str>,
        seq: u64,
    ) -> Result<(), RenderError> {
        let call_seq = self.call_record_seq(id);
        let mut data = json!({
            "turn": self.turn,
            "step": self.step,
            "message": {
                "role": "tool",
                "source": {"kind": "tool", "callId": id},
                "toolCallId": id,
                "content": [{"type": "text", "text": output}],
                "isError": is_error,
                "id": self.message_id(seq, &format!("result-{id}")),
            },
        });
        if let Some(code) = code {
            data["error"] = json!({"name": "ToolOutcomeUnknownError", "code": code});
        }
        let sources = call_seq.map(|s| wire::encode_seq_ranges(&[s]));
        self.record("tool/result", time, data, sources, true)?;
        self.open_calls.retain(|c| c != id);
        Ok(())
    }

    /// Returns the seq of a call's `tool/call` record, which its result
    /// cites in `sourceEventSeqs` (as dsh writes it).
    fn call_record_seq(&self, id: &str) -> Option<u64> {
        self.call_seqs
            .iter()
            .find(|(c, _)| c == id)
            .map(|(_, s)| *s)
    }

    /// Answers every open call the way dsh's own crash repair does.
    fn settle_calls(&mut self, time: u64) -> Result<(), RenderError> {
        for id in self.open_calls.clone() {
            self.losses.line(format!(
                "tool-result-orphaned: call {id:?} has no result; written with dsh's TOOL_OUTCOME_UNKNOWN error result"
            ));
            let seq = self.next_seq;
            self.tool_result(
                time,
                &id,
                "The tool outcome is unknown: no result was recorded.",
                true,
                Some("TOOL_OUTCOME_UNKNOWN"),
                seq,
            )?;
        }
        Ok(())
    }

    fn open_turn(&mut self, time: u64) -> Result<(), RenderError> {
        self.turn += 1;
        self.turn_open = true;
        self.step = 0;
        self.turn_call_ids.clear();
        self.call_seqs.clear();
        self.record("turn/start", time, json!({"turn": self.turn}), None, false)?;
        self.open_step(time)?;
        if !self.surface {
            let message = json!({
                "turn": self.turn,
                "step": self.step,
                "message": {
                    "role": "system",
                    "content": [{"type": "text", "text": SYSTEM_PROMPT}],
                    "source": {"kind": "system-prompt"},
                    "id": "gs-system-prompt",
                },
            });
            self.record("system/message", time, message, None, true)?;
            self.surface = true;
        }
        Ok(())
    }

    fn open_step(&mut self, time: u64) -> Result<(), RenderError> {
        self.step += 1;
        self.step_open = true;
        self.step_replied = false;
        self.record(
            "step/start",
            time,
            json!({"turn": self.turn, "step": self.step}),
            None,
            false,
        )
    }

    fn close_step(&mut self, time: u64) -> Result<(), RenderError> {
        if !self.step_open {
            return Ok(());
        }
        self.settle_calls(time)?;
        self.step_open = false;
        self.record(
            "step/end",
            time,
            json!({"turn": self.turn, "step": self.step}),
            None,
            false,
        )
    }

    fn close_turn(&mut self, time: u64, reason: &str) -> Result<(), RenderError> {
        if !self.turn_open {
            return Ok(());
        }
        self.close_step(time)?;
        self.turn_open = false;
        self.record(
            "turn/end",
            time,
            json!({"turn": self.turn, "reason": {"kind": reason}}),
            None,
            false,
        )
    }

    fn message_id(&self, seq: u64, what: &str) -> String {
        format!("gs-{seq}-{what}")
    }

    /// Writes one record with the next seq.
    fn record(
        &mut self,
        kind: &str,
        time: u64,
        data: Value,
        sources: Option<Value>,
        surface: bool,
    ) -> Result<(), RenderError> {
        self.time = time;
        let mut r = Map::new();
        r.insert("type".into(), json!(kind));
        r.insert("seq".into(), json!(self.next_seq));
        r.insert("time".into(), json!(time));
        r.insert("data".into(), data);
        if let Some(s) = sources {
            r.insert("sourceEventSeqs".into(), s);
        }
        if surface {
            r.insert("surfaceOp".into(), json!("append"));
        }
        self.next_seq += 1;
        self.line(&Value::Object(r))
    }

    /// Queues one line, cutting a frame when it is full.
    fn line(&mut self, record: &Value) -> Result<(), RenderError> {
        git_session_schema::json::write_value(&mut self.buf, record);
        self.buf.push(b'\n');
        if self.buf.len() >= FRAME_PLAINTEXT {
            self.cut()?;
        }
        Ok(())
    }

    fn cut(&mut self) -> Result<(), RenderError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        self.write(&buf)?;
        self.buf = buf;
        self.buf.clear();
        self.out.end_frame().map_err(RenderError::Sink)
    }

    fn begin(&mut self) -> Result<(), RenderError> {
        if !self.begun {
            let path = log_path(self.head.native_id, self.head.cwd);
            self.out.begin_framed(&path).map_err(RenderError::Sink)?;
            self.begun = true;
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), RenderError> {
        self.out.write(bytes).map_err(RenderError::Sink)
    }

    fn finish(mut self) -> Result<ChangeSet, RenderError> {
        if !self.header_done && self.foreign == 0 && self.next_seq == 0 {
            return Err(RenderError::Empty(
                "no user, assistant or tool events and no dsh records".into(),
            ));
        }
        self.flush_draft()?;
        if self.foreign > 0 {
            let time = self.time;
            self.close_turn(time, "completed")?;
            let data = json!({
                "session": self.head.header.id.to_string(),
                "agent": self.head.header.agent.to_string(),
                "written": self.head.now,
            });
            let r = json!({"type": "plugin:git-session/import", "seq": self.next_seq, "time": time, "data": data, "ignorable": true});
            self.next_seq += 1;
            self.line(&r)?;
        }
        self.cut()?;
        let lock = log_path(self.head.native_id, self.head.cwd).with_file_name(wire::LOCK_FILE);
        Ok(ChangeSet {
            resume_command: resume_command(self.head.native_id),
            losses: std::mem::take(&mut self.losses).into_lines(),
            notices: vec![PRIVACY_NOTE.to_owned()],
            locks: vec![lock],
            ..Default::default()
        })
    }
}

/// Points the records that name their own session at its new id, for a
/// log written under another id than it was captured with.
///
/// dsh refuses a log whose `delivery-accepted` receipt names another
/// session ("current-generation delivery marker names the wrong Session",
/// observed on a `--fork` copy); receipts naming a *parent* (inherited by a
/// seeded fork) are left alone, as dsh writes them. Jobs name their owner
/// the same way.
fn rename_session(kind: &str, record: &mut Map<String, Value>, old: &str, new: &str) {
    let key = match kind {
        "session-log-deepseek/delivery-accepted" => "sessionId",
        "job/registered" | "job/settled" => "owner",
        _ => return,
    };
    if let Some(v) = record.get_mut("data").and_then(|d| d.get_mut(key))
        && v == old
    {
        *v = Value::String(new.to_owned());
    }
}

/// Puts a record's keys in dsh's envelope order.
fn ordered(mut record: Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for k in wire::ENVELOPE_KEYS {
        if let Some(v) = record.remove(k) {
            out.insert(k.to_owned(), v);
        }
    }
    out.extend(record);
    out
}
