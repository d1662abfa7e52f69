//! Secret redaction at capture: what an agent saw of a key or token never
//! becomes a git object (DESIGN.md, Security).
//!
//! Every string of an event's payload (the canonical fields and the native
//! record kept for write-back alike) is searched for credentials with a
//! small set of conservative rules; each match becomes
//! `[REDACTED:<rule>]`, and the event records which rules fired how often
//! and the rule set's fingerprint (`event.redacted`), so the log says what
//! was removed without keeping it. Provider-bound opaque blobs (thinking
//! signatures, encrypted reasoning) are left alone: changing them would
//! break the agent's own resume, and they are ciphertext.
//!
//! What it does not do: find every secret. The rules favour precision over
//! recall (long, prefixed tokens; key blocks; `Authorization` headers;
//! `password=`-style assignments with long values).

use std::collections::BTreeMap;

use aho_corasick::AhoCorasick;
use git_session_schema::Event;
use regex::Regex;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Object keys whose string values are opaque provider data.
const OPAQUE_KEYS: [&str; 3] = ["encrypted_content", "signature", "data"];

/// One rule: a name for the report and the pattern. When the pattern has a
/// capture group 1, only that group is replaced (the label before it stays).
const RULES: [(&str, &str); 10] = [
    (
        "private-key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    ),
    ("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "github-token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    ("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai-key", r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{32,}"),
    ("slack-token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}"),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
    ),
    (
        "bearer-token",
        r"(?i)\bauthorization:\s*(?:bearer|token|basic)\s+([A-Za-z0-9._~+/=-]{16,})",
    ),
    (
        "secret-assignment",
        r#"(?i)(?:api[_-]?key|secret|token|passw(?:or)?d|access[_-]?key)["']?\s*[:=]\s*["']?([A-Za-z0-9/+_=.-]{16,})"#,
    ),
];

/// Literals one of which every match of a rule contains (ASCII case
/// ignored), with the rule's index: one pass over a string with all of them
/// decides which rules are worth running. Most strings hit none.
const ANCHORS: [(&str, usize); 22] = [
    ("-----BEGIN", 0),
    ("AKIA", 1),
    ("ASIA", 1),
    ("ghp_", 2),
    ("gho_", 2),
    ("ghu_", 2),
    ("ghs_", 2),
    ("ghr_", 2),
    ("github_pat_", 2),
    ("sk-ant-", 3),
    ("sk-", 4),
    ("xox", 5),
    ("AIza", 6),
    ("eyJ", 7),
    ("authorization", 8),
    ("api_key", 9),
    ("api-key", 9),
    ("apikey", 9),
    ("secret", 9),
    ("token", 9),
    ("passw", 9),
    ("access", 9),
];

/// No rule matches fewer bytes than this (`xoxb-` and ten characters is the
/// shortest), so shorter strings (ids, types, times) are not searched.
const SHORTEST_SECRET: usize = 13;

/// Holds the compiled rules.
pub struct Redactor {
    rules: Vec<(&'static str, Regex)>,
    anchors: AhoCorasick,
    fingerprint: String,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new()
    }
}

impl Redactor {
    /// Compiles the built-in rules.
    pub fn new() -> Redactor {
        let rules = RULES
            .iter()
            .map(|(n, p)| (*n, Regex::new(p).expect("the built-in rules compile")))
            .collect();
        let mut h = Sha256::new();
        for (name, pattern) in RULES {
            h.update(name.as_bytes());
            h.update(b"\0");
            h.update(pattern.as_bytes());
            h.update(b"\0");
        }
        let fingerprint = h
            .finalize()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        let anchors = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            // Longer anchors first at a position, so `sk-ant-` is seen as
            // itself; a DFA makes the one pass over each string cheap.
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(ANCHORS.iter().map(|(literal, _)| literal))
            .expect("the anchors build");
        Redactor {
            rules,
            anchors,
            fingerprint,
        }
    }

    /// Returns a short hash of the rule set, recorded with each redaction.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Redacts `event` in place; returns how many matches were replaced.
    ///
    /// A redacted event gets `redacted: {"rules": {rule: count}, "ruleset":
    /// fingerprint}` among its fields.
    pub fn redact(&self, event: &mut Event) -> usize {
        let mut counts = BTreeMap::new();
        self.walk(&mut event.payload, None, &mut counts);
        let total = counts.values().sum();
        if total > 0 {
            event.extra.insert(
                "redacted".into(),
                json!({ "rules": counts, "ruleset": self.fingerprint }),
            );
        }
        total
    }

    fn walk(
        &self,
        value: &mut Value,
        key: Option<&str>,
        counts: &mut BTreeMap<&'static str, usize>,
    ) {
        match value {
            Value::String(s) => {
                if key.is_some_and(|k| OPAQUE_KEYS.contains(&k)) {
                    return;
                }
                if let Some(clean) = self.redact_text(s, counts) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.walk(v, None, counts)),
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    self.walk(v, Some(k.as_str()), counts);
                }
            }
            _ => {}
        }
    }

    /// Returns `text` with every match replaced, or `None` if nothing matched.
    fn redact_text(
        &self,
        text: &str,
        counts: &mut BTreeMap<&'static str, usize>,
    ) -> Option<String> {
        let mut candidates = [false; RULES.len()];
        let mut any = false;
        if text.len() < SHORTEST_SECRET {
            return None;
        }
        for m in self.anchors.find_iter(text) {
            candidates[ANCHORS[m.pattern().as_usize()].1] = true;
            any = true;
        }
        if !any {
            return None;
        }
        let mut out: Option<String> = None;
        for (i, (name, re)) in self.rules.iter().enumerate() {
            if !candidates[i] {
                continue;
            }
            let current = out.as_deref().unwrap_or(text);
            if !re.is_match(current) {
                continue;
            }
            let mut n = 0;
            let replaced = re.replace_all(current, |caps: &regex::Captures<'_>| {
                n += 1;
                let whole = caps.get(0).expect("group 0 always matches");
                match caps.get(1) {
                    Some(secret) => format!(
                        "{}[REDACTED:{name}]{}",
                        &whole.as_str()[..secret.start() - whole.start()],
                        &whole.as_str()[secret.end() - whole.start()..]
                    ),
                    None => format!("[REDACTED:{name}]"),
                }
            });
            if n > 0 {
                let replaced = replaced.into_owned();
                out = Some(replaced);
                *counts.entry(*name).or_default() += n;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_session_schema::{Agent, Level};

    fn event(payload: Value) -> Event {
        Event::new(
            0,
            "t",
            Agent::Claude,
            "user",
            "message.user",
            Level::History,
            payload,
        )
    }

    #[test]
    fn secrets_are_replaced_and_counted() {
        let r = Redactor::new();
        let mut e = event(json!({
            "text": "use sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123 and AKIAIOSFODNN7EXAMPLE",
            "claude": {"record": {"message": {"content": "export OPENAI_API_KEY=sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345678901"}}},
            "cmd": "curl -H 'Authorization: Bearer abcdefghijklmnop1234' https://x",
        }));
        assert_eq!(r.redact(&mut e), 4);
        let text = e.payload.to_string();
        for secret in [
            "sk-ant-api03",
            "AKIAIOSFODNN7EXAMPLE",
            "ABCDEFGHIJKLMNOP",
            "abcdefghijklmnop1234",
        ] {
            assert!(!text.contains(secret), "{secret} survived: {text}");
        }
        assert!(
            text.contains("Authorization: Bearer [REDACTED:bearer-token]"),
            "{text}"
        );
        assert!(text.contains("OPENAI_API_KEY=[REDACTED:"), "{text}");
        assert_eq!(e.extra["redacted"]["rules"]["anthropic-key"], 1);
        assert_eq!(e.extra["redacted"]["ruleset"], r.fingerprint());
    }

    #[test]
    fn ordinary_text_and_opaque_blobs_are_untouched() {
        let r = Redactor::new();
        let blob = "sk-ant-".to_owned() + &"A".repeat(60);
        let payload = json!({
            "text": "the token budget is 32000 tokens; run cargo test --release",
            "opaque": {"signature": blob.clone(), "encrypted_content": blob},
            "usage": {"input_tokens": 1234},
        });
        let mut e = event(payload.clone());
        assert_eq!(r.redact(&mut e), 0);
        assert_eq!(e.payload, payload);
        assert!(!e.extra.contains_key("redacted"));
    }
}
