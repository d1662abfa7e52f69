//! The human output of the everyday commands, pinned by snapshots
//! (`tests/it/snapshots/`, `SNAPSHOTS=overwrite` rewrites them) with
//! paths normalized and ids and clocks fixed: first run, `list`, `show`,
//! errors that say what to do.

use serde_json::{Value, json};

use crate::support::*;

/// Writes a canonical session: a meta event, then `prompt` as the first
/// user message, then `replies` assistant messages, one second apart from
/// `start` (an RFC 3339 time without the seconds).
fn session(
    repo: &Repo,
    id: &str,
    agent: &str,
    title: Option<&str>,
    start: &str,
    prompt: &str,
    replies: u64,
) {
    let mut header = json!({"format": 1, "id": id, "agent": agent, "native_id": format!("n-{id}"),
                            "cwd": "/work/project", "created": "2026-01-01T00:00:00Z"});
    if let Some(t) = title {
        header["title"] = json!(t);
    }
    let ev = |seq: u64, kind: &str, actor: &str, payload: Value| {
        json!({"seq": seq, "ts": format!("{start}:{seq:02}Z"), "agent": agent, "actor": actor,
               "type": kind, "level": 0, "payload": payload})
    };
    let mut lines = vec![
        json!({ "header": header }),
        ev(
            0,
            "meta",
            "system",
            json!({"text": "<environment_context>"}),
        ),
        ev(1, "message.user", "user", json!({ "text": prompt })),
    ];
    for i in 0..replies {
        lines.push(ev(
            2 + i,
            "message.assistant",
            &format!("agent:{agent}"),
            json!({"text": format!("reply {i}")}),
        ));
    }
    repo.import(&repo.write_jsonl(&format!("{id}.jsonl"), &lines));
}

/// Returns a repository with four sessions: two Codex ids sharing a long
/// time prefix, a titled Claude one, and a fork with a long id.
fn listed_repo() -> Repo {
    let repo = Repo::new();
    session(
        &repo,
        "019ad5b2-1111-7000-8000-000000000001",
        "codex",
        None,
        "2026-01-02T10:00",
        "\n   Please   fix the\tparser\nand then the lexer",
        2,
    );
    session(
        &repo,
        "019ad5b2-2222-7000-8000-000000000002",
        "codex",
        None,
        "2026-01-01T09:00",
        "Write the \u{1b}[31mREADME",
        0,
    );
    session(
        &repo,
        "c1-claude",
        "claude",
        Some("Native title\nsecond line"),
        "2026-01-03T08:00",
        "ignored for the title",
        1,
    );
    repo.ok(&[
        "fork",
        "019ad5b2-1111",
        "--at",
        "2",
        "--id",
        "019ad5b2-1111-7000-8000-000000000001-fork-0123456789ab",
    ]);
    repo
}

#[test]
fn list_shows_titles_newest_first_with_aligned_columns() {
    let repo = listed_repo();
    let listed = repo.ok(&["list"]);
    snapshot(&repo, "list.txt", &listed);
    assert!(
        listed.lines().all(|l| !l.ends_with(' ')),
        "no trailing spaces:\n{listed}"
    );
    let json: Value = serde_json::from_str(&repo.ok(&["list", "--json"])).unwrap();
    let prefixes: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["prefix"].as_str().unwrap())
        .collect();
    assert_eq!(
        prefixes,
        [
            "c1-c",
            "019ad5b2-1111-7000-8000-000000000001",
            "019ad5b2-1111-7000-8000-000000000001-",
            "019ad5b2-2"
        ]
    );
    // Each prefix resolves to its own session.
    for row in json.as_array().unwrap() {
        let shown = repo.ok(&["show", row["prefix"].as_str().unwrap(), "--json"]);
        let shown: Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(shown["header"]["id"], row["id"]);
    }
    assert_eq!(json[0]["updated"], "2026-01-03T08:00:02Z");
}

