//! The dsh session log as dsh 0.2.1 writes it: the header line, the event
//! envelope, the 62-type vocabulary, seq-range encoding and the path rules
//! (project key, segment escaping, generation file names).
//!
//! These are facts about the native format (`shared/formats/dsh.md`), kept
//! apart from the mapping so parse, render and the root crate's frame
//! reader share one copy. The header and envelope key sets are **closed** in
//! dsh: an unknown header key makes a session invisible, an unknown
//! envelope key makes the log corrupt, so [`HEADER_KEYS`] and
//! [`ENVELOPE_KEYS`] are what render may write, in dsh's own order.

use serde_json::{Map, Value};

/// The session format version this build reads and writes (dsh 0.2.x).
pub const FORMAT_VERSION: u64 = 4;

/// The file name of a current-generation compressed log.
pub const LOG_FILE: &str = "session.v4.jsonl.zstd";

/// The file name of a current-generation raw (uncompressed) log.
pub const RAW_LOG_FILE: &str = "session.v4.jsonl";

/// The empty file dsh `flock`s while it writes a session.
pub const LOCK_FILE: &str = "session.lock";

/// Header keys dsh accepts, in the order it writes them.
pub const HEADER_KEYS: [&str; 9] = [
    "type",
    "version",
    "id",
    "createdAt",
    "cwd",
    "parentSession",
    "isSeeded",
    "origin",
    "delegationDepth",
];

/// The one header key dsh accepts beyond [`HEADER_KEYS`]; it is written last.
pub const HEADER_KEY_PRESET: &str = "agentPreset";

/// Envelope keys dsh accepts, in the order it writes them.
pub const ENVELOPE_KEYS: [&str; 7] = [
    "type",
    "seq",
    "time",
    "data",
    "ignorable",
    "sourceEventSeqs",
    "surfaceOp",
];

/// The event types dsh 0.2.1-rc.2 knows (`KNOWN_SESSION_EVENT_TYPES`).
///
/// A type outside this list is refused by dsh unless the envelope says
/// `"ignorable": true`. Sorted, for binary search.
pub const KNOWN_TYPES: [&str; 62] = [
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/attempt",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "deliverables/presented",
    "developer/message",
    "feedback/message-delete",
    "feedback/message-put",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "image/offload",
    "job/registered",
    "job/settled",
    "llm/retry",
    "llm/retry-started",
    "model/selection",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session-log-deepseek/delivery-accepted",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/catalog",
    "subagent/descriptor",
    "subagent/model-selection-policy",
    "system/message",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/ptc-dispatch",
    "tool/ptc-dispatch-start",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
    "working-directory/change",
    "workspace/changes",
];

/// The surface event types: they carry `surfaceOp`, no other type may.
pub const SURFACE_TYPES: [&str; 5] = [
    "system/message",
    "developer/message",
    "user/message",
    "assistant/message",
    "tool/result",
];

/// Returns whether dsh 0.2.1 knows the event type.
pub fn is_known_type(kind: &str) -> bool {
    KNOWN_TYPES.binary_search(&kind).is_ok()
}

/// Returns whether `kind` is in the official extension namespace
/// `plugin:<seg>(/<seg>)*`, lowercase segments `[a-z0-9][a-z0-9._-]*`.
pub fn is_plugin_type(kind: &str) -> bool {
    let Some(rest) = kind.strip_prefix("plugin:") else {
        return false;
    };
    rest.split('/').all(|seg| {
        let mut chars = seg.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && chars.all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
            })
    })
}

/// Holds the facts of a header line (any version; [`check_header`] says
/// whether this build reads it).
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// `version`.
    pub version: u64,
    /// `id`: the session id dsh resumes by.
    pub id: String,
    /// `createdAt`, Unix ms.
    pub created_at: u64,
    /// `cwd`, absolute.
    pub cwd: Option<String>,
    /// `parentSession`, for forks and sub-agents.
    pub parent: Option<String>,
    /// `isSeeded`: the log starts with a fork-inherited prefix.
    pub is_seeded: bool,
    /// `origin` (`"subagent"`).
    pub origin: Option<String>,
    /// `delegationDepth`.
    pub delegation_depth: u64,
}

/// Says why a header line cannot be read by this build.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Not a JSON object with `"type": "session"` and a numeric version.
    #[error("not a session header: {0}")]
    Malformed(String),
    /// The file name states another generation than the header (dsh:
    /// "session generation filename identifies vN, but its header
    /// identifies vM").
    #[error("session generation filename identifies v{named}, but its header identifies v{header}")]
    Generation {
        /// The generation the file name states.
        named: u64,
        /// The header's version.
        header: u64,
    },
    /// Written by a newer dsh.
    #[error(
        "session format v{0} was written by a newer DeepSeek Harness than this build reads (v4); upgrade git-session"
    )]
    Newer(u64),
    /// Written by an older dsh this build has no reader for.
    #[error(
        "session format v{0} (DeepSeek Harness 0.1.x) is older than this build reads (v4); there is no upgrade path here: open it once with dsh 0.2 so it migrates the log to v4"
    )]
    Older(u64),
}

