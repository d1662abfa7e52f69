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
/// `git fetch` also brings session refs; and adds `events/*/*/*.jsonl
/// -delta` to the repository's own info/attributes (never committed), so
/// push and gc do not search deltas through event chunks (the first
/// capture adds it too). Every session.packBatches batches (default 100,
/// 0 for never) and before a push, session objects are packed, so loose
/// objects never pile up to git's gc.auto. What a plain `git push` sends is
/// not changed, and sessions are pushed only to the remote chosen for them
/// (`git session push --to NAME`). Safe to run again.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remove exactly what init added (hook blocks, fetch refspecs, the attribute line).
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
        if store.remove_delta_attribute()? {
            writeln!(
                out,
                "Removed the git-session lines from the repository's info/attributes"
            )?;
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
    if store.ensure_delta_attribute()? {
        writeln!(
            out,
            "Added `{}` to the repository's info/attributes (event chunks are stored whole in packs)",
            crate::store::DELTA_ATTRIBUTE
        )?;
    }
    let binary = std::env::current_exe()
        .map_err(|e| CommandError::failure(format!("cannot locate git-session itself: {e}")))?;
    // A hooks folder inside the work tree (core.hooksPath=.husky, say) is
    // committed: it gets no path of this machine, only git-session on PATH.
    let shared = store.worktree_paths().iter().any(|w| dir.starts_with(w))
        && !store
            .state_dir()
            .parent()
            .is_some_and(|common| dir.starts_with(common));
    for hook in hooks::HOOKS {
        if hooks::install(&dir, hook, (!shared).then_some(binary.as_path())).map_err(hook_error)? {
            writeln!(
                out,
                "Installed the {hook} hook in {}{}",
                dir.join(hook).display(),
                if shared {
                    " (a tracked folder: it runs git-session from PATH)"
                } else {
                    ""
                }
            )?;
        }
        if let Err(why) = hooks::reachable(&dir, hook) {
            writeln!(
                out,
                "warning: the {hook} hook never reaches the git-session block: {why}; move the block above that line"
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
                "A plain `git fetch {remote}` now also downloads sessions; `git session fetch` (or sync) verifies them and adds them to `git session list`"
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
