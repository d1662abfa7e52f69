//! Richer events read off a finished tool call: `command.run` (Bash),
//! `file.edit` (Edit, MultiEdit, Write), `file.read` (Read) and `todo.*`
//! (TodoWrite).
//!
//! They are derived, not native: the `tool.call` and `tool.result` events
//! they come from stay the record of what happened, and the renderer ignores
//! derived events. A call that failed gets no `file.*` or `todo.*` event,
//! because nothing changed; a failed command still ran, so it keeps its
//! `command.run`. Tools not listed here get nothing extra.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use git_session_schema::kinds;

use super::wire::ToolUseResult;

/// How much command output a `command.run` keeps; the whole output is in
/// the `tool.result` event.
const OUTPUT_TAIL_CHARS: usize = 2000;

/// Holds a tool call waiting for its result (kept in the parse state).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub(super) struct PendingCall {
    pub(super) name: String,
    pub(super) input: Value,
    /// The seq of the `tool.call` event.
    pub(super) seq: u64,
}

/// Holds the parts of a `tool_result` block the derivations read.
pub(super) struct ResultView {
    pub(super) call_id: String,
    pub(super) output: String,
    pub(super) is_error: bool,
}

/// Holds one item of the todo list, as `TodoWrite` last set it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub(crate) struct Todo {
    content: String,
    status: String,
}

/// Holds one derived event before it is numbered.
pub(crate) struct Derived {
    pub(crate) kind: &'static str,
    pub(crate) payload: Value,
}

/// Returns the events a finished call implies; `todos` is the list state.
pub(super) fn derive(
    call: &PendingCall,
    result: &ResultView,
    detail: Option<&ToolUseResult>,
    todos: &mut Vec<Todo>,
) -> Vec<Derived> {
    let input = &call.input;
    let str_arg = |k: &str| input.get(k).and_then(Value::as_str);
    match call.name.as_str() {
        "Bash" => {
            let Some(command) = str_arg("command") else {
                return Vec::new();
            };
            vec![Derived {
                kind: kinds::COMMAND_RUN,
                payload: command_run(command, result, detail),
            }]
        }
        "Edit" | "MultiEdit" | "Write" if !result.is_error => {
            let Some(path) = str_arg("file_path") else {
                return Vec::new();
            };
            let (diff, exact) = edit_diff(&call.name, path, input, detail);
            let payload = json!({
                "call_id": result.call_id,
                "path": path,
                "tool": call.name,
                "diff": diff,
                // `false`: hunk positions are relative to the edited snippet,
                // because the client did not record the file's.
                "positions_exact": exact,
            });
            vec![Derived {
                kind: kinds::FILE_EDIT,
                payload,
            }]
        }
        "Read" if !result.is_error => {
            let Some(path) = str_arg("file_path") else {
                return Vec::new();
            };
            let mut payload = json!({"call_id": result.call_id, "path": path});
            for key in ["offset", "limit"] {
                if let Some(v) = input.get(key) {
                    payload[key] = v.clone();
                }
            }
            vec![Derived {
                kind: kinds::FILE_READ,
                payload,
            }]
        }
        "TodoWrite" if !result.is_error => todo_events(&result.call_id, input, todos),
        _ => Vec::new(),
    }
}

fn command_run(command: &str, result: &ResultView, detail: Option<&ToolUseResult>) -> Value {
    // Claude reports a non-zero exit as an error result starting with
    // "Exit code N"; a success has no code in the record but means 0.
    let exit_code = if result.is_error {
        // Or in Codex's words, for a result handed over from Codex.
        crate::tools::exit_code_in(&result.output)
    } else {
        Some(0)
    };
    // Borrowed where possible: only the tail is kept, so copying a long
    // output whole would be wasted.
    let output: std::borrow::Cow<'_, str> = match detail {
        Some(d) if d.stdout.is_some() || d.stderr.is_some() => {
            let (out, err) = (
                d.stdout.as_deref().unwrap_or(""),
                d.stderr.as_deref().unwrap_or(""),
            );
            match (out.is_empty(), err.is_empty()) {
                (_, true) => out.into(),
                (true, false) => err.into(),
                (false, false) => format!("{out}\n{err}").into(),
            }
        }
        _ => result.output.as_str().into(),
    };
    let (tail, truncated) = tail(&output, OUTPUT_TAIL_CHARS);
    let mut payload = json!({
        "call_id": result.call_id,
        "command": command,
        "exit_code": exit_code,
        "is_error": result.is_error,
        "output_tail": tail,
        "output_truncated": truncated,
    });
    if let Some(true) = detail.and_then(|d| d.interrupted) {
        payload["interrupted"] = json!(true);
    }
    payload
}

