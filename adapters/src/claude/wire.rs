//! Claude Code's transcript records as the client writes them.
//!
//! These types are read-only views used by the parser to find the fields it
//! maps (ids, parent links, message content); they are deliberately
//! forgiving: every field is optional, unknown fields land in a flattened
//! `extra` map, and a block type we do not know is kept whole as
//! [`Block::Other`]. They do not decide what a record *means* canonically
//! (that is `mod.rs`'s job), and they are never used to write records: the
//! renderer writes the raw JSON objects kept in the events, so a field this
//! file does not know survives a round trip unchanged.
//!
//! Field names follow the client (camelCase on records, snake_case inside
//! `message`, which is the Anthropic API shape). See `formats/claude.md`.

use serde::Deserialize;
use serde_json::{Map, Value};

/// Holds the fields of one transcript line that every record kind may carry.
///
/// Chain records (`user`, `assistant`, `attachment`, `system`, `progress`)
/// have `uuid`; side records (`last-prompt`, `custom-title`, ...) do not.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Envelope {
    /// The record kind: `user`, `assistant`, `attachment`, `system`, or a
    /// side record type such as `file-history-snapshot`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// This node's id in the conversation tree.
    pub uuid: Option<String>,
    /// The previous node; `null` for a root and for a `compact_boundary`.
    pub parent_uuid: Option<String>,
    /// For a `compact_boundary`: the leaf it replaced.
    pub logical_parent_uuid: Option<String>,
    /// The session the line belongs to (the parent's id in sub-agent files).
    pub session_id: Option<String>,
    /// ISO-8601 UTC with milliseconds.
    pub timestamp: Option<String>,
    /// The writing process's working directory.
    pub cwd: Option<String>,
    /// `true` inside sub-agent transcripts.
    pub is_sidechain: Option<bool>,
    /// The sub-agent id, on sidechain records.
    pub agent_id: Option<String>,
    /// Harness text that is not a user prompt (caveats, reminders).
    pub is_meta: Option<bool>,
    /// The summary message written after a compaction.
    pub is_compact_summary: Option<bool>,
    /// For `system` records: `compact_boundary`, `turn_duration`, ...
    pub subtype: Option<String>,
    /// `custom-title` records: the title given with `-n` or `/rename`.
    pub custom_title: Option<String>,
    /// Old `summary` side records: a generated title for a leaf.
    pub summary: Option<String>,
    /// The API message of `user` and `assistant` records.
    pub message: Option<Message>,
}

/// Holds the API message inside a `user` or `assistant` record.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Message {
    /// `user` or `assistant`.
    pub role: Option<String>,
    /// The API message id (`msg_…`), shared by the records of one response.
    pub id: Option<String>,
    /// The model that wrote an assistant message.
    pub model: Option<String>,
    /// A plain string (typed prompts) or a list of content blocks.
    pub content: Option<Content>,
}

/// Holds a message's content, which the client writes in two shapes.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// A typed prompt or a harness text.
    Text(String),
    /// Content blocks, kept as raw JSON and read with [`Block::from_value`].
    Blocks(Vec<Value>),
}

impl Content {
    /// Returns the content held by `value`, or gives `value` back when it is
    /// neither a string nor a list. Takes the value by move so that large
    /// contents are not copied.
    pub fn from_value(value: Value) -> Result<Content, Value> {
        match value {
            Value::String(s) => Ok(Content::Text(s)),
            Value::Array(blocks) => Ok(Content::Blocks(blocks)),
            other => Err(other),
        }
    }
}

/// Holds one content block, read from its raw JSON.
#[derive(Clone, Debug)]
pub enum Block {
    /// `{"type":"text","text":…}`.
    Text(TextBlock),
    /// `{"type":"thinking","thinking":…,"signature":…}`.
    Thinking(ThinkingBlock),
    /// `{"type":"redacted_thinking","data":…}`: encrypted reasoning.
    RedactedThinking(RedactedThinkingBlock),
    /// `{"type":"tool_use","id":…,"name":…,"input":…}`.
    ToolUse(ToolUseBlock),
    /// `{"type":"tool_result","tool_use_id":…,"content":…,"is_error":…}`.
    ToolResult(ToolResultBlock),
    /// `{"type":"image","source":{"type":"base64","media_type":…,"data":…}}`.
    Image(ImageBlock),
    /// Any other block (server tools, documents, a type added later), whole.
    Other(Value),
}

impl Block {
    /// Returns the typed view of `value`, or [`Block::Other`] when its type is
    /// unknown or its fields do not have the expected shape.
    pub fn from_value(value: Value) -> Block {
        fn typed<T: for<'de> Deserialize<'de>>(value: &Value) -> Option<T> {
            T::deserialize(value).ok()
        }
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
        let block = match kind {
            "text" => typed(&value).map(Block::Text),
            "thinking" => typed(&value).map(Block::Thinking),
            "redacted_thinking" => typed(&value).map(Block::RedactedThinking),
            "tool_use" => typed(&value).map(Block::ToolUse),
            "tool_result" => typed(&value).map(Block::ToolResult),
            "image" => typed::<ImageBlock>(&value)
                .filter(|image| image.source.kind.as_deref() == Some("base64"))
                .map(Block::Image),
            _ => None,
        };
        block.unwrap_or(Block::Other(value))
    }
}

