//! The DeepSeek Harness (`dsh`) adapter: session logs to canonical events
//! and back.
//!
//! A dsh session is one append-only log,
//! `DSH_HOME/sessions/--<project key>--/<encoded id>/session.v4.jsonl.zstd`:
//! concatenated checksummed Zstandard frames whose plaintext is JSONL, a
//! header line then one event per line (`shared/formats/dsh.md`). This
//! module knows the records; the root crate's zstd-framed source walks the
//! frames (checksums, torn tails) and hands [`Adapter::parse`] the decoded
//! lines, line 0 being the header.
//!
//! # What each record becomes
//!
//! Every record gives one *primary* event that keeps the whole record under
//! [`NATIVE_KEY`], which is what same-agent write-back writes:
//!
//! | record | event |
//! | --- | --- |
//! | header | `session.start` (`cwd`, `native_id`, `is_seeded`, `parent`, `origin`, `delegation_depth`) |
//! | `user/message`, source `user` | `message.user` (`text`) |
//! | `user/message`, source `compact-checkpoint` | `checkpoint` (`reason: compaction`, `summary`) |
//! | `user/message`, other sources (runtime context) | `meta` (`injected: true`, `text`) |
//! | `assistant/message` | one `message.thinking` per reasoning block, then `message.assistant` (`text`, `model`) |
//! | `tool/call` | `tool.call` (`call_id`, `name`, `arguments` parsed from dsh's raw JSON string) |
//! | `tool/result` | `tool.result` (`call_id`, `name`, `output`, `is_error`, `error_code`), `parent_seq` = the call |
//! | `compaction/summary` | `checkpoint` (`summary`) |
//! | `system/message`, `developer/message` | `meta` (`role`, `text`) |
//! | everything else (turns, steps, policy, `request/*`, delivery receipts, titles, seeds, sub-agent catalog, jobs, plugin records, unknown types) | `meta` (`dsh: <type>`) |
//!
//! After a finished `bash`, `write`/`edit`, `read` or `todo_write` call come
//! derived `command.run`, `file.edit`, `file.read` and `todo.*` events
//! ([`derive`]). Secondary and derived events carry no record; render
//! skips every dsh event without one.
//!
//! A seeded fork (header `isSeeded`, `session/end-seed {"inherited":true}`
//! at seq N) is a log whose first N records are its parent's;
//! [`inherited_records`] reads N from a parse state. Their events carry the
//! parent's origins (`<parent id>#<seq>`), so capture makes the child a
//! canonical fork of the parent's session at exactly that prefix
//! (`docs/adding-an-adapter.md`, "seeded fork"); render writes the child's
//! own header first and the inherited records after it.
//!
//! # Rendering
//!
//! See [`render`]: dsh records are written back as they were (header `id`
//! and `cwd` moved), other agents' events become the records dsh writes,
//! keeping every rule dsh checks on load.
//!
//! A render writes frame 0 as the header line alone and the rest of the
//! session as one frame: the native frame boundaries (the client's flush
//! pattern) are not kept, and dsh reads any split of whole lines into
//! frames (the conformance suite checks the header frame and the records).
//!
//! Not here: reading files, frames, locks (the root crate's `native`
//! layer: a corrupt frame refuses the whole log, `Corrupt::RefuseFile`),
//! and format migration (dsh migrates older generations itself).

mod derive;
mod parse;
mod render;
pub mod wire;

use std::path::{Path, PathBuf};

use git_session_schema::{Agent, Event};
use serde_json::Value;

use crate::registry::{AgentSpec, Integration, TokenizerFamily, ToolKind};
use crate::source::{Corrupt, Source};
use crate::{Adapter, ChangeSet, FileSink, ParseInput, Parsed, RenderError, RenderHead};

pub use render::{PRIVACY_NOTE, log_path, resume_command};

/// The payload key that holds the whole dsh record of a primary event.
///
/// **Stored and relied on by write-back.** Renaming it orphans the records
/// of every captured dsh session.
pub const NATIVE_KEY: &str = "native";

/// The actor of dsh's model replies and tool calls.
const ACTOR_AGENT: &str = "agent:dsh";

/// Adapts DeepSeek Harness session logs (format v4, dsh 0.2.x).
#[derive(Clone, Copy, Debug, Default)]
pub struct Dsh;

/// Returns how many leading records of a seeded fork came from its parent,
/// from the state a parse returned (`None` before the inherited marker).
pub fn inherited_records(state: &Value) -> Option<u64> {
    parse::inherited(state)
}

