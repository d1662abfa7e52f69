//! Secret redaction: what an agent saw of a key or token never becomes a
//! git object (DESIGN.md, Security).
//!
//! The store applies it to every event and header it writes (see
//! `store::Scrubber`): every string of an event's payload (canonical fields
//! and the native record kept for write-back alike), its unknown fields and
//! refs, every JSON object key, and the header's title, cwd and unknown
//! fields. A string is searched with the rule set of [`super::rules`]:
//! one Aho-Corasick pass finds the rules' keywords, and only the rules a
//! keyword selects, and whose gate (if the rule has one) matches right
//! after that keyword, run their regex. Each secret becomes `[REDACTED:<rule>]`
//! and the event records which rules fired how often and the rule set's
//! fingerprint (`event.redacted`), so the log says what was removed
//! without keeping it.
//!
//! Structural rules the text rules cannot see: a JSON string under a key
//! that names a secret (`password`, `client_secret`, `apiKey`, `*_token`,
//! `authorization`, `cookie`, ...) is replaced whole (`json-secret-field`)
//! unless it is a placeholder. Object keys that redact alike are numbered
//! (`[REDACTED:<rule>] (2)`), so no entry is lost.
//!
//! Exempt, by exact place and never by a key name alone: provider-bound
//! opaque blobs, which are ciphertext and which the agent's own resume
//! needs byte for byte — thinking signatures and redacted-thinking data
//! (`opaque.signature` / `opaque.data` of a canonical thinking event,
//! `signature` of a `{"type":"thinking"}` block, `data` of a
//! `{"type":"redacted_thinking"}` block), encrypted reasoning
//! (`encrypted_content` of a `reasoning` or `compaction` item), and base64
//! payloads (`data` of a
//! `{"type":"base64"}` source, `data:<mime>;base64,` URLs) — images and
//! documents whose bytes must survive. Strings shorter than 7 bytes or
//! made only of lowercase letters, spaces, `_` and `-`, and
//! identifier-shaped object keys shorter than 20, cannot hold a secret the
//! rules would find and are not searched.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use git_session_schema::{Event, SessionHeader};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::rules::RuleSet;

/// Strings shorter than this are not searched (`pwd=ab1` is the shortest
/// secret a rule finds).
const SHORTEST: usize = 7;
/// Strings up to this long are searched whole by every rule a keyword
/// selects; longer ones only near the keywords.
const WINDOWLESS: usize = 2048;
/// How far before a keyword a rule's match may start, in the window.
const LEAD: usize = 256;
/// How far after a keyword a rule's match may end, in the window.
const TRAIL: usize = 1024;
/// The gates of one string may read this many bytes, plus
/// [`GATE_BUDGET_PER_BYTE`] per byte of it, before every gate says yes.
const GATE_BUDGET: usize = 4096;
/// See [`GATE_BUDGET`].
const GATE_BUDGET_PER_BYTE: usize = 2;
/// Identifier-shaped keys shorter than this are not searched.
const SHORTEST_KEY: usize = 20;
/// The rule id of the structural JSON rule.
const JSON_FIELD: &str = "json-secret-field";
/// How deep JSON nests before the rest of it is searched as text only
/// (bounds the work a hostile document can cause).
const MAX_DEPTH: usize = 64;
/// Bumped when the engine (not the rules) changes what it finds.
const ENGINE_VERSION: &str = "git-session redact 3";

/// One secret found in a string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The rule that found it.
    pub rule: String,
    /// Byte range of the secret in the string.
    pub span: (usize, usize),
}

/// Holds the compiled rule set.
pub struct Redactor {
    set: RuleSet,
    fingerprint: String,
    /// Tells this redactor's entries in a thread's [`Recent`] strings
    /// from another's.
    serial: u64,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new()
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("rules", &self.set.rules.len())
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

impl Redactor {
    /// Builds the built-in rule set.
    pub fn new() -> Redactor {
        let mut h = Sha256::new();
        h.update(ENGINE_VERSION.as_bytes());
        for text in [super::rules::GITLEAKS_TOML, super::rules::GIT_SESSION_TOML] {
            h.update(b"\0");
            h.update(text.as_bytes());
        }
        let fingerprint = h
            .finalize()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        let set = RuleSet::builtin();
        assert!(
            set.rules.len() <= RULE_WORDS * 64,
            "the rule bitset holds {} rules",
            RULE_WORDS * 64
        );
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Redactor {
            set,
            fingerprint,
            serial,
        }
    }

    /// The process's one redactor, built on first use.
    pub fn shared() -> &'static Redactor {
        static SHARED: OnceLock<Redactor> = OnceLock::new();
        SHARED.get_or_init(Redactor::new)
    }

    /// Returns a short hash of the rule set, recorded with each redaction.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The ids of the rules that can fire.
    pub fn rule_ids(&self) -> impl Iterator<Item = &str> {
        self.set.rules.iter().map(|r| r.id.as_str())
    }

    /// Redacts `event` in place; returns how many secrets were replaced.
    ///
    /// A redacted event gets `redacted: {"rules": {rule: count}, "ruleset":
    /// fingerprint}` among its fields (added to any it already had).
    pub fn redact(&self, event: &mut Event) -> usize {
        let mut counts = BTreeMap::new();
        self.redact_counts(event, &mut counts);
        let total = counts.values().sum();
        if total > 0 {
            let mut rules: Map<String, Value> = event
                .extra
                .get("redacted")
                .and_then(|r| r.get("rules"))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            for (rule, n) in counts {
                let before = rules.get(rule).and_then(Value::as_u64).unwrap_or(0);
                rules.insert(rule.to_owned(), json!(before + n as u64));
            }
            event.extra.insert(
                "redacted".into(),
                json!({ "rules": rules, "ruleset": self.fingerprint }),
            );
        }
        total
    }

