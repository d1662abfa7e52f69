//! The event envelope and its hash chain.
//!
//! **The bytes of an event are hashed and stored.** Do not reorder, rename
//! or drop fields of [`Event`]: the JSON the codec writes is what the
//! checksum covers, and a change here would make every stored log fail
//! verification. Add new optional fields at the end of the known list.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::agent::Agent;

/// Says what an event guarantees when it crosses to another agent (seed §5.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(try_from = "u8", into = "u8")]
pub enum Level {
    /// L0 history: survives every hop losslessly.
    History = 0,
    /// L1 context: the target agent can carry on the task.
    Context = 1,
    /// L2 native resume: the same agent gets it back as it wrote it.
    Native = 2,
}

impl TryFrom<u8> for Level {
    type Error = String;
    fn try_from(n: u8) -> Result<Self, Self::Error> {
        match n {
            0 => Ok(Level::History),
            1 => Ok(Level::Context),
            2 => Ok(Level::Native),
            other => Err(format!("level must be 0, 1 or 2, not {other}")),
        }
    }
}

impl From<Level> for u8 {
    fn from(level: Level) -> u8 {
        level as u8
    }
}

impl JsonSchema for Level {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Level".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Fidelity level: 0 history, 1 context, 2 native resume.",
            "type": "integer",
            "enum": [0, 1, 2]
        })
    }
}

/// Records where an event came from in the agent's native store.
///
/// `(agent, native_id)` is what makes capture idempotent: an event whose
/// origin is already in the log is not appended twice.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Origin {
    /// The agent whose store held the record.
    pub agent: Agent,
    /// The record's own id (a uuid, a row id), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_id: Option<String>,
    /// The record's position in the native store (line or row number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_seq: Option<u64>,
    /// Fields this build does not know, kept verbatim.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Holds one entry of a session's append-only log.
///
/// `checksum` is `None` until the store seals the event into a log; sealed
/// events carry `sha256:<hex>` over the previous checksum and this event's
/// content (see [`chain_checksum`]).
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
pub struct Event {
    /// Position in the session, contiguous from 0.
    pub seq: u64,
    /// When the event happened at its source, RFC 3339 UTC.
    pub ts: String,
    /// The agent that produced the event.
    pub agent: Agent,
    /// Who acted: `user`, `agent:<name>`, `system` or `tool`.
    pub actor: String,
    /// The event type, an open dotted namespace (see [`crate::kinds`]).
    #[serde(rename = "type")]
    pub kind: String,
    /// What the event guarantees across agents.
    pub level: Level,
    /// The event body; its shape depends on `type`.
    #[serde(default)]
    pub payload: Value,
    /// References to artifacts (`artifact:sha256:<hex>`), files or commits.
    #[serde(default)]
    pub refs: Vec<String>,
    /// The event this one continues, when the log branches (DAG).
    #[serde(default)]
    pub parent_seq: Option<u64>,
    /// Where the event came from in the native store.
    #[serde(default)]
    pub origin: Option<Origin>,
    /// Hash chain link, `sha256:<hex>`; always the last member on disk.
    #[serde(default)]
    pub checksum: Option<String>,
    /// Fields this build does not know, kept verbatim.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

impl Event {
    /// Returns an unsealed event with the given envelope and an empty body.
    pub fn new(
        seq: u64,
        ts: impl Into<String>,
        agent: Agent,
        actor: impl Into<String>,
        kind: impl Into<String>,
        level: Level,
        payload: Value,
    ) -> Event {
        Event {
            seq,
            ts: ts.into(),
            agent,
            actor: actor.into(),
            kind: kind.into(),
            level,
            payload,
            refs: Vec::new(),
            parent_seq: None,
            origin: None,
            checksum: None,
            extra: BTreeMap::new(),
        }
    }

    /// Appends the event's content, the JSON object without `checksum`, to `out`.
    ///
    /// This exact byte string is what the checksum covers.
    ///
    /// The members, in this fixed order: `seq`, `ts`, `agent`, `actor`,
    /// `type`, `level`, then `payload` unless null, `refs` unless empty,
    /// `parent_seq` and `origin` when set, then the unknown fields by name:
    /// compact JSON, as `serde_json` writes it ([`crate::json`] writes the
    /// strings and values; a test holds it to `serde_json`'s bytes).
    pub fn write_content(&self, out: &mut Vec<u8>) {
        write_seq(out, self.seq);
        self.write_before_parent(out);
        write_parent(out, self.parent_seq);
        self.write_after_parent(out);
    }

    /// Writes this event's [`ContentBody`]: its content without `seq` and
    /// `parent_seq`.
    pub fn content_body(&self) -> ContentBody {
        let mut bytes = Vec::new();
        self.write_before_parent(&mut bytes);
        let split = bytes.len();
        self.write_after_parent(&mut bytes);
        ContentBody { bytes, split }
    }

