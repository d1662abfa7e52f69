//! The Codex CLI rollout records, as codex-cli 0.171.0 writes them.
//!
//! These types only *read* what the mapping in `mod.rs` needs; they are
//! forgiving on purpose (every field defaulted, unknown variants collected
//! as `Other`), because a rollout from a newer client must still be
//! captured. Fidelity does not come from these structs: the mapping keeps
//! each whole line as a JSON value next to the event it produced, so fields
//! this file does not name survive a capture and write-back unchanged.
//!
//! The records on every line (the envelope, response items, UI events) are
//! views borrowed from that parsed line, read member by member with the
//! rules `#[serde(default)]` would apply: deserializing them would copy
//! their strings (and, for tagged enums, the whole payload) once more per
//! line, which was most of the cost of a capture. The rarer records
//! (`session_meta`, `turn_context`, …) are plain serde structs.
//!
//! Not here: mapping to canonical events, and writing. The writer in
//! `mod.rs` builds lines with `serde_json::json!` so that the field set of a
//! rendered rollout is visible in one place, next to the format notes.

use serde::Deserialize;
use serde_json::{Map, Value};

/// Holds one line of a rollout: the envelope around every record.
///
/// `ordinal` (paginated rollouts) and `metadata` (on `response_item` lines)
/// are read from the raw line where needed and otherwise ride along in it.
#[derive(Clone, Copy, Debug)]
pub struct Line<'a> {
    /// When the line was written; the client treats a file without it as
    /// empty, so the writer always sets it.
    pub timestamp: Option<&'a str>,
    /// The line type: `session_meta`, `response_item`, `event_msg`, ….
    pub kind: &'a str,
    /// The record itself; its shape depends on `kind`.
    pub payload: &'a Value,
}

impl<'a> Line<'a> {
    /// Reads the envelope of a parsed line.
    pub fn read(line: &'a Map<String, Value>) -> Result<Line<'a>, String> {
        let f = Fields(line);
        Ok(Line {
            timestamp: f.opt_string("timestamp")?,
            kind: f.string("type")?,
            payload: f.value("payload"),
        })
    }
}

/// Holds the `session_meta` payload (line 1 of every rollout).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct SessionMeta {
    /// The thread id, equal to the uuid at the end of the file name.
    #[serde(default)]
    pub id: Option<String>,
    /// When the thread was created.
    #[serde(default)]
    pub timestamp: Option<String>,
    /// The project directory the thread ran in.
    #[serde(default)]
    pub cwd: Option<String>,
    /// `codex_exec`, `codex_cli_rs`, or whatever wrote the file.
    #[serde(default)]
    pub originator: Option<String>,
    /// The client version that created the thread.
    #[serde(default)]
    pub cli_version: Option<String>,
    /// `exec`, `cli`, `vscode`, …; decides whether the TUI picker lists it.
    #[serde(default)]
    pub source: Option<Value>,
    /// The provider id the thread is pinned to on resume.
    #[serde(default)]
    pub model_provider: Option<String>,
    /// For a fork: the parent thread id.
    #[serde(default)]
    pub forked_from_id: Option<String>,
    /// `paginated` for rollouts with ordinals; absent for legacy ones.
    #[serde(default)]
    pub history_mode: Option<String>,
    /// The segment of the thread this file holds (newer clients): a
    /// rotation moves the file's content to an immutable copy under
    /// `rotated_rollout_segments/<thread>/<segment or "initial">/` and
    /// starts the file again with a new segment id and a
    /// `rollout_reference` line naming the copy.
    #[serde(default)]
    pub segment_id: Option<String>,
}

/// Holds the `turn_context` payload: the settings one turn ran with.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct TurnContext {
    /// The turn this context belongs to.
    #[serde(default)]
    pub turn_id: Option<String>,
    /// The working directory of the turn.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The model slug.
    #[serde(default)]
    pub model: Option<String>,
    /// `never`, `on-request`, ….
    #[serde(default)]
    pub approval_policy: Option<Value>,
    /// The sandbox policy object.
    #[serde(default)]
    pub sandbox_policy: Option<Value>,
}

/// Reads one member of a record the way `#[serde(default)]` would: absent
/// is the default, a value of the wrong type is an error.
struct Fields<'a>(&'a Map<String, Value>);

