//! `docs/git-session.1` is generated from the command definitions, so
//! `git session --help` (which git turns into `man git-session`) says what
//! the binary does. UPDATE_GOLDEN=1 rewrites it.

use std::path::Path;

#[test]
fn the_man_page_matches_the_commands() {
    let mut page = Vec::new();
    let cmd = git_session::cli::command()
        .name("git-session")
        .bin_name("git session");
    clap_mangen::Man::new(cmd).render(&mut page).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/git-session.1");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &page).unwrap();
    }
    let on_disk = std::fs::read(&path).unwrap_or_default();
    assert!(
        on_disk == page,
        "docs/git-session.1 is out of date; run UPDATE_GOLDEN=1 cargo test --test it manpage and review the diff"
    );
    let text = String::from_utf8(page).unwrap();
    for sub in ["import", "resume", "handoff", "sync", "verify"] {
        assert!(text.contains(sub), "{sub} missing from the man page");
    }
}
