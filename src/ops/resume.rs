//! Write-back (`git session resume`): render a canonical session into an
//! agent's native store so that the agent's own resume continues it.
//!
//! Temp files are named `.git-session-<pid>-…`; a write-back that was
//! killed leaves its temp files behind, and the next one into the same
//! directory removes those whose writer is gone.
//!
//! Never overwrites: a native session that already exists with the same
//! bytes is left alone (resuming twice is a no-op); one with different bytes
//! is refused unless the caller asks for a fork, which writes the session
//! under a new id and records that fork in the canonical log. Files are
//! written through a temporary file and a rename that refuses to replace.
//! Database rows go only into an existing database, not while another
//! process has it open, after a backup, and never replace a row.
//!
//! A session written for another agent (or one without a native id) gets a
//! new native id. The copies `resume` wrote are in the local record of
//! written sessions (`written`), so a later write-back into the same store
//! tries them first, the one holding the most of the session first: one
//! that is the same session (also when the agent continued it and capture
//! took those turns in) is left in place. Only when none is (the agent
//! added turns not captured yet, or the session moved on since) is a new
//! copy written; an existing one is never rewritten.

use std::path::{Path, PathBuf};

use git_session_adapters::{ChangeSet, RenderHead};
use git_session_schema::{Agent, Event, SessionHeader, SessionId};

use super::{OpError, OpResult};
use crate::clock::Clock;
use crate::native::apply::{self, TempFiles};
use crate::store::{Store, StoreError};

/// Says what to resume where.
pub struct ResumeRequest<'a> {
    /// The canonical session.
    pub id: SessionId,
    /// The agent to write for (default: the session's own agent).
    pub agent: Option<Agent>,
    /// The user's home directory (agent stores default to it).
    pub home: PathBuf,
    /// Looks up an environment variable (an agent's store override).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Write under a new native id, recorded as a fork.
    pub fork: bool,
}

/// Reports a write-back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResumeOutcome {
    /// The agent written for.
    pub agent: Agent,
    /// The canonical session written (the fork, when one was made).
    pub session: SessionId,
    /// The native session id to resume.
    pub native_id: String,
    /// Files created, absolute.
    pub written: Vec<PathBuf>,
    /// Whether the native session was already there, identical.
    pub unchanged: bool,
    /// The directory to run the agent from.
    pub cwd: PathBuf,
    /// The agent's resume command.
    pub command: String,
    /// What the target cannot hold.
    pub losses: Vec<String>,
    /// What the user must know about the target (said once).
    pub notices: Vec<String>,
    /// Database rows skipped, with the reason (the session still resumes by id).
    pub skipped_rows: Vec<String>,
    /// How a database session was written (the agent's importer, or rows).
    pub via: Option<String>,
    /// Copies of agent databases made before rows went into them
    /// (`.git/session/backups/`, the last [`apply::KEEP_BACKUPS`] of each kept).
    pub backups: Vec<PathBuf>,
}

/// Renders `request.id` into the agent's store.
pub fn resume(
    store: &Store,
    clock: &Clock,
    request: &ResumeRequest<'_>,
) -> OpResult<ResumeOutcome> {
    resume_reporting(store, clock, request, &super::progress::Silent)
}

