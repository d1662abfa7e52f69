//! The rule set: gitleaks-format TOML files compiled once per process.
//!
//! Two files are built in: `rules/gitleaks.toml`, vendored from gitleaks
//! (its version, licence and local changes are in its head comment), and
//! `rules/git-session.toml`, the rules a transcript needs that gitleaks
//! lacks (URL passwords, `.env` lines, short `password=` values, truncated
//! key blocks, webhooks, ...), in the same format. Both are read with the
//! same code, so updating gitleaks is replacing one file.
//!
//! What is honoured of the gitleaks format: `id`, `regex`, `secretGroup`,
//! `entropy`, `keywords`, the global `[allowlist]` and per-rule
//! `[[rules.allowlists]]` with `regexes`, `regexTarget` (`secret`, `match`,
//! `line`), `stopwords` and `condition`. A transcript string has no file
//! path or commit, so a rule with a `path` never fires, an allow-list that
//! needs a path (`condition = "AND"` with `paths`) never applies, and an
//! allow-list's `paths` and `commits` alone never match. As in gitleaks, a
//! rule whose id starts with `generic` also needs a digit in the secret,
//! and a rule without keywords runs on every string.
//!
//! One extension: `[[gates]]` (`rule`, `after`) give a rule a pattern that
//! must match right after the end of one of its keywords wherever its regex
//! can match (a necessary condition read off the regex), so a keyword in
//! prose ("the token count", "ask") does not run it. They live in
//! `git-session.toml` and apply to every rule of that id, gitleaks' too, so
//! the vendored file stays as upstream.
//!
//! Go's RE2 syntax is close to Rust's `regex`; patterns are compiled over
//! bytes with Unicode off (RE2's `\w`, `\s`, `\b` are ASCII too), and a
//! `{` that does not start a repetition is escaped, which RE2 allows and
//! `regex` does not. The end-of-secret group most gitleaks rules share
//! also accepts sentence and path punctuation (see `TRANSCRIPT_END`): a
//! token at the end of a sentence or inside a path is still a token. Each rule's regex is compiled the first time one of
//! its keywords is seen, so a capture that meets few keywords compiles few.

use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;
use aho_corasick::automaton::Automaton as _;
use aho_corasick::nfa::noncontiguous::NFA;
use regex::bytes::{Regex, RegexBuilder};
use regex_automata::hybrid;
use regex_automata::util::pool::Pool;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input};
use serde::Deserialize;

/// The vendored gitleaks rules.
pub const GITLEAKS_TOML: &str = include_str!("rules/gitleaks.toml");
/// git-session's own rules, in the same format.
pub const GIT_SESSION_TOML: &str = include_str!("rules/git-session.toml");

/// One file in gitleaks' format.
#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    allowlist: Option<AllowlistFile>,
    #[serde(default)]
    allowlists: Vec<AllowlistFile>,
    #[serde(default)]
    rules: Vec<RuleFile>,
    #[serde(default)]
    gates: Vec<GateFile>,
}

/// git-session's extension of the format: a pattern that must match right
/// after the end of one of a rule's keywords wherever the rule's regex can
/// match (see [`Rule::gated_at`]).
#[derive(Debug, Deserialize)]
struct GateFile {
    rule: String,
    after: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleFile {
    id: String,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    secret_group: Option<usize>,
    #[serde(default)]
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    allowlist: Option<AllowlistFile>,
    #[serde(default)]
    allowlists: Vec<AllowlistFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AllowlistFile {
    #[serde(default)]
    condition: Option<String>,
    #[serde(default)]
    regex_target: Option<String>,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    commits: Vec<String>,
}

/// What an allow-list regex is matched against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The secret (the rule's secret group, or the whole match).
    Secret,
    /// The whole match.
    Match,
    /// The line the match is on.
    Line,
}

/// One allow-list, patterns compiled on first use.
#[derive(Debug)]
pub struct Allowlist {
    target: Target,
    patterns: Vec<String>,
    regexes: OnceLock<Vec<Regex>>,
    stopword_list: Vec<String>,
    stopwords: OnceLock<Option<AhoCorasick>>,
}

impl Allowlist {
    /// Returns `None` when the list can never apply to a transcript string.
    fn new(file: AllowlistFile) -> Result<Option<Allowlist>, String> {
        let and = file
            .condition
            .as_deref()
            .is_some_and(|c| c.eq_ignore_ascii_case("and"));
        if and && (!file.paths.is_empty() || !file.commits.is_empty()) {
            return Ok(None);
        }
        if file.regexes.is_empty() && file.stopwords.is_empty() {
            return Ok(None);
        }
        let target = match file.regex_target.as_deref() {
            None | Some("secret") => Target::Secret,
            Some("match") => Target::Match,
            Some("line") => Target::Line,
            Some(other) => return Err(format!("unknown regexTarget {other:?}")),
        };
        Ok(Some(Allowlist {
            target,
            patterns: file.regexes,
            regexes: OnceLock::new(),
            stopword_list: file.stopwords,
            stopwords: OnceLock::new(),
        }))
    }

    /// Says whether this list allows the finding.
    pub fn allows(&self, secret: &[u8], whole: &[u8], line: &[u8]) -> bool {
        let regexes = self.regexes.get_or_init(|| {
            self.patterns
                .iter()
                .map(|p| compile(p).expect("checked when the rule set was built"))
                .collect()
        });
        let subject = match self.target {
            Target::Secret => secret,
            Target::Match => whole,
            Target::Line => line,
        };
        if regexes.iter().any(|r| r.is_match(subject)) {
            return true;
        }
        // Stopwords are always checked against the secret.
        self.stopwords
            .get_or_init(|| {
                (!self.stopword_list.is_empty()).then(|| {
                    AhoCorasick::builder()
                        .ascii_case_insensitive(true)
                        .build(&self.stopword_list)
                        .expect("literal stopwords build")
                })
            })
            .as_ref()
            .is_some_and(|s| s.is_match(secret))
    }

