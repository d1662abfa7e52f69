//! The git store: the only code that touches git objects and refs.
//!
//! Each session is the ref `refs/sessions/<id>`, an orphan history whose
//! commits are capture batches. A session tree holds `header.json` (written
//! once), `events/…/<index>-<first-seq>.jsonl` chunks (written once, never
//! rewritten) and `artifacts/<aa>/<sha256>` blobs. See `docs/FORMAT.md`.
//!
//! What it deliberately does not do: touch the index or a work tree (reading
//! works in bare repos), print, read the environment, or know any agent's
//! native format. Network sync goes through the `git` binary elsewhere.

mod append;
mod artifacts;
mod bulk;
/// Test helpers that make stores and sessions (used by other modules' tests).
#[cfg(test)]
pub(crate) use bulk::tests as test_support;
mod checkpoint;
mod child;
pub mod crypt;
mod gitcli;
mod index;
mod lock;
mod meta;
mod pack;
mod purge;
mod read;
pub mod refs;
mod search_index;
mod sync;
mod tombstone;
mod trailers;
mod verify;

use std::path::{Path, PathBuf};

use git_session_schema::{FormatError, SessionHeader, SessionId, header::HeaderError};
use gix::ObjectId;

pub use append::{AppendOutcome, BatchSink, CommitInfo, Scrubbed, Scrubber, SeqMode};
pub use artifacts::{ArtifactsFetched, HEAD_BYTES, HeadLine, human_size};
pub use bulk::{LOOSE_FROM, MEMORY_BYTES, PENDING_REFS};
pub use checkpoint::Snapshot;
pub use gitcli::WorkTreeFacts;
pub use index::{Derive, LIST_INDEX_FILE, ListRow, Listed};
pub use lock::SessionLock as StateLock;
pub use meta::{MAX_META_COMMITS, MetaEntry, MetaReconciled};
pub use pack::{DEFAULT_PACK_BATCHES, DELTA_ATTRIBUTE, PackOutcome};
pub use purge::{BatchPart, PurgedBatch};
pub use read::{BatchInfo, LineIter, StoredLine};
pub use search_index::{IndexFile, index_line};
pub use sync::{PushRejection, Reconciled, tracking_name};
pub use trailers::Trailers;
pub use verify::{Problem, VerifyReport};