#[test]
fn list_filters_by_agent_since_and_limit() {
    let repo = listed_repo();
    let ids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["list", "--json"];
        all.extend_from_slice(args);
        let json: Value = serde_json::from_str(&repo.ok(&all)).unwrap();
        json.as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&["--agent", "claude"]), ["c1-claude"]);
    assert_eq!(ids(&["--since", "2026-01-02T00:00:00Z"]).len(), 3);
    assert_eq!(ids(&["--since", "2026-01-03"]), ["c1-claude"]);
    assert_eq!(ids(&["--limit", "1"]), ["c1-claude"]);
    assert_eq!(ids(&["-n", "2", "--agent", "codex"]).len(), 2);
    let (out, err, code) = run(&repo, &["list", "--agent", "opencode"]);
    assert_eq!((out.as_str(), code), ("", 0));
    assert_eq!(
        err,
        "No session matches (of 4 sessions in this repository).\n"
    );
    let err = repo.fails(&["list", "--since", "someday"], 2);
    assert!(err.contains("--since \"someday\" is not a time"), "{err}");
}

#[test]
fn an_empty_repository_says_what_to_do() {
    let repo = Repo::new();
    let (out, err, code) = run(&repo, &["list"]);
    assert_eq!((out.as_str(), code), ("", 0));
    snapshot(&repo, "list-empty.txt", &err);
    let (out, err, code) = run(&repo, &["import"]);
    assert_eq!((out.as_str(), code), ("", 0));
    snapshot(&repo, "import-nothing-found.txt", &err);
    assert_eq!(run(&repo, &["-q", "import"]).1, "", "-q silences status");
}

/// The README's first command, after `cargo install`, works in any
/// repository, and `.ci/run` runs exactly the README's test command.
#[test]
fn the_readme_first_commands_work_anywhere() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block: Vec<&str> = readme
        .split("```sh\n")
        .nth(1)
        .unwrap()
        .lines()
        .take(2)
        .collect();
    let (install, test) = (block[0], block[1]);
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == test),
        ".ci/run does not run the README's test command {test:?}"
    );
    let repo = Repo::new();
    let steps: Vec<&str> = install.split("&&").map(str::trim).collect();
    assert!(steps[0].starts_with("cargo install"), "{install}");
    for step in &steps[1..] {
        let args: Vec<&str> = step
            .strip_prefix("git session ")
            .unwrap_or_else(|| panic!("{step:?} is not a git session command"))
            .split_whitespace()
            .collect();
        let (_, err, code) = run(&repo, &args);
        assert_eq!(code, 0, "{step}: {err}");
    }
}

/// Returns a repository with the Codex function-tools rollout captured.
fn codex_repo() -> (Repo, String) {
    codex_fixture_repo("function-tools", "01a22641-1298-70e1-90e6-4b6faeb436bb")
}

/// Codex's code-mode `exec` takes a JavaScript program: `show` puts it on
/// one line as text (not a JSON string full of `\n` and `\"`), and the
/// command it ran is its `command.run`.
#[test]
fn show_puts_a_code_mode_program_on_one_line() {
    let (repo, id) = codex_fixture_repo(
        "default-model-roundtrip",
        "01a22641-0894-7711-86db-74d58edefe49",
    );
    let shown = repo.ok(&["show", &id[..8]]);
    snapshot(&repo, "show-codex-code-mode.txt", &shown);
    assert!(
        shown.contains(
            r#"exec: const r = await tools.exec_command({cmd: "echo hello > note.txt"}); text(r);"#
        ),
        "{shown}"
    );
    assert!(!shown.contains("\\n"), "{shown}");
}

/// A `--seq` range says how many meta events it hid in that range, and a
/// range of nothing but meta says so instead of printing a header alone.
#[test]
fn show_seq_ranges_say_what_they_hide() {
    let (repo, id) = codex_repo();
    let only_meta = repo.ok(&["show", &id, "--seq", "1..6"]);
    snapshot(&repo, "show-only-meta.txt", &only_meta);
    let some = repo.ok(&["show", &id, "--seq", "12..16"]);
    assert!(
        some.contains("events   25 (seq 12..16: 1 meta event hidden: --all shows them)\n"),
        "{some}"
    );
    assert_eq!(
        some.lines().filter(|l| l.starts_with("    1")).count(),
        4,
        "{some}"
    );
}

