//! The JSONL codec: one event per line in the store, and the interchange
//! file (`git session export --canonical`) that adds a header line and
//! artifact lines.
//!
//! **Stored bytes.** A stored event line is the event's content (see
//! [`Event::write_content`]) with `,"checksum":"sha256:<hex>"` spliced in
//! before the closing brace. The checksum covers exactly the bytes of the
//! line without that member, so verifying a log hashes what is on disk and
//! needs no re-serialization.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::artifact::ArtifactId;
use crate::event::Event;
use crate::header::{HeaderError, SessionHeader};

const CHECKSUM_KEY: &[u8] = b",\"checksum\":\"";
/// Length of `sha256:` plus 64 hex digits.
const CHECKSUM_LEN: usize = 71;

/// Says why a line could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// Not valid JSON, or JSON of the wrong shape for an event.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A header line in a format this build refuses, or malformed.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// An artifact line whose bytes do not hash to its id.
    #[error("artifact {id} does not match its content (hashes to {actual})")]
    ArtifactMismatch {
        /// The id the line claims.
        id: ArtifactId,
        /// The id of the bytes it carries.
        actual: ArtifactId,
    },
    /// An artifact line with bad base64.
    #[error("artifact {id}: invalid base64: {source}")]
    ArtifactEncoding {
        /// The id the line claims.
        id: ArtifactId,
        /// The decoder's complaint.
        #[source]
        source: base64::DecodeError,
    },
}

/// Appends the stored form of `event` (no newline) to `out`.
pub fn encode_event(event: &Event, out: &mut Vec<u8>) {
    event.write_content(out);
    if let Some(sum) = &event.checksum {
        splice_checksum(out, sum);
    }
}

/// Turns the content at the end of `out` (what [`Event::write_content`]
/// wrote there, and `checksum` covers) into its stored form, in place: the
/// bytes [`encode_event`] appends, without serializing the event again or
/// copying its content.
pub fn seal_in_place(out: &mut Vec<u8>, checksum: &str) {
    splice_checksum(out, checksum);
}

fn splice_checksum(out: &mut Vec<u8>, sum: &str) {
    debug_assert_eq!(out.last(), Some(&b'}'));
    out.pop();
    out.extend_from_slice(CHECKSUM_KEY);
    out.extend_from_slice(sum.as_bytes());
    out.extend_from_slice(b"\"}");
}

/// Parses one event line.
pub fn decode_event(line: &[u8]) -> Result<Event, CodecError> {
    Ok(serde_json::from_slice(line)?)
}

/// Splits a stored line into the hashed part and its checksum.
///
/// Returns `None` when the line does not end with a well-formed checksum
/// member, which is itself a verification failure for stored logs.
pub fn split_checksum(line: &[u8]) -> Option<(&[u8], &str)> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let body = line.strip_suffix(b"\"}")?;
    let cut = body.len().checked_sub(CHECKSUM_LEN + CHECKSUM_KEY.len())?;
    let (head, tail) = body.split_at(cut);
    let sum = tail.strip_prefix(CHECKSUM_KEY)?;
    let sum = std::str::from_utf8(sum).ok()?;
    ArtifactId::parse(sum)?;
    Some((head, sum))
}

/// Returns the checksum a stored line must carry, given the previous link.
///
/// `head` is the first part returned by [`split_checksum`]; the content the
/// chain covers is `head` followed by the closing brace.
pub fn stored_checksum(prev: Option<&str>, head: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(prev.unwrap_or("").as_bytes());
    h.update(b"\n");
    h.update(head);
    h.update(b"}");
    format!("sha256:{}", hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    crate::event::push_hex(&mut s, bytes);
    s
}

/// Holds one line of a canonical interchange file.
#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    /// `{"header": {...}}`, the first line.
    Header(SessionHeader),
    /// A plain event object.
    Event(Event),
    /// `{"artifact": {"id": "sha256:…", "base64": "…"}}`.
    Artifact {
        /// The content hash.
        id: ArtifactId,
        /// The bytes.
        data: Vec<u8>,
    },
}

#[derive(Deserialize, Serialize)]
struct ArtifactLine {
    id: ArtifactId,
    base64: String,
}

/// Writes a header line (no newline) to `out`.
pub fn encode_header_line(header: &SessionHeader, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, &serde_json::json!({ "header": header }))
        .expect("a header always serializes");
}

/// Writes an artifact line (no newline) to `out`.
pub fn encode_artifact_line(id: &ArtifactId, data: &[u8], out: &mut Vec<u8>) {
    let line = ArtifactLine {
        id: id.clone(),
        base64: base64::engine::general_purpose::STANDARD.encode(data),
    };
    serde_json::to_writer(&mut *out, &serde_json::json!({ "artifact": line }))
        .expect("an artifact line always serializes");
}

