//! The tamper suite: one test per kind of tampering `verify` must catch.
//! Each runs with signing on (a signing key, an allowed-signers file and
//! `session.requireSigned`) and, where the kind does not need a signature
//! to be seen, with signing off too. What only a signature can reveal (a
//! history rewritten with recomputed checksums and trailers) is asserted
//! to pass unsigned: the limit is documented, not hidden.

use std::path::Path;
use std::process::Command;

use crate::support::*;

const ID: &str = "s-tamper";

/// A repository with session `ID` in three batches; with `signed`, every
/// batch is signed and signatures are required.
fn setup(signed: bool) -> Repo {
    let repo = Repo::new();
    if signed {
        let key = keygen(&repo.outside(""), "id_signing", "");
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        let allowed = repo.outside("allowed_signers");
        std::fs::write(
            &allowed,
            format!("test@example.com namespaces=\"git,git-session\" {public}"),
        )
        .unwrap();
        repo.git(&["config", "gpg.format", "ssh"]);
        repo.git(&["config", "user.signingKey", key.to_str().unwrap()]);
        repo.git(&[
            "config",
            "gpg.ssh.allowedSignersFile",
            allowed.to_str().unwrap(),
        ]);
        repo.git(&["config", "session.requireSigned", "true"]);
    }
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines(ID, 6)));
    for (i, n) in [(1, 3), (2, 2)] {
        let lines: Vec<_> = (0..n).map(event).collect();
        let f = repo.write_jsonl(&format!("b{i}.jsonl"), &lines);
        repo.ok(&["append", ID, f.to_str().unwrap()]);
    }
    let out = repo.ok(&["verify", ID]);
    if signed {
        assert!(out.contains("all signed"), "{out}");
    }
    repo
}

/// Runs verify and returns (exit code, stdout).
fn verify(repo: &Repo) -> (Option<i32>, String) {
    let out = repo.session().args(["verify", ID]).output().unwrap();
    (out.status.code(), text(&out.stdout))
}

fn caught(repo: &Repo, want: &str) {
    let (code, out) = verify(repo);
    assert_eq!(code, Some(1), "not caught: {out}");
    assert!(out.contains(want), "expected {want:?} in: {out}");
}

