//! Which native files capture takes, and that it never passes one over in
//! silence: a session belongs to the innermost repository holding its cwd
//! (issue 16, item 7); a file whose session facts cannot be found is named
//! in a warning with the reason, and `doctor` lists it (item 3).

use std::path::{Path, PathBuf};

use crate::support::*;

/// Writes a two-record Claude Code session `id` that ran in `cwd` under
/// `home`'s store; returns its file.
fn claude_session(home: &Path, id: &str, cwd: &str) -> PathBuf {
    let dir = home.join(".claude/projects/-p");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{id}.jsonl"));
    let user = serde_json::json!({
        "parentUuid": null, "isSidechain": false, "type": "user",
        "message": {"role": "user", "content": format!("hello from {cwd}")},
        "uuid": format!("{}-u", &id[..8]), "timestamp": "2026-11-29T07:41:51.867Z",
        "cwd": cwd, "sessionId": id, "version": "2.1.332",
    });
    let reply = serde_json::json!({
        "parentUuid": format!("{}-u", &id[..8]), "isSidechain": false, "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        "uuid": format!("{}-a", &id[..8]), "timestamp": "2026-11-29T07:41:52.867Z",
        "cwd": cwd, "sessionId": id, "version": "2.1.332",
    });
    std::fs::write(&file, format!("{user}\n{reply}\n")).unwrap();
    file
}

