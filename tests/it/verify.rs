//! `verify` finds tampering and corruption and names the seq.

use crate::support::*;

/// Replaces `path` in the session tree with `content` in a new commit on
/// the session ref that keeps the tip's message (as a forger would).
fn rewrite_in_session(repo: &Repo, session: &str, path: &str, content: &[u8]) {
    let refname = format!("refs/sessions/{session}");
    let blob = repo.git_stdin(&["hash-object", "-w", "--stdin"], content);
    let index = repo.outside("forge.index");
    let index = index.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = repo
            .git_in(&repo.root)
            .env("GIT_INDEX_FILE", index)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
        text(&out.stdout).trim().to_owned()
    };
    run(&["read-tree", &refname]);
    run(&[
        "update-index",
        "--cacheinfo",
        &format!("100644,{blob},{path}"),
    ]);
    let tree = run(&["write-tree"]);
    let message = repo.git(&["log", "-1", "--format=%B", &refname]);
    let parents = repo.git(&["log", "-1", "--format=%P", &refname]);
    let mut args = vec!["commit-tree", tree.as_str()];
    for p in parents.split_whitespace() {
        args.extend(["-p", p]);
    }
    let commit = repo.git_stdin(&args, message.as_bytes());
    repo.git(&["update-ref", &refname, &commit]);
}

#[test]
fn verify_names_the_seq_of_a_tampered_event() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-tamper", 12)));
    repo.ok(&["verify", "s-tamper"]);
    let path = "events/00/00/00-0.jsonl";
    let chunk = repo.git(&["show", &format!("refs/sessions/s-tamper:{path}")]);
    let forged = chunk.replacen("please fix bug 8", "please fix bug 0", 1) + "\n";
    assert_ne!(forged.trim_end(), chunk);
    rewrite_in_session(&repo, "s-tamper", path, forged.as_bytes());

    let out = repo
        .session()
        .args(["verify", "s-tamper"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report = text(&out.stdout);
    assert!(report.contains("seq 8: checksum mismatch"), "{report}");
    assert!(
        !report.contains("seq 9"),
        "one bad event is reported once: {report}"
    );
    assert!(
        text(&out.stderr).contains("first bad event: s-tamper seq 8"),
        "{}",
        text(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(
        &repo
            .session()
            .args(["verify", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(json[0]["ok"], false);
    assert_eq!(json[0]["problems"][0]["seq"], 8);
}

#[test]
fn verify_finds_a_rewritten_chunk_and_a_missing_event() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-drop", 6)));
    let more = repo.write_jsonl("b.jsonl", &[event(0), event(1)]);
    repo.ok(&["append", "s-drop", more.to_str().unwrap()]);
    // Dropping line 3 of the first chunk breaks the chain at the next event
    // and rewrites a sealed chunk.
    let path = "events/00/00/00-0.jsonl";
    let chunk = repo.git(&["show", &format!("refs/sessions/s-drop:{path}")]);
    let kept: Vec<&str> = chunk
        .lines()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .map(|(_, l)| l)
        .collect();
    rewrite_in_session(&repo, "s-drop", path, (kept.join("\n") + "\n").as_bytes());
    let out = repo.session().args(["verify", "s-drop"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report = text(&out.stdout);
    assert!(report.contains("seq 3: event says seq 4"), "{report}");
    assert!(
        report.contains("rewrote sealed chunk events/00/00/00-0.jsonl"),
        "{report}"
    );
}

#[test]
fn verify_reports_a_corrupted_object_with_its_seq() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-rot", 3)));
    let more = repo.write_jsonl("b.jsonl", &[event(0), event(1)]);
    repo.ok(&["append", "s-rot", more.to_str().unwrap()]);
    let blob = repo.git(&["rev-parse", "refs/sessions/s-rot:events/00/00/01-3.jsonl"]);
    let object = repo
        .root
        .join(".git/objects")
        .join(&blob[..2])
        .join(&blob[2..]);
    std::fs::write(&object, b"garbage, not zlib").unwrap();
    let out = repo.session().args(["verify", "s-rot"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report = text(&out.stdout);
    assert!(
        report.contains("chunk events/00/00/01-3.jsonl cannot be read"),
        "{report}"
    );
    assert!(text(&out.stderr).contains("seq 3"), "{}", text(&out.stderr));
    // Reading the intact part still works; reading the broken part errors
    // instead of returning wrong events.
    repo.ok(&["show", "s-rot", "--seq", "0..2"]);
    let err = repo.fails(&["show", "s-rot", "--seq", "3.."], 1);
    assert!(err.contains("cannot be read"), "{err}");
}

#[test]
fn stored_newer_format_is_reported_as_newer_not_corrupt() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-fmt", 2)));
    let header = repo.git(&["show", "refs/sessions/s-fmt:header.json"]);
    let newer = header.replace("\"format\": 1", "\"format\": 7");
    assert_ne!(newer, header);
    rewrite_in_session(&repo, "s-fmt", "header.json", newer.as_bytes());
    let err = repo.fails(&["show", "s-fmt"], 1);
    assert!(
        err.contains("written by a newer git-session (format 7") && err.contains("upgrade"),
        "{err}"
    );
    let out = repo.session().args(["verify", "s-fmt"]).output().unwrap();
    assert!(
        text(&out.stdout).contains("newer git-session"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn an_event_over_the_size_limit_is_refused_not_stored_unreadable() {
    let repo = Repo::new();
    repo.git(&["config", "session.maxEventSize", "2k"]);
    let mut lines = session_lines("s-big", 4);
    lines[2]["payload"]["text"] = "y".repeat(5000).into();
    let file = repo.write_jsonl("s-big.jsonl", &lines);
    let err = repo.fails(&["import", "--canonical", file.to_str().unwrap()], 1);
    assert!(
        err.contains("seq 1 is")
            && err.contains("not stored")
            && err.contains("session.maxEventSize"),
        "{err}"
    );
    // Nothing half written: no session that cannot be read back.
    assert!(!repo.ok(&["list"]).contains("s-big"));
    repo.git(&["config", "session.maxEventSize", "1m"]);
    repo.import(&file);
    assert_eq!(repo.events("s-big").len(), 4);
    // A clone with the lower limit reads it as over the limit at that
    // seq, and nothing else: the chain goes on past it.
    repo.git(&["config", "session.maxEventSize", "2k"]);
    let out = repo.session().args(["verify", "s-big"]).output().unwrap();
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(said.contains("seq 1: event is"), "{said}");
    assert!(!said.contains("checksum mismatch"), "{said}");
}
