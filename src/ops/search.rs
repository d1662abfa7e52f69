//! `search`: a regex or literal over the text of every event of the
//! repository's sessions, with filters, through the local search index
//! (`store::index`: one line of text per event, refreshed here and by
//! capture); fetched sessions of other clones (`all_clones`) are read
//! straight from their remote-tracking refs.
//!
//! The pattern is matched against an event's text: every string of its
//! payload, tabs and line breaks read as spaces, strings separated by a
//! tab. Keys, seqs and checksums are not text, so `type` or `seq` never
//! match every event. One hit per event; hits in session order, then seq.

use std::io::Read;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use git_session_schema::{Agent, SessionId};

use super::{OpError, OpResult};
use crate::store::{IndexFile, Store};

/// Says what to look for.
#[derive(Clone, Debug, Default)]
pub struct SearchRequest {
    /// The pattern.
    pub pattern: String,
    /// Take the pattern literally instead of as a regex.
    pub literal: bool,
    /// Match case-insensitively.
    pub ignore_case: bool,
    /// Only sessions of these agents (empty: all).
    pub agents: Vec<Agent>,
    /// Only events of these types; `tool.*` or `tool.` takes a namespace.
    pub types: Vec<String>,
    /// Only events at or after this time (seconds since the epoch).
    pub since: Option<i64>,
    /// Only these sessions (empty: all).
    pub sessions: Vec<SessionId>,
    /// Also the fetched sessions of every remote (remote-tracking refs).
    pub all_clones: bool,
    /// Stop after this many hits.
    pub max: Option<usize>,
    /// Also match `meta` events (agent bookkeeping, hidden by default as
    /// in `show`); a `--type` filter that names them takes them too.
    pub meta: bool,
}

/// One event that matched.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Hit {
    /// The session.
    pub session: String,
    /// Its agent.
    pub agent: String,
    /// The event's seq.
    pub seq: u64,
    /// The event's type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The event's time, seconds since the epoch (0 when it had none).
    pub ts: i64,
    /// Up to 80 bytes of text either side of the match, strings
    /// separated by " | ".
    pub snippet: String,
    /// The matched text.
    #[serde(rename = "match")]
    pub matched: String,
    /// For a fetched session (`all_clones`): the remote it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

/// What a search found.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SearchReport {
    /// The hits, in session order, then seq.
    pub hits: Vec<Hit>,
    /// Sessions searched.
    pub sessions: usize,
    /// Events looked at.
    pub events: u64,
    /// Whether `max` cut the list.
    pub truncated: bool,
}

/// Bytes read from an index file at a time.
const BLOCK: usize = 8 << 20;
/// Snippet context either side of a match.
const CONTEXT: usize = 80;

struct Matcher<'a> {
    regex: regex::bytes::Regex,
    request: &'a SearchRequest,
    /// The pattern can run over a block of index lines at once (see
    /// [`block_safe`]); otherwise it runs line by line.
    block: bool,
}

/// Whether running the pattern over a whole block of index lines finds
/// every line whose text it matches (each candidate line is then checked
/// on its own, so a block match that is no hit costs nothing but time).
/// That holds unless the pattern asserts where a text starts or ends
/// (`^`, `$`, `\A`, `\z`): in a block those are the block's or a line's
/// edges, not the text column's. Word boundaries are safe: the text column
/// is framed by a tab and a line break, both non-word bytes, as the edges
/// of a text are.
fn block_safe(source: &str, ignore_case: bool) -> bool {
    regex_syntax::ParserBuilder::new()
        .case_insensitive(ignore_case)
        .utf8(false)
        .build()
        .parse(source)
        .is_ok_and(|hir| !hir.properties().look_set().contains_anchor())
}