/// Rebuilds the session in a scratch repository from its exported events,
/// keeping the original commits of the first `keep_first_batches` batches
/// and re-appending the rest with the text `from` replaced by `to`;
/// checksums and trailers are recomputed by git-session itself (what a
/// forger with the tool can do). Installs it as the session ref.
fn rewrite_history(repo: &Repo, keep_first_batches: usize, from: &str, to: &str) {
    let scratch = repo.outside(&format!("forger-{keep_first_batches}"));
    repo.git(&["init", "-q", scratch.to_str().unwrap()]);
    let refname = format!("refs/sessions/{ID}");
    let batches: Vec<String> = repo
        .git(&["rev-list", "--first-parent", "--reverse", &refname])
        .lines()
        .map(str::to_owned)
        .collect();
    let run = |dir: &Path, args: &[&str]| {
        let out = repo.session_in(dir).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let exported = run(&repo.root, &["export", "--canonical", ID]);
    let mut lines: Vec<serde_json::Value> = exported
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kept_events = match keep_first_batches {
        0 => 0,
        n => repo
            .git(&[
                "log",
                "-1",
                "--format=%(trailers:key=Session-Events,valueonly)",
                &batches[n - 1],
            ])
            .trim()
            .parse::<usize>()
            .unwrap(),
    };
    let mut edited = 0;
    for l in lines.iter_mut().skip(1 + kept_events) {
        if let Some(obj) = l.as_object_mut() {
            obj.remove("checksum");
        }
        if l["payload"]["text"] == from {
            l["payload"]["text"] = to.into();
            edited += 1;
        }
    }
    assert_eq!(edited, 1, "{from:?} is not once in the rewritten part");
    if keep_first_batches == 0 {
        let f = repo.write_jsonl("forged-all.jsonl", &lines);
        run(&scratch, &["import", "--canonical", f.to_str().unwrap()]);
    } else {
        // Start from the original commit of batch `keep`, then append the rest.
        let base = &batches[keep_first_batches - 1];
        repo.git_in(&scratch)
            .args([
                "fetch",
                "-q",
                repo.root.to_str().unwrap(),
                &format!("{base}:{refname}"),
            ])
            .assert()
            .success();
        let rest: Vec<serde_json::Value> = lines[1 + kept_events..].to_vec();
        let f = repo.write_jsonl("forged-tail.jsonl", &rest);
        run(&scratch, &["append", ID, f.to_str().unwrap()]);
    }
    repo.git(&[
        "fetch",
        "-q",
        scratch.to_str().unwrap(),
        &format!("+{refname}:{refname}"),
    ]);
}

#[test]
fn an_edited_event_with_recomputed_checksums_needs_a_signature_to_be_seen() {
    let repo = setup(true);
    rewrite_history(&repo, 0, "please fix bug 4", "please fix bug 4 (forged)");
    caught(&repo, "is not signed");
    // Unsigned, the rewrite is consistent: only the remembered tip of an
    // earlier verify shows it (a rollback of what this clone saw).
    let repo = setup(false);
    rewrite_history(&repo, 0, "please fix bug 4", "please fix bug 4 (forged)");
    caught(&repo, "rolled back: this clone last verified");
    // On a clone that never verified before, nothing can tell.
    std::fs::remove_dir_all(repo.root.join(".git/session/verified")).unwrap();
    assert_eq!(
        verify(&repo).0,
        Some(0),
        "an unsigned store cannot prove authorship"
    );
}

#[test]
fn a_rewrite_signed_by_another_key_is_caught() {
    let repo = setup(true);
    let other = keygen(&repo.outside(""), "id_attacker", "");
    rewrite_history_signed_by(&repo, &other);
    caught(&repo, "which the allowed-signers file does not list");
}

fn rewrite_history_signed_by(repo: &Repo, key: &Path) {
    // The forger signs with their own key: git-session in the scratch repo
    // uses it because it is that repo's configured key.
    let scratch = repo.outside("forger-signed");
    repo.git(&["init", "-q", scratch.to_str().unwrap()]);
    repo.git_in(&scratch)
        .args(["config", "session.signingKey", key.to_str().unwrap()])
        .assert()
        .success();
    let exported = repo.ok(&["export", "--canonical", ID]);
    let lines: Vec<serde_json::Value> = exported
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(o) = v.as_object_mut() {
                o.remove("checksum");
            }
            v
        })
        .collect();
    let f = repo.write_jsonl("forged-signed.jsonl", &lines);
    let out = repo
        .session_in(&scratch)
        .args(["import", "--canonical", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let refname = format!("refs/sessions/{ID}");
    repo.git(&[
        "fetch",
        "-q",
        scratch.to_str().unwrap(),
        &format!("+{refname}:{refname}"),
    ]);
}

#[test]
fn an_edit_inside_the_last_batch_is_caught() {
    for signed in [true, false] {
        let repo = setup(signed);
        // The last batch holds seq 9..10: event(0) and event(1) again.
        rewrite_history(&repo, 2, "Looking at bug 1.", "Looking at bug 1 (forged).");
        if signed {
            caught(&repo, "is not signed");
        } else {
            caught(&repo, "rolled back");
        }
    }
}

#[test]
fn a_ref_rolled_back_one_batch_is_caught() {
    for signed in [true, false] {
        let repo = setup(signed);
        let refname = format!("refs/sessions/{ID}");
        let tip = repo.git(&["rev-parse", &refname]);
        repo.git(&["update-ref", &refname, &format!("{tip}^")]);
        caught(&repo, "rolled back: this clone last verified");
        // --since says the same on a clone that never verified.
        std::fs::remove_dir_all(repo.root.join(".git/session/verified")).unwrap();
        let out = repo
            .session()
            .args(["verify", ID, "--since", &tip])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out.stdout).contains("rolled back: --since"),
            "{}",
            text(&out.stdout)
        );
    }
}

