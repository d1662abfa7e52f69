//! Native agent session formats to and from the canonical model.
//!
//! An adapter knows one agent's format and nothing else. It never opens a
//! file, reads the environment or looks at a clock. It declares, as data,
//! where its sessions live ([`source::Source`]: JSONL files, zstd-framed
//! JSONL files, SQLite tables) and what the agent is ([`registry::AgentSpec`]:
//! names, store, tools, tokenizer, resume command). The root crate
//! (`src/native/`) reads the declared sources, hands complete records with
//! their native positions ([`source::Records`]) to [`Adapter::parse`], and
//! appends what comes back; for write-back it asks [`Adapter::render_to`]
//! for a [`ChangeSet`] (files and database rows) and applies it atomically.
//! That keeps every adapter testable with bytes from `fixtures/` alone.
//!
//! The agent list lives once, in [`registry::ADAPTERS`]; [`adapter`] finds
//! an agent's adapter there. `docs/adding-an-adapter.md` walks through
//! adding one.
//!
//! Incremental capture: the root crate keeps a cursor per source (byte
//! offset, frame offset, or row id per table) and, per session, the
//! adapter's own [`ParseState`], and passes only complete new records. An
//! adapter that needs memory across calls (tool calls waiting for their
//! results, native ids already mapped to seqs) keeps it in the state it
//! returns, never in `self`.

pub mod claude;
pub mod loss;
pub mod registry;
pub mod source;
pub mod tools;

use std::path::PathBuf;

use git_session_schema::{Agent, ArtifactId, Event, SessionHeader};
use serde_json::Value;

pub use registry::{AgentSpec, TokenizerFamily, ToolKind, adapter, by_name};
pub use source::{ExtraDir, Position, Record, Records, Source};

pub mod codex;
pub mod dsh;
pub mod hermes;
mod images;
pub mod opencode;
pub mod pi;

/// Adapter-owned memory carried from one parse of a file to the next.
///
/// Opaque to everyone but the adapter that wrote it; `ops` stores it with the
/// capture cursor (local state, rebuildable by re-reading the file).
pub type ParseState = Value;

/// Memory an adapter keeps from one parse call to the next within one
/// capture of one source (`ops` hands back what the last call left in
/// [`Parsed::memo`]), for what is costly to rebuild from the
/// [`ParseState`] on every call: capture parses a file in small blocks,
/// so a structure rebuilt per call costs its whole size every block. Never
/// stored: a later capture starts without it, so nothing may depend on
/// it but speed. A clone is empty.
#[derive(Default)]
pub struct ParseMemo(Option<Box<dyn std::any::Any + Send>>);

impl ParseMemo {
    /// Takes what the last call kept, if it is a `T`.
    pub fn take<T: std::any::Any>(&mut self) -> Option<T> {
        match self.0.take()?.downcast::<T>() {
            Ok(t) => Some(*t),
            Err(_) => None,
        }
    }

    /// Keeps `value` for the next call.
    pub fn put<T: std::any::Any + Send>(&mut self, value: T) {
        self.0 = Some(Box::new(value));
    }
}

impl Clone for ParseMemo {
    fn clone(&self) -> ParseMemo {
        ParseMemo(None)
    }
}

impl std::fmt::Debug for ParseMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ParseMemo(..)"
        } else {
            "ParseMemo"
        })
    }
}

/// Holds a batch of new records of one native session to parse.
#[derive(Clone, Debug)]
pub struct ParseInput<'a> {
    /// Complete records only, with their native positions: a line the agent
    /// is still writing, or a torn last frame, is left for the next capture.
    pub records: Records<'a>,
    /// The seq the first event produced must get. Events are numbered
    /// contiguously from here; `parent_seq` may point at earlier seqs.
    pub next_seq: u64,
    /// What the previous call for this file returned, or `None` on the first.
    pub state: Option<ParseState>,
    /// The source's path relative to the agent's store root (the file, or
    /// the database), used to tell sub-agent transcripts apart and in
    /// warnings.
    pub source: &'a str,
    /// For a source holding many sessions (a database), the native session
    /// the root crate grouped these records under ([`source::Table::session`]);
    /// `None` for a file that is one session.
    pub session: Option<&'a str>,
    /// The bytes of the file [`Adapter::sidecar`] names for this session
    /// file, when it exists (e.g. Claude Code's `agent-<id>.meta.json`,
    /// which names the spawning tool call); `ops` passes it when it needs
    /// the session facts of a new file.
    pub sidecar: Option<&'a [u8]>,
    /// What the last call for this source left in [`Parsed::memo`] during
    /// this capture; empty on a first call.
    pub memo: ParseMemo,
}

