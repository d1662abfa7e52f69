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
//! A case is either `native/` (the files under the store root) or, for an
//! agent that keeps sessions in a database, `schema.sql` (the client's own
//! schema) and `rows.json` (table -> rows, as stored), built into a
//! database of the client's schema for each run. Sessions in a database
//! render to rows: L0 and L2 apply them into an empty database of that
//! schema as write-back does and read them back through the same reader;
//! where a row sits (`$rowid`) is not compared. A framed source is
//! rendered as frames and read back through the frame reader, with the
//! same records per frame.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use git_session::native::jsonl::{JsonlReader, RecordReader};
use git_session::native::sqlite;
use git_session::native::zstd::FramedReader;
use git_session_adapters::source::{Database, Frame, Row};
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
            Owned::Rows(r) => rows_at_times(r, cuts)
                .into_iter()
                .map(Owned::Rows)
                .collect(),
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

/// Cuts a session's rows the way successive reads of a growing database
/// deliver them: rows in the order they were written (`time_created`, else
/// `timestamp`, else rowid), cut there, each read's rows again in table
/// order, and the session table's rows (read whole on every change) in
/// every read. An arbitrary cut of the table-ordered list would hand over
/// a message before rows the database held before it.
fn rows_at_times(rows: &[Row], cuts: &[usize]) -> Vec<Vec<Row>> {
    let first_table = rows.first().map(|r| r.table);
    let written = |r: &Row| -> (f64, i64) {
        let v: Value = serde_json::from_slice(&r.json).unwrap_or_default();
        let t = v["time_created"]
            .as_f64()
            .or_else(|| v["timestamp"].as_f64());
        (t.unwrap_or(r.rowid as f64), r.rowid)
    };
    let (whole, mut rest): (Vec<&Row>, Vec<&Row>) =
        rows.iter().partition(|r| Some(r.table) == first_table);
    rest.sort_by(|a, b| written(a).partial_cmp(&written(b)).unwrap());
    let order = |r: &Row| rows.iter().position(|x| x == r).unwrap();
    split_vec(&rest, cuts)
        .into_iter()
        .map(|mut part| {
            part.sort_by_key(|r| order(r));
            whole.iter().copied().chain(part).cloned().collect()
        })
        .collect()
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
    /// For a database case, the store root the database was built in.
    _built: Option<tempfile::TempDir>,
}

/// Returns the database an adapter reads (its first SQLite source) and the
/// file name a fixture database gets under the store root (the glob with
/// its wildcards left out: `opencode*.db` is `opencode.db`).
fn database_of(adapter: &dyn Adapter) -> Option<(&'static Database, String)> {
    adapter.spec().sources.iter().find_map(|s| match s {
        Source::Sqlite(decl) => Some((*decl, decl.files[0].replace(['*', '?'], ""))),
        _ => None,
    })
}

/// Makes `db` with the client's schema (`schema.sql` of a database case)
/// and, when given, the case's rows (`rows.json`: table -> rows, columns by
/// name, as stored).
fn build_database(db: &Path, schema: &str, rows: Option<&Value>) {
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(schema).unwrap();
    let Some(Value::Object(tables)) = rows else {
        return;
    };
    for (table, rows) in tables {
        for row in rows.as_array().into_iter().flatten() {
            let row = row.as_object().unwrap();
            let names: Vec<String> = row.keys().map(|k| format!("\"{k}\"")).collect();
            let values: Vec<rusqlite::types::Value> = row
                .values()
                .map(|v| match v {
                    Value::Null => rusqlite::types::Value::Null,
                    Value::Bool(b) => rusqlite::types::Value::Integer(i64::from(*b)),
                    Value::Number(n) => match n.as_i64() {
                        Some(i) => rusqlite::types::Value::Integer(i),
                        None => rusqlite::types::Value::Real(n.as_f64().unwrap()),
                    },
                    Value::String(s) => rusqlite::types::Value::Text(s.clone()),
                    other => rusqlite::types::Value::Text(other.to_string()),
                })
                .collect();
            let sql = format!(
                "INSERT INTO \"{table}\" ({}) VALUES ({})",
                names.join(", "),
                vec!["?"; names.len()].join(", ")
            );
            conn.execute(&sql, rusqlite::params_from_iter(values))
                .unwrap_or_else(|e| panic!("{}: {table}: {e}", db.display()));
        }
    }
}

