//! Canonical events to a Codex rollout, streaming (see the module docs
//! of [`super`] for what a render writes).

use super::*;

// ---------------------------------------------------------------- render

/// How many rendered bytes the writer holds before sending them to the
/// sink: `ops` writes each chunk straight to a file, so one write per line
/// would be one system call per line; this keeps the buffer small and fixed.
pub(super) const FLUSH_AT: usize = 64 * 1024;

/// Returns the Codex line an event carries, if it came from a Codex rollout.
pub(super) fn native_line(event: &Event) -> Option<&Map<String, Value>> {
    if event.agent != Agent::Codex {
        return None;
    }
    event.payload.get(NATIVE_KEY)?.as_object()
}

/// Takes the Codex line out of an event: the render owns the events it is
/// handed, so the line is moved into the output instead of copied.
pub(super) fn take_native_line(event: &mut Event) -> Option<Map<String, Value>> {
    if event.agent != Agent::Codex {
        return None;
    }
    match event.payload.get_mut(NATIVE_KEY)? {
        Value::Object(line) => Some(std::mem::take(line)),
        _ => None,
    }
}

/// Holds the rewrites a faithful render applies to Codex lines.
pub(super) struct Remap<'a> {
    pub(super) from_cwd: Option<String>,
    pub(super) to_cwd: &'a str,
}

impl Remap<'_> {
    /// Moves paths under the recorded cwd to the requested one, in place.
    fn apply(&self, value: &mut Value) {
        let Some(from) = self.from_cwd.as_deref() else {
            return;
        };
        if from == self.to_cwd {
            return;
        }
        match value {
            Value::String(s) => {
                if let Some(moved) = move_path(s, from, self.to_cwd) {
                    *s = moved;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.apply(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.apply(v)),
            _ => {}
        }
    }
}

/// Returns `s` with a leading `from` (as a path or `file://` URL) replaced.
pub(super) fn move_path(s: &str, from: &str, to: &str) -> Option<String> {
    for prefix in ["", "file://"] {
        if let Some(rest) = s.strip_prefix(prefix).and_then(|r| r.strip_prefix(from))
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return Some(format!("{prefix}{to}{rest}"));
        }
    }
    None
}

/// Says where the rollout's first line, its `session_meta`, stands.
pub(super) enum Header {
    /// No `session_meta` seen and no line written yet.
    Undecided,
    /// Only `session_meta` lines of another thread seen so far: the parent
    /// of a canonical fork, whose own header comes after the inherited
    /// events. Lines wait in [`Writer::pending`] until it arrives.
    Waiting {
        /// The newest of those lines, with its event's `cwd` and `ts`: the
        /// header if no line of this thread ever comes.
        latest: (Map<String, Value>, Option<String>, String),
        /// The first one's ordinal, which the header takes over.
        first_ordinal: Option<Value>,
        /// How many were seen: with more than one, the header drops its
        /// reference to the parent, whose events are inherited.
        count: usize,
    },
    /// The header is written and the file begun.
    Written(Rollout),
}

/// Holds what the `threads` row needs from the rollout's first line.
pub(super) struct Rollout {
    pub(super) path: PathBuf,
    pub(super) stamp: FileStamp,
    pub(super) source: String,
    pub(super) cli_version: String,
    pub(super) originator: String,
}

/// Holds the settings of the newest `turn_context` line, for the row.
pub(super) struct Context {
    pub(super) model: Value,
    pub(super) sandbox_policy: Option<String>,
    pub(super) approval_policy: Option<String>,
}