    /// Compiles every pattern now, naming the first that does not compile.
    pub fn validate(&self) -> Result<(), String> {
        for p in &self.patterns {
            compile(p).map_err(|e| format!("allow-list regex {p:?}: {e}"))?;
        }
        Ok(())
    }
}

/// One compiled rule.
#[derive(Debug)]
pub struct Rule {
    /// The rule id (reported as `[REDACTED:<id>]`).
    pub id: String,
    pattern: String,
    regex: OnceLock<Regex>,
    secret_group: Option<usize>,
    entropy: Option<f64>,
    /// Lowercased; empty means the rule runs on every string.
    pub keywords: Vec<String>,
    /// Per-rule allow-lists.
    pub allowlists: Vec<Allowlist>,
    /// The gate's pattern, if it has one, and its lazy DFA (see [`GateDfa`]).
    gate: Option<String>,
    gate_dfa: OnceLock<GateDfa>,
}

impl Rule {
    /// The compiled regex (compiled on first call).
    pub fn regex(&self) -> &Regex {
        self.regex
            .get_or_init(|| compile(&self.pattern).expect("checked when the rule set was built"))
    }

    /// Says whether the rule can match near a keyword that ends at `end`:
    /// true when it has no gate, or when its gate matches `text[end..]`
    /// from its first byte. A gate is a necessary condition of the rule's
    /// regex, so a keyword whose gate fails cannot start a match there
    /// (`gates_never_refuse_what_their_rule_finds` checks each one).
    ///
    /// Each byte the gate reads is taken from `budget`; once it is spent
    /// the gate says true (the rule then runs, as without gates), so a
    /// string built to make every keyword's gate read far (`KEYKEYKEY…`
    /// against `[A-Z0-9_]*=`) costs time linear in its length.
    pub fn gated_at(&self, text: &[u8], end: usize, budget: &mut usize) -> bool {
        let Some(gate) = &self.gate else {
            return true;
        };
        let gate = self
            .gate_dfa
            .get_or_init(|| compile_gate(gate).expect("checked when the rule set was built"));
        let (dfa, mut cache) = (&gate.dfa, gate.caches.get());
        let cache = &mut *cache;
        let rest = &text[end..];
        let input = Input::new(rest).anchored(Anchored::Yes);
        // A state the lazy DFA cannot give (its cache given up) says yes:
        // the rule then runs, as without a gate.
        let Ok(mut sid) = dfa.start_state_forward(cache, &input) else {
            return true;
        };
        for &b in rest {
            let Some(left) = budget.checked_sub(1) else {
                return true;
            };
            *budget = left;
            let Ok(next) = dfa.next_state(cache, sid, b) else {
                return true;
            };
            sid = next;
            if sid.is_tagged() {
                if sid.is_match() {
                    return true;
                }
                if sid.is_dead() || sid.is_quit() {
                    return false;
                }
            }
        }
        match dfa.next_eoi_state(cache, sid) {
            Ok(sid) => sid.is_match(),
            Err(_) => true,
        }
    }

    /// Says whether the rule has a gate.
    pub fn is_gated(&self) -> bool {
        self.gate.is_some()
    }

    /// Returns the span of the secret in a match, per gitleaks: the
    /// `secretGroup`, else the first group that matched non-empty, else the
    /// whole match. A rule whose groups are named (they label parts of one
    /// token) gives the whole match.
    pub fn secret_span(&self, caps: &regex::bytes::Captures<'_>) -> (usize, usize) {
        let whole = caps.get(0).expect("group 0 always matches");
        if let Some(g) = self.secret_group {
            if let Some(m) = caps.get(g) {
                return (m.start(), m.end());
            }
            return (whole.start(), whole.end());
        }
        if self.regex().capture_names().flatten().next().is_none() {
            for m in caps.iter().skip(1).flatten() {
                if !m.is_empty() {
                    return (m.start(), m.end());
                }
            }
        }
        (whole.start(), whole.end())
    }

