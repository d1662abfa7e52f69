//! The Codex CLI adapter: rollout lines to canonical events and back.
//!
//! A Codex thread is one append-only JSONL rollout under
//! `CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread id>.jsonl`
//! (`shared/formats/codex.md`). This module maps one rollout, line by line,
//! and renders canonical events back into one. It does no IO: `ops` reads
//! the bytes and applies the [`ChangeSet`], including the `threads` row
//! described by [`RowWrite`].
//!
//! # What each line becomes
//!
//! Every line gives exactly one *primary* event, and that event keeps the
//! whole line, parsed, under [`NATIVE_KEY`] (`payload.native`). That is what
//! makes L2 write-back faithful: a session that came from Codex is rendered
//! by writing those lines back, not by re-deriving them from the canonical
//! fields. The canonical fields beside it are for everyone else (search,
//! the compiler, other agents):
//!
//! | line | event |
//! | --- | --- |
//! | `session_meta` | `session.start` (`cwd`, `originator`, `cli_version`, `source`, `model_provider`, `forked_from_id`) |
//! | `response_item` `message` user | `message.user` (`text`); a harness-injected element such as `<environment_context>` is `meta` with `injected: true` |
//! | `response_item` `message` assistant | `message.assistant` (`text`, `phase`) |
//! | `response_item` `message` developer/system, `additional_tools` | `meta` (`role`, `text`) |
//! | `response_item` `reasoning` | `message.thinking` (`text` = summaries; `encrypted: true` when it has ciphertext, which stays only in `native`: it is bound to the Codex API) |
//! | `response_item` `function_call` / `custom_tool_call` | `tool.call` (`call_id`, `name`, `arguments`; `freeform: true` for custom tools) |
//! | `response_item` `*_output` | `tool.result` (`call_id`, `name`, `output` text), `parent_seq` = the call |
//! | `compacted` | `checkpoint` (`reason: "compaction"`, `summary`, `remote`, `retained_user_messages`) |
//! | `event_msg` `item_completed` `CommandExecution` | `command.run` (`cmd`, `argv`, `exit_code`, `output_tail`, `cwd`) |
//! | `turn_context` | `meta` (`model`, `cwd`, `approval_policy`, `sandbox_policy`, `turn_id`) |
//! | `event_msg` `user_message` | `meta` (`text`): the same prompt is a `response_item`, so it is not a second `message.user` |
//! | `event_msg` `token_count`, `task_started`, `task_complete` | `meta` (`usage` / `turn_id`, `last_agent_message`) |
//! | anything else | `meta` |
//!
//! Every `meta` event names its record in `payload.codex` (`event_msg.agent_reasoning`).
//!
//! *Derived* events carry no `native` and follow the record they come from:
//! a `command.run` after the output of a shell call (`exec_command`,
//! `shell`, `shell_command`) when no `CommandExecution` UI item reported it
//! already, and one `file.edit` (`path`, `diff`) per file of an
//! `apply_patch` call, after its output. Render skips them for Codex, since
//! the lines they were derived from are written anyway.
//!
//! Origins: `native_id` is `<thread id>#L<line>` for a primary event and
//! `<thread id>#L<line>/<type>` for a derived one, unique per event, because
//! `(agent, native_id)` is what makes a capture idempotent and item ids repeat
//! across a `response_item` and its UI echo. `native_seq` is the line number.
//!
//! # Rendering
//!
//! A session whose events carry Codex lines is written back line by line,
//! with these rewrites, each one needed by the client:
//!
//! * `session_meta`: `id` (and `session_id`) become the requested native id
//!   (it must match the file name); `cwd` and paths under it move to the
//!   requested cwd; `source` becomes `cli` unless it already is interactive,
//!   so the TUI `/resume` picker lists it; `model_provider` is left out,
//!   since Codex refuses to resume a thread under another provider.
//! * `turn_context` and `thread_settings_applied`: paths under the recorded
//!   cwd move to the requested one (`--last` and the picker match the newest
//!   turn context's cwd), and `model_provider_id` is left out (the client
//!   pins the provider from it too).
//!
//! Every other line is history and is written as captured (as JSON values:
//! key order and spacing are not kept), including model-visible items and
//! `world_state`, which still hold the old cwd: that is what the model was
//! told, and the client can see the move from it.
//!
//! Forks: a Codex fork rollout starts with a `session_meta` whose
//! `history_base` is a byte offset into the parent rollout. Rendered alone it
//! keeps that reference (and says in the loss report that the parent must be
//! present as Codex wrote it); rendered with its parent's events first (a
//! canonical fork), it becomes one self-contained rollout under the fork's
//! header, because re-serialized parent lines would not match the offset.
//! The header is the `session_meta` of the canonical header's native id (or
//! the first one, without an id); a later one of another thread, as in a
//! concatenated rollout, is not written.
//!
//! The render streams: each event is taken once, its line is written as
//! soon as the header is out, and buffered bytes go to the sink in chunks
//! of 64 KiB. The `threads` row is built at the end from facts
//! gathered on the way (first user text, last timestamp, newest
//! `turn_context`). The one exception is a canonical fork: the parent's
//! lines come before the fork's `session_meta`, which must be the first
//! line, so they are held until it arrives.
//!
//! Any other session becomes a *legacy* rollout (formats/codex.md §6.1, §7):
//! a minimal `session_meta`, then per canonical user, assistant and tool
//! event the `response_item`s and the legacy `user_message` /
//! `agent_message` UI events the client itself writes for legacy threads.
//! Reasoning from another agent is not written (the API only accepts its own
//! ciphertext), and is reported as a loss.
//!
//! Besides the rollout, the change set holds the `threads` row the TUI
//! picker lists from ([`RowWrite`], inserted by `ops` only into an existing
//! `state_5.sqlite`) and, for a titled session, a `session_index.jsonl`
//! entry (`{id, thread_name, updated_at}`, appended; newest wins).
//!
//! Not here: finding rollouts (`ops` walks the store with
//! [`Adapter::is_session_file`]), and writing SQLite (the row is a value).

