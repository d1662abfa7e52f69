//! Richer events read off a finished dsh tool call: `command.run` (`bash`),
//! `file.edit` (`write`, `edit`), `file.read` (`read`) and `todo.*`
//! (`todo_write`).
//!
//! Derived, not native: the `tool.call` / `tool.result` events stay the
//! record of what happened and render writes their dsh records, never these.
//! The diff and todo logic is Claude Code's ([`crate::claude::derive`]):
//! dsh's tools take the same argument names (`file_path`, `old_string`,
//! `new_string`, `content`, `todos`).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use git_session_schema::kinds;

use crate::claude::derive::{Derived, Todo, snippet_hunk, tail, todo_events};

/// How much command output a `command.run` keeps.
const OUTPUT_TAIL_CHARS: usize = 2000;

/// Holds a tool call waiting for its result (kept in the parse state).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub(super) struct Pending {
    pub(super) name: String,
    pub(super) input: Value,
    /// The seq of the `tool.call` event.
    pub(super) seq: u64,
}

/// Returns the events a finished call implies; `todos` is the list state.
pub(super) fn derive(
    call: &Pending,
    call_id: &str,
    output: &str,
    is_error: bool,
    todos: &mut Vec<Todo>,
) -> Vec<Derived> {
    let input = &call.input;
    let str_arg = |k: &str| input.get(k).and_then(Value::as_str);
    match call.name.as_str() {
        "bash" => {
            let Some(command) = str_arg("command") else {
                return Vec::new();
            };
            let (tail, truncated) = tail(output, OUTPUT_TAIL_CHARS);
            vec![Derived {
                kind: kinds::COMMAND_RUN,
                payload: json!({
                    "call_id": call_id,
                    "command": command,
                    "exit_code": exit_code(output, is_error),
                    "is_error": is_error,
                    "output_tail": tail,
                    "output_truncated": truncated,
                    "cwd": str_arg("workdir"),
                }),
            }]
        }
        "write" | "edit" if !is_error => {
            let Some(path) = str_arg("file_path") else {
                return Vec::new();
            };
            let slashed = if path.starts_with('/') {
                path.to_owned()
            } else {
                format!("/{path}")
            };
            let (old, new) = match call.name.as_str() {
                "write" => ("", str_arg("content").unwrap_or("")),
                _ => (
                    str_arg("old_string").unwrap_or(""),
                    str_arg("new_string").unwrap_or(""),
                ),
            };
            let diff = format!("--- a{slashed}\n+++ b{slashed}\n{}", snippet_hunk(old, new));
            vec![Derived {
                kind: kinds::FILE_EDIT,
                payload: json!({
                    "call_id": call_id,
                    "path": path,
                    "tool": call.name,
                    "diff": diff,
                    "positions_exact": false,
                }),
            }]
        }
        "read" if !is_error => {
            let Some(path) = str_arg("file_path") else {
                return Vec::new();
            };
            let mut payload = json!({"call_id": call_id, "path": path});
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
        "todo_write" if !is_error => todo_events(call_id, input, todos),
        _ => Vec::new(),
    }
}

/// Reads dsh's `[exit code: N]` marker; a result without one means 0
/// unless it is an error.
fn exit_code(output: &str, is_error: bool) -> Option<i64> {
    if let Some(at) = output.rfind("[exit code: ") {
        let rest = &output[at + "[exit code: ".len()..];
        let digits: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        if let Ok(n) = digits.parse() {
            return Some(n);
        }
    }
    (!is_error).then_some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(name: &str, input: Value) -> Pending {
        Pending {
            name: name.into(),
            input,
            seq: 3,
        }
    }

    #[test]
    fn bash_gives_command_run_with_exit_code() {
        let call = pending("bash", json!({"command": "false"}));
        let d = derive(&call, "c1", "boom\n[exit code: 1]", true, &mut Vec::new());
        assert_eq!(d[0].kind, kinds::COMMAND_RUN);
        assert_eq!(d[0].payload["exit_code"], 1);
        assert_eq!(d[0].payload["command"], "false");
        let ok = derive(&call, "c1", "(no output)", false, &mut Vec::new());
        assert_eq!(ok[0].payload["exit_code"], 0);
    }

    #[test]
    fn edits_reads_and_todos() {
        let edit = pending(
            "edit",
            json!({"file_path": "/p/f", "old_string": "a", "new_string": "b"}),
        );
        let d = derive(&edit, "c", "ok", false, &mut Vec::new());
        assert_eq!(d[0].kind, kinds::FILE_EDIT);
        assert!(d[0].payload["diff"].as_str().unwrap().contains("-a\n+b\n"));
        assert!(derive(&edit, "c", "no", true, &mut Vec::new()).is_empty());
        let read = pending("read", json!({"file_path": "/p/f", "limit": 5}));
        assert_eq!(
            derive(&read, "c", "x", false, &mut Vec::new())[0].payload["limit"],
            5
        );
        let mut todos = Vec::new();
        let todo = pending(
            "todo_write",
            json!({"todos": [{"content": "x", "status": "pending"}]}),
        );
        let d = derive(&todo, "c", "ok", false, &mut todos);
        assert_eq!(d[0].kind, kinds::TODO_ADD);
    }
}
