//! Output conventions every command shares: `--color` with `NO_COLOR` and
//! git's `color.ui` (also as `git -c color.ui=…`), `-q` printing nothing
//! on success, `-v` printing more.

use crate::support::*;

const ESC: &str = "\u{1b}[";

fn colored(out: &str) -> bool {
    out.contains(ESC)
}

#[test]
fn color_follows_the_flag_then_no_color_then_color_ui() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("c.jsonl", &session_lines("s-color", 2)));
    let list = |args: &[&str], env: &[(&str, &str)]| -> String {
        let mut cmd = repo.session();
        cmd.args(args).arg("list");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    // Not a terminal: auto means no color.
    assert!(!colored(&list(&[], &[])));
    assert!(colored(&list(&["--color=always"], &[])));
    assert!(colored(&list(&["--color", "always"], &[("NO_COLOR", "1")])));
    assert!(!colored(&list(&["--color=never"], &[])));
    repo.git(&["config", "color.ui", "always"]);
    assert!(colored(&list(&[], &[])), "color.ui=always colors a pipe");
    assert!(
        !colored(&list(&[], &[("NO_COLOR", "1")])),
        "NO_COLOR wins over color.ui"
    );
    assert!(
        colored(&list(&[], &[("NO_COLOR", "")])),
        "an empty NO_COLOR is unset"
    );
    assert!(!colored(&list(&["--color=never"], &[])));
    repo.git(&["config", "color.ui", "never"]);
    assert!(!colored(&list(&[], &[])));
    assert!(colored(&list(&["--color=always"], &[])), "the flag wins");
    repo.git(&["config", "--unset", "color.ui"]);

    // As a git subcommand: `git -c color.ui=…` reaches it.
    let bin = assert_cmd::cargo::cargo_bin!("git-session");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let via_git = |config: &str| -> String {
        let out = repo
            .git_in(&repo.root)
            .env("PATH", &path)
            .args(["-c", config, "session", "list"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    assert!(colored(&via_git("color.ui=always")));
    assert!(!colored(&via_git("color.ui=auto")));

    // On a terminal (util-linux script): auto colors, unless NO_COLOR or
    // color.ui says not.
    let tty = |prefix: &str| -> String {
        let out = repo
            .program_in("script", &repo.root)
            .args([
                "-qc",
                &format!("{prefix}{} list", bin.display()),
                "/dev/null",
            ])
            .env("TERM", "xterm")
            .output()
            .expect("util-linux script runs");
        text(&out.stdout)
    };
    assert!(colored(&tty("")), "{:?}", tty(""));
    assert!(!colored(&tty("env NO_COLOR=1 ")));
    repo.git(&["config", "color.ui", "false"]);
    assert!(!colored(&tty("")));
    assert!(!colored(&list(&[], &[])));
}

#[test]
fn quiet_prints_nothing_on_success() {
    let repo = Repo::new();
    let remote = repo.outside("quiet.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    let source = claude_home(&repo);
    let src = source.to_str().unwrap();
    let exported = repo.outside("q.jsonl");
    let steps: Vec<Vec<&str>> = vec![
        vec!["init"],
        vec!["init"],
        vec!["import", "--home", src],
        vec!["import", "--home", src],
        vec!["push", "--to", "origin"],
        vec!["fetch"],
        vec!["sync"],
        vec!["redact", "--check"],
        vec!["title", ROUNDTRIP, "A title"],
        vec![
            "export",
            ROUNDTRIP,
            "--canonical",
            "-o",
            exported.to_str().unwrap(),
        ],
        vec!["rm", "q-fork"],
        vec!["purge", ROUNDTRIP, "--match", "hello"],
    ];
    for step in &steps {
        if step[0] == "rm" {
            // fork prints the new id: data, so -q keeps it.
            let id = repo.ok(&["-q", "fork", ROUNDTRIP, "--at", "3", "--id", "q-fork"]);
            assert_eq!(id, "q-fork\n");
        }
        let mut args = vec!["-q"];
        args.extend(step);
        let (out, err, code) = run(&repo, &args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(
            (out.as_str(), err.as_str()),
            ("", ""),
            "git session {args:?}"
        );
        // Without -q each of them says something.
        if !["export", "title", "rm", "purge"].contains(&step[0]) {
            let (out, err, _) = run(&repo, step);
            assert!(
                !format!("{out}{err}").is_empty(),
                "{step:?} says nothing at all"
            );
        }
    }
    // A failure still says why.
    let (_, err, code) = run(&repo, &["-q", "show", "no-such-session"]);
    assert_ne!(code, 0);
    assert!(err.contains("no-such-session"), "{err}");
}

/// git-session's own records (a handoff, its compiled context) are one
/// summary line of a resume's report, each handoff adding to its count,
/// not a line per kind; `-v` lists them.
#[test]
fn a_resume_after_handoffs_sums_up_git_sessions_own_records() {
    let repo = Repo::new();
    captured_claude(&repo);
    for tag in ["a", "b"] {
        let home = repo.outside(&format!("codex-{tag}"));
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        repo.ok(&[
            "handoff",
            ROUNDTRIP,
            "--to",
            "codex",
            "--home",
            home.to_str().unwrap(),
        ]);
    }
    let fresh = repo.outside("claude-home");
    let h = fresh.to_str().unwrap();
    let (_, said, code) = run(&repo, &["resume", ROUNDTRIP, "--home", h]);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains(
            "4 records of git-session's own (context.compiled, handoff) stay in the session's log only (-v lists them)"
        ),
        "{said}"
    );
    assert!(!said.contains("has no Claude Code record"), "{said}");
    let (_, verbose, code) = run(&repo, &["-v", "resume", ROUNDTRIP, "--home", h]);
    assert_eq!(code, 0, "{verbose}");
    assert!(
        verbose.contains("handoff has no Claude Code record")
            && verbose.contains("context.compiled has no Claude Code record"),
        "{verbose}"
    );
}

#[test]
fn verbose_prints_each_loss_and_where_capture_looked() {
    let repo = Repo::new();
    captured_claude(&repo);
    let home = repo.outside("codex-home");
    let h = home.to_str().unwrap();
    let (_, normal, code) = run(
        &repo,
        &["resume", ROUNDTRIP, "--agent", "codex", "--home", h],
    );
    assert_eq!(code, 0, "{normal}");
    let meta_lines = |err: &str| err.lines().filter(|l| l.contains(": meta (")).count();
    assert_eq!(meta_lines(&normal), 0, "{normal}");
    assert!(
        normal.contains(
            "meta events of agent bookkeeping the target has no form for (-v lists them)"
        ),
        "{normal}"
    );
    let (_, verbose, code) = run(
        &repo,
        &[
            "-v", "resume", ROUNDTRIP, "--agent", "codex", "--home", h, "--fork",
        ],
    );
    assert_eq!(code, 0, "{verbose}");
    assert!(meta_lines(&verbose) > 5, "{verbose}");
    assert!(!verbose.contains("-v lists them"), "{verbose}");
    // The JSON has every line either way.
    let json: serde_json::Value = serde_json::from_str(&repo.ok(&[
        "resume", ROUNDTRIP, "--agent", "codex", "--home", h, "--fork", "--json",
    ]))
    .unwrap();
    let losses = json["losses"].as_array().unwrap();
    assert!(
        losses
            .iter()
            .filter(|l| l.as_str().unwrap().contains(": meta ("))
            .count()
            > 5,
        "{json}"
    );

    // import -v names the agent stores it found missing.
    let source = repo.outside("source");
    let src = source.to_str().unwrap();
    let (_, quiet_about, _) = run(&repo, &["import", "--home", src]);
    let (_, said, _) = run(&repo, &["-v", "import", "--home", src]);
    assert!(!quiet_about.contains("does not exist"), "{quiet_about}");
    assert!(said.contains("no pi sessions here: "), "{said}");
}
