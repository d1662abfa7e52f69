//! Test repositories with a hermetic environment: a temp HOME, no global or
//! system git config, fixed identities and dates, and a pinned clock that
//! advances with every git-session command.

#![allow(dead_code)]

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::{Value, json};

/// A temporary git repository and the environment to run commands in it.
pub struct Repo {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    clock: Cell<i64>,
}

/// Seconds since the epoch the pinned clock starts at (2026-01-01T00:00:00Z).
pub const EPOCH: i64 = 1_767_225_600;

impl Repo {
    /// Creates a repository with one code commit on `main`.
    pub fn new() -> Repo {
        let repo = Repo::bare_dir();
        repo.git(&["init", "-q", "-b", "main", "."]);
        repo.git(&["config", "user.name", "Test User"]);
        repo.git(&["config", "user.email", "test@example.com"]);
        repo.git(&["commit", "-q", "--allow-empty", "-m", "initial"]);
        repo
    }

    /// Creates an empty directory with the hermetic environment, no repo yet.
    pub fn bare_dir() -> Repo {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Repo {
            _tmp: tmp,
            root,
            home,
            clock: Cell::new(EPOCH),
        }
    }

    /// Returns a path inside the temp dir but outside the repository.
    pub fn outside(&self, name: &str) -> PathBuf {
        self.root.parent().unwrap().join(name)
    }

