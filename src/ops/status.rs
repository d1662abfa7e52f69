//! `status`: what is captured, what waits for the next capture, what is not
//! pushed yet, and how capture is set up, in one cheap pass.
//!
//! Costs one `stat` per native file (the capture cursors hold the last
//! size and time), one ref read per session and, for a session whose
//! remote-tracking tip differs from its tip, a walk of its own batch
//! commits down to that tip. Nothing is read from agent stores beyond
//! directory listings and file metadata.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use git_session_adapters::Adapter;
use git_session_adapters::source::Source;
use git_session_schema::{Agent, SessionId};

use super::OpResult;
use crate::native::cursor::{CursorIndex, Stamp};
use crate::store::{Store, StoreError};

/// Says where to look for agent stores.
pub struct StatusRequest<'a> {
    /// The user's home directory (agent stores default to it).
    pub home: PathBuf,
    /// Looks up an environment variable (an agent's store override).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// How many lines of the hook log to return.
    pub log_lines: usize,
}

/// One agent's capture state.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AgentStatus {
    /// The agent.
    pub agent: String,
    /// Its store root here.
    pub store: PathBuf,
    /// Whether the store exists.
    pub present: bool,
    /// Native sources (files, database sessions) that feed sessions of
    /// this repository.
    pub tracked: usize,
    /// Canonical sessions of this agent in the repository.
    pub sessions: usize,
    /// Tracked sources changed since the last capture (size or time).
    pub changed: Vec<PathBuf>,
    /// Source files capture has never looked at (some may belong to
    /// other projects: capture decides by their working directory).
    pub unseen: Vec<PathBuf>,
}

/// Push state of one session against the sessions remote.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Unpushed {
    /// The session.
    pub session: String,
    /// Its own batches the remote does not have (as of the last fetch or
    /// push); all of them when the remote has none.
    pub batches: usize,
    /// Whether the remote has the session at all.
    pub on_remote: bool,
    /// The remote's copy is not an ancestor of ours (a divergence the
    /// next `git session sync` turns into a fork).
    pub diverged: bool,
    /// The local history is a purge of the remote's copy: the next push
    /// or sync replaces the remote's copy (never true with `diverged`).
    pub replaced: bool,
}

/// The whole status.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Status {
    /// The local state directory.
    pub state_dir: PathBuf,
    /// Sessions in the repository.
    pub sessions: usize,
    /// Per agent.
    pub agents: Vec<AgentStatus>,
    /// The remote sessions are pushed to (`session.remote`), if chosen.
    pub remote: Option<String>,
    /// The remote sessions are fetched from (`session.remote`, else origin).
    pub fetch_remote: String,
    /// Whether that remote exists.
    pub fetch_remote_exists: bool,
    /// The URL the chosen remote had when it was chosen.
    pub remote_url: Option<String>,
    /// Sessions with batches the remote lacks.
    pub unpushed: Vec<Unpushed>,
    /// Git hooks and whether each is installed.
    pub git_hooks: Vec<GitHook>,
    /// Agent hooks and whether each is installed.
    pub agent_hooks: Vec<AgentHook>,
    /// The running `git session watch`, if any: its pid.
    pub watch: Option<u32>,
    /// The last lines of the hook log.
    pub hook_log: Vec<String>,
    /// Sessions whose lead a handoff moved to another agent.
    pub leads: Vec<Lead>,
}

/// One git hook git-session installs.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GitHook {
    /// The hook's name (`post-commit`).
    pub hook: String,
    /// Whether git-session's block is in it.
    pub installed: bool,
}

/// One agent's capture hook (`init --agent-hooks`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AgentHook {
    /// The agent.
    pub agent: String,
    /// The agent config file the hook lives in.
    pub file: PathBuf,
    /// Whether git-session's entry is in it.
    pub installed: bool,
}

/// Appends to a led session by an agent that does not lead it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ForeignAppend {
    /// The agent that appended.
    pub agent: String,
    /// The first seq it appended.
    pub first: u64,
    /// The last seq it appended.
    pub last: u64,
}

/// Who leads a session a handoff moved, and what others appended since.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Lead {
    /// The session.
    pub session: String,
    /// The agent that leads (the handoff's target).
    pub owner: String,
    /// The receipt's signer, when the handoff was signed.
    pub key: Option<String>,
    /// The `handoff` event that moved the lead.
    pub handoff_seq: Option<u64>,
    /// Appends by agents that do not lead, since.
    pub foreign: Vec<ForeignAppend>,
    /// Why the log does not bear the claim out, when it does not: the
    /// metadata is a claim anyone who can push may write, the handoff
    /// event and its signed receipt are the evidence (see [`confirm_lead`]).
    pub unconfirmed: Option<String>,
}

