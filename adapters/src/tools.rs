//! What a tool call and its result mean across agents: the one place a
//! render asks how a foreign call maps to its own tools and how a failed
//! result is marked.
//!
//! * **Failure.** A canonical `tool.result` failed when its `is_error` is
//!   true or its `exit_code` is not 0 ([`failure`]). A target with a field
//!   for it (Claude `is_error`, Pi and dsh `isError`, OpenCode's `error`
//!   state) sets the field; a target without one gets the failure in the
//!   result text, in the target's own words where it has them (Codex:
//!   `Process exited with code N`), else [`FAILED_PREFIX`], which every
//!   parse reads back as a failure ([`marked_failed`]).
//! * **Vocabulary.** Each adapter declares its tools by kind in its
//!   registry row ([`crate::AgentSpec::tools`]); [`translate`] maps a call
//!   of one agent to the target's tool of the same kind with its
//!   arguments renamed (command, path, old/new text, patch, pattern,
//!   cwd/workdir, timeout), and names every argument that has no
//!   counterpart so the render can tell the target model (in the call's
//!   arguments under [`NOTE_KEY`]) and the loss report (`argument-dropped`).

use serde_json::{Map, Value, json};

use git_session_schema::Agent;

use crate::registry::{AgentSpec, ToolKind, tool_kind_anywhere};

/// The first line of a failed result's text written for a target that has
/// no failure field and no exit code to give.
pub const FAILED_PREFIX: &str = "error: this tool call failed\n";

/// Describes a failed tool result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The command's exit code, when the source knew it.
    pub exit_code: Option<i64>,
}

/// Returns how a canonical `tool.result` payload failed, `None` when it
/// did not: `is_error: true`, a non-zero `exit_code`, or a status of
/// `error`/`failed`. The exit code comes from `exit_code`, else from the
/// result text in the forms agents write it (Claude's leading
/// `Exit code N`, Codex's `Process exited with code N`).
pub fn failure(payload: &Value) -> Option<Failure> {
    let code = payload.get("exit_code").and_then(Value::as_i64);
    let flagged = payload.get("is_error").and_then(Value::as_bool) == Some(true)
        || code.is_some_and(|c| c != 0)
        || matches!(
            payload.get("status").and_then(Value::as_str),
            Some("error" | "failed")
        );
    if !flagged {
        return None;
    }
    let text = payload.get("output").and_then(Value::as_str).unwrap_or("");
    Some(Failure {
        exit_code: code.filter(|c| *c != 0).or_else(|| exit_code_in(text)),
    })
}

/// Finds an exit code written at the start of a result text: `Exit code N`
/// (Claude Code) or `Process exited with code N` on one of the first lines
/// (Codex exec output).
pub fn exit_code_in(text: &str) -> Option<i64> {
    let number = |rest: &str| {
        let digits: String = rest
            .trim_start()
            .chars()
            .enumerate()
            .take_while(|(i, c)| c.is_ascii_digit() || (*i == 0 && *c == '-'))
            .map(|(_, c)| c)
            .collect();
        digits.parse::<i64>().ok()
    };
    if let Some(rest) = text.strip_prefix("Exit code ") {
        return number(rest);
    }
    text.lines()
        .take(4)
        .find_map(|l| l.strip_prefix("Process exited with code "))
        .and_then(number)
}

/// Returns the result text for a target that has no failure field: the
/// output after a first line saying it failed, `exit code N` when the code
/// is known (in Codex's words when `codex_words`), else [`FAILED_PREFIX`].
/// A text already saying so in those words is returned as it is.
pub fn mark_failed(output: &str, failure: Failure, codex_words: bool) -> String {
    let said = if codex_words {
        output.starts_with(FAILED_PREFIX)
            || output
                .lines()
                .take(4)
                .any(|l| l.starts_with("Process exited with code "))
    } else {
        marked_failed(output)
    };
    if said {
        return output.to_owned();
    }
    match (failure.exit_code, codex_words) {
        (Some(code), true) => format!("Process exited with code {code}\nOutput:\n{output}"),
        (Some(code), false) => format!("Exit code {code}\n{output}"),
        (None, _) => format!("{FAILED_PREFIX}{output}"),
    }
}

