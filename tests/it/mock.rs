//! The real clients (from the oracle prefix) against the project's scripted
//! mock model (`tests/oracle/mockllm.py`): starting the mock, the clients'
//! hermetic environments, and reading back what they sent to the model.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

/// A running mock model; ended (by its own handle) when dropped.
pub struct Mock {
    child: Child,
    /// Every request the clients sent, one JSON line each.
    pub log: PathBuf,
    pub port: String,
}

impl Mock {
    /// Starts `mockllm.py` with `args` in `work` (created), on a free port.
    pub fn start(work: &Path, args: &[&str]) -> Mock {
        std::fs::create_dir_all(work).unwrap();
        let log = work.join("requests.jsonl");
        let port_file = work.join("port");
        let child = Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/mockllm.py"))
            .args(args)
            .arg("--log")
            .arg(&log)
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut mock = Mock {
            child,
            log,
            port: String::new(),
        };
        let started = Instant::now();
        while std::fs::read_to_string(&port_file).map_or(true, |p| p.trim().is_empty()) {
            assert!(started.elapsed().as_secs() < 20, "the mock did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        mock.port = std::fs::read_to_string(&port_file)
            .unwrap()
            .trim()
            .to_owned();
        mock
    }

    /// The requests whose path contains `path` (e.g. `/messages`).
    pub fn requests(&self, path: &str) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .filter(|r: &Value| r["path"].as_str().is_some_and(|p| p.contains(path)))
            .collect()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client process with the repository's hermetic environment (HOME, git
/// identity, clock) and the oracle's clients first on PATH.
fn client(repo: &Repo, program: &str) -> Command {
    let prefix = crate::oracle::prefix();
    let base = repo.spawnable_in(&repo.root);
    let mut cmd = Command::new(prefix.join("bin").join(program));
    cmd.env_clear();
    for (k, v) in base.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let path = format!(
        "{}:{}",
        prefix.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", path)
        .env("TERM", "dumb")
        .current_dir(&repo.root)
        .stdin(Stdio::null());
    cmd
}

/// Claude Code in print mode against `mock`, in the repository.
pub fn claude(repo: &Repo, mock: &Mock, prompt: &str) -> Command {
    let mut cmd = client(repo, "claude");
    cmd.env("IS_SANDBOX", "1")
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", mock.port),
        )
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("ENABLE_TOOL_SEARCH", "false")
        .args(["-p", prompt])
        .args(["--dangerously-skip-permissions", "--output-format", "json"]);
    cmd
}

/// `codex exec` against `mock` (a custom provider, the plain function-tool
/// model), in the repository; CODEX_HOME is the repository's HOME/.codex.
pub fn codex(repo: &Repo, mock: &Mock, prompt: &str) -> Command {
    let mut cmd = client(repo, "codex");
    std::fs::create_dir_all(repo.home.join(".codex")).unwrap();
    let url = format!("http://127.0.0.1:{}/v1", mock.port);
    cmd.env("CODEX_HOME", repo.home.join(".codex"))
        .env("OPENAI_API_KEY", "dummy")
        .env("LANG", "C.UTF-8")
        .arg("exec")
        .args(["-c", "model_provider=\"mock\""])
        .arg("-c")
        .arg(format!(
            "model_providers.mock={{name=\"OracleMock\",base_url=\"{url}\",env_key=\"OPENAI_API_KEY\",wire_api=\"responses\"}}"
        ))
        .args(["-c", "model=\"gpt-mock\""])
        .args(["-c", "check_for_update_on_startup=false"])
        .args(["-c", "features.plugins=false"])
        .args(["--json", "--skip-git-repo-check"])
        .arg("--dangerously-bypass-approvals-and-sandbox")
        .arg(prompt);
    cmd
}

/// Runs a client and asserts it succeeded; returns its stdout.
pub fn run_ok(mut cmd: Command, what: &str) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}
