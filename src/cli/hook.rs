//! `git session hook <name>`: what the installed git hooks and agent hooks run.

use std::io::{Read, Write};
use std::path::PathBuf;

use git_session_adapters::registry::{self, Hook, HookAction, HookConfig};
use git_session_schema::Agent;

use super::Env;
use crate::ops;
use crate::ops::capture::CaptureRequest;

/// Run a hook's work (called by the hooks `git session init` installs).
///
/// post-commit: capture every agent after a commit. claude-session-start:
/// print, in Claude Code's SessionStart hook output, the brief of the
/// latest session of another agent on this branch (init --agent-hooks
/// --brief). claude-stop,
/// claude-session-end: capture Claude Code (its Stop/SessionEnd hooks; the
/// hook's JSON on stdin names the session's cwd). codex-notify: capture
/// Codex (its notify program; the JSON argument names the cwd). Always
/// exits 0 and prints nothing else, whatever happens; failures are logged to
/// .git/session/hook.log (see `git session status`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The hook: post-commit, claude-stop, claude-session-end,
    /// claude-session-start, codex-notify.
    name: String,
    /// What the agent passes (codex-notify: its JSON payload).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

/// The most read from an agent hook's stdin or argument.
const PAYLOAD_LIMIT: u64 = 1 << 20;

/// Returns the `cwd` an agent's hook payload names, if it is a directory.
fn payload_cwd(payload: &str) -> Option<PathBuf> {
    let v: serde_json::Value = serde_json::from_str(payload).ok()?;
    let cwd = PathBuf::from(v.get("cwd")?.as_str()?);
    (cwd.is_absolute() && cwd.is_dir()).then_some(cwd)
}

/// Returns at most [`PAYLOAD_LIMIT`] bytes of `payload`, cut at a char
/// boundary.
fn bounded(payload: &str) -> &str {
    let mut end = payload.len().min(PAYLOAD_LIMIT as usize);
    while !payload.is_char_boundary(end) {
        end -= 1;
    }
    &payload[..end]
}

/// Runs the hook; never returns an error, by design.
pub fn run(args: Args, env: &Env, out: &mut dyn Write) {
    let agent_hook = if args.name == "post-commit" {
        None
    } else if let Some((adapter, config, hook)) = registry::hook(&args.name) {
        let payload = match config {
            HookConfig::JsonEvents { .. } => {
                let mut payload = String::new();
                let _ = std::io::stdin()
                    .take(PAYLOAD_LIMIT)
                    .read_to_string(&mut payload);
                payload
            }
            HookConfig::TomlNotify { .. } => {
                bounded(args.rest.last().map(String::as_str).unwrap_or("")).to_owned()
            }
        };
        match hook.action {
            HookAction::Capture => Some((adapter.agent(), payload_cwd(&payload))),
            HookAction::Brief { matcher } => {
                session_start(&adapter.agent(), hook, matcher, &payload, env, out);
                return;
            }
        }
    } else {
        if let Ok(store) = env.store() {
            ops::hook::log(
                store.state_dir(),
                &env.clock,
                &format!("unknown hook {:?}", args.name),
            );
        }
        return;
    };
    let cwd = agent_hook
        .as_ref()
        .and_then(|(_, cwd)| cwd.clone())
        .unwrap_or_else(|| env.cwd.clone());
    let here = Env {
        cwd,
        clock: env.clock,
        ui: env.ui.clone(),
    };
    // Not in a repository: nothing to capture into, and nowhere to log.
    let Ok(mut store) = here.store() else {
        return;
    };
    // An agent's hook can be machine-wide (Codex's notify lives in the
    // user's ~/.codex/config.toml): it captures only into repositories set
    // up for sessions (`init` or an `import` made the state directory),
    // never into one that did not ask for it.
    if agent_hook.is_some() && !store.state_dir().is_dir() {
        return;
    }
    if args.name == "post-commit" {
        store.set_after_commit();
    }
    let clock = env.clock;
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        ops::hook::log(
            store.state_dir(),
            &clock,
            &format!("{}: HOME is not set; nothing captured", args.name),
        );
        return;
    };
    let lookup = |name: &str| std::env::var(name).ok();
    let request = CaptureRequest {
        agents: agent_hook.map(|(a, _)| vec![a]).unwrap_or_default(),
        home,
        env: &lookup,
        sqlite: Default::default(),
    };
    ops::hook::run(&store, &clock, &args.name, &request);
}

/// A session-start hook of `agent` (JSON events): prints the brief as the
/// hook's additional context, or nothing (no session to brief from, not a
/// new session, any failure: logged).
fn session_start(
    agent: &Agent,
    hook: &Hook,
    matcher: &str,
    payload: &str,
    env: &Env,
    out: &mut dyn Write,
) {
    let v: serde_json::Value = serde_json::from_str(payload).unwrap_or_default();
    // Only new sessions: a resumed or compacted one has its own history.
    if v["source"].as_str().is_some_and(|s| s != matcher) {
        return;
    }
    let here = Env {
        cwd: payload_cwd(payload).unwrap_or_else(|| env.cwd.clone()),
        clock: env.clock,
        ui: env.ui.clone(),
    };
    let Ok(store) = here.store() else {
        return;
    };
    let starting = v["session_id"].as_str();
    match ops::hook::session_start_brief(&store, agent, starting, ops::hook::BRIEF_BUDGET) {
        Ok(Some(brief)) => {
            let reply = serde_json::json!({"hookSpecificOutput": {
                "hookEventName": hook.event,
                "additionalContext": brief.text,
            }});
            let _ = writeln!(out, "{reply}");
        }
        Ok(None) => {}
        Err(e) => ops::hook::log(
            store.state_dir(),
            &env.clock,
            &format!("{}: no brief: {e}", hook.name),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_notify_payload_is_cut_on_a_char_boundary() {
        let limit = PAYLOAD_LIMIT as usize;
        // Byte `limit` falls inside a two-byte character.
        let payload = format!("x{}", "é".repeat(limit));
        let cut = bounded(&payload);
        assert_eq!(cut.len(), limit - 1);
        assert!(payload.starts_with(cut));
        assert_eq!(bounded("{\"cwd\": \"/\"}"), "{\"cwd\": \"/\"}");
    }
}
