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
    /// Who the receipt says signed it (its `signer`), when it parsed.
    pub signer: Option<String>,
}

/// Holds a session's store report and its receipt checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionVerdict {
    /// The store's checks.
    pub store: VerifyReport,
    /// One entry per receipt on this session's commits.
    pub receipts: Vec<ReceiptCheck>,
    /// Batch commits with a good signature, of [`VerifyReport::batches`].
    pub signed: u64,
    /// Problems beyond the store's: signatures, missing receipts, rollback.
    pub problems: Vec<String>,
}

impl SessionVerdict {
    /// Returns whether nothing is wrong.
    pub fn is_ok(&self) -> bool {
        self.store.is_ok()
            && self.problems.is_empty()
            && self.receipts.iter().all(|r| r.problem.is_none())
    }
}

/// Says what `verify` checks beyond each session's own history.
#[derive(Clone, Copy, Debug, Default)]
pub struct Policy<'a> {
    /// The allowed-signers file's content (`gpg.ssh.allowedSignersFile`):
    /// with it, a handoff without a good signed receipt is a failure.
    pub allowed_signers: Option<&'a str>,
    /// Every batch commit must be signed (`session.requireSigned`).
    pub require_signed: bool,
    /// A commit the session must still contain (`--since`): a tip that no
    /// longer has it was rolled back.
    pub since: Option<gix::ObjectId>,
}

/// Verifies `ids` under `policy`. The tip of each session that verifies is
/// remembered in `.git/session/verified/<id>`; a later verify reports a
/// tip that no longer contains it (a rollback against what this clone saw).
pub fn verify(
    store: &Store,
    ids: &[SessionId],
    policy: Policy<'_>,
) -> OpResult<Vec<SessionVerdict>> {
    let notes = store.receipt_notes()?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let report = store.verify(id)?;
        // A history too broken to walk has no receipts to check; its
        // problems are in the report already.
        let batches = store.batches(id).unwrap_or_default();
        let own: std::collections::HashSet<gix::ObjectId> =
            batches.iter().map(|b| b.commit).collect();
        let receipts = receipt_checks(store, id, &own, &notes, policy.allowed_signers);
        let mut verdict = SessionVerdict {
            store: report,
            receipts,
            signed: 0,
            problems: Vec::new(),
        };
        for b in &batches {
            let signature = store.commit_signature(b.commit)?;
            match crate::sign::judge_commit(
                signature.as_ref(),
                policy.allowed_signers,
                policy.require_signed,
            ) {
                Ok(true) => verdict.signed += 1,
                Ok(false) => {}
                Err(why) => verdict
                    .problems
                    .push(format!("batch commit {} {why}", b.commit)),
            }
        }
        if policy.allowed_signers.is_some() {
            receipt_gaps(store, id, &mut verdict)?;
        }
        let tip = store.tip(id)?;
        let remembered = store.remembered_tip(id);
        for (what, old) in [
            ("--since", policy.since),
            ("this clone last verified", remembered),
        ] {
            if let (Some(old), Some(tip)) = (old, tip)
                && !store
                    .new_commits(tip, None)
                    .unwrap_or_default()
                    .contains(&old)
            {
                verdict.problems.push(format!(
                    "rolled back: {what} {old}, which the session no longer contains"
                ));
            }
        }
        if verdict.is_ok()
            && let Some(tip) = tip
        {
            store.remember_tip(id, Some(tip))?;
        }
        out.push(verdict);
    }
    Ok(out)
}

/// Checks the receipts `notes` holds on `own`, the commits of session `id`.
pub(crate) fn receipt_checks(
    store: &Store,
    id: &SessionId,
    own: &std::collections::HashSet<gix::ObjectId>,
    notes: &[(gix::ObjectId, Vec<u8>)],
    allowed: Option<&str>,
) -> Vec<ReceiptCheck> {
    notes
        .iter()
        .filter(|(commit, _)| own.contains(commit))
        .map(|(commit, body)| check(store, id, *commit, body, allowed))
        .collect()
}