    /// Says whether `secret` passes the rule's entropy (and, for generic
    /// rules, digit) requirement.
    pub fn strong_enough(&self, secret: &[u8]) -> bool {
        let Some(min) = self.entropy else {
            return true;
        };
        if shannon_entropy(secret) <= min {
            return false;
        }
        !self.id.starts_with("generic") || secret.iter().any(u8::is_ascii_digit)
    }
}

/// The whole rule set.
#[derive(Debug)]
pub struct RuleSet {
    /// Every rule that can fire, gitleaks' first.
    pub rules: Vec<Rule>,
    /// The global allow-lists of both files.
    pub global: Vec<Allowlist>,
    /// The same automaton as a compact table, walked by
    /// [`RuleSet::each_keyword`].
    table: KeywordTable,
    /// For each keyword (by pattern index), the rules it selects.
    pub keyword_rules: Vec<Vec<usize>>,
    /// Rules without keywords, run on every string.
    pub always: Vec<usize>,
    /// Rule ids loaded but never run here (they need a file path).
    pub path_only: Vec<String>,
    /// The length of the longest keyword, in bytes.
    longest_keyword: usize,
}

/// How many pieces [`RuleSet::each_keyword`] walks a long text in at once.
const LANES: usize = 4;
/// Bytes per piece below which a text is walked in one (at least the
/// longest keyword's length, see [`lane_cuts`]).
const LANE_MIN: usize = 32;

thread_local! {
    /// Where [`RuleSet::each_keyword`] notes match states (reused; taken
    /// out while in use, so a nested call gets its own).
    static KEYWORD_ENDS: std::cell::RefCell<Vec<(u16, usize)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Rows of a [`KeywordTable`]: at most this many automaton states (a power
/// of two, so a state masked by `STATES - 1` indexes a row without a
/// bounds check).
const STATES: usize = 2048;
/// Columns of a [`KeywordTable`]: at most this many byte classes (a power
/// of two, likewise).
const CLASSES: usize = 64;
/// Marks a match state in a [`KeywordTable`]'s cells.
const MATCH: u16 = 0x8000;

/// The keywords' Aho-Corasick automaton (aho-corasick's NFA, its failure
/// transitions followed once here) copied into a
/// fixed-size table of `u16` states, for the pass over every string byte:
/// one class lookup and one table lookup a byte, no bounds checks, the
/// match flag in the state itself. aho-corasick's own `next_state` costs
/// about twice the instructions (a checked index into a `Vec`, a second
/// comparison for special states), and that pass was a third of
/// redaction.
struct KeywordTable {
    /// Each byte's class: bytes no state tells apart share one.
    classes: [u8; 256],
    /// `next[state][class]`: the next state, with [`MATCH`] set when it
    /// is a match state. Row 0 is the start.
    next: Box<[[u16; CLASSES]; STATES]>,
    /// Where each row's keywords are in `hits` (a range; empty unless
    /// the row is a match state).
    hit_at: Vec<(u32, u32)>,
    /// The keywords that end in each match state, one row after another:
    /// (pattern index, length). The automaton itself is not kept.
    hits: Vec<(u32, u32)>,
}

impl std::fmt::Debug for KeywordTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeywordTable")
            .field("states", &self.hit_at.len())
            .finish()
    }
}

impl KeywordTable {
    /// Copies the states of `nfa` (built from `words`, ASCII case
    /// ignored) reachable from its unanchored start, each with its
    /// transition on every byte; fails when they do not fit the table.
    ///
    /// The automaton is asked about one byte of each group that must lead
    /// to the same state from every state: a letter and its other case,
    /// and all the bytes that are in no keyword. Asking it about all 256
    /// bytes of every state (and building aho-corasick's DFA, which does
    /// the same) was most of the rule set's build.
    fn new(nfa: &NFA, words: &[String]) -> Result<KeywordTable, String> {
        use aho_corasick::Anchored::No;
        /// Not numbered yet (a state id is an index into the automaton's
        /// states, so a vector of that length numbers them all).
        const NONE: u16 = u16::MAX;
        let mut in_words = [false; 256];
        for b in words.iter().flat_map(|w| w.bytes()) {
            in_words[usize::from(b.to_ascii_lowercase())] = true;
            in_words[usize::from(b.to_ascii_uppercase())] = true;
        }
        let elsewhere = (0..=255u8).find(|&b| !in_words[usize::from(b)]);
        // The byte asked about in each byte's place.
        let asked: [u8; 256] = std::array::from_fn(|b| match elsewhere {
            Some(e) if !in_words[b] => e,
            _ => (b as u8).to_ascii_lowercase(),
        });
        // The bytes asked about: the others take their rows' cells.
        let reps: Vec<u8> = (0..=255u8)
            .filter(|&b| asked[usize::from(b)] == b)
            .collect();
        let start = nfa.start_state(No).map_err(|e| format!("keywords: {e}"))?;
        // Every reachable state, numbered in the order found, with its
        // transitions on the bytes asked about.
        let mut number: Vec<u16> = Vec::new();
        let mut numbered = |sid: aho_corasick::automaton::StateID, ac: &mut Vec<_>| {
            let at = sid.as_usize();
            if at >= number.len() {
                number.resize(at + 1, NONE);
            }
            if number[at] == NONE {
                if ac.len() >= STATES {
                    return Err(format!(
                        "keywords: the automaton has more than {STATES} states"
                    ));
                }
                number[at] = ac.len() as u16;
                ac.push(sid);
            }
            Ok(number[at])
        };
        let mut ac = Vec::new();
        numbered(start, &mut ac)?;
        let mut rows: Vec<[u16; 256]> = Vec::new();
        while rows.len() < ac.len() {
            let sid = ac[rows.len()];
            let mut row = [0u16; 256];
            for &b in &reps {
                row[usize::from(b)] = numbered(nfa.next_state(No, sid, b), &mut ac)?;
            }
            rows.push(row);
        }
        // Bytes whose columns are equal share a class (a byte's column is
        // the one of the byte asked about in its place).
        let mut classes = [0u8; 256];
        let mut columns: Vec<Vec<u16>> = Vec::new();
        for b in reps.iter().map(|&b| usize::from(b)) {
            let column: Vec<u16> = rows.iter().map(|r| r[b]).collect();
            let c = match columns.iter().position(|c| *c == column) {
                Some(c) => c,
                None => {
                    columns.push(column);
                    columns.len() - 1
                }
            };
            if c >= CLASSES {
                return Err(format!(
                    "keywords: the automaton tells more than {CLASSES} bytes apart"
                ));
            }
            classes[b] = c as u8;
        }
        for b in 0..256 {
            classes[b] = classes[usize::from(asked[b])];
        }
        let mut next: Box<[[u16; CLASSES]; STATES]> = vec![[0u16; CLASSES]; STATES]
            .into_boxed_slice()
            .try_into()
            .expect("STATES rows");
        let matches: Vec<bool> = ac.iter().map(|&sid| nfa.is_match(sid)).collect();
        let mut hit_at = Vec::with_capacity(ac.len());
        let mut hits = Vec::new();
        for &sid in &ac {
            let from = hits.len() as u32;
            for k in 0..nfa.match_len(sid) {
                let p = nfa.match_pattern(sid, k);
                hits.push((p.as_u32(), nfa.pattern_len(p) as u32));
            }
            hit_at.push((from, hits.len() as u32));
        }
        for (s, row) in rows.iter().enumerate() {
            for b in reps.iter().map(|&b| usize::from(b)) {
                let to = row[b];
                let flag = if matches[usize::from(to)] { MATCH } else { 0 };
                next[s][usize::from(classes[b])] = to | flag;
            }
        }
        Ok(KeywordTable {
            classes,
            next,
            hit_at,
            hits,
        })
    }

