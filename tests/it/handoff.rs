//! Handoff to another agent: the brief first, the history after it, the
//! handoff in the log, and a receipt note, signed or marked unsigned.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::*;

fn note(repo: &Repo, commit: &str) -> Value {
    serde_json::from_str(&repo.git(&["notes", "--ref=git-session/receipts", "show", commit]))
        .unwrap()
}

fn handoff(repo: &Repo, extra: &[&str]) -> (String, Value) {
    let home = repo.outside("codex-home");
    let mut args = vec![
        "handoff",
        ROUNDTRIP,
        "--to",
        "codex",
        "--home",
        home.to_str().unwrap(),
        "--note",
        "finish the tests",
    ];
    args.extend_from_slice(extra);
    let out = repo.session().args(&args).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(printed.contains("codex resume "), "{printed}");
    let events = repo.events(ROUNDTRIP);
    let handoff = events.last().unwrap().clone();
    assert_eq!(handoff["type"], "handoff");
    assert_eq!(events[events.len() - 2]["type"], "context.compiled");
    (printed, handoff)
}

#[test]
fn handoff_writes_the_brief_first_and_records_an_unsigned_receipt() {
    let repo = Repo::new();
    captured_claude(&repo);
    let before = repo.events(ROUNDTRIP).len();
    let (printed, event) = handoff(&repo, &[]);
    let native = printed.trim().rsplit(' ').next().unwrap().to_owned();
    assert_eq!(
        repo.events(ROUNDTRIP).len(),
        before + 2,
        "one batch: context.compiled and handoff"
    );
    let p = &event["payload"];
    assert_eq!(
        (p["from"].as_str(), p["to"].as_str(), p["note"].as_str()),
        (Some("claude"), Some("codex"), Some("finish the tests"))
    );
    assert_eq!(p["target_native_id"], native.as_str());
    // The loss report: Claude's thinking does not go to Codex, and says so
    // with a stable code, like every line of the report.
    let losses: Vec<&str> = p["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        losses.iter().any(|l| l.starts_with("thinking-dropped: ")),
        "{losses:?}"
    );
    for line in &losses {
        let code = line.split(": ").next().unwrap();
        assert!(
            !code.is_empty() && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
            "no stable code: {line}"
        );
    }

    // The rollout starts with the brief, then the history.
    let mut rollout = None;
    let mut stack = vec![repo.outside("codex-home")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().ends_with(&format!("{native}.jsonl")) {
                rollout = Some(std::fs::read_to_string(path).unwrap());
            }
        }
    }
    let rollout = rollout.expect("a rollout for the target id");
    let user_texts: Vec<String> = rollout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] == "response_item" && l["payload"]["role"] == "user")
        .map(|l| l["payload"]["content"].to_string())
        .collect();
    assert!(
        user_texts[0].contains("finish the tests"),
        "the brief must be the first user message: {:?}",
        user_texts[0]
    );
    assert!(
        user_texts[1..]
            .iter()
            .any(|t| t.contains("Please write hello into note.txt")),
        "the history follows the brief"
    );

    // The receipt is a note on the batch commit, unsigned and marked so.
    let tip = repo.git(&["rev-parse", &format!("refs/sessions/{ROUNDTRIP}")]);
    let receipt = note(&repo, &tip);
    assert_eq!(receipt["signature"], Value::Null);
    assert_eq!(receipt["receipt"]["signer"], Value::Null);
    assert_eq!(receipt["receipt"]["handoff_seq"], event["seq"]);
    assert_eq!(
        receipt["receipt"]["context_sha256"],
        event["payload"]["context_sha256"]
    );
    let verify = repo.ok(&["verify", ROUNDTRIP]);
    assert!(verify.contains("unsigned"), "{verify}");
    // Never on user commits.
    let on_head = repo
        .git_in(&repo.root)
        .args(["notes", "--ref=git-session/receipts", "show", "HEAD"])
        .output()
        .unwrap();
    assert!(!on_head.status.success());
}