/// Holds what one parse produced; partial success is a value.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    /// Session-level facts found so far (native id, cwd, title, created).
    pub session: NativeSession,
    /// New events, unsealed, numbered from [`ParseInput::next_seq`].
    pub events: Vec<Event>,
    /// Artifacts the events reference (images, long outputs), by content id.
    pub artifacts: Vec<(ArtifactId, Vec<u8>)>,
    /// Records that could not be mapped; the session is still captured.
    pub warnings: Vec<Warning>,
    /// State to hand back on the next call for this file.
    pub state: ParseState,
    /// Memory to hand back on the next call within this capture (see
    /// [`ParseMemo`]).
    pub memo: ParseMemo,
    /// Set when this build cannot read the source at all (a format version
    /// it does not know, a file name that contradicts the content): the
    /// reason, naming what to do. The root crate then skips the source
    /// (capture reports it, the other sources are still captured) instead
    /// of storing a half-understood session.
    pub refused: Option<String>,
}

/// Holds facts about a native session that go into the canonical header.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NativeSession {
    /// The agent's own session id.
    pub native_id: Option<String>,
    /// The working directory the session ran in.
    pub cwd: Option<String>,
    /// The title the agent or user gave it.
    pub title: Option<String>,
    /// When the session started, RFC 3339 UTC.
    pub created: Option<String>,
    /// For a sub-agent or forked transcript: the native id of its parent
    /// session and, when known, the native id of the spawning tool call.
    pub parent: Option<NativeParent>,
}

/// Points from a child transcript to the session that spawned it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NativeParent {
    /// The parent's native session id.
    pub native_id: String,
    /// The native id of the tool call that started the child, if known.
    pub spawned_by: Option<String>,
    /// The child continues the parent's conversation rather than branching
    /// off it (Hermes' compression split: the parent ended and the child
    /// holds the rest): capture appends the child's events to the canonical
    /// session the parent feeds, instead of making a session of its own.
    pub continues: bool,
}

/// Describes one record that was kept as a warning instead of an event.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    /// Where: the record's [`Position::ordinal`] (zero-based line number,
    /// or `rowid`).
    pub line: u64,
    /// What was wrong and what happened to the record.
    pub message: String,
}

/// Holds what a streaming render needs besides the events.
///
/// Events come separately, as an iterator, so that a render never needs the
/// whole session in memory; artifacts are looked up when an event needs one.
#[derive(Clone, Copy)]
pub struct RenderHead<'a> {
    /// The canonical session's header.
    pub header: &'a SessionHeader,
    /// Returns the bytes of an artifact the events reference.
    pub artifact: &'a dyn Fn(&ArtifactId) -> Option<Vec<u8>>,
    /// The native session id to write under (the original one, or a new id
    /// for a fork).
    pub native_id: &'a str,
    /// The working directory to record: this machine's repo location, which
    /// may differ from the captured `cwd`.
    pub cwd: &'a str,
    /// When the render happens, RFC 3339 UTC, for any timestamp the format
    /// needs that the events do not supply.
    pub now: &'a str,
}