/// Holds a text block.
#[derive(Clone, Debug, Deserialize)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Every other field (`type`, `citations`, `cache_control`, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Holds a thinking block; the signature is Anthropic's and stays opaque.
#[derive(Clone, Debug, Deserialize)]
pub struct ThinkingBlock {
    /// The reasoning text (may be empty when the display mode omits it).
    pub thinking: String,
    /// Anthropic's signature over the block; only valid for Claude.
    #[serde(default)]
    pub signature: Option<String>,
    /// Every other field, `type` included.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Holds a redacted thinking block (encrypted by the provider).
#[derive(Clone, Debug, Deserialize)]
pub struct RedactedThinkingBlock {
    /// The ciphertext.
    pub data: String,
    /// Every other field, `type` included.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Holds a tool call.
#[derive(Clone, Debug, Deserialize)]
pub struct ToolUseBlock {
    /// The call id (`toolu_…`), which the matching result names.
    pub id: String,
    /// The tool name (`Bash`, `Edit`, `Agent`, an MCP tool, ...).
    pub name: String,
    /// The arguments, a JSON object.
    #[serde(default)]
    pub input: Value,
    /// Every other field, `type` included.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Holds a tool result, which lives in a `user` record.
#[derive(Clone, Debug, Deserialize)]
pub struct ToolResultBlock {
    /// The id of the `tool_use` this answers.
    pub tool_use_id: String,
    /// A string, or a list of text/image blocks; absent on some old records.
    #[serde(default)]
    pub content: Option<Value>,
    /// Whether the tool failed; absent means `false`.
    #[serde(default)]
    pub is_error: Option<bool>,
    /// Every other field, `type` included.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Holds an inline image.
#[derive(Clone, Debug, Deserialize)]
pub struct ImageBlock {
    /// Where the bytes are; only `base64` sources are externalized.
    pub source: ImageSource,
    /// Every other field, `type` included.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Holds an image's source.
#[derive(Clone, Debug, Deserialize)]
pub struct ImageSource {
    /// `base64` (others, like `url`, are kept inline).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `image/png`, `image/jpeg`, ...
    #[serde(default)]
    pub media_type: Option<String>,
    /// The base64 bytes.
    #[serde(default)]
    pub data: Option<String>,
    /// Every other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Holds the parts of a `user` record's `toolUseResult` that the derived
/// events read. The client writes a different shape per tool; anything
/// missing is simply `None`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolUseResult {
    /// Bash: standard output.
    pub stdout: Option<String>,
    /// Bash: standard error.
    pub stderr: Option<String>,
    /// Bash: the command was interrupted.
    pub interrupted: Option<bool>,
    /// Edit/Write/MultiEdit: the file written.
    pub file_path: Option<String>,
    /// Edit/Write/MultiEdit: the change as diff hunks.
    pub structured_patch: Option<Vec<PatchHunk>>,
    /// Agent/Task: the sub-agent's id (its transcript is `agent-<id>.jsonl`).
    pub agent_id: Option<String>,
    /// Write: `create` or `update`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

/// Holds one hunk of a `structuredPatch`, as `diff` would print it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchHunk {
    /// First line of the hunk in the old file (1-based).
    pub old_start: u64,
    /// Number of old lines.
    pub old_lines: u64,
    /// First line of the hunk in the new file (1-based).
    pub new_start: u64,
    /// Number of new lines.
    pub new_lines: u64,
    /// The lines, each prefixed with ` `, `-` or `+`.
    pub lines: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_block_fields_are_kept_and_unknown_types_stay_whole() {
        let block = Block::from_value(json!({"type":"text","text":"hi","citations":[1]}));
        match block {
            Block::Text(t) => {
                assert_eq!(t.text, "hi");
                assert_eq!(t.extra.get("citations"), Some(&json!([1])));
                assert_eq!(t.extra.get("type"), Some(&json!("text")));
            }
            other => panic!("expected text, got {other:?}"),
        }
        let odd = json!({"type":"server_tool_use","id":"srvtoolu_1"});
        assert!(matches!(Block::from_value(odd.clone()), Block::Other(v) if v == odd));
        // A known type with a wrong shape is kept whole rather than failing.
        let bad = json!({"type":"tool_use","id":7});
        assert!(matches!(Block::from_value(bad.clone()), Block::Other(v) if v == bad));
    }

    #[test]
    fn envelope_reads_side_and_chain_records() {
        let rec = json!({"type":"user","uuid":"u1","parentUuid":null,
            "message":{"role":"user","content":"hello"},"somethingNew":1});
        let env = Envelope::deserialize(&rec).expect("valid envelope");
        assert_eq!(env.uuid.as_deref(), Some("u1"));
        assert!(env.parent_uuid.is_none());
        assert!(
            matches!(env.message.and_then(|m| m.content), Some(Content::Text(t)) if t == "hello")
        );
        let side = json!({"type":"custom-title","customTitle":"t","sessionId":"s"});
        let env = Envelope::deserialize(&side).expect("valid envelope");
        assert_eq!(env.custom_title.as_deref(), Some("t"));
    }
}