/// Replaces `path` in the tip's tree by `content` in a new commit that
/// keeps the tip's message and parent (an amended tip).
fn amend_tip(repo: &Repo, path: &str, content: Option<&[u8]>) {
    let refname = format!("refs/sessions/{ID}");
    let index = repo.outside("amend.index");
    let _ = std::fs::remove_file(&index);
    let run = |args: &[&str]| {
        let out = repo
            .git_in(&repo.root)
            .env("GIT_INDEX_FILE", &index)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
        text(&out.stdout).trim().to_owned()
    };
    run(&["read-tree", &refname]);
    match content {
        Some(c) => {
            let blob = repo.git_stdin(&["hash-object", "-w", "--stdin"], c);
            run(&[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("100644,{blob},{path}"),
            ]);
        }
        None => {
            run(&["update-index", "--force-remove", path]);
        }
    }
    let tree = run(&["write-tree"]);
    let message = repo.git(&["log", "-1", "--format=%B", &refname]);
    let parent = repo.git(&["rev-parse", &format!("{refname}^")]);
    let commit = repo.git_stdin(&["commit-tree", &tree, "-p", &parent], message.as_bytes());
    repo.git(&["update-ref", &refname, &commit]);
}

#[test]
fn a_rewritten_header_is_caught() {
    for signed in [true, false] {
        let repo = setup(signed);
        let header = repo.git(&["show", &format!("refs/sessions/{ID}:header.json")]);
        let forged = header.replace("Fix the parser", "Totally different title");
        assert_ne!(forged, header);
        amend_tip(&repo, "header.json", Some(forged.as_bytes()));
        caught(&repo, "the header was rewritten");
    }
}

#[test]
fn an_extra_file_in_the_tree_is_caught() {
    for signed in [true, false] {
        for path in [
            "notes.txt",
            "events/00/00/README",
            "artifacts/ab/x",
            "events/evil",
        ] {
            let repo = setup(signed);
            amend_tip(&repo, path, Some(b"hello"));
            caught(&repo, &format!("path {path} is outside the session layout"));
        }
    }
}

#[test]
fn a_deleted_chunk_is_caught() {
    for signed in [true, false] {
        let repo = setup(signed);
        amend_tip(&repo, "events/00/00/00-0.jsonl", None);
        caught(&repo, "removed events/00/00/00-0.jsonl");
    }
}

#[test]
fn a_broken_chain_is_caught() {
    for signed in [true, false] {
        let repo = setup(signed);
        let path = "events/00/00/00-0.jsonl";
        let chunk = repo.git(&["show", &format!("refs/sessions/{ID}:{path}")]);
        let forged = chunk.replacen("please fix bug 4", "please fix bug 5", 1) + "\n";
        amend_tip(&repo, path, Some(forged.as_bytes()));
        caught(&repo, "seq 4: checksum mismatch");
    }
}

#[test]
fn an_unsigned_batch_on_a_signed_session_is_caught() {
    let repo = setup(true);
    // Appended by someone without the key (signing off in their config).
    repo.git(&["config", "session.signCommits", "false"]);
    let f = repo.write_jsonl("late.jsonl", &[event(0)]);
    repo.ok(&["append", ID, f.to_str().unwrap()]);
    repo.git(&["config", "session.signCommits", "true"]);
    caught(&repo, "is not signed (session.requireSigned is set)");
}

#[test]
fn signed_batches_verify_with_git_itself() {
    let repo = setup(true);
    let refname = format!("refs/sessions/{ID}");
    for commit in repo
        .git(&["rev-list", &refname])
        .lines()
        .map(str::to_owned)
        .collect::<Vec<_>>()
    {
        let out = repo
            .git_in(&repo.root)
            .args(["verify-commit", "-v", &commit])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git verify-commit {commit}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("Good \"git\" signature"),
            "{}",
            text(&out.stderr)
        );
    }
    let shown = repo.git(&["log", "--show-signature", "-1", &refname]);
    assert!(
        shown.contains("Good \"git\" signature for test@example.com"),
        "{shown}"
    );
}

