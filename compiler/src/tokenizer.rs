//! Token counting for the budget, chosen by the target agent.
//!
//! Budgets are counted with a real byte-pair encoder, never a characters
//! per token guess: OpenAI's `o200k_base` from the `tiktoken-rs` crate,
//! whose vocabulary is compiled into the binary (`include_str!`), so counting
//! needs no network and no files at build or run time.
//!
//! Anthropic does not publish the tokenizer of current Claude models (the old
//! public one covers pre-Claude-3 models only), so for Claude, and for agents
//! whose model we cannot know, the count is `o200k_base` scaled up by a
//! documented safety margin ([`CLAUDE_MARGIN_PERCENT`]). That is an estimate
//! on the safe side: it makes the compiled context a little smaller than it
//! could be rather than larger than the target can hold.
//!
//! Building `tiktoken-rs`'s tables costs about 0.1 s per process; a caller
//! that keeps a [`crate::bpe::Table`] (the same ranks, flat and verified)
//! installs it with [`install_table`] before the first count, and every
//! count is then made from it, with the same result.
//!
//! This module does not decide budgets; it only counts.

use std::sync::OnceLock;

use git_session_schema::Agent;
use serde::Serialize;

use crate::bpe::Table;

/// The `o200k_base` table counts are made from, once installed.
static TABLE: OnceLock<Table> = OnceLock::new();

/// Makes every later `o200k_base` count use `table` (the same counts,
/// without building `tiktoken-rs`'s tables). Returns false when a table
/// was already installed (the first one stays).
pub fn install_table(table: Table) -> bool {
    TABLE.set(table).is_ok()
}

/// Whether counts are made from an installed table.
pub fn table_installed() -> bool {
    TABLE.get().is_some()
}

/// Says by how many percent the Claude estimate exceeds the `o200k_base`
/// count (135 means "count × 1.35, rounded up").
///
/// Claude's tokenizers produce more tokens than `o200k_base` for the same
/// text, by roughly 10-30 % on English prose and code in public
/// comparisons; 35 % covers that spread with room to spare.
pub const CLAUDE_MARGIN_PERCENT: usize = 135;

/// Names the token counter a budget is measured with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    /// OpenAI `o200k_base`: exact for GPT-4o, GPT-4.1, GPT-5 and the o-series
    /// models Codex CLI runs.
    O200kBase,
    /// `o200k_base` × [`CLAUDE_MARGIN_PERCENT`] %, rounded up: a conservative
    /// estimate for models whose tokenizer is not public.
    ClaudeEstimate,
}

impl Tokenizer {
    /// Returns the tokenizer used to budget context for `agent` when the
    /// caller does not name one ([`crate::Request::tokenizer`]; the root
    /// crate takes it from the agent registry).
    ///
    /// Codex talks to OpenAI models, so it gets the exact count. Claude gets
    /// the conservative estimate. Every other agent can run any provider's
    /// model, so it gets the estimate too: over-counting only costs a little
    /// context, under-counting could overflow the target.
    pub fn for_agent(agent: &Agent) -> Tokenizer {
        match agent {
            Agent::Codex => Tokenizer::O200kBase,
            _ => Tokenizer::ClaudeEstimate,
        }
    }

    /// Returns the tokenizer with the stable name `name` (see
    /// [`Tokenizer::name`]), as an agent registry names it.
    pub fn from_name(name: &str) -> Option<Tokenizer> {
        [Tokenizer::O200kBase, Tokenizer::ClaudeEstimate]
            .into_iter()
            .find(|t| t.name() == name)
    }

    /// Returns the tokenizer's stable name, as written in compiled records.
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::O200kBase => "o200k_base",
            Tokenizer::ClaudeEstimate => "claude_estimate",
        }
    }

    /// Builds the tokenizer's tables now rather than at the first count.
    ///
    /// Loading `o200k_base` takes about 0.1 s of CPU in a release build.
    /// A caller can start it on another thread while it reads the session
    /// from the store (`std::thread::spawn(|| tok.load())`), so that cost
    /// overlaps IO instead of adding to it. Calling it again does nothing.
    pub fn load(self) {
        if !table_installed() {
            tiktoken_rs::o200k_base_singleton();
        }
    }

    /// Returns how many tokens `text` costs for this tokenizer.
    ///
    /// The first call builds the `o200k_base` tables (about 0.1 s in a
    /// release build); later calls reuse them.
    pub fn count(self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        let base = match TABLE.get() {
            Some(table) => table.count(text),
            None => tiktoken_rs::o200k_base_singleton()
                .encode_ordinary(text)
                .len(),
        };
        match self {
            Tokenizer::O200kBase => base,
            Tokenizer::ClaudeEstimate => (base * CLAUDE_MARGIN_PERCENT).div_ceil(100),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_follows_the_target_agent() {
        assert_eq!(Tokenizer::for_agent(&Agent::Codex), Tokenizer::O200kBase);
        assert_eq!(
            Tokenizer::for_agent(&Agent::Claude),
            Tokenizer::ClaudeEstimate
        );
        assert_eq!(
            Tokenizer::for_agent(&Agent::Other("gemini".into())),
            Tokenizer::ClaudeEstimate
        );
    }

    #[test]
    fn counts_are_real_bpe_counts_and_the_estimate_is_larger() {
        // "hello world" is two o200k tokens; chars/4 would say 3.
        assert_eq!(Tokenizer::O200kBase.count("hello world"), 2);
        assert_eq!(Tokenizer::ClaudeEstimate.count("hello world"), 3);
        assert_eq!(Tokenizer::O200kBase.count(""), 0);
        let text = "fn main() { println!(\"hi\"); }\n".repeat(40);
        let exact = Tokenizer::O200kBase.count(&text);
        assert!(Tokenizer::ClaudeEstimate.count(&text) >= exact * 135 / 100);
    }
}
