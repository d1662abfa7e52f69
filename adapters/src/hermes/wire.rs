//! Rows of Hermes Agent's `state.db` as the client writes them
//! (`shared/formats/hermes.md`, hermes-agent 0.19.0, schema version 22).
//!
//! A row reaches the adapter as a JSON object, column name to value, the
//! way `ops` read it from SQLite (INTEGER and REAL as numbers, TEXT as
//! strings, NULL as null, BLOB as an array of bytes). The structs below name
//! the columns the mapping reads; every other column is kept in `extra`, so
//! a row written back carries all of them. Nothing here rejects a row for an
//! unknown column: newer schemas add columns.

use serde::Deserialize;
use serde_json::{Map, Value};

/// The schema version this adapter was written against (`schema_version`).
pub const KNOWN_SCHEMA: i64 = 22;

/// The `sessions` columns capture and write-back need; a database that lacks
/// one is refused rather than guessed at.
pub const SESSION_COLUMNS: &[&str] = &[
    "id",
    "source",
    "model",
    "model_config",
    "parent_session_id",
    "started_at",
    "ended_at",
    "end_reason",
    "message_count",
    "tool_call_count",
    "cwd",
    "git_repo_root",
    "title",
];

/// The `messages` columns capture and write-back need.
pub const MESSAGE_COLUMNS: &[&str] = &[
    "id",
    "session_id",
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "timestamp",
    "finish_reason",
    "reasoning",
    "reasoning_content",
    "reasoning_details",
    "codex_reasoning_items",
    "active",
    "compacted",
    "api_content",
];

/// Prefix Hermes puts before multimodal content (a JSON list of parts)
/// stored in the TEXT `content` column.
pub const MULTIMODAL_PREFIX: &str = "\u{0}json:";

/// Holds one `sessions` row.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct SessionRow {
    /// The session id (any string; the client makes `YYYYMMDD_HHMMSS_hex6`).
    pub id: String,
    /// `cli`, a gateway platform name, or `tool` (third-party integrations,
    /// hidden from the user's lists).
    pub source: Option<String>,
    /// The model of the session.
    pub model: Option<String>,
    /// JSON text; `_branched_from` / `_delegate_from` mark forks and
    /// sub-agents.
    pub model_config: Option<String>,
    /// The session this one continues (compression), branched from or was
    /// delegated by.
    pub parent_session_id: Option<String>,
    /// Unix seconds.
    pub started_at: Option<f64>,
    /// Unix seconds, when ended.
    pub ended_at: Option<f64>,
    /// Why it ended; `compression` means a child row continues it.
    pub end_reason: Option<String>,
    /// The session's title (unique when set).
    pub title: Option<String>,
    /// Where the session ran.
    pub cwd: Option<String>,
    /// The repository root Hermes found for `cwd`.
    pub git_repo_root: Option<String>,
}

/// Says how a session row relates to its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// No parent.
    Root,
    /// A continuation after context compression: the same conversation.
    Compression,
    /// A branch (`_branched_from`): a fork.
    Branch,
    /// A sub-agent run (`_delegate_from`).
    Delegate,
    /// A `tool` session (third-party integrations): a session of its own.
    Tool,
    /// Any other child: one whose parent is not known here or has not (yet)
    /// recorded `end_reason = 'compression'`. Hermes resumes into it like a
    /// continuation.
    Child,
}