/// Like [`resume`], telling `progress` how many events there are to write
/// and how many are written.
pub fn resume_reporting(
    store: &Store,
    clock: &Clock,
    request: &ResumeRequest<'_>,
    progress: &dyn super::progress::Progress,
) -> OpResult<ResumeOutcome> {
    let header = store.header(&request.id)?;
    let agent = request
        .agent
        .clone()
        .unwrap_or_else(|| header.agent.clone());
    let adapter = adapter_for(&agent)?;
    let root = adapter.store_root(request.env, &request.home);
    let cwd = target_cwd(store, &header)?;
    let same_agent_native = header
        .native_id
        .clone()
        .filter(|_| header.agent == agent && !request.fork);
    let new_copy = same_agent_native.is_none() && !request.fork;
    // Another agent's earlier copies of this session, written by `resume`,
    // are tried first: resuming twice does not leave two copies.
    let mut earlier = if new_copy {
        super::written::Written::load(store.state_dir(), &agent).resumed_as(&root, &request.id)
    } else {
        Vec::new()
    };
    earlier.retain(|id| adapter.validate_native_id(id).is_ok());
    earlier.truncate(EARLIER_COPIES_TRIED);
    let mut earlier = earlier.into_iter();
    let mut native_id = same_agent_native
        .or_else(|| earlier.next())
        .unwrap_or_else(|| new_native_id(clock, adapter));
    // The native id names the files written: a session from a shared remote
    // must not choose where they go.
    adapter
        .validate_native_id(&native_id)
        .map_err(|why| OpError::Conflict {
            message: format!("session {} cannot be written back: {why}", request.id),
            hint: Some(format!(
                "git session resume {} --fork writes it under a new, valid id",
                request.id
            )),
        })?;
    let session = if request.fork {
        // The fork gets the new native id as its canonical id too, so
        // `git session show <id>` and the agent's resume name the same thing.
        // A fresh native id cannot conflict, so the fork is recorded first.
        let fork_id = SessionId::new(native_id.clone()).map_err(|e| OpError::Conflict {
            message: format!("the new native id is no session id: {e}"),
            hint: None,
        })?;
        super::fork::fork(store, clock, &request.id, None, Some(fork_id.clone()))?;
        fork_id
    } else {
        request.id.clone()
    };
    let total = store.stat(&request.id)?.events;
    let write = |native_id: &str| -> OpResult<(OpResult<Written>, Option<u64>)> {
        progress.stage("Writing the session back", "events", total);
        let lines = store.lines(&request.id, 0, None)?;
        // Decoding the stored JSON is about half of a write-back's work: a
        // second thread does it while this one reads chunks and renders.
        let (result, error, last) = std::thread::scope(|scope| {
            let mut events = StoredEvents::new(scope, lines, request.id.clone());
            let target = NativeTarget {
                adapter,
                root: &root,
                header: &header,
                artifacts_of: &request.id,
                native_id,
                cwd: &cwd,
                home: &request.home,
                env: request.env,
            };
            let result = write_native(
                store,
                clock,
                &target,
                &mut super::progress::Counted {
                    iter: &mut events,
                    progress,
                },
            );
            (result, events.error.take(), events.last)
        });
        match error {
            Some(e) => Err(e),
            None => Ok((result, last)),
        }
    };
    let (mut result, mut last) = write(&native_id)?;
    let mut tried_earlier = new_copy;
    while tried_earlier && matches!(result, Err(OpError::NativeExists { .. })) {
        // That copy is not this session as it is now (the agent added
        // turns not captured yet, or the session moved on): it stays as it
        // is, and the next earlier copy is tried, then a new id.
        native_id = earlier.next().unwrap_or_else(|| {
            tried_earlier = false;
            new_native_id(clock, adapter)
        });
        (result, last) = write(&native_id)?;
    }
    let Written {
        changes,
        written,
        unchanged,
        skipped_rows,
        via,
        backups,
    } = result.map_err(|e| match e {
        OpError::NativeExists {
            native_id, path, ..
        } => OpError::NativeExists {
            native_id,
            path,
            hint: Some(format!(
                "git session resume {} --fork writes it under a new id (recorded as a fork)",
                request.id
            )),
        },
        other => other,
    })?;
    if let Some(seq) = last.filter(|_| !unchanged) {
        // So that capture appends only what the agent adds to it.
        super::written::record(
            store.state_dir(),
            adapter,
            &super::written::Record {
                agent: &agent,
                root: &root,
                files: &written,
                rows: &changes.rows,
                session: &session,
                seq,
                native_id: &native_id,
                by: super::written::WrittenBy::Resume,
            },
        )?;
    }
    Ok(ResumeOutcome {
        agent,
        session,
        native_id,
        written,
        unchanged,
        cwd,
        command: changes.resume_command.clone(),
        losses: changes.losses.clone(),
        notices: changes.notices.clone(),
        skipped_rows,
        via,
        backups,
    })
}

