//! OpenCode's rows and documents as the client writes them
//! (`shared/formats/opencode.md`, observed with `opencode-ai` 1.18.33).
//!
//! A row is its columns by name, exactly as SQLite returned them; `data`
//! columns are JSON text holding the message or part object *without* the
//! keys that are columns (`id`, `sessionID`, `messageID`). The export
//! document (`opencode export`, read by `opencode import`) is the other
//! shape: session info with camel-case keys and nested objects, each
//! message with its parts, ids inside the objects.

use serde_json::{Map, Value, json};

/// The tables a session is read from, and written to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// `project`: one row per repository (id = its root commit hash).
    Project,
    /// `session`: one row per session.
    Session,
    /// `message`: one row per user message or model request.
    Message,
    /// `part`: the content of a message, in part id order.
    Part,
}

impl Table {
    /// Returns the SQL table name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Project => "project",
            Table::Session => "session",
            Table::Message => "message",
            Table::Part => "part",
        }
    }

    /// Parses a table name.
    pub fn parse(name: &str) -> Option<Table> {
        match name {
            "project" => Some(Table::Project),
            "session" => Some(Table::Session),
            "message" => Some(Table::Message),
            "part" => Some(Table::Part),
            _ => None,
        }
    }

    /// Returns the columns a capture needs from the table: a database
    /// without them has a schema this build does not know.
    pub fn required_columns(self) -> &'static [&'static str] {
        match self {
            Table::Project => &[
                "id",
                "worktree",
                "time_created",
                "time_updated",
                "sandboxes",
            ],
            Table::Session => &[
                "id",
                "project_id",
                "parent_id",
                "slug",
                "directory",
                "title",
                "version",
                "time_created",
                "time_updated",
            ],
            Table::Message => &["id", "session_id", "time_created", "time_updated", "data"],
            Table::Part => &[
                "id",
                "message_id",
                "session_id",
                "time_created",
                "time_updated",
                "data",
            ],
        }
    }
}

/// Holds one row of a session's tables.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The table it came from.
    pub table: Table,
    /// Its columns by name (`data` as the JSON text SQLite holds).
    pub columns: Map<String, Value>,
}

impl Row {
    /// Returns a text column.
    pub fn text(&self, column: &str) -> Option<&str> {
        self.columns.get(column).and_then(Value::as_str)
    }

    /// Returns an integer column (SQLite integers; reals are truncated).
    pub fn int(&self, column: &str) -> Option<i64> {
        let v = self.columns.get(column)?;
        v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))
    }

    /// Returns the row's primary key.
    pub fn id(&self) -> &str {
        self.text("id").unwrap_or("")
    }

    /// Parses the `data` column: the object, or why it is not one.
    pub fn data(&self) -> Result<Map<String, Value>, String> {
        match self.columns.get("data") {
            Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(map)) => Ok(map),
                Ok(_) => Err("data is JSON but not an object".into()),
                Err(e) => Err(format!("data is not valid JSON ({e})")),
            },
            // A caller that parsed it already.
            Some(Value::Object(map)) => Ok(map.clone()),
            Some(Value::Null) | None => Err("data is missing".into()),
            Some(_) => Err("data is not text".into()),
        }
    }

    /// Returns the row as stored in an event: columns by name with `data`
    /// parsed when it is a JSON object (kept as text otherwise).
    pub fn to_native(&self) -> Value {
        self.clone().into_native()
    }

    /// Like [`Row::to_native`], moving the columns in.
    pub fn into_native(mut self) -> Value {
        if let Some(Value::String(text)) = self.columns.get("data")
            && let Ok(Value::Object(data)) = serde_json::from_str::<Value>(text)
        {
            self.columns.insert("data".into(), Value::Object(data));
        }
        let mut native = Map::with_capacity(2);
        native.insert("table".into(), Value::from(self.table.name()));
        native.insert("row".into(), Value::Object(self.columns));
        Value::Object(native)
    }

    /// Parses a `data` column held as JSON text into the object, once, so
    /// later reads need no parse (text that is no object stays text).
    pub fn parse_data(&mut self) {
        if let Some(Value::String(text)) = self.columns.get("data")
            && let Ok(Value::Object(data)) = serde_json::from_str::<Value>(text)
        {
            self.columns.insert("data".into(), Value::Object(data));
        }
    }

    /// Reads a row back from [`Row::to_native`]'s value.
    pub fn from_native(native: &Value) -> Option<Row> {
        let table = Table::parse(native.get("table")?.as_str()?)?;
        let columns = native.get("row")?.as_object()?.clone();
        Some(Row { table, columns })
    }

    /// Returns the columns with `data` as JSON text, ready to insert.
    pub fn to_insert(&self) -> Map<String, Value> {
        let mut columns = self.columns.clone();
        if let Some(Value::Object(map)) = columns.get("data") {
            let text = Value::Object(map.clone()).to_string();
            columns.insert("data".into(), Value::String(text));
        }
        columns
    }
}

/// The session columns that map one to one onto export info keys.
const SESSION_PLAIN: [(&str, &str); 7] = [
    ("id", "id"),
    ("slug", "slug"),
    ("project_id", "projectID"),
    ("workspace_id", "workspaceID"),
    ("parent_id", "parentID"),
    ("directory", "directory"),
    ("path", "path"),
];

