//! `state.db` rows to canonical events (the mapping table is in the module
//! docs of [`super`]).

use std::collections::BTreeMap;

use git_session_schema::{Agent, ArtifactId, Event, Level, Origin, kinds};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::derive::{self, Todo};
use super::wire::{self, Content, Link, MessageRow, SessionRow};
use super::{ARTIFACT_MARK, NATIVE_KEY, Record, Table, time};
use crate::{NativeParent, NativeSession, Parsed, Warning};

/// The actor of Hermes' own messages and tool calls.
pub(super) const ACTOR_AGENT: &str = "agent:hermes";

/// Holds what a parse must remember for the next batch of rows of the same
/// canonical session. Local and rebuildable; an unreadable state is a
/// warning and a fresh start.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct State {
    /// The native id of the chain's first session.
    #[serde(default)]
    root: Option<String>,
    /// Sessions seen, by id: their columns (long text as a digest), to tell
    /// what a changed row changed.
    #[serde(default)]
    sessions: BTreeMap<String, Seen>,
    /// Tool calls waiting for their result, by call id.
    #[serde(default)]
    calls: BTreeMap<String, Call>,
    /// The todo list as last reported.
    #[serde(default)]
    todos: Vec<Todo>,
    /// The last event time, for rows without one.
    #[serde(default)]
    last_ts: Option<String>,
    /// Session facts so far.
    #[serde(default)]
    facts: Facts,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct Seen {
    columns: Map<String, Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct Call {
    seq: u64,
    name: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct Facts {
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    created: Option<String>,
    #[serde(default)]
    parent: Option<String>,
    /// The first session continues its parent (see [`NativeParent::continues`]).
    #[serde(default)]
    continues: bool,
}

/// Columns whose text is long and never needed to tell a change apart in
/// full: kept in the state as a digest.
const DIGESTED: &[&str] = &["system_prompt"];

/// Maps rows (sessions and their messages, in replay order) to events
/// numbered from `next_seq`.
pub fn parse(records: Vec<Record>, next_seq: u64, state: Option<Value>) -> Parsed {
    let mut warnings = Vec::new();
    let state = match state {
        None | Some(Value::Null) => State::default(),
        Some(value) => serde_json::from_value(value).unwrap_or_else(|e| {
            warnings.push(Warning {
                line: 0,
                message: format!("parse state unreadable ({e}); starting without it"),
            });
            State::default()
        }),
    };
    let mut p = Parser {
        state,
        next_seq,
        events: Vec::new(),
        artifacts: Vec::new(),
        warnings,
    };
    for record in records {
        match record.table {
            Table::Sessions => p.session(record.row),
            Table::Messages => p.message(record.row),
        }
    }
    let facts = &p.state.facts;
    let session = NativeSession {
        native_id: p.state.root.clone(),
        cwd: facts.cwd.clone(),
        title: facts.title.clone(),
        created: facts.created.clone(),
        parent: facts.parent.clone().map(|native_id| NativeParent {
            native_id,
            spawned_by: None,
            continues: facts.continues,
        }),
    };
    let state = serde_json::to_value(&p.state).expect("the parse state always serializes");
    Parsed {
        session,
        events: p.events,
        artifacts: p.artifacts,
        warnings: p.warnings,
        state,
        refused: None,
        memo: Default::default(),
    }
}

struct Parser {
    state: State,
    next_seq: u64,
    events: Vec<Event>,
    artifacts: Vec<(ArtifactId, Vec<u8>)>,
    warnings: Vec<Warning>,
}

/// Holds one event of a row before it is numbered.
struct Mapped {
    actor: &'static str,
    kind: &'static str,
    level: Level,
    payload: Value,
    refs: Vec<String>,
    /// Set on a tool call: remember it under this call id.
    call: Option<(String, Call)>,
}

impl Mapped {
    fn new(actor: &'static str, kind: &'static str, level: Level, payload: Value) -> Mapped {
        Mapped {
            actor,
            kind,
            level,
            payload,
            refs: Vec::new(),
            call: None,
        }
    }
}

impl Parser {
    fn warn(&mut self, line: i64, message: String) {
        self.warnings.push(Warning {
            line: line.max(0) as u64,
            message,
        });
    }

    /// Numbers the events of one row; the first keeps the row under
    /// [`NATIVE_KEY`] and gets the row's own origin, the others
    /// `<origin>/<suffix>`.
    fn push_row(
        &mut self,
        origin: &str,
        native_seq: Option<u64>,
        ts: &str,
        native: Option<Value>,
        mapped: Vec<Mapped>,
    ) -> Vec<u64> {
        let mut seqs = Vec::new();
        let mut native = native;
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for mut m in mapped {
            let seq = self.next_seq;
            self.next_seq += 1;
            let native_id = match (seqs.is_empty(), native.take()) {
                (true, n) => {
                    if let (Value::Object(p), Some(n)) = (&mut m.payload, n) {
                        p.insert(NATIVE_KEY.into(), n);
                    }
                    origin.to_owned()
                }
                (false, _) => {
                    let k = count.entry(m.kind).or_default();
                    *k += 1;
                    format!(
                        "{origin}/{}{}",
                        m.kind,
                        if *k > 1 {
                            format!(":{k}")
                        } else {
                            String::new()
                        }
                    )
                }
            };
            strip_nulls(&mut m.payload);
            let mut event = Event::new(seq, ts, Agent::Hermes, m.actor, m.kind, m.level, m.payload);
            event.refs = m.refs;
            event.origin = Some(Origin {
                agent: Agent::Hermes,
                native_id: Some(native_id),
                native_seq,
                extra: BTreeMap::new(),
            });
            if let Some((id, mut call)) = m.call {
                call.seq = seq;
                self.state.calls.insert(id, call);
            }
            self.events.push(event);
            seqs.push(seq);
        }
        seqs
    }

    fn ts(&mut self, secs: Option<f64>) -> String {
        match secs {
            Some(s) if s.is_finite() => {
                let ts = time::to_rfc3339(s);
                self.state.last_ts = Some(ts.clone());
                ts
            }
            _ => self
                .state
                .last_ts
                .clone()
                .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_owned()),
        }
    }

    // ------------------------------------------------------------ sessions

    /// Reads a `sessions` row that has a column of the wrong type (text
    /// where Hermes writes a number) without those columns, and says which:
    /// one bad column must not cost the session its id and cwd, which place
    /// it in a repository. The native row is kept whole either way.
    fn salvage_session(&mut self, row: &Map<String, Value>) -> Option<SessionRow> {
        let mut kept = row.clone();
        kept.retain(|k, v| {
            let one = Map::from_iter([(k.clone(), v.clone())]);
            SessionRow::deserialize(Value::Object(one)).is_ok()
        });
        let s = SessionRow::deserialize(Value::Object(kept.clone())).ok()?;
        let bad: Vec<&str> = row
            .keys()
            .filter(|k| !kept.contains_key(*k))
            .map(String::as_str)
            .collect();
        self.warn(
            0,
            format!(
                "sessions row {:?}: {} of an unexpected type; read as missing (the row is kept whole)",
                s.id,
                bad.join(", ")
            ),
        );
        Some(s)
    }

    fn session(&mut self, row: Map<String, Value>) {
        let s = match SessionRow::deserialize(Value::Object(row.clone())) {
            Ok(s) => Some(s),
            Err(_) => self.salvage_session(&row),
        };
        let s = match s {
            Some(s) if !s.id.is_empty() => s,
            _ => {
                self.warn(0, "sessions row without a readable id; kept as meta".into());
                let ts = self.ts(None);
                let native = json!({"table": "sessions", "row": row});
                let body = json!({"hermes": "sessions", "unparsed": true});
                self.push_row("sessions#?", None, &ts, Some(native), vec![meta(body)]);
                return;
            }
        };
        let digest = digest_columns(&row);
        if let Some(seen) = self.state.sessions.get(&s.id) {
            // A row seen before: record what changed (title, counters,
            // ended_at, …); nothing when it is the same.
            let mut changed = Map::new();
            for (k, v) in &digest {
                if seen.columns.get(k) != Some(v) {
                    changed.insert(k.clone(), row.get(k).cloned().unwrap_or(Value::Null));
                }
            }
            for k in seen.columns.keys().filter(|k| !digest.contains_key(*k)) {
                changed.insert(k.clone(), Value::Null);
            }
            if changed.is_empty() {
                return;
            }
            // Any title of the chain names it; the newest wins.
            if let Some(t) = &s.title {
                self.state.facts.title = Some(t.clone());
            }
            let hash = ArtifactId::of(Value::Object(changed.clone()).to_string().as_bytes());
            let origin = format!("{}@{}", s.id, &hash.hex()[..16]);
            let body = json!({"hermes": "sessions.update", "session": s.id, "changed": changed});
            self.state
                .sessions
                .insert(s.id.clone(), Seen { columns: digest });
            let ts = self.ts(s.ended_at);
            // The update is kept whole in `changed`; no native row twice.
            self.push_row(&origin, None, &ts, None, vec![meta(body)]);
            return;
        }
        let parent_end = s
            .parent_session_id
            .as_deref()
            .and_then(|p| self.state.sessions.get(p))
            .and_then(|seen| seen.columns.get("end_reason"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let link = s.link(parent_end.as_deref());
        let ts = self.ts(s.started_at);
        self.state
            .sessions
            .insert(s.id.clone(), Seen { columns: digest });
        let native = json!({"table": "sessions", "row": row});
        let tool_session = s.source.as_deref() == Some("tool");
        let config = s.config();
        // Hermes resumes into any plain child (not a branch, a delegate run
        // or a `tool` session) as the continuation of its parent, whether or
        // not the parent's `end_reason` was written yet.
        let continuation = matches!(link, Link::Compression | Link::Child);
        let first = self.state.root.is_none();
        if first {
            self.state.root = Some(s.id.clone());
            let facts = &mut self.state.facts;
            facts.cwd = s.cwd.clone().or_else(|| s.git_repo_root.clone());
            facts.title = s.title.clone();
            facts.created = s.started_at.map(time::to_rfc3339);
            facts.parent = s.parent_session_id.clone().filter(|_| link != Link::Root);
            facts.continues = continuation;
        } else if let Some(t) = &s.title {
            self.state.facts.title = Some(t.clone());
        }
        if first && !continuation {
            let body = json!({
                "cwd": s.cwd,
                "git_repo_root": s.git_repo_root,
                "source": s.source,
                "model": s.model,
                "title": s.title,
                "parent_session_id": s.parent_session_id,
                "link": link_name(link),
                "branched_from": config.get("_branched_from"),
                "delegate_from": config.get("_delegate_from"),
                "tool_session": tool_session,
            });
            let m = Mapped::new("system", kinds::SESSION_START, Level::Context, body);
            self.push_row(&s.id, None, &ts, Some(native), vec![m]);
            return;
        }
        if !continuation {
            self.warn(
                0,
                format!(
                    "sessions row {}: a {} of {:?}, not a continuation; kept in this session",
                    s.id,
                    link_name(link),
                    s.parent_session_id
                ),
            );
        }
        let body = json!({
            "reason": "compression",
            "session": s.id,
            "parent_session_id": s.parent_session_id,
            "cwd": s.cwd,
            "title": s.title,
        });
        let m = Mapped::new("system", kinds::CHECKPOINT, Level::Context, body);
        self.push_row(&s.id, None, &ts, Some(native), vec![m]);
    }

    // ------------------------------------------------------------ messages

    fn message(&mut self, row: Map<String, Value>) {
        // Read from the row in place: cloning it would copy its content.
        let whole = Value::Object(row);
        let read = MessageRow::deserialize(&whole);
        let Value::Object(mut row) = whole else {
            unreachable!("the row was put in an object just above")
        };
        let m = match read {
            Ok(m) => m,
            Err(e) => {
                let id = row.get("id").and_then(Value::as_i64).unwrap_or(0);
                self.warn(
                    id,
                    format!("messages row {id}: not understood ({e}); kept as meta"),
                );
                let ts = self.ts(None);
                let native = json!({"table": "messages", "row": row});
                let body = json!({"hermes": "messages", "unparsed": true, "error": e.to_string()});
                self.push_row(
                    &format!("messages#{id}"),
                    Some(id.max(0) as u64),
                    &ts,
                    Some(native),
                    vec![meta(body)],
                );
                return;
            }
        };
        let ts = self.ts(m.timestamp);
        let origin = format!("{}#{}", m.session_id, m.id);
        let native_seq = Some(m.id.max(0) as u64);
        let (text, parts, refs) = self.content(&m, &mut row);
        let native = native_row("messages", row);
        let compacted = m.compacted.unwrap_or(0) != 0;
        if !m.is_live() || compacted {
            // Not live history: Hermes does not replay it, so neither do we.
            let body = json!({
                "hermes": "messages",
                "role": m.role,
                "text": text,
                "rewound": !m.is_live() && !compacted,
                "compacted": compacted,
            });
            self.push_row(&origin, native_seq, &ts, Some(native), vec![meta(body)]);
            return;
        }
        let mapped = match m.role.as_str() {
            "user" => {
                let mut body = json!({"text": text});
                if let Some(p) = parts {
                    body["content"] = Value::Array(p);
                }
                let mut e = Mapped::new("user", kinds::MESSAGE_USER, Level::History, body);
                e.refs = refs;
                vec![e]
            }
            "assistant" => match self.assistant(&m, text) {
                Some(events) => events,
                None => {
                    let body = json!({"hermes": "messages", "role": "assistant", "unparsed": "tool_calls"});
                    vec![meta(body)]
                }
            },
            "tool" => match m.tool_call_id.as_deref() {
                Some(call_id) if !call_id.is_empty() => {
                    return self.tool_result(
                        &m,
                        call_id,
                        text,
                        (&origin, native_seq, &ts),
                        Some(native),
                    );
                }
                _ => {
                    self.warn(
                        m.id,
                        format!(
                            "messages row {}: tool row without tool_call_id; kept as meta",
                            m.id
                        ),
                    );
                    vec![meta(
                        json!({"hermes": "messages", "role": "tool", "text": text, "orphan": true}),
                    )]
                }
            },
            other => vec![meta(
                json!({"hermes": "messages", "role": other, "text": text}),
            )],
        };
        self.push_row(&origin, native_seq, &ts, Some(native), mapped);
    }

    /// Returns the events of a live assistant row, or `None` when its
    /// `tool_calls` cannot be read (a warning says so).
    fn assistant(&mut self, m: &MessageRow, text: String) -> Option<Vec<Mapped>> {
        let calls = match m.tool_calls.as_deref().filter(|t| !t.is_empty()) {
            None => Vec::new(),
            Some(t) => {
                match wire::tool_calls(t) {
                    Ok(calls) => calls,
                    Err(e) => {
                        self.warn(
                        m.id,
                        format!("messages row {}: tool_calls is not valid JSON ({e}); row kept as meta", m.id),
                    );
                        return None;
                    }
                }
            }
        };
        let mut out = Vec::new();
        let reasoning = m.reasoning.clone().or_else(|| m.reasoning_content.clone());
        let opaque = m.reasoning_details.is_some() || m.codex_reasoning_items.is_some();
        if reasoning.is_some() || opaque {
            out.push(Mapped::new(
                ACTOR_AGENT,
                kinds::MESSAGE_THINKING,
                Level::Context,
                // Provider-bound reasoning stays in the native row only.
                json!({"text": reasoning.unwrap_or_default(), "opaque": opaque}),
            ));
        }
        if !text.is_empty() || calls.is_empty() {
            out.push(Mapped::new(
                ACTOR_AGENT,
                kinds::MESSAGE_ASSISTANT,
                Level::History,
                json!({"text": text, "finish_reason": m.finish_reason}),
            ));
        }
        for c in calls {
            let arguments = serde_json::from_str::<Value>(&c.function.arguments)
                .unwrap_or_else(|_| Value::String(c.function.arguments.clone()));
            let mut e = Mapped::new(
                ACTOR_AGENT,
                kinds::TOOL_CALL,
                Level::History,
                json!({
                    "call_id": c.id,
                    "name": c.function.name,
                    "arguments": arguments,
                    // Responses-API bookkeeping: not part of the call.
                    "hermes": {"call_id": c.call_id, "response_item_id": c.response_item_id},
                }),
            );
            e.call = Some((
                c.id.clone(),
                Call {
                    seq: 0,
                    name: c.function.name.clone(),
                    arguments,
                },
            ));
            out.push(e);
        }
        Some(out)
    }

    fn tool_result(
        &mut self,
        m: &MessageRow,
        call_id: &str,
        text: String,
        (origin, native_seq, ts): (&str, Option<u64>, &str),
        native: Option<Value>,
    ) {
        // A call is answered once; forgetting it keeps the state as small as
        // the number of calls still open.
        let call = self.state.calls.remove(call_id);
        if call.is_none() {
            self.warn(
                m.id,
                format!("messages row {}: result for unknown call id {call_id:?}; kept without a parent", m.id),
            );
        }
        let name = m
            .tool_name
            .clone()
            .or_else(|| call.as_ref().map(|c| c.name.clone()));
        let result: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let is_error = derive::is_error(&result);
        drop(result);
        let mut derived = Vec::new();
        if let Some(c) = &call {
            for d in derive::derive(call_id, &c.name, &c.arguments, &text, &mut self.state.todos) {
                let mut e = Mapped::new(ACTOR_AGENT, d.kind, Level::Context, d.payload);
                e.payload["derived_from"] = json!({"call_seq": c.seq});
                derived.push(e);
            }
        }
        // Built by hand, so the output is moved in (`json!` copies it).
        let mut body = Map::with_capacity(4);
        body.insert("call_id".into(), call_id.into());
        body.insert("name".into(), name.into());
        body.insert("output".into(), Value::String(text));
        body.insert("is_error".into(), is_error.into());
        let mut mapped = vec![Mapped::new(
            "tool",
            kinds::TOOL_RESULT,
            Level::History,
            Value::Object(body),
        )];
        mapped.append(&mut derived);
        let first = self.next_seq;
        let seqs = self.push_row(origin, native_seq, ts, native, mapped);
        let parent = call.map(|c| c.seq);
        for e in self.events.iter_mut().filter(|e| seqs.contains(&e.seq)) {
            e.parent_seq = if e.seq == first { parent } else { Some(first) };
            if e.seq != first
                && let Some(d) = e.payload.get_mut("derived_from")
            {
                d["result_seq"] = json!(first);
            }
        }
    }

    /// Returns the text of a row's content, its parts when multimodal, and
    /// the artifacts its images became; images in `row` are replaced by
    /// artifact references so their bytes are stored once.
    fn content(
        &mut self,
        m: &MessageRow,
        row: &mut Map<String, Value>,
    ) -> (String, Option<Vec<Value>>, Vec<String>) {
        let parts = match wire::content(m.content.as_deref()) {
            Content::Text(t) => return (t, None, Vec::new()),
            Content::Parts(p) => p,
        };
        let mut refs = Vec::new();
        let mut texts = Vec::new();
        let mut kept = Vec::new();
        let mut canonical = Vec::new();
        for mut part in parts {
            if let Some(t) = part.get("text").and_then(Value::as_str) {
                texts.push(t.to_owned());
                canonical.push(part.clone());
            } else if let Some(url) = part.pointer("/image_url/url").and_then(Value::as_str)
                && let Some((media, data)) = data_url(url)
                && let Some(id) = self.image(data)
            {
                let reference = format!("data:{media};base64,{ARTIFACT_MARK}{id}");
                canonical.push(
                    json!({"type": "image", "media_type": media, "artifact": id.to_string()}),
                );
                part["image_url"]["url"] = Value::String(reference);
                refs.push(id.to_ref());
            } else {
                canonical.push(part.clone());
            }
            kept.push(part);
        }
        if !refs.is_empty() {
            let text = format!("{}{}", wire::MULTIMODAL_PREFIX, Value::Array(kept));
            row.insert("content".into(), Value::String(text));
        }
        (texts.join("\n"), Some(canonical), refs)
    }

    /// Decodes base64 image bytes into an artifact; `None` keeps them inline.
    fn image(&mut self, data: &str) -> Option<ArtifactId> {
        crate::images::decode(data, &mut self.artifacts)
    }
}

/// Splits `data:<media>;base64,<data>`.
fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (media, data) = rest.split_once(";base64,")?;
    Some((media, data))
}

/// Returns a native row as events keep it under [`NATIVE_KEY`]:
/// `{"table": …, "row": …}` (built by hand: `json!` would copy the row).
fn native_row(table: &str, row: Map<String, Value>) -> Value {
    let mut native = Map::with_capacity(2);
    native.insert("table".into(), table.into());
    native.insert("row".into(), Value::Object(row));
    Value::Object(native)
}

fn meta(body: Value) -> Mapped {
    Mapped::new("system", kinds::META, Level::Native, body)
}

fn link_name(link: Link) -> &'static str {
    match link {
        Link::Root => "root",
        Link::Compression => "compression",
        Link::Branch => "branch",
        Link::Delegate => "delegate",
        Link::Tool => "tool",
        Link::Child => "child",
    }
}

/// Returns the columns of a session row as the state keeps them.
fn digest_columns(row: &Map<String, Value>) -> Map<String, Value> {
    row.iter()
        .map(|(k, v)| match (DIGESTED.contains(&k.as_str()), v) {
            (true, Value::String(s)) => {
                (k.clone(), json!(ArtifactId::of(s.as_bytes()).to_string()))
            }
            _ => (k.clone(), v.clone()),
        })
        .collect()
}

fn strip_nulls(body: &mut Value) {
    if let Value::Object(map) = body {
        map.retain(|k, v| !v.is_null() || k == NATIVE_KEY);
    }
}
