//! `git session init`: prepare this repository for sessions.

use std::io::Write;

use super::{CommandError, Env};
use crate::hooks;

/// Prepare this repository for git-session, or undo it with --uninstall.
///
/// Creates the local state directory (under the git common dir, shared by
/// all worktrees, never pushed); installs a post-commit hook that captures
/// the agents' sessions after each commit (between marker lines, keeping
/// any hook content you have, honouring core.hooksPath); and adds glob fetch
/// refspecs to the sessions remote (session.remote, else origin) so a plain
/// `git fetch` also brings session refs. What a plain `git push` sends is
/// not changed, and sessions are pushed only to the remote chosen for them
/// (`git session push --to NAME`). Safe to run again.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remove exactly what init added (hook blocks, fetch refspecs).
    #[arg(long)]
    uninstall: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let dir = store.hooks_dir();
    let remote = crate::config::sessions_remote(&store);
    let hook_error = |e: hooks::HookError| CommandError::failure(e.to_string());
    if args.uninstall {
        for hook in hooks::HOOKS {
            if hooks::uninstall(&dir, hook).map_err(hook_error)? {
                writeln!(
                    out,
                    "Removed the git-session block from {}",
                    dir.join(hook).display()
                )?;
            }
        }
        if store.has_remote(&remote) {
            store.remove_fetch_refspecs(&remote)?;
            writeln!(
                out,
                "Removed the session fetch refspecs from remote {remote}"
            )?;
        }
        return Ok(());
    }
    let created = store.ensure_state_dir()?;
    let verb = if created {
        "Initialized"
    } else {
        "Already initialized"
    };
    writeln!(out, "{verb} git-session in {}", store.state_dir().display())?;
    let binary = std::env::current_exe()
        .map_err(|e| CommandError::failure(format!("cannot locate git-session itself: {e}")))?;
    for hook in hooks::HOOKS {
        if hooks::install(&dir, hook, &binary).map_err(hook_error)? {
            writeln!(
                out,
                "Installed the {hook} hook in {}",
                dir.join(hook).display()
            )?;
        }
    }
    match crate::config::chosen_remote(&store).0 {
        Some(r) => writeln!(
            out,
            "Sessions are pushed only to remote {r} (session.remote)"
        )?,
        None => writeln!(
            out,
            "Sessions are pushed only to a remote you choose: `git session push --to NAME` (recorded as session.remote)"
        )?,
    }
    if store.has_remote(&remote) {
        if store.add_fetch_refspecs(&remote)? > 0 {
            writeln!(
                out,
                "A plain `git fetch {remote}` now also fetches sessions"
            )?;
        }
    } else {
        writeln!(
            out,
            "No remote {remote} yet; run init again after adding one (or set session.remote)"
        )?;
    }
    Ok(())
}