/// Reads every session of a database as capture does.
fn read_database(db: &Path, decl: &Database, only: Option<&str>) -> Vec<sqlite::SessionRows> {
    let scope = sqlite::Scope {
        marks: &BTreeMap::new(),
        known: &BTreeMap::new(),
        only,
    };
    sqlite::read_all(db, decl, scope, &sqlite::Options::default())
        .unwrap_or_else(|e| panic!("{}: {e}", db.display()))
        .1
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
            .filter(|p| {
                p.join("native").is_dir()
                    || (p.join("schema.sql").is_file() && p.join("rows.json").is_file())
            })
            .collect();
        dirs.sort();
        for dir in dirs {
            // A database case: the client's schema and rows, built into a
            // store root of its own.
            let mut built = None;
            let native = if dir.join("native").is_dir() {
                dir.join("native")
            } else {
                let (_, name) = database_of(adapter).unwrap_or_else(|| {
                    panic!("{}: a database case of a file agent", dir.display())
                });
                let tmp = tempfile::tempdir().unwrap();
                let rows: Value =
                    serde_json::from_slice(&std::fs::read(dir.join("rows.json")).unwrap()).unwrap();
                build_database(
                    &tmp.path().join(&name),
                    &std::fs::read_to_string(dir.join("schema.sql")).unwrap(),
                    Some(&rows),
                );
                let root = tmp.path().to_owned();
                built = Some(tmp);
                root
            };
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
                        for sqlite::SessionRows { key, rows, .. } in read_database(&abs, decl, None)
                        {
                            sessions.push(Session {
                                source: source.clone(),
                                key: Some(key),
                                records: Owned::Rows(rows),
                            });
                        }
                    }
                    // A JSON tree has no file globs: never a discovered file.
                    Some(Source::JsonTree(_)) | None => {}
                }
            }
            assert!(!sessions.is_empty(), "{}: no session found", dir.display());
            out.push(Case {
                adapter,
                dir,
                sessions,
                _built: built,
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
        memo: Default::default(),
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
                if events != whole.events {
                    let at = events
                        .iter()
                        .zip(&whole.events)
                        .position(|(a, b)| a != b)
                        .unwrap_or(events.len().min(whole.events.len()));
                    panic!(
                        "{label}: events differ ({} vs {} events), first at {at}:\nsliced {}\nwhole  {}",
                        events.len(),
                        whole.events.len(),
                        events
                            .get(at)
                            .map(|e| encode(std::slice::from_ref(e)))
                            .unwrap_or_default(),
                        whole
                            .events
                            .get(at)
                            .map(|e| encode(std::slice::from_ref(e)))
                            .unwrap_or_default(),
                    );
                }
                let whole_warnings: Vec<String> =
                    whole.warnings.iter().map(|w| w.message.clone()).collect();
                assert_eq!(warnings, whole_warnings, "{label}: warnings");
                assert_eq!(artifacts, whole.artifacts, "{label}: artifacts");
                assert_eq!(session, whole.session, "{label}: session facts");
            }
        }
    }
}

/// Returns the header a same-agent render of a parsed session gets, its
/// native id and cwd.
fn header_of(adapter: &dyn Adapter, parsed: &Parsed) -> Option<(SessionHeader, String, String)> {
    let native_id = parsed.session.native_id.clone()?;
    let cwd = parsed
        .session
        .cwd
        .clone()
        .unwrap_or_else(|| "/tmp/conformance/project".to_owned());
    let mut header = SessionHeader::new(
        SessionId::new("fixture-session").unwrap(),
        adapter.agent(),
        parsed
            .session
            .created
            .clone()
            .unwrap_or_else(|| "2026-01-01T00:00:00Z".into()),
    );
    header.native_id = Some(native_id.clone());
    header.cwd = Some(cwd.clone());
    header.title = parsed.session.title.clone();
    Some((header, native_id, cwd))
}

fn render_same_agent(
    adapter: &dyn Adapter,
    label: &str,
    parsed: &Parsed,
) -> Option<(git_session_adapters::ChangeSet, String, String)> {
    let (header, native_id, cwd) = header_of(adapter, parsed)?;
    let changes = adapter
        .render(RenderRequest {
            header: &header,
            events: &parsed.events,
            artifacts: &parsed.artifacts,
            native_id: &native_id,
            cwd: &cwd,
            now: "2026-12-01T10:00:00.000Z",
        })
        .unwrap_or_else(|e| panic!("{label}: render failed: {e}"));
    Some((changes, native_id, cwd))
}

