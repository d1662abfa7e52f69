//! `push`, `fetch` and `sync` of sessions over ordinary git remotes.
//!
//! Fetch brings the remote's session refs into `refs/remotes/<remote>/
//! sessions/*` and reconciles each with the local ref (see
//! [`Store::reconcile`]); a divergence leaves the local tail in a fork
//! session, and the capture cursors that fed it are pointed at the fork so
//! the agent's next records land there instead of being appended again.
//! Push never forces, and goes only to the remote chosen for sessions
//! ([`consent`]). Sync repeats fetch-then-push until the remote accepts
//! everything, so two clones that both sync end with identical refs.

use std::path::Path;

use git_session_schema::SessionId;
use gix::ObjectId;

use super::progress::{Progress, Silent};
use super::{OpError, OpResult};
use crate::native::cursor::CursorIndex;
use crate::store::{
    MetaReconciled, PushRejection, Reconciled, StateLock, Store, refs, tracking_name,
};

/// Where a push of sessions is asked to go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination<'a> {
    /// The remote chosen for sessions (`session.remote`).
    Chosen,
    /// A remote named (or a URL given) on the command line: allowed only
    /// when it is the chosen one.
    Named(&'a str),
    /// Choose this remote now (`push --to`), recording it as
    /// `session.remote` (and its URL as `session.remoteUrl`) when none was
    /// chosen; refused when another was.
    ChooseNow(&'a str),
}

/// Decides, before anything is sent, whether sessions may go to `dest`,
/// and returns the remote to push to.
///
/// Sessions go only to the remote chosen for them, by `session.remote` or
/// once by `push --to NAME`, which records it. Refused, with the reason: no
/// choice yet; another remote or URL; the chosen remote now pointing at a
/// URL other than the one recorded when it was chosen; and any target that
/// looks like a fork of the chosen one (same host and repository name,
/// another owner), the usual way a transcript ends up public.
///
/// `chosen` and `pinned` are `session.remote` and `session.remoteUrl`.
pub fn consent(
    store: &Store,
    dest: Destination<'_>,
    chosen: Option<&str>,
    pinned: Option<&str>,
) -> OpResult<String> {
    let chosen = chosen.map(str::to_owned);
    let pinned = pinned.map(str::to_owned);
    let url_of = |remote: &str| {
        store
            .remote_push_url(remote)
            .unwrap_or_else(|| remote.to_owned())
    };
    let refuse = |message: String, hint: &str| OpError::Conflict {
        message,
        hint: Some(hint.to_owned()),
    };
    match (dest, chosen) {
        (Destination::ChooseNow(name), None) => {
            // A name that is no remote (and no URL or path) would be
            // recorded and then fail every push: refuse before choosing.
            if is_no_remote(store, name) {
                return Err(refuse(
                    format!("there is no remote named {name}; nothing was chosen or pushed"),
                    "add it first: `git remote add NAME URL` (a separate repository keeps transcripts private), then `git session push --to NAME`",
                ));
            }
            let url = url_of(name);
            store.set_local_config("session.remote", name)?;
            store.set_local_config("session.remoteUrl", &url)?;
            Ok(name.to_owned())
        }
        (Destination::ChooseNow(name), Some(c)) if name == c => {
            check_pin(&c, &url_of(&c), pinned.as_deref())?;
            Ok(c)
        }
        (Destination::ChooseNow(name), Some(c)) => Err(refuse(
            format!(
                "sessions of this repository go to {c}, not {name}{}",
                if is_no_remote(store, name) {
                    format!(" (and there is no remote named {name})")
                } else {
                    String::new()
                }
            ),
            "to move them, `git config session.remote NAME` (and session.remoteUrl); nothing was pushed",
        )),
        (_, None) => Err(refuse(
            "no remote is chosen for sessions yet; they are pushed only where you say".into(),
            "`git session push --to NAME` pushes to remote NAME and records it as session.remote",
        )),
        (Destination::Chosen, Some(c)) => {
            check_pin(&c, &url_of(&c), pinned.as_deref())?;
            Ok(c)
        }
        (Destination::Named(name), Some(c)) => {
            let chosen_url = pinned.clone().unwrap_or_else(|| url_of(&c));
            let target = url_of(name);
            if name == c || same_place(&target, &chosen_url) {
                check_pin(&c, &url_of(&c), pinned.as_deref())?;
                return Ok(c);
            }
            if looks_like_fork(&target, &chosen_url) {
                return Err(refuse(
                    format!(
                        "{name} ({target}) looks like a fork of the sessions remote {c} ({chosen_url}): same repository name, another owner; nothing was pushed"
                    ),
                    "sessions go only to session.remote; a fork may be public",
                ));
            }
            Err(refuse(
                format!(
                    "sessions of this repository go only to {c} ({chosen_url}), not {name}; nothing was pushed"
                ),
                "`git session push` pushes to the chosen remote; `git config session.remote NAME` changes it",
            ))
        }
    }
}

/// Refuses when the chosen remote no longer points where it did when it
/// was chosen.
fn check_pin(remote: &str, url: &str, pinned: Option<&str>) -> OpResult<()> {
    let Some(pinned) = pinned else {
        return Ok(());
    };
    if same_place(url, pinned) {
        return Ok(());
    }
    let why = if looks_like_fork(url, pinned) {
        "which looks like a fork of it (same repository name, another owner)"
    } else {
        "another repository"
    };
    Err(OpError::Conflict {
        message: format!(
            "remote {remote} now points to {url}, not {pinned} where sessions were allowed to go ({why}); nothing was pushed"
        ),
        hint: Some(format!(
            "if {url} is right, `git config session.remoteUrl {url}`"
        )),
    })
}

/// Splits a git URL into host and repository path, ignoring scheme, user,
/// port, a trailing `/` or `.git` and case of the host.
fn place(url: &str) -> (String, String) {
    let trim = |p: &str| {
        let p = p.trim_matches('/');
        p.strip_suffix(".git")
            .unwrap_or(p)
            .trim_end_matches('/')
            .to_owned()
    };
    if let Some((_, rest)) = url.split_once("://") {
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let host = authority.rsplit('@').next().unwrap_or(authority);
        let host = host.split(':').next().unwrap_or(host);
        if url.starts_with("file://") {
            return (String::new(), trim(&format!("{authority}/{path}")));
        }
        return (host.to_ascii_lowercase(), trim(path));
    }
    // scp-like user@host:path (a local path has no ':' before its first '/').
    if let Some((host, path)) = url.split_once(':')
        && !host.contains('/')
        && !host.is_empty()
    {
        let host = host.rsplit('@').next().unwrap_or(host);
        return (host.to_ascii_lowercase(), trim(path));
    }
    (String::new(), trim(url))
}

fn same_place(a: &str, b: &str) -> bool {
    place(a) == place(b)
}

/// Same host, same repository name, another owner.
fn looks_like_fork(a: &str, b: &str) -> bool {
    let (ha, pa) = place(a);
    let (hb, pb) = place(b);
    let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_ascii_lowercase();
    ha == hb && pa != pb && name(&pa) == name(&pb)
}

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
    /// Sessions whose metadata changed here (created, fast-forwarded or
    /// merged with concurrent local changes).
    pub meta: Vec<(SessionId, MetaReconciled)>,
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
    /// Sessions purged here whose old history on the remote the push
    /// replaced (fetch quarantines that history; the push resolves it).
    pub replaced: Vec<SessionId>,
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
    fetch_reporting(store, remote, trust, &Silent)
}

