//! Capture and write-back benchmarks on generated native sessions: a
//! 100k-record Claude Code transcript, a 100k-line Codex rollout, a
//! 100k-entry Pi session tree with branches, a Hermes Agent `state.db`
//! of 110k messages in 1,000 sessions (`hermes.rs`) and a 100k-event
//! DeepSeek Harness log (zstd frames, `dsh.rs`).
//! Run with `cargo bench --bench capture` (`--quick` for 20k records).
//! `--scale` runs only Claude first imports of 10k, 100k and 400k records
//! (time per record and peak RSS of each).
//! `--many` runs only the first imports of 1,000 sessions (1,000 Claude
//! files of 110 records, the Hermes database), with bulk capture and with
//! `session.bulkCapture=false` alternated in one run (`--quick`: 200
//! sessions; `--rounds N`, default 3).
//!
//! The Pi session is built from the turn of a real Pi 1.6.0 session
//! (`fixtures/pi/roundtrip-1.6.0`: user, assistant with thinking and a bash
//! call, tool result, answer), repeated with fresh 8-hex ids; every 50th
//! turn goes back two turns and branches there (a `branch_summary` then the
//! new turn), so the file is a tree with side branches, as Pi writes it.
//! Its import and resume are reported as ratios to the Claude figures of
//! the same run.
//!
//! The files are made by replicating the records of real sessions in
//! `fixtures/` (the roundtrip transcript, the function-tools rollout) with
//! fresh ids, a continuous uuid chain and tool outputs of realistic length
//! (most a few hundred bytes, one in ten several kilobytes). Each figure is
//! the release `git-session` binary run as a child process, process start
//! included; peak RSS is the child's `ru_maxrss`.

#![allow(clippy::print_stdout)] // a bench reports on stdout

#[path = "../common/mod.rs"]
mod common;
mod dsh;
mod hermes;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{fresh_repo, measure, measure_env};
use std::time::Duration;

use serde_json::Value;

