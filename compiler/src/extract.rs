//! Turns canonical events into candidate items, before any budgeting.
//!
//! Reads only the canonical payload fields (`text`, `command`/`cmd`,
//! `exit_code`, `output_tail`, `path`, `diff`, todo `content`/`status`,
//! ...), never the adapters' native extras (`payload.claude`,
//! `payload.native`). Payloads are read forgivingly: a missing or oddly
//! typed field makes a poorer item, never an error, because captured
//! sessions from many agents and versions differ in what they fill in.
//!
//! This module does not count tokens or decide what fits; `budget.rs` does.

use std::collections::{BTreeMap, HashMap};

use git_session_schema::{Event, kinds};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::GitFacts;
use crate::item::{DropReason, Dropped, Item, ItemKind, Priority};
use crate::render::flat;

/// How many failing commands become P0 blockers; older unresolved failures
/// stay P1 commands, so a long session of failed `grep`s cannot flood P0.
const MAX_BLOCKERS: usize = 3;
/// Lines of output kept for a blocker, a failed command, a passing one.
const BLOCKER_TAIL_LINES: usize = 30;
const FAILED_TAIL_LINES: usize = 12;
const OK_TAIL_LINES: usize = 4;
/// Lines of the latest diff kept per edited file.
const DIFF_LINES: usize = 40;
/// Characters of a compaction summary kept (it is itself a summary).
const COMPACTION_CHARS: usize = 4000;
/// Lines of caller-provided git status and recent files kept.
const GIT_LINES: usize = 60;
/// Characters of one message handed to an external summarizer.
const EXCERPT_INPUT_CHARS: usize = 4000;

/// Holds one conversation message offered to the P2 summarizer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Excerpt {
    /// The message's event.
    pub seq: u64,
    /// `user` or `assistant`.
    pub role: String,
    /// The message text (at most 4000 characters; longer text is cut).
    pub text: String,
}

/// Holds everything the budget step chooses from.
#[derive(Debug, Default)]
pub(crate) struct Candidates {
    /// Must-keep items, in output order.
    pub p0: Vec<Item>,
    /// Items in the order the budget should consider them.
    pub p1: Vec<Item>,
    /// Conversation messages, oldest first (the latest user request is P0).
    pub excerpts: Vec<Excerpt>,
    /// Events never made into items, grouped by type.
    pub dropped: Vec<Dropped>,
    /// A title found in the events (`session.title`), if the header has none.
    pub title: Option<String>,
}

