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
//! | `response_item` `message` user | `message.user` (`text`; `input_image` parts with a base64 `data:` URL become artifacts in `refs`, described in `image`/`images`, and stay in the kept line too); a harness-injected element such as `<environment_context>` is `meta` with `injected: true` |
//! | `response_item` `web_search_call` | `meta` with `web_search` (`action`, `query`, `url`, `pattern`, `status`): other agents get a note (docs/handoff.md) |
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
//! A file that is one segment of a thread of several files has
//! `<thread id>@<segment>#L<line>` (see below).
//!
//! # Threads of several files
//!
//! Newer clients rotate a long thread (openai/codex,
//! `thread-store/src/local/segment_writer.rs`; codex-cli 0.171.0 does not
//! rotate yet): the live file's content is copied to an immutable
//! `rotated_rollout_segments/<thread id>/<segment id, or "initial">/<same
//! file name>`, and the live file is replaced atomically by a successor that
//! starts with a `session_meta` of the same thread under a new `segment_id`,
//! then a `rollout_reference` line naming the copy, then the thread's new
//! lines. Paginated successors (0.171.0 `history_mode: paginated`) instead
//! have a file name whose rollout id is not the thread id. Every segment
//! numbers its lines from 0, so origins carry the segment (the
//! `segment_id`, else that rollout id) and the files of one thread are one
//! canonical session (same native id) whose segments never deduplicate
//! each other; the immutable copies are sources too, so history written
//! between the last capture and a rotation is still captured. A render
//! writes one self-contained rollout and leaves `rollout_reference` lines
//! out.
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

// parse.rs maps lines to events, derive.rs what a tool call did,
// render.rs writes a rollout, wire.rs holds the line types.
mod derive;
mod parse;
mod render;
pub mod wire;

#[cfg(test)]
use derive::*;
use parse::*;
use render::*;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use git_session_schema::{Agent, Event, Level, Origin, kinds};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::registry::{
    AgentSpec, ConfigDir, ConfigFile, Hook, HookAction, HookConfig, Integration, McpConfig,
    TokenizerFamily, ToolKind,
};
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
    /// The segment of the thread this file holds, when it is not the
    /// thread's only one (see [`segment_of`]), for origins.
    #[serde(default)]
    segment: Option<String>,
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

/// Codex's configuration file, in its home (`$CODEX_HOME`): MCP servers
/// and the notify program.
const CONFIG: ConfigFile = ConfigFile {
    dir: ConfigDir::Store,
    path: "config.toml",
};

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
            // Earlier segments of rotated threads (see `segment_of`).
            "rotated_rollout_segments/*/*/rollout-*.jsonl",
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
    arguments: &[
        (
            "exec_command",
            &["cmd", "workdir", "yield_time_ms", "max_output_tokens"],
        ),
        ("shell", &["command", "workdir", "timeout_ms"]),
        ("shell_command", &["command", "workdir", "timeout_ms"]),
        ("apply_patch", &["input"]),
        ("update_plan", &["plan", "explanation"]),
        ("web_search", &["query"]),
    ],
    tokenizer: TokenizerFamily::O200kBase,
    resume: "codex resume {id}",
    native_key: NATIVE_KEY,
    integration: Integration {
        mcp: Some(McpConfig::TomlServers(CONFIG)),
        hooks: Some(HookConfig::TomlNotify {
            file: CONFIG,
            hook: Hook {
                event: "notify",
                name: "codex-notify",
                action: HookAction::Capture,
            },
        }),
        skill: None,
    },
};

impl Adapter for Codex {
    fn spec(&self) -> &'static AgentSpec {
        &SPEC
    }

    /// A thread UUID.
    fn validate_native_id(&self, native_id: &str) -> Result<(), String> {
        if parse::is_uuid(native_id) {
            Ok(())
        } else {
            Err(format!("codex thread ids are UUIDs, not {native_id:?}"))
        }
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

    /// Render drops the provider pin and writes `source` as `cli` unless it
    /// was `cli` or `vscode` (formats/codex.md: other sources hide the
    /// thread from `codex resume`).
    ///
    /// A `rollout_reference` line (the link of a rotated thread's segment
    /// to the copy of the one before) is not written back.
    fn l2_remap(&self, record: &mut Value, _native_id: &str) {
        if record["type"] == "rollout_reference" {
            *record = Value::Null;
            return;
        }
        remap_meta(record);
    }

    /// Besides the provider pin and `source`: in a segment of a rotated
    /// thread the render leaves the `rollout_reference` line out, so the
    /// lines after it move up one; origins of such a file keep the thread
    /// and segment, not the line.
    fn l0_remap(&self, event: &mut Event) {
        if let Some(native) = event.payload.get_mut(NATIVE_KEY) {
            remap_meta(native);
        }
        if let Some(origin) = event.origin.as_mut()
            && let Some(id) = origin.native_id.as_mut()
            && id.contains('@')
            && let Some(at) = id.find("#L")
        {
            let derived = id[at..].find('/').map(|d| id[at + d..].to_owned());
            id.truncate(at);
            id.push_str(derived.as_deref().unwrap_or(""));
            origin.native_seq = None;
        }
        if event.kind == kinds::SESSION_START
            && let Some(p) = event.payload.as_object_mut()
        {
            p.remove("model_provider");
            p.remove("source");
        }
    }

    fn l0_written(&self, event: &Event) -> bool {
        !is_rollout_reference(event)
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

/// Applies to a rollout line what render documents it changes: the
/// provider pin of the thread header and settings, and a `source` the
/// client would not list.
fn remap_meta(line: &mut Value) {
    if line["payload"]["type"] == "thread_settings_applied"
        && let Some(s) = line["payload"]["thread_settings"].as_object_mut()
    {
        s.remove("model_provider_id");
    }
    if line["type"] == "session_meta"
        && let Some(p) = line["payload"].as_object_mut()
    {
        p.remove("model_provider");
        if !matches!(
            p.get("source").and_then(Value::as_str),
            Some("cli" | "vscode")
        ) {
            p.insert("source".into(), json!("cli"));
        }
    }
}

#[cfg(test)]
mod tests;