/// Says whether a result text is marked failed by [`mark_failed`] (or in
/// the same words by the agent itself): a non-zero exit code on its first
/// lines, or [`FAILED_PREFIX`].
pub fn marked_failed(text: &str) -> bool {
    text.starts_with(FAILED_PREFIX) || exit_code_in(text).is_some_and(|c| c != 0)
}

/// Returns the head of a tool's output for a one-line preview: an exec
/// envelope (Codex: "Chunk ID", "Wall time", "Process exited with code
/// N", "Output:") becomes `exit N` and the first output line; any other
/// output its first non-blank line.
pub fn output_head(output: &str) -> String {
    let mut exit = None;
    let mut body = output;
    if output.contains("\nOutput:\n")
        || output.ends_with("\nOutput:")
        || output.starts_with("Output:")
    {
        for line in output.lines() {
            if let Some(code) = line.strip_prefix("Process exited with code ") {
                exit = Some(code.trim().to_owned());
            }
        }
        body = output.split_once("Output:").map_or("", |(_, b)| b);
    }
    let first = body
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    match exit {
        Some(code) if first.is_empty() => format!("exit {code}"),
        Some(code) => format!("exit {code}: {first}"),
        None => first.to_owned(),
    }
}

/// The argument under which a translated call carries, as text the target
/// model sees, the source arguments the target's tool has no place for.
pub const NOTE_KEY: &str = "note";

/// Names a canonical argument role; each agent spells it its own way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Command,
    Path,
    OldText,
    NewText,
    Content,
    Patch,
    Pattern,
    Include,
    Workdir,
    Timeout,
    Description,
    Offset,
    Limit,
    ReplaceAll,
    Url,
    Query,
    Prompt,
    Todos,
}

/// Every spelling of each role across the agents (the registry's
/// [`AgentSpec::arguments`]).
const SPELLINGS: &[(Role, &str)] = &[
    (Role::Command, "command"),
    (Role::Command, "cmd"),
    (Role::Path, "file_path"),
    (Role::Path, "filePath"),
    (Role::Path, "path"),
    (Role::OldText, "old_string"),
    (Role::OldText, "oldString"),
    (Role::OldText, "oldText"),
    (Role::NewText, "new_string"),
    (Role::NewText, "newString"),
    (Role::NewText, "newText"),
    (Role::Patch, "patch"),
    (Role::Patch, "patchText"),
    (Role::Pattern, "pattern"),
    (Role::Include, "glob"),
    (Role::Include, "include"),
    (Role::Workdir, "workdir"),
    (Role::Workdir, "cwd"),
    (Role::Timeout, "timeout"),
    (Role::Timeout, "timeout_ms"),
    (Role::Description, "description"),
    (Role::Offset, "offset"),
    (Role::Limit, "limit"),
    (Role::ReplaceAll, "replace_all"),
    (Role::ReplaceAll, "replaceAll"),
    (Role::Url, "url"),
    (Role::Prompt, "prompt"),
    (Role::Prompt, "goal"),
    (Role::Todos, "todos"),
];

/// Returns the role of argument `key` (a registry name, `:s` stripped) of
/// a call of kind `kind`.
fn role_of(kind: ToolKind, key: &str) -> Option<Role> {
    let key = key.strip_suffix(":s").unwrap_or(key);
    // Words whose meaning depends on the tool: `query` is a web query for
    // a web tool and a pattern elsewhere; `input` is a patch only for an
    // edit tool; `content` is a file's content only for a write or edit.
    match (kind, key) {
        (ToolKind::Web, "query") => return Some(Role::Query),
        (_, "query") => return Some(Role::Pattern),
        (ToolKind::Edit, "input") => return Some(Role::Patch),
        (ToolKind::Write | ToolKind::Edit, "content") => return Some(Role::Content),
        (_, "input" | "content") => return None,
        _ => {}
    }
    SPELLINGS.iter().find(|(_, k)| *k == key).map(|(r, _)| *r)
}

