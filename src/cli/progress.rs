//! A progress bar on stderr for commands that may take a while (import,
//! push, fetch, sync, resume, handoff), drawn with indicatif only when
//! stderr is a terminal, the command was not given `-q` or `--json`, and
//! the work takes longer than a second (`GIT_SESSION_PROGRESS_DELAY_MS`
//! changes that delay). Never in hooks (they run under git with no
//! terminal) or pipes.
//!
//! The ops report their counts through [`ops::progress::Progress`], which
//! [`Progress`] implements: the stage ("Capturing agent sessions"), done /
//! total in the stage's unit (native files, events, fetched sessions), and
//! the elapsed time; a stage of unknown size is a spinner. The bar is
//! cleared before the command prints its own status lines.
//!
//! [`ops::progress::Progress`]: crate::ops::progress::Progress

use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A running progress bar; dropped (or [`Progress::finish`]ed), it is cleared.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// The unit of the current stage.
    unit: std::cell::Cell<&'static str>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Starts a progress bar saying `what` until the op names its first
    /// stage, unless stderr is not a terminal, `-q` was given or `json` is
    /// set (then every report is ignored).
    pub fn start(what: &str, json: bool) -> Progress {
        let idle = Progress {
            bar: None,
            unit: std::cell::Cell::new(""),
            stop: None,
            thread: None,
        };
        if json
            || super::ui::is_quiet()
            || !std::io::stderr().is_terminal()
            || std::env::var_os("TERM").is_some_and(|t| t == "dumb")
        {
            return idle;
        }
        let delay = std::env::var("GIT_SESSION_PROGRESS_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000);
        // Counted while hidden; drawn once the delay has passed.
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        bar.set_style(spinner_style());
        bar.set_message(what.to_owned());
        if delay == 0 {
            show(&bar);
            return Progress {
                bar: Some(bar),
                unit: std::cell::Cell::new(""),
                stop: None,
                thread: None,
            };
        }
        let (tx, rx) = mpsc::channel::<()>();
        let shown = bar.clone();
        let thread = std::thread::spawn(move || {
            if rx.recv_timeout(Duration::from_millis(delay)) == Err(mpsc::RecvTimeoutError::Timeout)
            {
                show(&shown);
            }
        });
        Progress {
            bar: Some(bar),
            unit: std::cell::Cell::new(""),
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    /// Clears the bar and waits until it is gone.
    pub fn finish(mut self) {
        self.clear();
    }

    fn clear(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(bar) = self.bar.take() {
            if !bar.is_hidden() {
                // The last counts, drawn once before the line goes.
                bar.force_draw();
            }
            bar.finish_and_clear();
        }
    }
}

impl crate::ops::progress::Progress for Progress {
    fn stage(&self, what: &str, unit: &'static str, total: u64) {
        let Some(bar) = &self.bar else { return };
        self.unit.set(unit);
        bar.set_message(what.to_owned());
        bar.set_position(0);
        if total == 0 {
            bar.unset_length();
            bar.set_style(spinner_style());
        } else {
            bar.set_length(total);
            bar.set_style(counted_style(unit));
        }
    }

    fn more(&self, n: u64) {
        let Some(bar) = &self.bar else { return };
        if n == 0 {
            return;
        }
        if bar.length().is_none() {
            bar.set_length(0);
            bar.set_style(counted_style(self.unit.get()));
        }
        bar.inc_length(n);
    }

    fn done(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

fn show(bar: &ProgressBar) {
    bar.set_draw_target(ProgressDrawTarget::stderr());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar.tick();
}

fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
}

fn counted_style(unit: &str) -> ProgressStyle {
    // The unit is one of the ops' fixed words; braces would be template syntax.
    let unit: String = unit.chars().filter(|c| c.is_ascii_alphabetic()).collect();
    ProgressStyle::with_template(&format!(
        "{{spinner}} {{msg}} [{{bar:24}}] {{pos}}/{{len}} {unit} ({{elapsed}})"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
}
