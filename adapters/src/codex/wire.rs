//! The Codex CLI rollout records, as codex-cli 0.171.0 writes them.
//!
//! These types only *read* what the mapping in `mod.rs` needs; they are
//! forgiving on purpose (every field defaulted, unknown variants collected
//! by `#[serde(other)]`), because a rollout from a newer client must still
//! be captured. Fidelity does not come from these structs: the mapping keeps
//! each whole line as a JSON value next to the event it produced, so fields
//! this file does not name survive a capture and write-back unchanged.
//!
//! Not here: mapping to canonical events, and writing. The writer in
//! `mod.rs` builds lines with `serde_json::json!` so that the field set of a
//! rendered rollout is visible in one place, next to the format notes.

use serde::Deserialize;
use serde_json::Value;

/// Holds one line of a rollout: the envelope around every record.
///
/// `ordinal` (paginated rollouts) and `metadata` (on `response_item` lines)
/// are read from the raw line where needed and otherwise ride along in it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Line {
    /// When the line was written; the client treats a file without it as
    /// empty, so the writer always sets it.
    #[serde(default)]
    pub timestamp: Option<String>,
    /// The line type: `session_meta`, `response_item`, `event_msg`, ….
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The record itself; its shape depends on `kind`.
    #[serde(default)]
    pub payload: Value,
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

/// Holds a `response_item` payload: one Responses API item the model saw.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseItem {
    /// A user, assistant, developer or system message.
    Message {
        /// `user`, `assistant`, `developer`, `system`.
        #[serde(default)]
        role: String,
        /// A list of parts; the client silently drops an item whose
        /// content is a plain string, so this stays a raw value here.
        #[serde(default)]
        content: Value,
        /// The item id, when the API gave one.
        #[serde(default)]
        id: Option<String>,
        /// `commentary` or `final_answer` on assistant messages.
        #[serde(default)]
        phase: Option<String>,
    },
    /// A reasoning item: readable summaries plus opaque ciphertext.
    Reasoning {
        /// The item id.
        #[serde(default)]
        id: Option<String>,
        /// `{type:"summary_text", text}` parts.
        #[serde(default)]
        summary: Vec<Part>,
        /// Raw reasoning text parts, when the provider sends them.
        #[serde(default)]
        content: Option<Vec<Part>>,
        /// Provider-bound ciphertext; only the same API can read it.
        #[serde(default)]
        encrypted_content: Option<String>,
    },
    /// A classic function tool call; `arguments` is a JSON string.
    FunctionCall {
        /// The tool name, e.g. `exec_command`, `apply_patch`.
        #[serde(default)]
        name: String,
        /// The arguments as the model wrote them (JSON text).
        #[serde(default)]
        arguments: String,
        /// Pairs the call with its output.
        #[serde(default)]
        call_id: String,
        /// The item id.
        #[serde(default)]
        id: Option<String>,
    },
    /// The output of a function call: a string or a list of parts.
    FunctionCallOutput {
        /// The call this answers.
        #[serde(default)]
        call_id: String,
        /// A string, a list of parts, or an object with `content`.
        #[serde(default)]
        output: Value,
    },
    /// A freeform tool call (code mode `exec`, freeform `apply_patch`).
    CustomToolCall {
        /// The tool name.
        #[serde(default)]
        name: String,
        /// The free text the model wrote (JavaScript, a patch, …).
        #[serde(default)]
        input: String,
        /// Pairs the call with its output.
        #[serde(default)]
        call_id: String,
        /// The item id.
        #[serde(default)]
        id: Option<String>,
    },
    /// The output of a freeform tool call.
    CustomToolCallOutput {
        /// The call this answers.
        #[serde(default)]
        call_id: String,
        /// A string or a list of parts.
        #[serde(default)]
        output: Value,
    },
    /// The in-band tool list sent as the first item with the default model.
    AdditionalTools {},
    /// An opaque remote-compaction result.
    Compaction {
        /// Provider-bound ciphertext.
        #[serde(default)]
        encrypted_content: Option<String>,
    },
    /// Any item type this build does not know (web search, local shell, …).
    #[serde(other)]
    Other,
}

/// Holds one part of a message content list or a reasoning summary.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Part {
    /// `input_text`, `output_text`, `summary_text`, `input_image`, ….
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The text, for text parts.
    #[serde(default)]
    pub text: Option<String>,
}

/// Holds an `event_msg` payload: a UI event, never sent to the model.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventMsg {
    /// Legacy: the text the user typed for a turn.
    UserMessage {
        /// The prompt text.
        #[serde(default)]
        message: String,
    },
    /// Legacy: an assistant message as shown in the UI.
    AgentMessage {
        /// The text.
        #[serde(default)]
        message: String,
    },
    /// Paginated: one finished UI item (user message, command, …).
    ItemCompleted {
        /// The item; only `CommandExecution` is mapped on its own.
        #[serde(default)]
        item: Value,
        /// The turn the item belongs to.
        #[serde(default)]
        turn_id: Option<String>,
    },
    /// A turn started.
    TaskStarted {
        /// The turn id.
        #[serde(default)]
        turn_id: Option<String>,
    },
    /// A turn ended.
    TaskComplete {
        /// The turn id.
        #[serde(default)]
        turn_id: Option<String>,
        /// The last assistant text of the turn.
        #[serde(default)]
        last_agent_message: Option<String>,
    },
    /// Token accounting after a model response.
    TokenCount {
        /// `total_token_usage`, `last_token_usage`, `model_context_window`.
        #[serde(default)]
        info: Value,
    },
    /// Any other UI event (reasoning deltas, settings, …): kept as meta.
    #[serde(other)]
    Other,
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
