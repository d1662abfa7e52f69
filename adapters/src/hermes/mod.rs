//! The Hermes Agent adapter: `state.db` rows to canonical events and back.
//!
//! Hermes Agent (hermes-agent 0.19.0, `shared/formats/hermes.md`) keeps
//! every session in one SQLite database, `$HERMES_HOME/state.db` (default
//! `~/.hermes/state.db`): a `sessions` row per session and `messages` rows
//! whose AUTOINCREMENT `id` is the replay order. This module does no IO:
//! `ops` reads the rows (read-only, by row id) and hands them over as
//! [`Record`]s; for write-back it inserts the rows the [`ChangeSet`] lists.
//!
//! # One canonical session per compression chain
//!
//! Context compression ends a session (`end_reason = 'compression'`) and
//! continues in a child row (`parent_session_id`). The chain is one
//! conversation, so it is one canonical session under the id of its first
//! row; each continuation starts with a `checkpoint` event (`reason:
//! "compression"`, `session`: the continuation's id), so `show`/`log` show
//! where the chain was split. [`chains`] groups sessions this way; parsed
//! one native session at a time (as the native-source reader does), a
//! continuation reports its parent with [`crate::NativeParent::continues`]
//! and capture appends it to the parent's canonical session. Any plain
//! child counts as a continuation, as it does for Hermes' own resume. A
//! branch (`model_config._branched_from`), a sub-agent run
//! (`_delegate_from`) and a `tool` session become canonical sessions of
//! their own whose header names the parent session.
//!
//! # What each row becomes
//!
//! | row | events |
//! | --- | --- |
//! | `sessions`, first of a chain | `session.start` (`cwd`, `git_repo_root`, `source`, `model`, `title`, `parent_session_id`, `link`, `tool_session`: `source = 'tool'`) |
//! | `sessions`, a continuation | `checkpoint` (`reason: "compression"`, `session`, `parent_session_id`) |
//! | `sessions`, seen before with other values | `meta` (`hermes: "sessions.update"`, `session`, `changed`: the new column values) |
//! | `user` | `message.user` (`text`; `content`: the parts of multimodal content, images as `{type: "image", media_type, artifact}` with the artifact in `refs`) |
//! | `assistant` | `message.thinking` when it has reasoning (`text`; `opaque: true` when provider-bound `reasoning_details` / `codex_reasoning_items` exist, which stay in the row only), `message.assistant` (`text`, `finish_reason`) when it has text or no calls, one `tool.call` per call (`call_id`, `name`, `arguments`, and `hermes: {call_id, response_item_id}`: Hermes' Responses-API bookkeeping) |
//! | `tool` | `tool.result` (`call_id`, `name`, `output`: the JSON text the tool returned, `is_error`), then what it implies: `terminal` -> `command.run`, `write_file` / `patch` -> `file.edit`, `read_file` -> `file.read`, `todo` -> `todo.add` / `todo.update` |
//! | `active = 0` (rewound) or `compacted = 1` | `meta` (`hermes: "messages"`, `role`, `text`, `rewound`, `compacted`): kept, not live history |
//! | `system`, other roles, unreadable rows | `meta` (`hermes: "messages"`, `role`, `text`; `unparsed` when the row could not be read) |
//!
//! The first event of each row keeps the row itself under [`NATIVE_KEY`]
//! (`{"table", "row"}`, every column as read, `api_content` and the
//! reasoning columns included), which is what makes same-agent write-back
//! faithful (L2). Image data in multimodal content is replaced there by an
//! artifact reference, so the bytes are stored once. Origins: `native_id`
//! is the session id for session rows, `<session>#<message id>` for the
//! first event of a message row and `<session>#<id>/<type>` for the
//! others; `native_seq` is the message id.
//!
//! Bad rows never stop a capture: `tool_calls` that is not JSON, a `tool`
//! row without `tool_call_id` and rows that cannot be read at all become
//! `meta` events with the row kept, and a warning names the table and row.
//!
//! # Write-back
//!
//! Render returns rows, never touching a file: one `sessions` row per
//! chain segment (root first) and the `messages` rows in replay order
//! without ids (the database assigns them). Rows that came from Hermes are
//! written back as captured, with these changes: session ids become the
//! requested native id (continuations keep theirs, or get `<id>-<n>` under a
//! new id), `parent_session_id` follows within the chain and is left out
//! otherwise (it is a foreign key and the parent may not be in the target
//! database; a branch keeps `_branched_from` in `model_config`, so it never
//! takes over `--resume <parent>`), `cwd` (and `git_repo_root`, keeping
//! the subdirectory) move to this machine's repository, `message_count` and
//! `tool_call_count` are counted from the rows written (Hermes only counts
//! rows it appends itself), and a session under a new id gets its title
//! suffixed with the id (titles are unique). Every segment but the last ends
//! with `end_reason = 'compression'`, so `hermes chat --resume <id>` walks to
//! the tip as it does for the original. `system_prompt` is not captured
//! (see [`SESSION_READ`]); Hermes writes its own when it resumes.
//!
//! Sessions from other agents become one session row (`source = 'cli'`,
//! title from the header or the first prompt, the model of the last
//! assistant message) and rows per message: reasoning goes to the next
//! assistant row's `reasoning` (shown, not sent back), tool calls are
//! gathered on the assistant row before them, shell calls become
//! `terminal {command}`, other tools keep their name (reported as
//! `tool-unmapped`).