/// Returns the directory the agent should run in on this machine: the
/// recorded cwd, normalized, when it is this repository or a directory
/// inside it (`..` cannot leave it), else this work tree.
pub(crate) fn target_cwd(store: &Store, header: &SessionHeader) -> OpResult<PathBuf> {
    let worktrees = store.worktree_paths();
    if let Some(cwd) = header.cwd.as_deref().and_then(|c| normalized(Path::new(c)))
        && cwd.is_absolute()
        && worktrees.iter().any(|w| cwd.starts_with(w))
    {
        return Ok(cwd);
    }
    store
        .repo()
        .workdir()
        .map(Path::to_owned)
        .ok_or_else(|| OpError::Conflict {
            message: "this repository has no work tree to resume a session in".into(),
            hint: Some("run git session resume in a clone with a work tree".into()),
        })
}

/// Returns `path` with `.` and `..` resolved lexically, or `None` when a
/// `..` would climb above its start, or it has control characters.
pub(crate) fn normalized(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    if path.to_string_lossy().chars().any(char::is_control) {
        return None;
    }
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// Returns a fresh native session id in the adapter's shape.
pub(crate) fn new_native_id(clock: &Clock, adapter: &dyn git_session_adapters::Adapter) -> String {
    let uuid = super::fork::new_session_id(clock).to_string();
    adapter.new_native_id(&uuid, clock.now().as_millisecond())
}

pub(crate) fn adapter_for(agent: &Agent) -> OpResult<&'static dyn git_session_adapters::Adapter> {
    git_session_adapters::registry::adapter(agent).ok_or_else(|| OpError::Conflict {
        message: format!("no adapter can write {agent} sessions yet"),
        hint: Some(format!(
            "agents with an adapter: {}",
            git_session_adapters::registry::names().join(", ")
        )),
    })
}

/// Names where and as what a session is written.
pub(crate) struct NativeTarget<'a> {
    pub adapter: &'a dyn git_session_adapters::Adapter,
    /// The agent's store root.
    pub root: &'a Path,
    pub header: &'a SessionHeader,
    /// The session whose artifacts the events reference.
    pub artifacts_of: &'a SessionId,
    pub native_id: &'a str,
    pub cwd: &'a Path,
    /// The user's home directory.
    pub home: &'a Path,
    /// Looks up an environment variable (`PATH`, for an agent's importer).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// Reports what [`write_native`] did.
pub(crate) struct Written {
    pub changes: ChangeSet,
    pub written: Vec<PathBuf>,
    pub unchanged: bool,
    pub skipped_rows: Vec<String>,
    /// How a database session was written: by the agent's importer or as
    /// rows (`None` when there was none, or it was in place).
    pub via: Option<String>,
    /// Backups of the databases rows went into.
    pub backups: Vec<PathBuf>,
}

