//! The command line: clap types, one file per subcommand, and the single
//! place where errors become messages and exit codes.
//!
//! Each command parses its arguments, calls into `ops` or the store, and
//! prints. stdout carries data (text, or JSON with `--json`); stderr carries
//! status, warnings and errors. Exit codes: 0 success, 1 failure, 2 usage.

mod append;
mod checkpoint;
mod compile;
mod completions;
mod doctor;
mod error;
mod export;
mod fetch;
mod fork;
mod handoff;
mod hook;
mod import;
mod init;
mod list;
mod log;
mod manual;
mod mcp;
mod merge;
mod meta;
mod progress;
mod purge;
mod push;
mod redact;
mod resume;
mod rm;
mod search;
mod show;
mod status;
mod sync;
mod transcript;
pub mod ui;
mod verify;
mod watch;
mod which;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use error::CommandError;
pub(crate) use which::row as which_row;

use crate::clock::Clock;
use crate::store::Store;

/// Keeps coding-agent sessions as append-only histories inside this git repository.
///
/// Every session is the ref refs/sessions/<id>: one commit per capture batch,
/// forks as branches, synced with ordinary git push and fetch. Session ids may
/// be abbreviated to any unique prefix.
#[derive(Debug, Parser)]
#[command(
    name = "git session",
    bin_name = "git session",
    version,
    max_term_width = 100
)]
pub struct Cli {
    /// Run as if started in this directory.
    #[arg(short = 'C', global = true, value_name = "PATH")]
    directory: Option<PathBuf>,
    /// Color output: auto (on a terminal, unless NO_COLOR or color.ui says not), always, never.
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    color: ui::ColorWhen,
    /// Do not pipe output into a pager.
    #[arg(long, global = true)]
    no_pager: bool,
    /// Print only data and errors, no status lines.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print more detail (repeatable).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Init(init::Args),
    List(list::Args),
    Show(show::Args),
    Log(log::Args),
    Fork(fork::Args),
    Verify(verify::Args),
    Import(import::Args),
    Export(export::Args),
    Append(append::Args),
    Resume(resume::Args),
    Rm(rm::Args),
    Purge(purge::Args),
    Push(push::Args),
    Fetch(fetch::Args),
    Redact(redact::Args),
    Sync(sync::Args),
    Compile(compile::Args),
    Handoff(handoff::Args),
    Which(which::Args),
    Doctor(doctor::Args),
    Status(status::Args),
    Search(search::Args),
    Watch(watch::Args),
    Mcp(mcp::Args),
    InstallMan(manual::Args),
    Completions(completions::Args),
    Checkpoint(checkpoint::Args),
    Merge(merge::Args),
    Tag(meta::TagArgs),
    Note(meta::NoteArgs),
    Pin(meta::PinArgs),
    Hide(meta::HideArgs),
    Title(meta::TitleArgs),
    Task(meta::TaskArgs),
    #[command(hide = true)]
    Hook(hook::Args),
}

/// Holds what every command needs from the process: where it runs and the clock.
pub struct Env {
    cwd: PathBuf,
    clock: Clock,
    ui: ui::Ui,
}

impl Env {
    fn from_process(directory: Option<PathBuf>, ui: ui::Ui) -> Result<Env, CommandError> {
        let cwd = match directory {
            Some(d) => d,
            None => std::env::current_dir().map_err(|e| {
                CommandError::failure(format!("cannot read the current directory: {e}"))
            })?,
        };
        let clock = match std::env::var("GIT_SESSION_TIMESTAMP") {
            Ok(text) => Clock::fixed(parse_timestamp(&text).ok_or_else(|| {
                CommandError::failure(format!(
                    "GIT_SESSION_TIMESTAMP={text:?} is neither RFC 3339 nor seconds since the epoch"
                ))
            })?),
            Err(_) => Clock::system(),
        };
        Ok(Env { cwd, clock, ui })
    }