impl<'a> Fields<'a> {
    /// Returns a string member (`String`): absent is `""`, null is an error.
    fn string(&self, key: &str) -> Result<&'a str, String> {
        match self.0.get(key) {
            None => Ok(""),
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(wrong(key, "a string", other)),
        }
    }

    /// Returns an optional string member (`Option<String>`).
    fn opt_string(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(wrong(key, "a string", other)),
        }
    }

    /// Returns any member (`Value`): absent is null.
    fn value(&self, key: &str) -> &'a Value {
        self.0.get(key).unwrap_or(&NULL)
    }

    /// Returns a list of parts (`Vec<Part>`): absent is empty.
    fn parts(&self, key: &str) -> Result<Vec<Part<'a>>, String> {
        match self.0.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items.iter().map(Part::read).collect(),
            Some(other) => Err(wrong(key, "a list", other)),
        }
    }

    /// Returns an optional list of parts (`Option<Vec<Part>>`).
    fn opt_parts(&self, key: &str) -> Result<Option<Vec<Part<'a>>>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.parts(key).map(Some),
        }
    }
}

/// The value of an absent member.
static NULL: Value = Value::Null;

/// Describes a member of the wrong type.
fn wrong(key: &str, want: &str, got: &Value) -> String {
    let got = match got {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    };
    format!("`{key}` is {got}, expected {want}")
}

/// Returns the `type` member of a tagged record.
fn tag(payload: &Value) -> Result<(&str, Fields<'_>), String> {
    let Value::Object(map) = payload else {
        return Err("not an object".into());
    };
    match map.get("type") {
        Some(Value::String(t)) => Ok((t, Fields(map))),
        Some(other) => Err(wrong("type", "a string", other)),
        None => Err("missing field `type`".into()),
    }
}

/// Holds a `response_item` payload: one Responses API item the model saw.
///
/// Borrowed from the parsed line, which the event keeps whole: reading an
/// item copies nothing.
#[derive(Clone, Debug)]
pub enum ResponseItem<'a> {
    /// A user, assistant, developer or system message.
    Message {
        /// `user`, `assistant`, `developer`, `system`.
        role: &'a str,
        /// A list of parts; the client silently drops an item whose
        /// content is a plain string, so this stays a raw value here.
        content: &'a Value,
        /// The item id, when the API gave one.
        id: Option<&'a str>,
        /// `commentary` or `final_answer` on assistant messages.
        phase: Option<&'a str>,
    },
    /// A reasoning item: readable summaries plus opaque ciphertext.
    Reasoning {
        /// The item id.
        id: Option<&'a str>,
        /// `{type:"summary_text", text}` parts.
        summary: Vec<Part<'a>>,
        /// Raw reasoning text parts, when the provider sends them.
        content: Option<Vec<Part<'a>>>,
        /// Provider-bound ciphertext; only the same API can read it.
        encrypted_content: Option<&'a str>,
    },
    /// A classic function tool call; `arguments` is a JSON string.
    FunctionCall {
        /// The tool name, e.g. `exec_command`, `apply_patch`.
        name: &'a str,
        /// The arguments as the model wrote them (JSON text).
        arguments: &'a str,
        /// Pairs the call with its output.
        call_id: &'a str,
        /// The item id.
        id: Option<&'a str>,
    },
    /// The output of a function call: a string or a list of parts.
    FunctionCallOutput {
        /// The call this answers.
        call_id: &'a str,
        /// A string, a list of parts, or an object with `content`.
        output: &'a Value,
    },
    /// A freeform tool call (code mode `exec`, freeform `apply_patch`).
    CustomToolCall {
        /// The tool name.
        name: &'a str,
        /// The free text the model wrote (JavaScript, a patch, …).
        input: &'a str,
        /// Pairs the call with its output.
        call_id: &'a str,
        /// The item id.
        id: Option<&'a str>,
    },
    /// The output of a freeform tool call.
    CustomToolCallOutput {
        /// The call this answers.
        call_id: &'a str,
        /// A string or a list of parts.
        output: &'a Value,
    },
    /// The in-band tool list sent as the first item with the default model.
    AdditionalTools,
    /// An opaque remote-compaction result.
    Compaction {
        /// Provider-bound ciphertext.
        encrypted_content: Option<&'a str>,
    },
    /// Any item type this build does not know (web search, local shell, …).
    Other,
}

impl<'a> ResponseItem<'a> {
    /// Reads an item; an error says which member has the wrong shape.
    pub fn read(payload: &'a Value) -> Result<ResponseItem<'a>, String> {
        let (kind, f) = tag(payload)?;
        Ok(match kind {
            "message" => ResponseItem::Message {
                role: f.string("role")?,
                content: f.value("content"),
                id: f.opt_string("id")?,
                phase: f.opt_string("phase")?,
            },
            "reasoning" => ResponseItem::Reasoning {
                id: f.opt_string("id")?,
                summary: f.parts("summary")?,
                content: f.opt_parts("content")?,
                encrypted_content: f.opt_string("encrypted_content")?,
            },
            "function_call" => ResponseItem::FunctionCall {
                name: f.string("name")?,
                arguments: f.string("arguments")?,
                call_id: f.string("call_id")?,
                id: f.opt_string("id")?,
            },
            "function_call_output" => ResponseItem::FunctionCallOutput {
                call_id: f.string("call_id")?,
                output: f.value("output"),
            },
            "custom_tool_call" => ResponseItem::CustomToolCall {
                name: f.string("name")?,
                input: f.string("input")?,
                call_id: f.string("call_id")?,
                id: f.opt_string("id")?,
            },
            "custom_tool_call_output" => ResponseItem::CustomToolCallOutput {
                call_id: f.string("call_id")?,
                output: f.value("output"),
            },
            "additional_tools" => ResponseItem::AdditionalTools,
            "compaction" => ResponseItem::Compaction {
                encrypted_content: f.opt_string("encrypted_content")?,
            },
            _ => ResponseItem::Other,
        })
    }
}

/// Holds one part of a message content list or a reasoning summary.
#[derive(Clone, Debug, Default)]
pub struct Part<'a> {
    /// `input_text`, `output_text`, `summary_text`, `input_image`, ….
    pub kind: &'a str,
    /// The text, for text parts.
    pub text: Option<&'a str>,
}