/// Checks every existing database the change set writes rows into against
/// the schema the adapter declares for it ([`Source::Sqlite`]); returns the
/// warnings of accepted newer versions.
///
/// [`Source::Sqlite`]: git_session_adapters::Source::Sqlite
fn check_target_schemas(target: &NativeTarget<'_>, changes: &ChangeSet) -> OpResult<Vec<String>> {
    let mut warnings = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for row in &changes.rows {
        if !seen.insert(row.database.clone()) {
            continue;
        }
        let db = apply::contained_path(target.root, &row.database)?;
        if !db.is_file() {
            continue; // apply_rows says what to do about a missing one
        }
        let rel = row.database.to_string_lossy().replace('\\', "/");
        let decls = target
            .adapter
            .spec()
            .sources
            .iter()
            .filter_map(|s| match s {
                git_session_adapters::Source::Sqlite(d) => Some(*d),
                _ => None,
            });
        for decl in decls.filter(|d| {
            d.files
                .iter()
                .any(|g| git_session_adapters::source::glob_match(g, &rel))
        }) {
            match crate::native::sqlite::check_target(&db, decl, &Default::default()) {
                Ok(w) => warnings.extend(w.map(|w| format!("{}: {w}", db.display()))),
                Err(e) => {
                    let reason = e.to_string().replace("; skipped, nothing read from it", "");
                    return Err(OpError::Conflict {
                        message: format!(
                            "not writing into {}: {reason}",
                            target.adapter.spec().display
                        ),
                        hint: Some(format!(
                            "run {} once with this home so it creates and migrates its own database, then resume again",
                            target.adapter.spec().display
                        )),
                    });
                }
            }
        }
    }
    Ok(warnings)
}

/// Refuses, before any file moves, a session whose database the agent has
/// not created in this home, unless the agent's own importer (on `PATH`)
/// is there to create it: a missing store is never half written.
fn refuse_missing_database(target: &NativeTarget<'_>, changes: &ChangeSet) -> OpResult<()> {
    let importer = changes.import.as_ref().is_some_and(|i| {
        apply::find_on_path(&i.program, (target.env)("PATH").as_deref()).is_some()
    });
    if importer {
        return Ok(());
    }
    for row in changes.rows.iter().filter(|r| r.session_row) {
        let db = apply::contained_path(target.root, &row.database)?;
        if !db.is_file() {
            let display = target.adapter.spec().display;
            return Err(OpError::Conflict {
                message: format!(
                    "not writing into {display}: {} does not exist (the agent's database does not exist yet); nothing was written",
                    db.display()
                ),
                hint: Some(format!(
                    "run the agent once ({display}, with this home) so it creates it, then try again"
                )),
            });
        }
    }
    Ok(())
}

/// Renders `events` through the adapter into temporary files, refuses if a
/// different native session is in the way, then moves the files into place
/// and applies the index lines and database rows.
pub(crate) fn write_native(
    store: &Store,
    clock: &Clock,
    target: &NativeTarget<'_>,
    events: &mut dyn Iterator<Item = Event>,
) -> OpResult<Written> {
    write_native_planned(store, clock, target, events, &mut |_, _| Ok(()))
}

/// Says what a write-back is about to write: the change set and the files
/// that will be moved into place, each with its rendered size.
pub(crate) type BeforeWrite<'a> = dyn FnMut(&ChangeSet, &[(PathBuf, u64)]) -> OpResult<()> + 'a;