    /// Returns the home directory whose agent stores are used: `--home`
    /// (relative to where the command runs), else `$HOME`. Agents record
    /// absolute paths, so the result is absolute.
    pub fn agent_home(&self, arg: Option<PathBuf>) -> Result<PathBuf, CommandError> {
        match arg.or_else(|| std::env::var_os("HOME").map(PathBuf::from)) {
            Some(h) => Ok(self.cwd.join(h)),
            None => Err(CommandError::usage("HOME is not set").hint("pass --home DIR")),
        }
    }

    /// Opens the repository the command runs in; with a signing key
    /// configured (and `session.signCommits` not false), every session
    /// commit it writes is SSH-signed as `git commit -S` would sign it.
    pub fn store(&self) -> Result<Store, CommandError> {
        let mut store = Store::discover(&self.cwd)?;
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if crate::config::sign_commits(&store)
            && let Some(key) = crate::config::signing_key(&store, home.as_deref())
        {
            store.set_commit_signer(Box::new(move |bytes: &[u8]| {
                crate::sign::sign_in(&key, crate::sign::GIT_NAMESPACE, bytes)
                    .map_err(|e| e.to_string())
            }));
        }
        store.set_keys(crate::config::encryption_keys(&store, home.as_deref()));
        // A handoff that was killed is completed or rolled back first.
        for line in crate::ops::handoff::pending::recover(&store, &self.clock) {
            status(format!("warning: {line}"));
        }
        Ok(store)
    }
}

fn parse_timestamp(text: &str) -> Option<jiff::Timestamp> {
    text.parse::<jiff::Timestamp>().ok().or_else(|| {
        text.parse::<i64>()
            .ok()
            .and_then(|s| jiff::Timestamp::from_second(s).ok())
    })
}

/// Returns every manual page as (file name, roff text), generated from the
/// command definitions (docs/man/, `install-man`).
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    manual::pages()
}

/// Returns the clap definition of the command line (for the man page).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    // Hook entry points exit 0 whatever happens, bad arguments included:
    // agents and git read other exit codes as "block".
    let is_hook = std::env::args().nth(1).as_deref() == Some("hook");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(_) if is_hook => return ExitCode::SUCCESS,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
            let args: Vec<String> = std::env::args().skip(1).collect();
            return manual::help(&args, &e);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    // Not locked for the whole run: `mcp` writes protocol messages from
    // tokio's stdout on another thread, which a lock held here would block
    // for ever (each write still takes the lock, and stdout stays
    // line-buffered).
    let mut out = std::io::stdout();
    ui::set_verbosity(cli.quiet, cli.verbose);
    let ui = ui::Ui {
        color: cli.color,
        no_pager: cli.no_pager,
    };
    let result =
        Env::from_process(cli.directory, ui).and_then(|env| run(cli.command, &env, &mut out));
    let result = result.and_then(|()| out.flush().map_err(CommandError::from));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) if is_hook => ExitCode::SUCCESS,
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            e.print(&mut std::io::stderr().lock());
            ExitCode::from(e.exit_code())
        }
    }
}

