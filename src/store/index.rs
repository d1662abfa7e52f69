//! The local summary index `list` reads: per session, the tip it was made
//! from and what [`Store::stat`] found there (header, event count, commit
//! time, code commit), what the caller derived from the events at that tip
//! ([`Store::list_with`]: the title and last event time of `list`), and the
//! metadata (`refs/session-meta/<id>`) with the tip it was read at, in one
//! small file under the state directory (`.git/session/list-index.json`,
//! never pushed).
//!
//! A session whose ref still points at the recorded tip is listed from the
//! index without opening any object, and its metadata likewise while the
//! metadata ref points at the recorded one (both sets of refs are read in
//! one pass each); any other (new, moved, or not in the index) is read from
//! git and the index rewritten. The file is a cache: missing, unreadable or
//! from another version, it is rebuilt from the refs; it never decides
//! which sessions exist (the refs do).

use std::collections::HashMap;
use std::path::Path;

use git_session_schema::{Meta, SessionHeader, SessionId};
use gix::ObjectId;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{SessionStat, Store, StoreResult, git, refs};

/// The index file under the state directory.
pub const LIST_INDEX_FILE: &str = "list-index.json";

/// Bumped when the entries change shape; another version is rebuilt.
const VERSION: u32 = 2;

/// Larger index files are not read (and so rebuilt): 1,000 sessions take
/// well under 1 MiB.
const MAX_INDEX_BYTES: u64 = 64 << 20;

#[derive(Deserialize, Serialize)]
struct IndexFile {
    version: u32,
    sessions: Vec<Entry>,
}

#[derive(Clone, Deserialize, Serialize)]
struct Entry {
    id: SessionId,
    tip: String,
    events: u64,
    updated: i64,
    code_commit: Option<String>,
    header: SessionHeader,
    /// What the caller of [`Store::list_with`] derived at `tip`, if any.
    #[serde(default)]
    derived: Option<Box<RawValue>>,
    /// The metadata tip `meta` was read at; `None` with no metadata ref
    /// (a ref that could not be read is recorded as `None` too, so it is
    /// read again next time).
    #[serde(default)]
    meta_tip: Option<String>,
    #[serde(default)]
    meta: Meta,
}

/// One session as [`Store::list_with`] returns it.
#[derive(Clone, Debug)]
pub struct Listed<T> {
    /// Header, tip and counts.
    pub stat: SessionStat,
    /// Its metadata (empty when it has none or it cannot be read).
    pub meta: Meta,
    /// What the caller derived from the session at this tip.
    pub derived: T,
}

/// One session of a listing: its id, and what was found or why not.
pub type ListRow<T> = (SessionId, StoreResult<Listed<T>>);

/// What a listing derives from one session at its tip (read from git when
/// the tip moved, else from the index).
pub type Derive<'a, T> = &'a dyn Fn(&SessionId, &SessionStat) -> StoreResult<T>;

impl Entry {
    fn stat(&self, tip: ObjectId) -> Option<SessionStat> {
        let code_commit = match &self.code_commit {
            Some(c) => Some(ObjectId::from_hex(c.as_bytes()).ok()?),
            None => None,
        };
        Some(SessionStat {
            header: self.header.clone(),
            tip,
            events: self.events,
            updated: self.updated,
            code_commit,
        })
    }
}

impl Store {
    /// Returns the stat of every session, sorted by the id in its ref name;
    /// a session that cannot be read is listed with its error, so one bad
    /// ref never hides the others. Sessions whose tip did not move since
    /// the last call are read from the local summary index (see the module
    /// docs); the result is the same as [`Store::stat`] on each.
    pub fn list(&self) -> StoreResult<Vec<(SessionId, StoreResult<SessionStat>)>> {
        Ok(self
            .list_inner::<()>(None)?
            .into_iter()
            .map(|(id, r)| (id, r.map(|l| l.stat)))
            .collect())
    }

    /// Like [`Store::list`], with each session's metadata and what
    /// `derive` makes of the session at its tip. Both come from the index
    /// while their refs did not move: `derive` must depend on nothing but
    /// the session's history at that tip. A session `derive` fails on is
    /// listed with that error.
    pub fn list_with<T: Serialize + DeserializeOwned>(
        &self,
        derive: Derive<'_, T>,
    ) -> StoreResult<Vec<ListRow<T>>> {
        Ok(self
            .list_inner(Some(derive))?
            .into_iter()
            .map(|(id, r)| {
                let r = r.map(|l| Listed {
                    stat: l.stat,
                    meta: l.meta,
                    derived: l.derived.expect("derived when asked"),
                });
                (id, r)
            })
            .collect())
    }