/// Receives the files of a render as they are produced.
///
/// `ops` implements it with temporary files it renames into place once the
/// render succeeded; [`MemorySink`] collects them for tests.
pub trait FileSink {
    /// Starts the file `path` (relative to the agent's store root); the
    /// following writes go to it.
    fn begin(&mut self, path: &std::path::Path) -> Result<(), String>;
    /// Starts a file of concatenated zstd frames ([`Source::ZstdJsonl`]):
    /// the writes up to each [`FileSink::end_frame`] (or the end of the
    /// file) become one checksummed frame. The adapter writes plain JSONL;
    /// the sink compresses.
    fn begin_framed(&mut self, path: &std::path::Path) -> Result<(), String> {
        Err(format!(
            "{}: this sink cannot write zstd-framed files",
            path.display()
        ))
    }
    /// Closes the current frame of a framed file; the next write starts a
    /// new one. On a plain file it does nothing.
    fn end_frame(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Appends bytes to the current file (plain bytes; for a framed file,
    /// content of the current frame).
    fn write(&mut self, bytes: &[u8]) -> Result<(), String>;
}

/// Collects rendered files in memory.
#[derive(Debug, Default)]
pub struct MemorySink {
    /// The files, in the order they were begun.
    pub files: Vec<FileWrite>,
}

impl FileSink for MemorySink {
    fn begin(&mut self, path: &std::path::Path) -> Result<(), String> {
        self.files.push(FileWrite {
            path: path.to_owned(),
            bytes: Vec::new(),
            frames: None,
        });
        Ok(())
    }

    fn begin_framed(&mut self, path: &std::path::Path) -> Result<(), String> {
        self.files.push(FileWrite {
            path: path.to_owned(),
            bytes: Vec::new(),
            frames: Some(Vec::new()),
        });
        Ok(())
    }

    fn end_frame(&mut self) -> Result<(), String> {
        let f = self.files.last_mut().ok_or("end_frame before begin")?;
        if let Some(ends) = &mut f.frames
            && ends.last().copied() != Some(f.bytes.len())
        {
            ends.push(f.bytes.len());
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        match self.files.last_mut() {
            Some(f) => {
                f.bytes.extend_from_slice(bytes);
                Ok(())
            }
            None => Err("write before begin".into()),
        }
    }
}

/// Holds a whole session for an in-memory render (tests, small sessions).
#[derive(Clone, Debug)]
pub struct RenderRequest<'a> {
    /// The canonical session's header.
    pub header: &'a SessionHeader,
    /// Every event of the session, in seq order.
    pub events: &'a [Event],
    /// Artifact bytes the events reference.
    pub artifacts: &'a [(ArtifactId, Vec<u8>)],
    /// The native session id to write under (the original one, or a new id
    /// for a fork).
    pub native_id: &'a str,
    /// The working directory to record: this machine's repo location, which
    /// may differ from the captured `cwd`.
    pub cwd: &'a str,
    /// When the render happens, RFC 3339 UTC, for any timestamp the format
    /// needs that the events do not supply.
    pub now: &'a str,
}

/// Holds what a render wants done besides the files it streamed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChangeSet {
    /// Files to create, relative to the agent's store root: filled by the
    /// in-memory [`Adapter::render`]; a streaming render leaves it empty
    /// and sends the files to its [`FileSink`].
    pub files: Vec<FileWrite>,
    /// The command that resumes the session, e.g. `claude --resume <id>`
    /// (from [`AgentSpec::resume_command`]).
    pub resume_command: String,
    /// What the target cannot hold, one line each (the loss report). Each
    /// line starts with a stable code and a colon: `thinking-dropped`,
    /// `image-omitted`, `tool-result-orphaned`, `tool-id-renamed`,
    /// `message-id-renamed`, `uuid-assigned`, `block-relinked`,
    /// `message-empty`, `derived-event-folded`, `event-unmapped`,
    /// `fork-parent-missing`, `subagent-meta-omitted`, `unparsed-line-omitted`,
    /// `tool-unmapped` (a call to a tool the target does not have, written
    /// under its own name), `argument-dropped`, `subagent-folded`,
    /// `reasoning-opaque-dropped`, `web-search-as-text` (see [`tools`] and
    /// docs/handoff.md). Every source event and field not carried is
    /// named with its seq ([`loss::Losses`]).
    pub losses: Vec<String>,
    /// Lines to append to shared index files, relative to the store root
    /// (created when missing). Each `bytes` is whole lines ending in `\n`;
    /// `ops` appends them after the `files` are in place, and never
    /// rewrites what the file already holds (e.g. Codex's
    /// `session_index.jsonl`, where the newest entry for an id wins).
    pub appends: Vec<FileWrite>,
    /// Things the user must know about writing for this target, said once
    /// in the output of `resume` and `handoff` (e.g. that the agent uploads
    /// its session logs to its provider).
    pub notices: Vec<String>,
    /// Lock files (relative to the store root) the agent `flock`s while it
    /// writes the session: the root crate takes each one (exclusive,
    /// non-blocking, created when missing) while it applies the change set,
    /// and refuses to write while the agent holds one.
    pub locks: Vec<PathBuf>,
    /// Database rows to insert (a SQLite agent's session and message rows,
    /// or the Codex `threads` index row of `state_5.sqlite`), in order; see
    /// [`RowWrite`]. All rows of one database go in one transaction, after
    /// one backup of that database.
    pub rows: Vec<RowWrite>,
    /// The agent's own import of the session, tried before `rows`; see
    /// [`NativeImport`].
    pub import: Option<NativeImport>,
}

/// Holds one database row a render wants inserted; the adapter never opens
/// the database itself.
///
/// The root crate inserts rows only when the database file and the table
/// already exist (otherwise the agent builds its index from the files on
/// first use, or the write is refused for a store that has only a
/// database), never while the agent holds the database, and never updates
/// or deletes rows. A row whose `key` values are already there is skipped.
/// All rows of one database are inserted in one transaction, in the order
/// of [`ChangeSet::rows`], after one backup of the database.
///
/// Rows whose key the database assigns (an `INTEGER PRIMARY KEY
/// AUTOINCREMENT` id): leave the key column out of `columns` (and `key`
/// empty: such a row is always inserted), set `assigns` to a label, and
/// let later rows name that label in `refs` (column -> label): they get
/// the `rowid` the insert produced (or the existing row's `rowid`, when the
/// labelled row was skipped as present).
///
/// Values: null is NULL, booleans are 0/1, numbers are INTEGER or REAL,
/// strings are TEXT, `{"$blob": "<base64>"}` is a BLOB, any other object
/// or array is stored as its JSON text.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowWrite {
    /// The SQLite database, relative to the agent's store root.
    pub database: PathBuf,
    /// The table to insert into.
    pub table: String,
    /// The columns that identify the row (the primary key).
    pub key: Vec<String>,
    /// Column values; columns the table has but this map lacks get the
    /// table's defaults. Objects and arrays are stored as JSON text.
    pub columns: serde_json::Map<String, Value>,
    /// Columns whose string value is a path relative to the store root,
    /// which the root crate makes absolute (the agent stores absolute paths).
    pub root_relative: Vec<String>,
    /// A label under which later rows refer to the `rowid` this insert gets.
    pub assigns: Option<String>,
    /// Columns that take the `rowid` of an earlier row: column -> label.
    pub refs: Vec<(String, String)>,
    /// Marks the row that holds the session itself (a `sessions` row, not
    /// an index entry). When a row with its `key` already exists, the
    /// session is already there: with the same values in `columns` the
    /// database's rows are left alone (resuming twice is a no-op); with
    /// different values the write-back is refused, as for a different file
    /// in the way, and `--fork` writes under a new id.
    pub session_row: bool,
    /// Columns the root crate fills with facts about the repository the
    /// session is written for (an agent that keys sessions by project,
    /// e.g. OpenCode's `project_id` = the root commit hash).
    pub repo: Vec<(String, RepoFact)>,
    /// Columns the table keeps unique (when not NULL) whose value the write
    /// may number: when another row of the table already holds it, the row
    /// is written with the next value of its lineage, `<base> #N`, N one
    /// more than the highest number in use (the unnumbered value counts as
    /// 1; a value's own ` #N` suffix is not part of its base). This is
    /// Hermes' rule for `sessions.title` (`get_next_title_in_lineage`), so a
    /// session handed off twice reads `title`, `title #2` in its lists.
    pub numbered: Vec<String>,
}