const CLAUDE_TEMPLATE: &str = "fixtures/claude/roundtrip/native/projects/-tmp-oracle-sample-claude-project/d05046d2-74b1-4451-90dc-37fbd42c25e6.jsonl";
const CODEX_DIR: &str = "fixtures/codex/function-tools/native/sessions/2026/11/29";
const OLD_CWD_CLAUDE: &str = "/tmp/oracle-sample/claude/project";
const OLD_CWD_CODEX: &str = "/tmp/oracle-sample/codex/project";
const PI_TEMPLATE: &str = "fixtures/pi/roundtrip-1.6.0/native/sessions/--tmp-oracle-sample-pi-project--/2026-11-29T07-41-50-519Z_01a22640-cc36-7053-9435-ced9260305c0.jsonl";
const OLD_CWD_PI: &str = "/tmp/oracle-sample/pi/project";
const PI_ID: &str = "01a22640-cc36-7053-9435-ced9260305c0";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if common::measure_child_mode(&args) {
        return;
    }
    if args.iter().any(|a| a == "--list") {
        println!("capture: bench");
        return;
    }
    let records: usize = if args.iter().any(|a| a == "--quick") {
        20_000
    } else {
        100_000
    };
    let work = tempfile::tempdir_in(
        std::env::var_os("BENCH_DIR").unwrap_or_else(|| std::env::temp_dir().into()),
    )
    .expect("tempdir");
    // `--generate DIR` only writes the repositories and agent homes into DIR
    // and keeps them, for profiling one command by hand.
    let generate = args
        .iter()
        .position(|a| a == "--generate")
        .map(|i| PathBuf::from(&args[i + 1]));
    let work_dir = generate.clone().unwrap_or_else(|| work.path().to_owned());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    println!("{:<64} {:>10} {:>12}", "benchmark", "ms", "peak RSS MB");
    // `--hermes` runs the Hermes Agent database benchmarks alone, after one
    // full Claude import of the same size as their reference.
    // `--many` runs the first imports of many sessions (1,000 Claude
    // sessions, the Hermes database) with the store's bulk capture and,
    // as the same-run reference, with `session.bulkCapture=false`.
    if args.iter().any(|a| a == "--many") {
        let rounds = args
            .iter()
            .position(|a| a == "--rounds")
            .and_then(|i| args.get(i + 1)?.parse().ok())
            .unwrap_or(3);
        many_sessions(&work_dir, manifest, records < 100_000, rounds);
        return;
    }
    if args.iter().any(|a| a == "--scale") {
        scaling(&work_dir, manifest);
        return;
    }
    if args.iter().any(|a| a == "--hermes") {
        let reference = claude_reference(&work_dir, manifest, records);
        hermes::bench(&work_dir, manifest, records < 100_000, Some(reference));
        return;
    }

    // Claude Code.
    let repo = fresh_repo(&work_dir, "claude-repo");
    let cwd = repo.to_string_lossy().into_owned();
    let template = std::fs::read_to_string(manifest.join(CLAUDE_TEMPLATE))
        .expect("template")
        .replace(OLD_CWD_CLAUDE, &cwd);
    let (lines, extra) = replicate(
        &template,
        records,
        100,
        &[
            "uuid",
            "parentUuid",
            "id",
            "tool_use_id",
            "promptId",
            "sourceToolAssistantUUID",
            "messageId",
            "leafUuid",
        ],
        true,
    );
    let home = work_dir.join("claude-home");
    let project = home
        .join(".claude/projects")
        .join(git_session_adapters::claude::project_dir_name(&cwd));
    std::fs::create_dir_all(&project).expect("mkdir");
    let file = project.join("d05046d2-74b1-4451-90dc-37fbd42c25e6.jsonl");
    std::fs::write(&file, lines.concat()).expect("write");
    let mut claude_figures = None;
    if generate.is_some() {
        std::fs::write(work_dir.join("claude-extra.jsonl"), extra.concat()).expect("write");
    } else {
        claude_figures = Some(run_all(
            &repo,
            &home,
            &file,
            &extra,
            "claude",
            "d05046d2-74b1-4451-90dc-37fbd42c25e6",
            records,
            &work_dir,
        ));
    }
    if generate.is_none() {
        dsh::bench(
            &work_dir,
            manifest,
            records,
            claude_figures.as_ref().map(|c| c.full),
        );
    }

    // Pi.
    let repo = fresh_repo(&work_dir, "pi-repo");
    let cwd = repo.to_string_lossy().into_owned();
    let template = std::fs::read_to_string(manifest.join(PI_TEMPLATE))
        .expect("template")
        .replace(OLD_CWD_PI, &cwd);
    let (lines, extra) = pi_tree(&template, records, 100);
    let home = work_dir.join("pi-home");
    let dir = home
        .join(".pi/agent/sessions")
        .join(git_session_adapters::pi::session_dir_name(&cwd));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let file = dir.join(Path::new(PI_TEMPLATE).file_name().expect("name"));
    std::fs::write(&file, lines.concat()).expect("write");
    if generate.is_some() {
        std::fs::write(work_dir.join("pi-extra.jsonl"), extra.concat()).expect("write");
    } else {
        let pi = run_all(&repo, &home, &file, &extra, "pi", PI_ID, records, &work_dir);
        if let Some(claude) = claude_figures {
            for (name, p, c) in [
                ("full import", pi.full, claude.full),
                ("resume", pi.resume, claude.resume),
            ] {
                println!(
                    "{:<64} {:>10.2} {:>12}",
                    format!("pi / claude, {name} (ratio, same run)"),
                    p.as_secs_f64() / c.as_secs_f64(),
                    ""
                );
            }
        }
    }

    // Codex CLI.
    let repo = fresh_repo(&work_dir, "codex-repo");
    let cwd = repo.to_string_lossy().into_owned();
    let rollout = std::fs::read_dir(manifest.join(CODEX_DIR))
        .expect("dir")
        .next()
        .expect("a rollout")
        .expect("entry")
        .path();
    let template = std::fs::read_to_string(&rollout)
        .expect("template")
        .replace(OLD_CWD_CODEX, &cwd);
    let (lines, extra) = replicate(
        &template,
        records,
        100,
        &["call_id", "id", "turn_id", "item_id"],
        false,
    );
    let home = work_dir.join("codex-home");
    let dir = home.join(".codex/sessions/2026/11/29");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let file = dir.join(rollout.file_name().expect("name"));
    std::fs::write(&file, lines.concat()).expect("write");
    if generate.is_some() {
        std::fs::write(work_dir.join("codex-extra.jsonl"), extra.concat()).expect("write");
        // Hermes: the database of the full-import bench, recorded as run
        // in `hermes-repo`.
        let repo = fresh_repo(&work_dir, "hermes-repo");
        let sessions = if records < 100_000 { 200 } else { 1000 };
        hermes::generate(
            manifest,
            &work_dir.join("hermes-home"),
            &repo.to_string_lossy(),
            sessions,
            110,
        );
        println!("generated under {}", work_dir.display());
    } else {
        run_all(
            &repo,
            &home,
            &file,
            &extra,
            "codex",
            "01a22641-1298-70e1-90e6-4b6faeb436bb",
            records,
            &work_dir,
        );
        hook_bench(&work_dir, manifest);
    }
    if generate.is_none() {
        hermes::bench(&work_dir, manifest, records < 100_000, None);
    }
}