/// Returns the candidates for `events`, plus `git` facts when given.
pub(crate) fn candidates(events: &[Event], git: &GitFacts) -> Candidates {
    let mut out = Candidates::default();
    let mut unused: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut empty: Vec<u64> = Vec::new();
    let mut todos = Folded::default();
    let mut commands = Folded::default();
    let mut files = Folded::default();
    let mut constraints = Folded::default();
    let mut decisions = Vec::new();
    let mut compactions: Vec<(u64, String)> = Vec::new();
    let mut user_msgs: Vec<(u64, String)> = Vec::new();
    let mut checkpoints: Vec<Item> = Vec::new();
    let mut merged: Vec<Item> = Vec::new();

    for e in events {
        let p = &e.payload;
        // A sub-agent's turns (Claude's inline sidechain records) are not
        // the user's requests nor the main line's replies: the spawning
        // call's result carries what the sub-agent found.
        if p.get("sidechain").is_some_and(truthy)
            && matches!(
                e.kind.as_str(),
                kinds::MESSAGE_USER | kinds::MESSAGE_ASSISTANT
            )
        {
            unused
                .entry(format!("{} (sub-agent)", e.kind))
                .or_default()
                .push(e.seq);
            continue;
        }
        match e.kind.as_str() {
            kinds::MESSAGE_USER => {
                let Some(text) = message_text(p) else {
                    empty.push(e.seq);
                    continue;
                };
                // A compaction summary arrives as a "user" message written by
                // the system: it is history, not the user's intent. Other
                // system-written or harness-wrapped "user" text (slash
                // command echoes, caveats) is neither.
                if p.get("compact_summary").is_some_and(truthy) {
                    // Prefer a bare summary if the adapter extracted one
                    // from the harness's wrapping text.
                    let summary = str_of(p, &["summary"]).map_or(text, str::to_owned);
                    compactions.push((e.seq, summary));
                } else if !is_user(&e.actor) || is_harness_text(&text) {
                    unused
                        .entry(format!("{} (harness text)", e.kind))
                        .or_default()
                        .push(e.seq);
                } else {
                    user_msgs.push((e.seq, text));
                }
            }
            kinds::MESSAGE_ASSISTANT => match message_text(p) {
                Some(text) => out.excerpts.push(Excerpt {
                    seq: e.seq,
                    role: "assistant".into(),
                    text: cut_chars(&text, EXCERPT_INPUT_CHARS),
                }),
                None => empty.push(e.seq),
            },
            // Another session's result merged back (`git session merge`).
            kinds::SESSION_MERGE => match str_of(p, &["summary"]) {
                Some(summary) => merged.push(Item {
                    priority: Priority::P0,
                    kind: ItemKind::Merged,
                    label: format!(
                        "session {} ({}) merged back: its events {}..{} at commit {}",
                        flat(str_of(p, &["session"]).unwrap_or("?"), 200),
                        flat(str_of(p, &["agent"]).unwrap_or("?"), 40),
                        p.get("since_seq").and_then(Value::as_u64).unwrap_or(0),
                        p.get("last_seq").and_then(Value::as_u64).unwrap_or(0),
                        flat(str_of(p, &["tip"]).unwrap_or("?"), 12),
                    ),
                    body: Some(summary.to_owned()),
                    seqs: vec![e.seq],
                }),
                None => empty.push(e.seq),
            },
            // A snapshot `git session checkpoint` made: cited with its tree.
            kinds::CHECKPOINT if str_of(p, &["tree"]).is_some() => {
                checkpoints.push(checkpoint_item(e.seq, p));
            }
            kinds::CHECKPOINT => match str_of(p, &["summary"]) {
                Some(summary) => compactions.push((e.seq, summary.to_owned())),
                None => unused.entry(e.kind.clone()).or_default().push(e.seq),
            },
            kinds::TODO_ADD | kinds::TODO_UPDATE => {
                // Keyed by id when there is one, else by its text; an
                // update may carry only the id and the new status.
                let content = str_of(p, &["content", "text", "title", "subject", "step"]);
                let Some(key) = str_of(p, &["id", "todo_id"]).or(content) else {
                    empty.push(e.seq);
                    continue;
                };
                let status = str_of(p, &["status", "state"]).unwrap_or("pending");
                let todo = todos.entry(key.to_owned(), e.seq);
                if let Some(c) = content {
                    todo.label = c.to_owned();
                } else if todo.label.is_empty() {
                    todo.label = key.to_owned();
                }
                todo.status = status.to_owned();
            }
            kinds::DECISION => match decision_text(p) {
                // The first line is the conclusion; reasons and
                // alternatives, or a multi-line decision, follow as body.
                Some(text) => decisions.push(Item {
                    priority: Priority::P0,
                    kind: ItemKind::Decision,
                    label: first_line(&text),
                    body: text.split_once('\n').map(|(_, rest)| rest.to_owned()),
                    seqs: vec![e.seq],
                }),
                None => empty.push(e.seq),
            },
            kinds::COMMAND_RUN => {
                let Some(cmd) = command_text(p) else {
                    empty.push(e.seq);
                    continue;
                };
                let run = commands.entry(flat(&cmd, 400), e.seq);
                run.label = cmd;
                run.failed = failed(p);
                run.exit_code = p.get("exit_code").and_then(Value::as_i64);
                run.body = str_of(
                    p,
                    &[
                        "output_tail",
                        "output",
                        "stdout_tail",
                        "stderr_tail",
                        "stderr",
                        "stdout",
                    ],
                )
                .unwrap_or("")
                .to_owned();
            }
            kinds::FILE_EDIT => {
                let Some(path) = str_of(p, &["path", "file_path", "file"]) else {
                    empty.push(e.seq);
                    continue;
                };
                let file = files.entry(path.to_owned(), e.seq);
                file.label = path.to_owned();
                if let Some(diff) = str_of(p, &["diff", "patch"]) {
                    let (add, del) = diff_stat(diff);
                    file.added += add;
                    file.removed += del;
                    file.body = diff.to_owned();
                } else {
                    file.body.clear();
                }
            }
            kinds::MEMORY_WRITE => match str_of(p, &["text", "content", "value", "memory"]) {
                Some(text) => {
                    let entry = constraints.entry(flat(text, 1000), e.seq);
                    entry.label = text.to_owned();
                }
                None => empty.push(e.seq),
            },
            "session.title" => {
                if let Some(t) = str_of(p, &["title"]) {
                    out.title = Some(t.to_owned());
                }
                unused.entry(e.kind.clone()).or_default().push(e.seq);
            }
            other => unused.entry(other.to_owned()).or_default().push(e.seq),
        }
    }

    // P0: the latest user request, verbatim.
    if let Some((seq, text)) = user_msgs.pop() {
        out.p0.push(Item {
            priority: Priority::P0,
            kind: ItemKind::Task,
            label: "Latest user request".into(),
            body: Some(text),
            seqs: vec![seq],
        });
    }
    // Earlier user messages are conversation (P2), and their rule-like
    // sentences are constraints (P1).
    for (seq, text) in &user_msgs {
        for sentence in constraint_sentences(text) {
            let entry = constraints.entry(sentence.clone(), *seq);
            entry.label = sentence;
        }
        out.excerpts.push(Excerpt {
            seq: *seq,
            role: "user".into(),
            text: cut_chars(text, EXCERPT_INPUT_CHARS),
        });
    }
    out.excerpts.sort_by_key(|x| x.seq);

    // Blockers: commands whose latest run failed, newest first.
    let mut cmds = commands.into_vec();
    cmds.sort_by_key(|c| std::cmp::Reverse(c.latest()));
    let mut blockers = 0;
    let mut p1: Vec<(u8, Item)> = Vec::new();
    for c in cmds {
        let runs = c.seqs.len();
        let status = match (c.exit_code, c.failed) {
            (Some(code), _) => format!("exit {code}"),
            (None, true) => "failed".to_owned(),
            (None, false) => "ok".to_owned(),
        };
        let times = if runs > 1 {
            format!(", ran {runs} times")
        } else {
            String::new()
        };
        let label = format!("`{}` ({status}{times})", flat(&c.label, 400));
        if c.failed && blockers < MAX_BLOCKERS {
            blockers += 1;
            out.p0.push(Item {
                priority: Priority::P0,
                kind: ItemKind::Blocker,
                label,
                body: nonempty(last_lines(&c.body, BLOCKER_TAIL_LINES)),
                seqs: c.seqs,
            });
        } else {
            let lines = if c.failed {
                FAILED_TAIL_LINES
            } else {
                OK_TAIL_LINES
            };
            let tier = if c.failed { 1 } else { 2 };
            let item = Item {
                priority: Priority::P1,
                kind: ItemKind::Command,
                label,
                body: nonempty(last_lines(&c.body, lines)),
                seqs: c.seqs,
            };
            p1.push((tier, item));
        }
    }

    // Todos: open ones are P0 in the order they appeared, done ones P1.
    for t in todos.into_vec() {
        let done = matches!(
            t.status.as_str(),
            "completed" | "done" | "cancelled" | "canceled" | "removed" | "deleted"
        );
        let label = format!("[{}] {}", flat(&t.status, 40), t.label);
        if done {
            let item = Item {
                priority: Priority::P1,
                kind: ItemKind::DoneTodo,
                label,
                body: None,
                seqs: t.seqs,
            };
            p1.push((2, item));
        } else {
            out.p0.push(Item {
                priority: Priority::P0,
                kind: ItemKind::Todo,
                label,
                body: None,
                seqs: t.seqs,
            });
        }
    }
    out.p0.extend(decisions);
    out.p0.extend(merged);

    // P1: working tree first, then constraints and failures, then the rest,
    // each tier newest first.
    if let Some(item) = git_item(git) {
        p1.push((0, item));
    }
    // The latest checkpoint is the state to go back to; earlier ones follow.
    for (i, item) in checkpoints.into_iter().rev().enumerate() {
        p1.push((if i == 0 { 1 } else { 2 }, item));
    }
    for c in constraints.into_vec() {
        let item = Item {
            priority: Priority::P1,
            kind: ItemKind::Constraint,
            label: c.label,
            body: None,
            seqs: c.seqs,
        };
        p1.push((1, item));
    }
    if let Some((seq, text)) = compactions.pop() {
        let item = Item {
            priority: Priority::P1,
            kind: ItemKind::CompactionSummary,
            label: "Summary written when the session's context was compacted".into(),
            body: Some(cut_chars(&text, COMPACTION_CHARS)),
            seqs: vec![seq],
        };
        p1.push((1, item));
        if !compactions.is_empty() {
            out.dropped.push(Dropped {
                what: ItemKind::CompactionSummary.name().into(),
                priority: Some(Priority::P1),
                reason: DropReason::Superseded,
                label: None,
                seqs: compactions.iter().map(|(s, _)| *s).collect(),
            });
        }
    }
    for f in files.into_vec() {
        let edits = f.seqs.len();
        let label = format!(
            "{} ({edits} edit{}, +{} -{})",
            flat(&f.label, 400),
            if edits == 1 { "" } else { "s" },
            f.added,
            f.removed
        );
        let item = Item {
            priority: Priority::P1,
            kind: ItemKind::FileEdit,
            label,
            body: nonempty(first_lines(&f.body, DIFF_LINES)),
            seqs: f.seqs,
        };
        p1.push((2, item));
    }
    // Sort is stable and keyed on everything that differs, so equal input
    // always gives the same order.
    p1.sort_by(|(ta, a), (tb, b)| {
        ta.cmp(tb)
            .then(b.latest_seq().cmp(&a.latest_seq()))
            .then(a.kind.cmp(&b.kind))
            .then(a.label.cmp(&b.label))
    });
    out.p1 = p1.into_iter().map(|(_, item)| item).collect();

    if !empty.is_empty() {
        empty.sort_unstable();
        out.dropped.push(Dropped {
            what: "no text".into(),
            priority: None,
            reason: DropReason::Empty,
            label: None,
            seqs: empty,
        });
    }
    for (kind, seqs) in unused {
        out.dropped.push(Dropped {
            what: kind,
            priority: None,
            reason: DropReason::NotContext,
            label: None,
            seqs,
        });
    }
    out
}

