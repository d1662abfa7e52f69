//! Rows of one OpenCode session to canonical events, incrementally.
//!
//! Each call gets the rows that are new or changed since the last call
//! (any mix of `session`, `message` and `part` rows; a row handed again
//! unchanged is ignored, so handing the whole session again is safe) and
//! the state the last call returned.
//!
//! * **Prefix, no torn messages.** Messages are taken in OpenCode's order
//!   (`time_created`, then id). The last message is held back, with its
//!   parts, while it is still being written: an assistant message without
//!   `time.completed`, or a user message without parts. Held rows travel
//!   in the state and are taken as soon as the message settles (or a later
//!   message shows it never will).
//! * **Changed rows are updates, not duplicates.** A row seen before with
//!   other content gives one update event: a tool part that went from
//!   `pending`/`running` to `completed`/`error` gives its `tool.result`
//!   (and derived events); anything else a `meta` event with
//!   `opencode: "<table>.updated"`. Each carries the new row, so write-back
//!   uses the latest version of every row.
//! * **Bad rows are warnings.** A `data` column that is not a JSON object,
//!   or a part whose message is nowhere, is a warning naming the table and
//!   row id; the row is kept in a `meta` event and the rest is captured.

use std::collections::{BTreeMap, HashMap};

use git_session_schema::{Agent, ArtifactId, Event, Level, Origin, kinds};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::wire::{Row, Table, ptr};
use super::{ACTOR_AGENT, NATIVE_KEY, ms_to_rfc3339};
use crate::{NativeParent, NativeSession, Parsed, Warning, object};

/// How much of a command's output `command.run` keeps, in bytes.
const OUTPUT_TAIL: usize = 2000;

/// What a parse of one session remembers for the next call.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct State {
    /// Session facts so far.
    #[serde(default)]
    facts: Facts,
    /// Fingerprint of every row taken, by id (`session`, `msg_…`, `prt_…`).
    #[serde(default)]
    seen: BTreeMap<String, Seen>,
    /// Messages taken: id -> role.
    #[serde(default)]
    messages: BTreeMap<String, String>,
    /// The newest message taken: (time_created, id).
    #[serde(default)]
    newest: Option<(i64, String)>,
    /// Rows held back (the message still being written, and its parts).
    #[serde(default)]
    held: Vec<HeldRow>,
    /// Todo items by id -> status, for `todo.add` / `todo.update`.
    #[serde(default)]
    todos: BTreeMap<String, String>,
    /// Which fingerprint `seen` holds: [`LEGACY`] (absent in states
    /// written before 2026-12-07) or [`FOLDED`]. A state keeps the kind it
    /// began with, so its rows are compared as they were taken.
    #[serde(default)]
    fingerprints: u8,
}

