//! `git session status`: what is captured, what is waiting, what is unpushed.

use std::io::Write;
use std::path::PathBuf;

use super::{CommandError, Env, count, escape_line};
use crate::ops;

/// Show per agent what is captured and what is new since the last capture,
/// the sessions with batches the sessions remote lacks, the remote and
/// whether one was chosen for sessions, hook and watch state, and the last
/// hook errors.
///
/// "new" counts the native files (and databases) of this repository whose
/// size or time changed since capture last read them; "unseen" the agent's
/// session files capture has not looked at yet (some may belong to other
/// projects). Unpushed batches are counted against the remote-tracking refs
/// of the chosen remote, as of the last fetch or push. Only file metadata
/// is read from agent stores.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Home directory whose agent stores are looked at (default: $HOME).
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// How many hook log lines to show.
    #[arg(long, default_value_t = 5)]
    lines: usize,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let home = env.agent_home(args.home)?;
    let lookup = |name: &str| std::env::var(name).ok();
    let s = ops::status::status(
        &store,
        &ops::status::StatusRequest {
            home,
            env: &lookup,
            log_lines: args.lines,
        },
    )?;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &s).map_err(std::io::Error::from)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "sessions   {} in this repository", s.sessions)?;
    for a in &s.agents {
        if !a.present {
            writeln!(
                out,
                "agent      {}: no store at {}",
                a.agent,
                a.store.display()
            )?;
            continue;
        }
        writeln!(
            out,
            "agent      {}: {}, {} tracked, {} new since the last capture, {} not looked at yet",
            a.agent,
            count(a.sessions as u64, "session"),
            count(a.tracked as u64, "source"),
            a.changed.len(),
            a.unseen.len()
        )?;
        for p in &a.changed {
            writeln!(out, "  new      {}", escape_line(&p.to_string_lossy()))?;
        }
    }
    if !s
        .agents
        .iter()
        .all(|a| a.changed.is_empty() && a.unseen.is_empty())
    {
        writeln!(
            out,
            "           (git session import captures those of this repository now)"
        )?;
    }
    match &s.remote {
        Some(r) => writeln!(
            out,
            "remote     {} (chosen for sessions{})",
            escape_line(r),
            s.remote_url
                .as_deref()
                .map(|u| format!(", pinned to {}", escape_line(u)))
                .unwrap_or_default()
        )?,
        None => writeln!(
            out,
            "remote     none chosen: sessions are pushed nowhere until `git session push --to NAME` (fetch from {}{})",
            escape_line(&s.fetch_remote),
            if s.fetch_remote_exists {
                ""
            } else {
                ", which does not exist"
            }
        )?,
    }
    let lead_w = s.leads.iter().map(|l| l.session.len()).max().unwrap_or(0);
    for l in &s.leads {
        let key = l
            .key
            .as_deref()
            .map(|k| format!(", receipt signed by {}", escape_line(k)))
            .unwrap_or_default();
        let at = l
            .handoff_seq
            .map(|q| format!(" since the handoff at seq {q}"))
            .unwrap_or_default();
        writeln!(
            out,
            "lead       {:<lead_w$}  led by {}{at}{key}",
            l.session,
            escape_line(&l.owner)
        )?;
        if let Some(why) = &l.unconfirmed {
            writeln!(
                out,
                "  warning  the metadata claims this lead, the log does not confirm it: {}",
                escape_line(why)
            )?;
        }
        for f in &l.foreign {
            writeln!(
                out,
                "  warning  {} appended seq {}..{} but does not lead it ({} does): two agents may both think they lead",
                escape_line(&f.agent),
                f.first,
                f.last,
                escape_line(&l.owner)
            )?;
        }
    }
    if s.unpushed.is_empty() {
        writeln!(out, "unpushed   nothing")?;
    } else {
        let batches: usize = s.unpushed.iter().map(|u| u.batches).sum();
        writeln!(
            out,
            "unpushed   {}, {}",
            count(s.unpushed.len() as u64, "session"),
            count(batches as u64, "batch")
        )?;
        let width = s
            .unpushed
            .iter()
            .map(|u| u.session.len())
            .max()
            .unwrap_or(0);
        for u in &s.unpushed {
            writeln!(
                out,
                "  {:<width$}  {}{}",
                u.session,
                count(u.batches as u64, "batch"),
                if s.remote.is_none() {
                    // No remote to compare with (the remote line says so):
                    // a session fetched from one is not "not on the remote".
                    ""
                } else if u.replaced {
                    " (purged here: git session sync or push replaces the remote's copy)"
                } else if u.diverged {
                    " (diverged from the remote: git session sync forks it)"
                } else if !u.on_remote {
                    " (not on the remote)"
                } else {
                    ""
                }
            )?;
        }
    }
    for h in &s.git_hooks {
        writeln!(
            out,
            "git hook   {}: {}",
            h.hook,
            if h.installed {
                "installed"
            } else {
                "not installed (git session init)"
            }
        )?;
    }
    for h in &s.agent_hooks {
        writeln!(
            out,
            "agent hook {}: {} ({})",
            h.agent,
            if h.installed {
                "installed"
            } else {
                "not installed (git session init --agent-hooks)"
            },
            h.file.display()
        )?;
    }
    match s.watch {
        Some(pid) => writeln!(out, "watch      running (pid {pid})")?,
        None => writeln!(out, "watch      not running (git session watch)")?,
    }
    if s.hook_log.is_empty() {
        writeln!(out, "hook log   no failures recorded")?;
    } else {
        writeln!(out, "hook log   last {} lines:", s.hook_log.len())?;
        for line in &s.hook_log {
            writeln!(out, "  {}", escape_line(line))?;
        }
    }
    Ok(())
}