/// Like [`write_native`]; `before` is told what will be written once every
/// check has passed and before the first file moves or row is inserted
/// (a handoff records its write-ahead intent there), and may refuse.
pub(crate) fn write_native_planned(
    store: &Store,
    clock: &Clock,
    target: &NativeTarget<'_>,
    events: &mut dyn Iterator<Item = Event>,
    before: &mut BeforeWrite<'_>,
) -> OpResult<Written> {
    let blobs: std::collections::HashMap<_, _> =
        store.artifacts(target.artifacts_of)?.into_iter().collect();
    // An artifact of which only the head is here (session.syncArtifacts
    // head) is left out like a missing one, and the user told what to run.
    let head_only = std::cell::RefCell::new(Vec::<String>::new());
    let artifact = |a: &git_session_schema::ArtifactId| {
        let b = blobs.get(a)?;
        match store.artifact_bytes(target.artifacts_of, *b) {
            Ok(bytes) => Some(bytes),
            Err(e @ crate::store::StoreError::HeadOnly { .. }) => {
                head_only.borrow_mut().push(e.to_string());
                None
            }
            Err(_) => None,
        }
    };
    let cwd_text = target.cwd.to_string_lossy();
    let now = clock.now_rfc3339();
    let head = RenderHead {
        header: target.header,
        artifact: &artifact,
        native_id: target.native_id,
        cwd: &cwd_text,
        now: &now,
    };
    let mut files = TempFiles::new(target.root);
    let mut changes = target
        .adapter
        .render_to(head, events, &mut files)
        .map_err(|e| OpError::Conflict {
            message: format!(
                "cannot write {} as a {} session: {e}",
                target.header.id,
                target.adapter.agent()
            ),
            hint: None,
        })?;
    let mut heads = head_only.take();
    heads.dedup();
    changes.notices.extend(heads);
    // A command that names the store root (an agent that needs its home
    // in the environment) gets this one.
    changes.resume_command = changes.resume_command.replace(
        "{root}",
        &super::shell_quote(&target.root.to_string_lossy()),
    );
    // The agent's own write lock on the session, held while the files go
    // into place: never write what a running agent owns.
    let _locks = apply::take_locks(target.root, &changes.locks)?;
    // Bytes can differ while the records are the same (the agent's file
    // and our render of it order keys differently, or lack a field the
    // render adds): the adapter decides whether it is the same session.
    let mut conflicts = Vec::new();
    for (path, rendered) in files.conflicting()? {
        let rel = path
            .strip_prefix(target.root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        let same = target.adapter.is_session_file(Path::new(&rel))
            && super::capture::native_keys(target.adapter, store.scrubber(), &path, &rel)?
                == super::capture::native_keys(target.adapter, store.scrubber(), &rendered, &rel)?;
        if same {
            files.keep_existing(&path);
        } else {
            conflicts.push(path);
        }
    }
    if let Some(first) = conflicts.first() {
        return Err(OpError::NativeExists {
            native_id: target.native_id.to_owned(),
            path: first.clone(),
            hint: None,
        });
    }
    // Rows go only into a database the agent itself created, with the
    // schema its adapter reads; never one we would have to guess about.
    // Columns naming facts about the repository (OpenCode's project).
    apply::fill_repo_facts(
        &mut changes,
        &apply::RepoFacts {
            root_commit: store.root_commit(),
            worktree: store.repo().workdir().map(Path::to_owned),
            cwd: target.cwd.to_owned(),
        },
    );
    let schema_warnings = check_target_schemas(target, &changes)?;
    refuse_missing_database(target, &changes)?;
    // A database holding a different session under the same key refuses
    // the write-back before any file moves.
    apply::check_rows(target.root, &changes).map_err(|e| native_exists(e, target.native_id))?;
    let files_present = files.all_present();
    let session_rows = changes.rows.iter().any(|r| r.session_row);
    let rows_in_place = session_rows && apply::session_rows_present(target.root, &changes)?;
    before(&changes, &files.planned()?)?;
    let written = files.persist()?;
    super::handoff::failpoint("handoff-after-files");
    let mut unchanged = files_present;
    let mut skipped_rows = Vec::new();
    let mut backups = Vec::new();
    let mut via = None;
    // The agent's own importer first, when the session is not there yet;
    // the rows are the fallback.
    let mut note = None;
    if let (Some(import), true) = (&changes.import, session_rows && !rows_in_place) {
        let path = (target.env)("PATH");
        let place = apply::ImportPlace {
            cwd: target.cwd,
            home: target.home,
            root: target.root,
            path: path.as_deref(),
        };
        match apply::run_import(import, &place)? {
            Ok(()) if apply::session_rows_present(target.root, &changes)? => {
                via = Some(format!(
                    "`{} {}`",
                    import.program,
                    import.args.join(" ").replace(" {file}", "")
                ));
                unchanged = false;
            }
            Ok(()) => {
                note = Some(format!(
                    "`{}` exited 0 but the session is not in {}",
                    import.program,
                    target.root.display()
                ));
            }
            Err(why) => note = Some(why),
        }
    }
    if !files_present {
        for a in &changes.appends {
            apply::append_lines(&apply::contained_path(target.root, &a.path)?, &a.bytes)?;
        }
    }
    if via.is_none() && (!files_present || session_rows) {
        let dir = store.state_dir().join("backups");
        let rows = apply::apply_rows(
            target.root,
            &changes,
            &apply::Backups {
                dir: &dir,
                now_ms: clock.now().as_millisecond(),
            },
        )
        .map_err(|e| native_exists(e, target.native_id))?;
        unchanged = files_present && rows.inserted == 0;
        if session_rows && rows.inserted > 0 {
            let db = changes
                .rows
                .iter()
                .find(|r| r.session_row)
                .map(|r| target.root.join(&r.database))
                .unwrap_or_default();
            via = Some(match note {
                Some(why) => format!("rows inserted into {} ({why})", db.display()),
                None => format!("rows inserted into {}", db.display()),
            });
        }
        skipped_rows = rows.skipped;
        backups = rows.backups;
    }
    skipped_rows.extend(schema_warnings);
    Ok(Written {
        changes,
        written,
        unchanged,
        skipped_rows,
        via,
        backups,
    })
}

/// Maps a database that already holds a different session to the same
/// error as a different file in the way.
fn native_exists(e: crate::native::NativeError, native_id: &str) -> OpError {
    match e {
        crate::native::NativeError::Exists { path, .. } => OpError::NativeExists {
            native_id: native_id.to_owned(),
            path,
            hint: None,
        },
        other => other.into(),
    }
}

/// Earlier copies of a session in another agent's store that a
/// write-back tries before it writes a new one (each try renders the
/// whole session).
const EARLIER_COPIES_TRIED: usize = 3;

/// Lines a batch of [`StoredEvents`] holds.
const DECODE_BATCH: usize = 256;
/// Batches handed to the decoding thread and not yet taken back.
const DECODE_AHEAD: usize = 4;
/// Batches the reading thread decodes itself while it waits for the other.
const DECODE_HERE: usize = 2;

/// A line that did not decode: its seq and the complaint.
type BadLine = (u64, git_session_schema::codec::CodecError);

/// A batch's events, up to the first line that did not decode.
type Decoded = Vec<Result<Event, BadLine>>;

/// A batch of [`StoredEvents`], in order.
enum Batch {
    /// With the decoding thread.
    Sent,
    /// Decoded here.
    Here(Decoded),
}

/// The stored events in order, decoded by two threads. This one reads the
/// chunks (inflating them) and hands lines to a second thread in batches,
/// a few ahead; while the next batch is not back yet, it decodes the
/// following one itself rather than wait, so the work splits by whichever
/// thread has time. The first error ends the stream and is kept for the
/// caller.
struct StoredEvents<'s> {
    lines: crate::store::LineIter<'s>,
    id: SessionId,
    error: Option<OpError>,
    /// The seq of the last event given out.
    last: Option<u64>,
    /// Batches to decode (`None` once the lines are all read).
    to_decoder: Option<std::sync::mpsc::SyncSender<Vec<crate::store::StoredLine>>>,
    from_decoder: std::sync::mpsc::Receiver<Decoded>,
    /// The batches read and not given out yet, in order.
    queue: std::collections::VecDeque<Batch>,
    /// The batch being given out.
    ready: std::vec::IntoIter<Result<Event, BadLine>>,
    /// A read error met after the lines read; reported after their events.
    read_error: Option<OpError>,
}

