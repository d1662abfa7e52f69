//! The git-session context compiler: a session's canonical events in, a
//! token-budgeted context for another agent out (seed 000 §7).
//!
//! [`compile`] is a pure function. Given the session header, its events,
//! and a [`Request`] (target agent, token budget, output [`Format`], and
//! optional [`GitFacts`] the caller gathered), it returns a [`Compiled`]
//! context: the rendered text, the [`Item`]s it holds (each with a
//! [`Priority`] and the `seq`s it cites), and the [`Dropped`] list of what
//! was cut and why.
//!
//! How the budget is spent (`budget.rs`):
//!
//! - **P0** is always kept, verbatim: the current task (the latest user
//!   request), open todos (`todo.*` folded by id or content), decisions,
//!   and blockers (the three newest commands whose latest run failed; a
//!   command that failed and then passed is not a blocker). If P0 alone
//!   does not fit, [`CompileError::OverBudget`] says by how much.
//! - **P1** (working tree, constraints, compaction summary, edited files
//!   with their latest diff, commands and outcomes, finished todos) is kept
//!   up to [`P1_SHARE_PERCENT`] % of the budget: the working tree first,
//!   then constraints and failed commands, then the rest, newest first
//!   within each tier.
//! - **P2** (conversation excerpts, or an external summarizer's summaries)
//!   fills the rest: earlier user messages newest first, then assistant
//!   messages newest first, shown in conversation order.
//!
//! Reasoning (`message.thinking`), native records (`meta`), raw tool
//! traffic (`tool.call` / `tool.result`, whose substance arrives as derived
//! `command.run` / `file.edit` events) and harness text are not made into
//! items; they are listed in [`Compiled::dropped`] as `not_context`, by
//! type, so nothing leaves silently.
//!
//! Tokens are counted with a real BPE tokenizer chosen by the target
//! ([`Tokenizer::for_agent`]), and the rendered text is counted as a whole
//! at the end, so `compiled.tokens <= request.budget` always holds.
//!
//! ```
//! use git_session_compiler::{Format, GitFacts, Request, compile};
//! use git_session_schema::{Agent, Event, Level, SessionHeader, SessionId};
//!
//! let header = SessionHeader::new(SessionId::new("s1").unwrap(), Agent::Claude, "2026-01-01T00:00:00Z");
//! let events = vec![Event::new(
//!     0, "2026-01-01T00:00:00Z", Agent::Claude, "user", "message.user",
//!     Level::History, serde_json::json!({"text": "Fix the parser"}),
//! )];
//! let request = Request {
//!     target: Agent::Codex,
//!     budget: 2_000,
//!     format: Format::FirstMessage,
//!     git: GitFacts::default(),
//!     tokenizer: None,
//! };
//! let compiled = compile(&header, &events, &request)?;
//! assert!(compiled.tokens <= 2_000);
//! assert!(compiled.text.contains("Fix the parser"));
//! // `compiled.text` is the first user message of the target's new
//! // session; `compiled.record()` the payload of a `context.compiled` event.
//! # Ok::<(), git_session_compiler::CompileError>(())
//! ```
//!
//! What this crate does not do: read the store, git, files or the
//! environment, run processes (an external summarizer is the caller's
//! [`Summarizer`] implementation), or write the `context.compiled` /
//! `handoff` events ([`Compiled::record`] gives their payload; the caller
//! appends them). See `clippy.toml`.

#![warn(missing_docs)]

pub mod bpe;
mod budget;
mod error;
mod extract;
mod item;
mod render;
mod summarize;
mod tokenizer;

use git_session_schema::{Agent, Event, SessionHeader};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use error::CompileError;
pub use extract::Excerpt;
pub use item::{DropReason, Dropped, Item, ItemKind, Priority, seq_ranges};
pub use render::{Format, context_file_name};
pub use summarize::{Summarizer, SummarizerError, Summary, SummaryRequest, parse_summaries};
pub use tokenizer::{CLAUDE_MARGIN_PERCENT, Tokenizer, install_table, table_installed};

/// Says how large a compiled context is by default, in tokens.
///
/// Small next to any current context window, large enough for a long
/// session's working state; callers with a known target window pass
/// `window - reserve` instead (seed 000 §7.3).
pub const DEFAULT_BUDGET: usize = 32_000;

/// Says how much of the budget P1 items may take at most, in percent.
pub const P1_SHARE_PERCENT: usize = 60;

