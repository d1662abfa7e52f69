//! The `git` binary, for what gix does not do or what must behave exactly
//! like git: notes, rev-parse, config edits, hook locations and the facts
//! a context compiler wants. Sync's push and fetch are in `sync.rs`.

use std::path::PathBuf;
use std::process::Command;

use gix::ObjectId;

use super::refs;
use super::sync::tracking_name;
use super::{Store, StoreError, StoreResult, git};

/// Holds what git says about the work tree, for a compiled context.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkTreeFacts {
    /// The checked-out branch.
    pub branch: Option<String>,
    /// Abbreviated HEAD.
    pub head: Option<String>,
    /// `git status --porcelain` lines.
    pub status: Vec<String>,
    /// Files changed by the last few commits, newest first.
    pub recent_files: Vec<String>,
}

impl Store {
    /// Returns a `git` command for this repository, without a work tree
    /// dependency (`--git-dir`), so it works in bare repos and worktrees.
    pub fn git_command(&self) -> Command {
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir").arg(self.repo.git_dir());
        cmd
    }

    /// Runs git to completion in its own process group (see
    /// [`super::child`]), so it ends when this process is stopped.
    pub(crate) fn run_git(&self, args: &[String]) -> StoreResult<std::process::Output> {
        let mut cmd = self.git_command();
        cmd.args(args);
        super::child::run(cmd, None)
    }

    /// Like [`Store::run_git`], for commands that talk to a remote and may
    /// run long: a record under the state directory lets the next run end
    /// this child if this process is killed outright.
    pub(crate) fn run_git_network(&self, args: &[String]) -> StoreResult<std::process::Output> {
        let mut cmd = self.git_command();
        cmd.args(args);
        super::child::run(cmd, Some(&self.state_dir.join(refs::CHILDREN_DIR)))
    }

    /// Attaches a receipt note to a session commit (never replaces one).
    pub fn add_receipt_note(&self, commit: ObjectId, body: &[u8], time: i64) -> StoreResult<()> {
        self.write_receipt_note(commit, body, time, false)
    }

