//! Codex rollout lines to canonical events (the mapping table is in
//! the module docs of [`super`]).

use super::*;

// ---------------------------------------------------------------- parse

/// Accumulates the output of one parse call.
pub(super) struct Parser<'a> {
    pub(super) state: State,
    pub(super) next_seq: u64,
    pub(super) events: Vec<Event>,
    pub(super) warnings: Vec<Warning>,
    pub(super) source: &'a str,
    /// Image bytes of `input_image` parts, by content id.
    pub(super) artifacts: Vec<(git_session_schema::ArtifactId, Vec<u8>)>,
}

pub(super) fn parse(input: ParseInput<'_>) -> Parsed {
    let mut warnings = Vec::new();
    let state = match input.state {
        None | Some(Value::Null) => State::default(),
        Some(value) => serde_json::from_value(value).unwrap_or_else(|e| {
            warnings.push(Warning {
                line: input.records.first_ordinal(),
                message: format!("parse state unreadable ({e}); starting without it"),
            });
            State::default()
        }),
    };
    let mut state = state;
    if state.thread.is_none() && !state.meta_seen {
        // Until a `session_meta` names the thread, it is the one the
        // client itself would look the file up by: the last 36 characters
        // of its name. A file whose first line is cut or corrupt still
        // gets its own id, not its whole file name.
        state.thread = rollout_id(input.source).map(str::to_owned);
    }
    let mut p = Parser {
        state,
        next_seq: input.next_seq,
        events: Vec::new(),
        warnings,
        source: input.source,
        artifacts: Vec::new(),
    };
    // A trailing piece without a newline is still a line: a whole file that
    // does not end in '\n' must parse the same as its incremental slices.
    match input.records {
        // The hot path of a rollout: the lines cut straight from the block.
        crate::Records::Lines {
            bytes, first_line, ..
        } => {
            for (i, raw) in crate::source::split_newlines(bytes).enumerate() {
                let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
                if raw.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                p.line(first_line + i as u64, raw);
            }
        }
        other => {
            for record in other.iter() {
                p.line(record.pos.ordinal(), record.bytes);
            }
        }
    }
    let state = serde_json::to_value(&p.state).expect("the parse state always serializes");
    Parsed {
        session: NativeSession {
            native_id: p.state.thread.clone(),
            cwd: p.state.facts.cwd.clone(),
            title: p.state.facts.title.clone(),
            created: p.state.facts.created.clone(),
            parent: p.state.facts.parent.clone().map(|native_id| NativeParent {
                native_id,
                spawned_by: None,
                continues: false,
            }),
        },
        events: p.events,
        warnings: p.warnings,
        artifacts: p.artifacts,
        state,
        ..Default::default()
    }
}

/// Holds what one line maps to, read from the line in place before the
/// line itself moves into the event as [`NATIVE_KEY`].
pub(super) struct Mapped {
    pub(super) actor: &'static str,
    pub(super) kind: &'static str,
    pub(super) level: Level,
    /// The canonical fields, without `native`.
    pub(super) body: Value,
    pub(super) then: Then,
}

/// Says what follows once the primary event of a line has its seq.
pub(super) enum Then {
    Nothing,
    /// Remember a tool call under its call id until its output.
    Call(String, Call),
    /// Link a tool output to its call and derive what the call did.
    Output {
        call_id: String,
        call: Option<Call>,
        text: String,
    },
}

impl Mapped {
    /// Returns a `meta` event body for the line.
    pub(super) fn meta(mut body: Value) -> Mapped {
        strip_nulls(&mut body);
        Mapped {
            actor: "system",
            kind: kinds::META,
            level: Level::Native,
            body,
            then: Then::Nothing,
        }
    }

    /// Returns a primary event other than `meta`.
    pub(super) fn event(
        actor: &'static str,
        kind: &'static str,
        level: Level,
        mut body: Value,
    ) -> Mapped {
        strip_nulls(&mut body);
        Mapped {
            actor,
            kind,
            level,
            body,
            then: Then::Nothing,
        }
    }
}