    /// Redacts `event` in place, adding what each rule found to `counts`,
    /// and records nothing in the event.
    pub fn redact_counts<'s>(&'s self, event: &mut Event, counts: &mut BTreeMap<&'s str, usize>) {
        Scratch::with(self.serial, |scratch| {
            scratch.memo.clear();
            self.walk(&mut event.payload, None, counts, 0, scratch);
            for (k, v) in event.extra.iter_mut() {
                if k != "redacted" {
                    self.walk(v, Some(k), counts, 0, scratch);
                }
            }
            for r in event.refs.iter_mut() {
                if let Some(clean) = self.redact_in(r, counts, &mut scratch.recent) {
                    *r = clean;
                }
            }
        })
    }

    /// Redacts the free-text fields of a header (title, cwd, unknown
    /// fields); returns how many secrets were replaced. Ids, agent and
    /// times are validated elsewhere and left alone.
    pub fn redact_header(&self, header: &mut SessionHeader) -> usize {
        let mut counts = BTreeMap::new();
        self.redact_header_counts(header, &mut counts);
        counts.values().sum()
    }

    /// Like [`Redactor::redact_header`], adding what each rule found to
    /// `counts`.
    pub fn redact_header_counts<'s>(
        &'s self,
        header: &mut SessionHeader,
        counts: &mut BTreeMap<&'s str, usize>,
    ) {
        Scratch::with(self.serial, |scratch| {
            for field in [&mut header.title, &mut header.cwd] {
                if let Some(text) = field.as_mut()
                    && let Some(clean) = self.redact_in(text, counts, &mut scratch.recent)
                {
                    *text = clean;
                }
            }
            scratch.memo.clear();
            for (k, v) in header.extra.iter_mut() {
                self.walk(v, Some(k), counts, 0, scratch);
            }
        })
    }

    /// Returns every secret the rules find in `text`, in order, overlapping
    /// findings merged (the first rule names the merged one).
    pub fn findings(&self, text: &str) -> Vec<Finding> {
        let mut found: Vec<(usize, usize, usize)> = Vec::new();
        Scratch::with(self.serial, |scratch| {
            self.scan(text, &mut found, &mut scratch.recent)
        });
        found
            .into_iter()
            .map(|(s, e, r)| Finding {
                rule: self.set.rules[r].id.clone(),
                span: (s, e),
            })
            .collect()
    }

    /// Returns `text` with every secret replaced, or `None` if it has none.
    pub fn redact_text<'s>(
        &'s self,
        text: &str,
        counts: &mut BTreeMap<&'s str, usize>,
    ) -> Option<String> {
        Scratch::with(self.serial, |scratch| {
            self.redact_in(text, counts, &mut scratch.recent)
        })
    }

    /// [`Redactor::redact_text`] with the thread's recent strings in hand.
    fn redact_in<'s>(
        &'s self,
        text: &str,
        counts: &mut BTreeMap<&'s str, usize>,
        recent: &mut Recent,
    ) -> Option<String> {
        let mut found = Vec::new();
        self.scan(text, &mut found, recent);
        if found.is_empty() {
            return None;
        }
        Some(self.splice(text, &found, counts))
    }

    /// Returns `text` with each span of `found` (sorted, apart) replaced by
    /// its rule's marker, and counts them.
    fn splice<'s>(
        &'s self,
        text: &str,
        found: &[(usize, usize, usize)],
        counts: &mut BTreeMap<&'s str, usize>,
    ) -> String {
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for &(s, e, r) in found {
            let id = self.set.rules[r].id.as_str();
            out.push_str(&text[at..s]);
            out.push_str("[REDACTED:");
            out.push_str(id);
            out.push(']');
            at = e;
            *counts.entry(id).or_default() += 1;
        }
        out.push_str(&text[at..]);
        out
    }

    /// Searches a string value with its key in front, as the assignment
    /// rules read a secret (`"encryption_key": "…"`, `"auth": "…"`): alone,
    /// the value is a string of letters and digits no rule can tell from
    /// an id. Returns the value redacted, or `None` when nothing was found.
    fn redact_named<'s>(
        &'s self,
        key: &str,
        value: &str,
        counts: &mut BTreeMap<&'s str, usize>,
    ) -> Option<String> {
        let text = format!("\"{key}\": \"{value}\"");
        let from = key.len() + 5;
        let to = from + value.len();
        let mut found = Vec::new();
        self.search(&text, &mut found);
        // Only what lies in the value (a span reaching into the key or the
        // quotes is cut to the value), placed in the value; none is moved
        // onto a char boundary the value does not have.
        let found: Vec<(usize, usize, usize)> = found
            .into_iter()
            .filter_map(|(s, e, r)| {
                let (s, e) = (s.max(from) - from, e.min(to).max(from) - from);
                (s < e && value.is_char_boundary(s) && value.is_char_boundary(e))
                    .then_some((s, e, r))
            })
            .collect();
        (!found.is_empty()).then(|| self.splice(value, &found, counts))
    }

    /// Collects the merged secret spans of `text` into `out`.
    ///
    /// A rule runs only near its keywords: on the byte range from
    /// `LEAD` before to `TRAIL` after each hit (merged), or on the whole
    /// string when it is short. A match that touches the edge of its range
    /// might be cut by it, so that rule then runs on the whole string.
    fn scan(&self, text: &str, out: &mut Vec<(usize, usize, usize)>, recent: &mut Recent) {
        if text.len() < SHORTEST || plain_words(text) {
            return;
        }
        let bytes = text.as_bytes();
        if bytes.len() <= Recent::LONGEST {
            let at = Recent::slot(bytes);
            if recent.seen(at, bytes) {
                return;
            }
            let before = out.len();
            self.search(text, out);
            if out.len() == before {
                recent.insert(at, bytes);
            }
            return;
        }
        self.search(text, out);
    }

    /// [`Redactor::scan`] without the shortcuts.
    fn search(&self, text: &str, out: &mut Vec<(usize, usize, usize)>) {
        self.search_as_is(text, out);
        if memchr::memmem::find(text.as_bytes(), b"\\\"").is_some() {
            self.search_unescaped(text, out);
        }
    }

    /// Searches `text` again with each `\"` read as `"`: JSON held as an
    /// escaped string (`{\"SecretAccessKey\": \"…\"}` in a tool's output, a
    /// log line, a test fixture) hides its quotes from the rules, which
    /// read `"key": "value"`. What is found is mapped back onto `text`.
    fn search_unescaped(&self, text: &str, out: &mut Vec<(usize, usize, usize)>) {
        let bytes = text.as_bytes();
        let mut plain = Vec::with_capacity(bytes.len());
        // Where in `plain` each dropped backslash was (before that byte).
        let mut dropped = Vec::new();
        let mut from = 0;
        for at in memchr::memmem::find_iter(bytes, b"\\\"") {
            plain.extend_from_slice(&bytes[from..at]);
            dropped.push(plain.len());
            from = at + 1;
        }
        plain.extend_from_slice(&bytes[from..]);
        // Only ASCII backslashes were dropped, before ASCII quotes.
        let plain = String::from_utf8(plain).expect("still UTF-8");
        let mut found = Vec::new();
        self.search_as_is(&plain, &mut found);
        if found.is_empty() {
            return;
        }
        // A byte of `plain` lies after as many dropped bytes as were
        // dropped at or before its place.
        let back = |p: usize| p + dropped.partition_point(|&d| d <= p);
        out.extend(
            found
                .into_iter()
                .map(|(s, e, r)| (back(s), back(e - 1) + 1, r)),
        );
        merge_findings(out);
    }

    /// [`Redactor::search`] on the text as it is.
    fn search_as_is(&self, text: &str, out: &mut Vec<(usize, usize, usize)>) {
        let bytes = text.as_bytes();
        // Most short strings hold no keyword (a uuid, a time): one walk
        // of the automaton without notes says so (unless a rule runs on
        // every string).
        if self.set.always.is_empty() && self.set.is_short(bytes) && !self.set.any_keyword(bytes) {
            return;
        }
        // What the gates may read of this string (see `Rule::gated_at`).
        let mut budget = GATE_BUDGET_PER_BYTE * bytes.len() + GATE_BUDGET;
        if bytes.len() <= WINDOWLESS {
            // Short: each selected rule runs once on the whole string, in
            // rule order; the set of rules is a bitset (no allocation).
            let mut seen = [0u64; RULE_WORDS];
            self.set.each_keyword(bytes, |k, _, end| {
                for &r in &self.set.keyword_rules[k] {
                    let bit = 1 << (r % 64);
                    if seen[r / 64] & bit == 0
                        && self.set.rules[r].gated_at(bytes, end, &mut budget)
                    {
                        seen[r / 64] |= bit;
                    }
                }
                true
            });
            for &r in &self.set.always {
                seen[r / 64] |= 1 << (r % 64);
            }
            for (w, word) in seen.iter().enumerate() {
                let mut bits = *word;
                while bits != 0 {
                    let r = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    self.run_rule(r, text, 0, bytes.len(), out);
                }
            }
            merge_findings(out);
            return;
        }
        // (rule, start, end) of each keyword hit's range.
        let mut ranges: Vec<(usize, usize, usize)> = Vec::new();
        self.set.each_keyword(bytes, |k, start, end| {
            for &r in &self.set.keyword_rules[k] {
                if self.set.rules[r].gated_at(bytes, end, &mut budget) {
                    ranges.push((
                        r,
                        start.saturating_sub(LEAD),
                        (end + TRAIL).min(bytes.len()),
                    ));
                }
            }
            true
        });
        for &r in &self.set.always {
            ranges.push((r, 0, bytes.len()));
        }
        if ranges.is_empty() {
            return;
        }
        ranges.sort_unstable();
        let mut i = 0;
        while i < ranges.len() {
            let r = ranges[i].0;
            let mut j = i;
            while j < ranges.len() && ranges[j].0 == r {
                j += 1;
            }
            // Merge this rule's ranges.
            let mut merged: Vec<(usize, usize)> = Vec::new();
            for &(_, s, e) in &ranges[i..j] {
                match merged.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => merged.push((s, e)),
                }
            }
            let before = out.len();
            let mut cut = false;
            for &(s, e) in &merged {
                if !self.run_rule(r, text, s, e, out) {
                    cut = true;
                    break;
                }
            }
            if cut {
                out.truncate(before);
                self.run_rule(r, text, 0, bytes.len(), out);
            }
            i = j;
        }
        merge_findings(out);
    }

    /// Runs rule `r` on `text[from..to]`, pushing its findings; returns
    /// false (and may have pushed some) when a match touches a cut edge of
    /// the range.
    fn run_rule(
        &self,
        r: usize,
        text: &str,
        from: usize,
        to: usize,
        out: &mut Vec<(usize, usize, usize)>,
    ) -> bool {
        let bytes = text.as_bytes();
        let hay = &bytes[from..to];
        let rule = &self.set.rules[r];
        for caps in rule.regex().captures_iter(hay) {
            let whole = caps.get(0).expect("group 0 always matches");
            if (whole.start() == 0 && from > 0) || (whole.end() == hay.len() && to < bytes.len()) {
                return false;
            }
            let (s, e) = rule.secret_span(&caps);
            if s == e {
                continue;
            }
            let (mut s, mut e) = (s + from, e + from);
            let secret = &bytes[s..e];
            if !rule.strong_enough(secret) {
                continue;
            }
            let (ws, we) = (whole.start() + from, whole.end() + from);
            let line_start = bytes[..ws]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            let line_end = bytes[we..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| we + i);
            let line = &bytes[line_start..line_end];
            if self
                .set
                .global
                .iter()
                .chain(&rule.allowlists)
                .any(|a| a.allows(secret, &bytes[ws..we], line))
            {
                continue;
            }
            // Patterns run over bytes; never cut a character in two.
            while !text.is_char_boundary(s) {
                s -= 1;
            }
            while !text.is_char_boundary(e) {
                e += 1;
            }
            out.push((s, e, r));
        }
        true
    }

    fn walk<'s>(
        &'s self,
        value: &mut Value,
        key: Option<&str>,
        counts: &mut BTreeMap<&'s str, usize>,
        depth: usize,
        scratch: &mut Scratch,
    ) {
        match value {
            Value::String(s) => {
                if is_base64_data_url(s) {
                    return;
                }
                let json = looks_like_json(s);
                // Text searched once per event, or not at all once met in
                // two (see `Memo`): whether a string that is not JSON holds
                // a secret depends on its bytes alone.
                let key = (!json).then(|| scratch.memo.key(s)).flatten();
                if key.is_some_and(|k| scratch.memo.contains(s, k)) {
                    return;
                }
                if json && depth < MAX_DEPTH {
                    // Its keys and values as JSON, then the text as text:
                    // the key names a whole value is replaced under are
                    // few, and the text rules read `"signing_key": "…"`.
                    self.walk_json_text(s, counts, depth, scratch);
                }
                match self.redact_in(s, counts, &mut scratch.recent) {
                    Some(clean) => *s = clean,
                    None => {
                        if let Some(k) = key {
                            scratch.memo.insert(s, k);
                        }
                    }
                }
            }
            Value::Array(items) => items
                .iter_mut()
                .filter(|v| !inert(v))
                .for_each(|v| self.walk(v, None, counts, depth + 1, scratch)),
            Value::Object(map) => {
                self.walk_object(map, key == Some("opaque"), counts, depth + 1, scratch)
            }
            _ => {}
        }
    }

    /// JSON kept as text (tool-call arguments, a printed config file): its
    /// own strings and keys are walked as JSON, and it is rewritten only
    /// when something was found. Does nothing when `s` is not such JSON
    /// (or holds no keyword); the caller searches the text next either way.
    /// Kept out of [`Redactor::walk`]: few strings get here, and every
    /// call of the walk paid for its room.
    #[inline(never)]
    fn walk_json_text<'s>(
        &'s self,
        s: &mut String,
        counts: &mut BTreeMap<&'s str, usize>,
        depth: usize,
        scratch: &mut Scratch,
    ) {
        if !self.set.any_keyword(s.as_bytes()) {
            return;
        }
        let Ok(mut inner) = serde_json::from_str::<Value>(s) else {
            return;
        };
        if !(inner.is_object() || inner.is_array()) {
            return;
        }
        let before: usize = counts.values().sum();
        self.walk(&mut inner, None, counts, depth + 1, scratch);
        if counts.values().sum::<usize>() > before {
            *s = inner.to_string();
        }
    }

    fn walk_object<'s>(
        &'s self,
        map: &mut Map<String, Value>,
        in_opaque: bool,
        counts: &mut BTreeMap<&'s str, usize>,
        depth: usize,
        scratch: &mut Scratch,
    ) {
        // One pass: the object's kind (its `type`) is read as the pass meets
        // it, and a string that may be an opaque blob (its key is one an
        // opaque place has) met before the kind is known waits for the end
        // of the pass. Looking the kind up first was a second pass over the
        // entries of every object, and few objects have such a key.
        let mut kind = None;
        let mut undecided = Vec::new();
        // The entries whose key must be searched itself: the first 64 by
        // bit, whether any later one does by `far`.
        let mut search = 0u64;
        let mut far = false;
        for (i, (k, v)) in map.iter_mut().enumerate() {
            // Of a key whose value is no string, only whether the key
            // itself is searched matters (the kind is read from a string,
            // an opaque blob and a value replaced whole are strings), and
            // that is decided without the table.
            let facts = if v.is_string() {
                scratch.keys.facts(k)
            } else if key_needs_search(k) {
                KeyFacts(KeyFacts::SEARCH)
            } else {
                KeyFacts(0)
            };
            if facts.has(KeyFacts::SEARCH) {
                if i < 64 {
                    search |= 1 << i;
                } else {
                    far = true;
                }
            }
            if facts.has(KeyFacts::TYPE) {
                kind = Some(kind_of(v.as_str()));
            } else if v.is_string() && facts.has(KeyFacts::OPAQUE) {
                match kind {
                    Some(kind) if opaque_place(kind, in_opaque, k) => continue,
                    Some(_) => {}
                    None => {
                        undecided.push(i);
                        continue;
                    }
                }
            }
            if facts.has(KeyFacts::NAMES_SECRET) || !inert(v) {
                self.walk_entry(k, facts, v, counts, depth, scratch);
            }
        }
        if !undecided.is_empty() {
            let kind = kind.unwrap_or(Kind::Other);
            for (i, (k, v)) in map.iter_mut().enumerate() {
                if undecided.contains(&i) && !opaque_place(kind, in_opaque, k) {
                    let facts = KeyFacts::of(k);
                    self.walk_entry(k, facts, v, counts, depth, scratch);
                }
            }
        }
        if search != 0 || far {
            self.redact_keys(map, search, counts, scratch);
        }
    }

    /// Searches the keys of `map` that need it (the first 64 by bit in
    /// `search`, the later ones by their facts) and renames those holding a
    /// secret. Kept out of [`Redactor::walk_object`], as few objects have
    /// such keys.
    #[inline(never)]
    fn redact_keys<'s>(
        &'s self,
        map: &mut Map<String, Value>,
        search: u64,
        counts: &mut BTreeMap<&'s str, usize>,
        scratch: &mut Scratch,
    ) {
        // Rebuild the object only when a key itself holds a secret.
        let mut clean: Vec<(usize, String)> = Vec::new();
        for (i, k) in map.keys().enumerate() {
            let searched = if i < 64 {
                search >> i & 1 == 1
            } else {
                scratch.keys.facts(k).has(KeyFacts::SEARCH)
            };
            if searched && let Some(c) = self.redact_in(k, counts, &mut scratch.recent) {
                clean.push((i, c));
            }
        }
        if !clean.is_empty() {
            // Two keys redacted alike, or a redacted key equal to one
            // kept, would become one entry and lose a value: a
            // redacted key that is taken gets a number.
            // (Sets and a number per name: a document of many secret
            // keys costs linear time.)
            let renamed: std::collections::HashSet<usize> = clean.iter().map(|&(i, _)| i).collect();
            let kept: std::collections::HashSet<String> = map
                .keys()
                .enumerate()
                .filter(|(i, _)| !renamed.contains(i))
                .map(|(_, k)| k.clone())
                .collect();
            let mut numbers: std::collections::HashMap<String, usize> = Default::default();
            let old = std::mem::take(map);
            let mut next = clean.into_iter().peekable();
            for (i, (k, v)) in old.into_iter().enumerate() {
                let k = match next.peek() {
                    Some((at, _)) if *at == i => {
                        let base = next.next().expect("peeked").1;
                        let n = numbers.entry(base.clone()).or_insert(1);
                        let mut k = base.clone();
                        while kept.contains(&k) || map.contains_key(&k) {
                            *n += 1;
                            k = format!("{base} ({n})");
                        }
                        k
                    }
                    _ => k,
                };
                map.insert(k, v);
            }
        }
    }

    /// Redacts one entry of an object (not an opaque place): the value, or
    /// the whole of it when the key names a secret. `facts` are the key's.
    #[inline]
    fn walk_entry<'s>(
        &'s self,
        k: &str,
        facts: KeyFacts,
        v: &mut Value,
        counts: &mut BTreeMap<&'s str, usize>,
        depth: usize,
        scratch: &mut Scratch,
    ) {
        if let Value::String(s) = v
            && facts.has(KeyFacts::NAMES_SECRET)
            && !is_placeholder(s)
            && !self.set.global.iter().any(|a| {
                let b = s.as_bytes();
                a.allows(b, b, b)
            })
        {
            *s = format!("[REDACTED:{JSON_FIELD}]");
            *counts.entry(JSON_FIELD).or_default() += 1;
            return;
        }
        if let Value::String(s) = v
            && facts.has(KeyFacts::NAMED)
            && (SHORTEST..=NAMED_VALUE_MAX).contains(&s.len())
            && let Some(clean) = self.redact_named(k, s, counts)
        {
            *s = clean;
            return;
        }
        self.walk(v, Some(k), counts, depth, scratch);
    }
}

