//! Events derived from a Hermes tool call and the JSON its tool returned:
//! `terminal` -> `command.run`, `write_file` / `patch` -> `file.edit`,
//! `read_file` -> `file.read`, `todo` -> `todo.add` / `todo.update`.
//!
//! Derived events add meaning for other agents and the compiler; they carry
//! nothing the tool call and result rows do not, so write-back skips them.

use git_session_schema::kinds;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How much of a command's output `command.run` keeps, in bytes.
const OUTPUT_TAIL: usize = 2000;

/// Holds one derived event before it is numbered.
#[derive(Debug, PartialEq)]
pub struct Derived {
    /// The event type.
    pub kind: &'static str,
    /// Its payload.
    pub payload: Value,
    /// What makes its origin unique among the events of the result row.
    pub suffix: String,
}

/// Holds one todo item as the `todo` tool last reported it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Todo {
    /// The item's id.
    #[serde(default)]
    pub id: String,
    /// Its text.
    #[serde(default)]
    pub content: String,
    /// `pending`, `in_progress`, `completed`, `cancelled`.
    #[serde(default)]
    pub status: String,
}

/// Returns whether a tool's JSON result reports a failure.
pub fn is_error(result: &Value) -> bool {
    let err = result
        .get("error")
        .is_some_and(|e| !e.is_null() && e != "" && e != &Value::Bool(false));
    let failed = result.get("success") == Some(&Value::Bool(false));
    let exit = result
        .get("exit_code")
        .and_then(Value::as_i64)
        .is_some_and(|c| c != 0);
    err || failed || exit
}

/// Returns the events a call to `name` with `args` and result text `output`
/// implies; `todos` is the session's list, updated in place.
pub fn derive(
    call_id: &str,
    name: &str,
    args: &Value,
    output: &str,
    todos: &mut Vec<Todo>,
) -> Vec<Derived> {
    let result: Value = serde_json::from_str(output).unwrap_or(Value::Null);
    let failed = is_error(&result);
    let arg = |k: &str| args.get(k).and_then(Value::as_str);
    match name {
        "terminal" => {
            let Some(command) = arg("command") else {
                return Vec::new();
            };
            let text = result
                .get("output")
                .and_then(Value::as_str)
                .unwrap_or(if result.is_null() { output } else { "" });
            let (tail, truncated) = tail(text, OUTPUT_TAIL);
            vec![Derived {
                kind: kinds::COMMAND_RUN,
                payload: json!({
                    "call_id": call_id,
                    "command": command,
                    "exit_code": result.get("exit_code").cloned().unwrap_or(Value::Null),
                    "is_error": failed,
                    "output_tail": tail,
                    "output_truncated": truncated,
                }),
                suffix: kinds::COMMAND_RUN.into(),
            }]
        }
        "write_file" | "patch" if !failed => edits(call_id, name, args, &result),
        "read_file" if !failed => {
            let Some(path) = arg("path") else {
                return Vec::new();
            };
            let mut payload = json!({"call_id": call_id, "path": path});
            for key in ["offset", "limit"] {
                if let Some(v) = args.get(key) {
                    payload[key] = v.clone();
                }
            }
            vec![Derived {
                kind: kinds::FILE_READ,
                payload,
                suffix: format!("{}:{path}", kinds::FILE_READ),
            }]
        }
        "todo" if !failed => todo_events(call_id, args, &result, todos),
        _ => Vec::new(),
    }
}

/// Returns one `file.edit` per file a `write_file` or `patch` call changed.
fn edits(call_id: &str, name: &str, args: &Value, result: &Value) -> Vec<Derived> {
    let arg = |k: &str| args.get(k).and_then(Value::as_str);
    // The patch tool returns the unified diff it applied; prefer it.
    let reported = result.get("diff").and_then(Value::as_str);
    let mut paths: Vec<(String, Option<String>)> = Vec::new();
    match (name, arg("mode")) {
        ("patch", Some("patch")) => {
            for line in arg("patch").unwrap_or("").lines() {
                for marker in ["*** Update File: ", "*** Add File: ", "*** Delete File: "] {
                    if let Some(p) = line.strip_prefix(marker) {
                        paths.push((p.trim().to_owned(), None));
                    }
                }
            }
        }
        ("patch", _) => {
            if let Some(path) = arg("path") {
                let diff = crate::claude::derive::snippet_hunk(
                    arg("old_string").unwrap_or(""),
                    arg("new_string").unwrap_or(""),
                );
                paths.push((path.to_owned(), Some(diff)));
            }
        }
        _ => {
            if let Some(path) = arg("path") {
                let diff = crate::claude::derive::snippet_hunk("", arg("content").unwrap_or(""));
                paths.push((path.to_owned(), Some(diff)));
            }
        }
    }
    let single = paths.len() == 1;
    paths
        .into_iter()
        .map(|(path, made)| {
            let diff = match (reported, single) {
                (Some(d), true) => Some(d.to_owned()),
                _ => made,
            };
            Derived {
                kind: kinds::FILE_EDIT,
                payload: json!({
                    "call_id": call_id,
                    "path": path,
                    "tool": name,
                    "diff": diff,
                    // A snippet hunk numbers lines from the snippet, not the file.
                    "positions_exact": reported.is_some() && single,
                }),
                suffix: format!("{}:{path}", kinds::FILE_EDIT),
            }
        })
        .collect()
}

