//! Use cases, one module per user action. No clap, no printing, no
//! environment: callers pass a [`Store`](crate::store::Store), a
//! [`Clock`](crate::clock::Clock) and plain values, and get results back.

pub mod canonical;
pub mod capture;
pub mod checkpoint;
pub mod compile;
pub mod fork;
pub mod handoff;
pub mod hook;
pub mod init;
pub mod list;
pub mod merge;
pub mod meta;
pub mod progress;
pub mod purge;
pub mod redact;
pub mod resume;
pub mod search;
pub mod status;
pub mod sync;
pub mod verify;
pub mod watch;
pub mod which;
pub mod written;

use std::path::PathBuf;

use crate::store::StoreError;

/// Says why an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A line of an input file is bad; nothing was written.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The input file.
        path: PathBuf,
        /// One-based line number.
        line: u64,
        /// What is wrong with it.
        message: String,
        /// What the user can do about it.
        hint: Option<String>,
    },
    /// An input or output file could not be used.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A different native session is already where one would be written.
    #[error("a different native session {native_id} already exists: {}", path.display())]
    NativeExists {
        /// The native session id.
        native_id: String,
        /// The file in the way.
        path: PathBuf,
        /// What the user can do about it.
        hint: Option<String>,
    },
    /// The request contradicts the stored data.
    #[error("{message}")]
    Conflict {
        /// What contradicts what.
        message: String,
        /// What the user can do about it.
        hint: Option<String>,
    },
}

impl From<crate::native::NativeError> for OpError {
    fn from(e: crate::native::NativeError) -> OpError {
        match e {
            crate::native::NativeError::Io { path, source } => OpError::Io { path, source },
            outside @ crate::native::NativeError::Outside { .. } => OpError::Conflict {
                message: outside.to_string(),
                hint: Some(
                    "the session names a path outside the agent's store; nothing was written"
                        .into(),
                ),
            },
            locked @ crate::native::NativeError::Locked { .. } => OpError::Conflict {
                message: locked.to_string(),
                hint: Some("close the agent, then run the command again".into()),
            },
            other => OpError::Conflict {
                message: other.to_string(),
                hint: None,
            },
        }
    }
}

pub use git_session_adapters::registry::shell_quote;

/// Shorthand for operation results.
pub type OpResult<T> = Result<T, OpError>;

impl OpError {
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> OpError + '_ {
        move |source| OpError::Io {
            path: path.to_owned(),
            source,
        }
    }
}
