//! What a tool call did, derived from its call and output: a
//! `command.run` for a shell call (or a `CommandExecution` UI item), a
//! `file.edit` per file of an `apply_patch` envelope.

use super::*;

impl Parser<'_> {
    /// Links a tool output (event `seq`) to its call and appends what the
    /// call did: a `command.run` for a shell call no UI item reported, a
    /// `file.edit` per file of a patch.
    pub(super) fn derive(
        &mut self,
        line_no: u64,
        ts: &str,
        seq: u64,
        call_id: &str,
        call: Option<Call>,
        text: &str,
    ) {
        if let Some(e) = self.events.last_mut() {
            e.parent_seq = call.as_ref().map(|c| c.seq);
        }
        let Some(call) = call else { return };
        if let (Some(cmd), false) = (&call.cmd, call.reported) {
            let mut body = json!({
                "cmd": cmd,
                "exit_code": exit_code(text),
                "is_error": crate::tools::marked_failed(text).then_some(true),
                "output_tail": tail(command_output(text), OUTPUT_TAIL),
                "call_id": call_id,
            });
            strip_nulls(&mut body);
            let derived = self.push(
                (line_no, ts),
                ACTOR_AGENT,
                kinds::COMMAND_RUN,
                Level::Context,
                body,
                Some(kinds::COMMAND_RUN),
            );
            self.set_parent(derived, seq);
        }
        if let Some(patch) = &call.patch {
            for (path, diff) in patch_files(patch) {
                let body = json!({ "path": path, "diff": diff, "call_id": call_id });
                let derived = self.push(
                    (line_no, ts),
                    ACTOR_AGENT,
                    kinds::FILE_EDIT,
                    Level::Context,
                    body,
                    Some(&format!("{}:{path}", kinds::FILE_EDIT)),
                );
                self.set_parent(derived, seq);
            }
        }
    }

    pub(super) fn command_execution(&mut self, exec: CommandExecution) -> Mapped {
        // The UI item is the only place code-mode commands (run from
        // JavaScript inside `exec`) show their argv and exit code, so it is
        // the `command.run`; any open shell call is marked as reported.
        for call in self.state.calls.values_mut() {
            call.reported = true;
        }
        let cmd = match exec.command.as_slice() {
            [shell, flag, script]
                if flag.starts_with('-') && flag.ends_with('c') && !shell.is_empty() =>
            {
                script.clone()
            }
            argv => argv.join(" "),
        };
        Mapped::event(
            ACTOR_AGENT,
            kinds::COMMAND_RUN,
            Level::Context,
            json!({
                "cmd": cmd,
                "argv": exec.command,
                "exit_code": exec.exit_code,
                "output_tail": exec.aggregated_output.as_deref().map(|o| tail(o, OUTPUT_TAIL)),
                "cwd": exec.cwd.as_deref().map(|c| c.strip_prefix("file://").unwrap_or(c)),
                "status": exec.status,
                "item_id": exec.id,
            }),
        )
    }
}

/// Finds the exit code in an exec tool output ("Process exited with code N").
pub(super) fn exit_code(output: &str) -> Option<i64> {
    for marker in ["Process exited with code ", "Exit code: ", "\"exit_code\":"] {
        if let Some(pos) = output.find(marker) {
            let digits: String = output[pos + marker.len()..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '-')
                .collect();
            if let Ok(n) = digits.parse() {
                return Some(n);
            }
        }
    }
    None
}

/// Returns what follows the `Output:` header of an exec tool output.
pub(super) fn command_output(output: &str) -> &str {
    match output.find("Output:\n") {
        Some(pos) => &output[pos + "Output:\n".len()..],
        None => output,
    }
}

/// Returns at most the last `max` bytes of `text`, cut at a char boundary.
pub(super) fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

/// Splits an `apply_patch` envelope into `(path, section)` per file.
pub(super) fn patch_files(patch: &str) -> Vec<(String, String)> {
    const HEADS: [&str; 3] = ["*** Add File: ", "*** Update File: ", "*** Delete File: "];
    let mut files: Vec<(String, String)> = Vec::new();
    for line in patch.lines() {
        if let Some(path) = HEADS.iter().find_map(|h| line.strip_prefix(h)) {
            files.push((path.trim().to_owned(), String::new()));
        } else if line.starts_with("*** End Patch") || line.starts_with("*** Begin Patch") {
            continue;
        }
        if let Some((_, diff)) = files.last_mut() {
            diff.push_str(line);
            diff.push('\n');
        }
    }
    files
}