#[test]
fn show_hides_meta_and_says_what_tools_ran() {
    let (repo, id) = codex_repo();
    snapshot(&repo, "show-codex.txt", &repo.ok(&["show", &id[..8]]));
    let all = repo.ok(&["show", &id, "--all"]);
    assert_eq!(
        all.lines().filter(|l| l.contains(" meta ")).count(),
        16,
        "{all}"
    );
    let tools = repo.ok(&["show", &id, "--type", "tool", "-t", "command.run"]);
    let kinds: Vec<&str> = tools
        .lines()
        .skip_while(|l| !l.is_empty())
        .skip(1)
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["tool.call", "command.run", "tool.result"],
        "{tools}"
    );
    // A type that picks nothing says so, with the types there are.
    let none = repo.ok(&["show", &id, "--type", "tool.cal"]);
    let note = none.lines().last().unwrap();
    assert!(
        note.starts_with("(no events of type tool.cal; this session has ")
            && note.contains("tool.call")
            && note.contains("message.user")
            && !note.contains("meta"),
        "{none}"
    );
    let json: Value =
        serde_json::from_str(&repo.ok(&["show", &id, "--json", "--type", "message.user"])).unwrap();
    let events = json["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0]["payload"]["text"],
        "Please write hello into note.txt"
    );
    let json: Value = serde_json::from_str(&repo.ok(&["show", &id, "--json"])).unwrap();
    assert_eq!(
        json["events"].as_array().unwrap().len(),
        25,
        "JSON keeps every event"
    );
}

