//! `push`, `fetch` and `sync` of sessions over ordinary git remotes.
//!
//! Fetch brings the remote's session refs into `refs/remotes/<remote>/
//! sessions/*` and reconciles each with the local ref (see
//! [`Store::reconcile`]); a divergence leaves the local tail in a fork
//! session, and the capture cursors that fed it are pointed at the fork so
//! the agent's next records land there instead of being appended again.
//! Push never forces. Sync repeats fetch-then-push until the remote accepts
//! everything, so two clones that both sync end with identical refs.

use git_session_schema::SessionId;
use gix::ObjectId;

use super::{OpError, OpResult};
use crate::native::cursor::CursorIndex;
use crate::store::{PushRejection, Reconciled, StateLock, Store, refs, tracking_name};

/// How many fetch-and-push rounds sync tries before giving up.
const ROUNDS: usize = 5;

/// Reports what a fetch changed locally.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchReport {
    /// Sessions that changed here, and how.
    pub changed: Vec<(SessionId, Reconciled)>,
    /// Sessions that were already the same.
    pub unchanged: usize,
    /// Fetched refs that were not promoted, and why (also kept in
    /// `.git/session/quarantine/<remote>.json` for `doctor`).
    pub quarantined: Vec<Quarantine>,
    /// Local sessions removed because a fetched tombstone names them.
    pub removed: Vec<SessionId>,
}

/// One fetched ref that stays in the remote-tracking namespace.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Quarantine {
    /// The remote-tracking ref.
    pub refname: String,
    /// The session id its name claims.
    pub id: String,
    /// The fetched tip.
    pub tip: String,
    /// Why it was not promoted.
    pub reason: String,
    /// Whether a local session of that id exists and was kept (a push of
    /// it will be refused by the remote until one side is removed).
    pub conflict: bool,
}

/// Reports a sync.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Everything fetched over all rounds (quarantine as of the last one).
    pub fetched: FetchReport,
    /// Fetch-and-push rounds used.
    pub rounds: usize,
    /// Pushes refused because the remote holds a quarantined conflicting
    /// history under the same id (reported, not retried).
    pub held: Vec<PushRejection>,
}

/// Fetches `remote` and reconciles every fetched session.
///
/// Each fetched ref is judged on its own: one that fails verification,
/// cannot be read at all, or conflicts with the local session is
/// quarantined with its reason and the others go on.
/// Says what fetched history must prove beyond verifying.
#[derive(Clone, Debug, Default)]
pub struct Trust {
    /// Every new batch commit must carry a good SSH signature by a key in
    /// `allowed_signers` (`session.requireSigned`).
    pub require_signed: bool,
    /// The allowed-signers file's content.
    pub allowed_signers: Option<String>,
}

pub fn fetch(store: &Store, remote: &str, trust: &Trust) -> OpResult<FetchReport> {
    store.ensure_state_dir()?;
    store.fetch_sessions(remote)?;
    // Captures must not run between moving a ref and re-pointing cursors.
    let _locks = capture_locks(store)?;
    let mut report = FetchReport::default();
    let tracking = tracking_name(remote);
    let accept = |commit: ObjectId| -> Result<(), String> {
        if !trust.require_signed {
            return Ok(());
        }
        let signature = store.commit_signature(commit).map_err(|e| e.to_string())?;
        crate::sign::judge_commit(signature.as_ref(), trust.allowed_signers.as_deref(), true)
            .map(|_| ())
    };
    let (removed, refused) = store.adopt_tombstones(remote, &accept)?;
    report.removed = removed;
    for (id, reason) in refused {
        report.quarantined.push(Quarantine {
            refname: format!("{}{id}", refs::tracking_tombstones_prefix(&tracking)),
            id: id.to_string(),
            tip: String::new(),
            reason,
            conflict: false,
        });
    }
    for (id, tip) in store.tracking_sessions(remote)? {
        let outcome = match unsigned_commit(store, &id, tip, trust) {
            Some(reason) => Reconciled::Quarantined {
                reason,
                conflict: false,
            },
            None => store
                .reconcile(&id, tip)
                .unwrap_or_else(|e| Reconciled::Quarantined {
                    reason: e.to_string(),
                    conflict: false,
                }),
        };
        match outcome {
            Reconciled::Unchanged | Reconciled::LocalAhead | Reconciled::Removed => {
                report.unchanged += 1
            }
            Reconciled::Diverged { fork } => {
                repoint_cursors(store, &id, &fork)?;
                // The verified local tail now lives in the fork.
                store.remember_tip(&id, None)?;
                report.changed.push((id, Reconciled::Diverged { fork }));
            }
            Reconciled::Quarantined { reason, conflict } => report.quarantined.push(Quarantine {
                refname: format!("{}{id}", refs::tracking_prefix(&tracking)),
                id: id.to_string(),
                tip: tip.to_string(),
                reason,
                conflict,
            }),
            other => report.changed.push((id, other)),
        }
    }
    save_quarantine(store, &tracking, &report.quarantined)?;
    store.merge_notes(remote)?;
    Ok(report)
}

