//! `compile`: a session's token-budgeted context for another agent, with
//! the facts of this work tree, and an optional external summarizer.

use std::io::Write;
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
    // The tokenizer takes a moment to build; let it overlap the reading.
    let tokenizer = compiler_request.tokenizer();
    let warm = std::thread::spawn(move || tokenizer.load());
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
