//! Command-line behaviour: ids by prefix, errors with hints, exit codes.

use crate::support::*;

#[test]
fn outside_a_repository_says_so_and_exits_1() {
    let dir = Repo::bare_dir();
    let err = dir.fails(&["list"], 1);
    assert!(err.contains("not a git repository"), "{err}");
    assert!(err.contains("hint:"), "{err}");
}

#[test]
fn usage_errors_exit_2() {
    let repo = Repo::new();
    repo.fails(&["show"], 2);
    repo.fails(&["no-such-command"], 2);
    repo.fails(&["show", "x", "--seq", "5..2"], 2);
}

#[test]
fn every_agent_argument_takes_the_registry_names() {
    let repo = Repo::new();
    // One value parser for --agent, --to and --for: an unknown agent is a
    // usage error naming the accepted ones, before anything else happens.
    for args in [
        &["compile", "x", "--for", "foo"][..],
        &["handoff", "x", "--to", "foo"],
        &["resume", "x", "--agent", "foo"],
        &["import", "--agent", "foo"],
    ] {
        let err = repo.fails(args, 2);
        assert!(
            err.contains("invalid value 'foo'") && err.contains("claude") && err.contains("codex"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn ids_accept_unique_prefixes_and_unknown_ids_suggest_close_ones() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("abc-111", 1)));
    repo.import(&repo.write_jsonl("b.jsonl", &session_lines("abd-222", 1)));
    assert!(repo.ok(&["show", "abc"]).contains("session  abc-111"));
    let err = repo.fails(&["show", "ab"], 1);
    assert!(
        err.contains("ambiguous") && err.contains("abc-111") && err.contains("abd-222"),
        "{err}"
    );
    let err = repo.fails(&["show", "abx-111"], 1);
    assert!(
        err.contains("no session matches") && err.contains("abc-111"),
        "{err}"
    );
    // An empty id is a prefix of every id, and of the only one: refused.
    let one = Repo::new();
    one.import(&one.write_jsonl("a.jsonl", &session_lines("abc-111", 1)));
    for r in [&repo, &one] {
        let err = r.fails(&["show", ""], 1);
        assert!(err.contains("the session id is empty"), "{err}");
    }
}

#[test]
fn list_show_and_log_print_text_and_json() {
    let repo = Repo::new();
    repo.ok(&["init"]);
    assert!(repo.ok(&["init"]).contains("Already initialized"));
    assert_eq!(repo.ok(&["list"]), "");
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-show", 8)));
    let list = repo.ok(&["list"]);
    assert!(
        list.contains("s-show") && list.contains("8 events") && list.contains("Fix the parser"),
        "{list}"
    );
    let json: serde_json::Value = serde_json::from_str(&repo.ok(&["list", "--json"])).unwrap();
    assert_eq!(json[0]["events"], 8);
    assert_eq!(json[0]["agent"], "claude");

    let text = repo.ok(&["show", "s-show", "--seq", "2..3"]);
    assert!(
        text.contains("tool.call") && text.contains("cargo test 2"),
        "{text}"
    );
    assert!(!text.contains("please fix bug 0"), "{text}");
    let shown: serde_json::Value =
        serde_json::from_str(&repo.ok(&["show", "s-show", "--seq", "5..", "--json"])).unwrap();
    let seqs: Vec<u64> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![5, 6, 7]);
    assert_eq!(shown["events_total"], 8);

    let log: serde_json::Value =
        serde_json::from_str(&repo.ok(&["log", "s-show", "--json"])).unwrap();
    assert_eq!(log[0]["seq"], serde_json::json!([0, 7]));
    assert_eq!(
        log[0]["code_commit"],
        repo.git(&["rev-parse", "HEAD"]).as_str()
    );
}

#[test]
fn export_to_a_file_writes_it_whole() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-out", 3)));
    let path = repo.outside("out.jsonl");
    repo.ok(&[
        "export",
        "s-out",
        "--canonical",
        "-o",
        path.to_str().unwrap(),
    ]);
    let whole = repo.ok(&["export", "s-out", "--canonical"]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), whole);
    // `-o -` is stdout, as in git, not a file named `-` in the work tree.
    assert_eq!(
        repo.ok(&["export", "s-out", "--canonical", "-o", "-"]),
        whole
    );
    let brief = repo.ok(&["compile", "s-out", "--for", "codex", "-o", "-"]);
    assert!(brief.contains("s-out"), "{brief}");
    assert!(!repo.root.join("-").exists());
}

#[test]
fn a_reader_that_stops_early_is_no_error() {
    // `git session export … | head`: git says nothing and exits 0 when its
    // reader goes away; so does git-session, whichever path writes.
    use std::io::Read;
    let repo = Repo::new();
    let mut lines = session_lines("s-pipe", 3000);
    for l in lines.iter_mut().skip(1) {
        l["payload"]["text"] = "x".repeat(200).into();
    }
    repo.import(&repo.write_jsonl("a.jsonl", &lines));
    for args in [
        &["export", "s-pipe", "--canonical"][..],
        &["export", "s-pipe", "--format", "md"][..],
        &["show", "s-pipe", "--json"][..],
    ] {
        let mut child = repo
            .spawnable_in(&repo.root)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 16];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert_eq!(text(&out.stderr), "", "{args:?}");
    }
}

#[test]
fn reftable_repositories_are_refused_clearly() {
    let repo = Repo::bare_dir();
    repo.git(&["init", "-q", "--ref-format=reftable", "."]);
    let err = repo.fails(&["list"], 1);
    assert!(err.contains("reftable"), "{err}");
}