/// Like [`fetch`], telling `progress` when git fetches and how many
/// fetched sessions there are to verify and how many are.
pub fn fetch_reporting(
    store: &Store,
    remote: &str,
    trust: &Trust,
    progress: &dyn Progress,
) -> OpResult<FetchReport> {
    store.ensure_state_dir()?;
    // git's own words for a name that is no remote say nothing of where
    // to look.
    if is_no_remote(store, remote) {
        return Err(OpError::Conflict {
            message: format!("there is no remote named {remote}; nothing was fetched"),
            hint: Some(
                "`git remote -v` lists this repository's remotes; `git remote add NAME URL` adds one"
                    .into(),
            ),
        });
    }
    progress.stage(&format!("Fetching sessions from {remote}"), "refs", 0);
    // The remote's tips as last fetched: a session history only grows
    // there, so one that no longer holds its old tip was rewritten.
    let published: std::collections::HashMap<SessionId, ObjectId> =
        store.tracking_sessions(remote)?.into_iter().collect();
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
    let (removed, refused) =
        store.adopt_tombstones(remote, &accept, &|id| published.get(id).copied())?;
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
    for (refname, why) in store.tracking_invalid(remote)? {
        let id = refname
            .strip_prefix(&refs::tracking_prefix(&tracking))
            .unwrap_or(&refname)
            .to_owned();
        report.quarantined.push(Quarantine {
            refname,
            id,
            tip: String::new(),
            reason: format!("its name is no session id ({why}); not read"),
            conflict: false,
        });
    }
    let fetched = store.tracking_sessions(remote)?;
    progress.stage(
        "Verifying fetched sessions",
        "sessions",
        fetched.len() as u64,
    );
    for (id, tip) in fetched {
        let _done = Done(progress);
        let outcome = match unsigned_commit(store, &id, tip, trust) {
            Some(reason) => Reconciled::Quarantined {
                reason,
                conflict: false,
            },
            None => store
                .reconcile(&id, tip, published.get(&id).copied())
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
            Reconciled::Replaced => {
                // The purged history replaced what this clone verified.
                store.remember_tip(&id, None)?;
                report.changed.push((id, Reconciled::Replaced));
            }
            Reconciled::Rewritten { published, reason } => {
                // The tracking ref keeps the published tip, so the next
                // fetch judges the rewrite against it again.
                store.restore_tracking(remote, &id, published)?;
                report.quarantined.push(Quarantine {
                    refname: format!("{}{id}", refs::tracking_prefix(&tracking)),
                    id: id.to_string(),
                    tip: tip.to_string(),
                    reason,
                    conflict: true,
                });
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
    // Metadata after the sessions: a fetched ref is checked in full
    // before it is adopted or merged (see `store/meta.rs`).
    for (id, tip) in store.tracking_meta(remote)? {
        match store.reconcile_meta(&id, tip) {
            Ok(MetaReconciled::Unchanged) => {}
            Ok(MetaReconciled::Quarantined(reason)) => report.quarantined.push(Quarantine {
                refname: format!("{}{id}", refs::tracking_meta_prefix(&tracking)),
                id: id.to_string(),
                tip: tip.to_string(),
                reason: format!("metadata: {reason}"),
                conflict: false,
            }),
            Ok(outcome) => report.meta.push((id, outcome)),
            Err(e) => report.quarantined.push(Quarantine {
                refname: format!("{}{id}", refs::tracking_meta_prefix(&tracking)),
                id: id.to_string(),
                tip: tip.to_string(),
                reason: format!("metadata: {e}"),
                conflict: false,
            }),
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

/// Counts one unit done when dropped (a loop body that `continue`s or
/// fails still counts).
struct Done<'p>(&'p dyn Progress);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.done(1);
    }
}

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

/// Pushes every session to `remote`, which [`consent`] returned; returns
/// the refs the remote refused.
pub fn push(store: &Store, remote: &str) -> OpResult<Vec<PushRejection>> {
    Ok(store.push_sessions(remote)?)
}

/// Brings the full blobs of session `id`'s lazy artifacts
/// (`session.syncArtifacts head`) from `remote`'s
/// `refs/session-artifacts/<id>`, adopting each only after it matches its
/// head (size from the object header before reading, then SHA-256).
pub fn fetch_artifacts(
    store: &Store,
    clock: &crate::clock::Clock,
    remote: &str,
    id: &SessionId,
) -> OpResult<crate::store::ArtifactsFetched> {
    store.ensure_state_dir()?;
    Ok(store.fetch_artifacts(remote, id, clock.now().as_second())?)
}

/// Publishes the full blobs of session `id`'s lazy artifacts to `remote`
/// (what [`fetch_artifacts`] brings elsewhere); returns git's reason when
/// the remote refused. `remote` is what [`consent`] returned.
pub fn push_artifacts(store: &Store, remote: &str, id: &SessionId) -> OpResult<Option<String>> {
    Ok(store.push_artifacts(remote, id)?)
}

/// Says whether `name` is neither a configured remote nor something git
/// takes in its place (a URL, or a path to a repository).
fn is_no_remote(store: &Store, name: &str) -> bool {
    let url_or_path = name.contains([':', '/']) || Path::new(name).exists();
    !url_or_path && store.remote_push_url(name).is_none()
}

/// Fetches, reconciles and pushes until the remote has everything, except
/// sessions whose remote history is a quarantined conflict: those are
/// reported in [`SyncReport::held`] instead of retried. `remote` is what
/// [`consent`] returned.
pub fn sync(store: &Store, remote: &str, trust: &Trust) -> OpResult<SyncReport> {
    sync_reporting(store, remote, trust, &Silent)
}

/// Like [`sync`], telling `progress` each fetch's counts (see
/// [`fetch_reporting`]) and when it pushes.
pub fn sync_reporting(
    store: &Store,
    remote: &str,
    trust: &Trust,
    progress: &dyn Progress,
) -> OpResult<SyncReport> {
    let mut report = SyncReport::default();
    for round in 1..=ROUNDS {
        let fetched = fetch_reporting(store, remote, trust, progress)?;
        report.fetched.unchanged = fetched.unchanged;
        report.fetched.changed.extend(fetched.changed);
        report.fetched.removed.extend(fetched.removed);
        report.fetched.meta.extend(fetched.meta);
        report.fetched.quarantined = fetched.quarantined;
        report.rounds = round;
        let conflicts: Vec<String> = report
            .fetched
            .quarantined
            .iter()
            .filter(|q| q.conflict)
            .map(|q| format!("{}{}", refs::SESSIONS_PREFIX, q.id))
            .collect();
        progress.stage(&format!("Pushing sessions to {remote}"), "refs", 0);
        let replacing = store.purged_on_remote(remote)?;
        let (held, rejected): (Vec<_>, Vec<_>) = push(store, remote)?
            .into_iter()
            .partition(|r| conflicts.contains(&r.refname));
        report.held = held;
        let theirs: std::collections::HashMap<SessionId, ObjectId> =
            store.tracking_sessions(remote)?.into_iter().collect();
        for (id, _, ours) in replacing {
            if theirs.get(&id) == Some(&ours) {
                let refname = format!("{}{id}", refs::tracking_prefix(&tracking_name(remote)));
                report.fetched.quarantined.retain(|q| q.refname != refname);
                if !report.replaced.contains(&id) {
                    report.replaced.push(id);
                }
            }
        }
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
