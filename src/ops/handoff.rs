//! `handoff`: give a session to another agent.
//!
//! Compiles the session for the target, writes the translated history
//! (all of it, its tail, or none: [`History`]) into the target's native
//! store with the compiled brief as its first message (so it is the first
//! thing the target reads), records a
//! `context.compiled` and a `handoff` event in the canonical log as one
//! batch, and attaches a receipt (signed when a key is configured) as a
//! git note on that batch's commit.
//!
//! Interrupted, it leaves both the native session and the `handoff` event
//! or neither, once the next command has run ([`pending`]).
//!
//! Refused before anything is written: a handoff to the session's own
//! agent (that is a resume), a target whose database is missing or of an
//! unknown schema (`resume::write_native`), a key that cannot sign.

use std::path::PathBuf;

use git_session_adapters::ChangeSet;
use git_session_compiler::{Format, Request};
use git_session_schema::{Agent, Event, Level, Receipt, ReceiptNote, SessionId, kinds};
use serde_json::json;
use sha2::{Digest, Sha256};

pub mod pending;

use super::compile::CompileRequest;
use super::resume::{
    NativeTarget, Written, adapter_for, new_native_id, target_cwd, write_native_planned,
};
use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::sign::{self, KeySource};
use crate::store::Store;

/// Says how much of the history the target gets after the brief.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum History {
    /// Every event (the default).
    #[default]
    Full,
    /// The last N conversation events (messages, tool calls and results),
    /// reaching back to the call of a kept result so no result is orphaned.
    Tail(usize),
    /// Nothing: the brief alone starts the session.
    None,
}

impl std::str::FromStr for History {
    type Err = String;
    fn from_str(s: &str) -> Result<History, String> {
        match s {
            "full" => Ok(History::Full),
            "none" => Ok(History::None),
            _ => match s.strip_prefix("tail:").map(str::parse::<usize>) {
                Some(Ok(n)) if n > 0 => Ok(History::Tail(n)),
                _ => Err(format!(
                    "{s:?} is not a history: use full, none or tail:N (N > 0 events)"
                )),
            },
        }
    }
}

impl History {
    /// Returns the index of the first event of `events` the target gets,
    /// `events.len()` for none.
    pub fn start(self, events: &[Event]) -> usize {
        let conversational = |e: &Event| {
            matches!(
                e.kind.as_str(),
                kinds::MESSAGE_USER
                    | kinds::MESSAGE_ASSISTANT
                    | kinds::TOOL_CALL
                    | kinds::TOOL_RESULT
            )
        };
        match self {
            History::Full => 0,
            History::None => events.len(),
            History::Tail(n) => {
                let mut seen = 0;
                let mut start = events.len();
                for (i, e) in events.iter().enumerate().rev() {
                    if conversational(e) {
                        seen += 1;
                        start = i;
                        if seen == n {
                            break;
                        }
                    }
                }
                // A kept result brings its call: reach back to the earliest
                // call a kept result answers.
                let call_id = |e: &Event| {
                    ["call_id", "tool_use_id", "id"]
                        .iter()
                        .find_map(|k| e.payload.get(*k).and_then(serde_json::Value::as_str))
                        .map(str::to_owned)
                };
                let answered: std::collections::HashSet<String> = events[start..]
                    .iter()
                    .filter(|e| e.kind == kinds::TOOL_RESULT)
                    .filter_map(call_id)
                    .collect();
                if let Some(first_call) = events[..start].iter().position(|e| {
                    e.kind == kinds::TOOL_CALL && call_id(e).is_some_and(|c| answered.contains(&c))
                }) {
                    start = first_call;
                }
                start
            }
        }
    }
}

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
    /// How much of the history follows the brief.
    pub history: History,
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
    /// How a database session was written (the agent's importer, or rows
    /// into which database), as for resume.
    pub via: Option<String>,
    /// Database rows not written, with the reason.
    pub skipped_rows: Vec<String>,
    /// Copies of agent databases made before rows went into them.
    pub backups: Vec<PathBuf>,
}

/// Hands `request.id` to `request.to`.
pub fn handoff(
    store: &Store,
    clock: &Clock,
    request: &HandoffRequest<'_>,
) -> OpResult<HandoffOutcome> {
    handoff_reporting(store, clock, request, &super::progress::Silent)
}

