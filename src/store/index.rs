//! The local summary index `list` reads: per session, the tip it was made
//! from and what [`Store::stat`] found there (header, event count, commit
//! time, code commit), in one small file under the state directory
//! (`.git/session/list-index.json`, never pushed).
//!
//! A session whose ref still points at the recorded tip is listed from the
//! index without opening any object; any other (new, moved, or not in the
//! index) is read from git and the index rewritten. The file is a cache:
//! missing, unreadable or from another version, it is rebuilt from the
//! refs; it never decides which sessions exist (the refs do).

use std::collections::HashMap;
use std::path::Path;

use git_session_schema::{SessionHeader, SessionId};
use gix::ObjectId;
use serde::{Deserialize, Serialize};

use super::{SessionStat, Store, StoreResult, git, refs};

/// The index file under the state directory.
pub const LIST_INDEX_FILE: &str = "list-index.json";

/// Bumped when the entries change shape; another version is rebuilt.
const VERSION: u32 = 1;

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
}

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
        let index_path = self.state_dir.join(LIST_INDEX_FILE);
        let cached = read_index(&index_path);
        let mut changed = false;
        let mut out = Vec::new();
        let mut entries = Vec::new();
        for (id, tip) in self.session_tips()? {
            let hit = tip.as_ref().ok().and_then(|tip| {
                cached
                    .get(&id)
                    .filter(|e| ObjectId::from_hex(e.tip.as_bytes()).ok() == Some(*tip))
                    .and_then(|e| Some((e.clone(), e.stat(*tip)?)))
            });
            if let Some((entry, stat)) = hit {
                entries.push(entry);
                out.push((id, Ok(stat)));
                continue;
            }
            changed = true;
            let stat = tip.and_then(|tip| self.stat_at(&id, tip));
            if let Ok(s) = &stat {
                entries.push(Entry {
                    id: id.clone(),
                    tip: s.tip.to_string(),
                    events: s.events,
                    updated: s.updated,
                    code_commit: s.code_commit.map(|c| c.to_string()),
                    header: s.header.clone(),
                });
            }
            out.push((id, stat));
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

    /// Returns every session ref's id and tip, sorted by id, in one pass
    /// over the refs; a ref that does not peel is listed with its error.
    fn session_tips(&self) -> StoreResult<Vec<(SessionId, StoreResult<ObjectId>)>> {
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