fn run(command: Command, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    match command {
        Command::Init(args) => init::run(args, env, out),
        Command::List(args) => list::run(args, env, out),
        Command::Show(args) => show::run(args, env, out),
        Command::Log(args) => log::run(args, env, out),
        Command::Fork(args) => fork::run(args, env, out),
        Command::Verify(args) => verify::run(args, env, out),
        Command::Import(args) => import::run(args, env, out),
        Command::Export(args) => export::run(args, env, out),
        Command::Append(args) => append::run(args, env, out),
        Command::Redact(args) => redact::run(args, env, out),
        Command::Resume(args) => resume::run(args, env, out),
        Command::Rm(args) => rm::run(args, env, out),
        Command::Purge(args) => purge::run(args, env, out),
        Command::Push(args) => push::run(args, env, out),
        Command::Fetch(args) => fetch::run(args, env, out),
        Command::Sync(args) => sync::run(args, env, out),
        Command::Compile(args) => compile::run(args, env, out),
        Command::Handoff(args) => handoff::run(args, env, out),
        Command::Which(args) => which::run(args, env, out),
        Command::Doctor(args) => doctor::run(args, env, out),
        Command::Status(args) => status::run(args, env, out),
        Command::Search(args) => search::run(args, env, out),
        Command::Watch(args) => watch::run(args, env, out),
        Command::Mcp(args) => mcp::run(args, env, out),
        Command::InstallMan(args) => manual::run(args, env, out),
        Command::Completions(args) => completions::run(args, env, out),
        Command::Checkpoint(args) => checkpoint::run(args, env, out),
        Command::Merge(args) => merge::run(args, env, out),
        Command::Tag(args) => meta::tag(args, env, out),
        Command::Note(args) => meta::note(args, env, out),
        Command::Pin(args) => meta::pin(args, env, out),
        Command::Hide(args) => meta::hide(args, env, out),
        Command::Title(args) => meta::title(args, env, out),
        Command::Task(args) => meta::task(args, env, out),
        Command::Hook(args) => {
            hook::run(args, env, out);
            Ok(())
        }
    }
}

/// Prints a status line on stderr (not data, so never on stdout); `-q`
/// silences it.
///
/// Control characters other than newline and tab are escaped: messages
/// carry paths and names from agent stores, which are untrusted.
pub(crate) fn status(message: impl std::fmt::Display) {
    if ui::is_quiet() {
        return;
    }
    let text = message.to_string();
    let safe: String = if text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        text.chars()
            .map(|c| {
                if c.is_control() && c != '\n' && c != '\t' {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect()
    } else {
        text
    };
    let _ = writeln!(std::io::stderr().lock(), "{safe}");
}

/// Writes `value` as pretty JSON and a newline: the `--json` output of a
/// command (shapes in docs/json.md).
pub(crate) fn print_json(
    out: &mut dyn Write,
    value: &serde_json::Value,
) -> Result<(), CommandError> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

/// Prints a detail line on stderr, only with `-v`.
pub(crate) fn detail(message: impl std::fmt::Display) {
    if ui::is_verbose() {
        let _ = writeln!(std::io::stderr().lock(), "{message}");
    }
}

/// Returns `n` and the noun, plural unless `n` is 1: "1 event", "2 events".
pub(crate) fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else if let Some(stem) = noun.strip_suffix('y') {
        format!("{n} {stem}ies")
    } else if noun.ends_with("ch") || noun.ends_with('s') {
        format!("{n} {noun}es")
    } else {
        format!("{n} {noun}s")
    }
}

/// Returns `text` safe to print on one terminal line: control characters
/// (C0 including `\r`, `\n` and ESC, DEL, C1) and bidirectional overrides
/// become `\u{..}`-style escapes, so agent-authored text cannot move the
/// cursor, retitle the terminal or forge a line of output.
pub(crate) fn escape_line(text: &str) -> std::borrow::Cow<'_, str> {
    escape(text)
}

/// [`escape_line`] by its short name.
pub(crate) fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char =
        |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Formats seconds since the epoch as RFC 3339 UTC.
pub(crate) fn format_time(seconds: i64) -> String {
    jiff::Timestamp::from_second(seconds)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| seconds.to_string())
}

/// Returns the first `n` characters of an object id.
pub(crate) fn short(id: &gix::ObjectId) -> String {
    id.to_hex_with_len(12).to_string()
}

/// Parses an `AGENT` argument (`--agent`, `--to`, `--for`): one of the
/// agents in the adapter registry, so an unknown name is a usage error
/// that lists the accepted ones, the same for every command.
pub(crate) fn agent_parser()
-> impl clap::builder::TypedValueParser<Value = git_session_schema::Agent> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(git_session_adapters::registry::names())
        .map(|name| git_session_schema::Agent::parse(&name))
}