impl SessionRow {
    /// Returns the parsed `model_config`, or an empty object.
    pub fn config(&self) -> Map<String, Value> {
        self.model_config
            .as_deref()
            .and_then(|c| serde_json::from_str::<Value>(c).ok())
            .and_then(|v| match v {
                Value::Object(m) => Some(m),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Returns how this row hangs off its parent, given the parent's
    /// `end_reason` when the parent row is known.
    pub fn link(&self, parent_end_reason: Option<&str>) -> Link {
        if self.parent_session_id.is_none() {
            return Link::Root;
        }
        let config = self.config();
        if config.contains_key("_delegate_from") {
            Link::Delegate
        } else if config.contains_key("_branched_from") {
            Link::Branch
        } else if self.source.as_deref() == Some("tool") {
            Link::Tool
        } else if parent_end_reason == Some("compression") {
            Link::Compression
        } else {
            Link::Child
        }
    }
}

/// Holds one `messages` row.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct MessageRow {
    /// AUTOINCREMENT id: the replay order (not `timestamp`).
    pub id: i64,
    /// The session the row belongs to.
    pub session_id: String,
    /// `user`, `assistant`, `tool`, `system`, …
    pub role: String,
    /// Text, or [`MULTIMODAL_PREFIX`] + a JSON list of parts.
    pub content: Option<String>,
    /// For `tool` rows: the call answered.
    pub tool_call_id: Option<String>,
    /// For `assistant` rows: JSON text of OpenAI-style calls.
    pub tool_calls: Option<String>,
    /// For `tool` rows: the tool's name.
    pub tool_name: Option<String>,
    /// Unix seconds (not monotonic).
    pub timestamp: Option<f64>,
    /// `stop`, `tool_calls`, …
    pub finish_reason: Option<String>,
    /// Reasoning shown to the user.
    pub reasoning: Option<String>,
    /// The provider's reasoning field.
    pub reasoning_content: Option<String>,
    /// JSON (OpenRouter/Anthropic style), provider-bound.
    pub reasoning_details: Option<String>,
    /// JSON (Responses API), provider-bound.
    pub codex_reasoning_items: Option<String>,
    /// 0 when soft-deleted by a rewind.
    pub active: Option<i64>,
    /// 1 when archived by compaction.
    pub compacted: Option<i64>,
    /// The exact text sent to the API when it differed from `content`.
    pub api_content: Option<String>,
}

impl MessageRow {
    /// Says whether the row is part of the live history Hermes replays.
    pub fn is_live(&self) -> bool {
        self.active.unwrap_or(1) != 0
    }
}

/// Holds one element of `tool_calls`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct ToolCall {
    /// The call id the `tool` row answers.
    pub id: String,
    /// `function`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Name and JSON-text arguments.
    pub function: Function,
    /// Responses-API bookkeeping Hermes adds and strips when sending.
    pub call_id: Option<String>,
    /// Responses-API bookkeeping Hermes adds and strips when sending.
    pub response_item_id: Option<String>,
}

/// Holds a call's function.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Function {
    /// The tool's name.
    pub name: String,
    /// JSON text (a model may write anything).
    pub arguments: String,
}

/// Returns the `tool_calls` of an assistant row, or why they cannot be read.
pub fn tool_calls(text: &str) -> Result<Vec<ToolCall>, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .into_iter()
            .map(|item| ToolCall::deserialize(item).map_err(|e| e.to_string()))
            .collect(),
        _ => Err("not a JSON list".into()),
    }
}

/// Holds decoded message content.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// A list of OpenAI-style parts (`text`, `image_url`, …).
    Parts(Vec<Value>),
}

/// Decodes a `content` column.
pub fn content(text: Option<&str>) -> Content {
    let text = text.unwrap_or("");
    if let Some(json) = text.strip_prefix(MULTIMODAL_PREFIX)
        && let Ok(Value::Array(parts)) = serde_json::from_str::<Value>(json)
    {
        return Content::Parts(parts);
    }
    Content::Text(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_calls_keep_bookkeeping_and_reject_garbage() {
        let calls = tool_calls(
            r#"[{"id": "c1", "call_id": "c1", "response_item_id": "fc_1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\": \"ls\"}"}}]"#,
        )
        .unwrap();
        assert_eq!(calls[0].function.name, "terminal");
        assert_eq!(calls[0].response_item_id.as_deref(), Some("fc_1"));
        assert!(tool_calls("[{not json").is_err());
        assert!(tool_calls(r#"{"id": 1}"#).is_err());
    }

    #[test]
    fn multimodal_content_is_decoded() {
        let c = content(Some("\u{0}json:[{\"type\":\"text\",\"text\":\"hi\"}]"));
        assert_eq!(
            c,
            Content::Parts(vec![json!({"type": "text", "text": "hi"})])
        );
        assert_eq!(content(Some("plain")), Content::Text("plain".into()));
        // A broken list stays text rather than disappearing.
        assert_eq!(
            content(Some("\u{0}json:[oops")),
            Content::Text("\u{0}json:[oops".into())
        );
    }

    #[test]
    fn links_follow_model_config_then_parent_end_reason() {
        let mut row = SessionRow {
            id: "b".into(),
            parent_session_id: Some("a".into()),
            ..Default::default()
        };
        assert_eq!(row.link(Some("compression")), Link::Compression);
        assert_eq!(row.link(None), Link::Child);
        row.model_config = Some(r#"{"_branched_from": "a"}"#.into());
        assert_eq!(row.link(Some("compression")), Link::Branch);
        row.model_config = Some(r#"{"_delegate_from": "a"}"#.into());
        assert_eq!(row.link(None), Link::Delegate);
        row.model_config = None;
        row.source = Some("tool".into());
        assert_eq!(row.link(Some("compression")), Link::Tool);
    }
}