/// Words of the bitset of selected rules (64 rules each).
const RULE_WORDS: usize = 8;

/// Sorts findings by start and merges overlapping ones (the first rule
/// names the merged one).
fn merge_findings(out: &mut Vec<(usize, usize, usize)>) {
    if out.len() > 1 {
        out.sort_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
        let mut merged: Vec<(usize, usize, usize)> = Vec::with_capacity(out.len());
        for &(s, e, r) in out.iter() {
            match merged.last_mut() {
                Some(last) if s < last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e, r)),
            }
        }
        *out = merged;
    }
}

/// What a thread's redactor keeps from one string and event to the next,
/// taken once per event (a thread-local lookup per string cost about 3 %
/// of redaction's instructions): the event's clean long strings, recent
/// clean short strings, and the facts of the object keys it met.
struct Scratch {
    /// The redactor the entries are for (see [`Redactor::serial`]).
    owner: u64,
    memo: Memo,
    recent: Recent,
    keys: Keys,
}

impl Scratch {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Option<Scratch>> = const { std::cell::RefCell::new(None) };
    }

    fn new(owner: u64) -> Scratch {
        Scratch {
            owner,
            memo: Memo::default(),
            recent: Recent::new(),
            keys: Keys::new(),
        }
    }

    /// Runs `f` with this thread's scratch for the redactor numbered
    /// `owner` (emptied when another redactor used it last). A call made
    /// while the thread's scratch is taken gets a fresh one.
    fn with<R>(owner: u64, f: impl FnOnce(&mut Scratch) -> R) -> R {
        Scratch::SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut slot) => {
                if slot.as_ref().is_none_or(|s| s.owner != owner) {
                    *slot = Some(Scratch::new(owner));
                }
                f(slot.as_mut().expect("just set"))
            }
            Err(_) => f(&mut Scratch::new(owner)),
        })
    }
}

/// Long strings found clean. Within an event, the canonical payload and
/// the native record kept beside it repeat the same text; across events,
/// an agent repeats its system prompts, tool descriptions and attachments
/// in every turn (86 % of the bytes the Claude bench's import searched
/// were in strings it had searched before). Each is searched once per
/// event, and no more once it has been met in two events. A cheap hash
/// picks the candidate and a byte comparison with the kept copy decides,
/// so a crafted collision only costs a search.
struct Memo {
    /// This event's clean strings, one after another.
    bytes: Vec<u8>,
    /// (hash, start in `bytes`, length) of each.
    seen: Vec<(u64, usize, usize)>,
    /// The hashes of strings an earlier event found clean, one a slot
    /// (direct mapped by the hash): a string found clean again in a later
    /// event is kept in `kept` when its event ends. Unique text (a tool's
    /// output) thus never takes room there.
    once: Box<[u64]>,
    /// Clean strings met in two events, one after another, at most
    /// [`Memo::KEPT_ACROSS`] bytes: emptied when the next does not fit.
    kept: Vec<u8>,
    /// (hash, start in `kept`, length) of each, in sets of two slots
    /// (length 0: empty).
    slots: Box<[(u64, u32, u32)]>,
}

impl Default for Memo {
    fn default() -> Memo {
        Memo {
            bytes: Vec::new(),
            seen: Vec::new(),
            once: vec![0; 1 << Memo::ONCE_BITS].into_boxed_slice(),
            kept: Vec::new(),
            slots: vec![(0, 0, 0); 2 << Memo::SET_BITS].into_boxed_slice(),
        }
    }
}

impl Memo {
    /// Strings shorter than this are searched again (cheaper than keeping;
    /// [`Recent`] keeps the shorter ones).
    const SHORTEST: usize = 64;
    /// Kept within an event up to this much; an event with more clean
    /// text gives its buffer back.
    const KEPT: usize = 1 << 20;
    /// The bytes kept across events (per thread).
    const KEPT_ACROSS: usize = 1 << 20;
    /// Strings longer than this are not kept across events.
    const LONGEST_ACROSS: usize = Memo::KEPT_ACROSS / 4;
    /// log2 of the slots of `once`: 4,096, 32 KiB.
    const ONCE_BITS: u32 = 12;
    /// log2 of the sets of `slots`: 1,024 slots, 16 KiB.
    const SET_BITS: u32 = 9;

