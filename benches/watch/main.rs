//! Watch latency: from an agent appending a record to its session file to
//! `git session watch` having committed the batch (the line it prints after
//! the commit), release binary, real repository, one Claude session.
//! Reference: a one-shot `git session import` of one appended record (what
//! a hook pays per capture).
//!
//! `cargo bench --bench watch` (100 appends); `-- --quick` (20).

#![allow(clippy::print_stdout)] // a bench reports on stdout

#[path = "../common/mod.rs"]
#[allow(dead_code)]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{fresh_repo, measure_env};

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn record(template: &serde_json::Value, i: usize, parent: &str) -> (String, String) {
    let mut r = template.clone();
    let uuid = format!("00000000-0000-4000-8000-{i:012}");
    r["uuid"] = serde_json::json!(uuid);
    r["parentUuid"] = serde_json::json!(parent);
    r["message"] = serde_json::json!({"role": "user", "content": format!("append {i}")});
    (format!("{r}\n"), uuid)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if common::measure_child_mode(&args) {
        return;
    }
    if args.iter().any(|a| a == "--list") {
        println!("watch: bench");
        return;
    }
    let n = if args.iter().any(|a| a == "--quick") {
        20
    } else {
        100
    };
    let work = tempfile::tempdir_in(
        std::env::var_os("BENCH_DIR").unwrap_or_else(|| std::env::temp_dir().into()),
    )
    .expect("tempdir");
    let repo = fresh_repo(work.path(), "repo");
    let home = work.path().join("home");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/claude/roundtrip/native/projects/-tmp-oracle-sample-claude-project/d05046d2-74b1-4451-90dc-37fbd42c25e6.jsonl");
    let body = std::fs::read_to_string(&fixture).expect("fixture").replace(
        "/tmp/oracle-sample/claude/project",
        repo.to_str().expect("utf8"),
    );
    let encoded: String = repo
        .to_str()
        .expect("utf8")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = home.join(".claude/projects").join(encoded);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let file = dir.join("d05046d2-74b1-4451-90dc-37fbd42c25e6.jsonl");
    std::fs::write(&file, &body).expect("write");
    let template: serde_json::Value = body
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .find(|r| r["type"] == "user")
        .expect("a user record");
    let mut parent = body
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|r| r["uuid"].as_str().map(str::to_owned))
        .next_back()
        .expect("uuid");

    // Reference: one-shot imports of one appended record each.
    let envs = [("HOME", home.as_path())];
    measure_env(&repo, &["import", "--agent", "claude"], &envs);
    let mut oneshot = Vec::new();
    for i in 0..10 {
        let (line, uuid) = record(&template, i, &parent);
        parent = uuid;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .expect("open")
            .write_all(line.as_bytes())
            .expect("append");
        oneshot.push(measure_env(&repo, &["import", "--agent", "claude"], &envs).0);
    }
    oneshot.sort();

    let mut child = Command::new(common::BIN)
        .args(["watch", "--agent", "claude"])
        .current_dir(&repo)
        .env("HOME", &home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn watch");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    err.read_line(&mut line).expect("watching");
    assert!(line.starts_with("watching"), "{line}");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut lat = Vec::new();
    for i in 0..n {
        let (rec, uuid) = record(&template, 1000 + i, &parent);
        parent = uuid;
        let started = Instant::now();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .expect("open")
            .write_all(rec.as_bytes())
            .expect("append");
        line.clear();
        out.read_line(&mut line).expect("captured line");
        lat.push(started.elapsed());
        assert!(line.contains("+1 events"), "{line}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    lat.sort();
    let p50 = pct(&lat, 0.5);
    let p95 = pct(&lat, 0.95);
    println!("| what | p50 | p95 | max | target |");
    println!("| --- | --- | --- | --- | --- |");
    println!(
        "| watch: append to captured batch ({n} appends, debounce 30 ms) | {} | {} | {} | p95 < 100 ms |",
        ms(p50),
        ms(p95),
        ms(*lat.last().expect("samples"))
    );
    println!(
        "| reference: one-shot `import --agent claude` of one record (10 runs) | {} | {} | {} | |",
        ms(pct(&oneshot, 0.5)),
        ms(pct(&oneshot, 0.95)),
        ms(*oneshot.last().expect("samples"))
    );
    println!(
        "p50 watch / one-shot import: {:.2}",
        p50.as_secs_f64() / pct(&oneshot, 0.5).as_secs_f64()
    );
}
