//! Claude Code transcripts (`~/.claude/projects/<dir>/<session>.jsonl`) to
//! and from canonical events.
//!
//! Parsing (`parse.rs`, which has the full mapping table) turns every line
//! into events and keeps, under the payload key [`NATIVE_KEY`], what the
//! canonical payload does not hold, so that rendering (`render.rs`) can
//! write the records back as the client wrote them (L2): uuids and parent
//! links, message ids, thinking signatures, tool ids, attachments, side
//! records. Rendering a session that did not come from Claude builds a
//! minimal transcript from its user, assistant and tool events instead
//! (formats/claude.md §5.1, §6).
//!
//! This module does no IO: it never opens the store, reads the environment or
//! asks the clock. It does not read `agent-<id>.meta.json` or
//! `~/.claude.json` (neither is needed to resume, formats/claude.md §5).
//!
//! # Canonical payloads
//!
//! | type | payload |
//! | --- | --- |
//! | `message.user`, `message.assistant` | `text` (or `image: {media_type, artifact}` with the artifact in `refs`); `model` on assistant text; `compact_summary: true` on the summary after a compaction |
//! | `message.thinking` | `text` and `opaque: {agent: "claude", signature}`; redacted: `redacted: true`, `opaque: {agent, data}` |
//! | `tool.call` | `call_id`, `name`, `arguments` |
//! | `tool.result` | `call_id`, `output` (text), `is_error`; images in `refs`; `spawned_session` (the sub-agent's native id) on Agent/Task results |
//! | `command.run` | `call_id`, `command`, `exit_code` (null when unknown), `is_error`, `output_tail`, `output_truncated` |
//! | `file.edit` | `call_id`, `path`, `tool`, `diff` (unified), `positions_exact` |
//! | `file.read` | `call_id`, `path`, `offset`, `limit` |
//! | `todo.add`, `todo.update` | `call_id`, `content`, `status`, `previous_status` |
//! | `checkpoint` | `reason: "compaction"`, `trigger` |
//! | `session.title` | `title`, `source` (`custom` or `summary`) |
//! | `meta` | `record_type`, `subtype` (system subtype, attachment or progress type), or `block_type` for a content block we do not map |
//!
//! Every event's `origin.native_id` is the line's `uuid` (`<uuid>#<k>` for
//! the k-th further event of one line; none for side records, which have no
//! uuid), `origin.native_seq` its zero-based line number, and `parent_seq`
//! follows `parentUuid` (or `logicalParentUuid` across a compaction).
//!
//! # The `claude` payload key
//!
//! Every event made from a transcript line carries `payload.claude`, an
//! object with some of:
//!
//! * `record`: on the first event of each line, the line's JSON object. For
//!   `user`/`assistant` lines `message.content` is removed from it (the
//!   content is rebuilt from the events); for every other line it is the
//!   whole record.
//! * `content: "string"`: the message content was a plain string (the one
//!   event's `text`).
//! * `block`: for each content block, the block minus the fields the
//!   canonical payload holds (`text`, `thinking`/`signature`, `id`/`name`/
//!   `input`, `tool_use_id`/`content`/`is_error`, image bytes). A tool
//!   result's list content is kept here with its single text and image bytes
//!   taken out; a block type we do not map is kept whole.
//! * `absent`: names of lifted block fields the native block did not have
//!   (`is_error`, `content`), so they are not invented on the way back.
//!
//! The renderer takes the canonical payload as the truth for what it holds
//! and the kept record for the rest. Kept records repeat some content the
//! client stores twice (`toolUseResult.stdout`, a Read's file text, an
//! attachment's rendered text), so redaction must walk `payload.claude`
//! too. Events derived from a tool call and its result (`command.run`,
//! `file.edit`, `file.read`, `todo.*`) have no `claude` key and carry
//! `derived_from: {call_seq, result_seq}` (origin `<tool id>/<type>`); the
//! renderer skips them.