/// Checks a lead claimed by metadata against the log: the handoff event at
/// the claimed seq moves the session to the claimed agent, and a claimed
/// signer signed a receipt of that handoff that verifies. Returns why not.
fn confirm_lead(
    store: &Store,
    id: &SessionId,
    owner: &git_session_schema::meta::Owner,
    notes: &[(gix::ObjectId, Vec<u8>)],
    allowed: Option<&str>,
) -> Result<(), String> {
    let seq = owner.seq.ok_or("no handoff seq recorded")?;
    let event = match store.lines(id, seq, Some(seq)).map(|mut l| l.next()) {
        Ok(Some(Ok(line))) => line.decode().map_err(|e| format!("seq {seq}: {e}"))?,
        Ok(None) => return Err(format!("the session has no seq {seq}")),
        // Sealed for this clone: the claim cannot be weighed here.
        Err(StoreError::Sealed { .. }) | Ok(Some(Err(StoreError::Sealed { .. }))) => {
            return Err("the session is encrypted and no key here opens it".into());
        }
        Err(e) | Ok(Some(Err(e))) => return Err(e.to_string()),
    };
    if event.kind != git_session_schema::kinds::HANDOFF
        || event.payload.get("to").and_then(|v| v.as_str()) != Some(owner.agent.as_str())
    {
        return Err(format!("seq {seq} is no handoff to {}", owner.agent));
    }
    let Some(key) = &owner.key else {
        return Ok(());
    };
    let own = store
        .batches(id)
        .map_err(|e| e.to_string())?
        .iter()
        .map(|b| b.commit)
        .collect();
    let signed = super::verify::receipt_checks(store, id, &own, notes, allowed)
        .into_iter()
        .any(|c| {
            c.seq == Some(seq)
                && c.problem.is_none()
                && c.signature != "unsigned"
                && c.signer.as_deref() == Some(key.as_str())
        });
    if signed {
        Ok(())
    } else {
        Err(format!(
            "no receipt of the handoff at seq {seq} with a good signature by {key}"
        ))
    }
}

/// Computes the status.
pub fn status(store: &Store, request: &StatusRequest<'_>) -> OpResult<Status> {
    let listed = store.list()?;
    let mut per_agent: HashMap<String, usize> = HashMap::new();
    for (_, s) in &listed {
        if let Ok(s) = s {
            *per_agent
                .entry(s.header.agent.as_str().to_owned())
                .or_default() += 1;
        }
    }
    let mut agents = Vec::new();
    for &adapter in git_session_adapters::registry::ADAPTERS {
        let agent = adapter.agent();
        let root = adapter.store_root(request.env, &request.home);
        let mut a = agent_status(store, adapter, &agent, &root);
        a.sessions = per_agent.get(agent.as_str()).copied().unwrap_or(0);
        agents.push(a);
    }
    let (remote, remote_url) = crate::config::chosen_remote(store);
    let fetch_remote = crate::config::sessions_remote(store);
    let fetch_remote_exists = store.has_remote(&fetch_remote);
    let unpushed = match &remote {
        Some(r) if store.has_remote(r) => unpushed(store, r, &listed)?,
        // Nothing chosen: every session is unpushed.
        _ => listed
            .iter()
            .filter_map(|(id, s)| s.as_ref().ok().map(|_| id))
            .map(|id| Unpushed {
                session: id.to_string(),
                batches: store.batches(id).map(|b| b.len()).unwrap_or(0),
                on_remote: false,
                diverged: false,
                replaced: false,
            })
            .collect(),
    };
    let dir = store.hooks_dir();
    let git_hooks = crate::hooks::HOOKS
        .iter()
        .map(|h| GitHook {
            hook: (*h).to_owned(),
            installed: crate::hooks::is_installed(&dir, h),
        })
        .collect();
    let mut leads = Vec::new();
    let mut notes = None;
    let allowed = crate::config::allowed_signers(store, Some(&request.home));
    for id in store.meta_ids()? {
        // Metadata that cannot be read leaves the rest of the status.
        let Ok(meta) = store.meta(&id) else { continue };
        if let Some(o) = meta.owner {
            let notes = match &notes {
                Some(n) => n,
                None => notes.insert(store.receipt_notes()?),
            };
            let unconfirmed = confirm_lead(store, &id, &o, notes, allowed.as_deref()).err();
            leads.push(Lead {
                unconfirmed,
                session: id.to_string(),
                owner: o.agent,
                key: o.key,
                handoff_seq: o.seq,
                foreign: meta
                    .foreign
                    .into_iter()
                    .map(|f| ForeignAppend {
                        agent: f.agent,
                        first: f.first,
                        last: f.last,
                    })
                    .collect(),
            });
        }
    }
    Ok(Status {
        leads,
        state_dir: store.state_dir().to_owned(),
        sessions: listed.len(),
        agents,
        remote,
        fetch_remote,
        fetch_remote_exists,
        remote_url,
        unpushed,
        git_hooks,
        agent_hooks: agent_hooks(store.work_dir().as_deref(), request),
        watch: super::watch::running(store),
        hook_log: super::hook::recent(store.state_dir(), request.log_lines),
    })
}