    /// The members between `seq` and `parent_seq`.
    fn write_before_parent(&self, out: &mut Vec<u8>) {
        use crate::json::{write_str, write_value};
        out.extend_from_slice(b",\"ts\":");
        write_str(out, &self.ts);
        out.extend_from_slice(b",\"agent\":");
        through_serde(out, &self.agent);
        out.extend_from_slice(b",\"actor\":");
        write_str(out, &self.actor);
        out.extend_from_slice(b",\"type\":");
        write_str(out, &self.kind);
        out.extend_from_slice(b",\"level\":");
        through_serde(out, &self.level);
        if !self.payload.is_null() {
            out.extend_from_slice(b",\"payload\":");
            write_value(out, &self.payload);
        }
        if !self.refs.is_empty() {
            out.extend_from_slice(b",\"refs\":[");
            for (i, r) in self.refs.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, r);
            }
            out.push(b']');
        }
    }

    /// The members after `parent_seq`, and the closing brace.
    fn write_after_parent(&self, out: &mut Vec<u8>) {
        use crate::json::{write_str, write_value};
        if let Some(o) = &self.origin {
            out.extend_from_slice(b",\"origin\":");
            through_serde(out, o);
        }
        for (k, v) in &self.extra {
            out.push(b',');
            write_str(out, k);
            out.push(b':');
            write_value(out, v);
        }
        out.push(b'}');
    }

    /// Sets `checksum` from the previous event's checksum and this content.
    pub fn seal(&mut self, prev: Option<&str>, scratch: &mut Vec<u8>) {
        scratch.clear();
        self.write_content(scratch);
        self.checksum = Some(chain_checksum(prev, scratch));
    }
}

/// An event's content (see [`Event::write_content`]) without its `seq` and
/// `parent_seq`, the two members a store still sets when it appends the
/// event: lets the thread that built an event serialize it, while its
/// tree is in that core's cache, for a writer that numbers it later.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContentBody {
    bytes: Vec<u8>,
    /// Where `parent_seq` goes.
    split: usize,
}

impl ContentBody {
    /// Appends the content of the event this body was written from, with
    /// `seq` and `parent_seq` as given: the bytes [`Event::write_content`]
    /// writes for the event with those two set.
    pub fn write_content(&self, seq: u64, parent_seq: Option<u64>, out: &mut Vec<u8>) {
        // The seq, the parent and the checksum a sink adds after: room for
        // all at once, so a long event is not copied as `out` doubles.
        out.reserve(self.bytes.len() + 128);
        write_seq(out, seq);
        out.extend_from_slice(&self.bytes[..self.split]);
        write_parent(out, parent_seq);
        out.extend_from_slice(&self.bytes[self.split..]);
    }
}

/// The content's opening and its first member.
fn write_seq(out: &mut Vec<u8>, seq: u64) {
    out.extend_from_slice(b"{\"seq\":");
    through_serde(out, &seq);
}

/// The `parent_seq` member, when there is a parent.
fn write_parent(out: &mut Vec<u8>, parent_seq: Option<u64>) {
    if let Some(p) = parent_seq {
        out.extend_from_slice(b",\"parent_seq\":");
        through_serde(out, &p);
    }
}

/// Appends a small member (a number, the agent, the level, the origin)
/// as `serde_json` writes it.
fn through_serde<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(out, value).expect("serializing into a Vec cannot fail");
}

/// The envelope as `serde_json` serializes it: fixed order, then unknown
/// fields, without `checksum` (the codec appends it last). What
/// [`Event::write_content`] writes by hand, kept as its reference.
#[cfg(test)]
struct Content<'a>(&'a Event);