/// Returns the last `max` characters of `text` and whether it was cut.
pub(crate) fn tail(text: &str, max: usize) -> (String, bool) {
    let count = text.chars().count();
    if count <= max {
        return (text.to_owned(), false);
    }
    (text.chars().skip(count - max).collect(), true)
}

/// Returns a unified diff for an edit and whether its line numbers are the
/// file's.
fn edit_diff(
    tool: &str,
    path: &str,
    input: &Value,
    detail: Option<&ToolUseResult>,
) -> (String, bool) {
    let created = detail.and_then(|d| d.kind.as_deref()) == Some("create");
    let old_name = if created {
        "/dev/null".to_owned()
    } else {
        format!("a{}", slash(path))
    };
    let mut out = format!("--- {old_name}\n+++ b{}\n", slash(path));
    if let Some(hunks) = detail
        .and_then(|d| d.structured_patch.as_ref())
        .filter(|h| !h.is_empty())
    {
        for h in hunks {
            out.push_str(&format!(
                "@@ -{},{} +{},{} @@\n",
                h.old_start, h.old_lines, h.new_start, h.new_lines
            ));
            for l in &h.lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        return (out, true);
    }
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match tool {
        "Write" => out.push_str(&snippet_hunk("", &str_of(input, "content"))),
        "MultiEdit" => {
            for edit in input
                .get("edits")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                out.push_str(&snippet_hunk(
                    &str_of(edit, "old_string"),
                    &str_of(edit, "new_string"),
                ));
            }
        }
        _ => out.push_str(&snippet_hunk(
            &str_of(input, "old_string"),
            &str_of(input, "new_string"),
        )),
    }
    // A Write that created the file covers the whole file, so its
    // positions are exact too.
    (out, tool == "Write" && created)
}

fn slash(path: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    }
}

/// Returns one hunk turning `old` into `new`, with the unchanged lines at
/// both ends as context. Not a minimal diff: edits are snippets, where the
/// common-prefix/suffix cut already gives the readable answer.
pub(crate) fn snippet_hunk(old: &str, new: &str) -> String {
    // A final newline ends the last line; it does not start another one.
    let lines = |t: &'_ str| -> Vec<String> {
        let t = t.strip_suffix('\n').unwrap_or(t);
        if t.is_empty() && !t.contains('\n') {
            Vec::new()
        } else {
            t.split('\n').map(str::to_owned).collect()
        }
    };
    let (a, b) = (lines(old), lines(new));
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let max_suffix = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    let start = |len: usize| if len == 0 { 0 } else { 1 };
    let mut out = format!(
        "@@ -{},{} +{},{} @@\n",
        start(a.len()),
        a.len(),
        start(b.len()),
        b.len()
    );
    for l in &a[..prefix] {
        out.push_str(&format!(" {l}\n"));
    }
    for l in &a[prefix..a.len() - suffix] {
        out.push_str(&format!("-{l}\n"));
    }
    for l in &b[prefix..b.len() - suffix] {
        out.push_str(&format!("+{l}\n"));
    }
    for l in &a[a.len() - suffix..] {
        out.push_str(&format!(" {l}\n"));
    }
    out
}