/// Holds a foreign call mapped to the target's vocabulary.
#[derive(Clone, Debug, PartialEq)]
pub struct Translated {
    /// The target's tool name (the source's own name when the target has
    /// no tool of that kind: then [`Translated::mapped`] is false).
    pub name: String,
    /// The arguments in the target's spelling; untranslatable ones are
    /// described in text under [`NOTE_KEY`], which the target model sees.
    pub arguments: Value,
    /// The kind both tools share.
    pub kind: ToolKind,
    /// Whether the target has a tool of this kind.
    pub mapped: bool,
    /// Source arguments that have no counterpart, with their values as
    /// text: each is a loss line (`argument-dropped`).
    pub dropped: Vec<(String, String)>,
}

impl Translated {
    /// Returns the loss lines of this translation for the call at `seq`:
    /// `tool-unmapped` when the target has no tool of the kind,
    /// `argument-dropped` per argument without a counterpart.
    pub fn losses(&self, seq: u64, source: &str, target: &AgentSpec) -> Vec<String> {
        let mut out = Vec::new();
        if !self.mapped {
            out.push(format!(
                "tool-unmapped: seq {seq}: {} has no {} tool of its kind ({:?}); written under its own name",
                self.name, target.display, self.kind
            ));
        }
        for (key, _) in &self.dropped {
            out.push(format!(
                "argument-dropped: seq {seq}: {source} argument {key:?} has no {} counterpart; carried as text under {NOTE_KEY:?}",
                target.display
            ));
        }
        out
    }
}

/// Returns the kind of a call: its tool's kind in whichever agent has it.
pub fn kind_of(name: &str) -> ToolKind {
    tool_kind_anywhere(name)
}

/// Says whether argument `key` of `source`'s tool `name` is in seconds.
fn in_seconds(source: &Agent, name: &str, key: &str) -> bool {
    crate::registry::adapter(source).is_some_and(|a| {
        a.spec()
            .arguments_of(name)
            .iter()
            .any(|k| k.strip_suffix(":s") == Some(key))
    })
}