/// Imports a generated Claude transcript of `records` records once into a
/// fresh repository; returns the time and peak RSS (KiB), the reference
/// the Hermes figures are given as ratios to.
fn claude_reference(work_dir: &Path, manifest: &Path, records: usize) -> (Duration, u64) {
    let repo = fresh_repo(work_dir, "claude-reference-repo");
    let cwd = repo.to_string_lossy().into_owned();
    let template = std::fs::read_to_string(manifest.join(CLAUDE_TEMPLATE))
        .expect("template")
        .replace(OLD_CWD_CLAUDE, &cwd);
    let keys = [
        "uuid",
        "parentUuid",
        "id",
        "tool_use_id",
        "promptId",
        "sourceToolAssistantUUID",
        "messageId",
        "leafUuid",
    ];
    let (lines, _) = replicate(&template, records, 0, &keys, true);
    let home = work_dir.join("claude-reference-home");
    let project = home
        .join(".claude/projects")
        .join(git_session_adapters::claude::project_dir_name(&cwd));
    std::fs::create_dir_all(&project).expect("mkdir");
    let file = project.join("d05046d2-74b1-4451-90dc-37fbd42c25e6.jsonl");
    std::fs::write(&file, lines.concat()).expect("write");
    let home_arg = home.to_str().expect("utf8");
    let (t, rss) = measure(&repo, &["import", "--agent", "claude", "--home", home_arg]);
    report(
        &format!("reference: claude import {records} records, full"),
        t,
        rss,
    );
    (t, rss)
}

