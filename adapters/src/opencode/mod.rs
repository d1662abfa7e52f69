//! The OpenCode adapter: rows of its SQLite store to canonical events and
//! back (`shared/formats/opencode.md`, observed with `opencode-ai` 1.18.33).
//!
//! OpenCode keeps every session in one database,
//! `$XDG_DATA_HOME/opencode/opencode.db`: a `session` row, `message` rows
//! (one per user message or model request) and `part` rows (the content of
//! a message, in part id order), `data` columns holding JSON. Releases
//! before 1.2 kept the same records as JSON files under `storage/`
//! ([`storage`]); those files are read as the rows they became, so one
//! mapping serves both, and a session in both is the database's. This
//! module does no IO: `ops` reads the rows, and writes what [`render_session`]
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
pub mod storage;
pub mod wire;

use std::path::{Path, PathBuf};

use git_session_schema::{Agent, Event};
use serde_json::{Value, json};

use crate::registry::{AgentSpec, Integration, TokenizerFamily, ToolKind};
use crate::source::{Database, Incremental, Project, Records, Source, Table as SqlTable};
use crate::{
    Adapter, ChangeSet, FileSink, NativeImport, ParseInput, Parsed, RenderError, RenderHead,
    RepoFact, RowWrite, Warning,
};

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

/// The database a write-back inserts into, relative to the store root.
pub const DATABASE: &str = "opencode.db";

const SESSION_COLUMNS: &[&str] = &[
    "id",
    "project_id",
    "workspace_id",
    "parent_id",
    "slug",
    "directory",
    "path",
    "title",
    "version",
    "share_url",
    "summary_additions",
    "summary_deletions",
    "summary_files",
    "summary_diffs",
    "metadata",
    "cost",
    "tokens_input",
    "tokens_output",
    "tokens_reasoning",
    "tokens_cache_read",
    "tokens_cache_write",
    "revert",
    "permission",
    "agent",
    "model",
    "time_created",
    "time_updated",
    "time_compacting",
    "time_archived",
];

/// OpenCode's database: `opencode.db`, or a release channel's
/// `opencode-<channel>.db`.
static DB: Database = Database {
    files: &["opencode*.db"],
    requires: &[
        (
            "session",
            &[
                "id",
                "project_id",
                "parent_id",
                "slug",
                "directory",
                "title",
                "version",
                "time_created",
                "time_updated",
            ],
        ),
        (
            "message",
            &["id", "session_id", "time_created", "time_updated", "data"],
        ),
        (
            "part",
            &[
                "id",
                "message_id",
                "session_id",
                "time_created",
                "time_updated",
                "data",
            ],
        ),
        (
            "project",
            &[
                "id",
                "worktree",
                "time_created",
                "time_updated",
                "sandboxes",
            ],
        ),
        ("event_sequence", &["aggregate_id", "seq"]),
    ],
    version: None,
    tables: &[
        SqlTable {
            name: "session",
            columns: SESSION_COLUMNS,
            session: "id",
            incremental: Incremental::Whole,
            json_objects: &[],
        },
        SqlTable {
            name: "message",
            columns: &["id", "session_id", "time_created", "time_updated", "data"],
            session: "session_id",
            incremental: Incremental::Column("time_updated"),
            json_objects: &["data"],
        },
        SqlTable {
            name: "part",
            columns: &[
                "id",
                "message_id",
                "session_id",
                "time_created",
                "time_updated",
                "data",
            ],
            session: "session_id",
            incremental: Incremental::Column("time_updated"),
            json_objects: &["data"],
        },
    ],
    // Every change OpenCode makes to a session appends to its event
    // sequence (`message.part.updated`, ...); a session written without
    // events (by hand, or by a direct insert) moves its `time_updated`.
    changes: Some(
        "SELECT s.id, s.time_updated || ':' || coalesce(e.seq, -1) FROM session s \
         LEFT JOIN event_sequence e ON e.aggregate_id = s.id",
    ),
    // OpenCode names a repository's project by its root commit hash, and
    // a directory without commits `global`.
    project: Some(Project {
        column: "project_id",
        unbound: "global",
    }),
};

/// OpenCode's row of the registry.
pub static SPEC: AgentSpec = AgentSpec {
    agent: Agent::Opencode,
    display: "OpenCode",
    env: &["XDG_DATA_HOME", "OPENCODE_DB"],
    default_store: ".local/share/opencode",
    sources: &[Source::Sqlite(&DB), Source::JsonTree(&storage::TREE)],
    tools: &[
        (ToolKind::Shell, "bash"),
        (ToolKind::Read, "read"),
        (ToolKind::Write, "write"),
        (ToolKind::Edit, "edit"),
        (ToolKind::Search, "grep"),
        (ToolKind::Search, "glob"),
        (ToolKind::Web, "webfetch"),
        (ToolKind::SubAgent, "task"),
        (ToolKind::Todo, "todowrite"),
        (ToolKind::Other, "skill"),
    ],
    arguments: &[
        ("bash", &["command", "timeout", "workdir", "description"]),
        ("read", &["filePath", "offset", "limit"]),
        ("write", &["filePath", "content"]),
        (
            "edit",
            &["filePath", "oldString", "newString", "replaceAll"],
        ),
        ("grep", &["pattern", "path", "include"]),
        ("glob", &["pattern", "path"]),
        ("webfetch", &["url", "format"]),
        ("task", &["description", "prompt", "subagent_type"]),
        ("todowrite", &["todos"]),
    ],
    tokenizer: TokenizerFamily::ClaudeEstimate,
    resume: "opencode --session {id}   # or: opencode run --session {id} <prompt>",
    native_key: NATIVE_KEY,
    integration: Integration::NONE,
};

