//! The adapter conformance suite: every adapter in the registry, over every
//! case under `fixtures/<agent>/<case>/native/` (the store-root-relative
//! files of the case), read through the same native readers capture uses.
//!
//! * golden parse: each session's events, encoded with the schema codec,
//!   equal `canonical.jsonl` (the case's least nested session) or
//!   `canonical.<file stem>[.<session key>].jsonl`, and the session facts,
//!   artifacts and warnings equal `facts.json`; `SNAPSHOTS=overwrite cargo
//!   test --test it conformance` rewrites them, to be reviewed as a diff;
//! * incremental equivalence: parsing in random slices, state handed over,
//!   gives exactly the events of one parse;
//! * L2: a same-agent render reproduces the native records, up to the
//!   adapter's documented remaps ([`Adapter::l2_remap`],
//!   [`Adapter::l2_remap_session`]);
//! * L0: parse -> render -> parse gives the same events, up to
//!   [`Adapter::l0_remap`];
//! * mutations: truncated, corrupted or replaced records never panic, keep
//!   the seqs contiguous, and surface as warnings.
//!
//! Sessions that live in a database are checked by the golden, slicing and
//! mutation parts; their render (rows) is checked by the adapter's own
//! write-back tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use git_session::native::jsonl::{JsonlReader, RecordReader};
use git_session::native::sqlite;
use git_session::native::zstd::FramedReader;
use git_session_adapters::source::{Frame, Row};
use git_session_adapters::{Adapter, ParseInput, Parsed, Records, RenderRequest, Source, registry};
use git_session_schema::{Event, SessionHeader, SessionId, codec};
use serde_json::{Value, json};

use crate::support::fixtures;

/// Holds every record of one native session, owned.
#[derive(Clone)]
enum Owned {
    Lines(Vec<u8>),
    Frames(Vec<Frame>),
    Rows(Vec<Row>),
}

impl Owned {
    fn records(&self) -> Records<'_> {
        match self {
            Owned::Lines(b) => Records::lines(b, 0, 0),
            Owned::Frames(f) => Records::Frames(f),
            Owned::Rows(r) => Records::Rows(r),
        }
    }

    /// Cuts the records into batches at the given fractions of their count.
    fn slices(&self, cuts: &[usize]) -> Vec<Owned> {
        match self {
            Owned::Lines(bytes) => {
                let ends: Vec<usize> = bytes
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'\n')
                    .map(|(i, _)| i + 1)
                    .collect();
                let mut at = 0;
                let mut out = Vec::new();
                for &c in cuts {
                    let end = ends.get(c).copied().unwrap_or(bytes.len());
                    if end > at {
                        out.push(Owned::Lines(bytes[at..end].to_vec()));
                        at = end;
                    }
                }
                out.push(Owned::Lines(bytes[at..].to_vec()));
                out
            }
            Owned::Frames(f) => split_vec(f, cuts).into_iter().map(Owned::Frames).collect(),
            Owned::Rows(r) => split_vec(r, cuts).into_iter().map(Owned::Rows).collect(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Owned::Lines(b) => b.iter().filter(|&&c| c == b'\n').count(),
            Owned::Frames(f) => f.len(),
            Owned::Rows(r) => r.len(),
        }
    }
}

fn split_vec<T: Clone>(items: &[T], cuts: &[usize]) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut at = 0;
    for &c in cuts {
        let c = c.min(items.len());
        if c > at {
            out.push(items[at..c].to_vec());
            at = c;
        }
    }
    out.push(items[at..].to_vec());
    out
}

/// Holds one native session of a fixture case.
struct Session {
    /// The source, relative to the store root.
    source: String,
    /// The session key, for a database.
    key: Option<String>,
    records: Owned,
}

impl Session {
    fn label(&self) -> String {
        match &self.key {
            Some(k) => format!("{}#{k}", self.source),
            None => self.source.clone(),
        }
    }
}

/// Holds one fixture case of one adapter.
struct Case {
    adapter: &'static dyn Adapter,
    dir: PathBuf,
    sessions: Vec<Session>,
}

