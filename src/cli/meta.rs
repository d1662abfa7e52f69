//! `git session tag|note|pin|hide|title`: edit a session's metadata.
//!
//! Every edit is one commit on refs/session-meta/<id>, carried by push,
//! fetch and sync; concurrent edits on two clones merge last-writer-wins
//! (`git session log --meta <id>` shows the history of both).

use std::io::Write;

use git_session_schema::MetaOp;

use super::{CommandError, Env, escape_line, status};
use crate::ops;

/// Add or remove tags of a session; with no tags, print them.
///
/// A tag is 1 to 64 characters without spaces, commas or control characters.
#[derive(Debug, clap::Args)]
pub struct TagArgs {
    /// Session id or unique prefix.
    session: String,
    /// Tags to add.
    tags: Vec<String>,
    /// A tag to remove (repeatable).
    #[arg(long, short = 'd', value_name = "TAG")]
    remove: Vec<String>,
}

/// Add a note to a session; with no text, print its notes.
#[derive(Debug, clap::Args)]
pub struct NoteArgs {
    /// Session id or unique prefix.
    session: String,
    /// The note (at most 4096 bytes).
    text: Option<String>,
    /// Remove every note.
    #[arg(long, conflicts_with = "text")]
    clear: bool,
}

/// Pin a session (`--off` unpins it).
#[derive(Debug, clap::Args)]
pub struct PinArgs {
    /// Session id or unique prefix.
    session: String,
    /// Unpin instead.
    #[arg(long)]
    off: bool,
}

/// Hide a session from `list` (`--off` shows it again; `list --all` shows hidden ones).
#[derive(Debug, clap::Args)]
pub struct HideArgs {
    /// Session id or unique prefix.
    session: String,
    /// Show it again instead.
    #[arg(long)]
    off: bool,
}

/// Set the title `list` and `show` use instead of the derived one; with no
/// title, print it.
#[derive(Debug, clap::Args)]
pub struct TitleArgs {
    /// Session id or unique prefix.
    session: String,
    /// The title (one line, at most 200 characters).
    title: Option<String>,
    /// Remove the title set here (the derived one shows again).
    #[arg(long, conflicts_with = "title")]
    clear: bool,
}

/// Group sessions of any agents under a task (`list --task`, `show --task`).
///
/// A task name is 1 to 64 characters of A-Z a-z 0-9 . _ -; it is part of
/// the session's URI. Sessions a handoff or fork starts from a session in
/// a task are in the task too, the ones started before it was set as well
/// (unless put in another task themselves).
#[derive(Debug, clap::Args)]
pub struct TaskArgs {
    /// The task.
    name: String,
    /// Sessions to put in it (ids or unique prefixes).
    #[arg(required = true)]
    sessions: Vec<String>,
    /// Take the sessions out of the task instead.
    #[arg(long)]
    remove: bool,
}

pub fn task(args: TaskArgs, env: &Env, _out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let ids = args
        .sessions
        .iter()
        .map(|s| store.resolve(s))
        .collect::<Result<Vec<_>, _>>()?;
    let task = (!args.remove).then_some(args.name.as_str());
    let moved = ops::meta::set_task(&store, &env.clock, task, &ids)?;
    status(format!(
        "{} {} task {}",
        super::count(moved.len() as u64, "session"),
        if args.remove { "left" } else { "in" },
        escape_line(&args.name)
    ));
    Ok(())
}

fn apply(env: &Env, session: &str, op: MetaOp) -> Result<git_session_schema::Meta, CommandError> {
    let store = env.store()?;
    let id = store.resolve(session)?;
    let what = git_session_schema::MetaChange {
        time: String::new(),
        op: op.clone(),
    }
    .describe();
    let meta = ops::meta::change(&store, &env.clock, &id, op)?;
    status(format!("{id}: {}", escape_line(&what)));
    Ok(meta)
}

pub fn tag(args: TagArgs, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    if args.tags.is_empty() && args.remove.is_empty() {
        let store = env.store()?;
        let id = store.resolve(&args.session)?;
        for t in ops::meta::get(&store, &id)?.tags {
            writeln!(out, "{}", escape_line(&t))?;
        }
        return Ok(());
    }
    let op = MetaOp::Tag {
        add: args.tags,
        remove: args.remove,
    };
    let meta = apply(env, &args.session, op)?;
    let tags: Vec<String> = meta
        .tags
        .iter()
        .map(|t| escape_line(t).into_owned())
        .collect();
    writeln!(out, "{}", tags.join(" "))?;
    Ok(())
}

pub fn note(args: NoteArgs, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let op = match (args.text, args.clear) {
        (_, true) => MetaOp::NoteClear,
        (Some(text), false) => MetaOp::Note { text },
        (None, false) => {
            let store = env.store()?;
            let id = store.resolve(&args.session)?;
            for n in ops::meta::get(&store, &id)?.notes {
                writeln!(out, "{}  {}", escape_line(&n.time), escape_line(&n.text))?;
            }
            return Ok(());
        }
    };
    apply(env, &args.session, op)?;
    Ok(())
}

pub fn pin(args: PinArgs, env: &Env, _out: &mut dyn Write) -> Result<(), CommandError> {
    apply(env, &args.session, MetaOp::Pin { on: !args.off })?;
    Ok(())
}

pub fn hide(args: HideArgs, env: &Env, _out: &mut dyn Write) -> Result<(), CommandError> {
    apply(env, &args.session, MetaOp::Hide { on: !args.off })?;
    Ok(())
}

pub fn title(args: TitleArgs, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let op = match (args.title, args.clear) {
        (_, true) => MetaOp::Title { title: None },
        (Some(t), false) => MetaOp::Title { title: Some(t) },
        (None, false) => {
            let store = env.store()?;
            let id = store.resolve(&args.session)?;
            if let Some(t) = ops::meta::get(&store, &id)?.title {
                writeln!(out, "{}", escape_line(&t))?;
            }
            return Ok(());
        }
    };
    apply(env, &args.session, op)?;
    Ok(())
}