impl<'a> Part<'a> {
    fn read(part: &'a Value) -> Result<Part<'a>, String> {
        let Value::Object(map) = part else {
            return Err(wrong("part", "an object", part));
        };
        let f = Fields(map);
        Ok(Part {
            kind: f.string("type")?,
            text: f.opt_string("text")?,
        })
    }
}

/// Holds an `event_msg` payload: a UI event, never sent to the model.
///
/// Borrowed from the parsed line, like [`ResponseItem`].
#[derive(Clone, Debug)]
pub enum EventMsg<'a> {
    /// Legacy: the text the user typed for a turn.
    UserMessage {
        /// The prompt text.
        message: &'a str,
    },
    /// Legacy: an assistant message as shown in the UI.
    AgentMessage {
        /// The text.
        message: &'a str,
    },
    /// Paginated: one finished UI item (user message, command, …).
    ItemCompleted {
        /// The item; only `CommandExecution` is mapped on its own.
        item: &'a Value,
        /// The turn the item belongs to.
        turn_id: Option<&'a str>,
    },
    /// A turn started.
    TaskStarted {
        /// The turn id.
        turn_id: Option<&'a str>,
    },
    /// A turn ended.
    TaskComplete {
        /// The turn id.
        turn_id: Option<&'a str>,
        /// The last assistant text of the turn.
        last_agent_message: Option<&'a str>,
    },
    /// Token accounting after a model response.
    TokenCount {
        /// `total_token_usage`, `last_token_usage`, `model_context_window`.
        info: &'a Value,
    },
    /// Any other UI event (reasoning deltas, settings, …), or one whose
    /// members have the wrong shape: kept as meta.
    Other,
}

impl<'a> EventMsg<'a> {
    /// Reads an event; one that cannot be read is [`EventMsg::Other`].
    pub fn read(payload: &'a Value) -> EventMsg<'a> {
        Self::try_read(payload).unwrap_or(EventMsg::Other)
    }

    fn try_read(payload: &'a Value) -> Result<EventMsg<'a>, String> {
        let (kind, f) = tag(payload)?;
        Ok(match kind {
            "user_message" => EventMsg::UserMessage {
                message: f.string("message")?,
            },
            "agent_message" => EventMsg::AgentMessage {
                message: f.string("message")?,
            },
            "item_completed" => EventMsg::ItemCompleted {
                item: f.value("item"),
                turn_id: f.opt_string("turn_id")?,
            },
            "task_started" => EventMsg::TaskStarted {
                turn_id: f.opt_string("turn_id")?,
            },
            "task_complete" => EventMsg::TaskComplete {
                turn_id: f.opt_string("turn_id")?,
                last_agent_message: f.opt_string("last_agent_message")?,
            },
            "token_count" => EventMsg::TokenCount {
                info: f.value("info"),
            },
            _ => EventMsg::Other,
        })
    }
}

/// Holds the `CommandExecution` item of an `item_completed` event.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CommandExecution {
    /// The UI item id.
    #[serde(default)]
    pub id: Option<String>,
    /// The argv, typically `["/bin/bash", "-lc", "<script>"]`.
    #[serde(default)]
    pub command: Vec<String>,
    /// The working directory, as a `file://` URL.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Everything the command printed.
    #[serde(default)]
    pub aggregated_output: Option<String>,
    /// The exit status, when it finished.
    #[serde(default)]
    pub exit_code: Option<i64>,
    /// `completed`, `failed`, ….
    #[serde(default)]
    pub status: Option<String>,
}

/// Holds the `compacted` payload: the history that replaces older items.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Compacted {
    /// The local summary text ("Another language model started …"), or
    /// empty for a remote compaction.
    #[serde(default)]
    pub message: String,
    /// The new history the next request starts from.
    #[serde(default)]
    pub replacement_history: Vec<Value>,
}