/// Maps a call of agent `source` to `name` with `arguments` to `target`'s
/// tool of the same kind, its arguments renamed to the target tool's
/// ([`AgentSpec::arguments`]).
///
/// A call to a tool the target has by that name is kept as it is. A
/// shell call keeps its command (an argv becomes a script). An
/// `apply_patch` envelope for a target whose edit tool takes no patch
/// becomes a shell call that applies it (`apply_patch <<'PATCH'`), so the
/// patch is never dropped. Timeouts are converted between milliseconds
/// and seconds. Every argument without a counterpart is listed in
/// [`Translated::dropped`] and written, as text, under [`NOTE_KEY`].
pub fn translate(target: &AgentSpec, source: &Agent, name: &str, arguments: &Value) -> Translated {
    // Codex's code mode: one `exec` call runs JavaScript that calls the
    // real tools; calls of one shell tool become that shell call.
    // The script is the freeform input, or a render's `{"input": …}`.
    let script = match arguments {
        Value::String(s) => Some(s.as_str()),
        Value::Object(m) if m.len() == 1 => m.get("input").and_then(Value::as_str),
        _ => None,
    };
    if name == CODE_MODE_TOOL
        && !target.has_tool(name)
        && let Some(script) = script
        && let Some(nested) = code_mode_shell(script)
    {
        let mut out = translate(target, source, &nested.tool, &nested.arguments);
        if let Some(rest) = nested.rest {
            let rest = text_of(&Value::String(rest));
            let note = format!("[the original {name} script: {rest}]");
            if let Value::Object(m) = &mut out.arguments {
                let joined = match m.get(NOTE_KEY).and_then(Value::as_str) {
                    Some(n) => format!("{n} {note}"),
                    None => note,
                };
                m.insert(NOTE_KEY.into(), json!(joined));
            }
            out.dropped.push(("script".to_owned(), rest));
        }
        return out;
    }
    let kind = kind_of(name);
    let keep = |mapped| Translated {
        name: name.to_owned(),
        arguments: arguments.clone(),
        kind,
        mapped,
        dropped: Vec::new(),
    };
    if target.has_tool(name) {
        return keep(true);
    }
    // A shell call without a command to run is no shell call to map.
    if kind == ToolKind::Shell && crate::shell_command(name, arguments).is_none() {
        return keep(false);
    }
    let patch = patch_text(name, arguments);
    // "Other" is no kind: a tool of it maps to nothing but itself.
    let Some(tool) = target.tool_for(kind).filter(|_| kind != ToolKind::Other) else {
        return keep(false);
    };
    let accepts = target.arguments_of(tool);
    let slot_for = |tool_args: &'static [&'static str], kind: ToolKind, role: Role| {
        tool_args
            .iter()
            .copied()
            .find(|a| role_of(kind, a) == Some(role))
    };
    if let Some(patch) = &patch
        && slot_for(accepts, ToolKind::Edit, Role::Patch).is_none()
        && let Some(shell) = target.tool_for(ToolKind::Shell)
    {
        let script = format!("apply_patch <<'PATCH'\n{}\nPATCH", patch.trim_end());
        let key = slot_for(target.arguments_of(shell), ToolKind::Shell, Role::Command)
            .unwrap_or("command");
        let mut args = Map::new();
        args.insert(key.into(), json!(script));
        // The call's other arguments have no place in a shell call.
        let dropped: Vec<(String, String)> = match arguments {
            Value::Object(m) => m
                .iter()
                .filter(|(k, _)| role_of(ToolKind::Edit, k) != Some(Role::Patch))
                .map(|(k, v)| (k.clone(), text_of(v)))
                .collect(),
            _ => Vec::new(),
        };
        if !dropped.is_empty() {
            args.insert(NOTE_KEY.into(), json!(note_text(name, &dropped)));
        }
        return Translated {
            name: shell.to_owned(),
            arguments: Value::Object(args),
            kind: ToolKind::Shell,
            mapped: true,
            dropped,
        };
    }
    let mut out = Map::new();
    let mut dropped = Vec::new();
    if let Some(p) = &patch
        && let Some(key) = slot_for(accepts, ToolKind::Edit, Role::Patch)
    {
        out.insert(key.into(), json!(p));
    }
    let source_args: Map<String, Value> = match arguments {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        _ if patch.is_some() => Map::new(),
        other => Map::from_iter([("input".to_owned(), other.clone())]),
    };
    for (key, value) in &source_args {
        let role = role_of(kind, key);
        if patch.is_some() && role == Some(Role::Patch) {
            continue;
        }
        let slot = role.and_then(|r| slot_for(accepts, kind, r));
        let Some(slot) = slot else {
            dropped.push((key.clone(), text_of(value)));
            continue;
        };
        let value = match role {
            Some(Role::Command) if kind == ToolKind::Shell => {
                json!(crate::shell_command(name, arguments).unwrap_or_else(|| text_of(value)))
            }
            Some(Role::Timeout) => {
                let from_s = in_seconds(source, name, key);
                let to_s = slot.ends_with(":s");
                match (value.as_f64(), from_s, to_s) {
                    (Some(s), true, false) => json!((s * 1000.0) as i64),
                    (Some(ms), false, true) => json!((ms / 1000.0).ceil() as i64),
                    _ => value.clone(),
                }
            }
            _ => value.clone(),
        };
        out.insert(slot.strip_suffix(":s").unwrap_or(slot).into(), value);
    }
    if !dropped.is_empty() {
        out.insert(NOTE_KEY.into(), json!(note_text(name, &dropped)));
    }
    Translated {
        name: tool.to_owned(),
        arguments: Value::Object(out),
        kind,
        mapped: true,
        dropped,
    }
}

/// Codex's code-mode tool: its freeform input is JavaScript calling the
/// other tools as `tools.<name>({...})`.
pub const CODE_MODE_TOOL: &str = "exec";

/// Holds the shell call a code-mode script makes.
#[derive(Debug, PartialEq)]
struct Nested {
    /// The shell tool the script calls (e.g. `exec_command`).
    tool: String,
    /// Its arguments as JSON; several calls' commands joined by newlines.
    arguments: Value,
    /// The script, when it does more than make those calls and print
    /// their results (carried as a note: the target runs no JavaScript).
    rest: Option<String>,
}