pub mod wire;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use git_session_schema::{Agent, Event, Level, Origin, kinds};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::registry::{AgentSpec, TokenizerFamily, ToolKind};
use crate::source::Source;
use crate::{
    Adapter, ChangeSet, FileSink, FileWrite, NativeParent, NativeSession, ParseInput, Parsed,
    RenderError, RenderHead, RowWrite, Warning,
};

use wire::{CommandExecution, Compacted, EventMsg, Line, ResponseItem, SessionMeta, TurnContext};

/// The payload key that holds the whole native rollout line of a primary event.
///
/// **Stored and relied on by write-back.** Renaming it orphans the native
/// lines of every captured Codex session.
pub const NATIVE_KEY: &str = "native";

/// The actor of Codex's own messages and tool calls.
const ACTOR_AGENT: &str = "agent:codex";

/// Codex rejects call ids longer than this on resume (formats/codex.md).
const MAX_CALL_ID: usize = 64;

/// How much of a command's output `command.run` keeps, in bytes.
const OUTPUT_TAIL: usize = 2000;

/// Adapts the Codex CLI (`codex`) rollout format.
#[derive(Clone, Copy, Debug, Default)]
pub struct Codex;

/// Holds what a parse of one rollout must remember for the next slice.
///
/// Serialized into [`crate::ParseState`]; local and rebuildable, so its
/// shape may change between builds (an unreadable state is a warning and a
/// fresh start).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct State {
    /// The thread id from `session_meta`, for origins.
    #[serde(default)]
    thread: Option<String>,
    /// The last line timestamp, for lines that lack one.
    #[serde(default)]
    last_ts: Option<String>,
    /// Tool calls by call id: their seq and what their result needs.
    #[serde(default)]
    calls: BTreeMap<String, Call>,
    /// Whether `session_meta` was seen (only the first one is the session's).
    #[serde(default)]
    meta_seen: bool,
    /// Session facts found so far, returned by every call (not only the one
    /// that saw `session_meta`), so a slice's [`NativeSession`] is complete.
    #[serde(default)]
    facts: Facts,
}

/// Holds the [`NativeSession`] facts in serializable form.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct Facts {
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    created: Option<String>,
    #[serde(default)]
    parent: Option<String>,
}