/// Holds one thing folded from several events: a todo, a command, a file.
#[derive(Debug, Default)]
struct Fold {
    label: String,
    body: String,
    status: String,
    failed: bool,
    exit_code: Option<i64>,
    added: usize,
    removed: usize,
    seqs: Vec<u64>,
}

impl Fold {
    fn latest(&self) -> u64 {
        self.seqs.last().copied().unwrap_or(0)
    }
}

/// Keeps folds by key in first-seen order.
#[derive(Debug, Default)]
struct Folded {
    index: HashMap<String, usize>,
    items: Vec<Fold>,
}

impl Folded {
    fn entry(&mut self, key: String, seq: u64) -> &mut Fold {
        let next = self.items.len();
        let i = *self.index.entry(key).or_insert(next);
        if i == next {
            self.items.push(Fold::default());
        }
        let fold = &mut self.items[i];
        fold.seqs.push(seq);
        fold
    }

    fn into_vec(self) -> Vec<Fold> {
        self.items
    }
}

fn git_item(git: &GitFacts) -> Option<Item> {
    if git.status.is_empty() && git.recent_files.is_empty() && git.branch.is_none() {
        return None;
    }
    let mut label = String::from("Working tree now");
    if let Some(b) = &git.branch {
        label.push_str(&format!(" (branch {}", flat(b, 200)));
        if let Some(h) = &git.head {
            label.push_str(&format!(" at {}", flat(h, 64)));
        }
        label.push(')');
    }
    let mut body = String::new();
    let mut section = |title: &str, lines: &[String]| {
        if lines.is_empty() {
            return;
        }
        body.push_str(title);
        body.push('\n');
        for l in lines.iter().take(GIT_LINES) {
            body.push_str(l);
            body.push('\n');
        }
        if lines.len() > GIT_LINES {
            body.push_str(&format!("… {} more\n", lines.len() - GIT_LINES));
        }
    };
    section("status:", &git.status);
    section("recently changed:", &git.recent_files);
    Some(Item {
        priority: Priority::P1,
        kind: ItemKind::GitState,
        label,
        body: nonempty(body.trim_end().to_owned()),
        seqs: Vec::new(),
    })
}