/// Runs `git session ARGS` on a pseudo-terminal (util-linux `script`),
/// with `env` added; returns what the terminal showed.
fn on_terminal(repo: &Repo, env: &[(&str, &str)], args: &str) -> String {
    let bin = assert_cmd::cargo::cargo_bin!("git-session");
    let mut cmd = repo.program_in("script", &repo.root);
    cmd.args(["-qec", &format!("{} {args}", bin.display()), "/dev/null"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("util-linux script runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).replace("\r\n", "\n")
}

#[test]
fn show_pages_on_a_terminal_as_git_does() {
    let (repo, id) = codex_repo();
    let args = format!("show {id} -t tool.call");
    let paged = on_terminal(&repo, &[("GIT_PAGER", "sed s/^/PAGED:/")], &args);
    assert!(paged.starts_with("PAGED:session  01a22641"), "{paged}");
    repo.git(&["config", "core.pager", "sed s/^/CORE:/"]);
    let paged = on_terminal(&repo, &[], &args);
    assert!(paged.starts_with("CORE:session"), "{paged}");
    let paged = on_terminal(&repo, &[("GIT_PAGER", "sed s/^/PAGED:/")], &args);
    assert!(
        paged.starts_with("PAGED:"),
        "GIT_PAGER wins over core.pager: {paged}"
    );
    let direct = on_terminal(&repo, &[], &format!("--no-pager {args}"));
    assert!(direct.starts_with("session  01a22641"), "{direct}");
    // Not a terminal: never paged.
    assert!(repo.ok(&["show", &id]).starts_with("session"));
    // Color on a terminal unless NO_COLOR or color.ui says not.
    let list = on_terminal(&repo, &[], "list");
    assert!(list.contains("\u{1b}[1;33m01a2"), "{list:?}");
    assert!(!on_terminal(&repo, &[("NO_COLOR", "1")], "list").contains('\u{1b}'));
    repo.git(&["config", "color.ui", "never"]);
    assert!(!on_terminal(&repo, &[], "list").contains('\u{1b}'));
    assert!(on_terminal(&repo, &[], "--color=always list").contains('\u{1b}'));
}

#[test]
fn push_and_sync_explain_instead_of_passing_on_git() {
    let repo = Repo::new();
    let bare = repo.outside("sessions.git");
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    // A name that is no remote is refused, and not recorded.
    let err = repo.fails(&["push", "--to", "nothere"], 1);
    assert!(
        err.contains("there is no remote named nothere") && err.contains("git remote add"),
        "{err}"
    );
    let (remote, _, _) = run(&repo, &["--no-pager", "list"]);
    assert_eq!(remote, "");
    assert!(
        repo.git_in(&repo.root)
            .args(["config", "session.remote"])
            .output()
            .unwrap()
            .stdout
            .is_empty(),
        "nothing was chosen"
    );
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    let (_, err, code) = run(&repo, &["push", "--to", "origin"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("Nothing to push to origin: this repository has no sessions yet"),
        "{err}"
    );
    let (_, err, code) = run(&repo, &["sync"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("No refs in common"), "{err}");
    // With origin chosen, another name that is no remote says both.
    let err = repo.fails(&["push", "--to", "nothere"], 1);
    assert!(
        err.contains("go to origin, not nothere (and there is no remote named nothere)"),
        "{err}"
    );
    // fetch says where to look rather than passing on git's words.
    let err = repo.fails(&["fetch", "nothere"], 1);
    assert!(
        err.contains("there is no remote named nothere; nothing was fetched")
            && err.contains("git remote -v")
            && !err.contains("fatal:"),
        "{err}"
    );
    // Whatever an error quotes is printed with its control characters
    // escaped.
    let err = repo.fails(&["fetch", "no\u{1b}[2Jwhere"], 1);
    assert!(
        err.contains("no remote named no\\u{1b}[2Jwhere") && !err.contains('\u{1b}'),
        "{err}"
    );
}

#[test]
fn errors_and_counts_read_right() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("abc-111", 1)));
    // A fork id that is a prefix of another session's is refused.
    let err = repo.fails(&["fork", "abc-111", "--id", "abc"], 1);
    assert!(
        err.contains("the id abc is a prefix of session abc-111"),
        "{err}"
    );
    assert!(!repo.ok(&["list"]).contains("abc "), "nothing was written");
    // Singular counts.
    let verified = repo.ok(&["verify", "abc-111"]);
    assert!(verified.contains("(1 event, 1 batch"), "{verified}");
    let log = repo.ok(&["log", "abc-111"]);
    assert!(log.contains("(1 event)"), "{log}");
    // --canonical - reads stdin; a bad line names <stdin>.
    let mut body = String::new();
    for l in session_lines("from-stdin", 2) {
        body.push_str(&l.to_string());
        body.push('\n');
    }
    let out = repo
        .session()
        .args(["import", "--canonical", "-"])
        .write_stdin(body.clone())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "from-stdin\n");
    assert!(
        text(&out.stderr).contains("2 new events"),
        "{}",
        text(&out.stderr)
    );
    let out = repo
        .session()
        .args(["import", "--canonical", "-"])
        .write_stdin(body.replace("from-stdin", "bad-stdin") + "{not json\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("error: <stdin>:4:"),
        "{}",
        text(&out.stderr)
    );
    // -o for every file output.
    let brief = repo.outside("brief.md");
    repo.ok(&[
        "compile",
        "abc-111",
        "--for",
        "codex",
        "-o",
        brief.to_str().unwrap(),
    ]);
    assert!(!std::fs::read_to_string(&brief).unwrap().is_empty());
    // A key that cannot sign names where it came from.
    let err = repo.fails(
        &[
            "handoff",
            "abc-111",
            "--to",
            "codex",
            "--key",
            "no-such-key",
            "--home",
            repo.home.to_str().unwrap(),
        ],
        1,
    );
    assert!(err.contains("hint: fix the key given by --key"), "{err}");
    repo.git(&["config", "user.signingKey", "no-such-key"]);
    repo.git(&["config", "gpg.format", "ssh"]);
    let err = repo.fails(
        &[
            "handoff",
            "abc-111",
            "--to",
            "codex",
            "--home",
            repo.home.to_str().unwrap(),
        ],
        1,
    );
    assert!(err.contains("`git config user.signingKey`"), "{err}");
}

#[test]
fn handoff_signs_with_rsa_and_ecdsa_keys_as_git_does() {
    let repo = Repo::new();
    for (kind, bits) in [("rsa", "3072"), ("ecdsa", "256"), ("ed25519", "256")] {
        let id = format!("s-{kind}");
        repo.import(&repo.write_jsonl(&format!("{id}.jsonl"), &session_lines(&id, 2)));
        let key = repo.outside(&format!("key-{kind}"));
        let made = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", kind, "-b", bits, "-N", "", "-C", "t", "-f"])
            .arg(&key)
            .output()
            .unwrap();
        assert!(made.status.success(), "{}", text(&made.stderr));
        let home = repo.outside(&format!("home-{kind}"));
        let (_, err, code) = run(
            &repo,
            &[
                "handoff",
                &id,
                "--to",
                "codex",
                "--key",
                key.to_str().unwrap(),
                "--home",
                home.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 0, "{kind}: {err}");
        assert!(err.contains("signed receipt"), "{kind}: {err}");
        let verified = repo.ok(&["verify", &id]);
        assert!(verified.contains("valid signature"), "{kind}: {verified}");
    }
}

#[test]
fn hooks_ending_in_exit_and_tracked_hook_folders() {
    let repo = Repo::new();
    let hook = repo.root.join(".git/hooks/post-commit");
    std::fs::write(&hook, "#!/bin/sh\necho mine\nexit 0\n").unwrap();
    repo.ok(&["init"]);
    let text = std::fs::read_to_string(&hook).unwrap();
    assert!(
        text.find("# >>> git-session").unwrap() < text.find("exit 0").unwrap(),
        "{text}"
    );
    let doctor = repo.ok(&["doctor"]);
    assert!(
        doctor.contains("hook       post-commit: installed in"),
        "{doctor}"
    );
    // A block left after the exit (as older versions appended it) is reported.
    let body = text.replace("exit 0\n", "");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\nexit 0\n{}", &body["#!/bin/sh\n".len()..]),
    )
    .unwrap();
    let doctor = repo.ok(&["doctor"]);
    assert!(
        doctor.contains("installed but never runs: line 2 `exit 0` ends the hook before it"),
        "{doctor}"
    );
    // core.hooksPath in the work tree (husky): no path of this machine.
    repo.git(&["config", "core.hooksPath", ".husky"]);
    let said = repo.ok(&["init"]);
    assert!(said.contains("a tracked folder"), "{said}");
    let husky = std::fs::read_to_string(repo.root.join(".husky/post-commit")).unwrap();
    let bin = assert_cmd::cargo::cargo_bin!("git-session");
    assert!(!husky.contains(bin.to_str().unwrap()), "{husky}");
    assert!(!husky.contains(repo.root.to_str().unwrap()), "{husky}");
    assert!(husky.contains("command -v git-session"), "{husky}");
}

#[test]
fn compile_reports_the_count_the_brief_gives() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("c.jsonl", &session_lines("s-compile", 120)));
    let mut cut_something = false;
    for budget in ["500", "1000", "2000", "50000"] {
        let out = repo
            .session()
            .args(["compile", "s-compile", "--for", "codex", "--budget", budget])
            .output()
            .unwrap();
        if !out.status.success() {
            continue;
        }
        let (brief, err) = (text(&out.stdout), text(&out.stderr));
        let said: usize = err
            .split(" left out for space")
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{err}"));
        let written: usize = brief
            .split("Left out for space: ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{brief}"));
        assert_eq!(said, written, "budget {budget}: {err}");
        cut_something |= said > 0;
    }
    assert!(cut_something, "some budget cut something");
}

