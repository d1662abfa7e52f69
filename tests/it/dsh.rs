//! DeepSeek Harness (`dsh`) end to end, from the installed binary: capture
//! from a `DSH_HOME`, write-back, and the real `dsh` client resuming what
//! was written (`shared/oracle/dsh-*`), three times in a row, because a log
//! dsh accepts once may be refused on the next load (formats/dsh.md,
//! gotcha 1). Also the malformed logs of `dsh-malformed-check.sh`, captured
//! the way dsh itself reads them.

use std::path::{Path, PathBuf};
use std::process::Command;

use git_session::native::apply::compress_frame;
use git_session_adapters::dsh::wire;
use serde_json::Value;

use crate::oracle::{prefix, resume_check, shared_oracle, turns};
use crate::support::*;

/// Returns one checksummed zstd frame of `plain`, as dsh writes them.
fn encode_frame(plain: &[u8]) -> Vec<u8> {
    compress_frame(plain).expect("compressing into memory")
}

/// Returns the `(session id, decoded log)` of every log under a store.
fn logs_under(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".jsonl.zstd") {
                let bytes = std::fs::read(&p).unwrap();
                out.push((p, zstd::decode_all(&bytes[..]).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Copies the logs of a store into `dsh_home`, moving the recorded cwd to
/// `cwd` (in the records and in the project key), header in frame 0.
/// Returns the session ids, each with whether it is a sub-agent or fork
/// child (which dsh does not drive directly).
fn place(store: &Path, dsh_home: &Path, cwd: &Path) -> Vec<(String, bool)> {
    let cwd_text = cwd.to_string_lossy().into_owned();
    let mut ids = Vec::new();
    for (_, plain) in logs_under(store) {
        let text = String::from_utf8(plain).unwrap();
        let (head, rest) = text.split_once('\n').unwrap();
        let header: Value = serde_json::from_str(head).unwrap();
        let old = header["cwd"].as_str().unwrap().to_owned();
        let id = header["id"].as_str().unwrap().to_owned();
        let head = head.replace(&old, &cwd_text);
        let rest = rest.replace(&old, &cwd_text);
        let dir = dsh_home
            .join("sessions")
            .join(wire::project_dir(Some(&cwd_text)))
            .join(wire::encode_segment(&id));
        std::fs::create_dir_all(&dir).unwrap();
        let mut bytes = encode_frame(format!("{head}\n").as_bytes());
        if !rest.is_empty() {
            bytes.extend(encode_frame(rest.as_bytes()));
        }
        std::fs::write(dir.join(wire::LOG_FILE), bytes).unwrap();
        ids.push((id, header.get("parentSession").is_some()));
    }
    ids.sort();
    ids
}

/// Runs `dsh-resume-check.sh` `n` times in a row on one session.
fn checks(home: &Path, id: &str, project: &Path, n: usize) -> Vec<Value> {
    (0..n)
        .map(|_| resume_check("dsh", home, id, project))
        .collect()
}

/// Captures a store's sessions into a repo, writes each back into a fresh
/// HOME, and has dsh resume the original once and ours three times: the
/// first resume of ours sends what the original's does, and the later ones
/// are accepted and carry that history on.
fn round_trip(store: &Path) {
    let repo = Repo::new();
    let original_home = repo.outside("original-home");
    let original_project = repo.outside("original-project");
    std::fs::create_dir_all(&original_project).unwrap();
    let ids = place(store, &original_home.join(".dsh"), &original_project);
    assert!(!ids.is_empty());

    let source_home = repo.outside("source-home");
    place(store, &source_home.join(".dsh"), &repo.root);
    let before = tree_digest(&source_home);
    let captured = repo.ok(&[
        "import",
        "--agent",
        "dsh",
        "--home",
        source_home.to_str().unwrap(),
    ]);
    assert_eq!(
        tree_digest(&source_home),
        before,
        "capture wrote into DSH_HOME"
    );
    let fresh_home = repo.outside("fresh-home");
    std::fs::create_dir_all(&fresh_home).unwrap();
    for (id, _) in &ids {
        assert!(
            captured.contains(id.as_str()),
            "{id} not captured: {captured}"
        );
        let printed = repo.ok(&[
            "resume",
            id,
            "--agent",
            "dsh",
            "--home",
            fresh_home.to_str().unwrap(),
        ]);
        assert!(
            printed.contains(&format!("dsh headless --session-id {id}")),
            "{printed}"
        );
    }
    let roots = [original_project.as_path(), repo.root.as_path()];
    let source = logs_under(&source_home);
    let written = logs_under(&fresh_home);
    for (id, child) in &ids {
        // Record for record what dsh wrote (the fresh home has the same
        // cwd, so the same paths).
        let seg = format!("/{}/", wire::encode_segment(id));
        let find = |logs: &[(PathBuf, Vec<u8>)]| {
            logs.iter()
                .find(|(p, _)| p.to_string_lossy().contains(&seg))
                .map(|(_, b)| records(b))
                .unwrap_or_else(|| panic!("no log of {id}"))
        };
        assert_eq!(
            find(&written),
            find(&source),
            "session {id}: records differ"
        );
        if *child {
            // dsh: "is a subagent or forked session and cannot be driven
            // directly"; it runs under its parent.
            continue;
        }
        let want = turns(&checks(&original_home, id, &original_project, 1)[0], &roots);
        assert!(!want.is_empty());
        let got = checks(&fresh_home, id, &repo.root, 3);
        assert_eq!(
            turns(&got[0], &roots),
            want,
            "{} session {id}: history differs",
            store.display()
        );
        for later in &got[1..] {
            let later = turns(later, &roots);
            assert!(
                later.starts_with(&want) && later.len() > want.len(),
                "session {id}: a later resume lost history: {later:#?}"
            );
        }
    }
}

/// Returns the records of a decoded log.
fn records(plain: &[u8]) -> Vec<Value> {
    plain
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

/// Returns a digest of every file (path and bytes) under `dir`.
fn tree_digest(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn sample(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/samples/dsh/oracle");
    let with_input = root.join(name).join("input/.dsh");
    if with_input.is_dir() {
        with_input
    } else {
        root.join(name).join(".dsh")
    }
}

macro_rules! dsh_samples {
    ($($test:ident: $name:literal;)*) => {
        $(
            #[test]
            fn $test() {
                round_trip(&sample($name));
            }
        )*
    };
}

dsh_samples! {
    dsh_authentic_resumes_three_times_with_the_same_history: "01-roundtrip";
    dsh_resumed_resumes_three_times_with_the_same_history: "02-resumed";
    dsh_crafted_minimal_resumes_three_times_with_the_same_history: "03-crafted-minimal";
    dsh_crafted_full_resumes_three_times_with_the_same_history: "04-crafted-full";
    dsh_fork_resumes_three_times_with_the_same_history: "05-fork";
    dsh_subagent_resumes_three_times_with_the_same_history: "06-subagent-unseeded";
}

#[test]
fn every_dsh_sample_is_covered() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/samples/dsh/oracle");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| root.join(n).is_dir())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "01-roundtrip",
            "02-resumed",
            "03-crafted-minimal",
            "04-crafted-full",
            "05-fork",
            "06-subagent-unseeded"
        ],
        "a new dsh sample needs its round trip above"
    );
}

/// A session made now by the real client in the repository.
#[test]
fn dsh_fresh_session_resumes_three_times_with_the_same_history() {
    let repo = Repo::new();
    let home = repo.outside("agent-home");
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new("bash")
        .arg(shared_oracle().join("dsh-roundtrip.sh"))
        .arg(&home)
        .arg(&repo.root)
        .env("ORACLE_PREFIX", prefix())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dsh roundtrip failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = made["session_id"].as_str().unwrap().to_owned();
    let captured = repo.ok(&["import", "--agent", "dsh", "--home", home.to_str().unwrap()]);
    assert!(captured.contains(&id), "{captured}");
    let fresh = repo.outside("fresh-home");
    std::fs::create_dir_all(&fresh).unwrap();
    let out = repo
        .session()
        .args(["resume", &id, "--home", fresh.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert_eq!(
        said.matches("uploads").count(),
        1,
        "the privacy note, once: {said}"
    );
    let printed = text(&out.stdout);
    let want = format!(
        "DSH_HOME={}/.dsh dsh headless --session-id {id}",
        fresh.display()
    );
    assert!(printed.contains(&want), "{printed}");
    // Resuming again before dsh ran is a no-op, and the note was said.
    let again = repo
        .session()
        .args(["resume", &id, "--home", fresh.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", text(&again.stderr));
    let said = text(&again.stderr);
    assert!(said.contains("already in place"), "{said}");
    assert!(!said.contains("uploads"), "the privacy note again: {said}");
    let roots = [repo.root.as_path()];
    let want = turns(&checks(&home, &id, &repo.root, 1)[0], &roots);
    assert!(
        want.iter().any(|t| t.contains("echo hello > note.txt")),
        "{want:?}"
    );
    let got = checks(&fresh, &id, &repo.root, 3);
    assert_eq!(turns(&got[0], &roots), want);
    for later in &got[1..] {
        assert!(turns(later, &roots).starts_with(&want));
    }

    // dsh appended to the written log: a second write-back is refused;
    // capture takes the new frames, after which the log is the session
    // again; --fork writes a copy that resumes.
    let err = repo.fails(&["resume", &id, "--home", fresh.to_str().unwrap()], 1);
    assert!(
        err.contains("already exists") && err.contains("--fork"),
        "{err}"
    );
    let again = repo.ok(&[
        "import",
        "--agent",
        "dsh",
        "--home",
        fresh.to_str().unwrap(),
    ]);
    assert!(again.contains(&id), "{again}");
    let in_place = repo
        .session()
        .args(["resume", &id, "--home", fresh.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(text(&in_place.stderr).contains("already in place"));
    let printed = repo.ok(&["resume", &id, "--fork", "--home", fresh.to_str().unwrap()]);
    let fork = printed
        .split_whitespace()
        .skip_while(|w| *w != "--session-id")
        .nth(1)
        .unwrap()
        .to_owned();
    assert_ne!(fork, id);
    let forked = checks(&fresh, &fork, &repo.root, 1);
    assert!(turns(&forked[0], &roots).starts_with(&want));
}

/// Runs `dsh-craft-session.py` into `home` with the given mutations.
fn craft(home: &Path, cwd: &Path, id: &str, mutations: &[&str]) -> Value {
    let python = prefix().join("pkgs/dsh-venv/bin/python");
    let python = if python.is_file() {
        python
    } else {
        PathBuf::from("python3")
    };
    let mut cmd = Command::new(python);
    cmd.arg(shared_oracle().join("dsh-craft-session.py"))
        .arg("--home")
        .arg(home)
        .arg("--cwd")
        .arg(cwd)
        .arg("--id")
        .arg(id);
    for m in mutations {
        cmd.args(["--mutate", m]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "craft failed: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn malformed_dsh_logs_are_captured_as_dsh_reads_them() {
    let repo = Repo::new();
    let home = repo.outside("dsh-home");
    craft(&home, &repo.root, "hc-good", &[]);
    craft(&home, &repo.root, "hc-torn", &["torn-tail"]);
    craft(&home, &repo.root, "hc-bad-checksum", &["bad-checksum"]);
    craft(&home, &repo.root, "hc-future", &["future-version"]);
    craft(&home, &repo.root, "hc-v0-name", &["v0-filename"]);
    let before = tree_digest(&home);
    let out = repo
        .session()
        .args(["import", "--agent", "dsh", "--home", home.to_str().unwrap()])
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    // Refused logs are sources this build cannot read: each is reported
    // with a warning naming it, the others are captured, and capture
    // succeeds (as for a corrupt database).
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stderr.matches("warning: skipped").count(), 3, "{stderr}");
    assert_eq!(tree_digest(&home), before, "capture wrote into DSH_HOME");
    assert!(stdout.contains("hc-good"), "{stdout}");
    // A torn last frame: the complete frames before it are the session.
    assert!(stdout.contains("hc-torn"), "{stdout}");
    let torn = repo.events("hc-torn");
    let good = repo.events("hc-good");
    assert_eq!(torn.len(), good.len(), "the torn frame is left for later");
    // A complete frame that fails validation: refused with dsh's wording
    // and the byte offset, naming the file.
    assert!(
        stderr.contains("corrupt Zstandard session log: frame at byte")
            && stderr.contains("failed validation")
            && stderr.contains("hc-bad-checksum"),
        "{stderr}"
    );
    assert!(!stdout.contains("hc-bad-checksum"));
    // A newer format says upgrade; a name/header mismatch is refused.
    assert!(stderr.contains("upgrade"), "{stderr}");
    assert!(stderr.contains("hc-v0-name"), "{stderr}");
}

/// Writes a log of `frames` (each a list of record lines) for the
/// authentic sample's records, moved into `cwd`; returns the path, the
/// offsets of the frames, and all records.
fn authentic_records(cwd: &Path) -> (String, Vec<String>) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/dsh/01-roundtrip/native");
    let (_, plain) = logs_under(&fixture).remove(0);
    let text = String::from_utf8(plain).unwrap();
    let (head, rest) = text.split_once('\n').unwrap();
    let header: Value = serde_json::from_str(head).unwrap();
    let old = header["cwd"].as_str().unwrap();
    let new = cwd.to_string_lossy();
    let id = header["id"].as_str().unwrap().to_owned();
    let mut lines = vec![head.replace(old, &new)];
    lines.extend(rest.lines().map(|l| l.replace(old, &new)));
    (id, lines)
}

fn frames_of(groups: &[&[String]]) -> Vec<u8> {
    let mut out = Vec::new();
    for g in groups {
        let mut plain = String::new();
        for l in *g {
            plain.push_str(l);
            plain.push('\n');
        }
        out.extend(encode_frame(plain.as_bytes()));
    }
    out
}

#[test]
fn dsh_capture_is_incremental_by_frame_and_survives_crash_repair() {
    let repo = Repo::new();
    let home = repo.outside("dsh-home");
    let (id, lines) = authentic_records(&repo.root);
    let dir = home
        .join(".dsh/sessions")
        .join(wire::project_dir(Some(&repo.root.to_string_lossy())))
        .join(wire::encode_segment(&id));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join(wire::LOG_FILE);
    let import = || repo.ok(&["import", "--agent", "dsh", "--home", home.to_str().unwrap()]);
    let (head, a, b) = (&lines[..1], &lines[1..15], &lines[15..]);

    std::fs::write(&log, frames_of(&[head, a])).unwrap();
    import();
    let first = repo.events(&id).len();
    // A frame being written (torn) waits; once complete it is read.
    let whole = frames_of(&[head, a, b]);
    let torn_at = frames_of(&[head, a]).len() + 7;
    std::fs::write(&log, &whole[..torn_at]).unwrap();
    assert!(!import().contains(&id), "a torn frame gave events");
    assert_eq!(repo.events(&id).len(), first);
    std::fs::write(&log, &whole).unwrap();
    assert!(import().contains(&id));
    let all = repo.events(&id);
    assert!(all.len() > first);

    // dsh's crash repair: the last frame is cut off at its first byte and
    // its records written again in a new frame, with closers after them.
    let mut repaired_tail = b.to_vec();
    let last_seq = b.len() as u64 + 13;
    repaired_tail.push(format!(
        "{{\"type\":\"session/end-seed\",\"seq\":{},\"time\":1795939070700,\"data\":{{}}}}",
        last_seq + 1
    ));
    std::fs::write(&log, frames_of(&[head, a, &repaired_tail])).unwrap();
    import();
    let after = repo.events(&id);
    assert_eq!(after.len(), all.len() + 1, "records are not captured twice");
    let ids: Vec<&str> = after
        .iter()
        .filter_map(|e| e["origin"]["native_id"].as_str())
        .collect();
    let unique: std::collections::HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an origin repeats: {ids:?}");
}

#[test]
fn dsh_raw_jsonl_logs_are_captured_too() {
    let repo = Repo::new();
    let home = repo.outside("dsh-home");
    let (id, lines) = authentic_records(&repo.root);
    let dir = home
        .join(".dsh/sessions")
        .join(wire::project_dir(Some(&repo.root.to_string_lossy())))
        .join(wire::encode_segment(&id));
    std::fs::create_dir_all(&dir).unwrap();
    let mut plain = lines.join("\n");
    plain.push('\n');
    // The last line still being written is left for later.
    plain.push_str("{\"type\":\"step/start\",\"seq\":");
    std::fs::write(dir.join(wire::RAW_LOG_FILE), plain).unwrap();
    let out = repo.ok(&["import", "--agent", "dsh", "--home", home.to_str().unwrap()]);
    assert!(out.contains(&id), "{out}");
    let events = repo.events(&id);
    let native: Vec<u64> = events
        .iter()
        .filter(|e| e["payload"].get("native").is_some())
        .filter_map(|e| e["origin"]["native_seq"].as_u64())
        .collect();
    assert_eq!(native.len(), lines.len() - 1);
}

/// A Claude Code session handed to dsh: the log git-session writes from
/// another agent's events is resumed by the real dsh, three times.
#[test]
fn dsh_handoff_from_claude_resumes_three_times() {
    let repo = Repo::new();
    captured_claude(&repo);
    let fresh = repo.outside("dsh-home");
    std::fs::create_dir_all(&fresh).unwrap();
    let out = repo
        .session()
        .args([
            "handoff",
            "d05046d2-74b1-4451-90dc-37fbd42c25e6",
            "--to",
            "dsh",
            "--home",
            fresh.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.matches("uploads").count(), 1, "{stderr}");
    let id = stdout
        .split_whitespace()
        .skip_while(|w| *w != "--session-id")
        .nth(1)
        .unwrap()
        .to_owned();
    let roots = [repo.root.as_path()];
    let got = checks(&fresh, &id, &repo.root, 3);
    let first = turns(&got[0], &roots);
    let said = first.join("\n");
    assert!(said.contains("Please write hello into note.txt"), "{said}");
    assert!(
        said.contains("echo hello > note.txt") && said.contains("bash"),
        "{said}"
    );
    assert!(said.contains("Done: the note was written."), "{said}");
    for later in &got[1..] {
        assert!(turns(later, &roots).starts_with(&first));
    }
}

#[test]
fn dsh_write_back_waits_for_dsh_to_let_go_of_the_session() {
    let repo = Repo::new();
    let home = repo.outside("dsh-home");
    craft(&home, &repo.root, "hc-locked", &[]);
    repo.ok(&["import", "--agent", "dsh", "--home", home.to_str().unwrap()]);
    let fresh = repo.outside("fresh-home");
    let dir = fresh
        .join(".dsh/sessions")
        .join(wire::project_dir(Some(&repo.root.to_string_lossy())))
        .join("hc-locked");
    std::fs::create_dir_all(&dir).unwrap();
    // dsh holds the session's lock while it runs on it.
    let lock = std::fs::File::create(dir.join(wire::LOCK_FILE)).unwrap();
    lock.lock().unwrap();
    let err = repo.fails(
        &["resume", "hc-locked", "--home", fresh.to_str().unwrap()],
        1,
    );
    assert!(err.contains("is running on this session"), "{err}");
    assert!(!dir.join(wire::LOG_FILE).exists(), "nothing written");
    drop(lock);
    repo.ok(&["resume", "hc-locked", "--home", fresh.to_str().unwrap()]);
    assert!(dir.join(wire::LOG_FILE).is_file());
}

#[test]
fn dsh_hostile_records_never_reach_the_terminal_raw() {
    let repo = Repo::new();
    let home = repo.outside("dsh-home");
    let (id, lines) = authentic_records(&repo.root);
    let dir = home
        .join(".dsh/sessions")
        .join(wire::project_dir(Some(&repo.root.to_string_lossy())))
        .join(wire::encode_segment(&id));
    std::fs::create_dir_all(&dir).unwrap();
    let mut body = lines[1..].to_vec();
    body.push(format!(
        "{{\"type\":\"x\\u001b[2J\",\"seq\":{},\"time\":1,\"data\":{{}},\"\\u001b]0;owned\\u0007\":1}}",
        body.len()
    ));
    std::fs::write(dir.join(wire::LOG_FILE), frames_of(&[&lines[..1], &body])).unwrap();
    let out = repo
        .session()
        .args(["import", "--agent", "dsh", "--home", home.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("unknown to dsh"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{7}'),
        "{stderr:?}"
    );
}

/// A `subagent_fork` child (`isSeeded`, its first records copies of its
/// parent's, then `session/end-seed {"inherited": true}`) is captured as a
/// canonical fork of its parent at exactly the inherited prefix: the
/// inherited records are the parent's events, shared, and only the child's
/// own records are its own (formats/dsh.md, "Fork, seed, subagents").
#[test]
fn dsh_seeded_fork_is_a_canonical_fork_with_the_exact_inherited_prefix() {
    let repo = Repo::new();
    let home = repo.outside("dsh-home");
    let ids = place(&sample("05-fork"), &home.join(".dsh"), &repo.root);
    let (child, parent) = match ids.as_slice() {
        [(a, true), (b, false)] | [(b, false), (a, true)] => (a.clone(), b.clone()),
        other => panic!("{other:?}"),
    };
    let out = repo.ok(&["import", "--agent", "dsh", "--home", home.to_str().unwrap()]);
    assert!(out.contains(&child) && out.contains(&parent), "{out}");
    let shown: Value = serde_json::from_str(&repo.ok(&["show", &child, "--json"])).unwrap();
    let lineage = &shown["header"]["lineage"];
    assert_eq!(lineage["parent_session"], parent.as_str(), "{lineage}");
    let fork_seq = lineage["fork_seq"].as_u64().unwrap() as usize;
    let parent_events = repo.events(&parent);
    let child_events = repo.events(&child);
    // The prefix is the parent's events through its record seq 27 (the 28
    // inherited records) and the events derived from them, no more.
    let origin = |e: &Value| e["origin"]["native_id"].as_str().unwrap_or("").to_owned();
    let last_inherited = parent_events
        .iter()
        .rposition(|e| {
            origin(e)
                .strip_prefix(&format!("{parent}#"))
                .and_then(|rest| rest.split('/').next())
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n < 28)
        })
        .unwrap();
    assert_eq!(fork_seq, last_inherited);
    assert_eq!(child_events[..=fork_seq], parent_events[..=fork_seq]);
    // Then the child's own header and records, none of them the parent's.
    assert_eq!(child_events[fork_seq + 1]["type"], "session.start");
    assert_eq!(
        child_events[fork_seq + 1]["payload"]["native_id"],
        child.as_str()
    );
    for e in &child_events[fork_seq + 1..] {
        assert!(!origin(e).starts_with(&parent), "{e}");
    }
    let own_records = child_events[fork_seq + 1..]
        .iter()
        .filter(|e| e["payload"].get("native").is_some())
        .count();
    assert_eq!(own_records, 53 - 28, "the header and 24 records of its own");
    // Captured again: nothing new, nothing twice.
    repo.ok(&["import", "--agent", "dsh", "--home", home.to_str().unwrap()]);
    assert_eq!(repo.events(&child).len(), child_events.len());
}
