//! `init`: set a repository up for sessions, idempotently (what
//! `git session init` and the MCP `init` tool both do).

use std::path::{Path, PathBuf};

use super::{OpError, OpResult};
use crate::hooks;
use crate::store::Store;

/// What an init did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct InitReport {
    /// The local state directory.
    pub state_dir: PathBuf,
    /// Whether this init created it.
    pub created: bool,
    /// Whether `events/*/*/*.jsonl -delta` was added to the repository's
    /// own info/attributes now.
    pub delta_attribute_added: bool,
    /// Hook files a block was added to now (none when already there).
    pub hooks_installed: Vec<PathBuf>,
    /// Whether the hooks folder is inside the work tree (tracked, as with
    /// core.hooksPath=.husky): its blocks run git-session from PATH, with
    /// no path of this machine.
    pub hooks_tracked: bool,
    /// Hooks whose git-session block an earlier `exit`/`exec` makes
    /// unreachable: the hook file and why.
    pub hooks_unreachable: Vec<(PathBuf, String)>,
    /// The remote chosen for sessions (`session.remote`), if any.
    pub chosen_remote: Option<String>,
    /// The remote fetch refspecs go to.
    pub fetch_remote: String,
    /// Whether that remote exists.
    pub fetch_remote_exists: bool,
    /// Fetch refspecs added now.
    pub refspecs_added: usize,
}

/// Prepares the repository: state directory, the `-delta` attribute for
/// event chunks, post-commit hook calling `binary` (or git-session from
/// PATH in a tracked hooks folder), session fetch refspecs on the sessions
/// remote.
pub fn init(store: &Store, binary: &Path) -> OpResult<InitReport> {
    let created = store.ensure_state_dir()?;
    let dir = store.hooks_dir();
    let mut report = InitReport {
        state_dir: store.state_dir().to_owned(),
        created,
        ..InitReport::default()
    };
    report.delta_attribute_added = store.ensure_delta_attribute()?;
    // A hooks folder inside the work tree (core.hooksPath=.husky, say) is
    // committed: it gets no path of this machine, only git-session on PATH.
    report.hooks_tracked = store.worktree_paths().iter().any(|w| dir.starts_with(w))
        && !store
            .state_dir()
            .parent()
            .is_some_and(|common| dir.starts_with(common));
    let binary = (!report.hooks_tracked).then_some(binary);
    for hook in hooks::HOOKS {
        if hooks::install(&dir, hook, binary).map_err(hook_error)? {
            report.hooks_installed.push(dir.join(hook));
        }
        if let Err(why) = hooks::reachable(&dir, hook) {
            report.hooks_unreachable.push((dir.join(hook), why));
        }
    }
    report.chosen_remote = crate::config::chosen_remote(store).0;
    report.fetch_remote = crate::config::sessions_remote(store);
    report.fetch_remote_exists = store.has_remote(&report.fetch_remote);
    if report.fetch_remote_exists {
        report.refspecs_added = store.add_fetch_refspecs(&report.fetch_remote)?;
    }
    Ok(report)
}

/// What an uninstall removed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Uninstalled {
    /// Hook files a block was removed from.
    pub hooks: Vec<PathBuf>,
    /// Whether git-session's lines left info/attributes.
    pub attribute: bool,
    /// The remote whose session fetch refspecs were removed.
    pub remote: Option<String>,
}

/// Undoes [`init`].
pub fn uninstall(store: &Store) -> OpResult<Uninstalled> {
    let dir = store.hooks_dir();
    let mut removed = Vec::new();
    for hook in hooks::HOOKS {
        if hooks::uninstall(&dir, hook).map_err(hook_error)? {
            removed.push(dir.join(hook));
        }
    }
    let attribute = store.remove_delta_attribute()?;
    let remote = crate::config::sessions_remote(store);
    let remote = if store.has_remote(&remote) {
        store.remove_fetch_refspecs(&remote)?;
        Some(remote)
    } else {
        None
    };
    Ok(Uninstalled {
        hooks: removed,
        attribute,
        remote,
    })
}

fn hook_error(e: hooks::HookError) -> OpError {
    OpError::Conflict {
        message: e.to_string(),
        hint: None,
    }
}

/// Which agent integrations to install or remove.
pub struct AgentSetup<'a> {
    /// Register the MCP server with these agents (claude, codex).
    pub mcp: Vec<git_session_schema::Agent>,
    /// Install capture into the agents' hooks, the Claude Code skill and
    /// the AGENTS.md section.
    pub hooks: bool,
    /// With `hooks`: also Claude Code's session-start hook that hands a
    /// new session the brief of the latest other agent's session on this
    /// branch (off by default).
    pub brief: bool,
    /// The user's home (Codex's config lives under it).
    pub home: PathBuf,
    /// Looks up an environment variable (CODEX_HOME).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Remove instead of install.
    pub remove: bool,
}

/// One file an agent setup touched: what, where, what happened.
pub type SetupChange = (String, PathBuf, crate::native::agent_config::Change);

/// Installs (or removes) the MCP registrations and agent hooks asked for.
pub fn agent_setup(
    store: &Store,
    binary: &Path,
    setup: &AgentSetup<'_>,
) -> OpResult<Vec<SetupChange>> {
    use crate::native::agent_config as ac;
    let install = !setup.remove;
    let project = store.work_dir().ok_or_else(|| OpError::Conflict {
        message: "this repository has no work tree; agent configuration goes into one".into(),
        hint: Some("run it in a checkout".into()),
    })?;
    let codex_home =
        git_session_adapters::registry::adapter(&git_session_schema::Agent::parse("codex"))
            .map(|a| a.store_root(setup.env, &setup.home))
            .unwrap_or_else(|| setup.home.join(".codex"));
    let mut out = Vec::new();
    for agent in &setup.mcp {
        let (path, change) = match agent.as_str() {
            "claude" => ac::claude_mcp(&project, binary, install)?,
            "codex" => ac::codex_mcp(&codex_home, binary, install)?,
            other => {
                return Err(OpError::Conflict {
                    message: format!("registering the MCP server with {other} is not supported"),
                    hint: Some(format!(
                        "add a stdio MCP server to {other}'s configuration by hand: command {} with argument mcp, run in this repository",
                        binary.display()
                    )),
                });
            }
        };
        out.push((format!("{agent} mcp server"), path, change));
    }
    if setup.hooks {
        let (p, c) = ac::claude_hooks(&project, binary, install, setup.brief)?;
        let what = if setup.brief && install {
            "claude hooks (Stop, SessionEnd, SessionStart brief)"
        } else {
            "claude hooks (Stop, SessionEnd)"
        };
        out.push((what.into(), p, c));
        let (p, c) = ac::claude_skill(&project, install)?;
        out.push(("claude skill".into(), p, c));
        let (p, c) = ac::codex_notify(&codex_home, binary, install)?;
        out.push(("codex notify".into(), p, c));
        let (p, c) = ac::agents_md(&project, install)?;
        out.push(("AGENTS.md section".into(), p, c));
    }
    Ok(out)
}
