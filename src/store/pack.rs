//! Keeping the repository's own git fast as sessions grow.
//!
//! Two things, both local to this clone (nothing here is pushed or
//! changes the stored format):
//!
//! - **No delta search through event chunks.** Chunks are written once and
//!   share no content with each other, yet git's `pack-objects` (run by
//!   `git push`, `git gc`, `git repack`) tries to delta every blob against
//!   its neighbours, which for 4 MiB chunks is most of a push's time. The
//!   repository's own attributes file (`info/attributes`, never committed)
//!   gets the line [`DELTA_ATTRIBUTE`], written at `init` and by the first
//!   batch; git then stores chunks whole.
//! - **A bounded number of loose objects.** gix writes loose objects (about
//!   five per batch); left alone, thousands of captures pass git's
//!   `gc.auto` threshold and the user's next `git commit` starts a gc.
//!   Every `session.packBatches` batches (default
//!   [`DEFAULT_PACK_BATCHES`]; 0 turns it off) and before a push, the
//!   session objects written since the last pack go into one pack (zlib
//!   level 1, no delta search), and loose copies of packed objects are
//!   removed (`git prune-packed`). Packs are then reused as they are by
//!   push and gc. The walk starts from the session tips and stops at the
//!   tips of the last pack, so its cost does not grow with history.
//!   git-session never runs `git gc` itself.
//! - **Packed session refs.** Each session is a ref; a thousand loose ref
//!   files cost `list` (and `git for-each-ref`) a thousand opens. At the
//!   same points git-session's own refs (`refs/sessions/`,
//!   `refs/session-meta/`) are packed into `packed-refs` (`git pack-refs
//!   --include`, which leaves the user's refs alone), and a capture that
//!   moves many refs at once writes them into `packed-refs` directly. A
//!   later update writes a loose ref over the packed one, as git does; a
//!   deletion takes the ref out of both.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use gix::ObjectId;
use gix::lock::acquire::Fail;
use gix::refs::Target;
use gix::refs::file::transaction::PackedRefs;
use gix::refs::transaction::{Change, PreviousValue, RefEdit};

use super::{Store, StoreError, StoreResult, git, refs};

/// The attribute line that keeps chunk blobs out of git's delta search.
pub const DELTA_ATTRIBUTE: &str = "events/*/*/*.jsonl -delta";

const ATTRIBUTE_COMMENT: &str = "# git-session: session event chunks share no content; no delta search (see git session init --help)";

/// How many session refs one bulk flush moves before they are packed
/// (see [`Store::edit_session_refs`]).
pub const REFS_TO_PACK: usize = 64;

/// The first line of a `packed-refs` file git writes: its refs are sorted,
/// and a ref that peels to another object has its `^` line (refs without
/// one point at what they name; session refs point at commits).
const PACKED_REFS_HEADER: &[u8] = b"# pack-refs with: peeled fully-peeled sorted \n";

/// Which way a bulk flush's refs were written (tests look at it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RefsWritten {
    /// One by one, loose (fewer than [`REFS_TO_PACK`]).
    Loose,
    /// Into `packed-refs` by gix's transaction, a lock file per ref.
    Packed,
    /// Into `packed-refs` under its lock alone ([`Store::packed_only`]).
    PackedOnly,
}

/// One session ref's move in `packed-refs`.
struct PackedEdit {
    name: String,
    expected: Option<ObjectId>,
    new: ObjectId,
}

impl PackedEdit {
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.new.to_hex().to_string().as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.name.as_bytes());
        out.push(b'\n');
    }
}

/// How many batches are written between two packs, by default.
pub const DEFAULT_PACK_BATCHES: u64 = 100;

/// Under the state directory: batches written since the last pack, then
/// the tips that pack started from, one per line.
const PENDING_FILE: &str = "pack-pending";

/// The ref prefixes whose objects the store writes loose.
const PACKED_PREFIXES: [&str; 3] = [
    refs::SESSIONS_PREFIX,
    refs::TOMBSTONES_PREFIX,
    "refs/notes/git-session/",
];

