//! OpenCode's older JSON `storage/` tree as rows of its database.
//!
//! Releases before 1.2 kept every session as JSON files under
//! `$XDG_DATA_HOME/opencode/storage/` (1.2 and later migrate them into
//! `opencode.db` on first start):
//!
//! ```text
//! storage/project/<projectID>.json
//! storage/session/<projectID>/<sessionID>.json
//! storage/message/<sessionID>/<messageID>.json
//! storage/part/<messageID>/<partID>.json
//! ```
//!
//! Each file holds the object a database row's `data` holds, plus its ids
//! (`id`, `sessionID`, `messageID`); a session file holds the session's
//! fields in their JSON names (`projectID`, `parentID`, `time.created`,
//! ...). [`row`] turns a file into the row OpenCode's migration would have
//! written, so [`super::parse`] maps both sources with one mapping. Ids are
//! taken from the path (file and directory names, each checked by
//! [`valid`]); an object whose own `id` disagrees with its file name is
//! refused.

use serde_json::{Map, Value, json};

use super::ids;
use crate::source::{JsonTree, TreeIds};

/// OpenCode's `storage/` tree, read as the rows of its database (`opencode*.db`).
pub static TREE: JsonTree = JsonTree {
    dir: "storage",
    database: &super::DB,
    sessions: "session",
    messages: "message",
    parts: "part",
    valid,
    row,
};

/// Says whether a file or directory name is an id of `table` (`ses_…`,
/// `msg_…`, `prt_…`), or, for `group`, a project id (the root commit hash,
/// `global`, or an older release's hash: letters, digits, `_` and `-`).
pub fn valid(table: &str, id: &str) -> bool {
    match table {
        "session" => ids::valid("ses", id),
        "message" => ids::valid("msg", id),
        "part" => ids::valid("prt", id),
        "group" => {
            !id.is_empty()
                && id.len() <= 128
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        }
        _ => false,
    }
}

/// Returns the row of `table` a tree file's `object` stands for (see the
/// module docs), or why it cannot be one.
pub fn row(table: &str, ids: &TreeIds<'_>, object: Value) -> Result<Map<String, Value>, String> {
    let Value::Object(mut data) = object else {
        return Err("not a JSON object".into());
    };
    match data.get("id") {
        Some(Value::String(id)) if id == ids.id => {}
        None => {}
        Some(other) => {
            return Err(format!("its id {other} is not its file name {:?}", ids.id));
        }
    }
    let int =
        |v: Option<&Value>| v.and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)));
    let mut out = Map::new();
    out.insert("id".into(), json!(ids.id));
    match table {
        "session" => {
            let time = data.get("time").cloned().unwrap_or(Value::Null);
            let created = int(time.get("created")).unwrap_or(0);
            let text = |k: &str| data.get(k).and_then(Value::as_str).map(str::to_owned);
            out.insert("project_id".into(), json!(text("projectID")));
            out.insert("parent_id".into(), json!(text("parentID")));
            out.insert("slug".into(), json!(text("slug").unwrap_or_default()));
            out.insert("directory".into(), json!(text("directory")));
            out.insert("title".into(), json!(text("title").unwrap_or_default()));
            out.insert("version".into(), json!(text("version").unwrap_or_default()));
            out.insert(
                "share_url".into(),
                json!(
                    data.get("share")
                        .and_then(|s| s.get("url"))
                        .and_then(Value::as_str)
                ),
            );
            if let Some(summary) = data.get("summary") {
                out.insert(
                    "summary_additions".into(),
                    json!(int(summary.get("additions"))),
                );
                out.insert(
                    "summary_deletions".into(),
                    json!(int(summary.get("deletions"))),
                );
                out.insert("summary_files".into(), json!(int(summary.get("files"))));
            }
            for (column, key) in [("revert", "revert"), ("permission", "permission")] {
                if let Some(v) = data.get(key).filter(|v| !v.is_null()) {
                    out.insert(column.into(), json!(v.to_string()));
                }
            }
            out.insert("time_created".into(), json!(created));
            out.insert(
                "time_updated".into(),
                json!(int(time.get("updated")).unwrap_or(created)),
            );
            out.insert("time_compacting".into(), json!(int(time.get("compacting"))));
            out.insert("time_archived".into(), json!(int(time.get("archived"))));
        }
        "message" | "part" => {
            data.remove("id");
            data.remove("sessionID");
            let state_time = |k: &str| data.get("state")?.get("time")?.get(k).cloned();
            let time = data.get("time");
            // The row's `time_updated` moves when its content does: a
            // message when it completes, a tool part when its state does.
            let created = int(time.and_then(|t| t.get("created")))
                .or_else(|| int(time.and_then(|t| t.get("start"))))
                .or_else(|| int(state_time("start").as_ref()))
                .unwrap_or(0);
            let updated = int(time.and_then(|t| t.get("completed")))
                .or_else(|| int(state_time("end").as_ref()))
                .or_else(|| int(time.and_then(|t| t.get("end"))))
                .or_else(|| int(state_time("start").as_ref()))
                .unwrap_or(created);
            out.insert("session_id".into(), json!(ids.session));
            if table == "part" {
                data.remove("messageID");
                out.insert("message_id".into(), json!(ids.message.unwrap_or_default()));
            }
            out.insert("time_created".into(), json!(created));
            out.insert("time_updated".into(), json!(updated));
            out.insert("data".into(), json!(Value::Object(data).to_string()));
        }
        other => return Err(format!("no table {other}")),
    }
    Ok(out)
}