#[test]
fn a_signed_receipt_verifies_here_and_with_ssh_keygen_and_tampering_fails() {
    let repo = Repo::new();
    captured_claude(&repo);
    let key = keygen(&repo.outside(""), "id_receipts", "");
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let allowed = repo.outside("allowed_signers");
    std::fs::write(
        &allowed,
        format!("test@example.com namespaces=\"git-session,git\" {public}"),
    )
    .unwrap();
    repo.git(&["config", "session.signingKey", key.to_str().unwrap()]);
    repo.git(&[
        "config",
        "gpg.ssh.allowedSignersFile",
        allowed.to_str().unwrap(),
    ]);
    handoff(&repo, &[]);
    let tip = repo.git(&["rev-parse", &format!("refs/sessions/{ROUNDTRIP}")]);
    let receipt = note(&repo, &tip);
    assert_eq!(receipt["receipt"]["signer"], "test@example.com");
    let verify = repo.ok(&["verify", ROUNDTRIP]);
    assert!(
        verify.contains("good signature by test@example.com"),
        "{verify}"
    );

    // Interop: ssh-keygen verifies the same bytes and signature.
    let signed = repo.outside("receipt.json");
    std::fs::write(&signed, serde_json::to_vec(&receipt["receipt"]).unwrap()).unwrap();
    let sig = repo.outside("receipt.sig");
    std::fs::write(&sig, receipt["signature"].as_str().unwrap()).unwrap();
    let check = Command::new("ssh-keygen")
        .args([
            "-Y",
            "verify",
            "-n",
            "git-session",
            "-I",
            "test@example.com",
            "-f",
        ])
        .arg(&allowed)
        .arg("-s")
        .arg(&sig)
        .stdin(std::fs::File::open(&signed).unwrap())
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "ssh-keygen: {}{}",
        text(&check.stdout),
        text(&check.stderr)
    );

    // A tampered receipt fails.
    let mut forged = receipt.clone();
    forged["receipt"]["to"] = "claude".into();
    repo.git_stdin(
        &[
            "notes",
            "--ref=git-session/receipts",
            "add",
            "-f",
            "-F",
            "-",
            &tip,
        ],
        serde_json::to_string_pretty(&forged).unwrap().as_bytes(),
    );
    let out = repo.session().args(["verify", ROUNDTRIP]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("bad signature"),
        "{}",
        text(&out.stdout)
    );

    // A signature by a key the allowed-signers file does not list fails.
    std::fs::write(&allowed, format!("someone@else.org {public}")).unwrap();
    repo.git_stdin(
        &[
            "notes",
            "--ref=git-session/receipts",
            "add",
            "-f",
            "-F",
            "-",
            &tip,
        ],
        serde_json::to_string_pretty(&receipt).unwrap().as_bytes(),
    );
    let out = repo.session().args(["verify", ROUNDTRIP]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("does not list"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_passphrase_protected_key_without_an_agent_is_refused_before_writing() {
    let repo = Repo::new();
    captured_claude(&repo);
    let key = keygen(&repo.outside(""), "id_locked", "correct horse");
    std::fs::remove_file(key.with_extension("pub")).unwrap();
    let before = repo.events(ROUNDTRIP).len();
    let home = repo.outside("codex-home");
    let err = repo.fails(
        &[
            "handoff",
            ROUNDTRIP,
            "--to",
            "codex",
            "--home",
            home.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
        1,
    );
    assert!(
        err.contains("passphrase-protected") && err.contains("ssh-agent"),
        "{err}"
    );
    assert_eq!(repo.events(ROUNDTRIP).len(), before);
    assert!(
        !home.exists(),
        "nothing may be written when the receipt cannot be signed"
    );
}

#[test]
fn compile_prints_a_brief_within_the_budget() {
    let repo = Repo::new();
    captured_claude(&repo);
    let brief = repo.ok(&["compile", "d050", "--for", "codex", "--budget", "2000"]);
    assert!(
        brief.contains("Please write hello into note.txt"),
        "{brief}"
    );
    let out = repo
        .session()
        .args(["compile", "d050", "--for", "codex", "--budget", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("budget"),
        "{}",
        text(&out.stderr)
    );
    let json: Value =
        serde_json::from_str(&repo.ok(&["compile", "d050", "--for", "claude", "--format", "json"]))
            .unwrap();
    assert!(json.is_object());
}

#[test]
fn an_external_summarizer_is_used_and_its_failure_falls_back() {
    let repo = Repo::new();
    captured_claude(&repo);
    let script = r#"python3 -c 'import json,sys; r=json.load(sys.stdin); print(json.dumps({"summaries":[{"text":"SUMMARY-FROM-COMMAND","seqs":[r["excerpts"][0]["seq"]]}]}))'"#;
    let out = repo
        .session()
        .args([
            "compile",
            "d050",
            "--for",
            "codex",
            "--summarizer-cmd",
            script,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("SUMMARY-FROM-COMMAND"),
        "{}",
        text(&out.stdout)
    );

    let out = repo
        .session()
        .args([
            "compile",
            "d050",
            "--for",
            "codex",
            "--summarizer-cmd",
            "echo broken >&2; exit 3",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "a failing summarizer must not fail the compile: {}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("warning:"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("Please write hello into note.txt"));
}

#[test]
fn a_passphrase_protected_key_signs_through_ssh_agent() {
    let repo = Repo::new();
    captured_claude(&repo);
    let key = keygen(&repo.outside(""), "id_agent", "correct horse");
    // A private agent for this test only.
    let socket = repo.outside("agent.sock");
    let mut agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&socket)
        .spawn()
        .unwrap();
    for _ in 0..50 {
        if socket.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let add = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s' 'correct horse' > {pw}; SSH_ASKPASS_REQUIRE=force SSH_ASKPASS={ask} DISPLAY=x ssh-add {key} </dev/null",
            pw = repo.outside("pw").display(),
            ask = {
                let ask = repo.outside("askpass.sh");
                std::fs::write(&ask, format!("#!/bin/sh\ncat {}\n", repo.outside("pw").display())).unwrap();
                Command::new("chmod").arg("+x").arg(&ask).status().unwrap();
                ask.display().to_string()
            },
            key = key.display()))
        .env("SSH_AUTH_SOCK", &socket)
        .output()
        .unwrap();
    assert!(add.status.success(), "ssh-add: {}", text(&add.stderr));
    let public = key.with_extension("pub");
    let allowed = repo.outside("allowed_signers");
    std::fs::write(
        &allowed,
        format!(
            "test@example.com {}",
            std::fs::read_to_string(&public).unwrap()
        ),
    )
    .unwrap();
    repo.git(&["config", "session.signingKey", public.to_str().unwrap()]);
    repo.git(&[
        "config",
        "gpg.ssh.allowedSignersFile",
        allowed.to_str().unwrap(),
    ]);
    let home = repo.outside("codex-home");
    let out = repo
        .session()
        .env("SSH_AUTH_SOCK", &socket)
        .args([
            "handoff",
            ROUNDTRIP,
            "--to",
            "codex",
            "--home",
            home.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let _ = agent.kill();
    let _ = agent.wait();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("signed receipt"),
        "{}",
        text(&out.stderr)
    );
    let verify = repo.ok(&["verify", ROUNDTRIP]);
    assert!(
        verify.contains("good signature by test@example.com"),
        "{verify}"
    );
}

/// Returns the one rollout file under a Codex home.
fn rollout(home: &Path) -> PathBuf {
    let mut found = codex_rollouts(home);
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

#[test]
fn the_handoff_target_continued_is_captured_as_a_linked_child() {
    let repo = Repo::new();
    captured_claude(&repo);
    let (printed, event) = handoff(&repo, &[]);
    let native = printed.trim().rsplit(' ').next().unwrap().to_owned();
    let handoff_seq = event["seq"].as_u64().unwrap();
    let source_events = repo.events(ROUNDTRIP);
    let home = repo.outside("codex-home");
    let file = rollout(&home);
    let import = |repo: &Repo| repo.ok(&["import", "--home", home.to_str().unwrap()]);

    // Seen before Codex ran: the child exists at once, holding nothing new.
    let out = import(&repo);
    assert!(out.starts_with(&native), "{out}");
    let child: Value = serde_json::from_str(&repo.ok(&["show", &native, "--json"])).unwrap();
    assert_eq!(child["header"]["agent"], "codex");
    assert_eq!(child["header"]["native_id"], native.as_str());
    assert_eq!(child["header"]["lineage"]["parent_session"], ROUNDTRIP);
    assert_eq!(
        child["header"]["lineage"]["fork_seq"].as_u64(),
        Some(handoff_seq)
    );
    let inherited = child["events"].as_array().unwrap().clone();
    assert_eq!(inherited.len() as u64, handoff_seq + 1);
    assert_eq!(inherited[..], source_events[..], "shared, not copied anew");

    // Codex continues the rollout; only its records are added, to the child.
    let mut body = std::fs::read_to_string(&file).unwrap();
    for line in [
        r#"{"timestamp":"2026-01-02T00:00:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"NEXT-Q: and now?"}]}}"#,
        r#"{"timestamp":"2026-01-02T00:00:01.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"NEXT-A: done."}]}}"#,
    ] {
        body.push_str(line);
        body.push('\n');
    }
    std::fs::write(&file, &body).unwrap();
    import(&repo);
    let events = repo.events(&native);
    let added: Vec<(&str, &str)> = events[inherited.len()..]
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["payload"]["text"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        added,
        vec![
            ("message.user", "NEXT-Q: and now?"),
            ("message.assistant", "NEXT-A: done.")
        ]
    );
    assert_eq!(
        repo.events(ROUNDTRIP),
        source_events,
        "the source is untouched"
    );
    assert_eq!(
        repo.git(&["for-each-ref", "refs/sessions/"])
            .lines()
            .count(),
        2
    );
    assert_eq!(import(&repo), "");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), body);
    repo.ok(&["verify"]);
    repo.fsck();
}

#[test]
fn a_cross_agent_resume_continued_after_the_session_moved_on_forks_as_that_agent() {
    let repo = Repo::new();
    captured_claude(&repo);
    let home = repo.outside("codex-home");
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    repo.ok(&[
        "resume",
        ROUNDTRIP,
        "--agent",
        "codex",
        "--home",
        home.to_str().unwrap(),
    ]);
    let file = rollout(&home);
    // The session moves on meanwhile, so Codex's turn goes to a fork.
    let mut note = event(0);
    note["payload"]["text"] = "MOVED-ON: a note after the resume".into();
    let note = repo.write_jsonl("note.jsonl", &[note]);
    repo.ok(&["append", ROUNDTRIP, note.to_str().unwrap()]);
    let mut body = std::fs::read_to_string(&file).unwrap();
    body.push_str(
        r#"{"timestamp":"2026-01-02T00:00:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"NEXT-Q: and now?"}]}}"#,
    );
    body.push('\n');
    std::fs::write(&file, &body).unwrap();
    let out = repo.ok(&["import", "--home", home.to_str().unwrap()]);
    assert!(
        out.contains("codex") && out.contains("new fork of"),
        "{out}"
    );
    let listed: Value = serde_json::from_str(&repo.ok(&["list", "--json"])).unwrap();
    let fork = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] != ROUNDTRIP)
        .unwrap_or_else(|| panic!("no fork listed: {listed}"));
    // The fork holds Codex's continuation under Codex's native id: it is
    // codex's, as the import said, not the source session's agent.
    assert_eq!(fork["agent"], "codex", "{fork}");
    let id = fork["id"].as_str().unwrap();
    let shown: Value = serde_json::from_str(&repo.ok(&["show", id, "--json"])).unwrap();
    assert_eq!(shown["header"]["agent"], "codex");
    assert_eq!(shown["header"]["lineage"]["parent_session"], ROUNDTRIP);
    let last = shown["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["payload"]["text"], "NEXT-Q: and now?", "{last}");
    repo.ok(&["verify"]);
}

#[test]
fn a_handoff_to_the_sessions_own_agent_is_a_resume_and_writes_nothing() {
    let repo = Repo::new();
    captured_claude(&repo);
    let before = repo.events(ROUNDTRIP);
    let home = repo.outside("claude-home");
    let err = repo.fails(
        &[
            "handoff",
            ROUNDTRIP,
            "--to",
            "claude",
            "--home",
            home.to_str().unwrap(),
        ],
        1,
    );
    assert!(
        err.contains("a handoff to the same agent is a resume")
            && err.contains(&format!("git session resume {ROUNDTRIP}")),
        "{err}"
    );
    assert_eq!(files_under(&home), Vec::<PathBuf>::new());
    assert_eq!(repo.events(ROUNDTRIP), before);
}

#[test]
fn a_target_without_its_database_or_with_an_unknown_schema_is_refused_before_writing() {
    let repo = Repo::new();
    captured_claude(&repo);
    let before = repo.events(ROUNDTRIP);
    // No store: the agent has never run with this home.
    for (agent, db) in [
        ("hermes", ".hermes/state.db"),
        ("opencode", ".local/share/opencode/opencode.db"),
    ] {
        let home = repo.outside(&format!("{agent}-empty"));
        std::fs::create_dir_all(&home).unwrap();
        let out = repo
            .session()
            .env("PATH", "/usr/bin:/bin")
            .args([
                "handoff",
                ROUNDTRIP,
                "--to",
                agent,
                "--home",
                home.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{agent}: {err}");
        assert!(
            err.contains(db)
                && err.contains("does not exist")
                && err.contains("nothing was written"),
            "{agent}: {err}"
        );
        assert!(err.contains("run the agent once"), "{agent}: {err}");
        assert_eq!(files_under(&home), Vec::<PathBuf>::new(), "{agent}");
    }
    // A database of a schema the adapter does not know.
    let home = repo.outside("hermes-odd");
    let db = home.join(".hermes/state.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/samples/hermes/oracle/state.db"),
        &db,
    )
    .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "DELETE FROM messages; DELETE FROM session_model_usage; DELETE FROM sessions;
         ALTER TABLE messages RENAME COLUMN content TO body;",
    )
    .unwrap();
    drop(conn);
    let err = repo.fails(
        &[
            "handoff",
            ROUNDTRIP,
            "--to",
            "hermes",
            "--home",
            home.to_str().unwrap(),
        ],
        1,
    );
    assert!(err.contains("unknown schema"), "{err}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0, "nothing was written");
    assert_eq!(repo.events(ROUNDTRIP), before, "no handoff event");
}

/// Returns a Hermes home with the client's own (emptied) database.
fn hermes_home(repo: &Repo, name: &str) -> PathBuf {
    let home = repo.outside(name);
    let db = home.join(".hermes/state.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/samples/hermes/oracle/state.db"),
        &db,
    )
    .unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "DELETE FROM messages; DELETE FROM session_model_usage; DELETE FROM sessions;",
        )
        .unwrap();
    home
}

#[test]
fn an_interrupted_handoff_leaves_both_or_neither_after_the_next_command() {
    use std::os::unix::process::ExitStatusExt;
    // (target, where the handoff is killed, whether it counts as done)
    for (to, point, done) in [
        ("codex", "handoff-after-intent", false),
        ("codex", "handoff-after-files", true),
        ("codex", "handoff-after-native", true),
        ("codex", "handoff-after-event", true),
        ("codex", "handoff-after-receipt", true),
        ("hermes", "handoff-after-intent", false),
        ("hermes", "handoff-after-files", false),
        ("hermes", "handoff-after-native", true),
        ("hermes", "handoff-after-event", true),
    ] {
        let repo = Repo::new();
        captured_claude(&repo);
        let home = match to {
            "hermes" => hermes_home(&repo, "hermes-home"),
            _ => repo.outside("codex-home"),
        };
        let before = repo.events(ROUNDTRIP).len();
        let out = repo
            .session()
            .env("GIT_SESSION_FAILPOINT", point)
            .env("PATH", "/usr/bin:/bin")
            .args([
                "handoff",
                ROUNDTRIP,
                "--to",
                to,
                "--home",
                home.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{to} {point}: the failpoint kills the handoff: {}",
            text(&out.stderr)
        );
        // The next command (any) settles what the killed one left.
        let next = repo.session().args(["list"]).output().unwrap();
        assert!(next.status.success(), "{}", text(&next.stderr));
        let said = text(&next.stderr);
        let native = |home: &Path| -> usize {
            match to {
                "hermes" => rusqlite::Connection::open(home.join(".hermes/state.db"))
                    .unwrap()
                    .query_row("SELECT count(*) FROM sessions", [], |r| r.get::<_, i64>(0))
                    .unwrap() as usize,
                _ => files_under(home)
                    .iter()
                    .filter(|p| p.to_string_lossy().contains("rollout-"))
                    .count(),
            }
        };
        let events = repo.events(ROUNDTRIP);
        let handoffs: Vec<&Value> = events.iter().filter(|e| e["type"] == "handoff").collect();
        if done {
            assert_eq!(handoffs.len(), 1, "{to} {point}: one handoff event");
            assert_eq!(events.len(), before + 2, "{to} {point}");
            assert_eq!(native(&home), 1, "{to} {point}: the native session");
            // The receipt is on the handoff's commit.
            let tip = repo.git(&["rev-parse", &format!("refs/sessions/{ROUNDTRIP}")]);
            assert_eq!(
                note(&repo, &tip)["receipt"]["handoff_seq"],
                handoffs[0]["seq"]
            );
            assert!(
                said.contains("completed the interrupted handoff"),
                "{to} {point}: {said}"
            );
        } else {
            assert_eq!(handoffs.len(), 0, "{to} {point}: no handoff event");
            assert_eq!(events.len(), before, "{to} {point}");
            assert_eq!(native(&home), 0, "{to} {point}: no native session");
            assert!(
                said.contains("rolled back the interrupted handoff"),
                "{to} {point}: {said}"
            );
        }
        // Settled once: nothing is left for a later command.
        let again = repo.session().args(["list"]).output().unwrap();
        assert!(
            !text(&again.stderr).contains("interrupted"),
            "{}",
            text(&again.stderr)
        );
        assert_eq!(
            files_under(&repo.root.join(".git/session/handoffs")),
            Vec::<PathBuf>::new()
        );
        // Rolled back: nothing is in the way of a handoff after it.
        if done {
            continue;
        }
        let out = repo
            .session()
            .env("PATH", "/usr/bin:/bin")
            .args([
                "handoff",
                ROUNDTRIP,
                "--to",
                to,
                "--home",
                home.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{to} {point}: {}", text(&out.stderr));
        assert_eq!(native(&home), 1, "{to} {point}");
    }
}

/// A session handed to Hermes twice into one home: Hermes' `sessions.title`
/// is unique, so the second handoff gets the next title of the lineage
/// (`<title> #2`, Hermes' own rule), and the real client resumes it with
/// every turn the first one has.
#[test]
fn a_second_handoff_to_hermes_gets_the_next_title_and_resumes_in_full() {
    use crate::oracle::{resume_check, turns};
    let repo = Repo::new();
    captured_claude(&repo);
    let home = repo.outside("hermes-home");
    crate::hermes::init_hermes_home(&home);
    let hand = || -> String {
        let report = repo.ok_json(&[
            "handoff",
            ROUNDTRIP,
            "--to",
            "hermes",
            "--home",
            home.to_str().unwrap(),
            "--json",
        ]);
        report["native_id"].as_str().unwrap().to_owned()
    };
    let first = hand();
    let second = hand();
    assert_ne!(first, second);
    let db = rusqlite::Connection::open(home.join(".hermes/state.db")).unwrap();
    let title = |id: &str| -> String {
        db.query_row("SELECT title FROM sessions WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .unwrap()
    };
    let base = title(&first);
    assert!(!base.is_empty());
    assert_eq!(title(&second), format!("{base} #2"));
    drop(db);
    let roots = [repo.root.as_path()];
    let second_turns = turns(&resume_check("hermes", &home, &second, &repo.root), &roots);
    let first_turns = turns(&resume_check("hermes", &home, &first, &repo.root), &roots);
    // The brief (first turn) is compiled anew; the history after it is the same.
    assert!(first_turns.len() > 2, "{first_turns:#?}");
    assert_eq!(second_turns.len(), first_turns.len(), "{second_turns:#?}");
    assert_eq!(second_turns[1..], first_turns[1..]);
}

/// The public moredip session in Claude Code's older layout (the
/// sub-agent's records inline, `isSidechain: true`) handed to Codex: the
/// real client's main line holds the brief and the parent's turns only,
/// the same turns as the same session in the newer layout (the sub-agent
/// in its own `subagents/` file), and none of the sub-agent's.
#[test]
fn inline_sub_agent_records_stay_off_the_targets_main_line() {
    use crate::oracle::{resume_check, turns};
    use serde_json::json;
    const SESSION: &str = "4b2030ed-5563-49ea-b703-6a002f2d3cc8";
    const OLD_CWD: &str = "/Users/pete/git/moredip/session-share";
    // The sub-agent's own web search, which only its records hold.
    const SUBAGENT_QUERY: &str = "most popular Thai curry color green red yellow massaman ranking";
    let main_line = |inline: bool| -> (Vec<String>, Vec<String>) {
        let repo = Repo::new();
        let source = repo.outside("source");
        let cwd = repo.root.to_str().unwrap();
        if inline {
            let dir = source
                .join(".claude/projects")
                .join(git_session_adapters::claude::project_dir_name(cwd));
            std::fs::create_dir_all(&dir).unwrap();
            let file = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("adapters/tests/data/claude-inline-sidechain.jsonl");
            let body = std::fs::read_to_string(file).unwrap();
            assert!(body.contains("\"isSidechain\":true"));
            std::fs::write(
                dir.join(format!("{SESSION}.jsonl")),
                body.replace(OLD_CWD, cwd),
            )
            .unwrap();
        } else {
            copy_tree(
                &fixtures().join("claude/public-moredip-subagent/native"),
                &source.join(".claude"),
                OLD_CWD,
                cwd,
            );
        }
        repo.ok(&["import", "--home", source.to_str().unwrap()]);
        let home = repo.outside("codex-home");
        let report = repo.ok_json(&[
            "handoff",
            SESSION,
            "--to",
            "codex",
            "--home",
            home.to_str().unwrap(),
            "--json",
        ]);
        let native = report["native_id"].as_str().unwrap();
        let losses: Vec<String> = report["losses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_owned())
            .collect();
        let check = resume_check("codex", &home, native, &repo.root);
        let conversation = Value::Array(
            check["turns"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["injected"] != true && t["kind"] != "thinking")
                .cloned()
                .collect(),
        );
        let roots = [repo.root.as_path()];
        (turns(&json!({ "turns": conversation }), &roots), losses)
    };
    let (inline, losses) = main_line(true);
    let (own_file, _) = main_line(false);
    assert!(
        losses
            .iter()
            .any(|l| l.starts_with("subagent-folded: ") && l.contains("of sub-agent a2018e5")),
        "{losses:?}"
    );
    assert!(
        inline.iter().all(|t| !t.contains(SUBAGENT_QUERY)),
        "the sub-agent's search is on the main line: {inline:#?}"
    );
    // The brief, the prompt, the Task call, its result (the sub-agent's
    // answer) and the reply: the parent's turns, whatever the layout.
    assert_eq!(inline.len(), 5, "{inline:#?}");
    assert_eq!(inline[1..], own_file[1..]);
}
