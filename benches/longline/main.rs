//! Import time against line length: one Claude Code session holding a
//! single user message of 1, 10, 50 and 100 MB (a pasted log on one JSONL
//! line), each against the same number of bytes in ordinary 2 KB lines.
//! Linear reading means the long line costs about what the ordinary lines
//! cost (issue 16: a 50 MB line within 2x the time of 50 MB of ordinary
//! lines); a reader that rescans its buffer for each read grows with the
//! square of the line.
//!
//! Run with `cargo bench --bench longline` (`--quick` stops at 10 MB).
//! Each figure is the release `git-session import` run as a child process,
//! process start included, the median of three runs; peak RSS is the
//! child's `ru_maxrss`.

#![allow(clippy::print_stdout)] // a bench reports on stdout

#[path = "../common/mod.rs"]
mod common;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use common::{fresh_repo, measure};

const SESSION: &str = "5e551011-0000-4000-8000-000000000001";
const RUNS: usize = 3;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if common::measure_child_mode(&args) {
        return;
    }
    if args.iter().any(|a| a == "--list") {
        println!("longline: bench");
        return;
    }
    let sizes: &[usize] = if args.iter().any(|a| a == "--quick") {
        &[1, 10]
    } else {
        &[1, 10, 50, 100]
    };
    let work = tempfile::tempdir_in(
        std::env::var_os("BENCH_DIR").unwrap_or_else(|| std::env::temp_dir().into()),
    )
    .expect("tempdir");
    println!(
        "{:<44} {:>10} {:>10} {:>12}",
        "benchmark", "ms", "ms/MB", "peak RSS MB"
    );
    let mut rows = Vec::new();
    for &mb in sizes {
        let long = run(work.path(), mb, true);
        let ordinary = run(work.path(), mb, false);
        rows.push((mb, long, ordinary));
    }
    println!();
    println!(
        "{:<44} {:>10}",
        "ratio: one long line / ordinary lines", "x"
    );
    for (mb, (long, _), (ordinary, _)) in &rows {
        println!(
            "{:<44} {:>10.2}",
            format!("{mb} MB"),
            long.as_secs_f64() / ordinary.as_secs_f64()
        );
    }
}

/// Imports a session of `mb` MB of message text, on one line or in 2 KB
/// lines, `RUNS` times into fresh repositories; returns the median time
/// and the peak RSS (KiB).
fn run(work: &Path, mb: usize, one_line: bool) -> (Duration, u64) {
    let shape = if one_line { "one line" } else { "2 KB lines" };
    let mut times = Vec::new();
    let mut rss = 0;
    let _ = std::fs::remove_dir_all(work.join("home"));
    let home = work.join("home");
    for round in 0..RUNS {
        let _ = std::fs::remove_dir_all(work.join("repo"));
        let repo = fresh_repo(work, "repo");
        if round == 0 {
            let cwd = repo.to_string_lossy().into_owned();
            let project = home
                .join(".claude/projects")
                .join(git_session_adapters::claude::project_dir_name(&cwd));
            std::fs::create_dir_all(&project).expect("mkdir");
            write_session(
                &project.join(format!("{SESSION}.jsonl")),
                &cwd,
                mb,
                one_line,
            );
        }
        let home_arg = home.to_str().expect("utf8");
        let (t, r) = measure(&repo, &["import", "--agent", "claude", "--home", home_arg]);
        times.push(t);
        rss = rss.max(r);
    }
    times.sort();
    let t = times[RUNS / 2];
    println!(
        "{:<44} {:>10.0} {:>10.1} {:>12.1}",
        format!("import {mb} MB, {shape}"),
        t.as_secs_f64() * 1e3,
        t.as_secs_f64() * 1e3 / mb as f64,
        rss as f64 / 1024.0
    );
    (t, rss)
}

/// Writes a Claude Code session: a first prompt, then `mb` MB of pasted
/// text as one user message or as many 2 KB ones, then a reply.
fn write_session(path: &Path, cwd: &str, mb: usize, one_line: bool) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let mut n = 0u64;
    let mut parent: Option<String> = None;
    let mut record = |f: &mut std::io::BufWriter<std::fs::File>, role: &str, text: &str| {
        let uuid = format!("00000000-0000-4000-8000-{n:012x}");
        let line = serde_json::json!({
            "parentUuid": parent,
            "isSidechain": false,
            "type": role,
            "message": {"role": role, "content": text},
            "uuid": uuid,
            "timestamp": format!("2026-11-29T07:41:{:02}.000Z", n % 60),
            "cwd": cwd,
            "sessionId": SESSION,
            "version": "2.1.332",
        });
        serde_json::to_writer(&mut *f, &line).expect("write");
        f.write_all(b"\n").expect("write");
        parent = Some(uuid);
        n += 1;
    };
    record(&mut f, "user", "Here is the log:");
    let total = mb << 20;
    let piece = if one_line { total } else { 2048 };
    let mut words = Words(0x9e37_79b9_7f4a_7c15);
    let mut written = 0;
    while written < total {
        let text = words.text(piece.min(total - written));
        written += text.len();
        record(&mut f, "user", &text);
    }
    record(&mut f, "assistant", "Read it.");
    f.flush().expect("flush");
}

/// Deterministic log-like text: short words, spaces and newlines.
struct Words(u64);

impl Words {
    fn text(&mut self, len: usize) -> String {
        const WORDS: [&str; 12] = [
            "error",
            "retry",
            "connect",
            "timeout",
            "ok",
            "GET",
            "/api/v1/items",
            "200",
            "cache",
            "miss",
            "worker-7",
            "done",
        ];
        let mut s = String::with_capacity(len + 16);
        while s.len() < len {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            s.push_str(WORDS[(self.0 % 12) as usize]);
            s.push(if self.0.is_multiple_of(9) { '\n' } else { ' ' });
        }
        s.truncate(len);
        s
    }
}
