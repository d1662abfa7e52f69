//! `handoff`: give a session to another agent.
//!
//! Compiles the session for the target, writes the full translated history
//! into the target's native store with the compiled brief as its first
//! message (so it is the first thing the target reads), records a
//! `context.compiled` and a `handoff` event in the canonical log as one
//! batch, and attaches a receipt (signed when a key is configured) as a
//! git note on that batch's commit.
//!
//! Refused before anything is written: a handoff to the session's own
//! agent (that is a resume), a target whose database is missing or of an
//! unknown schema (`resume::write_native`), a key that cannot sign.

use std::path::PathBuf;

use git_session_compiler::{Format, Request};
use git_session_schema::{Agent, Event, Level, Receipt, ReceiptNote, SessionId, kinds};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::compile::CompileRequest;
use super::resume::{NativeTarget, Written, adapter_for, new_native_id, target_cwd, write_native};
use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::sign::{self, KeySource};
use crate::store::{SeqMode, Store};

/// Says what to hand to whom.
pub struct HandoffRequest<'a> {
    /// The session.
    pub id: SessionId,
    /// The agent to hand it to.
    pub to: Agent,
    /// A note for the receiving agent and the log.
    pub note: Option<String>,
    /// Token budget for the compiled context.
    pub budget: usize,
    /// An external summarizer command.
    pub summarizer_cmd: Option<String>,
    /// The user's home (agent stores default to it).
    pub home: PathBuf,
    /// Looks up an environment variable.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The key to sign the receipt with, if any.
    pub key: Option<KeySource>,
    /// Where the key was given (`--key`, `session.signingKey`, ...), named
    /// in the hint when it cannot sign.
    pub key_origin: String,
    /// Who signs (the receipt's principal), usually `user.email`.
    pub signer: Option<String>,
}

/// Reports a handoff.
#[derive(Clone, Debug)]
pub struct HandoffOutcome {
    /// The target agent.
    pub to: Agent,
    /// The native session written for it.
    pub native_id: String,
    /// Where to run the target.
    pub cwd: PathBuf,
    /// The target's resume command.
    pub command: String,
    /// The loss report.
    pub losses: Vec<String>,
    /// What the user must know about the target (said once).
    pub notices: Vec<String>,
    /// Seq of the handoff event.
    pub handoff_seq: u64,
    /// The session commit that holds it (and carries the receipt).
    pub commit: gix::ObjectId,
    /// Whether the receipt is signed.
    pub signed: bool,
    /// Tokens of the compiled context, and the budget.
    pub tokens: (usize, usize),
    /// Files written.
    pub written: Vec<PathBuf>,
    /// Database rows not written, with the reason.
    pub skipped_rows: Vec<String>,
}