/// Runs a search.
pub fn search(store: &Store, request: &SearchRequest) -> OpResult<SearchReport> {
    let source = if request.literal {
        regex::escape(&request.pattern)
    } else {
        request.pattern.clone()
    };
    let regex = regex::bytes::RegexBuilder::new(&source)
        .case_insensitive(request.ignore_case)
        .size_limit(16 << 20)
        .build()
        .map_err(|e| OpError::Conflict {
            message: format!("bad pattern {:?}: {e}", request.pattern),
            hint: Some("pass --fixed-strings (-F) to search for it literally".into()),
        })?;
    let matcher = Matcher {
        regex,
        request,
        block: block_safe(&source, request.ignore_case),
    };
    let only = (!request.sessions.is_empty()).then_some(request.sessions.as_slice());
    let files: Vec<IndexFile> = store
        .refresh_index(only, git_session_adapters::registry::is_native_key)?
        .into_iter()
        .filter(|f| {
            request.agents.is_empty() || request.agents.iter().any(|a| a.as_str() == f.agent)
        })
        .collect();
    let mut report = scan_files(&matcher, &files)?;
    if request.all_clones {
        clones(store, &matcher, &files, &mut report)?;
    }
    if let Some(max) = request.max
        && report.hits.len() > max
    {
        report.hits.truncate(max);
        report.truncated = true;
    }
    Ok(report)
}

/// One file's hits and events looked at.
type FileHits = (Vec<Hit>, u64);

/// Scans the index files on as many threads as there are cores (up to
/// four); results in file order.
fn scan_files(matcher: &Matcher<'_>, files: &[IndexFile]) -> OpResult<SearchReport> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<OpResult<FileHits>>>> =
        Mutex::new((0..files.len()).map(|_| None).collect());
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4)
        .min(files.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(file) = files.get(i) else { break };
                    let result = scan_file(matcher, file);
                    results.lock().expect("no panics while locked")[i] = Some(result);
                }
            });
        }
    });
    let mut report = SearchReport {
        sessions: files.len(),
        ..SearchReport::default()
    };
    for r in results
        .into_inner()
        .expect("threads done")
        .into_iter()
        .flatten()
    {
        let (hits, events) = r?;
        report.hits.extend(hits);
        report.events += events;
    }
    Ok(report)
}

fn scan_file(matcher: &Matcher<'_>, file: &IndexFile) -> OpResult<FileHits> {
    let f = std::fs::File::open(&file.path).map_err(OpError::io(&file.path))?;
    let mut reader = f.take(file.bytes);
    let mut buf: Vec<u8> = Vec::with_capacity(BLOCK.min(file.bytes as usize + 1));
    let mut hits = Vec::new();
    let mut events = 0;
    let session = file.id.to_string();
    loop {
        let start = buf.len();
        buf.resize(start + BLOCK, 0);
        let n = read_full(&mut reader, &mut buf[start..]).map_err(OpError::io(&file.path))?;
        buf.truncate(start + n);
        let done = n == 0;
        let end = if done {
            buf.len()
        } else {
            match memchr_last(&buf) {
                Some(i) => i + 1,
                None => continue,
            }
        };
        events += matcher.block(&buf[..end], &session, &file.agent, &mut hits);
        if done {
            break;
        }
        buf.drain(..end);
    }
    Ok((hits, events))
}

fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut total = 0;
    while total < buf.len() {
        match reader.read(&mut buf[total..]) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

fn memchr_last(buf: &[u8]) -> Option<usize> {
    memchr::memrchr(b'\n', buf)
}

impl Matcher<'_> {
    /// Matches a block of whole index lines; pushes the hits and returns
    /// how many lines (events) the block holds.
    ///
    /// One regex run over the block finds the first candidate line; only
    /// that line is then matched on its own (the text column, filters),
    /// and the run goes on from the next line. The block is not split into
    /// lines first: the scan goes at the regex's (literal-accelerated)
    /// speed instead of paying a call per event.
    fn block(&self, block: &[u8], session: &str, agent: &str, hits: &mut Vec<Hit>) -> u64 {
        let full = |hits: &Vec<Hit>| self.request.max.is_some_and(|m| hits.len() >= m);
        let lines = block.split(|&b| b == b'\n').filter(|l| !l.is_empty());
        if !self.block {
            let mut events = 0;
            for line in lines {
                events += 1;
                if !full(hits)
                    && let Some(hit) = self.line(line, session, agent)
                {
                    hits.push(hit);
                }
            }
            return events;
        }
        let mut events = memchr::memchr_iter(b'\n', block).count() as u64;
        if block.last().is_some_and(|&b| b != b'\n') {
            events += 1;
        }
        let mut at = 0;
        while at < block.len() && !full(hits) {
            let Some(m) = self.regex.find_at(block, at) else {
                break;
            };
            let start = memchr::memrchr(b'\n', &block[at..m.start()]).map_or(at, |i| at + i + 1);
            let end =
                memchr::memchr(b'\n', &block[m.start()..]).map_or(block.len(), |i| m.start() + i);
            if let Some(hit) = self.line(&block[start..end], session, agent) {
                hits.push(hit);
            }
            at = end + 1;
        }
        events
    }

    /// Matches one index line (`seq \t type \t ts \t text`).
    fn line(&self, line: &[u8], session: &str, agent: &str) -> Option<Hit> {
        let mut cols = line.splitn(4, |&b| b == b'\t');
        let seq = cols.next()?;
        let kind = cols.next()?;
        let ts = cols.next()?;
        let text = cols.next().unwrap_or_default();
        let kind = std::str::from_utf8(kind).ok()?;
        if !self.request.types.is_empty()
            && !self.request.types.iter().any(|t| type_matches(t, kind))
        {
            return None;
        }
        if kind == "meta" && self.request.types.is_empty() && !self.request.meta {
            return None;
        }
        let ts: i64 = std::str::from_utf8(ts).ok()?.parse().ok()?;
        if self.request.since.is_some_and(|s| ts < s) {
            return None;
        }
        let m = self.regex.find(text)?;
        Some(Hit {
            session: session.to_owned(),
            agent: agent.to_owned(),
            seq: std::str::from_utf8(seq).ok()?.parse().ok()?,
            kind: kind.to_owned(),
            ts,
            snippet: snippet(text, m.start(), m.end()),
            matched: String::from_utf8_lossy(m.as_bytes()).into_owned(),
            remote: None,
        })
    }
}

/// Whether an event type passes a `--type` filter: equal, or inside a
/// namespace given as `ns.*` or `ns.`.
pub fn type_matches(filter: &str, kind: &str) -> bool {
    match filter
        .strip_suffix('*')
        .or_else(|| filter.ends_with('.').then_some(filter))
    {
        Some(prefix) => kind.starts_with(prefix),
        None => kind == filter,
    }
}

fn snippet(text: &[u8], start: usize, end: usize) -> String {
    let mut from = start.saturating_sub(CONTEXT);
    let mut to = (end + CONTEXT).min(text.len());
    // Whole characters only (the text is UTF-8; continuation bytes are
    // 0b10xx_xxxx).
    while from > 0 && from < text.len() && (text[from] & 0xc0) == 0x80 {
        from -= 1;
    }
    while to < text.len() && (text[to] & 0xc0) == 0x80 {
        to += 1;
    }
    String::from_utf8_lossy(&text[from..to]).replace('\t', " | ")
}