    /// The state after `state` reads `b` (the match flag set or not).
    #[inline(always)]
    fn step(&self, state: u16, b: u8) -> u16 {
        let class = usize::from(self.classes[usize::from(b)]) & (CLASSES - 1);
        self.next[usize::from(state) & (STATES - 1)][class]
    }
}

/// Notes `(state, end)` for each position of `text` where the automaton is
/// in a match state.
fn keyword_ends(table: &KeywordTable, text: &[u8], out: &mut Vec<(u16, usize)>) {
    let mut state = 0u16;
    for (i, &b) in text.iter().enumerate() {
        state = table.step(state, b);
        if state & MATCH != 0 {
            note_match(state, i + 1, 0, out);
        }
    }
}

/// Notes `(state, end)` if `end` is past `after` (kept out of the byte
/// loop: most bytes reach no match).
#[cold]
#[inline(never)]
fn note_match(state: u16, end: usize, after: usize, out: &mut Vec<(u16, usize)>) {
    if end > after {
        out.push((state & !MATCH, end));
    }
}

/// [`keyword_ends`] over `text`, cut into [`LANES`] pieces
/// walked in lockstep; the notes come out in order of their ends.
fn keyword_ends_in_lanes(
    table: &KeywordTable,
    text: &[u8],
    longest: usize,
    out: &mut Vec<(u16, usize)>,
) {
    // Piece j owns the keyword ends in (cut[j], cut[j + 1]]; it starts
    // reading `longest - 1` bytes before its cut.
    let cut = lane_cuts(text.len(), longest);
    let from: [usize; LANES] =
        std::array::from_fn(|j| cut[j].saturating_sub(longest.saturating_sub(1)));
    let mut state = [0u16; LANES];
    let mut lanes: [Vec<(u16, usize)>; LANES] = Default::default();
    let steps = (0..LANES).map(|j| cut[j + 1] - from[j]).min().unwrap_or(0);
    let pieces: [&[u8]; LANES] = std::array::from_fn(|j| &text[from[j]..from[j] + steps]);
    // One step of every lane per round is the point: the lanes' lookups
    // overlap. Iterating one piece would walk the lanes one after another.
    #[allow(clippy::needless_range_loop)]
    for step in 0..steps {
        for j in 0..LANES {
            state[j] = table.step(state[j], pieces[j][step]);
            if state[j] & MATCH != 0 {
                note_match(state[j], from[j] + step + 1, cut[j], &mut lanes[j]);
            }
        }
    }
    for j in 0..LANES {
        let mut s = state[j];
        let rest = from[j] + steps;
        for (i, &b) in text[..cut[j + 1]].iter().enumerate().skip(rest) {
            s = table.step(s, b);
            if s & MATCH != 0 {
                note_match(s, i + 1, cut[j], &mut lanes[j]);
            }
        }
        out.append(&mut lanes[j]);
    }
}

/// Where [`keyword_ends_in_lanes`] cuts a text of `n` bytes (at least
/// [`LANES`] times `longest`). Every piece after the first also reads the
/// `longest - 1` bytes before its cut, so the cuts give every piece the
/// same number of bytes to read: with even cuts the later pieces each had
/// that many steps left to walk alone after the lockstep, which for a text
/// of 256 bytes was as many steps as the lockstep itself.
fn lane_cuts(n: usize, longest: usize) -> [usize; LANES + 1] {
    let overlap = longest.saturating_sub(1);
    let each = (n + (LANES - 1) * overlap).div_ceil(LANES);
    std::array::from_fn(|j| match j {
        0 => 0,
        LANES => n,
        j => (j * each - (j - 1) * overlap).min(n),
    })
}

impl RuleSet {
    /// Calls `hit(keyword, start, end)` for every occurrence of every keyword in
    /// `text`, overlapping ones included (ASCII case ignored), in order of
    /// their ends; stops early when `hit` returns false.
    ///
    /// The pass over the bytes only notes where the automaton is in a match
    /// state; `hit` runs afterwards, so the loop keeps its state in
    /// registers. A long text is cut into [`LANES`] pieces walked in
    /// lockstep, one automaton state each: a step waits for its table
    /// lookup, and independent lanes overlap those waits. Each piece after
    /// the first starts the longest keyword's length early, so a keyword
    /// across a cut is found by the piece where it ends.
    pub fn each_keyword(&self, text: &[u8], mut hit: impl FnMut(usize, usize, usize) -> bool) {
        let table = &self.table;
        let mut ends = KEYWORD_ENDS.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
        ends.clear();
        if self.is_short(text) {
            keyword_ends(&self.table, text, &mut ends);
        } else {
            keyword_ends_in_lanes(&self.table, text, self.longest_keyword, &mut ends);
        }
        'all: for &(state, end) in &ends {
            let (from, to) = table.hit_at[usize::from(state)];
            for &(p, len) in &table.hits[from as usize..to as usize] {
                if !hit(p as usize, end - len as usize, end) {
                    break 'all;
                }
            }
        }
        KEYWORD_ENDS.with(|cell| *cell.borrow_mut() = ends);
    }

