//! `git session resume`: write a session back for its agent.

use std::io::Write;
use std::path::PathBuf;

use git_session_schema::Agent;

use super::{CommandError, Env, status};
use crate::ops;
use crate::ops::resume::ResumeRequest;

/// Write a session into an agent's own store so the agent resumes it.
///
/// Renders the canonical session in the agent's native format (its files,
/// index entries or database rows, in the agent's own store) with this
/// machine's repository as the working directory, and prints the command
/// that continues it.
/// Never overwrites a native session: one that exists with other content is
/// refused unless --fork writes it under a new id, recorded as a fork.
/// Written for another agent (--agent), the session gets a new native id
/// there; resuming it there again finds that copy, and writes a new one
/// only when the copy and the session have since gone different ways.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// Agent to write for (default: the session's own agent).
    #[arg(long, value_name = "AGENT", value_parser = super::agent_parser())]
    agent: Option<Agent>,
    /// Home directory whose agent store is written (default: $HOME).
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Write under a new native id and record it as a fork of the session.
    #[arg(long)]
    fork: bool,
    /// Print a JSON object instead of text (docs/json.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    let other_home = other_home(env, args.home.as_deref())?;
    let home = env.agent_home(args.home)?;
    let lookup = |name: &str| std::env::var(name).ok();
    let request = ResumeRequest {
        id,
        agent: args.agent,
        home,
        env: &lookup,
        fork: args.fork,
    };
    let progress = super::progress::Progress::start("Writing the session back", args.json);
    let outcome = ops::resume::resume_reporting(&store, &env.clock, &request, &progress);
    progress.finish();
    let outcome = outcome?;
    if outcome.unchanged {
        status(format!(
            "{} session {} is already in place",
            outcome.agent, outcome.native_id
        ));
    } else {
        for path in &outcome.written {
            status(format!("wrote {}", path.display()));
        }
        if let Some(via) = &outcome.via {
            status(format!(
                "wrote {} session {} by {via}",
                outcome.agent, outcome.native_id
            ));
        }
    }
    if outcome.session.as_str() != args.session && args.fork {
        status(format!("recorded as fork {}", outcome.session));
    }
    say_backups(&outcome.backups);
    say_losses(&outcome.losses, "not carried over: ");
    for skipped in &outcome.skipped_rows {
        status(format!("warning: {skipped}"));
    }
    // Said when the session is written; one already in place was.
    if !outcome.unchanged {
        for notice in &outcome.notices {
            status(format!("note: {notice}"));
        }
    }
    let line = continue_line(&outcome.cwd, other_home.as_deref(), &outcome.command);
    if args.json {
        return super::print_json(
            out,
            &serde_json::json!({
                "session": outcome.session,
                "agent": outcome.agent,
                "native_id": outcome.native_id,
                "unchanged": outcome.unchanged,
                "written": outcome.written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "via": outcome.via,
                "backups": paths(&outcome.backups),
                "losses": outcome.losses,
                "warnings": outcome.skipped_rows,
                "notices": outcome.notices,
                "cwd": outcome.cwd.display().to_string(),
                "command": line,
            }),
        );
    }
    status("Continue with:");
    writeln!(out, "{line}")?;
    Ok(())
}

/// Prints a write-back's loss report, each line after `prefix`. Meta
/// events the target has no form for (agent bookkeeping such as Claude's
/// attachments or Codex's token counts, never conversation) are one
/// summary line unless `-v` asks for each; every other loss is listed.
/// `--json` always has every line.
pub(crate) fn say_losses(losses: &[String], prefix: &str) {
    use git_session_adapters::loss::{code_of, seqs_of};
    use git_session_schema::kinds;
    let unmapped = |l: &String, what: &str| code_of(l) == "event-unmapped" && l.contains(what);
    let is_meta = |l: &String| unmapped(l, ": meta (");
    // git-session's own records: they stay in the canonical log, which is
    // where they mean something; no agent has a form for them.
    let own = [
        kinds::HANDOFF,
        kinds::CONTEXT_COMPILED,
        kinds::SESSION_FORK,
        kinds::SESSION_MERGE,
    ];
    let own_kind = |l: &String| {
        own.iter()
            .copied()
            .find(|k| unmapped(l, &format!(": {k} has no ")))
    };
    let verbose = super::ui::is_verbose();
    let mut meta = 0usize;
    let mut ours = 0usize;
    let mut our_kinds: Vec<&str> = Vec::new();
    for loss in losses {
        let count = seqs_of(loss).len().max(1);
        if verbose {
            status(format!("{prefix}{loss}"));
        } else if is_meta(loss) {
            meta += count;
        } else if let Some(kind) = own_kind(loss) {
            ours += count;
            if !our_kinds.contains(&kind) {
                our_kinds.push(kind);
            }
        } else {
            status(format!("{prefix}{loss}"));
        }
    }
    if meta > 0 {
        status(format!(
            "{prefix}{} of agent bookkeeping the target has no form for (-v lists them)",
            super::count(meta as u64, "meta event")
        ));
    }
    if ours > 0 {
        status(format!(
            "{prefix}{} of git-session's own ({}) stay in the session's log only (-v lists them)",
            super::count(ours as u64, "record"),
            our_kinds.join(", ")
        ));
    }
}

/// Says, once per write-back, where the copy of each agent database made
/// before rows went into it is, and how many are kept.
pub(crate) fn say_backups(backups: &[PathBuf]) {
    for b in backups {
        status(format!(
            "database backup: {} (made before writing to it; the last {} of each database are kept, git session doctor lists and prunes them)",
            b.display(),
            crate::native::apply::KEEP_BACKUPS
        ));
    }
}

/// The paths as JSON strings.
pub(crate) fn paths(list: &[PathBuf]) -> Vec<String> {
    list.iter().map(|p| p.display().to_string()).collect()
}

/// Returns the absolute `--home` when it is not `$HOME`: the agent must
/// then be started with `HOME=` it, or it will not find what was written.
pub(crate) fn other_home(
    env: &Env,
    arg: Option<&std::path::Path>,
) -> Result<Option<PathBuf>, CommandError> {
    let Some(arg) = arg else { return Ok(None) };
    let home = env.agent_home(Some(arg.to_owned()))?;
    let current = std::env::var_os("HOME").map(PathBuf::from);
    let same = current.is_some_and(|h| {
        h == home
            || (h.canonicalize().ok().is_some()
                && h.canonicalize().ok() == home.canonicalize().ok())
    });
    Ok((!same).then_some(home))
}

/// Returns the shell line that continues the session: `cd DIR && ` the
/// agent's command, with `HOME=` when the store written is another home's.
pub(crate) fn continue_line(
    cwd: &std::path::Path,
    home: Option<&std::path::Path>,
    command: &str,
) -> String {
    let env = home
        .map(|h| format!("HOME={} ", shell_quote(&h.to_string_lossy())))
        .unwrap_or_default();
    format!(
        "cd {} && {env}{command}",
        shell_quote(&cwd.to_string_lossy())
    )
}

pub(crate) use crate::ops::shell_quote;