fn is_user(actor: &str) -> bool {
    actor == "user" || actor.starts_with("user:")
}

/// Says whether a "user" message is text the agent's harness wrote in the
/// user's name: Claude Code's slash-command echoes, caveats and
/// interruption notes, Codex's environment and instruction blocks. Such
/// text is not a request.
fn is_harness_text(text: &str) -> bool {
    const WRAPPERS: [&str; 8] = [
        "[Request interrupted by user",
        "<command-name>",
        "<command-message>",
        "<local-command-stdout>",
        "<local-command-stderr>",
        "<local-command-caveat>",
        "<environment_context>",
        "<user_instructions>",
    ];
    let t = text.trim_start();
    WRAPPERS.iter().any(|w| t.starts_with(w))
}

fn truthy(v: &Value) -> bool {
    !matches!(v, Value::Null | Value::Bool(false))
}

/// Returns the first non-blank string among `keys`.
fn str_of<'a>(p: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .filter_map(|k| p.get(*k).and_then(Value::as_str))
        .find(|s| !s.trim().is_empty())
}

/// Returns a message's text: `text`, or `content` as a string or as an
/// array of `{text}` blocks.
fn message_text(p: &Value) -> Option<String> {
    if let Some(t) = str_of(p, &["text", "content"]) {
        return Some(t.to_owned());
    }
    let blocks = p.get("content")?.as_array()?;
    let text: Vec<&str> = blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    let text = text.join("\n");
    (!text.trim().is_empty()).then_some(text)
}