impl Case {
    fn name(&self) -> String {
        format!(
            "{}/{}",
            self.adapter.agent(),
            self.dir.file_name().unwrap().to_string_lossy()
        )
    }
}

/// Reads every case of every registered adapter.
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for &adapter in registry::ADAPTERS {
        let agent_dir = fixtures().join(adapter.agent().as_str());
        let Ok(entries) = std::fs::read_dir(&agent_dir) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("native").is_dir())
            .collect();
        dirs.sort();
        for dir in dirs {
            let native = dir.join("native");
            let mut sessions = Vec::new();
            for rel in git_session::native::discover(adapter, &native) {
                let abs = native.join(&rel);
                let source = rel.to_string_lossy().replace('\\', "/");
                match git_session::native::source_for(adapter, &rel) {
                    Some(Source::Jsonl { .. }) => sessions.push(Session {
                        source,
                        key: None,
                        records: Owned::Lines(read_lines(&abs)),
                    }),
                    Some(Source::ZstdJsonl { .. }) => sessions.push(Session {
                        source,
                        key: None,
                        records: Owned::Frames(read_frames(&abs)),
                    }),
                    Some(Source::Sqlite(decl)) => {
                        let scope = sqlite::Scope {
                            marks: &BTreeMap::new(),
                            known: &BTreeMap::new(),
                            only: None,
                        };
                        let (_, read) =
                            sqlite::read_all(&abs, decl, scope, &sqlite::Options::default())
                                .unwrap_or_else(|e| panic!("{}: {e}", abs.display()));
                        for sqlite::SessionRows { key, rows, .. } in read {
                            sessions.push(Session {
                                source: source.clone(),
                                key: Some(key),
                                records: Owned::Rows(rows),
                            });
                        }
                    }
                    None => {}
                }
            }
            assert!(!sessions.is_empty(), "{}: no session found", dir.display());
            out.push(Case {
                adapter,
                dir,
                sessions,
            });
        }
    }
    // A registry or fixture mistake must not silently shrink coverage.
    assert!(out.len() >= 10, "only {} fixture cases found", out.len());
    out
}

fn read_lines(path: &Path) -> Vec<u8> {
    let mut reader = JsonlReader::open(path, 0, 0).unwrap();
    let mut out = Vec::new();
    while let Some(batch) = reader.next_batch().unwrap() {
        if let Records::Lines { bytes, .. } = batch {
            out.extend_from_slice(bytes);
        }
    }
    // A last line without its newline is still a record.
    let tail = std::fs::read(path).unwrap();
    out.extend_from_slice(&tail[out.len()..]);
    out
}

fn read_frames(path: &Path) -> Vec<Frame> {
    let mut reader = FramedReader::open(path, 0, 0, 0).unwrap();
    let mut out = Vec::new();
    while let Some(batch) = reader.next_batch().unwrap() {
        if let Records::Frames(frames) = batch {
            out.extend_from_slice(frames);
        }
    }
    assert!(
        reader.problem().is_none(),
        "{}: {:?}",
        path.display(),
        reader.problem()
    );
    out
}

fn parse(
    adapter: &dyn Adapter,
    s: &Session,
    records: Records<'_>,
    next_seq: u64,
    state: Option<Value>,
) -> Parsed {
    adapter.parse(ParseInput {
        records,
        next_seq,
        state,
        source: &s.source,
        session: s.key.as_deref(),
        sidecar: None,
    })
}

fn encode(events: &[Event]) -> String {
    let mut out = Vec::new();
    for e in events {
        codec::encode_event(e, &mut out);
        out.push(b'\n');
    }
    String::from_utf8(out).expect("events encode as UTF-8")
}

fn facts(parsed: &Parsed) -> Value {
    let s = &parsed.session;
    json!({
        "native_id": s.native_id,
        "cwd": s.cwd,
        "title": s.title,
        "created": s.created,
        "parent": s.parent.as_ref().map(|p| json!({"native_id": p.native_id, "spawned_by": p.spawned_by})),
        "artifacts": parsed.artifacts.iter().map(|(id, b)| json!({"id": id.to_string(), "bytes": b.len()})).collect::<Vec<_>>(),
        "warnings": parsed.warnings.iter().map(|w| json!({"line": w.line, "message": w.message})).collect::<Vec<_>>(),
    })
}