    /// Ends an event: its clean strings that an earlier event found clean
    /// too are kept across events; the others are noted in `once`.
    fn clear(&mut self) {
        for &(hash, at, len) in &self.seen {
            let once = &mut self.once[(hash >> (64 - Memo::ONCE_BITS)) as usize];
            if *once != hash {
                *once = hash;
                continue;
            }
            if len > Memo::LONGEST_ACROSS {
                continue;
            }
            if self.kept.len() + len > Memo::KEPT_ACROSS {
                self.kept.clear();
                self.slots.fill((0, 0, 0));
            }
            let set = Memo::set(hash);
            // The newer string in the first way, the one it displaces in
            // the second.
            self.slots[set + 1] = self.slots[set];
            self.slots[set] = (hash, self.kept.len() as u32, len as u32);
            self.kept.extend_from_slice(&self.bytes[at..at + len]);
        }
        if self.bytes.capacity() > Memo::KEPT {
            self.bytes = Vec::new();
        }
        self.bytes.clear();
        self.seen.clear();
    }

    /// Strings longer than [`Memo::KEPT`] are not kept either: a copy of a
    /// pasted 100 MB log would double what its event holds; one that
    /// repeats is searched again.
    fn key(&self, s: &str) -> Option<u64> {
        (Memo::SHORTEST..=Memo::KEPT)
            .contains(&s.len())
            .then(|| sampled_hash(s.as_bytes()))
    }

    /// Says whether `s`, whose hash is `hash`, was found clean in this
    /// event or is kept across events.
    fn contains(&self, s: &str, hash: u64) -> bool {
        let s = s.as_bytes();
        let set = Memo::set(hash);
        self.slots[set..set + 2].iter().any(|&(h, at, len)| {
            let (at, len) = (at as usize, len as usize);
            h == hash && len == s.len() && &self.kept[at..at + len] == s
        }) || self
            .seen
            .iter()
            .any(|&(h, at, len)| h == hash && len == s.len() && &self.bytes[at..at + len] == s)
    }

    /// The first of the two slots where the string of `hash` is kept.
    fn set(hash: u64) -> usize {
        2 * (hash >> (64 - Memo::SET_BITS)) as usize
    }

    /// Notes `s`, whose hash is `hash`, as found clean in this event.
    fn insert(&mut self, s: &str, hash: u64) {
        self.seen.push((hash, self.bytes.len(), s.len()));
        self.bytes.extend_from_slice(s.as_bytes());
    }
}

/// Short strings a thread's redactor found clean lately: ids, paths,
/// versions, branch and model names recur in every record of a session
/// (about 70 % of the bytes of such strings in the public Claude sessions
/// of `samples/`), and a lookup costs a fraction of a search. Direct
/// mapped by a cheap hash; a byte comparison decides, so a crafted
/// collision only costs a search.
struct Recent {
    /// `LONGEST + 1` bytes a slot: the length, then the string.
    slots: Vec<u8>,
}

impl Recent {
    /// Strings longer than this are not kept.
    const LONGEST: usize = 63;
    /// log2 of the number of slots: 1,024 slots, 64 KiB in all.
    const SLOT_BITS: u32 = 10;

    fn new() -> Recent {
        Recent {
            slots: vec![0; (1 << Recent::SLOT_BITS) * (Recent::LONGEST + 1)],
        }
    }

    /// Where `bytes` is kept. The hash's high bits: its last step is a
    /// multiplication, whose low bits see only the low bytes of each word
    /// (strings differing in their last bytes would share a slot).
    fn slot(bytes: &[u8]) -> usize {
        (fast_hash(bytes) >> (64 - Recent::SLOT_BITS)) as usize * (Recent::LONGEST + 1)
    }

    /// Says whether `bytes` (at most `LONGEST`, kept at slot `at`: see
    /// [`Recent::slot`]) was found clean lately.
    fn seen(&self, at: usize, bytes: &[u8]) -> bool {
        let slot = &self.slots[at..at + Recent::LONGEST + 1];
        usize::from(slot[0]) == bytes.len() && &slot[1..=bytes.len()] == bytes
    }

    /// Keeps `bytes` (at most `LONGEST`, at slot `at`) as found clean.
    fn insert(&mut self, at: usize, bytes: &[u8]) {
        let slot = &mut self.slots[at..at + Recent::LONGEST + 1];
        slot[0] = bytes.len() as u8;
        slot[1..=bytes.len()].copy_from_slice(bytes);
    }
}

/// What the walk asks of an object key (see [`KeyFacts::of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KeyFacts(u8);

impl KeyFacts {
    /// The key is `type`.
    const TYPE: u8 = 1;
    /// The key is one an opaque place has ([`opaque_key`]).
    const OPAQUE: u8 = 2;
    /// The key names a secret ([`names_secret`]).
    const NAMES_SECRET: u8 = 4;
    /// The key itself must be searched ([`key_needs_search`]).
    const SEARCH: u8 = 8;
    /// The key holds a word a secret's name is read by, and names no
    /// secret itself: its string value is searched with the key in front
    /// ([`names_credential`], [`Redactor::redact_named`]).
    const NAMED: u8 = 16;

    /// Decides the facts of `key`.
    fn of(key: &str) -> KeyFacts {
        let mut facts = 0;
        if key == "type" {
            facts |= KeyFacts::TYPE;
        }
        if opaque_key(key) {
            facts |= KeyFacts::OPAQUE;
        }
        if names_secret(key) {
            facts |= KeyFacts::NAMES_SECRET;
        } else if names_credential(key) {
            facts |= KeyFacts::NAMED;
        }
        if key_needs_search(key) {
            facts |= KeyFacts::SEARCH;
        }
        KeyFacts(facts)
    }

    fn has(self, fact: u8) -> bool {
        self.0 & fact != 0
    }
}

/// The facts of the object keys a thread met lately: a session's records
/// use a few hundred keys, each met thousands of times. Keys of up to 32
/// bytes are kept, in sets of two slots; a key is told from another by its length
/// and four words that hold all its bytes, so a slot never answers for
/// another key.
struct Keys {
    slots: Vec<KeySlot>,
}

#[derive(Clone, Copy)]
struct KeySlot {
    words: [u64; 4],
    /// The key's length; `u8::MAX` in an empty slot.
    len: u8,
    facts: KeyFacts,
}

impl Keys {
    /// Keys longer than this are decided each time.
    const LONGEST: usize = 32;
    /// log2 of the number of sets of two slots: 1,024 slots, 40 KiB (of
    /// which a session's few hundred keys touch a part). Two ways: with
    /// one, two keys a record uses that share a slot kept evicting each
    /// other (one lookup in seven missed on the bench's 262 keys).
    const SET_BITS: u32 = 9;

    fn new() -> Keys {
        let empty = KeySlot {
            words: [0; 4],
            len: u8::MAX,
            facts: KeyFacts(0),
        };
        Keys {
            slots: vec![empty; 2 << Keys::SET_BITS],
        }
    }

    /// The facts of `key`, decided on its first meeting.
    #[inline]
    fn facts(&mut self, key: &str) -> KeyFacts {
        // Shorter than any name of a secret or than a searched key: only
        // `type`, `data` and the few that hold a credential word (`auth`,
        // `key`) have facts, and comparing is cheaper than a lookup.
        if key.len() < 5 {
            return KeyFacts(match key {
                "type" => KeyFacts::TYPE,
                "data" => KeyFacts::OPAQUE,
                _ if names_credential(key) => KeyFacts::NAMED,
                _ => 0,
            });
        }
        let Some(words) = key_words(key.as_bytes()) else {
            return KeyFacts::of(key);
        };
        let at = 2 * Keys::set(&words, key.len());
        let is = |slot: &KeySlot| usize::from(slot.len) == key.len() && slot.words == words;
        if is(&self.slots[at]) {
            return self.slots[at].facts;
        }
        if is(&self.slots[at + 1]) {
            return self.slots[at + 1].facts;
        }
        // The newer key in the first way, the one it displaces in the second.
        let facts = KeyFacts::of(key);
        self.slots[at + 1] = self.slots[at];
        self.slots[at] = KeySlot {
            words,
            len: key.len() as u8,
            facts,
        };
        facts
    }

    /// The set of the key of length `len` held in `words`.
    #[inline]
    fn set(words: &[u64; 4], len: usize) -> usize {
        let h = (words[0]
            ^ words[1].rotate_left(16)
            ^ words[2].rotate_left(32)
            ^ words[3].rotate_left(48)
            ^ len as u64)
            .wrapping_mul(K);
        (h >> (64 - Keys::SET_BITS)) as usize
    }
}

/// Four words that, with its length, hold every byte of a key of up to
/// [`Keys::LONGEST`] bytes (overlapping where it is shorter); `None` for
/// a longer key.
#[inline]
fn key_words(b: &[u8]) -> Option<[u64; 4]> {
    let n = b.len();
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let half = |at: usize| {
        u64::from(u32::from_le_bytes(
            b[at..at + 4].try_into().expect("4 bytes"),
        ))
    };
    Some(match n {
        0..4 => [
            b.iter().rev().fold(0, |w, &x| w << 8 | u64::from(x)),
            0,
            0,
            0,
        ],
        4..8 => [half(0) | half(n - 4) << 32, 0, 0, 0],
        8..=16 => [word(0), word(n - 8), 0, 0],
        17..=24 => [word(0), word(8), word(n - 8), 0],
        25..=Keys::LONGEST => [word(0), word(8), word(16), word(n - 8)],
        _ => return None,
    })
}

/// The multiplier of the cheap hashes below (2^64 over the golden ratio).
const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// A hash of a string of at least [`Memo::SHORTEST`] bytes from its
/// length and 32 bytes at its start, middle and end. The memo compares
/// the bytes of a candidate in any case (a collision costs a search), and
/// hashing the whole of each recurring system prompt (29 MB in the Claude
/// bench's import) cost more than comparing it.
fn sampled_hash(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    debug_assert!(n >= Memo::SHORTEST);
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let mid = n / 2 - 16;
    // A folded multiplication a word: its high half carries every bit of
    // the product back down (with a plain multiplication, a change in a
    // word's last byte could cancel one in the word before it).
    [
        0,
        8,
        16,
        24,
        mid,
        mid + 8,
        mid + 16,
        mid + 24,
        n - 32,
        n - 24,
        n - 16,
        n - 8,
    ]
    .into_iter()
    .fold(n as u64, |h, at| {
        let m = u128::from(h ^ word(at)) * u128::from(K);
        (m as u64) ^ (m >> 64) as u64
    })
}