/// Names a fact about the repository a session is written for, which only
/// the root crate knows (see [`RowWrite::repo`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepoFact {
    /// The root commit hash (the smallest, when there are several); the
    /// given text when the repository has no commit yet.
    RootCommit(&'static str),
    /// The work tree's root directory, absolute.
    Worktree,
    /// The session's directory relative to the work tree root (`""` at the
    /// root).
    RelativeCwd,
}

/// Holds a document the agent's own import command reads: the preferred
/// way to write a session when the agent's program is available (e.g.
/// `opencode import FILE`), with [`ChangeSet::rows`] as the fallback.
///
/// The root crate writes `document` to a temporary file named `file_name`,
/// runs `program` (found on `PATH`) with `args` (`{file}` = the document's
/// path) from the session's directory, with `env` set (`{home}` = the home
/// directory, `{root}` = the agent's store root), and then checks that the
/// session row of [`ChangeSet::rows`] is there. When the program is
/// missing or fails, the rows are inserted instead.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NativeImport {
    /// The program, looked up on `PATH`.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables to set for it.
    pub env: Vec<(String, String)>,
    /// The file name of the document (its directory is temporary).
    pub file_name: String,
    /// The document.
    pub document: Vec<u8>,
}

/// Holds one file of a [`ChangeSet`].
#[derive(Clone, Debug, PartialEq)]
pub struct FileWrite {
    /// Path relative to the agent's store root.
    pub path: PathBuf,
    /// The complete file content (for a framed file, the plain content).
    pub bytes: Vec<u8>,
    /// For a file of zstd frames: the end offset in `bytes` of each frame
    /// (the last frame ends at `bytes.len()`); `None` for a plain file.
    pub frames: Option<Vec<usize>>,
}

