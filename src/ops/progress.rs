//! How far a long operation is, told to whoever runs it. Ops never print:
//! capture, resume, handoff and fetch tell a [`Progress`] what stage they
//! are in, how many units of work it has (native files, events, fetched
//! sessions) and how many are done; the cli draws that on a terminal
//! (`src/cli/progress.rs`), everyone else passes [`Silent`].

/// Receives the counts of a running operation. Every method has a default
/// that ignores it.
pub trait Progress {
    /// A stage begins: what it does ("Capturing agent sessions"), the unit
    /// it counts in ("files"), and how many there are so far (more may be
    /// added with [`Progress::more`]).
    fn stage(&self, _what: &str, _unit: &'static str, _total: u64) {}
    /// `n` more units of work were found in this stage.
    fn more(&self, _n: u64) {}
    /// `n` units of this stage are done.
    fn done(&self, _n: u64) {}
}

/// Ignores everything (hooks, the MCP server, tests).
pub struct Silent;

impl Progress for Silent {}

/// Counts the items of `iter` as done units of `progress`'s stage.
pub(crate) struct Counted<'p, I> {
    pub iter: I,
    pub progress: &'p dyn Progress,
}

impl<I: Iterator> Iterator for Counted<'_, I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let item = self.iter.next()?;
        self.progress.done(1);
        Some(item)
    }
}
