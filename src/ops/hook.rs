//! Hook entry points: what `git session hook <name>` does. They capture and
//! never fail: every problem is appended to `.git/session/hook.log`, which
//! `git session doctor` shows.

use std::io::Write;
use std::path::Path;

use super::capture::{CaptureReport, CaptureRequest, capture};
use crate::clock::Clock;
use crate::store::Store;

/// The log of hook failures, under the local state directory.
pub const LOG: &str = "hook.log";
/// The log is cut back to its newest half when it grows past this.
const LOG_LIMIT: u64 = 256 << 10;

/// Runs the post-commit capture; returns the report, or `None` when it
/// failed (the failure is logged).
pub fn post_commit(
    store: &Store,
    clock: &Clock,
    request: &CaptureRequest<'_>,
) -> Option<CaptureReport> {
    match capture(store, clock, request) {
        Ok(report) => {
            for skipped in report.skipped.iter().chain(&report.skipped_sources) {
                log(
                    store.state_dir(),
                    clock,
                    &format!(
                        "post-commit: skipped {}: {}",
                        skipped.path.display(),
                        skipped.reason
                    ),
                );
            }
            Some(report)
        }
        Err(e) => {
            log(
                store.state_dir(),
                clock,
                &format!("post-commit: capture failed: {e}"),
            );
            None
        }
    }
}

/// Appends one line to the hook log; logging problems are ignored (a hook
/// must not fail because its log cannot be written).
pub fn log(state_dir: &Path, clock: &Clock, message: &str) {
    let path = state_dir.join(LOG);
    let _ = std::fs::create_dir_all(state_dir);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > LOG_LIMIT)
        && let Ok(text) = std::fs::read_to_string(&path)
    {
        let keep = &text[text.len() / 2..];
        let keep = keep.split_once('\n').map_or(keep, |(_, rest)| rest);
        let _ = std::fs::write(&path, keep);
    }
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let one_line = message.replace('\n', " ");
        let _ = writeln!(file, "{} {one_line}", clock.now_rfc3339());
    }
}

/// Returns the last `n` lines of the hook log.
pub fn recent(state_dir: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(state_dir.join(LOG)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| (*l).to_owned())
        .collect()
}
