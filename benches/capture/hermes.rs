//! Hermes Agent: a generated `state.db` of 1,000 sessions and 110,000
//! messages (seed 000 M4), made from the sample database's schema (the real
//! client's, schema version 22) and rows shaped like the authentic turn:
//! prompt, assistant text with reasoning and a `terminal` call, the tool's
//! JSON result (a few hundred bytes, one in ten several kilobytes), answer.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, params};

use super::common::{fresh_repo, measure};
use super::report;

const SAMPLE_DB: &str = "../shared/samples/hermes/oracle/state.db";

/// Makes `home/.hermes/state.db` with `sessions` sessions of `per` messages
/// each, recorded as run in `cwd`; returns the message count.
pub fn generate(manifest: &Path, home: &Path, cwd: &str, sessions: usize, per: usize) -> usize {
    let dir = home.join(".hermes");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let db = dir.join("state.db");
    std::fs::copy(manifest.join(SAMPLE_DB), &db).expect("copy the sample database");
    let mut c = Connection::open(&db).expect("open");
    c.execute_batch(
        "DELETE FROM messages; DELETE FROM session_model_usage; DELETE FROM sessions; PRAGMA journal_mode=WAL;",
    )
    .expect("clear");
    let tx = c.transaction().expect("tx");
    let mut n = 0usize;
    {
        let mut session = tx
            .prepare(
                "INSERT INTO sessions (id, source, model, model_config, system_prompt, started_at, message_count, tool_call_count, cwd, title) VALUES (?1, 'cli', 'mock-model', '{\"max_iterations\": 90}', ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .expect("prepare");
        let mut message = tx
            .prepare(
                "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, finish_reason, reasoning) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .expect("prepare");
        let prompt = "You are Hermes Agent, an intelligent AI assistant. ".repeat(120);
        for s in 0..sessions {
            let id = format!("20261129_{:06}_{:06x}", s % 240_000, s);
            let started = 1_795_938_141.0 + (s * 1000) as f64;
            session
                .execute(params![
                    id,
                    prompt,
                    started,
                    per as i64,
                    (per / 4) as i64,
                    cwd,
                    format!("Session {s}")
                ])
                .expect("insert session");
            for m in 0..per {
                let ts = started + m as f64 * 0.5;
                let turn = m / 4;
                let call = format!("call_{s}_{turn}");
                let (role, content, call_id, calls, tool, finish, reasoning) = match m % 4 {
                    0 => (
                        "user",
                        format!("Please run step {turn} of the build and tell me what failed"),
                        None,
                        None,
                        None,
                        None,
                        None,
                    ),
                    1 => (
                        "assistant",
                        format!("I'll run step {turn} with a shell command."),
                        None,
                        Some(format!(
                            "[{{\"id\": \"{call}\", \"call_id\": \"{call}\", \"response_item_id\": \"fc_{call}\", \"type\": \"function\", \"function\": {{\"name\": \"terminal\", \"arguments\": \"{{\\\"command\\\": \\\"make step-{turn}\\\"}}\"}}}}]"
                        )),
                        None,
                        Some("tool_calls"),
                        Some(format!(
                            "The user wants step {turn}; run it and read the output."
                        )),
                    ),
                    2 => {
                        let len = if n.is_multiple_of(10) { 6000 } else { 300 };
                        let output: String =
                            format!("building target {turn}: ok\n").repeat(len / 24);
                        (
                            "tool",
                            serde_json::json!({"output": output, "exit_code": 0, "error": null})
                                .to_string(),
                            Some(call.clone()),
                            None,
                            Some("terminal"),
                            None,
                            None,
                        )
                    }
                    _ => (
                        "assistant",
                        format!("Step {turn} passed; nothing failed."),
                        None,
                        None,
                        None,
                        Some("stop"),
                        None,
                    ),
                };
                message
                    .execute(params![
                        id, role, content, call_id, calls, tool, ts, finish, reasoning
                    ])
                    .expect("insert message");
                n += 1;
            }
        }
    }
    tx.commit().expect("commit");
    drop(c);
    // Written just now, the database's pages are still going to disk: an
    // import timed meanwhile would wait behind them when it syncs its packs
    // (measured on the OpenCode bench, `benches/opencode`).
    std::fs::File::open(&db)
        .and_then(|f| f.sync_all())
        .expect("sync the database");
    n
}

/// Appends `count` messages to session `index` the way Hermes does.
fn append(home: &Path, index: usize, count: usize) {
    let c = Connection::open(home.join(".hermes/state.db")).expect("open");
    let id = format!("20261129_{:06}_{:06x}", index % 240_000, index);
    for m in 0..count {
        let role = if m % 2 == 0 { "user" } else { "assistant" };
        c.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?1, ?2, ?3, ?4)",
            params![
                id,
                role,
                format!("more work, message {m}"),
                1_800_000_000.0 + m as f64
            ],
        )
        .expect("append");
    }
    c.execute(
        "UPDATE sessions SET message_count = message_count + ?1 WHERE id = ?2",
        params![count as i64, id],
    )
    .expect("update");
}

/// Runs the Hermes capture and write-back benchmarks; with a `reference`
/// (a Claude full import of the same run), the full import is also given
/// as time and memory ratios to it.
pub fn bench(work_dir: &Path, manifest: &Path, quick: bool, reference: Option<(Duration, u64)>) {
    let (sessions, per) = if quick { (200, 110) } else { (1000, 110) };
    let repo = fresh_repo(work_dir, "hermes-repo");
    let cwd = repo.to_string_lossy().into_owned();
    let home = work_dir.join("hermes-home");
    let messages = generate(manifest, &home, &cwd, sessions, per);
    let size = std::fs::metadata(home.join(".hermes/state.db"))
        .expect("stat")
        .len();
    let home_arg = home.to_str().expect("utf8");
    let import = ["import", "--agent", "hermes", "--home", home_arg];
    let (t, rss) = measure(&repo, &import);
    report(
        &format!(
            "hermes: import {messages} messages, {sessions} sessions ({:.0} MB), full",
            size as f64 / 1e6
        ),
        t,
        rss,
    );
    if let Some((rt, rr)) = reference {
        println!(
            "{:<64} {:>10.2} {:>12.2}",
            "hermes: full import / claude full import (ratio)",
            t.as_secs_f64() / rt.as_secs_f64(),
            rss as f64 / rr.max(1) as f64
        );
    }
    let mut again: Vec<(Duration, u64)> = (0..5).map(|_| measure(&repo, &import)).collect();
    again.sort();
    report(
        "hermes: import again, nothing new (median of 5)",
        again[2].0,
        again[2].1,
    );
    append(&home, sessions / 2, 100);
    let (t, rss) = measure(&repo, &import);
    report(
        "hermes: incremental import of 100 appended messages",
        t,
        rss,
    );
    let target = work_dir.join("hermes-resume-home");
    generate(manifest, &target, &cwd, 0, 0);
    let id = format!(
        "20261129_{:06}_{:06x}",
        (sessions / 2) % 240_000,
        sessions / 2
    );
    let (t, rss) = measure(
        &repo,
        &["resume", &id, "--home", target.to_str().expect("utf8")],
    );
    report(
        &format!("hermes: resume (render and insert) {} messages", per + 100),
        t,
        rss,
    );
}