#[test]
fn a_stripped_or_missing_receipt_is_caught_with_an_allowed_signers_file() {
    const SESSION: &str = "d05046d2-74b1-4451-90dc-37fbd42c25e6";
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
    let home = repo.outside("codex-home");
    repo.ok(&[
        "handoff",
        SESSION,
        "--to",
        "codex",
        "--home",
        home.to_str().unwrap(),
    ]);
    let out = repo.ok(&["verify", SESSION]);
    assert!(out.contains("good signature"), "{out}");
    let tip = repo.git(&["rev-parse", &format!("refs/sessions/{SESSION}")]);
    let note = repo.git(&["notes", "--ref=git-session/receipts", "show", &tip]);
    let mut stripped: serde_json::Value = serde_json::from_str(&note).unwrap();
    stripped.as_object_mut().unwrap().remove("signature");
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
        serde_json::to_string_pretty(&stripped).unwrap().as_bytes(),
    );
    let run = || {
        let out = repo.session().args(["verify", SESSION]).output().unwrap();
        (out.status.code(), text(&out.stdout))
    };
    let (code, out) = run();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("is unsigned, and gpg.ssh.allowedSignersFile is set"),
        "{out}"
    );
    repo.git(&["notes", "--ref=git-session/receipts", "remove", &tip]);
    let (code, out) = run();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("has no receipt (stripped or never written)"),
        "{out}"
    );
    // Without an allowed-signers file there is nothing to hold it to.
    repo.git(&["config", "--unset", "gpg.ssh.allowedSignersFile"]);
    assert_eq!(run().0, Some(0));
}

#[test]
fn a_receipt_is_verified_over_its_stored_bytes() {
    const SESSION: &str = "d05046d2-74b1-4451-90dc-37fbd42c25e6";
    let repo = Repo::new();
    captured_claude(&repo);
    let key = keygen(&repo.outside(""), "id_receipts", "");
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let allowed = repo.outside("allowed_signers");
    std::fs::write(&allowed, format!("test@example.com {public}")).unwrap();
    repo.git(&["config", "session.signingKey", key.to_str().unwrap()]);
    repo.git(&[
        "config",
        "gpg.ssh.allowedSignersFile",
        allowed.to_str().unwrap(),
    ]);
    repo.git(&["config", "session.signCommits", "false"]);
    let home = repo.outside("codex-home");
    repo.ok(&[
        "handoff",
        SESSION,
        "--to",
        "codex",
        "--home",
        home.to_str().unwrap(),
    ]);
    let tip = repo.git(&["rev-parse", &format!("refs/sessions/{SESSION}")]);
    let note: serde_json::Value =
        serde_json::from_str(&repo.git(&["notes", "--ref=git-session/receipts", "show", &tip]))
            .unwrap();
    // A newer writer's receipt: unknown members, in an order this build
    // would not produce, signed over exactly these bytes.
    let compact = serde_json::to_string(&note["receipt"]).unwrap();
    let newer = format!("{},\"zeta\":1,\"alpha\":2}}", &compact[..compact.len() - 1]);
    let message = repo.outside("receipt-bytes");
    std::fs::write(&message, &newer).unwrap();
    let out = Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", "git-session", "-f"])
        .arg(&key)
        .arg(&message)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pem = std::fs::read_to_string(message.with_file_name("receipt-bytes.sig")).unwrap();
    let store_note = |receipt: &str| {
        let body = format!(
            "{{\"receipt\": {receipt}, \"signature\": {}}}\n",
            serde_json::to_string(&pem).unwrap()
        );
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
            body.as_bytes(),
        );
    };
    store_note(&newer);
    let out = repo.ok(&["verify", SESSION]);
    assert!(out.contains("good signature by test@example.com"), "{out}");
    // One changed byte in the stored receipt is a bad signature.
    store_note(&newer.replace("\"zeta\":1", "\"zeta\":3"));
    let out = repo.session().args(["verify", SESSION]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("bad signature"),
        "{}",
        text(&out.stdout)
    );
}