impl FileWrite {
    /// Returns a plain file.
    pub fn plain(path: impl Into<PathBuf>, bytes: Vec<u8>) -> FileWrite {
        FileWrite {
            path: path.into(),
            bytes,
            frames: None,
        }
    }
}

/// Says why a session could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The session has nothing the target can show.
    #[error("nothing to render: {0}")]
    Empty(String),
    /// The request itself cannot be rendered (e.g. a native id the target
    /// cannot use as a session id).
    #[error("invalid render request: {0}")]
    Request(String),
    /// The sink could not take a file.
    #[error("writing the native files failed: {0}")]
    Sink(String),
    /// An event the target needs is malformed.
    #[error("event {seq}: {message}")]
    Event {
        /// The offending event.
        seq: u64,
        /// What is wrong with it.
        message: String,
    },
}

/// Converts one agent's native session format to and from canonical events.
///
/// Implementations are stateless values; all per-file memory travels in
/// [`ParseState`].
pub trait Adapter: Sync {
    /// Returns the agent's row of the registry: names, store, sources,
    /// tools, tokenizer, resume command.
    fn spec(&self) -> &'static AgentSpec;

    /// Returns the agent this adapter speaks for.
    fn agent(&self) -> Agent {
        self.spec().agent.clone()
    }

    /// Returns the agent's store root given its environment: `env` looks up
    /// a variable (like `CLAUDE_CONFIG_DIR`), `home` is the user's home.
    fn store_root(&self, env: &dyn Fn(&str) -> Option<String>, home: &std::path::Path) -> PathBuf;

    /// Checks that `native_id` is an id this agent can have, before it
    /// becomes part of a path: write-back derives every file name from it,
    /// and a session's native id comes from whoever pushed the session.
    /// Ids must never hold separators beyond the agent's own layout, `..`,
    /// or anything absolute; renders call it and `ops` calls it again.
    fn validate_native_id(&self, native_id: &str) -> Result<(), String>;

    /// Returns whether `relative` (a path under the store root) is a file of
    /// one of the adapter's sources: by default, whether one of the
    /// [`AgentSpec::sources`] globs matches it. An adapter overrides it to
    /// check more than a glob can (e.g. a uuid in the name).
    fn is_session_file(&self, relative: &std::path::Path) -> bool {
        let Some(text) = relative.to_str() else {
            return false;
        };
        let text = text.replace('\\', "/");
        self.spec()
            .sources
            .iter()
            .flat_map(|s| s.globs().iter())
            .any(|g| source::glob_match(g, &text))
    }

    /// Returns the native id for a session written under a new id (a fork,
    /// or another agent's session), given a fresh uuid and the time in Unix
    /// milliseconds; by default the uuid itself.
    fn new_native_id(&self, uuid: &str, now_ms: i64) -> String {
        let _ = now_ms;
        uuid.to_owned()
    }

