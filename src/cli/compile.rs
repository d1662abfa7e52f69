//! `git session compile`: a session's context for another agent.

use std::io::Write;
use std::path::PathBuf;

use git_session_compiler::{Format, Request};
use git_session_schema::Agent;

use super::{CommandError, Env, count, status};
use crate::ops;
use crate::ops::compile::CompileRequest;

/// Compile a session into a token-budgeted context for an agent.
///
/// Keeps the current task, open todos, decisions and blockers verbatim,
/// then recent edits, commands and constraints, then excerpts of the
/// conversation, each citing the seqs it came from, until the budget
/// (counted with the target's tokenizer) is used. What was left out is
/// reported. The text treats the earlier session as data, not instructions.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// The agent the context is for.
    #[arg(long = "for", value_name = "AGENT", value_parser = super::agent_parser())]
    target: Agent,
    /// Token budget.
    #[arg(long, default_value_t = git_session_compiler::DEFAULT_BUDGET)]
    budget: usize,
    /// Output: md (handoff brief), json, agents-md (AGENTS.md / CLAUDE.md
    /// style file), first-message (the first message of a native session).
    #[arg(long, default_value = "md", value_parser = ["md", "json", "agents-md", "first-message"])]
    format: String,
    /// Write to this file instead of stdout (`-` is stdout).
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
    /// Shell command that summarizes the conversation excerpts: reads a
    /// JSON request on stdin, prints {"summaries": [{"text", "seqs"}]};
    /// if it fails, the built-in extractive summary is used.
    #[arg(long, value_name = "CMD")]
    summarizer_cmd: Option<String>,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    let format = match args.format.as_str() {
        "md" => Format::Brief,
        "json" => Format::Json,
        "agents-md" => Format::ContextFile,
        _ => Format::FirstMessage,
    };
    let request = CompileRequest {
        id,
        request: Request {
            target: args.target,
            budget: args.budget,
            format,
            git: Default::default(),
            tokenizer: None,
        },
        summarizer_cmd: args.summarizer_cmd,
    };
    let (_, _, compiled) = ops::compile::compile(&store, &request)?;
    for warning in &compiled.warnings {
        status(format!("warning: {warning}"));
    }
    // The same count the text's "Left out for space" line gives; events
    // never made into context (meta, reasoning) are not "left out".
    status(format!(
        "{} tokens of {} ({}), {}, {} left out for space",
        compiled.tokens,
        compiled.budget,
        compiled.tokenizer.name(),
        count(compiled.items.len() as u64, "item"),
        compiled.omitted
    ));
    match args.out.as_ref().filter(|p| p.as_os_str() != "-") {
        Some(path) => std::fs::write(path, &compiled.text)
            .map_err(|e| CommandError::failure(format!("{}: {e}", path.display())))?,
        None => out.write_all(compiled.text.as_bytes())?,
    }
    Ok(())
}
