//! Search benchmark: 1M generated canonical events (10 sessions of 100k,
//! about 600 MB of canonical JSON) imported into a real repository, then
//! `git session search` run by the release binary: once cold (builds the
//! local index), then warm (index current, files in the page cache),
//! against `grep -r` and `rg` over the canonical JSON files (the same
//! events, the same bytes a grep over agent stores reads).
//!
//! `cargo bench --bench search` (1M events); `-- --quick` (100k);
//! `-- --events N` for any size. Medians of 5 warm runs.

#![allow(clippy::print_stdout)] // a bench reports on stdout

#[path = "../common/mod.rs"]
mod common;
#[path = "../store/synth.rs"]
mod synth;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{fresh_repo, measure};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time_tool(dir: &Path, tool: &str, args: &[&str], runs: usize) -> Option<Duration> {
    let mut times = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let out = Command::new(tool)
            .args(args)
            .current_dir(dir)
            .output()
            .ok()?;
        // grep exits 1 on no match; both print counts.
        if !(out.status.success() || out.status.code() == Some(1)) {
            return None;
        }
        times.push(started.elapsed());
    }
    Some(median(times))
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if common::measure_child_mode(&args) {
        return;
    }
    if args.iter().any(|a| a == "--list") {
        println!("search: bench");
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let total: u64 = args
        .iter()
        .position(|a| a == "--events")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 100_000 } else { 1_000_000 });
    let sessions = 10u64;
    let per = total / sessions;
    let work = tempfile::tempdir_in(
        std::env::var_os("BENCH_DIR").unwrap_or_else(|| std::env::temp_dir().into()),
    )
    .expect("tempdir");
    let repo = fresh_repo(work.path(), "repo");
    let json_dir = work.path().join("canonical");
    std::fs::create_dir_all(&json_dir).expect("mkdir");
    let mut bytes = 0;
    let started = Instant::now();
    for s in 0..sessions {
        let file = json_dir.join(format!("bench-{s}.jsonl"));
        std::fs::write(
            &file,
            synth::session_file(&format!("bench-{s}"), per, 100 + s),
        )
        .expect("write");
        bytes += std::fs::metadata(&file).expect("stat").len();
        measure(
            &repo,
            &["import", "--canonical", file.to_str().expect("utf8")],
        );
    }
    println!(
        "generated and imported {} events, {:.0} MB of canonical JSON, in {:.1} s",
        per * sessions,
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let json = json_dir.to_str().expect("utf8");
    let index = repo.join(".git/session/search");
    let patterns: [(&str, &[&str], &str); 3] = [
        ("absent literal", &["-F"], "unterminated string"),
        ("literal", &["-F"], "cursor schema offset"),
        ("regex", &[], "fn (parser|token) [a-z]+ Err"),
    ];
    let rg = Command::new("rg").arg("--version").output().is_ok();
    println!(
        "| pattern | cold (builds index) | warm search | peak RSS | grep -r (JSON) | rg (JSON) | grep -r (index) | warm / grep | warm / rg |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, flags, pattern) in patterns {
        let _ = std::fs::remove_dir_all(&index);
        let mut search = vec!["search", "--json"];
        search.extend_from_slice(flags);
        search.push(pattern);
        let (cold, _) = measure(&repo, &search);
        let mut warm = Vec::new();
        let mut rss = 0;
        for _ in 0..5 {
            let (t, r) = measure(&repo, &search);
            warm.push(t);
            rss = rss.max(r);
        }
        let warm = median(warm);
        let mut grep_args: Vec<&str> = vec!["-r", "-c"];
        grep_args.extend(if flags.is_empty() {
            vec!["-E"]
        } else {
            vec!["-F"]
        });
        grep_args.push(pattern);
        let mut g = grep_args.clone();
        g.push(json);
        let grep = time_tool(work.path(), "grep", &g, 5).expect("grep runs");
        let rg_t = rg
            .then(|| {
                let mut a: Vec<&str> = vec!["-c"];
                if !flags.is_empty() {
                    a.push("-F");
                }
                a.extend([pattern, json]);
                time_tool(work.path(), "rg", &a, 5)
            })
            .flatten();
        let mut gi = grep_args.clone();
        let index_text = index.to_str().expect("utf8").to_owned();
        gi.push(&index_text);
        let grep_index = time_tool(work.path(), "grep", &gi, 5).expect("grep runs");
        println!(
            "| {name} `{pattern}` | {} | {} | {} MB | {} | {} | {} | {:.2} | {} |",
            ms(cold),
            ms(warm),
            rss / 1024,
            ms(grep),
            rg_t.map(ms).unwrap_or_else(|| "not installed".into()),
            ms(grep_index),
            warm.as_secs_f64() / grep.as_secs_f64(),
            rg_t.map(|r| format!("{:.2}", warm.as_secs_f64() / r.as_secs_f64()))
                .unwrap_or_else(|| "-".into()),
        );
    }
    let index_bytes: u64 = std::fs::read_dir(&index)
        .expect("index")
        .flatten()
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    println!(
        "index size {:.0} MB for {:.0} MB of JSON",
        index_bytes as f64 / 1e6,
        bytes as f64 / 1e6
    );
}
