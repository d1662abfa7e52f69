//! Capture and write-back benchmarks on generated native sessions: a
//! 100k-record Claude Code transcript, a 100k-line Codex rollout, a
//! Hermes Agent `state.db` of 110k messages in 1,000 sessions (`hermes.rs`)
//! and a 100k-event DeepSeek Harness log (zstd frames, `dsh.rs`).
//! Run with `cargo bench --bench capture` (`--quick` for 20k records).
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
    // `--hermes` runs the Hermes Agent database benchmarks alone.
    if args.iter().any(|a| a == "--hermes") {
        hermes::bench(&work_dir, manifest, records < 100_000);
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
    let mut claude_full = None;
    if generate.is_some() {
        std::fs::write(work_dir.join("claude-extra.jsonl"), extra.concat()).expect("write");
    } else {
        claude_full = run_all(
            &repo,
            &home,
            &file,
            &extra,
            "claude",
            "d05046d2-74b1-4451-90dc-37fbd42c25e6",
            records,
            &work_dir,
        )
        .into();
    }
    if generate.is_none() {
        dsh::bench(&work_dir, manifest, records, claude_full);
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
        hermes::bench(&work_dir, manifest, records < 100_000);
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
) -> Duration {
    let size = std::fs::metadata(file).expect("stat").len();
    let home_arg = home.to_str().expect("utf8");
    // Redaction on and off in the same run, alternating, each in a new
    // repository at the same path (the sessions' cwd); the last one (on,
    // the default) is kept for the benchmarks after it.
    let mut on = Vec::new();
    let mut off = Vec::new();
    let mut rss = 0;
    for round in 0..REDACTION_ROUNDS * 2 {
        let redact = round % 2 == 1;
        std::fs::remove_dir_all(repo).expect("rm repo");
        let name = repo.file_name().expect("name").to_str().expect("utf8");
        fresh_repo(repo.parent().expect("parent"), name);
        if !redact {
            common::git(repo, &["config", "session.redact", "false"]);
        }
        let (t, r) = measure(repo, &["import", "--agent", agent, "--home", home_arg]);
        if redact {
            on.push(t);
            rss = r;
        } else {
            off.push(t);
        }
    }
    let (on, off) = (median(&mut on), median(&mut off));
    report(
        &format!(
            "{agent}: import {records} records ({:.0} MB), full",
            size as f64 / 1e6
        ),
        on,
        rss,
    );
    report(&format!("{agent}: same, session.redact=false"), off, 0);
    println!(
        "{:<64} {:>10.3}",
        format!("{agent}: redaction on / off (median of {REDACTION_ROUNDS})"),
        on.as_secs_f64() / off.as_secs_f64()
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
    let (t, rss) = measure(
        repo,
        &["resume", id, "--home", target.to_str().expect("utf8")],
    );
    report(
        &format!(
            "{agent}: resume (render and write) {} records",
            records + extra.len()
        ),
        t,
        rss,
    );
    on
}

/// Full imports timed with redaction on and with it off.
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