/// Says, for every agent with hooks, whether ours are installed in its
/// configuration (agents whose hooks live in the project only with a work
/// tree).
fn agent_hooks(project: Option<&Path>, request: &StatusRequest<'_>) -> Vec<AgentHook> {
    use crate::native::agent_config as ac;
    let mut out = Vec::new();
    for adapter in git_session_adapters::registry::ADAPTERS {
        let Some(config) = &adapter.spec().integration.hooks else {
            continue;
        };
        let store = || adapter.store_root(request.env, &request.home);
        if let Some(path) = ac::locate(config.file(), project, &store) {
            let on = ac::hooks_installed(config, &path);
            out.push(AgentHook {
                agent: adapter.spec().name().to_owned(),
                file: path,
                installed: on,
            });
        }
    }
    out
}

fn agent_status(store: &Store, adapter: &dyn Adapter, agent: &Agent, root: &Path) -> AgentStatus {
    let mut out = AgentStatus {
        agent: agent.as_str().to_owned(),
        store: root.to_owned(),
        present: root.is_dir(),
        ..AgentStatus::default()
    };
    if !out.present {
        return out;
    }
    let index = CursorIndex::load(store.state_dir(), agent.as_str());
    for rel in crate::native::discover(adapter, root) {
        let abs = root.join(&rel);
        if let Some(Source::Sqlite(_)) = crate::native::source_for(adapter, &rel) {
            match index.databases.get(&*abs.to_string_lossy()) {
                None => out.unseen.push(abs),
                Some(cursor) => {
                    let ours = cursor
                        .sessions
                        .values()
                        .filter(|s| s.session.is_some())
                        .count();
                    out.tracked += ours;
                    let (db, wal) = crate::native::sqlite::stamps(&abs);
                    if db != cursor.db || wal != cursor.wal {
                        out.changed.push(abs);
                    }
                }
            }
            continue;
        }
        match index.files.get(&*abs.to_string_lossy()) {
            None => out.unseen.push(abs),
            Some(cursor) => {
                if cursor.session.is_none() {
                    continue;
                }
                out.tracked += 1;
                let now = Stamp::of(&abs);
                if now.size != cursor.size || now.mtime_ns != cursor.mtime_ns {
                    out.changed.push(abs);
                }
            }
        }
    }
    // A JSON tree (OpenCode's older `storage/`): its sessions, and whether
    // a file of a session of this repository changed since its capture.
    for source in adapter.spec().sources {
        let git_session_adapters::Source::JsonTree(tree) = source else {
            continue;
        };
        let dir = crate::native::tree::dir_of(root, tree);
        if !dir.is_dir() {
            continue;
        }
        let Some(cursor) = index.databases.get(&*dir.to_string_lossy()) else {
            out.unseen.push(dir);
            continue;
        };
        out.tracked += cursor
            .sessions
            .values()
            .filter(|s| s.session.is_some())
            .count();
        let in_database: std::collections::HashSet<&String> = index
            .databases
            .iter()
            .filter(|(db, _)| {
                **db != *dir.to_string_lossy() && Path::new(db.as_str()).parent() == Some(root)
            })
            .flat_map(|(_, c)| c.sessions.keys())
            .collect();
        let skip = |key: &str| {
            in_database.contains(&key.to_owned())
                || cursor
                    .sessions
                    .get(key)
                    .is_some_and(|s| s.session.is_none())
        };
        let mut changed = false;
        crate::native::tree::read(&dir, tree, &cursor.files, &skip, None, &mut |_| {
            changed = true
        });
        if changed {
            out.changed.push(dir);
        }
    }
    out
}

type Listed = [(
    SessionId,
    crate::store::StoreResult<crate::store::SessionStat>,
)];

fn unpushed(store: &Store, remote: &str, listed: &Listed) -> OpResult<Vec<Unpushed>> {
    let theirs: HashMap<SessionId, gix::ObjectId> =
        store.tracking_sessions(remote)?.into_iter().collect();
    // Histories a purge here replaced: push and sync replace them, as
    // `purge` says, rather than fork them.
    let purged: std::collections::HashSet<SessionId> = store
        .purged_on_remote(remote)?
        .into_iter()
        .map(|(id, _, _)| id)
        .collect();
    let mut out = Vec::new();
    for (id, s) in listed {
        let Ok(s) = s else { continue };
        let their_tip = theirs.get(id).copied();
        if their_tip == Some(s.tip) {
            continue;
        }
        let batches = store.batches(id)?;
        let (count, diverged) = match their_tip {
            None => (batches.len(), false),
            Some(t) => match batches.iter().position(|b| b.commit == t) {
                Some(i) => (i, false),
                None => (batches.len(), true),
            },
        };
        let replaced = diverged && purged.contains(id);
        out.push(Unpushed {
            session: id.to_string(),
            batches: count,
            on_remote: their_tip.is_some(),
            diverged: diverged && !replaced,
            replaced,
        });
    }
    Ok(out)
}
