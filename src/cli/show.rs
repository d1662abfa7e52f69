//! `git session show`: a session's header and events.

use std::io::Write;

use serde_json::{Value, json};

use super::{CommandError, Env, escape_line, short};

/// Show a session's header and events.
///
/// Text output is one line per event: seq, time, type, actor and a short
/// summary. `--json` prints one JSON object whose "events" are the stored
/// events exactly as written.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    session: String,
    /// Only events in this inclusive seq range: `A..B`, `A..` or `A`.
    #[arg(long, value_name = "A..B", value_parser = parse_range)]
    seq: Option<(u64, Option<u64>)>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
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

/// Returns a one-line preview of an event body.
fn summary(payload: &Value) -> String {
    let call = payload
        .get("name")
        .and_then(Value::as_str)
        .zip(payload.get("arguments").or_else(|| payload.get("input")))
        .map(|(name, args)| format!("{name} {args}"));
    let text = call
        .into_iter()
        .chain(
            [
                "text", "content", "command", "cmd", "name", "path", "summary",
            ]
            .iter()
            .filter_map(|k| payload.get(*k).and_then(Value::as_str).map(str::to_owned)),
        )
        .next();
    let text = text.unwrap_or_else(|| match payload {
        Value::Null => String::new(),
        other => other.to_string(),
    });
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 80 {
        let mut cut: String = flat.chars().take(79).collect();
        cut.push('…');
        cut
    } else {
        flat
    }
}