/// L2: the rendered records equal the native ones, up to the documented
/// remaps (records remapped to `null` are not written back).
fn check_l2(label: &str, mut native: Vec<Value>, rendered: Vec<Value>) {
    native.retain(|r| !r.is_null());
    assert_eq!(rendered.len(), native.len(), "{label}: record count");
    for (i, (r, n)) in rendered.iter().zip(&native).enumerate() {
        assert!(
            r == n,
            "{label}: record {i} differs after render:\nrendered {r}\nnative   {n}"
        );
    }
}

/// L0: parse(render(parse)) == parse, up to the documented remaps; `again`
/// parsed what the render wrote.
fn check_l0(adapter: &dyn Adapter, label: &str, parsed: &Parsed, again: &Parsed) {
    let messages = |p: &Parsed| {
        p.warnings
            .iter()
            .map(|w| w.message.clone())
            .collect::<Vec<_>>()
    };
    // A render may repair what the adapter documents it repairs (a
    // header the agent would refuse), never write a new bad record.
    let before = messages(parsed);
    let new_bad: Vec<String> = messages(again)
        .into_iter()
        .filter(|m| !before.contains(m))
        .collect();
    assert!(
        new_bad.is_empty(),
        "{label}: render wrote bad records: {new_bad:?}"
    );
    // Events whose record the render does not write back are left out; the
    // rest are compared in order, seqs renumbered.
    let remapped = |events: &[Event]| {
        let kept: Vec<&Event> = events.iter().filter(|e| adapter.l0_written(e)).collect();
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
                adapter.l0_remap(&mut e);
                e
            })
            .collect::<Vec<_>>()
    };
    let (a, b) = (remapped(&again.events), remapped(&parsed.events));
    assert_eq!(
        a.len(),
        b.len(),
        "{label}: L0 round trip changed the event count"
    );
    for (x, y) in a.iter().zip(&b) {
        assert!(
            x == y,
            "{label}: L0 round trip changed event {}:\nagain  {}\nparsed {}",
            y.seq,
            encode(std::slice::from_ref(x)),
            encode(std::slice::from_ref(y))
        );
    }
    assert_eq!(again.artifacts, parsed.artifacts, "{label}: artifacts");
}

#[test]
fn conformance_same_agent_render_round_trips() {
    let mut framed = 0;
    for case in cases() {
        for s in case.sessions.iter().filter(|s| s.key.is_none()) {
            let label = format!("{} {}", case.name(), s.label());
            let parsed = parse(case.adapter, s, s.records.records(), 0, None);
            let Some((changes, native_id, _)) = render_same_agent(case.adapter, &label, &parsed)
            else {
                continue;
            };
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

            // A framed source is written as frames again: read back through
            // the frame reader capture uses.
            let frames = match &s.records {
                Owned::Frames(native_frames) => {
                    let ends = file.frames.as_ref().unwrap_or_else(|| {
                        panic!("{label}: a framed source rendered as a plain file")
                    });
                    let mut bytes = Vec::new();
                    let mut at = 0;
                    for &end in ends.iter().chain(std::iter::once(&file.bytes.len())) {
                        if end > at {
                            bytes.extend(frame_bytes(&file.bytes[at..end]));
                            at = end;
                        }
                    }
                    let (read, problem) = frames_of_bytes(&bytes);
                    assert!(problem.is_none(), "{label}: {problem:?}");
                    // The first frame holds what the native one holds (dsh
                    // lists sessions from the header frame alone); where the
                    // later frames end is the writer's flush pattern, not
                    // content, and a render writes the rest as one frame.
                    let lines = |f: &Frame| json_records(Records::Frames(std::slice::from_ref(f)));
                    assert_eq!(
                        read.first().map(lines),
                        native_frames.first().map(lines),
                        "{label}: the first frame"
                    );
                    assert!(read.len() <= native_frames.len().max(2), "{label}: frames");
                    framed += 1;
                    Some(read)
                }
                _ => None,
            };
            let records = match &frames {
                Some(f) => Records::Frames(f),
                None => Records::lines(&file.bytes, 0, 0),
            };

            // L2: the records come back, up to the documented remaps.
            let mut native: Vec<Value> = json_records(s.records.records());
            case.adapter.l2_remap_session(&mut native, &native_id);
            check_l2(&label, native, json_records(records));

            // L0: parse(render(parse)) == parse, up to the documented remaps.
            let again = parse(case.adapter, s, records, 0, None);
            check_l0(case.adapter, &label, &parsed, &again);
        }
    }
    assert!(framed > 0, "no framed session was rendered");
}