mod derive;
mod parse;
mod render;
mod time;
pub mod wire;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use git_session_schema::{Agent, Event};
use serde_json::{Map, Value};

use crate::registry::{AgentSpec, Integration, TokenizerFamily, ToolKind};
use crate::source::{self, Database, Incremental, Position, SchemaVersion, Source};
use crate::{Adapter, ChangeSet, FileSink, ParseInput, Parsed, RenderError, RenderHead, Warning};

pub use wire::{KNOWN_SCHEMA, Link, MESSAGE_COLUMNS, SESSION_COLUMNS, SessionRow};

/// The payload key under which the first event of a row keeps the row.
///
/// **Stored and relied on by write-back.** Renaming it orphans the native
/// rows of every captured Hermes session.
pub const NATIVE_KEY: &str = "native";

/// The database under the store root.
pub const DATABASE: &str = "state.db";

/// Marks an image whose bytes became an artifact, inside a kept row's
/// `data:` URL (`data:<media>;base64,<mark><artifact ref>`).
///
/// **Stored**: renaming it leaves captured images unrestorable.
pub const ARTIFACT_MARK: &str = "git-session-artifact:";

/// Names the table a [`Record`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// `sessions`.
    Sessions,
    /// `messages`.
    Messages,
}

/// Holds one row as `ops` read it: column name to value.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Its table.
    pub table: Table,
    /// Its columns (INTEGER/REAL as numbers, TEXT as strings, NULL as null).
    pub row: Map<String, Value>,
}

impl Record {
    /// Reads a record line: `{"table": "sessions" | "messages", "row": {…}}`.
    pub fn from_line(line: &[u8]) -> Result<Record, String> {
        let mut value: Map<String, Value> =
            serde_json::from_slice(line).map_err(|e| e.to_string())?;
        let table = match value.get("table").and_then(Value::as_str) {
            Some("sessions") => Table::Sessions,
            Some("messages") => Table::Messages,
            other => return Err(format!("unknown table {other:?}")),
        };
        match value.remove("row") {
            Some(Value::Object(row)) => Ok(Record { table, row }),
            _ => Err("record without a row object".into()),
        }
    }

    /// Returns the record as one line (no newline), the form
    /// [`Record::from_line`] reads.
    pub fn to_line(&self) -> Vec<u8> {
        let table = match self.table {
            Table::Sessions => "sessions",
            Table::Messages => "messages",
        };
        let mut out = Map::new();
        out.insert("table".into(), Value::String(table.into()));
        out.insert("row".into(), Value::Object(self.row.clone()));
        serde_json::to_vec(&Value::Object(out)).expect("JSON values serialize")
    }
}

/// Maps rows (a chain's session rows, each followed by its messages in id
/// order) to events numbered from `next_seq`; `state` is what the previous
/// call for this canonical session returned.
pub fn parse_records(records: Vec<Record>, next_seq: u64, state: Option<Value>) -> Parsed {
    parse::parse(records, next_seq, state)
}