#[test]
fn init_and_list_say_what_a_plain_git_fetch_did() {
    let repo = Repo::new();
    let bare = repo.outside("shared.git");
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-shared", 2)));
    repo.ok(&["push", "--to", "origin"]);
    let clone = repo.outside("clone");
    repo.git(&[
        "clone",
        "-q",
        bare.to_str().unwrap(),
        clone.to_str().unwrap(),
    ]);
    let said = text(&repo.session_in(&clone).arg("init").output().unwrap().stdout);
    assert!(
        said.contains("`git session fetch` (or sync) verifies them"),
        "{said}"
    );
    repo.git_in(&clone)
        .args(["fetch", "-q", "origin"])
        .assert()
        .success();
    let out = repo.session_in(&clone).arg("list").output().unwrap();
    assert_eq!(text(&out.stdout), "");
    assert!(
        text(&out.stderr)
            .contains("1 session fetched from origin wait to be verified: run `git session fetch`"),
        "{}",
        text(&out.stderr)
    );
    repo.session_in(&clone).arg("fetch").assert().success();
    let listed = text(&repo.session_in(&clone).arg("list").output().unwrap().stdout);
    assert!(listed.starts_with("s-shared"), "{listed}");
}

#[test]
fn json_shapes_are_the_documented_ones() {
    let repo = Repo::new();
    let imported: Value = serde_json::from_str(
        &repo.ok(&[
            "import",
            "--json",
            "--canonical",
            repo.write_jsonl("a.jsonl", &session_lines("s-json", 3))
                .to_str()
                .unwrap(),
        ]),
    )
    .unwrap();
    assert_eq!(imported["sessions"][0]["id"], "s-json");
    assert_eq!(imported["sessions"][0]["appended"], 3);
    let forked: Value = serde_json::from_str(
        &repo.ok(&["fork", "s-json", "--at", "1", "--id", "t-fork", "--json"]),
    )
    .unwrap();
    assert_eq!(
        (
            forked["id"].as_str(),
            forked["parent"].as_str(),
            forked["at"].as_u64()
        ),
        (Some("t-fork"), Some("s-json"), Some(1))
    );
    let more = repo.write_jsonl("more.jsonl", &[event(3)]);
    let appended: Value =
        serde_json::from_str(&repo.ok(&["append", "s-json", more.to_str().unwrap(), "--json"]))
            .unwrap();
    assert_eq!(
        (appended["appended"].as_u64(), appended["events"].as_u64()),
        (Some(1), Some(4))
    );
    let home = repo.outside("home-json");
    let resumed: Value = serde_json::from_str(&repo.ok(&[
        "resume",
        "s-json",
        "--fork",
        "--home",
        home.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    assert_eq!(resumed["agent"], "claude");
    assert!(
        resumed["command"].as_str().unwrap().contains("HOME="),
        "{resumed}"
    );
    assert_eq!(resumed["written"].as_array().unwrap().len(), 1);
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.md"),
    )
    .unwrap();
    for field in [
        "\"prefix\"",
        "\"appended\"",
        "\"parent_commit\"",
        "\"command\"",
    ] {
        assert!(doc.contains(field), "docs/json.md documents {field}");
    }
}

#[test]
fn json_shapes_of_doctor_fetch_push_sync_redact_and_rm() {
    let repo = Repo::new();
    let remote = repo.outside("json-remote.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    let parse = |text: String| -> Value {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    // push with nothing to push still prints its document.
    let empty = parse(repo.ok(&["push", "--to", "origin", "--json"]));
    assert_eq!(
        empty,
        json!({"remote": "origin", "pushed": false, "rejected": []})
    );
    // Stored unredacted, so redact --check has something to find.
    repo.git(&["config", "session.redact", "false"]);
    let token = format!("glpat-{}", "aB3dE5gH7jK9mN1pQ2sT");
    let mut lines = session_lines("s-json-sync", 2);
    lines[1]["payload"] = json!({"text": format!("the deploy token is {token}")});
    repo.import(&repo.write_jsonl("s.jsonl", &lines));
    let out = repo
        .session()
        .args(["redact", "--check", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let redact = parse(text(&out.stdout));
    assert_eq!(redact["checked"], 1);
    assert_eq!(redact["hits"][0]["session"], "s-json-sync");
    assert_eq!(redact["hits"][0]["seq"], 0);
    assert_eq!(redact["hits"][0]["rules"]["gitlab-pat"], 1);
    assert!(!text(&out.stdout).contains(&token));

    let pushed = parse(repo.ok(&["push", "--json"]));
    assert_eq!(
        pushed,
        json!({"remote": "origin", "pushed": true, "rejected": []})
    );
    // A second clone fetches it, appends, and both sync.
    let clone = repo.outside("json-clone");
    repo.git(&[
        "clone",
        "-q",
        remote.to_str().unwrap(),
        clone.to_str().unwrap(),
    ]);
    repo.git_in(&clone)
        .args(["config", "session.remote", "origin"])
        .assert()
        .success();
    let on_clone = |args: &[&str]| -> Value {
        let out = repo.session_in(&clone).args(args).output().unwrap();
        assert!(succeeded(&out), "{args:?}: {}", text(&out.stderr));
        parse(text(&out.stdout))
    };
    let fetched = on_clone(&["fetch", "--json"]);
    assert_eq!(
        fetched,
        json!({"changed": [{"id": "s-json-sync", "change": "created", "fork": null}],
               "unchanged": 0, "removed": [], "quarantined": [], "remote": "origin"})
    );
    let again = on_clone(&["fetch", "--json"]);
    assert_eq!(
        (
            again["changed"].as_array().map(Vec::len),
            again["unchanged"].as_u64()
        ),
        (Some(0), Some(1))
    );
    let more = repo.write_jsonl("more.jsonl", &[event(2)]);
    repo.ok(&["append", "s-json-sync", more.to_str().unwrap()]);
    repo.ok(&["push"]);
    let synced = on_clone(&["sync", "--json"]);
    assert_eq!(synced["remote"], "origin");
    assert_eq!(synced["changed"][0]["change"], "fast_forwarded");
    assert_eq!(synced["not_pushed"], json!([]));
    assert!(synced["rounds"].as_u64().unwrap() >= 1, "{synced}");

    let removed = parse(repo.ok(&["rm", "s-json-sync", "--json"]));
    assert_eq!(removed["id"], "s-json-sync");
    assert_eq!(removed["tip"].as_str().unwrap().len(), 40);
    assert_eq!(removed["tombstone"], true);

    let doctor = parse(repo.ok(&["doctor", "--json"]));
    assert_eq!(doctor["sessions"], 0);
    assert_eq!(
        doctor["remote"],
        json!({"name": "origin", "configured": true})
    );
    assert_eq!(doctor["hooks"][0]["hook"], "post-commit");
    assert_eq!(doctor["hooks"][0]["installed"], false);
    assert_eq!(doctor["backups"], json!([]));
    assert_eq!(doctor["hook_log"]["lines"], json!([]));
    let agents: Vec<&str> = doctor["capture"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["agent"].as_str().unwrap())
        .collect();
    assert!(
        agents.contains(&"codex") && agents.contains(&"claude"),
        "{agents:?}"
    );
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.md"),
    )
    .unwrap();
    for section in [
        "## doctor",
        "## fetch",
        "## push",
        "## sync",
        "## redact",
        "## rm",
    ] {
        assert!(doc.contains(section), "docs/json.md lacks {section}");
    }
}

#[test]
fn doctor_shows_and_prunes_database_backups() {
    let repo = Repo::new();
    let dir = repo.root.join(".git/session/backups");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, name) in [
        "state_5.sqlite.1000",
        "state_5.sqlite.2000",
        "state_5.sqlite.3000",
        "opencode.db.1500",
    ]
    .iter()
    .enumerate()
    {
        let path = dir.join(name);
        std::fs::write(&path, vec![b'x'; 10 + i]).unwrap();
        // Ages follow the names: the oldest is modified first.
        let t = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::from_secs(1_000_000 + i as u64 * 10);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }
    std::fs::write(dir.join("notes.txt"), b"not a backup").unwrap();
    let shown = repo.ok(&["doctor"]);
    assert!(shown.contains("backups    4 in "), "{shown}");
    assert!(shown.contains("--prune-backups"), "{shown}");
    assert!(shown.contains("backup     state_5.sqlite: "), "{shown}");
    let pruned: Value =
        serde_json::from_str(&repo.ok(&["doctor", "--prune-backups", "--json"])).unwrap();
    let gone: Vec<String> = pruned["pruned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().rsplit('/').next().unwrap().to_owned())
        .collect();
    assert_eq!(gone, ["state_5.sqlite.1000", "state_5.sqlite.2000"]);
    let left: Vec<&str> = pruned["backups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["database"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["state_5.sqlite", "opencode.db"], "oldest first");
    assert!(dir.join("state_5.sqlite.3000").exists() && dir.join("notes.txt").exists());
    repo.ok(&["doctor", "--prune-backups", "0"]);
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "only notes.txt is left"
    );
}

#[test]
fn progress_shows_on_a_terminal_only() {
    let repo = Repo::new();
    // A remote whose transport takes two seconds, then fails.
    repo.git(&["remote", "add", "slow", "ssh://nowhere.invalid/x.git"]);
    let bin = assert_cmd::cargo::cargo_bin!("git-session");
    let run_tty = |args: &str| -> String {
        let out = repo
            .program_in("script", &repo.root)
            .args(["-qc", &format!("{} {args}", bin.display()), "/dev/null"])
            .env("GIT_SSH_COMMAND", "sleep 2; false")
            .env("GIT_SESSION_PROGRESS_DELAY_MS", "200")
            .env("TERM", "xterm")
            .output()
            .expect("util-linux script runs");
        text(&out.stdout)
    };
    let shown = run_tty("fetch slow");
    assert!(shown.contains("Fetching sessions from slow"), "{shown:?}");
    // Cleared before the error is printed.
    assert!(shown.contains("error"), "{shown:?}");
    assert!(!run_tty("fetch slow --json").contains("Fetching sessions"));
    assert!(!run_tty("-q fetch slow").contains("Fetching sessions"));
    // Not a terminal: never.
    let out = repo
        .session()
        .args(["fetch", "slow"])
        .env("GIT_SSH_COMMAND", "sleep 2; false")
        .env("GIT_SESSION_PROGRESS_DELAY_MS", "0")
        .output()
        .unwrap();
    assert!(
        !text(&out.stderr).contains("Fetching sessions"),
        "{}",
        text(&out.stderr)
    );
}

/// Capturing the native session a handoff wrote says it is a fork of the
/// session handed off, not "new 0 events".
#[test]
fn import_says_a_written_back_session_is_a_fork() {
    let repo = Repo::new();
    captured_claude(&repo);
    let home = repo.outside("handoff-home");
    let h = home.to_str().unwrap();
    let id = "d05046d2-74b1-4451-90dc-37fbd42c25e6";
    repo.ok(&["handoff", id, "--to", "codex", "--home", h]);
    let said = repo.ok(&["import", "--home", h, "--agent", "codex"]);
    let line = said.lines().next().unwrap_or_default();
    assert!(
        line.contains(&format!(
            "codex  new fork of {id} at seq 36, 0 events of its own (37 in all)"
        )),
        "{said}"
    );
}

/// doctor and status agree on the remote: one that exists but was not
/// chosen is fetched from and pushed nowhere.
#[test]
fn doctor_and_status_agree_on_an_unchosen_remote() {
    let repo = Repo::new();
    let remote = repo.outside("unchosen.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    let doctor = repo.ok(&["doctor"]);
    assert!(
        doctor.contains("remote     origin: sessions are fetched from it, pushed nowhere until `git session push --to NAME`\n"),
        "{doctor}"
    );
    assert!(repo.ok(&["status"]).contains("remote     none chosen: sessions are pushed nowhere until `git session push --to NAME` (fetch from origin)"));
    repo.git(&["config", "session.remote", "origin"]);
    assert!(
        repo.ok(&["doctor"])
            .contains("remote     origin (chosen for sessions)\n")
    );
    assert!(
        repo.ok(&["status"])
            .contains("remote     origin (chosen for sessions")
    );
}

/// `show` lines up its columns whatever the rows hold: OpenCode's times
/// drop trailing zeros of the milliseconds (`.37Z`) and its actor,
/// `agent:opencode`, is wider than the usual column.
#[test]
fn show_aligns_opencode_times_and_actors() {
    let repo = Repo::new();
    let mut lines = vec![
        json!({"header": {"format": 1, "id": "ses_tour", "agent": "opencode",
        "native_id": "ses_tour", "cwd": "/work/project", "created": "2026-01-01T00:00:00Z"}}),
    ];
    for (seq, ts, kind, actor, text) in [
        (
            0,
            "2026-01-01T00:00:01.845Z",
            "message.user",
            "user",
            "Please write hello",
        ),
        (
            1,
            "2026-01-01T00:00:02.37Z",
            "message.thinking",
            "agent:opencode",
            "A shell command.",
        ),
        (
            2,
            "2026-01-01T00:00:03.5Z",
            "message.assistant",
            "agent:opencode",
            "Done.",
        ),
    ] {
        lines.push(
            json!({"seq": seq, "ts": ts, "agent": "opencode", "actor": actor, "type": kind,
            "level": 0, "payload": {"text": text},
            "origin": {"agent": "opencode", "native_id": format!("prt_{seq}"), "native_seq": seq}}),
        );
    }
    let file = repo.write_jsonl("opencode.jsonl", &lines);
    repo.import(&file);
    snapshot(&repo, "show-opencode.txt", &repo.ok(&["show", "ses_tour"]));
}