    /// Writes `body` as the receipt note of `commit`; `replace`: over the
    /// note it has (a merge that puts back receipts a fetch dropped).
    pub(crate) fn write_receipt_note(
        &self,
        commit: ObjectId,
        body: &[u8],
        time: i64,
        replace: bool,
    ) -> StoreResult<()> {
        let sig = self.signature(time);
        let notes_ref = refs::RECEIPTS_NOTES_REF.trim_start_matches("refs/notes/");
        let mut child = self
            .git_command()
            .args([
                "-c",
                &format!("user.name={}", sig.name),
                "-c",
                &format!("user.email={}", sig.email),
            ])
            .args(["notes", &format!("--ref={notes_ref}"), "add"])
            .args(replace.then_some("-f"))
            .args(["-F", "-"])
            .arg(commit.to_string())
            .env("GIT_COMMITTER_DATE", format!("{time} +0000"))
            .env("GIT_AUTHOR_DATE", format!("{time} +0000"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|source| StoreError::Io {
                path: PathBuf::from("git"),
                source,
            })?;
        std::io::Write::write_all(child.stdin.as_mut().expect("stdin was piped"), body).map_err(
            |source| StoreError::Io {
                path: PathBuf::from("git notes"),
                source,
            },
        )?;
        let out = child.wait_with_output().map_err(|source| StoreError::Io {
            path: PathBuf::from("git"),
            source,
        })?;
        if !out.status.success() {
            return Err(StoreError::Remote(format!(
                "writing the receipt note failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// Runs `git notes --ref=<the receipts ref> args` as git-session (the
    /// notes commits it makes need a committer; the user may have none).
    pub(crate) fn receipt_notes_git(&self, args: &[String]) -> StoreResult<std::process::Output> {
        let notes_ref = refs::RECEIPTS_NOTES_REF.trim_start_matches("refs/notes/");
        let mut all = vec![
            "-c".into(),
            "user.name=git-session".into(),
            "-c".into(),
            "user.email=git-session@localhost".into(),
            "notes".into(),
            format!("--ref={notes_ref}"),
        ];
        all.extend_from_slice(args);
        self.run_git(&all)
    }

    /// Removes the receipt note of `commit`.
    pub(crate) fn remove_receipt_note(&self, commit: ObjectId) -> StoreResult<()> {
        let out = self.receipt_notes_git(&[
            "remove".into(),
            "--ignore-missing".into(),
            commit.to_string(),
        ])?;
        if !out.status.success() {
            return Err(StoreError::Remote(format!(
                "removing a receipt note failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// Returns every receipt note: the annotated commit and the note body.
    pub fn receipt_notes(&self) -> StoreResult<Vec<(ObjectId, Vec<u8>)>> {
        if self
            .repo
            .try_find_reference(refs::RECEIPTS_NOTES_REF)
            .map_err(git)?
            .is_none()
        {
            return Ok(Vec::new());
        }
        let notes_ref = refs::RECEIPTS_NOTES_REF.trim_start_matches("refs/notes/");
        let out = self.run_git(&["notes".into(), format!("--ref={notes_ref}"), "list".into()])?;
        let mut notes = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut ids = line
                .split_whitespace()
                .filter_map(|h| ObjectId::from_hex(h.as_bytes()).ok());
            if let (Some(blob), Some(commit)) = (ids.next(), ids.next()) {
                notes.push((commit, self.blob(blob)?));
            }
        }
        Ok(notes)
    }

    /// Resolves anything `git rev-parse` takes to a commit id.
    pub fn resolve_commit(&self, rev: &str) -> StoreResult<ObjectId> {
        let out = self.run_git(&[
            "rev-parse".into(),
            "--verify".into(),
            "--quiet".into(),
            format!("{rev}^{{commit}}"),
        ])?;
        let text = String::from_utf8_lossy(&out.stdout);
        ObjectId::from_hex(text.trim().as_bytes())
            .ok()
            .filter(|_| out.status.success())
            .ok_or_else(|| StoreError::NoSuchCommit(rev.to_owned()))
    }

    /// Returns the URL a push to `remote` goes to (`remote.<r>.pushurl`,
    /// else `remote.<r>.url`), or `None` if it is not a configured remote.
    pub fn remote_push_url(&self, remote: &str) -> Option<String> {
        let config = self.repo.config_snapshot();
        [
            format!("remote.{remote}.pushurl"),
            format!("remote.{remote}.url"),
        ]
        .iter()
        .find_map(|key| config.string(key.as_str()).map(|v| v.to_string()))
    }

    /// Sets `key` to `value` in this repository's own config.
    pub fn set_local_config(&self, key: &str, value: &str) -> StoreResult<()> {
        let out = self.run_git(&["config".into(), "--local".into(), key.into(), value.into()])?;
        if !out.status.success() {
            return Err(StoreError::Remote(format!(
                "git config {key}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// Returns the root commit of `HEAD` (the smallest hash when the history
    /// has several roots), or `None` before the first commit. OpenCode
    /// names a repository's project by it.
    pub fn root_commit(&self) -> Option<String> {
        let out = self
            .run_git(&["rev-list".into(), "--max-parents=0".into(), "HEAD".into()])
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace().min().map(str::to_owned)
    }

    /// Returns whether `commit` is `HEAD` or one of its ancestors (false
    /// before the first commit, or when git cannot tell).
    pub fn on_head(&self, commit: gix::ObjectId) -> bool {
        self.run_git(&[
            "merge-base".into(),
            "--is-ancestor".into(),
            commit.to_string(),
            "HEAD".into(),
        ])
        .is_ok_and(|out| out.status.success())
    }

    /// Returns the root of the work tree this store was opened in, if any.
    pub fn work_dir(&self) -> Option<PathBuf> {
        self.repo.workdir().map(std::path::Path::to_owned)
    }

    /// Returns the names of the configured remotes, sorted.
    pub fn remote_names(&self) -> Vec<String> {
        self.repo
            .remote_names()
            .into_iter()
            .map(|n| n.to_string())
            .collect()
    }

    /// Returns whether `remote` is a configured remote of this repository.
    pub fn has_remote(&self, remote: &str) -> bool {
        self.repo.find_remote(remote).is_ok()
    }

    /// Adds the session fetch refspecs to `remote.<remote>.fetch` (globs, so
    /// a plain `git fetch` brings session refs into the tracking namespace);
    /// returns how many were added. `remote.*.push` is never touched, so a
    /// plain `git push` keeps pushing only what it did.
    pub fn add_fetch_refspecs(&self, remote: &str) -> StoreResult<usize> {
        let key = format!("remote.{remote}.fetch");
        let out = self.run_git(&["config".into(), "--get-all".into(), key.clone()])?;
        let existing = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut added = 0;
        for spec in refs::fetch_refspecs(&tracking_name(remote)) {
            if existing.lines().any(|l| l == spec) {
                continue;
            }
            let out =
                self.run_git(&["config".into(), "--add".into(), key.clone(), spec.clone()])?;
            if !out.status.success() {
                return Err(StoreError::Remote(format!(
                    "git config --add {key}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            added += 1;
        }
        Ok(added)
    }

    /// Removes exactly the refspecs [`Store::add_fetch_refspecs`] adds.
    pub fn remove_fetch_refspecs(&self, remote: &str) -> StoreResult<()> {
        let key = format!("remote.{remote}.fetch");
        for spec in refs::fetch_refspecs(&tracking_name(remote)) {
            // Exit status 5 means "no such value": already gone.
            self.run_git(&[
                "config".into(),
                "--unset-all".into(),
                "--fixed-value".into(),
                key.clone(),
                spec,
            ])?;
        }
        Ok(())
    }

    /// Returns the directory hooks run from: `core.hooksPath` (relative to
    /// the work tree root when relative), else `<common dir>/hooks`.
    pub fn hooks_dir(&self) -> PathBuf {
        let configured = self
            .repo
            .config_snapshot()
            .trusted_path("core.hooksPath")
            .ok()
            .flatten();
        match configured {
            Some(p) if p.is_absolute() => p,
            Some(p) => self
                .repo
                .workdir()
                .map_or_else(|| self.repo.git_dir().join(&p), |w| w.join(&p)),
            None => self.repo.common_dir().join("hooks"),
        }
    }

    /// Returns branch, HEAD, status and recently changed files; empty
    /// parts where git cannot tell (a bare repository, an unborn branch).
    pub fn work_tree_facts(&self) -> WorkTreeFacts {
        let text = |args: &[&str]| -> Option<String> {
            let out = self
                .git_in_work_tree()
                .args(args)
                .stdin(std::process::Stdio::null())
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
        };
        let mut recent: Vec<String> = Vec::new();
        for file in text(&["log", "-n", "5", "--name-only", "--format="])
            .unwrap_or_default()
            .lines()
        {
            if !file.is_empty() && !recent.iter().any(|f| f == file) && recent.len() < 20 {
                recent.push(file.to_owned());
            }
        }
        WorkTreeFacts {
            branch: text(&["symbolic-ref", "--short", "-q", "HEAD"]).filter(|b| !b.is_empty()),
            head: text(&["rev-parse", "--short", "-q", "--verify", "HEAD"])
                .filter(|h| !h.is_empty()),
            status: text(&["status", "--porcelain"])
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect(),
            recent_files: recent,
        }
    }

    fn git_in_work_tree(&self) -> Command {
        let mut cmd = Command::new("git");
        if let Some(dir) = self.repo.workdir() {
            cmd.current_dir(dir);
        } else {
            cmd.arg("--git-dir").arg(self.repo.git_dir());
        }
        cmd
    }
}
