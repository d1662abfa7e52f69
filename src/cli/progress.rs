//! A progress line on stderr for commands that may take a while (import,
//! push, fetch, sync, resume, handoff): a spinner with what is being done
//! and the elapsed time, drawn with indicatif only when stderr is a
//! terminal, the command was not given `-q` or `--json`, and the work takes
//! longer than a second (`GIT_SESSION_PROGRESS_DELAY_MS` changes that
//! delay). Never in hooks (they run under git with no terminal) or pipes.
//! It is cleared before the command prints its own status lines.

use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::Duration;

/// A running progress line; dropped (or [`Progress::finish`]ed), it is cleared.
pub struct Progress {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Starts a progress line saying `what` ("Capturing sessions"), unless
    /// stderr is not a terminal, `-q` was given or `json` is set.
    pub fn start(what: &str, json: bool) -> Progress {
        let idle = Progress {
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
        let (tx, rx) = mpsc::channel::<()>();
        let what = what.to_owned();
        let thread = std::thread::spawn(move || {
            if rx.recv_timeout(Duration::from_millis(delay)) != Err(mpsc::RecvTimeoutError::Timeout)
            {
                return;
            }
            let bar = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr(),
            );
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar.set_message(what);
            loop {
                bar.tick();
                match rx.recv_timeout(Duration::from_millis(100)) {
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    _ => break,
                }
            }
            bar.finish_and_clear();
        });
        Progress {
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    /// Clears the line and waits until it is gone.
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
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}
