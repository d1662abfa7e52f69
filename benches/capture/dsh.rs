//! The DeepSeek Harness part of the capture bench: a generated v4 log of
//! `records` events in checksummed zstd frames of realistic size.
//!
//! The log repeats the authentic one-turn session of `fixtures/dsh/` turn
//! after turn: seqs dense, turn numbers counting up, call, message and job
//! ids fresh per copy, the large per-run records (`request/header` with the
//! 25 tool schemas, the title request) only in the first turn, as dsh
//! writes them, and tool outputs of realistic length. Records are cut into
//! frames of a few records each (dsh fsyncs one frame per ~200 ms batch:
//! 88 B to 8 KB in the sample).

use std::path::Path;
use std::time::Duration;

use git_session::native::apply::compress_frame;
use git_session_adapters::dsh::wire;
use serde_json::Value;

use super::common::{fresh_repo, measure};
use super::report;

/// Returns one checksummed zstd frame of `plain`, as dsh writes them.
fn encode_frame(plain: &[u8]) -> Vec<u8> {
    compress_frame(plain).expect("compressing into memory")
}

const TEMPLATE: &str = "fixtures/dsh/01-roundtrip/native/sessions/--tmp-oracle-sample-dsh-project--/session-afae3098-de93-42e2-b9d2-348986bedfe1/session.v4.jsonl.zstd";

/// Records per frame.
const PER_FRAME: usize = 4;

/// Runs the dsh benchmarks; `claude_full` is the Claude full-import time
/// of the same run, for the ratio.
pub fn bench(work: &Path, manifest: &Path, records: usize, claude_full: Option<Duration>) {
    let repo = fresh_repo(work, "dsh-repo");
    let cwd = repo.to_string_lossy().into_owned();
    let bytes = std::fs::read(manifest.join(TEMPLATE)).expect("template");
    let plain = String::from_utf8(zstd::decode_all(&bytes[..]).expect("zstd")).expect("utf8");
    let mut lines = plain.lines();
    let mut header: Value = serde_json::from_str(lines.next().expect("header")).expect("json");
    let old_cwd = header["cwd"].as_str().expect("cwd").to_owned();
    header["cwd"] = Value::String(cwd.clone());
    let id = header["id"].as_str().expect("id").to_owned();
    let body: Vec<Value> = lines
        .map(|l| serde_json::from_str(&l.replace(&old_cwd, &cwd)).expect("json"))
        .collect();
    let events = generate(&body, records + 100);
    let (first, extra) = events.split_at(records);

    let home = work.join("dsh-home");
    let dir = home
        .join(".dsh/sessions")
        .join(wire::project_dir(Some(&cwd)))
        .join(wire::encode_segment(&id));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let file = dir.join(wire::LOG_FILE);
    let mut log = encode_frame(format!("{header}\n").as_bytes());
    append_frames(&mut log, first);
    std::fs::write(&file, &log).expect("write");

    let home_arg = home.to_str().expect("utf8");
    let args = ["import", "--agent", "dsh", "--home", home_arg];
    let (t, rss) = measure(&repo, &args);
    let ratio = claude_full.map_or(String::new(), |c| {
        format!(", {:.2}x claude", t.as_secs_f64() / c.as_secs_f64())
    });
    report(
        &format!(
            "dsh: import {records} events ({:.0} MB zstd, {} frames), full{ratio}",
            log.len() as f64 / 1e6,
            records.div_ceil(PER_FRAME) + 1
        ),
        t,
        rss,
    );
    let (t, rss) = measure(&repo, &args);
    report("dsh: import again, nothing new", t, rss);
    let mut more = Vec::new();
    append_frames(&mut more, extra);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .expect("open");
    std::io::Write::write_all(&mut f, &more).expect("append");
    drop(f);
    let (t, rss) = measure(&repo, &args);
    report(
        &format!("dsh: incremental import of {} appended events", extra.len()),
        t,
        rss,
    );
    let target = work.join("dsh-resume-home");
    std::fs::create_dir_all(&target).expect("mkdir");
    let (t, rss) = measure(
        &repo,
        &["resume", &id, "--home", target.to_str().expect("utf8")],
    );
    report(
        &format!("dsh: resume (render and write) {} events", events.len()),
        t,
        rss,
    );
}

/// Cuts records into frames of [`PER_FRAME`] lines.
fn append_frames(out: &mut Vec<u8>, records: &[String]) {
    for chunk in records.chunks(PER_FRAME) {
        out.extend(encode_frame(chunk.concat().as_bytes()));
    }
}

/// Returns `n` record lines continuing the template turn after turn.
fn generate(body: &[Value], n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    let mut copy = 0u64;
    let mut filler = 0u64;
    while out.len() < n {
        for r in body {
            let kind = r["type"].as_str().unwrap_or("");
            if copy > 0
                && matches!(
                    kind,
                    "request/header"
                        | "session/title-llm-request"
                        | "permission/preset"
                        | "sandbox/mode"
                        | "approval/policy"
                )
            {
                continue;
            }
            let mut r = r.clone();
            r["seq"] = Value::from(out.len() as u64);
            retag(&mut r, copy);
            if let Some(turn) = r.pointer_mut("/data/turn")
                && turn.is_u64()
            {
                *turn = Value::from(copy + 1);
            }
            if kind == "tool/result" {
                filler += 1;
                let lines = if filler.is_multiple_of(10) { 60 } else { 6 };
                if let Some(Value::String(text)) = r.pointer_mut("/data/message/content/0/text") {
                    for i in 0..lines {
                        text.push_str(&format!("\ntest module_{i}::case_{filler} ... ok"));
                    }
                }
            }
            out.push(format!("{r}\n"));
            if out.len() == n {
                break;
            }
        }
        copy += 1;
    }
    out
}

/// Gives ids a per-copy suffix (call, message, job and tool-call ids).
fn retag(v: &mut Value, copy: u64) {
    match v {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                match (k.as_str(), &mut *v) {
                    ("id" | "callId" | "toolCallId" | "jobId" | "rootCallId", Value::String(s))
                        if !s.starts_with("session-") =>
                    {
                        s.push_str(&format!("-{copy}"));
                    }
                    _ => retag(v, copy),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| retag(v, copy)),
        _ => {}
    }
}
