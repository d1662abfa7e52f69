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
