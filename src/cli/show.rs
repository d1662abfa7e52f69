//! `git session show`: a session's header and events.

use std::io::Write;

use git_session_schema::Event;
use serde_json::{Value, json};

use super::{CommandError, Env, escape_line, short};

/// Show a session's header and events.
///
/// Text output is one line per event: seq, time, type, actor and a short
/// summary (a tool call's command, a tool result's command and the head of
/// its output). `--tree` prints the events as the conversation tree their
/// parent links make (a Pi session where the user went back and branched
/// shows every branch; the active leaf, the last event, is marked). `meta` events (agent bookkeeping: token counts, settings,
/// attachments) are hidden unless `--all` or `--type meta` asks for them.
/// On a terminal the text goes through git's pager (`GIT_PAGER`,
/// `core.pager`, `PAGER`, else `less`; `--no-pager` prints directly).
/// `--json` prints one JSON object whose "events" are the stored events
/// exactly as written: all of them in the range, or those `--type` picks.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    #[arg(required_unless_present = "task")]
    session: Option<String>,
    /// Instead of one session, the timeline of a task (`git session
    /// task`): its sessions of every agent, each followed by those handed
    /// off or forked from it.
    #[arg(long, value_name = "NAME", conflicts_with = "session")]
    task: Option<String>,
    /// Only events in this inclusive seq range: `A..B`, `A..` or `A`.
    #[arg(long, value_name = "A..B", value_parser = parse_range)]
    seq: Option<(u64, Option<u64>)>,
    /// Only events of this type (repeatable): a type (`tool.call`) or a
    /// namespace (`tool`, `message`).
    #[arg(long = "type", short = 't', value_name = "TYPE")]
    types: Vec<String>,
    /// Show meta events too.
    #[arg(long, short = 'a')]
    all: bool,
    /// Print JSON instead of text (docs/json.md).
    #[arg(long, conflicts_with = "tree")]
    json: bool,
    /// Print the events as a tree by their parent links, every branch
    /// indented under the event it branches from.
    #[arg(long)]
    tree: bool,
}

