//! Handoff receipts: who handed which session to which agent, with what
//! context, and what was lost on the way. Stored as git notes on the
//! session commit that holds the handoff event, signed with an SSH key.
//!
//! **Signed bytes.** A signature covers the exact bytes of the note's
//! `receipt` member as stored: a writer stores [`Receipt::signed_bytes`]
//! (compact JSON, members in the order declared here, unknown members after
//! them) verbatim there and signs them, and a verifier checks the stored
//! bytes ([`ReceiptNote::decode_with_bytes`]), never a re-serialization, so
//! members a newer writer added in another order still verify. Do not
//! reorder or rename fields.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::Agent;
use crate::id::SessionId;

/// The namespace SSH signatures of receipts are made in (`ssh-keygen -Y
/// sign -n git-session`), so a receipt signature is never valid as a git
/// commit signature or anything else.
pub const SIGNATURE_NAMESPACE: &str = "git-session";

/// Records one handoff.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// Receipt format version.
    pub format: u32,
    /// The session handed off.
    pub session: SessionId,
    /// Seq of the `handoff` event in that session.
    pub handoff_seq: u64,
    /// The session commit (hex) whose batch holds the handoff event.
    pub commit: String,
    /// The agent the session came from.
    pub from: Agent,
    /// The agent it was handed to.
    pub to: Agent,
    /// The native session id written for the target.
    pub target_native_id: String,
    /// SHA-256 (hex) of the compiled context given to the target.
    pub context_sha256: String,
    /// The loss report: one stable code and detail per dropped item.
    pub losses: Vec<String>,
    /// When, RFC 3339 UTC.
    pub time: String,
    /// Who signed: the signer's principal (usually an email), or `None`
    /// for an unsigned receipt.
    pub signer: Option<String>,
    /// Fields this build does not know, kept verbatim (and signed).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Holds a receipt and its signature, as stored in the note.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiptNote {
    /// The receipt.
    pub receipt: Receipt,
    /// Armored SSH signature (`-----BEGIN SSH SIGNATURE-----`) over the
    /// receipt's signed bytes, or `None` when unsigned.
    pub signature: Option<String>,
}

impl Receipt {
    /// The receipt format this build writes.
    pub const FORMAT: u32 = 1;

    /// Returns the bytes a signature covers.
    pub fn signed_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a receipt always serializes")
    }
}

impl ReceiptNote {
    /// Returns the note body: a JSON object whose `receipt` member is the
    /// receipt's signed bytes verbatim, and a final newline.
    pub fn encode(&self) -> Vec<u8> {
        let receipt = self.receipt.signed_bytes();
        let signature =
            serde_json::to_string(&self.signature).expect("an optional string serializes");
        let mut out = b"{\n  \"receipt\": ".to_vec();
        out.extend_from_slice(&receipt);
        out.extend_from_slice(b",\n  \"signature\": ");
        out.extend_from_slice(signature.as_bytes());
        out.extend_from_slice(b"\n}\n");
        out
    }

    /// Parses a note body.
    pub fn decode(bytes: &[u8]) -> Result<ReceiptNote, serde_json::Error> {
        Self::decode_with_bytes(bytes).map(|(note, _)| note)
    }

    /// Parses a note body and returns, with it, the exact stored bytes of
    /// its `receipt` member: what a signature covers.
    pub fn decode_with_bytes(bytes: &[u8]) -> Result<(ReceiptNote, Vec<u8>), serde_json::Error> {
        #[derive(Deserialize)]
        struct Stored<'a> {
            #[serde(borrow)]
            receipt: &'a serde_json::value::RawValue,
            #[serde(default)]
            signature: Option<String>,
        }
        let stored: Stored<'_> = serde_json::from_slice(bytes)?;
        let raw = stored.receipt.get().as_bytes().to_vec();
        let receipt: Receipt = serde_json::from_slice(&raw)?;
        Ok((
            ReceiptNote {
                receipt,
                signature: stored.signature,
            },
            raw,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_bytes_survive_the_note_round_trip() {
        let mut receipt = Receipt {
            format: Receipt::FORMAT,
            session: SessionId::new("s1").unwrap(),
            handoff_seq: 9,
            commit: "ab".repeat(20),
            from: Agent::Claude,
            to: Agent::Codex,
            target_native_id: "t".into(),
            context_sha256: "00".repeat(32),
            losses: vec!["thinking-signature-dropped: seq 3".into()],
            time: "2026-01-01T00:00:00.000Z".into(),
            signer: Some("a@example.com".into()),
            extra: BTreeMap::new(),
        };
        receipt
            .extra
            .insert("future".into(), serde_json::json!({"z": 1, "a": 2}));
        let note = ReceiptNote {
            receipt: receipt.clone(),
            signature: None,
        };
        let back = ReceiptNote::decode(&note.encode()).unwrap();
        assert_eq!(back.receipt.signed_bytes(), receipt.signed_bytes());
        let (_, stored) = ReceiptNote::decode_with_bytes(&note.encode()).unwrap();
        assert_eq!(stored, receipt.signed_bytes(), "stored verbatim");
        // Members in an order this build would not write are kept as stored.
        let foreign = br#"{"receipt": {"format":1,"session":"s1","handoff_seq":9,"commit":"ab","from":"claude","to":"codex","target_native_id":"t","context_sha256":"00","losses":[],"time":"t","signer":null,"zeta":1,"alpha":2}, "signature": null}"#;
        let (note, stored) = ReceiptNote::decode_with_bytes(foreign).unwrap();
        assert!(stored.ends_with(br#""zeta":1,"alpha":2}"#));
        assert_ne!(note.receipt.signed_bytes(), stored);
    }
}