/// Compares `actual` with a golden file, the workspace's one way.
fn golden(path: &Path, actual: String, failures: &mut Vec<String>) {
    let assert = snapbox::Assert::new()
        .action_env(snapbox::assert::DEFAULT_ACTION_ENV)
        .normalize_paths(false);
    let expected = snapbox::Data::read_from(path, None).raw();
    if let Err(e) = assert.try_eq(Some(&path.display()), actual.into(), expected) {
        failures.push(format!(
            "{e}\n(SNAPSHOTS=overwrite rewrites it; review the diff)"
        ));
    }
}

/// A small deterministic generator, so a failing slice can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

#[test]
fn conformance_golden_parse() {
    let mut failures = Vec::new();
    for case in cases() {
        let mut facts_map = serde_json::Map::new();
        // The least nested session is the case's main one.
        let main = (0..case.sessions.len())
            .min_by_key(|&i| (case.sessions[i].source.matches('/').count(), i))
            .unwrap_or(0);
        for (i, s) in case.sessions.iter().enumerate() {
            let parsed = parse(case.adapter, s, s.records.records(), 0, None);
            let name = if i == main {
                "canonical.jsonl".to_owned()
            } else {
                let stem = Path::new(&s.source)
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .split('.')
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                match &s.key {
                    Some(k) => format!("canonical.{stem}.{k}.jsonl"),
                    None => format!("canonical.{stem}.jsonl"),
                }
            };
            golden(&case.dir.join(name), encode(&parsed.events), &mut failures);
            facts_map.insert(s.label(), facts(&parsed));
        }
        let text = serde_json::to_string_pretty(&Value::Object(facts_map)).unwrap() + "\n";
        golden(&case.dir.join("facts.json"), text, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn conformance_incremental_equivalence_over_random_slices() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for case in cases() {
        for s in &case.sessions {
            let whole = parse(case.adapter, s, s.records.records(), 5, None);
            let n = s.records.len();
            for round in 0..8 {
                let mut cuts: Vec<usize> =
                    (0..1 + rng.below(4)).map(|_| rng.below(n + 1)).collect();
                cuts.sort();
                let mut events = Vec::new();
                let mut warnings = Vec::new();
                let mut artifacts: Vec<(git_session_schema::ArtifactId, Vec<u8>)> = Vec::new();
                let mut state = None;
                let mut session = Default::default();
                let mut line = 0u64;
                for slice in s.records.slices(&cuts) {
                    let records = match &slice {
                        Owned::Lines(b) => Records::lines(b, line, 0),
                        other => other.records(),
                    };
                    let p = parse(
                        case.adapter,
                        s,
                        records,
                        5 + events.len() as u64,
                        state.take(),
                    );
                    line += slice.len() as u64;
                    events.extend(p.events);
                    warnings.extend(p.warnings.into_iter().map(|w| w.message));
                    for a in p.artifacts {
                        if !artifacts.contains(&a) {
                            artifacts.push(a);
                        }
                    }
                    state = Some(p.state);
                    session = p.session;
                }
                let label = format!("{} {} round {round}, cuts {cuts:?}", case.name(), s.label());
                assert!(events == whole.events, "{label}: events differ");
                let whole_warnings: Vec<String> =
                    whole.warnings.iter().map(|w| w.message.clone()).collect();
                assert_eq!(warnings, whole_warnings, "{label}: warnings");
                assert_eq!(artifacts, whole.artifacts, "{label}: artifacts");
                assert_eq!(session, whole.session, "{label}: session facts");
            }
        }
    }
}

#[test]
fn conformance_same_agent_render_round_trips() {
    for case in cases() {
        for s in case.sessions.iter().filter(|s| s.key.is_none()) {
            let label = format!("{} {}", case.name(), s.label());
            let parsed = parse(case.adapter, s, s.records.records(), 0, None);
            let Some(native_id) = parsed.session.native_id.clone() else {
                continue;
            };
            let cwd = parsed
                .session
                .cwd
                .clone()
                .unwrap_or_else(|| "/tmp/conformance/project".to_owned());
            let mut header = SessionHeader::new(
                SessionId::new("fixture-session").unwrap(),
                case.adapter.agent(),
                parsed
                    .session
                    .created
                    .clone()
                    .unwrap_or_else(|| "2026-01-01T00:00:00Z".into()),
            );
            header.native_id = Some(native_id.clone());
            header.cwd = Some(cwd.clone());
            header.title = parsed.session.title.clone();
            let changes = case
                .adapter
                .render(RenderRequest {
                    header: &header,
                    events: &parsed.events,
                    artifacts: &parsed.artifacts,
                    native_id: &native_id,
                    cwd: &cwd,
                    now: "2026-12-01T10:00:00.000Z",
                })
                .unwrap_or_else(|e| panic!("{label}: render failed: {e}"));
            let same_name = |f: &&git_session_adapters::FileWrite| {
                f.path.file_name() == Path::new(&s.source).file_name()
            };
            let file = match changes
                .files
                .iter()
                .find(|f| f.path == Path::new(&s.source))
                // A segment copy (Codex' rotated segments) is written back
                // as the live file of its name.
                .or_else(|| changes.files.iter().find(same_name))
            {
                Some(f) => f,
                // Without a recorded cwd the render picks its own place.
                None if parsed.session.cwd.is_none() && changes.files.len() == 1 => {
                    &changes.files[0]
                }
                None => panic!("{label}: the render wrote no file at the source's path"),
            };
            assert!(file.bytes.ends_with(b"\n"), "{label}: trailing newline");

            // L2: the records come back, up to the documented remaps.
            let mut native: Vec<Value> = json_records(s.records.records());
            case.adapter.l2_remap_session(&mut native, &native_id);
            // Records the render documents it does not write back.
            native.retain(|r| !r.is_null());
            let rendered = json_records(Records::lines(&file.bytes, 0, 0));
            assert_eq!(rendered.len(), native.len(), "{label}: record count");
            for (i, (r, n)) in rendered.iter().zip(&native).enumerate() {
                assert!(r == n, "{label}: record {i} differs after render");
            }

            // L0: parse(render(parse)) == parse, up to the documented remaps.
            let again = parse(case.adapter, s, Records::lines(&file.bytes, 0, 0), 0, None);
            let messages = |p: &Parsed| {
                p.warnings
                    .iter()
                    .map(|w| w.message.clone())
                    .collect::<Vec<_>>()
            };
            // A render may repair what the adapter documents it repairs (a
            // header the agent would refuse), never write a new bad record.
            let before = messages(&parsed);
            let new_bad: Vec<String> = messages(&again)
                .into_iter()
                .filter(|m| !before.contains(m))
                .collect();
            assert!(
                new_bad.is_empty(),
                "{label}: render wrote bad records: {new_bad:?}"
            );
            // Events whose record the render does not write back are left
            // out; the rest are compared in order, seqs renumbered.
            let remapped = |events: &[Event]| {
                let kept: Vec<&Event> = events
                    .iter()
                    .filter(|e| case.adapter.l0_written(e))
                    .collect();
                let index: BTreeMap<u64, u64> = kept
                    .iter()
                    .enumerate()
                    .map(|(i, e)| (e.seq, i as u64))
                    .collect();
                kept.into_iter()
                    .cloned()
                    .map(|mut e| {
                        e.seq = index[&e.seq];
                        e.parent_seq = e
                            .parent_seq
                            .map(|p| index.get(&p).copied().unwrap_or(u64::MAX));
                        case.adapter.l0_remap(&mut e);
                        e
                    })
                    .collect::<Vec<_>>()
            };
            assert!(
                remapped(&again.events) == remapped(&parsed.events),
                "{label}: L0 round trip changed the events"
            );
            assert_eq!(again.artifacts, parsed.artifacts, "{label}: artifacts");
        }
    }
}

/// Returns the records that are JSON objects (what a render can write back).
fn json_records(records: Records<'_>) -> Vec<Value> {
    records
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(r.bytes).ok())
        .filter(Value::is_object)
        .collect()
}

#[test]
fn conformance_mutated_records_never_panic_and_surface_as_warnings() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for case in cases() {
        for s in &case.sessions {
            let n = s.records.len();
            if n == 0 {
                continue;
            }
            for round in 0..12 {
                let victim = rng.below(n);
                let how = rng.below(4);
                let mutated = mutate(&s.records, victim, how, &mut rng);
                let label = format!(
                    "{} {} round {round}: record {victim}, mutation {how}",
                    case.name(),
                    s.label()
                );
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    parse(case.adapter, s, mutated.0.records(), 11, None)
                }));
                let parsed = result.unwrap_or_else(|_| panic!("{label}: the adapter panicked"));
                for (i, e) in parsed.events.iter().enumerate() {
                    assert_eq!(e.seq, 11 + i as u64, "{label}: seqs not contiguous");
                }
                if mutated.1 {
                    assert!(
                        !parsed.warnings.is_empty(),
                        "{label}: a broken record left no warning"
                    );
                }
            }
        }
    }
}