/// Writes a rollout line by line as the events come.
///
/// What it keeps is small and does not grow with the session, except the
/// ids of foreign tool calls still waiting for their result, and the
/// inherited lines of a canonical fork (see [`Header::Waiting`]), which
/// cannot be written before the fork's own header line.
pub(super) struct Writer<'a> {
    pub(super) head: RenderHead<'a>,
    pub(super) out: &'a mut dyn FileSink,
    pub(super) header: Header,
    /// Lines that arrived before the header, with whether they get the
    /// cwd rewrites (only while [`Header::Waiting`]).
    pub(super) pending: Vec<(Value, bool)>,
    /// Serialized lines not yet sent to the sink.
    pub(super) buf: Vec<u8>,
    pub(super) remap: Remap<'a>,
    /// How often each kind of loss occurred.
    pub(super) losses: crate::loss::Losses,
    /// Original ids of foreign tool calls without a result yet, to the ids
    /// written (Codex caps them at 64 chars); forgotten once answered.
    pub(super) call_ids: HashMap<String, String>,
    /// Hashes of the call ids written, to keep them unique. A collision
    /// only renames a call to `call_gs_<seq>`, which is still unique.
    pub(super) used_ids: HashSet<u64>,
    /// Next ordinal, for paginated rollouts (None for legacy ones).
    pub(super) ordinal: Option<u64>,
    pub(super) first_user_text: Option<String>,
    pub(super) user_event_written: bool,
    pub(super) response_item_written: bool,
    /// The timestamp of the last line written.
    pub(super) last_ts: String,
    pub(super) context: Option<Context>,
}

pub(super) fn render(
    head: RenderHead<'_>,
    events: &mut dyn Iterator<Item = Event>,
    out: &mut dyn FileSink,
) -> Result<ChangeSet, RenderError> {
    if !is_uuid(head.native_id) {
        return Err(RenderError::Request(format!(
            "codex thread ids are UUIDs, not {:?}",
            head.native_id
        )));
    }
    let mut w = Writer {
        head,
        out,
        header: Header::Undecided,
        pending: Vec::new(),
        buf: Vec::with_capacity(FLUSH_AT + FLUSH_AT / 4),
        remap: Remap {
            from_cwd: None,
            to_cwd: head.cwd,
        },
        losses: crate::loss::Losses::default(),
        call_ids: HashMap::new(),
        used_ids: HashSet::new(),
        ordinal: None,
        first_user_text: None,
        user_event_written: false,
        response_item_written: false,
        last_ts: String::new(),
        context: None,
    };
    for mut event in events {
        if is_session_meta(&event) {
            w.session_meta(event)?;
            continue;
        }
        // The link of a rotated thread's segment to the copy of the one
        // before: the rendered rollout holds that history inline, and the
        // copy is not where the link says on the target machine.
        if is_rollout_reference(&event) {
            continue;
        }
        let unparsed = (event.agent == Agent::Codex && event.kind == kinds::META)
            .then(|| event.payload.get("unparsed").and_then(Value::as_str))
            .flatten();
        if let Some(raw) = unparsed {
            w.raw(raw)?;
            continue;
        }
        match take_native_line(&mut event) {
            Some(line) => w.faithful(&event, line)?,
            None if event.agent == Agent::Codex && is_derived(&event) => {}
            None => w.foreign(&event)?,
        }
    }
    w.finish()
}

/// Says whether an event carries a captured Codex `session_meta` line.
pub(super) fn is_session_meta(event: &Event) -> bool {
    native_line(event)
        .and_then(|l| l.get("type"))
        .and_then(Value::as_str)
        == Some("session_meta")
}

/// Says whether an event carries a captured Codex `rollout_reference` line.
pub(super) fn is_rollout_reference(event: &Event) -> bool {
    native_line(event)
        .and_then(|l| l.get("type"))
        .and_then(Value::as_str)
        == Some("rollout_reference")
}

/// Says whether a Codex event was derived from another line (no line of its own).
pub(super) fn is_derived(event: &Event) -> bool {
    event
        .origin
        .as_ref()
        .and_then(|o| o.native_id.as_deref())
        .is_some_and(|id| id.contains('/'))
        || matches!(event.kind.as_str(), kinds::COMMAND_RUN | kinds::FILE_EDIT)
}

