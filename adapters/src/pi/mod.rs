//! Pi coding-agent sessions (`~/.pi/agent/sessions/--<cwd>--/<ts>_<id>.jsonl`)
//! to and from canonical events.
//!
//! A Pi session file is a header line (`type: "session"`, `version` 1-3)
//! followed by entries that form a **tree** through `id`/`parentId`; the
//! active leaf is the last line of the file (formats/pi.md). Parsing
//! (`parse.rs`, which has the full mapping table) keeps the whole tree: every
//! entry's `parentId` becomes the canonical `parent_seq`, so side branches
//! the user went back from stay in the log, and the log keeps Pi's file
//! order, so the active leaf is the last entry event in seq order (as in the
//! file). Rendering (`render.rs`) writes the kept entries back in that order
//! with their own ids, so the same leaf is again on the last line; events
//! from another agent are written as minimal entries chained after it.
//!
//! This module does no IO: it never opens the store, reads the environment
//! or asks the clock. It does not read `settings.json` (its `sessionDir`) or
//! the schovest fork's `<session>.jsonl.meta` sidecar.
//!
//! # Canonical payloads
//!
//! | type | payload |
//! | --- | --- |
//! | `session.start` | `cwd`, `version` (the file's header) |
//! | `message.user`, `message.assistant` | `text` (or `image: {media_type, artifact}`); `model`, `provider` on assistant text |
//! | `message.thinking` | `text`, `opaque: {agent: "pi", signature, api, provider, model}` (the signature is only valid for that model); `redacted: true` when Pi marked it so |
//! | `tool.call` | `call_id`, `name`, `arguments` |
//! | `tool.result` | `call_id`, `name`, `output` (text), `is_error`; images in `refs` |
//! | `command.run` | `call_id` (none for a user `!cmd`), `command`, `exit_code`, `is_error`, `output_tail`, `output_truncated` |
//! | `file.edit` | `call_id`, `path`, `tool`, `diff` |
//! | `file.read` | `call_id`, `path`, `offset`, `limit` |
//! | `checkpoint` | `reason` (`compaction` or `branch_summary`), `summary`, `first_kept` / `from` (entry ids) |
//! | `session.title` | `title`, `source: "custom"` (a `session_info` entry) |
//! | `meta` | `record_type` (the entry type), `role` for a message role we do not map; `unparsed` and `error` for a line that is no JSON object |
//!
//! Every event's `origin.native_id` is the entry's `id` (`<id>#<k>` for the
//! k-th further event of one entry), `origin.native_seq` its zero-based line.
//!
//! # The `pi` payload key
//!
//! Every event made from a line carries `payload.pi` with some of:
//!
//! * `record`: on the first event of each line, the entry as Pi wrote it.
//!   For a message whose content is rebuilt from the events, the content is
//!   left in place as `null` (so the key order survives) and `content` says
//!   how to rebuild it: `"string"` (the event's `text`), `"blocks"` (one
//!   event per block, each with a `block`) or `"items"` (a tool result).
//! * `block`: the content block minus the fields the canonical payload
//!   holds, which stay in place as `null`.
//! * `items`: a tool result's content list with its single text (and image
//!   bytes) left as `null`.
//!
//! Events derived from a tool call and its result (`command.run`,
//! `file.edit`, `file.read`) have no `pi` key and carry `derived_from:
//! {call_seq, result_seq}`; the renderer skips them.

mod derive;
mod parse;
mod render;

use std::path::{Component, Path, PathBuf};

use git_session_schema::{Agent, Event};
use serde_json::Value;

use crate::{
    Adapter, AgentSpec, ChangeSet, ExtraDir, FileSink, ParseInput, Parsed, Records, RenderError,
    RenderHead, Source, TokenizerFamily, ToolKind, registry::Integration,
};

/// The payload key under which events keep Pi's own entry data.
pub const NATIVE_KEY: &str = "pi";

/// The session format version Pi writes today, and the one renders write.
pub const VERSION: u64 = 3;

/// Speaks the Pi coding agent's session format (0.73.x and 1.x).
#[derive(Clone, Copy, Debug, Default)]
pub struct Pi;

/// Pi's registry row.
pub static SPEC: AgentSpec = AgentSpec {
    agent: Agent::Pi,
    display: "Pi",
    env: &["PI_CODING_AGENT_DIR"],
    default_store: ".pi/agent",
    sources: &[Source::Jsonl {
        files: &["sessions/*/*.jsonl"],
    }],
    tools: &[
        (ToolKind::Shell, "bash"),
        (ToolKind::Read, "read"),
        (ToolKind::Edit, "edit"),
        (ToolKind::Write, "write"),
    ],
    arguments: &[
        ("bash", &["command", "timeout:s"]),
        ("read", &["path", "offset", "limit"]),
        ("edit", &["path", "oldText", "newText"]),
        ("write", &["path", "content"]),
    ],
    tokenizer: TokenizerFamily::ClaudeEstimate,
    resume: "pi --session {id}",
    native_key: NATIVE_KEY,
    integration: Integration::NONE,
};