pub(crate) mod derive;
mod parse;
mod render;
pub(crate) mod uuids;
pub mod wire;

use std::path::{Path, PathBuf};

use git_session_schema::{Agent, Event};

use crate::registry::{
    AgentSpec, ConfigDir, ConfigFile, Hook, HookAction, HookConfig, Integration, McpConfig,
    TokenizerFamily, ToolKind,
};
use crate::source::Source;
use crate::{Adapter, ChangeSet, FileSink, ParseInput, Parsed, RenderError, RenderHead};

/// The payload key under which events keep Claude's own record data.
pub const NATIVE_KEY: &str = "claude";

/// The event type of a session title (`custom-title`, old `summary` lines).
pub const SESSION_TITLE: &str = "session.title";

/// Speaks Claude Code's transcript format.
#[derive(Clone, Copy, Debug, Default)]
pub struct Claude;

/// Claude Code's row of the registry.
pub static SPEC: AgentSpec = AgentSpec {
    agent: Agent::Claude,
    display: "Claude Code",
    env: &["CLAUDE_CONFIG_DIR"],
    default_store: ".claude",
    sources: &[Source::Jsonl {
        files: &[
            "projects/?*/?*.jsonl",
            "projects/?*/?*/subagents/agent-*.jsonl",
        ],
    }],
    tools: &[
        (ToolKind::Shell, "Bash"),
        (ToolKind::Read, "Read"),
        (ToolKind::Write, "Write"),
        (ToolKind::Edit, "Edit"),
        (ToolKind::Edit, "MultiEdit"),
        (ToolKind::Search, "Grep"),
        (ToolKind::Search, "Glob"),
        (ToolKind::Todo, "TodoWrite"),
        (ToolKind::Web, "WebFetch"),
        (ToolKind::Web, "WebSearch"),
        (ToolKind::SubAgent, "Task"),
        (ToolKind::SubAgent, "Agent"),
    ],
    arguments: &[
        (
            "Bash",
            &["command", "timeout", "description", "run_in_background"],
        ),
        ("Read", &["file_path", "offset", "limit"]),
        ("Write", &["file_path", "content"]),
        (
            "Edit",
            &["file_path", "old_string", "new_string", "replace_all"],
        ),
        ("MultiEdit", &["file_path", "edits"]),
        ("Grep", &["pattern", "path", "glob"]),
        ("Glob", &["pattern", "path"]),
        ("TodoWrite", &["todos"]),
        ("WebFetch", &["url", "prompt"]),
        ("WebSearch", &["query"]),
        ("Task", &["description", "prompt", "subagent_type"]),
        ("Agent", &["description", "prompt", "subagent_type"]),
    ],
    tokenizer: TokenizerFamily::ClaudeEstimate,
    resume: "claude --resume {id}",
    native_key: NATIVE_KEY,
    integration: Integration {
        mcp: Some(McpConfig::JsonServers(ConfigFile {
            dir: ConfigDir::Project,
            path: ".mcp.json",
        })),
        hooks: Some(HookConfig::JsonEvents {
            file: ConfigFile {
                dir: ConfigDir::Project,
                path: ".claude/settings.local.json",
            },
            hooks: &[
                Hook {
                    event: "Stop",
                    name: "claude-stop",
                    action: HookAction::Capture,
                },
                Hook {
                    event: "SessionEnd",
                    name: "claude-session-end",
                    action: HookAction::Capture,
                },
                Hook {
                    event: "SessionStart",
                    name: "claude-session-start",
                    action: HookAction::Brief { matcher: "startup" },
                },
            ],
        }),
        skill: Some(".claude/skills/git-session"),
    },
};

