//! Store benchmarks on generated data, release build, real repositories on
//! disk. Run with `cargo bench --bench store`; the figures go to stdout as a
//! table and, with `--json FILE`, as JSON. `--keep` keeps the generated
//! repositories and homes (printed at the end), for profiling one command.
//!
//! Every timed operation runs the installed-style `git-session` binary as a
//! child process (what a user or a hook pays, process start included) and
//! reads the child's peak RSS with `getrusage(RUSAGE_CHILDREN)` from a
//! helper process that has that one child. Times are the median of several
//! runs on fresh repositories.

#![allow(clippy::print_stdout)] // a bench reports on stdout

#[path = "../common/mod.rs"]
mod common;

mod synth;

use std::path::{Path, PathBuf};

use common::{fresh_repo, git, measure};
use std::time::{Duration, Instant};

use git_session::clock::Clock;
use git_session::store::{CommitInfo, SeqMode, Store};
use git_session_schema::{Agent, Event, SessionHeader, SessionId};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if common::measure_child_mode(&args) {
        return;
    }
    if args.iter().any(|a| a == "--list") {
        println!("store: bench");
        return;
    }
    let json_out = args
        .iter()
        .position(|a| a == "--json")
        .map(|i| PathBuf::from(&args[i + 1]));
    let quick = args.iter().any(|a| a == "--quick");
    let keep = args.iter().any(|a| a == "--keep");
    let work = tempfile::tempdir_in(
        std::env::var_os("BENCH_DIR").unwrap_or_else(|| std::env::temp_dir().into()),
    )
    .expect("tempdir");
    let mut results = Vec::new();
    let runs = if quick { 1 } else { 3 };

    for n in [10_000u64, 100_000] {
        let file = work.path().join(format!("gen-{n}.jsonl"));
        std::fs::write(&file, synth::session_file("bench", n, 7)).expect("write");
        let raw = std::fs::metadata(&file).expect("stat").len();
        let mut times = Vec::new();
        let mut rss = 0;
        let mut repo = PathBuf::new();
        for run in 0..runs {
            repo = fresh_repo(work.path(), &format!("import-{n}-{run}"));
            let (t, r) = measure(
                &repo,
                &["import", "--canonical", file.to_str().expect("utf8")],
            );
            times.push(t);
            rss = rss.max(r);
        }
        results.push(row(
            &format!("import {n} events, one batch"),
            &times,
            rss,
            Some(raw),
        ));

        let mut times = Vec::new();
        let mut rss = 0;
        for _ in 0..runs {
            let (t, r) = measure(&repo, &["verify", "bench"]);
            times.push(t);
            rss = rss.max(r);
        }
        results.push(row(&format!("verify {n} events"), &times, rss, None));

        let (t, r) = measure(
            &repo,
            &[
                "export",
                "bench",
                "--canonical",
                "-o",
                work.path().join("out.jsonl").to_str().expect("utf8"),
            ],
        );
        results.push(row(&format!("export {n} events"), &[t], r, None));
        if n == 10_000 {
            handoffs(work.path(), &repo, &file, t, &mut results);
        }

        // A session that grew by 100 events on the remote: fetch verifies
        // the whole fetched history before it moves the local ref. The
        // reference is a plain `git fetch` of the same refs.
        {
            let remote = work.path().join(format!("grow-{n}.git"));
            git(
                work.path(),
                &["init", "-q", "--bare", remote.to_str().expect("utf8")],
            );
            let url = remote.to_str().expect("utf8");
            let (t, r) = measure(&repo, &["push", "--to", url]);
            results.push(row(
                &format!("push a {n}-event session to an empty bare remote (packs it first)"),
                &[t],
                r,
                None,
            ));
            let clone = fresh_repo(work.path(), &format!("grow-clone-{n}"));
            measure(&clone, &["fetch", url]);
            let plain = fresh_repo(work.path(), &format!("grow-plain-{n}"));
            git(
                &plain,
                &[
                    "fetch",
                    "-q",
                    url,
                    "+refs/sessions/*:refs/remotes/r/sessions/*",
                ],
            );
            let mut rng = synth::Rng::new(99);
            let mut more = String::new();
            for seq in n..n + 100 {
                synth::event_line(&mut rng, seq, &mut more);
            }
            let more_file = work.path().join(format!("more-{n}.jsonl"));
            std::fs::write(&more_file, more).expect("write");
            measure(
                &repo,
                &["append", "bench", more_file.to_str().expect("utf8")],
            );
            measure(&repo, &["push", "--to", url]);
            let started = std::time::Instant::now();
            git(
                &plain,
                &[
                    "fetch",
                    "-q",
                    url,
                    "+refs/sessions/*:refs/remotes/r/sessions/*",
                ],
            );
            let reference = started.elapsed();
            let (t, r) = measure(&clone, &["fetch", url]);
            results.push(row(
                &format!(
                    "fetch a {n}-event session grown by 100, verified before promotion (plain git fetch: {:.0} ms, ratio {:.1}x)",
                    ms(reference),
                    ms(t) / ms(reference).max(1.0)
                ),
                &[t],
                r,
                None,
            ));
        }

        if n == 100_000 {
            let (loose, packed, gc_time) = gc_sizes(&repo);
            results.push(Row {
                name: format!("repo after import of {n} events: raw JSONL {:.1} MB, loose {:.1} MB, packed after git gc {:.1} MB (gc {:.1} s)", raw as f64 / 1e6, loose as f64 / 1e6, packed as f64 / 1e6, gc_time.as_secs_f64()),
                median_ms: 0.0,
                rss_mb: 0.0,
                bytes: Some(packed),
            });
        }
    }

    // 1000 batches of 100 events through the store API (no process start
    // per batch, which is what the capture loop of a watcher pays).
    let batches = if quick { 200 } else { 1000 };
    let repo = fresh_repo(work.path(), "batches");
    let store = Store::discover(&repo).expect("open");
    let clock = Clock::system();
    let id = SessionId::new("batched").expect("id");
    let header = SessionHeader::new(id.clone(), Agent::Claude, "2026-01-01T00:00:00.000Z");
    let info = || CommitInfo {
        time: clock.now().as_second(),
        code_commit: None,
        after_commit: false,
        attach: None,
    };
    store
        .create(&header, SeqMode::Assign, &info(), |_| {
            Ok::<_, git_session::store::StoreError>(())
        })
        .expect("create");
    let mut rng = synth::Rng::new(11);
    let mut line = String::new();
    let mut per_batch = Vec::with_capacity(batches);
    let started = Instant::now();
    for b in 0..batches {
        let events: Vec<Event> = (0..100)
            .map(|i| {
                line.clear();
                synth::event_line(&mut rng, (b * 100 + i) as u64, &mut line);
                serde_json::from_str(&line).expect("generated events parse")
            })
            .collect();
        let t = Instant::now();
        store
            .append(&id, SeqMode::Assign, &info(), |sink| {
                for e in &events {
                    sink.push(e.clone())?;
                }
                Ok::<_, git_session::store::StoreError>(())
            })
            .expect("append");
        per_batch.push(t.elapsed());
    }
    let total = started.elapsed();
    // Cost must not grow with history: compare the first and last tenth.
    let tenth = (batches / 10).max(1);
    let mean = |d: &[Duration]| ms(d.iter().sum::<Duration>()) / d.len() as f64;
    let (first, last) = (
        mean(&per_batch[..tenth]),
        mean(&per_batch[batches - tenth..]),
    );
    per_batch.sort();
    results.push(Row {
        name: format!("{batches} batches of 100 events (store API): total {:.2} s, p50 {:.2} ms, p99 {:.2} ms per batch, mean of first tenth {first:.2} ms vs last tenth {last:.2} ms", total.as_secs_f64(), ms(per_batch[batches / 2]), ms(per_batch[batches * 99 / 100])),
        median_ms: ms(per_batch[batches / 2]),
        rss_mb: 0.0,
        bytes: None,
    });
    // Packs every `session.packBatches` (100) batches keep this bounded,
    // far below git's gc.auto of 6,700 (it was five per batch).
    let counted = git(&repo, &["count-objects", "-v"]);
    let loose_count = counted
        .lines()
        .find_map(|l| l.strip_prefix("count: "))
        .unwrap_or("?")
        .trim()
        .to_owned();
    results.push(Row {
        name: format!("loose objects after {batches} batches: {loose_count} (git's gc.auto: 6700)"),
        median_ms: 0.0,
        rss_mb: 0.0,
        bytes: None,
    });
    let (loose, packed, gc_time) = gc_sizes(&repo);
    results.push(Row {
        name: format!("repo after {batches} batches: loose {:.1} MB, packed after git gc {:.1} MB (gc {:.1} s)", loose as f64 / 1e6, packed as f64 / 1e6, gc_time.as_secs_f64()),
        median_ms: 0.0,
        rss_mb: 0.0,
        bytes: Some(packed),
    });

    // list of 1000 sessions (each with a few events), loose and packed.
    let sessions = 1000;
    let repo = fresh_repo(work.path(), "many");
    let store = Store::discover(&repo).expect("open");
    let mut rng = synth::Rng::new(5);
    for s in 0..sessions {
        let id = SessionId::new(format!("session-{s:04}")).expect("id");
        let header = SessionHeader::new(id.clone(), Agent::Claude, "2026-01-01T00:00:00.000Z");
        store
            .create(&header, SeqMode::Assign, &info(), |sink| {
                for seq in 0..5 {
                    line.clear();
                    synth::event_line(&mut rng, seq, &mut line);
                    let e: Event = serde_json::from_str(&line).expect("parse");
                    sink.push(e)?;
                }
                Ok::<_, git_session::store::StoreError>(())
            })
            .expect("create");
    }
    for packed in [false, true] {
        if packed {
            git(&repo, &["gc", "-q"]);
        }
        let mut times = Vec::new();
        let mut rss = 0;
        for _ in 0..(if quick { 1 } else { 5 }) {
            let (t, r) = measure(&repo, &["list"]);
            times.push(t);
            rss = rss.max(r);
        }
        // Runs after the first read the local summary index.
        let state = if packed { "after git gc" } else { "as written" };
        results.push(row(
            &format!("list {sessions} sessions ({state})"),
            &times,
            rss,
            None,
        ));
    }

    // Push all 1000 sessions to a bare remote in one operation, then fetch
    // them into an empty clone.
    let remote = work.path().join("remote.git");
    git(
        work.path(),
        &["init", "-q", "--bare", remote.to_str().expect("utf8")],
    );
    let (t, r) = measure(&repo, &["push", "--to", remote.to_str().expect("utf8")]);
    results.push(row(
        &format!("push {sessions} sessions to a bare file remote"),
        &[t],
        r,
        None,
    ));
    let other = fresh_repo(work.path(), "other-clone");
    let (t, r) = measure(&other, &["fetch", remote.to_str().expect("utf8")]);
    results.push(row(
        &format!("fetch and reconcile {sessions} sessions into an empty clone"),
        &[t],
        r,
        None,
    ));
    // Sessions go only to a remote chosen for them.
    common::git(
        &other,
        &["config", "session.remote", remote.to_str().expect("utf8")],
    );
    let (t, r) = measure(&other, &["sync", remote.to_str().expect("utf8")]);
    results.push(row(
        &format!("sync {sessions} sessions, nothing new"),
        &[t],
        r,
        None,
    ));

    // Compile a 10k-event session to a 32k-token budget, and hand it off.
    let repo = fresh_repo(work.path(), "handoff");
    let file = work.path().join("gen-10k-handoff.jsonl");
    std::fs::write(&file, synth::session_file("handoff-10k", 10_000, 3)).expect("write");
    measure(
        &repo,
        &["import", "--canonical", file.to_str().expect("utf8")],
    );
    let mut times = Vec::new();
    let mut rss = 0;
    for _ in 0..(if quick { 1 } else { 5 }) {
        let (t, r) = measure(
            &repo,
            &[
                "compile",
                "handoff-10k",
                "--for",
                "codex",
                "--budget",
                "32000",
            ],
        );
        times.push(t);
        rss = rss.max(r);
    }
    results.push(row(
        "compile 10k events for codex, 32k budget (process start and tokenizer load included)",
        &times,
        rss,
        None,
    ));
    let mut times = Vec::new();
    let mut rss = 0;
    for i in 0..(if quick { 1 } else { 3 }) {
        let home = work.path().join(format!("handoff-home-{i}"));
        let (t, r) = measure(
            &repo,
            &[
                "handoff",
                "handoff-10k",
                "--to",
                "codex",
                "--home",
                home.to_str().expect("utf8"),
            ],
        );
        times.push(t);
        rss = rss.max(r);
    }
    results.push(row(
        "handoff of 10k events to codex, end to end",
        &times,
        rss,
        None,
    ));

    print_table(&results);
    if let Some(path) = json_out {
        let rows: Vec<_> = results
            .iter()
            .map(|r| serde_json::json!({"name": r.name, "median_ms": r.median_ms, "peak_rss_mb": r.rss_mb, "bytes": r.bytes}))
            .collect();
        std::fs::write(path, serde_json::to_string_pretty(&rows).expect("json"))
            .expect("write json");
    }
    if keep {
        println!("kept {}", work.keep().display());
    }
}

