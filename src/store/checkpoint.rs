//! Checkpoints: a snapshot of the working state (staged, unstaged and
//! untracked-but-not-ignored files) as a git tree, and putting it back.
//!
//! The snapshot is made the way `git stash create` makes one, without
//! touching the index, the work tree or any ref of the user's: a copy of
//! the index in a temporary file (`GIT_INDEX_FILE`) takes `git add -A`,
//! and `git write-tree` writes the tree. The tree goes into a parentless
//! commit (never the user's history, so pushing a session never sends
//! code commits) that the session's batch commit carries as its second
//! parent (`CommitInfo::attach`): it travels wherever the session goes,
//! and readers, which follow first parents, never see it. A divergence
//! fork or a purge keeps them reachable (`Store::attached_since`,
//! `Store::carrier` in `append.rs`).
//!
//! Restoring reads the tree into another temporary index and checks it
//! out over a clean work tree (git itself refuses paths such as `.git/`
//! or `../`), then removes the files `HEAD` has and the snapshot does not.

use std::path::{Path, PathBuf};
use std::process::Command;

use gix::ObjectId;

use super::{Store, StoreError, StoreResult, git};

/// Holds a snapshot of the working state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The parentless commit holding the tree (attach it to a batch).
    pub commit: ObjectId,
    /// The work tree's files: tracked, modified, untracked, not ignored.
    pub tree: ObjectId,
    /// What was staged (the index as a tree).
    pub index_tree: ObjectId,
    /// The code commit `HEAD` pointed at, if any.
    pub base: Option<ObjectId>,
    /// Files that differ from `base` (`A`, `M`, `D`, ... and the path).
    pub changed: Vec<(char, String)>,
}