/// Returns, for every session, the chain it belongs to: the id of the
/// chain's first session, and the chain's sessions in order (the first,
/// then continuations by start time).
///
/// A continuation is a child that is neither a branch, a sub-agent run nor a
/// `tool` session: the children Hermes' `resolve_resume_session_id` walks
/// into (normally the parent ended with `end_reason = 'compression'`). A
/// parent missing from `sessions` makes its child a chain of its own.
pub fn chains(sessions: &[SessionRow]) -> BTreeMap<String, Vec<String>> {
    let by_id: HashMap<&str, &SessionRow> = sessions.iter().map(|s| (s.id.as_str(), s)).collect();
    let continues = |s: &SessionRow| -> Option<&str> {
        let parent = by_id.get(s.parent_session_id.as_deref()?)?;
        matches!(
            s.link(parent.end_reason.as_deref()),
            Link::Compression | Link::Child
        )
        .then_some(parent.id.as_str())
    };
    let mut out: BTreeMap<String, Vec<&SessionRow>> = BTreeMap::new();
    for s in sessions {
        let mut root = s;
        // A cycle in malformed data must not loop: Hermes caps its own walk.
        for _ in 0..sessions.len() {
            match continues(root).and_then(|p| by_id.get(p)) {
                Some(parent) if parent.id != s.id => root = parent,
                _ => break,
            }
        }
        out.entry(root.id.clone()).or_default().push(s);
    }
    out.into_iter()
        .map(|(root, mut members)| {
            members.sort_by(|a, b| {
                let first = |s: &SessionRow| s.id != root;
                first(a)
                    .cmp(&first(b))
                    .then(
                        a.started_at
                            .partial_cmp(&b.started_at)
                            .unwrap_or(std::cmp::Ordering::Equal),
                    )
                    .then(a.id.cmp(&b.id))
            });
            (root, members.into_iter().map(|s| s.id.clone()).collect())
        })
        .collect()
}

/// Says whether `id` can be written as a Hermes session id.
pub fn valid_session_id(id: &str) -> bool {
    render::valid_id(id)
}

/// The `sessions` columns capture reads (schema 22): all of them but
/// `system_prompt`, which Hermes writes again when it resumes a session
/// that lacks one, and which would make every read of the whole table
/// several kilobytes per session heavier. Those a database lacks are left
/// out; [`SESSION_COLUMNS`] must exist.
pub const SESSION_READ: &[&str] = &[
    "id",
    "source",
    "user_id",
    "session_key",
    "chat_id",
    "chat_type",
    "thread_id",
    "display_name",
    "origin_json",
    "expiry_finalized",
    "model",
    "model_config",
    "parent_session_id",
    "started_at",
    "ended_at",
    "end_reason",
    "message_count",
    "tool_call_count",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cwd",
    "git_branch",
    "git_repo_root",
    "billing_provider",
    "billing_base_url",
    "billing_mode",
    "estimated_cost_usd",
    "actual_cost_usd",
    "cost_status",
    "cost_source",
    "pricing_version",
    "title",
    "api_call_count",
    "handoff_state",
    "handoff_platform",
    "handoff_error",
    "compression_failure_cooldown_until",
    "compression_failure_error",
    "compression_fallback_streak",
    "profile_name",
    "rewind_count",
    "archived",
];

/// The `messages` columns capture reads (schema 22): all of them.
pub const MESSAGE_READ: &[&str] = &[
    "id",
    "session_id",
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "effect_disposition",
    "timestamp",
    "token_count",
    "finish_reason",
    "reasoning",
    "reasoning_content",
    "reasoning_details",
    "codex_reasoning_items",
    "codex_message_items",
    "platform_message_id",
    "observed",
    "active",
    "compacted",
    "api_content",
];

/// The database Hermes keeps its sessions in, as the native-source reader
/// reads it: the schema check (22 known; a newer one is read with a warning
/// when every needed column is there), the session rows whole on every
/// change (their counters and titles move), the messages by rowid.
pub static DB: Database = Database {
    files: &[DATABASE],
    requires: &[("sessions", SESSION_COLUMNS), ("messages", MESSAGE_COLUMNS)],
    version: Some(SchemaVersion {
        query: "SELECT max(version) FROM schema_version",
        min: KNOWN_SCHEMA,
        max: KNOWN_SCHEMA,
        read_newer: true,
    }),
    tables: &[
        source::Table {
            name: "sessions",
            columns: SESSION_READ,
            session: "id",
            incremental: Incremental::Whole,
            json_objects: &[],
        },
        source::Table {
            name: "messages",
            columns: MESSAGE_READ,
            session: "session_id",
            incremental: Incremental::RowId,
            json_objects: &[],
        },
    ],
    changes: None,
    project: None,
};

/// Hermes Agent's row of the registry.
pub static SPEC: AgentSpec = AgentSpec {
    agent: Agent::Hermes,
    display: "Hermes Agent",
    env: &["HERMES_HOME"],
    default_store: ".hermes",
    sources: &[Source::Sqlite(&DB)],
    tools: &[
        (ToolKind::Shell, "terminal"),
        (ToolKind::Read, "read_file"),
        (ToolKind::Write, "write_file"),
        (ToolKind::Edit, "patch"),
        (ToolKind::Search, "search_files"),
        (ToolKind::SubAgent, "delegate_task"),
        (ToolKind::Todo, "todo"),
    ],
    // Hermes runs whatever model its provider serves.
    arguments: &[
        (
            "terminal",
            &["command", "timeout:s", "workdir", "background"],
        ),
        ("read_file", &["path", "offset", "limit"]),
        ("write_file", &["path", "content"]),
        (
            "patch",
            &[
                "path",
                "old_string",
                "new_string",
                "replace_all",
                "patch",
                "mode",
            ],
        ),
        ("search_files", &["pattern", "path", "target"]),
        ("delegate_task", &["goal", "context"]),
        ("todo", &["todos"]),
    ],
    tokenizer: TokenizerFamily::ClaudeEstimate,
    resume: "hermes chat --resume {id}",
    native_key: NATIVE_KEY,
    integration: Integration::NONE,
};