/// With `require_signed`, returns why the first fetched commit this clone
/// lacks is not acceptable, if one is not.
fn unsigned_commit(store: &Store, id: &SessionId, tip: ObjectId, trust: &Trust) -> Option<String> {
    if !trust.require_signed {
        return None;
    }
    let known = store.tip(id).ok().flatten();
    let commits = match store.new_commits(tip, known) {
        Ok(c) => c,
        Err(e) => return Some(e.to_string()),
    };
    for commit in commits {
        let signature = match store.commit_signature(commit) {
            Ok(s) => s,
            Err(e) => return Some(e.to_string()),
        };
        if let Err(why) =
            crate::sign::judge_commit(signature.as_ref(), trust.allowed_signers.as_deref(), true)
        {
            return Some(format!("commit {commit} {why}"));
        }
    }
    None
}

/// Returns what the last fetch of each remote left in quarantine.
pub fn quarantined(store: &Store) -> Vec<(String, Quarantine)> {
    let dir = store.state_dir().join(QUARANTINE_DIR);
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return out;
    };
    let mut files: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    files.sort();
    for path in files {
        let remote = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let list: Vec<Quarantine> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        out.extend(list.into_iter().map(|q| (remote.clone(), q)));
    }
    out
}

const QUARANTINE_DIR: &str = "quarantine";

fn save_quarantine(store: &Store, tracking: &str, list: &[Quarantine]) -> OpResult<()> {
    let dir = store.state_dir().join(QUARANTINE_DIR);
    let path = dir.join(format!("{tracking}.json"));
    if list.is_empty() {
        let _ = std::fs::remove_file(&path);
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(OpError::io(&dir))?;
    let body = serde_json::to_vec_pretty(list).expect("plain data serializes");
    std::fs::write(&path, body).map_err(OpError::io(&path))
}

/// Pushes every session; returns the refs the remote refused.
pub fn push(store: &Store, remote: &str) -> OpResult<Vec<PushRejection>> {
    Ok(store.push_sessions(remote)?)
}

/// Fetches, reconciles and pushes until the remote has everything, except
/// sessions whose remote history is a quarantined conflict: those are
/// reported in [`SyncReport::held`] instead of retried.
pub fn sync(store: &Store, remote: &str, trust: &Trust) -> OpResult<SyncReport> {
    let mut report = SyncReport::default();
    for round in 1..=ROUNDS {
        let fetched = fetch(store, remote, trust)?;
        report.fetched.unchanged = fetched.unchanged;
        report.fetched.changed.extend(fetched.changed);
        report.fetched.removed.extend(fetched.removed);
        report.fetched.quarantined = fetched.quarantined;
        report.rounds = round;
        let conflicts: Vec<String> = report
            .fetched
            .quarantined
            .iter()
            .filter(|q| q.conflict)
            .map(|q| format!("{}{}", refs::SESSIONS_PREFIX, q.id))
            .collect();
        let (held, rejected): (Vec<_>, Vec<_>) = push(store, remote)?
            .into_iter()
            .partition(|r| conflicts.contains(&r.refname));
        report.held = held;
        if rejected.is_empty() {
            return Ok(report);
        }
    }
    Err(OpError::Conflict {
        message: format!(
            "{remote} kept changing while syncing ({ROUNDS} rounds); nothing was lost"
        ),
        hint: Some("run git session sync again".into()),
    })
}

fn capture_locks(store: &Store) -> OpResult<Vec<StateLock>> {
    git_session_adapters::registry::ADAPTERS
        .iter()
        .map(|a| a.agent())
        .map(|a| {
            store
                .lock_state(&format!("capture-{a}"))
                .map_err(OpError::from)
        })
        .collect()
}

/// Points every capture cursor that fed `from` at `to`.
fn repoint_cursors(store: &Store, from: &SessionId, to: &SessionId) -> OpResult<()> {
    for agent in git_session_adapters::registry::ADAPTERS
        .iter()
        .map(|a| a.agent())
    {
        let mut index = CursorIndex::load(store.state_dir(), agent.as_str());
        let mut changed = false;
        let sessions = index.files.values_mut().map(|c| &mut c.session).chain(
            index
                .databases
                .values_mut()
                .flat_map(|d| d.sessions.values_mut().map(|s| &mut s.session)),
        );
        for session in sessions {
            if session.as_deref() == Some(from.as_str()) {
                *session = Some(to.to_string());
                changed = true;
            }
        }
        if changed {
            index.save()?;
        }
    }
    Ok(())
}
