//! `git session hook <name>`: what the installed git hooks run.

use std::io::Write;
use std::path::PathBuf;

use super::Env;
use crate::ops;
use crate::ops::capture::CaptureRequest;

/// Run a git hook's work (called by the hooks `git session init` installs).
///
/// Always exits 0, whatever happens; failures are logged to
/// .git/session/hook.log (see `git session doctor`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The hook: post-commit.
    name: String,
}

/// Runs the hook; never returns an error, by design.
pub fn run(args: Args, env: &Env, _out: &mut dyn Write) {
    let Ok(store) = env.store() else {
        return;
    };
    let clock = env.clock;
    if args.name != "post-commit" {
        ops::hook::log(
            store.state_dir(),
            &clock,
            &format!("unknown hook {:?}", args.name),
        );
        return;
    }
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        ops::hook::log(
            store.state_dir(),
            &clock,
            "post-commit: HOME is not set; nothing captured",
        );
        return;
    };
    let lookup = |name: &str| std::env::var(name).ok();
    let request = CaptureRequest {
        agents: Vec::new(),
        home,
        env: &lookup,
        sqlite: Default::default(),
    };
    ops::hook::post_commit(&store, &clock, &request);
}