/// A fast, unkeyed hash of 8-byte words (collisions are resolved by
/// comparing bytes, see [`Memo`]).
fn fast_hash(bytes: &[u8]) -> u64 {
    let mut h = bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    for &b in words.remainder() {
        h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
    }
    h
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Thinking,
    RedactedThinking,
    Reasoning,
    Base64,
    Other,
}

/// The kind of an object whose `type` is `ty`.
fn kind_of(ty: Option<&str>) -> Kind {
    match ty {
        Some("thinking") => Kind::Thinking,
        Some("redacted_thinking") => Kind::RedactedThinking,
        Some("reasoning") | Some("compaction") => Kind::Reasoning,
        Some("base64") => Kind::Base64,
        _ => Kind::Other,
    }
}

/// Says whether walking `value` can find nothing: a number, a bool, null,
/// an empty array or object, or a string shorter than [`SHORTEST`] (too
/// short for a secret, or for JSON holding one). Most values of a record
/// are; the walk skips them without a call. Not for a value under a key
/// that names a secret: that one is replaced whole, however short.
#[inline]
fn inert(value: &Value) -> bool {
    match value {
        Value::String(s) => s.len() < SHORTEST,
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::Null | Value::Bool(_) | Value::Number(_) => true,
    }
}

/// Says whether `key` is one an opaque place has (see [`opaque_place`]).
fn opaque_key(key: &str) -> bool {
    matches!(key, "signature" | "data" | "encrypted_content")
}

/// Says whether the string under `key` of an object of `kind` is a
/// provider-bound opaque blob.
fn opaque_place(kind: Kind, in_opaque: bool, key: &str) -> bool {
    match key {
        "signature" => in_opaque || kind == Kind::Thinking,
        "data" => in_opaque || kind == Kind::RedactedThinking || kind == Kind::Base64,
        "encrypted_content" => kind == Kind::Reasoning,
        _ => false,
    }
}

/// Says whether `text` is only lowercase letters, spaces, `_` and `-`
/// (`tool_use`, `cache_creation_input_tokens`, `end turn`): no rule finds
/// a secret in that (they need a digit, a capital, or a `=`, `:`, `/`).
fn plain_words(text: &str) -> bool {
    all_bytes::<Plain>(text.as_bytes())
}

/// A class of ASCII bytes, tested one byte at a time (`has`) or eight at a
/// time (`mask` of a little-endian word: the high bit of each byte of the
/// class set) by [`all_bytes`]. A trait, not a value holding functions:
/// each class's tests are then inlined where [`all_bytes`] runs (called
/// through pointers they were a fifth of redaction's instructions).
trait Bytes {
    fn has(b: u8) -> bool;
    fn mask(x: u64) -> u64;
}

/// Lowercase letters, `_`, `-` and space (see [`plain_words`]).
struct Plain;

impl Bytes for Plain {
    #[inline(always)]
    fn has(b: u8) -> bool {
        b.is_ascii_lowercase() || matches!(b, b'_' | b'-' | b' ')
    }
    #[inline(always)]
    fn mask(x: u64) -> u64 {
        in_range(x, b'a', b'z') | is(x, b'_') | is(x, b'-') | is(x, b' ')
    }
}

/// Letters, digits, `_` and `-`: an identifier-shaped key.
struct Ident;

