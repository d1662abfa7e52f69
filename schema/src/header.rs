//! The session header: immutable facts about a session, stored once beside
//! its log (`header.json` in the session's tree).
//!
//! **Stored bytes.** Renaming a field breaks every existing session; add new
//! optional fields instead, and bump [`FORMAT_VERSION`] only for changes an
//! older reader must refuse.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::Agent;
use crate::id::SessionId;

/// The canonical format this build writes and reads.
///
/// A reader refuses any other version with a [`FormatError`] that says which
/// side has to change; there is no silent best-effort reading of a format we
/// do not know (seed 003, "format refusal").
pub const FORMAT_VERSION: u32 = 1;

/// The format of an encrypted session (`session.recipients` set when it was
/// created): the header keeps only routing fields in clear and carries the
/// rest as an age ciphertext in `sealed`; chunks and artifacts are sealed
/// blobs (docs/FORMAT.md, "Encrypted sessions"). A build that reads only
/// format 1 refuses it as "newer: upgrade", never as corruption.
pub const SEALED_FORMAT: u32 = 2;

/// The newest format this build reads.
pub const NEWEST_FORMAT: u32 = SEALED_FORMAT;

/// Holds a session's immutable metadata.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct SessionHeader {
    /// Canonical format version the session was written with.
    pub format: u32,
    /// The session id; the session lives at `refs/sessions/<id>`.
    pub id: SessionId,
    /// The agent the session was captured from.
    pub agent: Agent,
    /// The session's id in the agent's own store, if it came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_id: Option<String>,
    /// Absolute working directory the session ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// When the session was created, RFC 3339 UTC.
    pub created: String,
    /// A human title, when the agent or the user gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Where this session was forked from, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<Lineage>,
    /// For a sub-agent's transcript: the session that spawned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<SpawnedBy>,
    /// Fields this build does not know, kept verbatim.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

/// Links a sub-agent session to the session and tool call that started it.
///
/// Unlike [`Lineage`] this is not a fork: the child has its own history and
/// shares no events with the parent.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct SpawnedBy {
    /// The parent's canonical session id.
    pub session: SessionId,
    /// The native id of the tool call in the parent that spawned this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// Fields this build does not know, kept verbatim.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

/// Records the fork a session started from.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Lineage {
    /// The session this one was forked from.
    pub parent_session: SessionId,
    /// The parent's commit (hex object id) this session's history starts from.
    pub parent_commit: String,
    /// The last inherited seq; the fork continues after it.
    pub fork_seq: u64,
    /// Exactly how many leading events were inherited (`fork_seq + 1`).
    pub inherited_events: u64,
    /// Fields this build does not know, kept verbatim.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

/// Says that data is in a format this build will not interpret.
///
/// Distinct from corruption on purpose: the data is fine, this build is the
/// wrong one for it, and the message says which direction to go.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    /// Written by a newer git-session.
    #[error(
        "written by a newer git-session (format {found}, this build reads format {supported}): upgrade git-session"
    )]
    Newer {
        /// Version found in the data.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// Written by an older, pre-release format with no migration.
    #[error(
        "written in format {found}, older than this build's format {supported}, and there is no upgrade path"
    )]
    Older {
        /// Version found in the data.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// No format version at all.
    #[error("no \"format\" version: not a git-session header")]
    Missing,
}

/// Says why header bytes could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// The header is in a format this build refuses.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The header is not valid JSON for this format.
    #[error("malformed header: {0}")]
    Json(#[from] serde_json::Error),
}

/// Checks a format version: [`FORMAT_VERSION`] and [`SEALED_FORMAT`] are
/// read; anything newer says "upgrade", anything older "no upgrade path".
pub fn check_format(found: u32) -> Result<(), FormatError> {
    if (FORMAT_VERSION..=NEWEST_FORMAT).contains(&found) {
        return Ok(());
    }
    match found.cmp(&FORMAT_VERSION) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Greater => Err(FormatError::Newer {
            found,
            supported: NEWEST_FORMAT,
        }),
        std::cmp::Ordering::Less => Err(FormatError::Older {
            found,
            supported: FORMAT_VERSION,
        }),
    }
}

impl SessionHeader {
    /// Returns a header of the current format with no lineage.
    pub fn new(id: SessionId, agent: Agent, created: impl Into<String>) -> SessionHeader {
        SessionHeader {
            format: FORMAT_VERSION,
            id,
            agent,
            native_id: None,
            cwd: None,
            created: created.into(),
            title: None,
            lineage: None,
            spawned_by: None,
            extra: BTreeMap::new(),
        }
    }

    /// Parses a header, checking its format version before anything else.
    ///
    /// The version is read on its own first, so a newer header whose other
    /// fields changed shape is still reported as "newer", not as malformed.
    pub fn decode(bytes: &[u8]) -> Result<SessionHeader, HeaderError> {
        Self::from_value(serde_json::from_slice(bytes)?)
    }

    /// Like [`SessionHeader::decode`], from an already parsed JSON value.
    pub fn from_value(value: Value) -> Result<SessionHeader, HeaderError> {
        let found = value
            .get("format")
            .and_then(Value::as_u64)
            .ok_or(FormatError::Missing)?;
        check_format(u32::try_from(found).unwrap_or(u32::MAX))?;
        Ok(serde_json::from_value(value)?)
    }

    /// Returns the header as the pretty JSON stored in `header.json`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("a header always serializes");
        out.push(b'\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn newer_and_older_formats_are_refused_with_a_direction() {
        let newer = json!({"format": NEWEST_FORMAT + 1, "whatever": "new shape"});
        let err = SessionHeader::from_value(newer).unwrap_err().to_string();
        assert!(
            err.contains("newer git-session") && err.contains("upgrade"),
            "{err}"
        );
        let older = json!({"format": 0, "id": "x", "agent": "claude", "created": "t"});
        let err = SessionHeader::from_value(older).unwrap_err().to_string();
        assert!(err.contains("no upgrade path"), "{err}");
    }

    #[test]
    fn the_sealed_format_is_read() {
        let sealed = json!({"format": SEALED_FORMAT, "id": "s1", "agent": "pi",
                            "created": "2026-01-01T00:00:00Z", "sealed": "AAAA"});
        let header = SessionHeader::from_value(sealed).unwrap();
        assert_eq!(header.format, SEALED_FORMAT);
        assert!(header.extra.contains_key("sealed"));
    }

    #[test]
    fn unknown_fields_survive() {
        let text = json!({"format": 1, "id": "s1", "agent": "pi", "created": "2026-01-01T00:00:00Z",
                          "future": {"a": 1}});
        let header = SessionHeader::from_value(text.clone()).unwrap();
        assert_eq!(serde_json::to_value(&header).unwrap(), text);
    }
}