/// More plain columns, after the first group.
const SESSION_PLAIN_2: [(&str, &str); 4] = [
    ("title", "title"),
    ("agent", "agent"),
    ("version", "version"),
    ("cost", "cost"),
];

/// Session columns that hold JSON text and are objects in the export.
const SESSION_JSON: [(&str, &str); 4] = [
    ("model", "model"),
    ("permission", "permission"),
    ("revert", "revert"),
    ("metadata", "metadata"),
];

/// Converts a `session` row's columns to the export's `info` object.
pub fn session_info(columns: &Map<String, Value>) -> Map<String, Value> {
    let mut info = Map::new();
    let get = |c: &str| columns.get(c).filter(|v| !v.is_null());
    for (col, key) in SESSION_PLAIN.iter().chain(SESSION_PLAIN_2.iter()) {
        if let Some(v) = get(col) {
            // SQLite REAL 0.0 is JavaScript's 0.
            let v = match v.as_f64() {
                Some(f) if v.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => json!(f as i64),
                _ => v.clone(),
            };
            info.insert((*key).into(), v);
        }
    }
    for (col, key) in SESSION_JSON {
        if let Some(v) = get(col) {
            let v = match v {
                Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| v.clone()),
                other => other.clone(),
            };
            info.insert(key.into(), v);
        }
    }
    if let Some(url) = get("share_url") {
        info.insert("share".into(), json!({ "url": url }));
    }
    let mut summary = Map::new();
    for (col, key) in [
        ("summary_additions", "additions"),
        ("summary_deletions", "deletions"),
        ("summary_files", "files"),
    ] {
        if let Some(v) = get(col) {
            summary.insert(key.into(), v.clone());
        }
    }
    if let Some(v) = get("summary_diffs") {
        let v = match v {
            Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| v.clone()),
            other => other.clone(),
        };
        summary.insert("diffs".into(), v);
    }
    if !summary.is_empty() {
        info.insert("summary".into(), Value::Object(summary));
    }
    let tokens_present = [
        "tokens_input",
        "tokens_output",
        "tokens_reasoning",
        "tokens_cache_read",
        "tokens_cache_write",
    ]
    .iter()
    .any(|c| get(c).is_some());
    if tokens_present {
        let n = |c: &str| get(c).cloned().unwrap_or(json!(0));
        info.insert(
            "tokens".into(),
            json!({
                "input": n("tokens_input"),
                "output": n("tokens_output"),
                "reasoning": n("tokens_reasoning"),
                "cache": {"read": n("tokens_cache_read"), "write": n("tokens_cache_write")},
            }),
        );
    }
    let mut time = Map::new();
    for (col, key) in [
        ("time_created", "created"),
        ("time_updated", "updated"),
        ("time_compacting", "compacting"),
        ("time_archived", "archived"),
    ] {
        if let Some(v) = get(col) {
            time.insert(key.into(), v.clone());
        }
    }
    info.insert("time".into(), Value::Object(time));
    info
}

/// Converts export `info` back to `session` columns (JSON columns as text).
pub fn session_columns(info: &Map<String, Value>) -> Map<String, Value> {
    let mut columns = Map::new();
    for (col, key) in SESSION_PLAIN.iter().chain(SESSION_PLAIN_2.iter()) {
        if let Some(v) = info.get(*key).filter(|v| !v.is_null()) {
            columns.insert((*col).into(), v.clone());
        }
    }
    for (col, key) in SESSION_JSON {
        if let Some(v) = info.get(key).filter(|v| !v.is_null()) {
            columns.insert(col.into(), Value::String(v.to_string()));
        }
    }
    if let Some(url) = ptr(info, "/share/url") {
        columns.insert("share_url".into(), url.clone());
    }
    for (col, path) in [
        ("summary_additions", "/summary/additions"),
        ("summary_deletions", "/summary/deletions"),
        ("summary_files", "/summary/files"),
        ("tokens_input", "/tokens/input"),
        ("tokens_output", "/tokens/output"),
        ("tokens_reasoning", "/tokens/reasoning"),
        ("tokens_cache_read", "/tokens/cache/read"),
        ("tokens_cache_write", "/tokens/cache/write"),
        ("time_created", "/time/created"),
        ("time_updated", "/time/updated"),
        ("time_compacting", "/time/compacting"),
        ("time_archived", "/time/archived"),
    ] {
        if let Some(v) = ptr(info, path).filter(|v| !v.is_null()) {
            columns.insert(col.into(), v.clone());
        }
    }
    if let Some(v) = ptr(info, "/summary/diffs").filter(|v| !v.is_null()) {
        columns.insert("summary_diffs".into(), Value::String(v.to_string()));
    }
    columns
}

/// Looks up a JSON pointer (`/a/b`) in an object.
pub fn ptr<'a>(map: &'a Map<String, Value>, pointer: &str) -> Option<&'a Value> {
    let rest = pointer.strip_prefix('/')?;
    let (first, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let v = map.get(first)?;
    if tail.is_empty() {
        Some(v)
    } else {
        v.pointer(&format!("/{tail}"))
    }
}
