//! An interrupted handoff leaves both or neither: the native session in
//! the target's store and the `handoff` event in the log.
//!
//! The two live in different places (the agent's files and rows; the
//! session ref), so no single write covers both. The log is the commit
//! point, and a write-ahead intent covers the gap before it:
//!
//! 1. Once the render has run and every check has passed, and before the
//!    first native file moves, the handoff writes its intent to
//!    `.git/session/handoffs/<hash of the native id>.json`: the files it
//!    will move into place (with their sizes), the index lines it will
//!    append, the session rows it will insert (by key), and the two events
//!    (`context.compiled`, `handoff`) it will append. The file is held
//!    under an exclusive lock for as long as the handoff runs.
//! 2. The native session is written (files, index lines, rows).
//! 3. The two events are appended in one batch: the commit point.
//! 4. The written record, the receipt and the lead follow; the intent is
//!    removed.
//!
//! The next command ([`recover`], run by every command that opens the
//! repository) settles an intent whose lock nobody holds (its handoff was
//! killed): when the `handoff` event is in the log, it does step 4; when
//! the native session is complete (every file at least its planned size,
//! every index line and session row there), it appends the planned events
//! and does step 4; otherwise it removes the files the handoff moved in
//! (only those still of the size it wrote: later bytes are someone
//! else's) and records nothing. Rows need no rolling back: they are
//! written last, in one transaction, so rows present means the session is
//! complete. A receipt that was to be signed is not made up afterwards
//! without the key: recovery says so.
//!
//! The intent is local state, like the rest of `.git/session/`; its paths
//! are still checked to stay inside the agent's store before anything is
//! removed.

use std::path::{Path, PathBuf};

use git_session_adapters::{ChangeSet, RowWrite};
use git_session_schema::{Agent, Event, Receipt, ReceiptNote, SessionId, kinds};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::clock::Clock;
use crate::native::apply;
use crate::ops::{OpError, OpResult};
use crate::store::{SeqMode, Store};

/// The intent's format version.
pub(crate) const VERSION: u32 = 1;

/// The directory under `.git/session/` that holds the intents.
const DIR: &str = "handoffs";

/// Says what a handoff is about to write and record.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub version: u32,
    /// The canonical session handed off.
    pub session: String,
    /// The target agent.
    pub to: Agent,
    /// The native session written for it.
    pub native_id: String,
    /// The target agent's store root.
    pub root: PathBuf,
    /// The session's event count before the handoff (its events come after).
    pub next_seq: u64,
    /// The files moved into place, absolute, with their rendered sizes.
    pub files: Vec<PlannedFile>,
    /// The index lines appended.
    pub appends: Vec<PlannedAppend>,
    /// The session rows inserted.
    pub rows: Vec<PlannedRow>,
    /// The events to append (`context.compiled`, `handoff`).
    pub events: Vec<Event>,
    /// What the receipt says.
    pub receipt: PlannedReceipt,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PlannedFile {
    pub path: PathBuf,
    pub size: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PlannedAppend {
    /// Relative to the store root.
    pub path: PathBuf,
    pub bytes: String,
}

/// A session row, by its key.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PlannedRow {
    pub database: PathBuf,
    pub table: String,
    pub key: Vec<String>,
    pub values: Map<String, Value>,
    pub root_relative: Vec<String>,
}

impl PlannedRow {
    pub(crate) fn of(row: &RowWrite) -> PlannedRow {
        PlannedRow {
            database: row.database.clone(),
            table: row.table.clone(),
            key: row.key.clone(),
            values: row
                .key
                .iter()
                .filter_map(|k| row.columns.get(k).map(|v| (k.clone(), v.clone())))
                .collect(),
            root_relative: row.root_relative.clone(),
        }
    }

