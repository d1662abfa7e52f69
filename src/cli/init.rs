//! `git session init`: prepare this repository for sessions.

use std::io::Write;
use std::path::PathBuf;

use super::{CommandError, Env};
use crate::ops;

/// Prepare this repository for git-session, or undo it with --uninstall.
///
/// Creates the local state directory (under the git common dir, shared by
/// all worktrees, never pushed); installs a post-commit hook that captures
/// the agents' sessions after each commit (between marker lines, keeping
/// any hook content you have, honouring core.hooksPath); and adds glob fetch
/// refspecs to the sessions remote (session.remote, else origin) so a plain
/// `git fetch` also brings session refs; and adds `events/*/*/*.jsonl
/// -delta` to the repository's own info/attributes (never committed), so
/// push and gc do not search deltas through event chunks (the first
/// capture adds it too). Every session.packBatches batches (default 100,
/// 0 for never) and before a push, session objects are packed, so loose
/// objects never pile up to git's gc.auto. What a plain `git push` sends is
/// not changed, and sessions are pushed only to the remote chosen for them
/// (`git session push --to NAME`). Safe to run again.
///
/// --agent-hooks
/// installs capture into the agents' own hooks (Claude Code's Stop and
/// SessionEnd in .claude/settings.local.json, Codex's notify), a Claude Code
/// skill and an AGENTS.md section saying when to call which tool; each is
/// kept beside what you have (between markers, or marked), never fails the
/// agent (exit 0, failures logged), and comes out again with --uninstall.
/// Codex's notify is in the user's config.toml, so it runs for every
/// repository; it captures only into repositories set up for sessions
/// (`init` or `import` ran there) and does nothing elsewhere.
/// With --brief, a new Claude Code session also starts with the brief of
/// the latest session of another agent on this branch (captured at HEAD or
/// an ancestor), compiled for Claude Code (4000 tokens) and framed as a
/// record of earlier work, data and not instructions.
///
/// --mcp AGENT
/// registers `git-session mcp` as an MCP server with that agent (claude:
/// the project's .mcp.json; codex: `[mcp_servers.git-session]` in
/// $CODEX_HOME/config.toml), so the agent can list, search, compile and
/// hand off sessions itself. Other agents: add a stdio server running
/// `git-session mcp` in the repository by hand.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remove exactly what init added (hook blocks, fetch refspecs, the
    /// attribute line, and with --agent-hooks those too).
    #[arg(long)]
    uninstall: bool,
    /// Install capture into Claude Code's and Codex's hooks, the skill and
    /// the AGENTS.md section.
    #[arg(long)]
    agent_hooks: bool,
    /// With --agent-hooks: also a Claude Code SessionStart hook that gives
    /// each new session the brief of the latest session of another agent
    /// on this branch, framed as a record (data), not instructions. Off by
    /// default; --agent-hooks without --brief takes it out again.
    #[arg(long, requires = "agent_hooks")]
    brief: bool,
    /// Register the MCP server with this agent (repeatable: claude, codex).
    #[arg(long, value_name = "AGENT", value_parser = super::agent_parser())]
    mcp: Vec<git_session_schema::Agent>,
    /// Home directory whose agent configuration is edited (default: $HOME).
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
}