/// Holds facts about the working tree that the caller read from git.
///
/// All optional; lines are shown as given (one `git status --porcelain`
/// line, one path), at most 60 of each.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitFacts {
    /// The current branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The commit `HEAD` points to (any form: full or short hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// Status lines, for example from `git status --porcelain`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<String>,
    /// Recently changed files, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_files: Vec<String>,
}

/// Holds what to compile for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The agent that will read the context; picks the tokenizer.
    pub target: Agent,
    /// The most tokens the rendered text may take.
    pub budget: usize,
    /// The output form.
    pub format: Format,
    /// Working-tree facts to include, if the caller has them.
    #[serde(default)]
    pub git: GitFacts,
    /// The tokenizer to count the budget with; `None` picks one by
    /// `target` ([`Tokenizer::for_agent`]).
    #[serde(default)]
    pub tokenizer: Option<Tokenizer>,
}

impl Request {
    /// Returns the tokenizer the budget is counted with.
    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
            .unwrap_or_else(|| Tokenizer::for_agent(&self.target))
    }
}

/// Holds a compiled context and the account of how it was made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Compiled {
    /// The rendered context, in the requested format.
    pub text: String,
    /// What `text` costs, counted by `tokenizer`; never above `budget`.
    pub tokens: usize,
    /// The budget it was compiled for.
    pub budget: usize,
    /// The tokenizer `tokens` was counted with.
    pub tokenizer: Tokenizer,
    /// The format of `text`.
    pub format: Format,
    /// The agent the context is for.
    pub target: Agent,
    /// The items in `text`, in section order.
    pub items: Vec<Item>,
    /// What was left out, and why.
    pub dropped: Vec<Dropped>,
    /// What the text says was "left out for space" (items, and excerpts
    /// counted by message): the number to report beside the text.
    pub omitted: usize,
    /// `extractive`, or the name of the external summarizer that was used.
    pub summarizer: String,
    /// Things the caller should tell the user (a summarizer that failed).
    pub warnings: Vec<String>,
}

impl Compiled {
    /// Returns the payload for a `context.compiled` event recording this
    /// compilation: target, tokenizer, budget, tokens, the seqs every item
    /// cites and the dropped list (seqs as compact ranges), but not the
    /// text, which can be compiled again from the log.
    pub fn record(&self) -> Value {
        let items: Vec<Value> = self
            .items
            .iter()
            .map(|i| {
                json!({
                    "priority": i.priority,
                    "kind": i.kind,
                    "seqs": seq_ranges(&i.seqs, usize::MAX),
                })
            })
            .collect();
        json!({
            "format": self.format.name(),
            "target": self.target,
            "tokenizer": self.tokenizer.name(),
            "budget": self.budget,
            "tokens": self.tokens,
            "summarizer": self.summarizer,
            "items": items,
            "dropped": self.dropped,
            "warnings": self.warnings,
        })
    }
}

/// Returns the context compiled from a session's events, with the built-in
/// extractive summarizer.
///
/// `events` are the session's canonical events in log order (all of them:
/// the compiler chooses). Deterministic: the same input gives byte-identical
/// output.
pub fn compile(
    header: &SessionHeader,
    events: &[Event],
    request: &Request,
) -> Result<Compiled, CompileError> {
    budget::run(header, events, request, None)
}

/// Returns what a merge back records of `events` (what a session did since
/// it branched): decisions, open todos, blockers, files edited and
/// commands run with their outcome, each citing its seqs, in the order a
/// brief gives them; bodies (diffs, output tails) left out.
pub fn merge_facts(events: &[Event]) -> Vec<Item> {
    let c = extract::candidates(events, &GitFacts::default());
    c.p0.into_iter()
        .chain(c.p1)
        .filter(|i| {
            matches!(
                i.kind,
                ItemKind::Decision
                    | ItemKind::Todo
                    | ItemKind::Blocker
                    | ItemKind::FileEdit
                    | ItemKind::Command
            )
        })
        .map(|mut i| {
            if i.kind != ItemKind::Decision {
                i.body = None;
            }
            i
        })
        .collect()
}

/// Like [`compile`], with P2 summaries from `summarizer`.
///
/// If the summarizer fails or its answer is unusable (no citation, a seq it
/// was not given, malformed), the result uses the extractive excerpts and
/// carries a warning; compilation itself does not fail because of it.
pub fn compile_with(
    header: &SessionHeader,
    events: &[Event],
    request: &Request,
    summarizer: &dyn Summarizer,
) -> Result<Compiled, CompileError> {
    budget::run(header, events, request, Some(summarizer))
}
