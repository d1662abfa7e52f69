//! The loss report: what a render to another agent could not carry, one
//! line per code and cause, naming every seq.
//!
//! Every line is `<code>: <seqs>: <what>` (docs/handoff.md lists the
//! codes). A render adds one loss per source event and field it does not
//! carry ([`Losses::add`]); losses of one code and one description are
//! grouped into one line whose seqs are listed as ranges (`seq 4`, `seqs
//! 3-5, 9 (4 events)`), so a long session gives a short report that still
//! names each event. [`seqs_of`] and [`code_of`] read a line back: the
//! property test (`adapters/tests/loss.rs`) checks with them that every
//! field of every source event a render leaves out is reported.

use std::collections::HashMap;

use git_session_schema::{Event, kinds};
use serde_json::Value;

/// Collects the loss lines of one render, grouped by code and description.
#[derive(Debug, Default)]
pub struct Losses {
    /// Grouped losses, in the order each group first occurred: code, what,
    /// seqs.
    groups: Vec<(&'static str, String, Vec<u64>)>,
    index: HashMap<(&'static str, String), usize>,
    /// Lines formed by the render itself (they name their own seqs, or
    /// concern no event, like an id the target could not use).
    lines: Vec<(usize, String)>,
}

impl Losses {
    /// Notes that the target does not carry `what` of the event at `seq`
    /// (`what` names the event kind and field, e.g. `meta (codex
    /// event_msg.token_count)`, `argument "workdir" of exec_command`).
    pub fn add(&mut self, code: &'static str, seq: u64, what: impl Into<String>) {
        let what = what.into();
        match self.index.get(&(code, what.clone())) {
            Some(&i) => {
                let seqs = &mut self.groups[i].2;
                if seqs.last() != Some(&seq) {
                    seqs.push(seq);
                }
            }
            None => {
                self.index.insert((code, what.clone()), self.groups.len());
                self.groups.push((code, what, vec![seq]));
            }
        }
    }

    /// Adds a line the render formed itself (`<code>: <detail>`).
    pub fn line(&mut self, line: impl Into<String>) {
        self.lines.push((self.groups.len(), line.into()));
    }

    /// Adds a line the render formed itself unless it is there already
    /// (a cause that concerns the session, not one event).
    pub fn once(&mut self, line: impl Into<String>) {
        let line = line.into();
        if !self.lines.iter().any(|(_, l)| *l == line) {
            self.line(line);
        }
    }

    /// Adds every line of `lines` (formed elsewhere, e.g. by
    /// [`crate::tools::Translated::losses`]).
    pub fn extend(&mut self, lines: impl IntoIterator<Item = String>) {
        for l in lines {
            self.line(l);
        }
    }

    /// Says whether nothing was lost.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.lines.is_empty()
    }

    /// Returns the report, one line per group, in order of occurrence.
    pub fn into_lines(self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.groups.len() + self.lines.len());
        let mut own = self.lines.into_iter().peekable();
        for (i, (code, what, seqs)) in self.groups.into_iter().enumerate() {
            while let Some((_, l)) = own.next_if(|(at, _)| *at <= i) {
                out.push(l);
            }
            out.push(group_line(code, &seqs, &what));
        }
        out.extend(own.map(|(_, l)| l));
        out
    }
}

/// Names an event for a loss line: its type and, for a `meta` event, the
/// record it keeps (`meta (codex event_msg.token_count)`, `meta (claude
/// attachment)`), so a report says which kinds were left out.
pub fn what(event: &Event) -> String {
    if event.kind != kinds::META {
        return event.kind.clone();
    }
    let p = &event.payload;
    let name = [event.agent.as_str(), "record_type", "type", "kind"]
        .iter()
        .find_map(|k| p.get(*k).and_then(Value::as_str));
    let sub = p.get("subtype").and_then(Value::as_str);
    match (name, sub) {
        (Some(n), Some(s)) => format!("meta ({} {n}.{s})", event.agent),
        (Some(n), None) => format!("meta ({} {n})", event.agent),
        _ if p.get("unparsed").is_some() => format!("meta ({} unparsed line)", event.agent),
        _ => format!("meta ({})", event.agent),
    }
}

/// Formats one group: `code: seq N: what` or `code: seqs A-B, C (n
/// events): what`.
fn group_line(code: &str, seqs: &[u64], what: &str) -> String {
    match seqs {
        [one] => format!("{code}: seq {one}: {what}"),
        many => format!(
            "{code}: seqs {} ({} events): {what}",
            crate::seq_list(many),
            many.len()
        ),
    }
}

/// Returns a loss line's code: what comes before its first colon.
pub fn code_of(line: &str) -> &str {
    line.split_once(':').map_or(line, |(c, _)| c).trim()
}