    /// Returns the directories besides the store root where the agent can
    /// be told to keep session files (an environment variable, a key of a
    /// settings file), as data: `native` resolves them
    /// ([`source::resolve_extra_dirs`]) and captures their files like the
    /// store root's. Default: none.
    fn extra_dirs(&self) -> &'static [ExtraDir] {
        &[]
    }

    /// Returns a file next to a session file (relative to the store root)
    /// whose content completes the session facts, if the agent keeps one.
    fn sidecar(&self, relative: &std::path::Path) -> Option<PathBuf> {
        let _ = relative;
        None
    }

    /// Maps native records to canonical events.
    fn parse(&self, input: ParseInput<'_>) -> Parsed;

    /// Rewrites a native record the way a same-agent render under
    /// `native_id` writes it back: the documented remaps of L2 fidelity.
    /// The conformance suite compares rendered records with native ones
    /// after this; an adapter whose render reproduces records exactly
    /// keeps the default, which changes nothing.
    ///
    /// A record the render does not write back at all becomes `null`
    /// (e.g. a link to a file that only exists on the machine that wrote
    /// it); see also [`Adapter::l0_written`].
    fn l2_remap(&self, record: &mut Value, native_id: &str) {
        let _ = (record, native_id);
    }

    /// Applies the documented L2 remaps to every record of one native
    /// session, in file order: for remaps that depend on the records
    /// before (a format migration that numbers entries). Default:
    /// [`Adapter::l2_remap`] on each record.
    fn l2_remap_session(&self, records: &mut [Value], native_id: &str) {
        for record in records {
            self.l2_remap(record, native_id);
        }
    }

    /// Clears, on a parsed event, what legitimately differs between a
    /// parse of the native session and a parse of its same-agent render
    /// (L0 round trip), on both sides before they are compared. Default:
    /// nothing differs.
    fn l0_remap(&self, event: &mut Event) {
        let _ = event;
    }

    /// Says whether a same-agent render writes the record of this parsed
    /// event back (the records [`Adapter::l2_remap`] turns into `null` are
    /// not); the L0 round trip compares only the events it does. Default:
    /// every event's record is written.
    fn l0_written(&self, event: &Event) -> bool {
        let _ = event;
        true
    }

    /// Renders a canonical session as native files, streaming: events are
    /// consumed once, in seq order, and files go to `out` as they are made.
    fn render_to(
        &self,
        head: RenderHead<'_>,
        events: &mut dyn Iterator<Item = Event>,
        out: &mut dyn FileSink,
    ) -> Result<ChangeSet, RenderError>;

    /// Renders a whole in-memory session; the files come back in
    /// [`ChangeSet::files`]. Built on [`Adapter::render_to`].
    fn render(&self, request: RenderRequest<'_>) -> Result<ChangeSet, RenderError> {
        let lookup = |id: &ArtifactId| {
            request
                .artifacts
                .iter()
                .find(|(a, _)| a == id)
                .map(|(_, bytes)| bytes.clone())
        };
        let head = RenderHead {
            header: request.header,
            artifact: &lookup,
            native_id: request.native_id,
            cwd: request.cwd,
            now: request.now,
        };
        let mut sink = MemorySink::default();
        let mut changes = self.render_to(head, &mut request.events.iter().cloned(), &mut sink)?;
        changes.files = sink.files;
        Ok(changes)
    }
}

/// Returns the shell command a tool call runs, whichever agent's shell tool
/// it is (any tool the registry lists as [`ToolKind::Shell`]), from its
/// `cmd` or `command` argument (a string, or an argv where `sh -c SCRIPT`
/// gives the script). Renders use it to map a shell call to the target's
/// own shell tool.
pub fn shell_command(name: &str, arguments: &Value) -> Option<String> {
    if registry::tool_kind_anywhere(name) != ToolKind::Shell {
        return None;
    }
    let arg = arguments.get("cmd").or_else(|| arguments.get("command"))?;
    match arg {
        Value::String(s) => Some(s.clone()),
        Value::Array(argv) => {
            let argv: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
            match argv.as_slice() {
                [_, flag, script] if flag.starts_with('-') && flag.ends_with('c') => {
                    Some((*script).to_owned())
                }
                _ => Some(argv.join(" ")),
            }
        }
        _ => None,
    }
}

/// Returns seqs as ranges, `3-5, 9`, for loss lines.
pub fn seq_list(seqs: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < seqs.len() {
        let start = seqs[i];
        let mut end = start;
        while i + 1 < seqs.len() && seqs[i + 1] == end + 1 {
            i += 1;
            end = seqs[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(", ")
}

/// Parses a line that is a JSON object except for invalid UTF-8 in it,
/// with the invalid bytes replaced by U+FFFD; `None` when the line is valid
/// UTF-8 (its JSON error is its own) or is no JSON object even so.
pub(crate) fn lossy_json(raw: &[u8]) -> Option<serde_json::Map<String, Value>> {
    if std::str::from_utf8(raw).is_ok() {
        return None;
    }
    match serde_json::from_str(&String::from_utf8_lossy(raw)) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// Returns a JSON object of `entries`, in order, moving the values in:
/// `json!` passes every interpolated value through serde's serializer
/// again, which copies each string of a record (most of a session's bytes).
pub(crate) fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}
