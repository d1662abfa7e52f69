//! Shell completion for `git session`: the script git's own bash
//! completion calls, answered by the binary (subcommands, options, values,
//! session ids of the repository at hand).

use crate::support::*;

/// Runs the bash script's `_git_session` as git's completion would for
/// `line` (words split on spaces; a trailing space starts a new word) and
/// returns COMPREPLY.
fn complete_bash(repo: &Repo, line: &str, git_form: bool) -> Vec<String> {
    let script = repo.outside("git-session.bash");
    std::fs::write(&script, repo.ok(&["completions", "bash"])).unwrap();
    let mut words: Vec<&str> = line.split(' ').collect();
    if git_form {
        words.insert(0, "git");
    }
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let vars = if git_form {
        format!("words=({}); cword={};", quoted.join(" "), words.len() - 1)
    } else {
        format!(
            "COMP_WORDS=({}); COMP_CWORD={};",
            quoted.join(" "),
            words.len() - 1
        )
    };
    let bin = assert_cmd::cargo::cargo_bin!("git-session");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let body = format!(
        "source '{}'; {vars} _git_session; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let out = repo
        .program_in("bash", &repo.root)
        .env("PATH", path)
        .args(["--norc", "-c", &body])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_subcommands_options_and_session_ids_for_git_session() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-complete-1", 1)));
    repo.import(&repo.write_jsonl("b.jsonl", &session_lines("s-complete-2", 1)));
    // Every visible subcommand, picked up from the definitions.
    let all = complete_bash(&repo, "session ", true);
    for sub in git_session::cli::command().get_subcommands() {
        let name = sub.get_name().to_owned();
        assert_eq!(all.contains(&name), !sub.is_hide_set(), "{name}: {all:?}");
    }
    assert_eq!(complete_bash(&repo, "session imp", true), ["import"]);
    assert_eq!(
        complete_bash(&repo, "session import --can", true),
        ["--canonical"]
    );
    assert_eq!(
        complete_bash(&repo, "session show s-comp", true),
        ["s-complete-1", "s-complete-2"]
    );
    assert_eq!(
        complete_bash(&repo, "session handoff --to cod", true),
        ["codex"]
    );
    // The git-session binary itself, through bash's own variables.
    assert_eq!(
        complete_bash(&repo, "git-session fork s-complete-2", false),
        ["s-complete-2"]
    );
}

#[test]
fn zsh_and_fish_scripts_register_the_git_form() {
    let repo = Repo::new();
    let zsh = repo.ok(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef git-session"), "{zsh}");
    assert!(zsh.contains("user-commands session:"), "{zsh}");
    let fish = repo.ok(&["completions", "fish"]);
    assert!(
        fish.contains("__fish_seen_subcommand_from session"),
        "{fish}"
    );
    // Fish gets each candidate's description after a tab.
    let listed = repo.ok(&["completions", "fish", "--index", "1", "--", "session", "sy"]);
    assert!(listed.starts_with("sync\t"), "{listed}");
    repo.fails(&["completions", "tcsh"], 2);
}
