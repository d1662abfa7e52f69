//! The one integration-test binary of the workspace: each module is an area,
//! shared helpers live in `support/`.

mod support;

mod capture;
mod carry;
mod cli;
mod completions;
mod concurrency;
mod conformance;
mod conventions;
mod discovery;
mod dsh;
mod encryption;
mod fork;
mod handoff;
mod hermes;
mod hooks;
mod import_export;
mod jsondoc;
mod layout;
mod lifecycle;
mod loss;
mod manpage;
mod matrix;
mod mcp;
mod mock;
mod native;
mod opencode;
mod oracle;
mod pi;
mod progress;
mod purge;
mod redaction;
mod resume;
mod scale;
mod search;
mod status;
mod surface;
mod sync;
mod tamper;
mod trust;
mod verify;
mod watch;

#[test]
fn every_test_file_is_declared() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        if path.extension().is_some_and(|e| e == "rs") && stem != "main" {
            assert!(
                main.contains(&format!("mod {stem};")),
                "tests/it/{stem}.rs is not declared in main.rs"
            );
        }
    }
}