/// A session that lives in a database is rendered as rows, applied into an
/// empty database of the client's schema (the case's `schema.sql`) the way
/// write-back applies them, and read back through the reader capture uses.
#[test]
fn conformance_database_render_round_trips() {
    let mut seen = 0;
    for case in cases() {
        let Some((decl, name)) = database_of(case.adapter) else {
            continue;
        };
        let Ok(schema) = std::fs::read_to_string(case.dir.join("schema.sql")) else {
            continue;
        };
        for s in case.sessions.iter().filter(|s| s.key.is_some()) {
            let label = format!("{} {}", case.name(), s.label());
            let parsed = parse(case.adapter, s, s.records.records(), 0, None);
            let Some((mut changes, native_id, cwd)) =
                render_same_agent(case.adapter, &label, &parsed)
            else {
                continue;
            };
            // The repository facts are the recorded ones: the project the
            // session row names, the directory it ran in.
            let session_row = s
                .records
                .records()
                .iter()
                .find(|r| matches!(r.pos, git_session_adapters::Position::Row { table, .. } if table == decl.tables[0].name))
                .and_then(|r| serde_json::from_slice::<Value>(r.bytes).ok())
                .unwrap_or_default();
            let project = decl
                .project
                .and_then(|p| session_row[p.column].as_str().map(str::to_owned));
            git_session::native::apply::fill_repo_facts(
                &mut changes,
                &git_session::native::apply::RepoFacts {
                    root_commit: project,
                    worktree: Some(PathBuf::from(&cwd)),
                    cwd: PathBuf::from(&cwd),
                },
            );
            // An empty database as the client makes it: its schema, and the
            // rows of the tables that hold no session (OpenCode's
            // `migration`, Hermes' `schema_version`): those the adapter
            // neither reads nor writes, without a `session_id`.
            let rows: Value =
                serde_json::from_slice(&std::fs::read(case.dir.join("rows.json")).unwrap())
                    .unwrap();
            let mut own = serde_json::Map::new();
            for (table, table_rows) in rows.as_object().unwrap() {
                let read = decl.tables.iter().any(|t| t.name == table);
                let written = changes.rows.iter().any(|r| &r.table == table);
                let of_sessions = table_rows
                    .as_array()
                    .and_then(|r| r.first())
                    .is_some_and(|r| r.get("session_id").is_some());
                if !read && !written && !of_sessions {
                    own.insert(table.clone(), table_rows.clone());
                }
            }
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("store");
            let db = root.join(&name);
            build_database(&db, &schema, Some(&Value::Object(own)));
            let backups = tmp.path().join("backups");
            git_session::native::apply::apply_rows(
                &root,
                &changes,
                &git_session::native::apply::Backups {
                    dir: &backups,
                    now_ms: 0,
                },
            )
            .unwrap_or_else(|e| panic!("{label}: applying the rows: {e}"));
            let key = s.key.as_deref().unwrap();
            let back = read_database(&db, decl, Some(key))
                .into_iter()
                .find(|r| r.key == key)
                .unwrap_or_else(|| panic!("{label}: the rows written hold no session {key}"));

            // L2: the rows come back, up to the documented remaps; where a
            // row sits (`$rowid`) is the database's to choose.
            let rows = |records: Records<'_>| {
                let mut out = json_records(records);
                for r in &mut out {
                    r.as_object_mut().unwrap().remove("$rowid");
                }
                case.adapter.l2_remap_session(&mut out, &native_id);
                out.retain(|r| !r.is_null());
                out
            };
            check_l2(
                &label,
                rows(s.records.records()),
                rows(Records::Rows(&back.rows)),
            );

            // L0: parse(render(parse)) == parse, up to the documented remaps.
            let again = parse(case.adapter, s, Records::Rows(&back.rows), 0, None);
            check_l0(case.adapter, &label, &parsed, &again);
            seen += 1;
        }
    }
    assert!(seen >= 6, "only {seen} database sessions round-tripped");
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