impl Parser<'_> {
    /// Records a warning; the capture names the file and line.
    pub(super) fn warn(&mut self, line: u64, message: String) {
        self.warnings.push(Warning { line, message });
    }

    /// Appends an event and returns its seq.
    pub(super) fn push(
        &mut self,
        (line, ts): (u64, &str),
        actor: &str,
        kind: &str,
        level: Level,
        payload: Value,
        derived: Option<&str>,
    ) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let thread = self.state.thread.as_deref().unwrap_or("unknown");
        let at = match &self.state.segment {
            Some(segment) => format!("{thread}@{segment}#L{line}"),
            None => format!("{thread}#L{line}"),
        };
        let native_id = match derived {
            None => at,
            Some(kind) => format!("{at}/{kind}"),
        };
        let mut event = Event::new(seq, ts, Agent::Codex, actor, kind, level, payload);
        event.origin = Some(Origin {
            agent: Agent::Codex,
            native_id: Some(native_id),
            native_seq: Some(line),
            extra: BTreeMap::new(),
        });
        self.events.push(event);
        seq
    }

    /// Keeps a line that is not a record as a `meta` event marked
    /// unparsed, so nothing of the file is lost; a warning names the line.
    pub(super) fn unparsed(&mut self, line_no: u64, raw: &[u8], why: String) {
        self.warn(line_no, format!("{why}; kept as an unparsed meta event"));
        let ts = self
            .state
            .last_ts
            .clone()
            .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_owned());
        let payload = json!({ "unparsed": String::from_utf8_lossy(raw), "error": why });
        self.push(
            (line_no, &ts),
            "system",
            kinds::META,
            Level::History,
            payload,
            None,
        );
    }

    pub(super) fn line(&mut self, line_no: u64, raw: &[u8]) {
        let line: Map<String, Value> = match serde_json::from_slice(raw) {
            Ok(Value::Object(line)) => line,
            Ok(_) => return self.unparsed(line_no, raw, "not a JSON object".into()),
            Err(e) => match crate::lossy_json(raw) {
                // Invalid UTF-8 in a string: the record is kept readable
                // (a session_meta line still tells whose session it is).
                Some(line) => {
                    self.warn(
                        line_no,
                        "not valid UTF-8: the invalid bytes were replaced by U+FFFD".into(),
                    );
                    line
                }
                None => return self.unparsed(line_no, raw, format!("not JSON ({e})")),
            },
        };
        let envelope = match Line::read(&line) {
            Ok(l) => l,
            Err(e) => {
                self.warn(line_no, format!("unreadable envelope ({e}); line skipped"));
                return;
            }
        };
        let ts = match envelope.timestamp {
            Some(ts) => {
                match &mut self.state.last_ts {
                    Some(last) => {
                        last.clear();
                        last.push_str(ts);
                    }
                    None => self.state.last_ts = Some(ts.to_owned()),
                }
                ts.to_owned()
            }
            None => {
                self.warn(line_no, "no timestamp; using the previous line's".into());
                self.state.last_ts.clone().unwrap_or_default()
            }
        };
        let payload = envelope.payload;
        let mapped = match envelope.kind {
            "session_meta" => self.session_meta(line_no, &ts, payload),
            "response_item" => self.response_item(line_no, payload),
            "event_msg" => self.event_msg(payload),
            "turn_context" => {
                let tc = TurnContext::deserialize(payload).unwrap_or_default();
                // A session_meta without cwd (or unreadable) leaves the
                // session's directory to the first turn that names one.
                if self.state.facts.cwd.is_none() {
                    self.state.facts.cwd = tc.cwd.clone();
                }
                Mapped::meta(json!({
                    "codex": "turn_context",
                    "turn_id": tc.turn_id,
                    "model": tc.model,
                    "cwd": tc.cwd,
                    "approval_policy": tc.approval_policy,
                    "sandbox_policy": tc.sandbox_policy,
                }))
            }
            "compacted" => compacted(payload),
            other => Mapped::meta(json!({ "codex": other })),
        };
        let Mapped {
            actor,
            kind,
            level,
            mut body,
            then,
        } = mapped;
        // Images stay in the line (L2 writes it back as it was) and are
        // artifacts for everyone else.
        let refs: Vec<String> = body
            .get("images")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|i| i.get("artifact").and_then(Value::as_str))
                    .filter_map(git_session_schema::ArtifactId::parse)
                    .map(|id| id.to_ref())
                    .collect()
            })
            .unwrap_or_default();
        // The line moves into the event: it is parsed once and never copied.
        body[NATIVE_KEY] = Value::Object(line);
        let seq = self.push((line_no, &ts), actor, kind, level, body, None);
        if !refs.is_empty()
            && let Some(e) = self.events.last_mut()
        {
            e.refs = refs;
        }
        match then {
            Then::Nothing => {}
            Then::Call(call_id, mut call) => {
                call.seq = seq;
                self.state.calls.insert(call_id, call);
            }
            Then::Output {
                call_id,
                call,
                text,
            } => self.derive(line_no, &ts, seq, &call_id, call, &text),
        }
    }

    pub(super) fn session_meta(&mut self, line_no: u64, ts: &str, payload: &Value) -> Mapped {
        // Only the first session_meta describes this thread; a later one
        // (concatenated files) is kept as meta so nothing is lost.
        if self.state.meta_seen {
            return Mapped::meta(json!({"codex": "session_meta"}));
        }
        let meta = SessionMeta::deserialize(payload).unwrap_or_default();
        self.state.meta_seen = true;
        if meta.id.is_none() {
            self.warn(line_no, "session_meta without id".into());
        }
        self.state.thread = meta.id.clone().or(self.state.thread.take());
        self.state.segment = segment_of(&meta, self.source);
        self.state.facts.cwd = meta.cwd.clone();
        self.state.facts.created = meta.timestamp.clone().or_else(|| Some(ts.to_owned()));
        self.state.facts.parent = meta.forked_from_id.clone();
        Mapped::event(
            "system",
            kinds::SESSION_START,
            Level::Context,
            json!({
                "cwd": meta.cwd,
                "originator": meta.originator,
                "cli_version": meta.cli_version,
                "source": meta.source,
                "model_provider": meta.model_provider,
                "forked_from_id": meta.forked_from_id,
                "history_mode": meta.history_mode,
            }),
        )
    }

    pub(super) fn response_item(&mut self, line_no: u64, payload: &Value) -> Mapped {
        let item = match ResponseItem::read(payload) {
            Ok(item) => item,
            Err(e) => {
                self.warn(
                    line_no,
                    format!("response_item not understood ({e}); kept as meta"),
                );
                let kind = payload.get("type").and_then(Value::as_str).unwrap_or("?");
                return Mapped::meta(json!({ "codex": format!("response_item.{kind}") }));
            }
        };
        match item {
            ResponseItem::Message {
                role,
                content,
                id,
                phase,
            } => {
                let text = content_text(content);
                match role {
                    "user" if !is_injected(&text) => {
                        let images = self.images(content);
                        let mut body = json!({ "text": text, "item_id": id });
                        if let Some(first) = images.first() {
                            body["image"] = first.clone();
                            body["images"] = Value::Array(images);
                        }
                        Mapped::event("user", kinds::MESSAGE_USER, Level::History, body)
                    }
                    "assistant" => Mapped::event(
                        ACTOR_AGENT,
                        kinds::MESSAGE_ASSISTANT,
                        Level::History,
                        json!({ "text": text, "phase": phase, "item_id": id }),
                    ),
                    _ => Mapped::meta(json!({
                        "codex": "response_item.message",
                        "role": role,
                        "text": text,
                        "injected": role == "user",
                    })),
                }
            }
            ResponseItem::Reasoning {
                id,
                summary,
                content,
                encrypted_content,
            } => {
                let mut texts: Vec<&str> = summary.iter().filter_map(|p| p.text).collect();
                if texts.is_empty() {
                    texts = content.iter().flatten().filter_map(|p| p.text).collect();
                }
                Mapped::event(
                    ACTOR_AGENT,
                    kinds::MESSAGE_THINKING,
                    Level::Context,
                    json!({
                        "text": texts.join("\n"),
                        "encrypted": encrypted_content.is_some(),
                        "item_id": id,
                    }),
                )
            }
            ResponseItem::FunctionCall {
                name,
                arguments,
                call_id,
                id,
            } => {
                // Arguments are JSON text; keep them parsed when they are,
                // and verbatim otherwise (the model may write anything).
                let input = serde_json::from_str::<Value>(arguments)
                    .unwrap_or_else(|_| Value::String(arguments.to_owned()));
                let call = Call {
                    cmd: crate::shell_command(name, &input),
                    patch: (name == "apply_patch")
                        .then(|| {
                            input
                                .get("input")
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                        })
                        .flatten(),
                    name: name.to_owned(),
                    ..Default::default()
                };
                let body =
                    json!({ "call_id": call_id, "name": name, "arguments": input, "item_id": id });
                tool_call(body, call_id, call)
            }
            ResponseItem::CustomToolCall {
                name,
                input,
                call_id,
                id,
            } => {
                let call = Call {
                    patch: (name == "apply_patch").then(|| input.to_owned()),
                    name: name.to_owned(),
                    ..Default::default()
                };
                let body = json!({
                    "call_id": call_id, "name": name, "arguments": input,
                    "freeform": true, "item_id": id,
                });
                tool_call(body, call_id, call)
            }
            ResponseItem::FunctionCallOutput { call_id, output }
            | ResponseItem::CustomToolCallOutput { call_id, output } => {
                self.tool_result(line_no, call_id, output)
            }
            ResponseItem::AdditionalTools => Mapped::meta(
                json!({"codex": "response_item.additional_tools", "role": "developer"}),
            ),
            ResponseItem::Compaction { .. } => {
                Mapped::meta(json!({"codex": "response_item.compaction", "opaque": true}))
            }
            ResponseItem::Other => {
                let kind = payload.get("type").and_then(Value::as_str).unwrap_or("?");
                let mut body = json!({ "codex": format!("response_item.{kind}") });
                if kind == "web_search_call" {
                    body["web_search"] = web_search(payload);
                }
                Mapped::meta(body)
            }
        }
    }

    /// Takes the `input_image` parts of a message's content into
    /// artifacts: `{media_type, artifact}` per image whose `image_url` is a
    /// base64 `data:` URL (another URL is kept as `url`).
    fn images(&mut self, content: &Value) -> Vec<Value> {
        let Some(parts) = content.as_array() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for part in parts {
            if part.get("type").and_then(Value::as_str) != Some("input_image") {
                continue;
            }
            let Some(url) = part.get("image_url").and_then(Value::as_str) else {
                continue;
            };
            let data = url
                .strip_prefix("data:")
                .and_then(|rest| rest.split_once(";base64,"));
            match data.and_then(|(media, b64)| {
                crate::images::decode(b64, &mut self.artifacts).map(|id| (media, id))
            }) {
                Some((media, id)) => {
                    out.push(json!({"media_type": media, "artifact": id.to_string()}))
                }
                None => out.push(json!({ "url": url })),
            }
        }
        out
    }

    pub(super) fn tool_result(&mut self, line_no: u64, call_id: &str, output: &Value) -> Mapped {
        let text = output_text(output);
        // A call is answered once; forgetting it keeps the state as small as
        // the number of calls still open, however long the thread grows.
        let call = self.state.calls.remove(call_id);
        if call.is_none() {
            self.warn(
                line_no,
                format!("output for unknown call id {call_id:?}; kept without a parent"),
            );
        }
        let mut body = json!({
            "call_id": call_id,
            "name": call.as_ref().map(|c| c.name.as_str()),
            "output": text,
        });
        // A rollout has no failure field: the exec output says the exit
        // code, and a result another agent's failure was written into says
        // so on its first line (`tools::mark_failed`).
        if crate::tools::marked_failed(&text) {
            body["is_error"] = json!(true);
            if let Some(code) = crate::tools::exit_code_in(&text) {
                body["exit_code"] = json!(code);
            }
        }
        let mut mapped = Mapped::event("tool", kinds::TOOL_RESULT, Level::History, body);
        mapped.then = Then::Output {
            call_id: call_id.to_owned(),
            call,
            text,
        };
        mapped
    }

    pub(super) fn set_parent(&mut self, seq: u64, parent: u64) {
        if let Some(e) = self.events.iter_mut().rev().find(|e| e.seq == seq) {
            e.parent_seq = Some(parent);
        }
    }

    pub(super) fn event_msg(&mut self, payload: &Value) -> Mapped {
        let kind = payload.get("type").and_then(Value::as_str).unwrap_or("?");
        let name = format!("event_msg.{kind}");
        // The only title a rollout itself holds; names set in the TUI also
        // go to `session_index.jsonl`, which `ops` may read on its own.
        if kind == "thread_name_updated"
            && let Some(title) = payload.get("thread_name").and_then(Value::as_str)
        {
            self.state.facts.title = Some(title.to_owned());
        }
        let body = match EventMsg::read(payload) {
            EventMsg::UserMessage { message } => json!({ "codex": name, "text": message }),
            EventMsg::AgentMessage { message } => json!({ "codex": name, "text": message }),
            EventMsg::TaskStarted { turn_id } => json!({ "codex": name, "turn_id": turn_id }),
            EventMsg::TaskComplete {
                turn_id,
                last_agent_message,
            } => json!({
                "codex": name, "turn_id": turn_id, "last_agent_message": last_agent_message,
            }),
            EventMsg::TokenCount { info } => json!({
                "codex": name,
                "usage": info.get("total_token_usage"),
                "last_usage": info.get("last_token_usage"),
            }),
            EventMsg::ItemCompleted { item, turn_id } => {
                let item_kind = item.get("type").and_then(Value::as_str).unwrap_or("?");
                if item_kind == "CommandExecution" {
                    let exec = CommandExecution::deserialize(item).unwrap_or_default();
                    return self.command_execution(exec);
                }
                json!({ "codex": format!("{name}.{item_kind}"), "turn_id": turn_id })
            }
            EventMsg::Other => json!({ "codex": name }),
        };
        Mapped::meta(body)
    }
}