struct Row {
    name: String,
    median_ms: f64,
    rss_mb: f64,
    bytes: Option<u64>,
}

fn row(name: &str, times: &[Duration], rss_kib: u64, bytes: Option<u64>) -> Row {
    let mut sorted = times.to_vec();
    sorted.sort();
    Row {
        name: name.to_owned(),
        median_ms: ms(sorted[sorted.len() / 2]),
        rss_mb: rss_kib as f64 / 1024.0,
        bytes,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<70} {:>10} {:>12}",
        "benchmark", "median ms", "peak RSS MB"
    );
    for r in rows {
        if r.rss_mb == 0.0 {
            println!("{}", r.name);
        } else {
            println!("{:<70} {:>10.1} {:>12.1}", r.name, r.median_ms, r.rss_mb);
        }
    }
}

/// Returns (loose bytes, packed bytes after `git gc`, gc time).
fn gc_sizes(repo: &Path) -> (u64, u64, Duration) {
    let kib = |text: &str, key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    let before = git(repo, &["count-objects", "-v"]);
    let t = Instant::now();
    git(repo, &["gc", "-q", "--prune=now"]);
    let gc_time = t.elapsed();
    let after = git(repo, &["count-objects", "-v"]);
    (kib(&before, "size:"), kib(&after, "size-pack:"), gc_time)
}