/// Reads a framed file's bytes through the frame reader capture uses.
fn frames_of_bytes(bytes: &[u8]) -> (Vec<Frame>, Option<String>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mutated.jsonl.zst");
    std::fs::write(&path, bytes).unwrap();
    let mut reader = FramedReader::open(&path, 0, 0, 0).unwrap();
    let mut out = Vec::new();
    while let Some(batch) = reader.next_batch().unwrap() {
        if let Records::Frames(frames) = batch {
            out.extend_from_slice(frames);
        }
    }
    (out, reader.problem())
}

fn frame_bytes(plain: &[u8]) -> Vec<u8> {
    git_session::native::apply::compress_frame(plain).unwrap()
}

#[test]
fn conformance_mutated_frames_never_panic_and_never_change_a_record() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut cases_seen = 0;
    for case in cases() {
        for s in &case.sessions {
            let Owned::Frames(frames) = &s.records else {
                continue;
            };
            cases_seen += 1;
            let file: Vec<u8> = frames.iter().flat_map(|f| frame_bytes(&f.bytes)).collect();
            let plain: Vec<u8> = frames.iter().flat_map(|f| f.bytes.clone()).collect();
            for round in 0..16 {
                let how = rng.below(5);
                // The problem a mutation must report, when it must.
                let mut expect = None;
                let mutated = match how {
                    // Cut anywhere: a torn tail.
                    0 => file[..rng.below(file.len())].to_vec(),
                    // One byte flipped anywhere.
                    1 => {
                        let mut b = file.clone();
                        let at = rng.below(b.len());
                        b[at] ^= 1 << rng.below(8);
                        b
                    }
                    // A skippable frame between two frames.
                    2 => {
                        expect = Some("invalid frame magic");
                        let at = frame_bytes(&frames[0].bytes).len();
                        let mut b = file[..at].to_vec();
                        b.extend_from_slice(&[0x50, 0x2A, 0x4D, 0x18, 2, 0, 0, 0, 7, 7]);
                        b.extend_from_slice(&file[at..]);
                        b
                    }
                    // A line spanning two frames.
                    3 => {
                        let cut = rng.below(plain.len().max(2) - 1) + 1;
                        if plain[cut - 1] != b'\n' {
                            expect = Some("ends inside a line");
                        }
                        [frame_bytes(&plain[..cut]), frame_bytes(&plain[cut..])].concat()
                    }
                    // Every record in one frame (the header not alone).
                    _ => frame_bytes(&plain),
                };
                let label = format!(
                    "{} {} round {round}: mutation {how}",
                    case.name(),
                    s.label()
                );
                let (read, problem) = frames_of_bytes(&mutated);
                let got: Vec<u8> = read.iter().flat_map(|f| f.bytes.clone()).collect();
                // What is read is always a prefix of what was written, in
                // whole lines: a damaged frame is never decoded into records.
                assert!(plain.starts_with(&got), "{label}: a record changed");
                assert!(
                    got.is_empty() || got.ends_with(b"\n"),
                    "{label}: a line was cut"
                );
                if let Some(p) = &problem {
                    assert!(p.contains("at byte"), "{label}: {p}");
                }
                if let Some(want) = expect {
                    let p = problem.as_deref().unwrap_or("");
                    assert!(p.contains(want), "{label}: {p:?}");
                }
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    parse(case.adapter, s, Records::Frames(&read), 5, None)
                }));
                let parsed = result.unwrap_or_else(|_| panic!("{label}: the adapter panicked"));
                for (i, e) in parsed.events.iter().enumerate() {
                    assert_eq!(e.seq, 5 + i as u64, "{label}: seqs not contiguous");
                }
            }
        }
    }
    assert!(cases_seen > 0, "no framed fixture");
}