/// Says what went wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Not inside a git repository.
    #[error("not a git repository (or any parent up to the filesystem root): {path}")]
    NotARepo {
        /// Where the search started.
        path: PathBuf,
    },
    /// A repository this build cannot write safely.
    #[error("unsupported repository: {0}")]
    Unsupported(String),
    /// No session matches.
    #[error("no session matches {query:?}")]
    NotFound {
        /// What the user asked for.
        query: String,
        /// The closest existing ids.
        suggestions: Vec<SessionId>,
    },
    /// Several sessions match a prefix.
    #[error("session prefix {query:?} is ambiguous")]
    Ambiguous {
        /// What the user asked for.
        query: String,
        /// Every matching id.
        candidates: Vec<SessionId>,
    },
    /// Creating a session whose ref already exists.
    #[error("session {0} already exists")]
    AlreadyExists(SessionId),
    /// Stored data in a format this build refuses (not corruption).
    #[error("session {id}: {source}")]
    Format {
        /// The session.
        id: SessionId,
        /// The direction to go.
        #[source]
        source: FormatError,
    },
    /// Encrypted data no identity here opens (not corruption: the data is
    /// fine, this clone lacks the key).
    #[error("session {id}: {message}")]
    Sealed {
        /// The session.
        id: SessionId,
        /// What cannot be read and which setting supplies the key.
        message: String,
    },
    /// Stored data that does not read back as written.
    #[error("session {id}: {message}")]
    Corrupt {
        /// The session.
        id: SessionId,
        /// What is wrong, naming the seq or object.
        message: String,
    },
    /// An object over a size limit, found from its header before inflating.
    #[error("{what} is {size} bytes, over the limit of {limit}; not read{}", raise_hint(.setting))]
    TooLarge {
        /// The object: session, path and object id.
        what: String,
        /// Its size from the object header.
        size: u64,
        /// The limit in force.
        limit: u64,
        /// The git config key that sets the limit.
        setting: String,
    },
    /// An event whose stored line would be over `session.maxEventSize`:
    /// not stored, since no clone reading with that limit could read the
    /// session back.
    #[error(
        "seq {seq} is {size} bytes as stored, over the limit of {limit} (session.maxEventSize); not stored, since no clone with that limit could read the session back: raise it with git config session.maxEventSize BYTES (on every clone that reads this session) and capture again"
    )]
    EventTooLarge {
        /// The event.
        seq: u64,
        /// Its stored line's length.
        size: u64,
        /// The limit in force.
        limit: u64,
    },
    /// The configured signing key could not sign a commit; nothing was
    /// written.
    #[error("cannot sign the session commit: {0}")]
    Sign(String),
    /// An exact-seq append that does not continue the log.
    #[error("expected seq {expected}, found {found}")]
    SeqMismatch {
        /// The seq the log needs next.
        expected: u64,
        /// The seq offered.
        found: u64,
    },
    /// An event whose given checksum differs from the one its content yields.
    #[error("seq {seq}: checksum {given} does not match the content ({computed})")]
    ChecksumMismatch {
        /// The event.
        seq: u64,
        /// The checksum it carried.
        given: String,
        /// The checksum its bytes produce here.
        computed: String,
    },
    /// An artifact of which only the head is here (`session.syncArtifacts
    /// head`): its full blob is fetched on demand.
    #[error(
        "artifact {artifact} is {}, only its head is here: run git session fetch --artifacts {id}",
        artifacts::human_size(*size)
    )]
    HeadOnly {
        /// The session.
        id: SessionId,
        /// `sha256:<hex>`.
        artifact: String,
        /// The full artifact's size.
        size: u64,
    },
    /// A seq beyond the end of a session.
    #[error("session {id} has {events} events; there is no seq {seq}")]
    NoSuchSeq {
        /// The session.
        id: SessionId,
        /// Its event count.
        events: u64,
        /// The seq asked for.
        seq: u64,
    },
    /// A revision that names no commit here.
    #[error("{0:?} is not a commit in this repository")]
    NoSuchCommit(String),
    /// A remote could not be reached or refused the operation.
    #[error("{0}")]
    Remote(String),
    /// The operation cannot be done on this session; nothing was written.
    #[error("{0}")]
    Refused(String),
    /// The ref kept moving under concurrent writers that bypass the lock.
    #[error("session {0} kept changing while appending; nothing was written, try again")]
    Contended(SessionId),
    /// Filesystem trouble in local state.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An error from git object or ref handling.
    #[error("git: {0}")]
    Git(#[from] gix::Error),
}

/// Shorthand for store results.
pub type StoreResult<T> = Result<T, StoreError>;

pub(crate) fn git<E: Into<gix::Error>>(e: E) -> StoreError {
    StoreError::Git(e.into())
}

/// Holds an open repository and the location of its local session state.
pub struct Store {
    repo: gix::Repository,
    state_dir: PathBuf,
    scrubber: Scrubber,
    limits: Limits,
    commit_signer: Option<std::sync::Arc<CommitSigner>>,
    keys: crypt::Keys,
    /// Set in a bulk store ([`Store::bulk`]): what it holds back.
    bulk: Option<std::cell::RefCell<bulk::Bulk>>,
    after_commit: bool,
}

/// Says how to raise the limit `setting` names, or that it is fixed.
fn raise_hint(setting: &str) -> String {
    if setting.starts_with("session.") {
        format!(" (raise it with git config {setting} BYTES if you trust this session)")
    } else {
        " (a fixed limit: git-session never writes one this large)".to_owned()
    }
}

/// Signs the bytes of a commit object, returning the armored signature that
/// goes into its `gpgsig` header (an SSH signature in the `git` namespace,
/// so `git verify-commit` checks it).
pub type CommitSigner = dyn Fn(&[u8]) -> Result<String, String> + Send + Sync;