    fn list_inner<T: Serialize + DeserializeOwned>(
        &self,
        derive: Option<Derive<'_, T>>,
    ) -> StoreResult<Vec<ListRow<Option<T>>>> {
        let index_path = self.state_dir.join(LIST_INDEX_FILE);
        let cached = read_index(&index_path);
        let meta_tips = self.meta_tips()?;
        let mut changed = false;
        let mut out = Vec::new();
        let mut entries = Vec::new();
        for (id, tip) in self.session_tips()? {
            let hit = tip.as_ref().ok().and_then(|tip| {
                cached
                    .get(&id)
                    .filter(|e| ObjectId::from_hex(e.tip.as_bytes()).ok() == Some(*tip))
                    .and_then(|e| Some((e, e.stat(*tip)?)))
            });
            let (mut entry, stat) = match hit {
                Some((entry, stat)) => (entry.clone(), stat),
                None => {
                    changed = true;
                    let stat = match tip.and_then(|tip| self.stat_at(&id, tip)) {
                        Ok(stat) => stat,
                        Err(e) => {
                            out.push((id, Err(e)));
                            continue;
                        }
                    };
                    let entry = Entry {
                        id: id.clone(),
                        tip: stat.tip.to_string(),
                        events: stat.events,
                        updated: stat.updated,
                        code_commit: stat.code_commit.map(|c| c.to_string()),
                        header: stat.header.clone(),
                        derived: None,
                        meta_tip: None,
                        meta: Meta::default(),
                    };
                    (entry, stat)
                }
            };
            let meta_tip = meta_tips.get(&id).map(ObjectId::to_string);
            if entry.meta_tip != meta_tip {
                changed = true;
                // Metadata that cannot be read does not hide the session;
                // it is tried again next time.
                let read = meta_tips.get(&id).map(|t| self.meta_state_at(&id, *t));
                (entry.meta, entry.meta_tip) = match read {
                    Some(Ok(meta)) => (meta, meta_tip),
                    Some(Err(_)) => (Meta::default(), None),
                    None => (Meta::default(), None),
                };
            }
            let derived = match derive {
                None => None,
                Some(derive) => {
                    let cached = entry
                        .derived
                        .as_ref()
                        .and_then(|raw| serde_json::from_str::<T>(raw.get()).ok());
                    match cached {
                        Some(d) => Some(d),
                        None => match derive(&id, &stat) {
                            Ok(d) => {
                                changed = true;
                                entry.derived = serde_json::value::to_raw_value(&d).ok();
                                Some(d)
                            }
                            Err(e) => {
                                entries.push(entry);
                                out.push((id, Err(e)));
                                continue;
                            }
                        },
                    }
                }
            };
            out.push((
                id,
                Ok(Listed {
                    stat,
                    meta: entry.meta.clone(),
                    derived,
                }),
            ));
            entries.push(entry);
        }
        if changed || entries.len() != cached.len() {
            // A cache: failing to write it only makes the next list slower.
            let _ = self.write_index(
                &index_path,
                &IndexFile {
                    version: VERSION,
                    sessions: entries,
                },
            );
        }
        Ok(out)
    }

    /// Returns the tip of every session's metadata ref, in one pass over
    /// the refs (a ref that does not peel is left out: read as none).
    fn meta_tips(&self) -> StoreResult<HashMap<SessionId, ObjectId>> {
        let platform = self.repo.references().map_err(git)?;
        let mut tips = HashMap::new();
        for r in platform.prefixed(refs::META_PREFIX).map_err(git)? {
            let Ok(mut r) = r else { continue };
            let name = r.name().as_bstr().to_string();
            let Some(id) = name
                .strip_prefix(refs::META_PREFIX)
                .and_then(|s| SessionId::new(s).ok())
            else {
                continue;
            };
            if let Ok(tip) = r.peel_to_id() {
                tips.insert(id, tip.detach());
            }
        }
        Ok(tips)
    }

    /// Returns every session ref's id and tip, sorted by id, in one pass
    /// over the refs; a ref that does not peel is listed with its error.
    pub(super) fn session_tips(&self) -> StoreResult<Vec<(SessionId, StoreResult<ObjectId>)>> {
        let platform = self.repo.references().map_err(git)?;
        let mut tips = Vec::new();
        for r in platform.prefixed(refs::SESSIONS_PREFIX).map_err(git)? {
            // A ref file git cannot read is skipped, as `session_ids` does.
            let Ok(mut r) = r else { continue };
            let name = r.name().as_bstr().to_string();
            let Some(id) = name
                .strip_prefix(refs::SESSIONS_PREFIX)
                .and_then(|s| SessionId::new(s).ok())
            else {
                continue;
            };
            let tip = r.peel_to_id().map(|t| t.detach()).map_err(git);
            tips.push((id, tip));
        }
        tips.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(tips)
    }

    fn write_index(&self, path: &Path, index: &IndexFile) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.state_dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.state_dir)?;
        std::io::Write::write_all(&mut tmp, &serde_json::to_vec(index)?)?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

fn read_index(path: &Path) -> HashMap<SessionId, Entry> {
    let fits = std::fs::metadata(path).is_ok_and(|m| m.len() <= MAX_INDEX_BYTES);
    let parsed = fits
        .then(|| std::fs::read(path).ok())
        .flatten()
        .and_then(|bytes| serde_json::from_slice::<IndexFile>(&bytes).ok())
        .filter(|f| f.version == VERSION);
    parsed
        .map(|f| f.sessions.into_iter().map(|e| (e.id.clone(), e)).collect())
        .unwrap_or_default()
}