/// Returns the records with record `victim` mutated, and whether the
/// mutation made it invalid JSON.
fn mutate(records: &Owned, victim: usize, how: usize, rng: &mut Rng) -> (Owned, bool) {
    let change = |bytes: &[u8], rng: &mut Rng| -> Vec<u8> {
        match how {
            // Truncated mid-record (as a crash or a torn write leaves it).
            0 => bytes[..rng.below(bytes.len().max(1))].to_vec(),
            // A byte replaced by one no JSON text has there.
            1 => {
                let mut b = bytes.to_vec();
                let at = rng.below(b.len().max(1));
                if let Some(c) = b.get_mut(at) {
                    *c = 0xFF;
                }
                b
            }
            // Valid JSON of the wrong shape.
            2 => b"[1,2,3]".to_vec(),
            // An object missing everything.
            _ => b"{}".to_vec(),
        }
    };
    let invalid = |b: &[u8]| serde_json::from_slice::<Value>(b).is_err();
    match records {
        Owned::Lines(bytes) => {
            let mut lines: Vec<&[u8]> = bytes.split(|&c| c == b'\n').collect();
            if lines.last().is_some_and(|l| l.is_empty()) {
                lines.pop();
            }
            let new = change(lines[victim], rng);
            let broke = invalid(&new) && !new.iter().all(u8::is_ascii_whitespace);
            let mut out = Vec::new();
            for (i, l) in lines.iter().enumerate() {
                out.extend_from_slice(if i == victim { &new } else { l });
                out.push(b'\n');
            }
            (Owned::Lines(out), broke)
        }
        Owned::Frames(frames) => {
            // The frame's first line is the victim; the others stay.
            let mut frames = frames.clone();
            let f = &mut frames[victim];
            let end = f
                .bytes
                .iter()
                .position(|&c| c == b'\n')
                .unwrap_or(f.bytes.len());
            let new = change(&f.bytes[..end], rng);
            let broke = invalid(&new) && !new.iter().all(u8::is_ascii_whitespace);
            let mut bytes = new;
            bytes.extend_from_slice(&f.bytes[end..]);
            f.bytes = bytes;
            (Owned::Frames(frames), broke)
        }
        Owned::Rows(rows) => {
            let mut rows = rows.clone();
            let new = change(&rows[victim].json, rng);
            let broke = invalid(&new);
            rows[victim].json = new;
            (Owned::Rows(rows), broke)
        }
    }
}

#[test]
fn conformance_every_registry_row_is_usable() {
    for &adapter in registry::ADAPTERS {
        let spec = adapter.spec();
        assert!(
            git_session_compiler::Tokenizer::from_name(spec.tokenizer.name()).is_some(),
            "{}: the compiler has no tokenizer {}",
            spec.name(),
            spec.tokenizer.name()
        );
        assert!(spec.resume_command("ID").contains("ID"), "{}", spec.name());
        for source in spec.sources {
            for glob in source.globs() {
                assert!(
                    !glob.starts_with('/') && !glob.contains(".."),
                    "{}: {glob}",
                    spec.name()
                );
            }
        }
        assert!(
            spec.tools
                .iter()
                .any(|(k, _)| *k == registry::ToolKind::Shell),
            "{}: no shell tool declared",
            spec.name()
        );
    }
}