impl Writer<'_> {
    fn loss(&mut self, what: impl Into<String>) {
        self.losses.once(what);
    }

    /// Takes a `session_meta` event: the header when it is this thread's.
    ///
    /// A canonical fork carries its parent's events first, so its events
    /// hold two `session_meta` lines: the parent's, then the fork's, whose
    /// `history_base` points into the parent rollout by byte offset.
    /// Written back, such a session becomes one self-contained rollout
    /// under the fork's header (an ordinal gap where the parent's header was
    /// is fine for 0.171.0), since the rewritten parent no longer has those
    /// bytes. The header's thread is the canonical header's native id; one
    /// without it takes the first `session_meta`.
    fn session_meta(&mut self, mut event: Event) -> Result<(), RenderError> {
        let Some(line) = take_native_line(&mut event) else {
            return Ok(());
        };
        let cwd = event
            .payload
            .get("cwd")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let (first_ordinal, count) = match &mut self.header {
            // A later `session_meta` (a concatenated rollout) is not
            // written: the thread has its header.
            Header::Written(_) => return Ok(()),
            Header::Waiting {
                first_ordinal,
                count,
                ..
            } => (first_ordinal.take(), *count + 1),
            Header::Undecided => {
                let ordinal = line.get("ordinal").cloned();
                self.ordinal = ordinal.as_ref().and_then(Value::as_u64).map(|o| o + 1);
                (ordinal, 1)
            }
        };
        let inherited = count > 1;
        let own = self.head.header.native_id.as_deref();
        let id = line
            .get("payload")
            .and_then(|p| p.get("id"))
            .and_then(Value::as_str);
        if own.is_none_or(|own| id == Some(own)) {
            return self.write_meta(line, cwd, &event.ts, inherited.then_some(first_ordinal));
        }
        self.header = Header::Waiting {
            latest: (line, cwd, event.ts),
            first_ordinal,
            count,
        };
        Ok(())
    }

    /// Writes a captured `session_meta` line as the header; `inherited`
    /// holds the first header's ordinal when parent events come first.
    fn write_meta(
        &mut self,
        line: Map<String, Value>,
        cwd: Option<String>,
        ts: &str,
        inherited: Option<Option<Value>>,
    ) -> Result<(), RenderError> {
        let mut line = Value::Object(line);
        if let Some(first_ordinal) = inherited {
            if let Some(p) = line.get_mut("payload").and_then(Value::as_object_mut) {
                for key in [
                    "forked_from_id",
                    "forked_from_ordinal_exclusive",
                    "history_base",
                ] {
                    p.remove(key);
                }
            }
            if let (Some(o), Some(map)) = (first_ordinal, line.as_object_mut()) {
                map.insert("ordinal".into(), o);
            }
        }
        self.remap.from_cwd = cwd.or_else(|| self.head.header.cwd.clone());
        self.faithful_meta(&mut line);
        let created = line["payload"]["timestamp"]
            .as_str()
            .unwrap_or(ts)
            .to_owned();
        self.begin(&created, &line["payload"])?;
        self.emit(line, false)?;
        for (line, rewrite) in std::mem::take(&mut self.pending) {
            self.emit(line, rewrite)?;
        }
        Ok(())
    }

    /// Starts the rollout file, named after its creation time.
    fn begin(&mut self, created: &str, meta: &Value) -> Result<(), RenderError> {
        let Some(stamp) = FileStamp::parse(created).or_else(|| FileStamp::parse(self.head.now))
        else {
            return Err(RenderError::Request(format!(
                "neither the creation time {created:?} nor now {:?} is an RFC 3339 UTC time",
                self.head.now
            )));
        };
        let path = PathBuf::from(format!(
            "sessions/{}/{}/{}/rollout-{}-{}.jsonl",
            stamp.year, stamp.month, stamp.day, stamp.file_time, self.head.native_id
        ));
        self.out.begin(&path).map_err(RenderError::Sink)?;
        let text = |k: &str, default: &str| {
            meta.get(k)
                .and_then(Value::as_str)
                .unwrap_or(default)
                .to_owned()
        };
        self.header = Header::Written(Rollout {
            path,
            stamp,
            source: text("source", "cli"),
            cli_version: text("cli_version", ""),
            originator: text("originator", "git_session"),
        });
        Ok(())
    }

    /// Writes the minimal header of a session that has no `session_meta`.
    fn write_minimal_meta(&mut self) -> Result<(), RenderError> {
        let created = self.head.header.created.clone();
        let ts = codex_ts(&created, self.head.now);
        let line = json!({
            "timestamp": ts,
            "type": "session_meta",
            "payload": {
                "id": self.head.native_id,
                "timestamp": ts,
                "cwd": self.head.cwd,
                "originator": "git_session",
                "cli_version": "0.0.0",
                "source": "cli",
            },
        });
        self.begin(&created, &line["payload"])?;
        self.emit(line, false)
    }

    /// Applies the documented rewrites to a captured `session_meta` line.
    fn faithful_meta(&mut self, line: &mut Value) {
        self.remap.apply(line);
        let id = self.head.native_id;
        let Some(payload) = line.get_mut("payload").and_then(Value::as_object_mut) else {
            return;
        };
        payload.insert("id".into(), json!(id));
        if payload.contains_key("session_id") {
            payload.insert("session_id".into(), json!(id));
        }
        payload.insert("cwd".into(), json!(self.head.cwd));
        // `exec` threads are not listed by the interactive picker.
        let interactive = matches!(
            payload.get("source").and_then(Value::as_str),
            Some("cli" | "vscode")
        );
        if !interactive {
            payload.insert("source".into(), json!("cli"));
        }
        // A recorded provider pins the thread to it on resume.
        payload.remove("model_provider");
        if let Some(parent) = payload.get("forked_from_id").and_then(Value::as_str) {
            let parent = parent.to_owned();
            self.loss(format!(
                "fork-parent-missing: fork of codex thread {parent} without its parent's events: Codex reads the \
                 inherited history from the parent rollout, which must be present as Codex \
                 wrote it (history_base is a byte offset into it)"
            ));
        }
    }

    /// Writes a captured Codex line back, with the documented rewrites.
    fn faithful(&mut self, event: &Event, line: Map<String, Value>) -> Result<(), RenderError> {
        if let Some(o) = line.get("ordinal").and_then(Value::as_u64) {
            self.ordinal = Some(o + 1);
        }
        if event.kind == kinds::MESSAGE_USER && self.first_user_text.is_none() {
            self.first_user_text = event
                .payload
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        let payload = line.get("payload");
        if line.get("type").and_then(Value::as_str) == Some("event_msg")
            && payload.and_then(|p| p.get("type")).and_then(Value::as_str) == Some("user_message")
        {
            self.user_event_written = true;
            if self.first_user_text.is_none() {
                self.first_user_text = payload
                    .and_then(|p| p.get("message"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
        }
        self.put(Value::Object(line), true)
    }

    /// Applies the rewrites a captured line needs for the new cwd.
    fn rewrite(&self, line: &mut Value) {
        match line.get("type").and_then(Value::as_str) {
            // The client also takes the provider from the newest applied
            // settings and refuses a resume under another one ("model
            // provider … is no longer configured"), seen with 0.171.0.
            Some("event_msg") if line["payload"]["type"] == "thread_settings_applied" => {
                if let Some(settings) = line["payload"]
                    .get_mut("thread_settings")
                    .and_then(Value::as_object_mut)
                {
                    settings.remove("model_provider_id");
                }
                self.remap.apply(&mut line["payload"]);
            }
            // `--last` and the picker match the directory of the newest
            // turn context, not session_meta's (seen with 0.171.0: a moved
            // thread whose turn_context kept the old cwd was not found).
            Some("turn_context") => self.remap.apply(&mut line["payload"]),
            // Everything else is history, written as captured. `world_state`
            // records what the model was told (the old cwd among it); left
            // alone, it lets the client see the move and tell the model.
            _ => {}
        }
    }

    /// Writes a line after the header, or holds it until the header can be
    /// written; `rewrite` says whether it is a captured line.
    fn put(&mut self, line: Value, rewrite: bool) -> Result<(), RenderError> {
        match self.header {
            Header::Written(_) => self.emit(line, rewrite),
            Header::Waiting { .. } => {
                self.pending.push((line, rewrite));
                Ok(())
            }
            Header::Undecided => {
                self.write_minimal_meta()?;
                self.emit(line, rewrite)
            }
        }
    }

    /// Writes back a line that was not a record when captured, as it was:
    /// the client skips such lines in the middle of a rollout, but refuses a
    /// rollout that starts with one, so before the header it is left out.
    fn raw(&mut self, text: &str) -> Result<(), RenderError> {
        if !matches!(self.header, Header::Written(_)) {
            self.loss(
                "unparsed-line-omitted: a line that was not a record, before the session header",
            );
            return Ok(());
        }
        self.buf.extend_from_slice(text.as_bytes());
        self.buf.push(b'\n');
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    /// Serializes one line after the header and sends full buffers on.
    fn emit(&mut self, mut line: Value, rewrite: bool) -> Result<(), RenderError> {
        if rewrite {
            self.rewrite(&mut line);
        }
        match line.get("type").and_then(Value::as_str) {
            Some("response_item") => self.response_item_written = true,
            Some("turn_context") => {
                let p = &line["payload"];
                self.context = Some(Context {
                    model: p.get("model").cloned().unwrap_or(Value::Null),
                    sandbox_policy: p.get("sandbox_policy").map(Value::to_string),
                    approval_policy: p
                        .get("approval_policy")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                });
            }
            _ => {}
        }
        self.last_ts.clear();
        if let Some(ts) = line.get("timestamp").and_then(Value::as_str) {
            self.last_ts.push_str(ts);
        }
        git_session_schema::json::write_value(&mut self.buf, &line);
        self.buf.push(b'\n');
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), RenderError> {
        if !self.buf.is_empty() {
            self.out.write(&self.buf).map_err(RenderError::Sink)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes what is still held and describes the rest of the change set.
    fn finish(mut self) -> Result<ChangeSet, RenderError> {
        match std::mem::replace(&mut self.header, Header::Undecided) {
            Header::Written(rollout) => self.header = Header::Written(rollout),
            // Parent events of a fork whose own header never came: the
            // newest `session_meta` is the header.
            Header::Waiting {
                latest: (line, cwd, ts),
                first_ordinal,
                count,
            } => self.write_meta(line, cwd, &ts, (count > 1).then_some(first_ordinal))?,
            Header::Undecided => {}
        }
        if !self.response_item_written {
            return Err(RenderError::Empty(
                "no message or tool event to write as a Codex response item".into(),
            ));
        }
        self.flush()?;
        let Header::Written(rollout) = &self.header else {
            unreachable!("a response item was written, so the header was")
        };
        let native_id = self.head.native_id;
        let mut changes = ChangeSet {
            resume_command: SPEC.resume_command(native_id),
            losses: std::mem::take(&mut self.losses).into_lines(),
            ..Default::default()
        };
        if let Some(title) = &self.head.header.title {
            // The TUI shows a thread's name from this append-only index; the
            // newest entry for an id wins, so appending never clobbers others.
            let mut entry = serde_json::to_vec(&json!({
                "id": native_id,
                "thread_name": title,
                "updated_at": self.head.now,
            }))
            .expect("JSON values always serialize");
            entry.push(b'\n');
            changes
                .appends
                .push(FileWrite::plain("session_index.jsonl", entry));
        }
        changes.rows.push(self.thread_row(rollout));
        Ok(changes)
    }

    /// Appends a line built from canonical fields, with an ordinal when the
    /// rollout is paginated (the client refuses a paginated line without one).
    fn push_line(&mut self, ts: &str, kind: &str, payload: Value) -> Result<(), RenderError> {
        let mut line = Map::new();
        line.insert("timestamp".into(), json!(codex_ts(ts, self.head.now)));
        if let Some(o) = self.ordinal {
            line.insert("ordinal".into(), json!(o));
            self.ordinal = Some(o + 1);
        }
        line.insert("type".into(), json!(kind));
        line.insert("payload".into(), payload);
        self.put(Value::Object(line), false)
    }

    /// Writes an event from another agent (or built by git-session).
    fn foreign(&mut self, event: &Event) -> Result<(), RenderError> {
        let p = &event.payload;
        match event.kind.as_str() {
            kinds::MESSAGE_USER => {
                let text = payload_text(p);
                if has_non_text_parts(p) {
                    self.losses.add(
                        "image-omitted",
                        event.seq,
                        "message.user content parts other than text and image artifacts not written",
                    );
                }
                // Images travel as artifacts: each becomes an `input_image`
                // part with a data URL, as the client writes a pasted one.
                let images = self.image_urls(event);
                if text.is_empty() && images.is_empty() {
                    self.losses.add(
                        "message-empty",
                        event.seq,
                        "message.user without text or image not written",
                    );
                    return Ok(());
                }
                if self.first_user_text.is_none() && !text.is_empty() {
                    self.first_user_text = Some(text.clone());
                }
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(json!({"type": "input_text", "text": text}));
                }
                for url in &images {
                    content.push(json!({"type": "input_image", "image_url": url}));
                }
                self.push_line(
                    &event.ts,
                    "response_item",
                    json!({"type": "message", "role": "user", "content": content}),
                )?;
                // The picker, `--last` and the title key on this UI event.
                self.push_line(
                    &event.ts,
                    "event_msg",
                    json!({"type": "user_message", "message": text, "images": images,
                           "local_images": [], "text_elements": []}),
                )?;
                self.user_event_written = true;
            }
            kinds::MESSAGE_ASSISTANT => {
                let text = payload_text(p);
                if text.is_empty() {
                    self.losses.add(
                        "message-empty",
                        event.seq,
                        "message.assistant without text not written",
                    );
                    return Ok(());
                }
                self.push_line(
                    &event.ts,
                    "event_msg",
                    json!({"type": "agent_message", "message": text}),
                )?;
                self.push_line(
                    &event.ts,
                    "response_item",
                    json!({"type": "message", "role": "assistant",
                           "content": [{"type": "output_text", "text": text}]}),
                )?;
            }
            kinds::TOOL_CALL => {
                let mut name = str_field(p, &["name", "tool"]).unwrap_or("tool").to_owned();
                let original = str_field(p, &["call_id", "id", "tool_use_id"])
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("seq{}", event.seq));
                let call_id = self.call_id(&original, event.seq);
                let mut input = p.get("arguments").cloned().unwrap_or(json!({}));
                // A call becomes Codex's tool of the same kind (a shell call
                // exec_command, formats/codex.md), its arguments renamed;
                // what has no counterpart is named in the call and here.
                let t = crate::tools::translate(&super::SPEC, &event.agent, &name, &input);
                for line in t.losses(event.seq, event.agent.as_str(), &super::SPEC) {
                    self.loss(line);
                }
                (name, input) = (t.name, t.arguments);
                // Arguments travel as JSON text; a string input is already text.
                let arguments = match &input {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                self.push_line(
                    &event.ts,
                    "response_item",
                    json!({"type": "function_call", "name": name,
                           "arguments": arguments, "call_id": call_id}),
                )?;
            }
            kinds::TOOL_RESULT => {
                let original = str_field(p, &["call_id", "tool_use_id", "id"]).map(str::to_owned);
                // A call is answered once; forgetting it keeps the map as small
                // as the number of calls still open.
                let Some(call_id) = original.and_then(|o| self.call_ids.remove(&o)) else {
                    self.losses.add(
                        "tool-result-orphaned",
                        event.seq,
                        "tool.result without a written tool.call not written",
                    );
                    return Ok(());
                };
                let output = ["output", "content", "text", "result"]
                    .iter()
                    .find_map(|k| p.get(*k))
                    .map(output_text)
                    .unwrap_or_default();
                // A rollout has no failure field: the text says it, in the
                // words of Codex's own exec output when the code is known.
                let output = match crate::tools::failure(p) {
                    Some(failure) => crate::tools::mark_failed(&output, failure, true),
                    None => output,
                };
                // A result's images go with its text as content items.
                let images = self.image_urls(event);
                let output = if images.is_empty() {
                    json!(output)
                } else {
                    let mut items = vec![json!({"type": "input_text", "text": output})];
                    items.extend(
                        images
                            .into_iter()
                            .map(|u| json!({"type": "input_image", "image_url": u})),
                    );
                    Value::Array(items)
                };
                self.push_line(
                    &event.ts,
                    "response_item",
                    json!({"type": "function_call_output", "call_id": call_id, "output": output}),
                )?;
            }
            kinds::MESSAGE_THINKING => self.losses.add(
                "thinking-dropped",
                event.seq,
                format!(
                    "message.thinking ({}) not written: Codex only sends its own reasoning back",
                    event.agent
                ),
            ),
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
                    self.push_line(
                        &event.ts,
                        "response_item",
                        json!({"type": "message", "role": "assistant",
                               "content": [{"type": "output_text", "text": note}]}),
                    )?;
                    self.losses.line(loss);
                    return Ok(());
                }
                self.losses.add(
                    "event-unmapped",
                    event.seq,
                    format!(
                        "{} has no Codex form; not written",
                        crate::loss::what(event)
                    ),
                );
            }
        }
        Ok(())
    }

    /// Returns an event's image artifacts as `data:` URLs, in `refs` order;
    /// a missing artifact is an `image-omitted` line.
    fn image_urls(&mut self, event: &Event) -> Vec<String> {
        let mut out = Vec::new();
        let ids = event
            .refs
            .iter()
            .filter_map(|r| git_session_schema::ArtifactId::from_ref(r));
        for (i, id) in ids.enumerate() {
            if let Some(data) = crate::images::encode(&self.head, &mut self.losses, event.seq, &id)
            {
                let media = crate::images::media_type(&event.payload, i);
                out.push(format!("data:{media};base64,{data}"));
            }
        }
        out
    }

    /// Returns a unique call id of at most 64 characters for `original`.
    fn call_id(&mut self, original: &str, seq: u64) -> String {
        let mut id = if original.len() <= MAX_CALL_ID
            && original
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            original.to_owned()
        } else {
            format!("call_gs_{seq}")
        };
        if !self.used_ids.insert(id_hash(&id)) {
            id = format!("call_gs_{seq}");
            self.used_ids.insert(id_hash(&id));
        }
        self.call_ids.insert(original.to_owned(), id.clone());
        id
    }

    /// Describes the `threads` row of `state_5.sqlite` for the rollout.
    ///
    /// A fresh `CODEX_HOME` needs none (the client indexes the files it
    /// finds), but in one whose database already exists a new rollout is
    /// resumable by id yet missing from the `/resume` picker until this row
    /// is there (seen with 0.171.0; listed once the row was inserted).
    fn thread_row(&self, rollout: &Rollout) -> RowWrite {
        let stamp = &rollout.stamp;
        let last_ts = FileStamp::parse(&self.last_ts).map_or(stamp.epoch_ms, |s| s.epoch_ms);
        let context = self.context.as_ref();
        let first = self.first_user_text.clone().unwrap_or_default();
        let title = self
            .head
            .header
            .title
            .clone()
            .unwrap_or_else(|| first.clone());
        let history_mode = if self.ordinal.is_some() {
            "paginated"
        } else {
            "legacy"
        };
        let columns = json!({
            "id": self.head.native_id,
            "rollout_path": rollout.path.to_string_lossy(),
            "created_at": stamp.epoch_ms / 1000,
            "created_at_ms": stamp.epoch_ms,
            "updated_at": last_ts / 1000,
            "updated_at_ms": last_ts,
            "recency_at": last_ts / 1000,
            "recency_at_ms": last_ts,
            "source": rollout.source,
            "thread_source": "user",
            // The row pins the provider like the rollout would ("model
            // provider … is no longer configured"); an empty one resumes
            // under any provider, and the client then records its own
            // (seen with 0.171.0). The column is NOT NULL.
            "model_provider": "",
            "model": context.map_or(Value::Null, |c| c.model.clone()),
            "cwd": self.head.cwd,
            "title": title,
            "first_user_message": first,
            "preview": first,
            "sandbox_policy": context
                .and_then(|c| c.sandbox_policy.clone())
                .unwrap_or_else(|| r#"{"type":"danger-full-access"}"#.to_owned()),
            "approval_mode": context
                .and_then(|c| c.approval_policy.as_deref())
                .unwrap_or("on-request"),
            "tokens_used": 0,
            "has_user_event": i64::from(self.user_event_written),
            "archived": 0,
            "cli_version": rollout.cli_version,
            "originator": rollout.originator,
            "history_mode": history_mode,
            "memory_mode": "enabled",
        });
        let Value::Object(columns) = columns else {
            unreachable!("json! of an object literal is an object")
        };
        RowWrite {
            database: PathBuf::from("state_5.sqlite"),
            table: "threads".into(),
            key: vec!["id".into()],
            columns,
            root_relative: vec!["rollout_path".into()],
            ..RowWrite::default()
        }
    }
}

/// Returns a hash of a call id, for [`Writer::used_ids`].
pub(super) fn id_hash(id: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    // Fixed keys: the same session renders the same ids on every run.
    let mut h = std::hash::DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

/// Returns the first string among `keys` in a payload.
pub(super) fn str_field<'v>(p: &'v Value, keys: &[&str]) -> Option<&'v str> {
    keys.iter().find_map(|k| p.get(*k).and_then(Value::as_str))
}

/// Returns the text of a canonical message payload (`text`, or `content`
/// as a string or a list of text blocks).
pub(super) fn payload_text(p: &Value) -> String {
    if let Some(t) = p.get("text").and_then(Value::as_str) {
        return t.to_owned();
    }
    match p.get("content") {
        Some(c) => content_text(c),
        None => String::new(),
    }
}

/// Says whether a canonical message has content blocks other than text.
pub(super) fn has_non_text_parts(p: &Value) -> bool {
    p.get("content")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            parts.iter().any(|b| {
                b.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !t.ends_with("text"))
            })
        })
}