/// Hands `request.id` to `request.to`.
pub fn handoff(
    store: &Store,
    clock: &Clock,
    request: &HandoffRequest<'_>,
) -> OpResult<HandoffOutcome> {
    // Handing a session to its own agent is a resume: said, nothing written.
    let own = store.header(&request.id)?.agent;
    if own == request.to {
        return Err(OpError::Conflict {
            message: format!(
                "session {} is already a {own} session: a handoff to the same agent is a resume; nothing was written",
                request.id
            ),
            hint: Some(format!(
                "git session resume {} writes it back for {own} (with --fork under a new id)",
                request.id
            )),
        });
    }
    // A key that cannot sign is found out before anything is written.
    if let Some(key) = &request.key {
        sign::sign(key, b"git-session signing check").map_err(|e| OpError::Conflict {
            message: e.to_string(),
            hint: Some(format!(
                "fix the key given by {}, or leave it out to hand off with an unsigned receipt",
                request.key_origin
            )),
        })?;
    }
    let compile_request = CompileRequest {
        id: request.id.clone(),
        request: Request {
            target: request.to.clone(),
            budget: request.budget,
            format: Format::FirstMessage,
            git: Default::default(),
            tokenizer: None,
        },
        summarizer_cmd: request.summarizer_cmd.clone(),
    };
    let (header, events, compiled) = super::compile::compile(store, &compile_request)?;
    let brief = match &request.note {
        Some(note) => format!(
            "{}\n\nNote from the user who handed this session over: {}",
            compiled.text,
            note.replace('\n', " ")
        ),
        None => compiled.text.clone(),
    };
    let context_sha256: String = Sha256::digest(brief.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();

    let adapter = adapter_for(&request.to)?;
    let root = adapter.store_root(request.env, &request.home);
    let cwd = target_cwd(store, &header)?;
    let native_id = new_native_id(clock, adapter);
    let now = clock.now_rfc3339();
    // The brief comes first; the history follows, renumbered after it so
    // seqs stay unique for adapters that derive ids from them.
    let first = Event::new(
        0,
        now.clone(),
        Agent::GitSession,
        "user",
        kinds::MESSAGE_USER,
        Level::Context,
        json!({ "text": brief }),
    );
    let mut stream = std::iter::once(first).chain(events.into_iter().map(|mut e| {
        e.seq += 1;
        e.parent_seq = e.parent_seq.map(|p| p + 1);
        e.checksum = None;
        e
    }));
    let target = NativeTarget {
        adapter,
        root: &root,
        header: &header,
        artifacts_of: &request.id,
        native_id: &native_id,
        cwd: &cwd,
        home: &request.home,
        env: request.env,
    };
    let Written {
        changes,
        written,
        skipped_rows,
        ..
    } = write_native(store, clock, &target, &mut stream)?;
    // What the brief left out is in the context.compiled event; the loss
    // report is about the history the target received.
    let losses = changes.losses.clone();

    // Record the handoff in the log: the compiled context and the handoff.
    let info = super::canonical::commit_info(store, clock);
    let compiled_event = Event::new(
        0,
        now.clone(),
        Agent::GitSession,
        "system",
        kinds::CONTEXT_COMPILED,
        Level::Context,
        compiled.record(),
    );
    let handoff_event = Event::new(
        0,
        now.clone(),
        Agent::GitSession,
        "system",
        kinds::HANDOFF,
        Level::History,
        json!({
            "from": header.agent,
            "to": request.to,
            "note": request.note,
            "target_native_id": native_id,
            "context_sha256": context_sha256,
            "tokens": compiled.tokens,
            "budget": compiled.budget,
            "losses": losses,
            "command": changes.resume_command,
        }),
    );
    let outcome = store.append(&request.id, SeqMode::Assign, &info, |sink| {
        sink.push(compiled_event.clone())?;
        sink.push(handoff_event.clone())?;
        Ok::<_, OpError>(())
    })?;
    let commit = outcome
        .commit
        .expect("a batch of two events writes a commit");
    let handoff_seq = outcome.seq.expect("two events appended").1;
    // The target's continuation is captured as a child forked here.
    super::written::record(
        store.state_dir(),
        adapter,
        &super::written::Record {
            agent: &request.to,
            root: &root,
            files: &written,
            session: &request.id,
            seq: handoff_seq,
            native_id: &native_id,
            by: super::written::WrittenBy::Handoff,
        },
    )?;

    let receipt = Receipt {
        format: Receipt::FORMAT,
        session: request.id.clone(),
        handoff_seq,
        commit: commit.to_string(),
        from: header.agent.clone(),
        to: request.to.clone(),
        target_native_id: native_id.clone(),
        context_sha256,
        losses: losses.clone(),
        time: now,
        signer: request.key.as_ref().and(request.signer.clone()),
        extra: Default::default(),
    };
    let signature = match &request.key {
        Some(key) => {
            Some(
                sign::sign(key, &receipt.signed_bytes()).map_err(|e| OpError::Conflict {
                    message: format!(
                        "the handoff is written, but its receipt could not be signed: {e}"
                    ),
                    hint: None,
                })?,
            )
        }
        None => None,
    };
    let signed = signature.is_some();
    let note = ReceiptNote { receipt, signature };
    store.add_receipt_note(commit, &note.encode(), clock.now().as_second())?;
    Ok(HandoffOutcome {
        to: request.to.clone(),
        native_id,
        cwd,
        command: changes.resume_command,
        losses,
        notices: changes.notices,
        handoff_seq,
        commit,
        signed,
        tokens: (compiled.tokens, compiled.budget),
        written,
        skipped_rows,
    })
}
