//! The ways a compilation can fail.
//!
//! There is one: the must-keep part does not fit. Everything else (odd
//! payloads, a failing external summarizer) degrades the result and is
//! reported in it, so a handoff is never lost to a detail.

/// Says why a context could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// The P0 items (current task, open todos, decisions, blockers) and the
    /// document's frame alone exceed the budget.
    #[error(
        "the must-keep context (current task, open todos, decisions, blockers) takes {needed} tokens ({tokenizer}), {over} over the budget of {budget}: raise the budget to at least {needed} or narrow the task"
    )]
    OverBudget {
        /// Tokens the P0-only document takes.
        needed: usize,
        /// The budget asked for.
        budget: usize,
        /// `needed - budget`.
        over: usize,
        /// The tokenizer the count used.
        tokenizer: &'static str,
    },
}