    fn row(&self) -> RowWrite {
        RowWrite {
            database: self.database.clone(),
            table: self.table.clone(),
            key: self.key.clone(),
            columns: self.values.clone(),
            root_relative: self.root_relative.clone(),
            session_row: true,
            ..Default::default()
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PlannedReceipt {
    pub from: Agent,
    pub context_sha256: String,
    pub losses: Vec<String>,
    pub time: String,
    pub signer: Option<String>,
    /// Whether the receipt was to be signed.
    pub signed: bool,
}

/// An intent file, held under its lock.
pub(crate) struct Held {
    path: PathBuf,
    _file: std::fs::File,
}

/// Writes the intent and holds it; no native file has moved yet.
pub(crate) fn begin(state_dir: &Path, intent: &Pending) -> OpResult<Held> {
    let dir = state_dir.join(DIR);
    std::fs::create_dir_all(&dir).map_err(OpError::io(&dir))?;
    let name: String = Sha256::digest(intent.native_id.as_bytes())
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect();
    let path = dir.join(format!("{name}.json"));
    // Locked before it has its name, so no other command ever sees it
    // unlocked while this handoff runs.
    let mut tmp = tempfile::Builder::new()
        .prefix(".intent-")
        .tempfile_in(&dir)
        .map_err(OpError::io(&dir))?;
    tmp.as_file().lock().map_err(OpError::io(tmp.path()))?;
    let bytes = serde_json::to_vec(intent).map_err(|e| OpError::Conflict {
        message: format!("the handoff's intent cannot be written: {e}"),
        hint: None,
    })?;
    std::io::Write::write_all(&mut tmp, &bytes).map_err(OpError::io(&path))?;
    tmp.as_file().sync_all().map_err(OpError::io(&path))?;
    let file = tmp.persist_noclobber(&path).map_err(|e| OpError::Io {
        path: path.clone(),
        source: e.error,
    })?;
    Ok(Held { path, _file: file })
}

/// Removes a settled intent (and releases its lock).
pub(crate) fn done(held: Held) {
    let _ = std::fs::remove_file(&held.path);
}

/// Reports the batch that recorded a handoff.
pub(crate) struct Recorded {
    /// The `handoff` event's seq.
    pub seq: u64,
    /// The commit holding it.
    pub commit: gix::ObjectId,
}

/// Appends the `context.compiled` and `handoff` events as one batch.
pub(crate) fn record(
    store: &Store,
    clock: &Clock,
    id: &SessionId,
    events: &[Event],
) -> OpResult<Recorded> {
    let info = crate::ops::canonical::commit_info(store, clock);
    let outcome = store.append(id, SeqMode::Assign, &info, |sink| {
        for e in events {
            sink.push(e.clone())?;
        }
        Ok::<_, OpError>(())
    })?;
    Ok(Recorded {
        seq: outcome.seq.expect("two events appended").1,
        commit: outcome
            .commit
            .expect("a batch of two events writes a commit"),
    })
}

/// Names a recorded handoff, for what follows the commit point.
pub(crate) struct Tail<'a> {
    pub session: &'a SessionId,
    pub to: &'a Agent,
    pub native_id: &'a str,
    pub root: &'a Path,
    pub files: &'a [PathBuf],
    /// The session rows written (see [`crate::ops::written::Record::rows`]).
    pub rows: &'a [RowWrite],
    pub seq: u64,
    pub adapter: &'static dyn git_session_adapters::Adapter,
}

/// Records the native files written, so the target's continuation is
/// captured as a child forked at the handoff.
pub(crate) fn written_record(store: &Store, tail: &Tail<'_>) -> OpResult<()> {
    crate::ops::written::record(
        store.state_dir(),
        tail.adapter,
        &crate::ops::written::Record {
            agent: tail.to,
            root: tail.root,
            files: tail.files,
            rows: tail.rows,
            session: tail.session,
            seq: tail.seq,
            native_id: tail.native_id,
            by: crate::ops::written::WrittenBy::Handoff,
        },
    )
}

/// Moves the lead to the target agent (after the receipt).
pub(crate) fn move_lead(
    store: &Store,
    clock: &Clock,
    tail: &Tail<'_>,
    signer: Option<String>,
) -> OpResult<()> {
    let owner = git_session_schema::MetaChange {
        time: clock.now_rfc3339(),
        op: git_session_schema::MetaOp::Owner {
            agent: tail.to.to_string(),
            key: signer,
            seq: Some(tail.seq),
        },
    };
    store.change_meta(tail.session, &owner, clock.now().as_second())?;
    Ok(())
}

/// Settles every intent whose handoff is no longer running; returns one
/// line per intent settled (or left for later, with the reason).
pub fn recover(store: &Store, clock: &Clock) -> Vec<String> {
    let dir = store.state_dir().join(DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Ok(file) = std::fs::OpenOptions::new().read(true).open(&path) else {
            continue;
        };
        // A running handoff holds its intent: not ours to settle.
        if file.try_lock().is_err() {
            continue;
        }
        out.extend(settle(store, clock, Held { path, _file: file }));
    }
    out
}

/// Settles one intent whose handoff stopped: completes it or rolls it
/// back (see the module docs); an intent that cannot be settled now stays
/// for the next command, said in the returned line.
pub(crate) fn settle(store: &Store, clock: &Clock, held: Held) -> Option<String> {
    match settle_one(store, clock, &held.path) {
        Ok(line) => {
            done(held);
            line
        }
        Err(e) => Some(format!(
            "an interrupted handoff ({}) is not settled yet: {e}; the next command tries again",
            held.path.display()
        )),
    }
}

fn settle_one(store: &Store, clock: &Clock, path: &Path) -> OpResult<Option<String>> {
    let bytes = std::fs::read(path).map_err(OpError::io(path))?;
    // Written in full before any native file moved: a torn intent means
    // nothing else was written.
    let Ok(intent) = serde_json::from_slice::<Pending>(&bytes) else {
        return Ok(None);
    };
    if intent.version != VERSION {
        return Err(OpError::Conflict {
            message: format!(
                "intent format {} is not {VERSION} (written by another git-session version)",
                intent.version
            ),
            hint: None,
        });
    }
    let id = SessionId::new(intent.session.clone()).map_err(|e| OpError::Conflict {
        message: format!("the intent names no session: {e}"),
        hint: None,
    })?;
    let adapter = crate::ops::resume::adapter_for(&intent.to)?;
    let root = &intent.root;
    // Every path stays inside the agent's store, as when it was written.
    for f in &intent.files {
        let rel = f.path.strip_prefix(root).map_err(|_| OpError::Conflict {
            message: format!("{} is outside {}", f.path.display(), root.display()),
            hint: None,
        })?;
        apply::contained_path(root, rel)?;
    }
    let what = format!(
        "the interrupted handoff of {id} to {} (native session {})",
        intent.to, intent.native_id
    );
    if let Some(seq) = recorded_seq(store, &id, &intent)? {
        let commit = commit_of(store, &id, seq)?;
        let receipt = finish(store, clock, &intent, &id, adapter, seq, commit)?;
        return Ok(Some(format!(
            "completed {what}: it was recorded at seq {seq}{receipt}"
        )));
    }
    if complete(&intent)? {
        let recorded = record(store, clock, &id, &intent.events)?;
        let receipt = finish(
            store,
            clock,
            &intent,
            &id,
            adapter,
            recorded.seq,
            recorded.commit,
        )?;
        return Ok(Some(format!(
            "completed {what}: the native session was written in full; recorded now at seq {}{receipt}",
            recorded.seq
        )));
    }
    let mut removed = 0;
    let mut kept = Vec::new();
    for f in &intent.files {
        match std::fs::symlink_metadata(&f.path) {
            Ok(m) if m.is_file() && m.len() == f.size => {
                std::fs::remove_file(&f.path).map_err(OpError::io(&f.path))?;
                removed += 1;
            }
            Ok(_) => kept.push(f.path.display().to_string()),
            Err(_) => {}
        }
    }
    let kept = if kept.is_empty() {
        String::new()
    } else {
        format!(
            "; left alone, changed since: {} (remove it if nothing of yours is in it)",
            kept.join(", ")
        )
    };
    Ok(Some(format!(
        "rolled back {what}: it had not been written in full; {removed} file(s) removed, nothing recorded{kept}"
    )))
}

/// Returns the seq of the `handoff` event the intent planned, when the log
/// has it.
fn recorded_seq(store: &Store, id: &SessionId, intent: &Pending) -> OpResult<Option<u64>> {
    if store.tip(id)?.is_none() {
        return Ok(None);
    }
    for line in store.lines(id, intent.next_seq, None)? {
        let event = line?.decode().map_err(|e| OpError::Conflict {
            message: format!("session {id}: {e}"),
            hint: None,
        })?;
        if event.kind == kinds::HANDOFF
            && event
                .payload
                .get("target_native_id")
                .and_then(Value::as_str)
                == Some(intent.native_id.as_str())
        {
            return Ok(Some(event.seq));
        }
    }
    Ok(None)
}

/// Returns the commit of the batch holding `seq`.
fn commit_of(store: &Store, id: &SessionId, seq: u64) -> OpResult<gix::ObjectId> {
    store
        .batches(id)?
        .into_iter()
        .find(|b| b.trailers.seq.is_some_and(|(a, z)| a <= seq && seq <= z))
        .map(|b| b.commit)
        .ok_or_else(|| OpError::Conflict {
            message: format!("session {id}: no batch holds seq {seq}"),
            hint: None,
        })
}

/// Says whether the native session the intent planned is all there.
fn complete(intent: &Pending) -> OpResult<bool> {
    for f in &intent.files {
        match std::fs::metadata(&f.path) {
            Ok(m) if m.is_file() && m.len() >= f.size => {}
            _ => return Ok(false),
        }
    }
    for a in &intent.appends {
        let path = apply::contained_path(&intent.root, &a.path)?;
        let Ok(held) = std::fs::read(&path) else {
            return Ok(false);
        };
        if memchr::memmem::find(&held, a.bytes.as_bytes()).is_none() {
            return Ok(false);
        }
    }
    if intent.rows.is_empty() {
        return Ok(true);
    }
    let changes = ChangeSet {
        rows: intent.rows.iter().map(PlannedRow::row).collect(),
        ..Default::default()
    };
    Ok(apply::session_rows_present(&intent.root, &changes)?)
}

/// Does what follows the commit point for a recorded handoff: the written
/// record, the receipt (unsigned ones; a signed one needs the key), the
/// lead. Returns what to add to the report about the receipt.
fn finish(
    store: &Store,
    clock: &Clock,
    intent: &Pending,
    id: &SessionId,
    adapter: &'static dyn git_session_adapters::Adapter,
    seq: u64,
    commit: gix::ObjectId,
) -> OpResult<String> {
    let files: Vec<PathBuf> = intent
        .files
        .iter()
        .map(|f| f.path.clone())
        .filter(|p| p.is_file())
        .collect();
    let rows: Vec<RowWrite> = intent.rows.iter().map(PlannedRow::row).collect();
    let tail = Tail {
        session: id,
        to: &intent.to,
        native_id: &intent.native_id,
        root: &intent.root,
        files: &files,
        rows: &rows,
        seq,
        adapter,
    };
    written_record(store, &tail)?;
    let has_note = store.receipt_notes()?.iter().any(|(c, _)| *c == commit);
    let said = if has_note {
        String::new()
    } else if intent.receipt.signed {
        "; its receipt was to be signed and is not attached (the key is not here to sign it)"
            .to_owned()
    } else {
        let receipt = Receipt {
            format: Receipt::FORMAT,
            session: id.clone(),
            handoff_seq: seq,
            commit: commit.to_string(),
            from: intent.receipt.from.clone(),
            to: intent.to.clone(),
            target_native_id: intent.native_id.clone(),
            context_sha256: intent.receipt.context_sha256.clone(),
            losses: intent.receipt.losses.clone(),
            time: intent.receipt.time.clone(),
            signer: None,
            extra: Default::default(),
        };
        let note = ReceiptNote {
            receipt,
            signature: None,
        };
        store.add_receipt_note(commit, &note.encode(), clock.now().as_second())?;
        "; its unsigned receipt attached".to_owned()
    };
    move_lead(store, clock, &tail, None)?;
    Ok(said)
}
