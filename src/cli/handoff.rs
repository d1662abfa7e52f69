//! `git session handoff`: continue a session in another agent.

use std::io::Write;
use std::path::PathBuf;

use git_session_schema::Agent;

use super::{CommandError, Env, short, status};
use crate::ops;
use crate::ops::handoff::HandoffRequest;
use crate::sign::KeySource;

/// Hand a session to another agent so it carries on where this one stopped.
///
/// Compiles the session for the target, writes the history (all of it by
/// default; see --history) in the target's native format with the compiled
/// brief as its first message,
/// records the handoff in the session's log, attaches a receipt as a git
/// note (SSH-signed with --key, session.signingKey, or user.signingKey when
/// gpg.format=ssh; unsigned otherwise), and prints the command that
/// continues the session. What the target cannot hold is reported.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// The agent to hand to.
    #[arg(long, value_name = "AGENT", value_parser = super::agent_parser())]
    to: Agent,
    /// A note for the receiving agent, kept in the log and the receipt.
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
    /// Token budget of the compiled brief.
    #[arg(long, default_value_t = git_session_compiler::DEFAULT_BUDGET)]
    budget: usize,
    /// How much of the history the target gets after the brief: `full`
    /// (every event), `tail:N` (the last N messages, tool calls and
    /// results, with the calls of kept results), or `none` (the brief alone
    /// starts the session). What is left out is in the loss report.
    #[arg(long, value_name = "full|tail:N|none", default_value = "full")]
    history: ops::handoff::History,
    /// Home directory whose agent store is written (default: $HOME).
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// SSH key to sign the receipt with (private key file, or a .pub file
    /// whose key is in ssh-agent).
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// External summarizer command (see `git session compile --help`).
    #[arg(long, value_name = "CMD")]
    summarizer_cmd: Option<String>,
    /// Print a JSON object instead of text (docs/json.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    let to = args.to;
    let json = args.json;
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    let other_home = super::resume::other_home(env, args.home.as_deref())?;
    let home = env.agent_home(args.home)?;
    let key_origin = match args.key {
        Some(_) => "--key".to_owned(),
        None => format!(
            "`git config {}`",
            crate::config::signing_key_setting(&store)
        ),
    };
    let key = match args.key {
        Some(k) => Some(KeySource::File(env.cwd.join(k))),
        None => crate::config::signing_key(&store, user_home.as_deref()),
    };
    let lookup = |name: &str| std::env::var(name).ok();
    let request = HandoffRequest {
        id: id.clone(),
        to,
        note: args.note,
        budget: args.budget,
        history: args.history,
        summarizer_cmd: args.summarizer_cmd,
        home,
        env: &lookup,
        key,
        key_origin,
        signer: crate::config::signer(&store),
    };
    let progress = super::progress::Progress::start("Compiling and writing the handoff", json);
    let o = ops::handoff::handoff_reporting(&store, &env.clock, &request, &progress);
    progress.finish();
    let o = o?;
    for path in &o.written {
        status(format!("wrote {}", path.display()));
    }
    if let Some(via) = &o.via {
        status(format!("wrote {} session {} by {via}", o.to, o.native_id));
    }
    status(format!("brief: {} of {} tokens", o.tokens.0, o.tokens.1));
    if o.losses.is_empty() {
        status("loss report: nothing dropped");
    } else {
        // No count: the lines below group events (and all meta events in
        // one line unless -v), so a number of report lines matches nothing
        // the reader sees.
        status("loss report:");
        super::resume::say_losses(&o.losses, "  ");
    }
    super::resume::say_backups(&o.backups);
    for skipped in &o.skipped_rows {
        status(format!("warning: {skipped}"));
    }
    for notice in &o.notices {
        status(format!("note: {notice}"));
    }
    status(format!(
        "Handed {id} to {} as {} (handoff seq {}, commit {}, {} receipt)",
        o.to,
        o.native_id,
        o.handoff_seq,
        short(&o.commit),
        if o.signed { "signed" } else { "unsigned" }
    ));
    let line = super::resume::continue_line(&o.cwd, other_home.as_deref(), &o.command);
    if json {
        return super::print_json(
            out,
            &serde_json::json!({
                "session": id,
                "to": o.to,
                "native_id": o.native_id,
                "handoff_seq": o.handoff_seq,
                "commit": o.commit.to_string(),
                "signed": o.signed,
                "tokens": o.tokens.0,
                "budget": o.tokens.1,
                "written": o.written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "via": o.via,
                "backups": super::resume::paths(&o.backups),
                "losses": o.losses,
                "warnings": o.skipped_rows,
                "notices": o.notices,
                "cwd": o.cwd.display().to_string(),
                "command": line,
            }),
        );
    }
    status("Continue with:");
    writeln!(out, "{line}")?;
    Ok(())
}
