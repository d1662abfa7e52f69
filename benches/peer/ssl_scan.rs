//! The peer's side of `benches/peer/session-loom.sh`: one mirror pass of
//! session-loom (github.com/JC0v0/session-loom) over one agent's store,
//! the work its daemon does on start (`SessionWatcher::scan_once`), into
//! a fresh canonical store. Built by the script against the peer's source;
//! not part of git-session's build.
//!
//! usage: ssl-scan claude|codex|pi|opencode ROOT STORE_DIR

use std::path::PathBuf;
use std::process::ExitCode;

use session_loom_core::canonical::SourceTool;
use session_loom_core::store::Store;
use session_loom_core::watcher::{SessionWatcher, WatchTarget};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, tool, root, store] = args.as_slice() else {
        eprintln!("usage: ssl-scan claude|codex|pi|opencode ROOT STORE_DIR");
        return ExitCode::from(2);
    };
    let source_tool = match tool.as_str() {
        "claude" => SourceTool::Claude,
        "codex" => SourceTool::Codex,
        "pi" => SourceTool::Pi,
        "opencode" => SourceTool::OpenCode,
        other => {
            eprintln!("ssl-scan: unknown tool {other}");
            return ExitCode::from(2);
        }
    };
    let store = match Store::open(&PathBuf::from(store)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ssl-scan: {e}");
            return ExitCode::FAILURE;
        }
    };
    SessionWatcher::new(
        store,
        vec![WatchTarget {
            source_tool,
            root: PathBuf::from(root),
        }],
    )
    .scan_once();
    ExitCode::SUCCESS
}
