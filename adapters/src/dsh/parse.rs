//! dsh records to canonical events.
//!
//! Input is the *logical* log: the decoded JSONL lines (the root crate
//! walks the zstd frames, verifies them and hands over complete lines;
//! line 0 is the header). Every record gives one primary event that keeps
//! the whole record under [`super::NATIVE_KEY`], so same-agent write-back
//! writes the records back as dsh wrote them; an `assistant/message` gives
//! one event per part (thinking, text), and a finished tool call adds
//! derived events. Secondary and derived events carry no record.
//!
//! Origins are by dsh seq (`<session id>#<seq>`, `native_seq` = seq), not
//! by line or byte: dsh's crash repair truncates a log at a frame start and
//! rewrites the recovered records in a new frame, so the same record can
//! move, but never changes its seq. A re-read is then reconciled without
//! duplicates.

use std::collections::BTreeMap;
use std::path::Path;

use git_session_schema::{Agent, Event, Level, Origin, kinds};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::derive::{self, Pending};
use super::wire::{self, Header};
use super::{ACTOR_AGENT, NATIVE_KEY};
use crate::{NativeParent, NativeSession, ParseInput, Parsed, Position, Warning};

/// Holds what a parse of one log must remember for the next slice.
///
/// Local and rebuildable: an unreadable state is a warning and a fresh start.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(super) struct State {
    /// The header's facts, once read.
    #[serde(default)]
    header: Option<HeaderFacts>,
    /// The seq the next record should have (dsh's seqs are dense).
    #[serde(default)]
    next_native: u64,
    /// The last record's time (ms), for records that lack one.
    #[serde(default)]
    last_time: u64,
    /// Tool calls waiting for their result, by call id.
    #[serde(default)]
    calls: BTreeMap<String, Pending>,
    /// The todo list as `todo_write` last set it.
    #[serde(default)]
    todos: Vec<crate::claude::derive::Todo>,
    /// The latest title.
    #[serde(default)]
    title: Option<String>,
    /// The seq of the last `session/end-seed {"inherited": true}` marker:
    /// the number of records the fork inherited from its parent.
    #[serde(default)]
    inherited: Option<u64>,
}

/// Holds the [`Header`] facts in serializable form.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct HeaderFacts {
    id: String,
    created_at: u64,
    cwd: Option<String>,
    parent: Option<String>,
    is_seeded: bool,
}

impl From<&Header> for HeaderFacts {
    fn from(h: &Header) -> HeaderFacts {
        HeaderFacts {
            id: h.id.clone(),
            created_at: h.created_at,
            cwd: h.cwd.clone(),
            parent: h.parent.clone(),
            is_seeded: h.is_seeded,
        }
    }
}

struct Parser<'a> {
    state: State,
    /// Why this build cannot read the log, once known.
    refused: Option<String>,
    next_seq: u64,
    events: Vec<Event>,
    warnings: Vec<Warning>,
    source: &'a str,
}

/// Parses complete decoded lines of one dsh log.
pub(super) fn parse(input: ParseInput<'_>) -> Parsed {
    let mut warnings = Vec::new();
    let state = match input.state {
        None | Some(Value::Null) => State::default(),
        Some(value) => serde_json::from_value(value).unwrap_or_else(|e| {
            warnings.push(Warning {
                line: input.records.first_ordinal(),
                message: format!("parse state unreadable ({e}); starting without it"),
            });
            State::default()
        }),
    };
    let mut p = Parser {
        state,
        refused: None,
        next_seq: input.next_seq,
        events: Vec::new(),
        warnings,
        source: input.source,
    };
    for record in input.records.iter() {
        // dsh lists sessions from the first frame alone, and refuses a log
        // whose first frame is more than the header line.
        if let Position::Frame {
            frame: 0,
            offset,
            line: 1..,
        } = record.pos
        {
            p.refused = Some(format!(
                "corrupt Zstandard session log: frame at byte {offset} is the first frame but does not hold exactly the header line"
            ));
            break;
        }
        p.line(record.pos.ordinal(), record.bytes);
        if p.refused.is_some() {
            break;
        }
    }
    let session = p.session();
    let state = serde_json::to_value(&p.state).expect("the parse state always serializes");
    Parsed {
        session,
        events: p.events,
        warnings: p.warnings,
        state,
        refused: p.refused,
        ..Default::default()
    }
}

