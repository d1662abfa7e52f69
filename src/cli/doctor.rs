//! `git session doctor`: what is set up, and what went wrong lately.

use std::io::Write;

use serde_json::json;

use super::{CommandError, Env, escape_line};
use crate::hooks;
use crate::ops;

/// Show git-session's setup in this repository and recent hook failures.
///
/// Reports the state directory, whether the hooks are installed (and where
/// hooks run from), the sessions remote and its fetch refspecs, how many
/// sessions and captured native files and database sessions there are, the
/// native files capture could not tell the repository of (each with why), the
/// backups write-back made of agent databases before changing them (Codex's
/// state_5.sqlite, OpenCode's database: the last few per database are kept,
/// `--prune-backups` deletes all but the newest N), which fetched refs the
/// last fetch quarantined and why, and the last lines of
/// .git/session/hook.log, where hooks record what they could not do.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many log lines to show.
    #[arg(long, default_value_t = 20)]
    lines: usize,
    /// Delete database backups, keeping the newest N of each database
    /// (default 1); 0 deletes them all.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "1")]
    prune_backups: Option<usize>,
    /// Print a JSON object instead of text (docs/json.md).
    #[arg(long)]
    json: bool,
}

/// One hook's state.
struct Hook {
    name: &'static str,
    installed: bool,
    problem: Option<String>,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let dir = store.hooks_dir();
    let hooks: Vec<Hook> = hooks::HOOKS
        .iter()
        .map(|&name| {
            let installed = hooks::is_installed(&dir, name);
            let problem = if installed {
                hooks::reachable(&dir, name).err()
            } else {
                None
            };
            Hook {
                name,
                installed,
                problem,
            }
        })
        .collect();
    let remote = crate::config::sessions_remote(&store);
    let has_remote = store.has_remote(&remote);
    let sessions = store.session_ids()?.len();
    let quarantined = ops::sync::quarantined(&store);
    let backup_dir = store.state_dir().join("backups");
    let pruned = match args.prune_backups {
        Some(keep) => crate::native::apply::prune_backups(&backup_dir, keep).map_err(|e| {
            CommandError::failure(format!("cannot prune {}: {e}", backup_dir.display()))
        })?,
        None => Vec::new(),
    };
    let backups = crate::native::apply::list_backups(&backup_dir);
    let recent = ops::hook::recent(store.state_dir(), args.lines);
    let log_path = store.state_dir().join(ops::hook::LOG);
    let captures: Vec<_> = git_session_adapters::registry::ADAPTERS
        .iter()
        .map(|a| {
            let agent = a.agent();
            let index = crate::native::cursor::CursorIndex::load(store.state_dir(), agent.as_str());
            (agent, index)
        })
        .collect();

    if args.json {
        let capture: Vec<_> = captures
            .iter()
            .map(|(agent, index)| {
                let ours = index.files.values().filter(|c| c.session.is_some()).count();
                let skipped: Vec<_> = index
                    .files
                    .iter()
                    .filter_map(|(path, c)| Some(json!({"path": path, "reason": c.skipped.as_ref()?})))
                    .collect();
                let databases: Vec<_> = index
                    .databases
                    .iter()
                    .map(|(db, cursor)| {
                        let ours = cursor.sessions.values().filter(|s| s.session.is_some()).count();
                        json!({"database": db, "tracked": ours, "others": cursor.sessions.len() - ours})
                    })
                    .collect();
                json!({"agent": agent, "tracked": ours,
                       "others": index.files.len() - ours - skipped.len(),
                       "skipped": skipped, "databases": databases})
            })
            .collect();
        let backup_rows: Vec<_> = backups
            .iter()
            .map(|b| {
                json!({"database": b.database, "path": b.path, "size": b.size,
                       "time": b.modified.duration_since(std::time::UNIX_EPOCH).ok()
                           .map(|d| super::format_time(d.as_secs() as i64))})
            })
            .collect();
        return super::print_json(
            out,
            &json!({
                "state": store.state_dir(),
                "hooks": hooks.iter().map(|h| json!({"hook": h.name, "dir": dir, "installed": h.installed,
                    "reachable": h.installed && h.problem.is_none(), "problem": h.problem})).collect::<Vec<_>>(),
                "remote": {"name": remote, "configured": has_remote},
                "sessions": sessions,
                "quarantined": quarantined.iter().map(|(remote, q)| json!({"remote": remote, "refname": q.refname,
                    "id": q.id, "tip": q.tip, "reason": q.reason, "conflict": q.conflict})).collect::<Vec<_>>(),
                "capture": capture,
                "backups": backup_rows,
                "pruned": pruned,
                "hook_log": {"path": log_path, "lines": recent},
            }),
        );
    }

    writeln!(out, "state      {}", store.state_dir().display())?;
    for h in &hooks {
        let state = match (h.installed, &h.problem) {
            (false, _) => "not installed (run git session init)".to_owned(),
            (true, None) => "installed".to_owned(),
            (true, Some(why)) => {
                format!("installed but never runs: {why} (move the git-session block above it)")
            }
        };
        writeln!(out, "hook       {}: {state} in {}", h.name, dir.display())?;
    }
    if has_remote {
        // As status says it: fetching works, pushing waits for a choice.
        match crate::config::chosen_remote(&store).0 {
            Some(_) => writeln!(
                out,
                "remote     {} (chosen for sessions)",
                escape_line(&remote)
            )?,
            None => writeln!(
                out,
                "remote     {}: sessions are fetched from it, pushed nowhere until `git session push --to NAME`",
                escape_line(&remote)
            )?,
        }
    } else {
        writeln!(
            out,
            "remote     {remote}: not configured (git remote add, or git config session.remote NAME)"
        )?;
    }
    writeln!(out, "sessions   {sessions}")?;
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
    for (agent, index) in &captures {
        let ours = index.files.values().filter(|c| c.session.is_some()).count();
        let unknown: Vec<_> = index
            .files
            .iter()
            .filter_map(|(path, c)| Some((path, c.skipped.as_ref()?)))
            .collect();
        writeln!(
            out,
            "capture    {agent}: {} of this repository tracked, {} of other repositories or empty, {} not captured",
            super::count(ours as u64, "native file"),
            index.files.len() - ours - unknown.len(),
            unknown.len()
        )?;
        for (path, reason) in unknown {
            writeln!(
                out,
                "skipped    {agent}: {}: {}",
                escape_line(path),
                escape_line(reason)
            )?;
        }
        for (db, cursor) in &index.databases {
            let ours = cursor
                .sessions
                .values()
                .filter(|s| s.session.is_some())
                .count();
            writeln!(
                out,
                "capture    {agent}: {}: {} of this repository tracked, {} others skipped",
                escape_line(db),
                super::count(ours as u64, "session"),
                cursor.sessions.len() - ours
            )?;
        }
    }
    for p in &pruned {
        writeln!(out, "pruned     {}", p.display())?;
    }
    if backups.is_empty() {
        writeln!(
            out,
            "backups    none (made before write-back changes an agent's database)"
        )?;
    } else {
        writeln!(
            out,
            "backups    {} in {} ({} bytes; git session doctor --prune-backups keeps only the newest)",
            backups.len(),
            backup_dir.display(),
            backups.iter().map(|b| b.size).sum::<u64>()
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
    if recent.is_empty() {
        writeln!(out, "hook log   no failures recorded")?;
    } else {
        writeln!(
            out,
            "hook log   last {} lines of {}:",
            recent.len(),
            log_path.display()
        )?;
        for line in recent {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(())
}
