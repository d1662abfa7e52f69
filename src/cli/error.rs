//! Errors as the user sees them: one message, its causes, hints that say
//! what to do next, and the exit code. Every library error is mapped here
//! and nowhere else.

use std::io::Write;

use crate::ops::OpError;
use crate::store::StoreError;

/// Holds a failed command's message, hints and exit code.
#[derive(Debug)]
pub struct CommandError {
    message: String,
    hints: Vec<String>,
    code: u8,
    broken_pipe: bool,
}

impl CommandError {
    /// Returns a failure (exit 1) with `message`.
    pub fn failure(message: impl Into<String>) -> CommandError {
        CommandError {
            message: message.into(),
            hints: Vec::new(),
            code: 1,
            broken_pipe: false,
        }
    }

    /// Returns a usage error (exit 2) with `message`.
    pub fn usage(message: impl Into<String>) -> CommandError {
        CommandError {
            code: 2,
            ..CommandError::failure(message)
        }
    }

    /// Returns an exit with `code` and no message: the command has said
    /// what happened (`search` with no hits exits 1, as `git grep` does).
    pub fn quiet(code: u8) -> CommandError {
        CommandError {
            code,
            ..CommandError::failure(String::new())
        }
    }

    /// Adds a hint line.
    pub fn hint(mut self, hint: impl Into<String>) -> CommandError {
        self.hints.push(hint.into());
        self
    }

    pub(crate) fn is_broken_pipe(&self) -> bool {
        self.broken_pipe
    }

    pub(crate) fn exit_code(&self) -> u8 {
        self.code
    }

    /// Prints the error and its hints, each line with its control
    /// characters escaped: a message may quote an argument, a path or
    /// git's words about a remote, none of which may drive the terminal.
    pub(crate) fn print(&self, err: &mut dyn Write) {
        if self.message.is_empty() && self.hints.is_empty() {
            return;
        }
        let lines = |text: &str| {
            text.split('\n')
                .map(super::escape_line)
                .collect::<Vec<_>>()
                .join("\n")
        };
        let _ = writeln!(err, "error: {}", lines(&self.message));
        for hint in &self.hints {
            let _ = writeln!(err, "hint: {}", lines(hint));
        }
    }
}

impl From<std::io::Error> for CommandError {
    fn from(e: std::io::Error) -> CommandError {
        CommandError {
            broken_pipe: e.kind() == std::io::ErrorKind::BrokenPipe,
            ..CommandError::failure(format!("cannot write output: {e}"))
        }
    }
}

impl From<StoreError> for CommandError {
    fn from(e: StoreError) -> CommandError {
        let err = CommandError::failure(chain(&e));
        match &e {
            StoreError::NotARepo { .. } => {
                err.hint("run git session inside a git repository, or create one with `git init`")
            }
            StoreError::NotFound { suggestions, .. } if !suggestions.is_empty() => {
                let list: Vec<&str> = suggestions.iter().map(|s| s.as_str()).collect();
                err.hint(format!("the closest sessions are: {}", list.join(", ")))
            }
            StoreError::NotFound { .. } => {
                err.hint("`git session list` shows the sessions of this repository")
            }
            StoreError::Ambiguous { candidates, .. } => {
                let list: Vec<&str> = candidates.iter().take(10).map(|s| s.as_str()).collect();
                err.hint(format!("it matches: {}", list.join(", ")))
                    .hint("type more characters of the id")
            }
            StoreError::Corrupt { id, .. } => {
                err.hint(format!("run `git session verify {id}` for a full report"))
            }
            StoreError::AlreadyExists(_) => err.hint("choose another id"),
            _ => err,
        }
    }
}

impl From<OpError> for CommandError {
    fn from(e: OpError) -> CommandError {
        match e {
            OpError::Store(e) => e.into(),
            OpError::Line { ref hint, .. }
            | OpError::Conflict { ref hint, .. }
            | OpError::NativeExists { ref hint, .. } => {
                let hint = hint.clone();
                let message = match &e {
                    OpError::Line {
                        path,
                        line,
                        message,
                        ..
                    } => {
                        format!("{}:{line}: {message}; nothing was written", path.display())
                    }
                    _ => e.to_string(),
                };
                let err = CommandError::failure(message);
                match hint {
                    Some(h) => err.hint(h),
                    None => err,
                }
            }
            // A reader that stopped reading (`| head`) is no failure, as
            // for git; the export paths report their writes this way.
            OpError::Io { ref source, .. } => CommandError {
                broken_pipe: source.kind() == std::io::ErrorKind::BrokenPipe,
                ..CommandError::failure(chain(&e))
            },
        }
    }
}

/// Joins an error and its sources into one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}