/// Returns `todo.add` for new items and `todo.update` for changed or
/// dropped ones, and stores the new list.
pub(crate) fn todo_events(call_id: &str, input: &Value, todos: &mut Vec<Todo>) -> Vec<Derived> {
    let Some(items) = input.get("todos").and_then(Value::as_array) else {
        return Vec::new();
    };
    let new: Vec<Todo> = items
        .iter()
        .filter_map(|t| {
            Some(Todo {
                content: t.get("content")?.as_str()?.to_owned(),
                status: t
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or("pending")
                    .to_owned(),
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in &new {
        match todos.iter().find(|old| old.content == t.content) {
            None => out.push(Derived {
                kind: kinds::TODO_ADD,
                payload: json!({"call_id": call_id, "content": t.content, "status": t.status}),
            }),
            Some(old) if old.status != t.status => out.push(Derived {
                kind: kinds::TODO_UPDATE,
                payload: json!({"call_id": call_id, "content": t.content, "status": t.status, "previous_status": old.status}),
            }),
            Some(_) => {}
        }
    }
    for old in todos
        .iter()
        .filter(|old| !new.iter().any(|t| t.content == old.content))
    {
        out.push(Derived {
            kind: kinds::TODO_UPDATE,
            payload: json!({"call_id": call_id, "content": old.content, "status": "removed", "previous_status": old.status}),
        });
    }
    *todos = new;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(output: &str, is_error: bool) -> ResultView {
        ResultView {
            call_id: "toolu_1".into(),
            output: output.into(),
            is_error,
        }
    }

    #[test]
    fn failed_command_keeps_its_exit_code() {
        let call = PendingCall {
            name: "Bash".into(),
            input: json!({"command": "false"}),
            seq: 0,
        };
        let d = derive(
            &call,
            &result("Exit code 1\nboom", true),
            None,
            &mut Vec::new(),
        );
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].kind, kinds::COMMAND_RUN);
        assert_eq!(d[0].payload["exit_code"], json!(1));
        assert_eq!(d[0].payload["output_tail"], json!("Exit code 1\nboom"));
    }

    #[test]
    fn snippet_edit_becomes_a_unified_hunk() {
        let h = snippet_hunk("a\nb\nc", "a\nB\nc");
        assert_eq!(h, "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n");
        assert_eq!(snippet_hunk("", "x"), "@@ -0,0 +1,1 @@\n+x\n");
        assert_eq!(snippet_hunk("", "x\ny\n"), "@@ -0,0 +1,2 @@\n+x\n+y\n");
    }

    #[test]
    fn failed_edit_derives_nothing() {
        let call = PendingCall {
            name: "Edit".into(),
            input: json!({"file_path": "/p/f", "old_string": "a", "new_string": "b"}),
            seq: 0,
        };
        assert!(derive(&call, &result("error", true), None, &mut Vec::new()).is_empty());
        let d = derive(&call, &result("ok", false), None, &mut Vec::new());
        assert_eq!(
            d[0].payload["diff"],
            json!("--- a/p/f\n+++ b/p/f\n@@ -1,1 +1,1 @@\n-a\n+b\n")
        );
    }

    #[test]
    fn todo_list_changes_become_adds_and_updates() {
        let mut todos = Vec::new();
        let call = |todos: Value| PendingCall {
            name: "TodoWrite".into(),
            input: json!({"todos": todos}),
            seq: 0,
        };
        let first = derive(
            &call(
                json!([{"content": "x", "status": "pending"}, {"content": "y", "status": "pending"}]),
            ),
            &result("ok", false),
            None,
            &mut todos,
        );
        assert_eq!(
            first.iter().map(|d| d.kind).collect::<Vec<_>>(),
            [kinds::TODO_ADD, kinds::TODO_ADD]
        );
        let second = derive(
            &call(json!([{"content": "x", "status": "completed"}])),
            &result("ok", false),
            None,
            &mut todos,
        );
        assert_eq!(second.len(), 2);
        assert_eq!(second[0].payload["status"], json!("completed"));
        assert_eq!(second[1].payload["status"], json!("removed"));
    }
}
