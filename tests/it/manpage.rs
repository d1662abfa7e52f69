//! `docs/git-session.1` is generated from the command definitions, so
//! `git session --help` (which git turns into `man git-session`) says what
//! the binary does. `SNAPSHOTS=overwrite cargo test --test it manpage`
//! rewrites it.

use std::path::Path;

#[test]
fn the_man_page_matches_the_commands() {
    let mut page = Vec::new();
    let cmd = git_session::cli::command()
        .name("git-session")
        .bin_name("git session");
    clap_mangen::Man::new(cmd).render(&mut page).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/git-session.1");
    let text = String::from_utf8(page).unwrap();
    snapbox::Assert::new()
        .action_env(snapbox::assert::DEFAULT_ACTION_ENV)
        .normalize_paths(false)
        .eq(text.clone(), snapbox::Data::read_from(&path, None).raw());
    for sub in ["import", "resume", "handoff", "sync", "verify"] {
        assert!(text.contains(sub), "{sub} missing from the man page");
    }
}