/// Returns the shell call of a code-mode script whose nested calls are all
/// of one shell tool with literal arguments (`tools.exec_command({cmd:
/// "make"})`); `None` for any other script (no call, another tool, a
/// computed argument), which then stays an `exec` call with its text.
fn code_mode_shell(script: &str) -> Option<Nested> {
    const MARK: &str = "tools.";
    let mut calls: Vec<(String, Map<String, Value>)> = Vec::new();
    let mut rest = String::new();
    let mut at = 0;
    while let Some(found) = script[at..].find(MARK) {
        let start = at + found;
        rest.push_str(&script[at..start]);
        let after = &script[start + MARK.len()..];
        let tool: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let mut p = js::Cursor::new(&after[tool.len()..]);
        p.skip_space();
        p.eat('(')?;
        let args = p.object()?;
        p.skip_space();
        p.eat(')')?;
        if kind_of(&tool) != ToolKind::Shell {
            return None;
        }
        calls.push((tool, args));
        at = start + MARK.len() + (after.len() - p.rest().len());
    }
    rest.push_str(&script[at..]);
    let (tool, first) = calls.first()?.clone();
    // One tool, the same arguments but the command: one script.
    let command_key = |m: &Map<String, Value>| {
        ["cmd", "command"]
            .into_iter()
            .find(|k| m.get(*k).is_some_and(Value::is_string))
    };
    let key = command_key(&first)?;
    let mut commands = Vec::new();
    for (t, args) in &calls {
        let mut others = args.clone();
        let cmd = others.remove(command_key(args)?)?;
        let mut first_others = first.clone();
        first_others.remove(key);
        if *t != tool || others != first_others {
            return None;
        }
        commands.push(cmd.as_str()?.to_owned());
    }
    let mut arguments = first;
    arguments.insert(key.to_owned(), json!(commands.join("\n")));
    // What is left besides the calls: bindings, awaits, `text(r)`.
    let residue: String = rest
        .split([';', '\n'])
        .map(str::trim)
        .filter(|stmt| {
            let stmt = ["const ", "let ", "var "]
                .iter()
                .find_map(|k| stmt.strip_prefix(k))
                .and_then(|s| s.split_once('=').map(|(_, v)| v.trim()))
                .unwrap_or(stmt);
            let stmt = stmt.strip_prefix("await").map_or(stmt, str::trim);
            let printed = stmt
                .strip_prefix("text(")
                .and_then(|s| s.strip_suffix(')'))
                .is_some_and(|v| v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            !(stmt.is_empty() || printed)
        })
        .collect();
    Some(Nested {
        tool,
        arguments: Value::Object(arguments),
        rest: (!residue.is_empty()).then(|| script.to_owned()),
    })
}

/// A reader of the JavaScript literals code-mode calls pass: objects with
/// plain or quoted keys, strings in any quotes (no `${}`), numbers,
/// booleans, null and arrays of those.
mod js {
    use serde_json::{Map, Value, json};

    pub(super) struct Cursor<'a> {
        s: &'a str,
    }

    impl<'a> Cursor<'a> {
        pub(super) fn new(s: &'a str) -> Cursor<'a> {
            Cursor { s }
        }

        pub(super) fn rest(&self) -> &'a str {
            self.s
        }

        pub(super) fn skip_space(&mut self) {
            self.s = self.s.trim_start();
        }

        pub(super) fn eat(&mut self, c: char) -> Option<()> {
            self.skip_space();
            self.s = self.s.strip_prefix(c)?;
            Some(())
        }

        pub(super) fn object(&mut self) -> Option<Map<String, Value>> {
            self.eat('{')?;
            let mut out = Map::new();
            loop {
                self.skip_space();
                if self.eat('}').is_some() {
                    return Some(out);
                }
                let key = match self.s.chars().next()? {
                    '"' | '\'' | '`' => self.string()?,
                    _ => {
                        let k: String = self
                            .s
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$')
                            .collect();
                        if k.is_empty() {
                            return None;
                        }
                        self.s = &self.s[k.len()..];
                        k
                    }
                };
                self.eat(':')?;
                let value = self.value()?;
                out.insert(key, value);
                self.skip_space();
                if self.eat(',').is_none() {
                    self.eat('}')?;
                    return Some(out);
                }
            }
        }

        fn value(&mut self) -> Option<Value> {
            self.skip_space();
            match self.s.chars().next()? {
                '"' | '\'' | '`' => self.string().map(Value::String),
                '{' => self.object().map(Value::Object),
                '[' => {
                    self.eat('[')?;
                    let mut items = Vec::new();
                    loop {
                        self.skip_space();
                        if self.eat(']').is_some() {
                            return Some(Value::Array(items));
                        }
                        items.push(self.value()?);
                        self.skip_space();
                        if self.eat(',').is_none() {
                            self.eat(']')?;
                            return Some(Value::Array(items));
                        }
                    }
                }
                _ => {
                    let word: String = self
                        .s
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
                        .collect();
                    self.s = &self.s[word.len()..];
                    match word.as_str() {
                        "true" => Some(json!(true)),
                        "false" => Some(json!(false)),
                        "null" => Some(Value::Null),
                        n => n
                            .parse::<i64>()
                            .map(Value::from)
                            .ok()
                            .or_else(|| n.parse::<f64>().ok().map(Value::from)),
                    }
                }
            }
        }

        /// Reads a quoted string with JavaScript's escapes; a template
        /// string with a substitution is no literal.
        fn string(&mut self) -> Option<String> {
            let s = self.s;
            let quote = s.chars().next()?;
            let mut out = String::new();
            let mut chars = s[1..].char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    c if c == quote => {
                        self.s = &s[1 + i + c.len_utf8()..];
                        return Some(out);
                    }
                    '$' if quote == '`' && s[1 + i..].starts_with("${") => return None,
                    '\\' => {
                        let (_, e) = chars.next()?;
                        out.push(match e {
                            'n' => '\n',
                            't' => '\t',
                            'r' => '\r',
                            '0' => '\0',
                            'u' => {
                                let hex: String = (0..4)
                                    .filter_map(|_| chars.next().map(|(_, h)| h))
                                    .collect();
                                char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?
                            }
                            '\n' => continue,
                            other => other,
                        });
                    }
                    '\n' if quote != '`' => return None,
                    c => out.push(c),
                }
            }
            None
        }
    }
}

