//! `git session search`: matches on event text only, filters, the local
//! index kept current (appends, rebuilds after tampering, removed
//! sessions gone), hostile text escaped, and fetched sessions of other
//! clones with --all-clones.

use serde_json::{Value, json};

use crate::support::*;

const A: &str = "0199aaaa-0000-7000-8000-000000000001";
const B: &str = "0199bbbb-0000-7000-8000-000000000002";

/// Runs `search --json ARGS`; asserts the exit code says whether anything
/// matched (0) or nothing did (1, as `git grep`).
fn hits(repo: &Repo, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["search", "--json"];
    all.extend_from_slice(args);
    let (out, err, code) = run(repo, &all);
    let found = serde_json::from_str::<Value>(&out)
        .unwrap_or_else(|e| panic!("{e}: {out}{err}"))
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(code, i32::from(found.is_empty()), "{args:?}: {err}");
    found
}

fn seqs(hits: &[Value]) -> Vec<(String, u64)> {
    hits.iter()
        .map(|h| {
            (
                h["session"].as_str().unwrap().to_owned(),
                h["seq"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn two_sessions(repo: &Repo) {
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines(A, 8)));
    let mut lines = session_lines(B, 4);
    lines[0]["header"]["agent"] = json!("codex");
    for l in &mut lines[1..] {
        l["agent"] = json!("codex");
        l["ts"] = json!("2026-03-01T00:00:00Z");
    }
    lines[2]["payload"]["text"] =
        json!("The Parser was at fault: \"unterminated\" string\non line 2");
    repo.import(&repo.write_jsonl("b.jsonl", &lines));
}

#[test]
fn search_finds_text_with_filters_and_never_keys() {
    let repo = Repo::new();
    two_sessions(&repo);
    // Regex over both sessions, in session order then seq.
    let h = hits(&repo, &["bug [15]\\b"]);
    assert_eq!(seqs(&h), vec![(A.into(), 1), (A.into(), 5)], "{h:?}");
    // The tool.result of seq 3 names t2 in its tool_use_id: "ok" matches
    // content only; keys such as "payload" or "seq" are not text.
    assert!(hits(&repo, &["payload"]).is_empty());
    assert!(hits(&repo, &["tool_use_id"]).is_empty());
    assert!(
        hits(&repo, &["-F", "uuid-3"]).is_empty(),
        "origin is not text"
    );
    // Literal text with quotes and a line break read as a space.
    let h = hits(&repo, &["-F", "\"unterminated\" string on line"]);
    assert_eq!(seqs(&h), vec![(B.into(), 1)]);
    assert_eq!(h[0]["agent"], "codex");
    assert_eq!(h[0]["type"], "message.assistant");
    assert!(
        h[0]["snippet"]
            .as_str()
            .unwrap()
            .contains("The Parser was at fault")
    );
    assert_eq!(h[0]["match"], "\"unterminated\" string on line");
    // Case, types, agents, sessions, time.
    assert!(hits(&repo, &["the parser"]).is_empty());
    assert_eq!(hits(&repo, &["-i", "the parser"]).len(), 1);
    let h = hits(&repo, &["cargo test", "--type", "tool.*"]);
    assert_eq!(seqs(&h), vec![(A.into(), 2), (A.into(), 6), (B.into(), 2)]);
    assert!(hits(&repo, &["cargo test", "--type", "message.user"]).is_empty());
    assert_eq!(hits(&repo, &["bug", "--agent", "codex"]).len(), 1);
    assert_eq!(hits(&repo, &["bug", "--session", &A[..8]]).len(), 4);
    assert_eq!(hits(&repo, &["bug", "--since", "2026-02-01"]).len(), 1);
    assert_eq!(hits(&repo, &["bug", "--max", "3"]).len(), 3);
    // Text output: session, seq, type, snippet.
    let out = repo.ok(&["search", "Parser"]);
    assert!(
        out.starts_with(&format!("{B}       1  message.assistant")),
        "{out}"
    );
    // A bad regex is a usage-level failure naming the pattern.
    let err = repo.fails(&["search", "a(b"], 1);
    assert!(
        err.contains("bad pattern \"a(b\"") && err.contains("-F"),
        "{err}"
    );
}

#[test]
fn the_index_follows_appends_tampering_and_removal() {
    let repo = Repo::new();
    two_sessions(&repo);
    assert!(hits(&repo, &["-F", "late addition"]).is_empty());
    let index = repo.root.join(".git/session/search");
    assert!(index.join(format!("{A}.txt")).is_file());

    let mut e = event(0);
    e["payload"]["text"] = json!("a late addition");
    repo.ok(&[
        "append",
        A,
        repo.write_jsonl("more.jsonl", &[e]).to_str().unwrap(),
    ]);
    assert_eq!(
        seqs(&hits(&repo, &["-F", "late addition"])),
        vec![(A.into(), 8)]
    );

    // Garbage after the recorded end (a killed refresh) and a lying meta
    // file: the index is cut or rebuilt, never believed.
    let txt = index.join(format!("{A}.txt"));
    let mut bytes = std::fs::read(&txt).unwrap();
    bytes.extend_from_slice(b"99\tmessage.user\t0\tinjected needle\n");
    std::fs::write(&txt, &bytes).unwrap();
    let meta_path = index.join(format!("{A}.json"));
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["tip"] = json!("0000000000000000000000000000000000000000");
    std::fs::write(&meta_path, meta.to_string()).unwrap();
    assert!(hits(&repo, &["injected needle"]).is_empty());
    meta["last_checksum"] = json!("forged");
    meta["bytes"] = json!(5);
    std::fs::write(&meta_path, meta.to_string()).unwrap();
    assert_eq!(hits(&repo, &["bug", "--session", A]).len(), 4);
    assert_eq!(hits(&repo, &["-F", "late addition"]).len(), 1);
    // Deleting the index loses nothing.
    std::fs::remove_dir_all(&index).unwrap();
    assert_eq!(hits(&repo, &["bug"]).len(), 5);

    // A removed session is gone from the index too.
    repo.ok(&["rm", B]);
    assert!(hits(&repo, &["Parser"]).is_empty());
    assert!(!index.join(format!("{B}.txt")).exists());
}

#[test]
fn agent_text_is_escaped_in_snippets() {
    let repo = Repo::new();
    let mut lines = session_lines(A, 1);
    lines[1]["payload"]["text"] = json!("needle \u{1b}]0;pwned\u{7} \u{202e}evil");
    repo.import(&repo.write_jsonl("a.jsonl", &lines));
    let out = repo.ok(&["search", "needle"]);
    assert!(
        !out.contains('\u{1b}') && !out.contains('\u{202e}'),
        "{out}"
    );
    assert!(out.contains("\\u{202e}evil"), "{out}");
}

#[test]
fn all_clones_searches_fetched_sessions_not_taken_in() {
    let a = Repo::new();
    let remote = a.outside("remote.git");
    a.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    a.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    a.git(&["push", "-q", "origin", "main"]);
    let b = a.outside("clone-b");
    a.git(&["clone", "-q", remote.to_str().unwrap(), b.to_str().unwrap()]);
    two_sessions(&a);
    a.ok(&["push", "--to", "origin"]);
    // B's plain git fetch brings the refs into the tracking namespace only.
    let run = |args: &[&str]| {
        let out = a.session_in(&b).args(args).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    run(&["init"]);
    let out = a
        .git_in(&b)
        .args(["fetch", "-q", "origin"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let none = a
        .session_in(&b)
        .args(["search", "--json", "Parser"])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(1), "nothing found exits 1");
    assert_eq!(
        serde_json::from_slice::<Value>(&none.stdout).unwrap(),
        json!([])
    );
    let h: Value =
        serde_json::from_str(&run(&["search", "--json", "--all-clones", "Parser"])).unwrap();
    assert_eq!(h[0]["session"], B, "{h}");
    assert_eq!(h[0]["remote"], "origin");
    assert!(run(&["search", "--all-clones", "Parser"]).starts_with(&format!("origin:{B}")));
}

#[test]
fn capture_brings_the_index_up_to_date() {
    let repo = Repo::new();
    two_sessions(&repo);
    hits(&repo, &["bug"]);
    captured_claude(&repo);
    let id = "d05046d2-74b1-4451-90dc-37fbd42c25e6";
    let txt = repo.root.join(format!(".git/session/search/{id}.txt"));
    let indexed = std::fs::read_to_string(&txt).expect("capture indexed the new session");
    assert_eq!(indexed.lines().count(), repo.events(id).len());
}

/// Meta events (agent bookkeeping such as Claude's `last-prompt` records,
/// which repeat the prompt) are left out as `show` leaves them out: the
/// hit is the prompt itself; `--all` or `--type meta` searches them too.
/// The session column is as wide as the longest id.
#[test]
fn search_leaves_meta_out_unless_asked_and_aligns_sessions() {
    let repo = Repo::new();
    let mut lines = session_lines("s-short", 2);
    lines.push(
        json!({"seq": 2, "ts": "2026-01-01T00:00:02Z", "agent": "claude",
        "actor": "agent:claude", "type": "meta", "level": 2,
        "payload": {"record": "last-prompt", "text": "please fix bug 0"},
        "origin": {"agent": "claude", "native_id": "uuid-2", "native_seq": 2}}),
    );
    repo.import(&repo.write_jsonl("a.jsonl", &lines));
    repo.import(&repo.write_jsonl("b.jsonl", &session_lines("s-a-longer-id", 1)));
    let h = hits(&repo, &["fix bug 0"]);
    assert_eq!(
        seqs(&h),
        vec![("s-a-longer-id".into(), 0), ("s-short".into(), 0)]
    );
    let h = hits(&repo, &["fix bug 0", "--all"]);
    assert_eq!(seqs(&h).len(), 3, "{h:?}");
    let h = hits(&repo, &["fix bug 0", "--type", "meta"]);
    assert_eq!(seqs(&h), vec![("s-short".into(), 2)]);
    let out = repo.ok(&["search", "fix bug 0"]);
    assert_eq!(
        out,
        "s-a-longer-id       0  message.user       please fix bug 0\n\
         s-short             0  message.user       please fix bug 0\n"
    );
    // No hits: nothing on stdout, the count on stderr, exit 1.
    let (out, err, code) = run(&repo, &["search", "no such text anywhere"]);
    assert_eq!((out.as_str(), code), ("", 1), "{err}");
    assert_eq!(err, "0 hits in 4 events of 2 sessions\n");
}

/// The agent's own record kept beside an event's fields (Codex keeps its
/// `native` item, with ids and times, beside the prompt's text) is not
/// searched, so a hit's snippet is what was said; a meta event, which is
/// nothing but such a record, is searched whole with --all.
#[test]
fn search_leaves_the_native_record_beside_an_events_fields_out() {
    let repo = Repo::new();
    let mut lines = session_lines(B, 2);
    lines[0]["header"]["agent"] = json!("codex");
    for l in &mut lines[1..] {
        l["agent"] = json!("codex");
    }
    lines[1]["payload"] = json!({"text": "please fix the parser",
        "native": {"id": "msg_0199-native-id", "timestamp": "2026-01-01T00:00:00Z",
                   "content": [{"text": "please fix the parser"}]}});
    lines.push(
        json!({"seq": 2, "ts": "2026-01-01T00:00:02Z", "agent": "codex",
        "actor": "agent:codex", "type": "meta", "level": 2,
        "payload": {"native": {"type": "turn_context", "id": "msg_0199-native-id"}},
        "origin": {"agent": "codex", "native_id": "n-2", "native_seq": 2}}),
    );
    repo.import(&repo.write_jsonl("b.jsonl", &lines));
    let h = hits(&repo, &["parser"]);
    assert_eq!(seqs(&h), vec![(B.into(), 0)]);
    assert_eq!(h[0]["snippet"], "please fix the parser", "{h:?}");
    assert!(hits(&repo, &["msg_0199"]).is_empty());
    assert_eq!(
        seqs(&hits(&repo, &["msg_0199", "--all"])),
        vec![(B.into(), 2)]
    );
}