/// Claude first imports of 10k, 100k and 400k records, each into a fresh
/// repository (issue 18: time linear in the input, memory flat); prints
/// the time per record and the peak RSS of each.
fn scaling(work_dir: &Path, manifest: &Path) {
    let mut runs = Vec::new();
    for records in [10_000, 100_000, 400_000] {
        let dir = work_dir.join(format!("scale-{records}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        runs.push((records, claude_reference(&dir, manifest, records)));
    }
    for (records, (t, rss)) in runs {
        println!(
            "{:<64} {:>10.2} {:>12}",
            format!("claude import {records} records: us per record"),
            t.as_secs_f64() * 1e6 / records as f64,
            rss / 1024
        );
    }
}

/// Imports into the repository given, returning time and peak RSS.
type Import<'a> = dyn Fn(&Path) -> (Duration, u64) + 'a;

/// Moves `path` out of the way into `work_dir/aside/` instead of deleting
/// it: on this project's machine (ext4 without a journal) every file
/// created soon after thousands were deleted steps over their inodes, and a
/// run timed right after deleting the last one's repository paid for it
/// (see docs/benchmarks.md). The work directory goes at the bench's end.
fn set_aside(work_dir: &Path, path: &Path) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let aside = work_dir.join("aside");
    std::fs::create_dir_all(&aside).expect("mkdir aside");
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::fs::rename(path, aside.join(n.to_string())).expect("move aside");
}

/// First imports of many sessions, alternating bulk capture on and off
/// (three rounds each, fresh repositories): 1,000 Claude sessions of 110
/// records, then the Hermes database of 1,000 sessions.
fn many_sessions(work_dir: &Path, manifest: &Path, quick: bool, rounds: usize) {
    const ORIGINAL: &str = "d05046d2-74b1-4451-90dc-37fbd42c25e6";
    let sessions = if quick { 200 } else { 1000 };
    let keys = [
        "uuid",
        "parentUuid",
        "id",
        "tool_use_id",
        "promptId",
        "sourceToolAssistantUUID",
        "messageId",
        "leafUuid",
    ];
    let run = |name: &str, bulk: bool, import: &Import| {
        let repo = fresh_repo(
            work_dir,
            &format!("{name}-{}", if bulk { "bulk" } else { "plain" }),
        );
        if !bulk {
            common::git(&repo, &["config", "session.bulkCapture", "false"]);
        }
        let figure = import(&repo);
        let loose = common::git(&repo, &["count-objects"]);
        set_aside(work_dir, &repo);
        (figure, loose.trim().to_owned())
    };
    let cwd_of = |repo: &Path| repo.to_string_lossy().into_owned();
    // Claude: the generated files name the repository they ran in, so each
    // repository gets its own home.
    let claude = |repo: &Path| {
        let template = std::fs::read_to_string(manifest.join(CLAUDE_TEMPLATE))
            .expect("template")
            .replace(OLD_CWD_CLAUDE, &cwd_of(repo));
        let (lines, _) = replicate(&template, 110, 0, &keys, true);
        let text = lines.concat();
        let home = work_dir.join("many-claude-home");
        let _ = std::fs::remove_dir_all(&home);
        let project =
            home.join(".claude/projects")
                .join(git_session_adapters::claude::project_dir_name(&cwd_of(
                    repo,
                )));
        std::fs::create_dir_all(&project).expect("mkdir");
        for i in 0..sessions {
            let id = format!("{i:08x}-0000-4000-8000-{i:012x}");
            std::fs::write(
                project.join(format!("{id}.jsonl")),
                text.replace(ORIGINAL, &id),
            )
            .expect("write");
        }
        let home_arg = home.to_str().expect("utf8");
        let figure = measure(repo, &["import", "--agent", "claude", "--home", home_arg]);
        set_aside(work_dir, &home);
        figure
    };
    let hermes = |repo: &Path| {
        let home = work_dir.join("many-hermes-home");
        let _ = std::fs::remove_dir_all(&home);
        hermes::generate(manifest, &home, &cwd_of(repo), sessions, 110);
        let home_arg = home.to_str().expect("utf8");
        let figure = measure(repo, &["import", "--agent", "hermes", "--home", home_arg]);
        set_aside(work_dir, &home);
        figure
    };
    let cases: [(&str, &Import); 2] = [("claude", &claude), ("hermes", &hermes)];
    for (name, import) in cases {
        let mut on = Vec::new();
        let mut off = Vec::new();
        for round in 0..rounds.max(1) {
            // Alternate which goes first, so load drifts hit both.
            for bulk in if round % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            } {
                let ((t, rss), loose) = run(&format!("many-{name}"), bulk, import);
                if bulk {
                    on.push((t, rss, loose))
                } else {
                    off.push((t, rss, loose))
                }
            }
        }
        on.sort();
        off.sort();
        // The median of the rounds run (`--rounds N`, default 3).
        let (m, n) = (&on[on.len() / 2], &off[off.len() / 2]);
        let rounds = on.len();
        let label = format!("{name}: first import of {sessions} sessions");
        report(
            &format!("{label}, bulk capture (median of {rounds})"),
            m.0,
            m.1,
        );
        println!("{:<64} {}", "  objects", m.2);
        report(
            &format!("{label}, batch by batch (median of {rounds})"),
            n.0,
            n.1,
        );
        println!("{:<64} {}", "  objects", n.2);
        println!(
            "{:<64} {:>10.2}",
            format!("{name}: bulk / batch by batch (ratio of medians)"),
            m.0.as_secs_f64() / n.0.as_secs_f64()
        );
    }
}

