//! `git session import`: bring sessions into the store.

use std::io::Write;
use std::path::PathBuf;

use git_session_schema::Agent;

use super::{CommandError, Env, short, status};
use crate::ops;
use crate::ops::capture::CaptureRequest;

/// Capture the agent sessions that ran in this repository, or import a
/// canonical file.
///
/// Without --canonical, reads each agent's own session store (see
/// `git session doctor` for where each is looked for here), picks
/// the sessions whose working directory is this repository, a subdirectory
/// or a linked worktree, and appends what is new since the last capture:
/// one batch commit per changed session. Agent stores are only read. Running
/// it again with nothing new writes nothing.
///
/// With --canonical FILE, imports what `git session export --canonical`
/// wrote: the whole file is one batch, a bad line aborts it naming
/// file:line, and importing it again is a no-op.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only capture these agents (repeatable).
    #[arg(long = "agent", value_name = "AGENT", conflicts_with = "canonical", value_parser = super::agent_parser())]
    agents: Vec<Agent>,
    /// Home directory whose agent stores are read (default: $HOME).
    #[arg(long, value_name = "DIR", conflicts_with = "canonical")]
    home: Option<PathBuf>,
    /// Import this canonical interchange file instead.
    #[arg(long, value_name = "FILE")]
    canonical: Option<PathBuf>,
    /// With --canonical: recompute checksums instead of requiring the file's.
    #[arg(long, requires = "canonical")]
    reseal: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    if let Some(file) = &args.canonical {
        let s = ops::canonical::import(&store, &env.clock, file, args.reseal)?;
        match s.commit {
            Some(c) => status(format!(
                "{} session {}: {} new events, {} already stored (commit {})",
                if s.created { "Created" } else { "Updated" },
                s.id,
                s.appended,
                s.skipped,
                short(&c)
            )),
            None => status(format!(
                "Session {} is up to date ({} events)",
                s.id, s.events
            )),
        }
        writeln!(out, "{}", s.id)?;
        return Ok(());
    }
    let agents = args.agents;
    let home = env.agent_home(args.home)?;
    let lookup = |name: &str| std::env::var(name).ok();
    let report = ops::capture::capture(
        &store,
        &env.clock,
        &CaptureRequest {
            agents,
            home,
            env: &lookup,
            sqlite: Default::default(),
        },
    )?;
    for (agent, root) in &report.missing {
        status(format!(
            "no {agent} sessions here: {} does not exist",
            root.display()
        ));
    }
    for s in &report.skipped_sources {
        status(format!(
            "warning: skipped {}: {}",
            crate::cli::escape(&s.path.display().to_string()),
            crate::cli::escape(&s.reason)
        ));
    }
    for w in &report.warnings {
        status(format!(
            "warning: {}:{}: {}",
            crate::cli::escape(&w.path.display().to_string()),
            w.line,
            crate::cli::escape(&w.message)
        ));
    }
    for s in &report.sessions {
        let verb = if s.created { "new" } else { "+" };
        writeln!(
            out,
            "{}  {:<7} {verb} {} events ({} in all)",
            s.id,
            s.agent.as_str(),
            s.appended,
            s.events
        )?;
    }
    status(format!(
        "Captured {} sessions; {} unchanged{}",
        report.sessions.len(),
        report.unchanged,
        if report.skipped.is_empty() {
            String::new()
        } else {
            format!("; {} files skipped", report.skipped.len())
        }
    ));
    if let Some(first) = report.skipped.first() {
        for s in &report.skipped {
            status(format!("skipped {}: {}", s.path.display(), s.reason));
        }
        return Err(CommandError::failure(format!(
            "{} native files could not be captured (first: {})",
            report.skipped.len(),
            first.path.display()
        ))
        .hint(
            "the other sessions were captured; fix or remove the files above and run import again",
        ));
    }
    Ok(())
}