/// Returns what a `web_search_call` item did: `action` (`search`,
/// `open_page`, `find_in_page`), `query`, `url`, `pattern`, `status`.
fn web_search(payload: &Value) -> Value {
    let action = payload.get("action");
    let field = |k: &str| {
        action
            .and_then(|a| a.get(k))
            .or_else(|| payload.get(k))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let mut out = json!({
        "action": action.and_then(|a| a.get("type")).cloned().unwrap_or(Value::Null),
        "query": field("query"),
        "url": field("url"),
        "pattern": field("pattern"),
        "status": payload.get("status").cloned().unwrap_or(Value::Null),
    });
    strip_nulls(&mut out);
    out
}

/// Maps a tool call line; its seq is remembered once it has one.
pub(super) fn tool_call(body: Value, call_id: &str, call: Call) -> Mapped {
    let mut mapped = Mapped::event(ACTOR_AGENT, kinds::TOOL_CALL, Level::History, body);
    mapped.then = Then::Call(call_id.to_owned(), call);
    mapped
}

/// Maps a `compacted` line to a checkpoint.
pub(super) fn compacted(payload: &Value) -> Mapped {
    let c = Compacted::deserialize(payload).unwrap_or_default();
    let remote = c
        .replacement_history
        .iter()
        .any(|i| i.get("type").and_then(Value::as_str) == Some("compaction"));
    let retained: Vec<String> = c
        .replacement_history
        .iter()
        .filter(|i| {
            i.get("type").and_then(Value::as_str) == Some("message")
                && i.get("role").and_then(Value::as_str) == Some("user")
        })
        .map(|i| content_text(i.get("content").unwrap_or(&Value::Null)))
        .filter(|t| !is_injected(t) && *t != c.message)
        .collect();
    // No nulls to strip, and `remote: false` is a fact worth keeping.
    Mapped {
        actor: "system",
        kind: kinds::CHECKPOINT,
        level: Level::Context,
        body: json!({
            "reason": "compaction",
            "summary": c.message,
            "remote": remote,
            "retained_user_messages": retained,
        }),
        then: Then::Nothing,
    }
}

/// Removes `null` members of a payload object so absent facts stay absent.
pub(super) fn strip_nulls(body: &mut Value) {
    if let Value::Object(map) = body {
        map.retain(|_, v| !v.is_null());
    }
}

/// Returns the text parts of a message `content`, joined by newlines.
pub(super) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Returns a tool output as text: a string as is, text parts joined by
/// newlines, a non-text part as `[type]`.
pub(super) fn output_text(output: &Value) -> String {
    match output {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p.get("text").and_then(Value::as_str) {
                Some(t) => t.to_owned(),
                None => format!("[{}]", p.get("type").and_then(Value::as_str).unwrap_or("?")),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(o) => o
            .get("content")
            .map(output_text)
            .unwrap_or_else(|| output.to_string()),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Says whether a user text is context the harness injected rather than
/// something the user typed: one whole `<tag>…</tag>` element (environment
/// context, user instructions, turn-aborted notes) or an AGENTS.md block.
pub(super) fn is_injected(text: &str) -> bool {
    let t = text.trim();
    if t.starts_with("# AGENTS.md instructions for ") {
        return true;
    }
    let Some(rest) = t.strip_prefix('<') else {
        return false;
    };
    let Some(end) = rest.find('>') else {
        return false;
    };
    let tag = rest[..end].split_whitespace().next().unwrap_or("");
    !tag.is_empty() && !tag.starts_with('/') && t.ends_with(&format!("</{tag}>"))
}

/// Says whether `s` is a hyphenated UUID (any version).
/// Returns what tells this file's lines apart from those of the other
/// files of its thread: the `segment_id` its `session_meta` names (a
/// rotated thread, where every segment numbers its lines from 0), else the
/// rollout id of the file name when it is not the thread id (a paginated
/// successor whose `history_base` names its predecessor); `None` for a
/// thread's only file, whose origins stay `<thread>#L<line>`.
pub(super) fn segment_of(meta: &SessionMeta, source: &str) -> Option<String> {
    if let Some(segment) = meta.segment_id.as_deref().filter(|s| !s.is_empty()) {
        // `#` and `/` separate the parts of an origin id; a hostile segment
        // id must not make a primary event look derived.
        return Some(
            segment
                .chars()
                .take(64)
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect(),
        );
    }
    let rollout = rollout_id(source)?;
    meta.id
        .as_deref()
        .is_some_and(|id| id != rollout)
        .then(|| rollout.to_owned())
}

/// The rollout id in a rollout file's name (`rollout-<ts>-<uuid>.jsonl`):
/// its last 36 characters before `.jsonl`, when they are a UUID.
fn rollout_id(source: &str) -> Option<&str> {
    let name = source.rsplit(['/', '\\']).next()?;
    let stem = name.strip_suffix(".jsonl")?;
    let rollout = stem.get(stem.len().checked_sub(36)?..)?;
    is_uuid(rollout).then_some(rollout)
}

pub(super) fn is_uuid(s: &str) -> bool {
    // `try_parse` also takes the simple, braced and URN forms; the client
    // only writes the hyphenated one, 36 characters.
    s.len() == 36 && uuid::Uuid::try_parse(s).is_ok()
}