impl Adapter for Claude {
    fn spec(&self) -> &'static AgentSpec {
        &SPEC
    }

    /// Returns `$CLAUDE_CONFIG_DIR` when set and not empty, else `~/.claude`.
    /// A session UUID, or `<uuid>/agent-<id>` for a sub-agent transcript
    /// (`<id>` ASCII letters, digits, `-` and `_` only).
    fn validate_native_id(&self, native_id: &str) -> Result<(), String> {
        let (session, agent) = match native_id.split_once('/') {
            Some((s, a)) => (s, Some(a)),
            None => (native_id, None),
        };
        if !render::is_uuid(session) {
            return Err(format!(
                "Claude Code session ids are UUIDs (a sub-agent's: <uuid>/agent-<id>), not {native_id:?}"
            ));
        }
        if let Some(agent) = agent {
            let ok = agent.strip_prefix("agent-").is_some_and(|rest| {
                !rest.is_empty()
                    && rest.len() <= 128
                    && rest
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
            });
            if !ok {
                return Err(format!(
                    "a Claude Code sub-agent id is <uuid>/agent-<letters, digits, - or _>, not {native_id:?}"
                ));
            }
        }
        Ok(())
    }

    fn store_root(&self, env: &dyn Fn(&str) -> Option<String>, home: &Path) -> PathBuf {
        match env("CLAUDE_CONFIG_DIR") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => home.join(".claude"),
        }
    }

    /// Sessions are `projects/<dir>/<id>.jsonl` and
    /// `projects/<dir>/<id>/subagents/agent-<agent>.jsonl` ([`SPEC`]);
    /// nothing else under the store (history, memory, backups) is a
    /// transcript. A sub-agent transcript `agent-<id>.jsonl` has `agent-<id>.meta.json`
    /// beside it, whose `toolUseId` is the parent's spawning tool call.
    fn sidecar(&self, relative: &Path) -> Option<PathBuf> {
        let name = relative.file_name()?.to_str()?;
        let in_subagents = relative.parent()?.file_name()? == "subagents";
        let stem = name
            .strip_suffix(".jsonl")
            .filter(|s| s.starts_with("agent-") && in_subagents)?;
        Some(relative.with_file_name(format!("{stem}.meta.json")))
    }

    fn parse(&self, input: ParseInput<'_>) -> Parsed {
        parse::parse(input)
    }

    /// Render writes the session id on every line.
    fn l2_remap(&self, record: &mut serde_json::Value, native_id: &str) {
        let session_id = native_id.split('/').next().unwrap_or(native_id);
        if let Some(r) = record.as_object_mut() {
            r.insert("sessionId".into(), session_id.into());
        }
    }

    /// The kept record's `sessionId` is rewritten, and line numbers move
    /// because render drops blank lines.
    fn l0_remap(&self, event: &mut Event) {
        if let Some(serde_json::Value::Object(r)) = event
            .payload
            .get_mut(NATIVE_KEY)
            .and_then(|n| n.get_mut("record"))
        {
            r.remove("sessionId");
        }
        if let Some(o) = event.origin.as_mut() {
            o.native_seq = None;
        }
    }

    fn render_to(
        &self,
        head: RenderHead<'_>,
        events: &mut dyn Iterator<Item = Event>,
        out: &mut dyn FileSink,
    ) -> Result<ChangeSet, RenderError> {
        render::render_to(head, events, out)
    }
}