fn agent_setup(
    args: &Args,
    env: &Env,
    store: &crate::store::Store,
    out: &mut dyn Write,
    warnings: &mut Vec<String>,
) -> Result<(), CommandError> {
    if !args.agent_hooks && args.mcp.is_empty() {
        return Ok(());
    }
    let binary = std::env::current_exe()
        .map_err(|e| CommandError::failure(format!("cannot locate git-session itself: {e}")))?;
    let lookup = |name: &str| std::env::var(name).ok();
    let setup = ops::init::AgentSetup {
        mcp: args.mcp.clone(),
        hooks: args.agent_hooks,
        brief: args.brief,
        home: env.agent_home(args.home.clone())?,
        env: &lookup,
        remove: args.uninstall,
    };
    use crate::native::agent_config::Change;
    let (changes, left_out) = ops::init::agent_setup(store, &binary, &setup)?;
    warnings.extend(left_out.into_iter().map(|w| format!("warning: {w}")));
    for (what, path, change) in changes {
        let verb = match change {
            Change::Added => "Installed",
            Change::Updated => "Updated",
            Change::Already => "Already installed:",
            Change::Removed => "Removed",
            Change::Absent => "Not installed:",
        };
        writeln!(out, "{verb} {what} ({})", path.display())?;
    }
    Ok(())
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    // What init did is a report, not data: `-q` prints nothing on
    // success, as `git init -q` does; warnings still go to stderr.
    let quiet = super::ui::is_quiet();
    let mut warned = Vec::new();
    let result = if quiet {
        run_reporting(&args, env, &store, &mut std::io::sink(), &mut warned)
    } else {
        run_reporting(&args, env, &store, &mut *out, &mut warned)
    };
    for w in warned {
        if quiet {
            writeln!(std::io::stderr(), "{w}")?;
        } else {
            writeln!(out, "{w}")?;
        }
    }
    result
}

fn run_reporting(
    args: &Args,
    env: &Env,
    store: &crate::store::Store,
    out: &mut dyn Write,
    warnings: &mut Vec<String>,
) -> Result<(), CommandError> {
    if args.uninstall {
        agent_setup(args, env, store, out, warnings)?;
        let undone = ops::init::uninstall(store)?;
        for path in &undone.hooks {
            writeln!(out, "Removed the git-session block from {}", path.display())?;
        }
        if undone.attribute {
            writeln!(
                out,
                "Removed the git-session lines from the repository's info/attributes"
            )?;
        }
        if let Some(remote) = &undone.remote {
            writeln!(
                out,
                "Removed the session fetch refspecs from remote {remote}"
            )?;
        }
        return Ok(());
    }
    let binary = std::env::current_exe()
        .map_err(|e| CommandError::failure(format!("cannot locate git-session itself: {e}")))?;
    let r = ops::init::init(store, &binary)?;
    let verb = if r.created {
        "Initialized"
    } else {
        "Already initialized"
    };
    writeln!(out, "{verb} git-session in {}", r.state_dir.display())?;
    if r.delta_attribute_added {
        writeln!(
            out,
            "Added `{}` to the repository's info/attributes (event chunks are stored whole in packs)",
            crate::store::DELTA_ATTRIBUTE
        )?;
    }
    if r.bare {
        writeln!(
            out,
            "A bare repository: no post-commit hook (no commit is made here to link to a session)"
        )?;
    }
    for path in &r.hooks_installed {
        let hook = path.file_name().unwrap_or_default().to_string_lossy();
        writeln!(
            out,
            "Installed the {hook} hook in {}{}",
            path.display(),
            if r.hooks_tracked {
                " (a tracked folder: it runs git-session from PATH)"
            } else {
                ""
            }
        )?;
    }
    for (path, why) in &r.hooks_unreachable {
        let hook = path.file_name().unwrap_or_default().to_string_lossy();
        warnings.push(format!(
            "warning: the {hook} hook never reaches the git-session block: {why}; move the block above that line"
        ));
    }
    match &r.chosen_remote {
        Some(r) => writeln!(
            out,
            "Sessions are pushed only to remote {r} (session.remote)"
        )?,
        None => writeln!(
            out,
            "Sessions are pushed only to a remote you choose: `git session push --to NAME` (recorded as session.remote)"
        )?,
    }
    let remote = &r.fetch_remote;
    if r.fetch_remote_exists {
        if r.refspecs_added > 0 {
            writeln!(
                out,
                "A plain `git fetch {remote}` now also downloads sessions; `git session fetch` (or sync) verifies them and adds them to `git session list`"
            )?;
        }
    } else {
        writeln!(
            out,
            "No remote {remote} yet; run init again after adding one (or set session.remote)"
        )?;
    }
    // After the repository is set up: an agent's configuration that
    // cannot take a hook leaves the repository initialized all the same.
    agent_setup(args, env, store, out, warnings)
}