/// Parses one line of an interchange file.
///
/// The kind is decided by the first key: `header`, `artifact`, or anything
/// else for an event, so events are parsed once, straight into [`Event`].
pub fn decode_record(line: &[u8]) -> Result<Record, CodecError> {
    match first_key(line) {
        Some(b"header") => {
            let mut wrapper: serde_json::Map<String, Value> = serde_json::from_slice(line)?;
            let value = wrapper.remove("header").unwrap_or(Value::Null);
            Ok(Record::Header(SessionHeader::from_value(value)?))
        }
        Some(b"artifact") => {
            #[derive(Deserialize)]
            struct Wrapper {
                artifact: ArtifactLine,
            }
            let w: Wrapper = serde_json::from_slice(line)?;
            let id = w.artifact.id;
            let data = base64::engine::general_purpose::STANDARD
                .decode(w.artifact.base64.as_bytes())
                .map_err(|source| CodecError::ArtifactEncoding {
                    id: id.clone(),
                    source,
                })?;
            let actual = ArtifactId::of(&data);
            if actual != id {
                return Err(CodecError::ArtifactMismatch { id, actual });
            }
            Ok(Record::Artifact { id, data })
        }
        _ => Ok(Record::Event(decode_event(line)?)),
    }
}

/// Returns the first key of a JSON object line, if it is a plain string.
fn first_key(line: &[u8]) -> Option<&[u8]> {
    let mut rest = line
        .trim_ascii_start()
        .strip_prefix(b"{")?
        .trim_ascii_start();
    rest = rest.strip_prefix(b"\"")?;
    let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    (rest[end] == b'"').then(|| &rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::{Agent, Level, SessionId};
    use serde_json::json;

    #[test]
    fn sealed_content_encodes_like_the_event() {
        let mut e = sample();
        let mut content = Vec::new();
        e.seal(Some("sha256:00"), &mut content);
        let mut a = Vec::new();
        encode_event(&e, &mut a);
        let mut b = b"earlier line\n".to_vec();
        b.extend_from_slice(&content);
        seal_in_place(&mut b, e.checksum.as_deref().unwrap());
        assert_eq!(b.strip_prefix(b"earlier line\n"), Some(&a[..]));
    }

    fn sample() -> Event {
        let mut e = Event::new(
            3,
            "2026-01-01T00:00:00.123Z",
            Agent::Codex,
            "agent:codex",
            "x.future",
            Level::Native,
            json!({"z": 1, "a": [1.5, "two", null], "nested": {"k": "v"}}),
        );
        e.extra
            .insert("unknown_field".into(), json!({"kept": true}));
        e.refs.push("artifact:sha256:ab".into());
        e.parent_seq = Some(2);
        e
    }

    #[test]
    fn stored_line_round_trips_and_verifies() {
        let mut e = sample();
        let mut scratch = Vec::new();
        e.seal(Some("sha256:prev"), &mut scratch);
        let mut line = Vec::new();
        encode_event(&e, &mut line);
        assert_eq!(decode_event(&line).unwrap(), e);
        let (head, sum) = split_checksum(&line).unwrap();
        assert_eq!(Some(sum), e.checksum.as_deref());
        assert_eq!(stored_checksum(Some("sha256:prev"), head), sum);
        // Re-encoding the decoded event gives the same bytes: nothing is lost
        // or reordered, unknown fields and types included.
        let mut again = Vec::new();
        encode_event(&decode_event(&line).unwrap(), &mut again);
        assert_eq!(again, line);
    }

    #[test]
    fn tampered_line_no_longer_verifies() {
        let mut e = sample();
        e.seal(None, &mut Vec::new());
        let mut line = Vec::new();
        encode_event(&e, &mut line);
        let text = String::from_utf8(line).unwrap().replace("two", "tw0");
        let (head, sum) = split_checksum(text.as_bytes()).unwrap();
        assert_ne!(stored_checksum(None, head), sum);
    }

    #[test]
    fn records_are_told_apart_by_their_first_key() {
        let header = SessionHeader::new(SessionId::new("s").unwrap(), Agent::Pi, "t");
        let mut line = Vec::new();
        encode_header_line(&header, &mut line);
        assert_eq!(decode_record(&line).unwrap(), Record::Header(header));

        let id = ArtifactId::of(b"\x00\x01png");
        line.clear();
        encode_artifact_line(&id, b"\x00\x01png", &mut line);
        assert_eq!(
            decode_record(&line).unwrap(),
            Record::Artifact {
                id,
                data: b"\x00\x01png".to_vec()
            }
        );

        let bad = br#"{"artifact":{"id":"sha256:0000000000000000000000000000000000000000000000000000000000000000","base64":"AA=="}}"#;
        assert!(matches!(
            decode_record(bad),
            Err(CodecError::ArtifactMismatch { .. })
        ));
        let e = sample();
        line.clear();
        encode_event(&e, &mut line);
        assert_eq!(decode_record(&line).unwrap(), Record::Event(e));
    }
}