/// Reports one pack of session objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackOutcome {
    /// The new pack's file, or `None` when every object was packed already.
    pub pack: Option<PathBuf>,
    /// Objects it holds.
    pub objects: u64,
}

struct Pending {
    batches: u64,
    packed_tips: Vec<ObjectId>,
}

impl Store {
    /// Makes sure the repository's own attributes file keeps event chunks
    /// out of git's delta search; returns whether the line was added.
    /// Whatever else the file holds is kept.
    pub fn ensure_delta_attribute(&self) -> StoreResult<bool> {
        let dir = self.repo.common_dir().join("info");
        let path = dir.join("attributes");
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        let mut text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io(&path)(e)),
        };
        if text
            .split(|b| *b == b'\n')
            .any(|l| l.trim_ascii() == DELTA_ATTRIBUTE.as_bytes())
        {
            return Ok(false);
        }
        if !text.is_empty() && !text.ends_with(b"\n") {
            text.push(b'\n');
        }
        text.extend_from_slice(format!("{ATTRIBUTE_COMMENT}\n{DELTA_ATTRIBUTE}\n").as_bytes());
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(io(&dir))?;
        std::io::Write::write_all(&mut tmp, &text).map_err(io(tmp.path()))?;
        tmp.persist(&path).map_err(|e| io(&path)(e.error))?;
        Ok(true)
    }

    /// Removes what [`Store::ensure_delta_attribute`] added; returns
    /// whether there was anything to remove.
    pub fn remove_delta_attribute(&self) -> StoreResult<bool> {
        let dir = self.repo.common_dir().join("info");
        let path = dir.join("attributes");
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io(&path)(e)),
        };
        let ours = |l: &[u8]| {
            let l = l.trim_ascii();
            l == DELTA_ATTRIBUTE.as_bytes() || l == ATTRIBUTE_COMMENT.as_bytes()
        };
        let lines: Vec<&[u8]> = text.split_inclusive(|b| *b == b'\n').collect();
        let kept: Vec<u8> = lines
            .iter()
            .filter(|l| !ours(l))
            .flat_map(|l| l.iter().copied())
            .collect();
        if kept.len() == text.len() {
            return Ok(false);
        }
        let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(io(&dir))?;
        std::io::Write::write_all(&mut tmp, &kept).map_err(io(tmp.path()))?;
        tmp.persist(&path).map_err(|e| io(&path)(e.error))?;
        Ok(true)
    }

    /// Called after each published batch (outside the session lock):
    /// keeps the attribute line in place and packs every
    /// `session.packBatches` batches. Never fails the batch, which is
    /// already stored: a pack that fails is tried again at the next count.
    pub(crate) fn after_batch(&self) {
        self.after_batches(1);
    }

    /// Like [`Store::after_batch`], for `batches` batches' worth of loose
    /// objects at once (a bulk store's flush: its small objects are packed
    /// already, only its large blobs are loose).
    pub(crate) fn after_batches(&self, batches: u64) {
        let _ = self.ensure_delta_attribute();
        if batches == 0 {
            return;
        }
        let every = self.pack_batches();
        if every == 0 {
            return;
        }
        let Ok(_lock) = self.lock_state("pack") else {
            return;
        };
        let mut pending = self.read_pending();
        pending.batches += batches;
        if pending.batches >= every {
            let _ = self.pack_locked(&mut pending);
        }
        self.write_pending(&pending);
    }

    /// Applies the session ref `edits` of a bulk flush in one transaction.
    /// From [`REFS_TO_PACK`] refs on they go straight into `packed-refs`,
    /// which is written once and leaves no loose ref, where writing them
    /// loose and running `git pack-refs` after cost three file creations
    /// or removals a ref: in a first import of a thousand sessions the
    /// file system's inode allocation was a fifth of the capture's CPU.
    /// Under `packed-refs`' lock alone when every ref allows it
    /// ([`Store::packed_only`]), else by gix's transaction, which also
    /// locks each ref. Lock waits are git's (`core.filesRefLockTimeout`,
    /// `core.packedRefsTimeout`).
    pub(crate) fn edit_session_refs(&self, edits: Vec<RefEdit>) -> Result<(), String> {
        self.edit_session_refs_by(edits).map(drop)
    }

    /// [`Store::edit_session_refs`], saying which way the refs went.
    pub(super) fn edit_session_refs_by(&self, edits: Vec<RefEdit>) -> Result<RefsWritten, String> {
        if edits.len() < REFS_TO_PACK || self.pack_batches() == 0 {
            return self
                .repo
                .edit_references(edits)
                .map(|_| RefsWritten::Loose)
                .map_err(|e| e.to_string());
        }
        let config = self.repo.config_snapshot();
        let wait = |key: &str, default_ms: i64| {
            let ms = config.integer(key).unwrap_or(default_ms);
            match u64::try_from(ms) {
                Ok(0) => Fail::Immediately,
                Ok(ms) => Fail::AfterDurationWithBackoff(Duration::from_millis(ms)),
                // Negative: wait as long as it takes.
                Err(_) => Fail::AfterDurationWithBackoff(Duration::from_secs(u64::from(u32::MAX))),
            }
        };
        if let Some(packed) = self.packed_only(&edits) {
            let lock = gix::lock::File::acquire_to_update_resource(
                self.repo.common_dir().join("packed-refs"),
                wait("core.packedRefsTimeout", 1000),
                None,
                0,
            )
            .map_err(|e| e.to_string())?;
            return self
                .write_packed_refs(lock, packed)
                .map(|()| RefsWritten::PackedOnly);
        }
        let committer = self
            .repo
            .committer()
            .transpose()
            .map_err(|e| e.to_string())?;
        let objects: Box<dyn gix::objs::Find> = Box::new(self.repo.objects.clone());
        self.repo
            .refs
            .transaction()
            .packed_refs(
                PackedRefs::DeletionsAndNonSymbolicUpdatesRemoveLooseSourceReference(objects),
            )
            .prepare(
                edits,
                wait("core.filesRefLockTimeout", 100),
                wait("core.packedRefsTimeout", 1000),
            )
            .and_then(|t| t.commit(committer))
            .map(|_| RefsWritten::Packed)
            .map_err(|e| e.to_string())
    }

    /// The edits as [`PackedEdit`]s, when they can go into `packed-refs`
    /// under its lock alone: each moves a session ref that has
    /// no loose file and no lock file (the bulk store holds every session's
    /// own lock, [`super::lock::SessionLock`]) to a commit it wrote, no
    /// reflog is wanted (`core.logAllRefUpdates=always` asks for one), and
    /// no ref namespace is set. A thousand new sessions then cost no file
    /// but `packed-refs.lock`, where gix's transaction creates and removes a
    /// lock file per ref: on a file system without a journal, ext4 steps
    /// over recently removed inodes one by one when it allocates the next,
    /// so those removals slowed every file creation of the minutes after.
    fn packed_only(&self, edits: &[RefEdit]) -> Option<Vec<PackedEdit>> {
        if self.repo.refs.namespace.is_some()
            || self
                .repo
                .config_snapshot()
                .string("core.logAllRefUpdates")
                .is_some_and(|v| v.eq_ignore_ascii_case(b"always"))
        {
            return None;
        }
        let common = self.repo.common_dir();
        let absent = |path: &Path| matches!(std::fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
        edits
            .iter()
            .map(|edit| {
                let name = std::str::from_utf8(edit.name.as_bstr()).ok()?;
                let Change::Update {
                    expected,
                    new: Target::Object(new),
                    ..
                } = &edit.change
                else {
                    return None;
                };
                let expected = match expected {
                    PreviousValue::MustNotExist => None,
                    PreviousValue::MustExistAndMatch(Target::Object(t)) => Some(*t),
                    _ => return None,
                };
                let ours = name.starts_with(refs::SESSIONS_PREFIX) && !edit.deref;
                let (path, lock) = (common.join(name), common.join(format!("{name}.lock")));
                (ours && absent(&path) && absent(&lock)).then(|| PackedEdit {
                    name: name.to_owned(),
                    expected,
                    new: *new,
                })
            })
            .collect()
    }

    /// Writes `edits` into `packed-refs`, whose `lock` is held: each ref is
    /// checked against the file as it is now (a ref moved by a writer that
    /// bypassed the session locks fails the whole write, and the caller
    /// then publishes the refs one by one), then the file is rewritten in
    /// git's sorted form, every other line kept as it was.
    fn write_packed_refs(
        &self,
        mut lock: gix::lock::File,
        mut edits: Vec<PackedEdit>,
    ) -> Result<(), String> {
        let buffer = self
            .repo
            .refs
            .open_packed_buffer()
            .map_err(|e| e.to_string())?;
        for edit in &edits {
            let now = match &buffer {
                Some(b) => b
                    .try_find(edit.name.as_str())
                    .map_err(|e| e.to_string())?
                    .map(|r| r.target()),
                None => None,
            };
            if now != edit.expected {
                return Err(format!(
                    "{}: expected {}, found {}",
                    edit.name,
                    edit.expected
                        .map_or_else(|| "no ref".to_owned(), |t| t.to_string()),
                    now.map_or_else(|| "no ref".to_owned(), |t| t.to_string())
                ));
            }
        }
        edits.sort_by(|a, b| a.name.cmp(&b.name));
        let mut out =
            Vec::with_capacity(buffer.as_ref().map_or(0, |b| b.as_ref().len()) + edits.len() * 100);
        out.extend_from_slice(PACKED_REFS_HEADER);
        let mut edits = edits.into_iter().peekable();
        if let Some(b) = &buffer {
            for r in b.iter().map_err(|e| e.to_string())? {
                let r = r.map_err(|e| e.to_string())?;
                let name: &[u8] = r.name.as_bstr();
                while let Some(e) = edits.next_if(|e| e.name.as_bytes() < name) {
                    e.write_to(&mut out);
                }
                if let Some(e) = edits.next_if(|e| e.name.as_bytes() == name) {
                    e.write_to(&mut out);
                    continue;
                }
                out.extend_from_slice(r.target);
                out.push(b' ');
                out.extend_from_slice(name);
                out.push(b'\n');
                if let Some(peeled) = r.object {
                    out.push(b'^');
                    out.extend_from_slice(peeled);
                    out.push(b'\n');
                }
            }
        }
        for e in edits {
            e.write_to(&mut out);
        }
        let path = lock.resource_path();
        lock.with_mut(|f| std::io::Write::write_all(f, &out))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        lock.commit()
            .map_err(|e| format!("{}: {}", path.display(), e.error))?;
        // gix keeps the file it read last, and the rewrite may share its
        // mtime. The refs are written: a failed re-read is not the write's
        // failure (gix reads the file again when it next finds it changed).
        let _ = self.repo.refs.force_refresh_packed_buffer();
        Ok(())
    }

    /// Packs the session objects written since the last pack, if any batch
    /// was written since (`git session push` does this first, so that the
    /// push sends packed data as it is).
    pub fn pack_pending(&self) -> StoreResult<Option<PackOutcome>> {
        let _lock = self.lock_state("pack")?;
        let mut pending = self.read_pending();
        if pending.batches == 0 {
            return Ok(None);
        }
        let outcome = self.pack_locked(&mut pending);
        self.write_pending(&pending);
        outcome.map(Some)
    }

    /// Returns `session.packBatches`, else [`DEFAULT_PACK_BATCHES`].
    fn pack_batches(&self) -> u64 {
        self.repo
            .config_snapshot()
            .integer("session.packBatches")
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(DEFAULT_PACK_BATCHES)
    }

    fn pack_locked(&self, pending: &mut Pending) -> StoreResult<PackOutcome> {
        let tips = self.packed_ref_tips()?;
        // Tips of the last pack that still exist bound the walk (a removed
        // session's objects may be gone).
        let mut input = String::new();
        for t in &tips {
            input.push_str(&format!("{t}\n"));
        }
        for t in pending
            .packed_tips
            .iter()
            .filter(|t| self.repo.has_object(**t))
        {
            input.push_str(&format!("^{t}\n"));
        }
        let outcome = if tips.is_empty() {
            PackOutcome {
                pack: None,
                objects: 0,
            }
        } else {
            self.pack_objects(&input)?
        };
        pending.batches = 0;
        pending.packed_tips = tips;
        self.pack_refs();
        Ok(outcome)
    }

    /// Packs git-session's refs into `packed-refs` (see the module docs).
    /// Best effort: a git without `--include` (before 2.42), or a
    /// `packed-refs` locked by another writer, leaves them loose.
    fn pack_refs(&self) {
        let mut args = vec!["pack-refs".to_owned()];
        for prefix in [refs::SESSIONS_PREFIX, refs::META_PREFIX] {
            args.push("--include".to_owned());
            args.push(format!("{prefix}*"));
        }
        let _ = self.run_git(&args);
    }

    fn pack_objects(&self, input: &str) -> StoreResult<PackOutcome> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        self.ensure_state_dir()?;
        let mut list =
            tempfile::NamedTempFile::new_in(&self.state_dir).map_err(io(&self.state_dir))?;
        std::io::Write::write_all(&mut list, input.as_bytes()).map_err(io(list.path()))?;
        let stdin = list.reopen().map_err(io(list.path()))?;
        let pack_dir = self.repo.common_dir().join("objects").join("pack");
        let mut cmd = self.git_command();
        cmd.args([
            "-c",
            "pack.compression=1",
            "pack-objects",
            "-q",
            "--revs",
            "--unpacked",
            "--window=0",
        ])
        .arg(pack_dir.join("pack"));
        let out = super::child::run_with_stdin(cmd, None, Stdio::from(stdin))?;
        if !out.status.success() {
            return Err(StoreError::Remote(format!(
                "git pack-objects failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let base = pack_dir.join(format!("pack-{name}"));
        let objects = idx_object_count(&base.with_extension("idx")).unwrap_or(u64::MAX);
        if objects == 0 {
            // Nothing was loose: git still wrote an empty pack.
            for ext in ["pack", "idx", "rev"] {
                let _ = std::fs::remove_file(base.with_extension(ext));
            }
            return Ok(PackOutcome {
                pack: None,
                objects: 0,
            });
        }
        let out = self.run_git(&["prune-packed".into(), "-q".into()])?;
        if !out.status.success() {
            return Err(StoreError::Remote(format!(
                "git prune-packed failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(PackOutcome {
            pack: Some(base.with_extension("pack")),
            objects,
        })
    }

    fn packed_ref_tips(&self) -> StoreResult<Vec<ObjectId>> {
        let platform = self.repo.references().map_err(git)?;
        let mut tips = Vec::new();
        for prefix in PACKED_PREFIXES {
            for r in platform.prefixed(prefix).map_err(git)? {
                let Ok(mut r) = r else { continue };
                if let Ok(id) = r.peel_to_id() {
                    tips.push(id.detach());
                }
            }
        }
        tips.sort();
        tips.dedup();
        Ok(tips)
    }

    fn read_pending(&self) -> Pending {
        // Local, rebuildable state: anything unreadable counts as nothing
        // pending and no earlier pack (the next walk is then a full one).
        let text = std::fs::read_to_string(self.state_dir.join(PENDING_FILE)).unwrap_or_default();
        let mut lines = text.lines();
        let batches = lines.next().and_then(|l| l.parse().ok()).unwrap_or(0);
        let packed_tips = lines
            .filter_map(|l| ObjectId::from_hex(l.as_bytes()).ok())
            .collect();
        Pending {
            batches,
            packed_tips,
        }
    }

    fn write_pending(&self, pending: &Pending) {
        let mut text = format!("{}\n", pending.batches);
        for t in &pending.packed_tips {
            text.push_str(&format!("{t}\n"));
        }
        let _ = std::fs::write(self.state_dir.join(PENDING_FILE), text);
    }
}

/// Reads the object count of a version-2 pack index (the last fan-out entry).
fn idx_object_count(path: &Path) -> Option<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let mut head = [0u8; 8];
    f.read_exact(&mut head).ok()?;
    if head != [0xff, b't', b'O', b'c', 0, 0, 0, 2] {
        return None;
    }
    f.seek(SeekFrom::Start(8 + 255 * 4)).ok()?;
    let mut n = [0u8; 4];
    f.read_exact(&mut n).ok()?;
    Some(u64::from(u32::from_be_bytes(n)))
}