/// Like [`handoff`], telling `progress` when the brief is compiled and how
/// many of the target's events (the brief, then the history) are written.
pub fn handoff_reporting(
    store: &Store,
    clock: &Clock,
    request: &HandoffRequest<'_>,
    progress: &dyn super::progress::Progress,
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
    progress.stage("Compiling the brief", "events", 0);
    let (header, mut events, compiled) = super::compile::compile(store, &compile_request)?;
    // The history the target gets: what --history leaves out is said in
    // the loss report, with its seqs (the brief still covers it).
    let start = request.history.start(&events);
    let omitted = (start > 0).then(|| {
        format!(
            "history-omitted: seqs {}-{} ({} events) not written: --history {}; the brief covers them",
            events[0].seq,
            events[start - 1].seq,
            start,
            match request.history {
                History::Full => "full".to_owned(),
                History::Tail(n) => format!("tail:{n}"),
                History::None => "none".to_owned(),
            }
        )
    });
    // The session's start (cwd, model) stays: renders take facts from it.
    let head: Vec<Event> = events[..start]
        .iter()
        .filter(|e| e.kind == kinds::SESSION_START)
        .cloned()
        .collect();
    events.drain(..start);
    let events: Vec<Event> = head.into_iter().chain(events).collect();
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
    // A sub-agent's turns stay out of another agent's main line.
    let fold = std::cell::RefCell::new(git_session_adapters::tools::SubAgentFold::new(&request.to));
    progress.stage("Writing the handoff", "events", events.len() as u64);
    let mut stream = std::iter::once(first).chain(
        super::progress::Counted {
            iter: events.into_iter(),
            progress,
        }
        .filter(|e| fold.borrow_mut().keep(e))
        .map(|mut e| {
            e.seq += 1;
            e.parent_seq = e.parent_seq.map(|p| p + 1);
            e.checksum = None;
            e
        }),
    );
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
    // What the log will say, built once the render has run (the loss
    // report is known then) and written as the write-ahead intent before
    // the first native file moves (see [`pending`]).
    let next_seq = store.stat(&request.id)?.events;
    let mut planned: Option<(pending::Held, Vec<Event>, Vec<String>)> = None;
    let mut before = |changes: &ChangeSet, files: &[(PathBuf, u64)]| -> OpResult<()> {
        // What the brief left out is in the context.compiled event; the
        // loss report is about the history the target received.
        // The render saw the history renumbered after the brief; its loss
        // lines name the session's seqs.
        let mut losses: Vec<String> = changes
            .losses
            .iter()
            .map(|l| git_session_adapters::loss::renumber(l, |n| n.saturating_sub(1)))
            .collect();
        losses.extend(fold.borrow().losses());
        losses.extend(omitted.clone());
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
        let events = vec![compiled_event, handoff_event];
        let intent = pending::Pending {
            version: pending::VERSION,
            session: request.id.to_string(),
            to: request.to.clone(),
            native_id: native_id.clone(),
            root: root.clone(),
            next_seq,
            files: files
                .iter()
                .map(|(path, size)| pending::PlannedFile {
                    path: path.clone(),
                    size: *size,
                })
                .collect(),
            appends: changes
                .appends
                .iter()
                .map(|a| pending::PlannedAppend {
                    path: a.path.clone(),
                    bytes: String::from_utf8_lossy(&a.bytes).into_owned(),
                })
                .collect(),
            rows: changes
                .rows
                .iter()
                .filter(|r| r.session_row)
                .map(pending::PlannedRow::of)
                .collect(),
            events: events.clone(),
            receipt: pending::PlannedReceipt {
                from: header.agent.clone(),
                context_sha256: context_sha256.clone(),
                losses: losses.clone(),
                time: now.clone(),
                signer: request.key.as_ref().and(request.signer.clone()),
                signed: request.key.is_some(),
            },
        };
        let held = pending::begin(store.state_dir(), &intent)?;
        failpoint("handoff-after-intent");
        planned = Some((held, events, losses));
        Ok(())
    };
    let result = write_native_planned(store, clock, &target, &mut stream, &mut before);
    drop(stream);
    let Written {
        changes,
        written,
        skipped_rows,
        via,
        backups,
        ..
    } = match result {
        Ok(w) => w,
        Err(e) => {
            // Nothing half written stays: what moved is taken back now
            // (the intent says what), and the error is the user's.
            if let Some((held, ..)) = planned.take() {
                pending::settle(store, clock, held);
            }
            return Err(e);
        }
    };
    let (held, events, losses) = planned.expect("a write-back that succeeded planned its writes");
    failpoint("handoff-after-native");

    // Record the handoff in the log: the compiled context and the handoff.
    // The commit point: with it the handoff happened; without it the
    // next command rolls the native session back or, when it is complete,
    // records it from the intent.
    let recorded = pending::record(store, clock, &request.id, &events)?;
    failpoint("handoff-after-event");
    let tail = pending::Tail {
        session: &request.id,
        to: &request.to,
        native_id: &native_id,
        root: &root,
        files: &written,
        rows: &changes.rows,
        seq: recorded.seq,
        adapter,
    };
    pending::written_record(store, &tail)?;

    let receipt = Receipt {
        format: Receipt::FORMAT,
        session: request.id.clone(),
        handoff_seq: recorded.seq,
        commit: recorded.commit.to_string(),
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
    let signer = note_signer(&receipt, signed);
    let note = ReceiptNote { receipt, signature };
    store.add_receipt_note(recorded.commit, &note.encode(), clock.now().as_second())?;
    failpoint("handoff-after-receipt");
    pending::move_lead(store, clock, &tail, signer)?;
    pending::done(held);
    let (handoff_seq, commit) = (recorded.seq, recorded.commit);
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
        via,
        skipped_rows,
        backups,
    })
}

/// Stops the process here, as a kill would (no destructors, no cleanup),
/// when `GIT_SESSION_FAILPOINT` names `point`: how the tests interrupt a
/// handoff at each step. Debug builds only; a release build has no
/// failpoints.
pub(crate) fn failpoint(point: &str) {
    #[cfg(debug_assertions)]
    if std::env::var("GIT_SESSION_FAILPOINT").is_ok_and(|v| v == point) {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
    #[cfg(not(debug_assertions))]
    let _ = point;
}

/// Returns who signed a receipt, when it is signed (the owner's key).
fn note_signer(receipt: &Receipt, signed: bool) -> Option<String> {
    receipt.signer.clone().filter(|_| signed)
}