/// Applies the documented L2 remaps to a row (see [`Hermes::l2_remap`]).
fn remap_row(record: &mut Value) {
    let Some(row) = record.as_object_mut() else {
        return;
    };
    if row.contains_key("session_id") && row.contains_key("role") {
        row.remove("id");
    }
    if row.contains_key("started_at") {
        row.remove("message_count");
        row.remove("tool_call_count");
    }
}

/// Adapts Hermes Agent's `state.db`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hermes;

impl Adapter for Hermes {
    fn spec(&self) -> &'static AgentSpec {
        &SPEC
    }

    /// Hermes' own shape (`YYYYMMDD_HHMMSS_hex`) or a UUID: no separators.
    fn validate_native_id(&self, native_id: &str) -> Result<(), String> {
        if valid_session_id(native_id) {
            Ok(())
        } else {
            Err(format!("not a Hermes session id: {native_id:?}"))
        }
    }

    fn store_root(&self, env: &dyn Fn(&str) -> Option<String>, home: &Path) -> PathBuf {
        match env("HERMES_HOME") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => home.join(".hermes"),
        }
    }

    /// A `messages` row's `id` is assigned by the database it is written
    /// into (`INTEGER PRIMARY KEY AUTOINCREMENT`): a render leaves it out.
    ///
    /// A `sessions` row's `message_count` and `tool_call_count` are counted
    /// from the rows written (see the module docs; checked by
    /// `render_writes_the_captured_rows_back`), so they are not compared.
    fn l2_remap(&self, record: &mut Value, _native_id: &str) {
        remap_row(record);
    }

    /// As in [`Adapter::l2_remap`], the message id a database assigned is
    /// not kept: not in the row under [`NATIVE_KEY`], and not in origins
    /// (`<session>#<id>` keeps the session).
    fn l0_remap(&self, event: &mut Event) {
        if let Some(row) = event
            .payload
            .get_mut(NATIVE_KEY)
            .and_then(|n| n.get_mut("row"))
        {
            remap_row(row);
        }
        if let Some(origin) = event.origin.as_mut()
            && let Some(id) = origin.native_id.as_mut()
            && let Some(hash) = id.find('#')
        {
            let digits = id[hash + 1..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            if digits > 0 {
                id.replace_range(hash + 1..hash + 1 + digits, "");
                origin.native_seq = None;
            }
        }
    }

    /// Parses database rows (`Records::Rows`, one JSON object per row) or,
    /// for fixtures and tests, record lines ([`Record::to_line`]). A record
    /// that is not an object is a warning; it did not come from a table.
    fn parse(&self, input: ParseInput<'_>) -> Parsed {
        let mut records = Vec::new();
        let mut warnings = Vec::new();
        for record in input.records.iter() {
            let read = match record.pos {
                Position::Row { table, .. } => row_record(table, record.bytes),
                _ => Record::from_line(record.bytes),
            };
            match read {
                Ok(r) => records.push(r),
                Err(e) => warnings.push(Warning {
                    line: record.pos.ordinal(),
                    message: format!("{}: not a Hermes row ({e}); skipped", input.source),
                }),
            }
        }
        let mut parsed = parse::parse(records, input.next_seq, input.state);
        warnings.append(&mut parsed.warnings);
        parsed.warnings = warnings;
        parsed
    }

    fn render_to(
        &self,
        head: RenderHead<'_>,
        events: &mut dyn Iterator<Item = Event>,
        _out: &mut dyn FileSink,
    ) -> Result<ChangeSet, RenderError> {
        render::render(head, events)
    }
}

/// Reads a row the native-source reader made: a JSON object of columns,
/// plus its `$rowid`, which is dropped (the id columns say it).
fn row_record(table: &str, bytes: &[u8]) -> Result<Record, String> {
    let table = match table {
        "sessions" => Table::Sessions,
        "messages" => Table::Messages,
        other => return Err(format!("unknown table {other:?}")),
    };
    let mut row: Map<String, Value> = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    row.remove("$rowid");
    Ok(Record { table, row })
}

#[cfg(test)]
mod tests;