/// Returns the todo events of one `todo` call: additions, status changes,
/// and (when the list was replaced, `merge` false) removals.
fn todo_events(call_id: &str, args: &Value, result: &Value, todos: &mut Vec<Todo>) -> Vec<Derived> {
    // The tool returns the full list after the call; the arguments are the
    // request. Without a list in either there is nothing to say.
    let list = result
        .get("todos")
        .filter(|t| t.is_array())
        .or_else(|| args.get("todos"));
    let Some(Value::Array(items)) = list else {
        return Vec::new();
    };
    let new: Vec<Todo> = items
        .iter()
        .filter_map(|i| Todo::deserialize(i).ok())
        .collect();
    let merge = args.get("merge").and_then(Value::as_bool).unwrap_or(false)
        && result.get("todos").is_none();
    let mut out = Vec::new();
    let same = |a: &Todo, b: &Todo| {
        if a.id.is_empty() {
            a.content == b.content
        } else {
            a.id == b.id
        }
    };
    for t in &new {
        let payload = |previous: Option<&str>| {
            let mut p =
                json!({"call_id": call_id, "id": t.id, "content": t.content, "status": t.status});
            if let Some(prev) = previous {
                p["previous_status"] = json!(prev);
            }
            p
        };
        match todos.iter().find(|old| same(old, t)) {
            None => out.push(Derived {
                kind: kinds::TODO_ADD,
                payload: payload(None),
                suffix: format!("{}:{}", kinds::TODO_ADD, t.id),
            }),
            Some(old) if old.status != t.status => out.push(Derived {
                kind: kinds::TODO_UPDATE,
                payload: payload(Some(&old.status)),
                suffix: format!("{}:{}", kinds::TODO_UPDATE, t.id),
            }),
            Some(_) => {}
        }
    }
    if merge {
        for t in new {
            match todos.iter_mut().find(|old| same(old, &t)) {
                Some(old) => *old = t,
                None => todos.push(t),
            }
        }
        return out;
    }
    for old in todos.iter().filter(|old| !new.iter().any(|t| same(old, t))) {
        out.push(Derived {
            kind: kinds::TODO_UPDATE,
            payload: json!({"call_id": call_id, "id": old.id, "content": old.content,
                            "status": "removed", "previous_status": old.status}),
            suffix: format!("{}:{}:removed", kinds::TODO_UPDATE, old.id),
        });
    }
    *todos = new;
    out
}

/// Returns the last `max` bytes of `text` (on a char boundary) and whether
/// anything was cut.
fn tail(text: &str, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text.to_owned(), false);
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    (text[start..].to_owned(), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_result_becomes_command_run_with_exit_code() {
        let d = derive(
            "c1",
            "terminal",
            &json!({"command": "false"}),
            r#"{"output": "boom", "exit_code": 1, "error": null}"#,
            &mut Vec::new(),
        );
        assert_eq!(d[0].kind, kinds::COMMAND_RUN);
        assert_eq!(d[0].payload["exit_code"], json!(1));
        assert_eq!(d[0].payload["is_error"], json!(true));
        assert_eq!(d[0].payload["output_tail"], json!("boom"));
    }

    #[test]
    fn file_tools_become_edits_and_reads() {
        let w = derive(
            "c1",
            "write_file",
            &json!({"path": "a.txt", "content": "x\n"}),
            r#"{"success": true}"#,
            &mut Vec::new(),
        );
        assert_eq!(w[0].kind, kinds::FILE_EDIT);
        assert_eq!(w[0].payload["diff"], json!("@@ -0,0 +1,1 @@\n+x\n"));
        let p = derive(
            "c2",
            "patch",
            &json!({"mode": "patch", "patch": "*** Begin Patch\n*** Update File: a.rs\n*** Add File: b.rs\n*** End Patch"}),
            r#"{"success": true}"#,
            &mut Vec::new(),
        );
        assert_eq!(
            p.iter()
                .map(|d| d.payload["path"].clone())
                .collect::<Vec<_>>(),
            [json!("a.rs"), json!("b.rs")]
        );
        let failed = derive(
            "c3",
            "patch",
            &json!({"path": "a.rs", "old_string": "a", "new_string": "b"}),
            r#"{"success": false, "error": "no match"}"#,
            &mut Vec::new(),
        );
        assert!(failed.is_empty());
        let r = derive(
            "c4",
            "read_file",
            &json!({"path": "a.rs", "offset": 3}),
            r#"{"content": "3|x"}"#,
            &mut Vec::new(),
        );
        assert_eq!(r[0].kind, kinds::FILE_READ);
        assert_eq!(r[0].payload["offset"], json!(3));
    }

    #[test]
    fn todo_calls_add_update_and_remove() {
        let mut todos = Vec::new();
        let first = derive(
            "c1",
            "todo",
            &json!({"todos": [{"id": "1", "content": "a", "status": "pending"},
                              {"id": "2", "content": "b", "status": "pending"}]}),
            "{}",
            &mut todos,
        );
        assert_eq!(first.len(), 2);
        assert!(first.iter().all(|d| d.kind == kinds::TODO_ADD));
        let merged = derive(
            "c2",
            "todo",
            &json!({"merge": true, "todos": [{"id": "1", "content": "a", "status": "completed"}]}),
            "{}",
            &mut todos,
        );
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].payload["previous_status"], json!("pending"));
        let replaced = derive(
            "c3",
            "todo",
            &json!({"todos": [{"id": "1", "content": "a", "status": "completed"}]}),
            "{}",
            &mut todos,
        );
        assert_eq!(replaced.len(), 1);
        assert_eq!(replaced[0].payload["status"], json!("removed"));
    }
}