/// The post-commit hook in a repository with 200 tracked Claude sessions:
/// none changed, then 20 of them grown by 100 records each.
fn hook_bench(work_dir: &Path, manifest: &Path) {
    const SESSIONS: usize = 200;
    const ORIGINAL: &str = "d05046d2-74b1-4451-90dc-37fbd42c25e6";
    let repo = fresh_repo(work_dir, "hook-repo");
    let cwd = repo.to_string_lossy().into_owned();
    let template = std::fs::read_to_string(manifest.join(CLAUDE_TEMPLATE))
        .expect("template")
        .replace(OLD_CWD_CLAUDE, &cwd);
    let home = work_dir.join("hook-home");
    let project = home
        .join(".claude/projects")
        .join(git_session_adapters::claude::project_dir_name(&cwd));
    std::fs::create_dir_all(&project).expect("mkdir");
    let keys = [
        "uuid",
        "parentUuid",
        "id",
        "tool_use_id",
        "promptId",
        "sourceToolAssistantUUID",
        "messageId",
        "leafUuid",
    ];
    let (lines, extra) = replicate(&template, 60, 100, &keys, true);
    let (lines, extra) = (lines.concat(), extra.concat());
    let mut grow = Vec::new();
    for s in 0..SESSIONS {
        let sid = format!("{s:08x}-74b1-4451-90dc-37fbd42c25e6");
        let file = project.join(format!("{sid}.jsonl"));
        std::fs::write(&file, lines.replace(ORIGINAL, &sid)).expect("write");
        if s % (SESSIONS / 20) == 0 {
            grow.push((file, extra.replace(ORIGINAL, &sid)));
        }
    }
    let envs = [("HOME", home.as_path())];
    let (t, rss) = measure_env(&repo, &["import", "--agent", "claude"], &envs);
    report(
        &format!("hook setup: first import of {SESSIONS} sessions (60 records each)"),
        t,
        rss,
    );
    let mut times = Vec::new();
    let mut rss = 0;
    for _ in 0..5 {
        let (t, r) = measure_env(&repo, &["hook", "post-commit"], &envs);
        times.push(t);
        rss = rss.max(r);
    }
    times.sort();
    report(
        &format!("hook post-commit, {SESSIONS} tracked sessions, none changed (median of 5)"),
        times[2],
        rss,
    );
    for (file, more) in &grow {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(file)
            .expect("open");
        std::io::Write::write_all(&mut f, more.as_bytes()).expect("append");
    }
    let (t, rss) = measure_env(&repo, &["hook", "post-commit"], &envs);
    report(
        &format!(
            "hook post-commit, {} of {SESSIONS} sessions grew by 100 records",
            grow.len()
        ),
        t,
        rss,
    );
    let refs = Command::new("git")
        .args(["rev-list", "--count", "--all"])
        .current_dir(&repo)
        .output()
        .expect("git");
    assert!(refs.status.success());
}