/// [`fingerprint`]: FNV-1a of each column as serialized JSON.
const LEGACY: u8 = 0;
/// [`folded`]: the columns' values folded in eight bytes at a time.
const FOLDED: u8 = 1;

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct Facts {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    created: Option<String>,
    #[serde(default)]
    parent: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct Seen {
    /// The row's fingerprint, of the kind [`State::fingerprints`] names.
    hash: u64,
    /// The seq of the row's primary event.
    seq: u64,
    /// A tool part's status when last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
struct HeldRow {
    table: String,
    columns: Map<String, Value>,
}

/// Parses `rows` of one session; see the module docs.
pub fn parse_rows(rows: Vec<Row>, next_seq: u64, state: Option<Value>) -> Parsed {
    let mut warnings = Vec::new();
    let fresh = || State {
        fingerprints: FOLDED,
        ..State::default()
    };
    let state: State = match state {
        None | Some(Value::Null) => fresh(),
        Some(v) => serde_json::from_value(v).unwrap_or_else(|e| {
            warnings.push(Warning {
                line: 0,
                message: format!("capture state unreadable ({e}); starting afresh"),
            });
            fresh()
        }),
    };
    let mut p = Parser {
        state,
        events: Vec::new(),
        artifacts: Vec::new(),
        warnings,
        next_seq,
    };
    p.run(rows);
    let facts = &p.state.facts;
    let session = NativeSession {
        native_id: facts.id.clone(),
        cwd: facts.cwd.clone(),
        title: facts.title.clone(),
        created: facts.created.clone(),
        parent: facts.parent.clone().map(|native_id| NativeParent {
            native_id,
            spawned_by: None,
            continues: false,
        }),
    };
    Parsed {
        session,
        events: p.events,
        artifacts: p.artifacts,
        warnings: p.warnings,
        state: serde_json::to_value(&p.state).expect("state serializes"),
        refused: None,
        memo: Default::default(),
    }
}

struct Parser {
    state: State,
    events: Vec<Event>,
    artifacts: Vec<(ArtifactId, Vec<u8>)>,
    warnings: Vec<Warning>,
    next_seq: u64,
}

/// A message row with what ordering and settling need.
struct Msg {
    row: Row,
    created: i64,
    /// Why `data` is not an object, when it is not.
    unreadable: Option<String>,
}

impl Msg {
    /// The message's `data` object (parsed by [`Row::parse_data`]), or why
    /// there is none.
    fn data(&self) -> Result<&Map<String, Value>, &str> {
        match (self.row.columns.get("data"), &self.unreadable) {
            (Some(Value::Object(map)), _) => Ok(map),
            (_, Some(e)) => Err(e),
            (_, None) => Err("data is missing"),
        }
    }
}

/// A field of a row's data for an event body: a clone of the value, or
/// null.
fn field(value: Option<&Value>) -> Value {
    value.cloned().unwrap_or(Value::Null)
}

fn fingerprint(row: &Row) -> u64 {
    // Hashes the columns as serialized, without building the text.
    struct Fnv(u64);
    impl std::io::Write for Fnv {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            for b in bytes {
                self.0 ^= u64::from(*b);
                self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    for (k, v) in &row.columns {
        // OpenCode touches the session with every change; only a change of
        // its content (title, counters) is an update.
        if row.table == Table::Session && k == "time_updated" {
            continue;
        }
        let _ = std::io::Write::write_all(&mut h, k.as_bytes());
        let _ = serde_json::to_writer(&mut h, v);
    }
    h.0
}

/// The fingerprint of states begun from 2026-12-07 on: every column's name
/// and value (but a session's `time_updated`, as in [`fingerprint`]) mixed
/// in eight bytes at a time, each value with its kind and length, without
/// making any text. [`fingerprint`] wrote each value out as JSON and hashed
/// it a byte at a time: about 5 % of an OpenCode first import's CPU.
fn folded(row: &Row) -> u64 {
    let mut fold = Fold(0x243f_6a88_85a3_08d3);
    for (k, v) in &row.columns {
        if row.table == Table::Session && k == "time_updated" {
            continue;
        }
        fold.bytes(k.as_bytes());
        fold.value(v);
    }
    fold.finish()
}

struct Fold(u64);

impl Fold {
    fn word(&mut self, w: u64) {
        self.0 = (self.0 ^ w)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.word(bytes.len() as u64);
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.word(u64::from_le_bytes(w.try_into().expect("eight bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(last));
        }
    }

    fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.word(1),
            Value::Bool(b) => self.word(2 + u64::from(*b)),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => {
                    self.word(4);
                    self.word(u);
                }
                (None, Some(i)) => {
                    self.word(5);
                    self.word(i as u64);
                }
                (None, None) => {
                    self.word(6);
                    self.word(n.as_f64().unwrap_or(f64::NAN).to_bits());
                }
            },
            Value::String(text) => {
                self.word(7);
                self.bytes(text.as_bytes());
            }
            Value::Array(items) => {
                self.word(8);
                self.word(items.len() as u64);
                for item in items {
                    self.value(item);
                }
            }
            Value::Object(map) => {
                self.word(9);
                self.word(map.len() as u64);
                for (k, v) in map {
                    self.bytes(k.as_bytes());
                    self.value(v);
                }
            }
        }
    }

    /// The state, its bits spread once more (murmur3's finalizer).
    fn finish(self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

fn role_of(data: Result<&Map<String, Value>, &str>) -> String {
    data.ok()
        .and_then(|d| d.get("role"))
        .and_then(Value::as_str)
        .unwrap_or("assistant")
        .to_owned()
}

impl Parser {
    fn run(&mut self, rows: Vec<Row>) {
        // Held rows first, then the new ones; a newer version of a row
        // replaces an older one.
        let mut latest: Vec<Row> = Vec::new();
        let mut index: HashMap<(Table, String), usize> = HashMap::new();
        let held = std::mem::take(&mut self.state.held);
        let held = held.into_iter().filter_map(|h| {
            Table::parse(&h.table).map(|table| Row {
                table,
                columns: h.columns,
            })
        });
        for mut row in held.chain(rows) {
            row.parse_data();
            let key = (row.table, row.id().to_owned());
            match index.get(&key) {
                Some(&i) => latest[i] = row,
                None => {
                    index.insert(key, latest.len());
                    latest.push(row);
                }
            }
        }
        let mut messages = Vec::new();
        let mut parts: BTreeMap<String, Vec<Row>> = BTreeMap::new();
        for row in latest {
            match row.table {
                Table::Session => self.session(&row),
                Table::Message => messages.push(Msg {
                    created: row.int("time_created").unwrap_or(0),
                    unreadable: match row.columns.get("data") {
                        Some(Value::Object(_)) => None,
                        _ => row.data().err(),
                    },
                    row,
                }),
                Table::Part => parts
                    .entry(row.text("message_id").unwrap_or("").to_owned())
                    .or_default()
                    .push(row),
                Table::Project => {}
            }
        }
        for list in parts.values_mut() {
            list.sort_by(|a, b| a.id().cmp(b.id()));
        }
        messages.sort_by(|a, b| (a.created, a.row.id()).cmp(&(b.created, b.row.id())));
        // Parts of messages taken by an earlier call come first: they
        // belong to earlier messages.
        let known: Vec<String> = parts
            .keys()
            .filter(|m| self.state.messages.contains_key(*m))
            .filter(|m| !messages.iter().any(|x| x.row.id() == m.as_str()))
            .cloned()
            .collect();
        for m in known {
            let role = self.state.messages[&m].clone();
            for part in parts.remove(&m).unwrap_or_default() {
                self.part(part, &role);
            }
        }
        let count = messages.len();
        for (i, msg) in messages.into_iter().enumerate() {
            let id = msg.row.id().to_owned();
            let has_parts = parts.get(&id).is_some_and(|p| !p.is_empty());
            let later = i + 1 < count
                || self
                    .state
                    .newest
                    .as_ref()
                    .is_some_and(|(t, n)| (*t, n.as_str()) > (msg.created, id.as_str()));
            let settled = match msg.data() {
                Err(_) => true,
                Ok(d) => {
                    later
                        || self.state.messages.contains_key(&id)
                        || match d.get("role").and_then(Value::as_str) {
                            Some("user") => has_parts,
                            _ => ptr(d, "/time/completed").is_some_and(|v| !v.is_null()),
                        }
                }
            };
            if !settled {
                self.state.held.push(HeldRow {
                    table: Table::Message.name().into(),
                    columns: msg.row.columns,
                });
                for part in parts.remove(&id).unwrap_or_default() {
                    self.state.held.push(HeldRow {
                        table: Table::Part.name().into(),
                        columns: part.columns,
                    });
                }
                continue;
            }
            let role = role_of(msg.data());
            self.message(msg);
            for part in parts.remove(&id).unwrap_or_default() {
                self.part(part, &role);
            }
        }
        // What is left are parts whose message is nowhere.
        for (message, list) in parts {
            for part in list {
                self.warn(
                    Table::Part,
                    part.id(),
                    &format!("its message {message:?} is missing; kept as meta"),
                );
                let ts = self.ts_of(&part, None);
                let hash = self.hash(&part);
                let id = part.id().to_owned();
                let body = object([
                    ("opencode", json!("part.orphaned")),
                    (NATIVE_KEY, part.into_native()),
                ]);
                let seq = self.push(&ts, "system", kinds::META, Level::Native, body, &id, None);
                self.mark_hashed(Table::Part, &id, hash, seq, None);
            }
        }
    }

    /// `row`'s fingerprint of the kind this state holds.
    fn hash(&self, row: &Row) -> u64 {
        match self.state.fingerprints {
            LEGACY => fingerprint(row),
            _ => folded(row),
        }
    }

    fn warn(&mut self, table: Table, id: &str, what: &str) {
        self.warnings.push(Warning {
            line: 0,
            message: format!("table {} row {}: {what}", table.name(), escape(id)),
        });
    }

    fn ts_of(&self, row: &Row, data: Option<&Map<String, Value>>) -> String {
        let ms = data
            .and_then(|d| {
                ptr(d, "/time/start")
                    .or_else(|| ptr(d, "/time/created"))
                    .or_else(|| ptr(d, "/state/time/start"))
            })
            .and_then(Value::as_i64)
            .or_else(|| row.int("time_created"))
            .unwrap_or(0);
        ms_to_rfc3339(ms)
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        ts: &str,
        actor: &str,
        kind: &str,
        level: Level,
        payload: Value,
        native_id: &str,
        parent_seq: Option<u64>,
    ) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut event = Event::new(seq, ts, Agent::Opencode, actor, kind, level, payload);
        event.parent_seq = parent_seq;
        event.origin = Some(Origin {
            agent: Agent::Opencode,
            native_id: Some(native_id.to_owned()),
            native_seq: None,
            extra: Default::default(),
        });
        self.events.push(event);
        seq
    }

    /// Records a row as taken; returns its previous fingerprint entry.
    fn mark(&mut self, row: &Row, status: Option<String>) -> Option<Seen> {
        let seq = self.next_seq.saturating_sub(1);
        self.mark_hashed(row.table, row.id(), self.hash(row), seq, status)
    }

    /// Records a row by its table, id and fingerprint as taken at `seq`.
    fn mark_hashed(
        &mut self,
        table: Table,
        id: &str,
        hash: u64,
        seq: u64,
        status: Option<String>,
    ) -> Option<Seen> {
        let key = match table {
            Table::Session => "session".to_owned(),
            _ => id.to_owned(),
        };
        self.state.seen.insert(key, Seen { hash, seq, status })
    }

    /// Returns whether `row` was taken before unchanged, and its entry.
    fn seen(&self, row: &Row) -> (bool, Option<&Seen>) {
        self.seen_hashed(row, self.hash(row))
    }

    /// Like [`Parser::seen`], with the row's fingerprint already made.
    fn seen_hashed(&self, row: &Row, hash: u64) -> (bool, Option<&Seen>) {
        let key = match row.table {
            Table::Session => "session",
            _ => row.id(),
        };
        match self.state.seen.get(key) {
            Some(s) => (s.hash == hash, Some(s)),
            None => (false, None),
        }
    }

    fn session(&mut self, row: &Row) {
        let (same, before) = self.seen(row);
        if same {
            return;
        }
        let first = before.is_none();
        let facts = &mut self.state.facts;
        facts.id = row.text("id").map(str::to_owned);
        facts.cwd = row.text("directory").map(str::to_owned);
        facts.title = row.text("title").map(str::to_owned);
        facts.created = row.int("time_created").map(ms_to_rfc3339);
        facts.parent = row.text("parent_id").map(str::to_owned);
        let model = row
            .text("model")
            .and_then(|m| serde_json::from_str::<Value>(m).ok());
        let ts = ms_to_rfc3339(
            row.int(if first {
                "time_created"
            } else {
                "time_updated"
            })
            .unwrap_or(0),
        );
        let (kind, level, body) = if first {
            (
                kinds::SESSION_START,
                Level::Context,
                json!({
                    "cwd": row.text("directory"),
                    "title": row.text("title"),
                    "slug": row.text("slug"),
                    "version": row.text("version"),
                    "project_id": row.text("project_id"),
                    "parent_id": row.text("parent_id"),
                    "agent": row.text("agent"),
                    "model": model,
                    NATIVE_KEY: null,
                }),
            )
        } else {
            (
                kinds::META,
                Level::Native,
                json!({
                    "opencode": "session.updated",
                    "title": row.text("title"),
                    "tokens": {
                        "input": row.int("tokens_input"),
                        "output": row.int("tokens_output"),
                        "reasoning": row.int("tokens_reasoning"),
                    },
                    "cost": row.columns.get("cost"),
                    NATIVE_KEY: null,
                }),
            )
        };
        let native_id = if first {
            row.id().to_owned()
        } else {
            format!("{}@{}", row.id(), row.int("time_updated").unwrap_or(0))
        };
        let mut body = body;
        body[NATIVE_KEY] = row.to_native();
        self.push(&ts, "system", kind, level, body, &native_id, None);
        self.mark(row, None);
    }

    fn message(&mut self, msg: Msg) {
        let (same, before) = self.seen(&msg.row);
        if same {
            return;
        }
        let first = before.is_none();
        let id = msg.row.id().to_owned();
        if (msg.created, id.as_str())
            > self
                .state
                .newest
                .as_ref()
                .map_or((i64::MIN, ""), |(t, n)| (*t, n.as_str()))
        {
            self.state.newest = Some((msg.created, id.clone()));
        }
        let role = role_of(msg.data());
        self.state.messages.insert(id.clone(), role.clone());
        let ts = self.ts_of(&msg.row, msg.data().ok());
        let updated = msg.row.int("time_updated").unwrap_or(0);
        let hash = self.hash(&msg.row);
        let body = match msg.data() {
            Err(e) => {
                let e = e.to_owned();
                self.warn(Table::Message, &id, &format!("{e}; kept as meta"));
                json!({"opencode": "message.unreadable", NATIVE_KEY: msg.row.into_native()})
            }
            Ok(d) => {
                let model = d
                    .get("modelID")
                    .or_else(|| ptr(d, "/model/modelID"))
                    .cloned();
                let provider = d
                    .get("providerID")
                    .or_else(|| ptr(d, "/model/providerID"))
                    .cloned();
                let mut body = json!({
                    "opencode": if first { "message" } else { "message.updated" },
                    "role": role,
                    "model": field(model.as_ref()),
                    "provider": field(provider.as_ref()),
                    "agent": field(d.get("agent")),
                    "tokens": field(d.get("tokens")),
                    "cost": field(d.get("cost")),
                    "finish": field(d.get("finish")),
                    "error": field(d.get("error")),
                    NATIVE_KEY: null,
                });
                body[NATIVE_KEY] = msg.row.into_native();
                body
            }
        };
        let native_id = if first {
            id.clone()
        } else {
            format!("{id}@{updated}")
        };
        let seq = self.push(
            &ts,
            "system",
            kinds::META,
            Level::Native,
            body,
            &native_id,
            None,
        );
        self.mark_hashed(Table::Message, &id, hash, seq, None);
    }

    fn part(&mut self, mut row: Row, role: &str) {
        let hash = self.hash(&row);
        let (same, before) = self.seen_hashed(&row, hash);
        if same {
            return;
        }
        let before = before.cloned();
        let id = row.id().to_owned();
        if !matches!(row.columns.get("data"), Some(Value::Object(_))) {
            let e = row.data().err().unwrap_or_default();
            self.warn(Table::Part, &id, &format!("{e}; kept as meta"));
            let ts = self.ts_of(&row, None);
            let body = object([
                ("opencode", json!("part.unreadable")),
                (NATIVE_KEY, row.into_native()),
            ]);
            let seq = self.push(&ts, "system", kinds::META, Level::Native, body, &id, None);
            self.mark_hashed(Table::Part, &id, hash, seq, None);
            return;
        }
        if let Some(before) = before {
            if let Some(Value::Object(data)) = row.columns.get("data") {
                let ts = self.ts_of(&row, Some(data));
                self.update(&row, data, before, &ts);
            }
            return;
        }
        // The data object is moved out of the row while the event is made
        // from it, and back into the stored row at the end: a part's row
        // (most of a session's bytes) is never copied.
        let Some(Value::Object(mut data)) = row.columns.get_mut("data").map(std::mem::take) else {
            return;
        };
        let ts = self.ts_of(&row, Some(&data));
        let kind = data.get("type").and_then(Value::as_str).unwrap_or("");
        let user = role == "user";
        let actor = if user { "user" } else { ACTOR_AGENT };
        let text = data.get("text").and_then(Value::as_str).unwrap_or("");
        let mut refs = Vec::new();
        // Each body holds `NATIVE_KEY` where the stored row goes (filled in
        // at the end, in place, so the keys keep their order).
        let (actor, event_kind, level, body) = match kind {
            "text" => {
                let synthetic = data.get("synthetic").and_then(Value::as_bool) == Some(true);
                let mut body = json!({"text": text, NATIVE_KEY: null});
                if synthetic {
                    body["injected"] = json!(true);
                    body["opencode"] = json!("text");
                    ("system", kinds::META, Level::Native, body)
                } else if user {
                    (actor, kinds::MESSAGE_USER, Level::History, body)
                } else {
                    (actor, kinds::MESSAGE_ASSISTANT, Level::History, body)
                }
            }
            "reasoning" => {
                let body = json!({"text": text, NATIVE_KEY: null});
                (actor, kinds::MESSAGE_THINKING, Level::History, body)
            }
            "tool" => {
                let name = data.get("tool").and_then(Value::as_str).unwrap_or("");
                let call_id = data.get("callID").and_then(Value::as_str).unwrap_or("");
                let state = data.get("state").unwrap_or(&Value::Null);
                let st = state
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or("pending")
                    .to_owned();
                let body = object([
                    ("call_id", json!(call_id)),
                    ("name", json!(name)),
                    (
                        "arguments",
                        state.get("input").cloned().unwrap_or_else(|| json!({})),
                    ),
                    ("status", json!(st)),
                    (NATIVE_KEY, Value::Null),
                ]);
                let seq = self.push(
                    &ts,
                    ACTOR_AGENT,
                    kinds::TOOL_CALL,
                    Level::History,
                    body,
                    &id,
                    None,
                );
                let call = self.events.len() - 1;
                if matches!(st.as_str(), "completed" | "error") {
                    self.tool_done(&id, name, call_id, state, seq, None);
                }
                // The row goes into the call once the result was made from
                // its data (borrowed until here).
                let table = row.table;
                self.events[call].payload[NATIVE_KEY] = native_of(row, data);
                self.mark_hashed(table, &id, hash, seq, Some(st));
                return;
            }
            "file" => {
                let url = data
                    .get("url")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let mut artifact = None;
                let mut stored_url = None;
                if let Some(bytes) = data_url_bytes(&url) {
                    let aid = ArtifactId::of(&bytes);
                    refs.push(aid.to_ref());
                    stored_url = Some(format!("artifact:{}", aid.hex()));
                    if !self.artifacts.iter().any(|(a, _)| *a == aid) {
                        self.artifacts.push((aid.clone(), bytes));
                    }
                    artifact = Some(aid.to_string());
                }
                let file = object([
                    ("mime", field(data.get("mime"))),
                    ("filename", field(data.get("filename"))),
                    (
                        "url",
                        if artifact.is_some() {
                            Value::Null
                        } else {
                            json!(url)
                        },
                    ),
                    ("artifact", json!(artifact)),
                ]);
                let body = object([("file", file), (NATIVE_KEY, Value::Null)]);
                if let Some(stored) = stored_url {
                    data.insert("url".into(), json!(stored));
                    data.insert(
                        "gitSessionDataUrl".into(),
                        json!(url.split(',').next().unwrap_or("")),
                    );
                }
                let kind = if user {
                    kinds::MESSAGE_USER
                } else {
                    kinds::MESSAGE_ASSISTANT
                };
                (actor, kind, Level::History, body)
            }
            "patch" => {
                let body = object([
                    ("reason", json!("snapshot")),
                    ("snapshot", field(data.get("hash"))),
                    ("files", field(data.get("files"))),
                    (NATIVE_KEY, Value::Null),
                ]);
                ("system", kinds::CHECKPOINT, Level::Context, body)
            }
            "snapshot" => {
                let body = object([
                    ("reason", json!("snapshot")),
                    ("snapshot", field(data.get("snapshot"))),
                    (NATIVE_KEY, Value::Null),
                ]);
                ("system", kinds::CHECKPOINT, Level::Context, body)
            }
            "compaction" => {
                let body = object([
                    ("reason", json!("compaction")),
                    ("auto", field(data.get("auto"))),
                    (NATIVE_KEY, Value::Null),
                ]);
                ("system", kinds::CHECKPOINT, Level::Context, body)
            }
            "step-start" | "step-finish" | "agent" | "subtask" | "retry" => {
                let mut body = json!({"opencode": kind, NATIVE_KEY: null});
                for key in [
                    "snapshot",
                    "reason",
                    "tokens",
                    "cost",
                    "name",
                    "agent",
                    "prompt",
                    "description",
                    "attempt",
                    "error",
                ] {
                    if let Some(v) = data.get(key) {
                        body[key] = v.clone();
                    }
                }
                ("system", kinds::META, Level::Native, body)
            }
            other => {
                let body = json!({"opencode": format!("part.{other}"), NATIVE_KEY: null});
                ("system", kinds::META, Level::Native, body)
            }
        };
        let table = row.table;
        let body = with_native(body, row, data);
        self.push(&ts, actor, event_kind, level, body, &id, None);
        if !refs.is_empty()
            && let Some(e) = self.events.last_mut()
        {
            e.refs = refs;
        }
        let seq = self.next_seq.saturating_sub(1);
        self.mark_hashed(table, &id, hash, seq, None);
    }

    fn mark_at(&mut self, row: &Row, seq: u64, status: Option<String>) {
        self.state.seen.insert(
            row.id().to_owned(),
            Seen {
                hash: self.hash(row),
                seq,
                status,
            },
        );
    }

    /// A row taken before came again with other content.
    fn update(&mut self, row: &Row, data: &Map<String, Value>, before: Seen, ts: &str) {
        let id = row.id().to_owned();
        let updated = row.int("time_updated").unwrap_or(0);
        let state = data.get("state").unwrap_or(&Value::Null);
        let st = state.get("status").and_then(Value::as_str);
        let was_open = matches!(before.status.as_deref(), Some("pending" | "running"));
        if data.get("type").and_then(Value::as_str) == Some("tool")
            && was_open
            && matches!(st, Some("completed" | "error"))
        {
            let name = data.get("tool").and_then(Value::as_str).unwrap_or("");
            let call_id = data.get("callID").and_then(Value::as_str).unwrap_or("");
            self.tool_done(&id, name, call_id, state, before.seq, Some(row.to_native()));
        } else {
            let body = object([
                ("opencode", json!("part.updated")),
                ("part", json!(id)),
                ("status", json!(st)),
                (NATIVE_KEY, row.to_native()),
            ]);
            self.push(
                ts,
                "system",
                kinds::META,
                Level::Native,
                body,
                &format!("{id}@{updated}"),
                Some(before.seq),
            );
        }
        self.mark_at(row, before.seq, st.map(str::to_owned));
    }

    /// Emits the result of a finished tool part and what derives from it.
    fn tool_done(
        &mut self,
        part: &str,
        name: &str,
        call_id: &str,
        state: &Value,
        call_seq: u64,
        native: Option<Value>,
    ) {
        let error = state.get("status").and_then(Value::as_str) == Some("error");
        // A command that ran and exited non-zero is stored `completed` with
        // `metadata.exit`; it failed all the same.
        let exit = state.pointer("/metadata/exit").and_then(Value::as_i64);
        let failed = error || exit.is_some_and(|c| c != 0);
        let output = if error {
            state.get("error").and_then(Value::as_str).unwrap_or("")
        } else {
            state.get("output").and_then(Value::as_str).unwrap_or("")
        };
        let ms = state
            .pointer("/time/end")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let ts = ms_to_rfc3339(ms);
        let mut body = json!({
            "call_id": call_id,
            "name": name,
            "output": output,
            "is_error": failed,
        });
        if let Some(code) = exit.filter(|c| *c != 0) {
            body["exit_code"] = json!(code);
        }
        if let Some(n) = native {
            body[NATIVE_KEY] = n;
        }
        let result = self.push(
            &ts,
            "tool",
            kinds::TOOL_RESULT,
            Level::History,
            body,
            &format!("{part}/tool.result"),
            Some(call_seq),
        );
        let input = state.get("input").unwrap_or(&Value::Null);
        let metadata = state.get("metadata").unwrap_or(&Value::Null);
        let path = input
            .get("filePath")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match name {
            "bash" if !error => {
                let tail = tail(output, OUTPUT_TAIL);
                let body = object([
                    ("cmd", field(input.get("command"))),
                    ("exit_code", field(metadata.get("exit"))),
                    ("output_tail", json!(tail)),
                    ("call_id", json!(call_id)),
                ]);
                self.push(
                    &ts,
                    ACTOR_AGENT,
                    kinds::COMMAND_RUN,
                    Level::Context,
                    body,
                    &format!("{part}/command.run"),
                    Some(result),
                );
            }
            "edit" | "write" | "patch" | "multiedit" if !error => {
                let body = object([
                    ("path", json!(path)),
                    ("diff", field(metadata.get("diff"))),
                    ("tool", json!(name)),
                    ("call_id", json!(call_id)),
                ]);
                self.push(
                    &ts,
                    ACTOR_AGENT,
                    kinds::FILE_EDIT,
                    Level::Context,
                    body,
                    &format!("{part}/file.edit"),
                    Some(result),
                );
            }
            "read" if !error => {
                let body = object([
                    ("path", json!(path)),
                    ("offset", field(input.get("offset"))),
                    ("limit", field(input.get("limit"))),
                    ("call_id", json!(call_id)),
                ]);
                self.push(
                    &ts,
                    ACTOR_AGENT,
                    kinds::FILE_READ,
                    Level::Context,
                    body,
                    &format!("{part}/file.read"),
                    Some(result),
                );
            }
            "todowrite" if !error => {
                let todos = input
                    .get("todos")
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice);
                for (i, todo) in todos.iter().enumerate() {
                    let tid = todo
                        .get("id")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .or_else(|| {
                            todo.get("content")
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                        })
                        .unwrap_or_else(|| i.to_string());
                    let status = todo
                        .get("status")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    let kind = match self.state.todos.get(&tid) {
                        None => kinds::TODO_ADD,
                        Some(s) if *s != status => kinds::TODO_UPDATE,
                        Some(_) => continue,
                    };
                    self.state.todos.insert(tid.clone(), status.clone());
                    let body = object([
                        ("id", json!(tid)),
                        ("content", field(todo.get("content"))),
                        ("status", json!(status)),
                        ("priority", field(todo.get("priority"))),
                    ]);
                    self.push(
                        &ts,
                        ACTOR_AGENT,
                        kind,
                        Level::Context,
                        body,
                        &format!("{part}/{kind}/{i}"),
                        Some(result),
                    );
                }
            }
            _ => {}
        }
    }
}

/// Puts the stored form of a part row ([`native_of`]) at `NATIVE_KEY` of
/// `body`.
fn with_native(mut body: Value, row: Row, data: Map<String, Value>) -> Value {
    body[NATIVE_KEY] = native_of(row, data);
    body
}

/// Returns the stored form of a part row ([`Row::into_native`]), its
/// `data` object (moved out while the events were made from it) moved
/// back in.
fn native_of(mut row: Row, data: Map<String, Value>) -> Value {
    row.columns.insert("data".into(), Value::Object(data));
    row.into_native()
}

/// Returns the last `max` bytes of `text`, cut at a char boundary.
fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Decodes a `data:<mime>;base64,<bytes>` URL.
fn data_url_bytes(url: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let rest = url.strip_prefix("data:")?;
    let (head, body) = rest.split_once(',')?;
    if !head.ends_with(";base64") {
        return None;
    }
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

/// Escapes control characters in an untrusted id before it is printed.
fn escape(text: &str) -> String {
    text.chars()
        .flat_map(char::escape_default)
        .take(200)
        .collect()
}

#[cfg(test)]
mod fingerprint_tests {
    use serde_json::json;

    use super::*;

    fn row(table: Table, columns: Value) -> Row {
        Row {
            table,
            columns: columns.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn a_rows_fingerprint_is_the_one_stored_states_hold() {
        let part = row(
            Table::Part,
            json!({
                "id": "prt_1", "message_id": "msg_1", "session_id": "ses_1",
                "time_created": 1_767_225_600_000_i64, "time_updated": 1,
                "data": {"type": "tool", "state": {"status": "completed",
                    "output": "a \"quoted\"\n\ttab\u{1} é中😀 \\ path", "time": {"start": 1.5}}},
                "$rowid": 7
            }),
        );
        // Pinned: stored capture states hold these values, so a change
        // would report every stored row as updated on the next capture.
        assert_eq!(fingerprint(&part), 0x21f8_678c_35bd_0398);
        let session = row(
            Table::Session,
            json!({"id": "ses_1", "title": "t\u{7f}", "time_updated": 5, "$rowid": 1}),
        );
        let mut touched = session.clone();
        touched.columns.insert("time_updated".into(), json!(6));
        assert_eq!(fingerprint(&session), fingerprint(&touched));
        // The folded kind, pinned the same way.
        assert_eq!(folded(&part), 0x9881_5520_f613_574e);
        assert_eq!(folded(&session), folded(&touched));
    }

    #[test]
    fn a_folded_fingerprint_sees_every_change_of_a_column() {
        let base = json!({
            "id": "prt_1", "time_created": 5,
            "data": {"a": [1, "x", null], "b": {"c": true, "d": -2, "e": 1.5}},
        });
        let hash = |v: &Value| folded(&row(Table::Part, v.clone()));
        let changed = [
            json!({"id": "prt_1", "time_created": 6, "data": base["data"]}),
            json!({"id": "prt_1", "time_created": 5, "data": {"a": [1, "x"], "b": base["data"]["b"]}}),
            json!({"id": "prt_1", "time_created": 5, "data": {"a": [1, "x", null, null], "b": base["data"]["b"]}}),
            json!({"id": "prt_1", "time_created": 5, "data": {"a": [1, "y", null], "b": base["data"]["b"]}}),
            json!({"id": "prt_1", "time_created": 5, "data": {"a": ["1", "x", null], "b": base["data"]["b"]}}),
            json!({"id": "prt_1", "time_created": 5, "data": {"a": [1, "x", false], "b": base["data"]["b"]}}),
            json!({"id": "prt_1", "time_created": 5, "data": {"a": [1, "x", null], "b": {"c": true, "d": 2, "e": 1.5}}}),
            json!({"id": "prt_1", "time_created": 5, "data": {"a": [1, "x", null], "b": {"c": true, "d": -2, "e": 1.25}}}),
            json!({"id": "prt_1", "time_created": 5, "data": {"a": [1, "x", null], "b": {"c": true, "d": -2, "f": 1.5}}}),
            json!({"id": "prt_1", "time_created": 5, "data": {"a": [1, "x", null], "b": {"c": true, "d": -2}}}),
            json!({"id": "prt_2", "time_created": 5, "data": base["data"]}),
            // The same bytes split between a key and its value otherwise.
            json!({"id": "prt_1", "time_created": 5, "data": {"a": [1, "x", null], "b": {"c": true, "d": -2, "e": 1.5}}, "x": "y"}),
        ];
        let first = hash(&base);
        assert_eq!(first, hash(&base.clone()));
        for (i, v) in changed.iter().enumerate() {
            assert_ne!(hash(v), first, "change {i} unseen");
        }
        let ab = json!({"id": "ab", "data": "c"});
        let a_bc = json!({"id": "a", "data": "bc"});
        assert_ne!(hash(&ab), hash(&a_bc));
    }

    /// A state written before the folded fingerprint (no `fingerprints`
    /// member, FNV-1a in `seen`) still knows its rows: given them again
    /// unchanged nothing is new, changed they are updates, and the state
    /// keeps its kind. A new state folds.
    #[test]
    fn a_state_keeps_the_fingerprint_it_began_with() {
        let rows = || {
            vec![
                row(
                    Table::Session,
                    json!({"id": "ses_1", "directory": "/r", "title": "t", "time_created": 1, "time_updated": 1}),
                ),
                row(
                    Table::Message,
                    json!({"id": "msg_1", "session_id": "ses_1", "time_created": 2,
                    "data": {"role": "user", "time": {"created": 2}}}),
                ),
                row(
                    Table::Part,
                    json!({"id": "prt_1", "message_id": "msg_1", "session_id": "ses_1", "time_created": 2,
                    "data": {"type": "text", "text": "hello"}}),
                ),
            ]
        };
        let first = parse_rows(rows(), 0, None);
        assert_eq!(first.state["fingerprints"], json!(FOLDED));
        assert!(!first.events.is_empty());
        let again = parse_rows(rows(), first.events.len() as u64, Some(first.state.clone()));
        assert!(again.events.is_empty(), "{:?}", again.events);

        // The same state as an earlier version wrote it.
        let mut legacy = first.state.clone();
        legacy.as_object_mut().unwrap().remove("fingerprints");
        for r in rows() {
            let key = if r.table == Table::Session {
                "session".to_owned()
            } else {
                r.id().to_owned()
            };
            legacy["seen"][&key]["hash"] = json!(fingerprint(&r));
        }
        let again = parse_rows(rows(), first.events.len() as u64, Some(legacy.clone()));
        assert!(again.events.is_empty(), "{:?}", again.events);
        assert_eq!(again.state["fingerprints"], json!(LEGACY));
        let mut changed = rows();
        changed[2].columns["data"]["text"] = json!("hello again");
        let updated = parse_rows(changed, first.events.len() as u64, Some(legacy));
        assert_eq!(updated.events.len(), 1, "{:?}", updated.events);
        assert_eq!(updated.state["fingerprints"], json!(LEGACY));
    }
}
