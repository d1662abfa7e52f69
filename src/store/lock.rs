//! The per-session writer lock: an OS file lock under the git common dir,
//! so that worktrees of one repository share it and a killed process
//! releases it automatically (no stale lock files to clean up by hand).

use std::fs::{File, OpenOptions};
use std::path::Path;

use git_session_schema::SessionId;

use super::{StoreError, StoreResult};

/// Holds an exclusive lock (a session's writer lock, or a lock on some
/// local state) until dropped.
pub struct SessionLock {
    _file: File,
}

impl SessionLock {
    /// Blocks until this process is the only writer of `id`.
    pub fn acquire(state_dir: &Path, id: &SessionId) -> StoreResult<SessionLock> {
        Self::named(state_dir, &format!("{id}.lock"))
    }

    /// Blocks until this process holds the lock file `locks/<name>`.
    pub fn named(state_dir: &Path, name: &str) -> StoreResult<SessionLock> {
        let dir = state_dir.join("locks");
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        let path = dir.join(name);
        let dir = path.parent().unwrap_or(&dir).to_owned();
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        file.lock().map_err(io(&path))?;
        Ok(SessionLock { _file: file })
    }
}
