//! The terminal conventions every command shares: `--color`, `-q`/`-v`
//! and the pager, decided the way git decides them.
//!
//! Color: `--color=always|never` wins; `auto` (the default) colors only
//! when stdout is a terminal, `NO_COLOR` is unset or empty, and git's
//! `color.ui` is not `false`/`never` (`always` forces it). The pager runs
//! only when stdout is a terminal and `--no-pager` is not given; it is
//! `GIT_PAGER`, else `core.pager`, else `PAGER`, else `less`, with
//! `LESS=FRX` unless set (as git does); `cat` or an empty value means none.
//! Commands other than `list`/`show` (such as `status` or `search`) reuse
//! [`Ui`], [`Paint`] and [`Pager`] the same way.

use std::io::{IsTerminal, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};

use crate::store::Store;

/// Says when to color output (`--color`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// Color when stdout is a terminal, as NO_COLOR and color.ui allow.
    #[default]
    Auto,
    /// Always color.
    Always,
    /// Never color.
    Never,
}

/// Holds the process-wide output choices made on the command line.
#[derive(Clone, Debug, Default)]
pub struct Ui {
    /// `--color`.
    pub color: ColorWhen,
    /// `--no-pager`.
    pub no_pager: bool,
}

/// Verbosity: 0 quiet (`-q`), 1 normal, 2 and more verbose (`-v`).
static VERBOSITY: AtomicU8 = AtomicU8::new(1);

/// Sets the verbosity from `-q` and the number of `-v`.
pub(crate) fn set_verbosity(quiet: bool, verbose: u8) {
    let level = if quiet {
        0
    } else {
        1u8.saturating_add(verbose)
    };
    VERBOSITY.store(level, Ordering::Relaxed);
}

/// Returns whether status lines are printed (not `-q`).
pub(crate) fn is_quiet() -> bool {
    VERBOSITY.load(Ordering::Relaxed) == 0
}

/// Returns whether detail lines are printed (`-v`).
pub(crate) fn is_verbose() -> bool {
    VERBOSITY.load(Ordering::Relaxed) >= 2
}

impl Ui {
    /// Returns whether stdout gets color, given the repository's config
    /// (`color.ui`) when there is one.
    pub fn color(&self, store: Option<&Store>) -> bool {
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let config = store.and_then(crate::config::color_ui);
        decide_color(
            self.color,
            std::io::stdout().is_terminal(),
            env("NO_COLOR").is_some(),
            config.as_deref(),
        )
    }

    /// Returns a painter for stdout.
    pub fn paint(&self, store: Option<&Store>) -> Paint {
        Paint(self.color(store))
    }

    /// Starts the pager when stdout is a terminal (see the module docs);
    /// `None` means write to stdout directly.
    pub fn pager(&self, store: &Store) -> Option<Pager> {
        if self.no_pager || !std::io::stdout().is_terminal() {
            return None;
        }
        let env = |k: &str| std::env::var(k).ok();
        let command = env("GIT_PAGER")
            .or_else(|| crate::config::core_pager(store))
            .or_else(|| env("PAGER"))
            .unwrap_or_else(|| "less".to_owned());
        Pager::start(&command)
    }
}

/// Returns the color decision from its inputs (pure, for tests).
pub fn decide_color(
    when: ColorWhen,
    terminal: bool,
    no_color: bool,
    color_ui: Option<&str>,
) -> bool {
    match when {
        ColorWhen::Always => return true,
        ColorWhen::Never => return false,
        ColorWhen::Auto => {}
    }
    if no_color {
        return false;
    }
    match color_ui.map(str::to_ascii_lowercase).as_deref() {
        Some("false" | "never" | "off" | "no" | "0") => false,
        Some("always") => true,
        _ => terminal,
    }
}

/// Wraps text in ANSI styles when color is on.
#[derive(Clone, Copy, Debug)]
pub struct Paint(pub bool);

impl Paint {
    fn wrap(self, code: &str, text: &str) -> String {
        if self.0 && !text.is_empty() {
            format!("\x1b[{code}m{text}\x1b[m")
        } else {
            text.to_owned()
        }
    }

    /// Bold (the part of an id to type).
    pub fn bold(self, text: &str) -> String {
        self.wrap("1;33", text)
    }

    /// Dimmed (the rest of an id, secondary facts).
    pub fn dim(self, text: &str) -> String {
        self.wrap("2", text)
    }

    /// Green (agents, success).
    pub fn green(self, text: &str) -> String {
        self.wrap("32", text)
    }

    /// Red (errors, broken sessions).
    pub fn red(self, text: &str) -> String {
        self.wrap("31", text)
    }
}

/// A running pager whose stdin takes the command's output.
pub struct Pager {
    child: Child,
}

impl Pager {
    fn start(command: &str) -> Option<Pager> {
        let command = command.trim();
        if command.is_empty() || command == "cat" {
            return None;
        }
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(command).stdin(Stdio::piped());
        if std::env::var_os("LESS").is_none() {
            cmd.env("LESS", "FRX");
        }
        if std::env::var_os("LV").is_none() {
            cmd.env("LV", "-c");
        }
        // A pager that cannot start is no reason to fail: print directly.
        cmd.spawn().ok().map(|child| Pager { child })
    }

    /// Returns the writer to print into.
    pub fn writer(&mut self) -> &mut dyn Write {
        self.child.stdin.as_mut().expect("stdin is piped")
    }

    /// Closes the pager's input and waits until the user quits it.
    pub fn finish(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn color_follows_flag_then_no_color_then_color_ui_then_terminal() {
        use ColorWhen::*;
        assert!(decide_color(Always, false, true, Some("never")));
        assert!(!decide_color(Never, true, false, Some("always")));
        assert!(!decide_color(Auto, true, true, None));
        assert!(!decide_color(Auto, true, false, Some("false")));
        assert!(decide_color(Auto, false, false, Some("always")));
        assert!(decide_color(Auto, true, false, Some("auto")));
        assert!(!decide_color(Auto, false, false, None));
    }
}
