//! What both benches share: running the release `git-session` as a child
//! and reading its peak RSS, and fresh repositories.
//!
//! A bench binary re-runs itself with `--measure-child BIN ARGS…`: that
//! helper process has exactly one child, so `getrusage(RUSAGE_CHILDREN)`
//! gives that child's peak RSS.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_git-session");

/// Handles `--measure-child` (returns true when it did: the caller exits).
pub fn measure_child_mode(args: &[String]) -> bool {
    let Some(pos) = args.iter().position(|a| a == "--measure-child") else {
        return false;
    };
    let status = Command::new(&args[pos + 1])
        .args(&args[pos + 2..])
        .status()
        .expect("spawn");
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    println!("{} {}", usage.max_rss(), status.success());
    true
}

/// Runs `git-session args` in `repo`; returns time and peak RSS (KiB).
pub fn measure(repo: &Path, args: &[&str]) -> (Duration, u64) {
    measure_env(repo, args, &[])
}

/// Like [`measure`], with extra environment variables.
pub fn measure_env(repo: &Path, args: &[&str], envs: &[(&str, &Path)]) -> (Duration, u64) {
    let me = std::env::current_exe().expect("exe");
    let started = Instant::now();
    let out = Command::new(me)
        .arg("--measure-child")
        .arg(BIN)
        .args(args)
        .current_dir(repo)
        .envs(envs.iter().map(|(k, v)| (*k, *v)))
        .env_remove("CODEX_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("PI_CODING_AGENT_DIR")
        .output()
        .expect("spawn");
    let elapsed = started.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    let mut parts = last.split_whitespace();
    let rss: u64 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    assert_eq!(
        parts.next(),
        Some("true"),
        "git-session {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (elapsed, rss)
}

/// Runs git in `dir`, asserting success; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Creates an empty repository `work/name` with an identity and no auto gc.
pub fn fresh_repo(work: &Path, name: &str) -> PathBuf {
    let dir = work.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    git(&dir, &["init", "-q", "-b", "main", "."]);
    git(&dir, &["config", "user.name", "Bench"]);
    git(&dir, &["config", "user.email", "bench@example.com"]);
    git(&dir, &["config", "gc.auto", "0"]);
    dir.canonicalize().expect("canonical")
}