    fn env(&self, cmd: &mut std::process::Command) {
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("TZ", "UTC")
            .env("LC_ALL", "C")
            .env("GIT_AUTHOR_NAME", "Test User")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test User")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z");
    }

    /// Returns a plain `git-session` process command in `dir`, clock advanced
    /// one second (for tests that spawn and kill).
    pub fn spawnable_in(&self, dir: &Path) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin!("git-session"));
        self.env(&mut cmd);
        let t = self.clock.get() + 1;
        self.clock.set(t);
        cmd.env("GIT_SESSION_TIMESTAMP", t.to_string())
            .current_dir(dir);
        cmd
    }

    /// Returns a `git-session` command in `dir`, clock advanced one second.
    pub fn session_in(&self, dir: &Path) -> Command {
        Command::from(self.spawnable_in(dir))
    }

    /// Returns a `git-session` command in `dir` on a machine with no git
    /// identity: no name or email in the environment (the hermetic config
    /// has none either).
    pub fn anonymous_session_in(&self, dir: &Path) -> Command {
        let mut cmd = self.spawnable_in(dir);
        for var in [
            "GIT_COMMITTER_NAME",
            "GIT_COMMITTER_EMAIL",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
        ] {
            cmd.env_remove(var);
        }
        Command::from(cmd)
    }

    /// Returns a `git-session` command in the repository.
    pub fn session(&self) -> Command {
        self.session_in(&self.root)
    }

    /// Runs `git-session` with `args` and asserts success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.session().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "git session {args:?} failed: {}",
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// [`Self::ok`], with stdout parsed as JSON (`args` asks for `--json`).
    pub fn ok_json(&self, args: &[&str]) -> Value {
        let out = self.ok(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("git session {args:?}: {e}: {out}"))
    }

    /// Runs `git-session` with `args`, expects exit code `code`; returns stderr.
    pub fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.session().args(args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "git session {args:?}: {}",
            text(&out.stderr)
        );
        text(&out.stderr)
    }

    /// Returns a `git` command in `dir`.
    pub fn git_in(&self, dir: &Path) -> Command {
        Command::from(self.git_process_in(dir))
    }

    /// Returns a process command for `program` in `dir`, with the
    /// hermetic environment (for wrappers such as `script`).
    pub fn program_in(&self, program: &str, dir: &Path) -> std::process::Command {
        let mut cmd = std::process::Command::new(program);
        self.env(&mut cmd);
        cmd.current_dir(dir);
        cmd
    }

    /// Returns a plain `git` process command in `dir` (for servers a test
    /// spawns and kills).
    pub fn git_process_in(&self, dir: &Path) -> std::process::Command {
        let mut cmd = std::process::Command::new("git");
        self.env(&mut cmd);
        cmd.current_dir(dir);
        cmd
    }

    /// Runs git with `args`, asserts success; returns trimmed stdout.
    pub fn git(&self, args: &[&str]) -> String {
        let out = self.git_in(&self.root).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            text(&out.stderr)
        );
        text(&out.stdout).trim_end().to_owned()
    }

    /// Runs git with `args` and `stdin`; returns trimmed stdout.
    pub fn git_stdin(&self, args: &[&str], stdin: &[u8]) -> String {
        let out = self
            .git_in(&self.root)
            .args(args)
            .write_stdin(stdin)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            text(&out.stderr)
        );
        text(&out.stdout).trim_end().to_owned()
    }

    /// Asserts that `git fsck --strict` finds nothing wrong.
    pub fn fsck(&self) {
        let out = self
            .git_in(&self.root)
            .args(["fsck", "--strict", "--no-dangling"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git fsck failed: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }

    /// Writes `lines` as a file outside the repository and returns its path.
    pub fn write_jsonl(&self, name: &str, lines: &[Value]) -> PathBuf {
        let path = self.outside(name);
        let mut body = String::new();
        for l in lines {
            body.push_str(&l.to_string());
            body.push('\n');
        }
        std::fs::write(&path, body).unwrap();
        path
    }

    /// Imports a canonical file, asserting success.
    pub fn import(&self, path: &Path) -> String {
        self.ok(&["import", "--canonical", path.to_str().unwrap()])
            .trim()
            .to_owned()
    }

    /// Returns the stored events of a session, as JSON values.
    pub fn events(&self, id: &str) -> Vec<Value> {
        let shown: Value = serde_json::from_str(&self.ok(&["show", id, "--json"])).unwrap();
        shown["events"].as_array().unwrap().clone()
    }
}

/// Returns bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Returns whether a command output succeeded.
pub fn succeeded(out: &Output) -> bool {
    out.status.success()
}

/// Returns a canonical header line.
pub fn header(id: &str) -> Value {
    json!({"header": {"format": 1, "id": id, "agent": "claude", "native_id": "n-1",
                      "cwd": "/work/project", "created": "2026-01-01T00:00:00Z", "title": "Fix the parser"}})
}

/// Returns a realistic event with seq `seq` (no checksum).
pub fn event(seq: u64) -> Value {
    let (kind, actor, payload) = match seq % 4 {
        0 => (
            "message.user",
            "user",
            json!({"text": format!("please fix bug {seq}")}),
        ),
        1 => (
            "message.assistant",
            "agent:claude",
            json!({"text": format!("Looking at bug {seq}."), "model": "m"}),
        ),
        2 => (
            "tool.call",
            "agent:claude",
            json!({"name": "Bash", "arguments": {"command": format!("cargo test {seq}")}, "tool_use_id": format!("t{seq}")}),
        ),
        _ => (
            "tool.result",
            "tool",
            json!({"tool_use_id": format!("t{}", seq - 1), "content": "ok\n".repeat(5), "is_error": false}),
        ),
    };
    json!({"seq": seq, "ts": format!("2026-01-01T00:{:02}:{:02}Z", (seq / 60) % 60, seq % 60),
           "agent": "claude", "actor": actor, "type": kind, "level": 0, "payload": payload,
           "origin": {"agent": "claude", "native_id": format!("uuid-{seq}"), "native_seq": seq}})
}

/// Returns a header line and `n` events.
pub fn session_lines(id: &str, n: u64) -> Vec<Value> {
    let mut lines = vec![header(id)];
    lines.extend((0..n).map(event));
    lines
}

/// Returns the `fixtures/` directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Copies the tree `from` into `to`, replacing `old` by `new` in every file
/// (how a native store recorded in one directory is moved to a test repo).
pub fn copy_tree(from: &Path, to: &Path, old: &str, new: &str) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target, old, new);
        } else {
            std::fs::create_dir_all(to).unwrap();
            let body = std::fs::read_to_string(entry.path()).unwrap();
            std::fs::write(&target, body.replace(old, new)).unwrap();
        }
    }
}