/// Returns a timestamp in the form Codex writes (`…T07:42:06.150Z`).
pub(super) fn codex_ts(ts: &str, now: &str) -> String {
    match FileStamp::parse(ts).or_else(|| FileStamp::parse(now)) {
        Some(s) => s.iso_ms,
        None => ts.to_owned(),
    }
}

/// Holds the parts of a UTC time that name a rollout file.
pub(super) struct FileStamp {
    pub(super) year: String,
    pub(super) month: String,
    pub(super) day: String,
    /// `YYYY-MM-DDThh-mm-ss`, the time in the file name.
    pub(super) file_time: String,
    /// `YYYY-MM-DDThh:mm:ss.mmmZ`.
    pub(super) iso_ms: String,
    pub(super) epoch_ms: i64,
}

impl FileStamp {
    /// Parses an RFC 3339 time in UTC (`Z` or `+00:00`, with or without
    /// fractional seconds); other offsets are refused rather than
    /// converted, since the file name is UTC here and a local time would
    /// name the wrong day.
    pub(super) fn parse(ts: &str) -> Option<FileStamp> {
        let utc = ts.ends_with(['Z', 'z']) || ts.ends_with("+00:00");
        let at: jiff::Timestamp = ts.parse().ok().filter(|_| utc)?;
        // Milliseconds, truncated as the client writes them.
        let at = jiff::Timestamp::from_millisecond(at.as_millisecond()).ok()?;
        let f = |spec: &str| at.strftime(spec).to_string();
        Some(FileStamp {
            year: f("%Y"),
            month: f("%m"),
            day: f("%d"),
            file_time: f("%Y-%m-%dT%H-%M-%S"),
            iso_ms: f("%Y-%m-%dT%H:%M:%S%.3fZ"),
            epoch_ms: at.as_millisecond(),
        })
    }
}
