//! Deterministic generator of realistic canonical sessions for benchmarks.
//!
//! Shapes follow the Claude Code and Codex samples in `shared/samples/`:
//! a user prompt, assistant text, tool calls (shell commands, edits, reads)
//! and their results, with long command output, unified diffs and file
//! excerpts. Average event size is about 750 bytes with a long tail of
//! multi-kilobyte outputs. Same seed, same bytes.

use std::fmt::Write as _;

const WORDS: &[&str] = &[
    "parser",
    "token",
    "session",
    "buffer",
    "index",
    "commit",
    "error",
    "result",
    "handle",
    "config",
    "render",
    "stream",
    "chunk",
    "header",
    "event",
    "value",
    "offset",
    "length",
    "schema",
    "cursor",
    "fn",
    "let",
    "mut",
    "impl",
    "struct",
    "pub",
    "return",
    "match",
    "Some",
    "None",
    "Ok",
    "Err",
    "self",
    "async",
    "await",
    "trait",
    "where",
    "use",
    "mod",
    "crate",
    "test",
    "assert_eq!",
    "vec!",
];

/// xorshift64*: small, fast and reproducible.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn words(&mut self, n: u64) -> String {
        let mut s = String::new();
        for i in 0..n {
            if i > 0 {
                s.push(if self.below(9) == 0 { '\n' } else { ' ' });
            }
            s.push_str(WORDS[self.below(WORDS.len() as u64) as usize]);
        }
        s
    }
    fn words_between(&mut self, min: u64, spread: u64) -> String {
        let n = min + self.below(spread);
        self.words(n)
    }
    fn path(&mut self) -> String {
        format!(
            "src/{}/{}.rs",
            WORDS[self.below(20) as usize],
            WORDS[self.below(20) as usize]
        )
    }
}

/// Returns the canonical header line of a generated session.
pub fn header_line(id: &str) -> String {
    format!(
        r#"{{"header":{{"format":1,"id":"{id}","agent":"claude","native_id":"{id}","cwd":"/home/dev/project","created":"2026-01-01T00:00:00.000Z","title":"Generated session {id}"}}}}"#
    )
}

/// Appends generated event `seq` (one JSON line, no checksum) to `out`.
pub fn event_line(rng: &mut Rng, seq: u64, out: &mut String) {
    let ts = format!(
        "2026-01-01T{:02}:{:02}:{:02}.{:03}Z",
        (seq / 3600) % 24,
        (seq / 60) % 60,
        seq % 60,
        seq % 1000
    );
    let (kind, actor, payload) = match seq % 8 {
        0 => (
            "message.user",
            "user",
            serde_json::json!({"text": rng.words_between(10, 60)}),
        ),
        1 => (
            "message.assistant",
            "agent:claude",
            serde_json::json!({"text": rng.words_between(20, 120), "model": "claude-sonnet", "usage": {"input_tokens": rng.below(90000), "output_tokens": rng.below(2000)}}),
        ),
        2 => (
            "tool.call",
            "agent:claude",
            serde_json::json!({"name": "Bash", "tool_use_id": format!("toolu_{seq:012x}"), "arguments": {"command": format!("cargo test {}", rng.words(2)), "description": rng.words(5)}}),
        ),
        3 => {
            // Long command output: most are a few hundred bytes, some several kilobytes.
            let n = if rng.below(10) == 0 {
                400 + rng.below(400)
            } else {
                20 + rng.below(60)
            };
            (
                "command.run",
                "tool",
                serde_json::json!({"cmd": "cargo test", "exit_code": rng.below(2), "stdout_tail": rng.words(n), "tool_use_id": format!("toolu_{:012x}", seq - 1)}),
            )
        }
        4 => {
            let path = rng.path();
            let mut diff = format!(
                "--- a/{path}\n+++ b/{path}\n@@ -{},7 +{},8 @@\n",
                rng.below(400),
                rng.below(400)
            );
            for _ in 0..(4 + rng.below(8)) {
                let sign = [" ", "-", "+"][rng.below(3) as usize];
                let _ = writeln!(diff, "{sign}    {}", rng.words(6));
            }
            (
                "file.edit",
                "agent:claude",
                serde_json::json!({"path": path, "diff": diff}),
            )
        }
        5 => (
            "tool.result",
            "tool",
            serde_json::json!({"tool_use_id": format!("toolu_{seq:012x}"), "content": rng.words_between(30, 120), "is_error": false}),
        ),
        6 => (
            "message.thinking",
            "agent:claude",
            serde_json::json!({"text": rng.words_between(15, 50), "signature": format!("{:032x}{:032x}", rng.next(), rng.next())}),
        ),
        _ => (
            "file.read",
            "agent:claude",
            serde_json::json!({"path": rng.path(), "range": [1, 200]}),
        ),
    };
    let event = serde_json::json!({
        "seq": seq, "ts": ts, "agent": "claude", "actor": actor, "type": kind, "level": 1,
        "payload": payload,
        "origin": {"agent": "claude", "native_id": format!("{:016x}-{seq}", rng.next()), "native_seq": seq},
    });
    out.push_str(&event.to_string());
    out.push('\n');
}

/// Returns a whole canonical file: header and `n` events.
pub fn session_file(id: &str, n: u64, seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut out = header_line(id);
    out.push('\n');
    for seq in 0..n {
        event_line(&mut rng, seq, &mut out);
    }
    out
}