impl Adapter for Pi {
    fn spec(&self) -> &'static AgentSpec {
        &SPEC
    }

    /// Pi's session ids (UUID-like, from the header) become file names.
    fn validate_native_id(&self, native_id: &str) -> Result<(), String> {
        let ok = !native_id.is_empty()
            && native_id.len() <= 128
            && native_id != "."
            && native_id != ".."
            && native_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            && !native_id.contains("..");
        if ok {
            Ok(())
        } else {
            Err(format!("{native_id:?} cannot name a Pi session file"))
        }
    }

    /// Returns `$PI_CODING_AGENT_DIR` when set and not empty, else
    /// `~/.pi/agent`.
    fn store_root(&self, env: &dyn Fn(&str) -> Option<String>, home: &Path) -> PathBuf {
        match env("PI_CODING_AGENT_DIR") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => home.join(".pi").join("agent"),
        }
    }

    fn extra_dirs(&self) -> &'static [ExtraDir] {
        EXTRA_DIRS
    }

    /// Accepts `sessions/<dir>/<name>.jsonl`, and a bare `<name>.jsonl` (a
    /// file of an [`Adapter::extra_dirs`] directory): Pi lists every
    /// `*.jsonl` of a session directory and takes the id from the header,
    /// never from the file name.
    fn is_session_file(&self, relative: &Path) -> bool {
        let parts: Vec<&str> = relative
            .components()
            .map(|c| match c {
                Component::Normal(s) => s.to_str().unwrap_or(""),
                _ => "",
            })
            .collect();
        let jsonl = |file: &str| file.len() > ".jsonl".len() && file.ends_with(".jsonl");
        match parts.as_slice() {
            ["sessions", dir, file] => !dir.is_empty() && jsonl(file),
            [file] => jsonl(file),
            _ => false,
        }
    }

    fn parse(&self, input: ParseInput<'_>) -> Parsed {
        let (bytes, first_line): (std::borrow::Cow<'_, [u8]>, u64) = match &input.records {
            Records::Lines {
                bytes, first_line, ..
            } => (std::borrow::Cow::Borrowed(*bytes), *first_line),
            other => {
                let mut joined = Vec::new();
                let mut first = None;
                for r in other.iter() {
                    first.get_or_insert(r.pos.ordinal());
                    joined.extend_from_slice(r.bytes);
                    joined.push(b'\n');
                }
                (std::borrow::Cow::Owned(joined), first.unwrap_or(0))
            }
        };
        parse::parse(
            &bytes,
            first_line,
            input.next_seq,
            input.state,
            input.source,
            input.memo,
        )
    }

    /// A same-agent render writes the file as Pi's own migration leaves
    /// it: the header as version 3 under `native_id` (a header without
    /// `id`, which Pi 1.6.0 refuses, gets one), and the entries of a v1/v2
    /// file migrated (ids and parents for v1, `hookMessage` as `custom`).
    fn l2_remap_session(&self, records: &mut [Value], native_id: &str) {
        let Some((header, entries)) = records.split_first_mut() else {
            return;
        };
        let Some(h) = header
            .as_object_mut()
            .filter(|h| h.get("type").and_then(Value::as_str) == Some("session"))
        else {
            return;
        };
        let version = h.get("version").and_then(Value::as_u64).unwrap_or(1);
        h.insert("version".into(), Value::from(VERSION));
        h.insert("id".into(), Value::from(native_id));
        let mut prev_id = None;
        for (n, entry) in entries.iter_mut().enumerate() {
            if let Some(record) = entry.as_object_mut() {
                parse::migrate(version, n as u64 + 1, &mut prev_id, record);
            }
        }
    }

    /// The header a render writes is version 3 under the target's id (see
    /// [`Adapter::l2_remap_session`]): the kept header's `id` and the
    /// versions are not compared; the entries' migration is already in
    /// the events of either parse.
    fn l0_remap(&self, event: &mut Event) {
        if event.kind != git_session_schema::kinds::SESSION_START {
            return;
        }
        if let Some(p) = event.payload.as_object_mut() {
            p.remove("version");
            if let Some(h) = p
                .get_mut(NATIVE_KEY)
                .and_then(|n| n.get_mut("record"))
                .and_then(Value::as_object_mut)
            {
                h.remove("id");
                h.remove("version");
            }
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

/// Where Pi can be told to keep session files besides
/// `sessions/--<cwd>--/`: `PI_CODING_AGENT_SESSION_DIR`, and the
/// `sessionDir` of the agent's `settings.json` and of each project's
/// `.pi/settings.json` (`~` is the home; a project's relative path is
/// taken from the project, as Pi run there takes it).
pub static EXTRA_DIRS: &[ExtraDir] = &[
    ExtraDir::Env("PI_CODING_AGENT_SESSION_DIR"),
    ExtraDir::StoreSetting {
        file: "settings.json",
        key: "sessionDir",
    },
    ExtraDir::ProjectSetting {
        file: ".pi/settings.json",
        key: "sessionDir",
    },
];

/// Returns the session directory name Pi uses for `cwd`: the leading `/`
/// or `\` removed, then `/`, `\` and `:` replaced by `-`, between `--`.
pub fn session_dir_name(cwd: &str) -> String {
    let trimmed = cwd
        .strip_prefix('/')
        .or_else(|| cwd.strip_prefix('\\'))
        .unwrap_or(cwd);
    format!("--{}--", trimmed.replace(['/', '\\', ':'], "-"))
}

/// Returns whether `id` can name a session file: Pi's UUIDs and the ids
/// `--session-id` accepts, and nothing that could leave the directory.
pub fn is_valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Returns the path, relative to the store root, where a session is
/// written: `sessions/--<cwd>--/<created>_<id>.jsonl`, `created` with `:`
/// and `.` as `-` like Pi's own names. `native_id` must be valid (see
/// [`is_valid_session_id`]).
pub fn session_path(cwd: &str, created: &str, native_id: &str) -> PathBuf {
    let stamp: String = created
        .chars()
        .map(|c| if c == ':' || c == '.' { '-' } else { c })
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let name = if stamp.is_empty() {
        format!("{native_id}.jsonl")
    } else {
        format!("{stamp}_{native_id}.jsonl")
    };
    PathBuf::from("sessions")
        .join(session_dir_name(cwd))
        .join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_dir_follows_the_client() {
        assert_eq!(
            session_dir_name("/tmp/oracle-sample/pi/project"),
            "--tmp-oracle-sample-pi-project--"
        );
        assert_eq!(session_dir_name("C:\\w\\p"), "--C--w-p--");
    }

    #[test]
    fn session_files_are_jsonl_in_a_session_directory() {
        let p = Pi;
        assert!(p.is_session_file(Path::new("sessions/--p--/2026_x.jsonl")));
        assert!(p.is_session_file(Path::new("sessions/--p--/whatever.jsonl")));
        assert!(!p.is_session_file(Path::new("sessions/--p--/x.jsonl.meta")));
        assert!(!p.is_session_file(Path::new("settings.json")));
        assert!(!p.is_session_file(Path::new("sessions/x.jsonl")));
        // A file of a configured session directory, by its bare name.
        assert!(p.is_session_file(Path::new("2026_x.jsonl")));
        assert!(!p.is_session_file(Path::new("sessions/--p--/sub/x.jsonl")));
    }

    #[test]
    fn store_root_honours_pi_coding_agent_dir() {
        let home = Path::new("/home/u");
        assert_eq!(
            Pi.store_root(&|_| None, home),
            PathBuf::from("/home/u/.pi/agent")
        );
        let env = |k: &str| (k == "PI_CODING_AGENT_DIR").then(|| "/cfg".to_owned());
        assert_eq!(Pi.store_root(&env, home), PathBuf::from("/cfg"));
    }

    #[test]
    fn session_dirs_come_from_the_environment_and_the_settings() {
        let home = Path::new("/home/u");
        let root = home.join(".pi/agent");
        let project = PathBuf::from("/w/repo");
        let read = |p: &Path| -> Option<Vec<u8>> {
            if p == Path::new("/home/u/.pi/agent/settings.json") {
                Some(br#"{"sessionDir": "~/pi-sessions", "theme": "dark"}"#.to_vec())
            } else if p == Path::new("/w/repo/.pi/settings.json") {
                Some(br#"{"sessionDir": ".sessions"}"#.to_vec())
            } else {
                None
            }
        };
        let env = |k: &str| (k == "PI_CODING_AGENT_SESSION_DIR").then(|| "/var/s".to_owned());
        assert_eq!(
            crate::source::resolve_extra_dirs(
                Pi.extra_dirs(),
                &root,
                &env,
                home,
                std::slice::from_ref(&project),
                &read
            ),
            [
                PathBuf::from("/var/s"),
                PathBuf::from("/home/u/pi-sessions"),
                PathBuf::from("/w/repo/.sessions")
            ]
        );
        // Unreadable settings mean no directory, not an error.
        let junk = |_: &Path| Some(b"not json".to_vec());
        assert!(
            crate::source::resolve_extra_dirs(
                Pi.extra_dirs(),
                &root,
                &|_| None,
                home,
                &[project],
                &junk
            )
            .is_empty()
        );
    }

    #[test]
    fn hostile_ids_never_become_paths() {
        for bad in [
            "",
            "../x",
            "a/b",
            ".hidden",
            "a\u{7}b",
            "a b",
            &"x".repeat(200),
        ] {
            assert!(!is_valid_session_id(bad), "{bad:?}");
        }
        assert!(is_valid_session_id("01a2263e-43af-7004-9579-087d371e79c0"));
        assert_eq!(
            session_path("/p", "2026-11-29T07:41:50.690Z", "abc"),
            PathBuf::from("sessions/--p--/2026-11-29T07-41-50-690Z_abc.jsonl")
        );
        // A hostile timestamp cannot add path components either.
        assert_eq!(
            session_path("/p", "../../x", "abc"),
            PathBuf::from("sessions/--p--/----x_abc.jsonl")
        );
    }
}
