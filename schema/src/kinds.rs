//! Well-known event types (seed 000 §5.4). The namespace is open: any other
//! dotted name is a valid type and is stored and returned unchanged.

/// Session started: cwd, git head, model, config.
pub const SESSION_START: &str = "session.start";
/// Session ended: reason, statistics.
pub const SESSION_END: &str = "session.end";
/// A user message (text, images by artifact).
pub const MESSAGE_USER: &str = "message.user";
/// An assistant message: content, model, stop reason, usage.
pub const MESSAGE_ASSISTANT: &str = "message.assistant";
/// Reasoning; provider-bound signatures or ciphertext stay opaque.
pub const MESSAGE_THINKING: &str = "message.thinking";
/// A tool call. Payload: `name`, `call_id`, and `arguments`: an object for
/// JSON-argument tools, a string for freeform input (with `freeform: true`).
pub const TOOL_CALL: &str = "tool.call";
/// A tool result. Payload: `call_id`, `output` (text), `is_error`.
pub const TOOL_RESULT: &str = "tool.result";
/// A file was read: path, range, digest.
pub const FILE_READ: &str = "file.read";
/// A file was edited: path, unified diff, digests.
pub const FILE_EDIT: &str = "file.edit";
/// A command ran: cmd, exit code, output tail, cwd.
pub const COMMAND_RUN: &str = "command.run";
/// A todo item was added.
pub const TODO_ADD: &str = "todo.add";
/// A todo item changed.
pub const TODO_UPDATE: &str = "todo.update";
/// A decision: conclusion, reasons, alternatives.
pub const DECISION: &str = "decision";
/// A durable memory write.
pub const MEMORY_WRITE: &str = "memory.write";
/// A snapshot anchor.
pub const CHECKPOINT: &str = "checkpoint";
/// A compiled context was produced.
pub const CONTEXT_COMPILED: &str = "context.compiled";
/// The session was handed to another agent.
pub const HANDOFF: &str = "handoff";
/// The session was forked.
pub const SESSION_FORK: &str = "session.fork";
/// Another session's result was merged back.
pub const SESSION_MERGE: &str = "session.merge";
/// Anything else, usually the raw native record kept for faithful write-back.
pub const META: &str = "meta";