/// Returns the project directory name the client uses for `cwd`.
///
/// Every UTF-16 code unit that is not an ASCII letter or digit becomes `-`
/// (the client runs `replace(/[^a-zA-Z0-9]/g, "-")` on a JS string, so a
/// character outside the BMP becomes two dashes). Names longer than 200
/// keep their first 200 characters, then `-` and the absolute value of the
/// Java-style 32-bit hash of the original path in base 36, which keeps long
/// paths apart (formats/claude.md §1).
pub fn project_dir_name(cwd: &str) -> String {
    const LIMIT: usize = 200;
    let units: Vec<u16> = cwd.encode_utf16().collect();
    let mut name: String = units
        .iter()
        .map(|&u| match u8::try_from(u) {
            Ok(b) if b.is_ascii_alphanumeric() => b as char,
            _ => '-',
        })
        .collect();
    if name.len() <= LIMIT {
        return name;
    }
    let hash = units
        .iter()
        .fold(0i32, |h, &u| h.wrapping_mul(31).wrapping_add(i32::from(u)));
    // `Math.abs` of the most negative int32 is 2^31 in JS, hence i64.
    let mut n = i64::from(hash).unsigned_abs();
    let mut digits = Vec::new();
    loop {
        let d = (n % 36) as u8;
        digits.push(if d < 10 { b'0' + d } else { b'a' + d - 10 } as char);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    name.truncate(LIMIT);
    name.push('-');
    name.extend(digits.iter().rev());
    name
}

/// Returns the path, relative to the store root, of a session's transcript.
///
/// `native_id` is a session uuid, or `<session>/agent-<id>` for a sub-agent
/// transcript (the id [`Claude::parse`] gives those).
pub fn transcript_path(cwd: &str, native_id: &str) -> PathBuf {
    let mut path = PathBuf::from("projects");
    path.push(project_dir_name(cwd));
    match native_id.split_once('/') {
        Some((session, agent)) => {
            path.push(session);
            path.push("subagents");
            path.push(format!("{agent}.jsonl"));
        }
        None => path.push(format!("{native_id}.jsonl")),
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_dir_replaces_every_non_alphanumeric_character() {
        assert_eq!(
            project_dir_name("/tmp/oracle-sample/claude/project"),
            "-tmp-oracle-sample-claude-project"
        );
        assert_eq!(project_dir_name("/a b/c_d.e"), "-a-b-c-d-e");
        // A character outside the BMP is two UTF-16 units, so two dashes.
        assert_eq!(project_dir_name("/x/\u{1F600}"), "-x---");
    }

    #[test]
    fn long_project_dir_gets_the_clients_hash_suffix() {
        // The computed example of formats/claude.md §1 (261 characters).
        let mut cwd = String::from("/home/dev");
        for i in 0..12 {
            cwd.push_str(&format!("/segment_with.dots-{i:02}"));
        }
        assert_eq!(cwd.len(), 261);
        let name = project_dir_name(&cwd);
        assert!(name.ends_with("-segment-with-dots-08-s-bzqh52"), "{name}");
        assert_eq!(name.len(), 200 + "-bzqh52".len());
    }

    #[test]
    fn session_files_are_transcripts_and_subagent_transcripts_only() {
        let c = Claude;
        assert!(c.is_session_file(Path::new("projects/-p/0a33.jsonl")));
        assert!(c.is_session_file(Path::new("projects/-p/0a33/subagents/agent-a1.jsonl")));
        assert!(!c.is_session_file(Path::new("projects/-p/0a33/subagents/agent-a1.meta.json")));
        assert!(!c.is_session_file(Path::new("history.jsonl")));
        assert!(!c.is_session_file(Path::new("projects/-p/memory/notes.md")));
        assert!(!c.is_session_file(Path::new("projects/-p/memory/x.jsonl")));
    }

    #[test]
    fn store_root_honours_claude_config_dir() {
        let c = Claude;
        let home = Path::new("/home/u");
        assert_eq!(
            c.store_root(&|_| None, home),
            PathBuf::from("/home/u/.claude")
        );
        let env = |k: &str| (k == "CLAUDE_CONFIG_DIR").then(|| "/cfg".to_owned());
        assert_eq!(c.store_root(&env, home), PathBuf::from("/cfg"));
    }

    #[test]
    fn transcript_paths_follow_the_client_layout() {
        assert_eq!(
            transcript_path("/p", "abc"),
            PathBuf::from("projects/-p/abc.jsonl")
        );
        assert_eq!(
            transcript_path("/p", "abc/agent-a1"),
            PathBuf::from("projects/-p/abc/subagents/agent-a1.jsonl")
        );
    }
}