/// Holds the figures of one agent's run, for ratios between agents.
struct Figures {
    full: Duration,
    resume: Duration,
}

#[allow(clippy::too_many_arguments)]
fn run_all(
    repo: &Path,
    home: &Path,
    file: &Path,
    extra: &[String],
    agent: &str,
    id: &str,
    records: usize,
    work: &Path,
) -> Figures {
    let size = std::fs::metadata(file).expect("stat").len();
    let home_arg = home.to_str().expect("utf8");
    // Redaction off, encryption on (with redaction) and redaction on
    // (the default) in the same run, in turn, each in a new repository at
    // the same path (the sessions' cwd); the last one (redaction on, no
    // encryption) is kept for the benchmarks after it. Encryption is to one
    // age X25519 recipient (`session.recipients`).
    let recipient = {
        let id = age::x25519::Identity::generate();
        id.to_public().to_string()
    };
    let mut on = Vec::new();
    let mut off = Vec::new();
    let mut sealed = Vec::new();
    let mut rss = 0;
    for round in 0..REDACTION_ROUNDS * 3 {
        let mode = round % 3;
        set_aside(repo.parent().expect("parent"), repo);
        let name = repo.file_name().expect("name").to_str().expect("utf8");
        fresh_repo(repo.parent().expect("parent"), name);
        match mode {
            0 => {
                common::git(repo, &["config", "session.redact", "false"]);
            }
            1 => {
                common::git(repo, &["config", "session.recipients", &recipient]);
            }
            _ => {}
        }
        let (t, r) = measure(repo, &["import", "--agent", agent, "--home", home_arg]);
        match mode {
            0 => off.push(t),
            1 => sealed.push(t),
            _ => {
                on.push(t);
                rss = r;
            }
        }
    }
    let (on, off, sealed) = (median(&mut on), median(&mut off), median(&mut sealed));
    report(
        &format!(
            "{agent}: import {records} records ({:.0} MB), full",
            size as f64 / 1e6
        ),
        on,
        rss,
    );
    report(&format!("{agent}: same, session.redact=false"), off, 0);
    report(
        &format!("{agent}: same, encrypted (session.recipients)"),
        sealed,
        0,
    );
    println!(
        "{:<64} {:>10.3}",
        format!("{agent}: redaction on / off (median of {REDACTION_ROUNDS})"),
        on.as_secs_f64() / off.as_secs_f64()
    );
    println!(
        "{:<64} {:>10.3}",
        format!("{agent}: encrypted / plain (median of {REDACTION_ROUNDS})"),
        sealed.as_secs_f64() / on.as_secs_f64()
    );
    let (t, rss) = measure(repo, &["import", "--agent", agent, "--home", home_arg]);
    report(&format!("{agent}: import again, nothing new"), t, rss);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(file)
        .expect("open");
    std::io::Write::write_all(&mut f, extra.concat().as_bytes()).expect("append");
    drop(f);
    let (t, rss) = measure(repo, &["import", "--agent", agent, "--home", home_arg]);
    report(
        &format!(
            "{agent}: incremental import of {} appended records",
            extra.len()
        ),
        t,
        rss,
    );
    let target = work.join(format!("{agent}-resume-home"));
    std::fs::create_dir_all(&target).expect("mkdir");
    let (resume, rss) = measure(
        repo,
        &["resume", id, "--home", target.to_str().expect("utf8")],
    );
    report(
        &format!(
            "{agent}: resume (render and write) {} records",
            records + extra.len()
        ),
        resume,
        rss,
    );
    Figures { full: on, resume }
}

