//! `init`: set a repository up for sessions, idempotently (what
//! `git session init` and the MCP `init` tool both do).

use std::path::{Path, PathBuf};

use git_session_adapters::Adapter;
use git_session_adapters::registry::{self, ConfigDir, ConfigFile, HookAction, HookConfig};

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
    /// Whether the repository is bare: no commit is made in it, so it
    /// gets no post-commit hook.
    pub bare: bool,
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
/// PATH in a tracked hooks folder; none in a bare repository), session
/// fetch refspecs on the sessions remote.
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
    report.bare = store.work_dir().is_none();
    for hook in hooks::HOOKS.iter().filter(|_| !report.bare) {
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
    /// Register the MCP server with these agents (those whose registry row
    /// declares where: `integration.mcp`).
    pub mcp: Vec<git_session_schema::Agent>,
    /// Install capture into the hooks of every agent that has them
    /// (`integration.hooks`), its skill, and the AGENTS.md section.
    pub hooks: bool,
    /// With `hooks`: also the session-start hooks that hand a new session
    /// the brief of the latest other agent's session on this branch (off by
    /// default).
    pub brief: bool,
    /// The user's home (agents' stores, and configuration in them, live
    /// under it).
    pub home: PathBuf,
    /// Looks up an environment variable (those that move agents' stores).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Remove instead of install.
    pub remove: bool,
}

/// One file an agent setup touched: what, where, what happened.
pub type SetupChange = (String, PathBuf, crate::native::agent_config::Change);

/// What an agent setup did: the files it touched, and the agents' hooks
/// it left out, each with why (one agent's configuration that cannot take
/// the hook does not stop the others).
pub type AgentSetupReport = (Vec<SetupChange>, Vec<String>);

/// Installs (or removes) the MCP registrations and agent hooks asked for.
pub fn agent_setup(
    store: &Store,
    binary: &Path,
    setup: &AgentSetup<'_>,
) -> OpResult<AgentSetupReport> {
    use crate::native::agent_config as ac;
    let install = !setup.remove;
    let project = store.work_dir().ok_or_else(|| OpError::Conflict {
        message: "this repository has no work tree; agent configuration goes into one".into(),
        hint: Some("run it in a checkout".into()),
    })?;
    let locate = |adapter: &dyn Adapter, file: &ConfigFile| {
        ac::locate(file, Some(&project), &|| {
            adapter.store_root(setup.env, &setup.home)
        })
        .expect("the project is known")
    };
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    for agent in &setup.mcp {
        let found = registry::adapter(agent).and_then(|a| Some((a, a.spec().integration.mcp?)));
        let Some((adapter, config)) = found else {
            return Err(OpError::Conflict {
                message: format!("registering the MCP server with {agent} is not supported"),
                hint: Some(format!(
                    "add a stdio MCP server to {agent}'s configuration by hand: command {} with argument mcp, run in this repository",
                    binary.display()
                )),
            });
        };
        let path = locate(adapter, config.file());
        let change = ac::mcp(&config, &path, binary, install)?;
        out.push((format!("{agent} mcp server"), path, change));
    }
    if setup.hooks {
        for adapter in registry::ADAPTERS {
            let spec = adapter.spec();
            let name = spec.name();
            if let Some(config) = &spec.integration.hooks {
                let path = locate(*adapter, config.file());
                let label = hooks_label(name, config, install && setup.brief);
                match ac::hooks(config, &path, spec.display, binary, install, setup.brief) {
                    Ok(change) => out.push((label, path, change)),
                    Err(e) => left_out.push(format!("{label} not set up: {e}")),
                }
            }
            if let Some(dir) = spec.integration.skill {
                let file = ConfigFile {
                    dir: ConfigDir::Project,
                    path: dir,
                };
                let (p, c) = ac::skill(&locate(*adapter, &file), install)?;
                out.push((format!("{name} skill"), p, c));
            }
        }
        let (p, c) = ac::agents_md(&project, install)?;
        out.push(("AGENTS.md section".into(), p, c));
    }
    Ok((out, left_out))
}

/// Names an agent's hooks for the report: `<agent> hooks (Stop,
/// SessionEnd)` (with `brief`, also the brief's event), or `<agent>
/// notify` for a notify program.
fn hooks_label(agent: &str, config: &HookConfig, brief: bool) -> String {
    match config {
        HookConfig::JsonEvents { hooks, .. } => {
            let events: Vec<String> = hooks
                .iter()
                .filter_map(|h| match h.action {
                    HookAction::Capture => Some(h.event.to_owned()),
                    HookAction::Brief { .. } => brief.then(|| format!("{} brief", h.event)),
                })
                .collect();
            format!("{agent} hooks ({})", events.join(", "))
        }
        HookConfig::TomlNotify { hook, .. } => format!("{agent} {}", hook.event),
    }
}