    /// Says whether `text` is walked in one piece (see
    /// [`RuleSet::each_keyword`]).
    pub fn is_short(&self, text: &[u8]) -> bool {
        text.len() < LANES * LANE_MIN.max(self.longest_keyword)
    }

    /// Says whether `text` holds any keyword.
    pub fn any_keyword(&self, text: &[u8]) -> bool {
        if self.is_short(text) {
            // One lane, and no notes: the first match state decides.
            let mut state = 0u16;
            for &b in text {
                state = self.table.step(state, b);
                if state & MATCH != 0 {
                    return true;
                }
            }
            return false;
        }
        let mut any = false;
        self.each_keyword(text, |_, _, _| {
            any = true;
            false
        });
        any
    }

    /// Compiles every regex now (they are otherwise compiled on first use),
    /// naming the first that does not compile.
    pub fn validate(&self) -> Result<(), String> {
        for rule in &self.rules {
            compile(&rule.pattern).map_err(|e| format!("rule {}: {e}", rule.id))?;
            if let Some(gate) = &rule.gate {
                compile_gate(gate).map_err(|e| format!("gate of {}: {e}", rule.id))?;
            }
            for a in &rule.allowlists {
                a.validate().map_err(|e| format!("rule {}: {e}", rule.id))?;
            }
        }
        self.global.iter().try_for_each(Allowlist::validate)
    }

    /// Builds the built-in rule set; panics if a built-in file is broken
    /// (a test compiles every rule of it).
    pub fn builtin() -> RuleSet {
        RuleSet::from_files(&[GITLEAKS_TOML, GIT_SESSION_TOML]).expect("the built-in rules build")
    }

    /// Builds a rule set from gitleaks-format TOML files; regexes are
    /// compiled on first use ([`RuleSet::validate`] compiles them all).
    pub fn from_files(files: &[&str]) -> Result<RuleSet, String> {
        let mut rules = Vec::new();
        let mut global = Vec::new();
        let mut path_only = Vec::new();
        let mut gates = Vec::new();
        for (i, text) in files.iter().enumerate() {
            let file: ConfigFile =
                toml::from_str(text).map_err(|e| format!("rule file {i}: {e}"))?;
            gates.extend(file.gates);
            for a in file.allowlist.into_iter().chain(file.allowlists) {
                global.extend(Allowlist::new(a).map_err(|e| format!("rule file {i}: {e}"))?);
            }
            for r in file.rules {
                let (Some(pattern), None) = (r.regex, r.path) else {
                    path_only.push(r.id);
                    continue;
                };
                let mut allowlists = Vec::new();
                for a in r.allowlist.into_iter().chain(r.allowlists) {
                    allowlists
                        .extend(Allowlist::new(a).map_err(|e| format!("rule {}: {e}", r.id))?);
                }
                rules.push(Rule {
                    id: r.id,
                    pattern,
                    regex: OnceLock::new(),
                    secret_group: r.secret_group,
                    entropy: r.entropy,
                    keywords: r.keywords.iter().map(|k| k.to_ascii_lowercase()).collect(),
                    allowlists,
                    gate: None,
                    gate_dfa: OnceLock::new(),
                });
            }
        }
        for g in gates {
            let mut named = rules.iter_mut().filter(|r| r.id == g.rule).peekable();
            if named.peek().is_none() {
                return Err(format!("a gate names rule {:?}, which no file has", g.rule));
            }
            for rule in named {
                rule.gate = Some(g.after.clone());
            }
        }
        let (words, keyword_rules) = keywords_of(&rules);
        let always = (0..rules.len())
            .filter(|&i| rules[i].keywords.is_empty())
            .collect();
        let longest_keyword = words.iter().map(String::len).max().unwrap_or(0);
        let keywords = keyword_automaton(&words).map_err(|e| format!("keywords: {e}"))?;
        let table = KeywordTable::new(&keywords, &words)?;
        Ok(RuleSet {
            rules,
            global,
            table,
            keyword_rules,
            always,
            path_only,
            longest_keyword,
        })
    }
}

/// The distinct keywords of `rules`, in the order first met, and for
/// each the rules it selects.
fn keywords_of(rules: &[Rule]) -> (Vec<String>, Vec<Vec<usize>>) {
    let mut words: Vec<String> = Vec::new();
    let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        for k in &rule.keywords {
            match words.iter().position(|w| w == k) {
                Some(at) => keyword_rules[at].push(i),
                None => {
                    words.push(k.clone());
                    keyword_rules.push(vec![i]);
                }
            }
        }
    }
    (words, keyword_rules)
}

/// The keywords' Aho-Corasick automaton (ASCII case ignored), pattern `i`
/// being `words[i]`.
fn keyword_automaton(words: &[String]) -> Result<NFA, aho_corasick::BuildError> {
    NFA::builder()
        .ascii_case_insensitive(true)
        .prefilter(false)
        .build(words)
}