/// A home (outside `repo`) holding the Claude roundtrip fixture, recorded
/// as run in `repo`.
pub fn claude_home(repo: &Repo) -> PathBuf {
    let source = repo.outside("source");
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &source.join(".claude"),
        "/tmp/oracle-sample/claude/project",
        repo.root.to_str().unwrap(),
    );
    source
}

/// The session id of the Claude roundtrip fixture (see [`claude_home`]).
pub const ROUNDTRIP: &str = "d05046d2-74b1-4451-90dc-37fbd42c25e6";

/// Captures the Claude roundtrip fixture, recorded as run in `repo`.
pub fn captured_claude(repo: &Repo) {
    let source = claude_home(repo);
    repo.ok(&["import", "--home", source.to_str().unwrap()]);
}

/// Compares `actual` with `tests/it/snapshots/<name>` after replacing the
/// repository, home and temp paths by `[ROOT]`, `[HOME]` and `[TMP]`;
/// `SNAPSHOTS=overwrite` rewrites the file.
pub fn snapshot(repo: &Repo, name: &str, actual: &str) {
    let tmp = repo.root.parent().unwrap();
    let normalized = actual
        .replace(repo.root.to_str().unwrap(), "[ROOT]")
        .replace(repo.home.to_str().unwrap(), "[HOME]")
        .replace(tmp.to_str().unwrap(), "[TMP]");
    snapshot_file(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/it/snapshots")
            .join(name),
        &normalized,
    );
}

/// Compares `actual` with the file at `path` (a generated document, e.g.
/// `docs/compatibility.md`); `SNAPSHOTS=overwrite` rewrites the file.
pub fn snapshot_file(path: &Path, actual: &str) {
    snapbox::Assert::new()
        .action_env(snapbox::assert::DEFAULT_ACTION_ENV)
        .normalize_paths(false)
        .eq(
            actual.to_owned(),
            snapbox::Data::read_from(path, None).raw(),
        );
}

/// Runs `git-session` with `args`; returns (stdout, stderr, exit code).
pub fn run(repo: &Repo, args: &[&str]) -> (String, String, i32) {
    let out = repo.session().args(args).output().unwrap();
    (
        text(&out.stdout),
        text(&out.stderr),
        out.status.code().unwrap_or(-1),
    )
}

/// Makes an ed25519 SSH key `name` in `dir` (with `passphrase`, empty for
/// none) and returns the private key's path.
pub fn keygen(dir: &Path, name: &str, passphrase: &str) -> PathBuf {
    let key = dir.join(name);
    let out = std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            passphrase,
            "-C",
            "test@example.com",
            "-f",
        ])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    key
}

/// A repository that imported the Codex session `id` of
/// `fixtures/codex/CASE/native` (its project path moved to the repository).
pub fn codex_fixture_repo(case: &str, id: &str) -> (Repo, String) {
    let repo = Repo::new();
    let codex_home = repo.outside("codex-home");
    copy_tree(
        &fixtures().join("codex").join(case).join("native"),
        &codex_home,
        "/tmp/oracle-sample/codex/project",
        repo.root.to_str().unwrap(),
    );
    let out = repo
        .session()
        .env("CODEX_HOME", &codex_home)
        .args(["import", "--agent", "codex"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    (repo, id.to_owned())
}

/// Returns every file under `dir`, at any depth (none when it does not
/// exist).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Returns every rollout file under a Codex home.
pub fn codex_rollouts(home: &Path) -> Vec<PathBuf> {
    let mut found = files_under(&home.join(".codex/sessions"));
    found.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
    found
}