impl Bytes for Ident {
    #[inline(always)]
    fn has(b: u8) -> bool {
        b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-')
    }
    #[inline(always)]
    fn mask(x: u64) -> u64 {
        in_range(x, b'a', b'z')
            | in_range(x, b'A', b'Z')
            | in_range(x, b'0', b'9')
            | is(x, b'_')
            | is(x, b'-')
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `x` (all ASCII) that is in `lo..=hi`: set
/// where the byte is at least `lo` and not past `hi`. No byte's sum
/// carries into the next.
#[inline(always)]
fn in_range(x: u64, lo: u8, hi: u8) -> u64 {
    (x + ONES * u64::from(0x80 - lo)) & !(x + ONES * u64::from(0x7f - hi))
}

/// The high bit of each byte of `x` (all ASCII) that is `c`: the xor is 0
/// there and below 0x80 elsewhere, so adding 0x7f sets the high bit
/// exactly where it is not 0.
#[inline(always)]
fn is(x: u64, c: u8) -> u64 {
    !((x ^ (ONES * u64::from(c))) + ONES * 0x7f)
}

/// Says whether every byte of `bytes` is in `class`, eight at a time: the
/// bytes after the last whole word are read as the word that ends the
/// text (overlapping the one before), and texts of 4 to 7 bytes as two
/// overlapping halves.
#[inline(always)]
fn all_bytes<C: Bytes>(bytes: &[u8]) -> bool {
    let ok = |x: u64| x & HIGH == 0 && C::mask(x) & HIGH == HIGH;
    let n = bytes.len();
    if n >= 8 {
        let word = |w: &[u8]| u64::from_le_bytes(w.try_into().expect("8 bytes"));
        let mut words = bytes.chunks_exact(8);
        words.all(|w| ok(word(w))) && (words.remainder().is_empty() || ok(word(&bytes[n - 8..])))
    } else if n >= 4 {
        let half = |h: &[u8]| u64::from(u32::from_le_bytes(h.try_into().expect("4 bytes")));
        ok(half(&bytes[..4]) | half(&bytes[n - 4..]) << 32)
    } else {
        bytes.iter().all(|&b| C::has(b))
    }
}

/// Says whether an object key must be searched for secrets itself.
#[inline]
fn key_needs_search(key: &str) -> bool {
    // Lengths first: most keys are short and their bytes are not read.
    key.len() >= SHORTEST
        && (key.len() >= SHORTEST_KEY || !all_bytes::<Ident>(key.as_bytes()))
        && !plain_words(key)
}

/// The names [`names_secret`] looks for at the end of a key, as its
/// letters and digits, lowercase.
const SECRET_NAMES: [&[u8]; 18] = [
    b"password",
    b"passwd",
    b"passphrase",
    b"secret",
    b"token",
    b"credential",
    b"credentials",
    b"authorization",
    b"cookie",
    b"apikey",
    b"accesskey",
    b"secretkey",
    b"privatekey",
    b"accesstoken",
    b"refreshtoken",
    b"authtoken",
    b"sessiontoken",
    b"bearertoken",
];

/// The longest string value searched with its key in front (the
/// assignment rules' secrets are at most 150 bytes; longer text is
/// searched as text).
const NAMED_VALUE_MAX: usize = 1024;

/// Says whether a key holds one of the words the assignment rules read a
/// secret's name by (gitleaks' `generic-api-key`: `encryption_key`,
/// `auth`, `jwt_signing_key`, `apiSecretKeyValue`), whatever the case.
fn names_credential(key: &str) -> bool {
    const WORDS: [&str; 9] = [
        "key",
        "auth",
        "token",
        "secret",
        "passw",
        "credential",
        "creds",
        "access",
        "api",
    ];
    let key = key.as_bytes();
    key.len() <= 64
        && WORDS.iter().any(|w| {
            key.windows(w.len())
                .any(|part| part.eq_ignore_ascii_case(w.as_bytes()))
        })
}

/// Says whether a JSON key names a secret: its last words are one of the
/// names below, whatever the case and separators (`client_secret`,
/// `apiKey`, `X-Auth-Token`, `DB_PASSWORD`).
fn names_secret(key: &str) -> bool {
    /// The last five letters of each of [`SECRET_NAMES`], packed as the
    /// tail of a key is below (derived, so a name added there is never
    /// missed here).
    const TAILS: [u64; SECRET_NAMES.len()] = {
        let mut packed = [0; SECRET_NAMES.len()];
        let mut i = 0;
        while i < SECRET_NAMES.len() {
            let name = SECRET_NAMES[i];
            let mut j = 0;
            while j < 5 {
                packed[i] |= (name[name.len() - 5 + j] as u64) << (8 * j);
                j += 1;
            }
            i += 1;
        }
        packed
    };
    if key.len() < 5 {
        return false;
    }
    // Most keys end in five letters and digits, read as one word: a key
    // whose last five bytes are letters or digits and not one of the
    // tails names no secret. `| 0x20` lowercases letters and leaves
    // digits as they are; only letters become lowercase letters.
    if key.len() >= 8 {
        let b = key.as_bytes();
        let last = u64::from_le_bytes(b[b.len() - 8..].try_into().expect("8 bytes")) >> 24;
        let alnum =
            in_range(last, b'a', b'z') | in_range(last, b'A', b'Z') | in_range(last, b'0', b'9');
        const FIVE: u64 = 0x80_8080_8080;
        if last & FIVE == 0 && alnum & FIVE == FIVE && !TAILS.contains(&(last | 0x20_2020_2020)) {
            return false;
        }
    }
    // The last five letters and digits, lowercase, packed in a word (the
    // last one in the top byte): a register, not a buffer read back.
    let mut tail = 0u64;
    let mut n = 0;
    for &b in key.as_bytes().iter().rev() {
        if b.is_ascii_alphanumeric() {
            n += 1;
            tail |= u64::from(b.to_ascii_lowercase()) << (8 * (5 - n));
            if n == 5 {
                break;
            }
        }
    }
    if n < 5 || !TAILS.contains(&tail) {
        return false;
    }
    let norm: Vec<u8> = key
        .bytes()
        .filter(u8::is_ascii_alphanumeric)
        .map(|b| b.to_ascii_lowercase())
        .collect();
    // Token counts and the like are not secrets; a name ending in one of
    // these is.
    let plural_count = norm.ends_with(b"tokens");
    !plural_count && SECRET_NAMES.iter().any(|name| norm.ends_with(name))
}

/// Says whether a secret-named field holds a placeholder, not a value
/// (`[PURGED]` is what `git session purge` leaves).
fn is_placeholder(s: &str) -> bool {
    s.is_empty() || s.starts_with("[REDACTED:") || s == "[PURGED]" || s.bytes().all(|b| b == b'*')
}

/// Says whether `s` may be a JSON object or array kept as text.
fn looks_like_json(s: &str) -> bool {
    // Most strings start with neither a bracket nor white space.
    if !s
        .as_bytes()
        .first()
        .is_some_and(|&b| matches!(b, b'{' | b'[') || b <= b' ' || b >= 0x80)
    {
        return false;
    }
    let t = s.trim();
    (t.starts_with('{') && t.ends_with('}')) || (t.starts_with('[') && t.ends_with(']'))
}

/// Says whether `s` is a `data:<mime>;base64,<base64>` URL.
fn is_base64_data_url(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("data:") else {
        return false;
    };
    let Some(comma) = rest.find(";base64,") else {
        return false;
    };
    rest[..comma].len() < 100
        && rest[comma + 8..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_session_schema::{Agent, Level};

    #[test]
    fn the_memo_keeps_no_copy_of_a_long_string() {
        let memo = Memo::default();
        assert!(memo.key(&"a".repeat(Memo::SHORTEST - 1)).is_none());
        assert!(memo.key(&"a".repeat(Memo::SHORTEST)).is_some());
        assert!(memo.key(&"a".repeat(Memo::KEPT)).is_some());
        assert!(memo.key(&"a".repeat(Memo::KEPT + 1)).is_none());
    }

    #[test]
    fn a_string_clean_in_two_events_is_kept_for_the_next_ones() {
        let mut memo = Memo::default();
        let text = format!("{} system prompt 1", "x".repeat(80));
        let hash = memo.key(&text).expect("long enough");
        memo.insert(&text, hash);
        assert!(memo.contains(&text, hash), "within its event");
        memo.clear();
        assert!(!memo.contains(&text, hash), "met in one event only");
        memo.insert(&text, hash);
        memo.clear();
        for _ in 0..3 {
            assert!(memo.contains(&text, hash), "met in two events");
            memo.clear();
        }
        // A string under the same hash is compared byte for byte (a
        // crafted collision costs a search, it never passes as clean).
        let other = format!("{} system prompt 2", "x".repeat(80));
        assert!(!memo.contains(&other, hash));
        // The hash samples the string: one that differs from it only
        // between the samples has its hash, and is still not taken for it.
        let long = format!("{}{}{}", "a".repeat(40), "clean", "b".repeat(160));
        let alike = format!("{}{}{}", "a".repeat(40), "ghp_x", "b".repeat(160));
        let h = memo.key(&long).expect("long enough");
        assert_eq!(memo.key(&alike), Some(h));
        for _ in 0..2 {
            memo.insert(&long, h);
            memo.clear();
        }
        assert!(memo.contains(&long, h));
        assert!(!memo.contains(&alike, h));
        // Unique text fills no room: met once, it is only a hash.
        for i in 0..10_000 {
            let unique = format!("{i:>80} output");
            let h = memo.key(&unique).expect("long enough");
            memo.insert(&unique, h);
            memo.clear();
        }
        assert_eq!(memo.kept.len(), text.len() + long.len());
        assert!(memo.contains(&text, hash));
        // Full: emptied, and the string that did not fit is kept.
        let meet = |memo: &mut Memo, s: &str| {
            let h = memo.key(s).expect("long enough");
            if !memo.contains(s, h) {
                memo.insert(s, h);
            }
            memo.clear();
            h
        };
        let fit = Memo::KEPT_ACROSS / Memo::LONGEST_ACROSS;
        let longs: Vec<String> = (0..fit)
            .map(|i| format!("{i}{}", "z".repeat(Memo::LONGEST_ACROSS - 1)))
            .collect();
        for (i, long) in longs.iter().enumerate() {
            meet(&mut memo, long);
            let h = meet(&mut memo, long);
            assert!(memo.contains(long, h), "{i}");
            assert!(memo.kept.len() <= Memo::KEPT_ACROSS);
        }
        // The first strings kept leave no room for the last.
        assert_eq!(memo.kept.len(), Memo::LONGEST_ACROSS, "emptied once");
        assert!(!memo.contains(&text, hash), "emptied with the rest");
        let longer = "z".repeat(Memo::LONGEST_ACROSS + 1);
        let h = memo.key(&longer).expect("long enough");
        for _ in 0..3 {
            meet(&mut memo, &longer);
        }
        assert!(!memo.contains(&longer, h), "too long to keep across events");
    }

    #[test]
    fn text_repeated_across_events_is_redacted_in_each() {
        // Clean text met in two events is not searched in later ones; a
        // secret in text that repeats is replaced in every event.
        let r = Redactor::new();
        let prompt = format!("{} You are an agent. Use the tools.", "x".repeat(80));
        let dirty = format!(
            "{} ghp_Qw7eRt2YuI9oPa4SdF6gHj1KlZx3CvBn8Mq5 done",
            "y".repeat(80)
        );
        for round in 0..5 {
            let mut e = event(json!({"system": prompt, "text": dirty, "round": round}));
            assert_eq!(r.redact(&mut e), 1, "round {round}");
            assert_eq!(e.payload["system"], prompt.as_str());
            assert!(!e.payload["text"].as_str().unwrap().contains("ghp_"));
        }
    }

    #[test]
    fn byte_classes_read_eight_bytes_at_a_time_as_one_at_a_time() {
        // Every byte value at every place of a word (and of the tail after
        // it), among bytes of the class.
        fn words_as_bytes<C: Bytes>() {
            let one_at_a_time = |bytes: &[u8]| bytes.iter().all(|&b| C::has(b));
            for len in 0..=20 {
                for b in 0..=255u8 {
                    for at in 0..len {
                        let mut bytes = b"abcdefgh-_zabcdefgh-_z"[..len].to_vec();
                        bytes[at] = b;
                        assert_eq!(all_bytes::<C>(&bytes), one_at_a_time(&bytes), "{bytes:?}");
                    }
                }
            }
        }
        words_as_bytes::<Plain>();
        words_as_bytes::<Ident>();
        for b in 0..=255u8 {
            let plain = b.is_ascii_lowercase() || matches!(b, b'_' | b'-' | b' ');
            assert_eq!(Plain::has(b), plain, "{b}");
            let ident = b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-');
            assert_eq!(Ident::has(b), ident, "{b}");
        }
        assert!(plain_words("cache_creation_input_tokens"));
        assert!(!plain_words("cache_creation_input_tokenS"));
        assert!(!plain_words("cache_creation_input_tokens."));
        assert!(!key_needs_search("cacheCreationInput"));
        for key in [
            "password",
            "DB_PASSWORD",
            "clientSecret",
            "X-Auth-Token",
            "api_key",
            "apiKey",
        ] {
            assert!(names_secret(key), "{key}");
        }
        for key in [
            "passwords_seen",
            "input_tokens",
            "keyword",
            "Tokens",
            "pass",
            "sword",
        ] {
            assert!(!names_secret(key), "{key}");
        }
        for json in ["{}", " [1]", "\u{b}{\"a\": 1}", "\u{a0}[]"] {
            assert!(looks_like_json(json), "{json:?}");
        }
        assert!(!looks_like_json("a{}"));
        assert!(key_needs_search("cacheCreation.Input"));
    }

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
            "text": "use AKIAZ3MHQX7WQPLV4KTR and then",
            "claude": {"record": {"message": {"content": "export OPENAI_API_KEY=sk-proj-Qw7eRt2YuI9oPa4SdF6gHj1KlZx3CvBn8Mq5"}}},
            "cmd": "curl -H 'Authorization: Bearer abcdefghijklmnop1234' https://x",
        }));
        assert!(r.redact(&mut e) >= 3);
        let text = e.payload.to_string();
        for secret in [
            "AKIAZ3MHQX7WQPLV4KTR",
            "Qw7eRt2YuI9oPa4SdF6g",
            "abcdefghijklmnop1234",
        ] {
            assert!(!text.contains(secret), "{secret} survived: {text}");
        }
        assert!(text.contains("OPENAI_API_KEY=[REDACTED:"), "{text}");
        assert_eq!(e.extra["redacted"]["ruleset"], r.fingerprint());
    }

    #[test]
    fn text_repeated_in_an_event_is_redacted_everywhere_it_is() {
        // The canonical payload and the native record repeat the same
        // text; it is searched once, and a secret is still replaced in
        // every copy (a clean copy is remembered, a dirty one is not).
        let r = Redactor::new();
        let dirty = format!(
            "{} ghp_Qw7eRt2YuI9oPa4SdF6gHj1KlZx3CvBn8Mq5 done",
            "x".repeat(80)
        );
        let clean = format!("{} nothing to see here, 42 times", "y".repeat(80));
        let mut e = event(json!({
            "text": dirty,
            "note": clean,
            "native": {"message": {"content": [{"type": "text", "text": dirty}, {"type": "text", "text": clean}]}},
            "tool": {"input": {"command": format!("echo {}", "z".repeat(80)), "again": dirty}},
        }));
        assert_eq!(r.redact(&mut e), 3);
        let text = e.payload.to_string();
        assert!(!text.contains("ghp_Qw7eRt2"), "{text}");
        assert_eq!(text.matches("nothing to see here").count(), 2, "{text}");
        assert_eq!(
            e.extra["redacted"]["rules"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum::<u64>(),
            3
        );
        // Long strings (searched near keywords only) agree with short ones.
        let long = format!(
            "{} ghp_Qw7eRt2YuI9oPa4SdF6gHj1KlZx3CvBn8Mq5 {}",
            "a ".repeat(2000),
            "b ".repeat(2000)
        );
        let found = r.findings(&long);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            &long[found[0].span.0..found[0].span.1],
            "ghp_Qw7eRt2YuI9oPa4SdF6gHj1KlZx3CvBn8Mq5"
        );
    }

    #[test]
    fn opaque_blobs_are_exempt_by_place_only() {
        let r = Redactor::new();
        let blob = "password=hunter2 ".repeat(4);
        let payload = json!({
            "text": "the token budget is 32000 tokens; run cargo test --release",
            "opaque": {"agent": "claude", "signature": blob.clone(), "data": blob.clone()},
            "native": {"type": "reasoning", "encrypted_content": blob.clone()},
            "source": {"type": "base64", "media_type": "image/png", "data": blob.clone()},
            "usage": {"input_tokens": 1234},
        });
        let mut e = event(payload.clone());
        assert_eq!(r.redact(&mut e), 0, "{}", e.payload);
        assert_eq!(e.payload, payload);
        // The same key names elsewhere are searched.
        let mut e = event(json!({"data": blob.clone(), "signature": blob.clone(),
            "doc": {"type": "text", "data": blob}}));
        assert!(r.redact(&mut e) >= 3);
        assert!(!e.payload.to_string().contains("hunter2"), "{}", e.payload);
    }

    #[test]
    fn json_keys_and_secret_fields() {
        let r = Redactor::new();
        let mut e = event(json!({
            "input": {"password": "hunter2", "client_secret": "abc", "apiKey": "k3y-9f8e7d",
                      "max_tokens": "1000", "input_tokens": 5, "token": "",
                      "secretKey": "s3cr3t", "AWS_SECRET_KEY": "x9"},
            "env": {"ghp_R5z0aQk8T2mVx7LbN3cYw9EuJ4hS6dFgPq1M": "x"},
        }));
        r.redact(&mut e);
        let p = &e.payload;
        assert_eq!(p["input"]["password"], "[REDACTED:json-secret-field]");
        assert_eq!(p["input"]["client_secret"], "[REDACTED:json-secret-field]");
        assert_eq!(p["input"]["apiKey"], "[REDACTED:json-secret-field]");
        assert_eq!(p["input"]["secretKey"], "[REDACTED:json-secret-field]");
        assert_eq!(p["input"]["AWS_SECRET_KEY"], "[REDACTED:json-secret-field]");
        assert_eq!(p["input"]["max_tokens"], "1000");
        assert_eq!(p["input"]["token"], "");
        assert!(!p.to_string().contains("ghp_R5z0"), "{p}");
        // Keys holding secrets among many: before and after the 64th.
        let secret = |i: usize| format!("ghp_R5z0aQk8T2mVx7LbN3cYw9EuJ4hS6dFg{i:04}");
        let at = [2, 35, 63, 64, 68, 97];
        let mut many = Map::new();
        for i in 0..100 {
            let key = if at.contains(&i) {
                secret(i)
            } else {
                format!("field_{i}")
            };
            many.insert(key, json!(i));
        }
        let mut e = event(json!({ "env": many }));
        assert_eq!(r.redact(&mut e), at.len(), "{}", e.payload);
        let env = e.payload["env"].as_object().unwrap();
        // Every entry is still there, each secret key under its own name.
        assert_eq!(env.len(), 100);
        for (n, i) in at.iter().enumerate() {
            let key = match n {
                0 => "[REDACTED:github-pat]".to_owned(),
                n => format!("[REDACTED:github-pat] ({})", n + 1),
            };
            assert_eq!(env[&key], json!(i), "{key}");
        }
        assert!(!e.payload.to_string().contains("ghp_R5z0"), "{}", e.payload);
        // A kept key equal to a redacted one keeps its name.
        let mut e = event(json!({"env": {
            "ghp_R5z0aQk8T2mVx7LbN3cYw9EuJ4hS6dFg0001": 1,
            "[REDACTED:github-pat]": 2,
        }}));
        assert_eq!(r.redact(&mut e), 1, "{}", e.payload);
        assert_eq!(e.payload["env"]["[REDACTED:github-pat]"], 2);
        assert_eq!(e.payload["env"]["[REDACTED:github-pat] (2)"], 1);
        let once = e.clone();
        assert_eq!(r.redact(&mut e), 0);
        assert_eq!(e, once);
        // A document of many secret keys (hostile or not) keeps them all.
        let many: Map<String, Value> = (0..2_000).map(|i| (secret(i), json!(i))).collect();
        let mut e = event(json!({ "env": many }));
        assert_eq!(r.redact(&mut e), 2_000);
        let env = e.payload["env"].as_object().unwrap();
        assert_eq!(env.len(), 2_000);
        assert_eq!(env["[REDACTED:github-pat] (2000)"], 1_999);
        // Only past the 64th.
        let mut many = Map::new();
        for i in 0..100 {
            let key = if i == 70 {
                secret(i)
            } else {
                format!("field_{i}")
            };
            many.insert(key, json!(i));
        }
        let mut e = event(json!({ "env": many }));
        assert_eq!(r.redact(&mut e), 1, "{}", e.payload);
        assert!(!e.payload.to_string().contains("ghp_R5z0"), "{}", e.payload);
        assert_eq!(e.payload["env"]["field_99"], 99);
    }

    #[test]
    fn aws_credentials_a_tool_printed_as_json_text_are_redacted() {
        // What `aws iam create-access-key`, `aws sts assume-role` and a
        // printed boto3 dict put in a tool's output: the keys carry no
        // `aws` prefix, and the JSON is text, not the event's own keys.
        let secret = "PtYgjmUhBel31iEl2hpChYgCfrL1spNxnyVmihA+";
        let token = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD6xm8mWq0OUDOmR1pP3iYd\
                     2O76UMFxFkM+R5Kjp1vRt/1fjORS+6ilI8ihN5KXSc7Tvo+hBKqFYY+kv5ZJr3J1TWDtkwtDDb";
        let outputs = [
            format!(
                "{{\n    \"AccessKey\": {{\n        \"UserName\": \"ci\",\n        \
                 \"AccessKeyId\": \"AKIAQYLPMN5HHHFPZAM2\",\n        \"Status\": \"Active\",\n        \
                 \"SecretAccessKey\": \"{secret}\",\n        \"CreateDate\": \"2026-12-07T16:00:00Z\"\n    }}\n}}"
            ),
            format!(
                "{{\"Credentials\": {{\"AccessKeyId\": \"ASIAQYLPMN5HHHFPZAM2\", \
                 \"SecretAccessKey\": \"{secret}\", \"SessionToken\": \"{token}\"}}}}"
            ),
            format!(
                "{{'AccessKeyId': 'ASIAQYLPMN5HHHFPZAM2', 'SecretAccessKey': '{secret}', \
                 'SessionToken': '{token}', 'Expiration': datetime.datetime(2026, 12, 7)}}"
            ),
            format!("secret_access_key = {secret}\naws_session_token = {token}\n"),
            // The same JSON held as an escaped string (a log line, a
            // fixture, a tool's output that quotes JSON).
            format!(
                r#"level=info msg="{{\"AccessKeyId\": \"ASIAQYLPMN5HHHFPZAM2\", \"SecretAccessKey\": \"{secret}\", \"SessionToken\": \"{token}\"}}""#
            ),
            format!(
                r#"{{\"aws_secret_access_key\":\"{secret}\",\"aws_session_token\":\"{token}\"}}"#
            ),
        ];
        let r = Redactor::new();
        for output in outputs {
            let mut e = event(json!({"tool_use_id": "t1", "content": output}));
            r.redact(&mut e);
            let text = e.payload["content"].as_str().unwrap();
            assert!(!text.contains(secret), "{text}");
            assert!(!text.contains(&token[20..60]), "{text}");
            assert!(!text.contains("HHHFPZAM2"), "{text}");
        }
        // Found in the escaped text, the secret is cut from the text as
        // it is, quotes and backslashes around it kept.
        let text = r#"{\"password\": \"Zq7x0a9FkLmN0pQr\", \"user\": \"ci\"}"#;
        let found = Redactor::shared().findings(text);
        assert_eq!(
            found
                .iter()
                .map(|f| &text[f.span.0..f.span.1])
                .collect::<Vec<_>>(),
            ["Zq7x0a9FkLmN0pQr"],
            "{found:?}"
        );
    }

    #[test]
    fn a_secret_under_a_key_only_the_assignment_rules_know_is_redacted() {
        // Keys that name no secret to the structural rule, but do to
        // gitleaks' generic-api-key: as an object's keys, and as JSON text
        // a tool printed (which used to be walked as JSON only).
        let key = "Zq7x0a9FkLmN0pQr5tUv8wXy2b3c4d5e6f7a8b9c";
        let auth = "Y2k6UzNjcjN0UGFzc3cwcmQxMjM0NTY3ODk=";
        let r = Redactor::new();
        let mut e = event(json!({
            "input": {"encryption_key": key, "auth": auth, "hmac_key": key,
                      "primary_key": "id", "sort_key": "created_at"},
            "content": format!("{{\"db\":{{\"encryption_key\":\"{key}\"}},\"auths\":{{\"r.io\":{{\"auth\":\"{auth}\"}}}}}}"),
            "file": {"content": format!("{{\"app\":{{\"jwt_signing_key\":\"{key}\"}}}}")},
        }));
        r.redact(&mut e);
        let text = e.payload.to_string();
        assert!(!text.contains(key) && !text.contains(auth), "{text}");
        // What names no credential stays, and the JSON text stays JSON.
        assert_eq!(e.payload["input"]["primary_key"], "id");
        assert_eq!(e.payload["input"]["sort_key"], "created_at");
        let content = e.payload["content"].as_str().unwrap();
        assert!(serde_json::from_str::<Value>(content).is_ok(), "{content}");
    }

    #[test]
    fn passwords_cookies_and_keys_on_command_lines_and_in_configs_are_redacted() {
        let found = |text: &str| -> Vec<String> {
            Redactor::shared()
                .findings(text)
                .iter()
                .map(|f| text[f.span.0..f.span.1].to_owned())
                .collect()
        };
        for (text, secret) in [
            (
                "aws configure set aws_secret_access_key Zq7x0a9/kLmN0pQr5tUv8wXy2b3c4d5e6f7a8b+=",
                "Zq7x0a9/kLmN0pQr5tUv8wXy2b3c4d5e6f7a8b+=",
            ),
            ("sshpass -p 'Xy7#kq2Lm9' ssh deploy@h", "Xy7#kq2Lm9"),
            ("sshpass -p Xy7kq2Lm9 scp a h:", "Xy7kq2Lm9"),
            (
                "docker login -u ci -p Qw3rtyUiop9 registry.example.com",
                "Qw3rtyUiop9",
            ),
            ("redis-cli -h cache -a S3cretRedis9 ping", "S3cretRedis9"),
            (
                "ssh-keygen -t ed25519 -N 'corr3ct horse' -f k",
                "corr3ct horse",
            ),
            (
                "openssl pkcs12 -export -passout pass:Exp0rtPw9 -out a.p12",
                "Exp0rtPw9",
            ),
            (
                "curl -H 'Cookie: sessionid=9f8e7d6c5b4a39281706f5e4d3c2b1a0' https://x",
                "sessionid=9f8e7d6c5b4a39281706f5e4d3c2b1a0",
            ),
            (
                "set-cookie: __Host-session=Qk9vV2x4Zz1yTnBx; Path=/; HttpOnly",
                "__Host-session=Qk9vV2x4Zz1yTnBx; Path=/; HttpOnly",
            ),
            (
                "curl -b 'session=9f8e7d6c5b4a3928' https://x",
                "session=9f8e7d6c5b4a3928",
            ),
            (
                "    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlF",
                "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlF",
            ),
            (
                "FROM postgres:16\nENV POSTGRES_PASSWORD s3cr3tPw9\n",
                "s3cr3tPw9",
            ),
        ] {
            assert!(
                found(text).iter().any(|f| f.contains(secret)),
                "{text:?}: {:?}",
                found(text)
            );
        }
        // What these rules must leave alone.
        for text in [
            "docker run -p 8080:80 nginx",
            "git checkout -b feature/login-page",
            "ssh-keygen -t ed25519 -N '' -f key",
            "ENV PATH /usr/local/bin:$PATH",
            "the cookie banner covers the login form",
            "curl -b cookies.txt https://example.com",
            "curl -b 'theme=dark' https://example.com",
            "Set-Cookie: theme=dark; Path=/; Expires=Wed, 21 Oct 2026 07:28:00 GMT",
            "Cookie: $COOKIE",
            "ENV API_KEY_FILE /run/secrets/api_key",
            "jsonwebtoken = \"9.3.0\"",
        ] {
            assert!(found(text).is_empty(), "{text:?}: {:?}", found(text));
        }
        // A version under a key that names a secret is no secret either.
        let mut e = event(
            json!({"dependencies": {"jsonwebtoken": "^9.0.2", "api_token": "tok_9f8e7d6c5b4a3928"}}),
        );
        Redactor::new().redact(&mut e);
        assert_eq!(e.payload["dependencies"]["jsonwebtoken"], "^9.0.2");
        assert_eq!(
            e.payload["dependencies"]["api_token"],
            "[REDACTED:json-secret-field]"
        );
    }

    #[test]
    fn header_title_and_cwd() {
        let r = Redactor::new();
        let mut h = SessionHeader::new(
            git_session_schema::SessionId::new("s1").unwrap(),
            Agent::Claude,
            "2026-01-01T00:00:00Z",
        );
        h.title = Some("deploy with glpat-Xk3mN8pQ2rT5vW9yZ1bC".into());
        assert_eq!(r.redact_header(&mut h), 1);
        assert!(!h.title.unwrap().contains("Xk3mN8"));
    }

    #[test]
    fn a_string_made_to_run_every_gate_far_costs_linear_time_and_is_still_redacted() {
        // Every `KEY` is a keyword of env-assignment, whose gate reads
        // `[A-Z0-9_]*` to the end of the run: without a budget each of the
        // 200,000 hits would read the rest of the 600 KB.
        let mut text = "KEY".repeat(200_000);
        text.push_str(" DB_PASSWORD=hunter22x\n");
        let found = Redactor::shared().findings(&text);
        assert!(
            found
                .iter()
                .any(|f| &text[f.span.0..f.span.1] == "hunter22x"),
            "{:?}",
            found.iter().map(|f| &f.rule).collect::<Vec<_>>()
        );
    }

    /// Says whether the thread's recent strings hold `text` for the
    /// redactor numbered `owner`, without taking them over.
    fn recent_has(owner: u64, text: &str) -> bool {
        Scratch::SCRATCH.with(|cell| {
            cell.borrow().as_ref().is_some_and(|s| {
                s.owner == owner
                    && s.recent
                        .seen(Recent::slot(text.as_bytes()), text.as_bytes())
            })
        })
    }

    #[test]
    fn a_short_string_kept_as_clean_never_vouches_for_another() {
        let r = Redactor::new();
        let secret = "password=hunter2";
        // A clean string of the secret's length in the same slot of the
        // thread's recent strings: only the bytes may decide.
        let clean = (0u32..)
            .map(|i| format!("v{i:0>15}"))
            .find(|c| Recent::slot(c.as_bytes()) == Recent::slot(secret.as_bytes()))
            .unwrap();
        assert_eq!(clean.len(), secret.len());
        assert!(r.findings(&clean).is_empty());
        assert!(recent_has(r.serial, &clean));
        assert!(!recent_has(r.serial, secret));
        for _ in 0..2 {
            assert_eq!(r.findings(secret).len(), 1, "{secret}");
        }
        // What one redactor kept is not taken by another.
        let other = Redactor::new();
        assert!(!recent_has(other.serial, &clean));
        assert!(other.findings(&clean).is_empty());
        assert!(!recent_has(r.serial, &clean));
        // The same text in an event is redacted however often it recurs.
        for _ in 0..3 {
            let mut e = event(json!({"text": secret, "k": [secret, clean]}));
            assert_eq!(r.redact(&mut e), 2, "{}", e.payload);
        }
    }

    #[test]
    fn a_key_names_a_secret_as_its_letters_and_digits_say() {
        // What `names_secret` decides, read off its definition.
        let reference = |key: &str| {
            let norm: Vec<u8> = key
                .bytes()
                .filter(u8::is_ascii_alphanumeric)
                .map(|b| b.to_ascii_lowercase())
                .collect();
            !norm.ends_with(b"tokens") && SECRET_NAMES.iter().any(|n| norm.ends_with(n))
        };
        let mut names: Vec<String> = SECRET_NAMES
            .iter()
            .map(|n| String::from_utf8(n.to_vec()).unwrap())
            .collect();
        names.extend(
            [
                "passwor",
                "tokens",
                "Token",
                "TOKEN",
                "secretKey",
                "api_key",
                "api-KEY",
                "cookies",
                "Authorizations",
                "access_token",
                "pass_word",
                "toke",
                "n",
                "secret9",
                "s3cret",
                "credentialS",
                "ecret",
                "sword",
                "pikey",
                "keyword",
            ]
            .map(String::from),
        );
        let mut checked = 0;
        for prefix in ["", "db_", "X-", "client", "my.", "a1", "passwordHash"] {
            for name in &names {
                for suffix in ["", "_", "1", "s", "-", " ", "__", ".x"] {
                    let key = format!("{prefix}{name}{suffix}");
                    assert_eq!(names_secret(&key), reference(&key), "{key:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 1_000);
    }

    #[test]
    fn a_keys_facts_are_its_own_whatever_the_thread_met_before() {
        // Keys that differ in one byte at every place, of every length the
        // table keeps and past it: each slot answers only for its key.
        let base = "client_secret_api_token_key_xyz_abc";
        let mut keys: Vec<String> = Vec::new();
        for len in 0..=base.len() {
            keys.push(base[..len].to_owned());
            for at in 0..len {
                let mut k = base.as_bytes()[..len].to_vec();
                k[at] = if k[at] == b'Y' { b'Z' } else { b'Y' };
                keys.push(String::from_utf8(k).unwrap());
            }
        }
        keys.extend(
            [
                "type",
                "data",
                "TYPE",
                "Data",
                "pwd",
                "key",
                "auth",
                "signature",
                "encrypted_content",
                "apiKey",
                "X-Auth-Token",
            ]
            .map(String::from),
        );
        let mut words = std::collections::HashMap::new();
        for k in &keys {
            if let Some(w) = key_words(k.as_bytes()) {
                let other = words.insert((k.len(), w), k.clone());
                assert!(other.as_ref().is_none_or(|o| o == k), "{k:?} and {other:?}");
            }
        }
        // Three keys of one length in one set (of two slots), one naming a
        // secret.
        let set = |k: &str| Keys::set(&key_words(k.as_bytes()).unwrap(), k.len());
        let secret = "pw0000_password";
        let mut others = (0u32..)
            .map(|i| format!("pw{i:04}_passwor"))
            .filter(|k| k.len() == secret.len() && set(k) == set(secret));
        let (a, b) = (others.next().unwrap(), others.next().unwrap());
        keys.extend([secret, &a, &b, secret, &b, &a, secret].map(String::from));
        let mut table = Keys::new();
        for round in 0..3 {
            for k in keys.iter().rev().skip(round) {
                assert_eq!(table.facts(k), KeyFacts::of(k), "{k:?}");
            }
        }
        assert!(KeyFacts::of("type").has(KeyFacts::TYPE));
        assert!(KeyFacts::of("data").has(KeyFacts::OPAQUE));
        assert!(KeyFacts::of("client_secret").has(KeyFacts::NAMES_SECRET));
        assert!(KeyFacts::of("Bearer sk_live_4eC39HqLyjWDarjtT1zdp7dX").has(KeyFacts::SEARCH));
    }

    #[test]
    fn redaction_is_idempotent() {
        let r = Redactor::new();
        let mut e =
            event(json!({"text": "password=hunter2 and postgres://app:s3cr3tPw@db:5432/x"}));
        assert_eq!(r.redact(&mut e), 2, "{}", e.payload);
        let once = e.clone();
        assert_eq!(r.redact(&mut e), 0);
        assert_eq!(e, once);
    }
}