/// Returns the seqs a loss line names: after `seq `, `seqs ` or `event `
/// (ranges `A-B` and lists `A, B` included); empty when it names none.
pub fn seqs_of(line: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for (start, end) in seq_spans(line) {
        // A range in a loss line is at most the session long.
        out.extend(start..=end.min(start.saturating_add(1 << 20)));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Rewrites every seq a loss line names with `map` (a render's seqs back
/// to the session's, when the events it was given were renumbered).
pub fn renumber(line: &str, map: impl Fn(u64) -> u64) -> String {
    let mut out = String::with_capacity(line.len());
    let mut at = 0;
    for (from, to) in number_spans(line) {
        out.push_str(&line[at..from]);
        match line[from..to].parse::<u64>() {
            Ok(n) => out.push_str(&map(n).to_string()),
            Err(_) => out.push_str(&line[from..to]),
        }
        at = to;
    }
    out.push_str(&line[at..]);
    out
}

/// Returns the seq ranges (`start`, `end` inclusive) a line names.
fn seq_spans(line: &str) -> Vec<(u64, u64)> {
    let spans = number_spans(line);
    let mut out = Vec::new();
    let mut i = 0;
    while i < spans.len() {
        let (a, b) = spans[i];
        let start: u64 = line[a..b].parse().unwrap_or(0);
        // `A-B`: the next number right after a dash.
        if let Some(&(c, d)) = spans.get(i + 1)
            && c == b + 1
            && line.as_bytes()[b] == b'-'
        {
            out.push((start, line[c..d].parse().unwrap_or(start)));
            i += 2;
        } else {
            out.push((start, start));
            i += 1;
        }
    }
    out
}

/// Returns the byte spans of the numbers a line names as seqs: after the
/// words `seq `, `seqs ` or `event `, and in the list of ranges that
/// follows (`3-5, 9`).
fn number_spans(line: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (at, _) in line.match_indices(['s', 'e']) {
        let rest = &line[at..];
        let Some(word) = ["seqs ", "seq ", "event "]
            .iter()
            .find(|w| rest.starts_with(**w))
        else {
            continue;
        };
        // A word, not the end of another one ("subsequent 3").
        if at > 0 && line[..at].ends_with(|c: char| c.is_alphanumeric()) {
            continue;
        }
        let mut pos = at + word.len();
        loop {
            let digits = line[pos..].bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                break;
            }
            out.push((pos, pos + digits));
            pos += digits;
            let rest = &line[pos..];
            if rest.starts_with('-') && rest[1..].starts_with(|c: char| c.is_ascii_digit()) {
                pos += 1;
            } else if rest.starts_with(", ") && rest[2..].starts_with(|c: char| c.is_ascii_digit())
            {
                pos += 2;
            } else {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_of_one_cause_are_one_line_naming_every_seq() {
        let mut l = Losses::default();
        l.add("event-unmapped", 3, "meta (codex event_msg.token_count)");
        l.add("event-unmapped", 4, "meta (codex event_msg.token_count)");
        l.add("thinking-dropped", 5, "message.thinking text");
        l.line("tool-id-renamed: tool id t was used by two calls");
        l.add("event-unmapped", 9, "meta (codex event_msg.token_count)");
        let lines = l.into_lines();
        assert_eq!(
            lines,
            [
                "event-unmapped: seqs 3-4, 9 (3 events): meta (codex event_msg.token_count)",
                "thinking-dropped: seq 5: message.thinking text",
                "tool-id-renamed: tool id t was used by two calls",
            ]
        );
        assert_eq!(seqs_of(&lines[0]), [3, 4, 9]);
        assert_eq!(code_of(&lines[1]), "thinking-dropped");
    }

    #[test]
    fn seqs_are_read_from_every_form_a_line_names_them_in() {
        assert_eq!(seqs_of("image-omitted: event 7: artifact x"), [7]);
        assert_eq!(seqs_of("argument-dropped: seq 12: a"), [12]);
        assert_eq!(
            seqs_of("subagent-folded: seqs 1-3, 5 (4 events)"),
            [1, 2, 3, 5]
        );
        assert!(seqs_of("uuid-assigned: 2 message line(s)").is_empty());
        assert!(seqs_of("x: subsequent 3").is_empty());
    }

    #[test]
    fn renumbering_rewrites_every_seq_and_nothing_else() {
        let line = "event-unmapped: seqs 3-5, 9 (4 events): meta; event 12: 2 calls";
        assert_eq!(
            renumber(line, |n| n - 1),
            "event-unmapped: seqs 2-4, 8 (4 events): meta; event 11: 2 calls"
        );
        assert_eq!(seqs_of(&renumber(line, |n| n - 1)), [2, 3, 4, 8, 11]);
    }
}
