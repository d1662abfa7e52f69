//! `verify`: the store's checks of each session plus its handoff receipts.
//!
//! A receipt must match the log (the annotated commit is the session's and
//! holds the `handoff` event at the receipt's seq, with the same target and
//! context hash) and, when signed, carry a valid SSH signature; with an
//! allowed-signers file (`gpg.ssh.allowedSignersFile`) the signer's key
//! must be listed for the receipt's principal.

use git_session_schema::{ReceiptNote, SessionId, kinds};

use super::OpResult;
use crate::sign::{Verdict, verify as verify_signature};
use crate::store::{Store, VerifyReport};

/// Holds the outcome of checking one receipt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceiptCheck {
    /// The annotated session commit.
    pub commit: gix::ObjectId,
    /// The handoff seq the receipt names.
    pub seq: Option<u64>,
    /// What the check found: `None` when the receipt is good.
    pub problem: Option<String>,
    /// A one-line description of the signature.
    pub signature: String,
}

/// Holds a session's store report and its receipt checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionVerdict {
    /// The store's checks.
    pub store: VerifyReport,
    /// One entry per receipt on this session's commits.
    pub receipts: Vec<ReceiptCheck>,
}

impl SessionVerdict {
    /// Returns whether nothing is wrong.
    pub fn is_ok(&self) -> bool {
        self.store.is_ok() && self.receipts.iter().all(|r| r.problem.is_none())
    }
}

/// Verifies `ids`; `allowed_signers` is the allowed-signers file's content.
pub fn verify(
    store: &Store,
    ids: &[SessionId],
    allowed_signers: Option<&str>,
) -> OpResult<Vec<SessionVerdict>> {
    let notes = store.receipt_notes()?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let report = store.verify(id)?;
        // A history too broken to walk has no receipts to check; its
        // problems are in the report already.
        let own: std::collections::HashSet<gix::ObjectId> = store
            .batches(id)
            .unwrap_or_default()
            .iter()
            .map(|b| b.commit)
            .collect();
        let receipts = notes
            .iter()
            .filter(|(commit, _)| own.contains(commit))
            .map(|(commit, body)| check(store, id, *commit, body, allowed_signers))
            .collect();
        out.push(SessionVerdict {
            store: report,
            receipts,
        });
    }
    Ok(out)
}

fn check(
    store: &Store,
    id: &SessionId,
    commit: gix::ObjectId,
    body: &[u8],
    allowed: Option<&str>,
) -> ReceiptCheck {
    let mut result = ReceiptCheck {
        commit,
        seq: None,
        problem: None,
        signature: "unsigned".into(),
    };
    let note = match ReceiptNote::decode(body) {
        Ok(n) => n,
        Err(e) => {
            result.problem = Some(format!("receipt on {commit} does not parse: {e}"));
            return result;
        }
    };
    let r = &note.receipt;
    result.seq = Some(r.handoff_seq);
    if let Some(pem) = &note.signature {
        match verify_signature(pem, &r.signed_bytes(), r.signer.as_deref(), allowed) {
            Verdict::Good { fingerprint } => {
                result.signature = format!(
                    "good signature by {} ({fingerprint})",
                    r.signer.as_deref().unwrap_or("?")
                );
            }
            Verdict::ValidUnknownSigner { fingerprint } => {
                result.signature = format!(
                    "valid signature ({fingerprint}); signer not checked: no gpg.ssh.allowedSignersFile"
                );
            }
            Verdict::NotAllowed { fingerprint } => {
                result.problem = Some(format!(
                    "receipt for seq {} is signed by {fingerprint}, which the allowed-signers file does not list for {}",
                    r.handoff_seq,
                    r.signer.as_deref().unwrap_or("(no signer)")
                ));
            }
            Verdict::Bad(reason) => {
                result.problem = Some(format!(
                    "receipt for seq {}: bad signature: {reason}",
                    r.handoff_seq
                ));
            }
        }
    }
    if result.problem.is_none() {
        result.problem = matches_log(store, id, commit, &note).err();
    }
    result
}

/// Checks that the receipt describes what the log holds.
fn matches_log(
    store: &Store,
    id: &SessionId,
    commit: gix::ObjectId,
    note: &ReceiptNote,
) -> Result<(), String> {
    let r = &note.receipt;
    if r.session != *id || gix::ObjectId::from_hex(r.commit.as_bytes()).ok() != Some(commit) {
        return Err(format!(
            "receipt on {commit} names session {} commit {}",
            r.session, r.commit
        ));
    }
    let line = store
        .lines_at(id, commit, r.handoff_seq, Some(r.handoff_seq))
        .map_err(|e| e.to_string())?
        .next()
        .ok_or_else(|| {
            format!(
                "receipt names seq {}, which commit {commit} does not hold",
                r.handoff_seq
            )
        })?
        .map_err(|e| e.to_string())?;
    let event = line.decode().map_err(|e| e.to_string())?;
    let p = &event.payload;
    let same = event.kind == kinds::HANDOFF
        && p.get("to").and_then(|v| v.as_str()) == Some(r.to.as_str())
        && p.get("context_sha256").and_then(|v| v.as_str()) == Some(r.context_sha256.as_str())
        && p.get("target_native_id").and_then(|v| v.as_str()) == Some(r.target_native_id.as_str());
    if same {
        Ok(())
    } else {
        Err(format!(
            "receipt for seq {} does not match the handoff event in the log",
            r.handoff_seq
        ))
    }
}