/// Returns a Pi session of `n` entries (header included) and `more`
/// entries appended to it, built from the template's turn (see the module
/// docs): ids are 8 hex digits, `parentId` the previous entry, except that
/// every 50th turn branches from the entry two turns back.
fn pi_tree(template: &str, n: usize, more: usize) -> (Vec<String>, Vec<String>) {
    let records: Vec<Value> = template
        .lines()
        .map(|l| serde_json::from_str(l).expect("template json"))
        .collect();
    let role = |r: &Value| {
        r.pointer("/message/role")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    // The head: header, model and thinking level, system prompt; the turn:
    // everything from the first user message on.
    let turn_at = records
        .iter()
        .position(|r| role(r).as_deref() == Some("user"))
        .expect("a user message");
    let (head, turn) = records.split_at(turn_at);
    let mut out: Vec<String> = head.iter().map(|r| format!("{r}\n")).collect();
    let mut last = head
        .last()
        .and_then(|r| r["id"].as_str())
        .map(str::to_owned);
    let mut next_id = 0u64;
    let mut fresh = || {
        next_id += 1;
        format!("{next_id:08x}")
    };
    // The last entry of each of the previous turns, to branch from.
    let mut turn_ends: Vec<String> = Vec::new();
    let mut filler = 0u64;
    let mut turns = 0usize;
    while out.len() < n + more {
        if turns > 0 && turns.is_multiple_of(50) && turn_ends.len() >= 3 {
            let from = turn_ends[turn_ends.len() - 3].clone();
            let id = fresh();
            let summary = serde_json::json!({"type": "branch_summary", "id": id, "parentId": from,
                "timestamp": "2026-11-29T07:42:00.000Z", "fromId": last,
                "summary": format!("Went back from turn {turns}.")});
            out.push(format!("{summary}\n"));
            last = Some(id);
        }
        let call_id = format!("call_b{turns:08x}");
        for r in turn {
            let mut r = r.clone();
            let id = fresh();
            r["id"] = Value::String(id.clone());
            r["parentId"] = last.clone().map_or(Value::Null, Value::String);
            if let Some(blocks) = r
                .pointer_mut("/message/content")
                .and_then(Value::as_array_mut)
            {
                for b in blocks.iter_mut() {
                    if b["type"] == "toolCall" {
                        b["id"] = Value::String(call_id.clone());
                    }
                }
            }
            if role(&r).as_deref() == Some("toolResult") {
                r["message"]["toolCallId"] = Value::String(call_id.clone());
                filler += 1;
                let lines = if filler.is_multiple_of(10) { 60 } else { 6 };
                let mut text = String::from("(no output)");
                for i in 0..lines {
                    text.push_str(&format!(
                        "\ntest module_{i}::case_{filler} ... ok (0.0{}s)",
                        i % 9
                    ));
                }
                r["message"]["content"][0]["text"] = Value::String(text);
            }
            out.push(format!("{r}\n"));
            last = Some(id);
            if out.len() == n + more {
                break;
            }
        }
        if let Some(l) = &last {
            turn_ends.push(l.clone());
        }
        turns += 1;
    }
    let extra = out.split_off(n);
    (out, extra)
}

/// Full imports timed with redaction on, off, and with encryption.
const REDACTION_ROUNDS: usize = 3;

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn report(name: &str, t: Duration, rss_kib: u64) {
    println!(
        "{name:<64} {:>10.1} {:>12.1}",
        t.as_secs_f64() * 1000.0,
        rss_kib as f64 / 1024.0
    );
}

/// Returns `n` lines made by repeating the template's records after its
/// first line, then `more` lines continuing the same way. Ids under `keys`
/// get a per-copy suffix; with `chain`, the first record of each copy
/// continues the previous copy's last uuid.
fn replicate(
    template: &str,
    n: usize,
    more: usize,
    keys: &[&str],
    chain: bool,
) -> (Vec<String>, Vec<String>) {
    let records: Vec<Value> = template
        .lines()
        .map(|l| serde_json::from_str(l).expect("template json"))
        .collect();
    let (head, body) = records.split_at(1);
    let mut ids = HashSet::new();
    for r in body {
        collect_ids(r, keys, &mut ids);
    }
    let mut out = vec![format!("{}\n", head[0])];
    let mut last_uuid: Option<String> = head[0]
        .get("uuid")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut copy = 0usize;
    let mut filler = 0u64;
    while out.len() < n + more {
        // A long session re-sends the big per-prompt records (attachments,
        // prompt snapshots, request shapes) once per prompt, not once per
        // tool call: keep them in every 20th copy only, relinking children
        // of a dropped record to its parent.
        let mut dropped: std::collections::HashMap<String, Value> =
            std::collections::HashMap::new();
        for r in body {
            let mut r = r.clone();
            rename_ids(&mut r, &ids, copy);
            if chain && r.get("parentUuid").is_some_and(Value::is_null) && r.get("uuid").is_some() {
                r["parentUuid"] = last_uuid.clone().map_or(Value::Null, Value::String);
            }
            while let Some(parent) = r
                .get("parentUuid")
                .and_then(Value::as_str)
                .and_then(|p| dropped.get(p))
                .cloned()
            {
                r["parentUuid"] = parent;
            }
            let heavy = matches!(
                r.get("type").and_then(Value::as_str),
                Some("attachment" | "api-request-shape" | "api-request-blob")
            );
            if chain && heavy && !copy.is_multiple_of(20) {
                if let Some(u) = r.get("uuid").and_then(Value::as_str) {
                    dropped.insert(
                        u.to_owned(),
                        r.get("parentUuid").cloned().unwrap_or(Value::Null),
                    );
                }
                continue;
            }
            lengthen_outputs(&mut r, &mut filler);
            if let Some(u) = r.get("uuid").and_then(Value::as_str) {
                last_uuid = Some(u.to_owned());
            }
            out.push(format!("{r}\n"));
            if out.len() == n + more {
                break;
            }
        }
        copy += 1;
    }
    let extra = out.split_off(n);
    (out, extra)
}

fn collect_ids(v: &Value, keys: &[&str], ids: &mut HashSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                if keys.contains(&k.as_str())
                    && let Some(s) = v.as_str()
                {
                    ids.insert(s.to_owned());
                }
                collect_ids(v, keys, ids);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_ids(v, keys, ids)),
        _ => {}
    }
}