#[cfg(test)]
impl Serialize for Content<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let e = self.0;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("seq", &e.seq)?;
        map.serialize_entry("ts", &e.ts)?;
        map.serialize_entry("agent", &e.agent)?;
        map.serialize_entry("actor", &e.actor)?;
        map.serialize_entry("type", &e.kind)?;
        map.serialize_entry("level", &e.level)?;
        if !e.payload.is_null() {
            map.serialize_entry("payload", &e.payload)?;
        }
        if !e.refs.is_empty() {
            map.serialize_entry("refs", &e.refs)?;
        }
        if let Some(p) = e.parent_seq {
            map.serialize_entry("parent_seq", &p)?;
        }
        if let Some(o) = &e.origin {
            map.serialize_entry("origin", o)?;
        }
        for (k, v) in &e.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl Serialize for Event {
    /// Serializes the event as stored: content, then `checksum` when sealed.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Goes through the codec so that every JSON form of an event is the
        // stored one; the extra copy only happens outside the hot paths.
        let mut line = Vec::new();
        crate::codec::encode_event(self, &mut line);
        let raw: Box<serde_json::value::RawValue> =
            serde_json::from_slice(&line).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

/// Returns `sha256:<hex>` of the previous checksum, a newline, and `content`.
///
/// The first event of a session has no previous checksum and hashes the empty
/// string in its place. Chaining makes any edit, insertion or removal in the
/// middle of a log visible at the first changed event.
pub fn chain_checksum(prev: Option<&str>, content: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(prev.unwrap_or("").as_bytes());
    h.update(b"\n");
    h.update(content);
    let digest = h.finalize();
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    push_hex(&mut out, &digest);
    out
}

/// Appends lowercase hex of `bytes` to `out`.
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_long_body_is_written_into_room_made_once() {
        let event = Event::new(
            0,
            "2026-01-01T00:00:00Z",
            Agent::Claude,
            "user",
            "message.user",
            Level::History,
            json!({"text": "x".repeat(3 << 20)}),
        );
        let body = event.content_body();
        // Into an empty buffer, then after a chunk's worth of other events.
        for before in [0, 100_000] {
            let mut out = vec![b'.'; before];
            out.shrink_to_fit();
            body.write_content(7, Some(6), &mut out);
            let mut whole = Event {
                seq: 7,
                parent_seq: Some(6),
                ..event.clone()
            };
            whole.checksum = None;
            let mut expected = vec![b'.'; before];
            whole.write_content(&mut expected);
            assert_eq!(out, expected);
            assert!(out.len() > before + (3 << 20));
            assert!(
                out.capacity() <= out.len() + 128,
                "{} bytes in room for {}",
                out.len(),
                out.capacity()
            );
        }
    }

    #[test]
    fn checksum_depends_on_previous_link_and_content() {
        let mut a = Event::new(
            0,
            "2026-01-01T00:00:00Z",
            Agent::Claude,
            "user",
            "message.user",
            Level::History,
            json!({"text": "hi"}),
        );
        let mut scratch = Vec::new();
        a.seal(None, &mut scratch);
        let first = a.checksum.clone().unwrap();
        a.seal(Some("sha256:00"), &mut scratch);
        assert_ne!(a.checksum.as_deref(), Some(first.as_str()));
        a.payload = json!({"text": "hj"});
        a.seal(None, &mut scratch);
        assert_ne!(a.checksum.as_deref(), Some(first.as_str()));
        assert!(first.starts_with("sha256:") && first.len() == 71);
    }

    #[test]
    fn content_is_the_bytes_serde_json_writes_for_the_envelope() {
        let odd = "a\"b\\c\n\u{1}\u{7f}é中😀 and a longer run of plain text";
        let full = Event {
            refs: vec!["artifact:sha256:00".into(), odd.into()],
            parent_seq: Some(41),
            origin: Some(Origin {
                agent: Agent::Codex,
                native_id: Some(odd.into()),
                native_seq: Some(7),
                extra: BTreeMap::from([("z".to_owned(), json!([odd, 1.5, -3]))]),
            }),
            checksum: Some("sha256:ff".into()),
            extra: BTreeMap::from([
                ("b\u{2}".to_owned(), json!({"k": odd})),
                ("a".to_owned(), Value::Null),
            ]),
            ..Event::new(
                u64::MAX,
                odd,
                Agent::Pi,
                odd,
                odd,
                Level::Native,
                json!({"text": odd, "n": [1, -2, 3.25e-7, u64::MAX], "t": true, "o": {}}),
            )
        };
        let bare = Event::new(0, "", Agent::Claude, "", "", Level::History, Value::Null);
        let with_null_payload_and_extra = Event {
            extra: BTreeMap::from([("x".to_owned(), json!(odd))]),
            ..bare.clone()
        };
        for event in [&full, &bare, &with_null_payload_and_extra] {
            let mut ours = Vec::new();
            event.write_content(&mut ours);
            let reference = serde_json::to_vec(&Content(event)).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&reference)
            );
            assert_eq!(ours, reference);
            // The body, with seq and parent set as a store sets them later,
            // writes what the event with those two writes.
            let body = event.content_body();
            for (seq, parent) in [(0, None), (7, Some(3)), (u64::MAX, Some(u64::MAX))] {
                let mut renumbered = event.clone();
                renumbered.seq = seq;
                renumbered.parent_seq = parent;
                let mut want = Vec::new();
                renumbered.write_content(&mut want);
                let mut got = Vec::new();
                body.write_content(seq, parent, &mut got);
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want)
                );
            }
        }
    }

    #[test]
    fn level_outside_range_is_rejected() {
        assert!(serde_json::from_str::<Level>("3").is_err());
        assert_eq!(serde_json::from_str::<Level>("2").unwrap(), Level::Native);
    }
}