/// Returns the loss line for a `message.thinking` event whose text another
/// agent's render carries as plain reasoning while its provider-bound part
/// (a Claude or Pi thinking signature, a redacted block, Codex's encrypted
/// reasoning) stays behind: `None` when it has none.
pub fn opaque_reasoning_loss(
    event: &git_session_schema::Event,
    target: &AgentSpec,
) -> Option<String> {
    let p = &event.payload;
    let opaque = p.get("opaque").is_some_and(|o| !o.is_null())
        || p.get("encrypted") == Some(&Value::Bool(true))
        || p.get("redacted") == Some(&Value::Bool(true))
        || p.get("signature").is_some_and(|s| !s.is_null());
    opaque.then(|| {
        format!(
            "reasoning-opaque-dropped: seq {}: {} reasoning written as plain text for {}; its provider-bound signature or ciphertext is not",
            event.seq, event.agent, target.display
        )
    })
}

/// Returns the text a render writes, as an assistant message the target
/// model reads, for a web search another agent ran with a built-in tool
/// that has no call/result pair to translate (a Codex `web_search_call`
/// item: `payload.web_search`), and the loss line saying only the text
/// survives (`web-search-as-text`). `None` for any other event.
pub fn web_search_note(
    event: &git_session_schema::Event,
    target: &AgentSpec,
) -> Option<(String, String)> {
    let w = event.payload.get("web_search")?.as_object()?;
    let field = |k: &str| w.get(k).and_then(Value::as_str);
    let mut parts = Vec::new();
    if let Some(q) = field("query") {
        parts.push(format!("query {q:?}"));
    }
    if let Some(u) = field("url") {
        parts.push(format!("url {u}"));
    }
    if let Some(p) = field("pattern") {
        parts.push(format!("pattern {p:?}"));
    }
    if let Some(s) = field("status").filter(|s| *s != "completed") {
        parts.push(format!("status {s}"));
    }
    let action = field("action").unwrap_or("search");
    let what = if parts.is_empty() {
        String::new()
    } else {
        format!(": {}", parts.join(", "))
    };
    let note = format!(
        "[{} ran a web search ({action}){what}; its results were not recorded]",
        event.agent
    );
    let loss = format!(
        "web-search-as-text: seq {}: {} web search ({action}) written as a note in the history; {} gets no call or results",
        event.seq, event.agent, target.display
    );
    Some((note, loss))
}