fn decision_text(p: &Value) -> Option<String> {
    let mut text = str_of(p, &["text", "decision", "conclusion", "summary", "title"])?.to_owned();
    for key in ["reasons", "reason", "rationale"] {
        if let Some(r) = list_of(p.get(key)) {
            text.push_str("\nBecause: ");
            text.push_str(&r);
            break;
        }
    }
    if let Some(alt) = list_of(p.get("alternatives")) {
        text.push_str("\nAlternatives considered: ");
        text.push_str(&alt);
    }
    Some(text)
}

/// Returns a string, or an array of strings joined by "; ".
fn list_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Array(a) => {
            let parts: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        _ => None,
    }
}

fn command_text(p: &Value) -> Option<String> {
    if let Some(c) = str_of(p, &["command", "cmd"]) {
        return Some(c.to_owned());
    }
    let argv: Vec<&str> = p
        .get("argv")
        .or_else(|| p.get("command"))?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    (!argv.is_empty()).then(|| argv.join(" "))
}

fn failed(p: &Value) -> bool {
    if let Some(code) = p.get("exit_code").and_then(Value::as_i64) {
        return code != 0;
    }
    p.get("is_error").and_then(Value::as_bool).unwrap_or(false)
        || matches!(
            p.get("status").and_then(Value::as_str),
            Some("failed" | "error" | "errored")
        )
}

/// Counts added and removed lines of a unified diff.
fn diff_stat(diff: &str) -> (usize, usize) {
    let mut add = 0;
    let mut del = 0;
    for l in diff.lines() {
        if l.starts_with('+') && !l.starts_with("+++") {
            add += 1;
        } else if l.starts_with('-') && !l.starts_with("---") {
            del += 1;
        }
    }
    (add, del)
}

/// Returns the sentences of a user message that read like standing rules.
///
/// A keyword heuristic: deterministic and cheap, it catches "never push to
/// main" or "不要修改 schema" and sometimes a false positive, which costs a
/// line of P1 budget at worst.
fn constraint_sentences(text: &str) -> Vec<String> {
    const MARKERS: [&str; 16] = [
        " must ",
        " must not ",
        " never ",
        " always ",
        " don't ",
        " do not ",
        " avoid ",
        " make sure ",
        " should not ",
        " shouldn't ",
        " only use ",
        "不要",
        "必须",
        "禁止",
        "务必",
        "不能",
    ];
    let mut out = Vec::new();
    for line in text.lines() {
        for sentence in sentences(line) {
            let s = sentence.trim();
            let n = s.chars().count();
            if !(8..=300).contains(&n) {
                continue;
            }
            let probe = format!(" {} ", s.to_lowercase());
            if MARKERS.iter().any(|m| probe.contains(m)) {
                out.push(s.to_owned());
            }
        }
    }
    out
}

/// Splits text after sentence ends: `.`, `!` or `?` followed by a space
/// or the end (so "Python 3.9" and "a.rs" stay whole), or a CJK full stop.
pub(crate) fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|(_, n)| *n);
        let end = match c {
            '。' | '！' | '？' => true,
            '.' | '!' | '?' => next.is_none_or(char::is_whitespace),
            _ => false,
        };
        if end {
            let cut = i + c.len_utf8();
            out.push(&text[start..cut]);
            start = cut;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").to_owned()
}

