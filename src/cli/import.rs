//! `git session import`: bring sessions into the store.

use std::io::Write;
use std::path::PathBuf;

use git_session_schema::Agent;

use super::{CommandError, Env, count, detail, short, status};
use crate::ops;
use crate::ops::capture::CaptureRequest;

/// Capture the agent sessions that ran in this repository, or import a
/// canonical file.
///
/// Without --canonical, reads each agent's own session store (see
/// `git session doctor` for where each is looked for here), picks
/// the sessions whose working directory is this repository, a subdirectory
/// or a linked worktree (not one inside a nested repository or submodule:
/// a session belongs to the innermost repository holding its directory),
/// and appends what is new since the last capture:
/// one batch commit per changed session. Agent stores are only read. A file
/// whose working directory cannot be found (read as a stream, up to 16 MiB)
/// is named in a warning with the reason. Running
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
    /// Import this canonical interchange file instead (`-` reads stdin).
    #[arg(long, value_name = "FILE")]
    canonical: Option<PathBuf>,
    /// With --canonical: recompute checksums instead of requiring the file's.
    #[arg(long, requires = "canonical")]
    reseal: bool,
    /// Print a JSON object instead of text (docs/json.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    if let Some(file) = &args.canonical {
        // stdin is read once into a temp file: the import reads the header
        // first and may read the events again after a lost race.
        let spool = if file.as_os_str() == "-" {
            let read = |e: std::io::Error| CommandError::failure(format!("cannot read stdin: {e}"));
            let mut tmp = tempfile::NamedTempFile::new().map_err(read)?;
            std::io::copy(&mut std::io::stdin().lock(), &mut tmp).map_err(read)?;
            Some(tmp)
        } else {
            None
        };
        let path = spool.as_ref().map_or(file.as_path(), |t| t.path());
        let s =
            ops::canonical::import(&store, &env.clock, path, args.reseal).map_err(|e| match e {
                ops::OpError::Line {
                    line,
                    message,
                    hint,
                    ..
                } if spool.is_some() => ops::OpError::Line {
                    path: PathBuf::from("<stdin>"),
                    line,
                    message,
                    hint,
                },
                e => e,
            })?;
        match s.commit {
            Some(c) => status(format!(
                "{} session {}: {}, {} already stored (commit {})",
                if s.created { "Created" } else { "Updated" },
                s.id,
                count(s.appended, "new event"),
                s.skipped,
                short(&c)
            )),
            None => status(format!(
                "Session {} is up to date ({})",
                s.id,
                count(s.events, "event")
            )),
        }
        if args.json {
            return super::print_json(
                out,
                &serde_json::json!({
                    "sessions": [{
                        "id": s.id,
                        "created": s.created,
                        "appended": s.appended,
                        "events": s.events,
                        "commit": s.commit.map(|c| c.to_string()),
                    }],
                    "unchanged": u64::from(s.commit.is_none()),
                    "skipped": [],
                }),
            );
        }
        writeln!(out, "{}", s.id)?;
        return Ok(());
    }
    let agents = args.agents;
    let home = env.agent_home(args.home)?;
    let lookup = |name: &str| std::env::var(name).ok();
    let progress = super::progress::Progress::start("Capturing agent sessions", args.json);
    let report = ops::capture::capture_reporting(
        &store,
        &env.clock,
        &CaptureRequest {
            agents,
            home,
            env: &lookup,
            sqlite: Default::default(),
        },
        &progress,
    );
    progress.finish();
    let report = report?;
    if args.json {
        let skipped = |s: &ops::capture::SkippedFile| serde_json::json!({"path": s.path.display().to_string(), "reason": s.reason});
        super::print_json(
            out,
            &serde_json::json!({
                "sessions": report.sessions.iter().map(|s| serde_json::json!({
                    "id": s.id,
                    "agent": s.agent,
                    "created": s.created,
                    "appended": s.appended,
                    "events": s.events,
                    "commit": s.commit.map(|c| c.to_string()),
                })).collect::<Vec<_>>(),
                "unchanged": report.unchanged,
                "skipped": report.skipped.iter().chain(&report.skipped_sources).map(skipped).collect::<Vec<_>>(),
                "missing": report.missing.iter().map(|(a, p)| serde_json::json!({"agent": a, "store": p.display().to_string()})).collect::<Vec<_>>(),
                "queries": report.queries,
            }),
        )?;
        if !report.skipped.is_empty() {
            return Err(CommandError::failure(format!(
                "{} could not be captured",
                count(report.skipped.len() as u64, "native file")
            )));
        }
        return Ok(());
    }
    let nothing = report.sessions.is_empty()
        && report.unchanged == 0
        && report.skipped.is_empty()
        && report.skipped_earlier == 0
        && report.skipped_sources.is_empty();
    if nothing {
        // A first run in a repository no agent has worked in yet: say
        // where we looked and what to do, instead of "0 sessions".
        status("No agent sessions found for this repository yet.");
        for (agent, root) in &report.missing {
            status(format!(
                "  {:<9} {} does not exist",
                agent.as_str(),
                crate::cli::escape(&root.display().to_string())
            ));
        }
        status(format!(
            "Run a coding agent ({}) in this repository, then `git session import` again,",
            git_session_adapters::registry::names().join(", "),
        ));
        status("or import a canonical session file: `git session import --canonical FILE`.");
        return Ok(());
    }
    for (agent, root) in &report.missing {
        detail(format!(
            "no {agent} sessions here: {} does not exist",
            crate::cli::escape(&root.display().to_string())
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
        // Line 0: a warning about a database as a whole, or about a row
        // the message names itself; `:0` would point nowhere.
        let at = if w.line == 0 {
            String::new()
        } else {
            format!(":{}", w.line)
        };
        status(format!(
            "warning: {}{at}: {}",
            crate::cli::escape(&w.path.display().to_string()),
            crate::cli::escape(&w.message)
        ));
    }
    // Columns as wide as the longest id and agent name printed.
    let id_width = report.sessions.iter().map(|s| s.id.as_str().len()).max();
    let agent_width = report.sessions.iter().map(|s| s.agent.as_str().len()).max();
    // The per-session report is a status report too: `-q` prints nothing
    // on success (`--json` is the form for scripts).
    for s in report.sessions.iter().filter(|_| !super::ui::is_quiet()) {
        // A native session a write-back started (resume --fork, handoff)
        // is captured as a fork: say so, not "new 0 events".
        let fork = s
            .created
            .then(|| store.header(&s.id).ok())
            .flatten()
            .and_then(|h| h.lineage);
        let what = match &fork {
            Some(l) => format!(
                "new fork of {} at seq {}, {} of its own",
                crate::cli::escape(l.parent_session.as_str()),
                l.fork_seq,
                count(s.appended, "event")
            ),
            None if s.created => format!("new {}", count(s.appended, "event")),
            None => format!("+ {}", count(s.appended, "event")),
        };
        writeln!(
            out,
            "{:<iw$}  {:<aw$}  {what} ({} in all)",
            s.id.as_str(),
            s.agent.as_str(),
            s.events,
            iw = id_width.unwrap_or(0),
            aw = agent_width.unwrap_or(0),
        )?;
    }
    if report.skipped_earlier > 0 {
        status(format!(
            "{} native files not captured earlier are unchanged (git session doctor lists them with the reason)",
            report.skipped_earlier
        ));
    }
    status(format!(
        "Captured {}; {} unchanged{}",
        count(report.sessions.len() as u64, "session"),
        report.unchanged,
        if report.skipped.is_empty() {
            String::new()
        } else {
            format!("; {} skipped", count(report.skipped.len() as u64, "file"))
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