/// Keeps a sub-agent's events out of another agent's main line.
///
/// Claude Code's older files hold a sub-agent's records inside the main
/// file (`isSidechain: true`; the parse marks their events `sidechain`).
/// A Claude target writes them back as sidechain records, its own
/// sub-agent form; every other target gets the spawning call and its
/// result (which holds the sub-agent's answer) and not the sub-agent's
/// turns, and one `subagent-folded` loss line per sub-agent names the
/// seqs left out.
#[derive(Debug)]
pub struct SubAgentFold {
    keeps_sidechains: bool,
    folded: std::collections::BTreeMap<String, Vec<u64>>,
}

impl SubAgentFold {
    /// Returns the fold for a render to `target`.
    pub fn new(target: &Agent) -> SubAgentFold {
        SubAgentFold {
            keeps_sidechains: *target == Agent::Claude,
            folded: Default::default(),
        }
    }

    /// Says whether `event` goes to the target (remembering it if not).
    pub fn keep(&mut self, event: &git_session_schema::Event) -> bool {
        let sidechain = event.payload.get("sidechain") == Some(&Value::Bool(true));
        if !sidechain || self.keeps_sidechains {
            return true;
        }
        let agent = event
            .payload
            .get("subagent")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned();
        self.folded.entry(agent).or_default().push(event.seq);
        false
    }

    /// Returns the loss lines: one per sub-agent whose events were left out.
    pub fn losses(&self) -> Vec<String> {
        self.folded
            .iter()
            .map(|(agent, seqs)| {
                format!(
                    "subagent-folded: seqs {} ({} events of sub-agent {agent}) not written as main-line turns; the spawning call's result carries the sub-agent's answer",
                    crate::seq_list(seqs),
                    seqs.len()
                )
            })
            .collect()
    }
}

/// Returns the patch a call carries (Codex `apply_patch`, freeform or
/// `{"input": …}`; any edit tool's `patch`/`patchText`).
fn patch_text(name: &str, arguments: &Value) -> Option<String> {
    if kind_of(name) != ToolKind::Edit {
        return None;
    }
    match arguments {
        Value::String(s) if s.contains("*** Begin Patch") => Some(s.clone()),
        Value::Object(m) => ["input", "patch", "patchText"]
            .iter()
            .find_map(|k| m.get(*k).and_then(Value::as_str))
            .filter(|s| s.contains("*** Begin Patch") || s.starts_with("--- "))
            .map(str::to_owned),
        _ => None,
    }
}

/// Returns the note a translated call carries for the arguments of the
/// original call `name` that have no counterpart.
fn note_text(name: &str, dropped: &[(String, String)]) -> String {
    let note = dropped
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ");
    format!("[arguments of the original {name} call: {note}]")
}