/// A handoff of the 10k-event session to each agent, end to end (compile,
/// render, write into a fresh home, record); target < 1 s. The reference
/// is the export of the same session in the same run. The Claude target
/// gets the same events under a Codex header (a handoff to the session's
/// own agent is a resume).
fn handoffs(work: &Path, repo: &Path, file: &Path, export: Duration, results: &mut Vec<Row>) {
    let body = std::fs::read_to_string(file).expect("read");
    let (first, rest) = body.split_once('\n').expect("a header line");
    let codex = work.join("gen-codex.jsonl");
    std::fs::write(
        &codex,
        format!(
            "{}\n{rest}",
            first
                .replace("\"agent\":\"claude\"", "\"agent\":\"codex\"")
                .replace("\"id\":\"bench\"", "\"id\":\"bench-codex\"")
                .replace("\"native_id\":\"bench\"", "\"native_id\":\"bench-codex\"")
        ),
    )
    .expect("write");
    measure(
        repo,
        &["import", "--canonical", codex.to_str().expect("utf8")],
    );
    let shared = Path::new(env!("CARGO_MANIFEST_DIR"));
    for to in ["claude", "codex", "pi", "hermes", "opencode", "dsh"] {
        let session = if to == "claude" {
            "bench-codex"
        } else {
            "bench"
        };
        let home = work.join(format!("handoff-home-{to}"));
        std::fs::create_dir_all(&home).expect("mkdir");
        // The database agents' stores, as their clients create them.
        match to {
            "hermes" => {
                let db = home.join(".hermes/state.db");
                std::fs::create_dir_all(db.parent().expect("dir")).expect("mkdir");
                std::fs::copy(shared.join("../shared/samples/hermes/oracle/state.db"), &db)
                    .expect("the Hermes sample database (shared/ beside the project)");
                rusqlite::Connection::open(&db)
                    .and_then(|c| {
                        c.execute_batch(
                            "DELETE FROM messages; DELETE FROM session_model_usage; DELETE FROM sessions;",
                        )
                    })
                    .expect("empty the sample");
            }
            "opencode" => {
                let db = home.join(".local/share/opencode/opencode.db");
                std::fs::create_dir_all(db.parent().expect("dir")).expect("mkdir");
                let schema = std::fs::read_to_string(
                    shared.join("fixtures/opencode/oracle-sample/schema.sql"),
                )
                .expect("schema");
                rusqlite::Connection::open(&db)
                    .and_then(|c| c.execute_batch(&schema))
                    .expect("create");
            }
            _ => {}
        }
        let (t, r) = measure(
            repo,
            &[
                "handoff",
                session,
                "--to",
                to,
                "--home",
                home.to_str().expect("utf8"),
            ],
        );
        results.push(row(
            &format!(
                "handoff of 10000 events to {to} (target < 1000 ms; export of the same session: {:.0} ms, ratio {:.2}x)",
                ms(export),
                ms(t) / ms(export).max(1.0)
            ),
            &[t],
            r,
            None,
        ));
    }
}