fn rename_ids(v: &mut Value, ids: &HashSet<String>, copy: usize) {
    match v {
        Value::String(s) if ids.contains(s.as_str()) => {
            // Same length keeps uuids well-formed: replace the tail.
            let tag = format!("{copy:08x}");
            if s.len() > 12 {
                s.replace_range(s.len() - 8.., &tag);
            } else {
                s.push_str(&tag);
            }
        }
        Value::Object(m) => m.values_mut().for_each(|v| rename_ids(v, ids, copy)),
        Value::Array(a) => a.iter_mut().for_each(|v| rename_ids(v, ids, copy)),
        _ => {}
    }
}

/// Makes tool outputs realistic: a few hundred bytes, one in ten a few KB.
fn lengthen_outputs(v: &mut Value, counter: &mut u64) {
    match v {
        Value::Object(m) => {
            let is_result = m
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t == "tool_result" || t == "function_call_output");
            for (k, v) in m.iter_mut() {
                if is_result && (k == "content" || k == "output") && v.is_string() {
                    *counter += 1;
                    let lines = if (*counter).is_multiple_of(10) { 60 } else { 6 };
                    let mut text = v.as_str().unwrap_or_default().to_owned();
                    for i in 0..lines {
                        text.push_str(&format!(
                            "\ntest module_{i}::case_{} ... ok (0.0{}s)",
                            *counter,
                            i % 9
                        ));
                    }
                    *v = Value::String(text);
                } else {
                    lengthen_outputs(v, counter);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| lengthen_outputs(v, counter)),
        _ => {}
    }
}
