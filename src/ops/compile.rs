//! `compile`: a session's token-budgeted context for another agent, with
//! the facts of this work tree, and an optional external summarizer.
//!
//! The `o200k_base` counts come from a table kept under the state
//! directory ([`TOKENIZER_CACHE`], never pushed, rebuilt when missing or
//! refused): building `tiktoken-rs`'s own tables costs about 0.1 s per
//! process, reading and verifying the stored one a few milliseconds
//! (`git_session_compiler::bpe`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use git_session_compiler::{
    Compiled, GitFacts, Request, Summarizer, SummarizerError, Summary, SummaryRequest,
};
use git_session_schema::{Event, SessionHeader, SessionId};

use super::{OpError, OpResult};
use crate::store::{Store, StoreError};

/// Says what to compile.
#[derive(Clone, Debug)]
pub struct CompileRequest {
    /// The session.
    pub id: SessionId,
    /// The compiler request (target agent, budget, format); its git facts
    /// are filled in from this work tree.
    pub request: Request,
    /// A shell command that summarizes excerpts (JSON on stdin and stdout).
    pub summarizer_cmd: Option<String>,
}

/// Compiles a stored session.
pub fn compile(
    store: &Store,
    request: &CompileRequest,
) -> OpResult<(SessionHeader, Vec<Event>, Compiled)> {
    // The target's tokenizer family comes from the agent registry.
    let mut compiler_request = request.request.clone();
    if compiler_request.tokenizer.is_none() {
        compiler_request.tokenizer =
            git_session_adapters::registry::adapter(&compiler_request.target).and_then(|a| {
                git_session_compiler::Tokenizer::from_name(a.spec().tokenizer.name())
            });
    }
    // The tokenizer takes a moment to load; let it overlap the reading.
    let tokenizer = compiler_request.tokenizer();
    let cache = store.state_dir().join(TOKENIZER_CACHE);
    let warm = std::thread::spawn(move || load_tokenizer(tokenizer, &cache));
    let header = store.header(&request.id)?;
    let events = load_events(store, &request.id)?;
    let facts = store.work_tree_facts();
    compiler_request.git = GitFacts {
        branch: facts.branch,
        head: facts.head,
        status: facts.status,
        recent_files: facts.recent_files,
    };
    let _ = warm.join();
    let compiled = match &request.summarizer_cmd {
        Some(cmd) => git_session_compiler::compile_with(
            &header,
            &events,
            &compiler_request,
            &External(cmd.clone()),
        ),
        None => git_session_compiler::compile(&header, &events, &compiler_request),
    }
    .map_err(|e| OpError::Conflict {
        message: e.to_string(),
        hint: Some("pass a larger --budget".into()),
    })?;
    Ok((header, events, compiled))
}

/// Where the stored `o200k_base` table is, under the state directory.
pub const TOKENIZER_CACHE: &str = "cache/o200k_base.table";

/// Installs the stored `o200k_base` table when it is there and passes the
/// checks; else builds the tokenizer the slow way and stores the table for
/// the next process (a cache: failing to write it only keeps that slow).
fn load_tokenizer(tokenizer: git_session_compiler::Tokenizer, cache: &Path) {
    use git_session_compiler::bpe::{MAX_TABLE_BYTES, Table};
    if git_session_compiler::table_installed() {
        return;
    }
    let stored = std::fs::File::open(cache).ok().and_then(|f| {
        let mut bytes = Vec::new();
        f.take(MAX_TABLE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .ok()?;
        Table::from_bytes(bytes).ok()
    });
    if let Some(table) = stored {
        git_session_compiler::install_table(table);
        return;
    }
    tokenizer.load();
    let table = Table::from_tiktoken();
    let _ = store_table(cache, table.to_bytes());
    git_session_compiler::install_table(table);
}

fn store_table(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
    std::fs::create_dir_all(&dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Reads every event of a session.
pub fn load_events(store: &Store, id: &SessionId) -> OpResult<Vec<Event>> {
    let mut events = Vec::new();
    for line in store.lines(id, 0, None)? {
        let line = line?;
        events.push(line.decode().map_err(|e| StoreError::Corrupt {
            id: id.clone(),
            message: format!("seq {}: {e}", line.seq),
        })?);
    }
    Ok(events)
}

/// Runs a shell command as the summarizer: the request as JSON on stdin,
/// `{"summaries": [{"text", "seqs"}]}` expected on stdout.
struct External(String);

impl Summarizer for External {
    fn name(&self) -> String {
        format!("cmd:{}", self.0)
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Vec<Summary>, SummarizerError> {
        let failed = |message: String| SummarizerError::Failed {
            message,
            source: None,
        };
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("cannot run {:?}: {e}", self.0)))?;
        let input = serde_json::to_vec(request).map_err(|e| failed(e.to_string()))?;
        let mut stdin = child.stdin.take().expect("stdin was piped");
        // A summarizer that exits without reading everything is its own failure.
        let writer = std::thread::spawn(move || stdin.write_all(&input));
        let out = child
            .wait_with_output()
            .map_err(|e| failed(e.to_string()))?;
        let _ = writer.join();
        if !out.status.success() {
            return Err(failed(format!(
                "{:?} exited with {}: {}",
                self.0,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        git_session_compiler::parse_summaries(&out.stdout)
    }
}