/// Adapts OpenCode (`opencode`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Opencode;

impl Adapter for Opencode {
    fn spec(&self) -> &'static AgentSpec {
        &SPEC
    }

    /// OpenCode's own shape, `ses_` and base62: no separators or quotes.
    fn validate_native_id(&self, native_id: &str) -> Result<(), String> {
        if ids::valid("ses", native_id) {
            Ok(())
        } else {
            Err(format!("not an OpenCode session id: {native_id:?}"))
        }
    }

    fn store_root(&self, env: &dyn Fn(&str) -> Option<String>, home: &Path) -> PathBuf {
        if let Some(db) = env("OPENCODE_DB").filter(|d| !d.is_empty())
            && let Some(dir) = Path::new(&db).parent()
        {
            return dir.to_owned();
        }
        match env("XDG_DATA_HOME") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("opencode"),
            _ => home.join(".local/share/opencode"),
        }
    }

    fn new_native_id(&self, uuid: &str, now_ms: i64) -> String {
        ids::session(now_ms, uuid)
    }

    /// The `data` column's JSON is written as JSON values (key order and
    /// spacing are not kept), so it is compared parsed. A `session` row's
    /// `path` (its directory relative to the work tree) is written from the
    /// repository the session is written for ([`RepoFact::RelativeCwd`]):
    /// at the root that is `""` (a row recorded with none, or `.`, means
    /// the root too).
    fn l2_remap(&self, record: &mut Value, _native_id: &str) {
        remap_row(record);
    }

    /// The row an event keeps under [`NATIVE_KEY`] is remapped as in
    /// [`Adapter::l2_remap`].
    fn l0_remap(&self, event: &mut Event) {
        if let Some(row) = event
            .payload
            .get_mut(NATIVE_KEY)
            .and_then(|n| n.get_mut("row"))
        {
            remap_row(row);
        }
    }

    fn parse(&self, input: ParseInput<'_>) -> Parsed {
        let Records::Rows(rows) = input.records else {
            return Parsed {
                warnings: vec![Warning {
                    line: input.records.first_ordinal(),
                    message: format!("{}: OpenCode sessions are database rows", input.source),
                }],
                state: input.state.unwrap_or(Value::Null),
                ..Parsed::default()
            };
        };
        let mut warnings = Vec::new();
        let mut mapped = Vec::with_capacity(rows.len());
        for r in rows {
            let Some(table) = Table::parse(r.table) else {
                continue;
            };
            match serde_json::from_slice::<Value>(&r.json) {
                Ok(Value::Object(mut columns)) => {
                    columns.remove("$rowid");
                    mapped.push(Row { table, columns });
                }
                _ => warnings.push(Warning {
                    line: r.rowid.max(0) as u64,
                    message: format!(
                        "table {} rowid {}: unreadable row; skipped",
                        r.table, r.rowid
                    ),
                }),
            }
        }
        let mut parsed = parse_rows(mapped, input.next_seq, input.state);
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
        let doc = render_session(head, events)?;
        Ok(change_set(&doc))
    }
}

/// Applies the documented L2 remaps to a row (see [`Opencode::l2_remap`]).
fn remap_row(record: &mut Value) {
    if let Some(data) = record.get_mut("data")
        && let Some(text) = data.as_str()
        && let Ok(parsed) = serde_json::from_str::<Value>(text)
    {
        *data = parsed;
    }
    if let Some(row) = record.as_object_mut()
        && row.contains_key("slug")
        && row.contains_key("directory")
        && row
            .get("path")
            .is_some_and(|p| p.is_null() || p.as_str() == Some("."))
    {
        row.insert("path".into(), json!(""));
    }
}

/// Returns the change set of a rendered session: the project row (when
/// the database lacks it), the session, message and part rows, and the
/// export document for `opencode import`.
pub fn change_set(doc: &NativeDoc) -> ChangeSet {
    let id = doc.id().to_owned();
    let mut rows = Vec::new();
    let now = doc.session.get("time_created").cloned().unwrap_or(json!(0));
    let mut project = serde_json::Map::new();
    project.insert("vcs".into(), json!("git"));
    project.insert("time_created".into(), now.clone());
    project.insert("time_updated".into(), now);
    project.insert("sandboxes".into(), json!("[]"));
    rows.push(RowWrite {
        database: PathBuf::from(DATABASE),
        table: "project".into(),
        key: vec!["id".into()],
        columns: project,
        repo: vec![
            ("id".into(), RepoFact::RootCommit("global")),
            ("worktree".into(), RepoFact::Worktree),
        ],
        ..RowWrite::default()
    });
    for row in doc.rows("", "") {
        let session = row.table == Table::Session;
        rows.push(RowWrite {
            database: PathBuf::from(DATABASE),
            table: row.table.name().into(),
            key: vec!["id".into()],
            columns: row.columns,
            session_row: session,
            repo: if session {
                vec![
                    ("project_id".into(), RepoFact::RootCommit("global")),
                    ("path".into(), RepoFact::RelativeCwd),
                ]
            } else {
                Vec::new()
            },
            ..RowWrite::default()
        });
    }
    let document = serde_json::to_vec_pretty(&doc.export()).expect("the export serializes");
    ChangeSet {
        resume_command: SPEC.resume_command(&id),
        losses: doc.losses.clone(),
        rows,
        import: Some(NativeImport {
            program: "opencode".into(),
            args: vec!["import".into(), "{file}".into()],
            env: vec![("XDG_DATA_HOME".into(), "{root}/..".into())],
            file_name: format!("{id}.json"),
            document,
        }),
        ..ChangeSet::default()
    }
}

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

#[cfg(test)]
mod tests;
