//! `git session doctor`: what is set up, and what went wrong lately.

use std::io::Write;

use super::{CommandError, Env, escape_line};
use crate::hooks;
use crate::ops;

/// Show git-session's setup in this repository and recent hook failures.
///
/// Reports the state directory, whether the hooks are installed (and where
/// hooks run from), the sessions remote and its fetch refspecs, how many
/// sessions and captured native files and database sessions there are, the
/// backups write-back made of agent databases (the last few per database),
/// which fetched refs the last fetch quarantined and why, and the last lines
/// of .git/session/hook.log, where hooks record what they could not do.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many log lines to show.
    #[arg(long, default_value_t = 20)]
    lines: usize,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    writeln!(out, "state      {}", store.state_dir().display())?;
    let dir = store.hooks_dir();
    for hook in hooks::HOOKS {
        let state = if hooks::is_installed(&dir, hook) {
            "installed"
        } else {
            "not installed (run git session init)"
        };
        writeln!(out, "hook       {hook}: {state} in {}", dir.display())?;
    }
    let remote = crate::config::sessions_remote(&store);
    if store.has_remote(&remote) {
        writeln!(out, "remote     {remote}")?;
    } else {
        writeln!(
            out,
            "remote     {remote}: not configured (git remote add, or git config session.remote NAME)"
        )?;
    }
    writeln!(out, "sessions   {}", store.session_ids()?.len())?;
    let quarantined = ops::sync::quarantined(&store);
    if quarantined.is_empty() {
        writeln!(out, "quarantine nothing held back by the last fetch")?;
    }
    for (remote, q) in &quarantined {
        writeln!(
            out,
            "quarantine {}: {} (from {}; run git session fetch {} for what to do)",
            escape_line(&q.refname),
            escape_line(&q.reason),
            escape_line(remote),
            escape_line(remote)
        )?;
    }
    for agent in git_session_adapters::registry::ADAPTERS
        .iter()
        .map(|a| a.agent())
    {
        let index = crate::native::cursor::CursorIndex::load(store.state_dir(), agent.as_str());
        let ours = index.files.values().filter(|c| c.session.is_some()).count();
        writeln!(
            out,
            "capture    {agent}: {ours} native files of this repository tracked, {} others skipped",
            index.files.len() - ours
        )?;
        for (db, cursor) in &index.databases {
            let ours = cursor
                .sessions
                .values()
                .filter(|s| s.session.is_some())
                .count();
            writeln!(
                out,
                "capture    {agent}: {db}: {ours} sessions of this repository tracked, {} others skipped",
                cursor.sessions.len() - ours
            )?;
        }
    }
    let backups = crate::native::apply::list_backups(&store.state_dir().join("backups"));
    if backups.is_empty() {
        writeln!(
            out,
            "backups    none (made before write-back changes an agent's database)"
        )?;
    }
    for b in &backups {
        writeln!(
            out,
            "backup     {}: {} ({} bytes)",
            b.database,
            b.path.display(),
            b.size
        )?;
    }
    let recent = ops::hook::recent(store.state_dir(), args.lines);
    if recent.is_empty() {
        writeln!(out, "hook log   no failures recorded")?;
    } else {
        writeln!(
            out,
            "hook log   last {} lines of {}:",
            recent.len(),
            store.state_dir().join(ops::hook::LOG).display()
        )?;
        for line in recent {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(())
}