impl<'s> StoredEvents<'s> {
    /// Starts the decoding thread in `scope`; it ends when the stream is
    /// dropped.
    fn new<'scope>(
        scope: &'scope std::thread::Scope<'scope, '_>,
        lines: crate::store::LineIter<'s>,
        id: SessionId,
    ) -> StoredEvents<'s> {
        let (to_decoder, batches) =
            std::sync::mpsc::sync_channel::<Vec<crate::store::StoredLine>>(DECODE_AHEAD);
        let (decoded, from_decoder) = std::sync::mpsc::sync_channel::<Decoded>(DECODE_AHEAD);
        scope.spawn(move || {
            for batch in batches {
                if decoded.send(decode(&batch)).is_err() {
                    break;
                }
            }
        });
        StoredEvents {
            lines,
            id,
            error: None,
            last: None,
            to_decoder: Some(to_decoder),
            from_decoder,
            queue: std::collections::VecDeque::new(),
            ready: Vec::new().into_iter(),
            read_error: None,
        }
    }

    /// Reads the next batch of lines; empty once they end.
    fn read_batch(&mut self) -> Vec<crate::store::StoredLine> {
        let mut batch = Vec::new();
        if self.to_decoder.is_none() {
            return batch;
        }
        batch.reserve(DECODE_BATCH);
        while batch.len() < DECODE_BATCH {
            match self.lines.next() {
                Some(Ok(line)) => batch.push(line),
                Some(Err(e)) => {
                    self.read_error = Some(e.into());
                    self.to_decoder = None;
                    break;
                }
                None => {
                    self.to_decoder = None;
                    break;
                }
            }
        }
        batch
    }

    /// Reads and sends batches until [`DECODE_AHEAD`] are with the
    /// decoding thread or the lines end.
    fn send_ahead(&mut self) {
        let sent = |q: &std::collections::VecDeque<Batch>| {
            q.iter().filter(|b| matches!(b, Batch::Sent)).count()
        };
        while sent(&self.queue) < DECODE_AHEAD {
            let batch = self.read_batch();
            if batch.is_empty() {
                return;
            }
            let Some(to_decoder) = &self.to_decoder else {
                // The last lines: decoded here, no thread to wait for.
                self.queue.push_back(Batch::Here(decode(&batch)));
                return;
            };
            if to_decoder.send(batch).is_err() {
                // The thread is gone (it panicked): said when its
                // batches do not come back.
                self.to_decoder = None;
                return;
            }
            self.queue.push_back(Batch::Sent);
        }
    }

    /// The next batch in order: the decoding thread's when it is back,
    /// else (with a few at most) one decoded here meanwhile.
    fn next_batch(&mut self) -> Option<Result<Decoded, OpError>> {
        loop {
            self.send_ahead();
            match self.queue.front()? {
                Batch::Here(_) => {
                    let Some(Batch::Here(decoded)) = self.queue.pop_front() else {
                        unreachable!("the front was decoded here");
                    };
                    return Some(Ok(decoded));
                }
                Batch::Sent => {}
            }
            let here = self
                .queue
                .iter()
                .filter(|b| matches!(b, Batch::Here(_)))
                .count();
            let got = match self.from_decoder.try_recv() {
                Err(std::sync::mpsc::TryRecvError::Empty) if here < DECODE_HERE => {
                    let batch = self.read_batch();
                    if !batch.is_empty() {
                        self.queue.push_back(Batch::Here(decode(&batch)));
                        continue;
                    }
                    self.from_decoder.recv().ok()
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => self.from_decoder.recv().ok(),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => None,
                Ok(decoded) => Some(decoded),
            };
            self.queue.pop_front();
            return Some(got.ok_or_else(|| {
                OpError::from(StoreError::Corrupt {
                    id: self.id.clone(),
                    message: "the thread decoding its events stopped".into(),
                })
            }));
        }
    }
}

