//! `git session merge`: bring a session's result back into another.

use std::io::Write;

use super::{CommandError, Env, escape, status};
use crate::ops;

/// Record in session A what session B did since it branched off A.
///
/// Appends to A one session.merge event pointing at B's tip, with a
/// summary compiled from B's own events (decisions, open todos, blockers,
/// files edited, commands and their outcome), each citing B's seqs. A's
/// next compile, handoff or resume brief carries it. No log is merged:
/// both sessions keep their events.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session whose result comes back (id or unique prefix).
    from: String,
    /// The session it goes into.
    #[arg(long, value_name = "SESSION")]
    into: String,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    let store = env.store()?;
    let from = store.resolve(&args.from)?;
    let into = store.resolve(&args.into)?;
    let m = ops::merge::merge(&store, &env.clock, &from, &into)?;
    write!(out, "{}", escape_block(&m.summary))?;
    status(format!(
        "Merged {from} (seq {}..{}) into {into} as seq {}",
        m.since, m.last, m.seq
    ));
    Ok(())
}

fn escape_block(text: &str) -> String {
    text.lines().map(|l| format!("{}\n", escape(l))).collect()
}
