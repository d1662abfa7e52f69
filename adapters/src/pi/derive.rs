//! Richer events read off a finished Pi tool call: `command.run` (bash),
//! `file.edit` (edit, write) and `file.read` (read).
//!
//! They are derived, not native: the `tool.call` and `tool.result` events
//! stay the record of what happened and the renderer skips these. A failed
//! edit or read changed nothing, so it gets no `file.*` event; a failed
//! command still ran and keeps its `command.run`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use git_session_schema::kinds;

/// How much command output a `command.run` keeps; the whole output is in
/// the `tool.result` event.
const OUTPUT_TAIL_CHARS: usize = 2000;

/// Holds a tool call waiting for its result (kept in the parse state).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub(super) struct PendingCall {
    pub(super) name: String,
    pub(super) arguments: Value,
    /// The seq of the `tool.call` event.
    pub(super) seq: u64,
}

/// Holds the parts of a `toolResult` message the derivations read.
pub(super) struct ResultView<'a> {
    pub(super) call_id: &'a str,
    pub(super) output: &'a str,
    pub(super) is_error: bool,
    /// The message's `details` (bash: `exit_code`; edit: `diff`).
    pub(super) details: Option<&'a Value>,
}

/// Returns the events a finished call implies, as (type, payload).
pub(super) fn derive(call: &PendingCall, result: &ResultView<'_>) -> Vec<(&'static str, Value)> {
    let args = &call.arguments;
    let str_arg = |k: &str| args.get(k).and_then(Value::as_str);
    match call.name.as_str() {
        "bash" => match str_arg("command") {
            Some(command) => vec![(kinds::COMMAND_RUN, command_run(command, result))],
            None => Vec::new(),
        },
        "edit" | "write" if !result.is_error => {
            let Some(path) = str_arg("path") else {
                return Vec::new();
            };
            vec![(
                kinds::FILE_EDIT,
                json!({
                    "call_id": result.call_id,
                    "path": path,
                    "tool": call.name,
                    "diff": edit_diff(&call.name, path, args, result.details),
                }),
            )]
        }
        "read" if !result.is_error => {
            let Some(path) = str_arg("path") else {
                return Vec::new();
            };
            let mut payload = json!({"call_id": result.call_id, "path": path});
            for key in ["offset", "limit"] {
                if let Some(v) = args.get(key) {
                    payload[key] = v.clone();
                }
            }
            vec![(kinds::FILE_READ, payload)]
        }
        _ => Vec::new(),
    }
}

/// Returns a `command.run` payload for a bash call.
fn command_run(command: &str, result: &ResultView<'_>) -> Value {
    // 1.6.0 records the exit code in `details`; otherwise a success means
    // 0 and a failure's code is unknown.
    let exit_code = result
        .details
        .and_then(|d| d.get("exit_code").or_else(|| d.get("exitCode")))
        .and_then(Value::as_i64)
        .or((!result.is_error).then_some(0));
    let (tail, truncated) = tail(result.output, OUTPUT_TAIL_CHARS);
    json!({
        "call_id": result.call_id,
        "command": command,
        "exit_code": exit_code,
        "is_error": result.is_error,
        "output_tail": tail,
        "output_truncated": truncated,
    })
}

/// Returns a `command.run` payload for a user's `!cmd` (a `bashExecution`
/// message), which has no tool call.
pub(super) fn bash_execution(message: &Value) -> Option<Value> {
    let command = message.get("command").and_then(Value::as_str)?;
    let output = message.get("output").and_then(Value::as_str).unwrap_or("");
    let exit_code = message.get("exitCode").and_then(Value::as_i64);
    let (tail, truncated) = tail(output, OUTPUT_TAIL_CHARS);
    Some(json!({
        "command": command,
        "exit_code": exit_code,
        "is_error": exit_code.is_some_and(|c| c != 0),
        "output_tail": tail,
        "output_truncated": truncated || message.get("truncated") == Some(&json!(true)),
    }))
}

/// Returns the last `max` characters of `text` and whether it was cut.
fn tail(text: &str, max: usize) -> (String, bool) {
    let count = text.chars().count();
    if count <= max {
        return (text.to_owned(), false);
    }
    (text.chars().skip(count - max).collect(), true)
}

/// Returns a unified diff for an edit or write: Pi's own `details.diff`
/// when it recorded one, else one hunk per replaced snippet.
fn edit_diff(tool: &str, path: &str, args: &Value, details: Option<&Value>) -> String {
    let path = path.trim_start_matches('/');
    let mut out = format!("--- a/{path}\n+++ b/{path}\n");
    if let Some(diff) = details
        .and_then(|d| d.get("diff"))
        .and_then(Value::as_str)
        .filter(|d| !d.is_empty())
    {
        out.push_str(diff);
        if !diff.ends_with('\n') {
            out.push('\n');
        }
        return out;
    }
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    if tool == "write" {
        out.push_str(&hunk("", &s(args, "content")));
        return out;
    }
    match args.get("edits").and_then(Value::as_array) {
        Some(edits) => {
            for e in edits {
                out.push_str(&hunk(&s(e, "oldText"), &s(e, "newText")));
            }
        }
        None => out.push_str(&hunk(&s(args, "oldText"), &s(args, "newText"))),
    }
    out
}

fn hunk(old: &str, new: &str) -> String {
    let (old, new): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let mut h = format!("@@ -1,{} +1,{} @@\n", old.len(), new.len());
    for l in old {
        h.push_str(&format!("-{l}\n"));
    }
    for l in new {
        h.push_str(&format!("+{l}\n"));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: Value) -> PendingCall {
        PendingCall {
            name: name.into(),
            arguments,
            seq: 0,
        }
    }

    fn result<'a>(output: &'a str, is_error: bool, details: Option<&'a Value>) -> ResultView<'a> {
        ResultView {
            call_id: "c1",
            output,
            is_error,
            details,
        }
    }

    #[test]
    fn bash_gives_a_command_with_its_exit_code() {
        let d = json!({"exit_code": 3});
        let got = derive(
            &call("bash", json!({"command": "false"})),
            &result("boom", true, Some(&d)),
        );
        assert_eq!(got[0].0, kinds::COMMAND_RUN);
        assert_eq!(got[0].1["exit_code"], 3);
        assert_eq!(got[0].1["command"], "false");
        let ok = derive(
            &call("bash", json!({"command": "true"})),
            &result("", false, None),
        );
        assert_eq!(ok[0].1["exit_code"], 0);
    }

    #[test]
    fn edits_writes_and_reads_name_their_file() {
        let e = derive(
            &call(
                "edit",
                json!({"path": "a.txt", "edits": [{"oldText": "x", "newText": "y"}]}),
            ),
            &result("ok", false, None),
        );
        assert_eq!(e[0].0, kinds::FILE_EDIT);
        assert!(e[0].1["diff"].as_str().unwrap().contains("-x\n+y\n"));
        let w = derive(
            &call("write", json!({"path": "b", "content": "hi"})),
            &result("ok", false, None),
        );
        assert!(w[0].1["diff"].as_str().unwrap().contains("+hi"));
        let r = derive(
            &call("read", json!({"path": "c", "offset": 2})),
            &result("text", false, None),
        );
        assert_eq!(r[0].0, kinds::FILE_READ);
        assert_eq!(r[0].1["offset"], 2);
        // A failed edit changed nothing.
        assert!(
            derive(
                &call("edit", json!({"path": "a"})),
                &result("no", true, None)
            )
            .is_empty()
        );
    }
}