/// Reads a header line and checks that this build reads its version.
///
/// The version is checked before the rest of the shape, as dsh does, so a
/// future format with a different shape still says "upgrade".
pub fn check_header(line: &[u8]) -> Result<Header, HeaderError> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| HeaderError::Malformed(format!("not JSON ({e})")))?;
    let Value::Object(map) = value else {
        return Err(HeaderError::Malformed("not a JSON object".into()));
    };
    if map.get("type").and_then(Value::as_str) != Some("session") {
        return Err(HeaderError::Malformed("type is not \"session\"".into()));
    }
    let version = map
        .get("version")
        .and_then(Value::as_u64)
        .ok_or_else(|| HeaderError::Malformed("no numeric version".into()))?;
    match version.cmp(&FORMAT_VERSION) {
        std::cmp::Ordering::Greater => return Err(HeaderError::Newer(version)),
        std::cmp::Ordering::Less => return Err(HeaderError::Older(version)),
        std::cmp::Ordering::Equal => {}
    }
    header_of(&map)
}

/// Reads the fields of a v4 header object.
fn header_of(map: &Map<String, Value>) -> Result<Header, HeaderError> {
    let str_of = |k: &str| map.get(k).and_then(Value::as_str).map(str::to_owned);
    let id = str_of("id")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| HeaderError::Malformed("no id".into()))?;
    Ok(Header {
        version: FORMAT_VERSION,
        id,
        created_at: map.get("createdAt").and_then(Value::as_u64).unwrap_or(0),
        cwd: str_of("cwd"),
        parent: str_of("parentSession"),
        is_seeded: map
            .get("isSeeded")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        origin: str_of("origin"),
        delegation_depth: map
            .get("delegationDepth")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    })
}