/// Remembers one tool call until (and after) its output arrives.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct Call {
    seq: u64,
    name: String,
    /// The shell command, for shell-like calls.
    #[serde(default)]
    cmd: Option<String>,
    /// The patch text, for `apply_patch` calls.
    #[serde(default)]
    patch: Option<String>,
    /// A `CommandExecution` UI item arrived while the call was open, so the
    /// output needs no derived `command.run`.
    #[serde(default)]
    reported: bool,
}

/// Codex CLI's row of the registry.
pub static SPEC: AgentSpec = AgentSpec {
    agent: Agent::Codex,
    display: "Codex CLI",
    env: &["CODEX_HOME"],
    default_store: ".codex",
    sources: &[Source::Jsonl {
        files: &[
            "sessions/**/rollout-*.jsonl",
            "archived_sessions/**/rollout-*.jsonl",
        ],
    }],
    tools: &[
        (ToolKind::Shell, "exec_command"),
        (ToolKind::Shell, "shell"),
        (ToolKind::Shell, "shell_command"),
        (ToolKind::Shell, "local_shell"),
        (ToolKind::Edit, "apply_patch"),
        (ToolKind::Todo, "update_plan"),
        (ToolKind::Web, "web_search"),
    ],
    tokenizer: TokenizerFamily::O200kBase,
    resume: "codex resume {id}",
};

impl Adapter for Codex {
    fn spec(&self) -> &'static AgentSpec {
        &SPEC
    }

    fn store_root(&self, env: &dyn Fn(&str) -> Option<String>, home: &Path) -> PathBuf {
        match env("CODEX_HOME") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => home.join(".codex"),
        }
    }

    fn is_session_file(&self, relative: &Path) -> bool {
        let text = relative.to_string_lossy().replace('\\', "/");
        let in_store = SPEC
            .sources
            .iter()
            .flat_map(|s| s.globs().iter())
            .any(|g| crate::source::glob_match(g, &text));
        let name = relative.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // The client looks threads up by this exact shape: `rollout-` prefix,
        // the id as the last 36 characters before `.jsonl`.
        in_store
            && name
                .strip_suffix(".jsonl")
                .is_some_and(|stem| stem.len() >= 36 && is_uuid(&stem[stem.len() - 36..]))
    }

    fn parse(&self, input: ParseInput<'_>) -> Parsed {
        parse(input)
    }

    fn render_to(
        &self,
        head: RenderHead<'_>,
        events: &mut dyn Iterator<Item = Event>,
        out: &mut dyn FileSink,
    ) -> Result<ChangeSet, RenderError> {
        render(head, events, out)
    }
}

// ---------------------------------------------------------------- parse

/// Accumulates the output of one parse call.
struct Parser<'a> {
    state: State,
    next_seq: u64,
    events: Vec<Event>,
    warnings: Vec<Warning>,
    source: &'a str,
}

fn parse(input: ParseInput<'_>) -> Parsed {
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
    let mut p = Parser {
        state,
        next_seq: input.next_seq,
        events: Vec::new(),
        warnings,
        source: input.source,
    };
    // A trailing piece without a newline is still a line: a whole file that
    // does not end in '\n' must parse the same as its incremental slices.
    for record in input.records.iter() {
        p.line(record.pos.ordinal(), record.bytes);
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
            }),
        },
        events: p.events,
        warnings: p.warnings,
        state,
        ..Default::default()
    }
}

/// Holds what one line maps to, read from the line in place before the
/// line itself moves into the event as [`NATIVE_KEY`].
struct Mapped {
    actor: &'static str,
    kind: &'static str,
    level: Level,
    /// The canonical fields, without `native`.
    body: Value,
    then: Then,
}