/// Returns a value as one line of text, bounded.
fn text_of(value: &Value) -> String {
    let s = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut s = s.replace('\n', " ");
    if s.len() > 200 {
        let mut end = 200;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_head_is_its_exit_code_and_first_line() {
        let codex = "Chunk ID: 1f\nWall time: 0.1 seconds\nProcess exited with code 2\nOutput:\n\n  no such file\nmore\n";
        assert_eq!(output_head(codex), "exit 2: no such file");
        assert_eq!(
            output_head("Process exited with code 0\nOutput:\n"),
            "exit 0"
        );
        assert_eq!(output_head("\n  plain text \nsecond"), "plain text");
        assert_eq!(output_head(""), "");
    }

    #[test]
    fn failure_is_read_from_the_flag_the_code_or_the_text() {
        assert_eq!(failure(&json!({"is_error": false, "output": "ok"})), None);
        assert_eq!(
            failure(&json!({"is_error": true, "output": "Exit code 2\nboom"})),
            Some(Failure { exit_code: Some(2) })
        );
        assert_eq!(
            failure(&json!({"exit_code": 3, "output": ""})),
            Some(Failure { exit_code: Some(3) })
        );
        assert_eq!(
            failure(&json!({"is_error": true, "output": "no such tool"})),
            Some(Failure { exit_code: None })
        );
        assert_eq!(failure(&json!({"exit_code": 0, "output": "fine"})), None);
    }

    #[test]
    fn a_code_mode_exec_call_becomes_the_targets_shell_call() {
        use crate::registry::adapter;
        let claude = adapter(&Agent::Claude).unwrap().spec();
        let pi = adapter(&Agent::Pi).unwrap().spec();
        let script = json!(
            "const r = await tools.exec_command({cmd: \"echo hello > note.txt\", workdir: '/w'});\ntext(r);"
        );
        let t = translate(claude, &Agent::Codex, "exec", &script);
        assert_eq!(t.name, "Bash");
        assert_eq!(t.kind, ToolKind::Shell);
        assert_eq!(t.arguments["command"], "echo hello > note.txt");
        // workdir has no Bash counterpart: a note, not silence.
        assert_eq!(t.dropped, vec![("workdir".to_owned(), "/w".to_owned())]);
        let wrapped = json!({ "input": script });
        assert_eq!(
            translate(claude, &Agent::Codex, "exec", &wrapped).name,
            "Bash"
        );
        let t = translate(pi, &Agent::Codex, "exec", &script);
        assert_eq!(
            (t.name.as_str(), &t.arguments["command"]),
            ("bash", &json!("echo hello > note.txt"))
        );
        // Several calls of the shell: one script, in order; escapes read.
        let two = json!(
            "await tools.exec_command({\"cmd\": \"make\"});\nconst x = await tools.exec_command({ cmd: `cat a\\tb` });\ntext(x)"
        );
        let t = translate(claude, &Agent::Codex, "exec", &two);
        assert_eq!(t.arguments["command"], "make\ncat a\tb");
        assert!(t.dropped.is_empty(), "{:?}", t.dropped);
        // More code than the calls: the script travels as a note.
        let logic = json!(
            "const r = await tools.exec_command({cmd: \"ls\"}); if (r.includes('x')) { text('yes'); }"
        );
        let t = translate(claude, &Agent::Codex, "exec", &logic);
        assert_eq!(t.arguments["command"], "ls");
        assert_eq!(t.dropped[0].0, "script");
        assert!(
            t.arguments[NOTE_KEY]
                .as_str()
                .unwrap()
                .contains("r.includes")
        );
        // Computed arguments, other tools, no call: stays an exec call.
        for odd in [
            "await tools.exec_command({cmd: `rm ${dir}`})",
            "await tools.exec_command({cmd: name})",
            "await tools.view_image({path: \"a.png\"})",
            "text(1 + 1)",
        ] {
            let t = translate(claude, &Agent::Codex, "exec", &json!(odd));
            assert_eq!((t.name.as_str(), t.mapped), ("exec", false), "{odd}");
        }
    }

    #[test]
    fn a_marked_text_reads_back_as_failed_and_a_plain_one_does_not() {
        let f = Failure { exit_code: Some(1) };
        let codex = mark_failed("boom", f, true);
        assert!(codex.starts_with("Process exited with code 1\n"), "{codex}");
        assert!(marked_failed(&codex));
        assert!(marked_failed(&mark_failed(
            "x",
            Failure { exit_code: None },
            false
        )));
        assert!(!marked_failed("Process exited with code 0\nOutput:\nfine"));
        assert!(!marked_failed("all good"));
        // Marking twice does not stack prefixes.
        assert_eq!(mark_failed(&codex, f, true), codex);
    }
}