/// Returns the number of fork-inherited records a parse state has seen
/// (the seq of the last `session/end-seed {"inherited": true}`).
pub(super) fn inherited(state: &Value) -> Option<u64> {
    state.get("inherited").and_then(Value::as_u64)
}

impl Parser<'_> {
    fn session(&self) -> NativeSession {
        let Some(h) = &self.state.header else {
            return NativeSession::default();
        };
        NativeSession {
            native_id: Some(h.id.clone()),
            cwd: h.cwd.clone(),
            title: self.state.title.clone(),
            created: Some(rfc3339_ms(h.created_at)),
            parent: h.parent.clone().map(|native_id| NativeParent {
                native_id,
                spawned_by: None,
                continues: false,
            }),
        }
    }

    fn warn(&mut self, line: u64, message: String) {
        self.warnings.push(Warning {
            line,
            message: format!("{}: {message}", self.source),
        });
    }

    fn sid(&self) -> &str {
        self.state
            .header
            .as_ref()
            .map_or("unknown", |h| h.id.as_str())
    }

    /// Returns the session id that names a record's events: the parent's
    /// for the records a seeded fork inherited (those before its
    /// `session/end-seed {"inherited": true}` marker: copies of the
    /// parent's first records), so that they have the parent's origins and
    /// capture finds the exact prefix the fork shares with its parent.
    fn record_sid(&self) -> &str {
        match &self.state.header {
            Some(HeaderFacts {
                is_seeded: true,
                parent: Some(parent),
                ..
            }) if self.state.inherited.is_none() => parent,
            _ => self.sid(),
        }
    }

    /// Appends an event and returns its seq. `part` names a secondary or
    /// derived event of the same record.
    fn push(
        &mut self,
        native_seq: Option<u64>,
        part: Option<&str>,
        actor: &str,
        kind: &str,
        level: Level,
        payload: Value,
    ) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let at = native_seq.map_or_else(|| "header".to_owned(), |s| s.to_string());
        let sid = if native_seq.is_some() {
            self.record_sid()
        } else {
            self.sid()
        };
        let native_id = match part {
            None => format!("{sid}#{at}"),
            Some(p) => format!("{sid}#{at}/{p}"),
        };
        let ts = rfc3339_ms(self.state.last_time);
        let mut event = Event::new(seq, ts, Agent::Dsh, actor, kind, level, payload);
        event.origin = Some(Origin {
            agent: Agent::Dsh,
            native_id: Some(native_id),
            native_seq,
            extra: BTreeMap::new(),
        });
        self.events.push(event);
        seq
    }

    /// Keeps a line that is not a record as an unparsed `meta` event.
    fn unparsed(&mut self, line_no: u64, raw: &[u8], why: String) {
        self.warn(line_no, format!("{why}; kept as an unparsed meta event"));
        let payload = json!({"unparsed": String::from_utf8_lossy(raw), "error": why});
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut event = Event::new(
            seq,
            rfc3339_ms(self.state.last_time),
            Agent::Dsh,
            "system",
            kinds::META,
            Level::History,
            payload,
        );
        event.origin = Some(Origin {
            agent: Agent::Dsh,
            native_id: Some(format!("{}#L{line_no}", self.sid())),
            native_seq: None,
            extra: BTreeMap::new(),
        });
        self.events.push(event);
    }

    fn line(&mut self, line_no: u64, raw: &[u8]) {
        let record: Map<String, Value> = match serde_json::from_slice(raw) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return self.unparsed(line_no, raw, "not a JSON object".into()),
            Err(e) => return self.unparsed(line_no, raw, format!("not JSON ({e})")),
        };
        if self.state.header.is_none()
            && record.get("type").and_then(Value::as_str) == Some("session")
        {
            return self.header(line_no, raw, record);
        }
        let (Some(kind), Some(seq)) = (
            record
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_owned),
            record.get("seq").and_then(Value::as_u64),
        ) else {
            return self.unparsed(line_no, raw, "record without type or seq".into());
        };
        if let Some(t) = record.get("time").and_then(Value::as_u64) {
            self.state.last_time = t;
        }
        if seq != self.state.next_native {
            self.warn(
                line_no,
                format!(
                    "seq gap (expected {}, got {seq}); dsh refuses such a log",
                    self.state.next_native
                ),
            );
        }
        self.state.next_native = seq + 1;
        if let Some(extra) = record
            .keys()
            .find(|k| !wire::ENVELOPE_KEYS.contains(&k.as_str()))
        {
            self.warn(
                line_no,
                format!("record seq {seq} has unexpected field {extra:?}; dsh refuses such a log"),
            );
        }
        let ignorable = record.get("ignorable") == Some(&Value::Bool(true));
        if !wire::is_known_type(&kind) && !ignorable {
            self.warn(
                line_no,
                format!(
                    "event type {kind:?} (seq {seq}) is unknown to dsh 0.2.1 and not marked ignorable; kept as meta"
                ),
            );
        }
        self.record(seq, &kind, record);
    }

    fn header(&mut self, line_no: u64, raw: &[u8], record: Map<String, Value>) {
        // The file name states the generation too, and dsh refuses a log
        // whose name and header disagree.
        let named = Path::new(self.source)
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(wire::log_name);
        let checked = wire::check_header(raw).and_then(|h| match named {
            Some(wire::LogName::Log { version, .. }) if version != h.version => {
                Err(wire::HeaderError::Generation {
                    named: version,
                    header: h.version,
                })
            }
            _ => Ok(h),
        });
        match checked {
            Ok(h) => {
                self.state.last_time = h.created_at;
                self.state.header = Some(HeaderFacts::from(&h));
                if let Some(extra) = record.keys().find(|k| {
                    !wire::HEADER_KEYS.contains(&k.as_str())
                        && k.as_str() != wire::HEADER_KEY_PRESET
                }) {
                    self.warn(
                        line_no,
                        format!(
                            "header has unknown key {extra:?}; dsh does not list such a session"
                        ),
                    );
                }
                let payload = json!({
                    "cwd": h.cwd,
                    "native_id": h.id,
                    "format_version": h.version,
                    "is_seeded": h.is_seeded,
                    "parent": h.parent,
                    "origin": h.origin,
                    "delegation_depth": h.delegation_depth,
                    NATIVE_KEY: Value::Object(record),
                });
                self.push(
                    None,
                    None,
                    "system",
                    kinds::SESSION_START,
                    Level::Native,
                    payload,
                );
            }
            Err(e) => {
                // Facts still count, so capture can tell whether the log
                // belongs to this repository before refusing it.
                let str_of = |k: &str| record.get(k).and_then(Value::as_str).map(str::to_owned);
                self.state.header = Some(HeaderFacts {
                    id: str_of("id").unwrap_or_default(),
                    cwd: str_of("cwd"),
                    ..HeaderFacts::default()
                });
                self.warn(line_no, e.to_string());
                self.refused = Some(format!("dsh session log refused: {e}"));
            }
        }
    }

    /// Maps one record; `record` moves into the primary event.
    ///
    /// The payload is read in place (`data` borrows the record), so a
    /// record is never copied: it is parsed once and moves into the event.
    fn record(&mut self, seq: u64, kind: &str, record: Map<String, Value>) {
        let native = Value::Object(record);
        let data = native.get("data").unwrap_or(&Value::Null);
        match kind {
            "user/message" => {
                let text = content_text(data.get("content"));
                let source = data.pointer("/source/kind").and_then(Value::as_str);
                let (actor, kind, level, body) = match source {
                    Some("user") => (
                        "user",
                        kinds::MESSAGE_USER,
                        Level::History,
                        json!({"text": text, "message_id": data.get("id")}),
                    ),
                    Some("compact-checkpoint") => (
                        "system",
                        kinds::CHECKPOINT,
                        Level::Context,
                        json!({"reason": "compaction", "summary": text}),
                    ),
                    other => (
                        "system",
                        kinds::META,
                        Level::Native,
                        json!({"dsh": "user/message", "source": other, "role": "user", "text": text, "injected": true}),
                    ),
                };
                self.primary(seq, actor, kind, level, body, native);
            }
            "assistant/message" => self.assistant(seq, native),
            "tool/call" => {
                let call_id = str_of(data, "callId").unwrap_or_default().to_owned();
                let name = str_of(data, "name").unwrap_or_default().to_owned();
                let raw_args = str_of(data, "arguments").unwrap_or("");
                let arguments = serde_json::from_str::<Value>(raw_args)
                    .unwrap_or_else(|_| Value::String(raw_args.to_owned()));
                let body = json!({"call_id": call_id, "name": name, "arguments": arguments});
                let call_seq = self.primary(
                    seq,
                    ACTOR_AGENT,
                    kinds::TOOL_CALL,
                    Level::History,
                    body,
                    native,
                );
                self.state.calls.insert(
                    call_id,
                    Pending {
                        name,
                        input: arguments,
                        seq: call_seq,
                    },
                );
            }
            "tool/result" => self.tool_result(seq, native),
            "system/message" | "developer/message" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                let body = json!({
                    "dsh": kind,
                    "role": message.get("role"),
                    "text": content_text(message.get("content")),
                });
                self.primary(seq, "system", kinds::META, Level::Native, body, native);
            }
            "compaction/summary" => {
                let summary = content_text(data.get("summary"));
                let body = json!({"reason": "compaction", "summary": summary, "dsh": kind});
                self.primary(
                    seq,
                    "system",
                    kinds::CHECKPOINT,
                    Level::Context,
                    body,
                    native,
                );
            }
            "session/title" => {
                if let Some(t) = str_of(data, "title") {
                    self.state.title = Some(t.to_owned());
                }
                let body = json!({"dsh": kind, "title": data.get("title")});
                self.primary(seq, "system", kinds::META, Level::Native, body, native);
            }
            "session/end-seed" => {
                let inherited = data.get("inherited") == Some(&Value::Bool(true));
                if inherited {
                    self.state.inherited = Some(seq);
                }
                let body = json!({"dsh": kind, "inherited": inherited});
                self.primary(seq, "system", kinds::META, Level::Native, body, native);
            }
            "subagent/catalog" => {
                let body = json!({"dsh": kind, "child": data.get("childId"), "label": data.get("label"), "mode": data.get("mode")});
                self.primary(seq, "system", kinds::META, Level::Native, body, native);
            }
            "todo/write" => {
                let body = json!({"dsh": kind});
                self.primary(seq, "system", kinds::META, Level::Native, body, native);
            }
            "turn/end" => {
                let body = json!({"dsh": kind, "turn": data.get("turn"), "reason": data.pointer("/reason/kind")});
                self.primary(seq, "system", kinds::META, Level::Native, body, native);
            }
            other => {
                let mut body = json!({"dsh": other});
                if !wire::is_known_type(other) {
                    body["unknown"] = json!(true);
                }
                for key in ["turn", "step"] {
                    if let Some(v) = data.get(key).filter(|v| v.is_u64()) {
                        body[key] = v.clone();
                    }
                }
                self.primary(seq, "system", kinds::META, Level::Native, body, native);
            }
        }
    }

    /// Pushes the event that keeps the record.
    fn primary(
        &mut self,
        seq: u64,
        actor: &str,
        kind: &str,
        level: Level,
        mut body: Value,
        native: Value,
    ) -> u64 {
        strip_nulls(&mut body);
        body[NATIVE_KEY] = native;
        self.push(Some(seq), None, actor, kind, level, body)
    }

    /// Maps an assistant message: one event per reasoning block, then the
    /// text; the first event keeps the record. Tool-call blocks are not
    /// events here: the `tool/call` record that follows is the call.
    fn assistant(&mut self, seq: u64, native: Value) {
        let data = native.get("data").unwrap_or(&Value::Null);
        let message = data.get("message").unwrap_or(&Value::Null);
        let blocks = message
            .get("content")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let model = message.pointer("/source/model").and_then(Value::as_str);
        let mut parts: Vec<(&'static str, Level, Value)> = Vec::new();
        for (i, block) in blocks.iter().enumerate() {
            if block.get("type").and_then(Value::as_str) == Some("reasoning") {
                let signed = message
                    .pointer(&format!("/source/replayState/blocks/{i}/signature"))
                    .is_some();
                parts.push((
                    kinds::MESSAGE_THINKING,
                    Level::Context,
                    json!({"text": str_of(block, "text").unwrap_or(""), "signed": signed}),
                ));
            }
        }
        let text = content_text(message.get("content"));
        let calls = blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool-call"))
            .count();
        if !text.is_empty() || parts.is_empty() {
            parts.push((
                kinds::MESSAGE_ASSISTANT,
                Level::History,
                json!({"text": text, "model": model, "tool_calls": calls, "message_id": message.get("id")}),
            ));
        }
        let mut native = Some(native);
        for (i, (kind, level, mut body)) in parts.into_iter().enumerate() {
            strip_nulls(&mut body);
            match native.take() {
                Some(n) => {
                    body[NATIVE_KEY] = n;
                    self.push(Some(seq), None, ACTOR_AGENT, kind, level, body);
                }
                None => {
                    self.push(
                        Some(seq),
                        Some(&i.to_string()),
                        ACTOR_AGENT,
                        kind,
                        level,
                        body,
                    );
                }
            }
        }
    }

    fn tool_result(&mut self, seq: u64, native: Value) {
        let data = native.get("data").unwrap_or(&Value::Null);
        let message = data.get("message").unwrap_or(&Value::Null);
        let call_id = str_of(message, "toolCallId")
            .or_else(|| message.pointer("/source/callId").and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        let output = content_text(message.get("content"));
        let is_error = message.get("isError") == Some(&Value::Bool(true));
        let call = self.state.calls.remove(&call_id);
        let mut body = json!({
            "call_id": call_id,
            "name": call.as_ref().map(|c| c.name.clone()),
            "output": output,
            "is_error": is_error,
            "error_code": data.pointer("/error/code"),
        });
        strip_nulls(&mut body);
        body[NATIVE_KEY] = native;
        let result_seq = self.push(
            Some(seq),
            None,
            "tool",
            kinds::TOOL_RESULT,
            Level::History,
            body,
        );
        let Some(call) = call else {
            return;
        };
        self.events
            .last_mut()
            .expect("the result was just pushed")
            .parent_seq = Some(call.seq);
        let derived = derive::derive(&call, &call_id, &output, is_error, &mut self.state.todos);
        for (i, d) in derived.into_iter().enumerate() {
            let part = format!("{}{i}", d.kind);
            let seq_d = self.push(
                Some(seq),
                Some(&part),
                ACTOR_AGENT,
                d.kind,
                Level::Context,
                d.payload,
            );
            self.events.last_mut().expect("just pushed").parent_seq = Some(result_seq);
            let _ = seq_d;
        }
    }
}

fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

/// Returns the text blocks of a content array, joined by newlines.
fn content_text(content: Option<&Value>) -> String {
    let Some(blocks) = content.and_then(Value::as_array) else {
        return content.and_then(Value::as_str).unwrap_or("").to_owned();
    };
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| str_of(b, "text"))
        .collect();
    texts.join("\n")
}