/// The registry row of DeepSeek Harness.
///
/// Sources: the current generation, compressed (the default) or raw (a
/// deployment with `compression: none`), and every other generation name,
/// so that a log this build does not read is refused with a reason rather
/// than passed over (its header is checked before any record is mapped).
pub static SPEC: AgentSpec = AgentSpec {
    agent: Agent::Dsh,
    display: "DeepSeek Harness",
    env: &["DSH_HOME"],
    default_store: ".dsh",
    sources: &[
        // dsh refuses a log with a corrupt frame as a whole.
        Source::ZstdJsonl {
            files: &["sessions/*/*/session*.jsonl.zstd"],
            corrupt: Corrupt::RefuseFile,
        },
        Source::Jsonl {
            files: &["sessions/*/*/session*.jsonl"],
        },
    ],
    // dsh 0.2.1-rc.2's tools, from a real session's `request/header`.
    tools: &[
        (ToolKind::Shell, "bash"),
        (ToolKind::Read, "read"),
        (ToolKind::Write, "write"),
        (ToolKind::Edit, "edit"),
        (ToolKind::Search, "grep"),
        (ToolKind::Search, "glob"),
        (ToolKind::Web, "web_fetch"),
        (ToolKind::Web, "web_search"),
        (ToolKind::SubAgent, "subagent"),
        (ToolKind::SubAgent, "subagent_fork"),
        (ToolKind::Todo, "todo_write"),
        (ToolKind::Read, "read_image"),
        (ToolKind::Other, "create_goal"),
        (ToolKind::Other, "get_goal"),
        (ToolKind::Other, "update_goal"),
        (ToolKind::Other, "exit_plan_mode"),
        (ToolKind::Other, "interrupt_agent"),
        (ToolKind::Other, "job_kill"),
        (ToolKind::Other, "job_list"),
        (ToolKind::Other, "job_output"),
        (ToolKind::Other, "list_agents"),
        (ToolKind::Other, "send_message"),
        (ToolKind::Other, "skill"),
        (ToolKind::Other, "workflow"),
        (ToolKind::Other, "working_directory"),
    ],
    arguments: &[
        ("bash", &["command", "description", "timeout"]),
        ("read", &["file_path", "offset", "limit"]),
        ("write", &["file_path", "content"]),
        (
            "edit",
            &["file_path", "old_string", "new_string", "replace_all"],
        ),
        ("grep", &["pattern", "path", "glob"]),
        ("glob", &["pattern", "path"]),
        ("web_fetch", &["url"]),
        ("web_search", &["query"]),
        ("subagent", &["description", "prompt"]),
        ("todo_write", &["todos"]),
    ],
    tokenizer: TokenizerFamily::ClaudeEstimate,
    // dsh refuses to start without DSH_HOME; `{root}` is the store root.
    resume: "DSH_HOME={root} dsh headless --session-id {id} \"<prompt>\"  (interactive: DSH_HOME={root} dsh tui --resume {id})",
    native_key: NATIVE_KEY,
    integration: Integration::NONE,
};

impl Adapter for Dsh {
    fn spec(&self) -> &'static AgentSpec {
        &SPEC
    }

    fn validate_native_id(&self, native_id: &str) -> Result<(), String> {
        render::validate_native_id(native_id)
    }

    fn store_root(&self, env: &dyn Fn(&str) -> Option<String>, home: &Path) -> PathBuf {
        match env("DSH_HOME") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => home.join(".dsh"),
        }
    }

    /// `sessions/--<key>--/<id>/session[.vN].jsonl[.zstd]`: every generation
    /// and encoding, so that one this build cannot read is refused with a
    /// reason instead of being passed over.
    fn is_session_file(&self, relative: &Path) -> bool {
        let parts: Vec<&str> = relative
            .components()
            .filter_map(|c| c.as_os_str().to_str())
            .collect();
        matches!(parts.as_slice(), ["sessions", project, _id, name]
            if (project.starts_with("--") && project.ends_with("--") || *project == "_no-cwd")
                && wire::log_name(name).is_some())
    }

    fn parse(&self, input: ParseInput<'_>) -> Parsed {
        parse::parse(input)
    }

    fn render_to(
        &self,
        head: RenderHead<'_>,
        events: &mut dyn Iterator<Item = Event>,
        out: &mut dyn FileSink,
    ) -> Result<ChangeSet, RenderError> {
        render::render(head, events, out)
    }
}

#[cfg(test)]
mod tests;