/// With an allowed-signers file, every handoff event needs a receipt that
/// is signed (a good one; bad ones are reported by [`check`]).
fn receipt_gaps(store: &Store, id: &SessionId, verdict: &mut SessionVerdict) -> OpResult<()> {
    let Ok(lines) = store.lines(id, 0, None) else {
        return Ok(());
    };
    for line in lines {
        let Ok(line) = line else { break };
        let Ok(event) = line.decode() else { continue };
        if event.kind != kinds::HANDOFF {
            continue;
        }
        let receipts: Vec<&ReceiptCheck> = verdict
            .receipts
            .iter()
            .filter(|r| r.seq == Some(event.seq))
            .collect();
        if receipts.is_empty() {
            verdict.problems.push(format!(
                "handoff at seq {} has no receipt (stripped or never written), and gpg.ssh.allowedSignersFile is set",
                event.seq
            ));
        } else if receipts.iter().all(|r| r.signature == "unsigned") {
            verdict.problems.push(format!(
                "the receipt of the handoff at seq {} is unsigned, and gpg.ssh.allowedSignersFile is set",
                event.seq
            ));
        }
    }
    Ok(())
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
        signer: None,
    };
    let (note, stored) = match ReceiptNote::decode_with_bytes(body) {
        Ok(n) => n,
        Err(e) => {
            result.problem = Some(format!("receipt on {commit} does not parse: {e}"));
            return result;
        }
    };
    let r = &note.receipt;
    result.seq = Some(r.handoff_seq);
    result.signer = r.signer.clone();
    if let Some(pem) = &note.signature {
        // The exact stored bytes; receipts written before they were stored
        // verbatim were signed over this build's re-serialization.
        let mut verdict = verify_signature(pem, &stored, r.signer.as_deref(), allowed);
        if matches!(verdict, Verdict::Bad(_)) && r.signed_bytes() != stored {
            let legacy = verify_signature(pem, &r.signed_bytes(), r.signer.as_deref(), allowed);
            if !matches!(legacy, Verdict::Bad(_)) {
                verdict = legacy;
            }
        }
        match verdict {
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
        match matches_log(store, id, commit, &note) {
            Ok(()) => {}
            // The signature is checked; the event it describes is sealed
            // for others. Not a fault of the session, so not a problem.
            Err(Mismatch::Sealed) => result.signature.push_str(
                "; not matched with the log: the session is encrypted and no key here opens it",
            ),
            Err(Mismatch::Found(why)) => result.problem = Some(why),
        }
    }
    result
}

/// Why a receipt was not matched with the log.
enum Mismatch {
    /// The log says otherwise, or cannot be read.
    Found(String),
    /// The handoff event is encrypted and this clone has no key for it.
    Sealed,
}

impl From<crate::store::StoreError> for Mismatch {
    fn from(e: crate::store::StoreError) -> Mismatch {
        match e {
            crate::store::StoreError::Sealed { .. } => Mismatch::Sealed,
            e => Mismatch::Found(e.to_string()),
        }
    }
}

/// Checks that the receipt describes what the log holds.
fn matches_log(
    store: &Store,
    id: &SessionId,
    commit: gix::ObjectId,
    note: &ReceiptNote,
) -> Result<(), Mismatch> {
    let r = &note.receipt;
    if r.session != *id || gix::ObjectId::from_hex(r.commit.as_bytes()).ok() != Some(commit) {
        return Err(Mismatch::Found(format!(
            "receipt on {commit} names session {} commit {}",
            r.session, r.commit
        )));
    }
    let line = store
        .lines_at(id, commit, r.handoff_seq, Some(r.handoff_seq))?
        .next()
        .ok_or_else(|| {
            Mismatch::Found(format!(
                "receipt names seq {}, which commit {commit} does not hold",
                r.handoff_seq
            ))
        })??;
    let event = line.decode().map_err(|e| Mismatch::Found(e.to_string()))?;
    let p = &event.payload;
    let same = event.kind == kinds::HANDOFF
        && p.get("to").and_then(|v| v.as_str()) == Some(r.to.as_str())
        && p.get("context_sha256").and_then(|v| v.as_str()) == Some(r.context_sha256.as_str())
        && p.get("target_native_id").and_then(|v| v.as_str()) == Some(r.target_native_id.as_str());
    if same {
        Ok(())
    } else {
        Err(Mismatch::Found(format!(
            "receipt for seq {} does not match the handoff event in the log",
            r.handoff_seq
        )))
    }
}
