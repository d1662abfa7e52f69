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

    /// Takes the lock file `locks/<name>` if no other process holds it;
    /// `None` when one does.
    pub fn try_named(state_dir: &Path, name: &str) -> StoreResult<Option<SessionLock>> {
        let (path, file) = Self::open(state_dir, name)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(SessionLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(source)) => Err(StoreError::Io { path, source }),
        }
    }

    /// Blocks until this process holds the lock file `locks/<name>`.
    pub fn named(state_dir: &Path, name: &str) -> StoreResult<SessionLock> {
        let (path, file) = Self::open(state_dir, name)?;
        file.lock()
            .map_err(|source| StoreError::Io { path, source })?;
        Ok(SessionLock { _file: file })
    }

    /// Opens (creating it) the lock file `locks/<name>`.
    fn open(state_dir: &Path, name: &str) -> StoreResult<(std::path::PathBuf, File)> {
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
        Ok((path, file))
    }
}