/// Runs `git session import --agent claude` in `dir`; returns the ids it
/// captured, sorted, and its stderr.
fn import_in(repo: &Repo, dir: &Path) -> (Vec<String>, String) {
    let out = repo
        .session_in(dir)
        .args([
            "import",
            "--agent",
            "claude",
            "--home",
            repo.home.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut ids: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect();
    ids.sort();
    (ids, text(&out.stderr))
}

const OUTER: &str = "00000001-0000-4000-8000-000000000000";
const INNER: &str = "00000002-0000-4000-8000-000000000000";
const INNER_WT: &str = "00000003-0000-4000-8000-000000000000";
const SUBMODULE: &str = "00000004-0000-4000-8000-000000000000";
const CLIMBS_OUT: &str = "00000005-0000-4000-8000-000000000000";
const GONE: &str = "00000006-0000-4000-8000-000000000000";

#[test]
fn a_session_belongs_to_the_innermost_repository_holding_its_cwd() {
    // The outer repository (a dotfiles repository at ~, say) holds a
    // nested clone with a linked worktree of its own, a submodule-shaped
    // directory (a `.git` file) and a plain directory.
    let outer = Repo::new();
    let root = outer.root.to_str().unwrap().to_owned();
    let inner = outer.root.join("projects/inner");
    std::fs::create_dir_all(inner.join("src")).unwrap();
    outer.git(&["-C", inner.to_str().unwrap(), "init", "-q", "-b", "main"]);
    outer.git(&[
        "-C",
        inner.to_str().unwrap(),
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "inner",
    ]);
    let inner_wt = outer.root.join("inner-wt");
    outer.git(&[
        "-C",
        inner.to_str().unwrap(),
        "worktree",
        "add",
        "-q",
        inner_wt.to_str().unwrap(),
        "-b",
        "feature",
    ]);
    let submodule = outer.root.join("vendor/lib");
    std::fs::create_dir_all(submodule.join("deep")).unwrap();
    std::fs::write(submodule.join(".git"), "gitdir: ../../.git/modules/lib\n").unwrap();
    std::fs::create_dir_all(outer.root.join("plain")).unwrap();

    let home = outer.home.clone();
    claude_session(&home, OUTER, &format!("{root}/plain"));
    claude_session(&home, INNER, &format!("{}/src", inner.display()));
    claude_session(&home, INNER_WT, inner_wt.to_str().unwrap());
    claude_session(&home, SUBMODULE, &format!("{}/deep", submodule.display()));
    // Hostile: a cwd that names the repository and then climbs out of it.
    claude_session(&home, CLIMBS_OUT, &format!("{root}/../elsewhere"));
    // A directory removed since: still the outer repository's.
    claude_session(&home, GONE, &format!("{root}/plain/removed/since"));

    let (ids, _) = import_in(&outer, &outer.root);
    assert_eq!(ids, [OUTER, GONE]);
    // The nested repository takes its own, its worktree's included, from
    // either of its work trees.
    let (ids, _) = import_in(&outer, &inner_wt);
    assert_eq!(ids, [INNER, INNER_WT]);
    // Nothing is taken twice, and the submodule's session is nobody's here.
    let (ids, _) = import_in(&outer, &outer.root);
    assert!(ids.is_empty(), "{ids:?}");
    let (ids, _) = import_in(&outer, &inner);
    assert!(ids.is_empty(), "{ids:?}");
}

/// Runs `git session import` with `repo.home` as the agents' home; returns
/// stdout and stderr.
fn import_all(repo: &Repo) -> (String, String) {
    let out = repo
        .session()
        .args(["import", "--home", repo.home.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_first_record_over_a_mebibyte_or_facts_found_late_still_identify_the_session() {
    let repo = Repo::new();
    let root = repo.root.to_str().unwrap().to_owned();
    // A screenshot-sized first prompt: the first line alone is 3 MiB.
    let big = "00000011-0000-4000-8000-000000000000";
    let file = claude_session(&repo.home, big, &root);
    let body = std::fs::read_to_string(&file).unwrap();
    let pasted = "x".repeat(3 << 20);
    std::fs::write(&file, body.replacen("hello from", &pasted, 1)).unwrap();
    // Facts found late: 2 MiB of records without a cwd come first.
    let late = "00000012-0000-4000-8000-000000000000";
    let file = claude_session(&repo.home, late, &root);
    let body = std::fs::read_to_string(&file).unwrap();
    let queued = serde_json::json!({
        "type": "queue-operation", "operation": "enqueue",
        "timestamp": "2026-11-29T07:41:51.783Z", "sessionId": late,
        "content": "y".repeat(4000),
    });
    let head = format!("{queued}\n").repeat((2 << 20) / 4000);
    std::fs::write(&file, format!("{head}{body}")).unwrap();

    let (out, err) = import_all(&repo);
    assert!(out.contains(big) && out.contains(late), "{out}\n{err}");
    let text_of = |e: &serde_json::Value| e["payload"]["text"].as_str().unwrap_or("").len();
    assert!(
        repo.events(big).iter().any(|e| text_of(e) > 3 << 20),
        "the long prompt is stored whole"
    );
    assert!(!err.contains("warning"), "{err}");
}

/// The Codex function-tools rollout, recorded as run in `root`, with its
/// first line (the `session_meta`) changed by `first`; the rest by `rest`.
fn codex_rollout(
    repo: &Repo,
    name: &str,
    first: impl Fn(Vec<u8>) -> Vec<u8>,
    rest: impl Fn(String) -> String,
) -> PathBuf {
    let dir = fixtures().join("codex/function-tools/native/sessions/2026/11/29");
    let src = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let body = std::fs::read_to_string(src).unwrap().replace(
        "/tmp/oracle-sample/codex/project",
        repo.root.to_str().unwrap(),
    );
    let (meta, tail) = body.split_at(body.find('\n').unwrap() + 1);
    let mut bytes = first(meta.as_bytes().to_vec());
    bytes.extend_from_slice(rest(tail.to_owned()).as_bytes());
    let to = repo.home.join(".codex/sessions/2026/11/29");
    std::fs::create_dir_all(&to).unwrap();
    let file = to.join(name);
    std::fs::write(&file, bytes).unwrap();
    file
}

const THREAD: &str = "01a22641-1298-70e1-90e6-4b6faeb436bb";
const ROLLOUT: &str = "rollout-2026-11-29T07-42-08-01a22641-1298-70e1-90e6-4b6faeb436bb.jsonl";

#[test]
fn a_codex_session_meta_with_a_bom_bad_utf8_no_cwd_or_cut_short_is_still_captured() {
    type Change = Box<dyn Fn(Vec<u8>) -> Vec<u8>>;
    let cases: Vec<(&str, Change, Option<&str>)> = vec![
        (
            "a byte order mark",
            Box::new(|l| [&[0xEF, 0xBB, 0xBF][..], &l].concat()),
            None,
        ),
        (
            "invalid UTF-8",
            Box::new(|l| {
                let at = l.windows(9).position(|w| w == b"precise, ").unwrap();
                let mut l = l;
                l[at] = 0xFF;
                l
            }),
            Some("not valid UTF-8"),
        ),
        (
            "no cwd",
            Box::new(|l| {
                let s = String::from_utf8(l).unwrap();
                let cwd = &s[s.find("\"cwd\":").unwrap()..];
                let cwd = &cwd[..cwd.find(',').unwrap() + 1];
                s.replacen(cwd, "", 1).into_bytes()
            }),
            None,
        ),
        (
            "cut short",
            Box::new(|l| [&l[..l.len() / 2], &b"\n"[..]].concat()),
            Some("not JSON (EOF while parsing"),
        ),
    ];
    for (what, change, warning) in cases {
        let repo = Repo::new();
        let file = codex_rollout(&repo, ROLLOUT, change, |rest| rest);
        let before = std::fs::read(&file).unwrap();
        let (out, err) = import_all(&repo);
        assert_eq!(out.lines().count(), 1, "{what}: {out}\n{err}");
        let id = out.split_whitespace().next().unwrap();
        if what != "cut short" {
            assert_eq!(id, THREAD, "{what}");
        }
        let events = repo.events(id);
        assert!(events.len() > 10, "{what}: {} events", events.len());
        match warning {
            Some(w) => assert!(err.contains(w), "{what}: {err}"),
            None => assert!(!err.contains("warning"), "{what}: {err}"),
        }
        assert_eq!(
            std::fs::read(&file).unwrap(),
            before,
            "{what}: store written"
        );
    }
}

#[test]
fn a_file_whose_repository_cannot_be_told_is_named_with_the_reason_and_doctor_lists_it() {
    let repo = Repo::new();
    // Hostile or broken: the session_meta cut short and no cwd anywhere.
    let root = repo.root.to_str().unwrap().to_owned();
    let file = codex_rollout(
        &repo,
        ROLLOUT,
        |l| [&l[..l.len() / 2], &b"\n"[..]].concat(),
        |rest| rest.replace(&format!("\"cwd\":\"{root}\""), "\"cwd\":null"),
    );
    // A first line still being written (no newline yet), with a control
    // character in the file name for the terminal.
    codex_rollout(
        &repo,
        "rollout-\u{1b}[2J-torn-01a22641-1298-70e1-90e6-4b6faeb436bc.jsonl",
        |l| l[..40].to_vec(),
        |_| String::new(),
    );
    // An empty file: nothing to capture, nothing to say.
    codex_rollout(
        &repo,
        "rollout-empty-01a22641-1298-70e1-90e6-4b6faeb436bd.jsonl",
        |_| Vec::new(),
        |_| String::new(),
    );
    let (out, err) = import_all(&repo);
    assert_eq!(out, "", "{err}");
    let line = err
        .lines()
        .find(|l| l.contains(ROLLOUT))
        .unwrap_or_else(|| panic!("no warning names the file: {err}"));
    assert!(
        line.starts_with("warning: skipped")
            && line.contains("no working directory in any of its")
            && line.contains("(first problem: line 1: ")
            && line.contains("not JSON (EOF while parsing"),
        "{line}"
    );
    let torn_line = err
        .lines()
        .find(|l| l.contains("-torn-"))
        .unwrap_or_else(|| panic!("no warning names the torn file: {err}"));
    assert!(torn_line.contains("no complete record"), "{torn_line}");
    assert!(
        !err.contains('\u{1b}'),
        "control characters printed: {err:?}"
    );
    assert!(!err.contains("rollout-empty"), "{err}");

    // Unchanged: not read again, but not forgotten either.
    let (out, err) = import_all(&repo);
    assert_eq!(out, "");
    assert!(err.contains("2 native files not captured earlier"), "{err}");
    let doctor = repo.ok(&["doctor"]);
    let listed: Vec<&str> = doctor
        .lines()
        .filter(|l| l.starts_with("skipped"))
        .collect();
    assert_eq!(listed.len(), 2, "{doctor}");
    assert!(
        listed
            .iter()
            .any(|l| l.contains(file.to_str().unwrap()) && l.contains("no working directory")),
        "{doctor}"
    );
    assert!(!doctor.contains('\u{1b}'), "{doctor:?}");
    assert!(doctor.contains("codex: 0 native files of this repository tracked, 1 of other repositories or empty, 2 not captured"), "{doctor}");
}

#[test]
fn the_scan_for_session_facts_is_bounded() {
    let repo = Repo::new();
    let id = "00000021-0000-4000-8000-000000000000";
    let dir = repo.home.join(".claude/projects/-p");
    std::fs::create_dir_all(&dir).unwrap();
    let queued = serde_json::json!({
        "type": "queue-operation", "operation": "enqueue",
        "timestamp": "2026-11-29T07:41:51.783Z", "sessionId": id,
        "content": "z".repeat(64 << 10),
    });
    // Past the bound, then a record with a cwd: not looked for that far.
    let n = (git_session::ops::capture::SCAN_BYTES as usize >> 16) + 64;
    let mut body = format!("{queued}\n").repeat(n);
    let tail = claude_session(&repo.home, id, repo.root.to_str().unwrap());
    body.push_str(&std::fs::read_to_string(&tail).unwrap());
    std::fs::write(dir.join(format!("{id}.jsonl")), body).unwrap();
    let (out, err) = import_all(&repo);
    assert_eq!(out, "", "{err}");
    let line = err
        .lines()
        .find(|l| l.contains(&format!("{id}.jsonl")))
        .unwrap_or_else(|| panic!("no warning names the file: {err}"));
    let mib = git_session::ops::capture::SCAN_BYTES >> 20;
    assert!(
        line.contains("no working directory in its first")
            && line.contains(&format!("records ({mib} MiB), so not captured")),
        "{line}"
    );
}