/// Searches the fetched sessions of every remote that this clone does not
/// have at the same tip, straight from their refs (bounded like every read).
fn clones(
    store: &Store,
    matcher: &Matcher<'_>,
    local: &[IndexFile],
    report: &mut SearchReport,
) -> OpResult<()> {
    let mut line = Vec::new();
    for remote in store.remote_names() {
        for (id, tip) in store.tracking_sessions(&remote)? {
            if !matcher.request.sessions.is_empty() && !matcher.request.sessions.contains(&id) {
                continue;
            }
            if store.tip(&id)? == Some(tip) && local.iter().any(|f| f.id == id) {
                continue;
            }
            let Ok(header) = store.header_at(&id, tip) else {
                continue;
            };
            let agent = header.agent.as_str().to_owned();
            if !matcher.request.agents.is_empty()
                && !matcher.request.agents.iter().any(|a| a.as_str() == agent)
            {
                continue;
            }
            report.sessions += 1;
            let session = id.to_string();
            for stored in store.lines_at(&id, tip, 0, None)? {
                let Ok(event) = stored?.decode() else {
                    continue;
                };
                report.events += 1;
                line.clear();
                crate::store::index_line(
                    &event,
                    git_session_adapters::registry::is_native_key,
                    &mut line,
                );
                line.pop();
                if let Some(mut hit) = matcher.line(&line, &session, &agent) {
                    hit.remote = Some(remote.clone());
                    report.hits.push(hit);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_filters_take_namespaces() {
        assert!(type_matches("tool.call", "tool.call"));
        assert!(!type_matches("tool", "tool.call"));
        assert!(type_matches("tool.*", "tool.result"));
        assert!(type_matches("tool.", "tool.result"));
        assert!(!type_matches("tool.*", "message.user"));
    }

    /// The block scan finds exactly the hits of matching line by line,
    /// for patterns that can span lines in a block, match in the other
    /// columns, or anchor (which fall back to lines).
    #[test]
    fn the_block_scan_finds_what_line_by_line_finds() {
        let block = b"0\tmessage.user\t10\txa\tfoo\n\
1\ttool.call\t11\tac foo bar\n\
2\tmessage.assistant\t12\tfoo\n\
3\ttool.result\t13\tbar foo\tbaz\n\
4\tmessage.user\t14\ttool.call and 3\n";
        for (pattern, types) in [
            ("a[^b]*c", vec![]),
            ("foo", vec![]),
            ("foo", vec!["tool.*".to_owned()]),
            ("^foo", vec![]),
            ("foo$", vec![]),
            ("tool.call", vec![]),
            ("1", vec![]),
            (r"\bbar\b", vec![]),
            (r"\s", vec![]),
            ("x*", vec![]),
            ("nothing", vec![]),
        ] {
            let request = SearchRequest {
                pattern: pattern.into(),
                types,
                ..SearchRequest::default()
            };
            let regex = regex::bytes::Regex::new(pattern).unwrap();
            let mut by_lines = Matcher {
                regex: regex.clone(),
                request: &request,
                block: false,
            };
            let mut expected = Vec::new();
            let events = by_lines.block(block, "s", "claude", &mut expected);
            by_lines.block = block_safe(pattern, false);
            let mut got = Vec::new();
            assert_eq!(by_lines.block(block, "s", "claude", &mut got), events);
            assert_eq!(events, 5);
            assert_eq!(got, expected, "{pattern}");
        }
        assert!(block_safe("a[^b]*c", false) && block_safe(r"\bx", false));
        assert!(
            !block_safe("^x", false) && !block_safe("(?m)x$", false) && !block_safe(r"\Ax", false)
        );
        // Found in the text only: seqs, types and times are not text.
        let request = SearchRequest::default();
        let m = Matcher {
            regex: regex::bytes::Regex::new("tool.call").unwrap(),
            request: &request,
            block: true,
        };
        let mut hits = Vec::new();
        m.block(block, "s", "claude", &mut hits);
        assert_eq!(hits.iter().map(|h| h.seq).collect::<Vec<_>>(), [4]);
    }

    #[test]
    fn snippets_keep_whole_characters() {
        let text = "é".repeat(100) + "needle" + &"ü".repeat(100);
        let start = text.find("needle").unwrap();
        let s = snippet(text.as_bytes(), start + 1, start + 5);
        assert!(s.contains("needle"));
        assert!(!s.contains('\u{fffd}'), "{s}");
    }
}