/// Removes a temporary index file when dropped.
struct TempIndex(PathBuf);

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Store {
    fn workdir(&self) -> StoreResult<PathBuf> {
        self.repo.workdir().map(Path::to_owned).ok_or_else(|| {
            StoreError::Refused("checkpoints need a work tree, and this repository is bare".into())
        })
    }

    fn temp_index(&self, what: &str) -> StoreResult<TempIndex> {
        let dir = self.state_dir.join("tmp");
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(TempIndex(
            dir.join(format!("{what}-{}.index", std::process::id())),
        ))
    }

    /// Runs git in the work tree with `index` as its index file; returns
    /// stdout, or the error naming the command.
    fn git_with_index(&self, index: &Path, args: &[&str]) -> StoreResult<Vec<u8>> {
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir")
            .arg(self.repo.git_dir())
            .arg("--work-tree")
            .arg(self.workdir()?)
            .current_dir(self.workdir()?)
            .env("GIT_INDEX_FILE", index)
            .args(args);
        let out = super::child::run(cmd, None)?;
        if !out.status.success() {
            return Err(StoreError::Refused(format!(
                "git {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(out.stdout)
    }

    fn oid_of(out: &[u8]) -> StoreResult<ObjectId> {
        ObjectId::from_hex(String::from_utf8_lossy(out).trim().as_bytes())
            .map_err(|e| StoreError::Git(gix::Error::from_error(e)))
    }

    /// Snapshots the working state into a parentless commit (made at
    /// `time`, with `message`); the user's index, work tree and refs stay
    /// as they are.
    pub fn snapshot_worktree(&self, time: i64, message: &str) -> StoreResult<Snapshot> {
        self.workdir()?;
        let index = self.temp_index("checkpoint")?;
        let real = self.repo.index_path();
        if real.is_file() {
            std::fs::copy(&real, &index.0).map_err(|source| StoreError::Io {
                path: real.clone(),
                source,
            })?;
        }
        let index_tree = Self::oid_of(&self.git_with_index(&index.0, &["write-tree"])?)?;
        self.git_with_index(&index.0, &["add", "-A", "--", "."])?;
        let tree = Self::oid_of(&self.git_with_index(&index.0, &["write-tree"])?)?;
        let base = self.code_head();
        let changed = self.tree_changes(base, tree)?;
        let commit = self.write_commit(time, message, tree, None)?;
        Ok(Snapshot {
            commit,
            tree,
            index_tree,
            base,
            changed,
        })
    }

    /// Returns the files that differ between `base` (none: the empty tree)
    /// and `tree`, as git's status letter and path.
    pub fn tree_changes(
        &self,
        base: Option<ObjectId>,
        tree: ObjectId,
    ) -> StoreResult<Vec<(char, String)>> {
        let from = match base {
            Some(b) => b.to_string(),
            None => ObjectId::empty_tree(self.repo.object_hash()).to_string(),
        };
        let out = self.run_git(&[
            "diff-tree".into(),
            "-r".into(),
            "-z".into(),
            "--no-renames".into(),
            "--name-status".into(),
            from,
            tree.to_string(),
        ])?;
        if !out.status.success() {
            return Err(StoreError::Refused(format!(
                "git diff-tree failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let mut parts = out.stdout.split(|b| *b == 0).filter(|p| !p.is_empty());
        let mut changes = Vec::new();
        while let (Some(status), Some(path)) = (parts.next(), parts.next()) {
            let letter = status.first().map_or('?', |b| *b as char);
            changes.push((letter, String::from_utf8_lossy(path).into_owned()));
        }
        Ok(changes)
    }

    /// Returns the work tree's local changes (`git status --porcelain`,
    /// untracked files included), empty when it is clean.
    pub fn worktree_changes(&self) -> StoreResult<Vec<String>> {
        let mut cmd = Command::new("git");
        let workdir = self.workdir()?;
        cmd.arg("--git-dir")
            .arg(self.repo.git_dir())
            .arg("--work-tree")
            .arg(&workdir)
            .current_dir(&workdir)
            .args(["status", "--porcelain", "--untracked-files=all"]);
        let out = super::child::run(cmd, None)?;
        if !out.status.success() {
            return Err(StoreError::Refused(format!(
                "git status failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect())
    }

    /// Refuses a snapshot tree (possibly fetched, so untrusted) over
    /// `session.maxCheckpointFiles` entries (default 100,000) or
    /// `session.maxCheckpointSize` bytes in all (default 1 GiB), counted
    /// from the object headers (`git ls-tree -r -l`) before any blob is read.
    fn bound_checkpoint(&self, tree: ObjectId) -> StoreResult<()> {
        let config = self.repo.config_snapshot();
        let get = |key: &str, default: u64| {
            config
                .integer(key)
                .and_then(|v| u64::try_from(v).ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        let (max_files, max_bytes) = (
            get("session.maxCheckpointFiles", 100_000),
            get("session.maxCheckpointSize", 1 << 30),
        );
        let out = self.run_git(&[
            "ls-tree".into(),
            "-r".into(),
            "-l".into(),
            "-z".into(),
            tree.to_string(),
        ])?;
        if !out.status.success() {
            return Err(StoreError::Refused(format!(
                "git ls-tree {tree} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let (mut files, mut bytes) = (0u64, 0u64);
        for entry in out.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()) {
            files += 1;
            let meta = entry.split(|b| *b == b'\t').next().unwrap_or_default();
            let size = String::from_utf8_lossy(meta)
                .split_whitespace()
                .nth(3)
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0);
            bytes = bytes.saturating_add(size);
            if files > max_files {
                return Err(StoreError::TooLarge {
                    what: format!("checkpoint tree {tree}: its number of files"),
                    size: files,
                    limit: max_files,
                    setting: "session.maxCheckpointFiles".into(),
                });
            }
            if bytes > max_bytes {
                return Err(StoreError::TooLarge {
                    what: format!("checkpoint tree {tree}: its files in all"),
                    size: bytes,
                    limit: max_bytes,
                    setting: "session.maxCheckpointSize".into(),
                });
            }
        }
        Ok(())
    }

    /// Puts the files of snapshot `tree` into the work tree, which must be
    /// clean; removes what `HEAD` tracks and the snapshot lacks. The
    /// index and refs are not touched. Returns the files written or removed.
    pub fn restore_worktree(&self, tree: ObjectId) -> StoreResult<Vec<(char, String)>> {
        let local = self.worktree_changes()?;
        if !local.is_empty() {
            let n = local.len();
            return Err(StoreError::Refused(format!(
                "the work tree has {n} local change{} (first: {}); nothing was restored: \
                 commit or stash them first (`git stash -u` also keeps untracked files), \
                 then restore again",
                if n == 1 { "" } else { "s" },
                local[0]
            )));
        }
        let kind = self.repo.find_header(tree).map_err(git)?.kind();
        if kind != gix::objs::Kind::Tree {
            return Err(StoreError::Refused(format!(
                "{tree} is a {kind}, not a checkpoint tree"
            )));
        }
        self.bound_checkpoint(tree)?;
        let changes = self.tree_changes(self.code_head(), tree)?;
        let index = self.temp_index("restore")?;
        self.git_with_index(&index.0, &["read-tree", &tree.to_string()])?;
        self.git_with_index(&index.0, &["checkout-index", "--all", "--force"])?;
        let workdir = self.workdir()?;
        for (status, path) in &changes {
            if *status == 'D' {
                let file = workdir.join(path);
                // Paths come from git's own diff of two trees it read.
                if file.starts_with(&workdir) && !path.split('/').any(|c| c == ".." || c == ".git")
                {
                    let _ = std::fs::remove_file(&file);
                }
            }
        }
        Ok(changes)
    }
}
