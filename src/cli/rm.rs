//! `git session rm`: remove a session and retire its id everywhere.

use std::io::Write;

use super::{CommandError, Env, short, status};

/// Remove a session here and record a tombstone that push and sync carry.
///
/// Deletes refs/sessions/<ID> and writes refs/session-tombstones/<ID>. The
/// tombstone travels with `git session push`/`sync` (which also delete the
/// remote's copy), and every clone that fetches it removes its own copy, so
/// the session does not come back from a remote-tracking ref or another
/// clone. The id is retired for good. Takes the full id, not a prefix. The
/// objects stay in the repository until `git gc` prunes them.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The full session id.
    session: String,
    /// Print a JSON object instead of text (docs/json.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let id = store.resolve(&args.session)?;
    if id.as_str() != args.session {
        return Err(
            CommandError::usage(format!("{:?} is a prefix of {id}", args.session))
                .hint(format!("rm takes the full id: git session rm {id}")),
        );
    }
    let tip = store.remove_session(&id, env.clock.now().as_second())?;
    if args.json {
        super::print_json(
            out,
            &serde_json::json!({"id": id, "tip": tip.to_string(), "tombstone": true}),
        )?;
    } else if !super::ui::is_quiet() {
        writeln!(out, "removed {id} (was at {})", short(&tip))?;
    }
    status("The tombstone goes to the remote with the next git session push or sync");
    Ok(())
}
