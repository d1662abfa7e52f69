//! The one place that reads the wall clock.
//!
//! Everything else takes time as a value, so tests pin it: the CLI builds a
//! [`Clock`] from `GIT_SESSION_TIMESTAMP` when set.

use jiff::Timestamp;

/// Gives the current time, real or pinned.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    fixed: Option<Timestamp>,
}

impl Clock {
    /// Returns a clock that reads the system time.
    pub fn system() -> Clock {
        Clock { fixed: None }
    }

    /// Returns a clock stopped at `at`.
    pub fn fixed(at: Timestamp) -> Clock {
        Clock { fixed: Some(at) }
    }

    /// Returns the current time.
    pub fn now(&self) -> Timestamp {
        self.fixed.unwrap_or_else(Timestamp::now)
    }

    /// Returns the current time as RFC 3339 UTC with milliseconds.
    pub fn now_rfc3339(&self) -> String {
        format_ts(self.now())
    }
}

/// Formats a timestamp the way events and headers store it.
pub fn format_ts(t: Timestamp) -> String {
    format!("{t:.3}")
}