/// Expands an on-disk `sourceEventSeqs` (`[2,[5,9],12]`: runs of three or
/// more as `[start, end]`) into plain seqs; `None` when it is malformed.
pub fn decode_seq_ranges(value: &Value) -> Option<Vec<u64>> {
    let mut out = Vec::new();
    for item in value.as_array()? {
        match item {
            Value::Number(n) => out.push(n.as_u64()?),
            Value::Array(pair) if pair.len() == 2 => {
                let (a, b) = (pair[0].as_u64()?, pair[1].as_u64()?);
                // A hostile range must not allocate without bound.
                if b < a || b - a > 1 << 20 {
                    return None;
                }
                out.extend(a..=b);
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Encodes seqs as dsh writes them: a run of three or more consecutive
/// seqs becomes `[start, end]`.
pub fn encode_seq_ranges(seqs: &[u64]) -> Value {
    let mut out = Vec::new();
    let mut i = 0;
    while i < seqs.len() {
        let mut j = i;
        while j + 1 < seqs.len() && seqs[j + 1] == seqs[j] + 1 {
            j += 1;
        }
        if j - i >= 2 {
            out.push(Value::from(vec![seqs[i], seqs[j]]));
        } else {
            for s in &seqs[i..=j] {
                out.push(Value::from(*s));
            }
        }
        i = j + 1;
    }
    Value::Array(out)
}

/// Returns dsh's project directory name for a cwd (`--<key>--`).
///
/// dsh checks on load that a log sits under the key of its header's cwd,
/// so this must be exact (`dsh-session-persistence-jsonl` `projectKey`):
/// over UTF-16 code units, each run of `/`, `\` or `:` is one `-`,
/// `[A-Za-z0-9._-]` stay, anything else is `~XXXX`; leading `-` go, an
/// empty key is `root`, and the key is cut to 251 units.
pub fn project_dir(cwd: Option<&str>) -> String {
    let Some(cwd) = cwd else {
        return "_no-cwd".to_owned();
    };
    let mut key = String::new();
    let mut in_sep = false;
    for unit in cwd.encode_utf16() {
        let sep = matches!(unit, 0x2F | 0x5C | 0x3A);
        if sep {
            if !in_sep {
                key.push('-');
            }
            in_sep = true;
            continue;
        }
        in_sep = false;
        push_unit(&mut key, unit);
    }
    let key = key.trim_start_matches('-');
    let mut key = if key.is_empty() { "root" } else { key }.to_owned();
    // Every char pushed is ASCII, so bytes are UTF-16 units here.
    key.truncate(251);
    format!("--{key}--")
}

/// Returns dsh's directory name for a session id (`encodeSegment`): the
/// project-key escape without the separator rule, so it is injective and
/// never `.`/`..` or a path with a separator.
pub fn encode_segment(id: &str) -> String {
    // `.` and `..` alone would name the directory itself or its parent.
    match id {
        "." => return "~002E".to_owned(),
        ".." => return "~002E~002E".to_owned(),
        _ => {}
    }
    let mut out = String::new();
    for unit in id.encode_utf16() {
        push_unit(&mut out, unit);
    }
    out
}

fn push_unit(out: &mut String, unit: u16) {
    match u8::try_from(unit) {
        Ok(b) if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') => {
            out.push(char::from(b));
        }
        _ => {
            use std::fmt::Write as _;
            let _ = write!(out, "~{unit:04X}");
        }
    }
}

/// Says what a file name under a session directory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogName {
    /// A log of generation `version`; `compressed` for `.zstd`.
    Log {
        /// The generation the name states.
        version: u64,
        /// Whether the file is zstd frames (else raw JSONL).
        compressed: bool,
    },
}

/// Reads a log file name: `session.jsonl` (v0) or `session.v<N>.jsonl`
/// (N ≥ 1, canonical decimal), plus `.zstd` when compressed.
pub fn log_name(name: &str) -> Option<LogName> {
    let (stem, compressed) = match name.strip_suffix(".zstd") {
        Some(stem) => (stem, true),
        None => (name, false),
    };
    let stem = stem.strip_suffix(".jsonl")?;
    let version = if stem == "session" {
        0
    } else {
        let n = stem.strip_prefix("session.v")?;
        if n.is_empty() || n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        n.parse().ok()?
    };
    Some(LogName::Log {
        version,
        compressed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_types_are_sorted_and_62() {
        let mut sorted = KNOWN_TYPES;
        sorted.sort_unstable();
        assert_eq!(sorted, KNOWN_TYPES);
        assert!(is_known_type("tool/result"));
        assert!(!is_known_type("assistant/chunk"));
    }

    #[test]
    fn plugin_namespace() {
        assert!(is_plugin_type("plugin:git-session/import"));
        assert!(!is_plugin_type("plugin:Git/x"));
        assert!(!is_plugin_type("plugin:"));
        assert!(!is_plugin_type("git-session/marker"));
    }

    #[test]
    fn project_keys_match_dsh() {
        assert_eq!(
            project_dir(Some("/tmp/oracle-sample/dsh/project")),
            "--tmp-oracle-sample-dsh-project--"
        );
        assert_eq!(project_dir(Some("/")), "--root--");
        assert_eq!(project_dir(Some("/a//b:c\\d")), "--a-b-c-d--");
        assert_eq!(project_dir(Some("/home/u/~x y")), "--home-u-~007Ex~0020y--");
        assert_eq!(project_dir(Some("/é")), "--~00E9--");
        assert_eq!(project_dir(None), "_no-cwd");
        let long = format!("/{}", "a".repeat(400));
        assert_eq!(project_dir(Some(&long)).len(), 251 + 4);
    }

    #[test]
    fn segments_are_injective_and_safe() {
        assert_eq!(encode_segment("session-1"), "session-1");
        assert_eq!(encode_segment("."), "~002E");
        assert_eq!(encode_segment(".."), "~002E~002E");
        assert_eq!(encode_segment("a/b"), "a~002Fb");
        assert_eq!(encode_segment("~"), "~007E");
        assert_eq!(encode_segment("..."), "...");
    }

    #[test]
    fn seq_ranges_round_trip() {
        let v = json!([2, [5, 9], 12]);
        let seqs = decode_seq_ranges(&v).unwrap();
        assert_eq!(seqs, vec![2, 5, 6, 7, 8, 9, 12]);
        assert_eq!(encode_seq_ranges(&seqs), v);
        assert_eq!(encode_seq_ranges(&[1, 2]), json!([1, 2]));
        assert!(decode_seq_ranges(&json!([[9, 5]])).is_none());
        assert!(decode_seq_ranges(&json!([[0, u64::MAX]])).is_none());
    }

    #[test]
    fn header_versions_have_a_direction() {
        let h = br#"{"type":"session","version":4,"id":"s","createdAt":1,"cwd":"/p","isSeeded":false,"delegationDepth":0}"#;
        assert_eq!(check_header(h).unwrap().cwd.as_deref(), Some("/p"));
        let newer = br#"{"type":"session","version":5,"totally":"different"}"#;
        assert!(matches!(check_header(newer), Err(HeaderError::Newer(5))));
        assert!(
            check_header(newer)
                .unwrap_err()
                .to_string()
                .contains("upgrade")
        );
        let older = br#"{"type":"session","version":0,"id":"s","createdAt":1}"#;
        assert!(matches!(check_header(older), Err(HeaderError::Older(0))));
        assert!(matches!(
            check_header(b"{\"type\":\"x\"}"),
            Err(HeaderError::Malformed(_))
        ));
    }

    #[test]
    fn log_names() {
        assert_eq!(
            log_name("session.v4.jsonl.zstd"),
            Some(LogName::Log {
                version: 4,
                compressed: true
            })
        );
        assert_eq!(
            log_name("session.jsonl"),
            Some(LogName::Log {
                version: 0,
                compressed: false
            })
        );
        assert_eq!(log_name("session.v04.jsonl.zstd"), None);
        assert_eq!(log_name("session.V4.jsonl"), None);
        assert_eq!(log_name("session.lock"), None);
    }
}
