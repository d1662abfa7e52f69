//! Compile-time benchmark: a generated 10,000-event session compiled to a
//! 32,000-token budget, per format and target. Run with
//! `cargo bench -p git-session-compiler --bench compile`; figures go to
//! stdout. The session generator is the property test's
//! (`tests/support/synth.rs`), so the input is the same on every machine.
//!
//! The first tokenizer use builds the `o200k_base` tables; that one-time
//! cost is reported separately ("tokenizer load") and the compile figures
//! are the median of warm runs, which is what a process pays after its
//! first count.

#![allow(clippy::print_stdout)] // a bench reports on stdout

#[path = "../tests/support/synth.rs"]
mod synth;

use std::time::{Duration, Instant};

use git_session_compiler::{Format, GitFacts, Request, Tokenizer, compile};
use git_session_schema::Agent;

const EVENTS: usize = 10_000;
const BUDGET: usize = 32_000;
const RUNS: usize = 15;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("compile: bench");
        return;
    }
    let t = Instant::now();
    Tokenizer::O200kBase.load();
    println!(
        "tokenizer load (once per process): {:.1} ms",
        ms(t.elapsed())
    );

    let (header, events) = synth::session(7, EVENTS);
    println!("session: {EVENTS} events, budget {BUDGET} tokens, median of {RUNS} runs");
    for (target, format) in [
        (Agent::Codex, Format::Brief),
        (Agent::Claude, Format::Brief),
        (Agent::Codex, Format::FirstMessage),
        (Agent::Claude, Format::ContextFile),
        (Agent::Codex, Format::Json),
    ] {
        let request = Request {
            target: target.clone(),
            budget: BUDGET,
            format,
            git: GitFacts::default(),
            tokenizer: None,
        };
        let mut times = Vec::with_capacity(RUNS);
        let mut last = None;
        for _ in 0..RUNS {
            let t = Instant::now();
            let compiled = compile(&header, &events, &request).expect("fits the budget");
            times.push(t.elapsed());
            last = Some(compiled);
        }
        times.sort();
        let c = last.expect("ran at least once");
        println!(
            "{:<7} {:<14} {:>7.1} ms  ({} tokens, {} items, {} dropped entries)",
            target.as_str(),
            format.name(),
            ms(times[RUNS / 2]),
            c.tokens,
            c.items.len(),
            c.dropped.len()
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
