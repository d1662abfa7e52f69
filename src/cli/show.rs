//! `git session show`: a session's header and events.

use std::io::Write;

use serde_json::{Value, json};

use super::{CommandError, Env, escape_line, short};

/// Show a session's header and events.
///
/// Text output is one line per event: seq, time, type, actor and a short
/// summary. `--tree` prints the events as the conversation tree their
/// parent links make (a Pi session where the user went back and branched
/// shows every branch; the active leaf, the last event, is marked).
/// `--json` prints one JSON object whose "events" are the stored events
/// exactly as written.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// Only events in this inclusive seq range: `A..B`, `A..` or `A`.
    #[arg(long, value_name = "A..B", value_parser = parse_range)]
    seq: Option<(u64, Option<u64>)>,
    /// Print JSON instead of text.
    #[arg(long, conflicts_with = "tree")]
    json: bool,
    /// Print the events as a tree by their parent links, every branch
    /// indented under the event it branches from.
    #[arg(long)]
    tree: bool,
}

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
    let id = store.resolve(&args.session)?;
    let stat = store.stat(&id)?;
    let (from, to) = args.seq.unwrap_or((0, None));
    let lines = store.lines(&id, from, to)?;
    let h = &stat.header;
    if args.json {
        let head = json!({
            "header": h,
            "events_total": stat.events,
            "tip": stat.tip.to_string(),
            "code_commit": stat.code_commit.map(|c| c.to_string()),
        });
        let mut text = serde_json::to_string(&head).map_err(std::io::Error::from)?;
        text.pop();
        write!(out, "{text},\"events\":[")?;
        for (i, line) in lines.enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(&line?.bytes)?;
        }
        writeln!(out, "]}}")?;
        return Ok(());
    }
    writeln!(out, "session  {id}")?;
    if h.id != id {
        writeln!(
            out,
            "warning  the header names session {}: not this session",
            escape_line(h.id.as_str())
        )?;
    }
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
    writeln!(out, "events   {}", stat.events)?;
    // The code commits the batches were captured at (HEAD at capture).
    let mut commits: Vec<(gix::ObjectId, (u64, u64))> = Vec::new();
    for b in store.batches(&id)?.iter().rev() {
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
    if args.tree {
        return tree(lines, out);
    }
    for line in lines {
        let line = line?;
        let event = line.decode().map_err(|e| {
            CommandError::failure(format!(
                "seq {}: stored event does not parse: {e}",
                line.seq
            ))
        })?;
        writeln!(
            out,
            "{:>6}  {}  {:<18} {:<14} {}",
            event.seq,
            escape_line(&event.ts),
            escape_line(event.kind.as_str()),
            escape_line(event.actor.as_str()),
            escape_line(&summary(&event.payload))
        )?;
    }
    Ok(())
}

/// Payload keys under which adapters keep an agent's own record.
const NATIVE_KEYS: [&str; 3] = [
    git_session_adapters::claude::NATIVE_KEY,
    git_session_adapters::pi::NATIVE_KEY,
    git_session_adapters::codex::NATIVE_KEY,
];

/// Returns a one-line preview of an event body.
fn summary(payload: &Value) -> String {
    let call = payload
        .get("name")
        .and_then(Value::as_str)
        .zip(payload.get("arguments").or_else(|| payload.get("input")))
        .map(|(name, args)| format!("{name} {args}"));
    // A kept native record (`meta`) is named by its type.
    let record = payload.get("record_type").and_then(Value::as_str).map(|t| {
        match payload.get("role").and_then(Value::as_str) {
            Some(role) => format!("{t} ({role})"),
            None => t.to_owned(),
        }
    });
    let text = call
        .into_iter()
        .chain(
            [
                "text", "content", "command", "cmd", "output", "name", "path", "summary", "title",
            ]
            .iter()
            .filter_map(|k| payload.get(*k).and_then(Value::as_str).map(str::to_owned)),
        )
        .chain(record)
        .next();
    let text = text.unwrap_or_else(|| match payload {
        Value::Null => String::new(),
        Value::Object(m) => {
            // Without the agent's own record, which can be long.
            let shown: serde_json::Map<String, Value> = m
                .iter()
                .filter(|(k, _)| !NATIVE_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Value::Object(shown).to_string()
        }
        other => other.to_string(),
    });
    let flat: String = escape_controls(&text.split_whitespace().collect::<Vec<_>>().join(" "));
    if flat.chars().count() > 80 {
        let mut cut: String = flat.chars().take(79).collect();
        cut.push('…');
        cut
    } else {
        flat
    }
}

/// Returns `text` with control characters (terminal escapes included)
/// written as `\u{..}` escapes: agent-authored text is untrusted.
fn escape_controls(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
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
    for line in lines {
        let line = line?;
        let event = line.decode().map_err(|e| {
            CommandError::failure(format!(
                "seq {}: stored event does not parse: {e}",
                line.seq
            ))
        })?;
        if event.payload.get("derived_from").is_some() {
            continue;
        }
        let label = format!(
            "{:>6}  {:<18} {}",
            event.seq,
            event.kind,
            summary(&event.payload)
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