fn nonempty(s: String) -> Option<String> {
    (!s.trim().is_empty()).then_some(s)
}

/// Returns the last `n` lines of `text`, noting how many were left out.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    if lines.len() <= n {
        return cut_chars(&lines.join("\n"), n * 200);
    }
    let kept = lines[lines.len() - n..].join("\n");
    format!(
        "… ({} earlier lines)\n{}",
        lines.len() - n,
        cut_chars(&kept, n * 200)
    )
}

/// Returns the first `n` lines of `text`, noting how many were left out.
fn first_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    if lines.len() <= n {
        return cut_chars(&lines.join("\n"), n * 200);
    }
    format!(
        "{}\n… ({} more lines)",
        cut_chars(&lines[..n].join("\n"), n * 200),
        lines.len() - n
    )
}

/// Returns at most `max` characters of `text`, with "…" when cut.
pub(crate) fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((i, _)) => format!("{}…", &text[..i]),
    }
}

/// Returns the item citing a `checkpoint` event: its tree, message and
/// the files it differs in from its base commit.
fn checkpoint_item(seq: u64, p: &Value) -> Item {
    let tree = str_of(p, &["tree"]).unwrap_or("");
    let short: String = tree.chars().take(12).collect();
    let files = p.get("files_changed").and_then(Value::as_u64).unwrap_or(0);
    let message = str_of(p, &["message"])
        .map(|m| format!(": {}", flat(m, 200)))
        .unwrap_or_default();
    let listed: Vec<String> = p
        .get("files")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .take(20)
                .filter_map(|f| {
                    Some(format!(
                        "{} {}",
                        f.get("status")?.as_str()?,
                        flat(f.get("path")?.as_str()?, 300)
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    Item {
        priority: Priority::P1,
        kind: ItemKind::Checkpoint,
        label: format!(
            "checkpoint tree {short}{message} ({files} file(s) changed; git session checkpoint --restore <session> {seq})"
        ),
        body: nonempty(listed.join("\n")),
        seqs: vec![seq],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_like_sentences_are_found() {
        let got = constraint_sentences(
            "Thanks. Never push to main. The sky is blue.\nYou must keep Python 3.9 working!",
        );
        assert_eq!(
            got,
            ["Never push to main.", "You must keep Python 3.9 working!"]
        );
        assert_eq!(
            sentences("a.rs is ok. 不要改。Next"),
            ["a.rs is ok.", " 不要改。", "Next"]
        );
    }

    #[test]
    fn todos_fold_by_id_and_keep_their_text() {
        let ev = |seq, kind: &str, payload| {
            Event::new(
                seq,
                "t",
                git_session_schema::Agent::Codex,
                "tool",
                kind,
                git_session_schema::Level::Context,
                payload,
            )
        };
        let events = [
            ev(
                0,
                "todo.add",
                serde_json::json!({"id": "1", "content": "Write it"}),
            ),
            ev(
                1,
                "todo.add",
                serde_json::json!({"content": "Test it", "status": "pending"}),
            ),
            ev(
                2,
                "todo.update",
                serde_json::json!({"id": "1", "status": "completed"}),
            ),
        ];
        let c = candidates(&events, &GitFacts::default());
        let labels: Vec<(ItemKind, &str)> =
            c.p0.iter()
                .chain(&c.p1)
                .map(|i| (i.kind, i.label.as_str()))
                .collect();
        assert_eq!(
            labels,
            [
                (ItemKind::Todo, "[pending] Test it"),
                (ItemKind::DoneTodo, "[completed] Write it")
            ]
        );
    }

    #[test]
    fn harness_wrappers_are_not_requests() {
        assert!(is_harness_text("  <command-name>/compact</command-name>"));
        assert!(is_harness_text(
            "<local-command-stdout>Compacted</local-command-stdout>"
        ));
        assert!(!is_harness_text("Please fix <command-name> parsing"));
    }

    #[test]
    fn diff_stat_ignores_file_headers() {
        assert_eq!(
            diff_stat("--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-a\n+b\n+c\n"),
            (2, 1)
        );
    }

    #[test]
    fn line_cuts_say_what_was_left_out() {
        assert_eq!(last_lines("a\nb\nc", 2), "… (1 earlier lines)\nb\nc");
        assert_eq!(first_lines("a\nb\nc", 2), "a\nb\n… (1 more lines)");
        assert_eq!(cut_chars("héllo", 2), "hé…");
    }
}
