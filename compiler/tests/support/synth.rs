//! A deterministic generator of plausible sessions, shared by the budget
//! property test and the bench (`benches/compile.rs` includes this file).
//!
//! No randomness from the outside: a seed goes in, the same session comes
//! out. Texts deliberately include what renderers must survive: line
//! breaks, backtick runs, lines that look like headings, non-ASCII.

#![allow(dead_code)] // each includer uses a different part

use git_session_schema::{Agent, Event, Level, SessionHeader, SessionId};
use serde_json::{Value, json};

/// Generates numbers from a seed (xorshift64*), enough for test data.
pub struct Rng(u64);

impl Rng {
    /// Returns a generator; seed 0 is moved off the fixed point.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Returns the next 64 random bits.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Returns a number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Returns true with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Returns one element of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "the",
    "parser",
    "fails",
    "on",
    "empty",
    "input",
    "so",
    "we",
    "should",
    "fix",
    "tokenizer",
    "test",
    "cargo",
    "build",
    "error",
    "mismatched",
    "types",
    "refactor",
    "module",
    "never",
    "must",
    "always",
    "config",
    "path",
    "função",
    "配置",
    "修复",
    "ñandú",
    "emoji🙂",
    "`code`",
    "```",
    "## Instructions",
    "# Heading",
    "\n",
    "\n\n",
    "\r",
    "ignore",
    "previous",
    "schema",
    "budget",
    "handoff",
    "commit",
    "branch",
    "merge",
    "0x1F",
    "42",
    "1234567",
];

/// Returns `n` random words joined by spaces (some "words" are line breaks).
pub fn words(rng: &mut Rng, n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        let word: &&str = rng.pick(WORDS);
        out.push_str(word);
        if rng.chance(8) {
            out.push('.');
        }
    }
    out
}

fn lines(rng: &mut Rng, n: usize, prefix: &str) -> String {
    (0..n)
        .map(|_| {
            let k = 1 + rng.below(10) as usize;
            format!("{prefix}{}", words(rng, k).replace(['\n', '\r'], " "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Returns a header and `n` events of a made-up session.
pub fn session(seed: u64, n: usize) -> (SessionHeader, Vec<Event>) {
    let mut rng = Rng::new(seed);
    let id = SessionId::new(format!("synth-{seed}")).expect("a valid id");
    let mut header = SessionHeader::new(id, Agent::Claude, "2026-01-01T00:00:00Z");
    header.title = Some(words(&mut rng, 4));
    header.cwd = Some("/home/dev/project".into());
    let events = (0..n as u64).map(|seq| event(&mut rng, seq)).collect();
    (header, events)
}

fn event(rng: &mut Rng, seq: u64) -> Event {
    let roll = rng.below(1000);
    let (actor, kind, payload): (&str, &str, Value) = match roll {
        0..=299 => ("system", "meta", json!({"record_type": "progress"})),
        300..=349 => {
            let n = 3 + rng.below(60) as usize;
            ("user", "message.user", json!({"text": words(rng, n)}))
        }
        350..=499 => {
            let n = 5 + rng.below(200) as usize;
            let text = words(rng, n);
            ("agent:claude", "message.assistant", json!({"text": text}))
        }
        500..=579 => {
            let n = 5 + rng.below(40) as usize;
            let text = words(rng, n);
            ("agent:claude", "message.thinking", json!({"text": text}))
        }
        580..=669 => (
            "agent:claude",
            "tool.call",
            json!({"call_id": format!("c{seq}"), "name": "Bash", "arguments": {"command": "ls"}}),
        ),
        670..=759 => {
            let n = rng.below(20) as usize;
            let out = lines(rng, n, "");
            (
                "tool",
                "tool.result",
                json!({"call_id": format!("c{seq}"), "output": out}),
            )
        }
        760..=839 => {
            let cmd = format!("cargo test -p crate{} {}", rng.below(30), words(rng, 2));
            let code = if rng.chance(30) { 1 } else { 0 };
            let n = rng.below(60) as usize;
            let out = lines(rng, n, "");
            (
                "tool",
                "command.run",
                json!({"command": cmd, "exit_code": code, "output_tail": out}),
            )
        }
        840..=899 => {
            let path = format!(
                "src/{}/mod{}.rs",
                rng.pick(&["a", "b", "c\nd", "é"]),
                rng.below(40)
            );
            let n = rng.below(80) as usize;
            let diff = format!(
                "--- a/x\n+++ b/x\n@@ -1 +1 @@\n{}\n{}",
                lines(rng, n, "+"),
                lines(rng, n / 2, "-")
            );
            (
                "tool",
                "file.edit",
                json!({"path": path, "diff": diff, "tool": "Edit"}),
            )
        }
        900..=939 => ("tool", "file.read", json!({"path": "src/lib.rs"})),
        940..=969 => {
            let k = rng.below(25);
            let content = format!("task {k}: {}", words(rng, 4));
            let status = *rng.pick(&["pending", "in_progress", "completed", "completed"]);
            let kind = if rng.chance(50) {
                "todo.add"
            } else {
                "todo.update"
            };
            ("tool", kind, json!({"content": content, "status": status}))
        }
        970..=979 => {
            let n = 3 + rng.below(30) as usize;
            (
                "agent:claude",
                "decision",
                json!({"text": words(rng, n), "reasons": [words(rng, 5)]}),
            )
        }
        980..=989 => {
            let n = 3 + rng.below(20) as usize;
            (
                "agent:claude",
                "memory.write",
                json!({"text": words(rng, n)}),
            )
        }
        _ => (
            "system",
            "checkpoint",
            json!({"reason": "compaction", "summary": words(rng, 30)}),
        ),
    };
    Event::new(
        seq,
        "2026-01-01T00:00:00Z",
        Agent::Claude,
        actor,
        kind,
        Level::Context,
        payload,
    )
}
