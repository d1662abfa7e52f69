//! The OpenCode adapter: rows of its SQLite store to canonical events and
//! back (`shared/formats/opencode.md`, observed with `opencode-ai` 1.18.33).
//!
//! OpenCode keeps every session in one database,
//! `$XDG_DATA_HOME/opencode/opencode.db`: a `session` row, `message` rows
//! (one per user message or model request) and `part` rows (the content of
//! a message, in part id order), `data` columns holding JSON. This module
//! does no IO: `ops` reads the rows, and writes what [`render_session`]
//! returns either as an `opencode export` document for `opencode import`
//! or as rows.
//!
//! # What each row becomes
//!
//! | row | event |
//! | --- | --- |
//! | `session` (first time) | `session.start` (`cwd`, `title`, `slug`, `version`, `project_id`, `parent_id`, `agent`, `model`) |
//! | `session` (changed later) | `meta` `session.updated` (`title`, `tokens`, `cost`) |
//! | `message` | `meta` `message` (`role`, `model`, `provider`, `agent`, `tokens`, `cost`, `finish`, `error`) |
//! | part `text` | `message.user` / `message.assistant` (`text`); `synthetic` text is `meta` with `injected: true` |
//! | part `reasoning` | `message.thinking` (`text`) |
//! | part `tool` | `tool.call` (`call_id`, `name`, `arguments`, `status`), and once `completed`/`error`, `tool.result` (`output` or the error, `is_error`), `parent_seq` = the call |
//! | part `file` | `message.user` / `message.assistant` with `file` (`mime`, `filename`; a `data:` URL's bytes become an artifact) |
//! | part `patch`, `snapshot` | `checkpoint` (`reason: "snapshot"`, `snapshot` tree hash, `files`) |
//! | part `compaction` | `checkpoint` (`reason: "compaction"`, `auto`) |
//! | part `step-start`, `step-finish`, `agent`, `subtask`, `retry` | `meta` (`opencode` = the type; `snapshot`, `reason`, `tokens`, `cost`, `name`, `agent`, `prompt`, `description`, `attempt`, `error`) |
//! | any other part | `meta` (`opencode: "part.<type>"`) |
//!
//! Derived events follow a finished tool: `command.run` (`bash`),
//! `file.edit` (`edit`, `write`, `patch`, `multiedit`), `file.read`
//! (`read`), `todo.add` / `todo.update` (`todowrite`, per item).
//!
//! Every primary event keeps its whole row under [`NATIVE_KEY`]
//! (`{"table", "row"}`, `data` parsed), which is what write-back writes.
//! Origins: `native_id` is the row id (`ses_…`, `msg_…`, `prt_…`), with
//! `/tool.result`, `/command.run`, … for the events a part gives besides
//! its first, and `@<time_updated>` for an update event.
//!
//! Sub-agent sessions (`task` tool) are their own sessions with
//! `parent_id`; capture links them through [`crate::NativeParent`].

pub mod ids;
pub mod parse;
pub mod render;
pub mod wire;

pub use parse::parse_rows;
pub use render::{NativeDoc, WRITTEN_VERSION, render_session};
pub use wire::{Row, Table};

/// The payload key that holds the native row of a primary event.
///
/// **Stored and relied on by write-back.** Renaming it orphans the rows of
/// every captured OpenCode session.
pub const NATIVE_KEY: &str = "native";

/// The actor of OpenCode's own messages and tool calls.
pub const ACTOR_AGENT: &str = "agent:opencode";

/// Returns a Unix millisecond time as RFC 3339 UTC.
pub fn ms_to_rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}

/// Returns an RFC 3339 time as Unix milliseconds.
pub fn rfc3339_to_ms(ts: &str) -> Option<i64> {
    ts.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

/// Returns the command that resumes `id` in the terminal UI, and the
/// non-interactive form.
pub fn resume_commands(id: &str) -> (String, String) {
    (
        format!("opencode --session {id}"),
        format!("opencode run --session {id} <prompt>"),
    )
}

#[cfg(test)]
mod tests;