/// Decodes a batch of lines; stops at the first that does not decode.
fn decode(batch: &[crate::store::StoredLine]) -> Decoded {
    let mut out = Vec::with_capacity(batch.len());
    for line in batch {
        let event = line.decode().map_err(|e| (line.seq, e));
        let bad = event.is_err();
        out.push(event);
        if bad {
            break;
        }
    }
    out
}

impl Iterator for StoredEvents<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            if self.error.is_some() {
                return None;
            }
            match self.ready.next() {
                Some(Ok(event)) => {
                    self.last = Some(event.seq);
                    return Some(event);
                }
                Some(Err((seq, e))) => {
                    self.error = Some(OpError::from(StoreError::Corrupt {
                        id: self.id.clone(),
                        message: format!("seq {seq}: {e}"),
                    }));
                    return None;
                }
                None => {}
            }
            match self.next_batch() {
                Some(Ok(decoded)) => self.ready = decoded.into_iter(),
                Some(Err(e)) => {
                    self.error = Some(e);
                    return None;
                }
                None => {
                    self.error = self.read_error.take();
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
mod path_tests {
    use super::*;

    #[test]
    fn contained_path_refuses_anything_but_plain_names() {
        use crate::native::apply::contained_path;
        let root = Path::new("/store/root");
        assert_eq!(
            contained_path(root, Path::new("projects/p/a.jsonl")).unwrap(),
            root.join("projects/p/a.jsonl")
        );
        for bad in [
            "",
            "../x",
            "projects/../../x",
            "/etc/passwd",
            "projects//etc/x",
            "a/./b",
            "a/\u{1b}b",
        ] {
            // `a/./b` and `projects//etc/x` normalize to plain names in
            // std's component parser; they are allowed only when they do.
            let got = contained_path(root, Path::new(bad));
            match bad {
                "a/./b" | "projects//etc/x" => {
                    assert!(got.unwrap().starts_with(root), "{bad}")
                }
                _ => assert!(got.is_err(), "{bad:?} was allowed"),
            }
        }
        assert_eq!(
            normalized(Path::new("/r/a/../b/./c")),
            Some(PathBuf::from("/r/b/c"))
        );
        assert_eq!(normalized(Path::new("/r/../..")), None);
    }
}

#[cfg(test)]
mod stored_events_tests {
    use git_session_schema::event::Level;
    use git_session_schema::{Agent, Event};

    use super::*;
    use crate::store::StoredLine;

    #[test]
    fn the_events_come_out_in_order_whichever_thread_decoded_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::test_support::store(dir.path());
        // Enough for every batch kind: sent, decoded here, and the last.
        let n = DECODE_BATCH * (DECODE_AHEAD + DECODE_HERE) * 3 + 17;
        let id = crate::store::test_support::create_session(
            &store,
            "many-batches",
            "message.user",
            "text",
            (0..n).map(|i| format!("message {i}")),
        );
        for slow in [false, true] {
            let lines = store.lines(&id, 0, None).unwrap();
            let (seqs, last, error) = std::thread::scope(|scope| {
                let mut events = StoredEvents::new(scope, lines, id.clone());
                let mut seqs = Vec::new();
                for event in &mut events {
                    assert_eq!(event.payload["text"], format!("message {}", event.seq));
                    seqs.push(event.seq);
                    if slow && seqs.len().is_multiple_of(200) {
                        // The other thread gets ahead.
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                }
                (seqs, events.last, events.error.take())
            });
            assert!(error.is_none(), "{error:?}");
            assert_eq!(seqs, (0..n as u64).collect::<Vec<_>>());
            assert_eq!(last, Some(n as u64 - 1));
        }
    }

    #[test]
    fn a_batch_stops_at_its_first_bad_line() {
        let good = |seq: u64| {
            let mut line = Vec::new();
            let event = Event::new(
                seq,
                "2026-01-01T00:00:00Z",
                Agent::Claude,
                "user",
                "message.user",
                Level::History,
                serde_json::json!({}),
            );
            git_session_schema::codec::encode_event(&event, &mut line);
            StoredLine { seq, bytes: line }
        };
        let bad = StoredLine {
            seq: 1,
            bytes: b"{\"seq\":".to_vec(),
        };
        let decoded = decode(&[good(0), bad, good(2)]);
        assert_eq!(decoded.len(), 2);
        assert!(decoded[0].is_ok());
        assert!(matches!(decoded[1], Err((1, _))));
    }
}