/// Says what follows once the primary event of a line has its seq.
enum Then {
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
    fn meta(mut body: Value) -> Mapped {
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
    fn event(actor: &'static str, kind: &'static str, level: Level, mut body: Value) -> Mapped {
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
    fn warn(&mut self, line: u64, message: String) {
        self.warnings.push(Warning {
            line,
            message: format!("{}: {message}", self.source),
        });
    }

    /// Appends an event and returns its seq.
    fn push(
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
        let native_id = match derived {
            None => format!("{thread}#L{line}"),
            Some(kind) => format!("{thread}#L{line}/{kind}"),
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
    fn unparsed(&mut self, line_no: u64, raw: &[u8], why: String) {
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

    fn line(&mut self, line_no: u64, raw: &[u8]) {
        let line: Map<String, Value> = match serde_json::from_slice(raw) {
            Ok(Value::Object(line)) => line,
            Ok(_) => return self.unparsed(line_no, raw, "not a JSON object".into()),
            Err(e) => return self.unparsed(line_no, raw, format!("not JSON ({e})")),
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
        // The line moves into the event: it is parsed once and never copied.
        body[NATIVE_KEY] = Value::Object(line);
        let seq = self.push((line_no, &ts), actor, kind, level, body, None);
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

    fn session_meta(&mut self, line_no: u64, ts: &str, payload: &Value) -> Mapped {
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
        self.state.thread = meta.id.clone();
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

    fn response_item(&mut self, line_no: u64, payload: &Value) -> Mapped {
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
                    "user" if !is_injected(&text) => Mapped::event(
                        "user",
                        kinds::MESSAGE_USER,
                        Level::History,
                        json!({ "text": text, "item_id": id }),
                    ),
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
                Mapped::meta(json!({ "codex": format!("response_item.{kind}") }))
            }
        }
    }

    fn tool_result(&mut self, line_no: u64, call_id: &str, output: &Value) -> Mapped {
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
        let mut mapped = Mapped::event(
            "tool",
            kinds::TOOL_RESULT,
            Level::History,
            json!({
                "call_id": call_id,
                "name": call.as_ref().map(|c| c.name.as_str()),
                "output": text,
            }),
        );
        mapped.then = Then::Output {
            call_id: call_id.to_owned(),
            call,
            text,
        };
        mapped
    }

    /// Links a tool output (event `seq`) to its call and appends what the
    /// call did: a `command.run` for a shell call no UI item reported, a
    /// `file.edit` per file of a patch.
    fn derive(
        &mut self,
        line_no: u64,
        ts: &str,
        seq: u64,
        call_id: &str,
        call: Option<Call>,
        text: &str,
    ) {
        if let Some(e) = self.events.last_mut() {
            e.parent_seq = call.as_ref().map(|c| c.seq);
        }
        let Some(call) = call else { return };
        if let (Some(cmd), false) = (&call.cmd, call.reported) {
            let mut body = json!({
                "cmd": cmd,
                "exit_code": exit_code(text),
                "output_tail": tail(command_output(text), OUTPUT_TAIL),
                "call_id": call_id,
            });
            strip_nulls(&mut body);
            let derived = self.push(
                (line_no, ts),
                ACTOR_AGENT,
                kinds::COMMAND_RUN,
                Level::Context,
                body,
                Some(kinds::COMMAND_RUN),
            );
            self.set_parent(derived, seq);
        }
        if let Some(patch) = &call.patch {
            for (path, diff) in patch_files(patch) {
                let body = json!({ "path": path, "diff": diff, "call_id": call_id });
                let derived = self.push(
                    (line_no, ts),
                    ACTOR_AGENT,
                    kinds::FILE_EDIT,
                    Level::Context,
                    body,
                    Some(&format!("{}:{path}", kinds::FILE_EDIT)),
                );
                self.set_parent(derived, seq);
            }
        }
    }

    fn set_parent(&mut self, seq: u64, parent: u64) {
        if let Some(e) = self.events.iter_mut().rev().find(|e| e.seq == seq) {
            e.parent_seq = Some(parent);
        }
    }

    fn event_msg(&mut self, payload: &Value) -> Mapped {
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

    fn command_execution(&mut self, exec: CommandExecution) -> Mapped {
        // The UI item is the only place code-mode commands (run from
        // JavaScript inside `exec`) show their argv and exit code, so it is
        // the `command.run`; any open shell call is marked as reported.
        for call in self.state.calls.values_mut() {
            call.reported = true;
        }
        let cmd = match exec.command.as_slice() {
            [shell, flag, script]
                if flag.starts_with('-') && flag.ends_with('c') && !shell.is_empty() =>
            {
                script.clone()
            }
            argv => argv.join(" "),
        };
        Mapped::event(
            ACTOR_AGENT,
            kinds::COMMAND_RUN,
            Level::Context,
            json!({
                "cmd": cmd,
                "argv": exec.command,
                "exit_code": exec.exit_code,
                "output_tail": exec.aggregated_output.as_deref().map(|o| tail(o, OUTPUT_TAIL)),
                "cwd": exec.cwd.as_deref().map(|c| c.strip_prefix("file://").unwrap_or(c)),
                "status": exec.status,
                "item_id": exec.id,
            }),
        )
    }
}

/// Maps a tool call line; its seq is remembered once it has one.
fn tool_call(body: Value, call_id: &str, call: Call) -> Mapped {
    let mut mapped = Mapped::event(ACTOR_AGENT, kinds::TOOL_CALL, Level::History, body);
    mapped.then = Then::Call(call_id.to_owned(), call);
    mapped
}

/// Maps a `compacted` line to a checkpoint.
fn compacted(payload: &Value) -> Mapped {
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
fn strip_nulls(body: &mut Value) {
    if let Value::Object(map) = body {
        map.retain(|_, v| !v.is_null());
    }
}

/// Returns the text parts of a message `content`, joined by newlines.
fn content_text(content: &Value) -> String {
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
fn output_text(output: &Value) -> String {
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
fn is_injected(text: &str) -> bool {
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

/// Finds the exit code in an exec tool output ("Process exited with code N").
fn exit_code(output: &str) -> Option<i64> {
    for marker in ["Process exited with code ", "Exit code: ", "\"exit_code\":"] {
        if let Some(pos) = output.find(marker) {
            let digits: String = output[pos + marker.len()..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '-')
                .collect();
            if let Ok(n) = digits.parse() {
                return Some(n);
            }
        }
    }
    None
}

/// Returns what follows the `Output:` header of an exec tool output.
fn command_output(output: &str) -> &str {
    match output.find("Output:\n") {
        Some(pos) => &output[pos + "Output:\n".len()..],
        None => output,
    }
}

/// Returns at most the last `max` bytes of `text`, cut at a char boundary.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

/// Splits an `apply_patch` envelope into `(path, section)` per file.
fn patch_files(patch: &str) -> Vec<(String, String)> {
    const HEADS: [&str; 3] = ["*** Add File: ", "*** Update File: ", "*** Delete File: "];
    let mut files: Vec<(String, String)> = Vec::new();
    for line in patch.lines() {
        if let Some(path) = HEADS.iter().find_map(|h| line.strip_prefix(h)) {
            files.push((path.trim().to_owned(), String::new()));
        } else if line.starts_with("*** End Patch") || line.starts_with("*** Begin Patch") {
            continue;
        }
        if let Some((_, diff)) = files.last_mut() {
            diff.push_str(line);
            diff.push('\n');
        }
    }
    files
}

/// Says whether `s` is a hyphenated UUID (any version).
fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

// ---------------------------------------------------------------- render

/// How many rendered bytes the writer holds before sending them to the
/// sink: `ops` writes each chunk straight to a file, so one write per line
/// would be one system call per line; this keeps the buffer small and fixed.
const FLUSH_AT: usize = 64 * 1024;

/// Returns the Codex line an event carries, if it came from a Codex rollout.
fn native_line(event: &Event) -> Option<&Map<String, Value>> {
    if event.agent != Agent::Codex {
        return None;
    }
    event.payload.get(NATIVE_KEY)?.as_object()
}

/// Takes the Codex line out of an event: the render owns the events it is
/// handed, so the line is moved into the output instead of copied.
fn take_native_line(event: &mut Event) -> Option<Map<String, Value>> {
    if event.agent != Agent::Codex {
        return None;
    }
    match event.payload.get_mut(NATIVE_KEY)? {
        Value::Object(line) => Some(std::mem::take(line)),
        _ => None,
    }
}

/// Holds the rewrites a faithful render applies to Codex lines.
struct Remap<'a> {
    from_cwd: Option<String>,
    to_cwd: &'a str,
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
fn move_path(s: &str, from: &str, to: &str) -> Option<String> {
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
enum Header {
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
struct Rollout {
    path: PathBuf,
    stamp: FileStamp,
    source: String,
    cli_version: String,
    originator: String,
}

/// Holds the settings of the newest `turn_context` line, for the row.
struct Context {
    model: Value,
    sandbox_policy: Option<String>,
    approval_policy: Option<String>,
}

/// Writes a rollout line by line as the events come.
///
/// What it keeps is small and does not grow with the session, except the
/// ids of foreign tool calls still waiting for their result, and the
/// inherited lines of a canonical fork (see [`Header::Waiting`]), which
/// cannot be written before the fork's own header line.
struct Writer<'a> {
    head: RenderHead<'a>,
    out: &'a mut dyn FileSink,
    header: Header,
    /// Lines that arrived before the header, with whether they get the
    /// cwd rewrites (only while [`Header::Waiting`]).
    pending: Vec<(Value, bool)>,
    /// Serialized lines not yet sent to the sink.
    buf: Vec<u8>,
    remap: Remap<'a>,
    /// How often each kind of loss occurred.
    losses: BTreeMap<String, usize>,
    /// Original ids of foreign tool calls without a result yet, to the ids
    /// written (Codex caps them at 64 chars); forgotten once answered.
    call_ids: HashMap<String, String>,
    /// Hashes of the call ids written, to keep them unique. A collision
    /// only renames a call to `call_gs_<seq>`, which is still unique.
    used_ids: HashSet<u64>,
    /// Next ordinal, for paginated rollouts (None for legacy ones).
    ordinal: Option<u64>,
    first_user_text: Option<String>,
    user_event_written: bool,
    response_item_written: bool,
    /// The timestamp of the last line written.
    last_ts: String,
    context: Option<Context>,
}

fn render(
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
        losses: BTreeMap::new(),
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
fn is_session_meta(event: &Event) -> bool {
    native_line(event)
        .and_then(|l| l.get("type"))
        .and_then(Value::as_str)
        == Some("session_meta")
}

/// Says whether a Codex event was derived from another line (no line of its own).
fn is_derived(event: &Event) -> bool {
    event
        .origin
        .as_ref()
        .and_then(|o| o.native_id.as_deref())
        .is_some_and(|id| id.contains('/'))
        || matches!(event.kind.as_str(), kinds::COMMAND_RUN | kinds::FILE_EDIT)
}

impl Writer<'_> {
    fn loss(&mut self, what: impl Into<String>) {
        *self.losses.entry(what.into()).or_default() += 1;
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
        serde_json::to_writer(&mut self.buf, &line).expect("JSON values always serialize");
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
            losses: self
                .losses
                .iter()
                .map(|(what, n)| format!("{what} ({n})"))
                .collect(),
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
                if has_non_text_parts(p) || !event.refs.is_empty() {
                    // Images travel as artifacts; writing them as Codex
                    // `input_image` parts is not done yet.
                    self.loss("image-omitted: message.user image or file parts not written");
                }
                if text.is_empty() {
                    self.loss("message-empty: message.user without text not written");
                    return Ok(());
                }
                if self.first_user_text.is_none() {
                    self.first_user_text = Some(text.clone());
                }
                self.push_line(
                    &event.ts,
                    "response_item",
                    json!({"type": "message", "role": "user",
                           "content": [{"type": "input_text", "text": text}]}),
                )?;
                // The picker, `--last` and the title key on this UI event.
                self.push_line(
                    &event.ts,
                    "event_msg",
                    json!({"type": "user_message", "message": text, "images": [],
                           "local_images": [], "text_elements": []}),
                )?;
                self.user_event_written = true;
            }
            kinds::MESSAGE_ASSISTANT => {
                let text = payload_text(p);
                if text.is_empty() {
                    self.loss("message-empty: message.assistant without text not written");
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
                // A shell call becomes Codex's own shell tool (formats/codex.md:
                // prefer exec_command-shaped calls); other tools keep their
                // name, which Codex does not have.
                if let Some(cmd) = crate::shell_command(&name, &input) {
                    name = "exec_command".to_owned();
                    input = json!({ "cmd": cmd });
                } else {
                    self.loss(format!("tool-unmapped: {name} has no Codex equivalent; written under its own name"));
                }
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
                    self.loss("tool-result-orphaned: tool.result without a written tool.call not written");
                    return Ok(());
                };
                let output = ["output", "content", "text", "result"]
                    .iter()
                    .find_map(|k| p.get(*k))
                    .map(output_text)
                    .unwrap_or_default();
                self.push_line(
                    &event.ts,
                    "response_item",
                    json!({"type": "function_call_output", "call_id": call_id, "output": output}),
                )?;
            }
            kinds::MESSAGE_THINKING => {
                self.loss("thinking-dropped: message.thinking not written: Codex only sends its own reasoning back")
            }
            kinds::COMMAND_RUN | kinds::FILE_EDIT | kinds::FILE_READ => self.loss(format!(
                "derived-event-folded: {} not written on its own: its tool.call and tool.result carry it",
                event.kind
            )),
            kinds::SESSION_START => {}
            other => self.loss(format!("event-unmapped: {other} has no Codex form")),
        }
        Ok(())
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
fn id_hash(id: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    // Fixed keys: the same session renders the same ids on every run.
    let mut h = std::hash::DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

/// Returns the first string among `keys` in a payload.
fn str_field<'v>(p: &'v Value, keys: &[&str]) -> Option<&'v str> {
    keys.iter().find_map(|k| p.get(*k).and_then(Value::as_str))
}

/// Returns the text of a canonical message payload (`text`, or `content`
/// as a string or a list of text blocks).
fn payload_text(p: &Value) -> String {
    if let Some(t) = p.get("text").and_then(Value::as_str) {
        return t.to_owned();
    }
    match p.get("content") {
        Some(c) => content_text(c),
        None => String::new(),
    }
}

/// Says whether a canonical message has content blocks other than text.
fn has_non_text_parts(p: &Value) -> bool {
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
fn codex_ts(ts: &str, now: &str) -> String {
    match FileStamp::parse(ts).or_else(|| FileStamp::parse(now)) {
        Some(s) => s.iso_ms,
        None => ts.to_owned(),
    }
}

/// Holds the parts of a UTC time that name a rollout file.
struct FileStamp {
    year: String,
    month: String,
    day: String,
    /// `YYYY-MM-DDThh-mm-ss`, the time in the file name.
    file_time: String,
    /// `YYYY-MM-DDThh:mm:ss.mmmZ`.
    iso_ms: String,
    epoch_ms: i64,
}

impl FileStamp {
    /// Parses `YYYY-MM-DDThh:mm:ss[.fff](Z|+00:00)`; other offsets are
    /// refused rather than guessed, since the file name is UTC here.
    fn parse(ts: &str) -> Option<FileStamp> {
        let b = ts.as_bytes();
        if b.len() < 20
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
        {
            return None;
        }
        let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<i64>().ok();
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
        let rest = &ts[19..];
        let (frac, zone) = match rest.strip_prefix('.') {
            Some(r) => {
                let n = r.bytes().take_while(u8::is_ascii_digit).count();
                (&r[..n], &r[n..])
            }
            None => ("", rest),
        };
        if !matches!(zone, "Z" | "z" | "+00:00")
            || !(1..=12).contains(&mo)
            || !(1..=31).contains(&d)
        {
            return None;
        }
        let mut ms = frac
            .chars()
            .chain("000".chars())
            .take(3)
            .collect::<String>();
        if ms.is_empty() {
            ms = "000".into();
        }
        let millis: i64 = ms.parse().ok()?;
        let days = days_from_civil(y, mo, d);
        let epoch_ms = ((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + millis;
        let mut iso_ms = String::new();
        let _ = write!(iso_ms, "{}.{ms}Z", &ts[..19]);
        Some(FileStamp {
            year: ts[0..4].to_owned(),
            month: ts[5..7].to_owned(),
            day: ts[8..10].to_owned(),
            file_time: format!("{}-{}-{}", &ts[..13], &ts[14..16], &ts[17..19]),
            iso_ms,
            epoch_ms,
        })
    }
}

/// Returns days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests;