fn strip_nulls(body: &mut Value) {
    if let Value::Object(map) = body {
        map.retain(|_, v| !v.is_null());
    }
}

/// Formats Unix milliseconds as RFC 3339 UTC with milliseconds.
pub(super) fn rfc3339_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Returns Unix milliseconds for an RFC 3339 UTC time (`Z` or `+00:00`,
/// optional fraction); `None` when it is not one.
pub(super) fn unix_ms(ts: &str) -> Option<u64> {
    let b = ts.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut ms = 0;
    if b.get(19) == Some(&b'.') {
        let frac: String = ts[20..].chars().take_while(char::is_ascii_digit).collect();
        let padded = format!("{frac:0<3}");
        ms = padded.get(..3)?.parse::<i64>().ok()?;
    }
    let days = days_from_civil(y, mo, d);
    let total = ((days * 86_400 + h * 3600 + mi * 60 + s) * 1000) + ms;
    u64::try_from(total).ok()
}

// Howard Hinnant's civil calendar algorithms.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        assert_eq!(rfc3339_ms(1795939069106), "2026-11-29T07:57:49.106Z");
        assert_eq!(unix_ms("2026-11-29T07:57:49.106Z"), Some(1795939069106));
        assert_eq!(unix_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(unix_ms("garbage"), None);
    }
}