/// Size limits on stored objects, checked from the object header before
/// anything is inflated, so a small pack that expands to gigabytes is an
/// error naming the object instead of an out-of-memory kill. Set with
/// `git config session.maxChunkSize` / `session.maxEventSize` /
/// `session.maxArtifactSize` (bytes; `k`, `m`, `g` suffixes work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest chunk blob read (default 128 MiB).
    pub chunk: u64,
    /// Largest single stored event line (default 64 MiB).
    pub event: u64,
    /// Largest artifact blob read (default 256 MiB).
    pub artifact: u64,
    /// Largest `header.json` read (fixed: 1 MiB).
    pub header: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            chunk: 128 << 20,
            event: 64 << 20,
            artifact: 256 << 20,
            header: 1 << 20,
        }
    }
}

impl Limits {
    fn from_config(repo: &gix::Repository) -> Limits {
        let config = repo.config_snapshot();
        let get = |key: &str, default: u64| {
            config
                .integer(key)
                .and_then(|v| u64::try_from(v).ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        let d = Limits::default();
        Limits {
            chunk: get("session.maxChunkSize", d.chunk),
            event: get("session.maxEventSize", d.event),
            artifact: get("session.maxArtifactSize", d.artifact),
            header: d.header,
        }
    }
}

/// Holds the cheap facts about one session: header and counts.
#[derive(Clone, Debug)]
pub struct SessionStat {
    /// The immutable header.
    pub header: SessionHeader,
    /// The tip commit of the session ref.
    pub tip: ObjectId,
    /// Number of events.
    pub events: u64,
    /// Commit time of the tip, seconds since the epoch.
    pub updated: i64,
    /// The code commit recorded with the last batch, if any.
    pub code_commit: Option<ObjectId>,
}

/// The committer of session commits and reflog entries in a repository
/// with no identity configured: name and email.
pub const FALLBACK_COMMITTER: (&str, &str) = ("git-session", "git-session@localhost");

/// How many packs the object database of an open store can see at least
/// (gix allots slots for them when it opens a repository, 32 by default):
/// a pack written after the last free slot, by this process or another,
/// stays unseen until the repository is opened again. A bulk capture
/// writes a pack per few MiB and merges them every
/// [`bulk::MERGE_EVERY`].
pub const ODB_SLOTS: usize = 1024;

impl Store {
    /// Opens the repository containing `path`, with room for
    /// [`ODB_SLOTS`] packs in its object database.
    pub fn discover(path: &Path) -> StoreResult<Store> {
        let slots = |o: gix::open::Options| {
            o.object_store_slots(gix::odb::store::init::Slots::AsNeededByDiskState {
                multiplier: 1.1,
                minimum: ODB_SLOTS,
            })
        };
        let defaults = gix::sec::trust::Mapping::<gix::open::Options>::default();
        let trust = gix::sec::trust::Mapping {
            full: slots(defaults.full),
            reduced: slots(defaults.reduced),
        };
        let repo = gix::ThreadSafeRepository::discover_opts(path, Default::default(), trust)
            .map(gix::Repository::from)
            .map_err(|_| StoreError::NotARepo {
                path: path.to_owned(),
            })?;
        Self::from_repo(repo)
    }

    /// Wraps an open repository after checking it is one we can write.
    ///
    /// A repository with no identity configured gets
    /// [`FALLBACK_COMMITTER`] in memory: every ref git logs (the receipts'
    /// notes ref, a branch) needs a committer for its reflog entry, and
    /// capture and sync must work on a machine where `user.name` was never
    /// set.
    pub fn from_repo(mut repo: gix::Repository) -> StoreResult<Store> {
        if repo.committer().is_none() {
            let (name, email) = FALLBACK_COMMITTER;
            repo.committer_or_set_fallback(name, email).map_err(git)?;
        }
        if repo
            .config_snapshot()
            .string("extensions.refStorage")
            .is_some_and(|v| v.as_slice() != b"files")
        {
            // gix would write loose ref files that git ignores and say nothing.
            return Err(StoreError::Unsupported(
                "reftable ref storage is not supported yet; use a repository with the files backend"
                    .into(),
            ));
        }
        let state_dir = repo.common_dir().join(refs::STATE_DIR);
        // Redaction is on unless `session.redact` says false.
        let scrubber = Scrubber::new(
            repo.config_snapshot()
                .boolean("session.redact")
                .unwrap_or(true),
        );
        let limits = Limits::from_config(&repo);
        Ok(Store {
            repo,
            state_dir,
            scrubber,
            limits,
            commit_signer: None,
            bulk: None,
            keys: crypt::Keys::default(),
            after_commit: false,
        })
    }

    /// Returns what redacts each event and header this store writes.
    pub fn scrubber(&self) -> Scrubber {
        self.scrubber
    }

    /// Returns the underlying repository.
    pub fn repo(&self) -> &gix::Repository {
        &self.repo
    }

    /// Signs every commit this store writes from now on with `signer`
    /// (capture batches, forks, tombstones; not the deterministic commits
    /// reconcile makes for a divergence, which every clone must make alike).
    pub fn set_commit_signer(&mut self, signer: Box<CommitSigner>) {
        self.commit_signer = Some(std::sync::Arc::from(signer));
    }

    /// Sets where encryption keys come from (`session.recipients`,
    /// `session.recipientsFile`, `session.identity`): sessions created from
    /// now on are encrypted when there are recipients, and encrypted
    /// sessions are read with the identities. Keys are parsed on first use.
    pub fn set_keys(&mut self, config: crypt::KeyConfig) {
        self.keys = crypt::Keys::new(config);
    }

    /// Says whether sessions created by this store are encrypted.
    pub fn encrypts(&self) -> bool {
        self.keys.encrypts()
    }

    /// Returns the signature of `commit` and the exact bytes it signs, or
    /// `None` for an unsigned commit.
    pub fn commit_signature(&self, commit: ObjectId) -> StoreResult<Option<(String, Vec<u8>)>> {
        let c = self.repo.find_commit(commit).map_err(git)?;
        Ok(c.signature()
            .map_err(git)?
            .map(|(sig, signed)| (sig.to_string(), signed.to_bstring().into())))
    }

    /// Returns the commits of the history ending at `tip` that `known` (a
    /// tip this clone has, if any) does not contain, newest first.
    pub fn new_commits(
        &self,
        tip: ObjectId,
        known: Option<ObjectId>,
    ) -> StoreResult<Vec<ObjectId>> {
        let have: std::collections::HashSet<ObjectId> = match known {
            Some(k) => self.first_parent_chain(k)?.into_iter().collect(),
            None => Default::default(),
        };
        Ok(self
            .first_parent_chain(tip)?
            .into_iter()
            .take_while(|c| !have.contains(c))
            .collect())
    }

    /// Returns the size limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Reads blob `oid` after checking from its header (without inflating
    /// it) that it is a blob of at most `limit` bytes; `what` names it in
    /// the error (`chunk events/00/00/00-0.jsonl`).
    pub(crate) fn bounded_blob(
        &self,
        id: &SessionId,
        oid: ObjectId,
        what: &str,
        limit: u64,
        setting: &str,
    ) -> StoreResult<Vec<u8>> {
        let header = self
            .repo
            .find_header(oid)
            .map_err(|e| StoreError::Corrupt {
                id: id.clone(),
                message: format!("{what} cannot be read: {e}"),
            })?;
        if header.kind() != gix::objs::Kind::Blob {
            return Err(StoreError::Corrupt {
                id: id.clone(),
                message: format!("{what} is a {}, not a blob", header.kind()),
            });
        }
        if header.size() > limit {
            return Err(StoreError::TooLarge {
                what: format!("session {id}: {what} (object {oid})"),
                size: header.size(),
                limit,
                setting: setting.to_owned(),
            });
        }
        let blob = self.repo.find_blob(oid).map_err(|e| StoreError::Corrupt {
            id: id.clone(),
            message: format!("{what} cannot be read: {e}"),
        })?;
        Ok(blob.detach().data)
    }

    /// Returns the directory of local, rebuildable state (`.git/session`).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Creates the local state directory if needed; returns whether it was new.
    pub fn ensure_state_dir(&self) -> StoreResult<bool> {
        let existed = self.state_dir.is_dir();
        std::fs::create_dir_all(&self.state_dir).map_err(|source| StoreError::Io {
            path: self.state_dir.clone(),
            source,
        })?;
        Ok(!existed)
    }

    /// Blocks until this process holds the local lock `name` (for state
    /// outside the session refs, such as capture cursors).
    pub fn lock_state(&self, name: &str) -> StoreResult<StateLock> {
        // A subdirectory, so no session id (which has no '/') can collide.
        StateLock::named(&self.state_dir, &format!("state/{name}.lock"))
    }

    /// Like [`Store::lock_state`], without waiting: `None` while another
    /// process holds it.
    pub fn try_lock_state(&self, name: &str) -> StoreResult<Option<StateLock>> {
        StateLock::try_named(&self.state_dir, &format!("state/{name}.lock"))
    }

    /// Returns the work trees of this repository: the main one and every
    /// linked worktree, each as given and canonicalized (sessions record the
    /// path their agent saw, which may be either).
    pub fn worktree_paths(&self) -> Vec<PathBuf> {
        let main = self.repo.main_repo().ok();
        let main = main.as_ref().unwrap_or(&self.repo);
        let mut paths: Vec<PathBuf> = main.workdir().map(Path::to_owned).into_iter().collect();
        paths.extend(self.repo.workdir().map(Path::to_owned));
        if let Ok(linked) = main.worktrees() {
            paths.extend(linked.iter().filter_map(|w| w.base().ok()));
        }
        let canonical: Vec<PathBuf> = paths.iter().filter_map(|p| p.canonicalize().ok()).collect();
        paths.extend(canonical);
        paths.sort();
        paths.dedup();
        paths
    }

    /// Marks every batch this store writes from now on as captured by the
    /// post-commit hook: its records led to HEAD (the `Captured` trailer).
    pub fn set_after_commit(&mut self) {
        self.after_commit = true;
    }

    /// Returns whether batches are captured by the post-commit hook.
    pub fn after_commit(&self) -> bool {
        self.after_commit
    }

    /// Returns the commit `HEAD` points at, or `None` on an unborn branch.
    pub fn code_head(&self) -> Option<ObjectId> {
        self.repo.head_id().ok().map(|id| id.detach())
    }

    /// Returns every session id, sorted.
    pub fn session_ids(&self) -> StoreResult<Vec<SessionId>> {
        let platform = self.repo.references().map_err(git)?;
        let mut ids = Vec::new();
        for r in platform.prefixed(refs::SESSIONS_PREFIX).map_err(git)? {
            // A ref file git cannot read is skipped, not fatal for the others.
            let Ok(r) = r else { continue };
            let name = r.name().as_bstr().to_string();
            // Names that are not valid ids (hand-made refs) are skipped, not fatal.
            if let Some(id) = name
                .strip_prefix(refs::SESSIONS_PREFIX)
                .and_then(|s| SessionId::new(s).ok())
            {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Resolves a full id or a unique prefix, like git's short hashes, or
    /// a session URI (`session://<org>/<project>/<task>/<id>`: its last
    /// component is the id; the others say where it lives and do not
    /// change which session it names).
    pub fn resolve(&self, query: &str) -> StoreResult<SessionId> {
        let query = match query.strip_prefix(refs::URI_SCHEME) {
            Some(rest) => match rest.split('/').collect::<Vec<_>>().as_slice() {
                [_, _, _, id] if SessionId::new(*id).is_ok() => *id,
                _ => {
                    return Err(StoreError::Refused(format!(
                        "{query:?} is not a session URI: session://ORG/PROJECT/TASK/ID"
                    )));
                }
            },
            None => query,
        };
        if query.is_empty() {
            // A prefix of every id: never what was meant.
            return Err(StoreError::Refused(
                "the session id is empty: give an id or the start of one (`git session list` shows them)"
                    .into(),
            ));
        }
        let ids = self.session_ids()?;
        if let Some(exact) = ids.iter().find(|id| id.as_str() == query) {
            return Ok(exact.clone());
        }
        let matches: Vec<SessionId> = ids
            .iter()
            .filter(|id| id.as_str().starts_with(query))
            .cloned()
            .collect();
        match matches.len() {
            1 => Ok(matches.into_iter().next().expect("one match")),
            0 => Err(StoreError::NotFound {
                query: query.to_owned(),
                suggestions: closest(&ids, query),
            }),
            _ => Err(StoreError::Ambiguous {
                query: query.to_owned(),
                candidates: matches,
            }),
        }
    }

    /// Returns the tip commit of a session, or `None` if it does not exist.
    pub fn tip(&self, id: &SessionId) -> StoreResult<Option<ObjectId>> {
        let name = refs::session_ref(id);
        if let Some(pending) = self.pending_tip(&name) {
            return Ok(Some(pending));
        }
        if let Some(tip) = self.exact_tip(&name)? {
            return Ok(tip);
        }
        let Some(mut r) = self.repo.try_find_reference(name.as_str()).map_err(git)? else {
            return Ok(None);
        };
        Ok(Some(r.peel_to_id().map_err(git)?.detach()))
    }

    /// Looks session ref `name` up as exactly that name: its loose file,
    /// else `packed-refs`. gix's lookup also tries the name under
    /// `refs/tags/`, `refs/heads/` and `refs/remotes/` (five file opens
    /// and a `packed-refs` check each for a session that has no ref yet,
    /// as every session of a first import). `None` when the ref is not a
    /// plain object id in either place (symbolic, unreadable, or a ref
    /// namespace is set): the caller then asks gix.
    pub(crate) fn exact_tip(&self, name: &str) -> StoreResult<Option<Option<ObjectId>>> {
        if self.repo.refs.namespace.is_some() {
            return Ok(None);
        }
        match std::fs::read(self.repo.common_dir().join(name)) {
            Ok(bytes) => {
                let hex = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
                return Ok(ObjectId::from_hex(hex).ok().map(Some));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return Ok(None),
        }
        let packed = self.repo.refs.cached_packed_buffer().map_err(git)?;
        let Some(packed) = packed else {
            return Ok(Some(None));
        };
        Ok(match packed.try_find(name).map_err(git)? {
            Some(r) if r.object.is_none() => Some(Some(r.target())),
            // Peels to another object (a tag): gix's lookup says what.
            Some(_) => None,
            None => Some(None),
        })
    }

    fn existing_tip(&self, id: &SessionId) -> StoreResult<ObjectId> {
        self.tip(id)?.ok_or_else(|| StoreError::NotFound {
            query: id.to_string(),
            suggestions: Vec::new(),
        })
    }

    /// Reads the header stored in a session commit's tree; an encrypted
    /// header's sealed members are opened when an identity here can (else
    /// they stay in `sealed`).
    pub fn header_at(&self, id: &SessionId, commit: ObjectId) -> StoreResult<SessionHeader> {
        let mut header = self.stored_header_at(id, commit)?;
        if &header.id == id {
            // A header naming another id is reported by verify as it is.
            self.keys.open_header(&mut header, self.limits.header)?;
        }
        Ok(header)
    }

    /// Like [`Store::header_at`] without opening an encrypted header's
    /// sealed members (they stay in `sealed`, as stored).
    pub(crate) fn stored_header_at(
        &self,
        id: &SessionId,
        commit: ObjectId,
    ) -> StoreResult<SessionHeader> {
        let tree = self.commit_tree(commit)?;
        let entry = self
            .repo
            .find_tree(tree)
            .map_err(git)?
            .lookup_entry_by_path(refs::HEADER_PATH)
            .map_err(git)?
            .ok_or_else(|| StoreError::Corrupt {
                id: id.clone(),
                message: format!("commit {commit} has no {}", refs::HEADER_PATH),
            })?;
        let blob = self.bounded_blob(
            id,
            entry.object_id(),
            refs::HEADER_PATH,
            self.limits.header,
            "fixed",
        )?;
        SessionHeader::decode(&blob).map_err(|e| match e {
            HeaderError::Format(source) => StoreError::Format {
                id: id.clone(),
                source,
            },
            HeaderError::Json(e) => StoreError::Corrupt {
                id: id.clone(),
                message: format!("{} does not parse: {e}", refs::HEADER_PATH),
            },
        })
    }

    /// Returns the session's header.
    pub fn header(&self, id: &SessionId) -> StoreResult<SessionHeader> {
        let tip = self.existing_tip(id)?;
        self.header_at(id, tip)
    }

    pub(crate) fn commit_tree(&self, commit: ObjectId) -> StoreResult<ObjectId> {
        let c = self.repo.find_commit(commit).map_err(git)?;
        Ok(c.tree_id().map_err(git)?.detach())
    }

    pub(crate) fn trailers_at(&self, id: &SessionId, commit: ObjectId) -> StoreResult<Trailers> {
        let c = self.repo.find_commit(commit).map_err(git)?;
        let message = c.message_raw().map_err(git)?;
        Trailers::parse(message).ok_or_else(|| StoreError::Corrupt {
            id: id.clone(),
            message: format!("commit {commit} has no session trailers"),
        })
    }

    /// Returns header and counts without reading any event.
    pub fn stat(&self, id: &SessionId) -> StoreResult<SessionStat> {
        let tip = self.existing_tip(id)?;
        self.stat_at(id, tip)
    }

    /// Like [`Store::stat`], for the session's tip `tip`.
    fn stat_at(&self, id: &SessionId, tip: ObjectId) -> StoreResult<SessionStat> {
        let commit = self
            .repo
            .find_commit(tip)
            .map_err(|e| StoreError::Corrupt {
                id: id.clone(),
                message: format!("the ref does not point at a commit: {e}"),
            })?;
        let updated = commit.time().map_err(git)?.seconds;
        let trailers = Trailers::parse(commit.message_raw().map_err(git)?).ok_or_else(|| {
            StoreError::Corrupt {
                id: id.clone(),
                message: format!("commit {tip} has no session trailers"),
            }
        })?;
        Ok(SessionStat {
            header: self.header_at(id, tip)?,
            tip,
            events: trailers.events,
            updated,
            code_commit: trailers.code_commit,
        })
    }
}

/// Returns up to three ids closest to `query`, for "did you mean".
fn closest(ids: &[SessionId], query: &str) -> Vec<SessionId> {
    let mut scored: Vec<(usize, &SessionId)> = ids
        .iter()
        .map(|id| {
            let probe: String = id.as_str().chars().take(query.chars().count()).collect();
            (edit_distance(&probe, query), id)
        })
        .filter(|(d, _)| *d <= query.len().div_ceil(2))
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(3)
        .map(|(_, id)| id.clone())
        .collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_prefers_near_prefixes() {
        let ids: Vec<SessionId> = ["abc123", "abd999", "zzz"]
            .iter()
            .map(|s| SessionId::new(*s).unwrap())
            .collect();
        let got = closest(&ids, "abx");
        assert_eq!(got.len(), 2);
        assert!(closest(&ids, "qqqqqq").is_empty());
    }

    #[test]
    fn a_size_refusal_says_how_to_raise_the_limit_or_that_it_is_fixed() {
        let too_large = |setting: &str| {
            StoreError::TooLarge {
                what: "session s: header.json".into(),
                size: 2 << 20,
                limit: 1 << 20,
                setting: setting.into(),
            }
            .to_string()
        };
        assert!(
            too_large("session.maxEventSize").contains("git config session.maxEventSize BYTES")
        );
        let fixed = too_large("fixed");
        assert!(
            fixed.contains("a fixed limit") && !fixed.contains("git config"),
            "{fixed}"
        );
    }
}