/// The end-of-secret test most gitleaks rules share: quote, space, `;`, a
/// `\n` escape or the end. In a transcript a secret also ends a sentence
/// or a path segment, so the compiled form also accepts `/ . , : ) ] } > |
/// ! ? &` there.
const GITLEAKS_END: &str = r#"(?:[\x60'"\s;]|\\[nr]|$)"#;
const TRANSCRIPT_END: &str = r#"(?:[\x60'"\s;/.,:)\]}>|!?&]|\\[nr]|$)"#;

/// Compiles a gitleaks (RE2) pattern for byte haystacks.
pub fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    let pattern = pattern.replace(GITLEAKS_END, TRANSCRIPT_END);
    RegexBuilder::new(&translate(&pattern))
        .unicode(false)
        .size_limit(1 << 25)
        .build()
}

/// Makes a cache for a gate's lazy DFA (see [`GateDfa`]).
type GateCacheFn = Box<dyn Fn() -> hybrid::dfa::Cache + Send + Sync + UnwindSafe + RefUnwindSafe>;

/// A gate compiled: a lazy DFA, whose states are built as the gate's walks
/// reach them, and a cache of them for each thread that walks it. A dense
/// DFA built whole cost 1.6 M instructions a gate, 25 M for the 15 of them
/// that a session's first records reach, in every process that redacts,
/// while the walks from keywords visit few states; taking a thread's cache
/// from the pool costs little next to a walk.
#[derive(Debug)]
struct GateDfa {
    dfa: hybrid::dfa::DFA,
    caches: Pool<hybrid::dfa::Cache, GateCacheFn>,
}

/// Compiles a gate's pattern, matched anchored at a keyword's end.
fn compile_gate(gate: &str) -> Result<GateDfa, String> {
    let dfa = hybrid::dfa::Builder::new()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .build(gate)
        .map_err(|e| e.to_string())?;
    let made = dfa.clone();
    let caches = Pool::new(Box::new(move || made.create_cache()) as GateCacheFn);
    Ok(GateDfa { dfa, caches })
}

/// Rewrites what RE2 accepts and `regex` does not: a literal `{` that does
/// not start a counted repetition.
fn translate(pattern: &str) -> String {
    let b = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    let mut class = false;
    while i < b.len() {
        let c = b[i] as char;
        if c == '\\' && i + 1 < b.len() {
            out.push('\\');
            // Copy the escaped char whole (it may be multi-byte).
            let rest = &pattern[i + 1..];
            let ch = rest.chars().next().expect("not at the end");
            out.push(ch);
            i += 1 + ch.len_utf8();
            continue;
        }
        if class {
            if c == ']' {
                class = false;
            }
        } else if c == '[' {
            class = true;
            out.push('[');
            i += 1;
            // `]` right after `[` or `[^` is a literal.
            if b.get(i) == Some(&b'^') {
                out.push('^');
                i += 1;
            }
            if b.get(i) == Some(&b']') {
                out.push(']');
                i += 1;
            }
            continue;
        } else if c == '{' && !starts_repetition(&b[i..]) {
            out.push_str("\\{");
            i += 1;
            continue;
        } else if c == '}' {
            out.push_str("\\}");
            i += 1;
            continue;
        }
        let ch = pattern[i..].chars().next().expect("not at the end");
        out.push(ch);
        i += ch.len_utf8();
    }
    // A `}` closing a repetition was escaped above; undo that for them.
    fix_repetitions(&out)
}

/// Says whether `b` (starting at `{`) is `{n}`, `{n,}` or `{n,m}`.
fn starts_repetition(b: &[u8]) -> bool {
    let mut i = 1;
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > s
    };
    if !digits(&mut i) {
        return false;
    }
    if b.get(i) == Some(&b',') {
        i += 1;
        digits(&mut i);
    }
    b.get(i) == Some(&b'}')
}