/// Returns whether an event type is picked by `--type` values (a type or
/// its dotted namespace); no values pick every type.
fn type_matches(types: &[String], kind: &str) -> bool {
    types.is_empty()
        || types.iter().any(|t| {
            kind == t
                || kind
                    .strip_prefix(t.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
        })
}

/// How many of the types a session holds a `--type` that picks nothing
/// lists.
const TYPES_LISTED: usize = 24;

fn parse_range(text: &str) -> Result<(u64, Option<u64>), String> {
    let bad = || format!("{text:?} is not a seq range like 10..20, 10.. or 10");
    let (a, b) = match text.split_once("..") {
        Some((a, b)) => (a, Some(b)),
        None => (text, None),
    };
    let from = if a.is_empty() {
        0
    } else {
        a.parse().map_err(|_| bad())?
    };
    let to = match b {
        None => Some(from),
        Some("") => None,
        Some(b) => Some(b.parse().map_err(|_| bad())?),
    };
    if to.is_some_and(|t| t < from) {
        return Err(bad());
    }
    Ok((from, to))
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    if let Some(task) = &args.task {
        return task_timeline(&store, task, args.json, out);
    }
    let id = store.resolve(args.session.as_deref().unwrap_or_default())?;
    let stat = store.stat(&id)?;
    let (from, to) = args.seq.unwrap_or((0, None));
    let lines = store.lines(&id, from, to)?;
    let h = &stat.header;
    if args.json {
        let task = store.meta(&id).ok().and_then(|m| m.task);
        let head = json!({
            "uri": crate::ops::list::session_uri(&store, &id, task.as_deref()),
            "header": h,
            "events_total": stat.events,
            "tip": stat.tip.to_string(),
            "code_commit": stat.code_commit.map(|c| c.to_string()),
        });
        let mut text = serde_json::to_string(&head).map_err(std::io::Error::from)?;
        text.pop();
        write!(out, "{text},\"events\":[")?;
        let mut first = true;
        for line in lines {
            let line = line?;
            if !args.types.is_empty() {
                let kind = line.decode().map(|e| e.kind).unwrap_or_default();
                if !type_matches(&args.types, &kind) {
                    continue;
                }
            }
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            out.write_all(&line.bytes)?;
        }
        writeln!(out, "]}}")?;
        return Ok(());
    }
    let mut pager = env.ui.pager(&store);
    let result = match pager.as_mut() {
        Some(p) => print_text(&args, &store, &id, &stat, lines, p.writer()),
        None => print_text(&args, &store, &id, &stat, lines, out),
    };
    if let Some(p) = pager {
        p.finish();
    }
    result
}

fn print_text(
    args: &Args,
    store: &crate::store::Store,
    id: &git_session_schema::SessionId,
    stat: &crate::store::SessionStat,
    lines: crate::store::LineIter<'_>,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    let h = &stat.header;
    // Read the events first (the range only, one chunk at a time) so
    // the header can say how many are hidden.
    let show_meta = args.all || args.types.iter().any(|t| t == "meta");
    let mut shown = Vec::new();
    let mut hidden = 0u64;
    let mut calls = Calls::default();
    // The types met, for a `--type` that picks nothing (a misspelt type
    // would otherwise print an empty session). Bounded: a session may
    // hold any number of distinct types.
    let mut types_met = std::collections::BTreeSet::new();
    // `--tree` reads the events after the header, in `tree`.
    let (lines, tree_lines) = if args.tree {
        (None, Some(lines))
    } else {
        (Some(lines), None)
    };
    for line in lines.into_iter().flatten() {
        let line = line?;
        let event = line.decode().map_err(|e| {
            CommandError::failure(format!(
                "seq {}: stored event does not parse: {e}",
                line.seq
            ))
        })?;
        calls.note(&event);
        if !type_matches(&args.types, &event.kind) {
            if types_met.len() < TYPES_LISTED && event.kind != "meta" {
                types_met.insert(event.kind);
            }
            continue;
        }
        if event.kind == "meta" && !show_meta {
            hidden += 1;
            continue;
        }
        shown.push([
            event.seq.to_string(),
            escape_line(&event.ts).into_owned(),
            escape_line(event.kind.as_str()).into_owned(),
            escape_line(event.actor.as_str()).into_owned(),
            escape_line(&summary(&event, &calls)).into_owned(),
        ]);
    }
    // Columns as wide as their widest cell (times differ in precision:
    // OpenCode's milliseconds lose trailing zeros; `agent:opencode` is
    // longer than the usual actor), at least the usual widths.
    let width = |i: usize, min: usize, gap: usize| {
        shown
            .iter()
            .map(|r| r[i].chars().count() + gap)
            .max()
            .unwrap_or(0)
            .max(min)
    };
    let (ts_w, kind_w, actor_w) = (width(1, 0, 0), width(2, 18, 1), width(3, 14, 2));
    let shown: Vec<String> = shown
        .into_iter()
        .map(|[seq, ts, kind, actor, text]| {
            format!("{seq:>6}  {ts:<ts_w$}  {kind:<kind_w$} {actor:<actor_w$} {text}")
        })
        .collect();
    writeln!(out, "session  {id}")?;
    if h.id != *id {
        writeln!(
            out,
            "warning  the header names session {}: not this session",
            escape_line(h.id.as_str())
        )?;
    }
    let task = store.meta(id).ok().and_then(|m| m.task);
    writeln!(
        out,
        "uri      {}",
        escape_line(&crate::ops::list::session_uri(store, id, task.as_deref()))
    )?;
    writeln!(out, "agent    {}", escape_line(h.agent.as_str()))?;
    if let Some(n) = &h.native_id {
        writeln!(out, "native   {}", escape_line(n))?;
    }
    if let Some(t) = &h.title {
        writeln!(out, "title    {}", escape_line(t))?;
    }
    if let Some(c) = &h.cwd {
        writeln!(out, "cwd      {}", escape_line(c))?;
    }
    writeln!(out, "created  {}", escape_line(&h.created))?;
    // The range asked for, as the hidden count only covers it.
    let range = match args.seq {
        Some((a, Some(z))) if a == z => format!("seq {a}: "),
        Some((a, Some(z))) => format!("seq {a}..{z}: "),
        Some((a, None)) => format!("seq {a}..: "),
        None => String::new(),
    };
    if hidden > 0 {
        writeln!(
            out,
            "events   {} ({range}{} hidden: --all shows them)",
            stat.events,
            super::count(hidden, "meta event")
        )?;
    } else {
        writeln!(out, "events   {}", stat.events)?;
    }
    // The code commits the batches were captured at (HEAD at capture).
    let mut commits: Vec<(gix::ObjectId, (u64, u64))> = Vec::new();
    for b in store.batches(id)?.iter().rev() {
        if let (Some(c), Some((a, z))) = (b.trailers.code_commit, b.trailers.seq) {
            match commits.last_mut() {
                Some((last, range)) if *last == c => range.1 = z,
                _ => commits.push((c, (a, z))),
            }
        }
    }
    if !commits.is_empty() {
        let shown: Vec<String> = commits
            .iter()
            .take(8)
            .map(|(c, (a, z))| format!("{} (seq {a}..{z})", short(c)))
            .collect();
        let more = commits.len().saturating_sub(8);
        let tail = if more > 0 {
            format!(", and {more} more (git session log)")
        } else {
            String::new()
        };
        writeln!(out, "commits  {}{tail}", shown.join(", "))?;
    }
    if let Some(l) = &h.lineage {
        let commit = gix::ObjectId::from_hex(l.parent_commit.as_bytes())
            .map(|c| short(&c))
            .unwrap_or_else(|_| escape_line(&l.parent_commit).into_owned());
        writeln!(
            out,
            "forked   from {} at seq {} (commit {commit})",
            escape_line(l.parent_session.as_str()),
            l.fork_seq
        )?;
    }
    writeln!(out)?;
    if let Some(lines) = tree_lines {
        return tree(lines, out);
    }
    if shown.is_empty() && hidden > 0 {
        // Say so rather than print a header alone (Claude Code writes
        // long runs of meta records between turns).
        writeln!(
            out,
            "({range}only meta events; --all shows them, --type message the conversation)",
        )?;
    } else if shown.is_empty() && !args.types.is_empty() {
        let asked: Vec<_> = args.types.iter().map(|t| escape_line(t)).collect();
        let met: Vec<_> = types_met.iter().map(|t| escape_line(t)).collect();
        let has = match met.len() {
            0 => String::new(),
            TYPES_LISTED => format!("; this session has {}, …", met.join(", ")),
            _ => format!("; this session has {}", met.join(", ")),
        };
        writeln!(out, "({range}no events of type {}{has})", asked.join(", "))?;
    }
    for line in shown {
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// Remembers the command of recent tool calls, so a result (which names
/// only its call) can show what ran. Bounded: a session with millions of
/// calls keeps the last [`Calls::KEEP`].
#[derive(Default)]
pub(super) struct Calls {
    recent: std::collections::VecDeque<(String, String)>,
}

impl Calls {
    const KEEP: usize = 256;

    pub(super) fn note(&mut self, event: &Event) {
        if event.kind != "tool.call" {
            return;
        }
        let p = &event.payload;
        let Some(id) = p
            .get("call_id")
            .or_else(|| p.get("tool_use_id"))
            .and_then(Value::as_str)
        else {
            return;
        };
        if self.recent.len() == Self::KEEP {
            self.recent.pop_front();
        }
        self.recent.push_back((id.to_owned(), call_text(p)));
    }

    pub(super) fn get(&self, id: &str) -> Option<&str> {
        self.recent
            .iter()
            .rev()
            .find(|(c, _)| c == id)
            .map(|(_, t)| t.as_str())
    }
}

/// Returns a tool call as `name: command` when its arguments carry a
/// command (`cmd`, `command`, as a string or argv), as `name: text` on one
/// line when its input is free text (Codex's code-mode `exec` takes a
/// JavaScript program; the commands it ran are its `command.run` events),
/// else `name {args}`.
pub(super) fn call_text(p: &Value) -> String {
    let name = p.get("name").and_then(Value::as_str).unwrap_or("tool");
    let args = p.get("arguments").or_else(|| p.get("input"));
    match args.and_then(command_of) {
        Some(cmd) => format!("{name}: {cmd}"),
        None => match args {
            Some(Value::String(text)) => {
                format!(
                    "{name}: {}",
                    text.split_whitespace().collect::<Vec<_>>().join(" ")
                )
            }
            Some(a) => format!("{name} {a}"),
            None => name.to_owned(),
        },
    }
}

fn command_of(v: &Value) -> Option<String> {
    let c = v.get("cmd").or_else(|| v.get("command"))?;
    match c {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
}

/// Returns the text of a tool output: a string, or the text blocks of a
/// content array.
pub(super) fn output_text(p: &Value) -> Option<String> {
    let v = p.get("output").or_else(|| p.get("content"))?;
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => Some(
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// Returns a one-line preview of an event.
pub(super) fn summary(event: &Event, calls: &Calls) -> String {
    let payload = &event.payload;
    let text = match event.kind.as_str() {
        "tool.call" => Some(call_text(payload)),
        "tool.result" => {
            let call = payload
                .get("call_id")
                .or_else(|| payload.get("tool_use_id"))
                .and_then(Value::as_str)
                .and_then(|id| calls.get(id))
                .map(str::to_owned)
                .or_else(|| {
                    payload
                        .get("name")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                });
            let head = output_text(payload).map(|o| git_session_adapters::tools::output_head(&o));
            let error = payload.get("is_error").and_then(Value::as_bool) == Some(true);
            let parts: Vec<String> = [call, head.filter(|h| !h.is_empty())]
                .into_iter()
                .flatten()
                .collect();
            let joined = parts.join(" → ");
            Some(if error {
                format!("error: {joined}")
            } else {
                joined
            })
        }
        "session.start" => payload.get("cwd").and_then(Value::as_str).map(|cwd| {
            let version = ["cli_version", "version"]
                .iter()
                .find_map(|k| payload.get(*k).and_then(Value::as_str));
            match version {
                Some(v) => format!("in {cwd} (version {v})"),
                None => format!("in {cwd}"),
            }
        }),
        "command.run" => {
            command_of(payload).map(|c| match payload.get("exit_code").and_then(Value::as_i64) {
                Some(code) => format!("{c} (exit {code})"),
                None => c,
            })
        }
        // A snapshot of the working state (`git session checkpoint`).
        "checkpoint" if payload.get("tree").is_some() => {
            let tree = payload.get("tree").and_then(Value::as_str).unwrap_or("");
            let files = payload
                .get("files_changed")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let message = payload
                .get("message")
                .and_then(Value::as_str)
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            Some(format!(
                "tree {}, {} changed{message} (git session checkpoint --restore <id> {})",
                tree.chars().take(12).collect::<String>(),
                super::count(files, "file"),
                event.seq
            ))
        }
        _ => None,
    };
    let text = text.or_else(|| {
        [
            "text", "content", "command", "cmd", "output", "name", "path", "summary", "title",
        ]
        .iter()
        .find_map(|k| payload.get(*k).and_then(Value::as_str).map(str::to_owned))
    });
    // A kept native record (`meta`) is named by its type.
    let text = text.or_else(|| {
        payload.get("record_type").and_then(Value::as_str).map(|t| {
            match payload.get("role").and_then(Value::as_str) {
                Some(role) => format!("{t} ({role})"),
                None => t.to_owned(),
            }
        })
    });
    let text = text.unwrap_or_else(|| match payload {
        Value::Null => String::new(),
        Value::Object(m) => {
            // Without the agent's own record, which can be long.
            let shown: serde_json::Map<String, Value> = m
                .iter()
                .filter(|(k, _)| !git_session_adapters::registry::is_native_key(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Value::Object(shown).to_string()
        }
        other => other.to_string(),
    });
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 100 {
        let mut cut: String = flat.chars().take(99).collect();
        cut.push('…');
        cut
    } else {
        flat
    }
}

/// Prints the events as the tree their `parent_seq` links make.
///
/// A run of single children stays at one indentation, like a transcript;
/// where an event has several children, each branch is drawn under it.
/// Events derived from a tool call and its result (`derived_from`) restate
/// it and are left out. Holds one short line per event, never the events.
fn tree(lines: crate::store::LineIter<'_>, out: &mut dyn Write) -> Result<(), CommandError> {
    let mut labels: Vec<(u64, String)> = Vec::new();
    let mut children: std::collections::HashMap<u64, Vec<u64>> = Default::default();
    let mut roots = Vec::new();
    let mut calls = Calls::default();
    for line in lines {
        let line = line?;
        let event = line.decode().map_err(|e| {
            CommandError::failure(format!(
                "seq {}: stored event does not parse: {e}",
                line.seq
            ))
        })?;
        calls.note(&event);
        if event.payload.get("derived_from").is_some() {
            continue;
        }
        let label = format!(
            "{:>6}  {:<18} {}",
            event.seq,
            escape_line(event.kind.as_str()),
            escape_line(&summary(&event, &calls))
        );
        labels.push((event.seq, label));
        match event.parent_seq {
            // A parent outside the range shown (or left out) makes a root.
            Some(p) if p < event.seq && labels.binary_search_by_key(&p, |(s, _)| *s).is_ok() => {
                children.entry(p).or_default().push(event.seq)
            }
            _ => roots.push(event.seq),
        }
    }
    let leaf = labels.last().map(|(s, _)| *s);
    // Depth-first, iteratively (a long session is one deep chain): each
    // stack entry is an event and the prefix its line is drawn with.
    let mut stack: Vec<(u64, String, String)> = roots
        .iter()
        .rev()
        .map(|&r| (r, String::new(), String::new()))
        .collect();
    while let Some((seq, first, rest)) = stack.pop() {
        let label = labels
            .binary_search_by_key(&seq, |(s, _)| *s)
            .map(|i| labels[i].1.as_str())
            .unwrap_or("");
        let mark = if Some(seq) == leaf {
            "  <- active leaf"
        } else {
            ""
        };
        writeln!(out, "{first}{label}{mark}")?;
        match children.get(&seq).map(Vec::as_slice) {
            None | Some([]) => {}
            Some([only]) => stack.push((*only, rest.clone(), rest)),
            Some(many) => {
                for (i, c) in many.iter().enumerate().rev() {
                    let last = i + 1 == many.len();
                    let (head, tail) = if last { ("`- ", "   ") } else { ("|- ", "|  ") };
                    stack.push((*c, format!("{rest}{head}"), format!("{rest}{tail}")));
                }
            }
        }
    }
    Ok(())
}

/// Prints a task's sessions in timeline order: created, agent, who leads,
/// id, events and title.
fn task_timeline(
    store: &crate::store::Store,
    task: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    let rows = crate::ops::list::task_timeline(store, task)?;
    if json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|(id, s)| {
                let h = &s.stat.header;
                json!({
                    "id": id,
                    "agent": h.agent,
                    "owner": s.meta.lead(h.agent.as_str()),
                    "created": h.created,
                    "events": s.stat.events,
                    "title": s.title,
                    "parent": h.lineage.as_ref().map(|l| &l.parent_session),
                })
            })
            .collect();
        return super::print_json(out, &json!({"task": task, "sessions": rows}));
    }
    if rows.is_empty() {
        super::status(format!("No session is in task {}.", escape_line(task)));
        return Ok(());
    }
    writeln!(out, "task     {}", escape_line(task))?;
    for (id, s) in &rows {
        let h = &s.stat.header;
        let from = h
            .lineage
            .as_ref()
            .map(|l| format!("  (from {})", escape_line(l.parent_session.as_str())))
            .unwrap_or_default();
        writeln!(
            out,
            "{}  {:<8} {}  {}  {}{from}",
            escape_line(&h.created),
            escape_line(h.agent.as_str()),
            id,
            super::count(s.stat.events, "event"),
            escape_line(s.title.as_deref().unwrap_or(""))
        )?;
    }
    Ok(())
}
