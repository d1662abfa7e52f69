//! The manual pages are generated from the command definitions
//! (`git session install-man` writes the same pages), so `git session
//! --help` (which git turns into `man git-session`) and `git session help
//! <command>` say what the binary does. The copies in the repository,
//! `docs/git-session.1` and `docs/man/git-session-<command>.1`, are kept
//! equal to them: `SNAPSHOTS=overwrite cargo test --test it manpage`
//! rewrites them, a subcommand added without its page or a page left for a
//! removed one fails here.

use std::path::Path;

use crate::support::*;

fn page_path(name: &str) -> std::path::PathBuf {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    if name == "git-session.1" {
        docs.join(name)
    } else {
        docs.join("man").join(name)
    }
}

#[test]
fn the_man_pages_match_the_commands() {
    let pages = git_session::cli::man_pages();
    let overwrite = std::env::var("SNAPSHOTS").is_ok_and(|v| v == "overwrite");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/man");
    let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
    // A page for a subcommand that no longer exists is stale too.
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !names.contains(&name.as_str()) {
            assert!(
                overwrite,
                "docs/man/{name} has no command (SNAPSHOTS=overwrite removes it)"
            );
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in &pages {
        let path = page_path(name);
        if overwrite && !path.exists() {
            std::fs::write(&path, "").unwrap();
        }
        assert!(
            path.exists(),
            "{} is missing (SNAPSHOTS=overwrite writes it)",
            path.display()
        );
        snapbox::Assert::new()
            .action_env(snapbox::assert::DEFAULT_ACTION_ENV)
            .normalize_paths(false)
            .eq(
                String::from_utf8(text.clone()).unwrap(),
                snapbox::Data::read_from(&path, None).raw(),
            );
    }
    let main = String::from_utf8(pages[0].1.clone()).unwrap();
    for sub in ["import", "resume", "handoff", "sync", "verify"] {
        assert!(
            main.contains(&format!("git\\-session\\-{sub}(1)")),
            "{sub} missing from the man page"
        );
        assert!(names.contains(&format!("git-session-{sub}.1").as_str()));
    }
    let import = String::from_utf8(
        pages
            .iter()
            .find(|(n, _)| n == "git-session-import.1")
            .unwrap()
            .1
            .clone(),
    )
    .unwrap();
    // The synopsis names option values, as git's pages do.
    assert!(import.contains(r"[\fB\-C\fR \fIPATH\fR]"), "{import}");
    assert!(
        import.contains(r"[\fB\-\-agent\fR \fIAGENT\fR]"),
        "{import}"
    );
    assert!(import.contains("git\\-session(1)"), "SEE ALSO");
}

#[test]
fn install_man_writes_every_page_and_help_opens_it() {
    let repo = Repo::new();
    let dir = repo.outside("man");
    let stale = dir.join("man1/git-session-gone.1");
    std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
    std::fs::write(&stale, "old").unwrap();
    let out = repo
        .session()
        .args(["install-man", "--dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(succeeded(&out), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("Installed"),
        "{}",
        text(&out.stderr)
    );
    for (name, bytes) in git_session::cli::man_pages() {
        assert_eq!(
            std::fs::read(dir.join("man1").join(&name)).unwrap(),
            bytes,
            "{name}"
        );
    }
    assert!(!stale.exists(), "a page of a removed command is removed");
    // The default is a user directory under HOME: no root needed.
    let home_out = repo
        .session()
        .env_remove("XDG_DATA_HOME")
        .arg("install-man")
        .output()
        .unwrap();
    assert!(succeeded(&home_out), "{}", text(&home_out.stderr));
    assert!(
        repo.home
            .join(".local/share/man/man1/git-session-sync.1")
            .exists()
    );

    // help <command> and <command> --help open the installed page, as git's do.
    let has_man = std::process::Command::new("man")
        .arg("-w")
        .arg("man")
        .output()
        .is_ok();
    let help = |args: &[&str], manpath: bool| -> String {
        let mut cmd = repo.session();
        cmd.args(args).env("MANPAGER", "cat").env("PAGER", "cat");
        if manpath {
            cmd.env("MANPATH", &dir);
        } else {
            cmd.env("MANPATH", repo.outside("no-man"));
        }
        let out = cmd.output().unwrap();
        assert!(succeeded(&out), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    // Without an installed page: the built-in text.
    let builtin = help(&["help", "sync"], false);
    assert!(builtin.contains("Usage: git session sync"), "{builtin}");
    if has_man {
        for args in [&["help", "sync"][..], &["sync", "--help"][..]] {
            let page = help(args, true);
            assert!(
                page.contains("NAME") && page.contains("git-session-sync"),
                "{args:?}: {page}"
            );
        }
    }
    // -h is always the short built-in text.
    let short = help(&["sync", "-h"], true);
    assert!(
        short.contains("Usage: git session sync") && !short.contains("NAME"),
        "{short}"
    );
}