/// Turns `{n\}`, `{n,\}` and `{n,m\}` back into repetitions.
fn fix_repetitions(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'{' && (i == 0 || b[i - 1] != b'\\') {
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b',') {
                j += 1;
            }
            if j > i + 1 && b[j..].starts_with(b"\\}") {
                out.push_str(&s[i..j]);
                out.push('}');
                i = j + 2;
                continue;
            }
        }
        let ch = s[i..].chars().next().expect("not at the end");
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Shannon entropy of `data` in bits per byte, as gitleaks computes it.
pub fn shannon_entropy(data: &[u8]) -> f64 {
    if data.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in data {
        counts[b as usize] += 1;
    }
    let n = data.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vendored_rule_compiles_and_has_an_id() {
        let set = RuleSet::from_files(&[GITLEAKS_TOML, GIT_SESSION_TOML]).unwrap();
        set.validate().unwrap();
        assert!(set.rules.len() > 200, "{}", set.rules.len());
        for rule in &set.rules {
            let _ = rule.regex();
            assert!(!rule.id.is_empty());
            for a in &rule.allowlists {
                a.allows(b"x", b"x", b"x");
            }
        }
        for a in &set.global {
            a.allows(b"x", b"x", b"x");
        }
        // Path-scoped gitleaks rules are listed, not silently lost.
        assert!(set.path_only.iter().any(|r| r == "pkcs12-file"));
        // Only rules that need no keyword run on every string.
        assert!(set.always.is_empty(), "{:?}", set.always);
    }

    /// Says whether some keyword of rule `r` in `text` passes its gate.
    fn gate_passes(set: &RuleSet, r: usize, text: &[u8]) -> bool {
        let mut passed = false;
        let mut unbounded = usize::MAX;
        set.each_keyword(text, |k, _, end| {
            passed |= set.keyword_rules[k].contains(&r)
                && set.rules[r].gated_at(text, end, &mut unbounded);
            !passed
        });
        passed
    }

    #[test]
    fn gates_never_refuse_what_their_rule_finds() {
        let set = RuleSet::builtin();
        let gated: Vec<usize> = (0..set.rules.len())
            .filter(|&r| set.rules[r].is_gated())
            .collect();
        assert!(gated.len() >= 10, "{}", gated.len());
        // Matches written by hand for each gated rule: every operator,
        // quote and suffix form the regexes accept.
        let examples = [
            "api_key = \"a8Fj29dkLq0Zp3\"",
            "my.secret-token: 'Zx81kLmN0pQr5t'",
            "auth || Xk29fLq0Zp3mN8",
            "creds ?= Xk29fLq0Zp3mN8",
            "ACCESS_KEY=>9fLq0Zp3mN8aXk2",
            "password , 9fLq0Zp3mN8aXk2",
            "token: a1+/bcdefghi",
            "Api\t\"\t:=  Xk29fLq0Zp3mN8aa",
            "passphrase := \"hunter2hunter\"",
            "Password=\"s3cr3t!\"",
            "client_secret=abc123XYZ",
            "refresh-token  =  q8Zk3LmN0p",
            "PASSWORD: hunter22",
            "DB_PASSWORD_PROD=hunter2",
            "AUTH_TOKEN_V2=\"abc def\"",
            "export CREDENTIALS='x1y2z3'",
            "x-acme-api-key: AbCdEf0123456789",
            "X-Auth-Token = AbCdEf0123456789",
            "apikey\":\"AbCdEf0123456789",
            "SK0123456789abcdef0123456789abcdef",
            "SK0123456789ABCDEF0123456789ABCDEF",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dX",
            "pscale_tkn_abcdef123456",
            "key-0123456789abcdef0123",
            "123456789:AAabcdefgh",
            "hvs.CAESIJ0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnop",
            "s.AbCdEfGhIjKlMnOpQrStUvWx ",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc",
            "eyAbCdEfGhIjKlMnOpQrStUv.eyAbCdEfGhIjKlMnOpQrSt.AbCdEfGhIjKl",
            "Authorization: Bearer abcdefgh12345678",
            "proxy-authorization=\"basic  QWxhZGRpbjpvcGVu\"",
            "CO_API_KEY = \"Zq7x0a9FkLmN0pQr5tUv8wXy2b3c4d5e6f7a8b9c\"",
            "cohere_token:Zq7x0a9FkLmN0pQr5tUv8wXy2b3c4d5e6f7a8b9c",
            "aws_secret_access_key = Zq7x0a9FkLmN0pQr5tUv8wXy2b3c4d5e6f7a8b9c",
            "AWS.SECRET\":'Zq7x0a9/kLmN0pQr5tUv8wXy2b3c4d5e6f7a8b+=",
            "aws configure set aws_secret_access_key Zq7x0a9/kLmN0pQr5tUv8wXy2b3c4d5e6f7a8b+=",
            "sshpass -p 'Xy7#kq2Lm9' ssh deploy@h",
            "docker login -u ci -p Qw3rtyUiop9 registry.example.com",
            "redis-cli -h cache -a S3cretRedis9 ping",
            "ssh-keygen -t ed25519 -N 'corr3ct horse' -f k",
            "ENV POSTGRES_PASSWORD s3cr3tPw9",
            "  ENV GITHUB_TOKEN ghx_notareal0token1",
            "postgres://admin:hunter2@db.example.com/x",
            "redis://:p4ssw0rd@cache:6379",
            "https://user:tok3nvalue",
        ];
        for text in examples {
            let text = text.as_bytes();
            let mut matched = false;
            for &r in &gated {
                if set.rules[r].regex().is_match(text) {
                    matched = true;
                    assert!(
                        gate_passes(&set, r, text),
                        "the gate of {} refuses {:?}",
                        set.rules[r].id,
                        String::from_utf8_lossy(text)
                    );
                }
            }
            assert!(
                matched,
                "no gated rule matches {:?}",
                String::from_utf8_lossy(text)
            );
        }
        // Strings made of the pieces these rules are written from, in
        // random order: wherever a gated rule matches, its gate passes.
        const PIECES: [&str; 59] = [
            "+",
            "authorization",
            "Authorization",
            "proxy-",
            "bearer",
            "Bearer",
            "basic",
            "cohere",
            "CO_API_KEY",
            "aws",
            "AWS",
            "://",
            "http",
            "@",
            "/",
            "api",
            "API",
            "Api",
            "key",
            "KEY",
            "token",
            "TOKEN",
            "pass",
            "PASS",
            "word",
            "WORD",
            "phrase",
            "secret",
            "SECRET",
            "credential",
            "s",
            "auth",
            "AUTH",
            "_",
            "-",
            ".",
            "x-",
            "sk",
            "SK",
            "s.",
            "hvs.",
            "ey",
            "eyJ",
            "=",
            ":",
            ">",
            "|",
            "?",
            ",",
            "\"",
            "'",
            " ",
            "\t",
            "\n",
            "0a9F",
            "Zq7x",
            "_PROD",
            "key-",
            ":AA",
        ];
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let mut checked = 0;
        for _ in 0..15_000 {
            let n = 2 + (next() % 14) as usize;
            let mut text = String::new();
            for _ in 0..n {
                let piece = PIECES[(next() % PIECES.len() as u64) as usize];
                // Token-like runs often enough for the value groups.
                text.push_str(piece);
                if next().is_multiple_of(4) {
                    text.push_str("Zq7x0a9FkLmN0pQr5tUv8wXy2b3c4d5e6f7a8b9c0d1");
                }
            }
            let bytes = text.as_bytes();
            for &r in &gated {
                if set.rules[r].regex().is_match(bytes) {
                    checked += 1;
                    assert!(
                        gate_passes(&set, r, bytes),
                        "the gate of {} refuses {text:?}",
                        set.rules[r].id
                    );
                }
            }
        }
        assert!(checked > 300, "only {checked} random matches");
    }

    /// A repeatable pseudo-random sequence (xorshift64) for generated texts.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    /// Every keyword occurrence, by a plain walk of the states of the
    /// keywords' automaton (built again: `automaton_of`), the pass
    /// [`RuleSet::each_keyword`] must agree with.
    fn keywords_one_by_one(dfa: &NFA, text: &[u8]) -> Vec<(usize, usize, usize)> {
        let mut sid = dfa.start_state(aho_corasick::Anchored::No).unwrap();
        let mut found = Vec::new();
        for (i, &b) in text.iter().enumerate() {
            sid = dfa.next_state(aho_corasick::Anchored::No, sid, b);
            if dfa.is_match(sid) {
                for k in 0..dfa.match_len(sid) {
                    let p = dfa.match_pattern(sid, k);
                    found.push((p.as_usize(), i + 1 - dfa.pattern_len(p), i + 1));
                }
            }
        }
        found
    }

    #[test]
    fn keywords_across_the_cuts_of_a_long_text_are_each_found_once() {
        let set = RuleSet::builtin();
        let automaton = keyword_automaton(&keywords_of(&set.rules).0).unwrap();
        let longest = set.longest_keyword;
        assert!(longest > 10, "{longest}");
        // The longest keyword: a cut one byte short of it would miss the
        // occurrence that starts `longest - 1` bytes before a cut.
        let keyword = set
            .rules
            .iter()
            .flat_map(|r| &r.keywords)
            .find(|k| k.len() == longest)
            .unwrap()
            .to_ascii_uppercase();
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let shortest = LANES * LANE_MIN.max(longest);
        for len in [shortest - 1, shortest, 300, 4099, 10_007] {
            let cuts = &lane_cuts(len, longest)[1..LANES];
            assert!(cuts.windows(2).all(|w| w[0] < w[1]) && cuts[0] >= longest);
            // One text per offset: the keyword starts `back` bytes before
            // every cut (ending before, on, or after it), and at both ends.
            for back in 0..=keyword.len() + 1 {
                let mut text: Vec<u8> = (0..len)
                    .map(|_| b"abcdefghijklmnopqrstuvwxyz0123456789 ._-"[(next() % 40) as usize])
                    .collect();
                let ends = [0, len - keyword.len()];
                let near = |c: &usize| (c - back).min(len - keyword.len());
                for at in cuts.iter().map(near).chain(ends) {
                    text[at..at + keyword.len()].copy_from_slice(keyword.as_bytes());
                }
                let mut lanes = Vec::new();
                set.each_keyword(&text, |k, s, e| {
                    lanes.push((k, s, e));
                    true
                });
                assert_eq!(
                    lanes,
                    keywords_one_by_one(&automaton, &text),
                    "length {len}, {back} back"
                );
                // (In the shortest texts the keywords overlap each other.)
                assert!(len < 1000 || lanes.len() > LANES, "{}", lanes.len());
            }
        }
    }

    #[test]
    fn the_keyword_table_walks_as_the_automaton_does() {
        let set = RuleSet::builtin();
        let automaton = keyword_automaton(&keywords_of(&set.rules).0).unwrap();
        let keywords: Vec<&String> = set.rules.iter().flat_map(|r| &r.keywords).collect();
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for round in 0..2_000 {
            // Keywords (some upper case) among bytes of every value.
            let mut text = Vec::new();
            while text.len() < round % 700 {
                match next() % 4 {
                    0 => {
                        let k = keywords[(next() % keywords.len() as u64) as usize];
                        if next().is_multiple_of(2) {
                            text.extend(k.to_ascii_uppercase().bytes());
                        } else {
                            text.extend(k.bytes());
                        }
                    }
                    _ => text.push(next() as u8),
                }
            }
            let mut found = Vec::new();
            set.each_keyword(&text, |k, s, e| {
                found.push((k, s, e));
                true
            });
            assert_eq!(found, keywords_one_by_one(&automaton, &text), "{text:?}");
            // The short texts' walk without notes says the same.
            assert_eq!(set.any_keyword(&text), !found.is_empty(), "{text:?}");
        }
    }

    #[test]
    fn go_syntax_translates() {
        assert_eq!(translate(r"^\${(?:[A-Z_]+)}$"), r"^\$\{(?:[A-Z_]+)\}$");
        assert_eq!(translate(r"a{2,3}b{4}"), r"a{2,3}b{4}");
        assert_eq!(translate(r"[^]]+{{x}}"), r"[^]]+\{\{x\}\}");
        assert!(compile(r"^\{\{[ \t]*[\w ().|]+[ \t]*}}$").is_ok());
    }

    #[test]
    fn entropy_matches_gitleaks() {
        assert_eq!(shannon_entropy(b"aaaa"), 0.0);
        assert!((shannon_entropy(b"ab") - 1.0).abs() < 1e-9);
        assert!(shannon_entropy(b"hunter2") > 2.5);
    }
}
