//! The local search index: per session, one line of searchable text per
//! event, under `<git common dir>/session/search/` (never pushed,
//! rebuildable, deleted with the state directory at no loss).
//!
//! `<id>.txt` holds, for each event in seq order,
//! `seq \t type \t ts-seconds \t text \n`, where text is every string of
//! the payload (depth first, tabs and line breaks read as spaces) joined by
//! tabs, but for the agent's own record kept under its native key beside
//! the fields of an event other than `meta`: what was stored, so already
//! redacted. `<id>.json` says which tip,
//! how many events and bytes the text covers, and the checksum of its last
//! event. A refresh appends the events after that count when the stored
//! event at that count - 1 still has that checksum (the history was only
//! extended), else rebuilds the file; bytes past the recorded length (a
//! killed refresh) are cut first. Files of sessions that no longer exist
//! (removed, purged) are deleted on every refresh.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use git_session_schema::SessionId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Store, StoreError, StoreResult};

/// Format of the index files; other versions are rebuilt (2: the agent's
/// raw record beside a non-meta event's fields is left out).
const VERSION: u32 = 2;

/// What `<id>.json` records.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Meta {
    version: u32,
    tip: String,
    events: u64,
    bytes: u64,
    last_checksum: Option<String>,
    agent: String,
}

/// One session's index, ready to scan.
#[derive(Clone, Debug)]
pub struct IndexFile {
    /// The session.
    pub id: SessionId,
    /// Its agent.
    pub agent: String,
    /// The text file.
    pub path: PathBuf,
    /// Bytes of it that are valid.
    pub bytes: u64,
}

impl Store {
    /// The directory of the search index.
    pub fn index_dir(&self) -> PathBuf {
        self.state_dir.join("search")
    }

    /// Brings the index of every session up to date (or of `only`, when
    /// given, without deleting others) and returns the index files.
    ///
    /// `native` says whether a payload key holds an agent's own record
    /// (the adapters know; see [`index_line`]).
    pub fn refresh_index(
        &self,
        only: Option<&[SessionId]>,
        native: fn(&str) -> bool,
    ) -> StoreResult<Vec<IndexFile>> {
        let dir = self.index_dir();
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let _lock = self.lock_state("search-index")?;
        let all = self.session_ids()?;
        if only.is_none() {
            remove_stale(&dir, &all);
        }
        let ids: Vec<SessionId> = match only {
            Some(ids) => ids.iter().filter(|i| all.contains(i)).cloned().collect(),
            None => all,
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.refresh_one(&dir, &id, native) {
                // An encrypted session no identity here opens is not
                // searchable on this clone; the others still are.
                Err(StoreError::Sealed { .. }) => {}
                r => out.push(r?),
            }
        }
        Ok(out)
    }

    fn refresh_one(
        &self,
        dir: &Path,
        id: &SessionId,
        native: fn(&str) -> bool,
    ) -> StoreResult<IndexFile> {
        let stat = self.stat(id)?;
        let txt = dir.join(format!("{id}.txt"));
        let meta_path = dir.join(format!("{id}.json"));
        let tip = stat.tip.to_string();
        let mut meta: Meta = std::fs::read(&meta_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(|m: &Meta| m.version == VERSION)
            .unwrap_or_default();
        let on_disk = std::fs::metadata(&txt).map(|m| m.len()).unwrap_or(0);
        let agent = stat.header.agent.as_str().to_owned();
        if meta.tip == tip && on_disk >= meta.bytes {
            return Ok(IndexFile {
                id: id.clone(),
                agent,
                path: txt,
                bytes: meta.bytes,
            });
        }
        let extends = on_disk >= meta.bytes
            && meta.events <= stat.events
            && (meta.events == 0 || self.checksum_at(id, meta.events - 1)? == meta.last_checksum);
        if !extends {
            meta = Meta::default();
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&txt)
            .map_err(io(&txt))?;
        file.set_len(meta.bytes).map_err(io(&txt))?;
        file.seek(SeekFrom::End(0)).map_err(io(&txt))?;
        let mut writer = std::io::BufWriter::with_capacity(1 << 20, file);
        let mut line = Vec::new();
        let mut written = meta.bytes;
        let mut events = meta.events;
        let mut last = meta.last_checksum.clone();
        for stored in self.lines(id, meta.events, None)? {
            let stored = stored?;
            let event = stored.decode().map_err(|e| StoreError::Corrupt {
                id: id.clone(),
                message: format!("seq {}: {e}", stored.seq),
            })?;
            line.clear();
            index_line(&event, native, &mut line);
            writer.write_all(&line).map_err(io(&txt))?;
            written += line.len() as u64;
            events = stored.seq + 1;
            last = event.checksum.clone();
        }
        writer.flush().map_err(io(&txt))?;
        let meta = Meta {
            version: VERSION,
            tip,
            events,
            bytes: written,
            last_checksum: last,
            agent: agent.clone(),
        };
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
        tmp.write_all(&serde_json::to_vec(&meta).expect("index meta serializes"))
            .map_err(io(&meta_path))?;
        tmp.persist(&meta_path).map_err(|e| StoreError::Io {
            path: meta_path.clone(),
            source: e.error,
        })?;
        Ok(IndexFile {
            id: id.clone(),
            agent,
            path: txt,
            bytes: written,
        })
    }

    fn checksum_at(&self, id: &SessionId, seq: u64) -> StoreResult<Option<String>> {
        for stored in self.lines(id, seq, Some(seq))? {
            let stored = stored?;
            if stored.seq == seq {
                return Ok(stored.decode().ok().and_then(|e| e.checksum));
            }
        }
        Ok(None)
    }
}

/// Writes the index line of one event; a key for which `native` is true
/// (an agent's own record, as the adapters name it: the store does not
/// depend on them) is left out of an event other than `meta`.
pub fn index_line(event: &git_session_schema::Event, native: fn(&str) -> bool, out: &mut Vec<u8>) {
    let secs = event
        .ts
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_second())
        .unwrap_or(0);
    out.extend_from_slice(event.seq.to_string().as_bytes());
    out.push(b'\t');
    push_clean(&event.kind, out);
    out.push(b'\t');
    out.extend_from_slice(secs.to_string().as_bytes());
    out.push(b'\t');
    let mut first = true;
    let mut push = |s: &str| {
        if !first {
            out.push(b'\t');
        }
        first = false;
        push_clean(s, out);
    };
    match &event.payload {
        // The agent's own record kept beside an event's fields (ids,
        // times, the same text again) is not what a search looks for; a
        // meta event is nothing but such a record, so it keeps it.
        Value::Object(map) if event.kind != "meta" => map
            .iter()
            .filter(|(k, _)| !native(k))
            .for_each(|(_, v)| strings(v, &mut push)),
        payload => strings(payload, &mut push),
    }
    out.push(b'\n');
}

/// Appends `s` with tabs, line breaks and other C0 controls as spaces (the
/// index is one event per line, tab-separated).
fn push_clean(s: &str, out: &mut Vec<u8>) {
    for b in s.bytes() {
        out.push(if b < 0x20 { b' ' } else { b });
    }
}

fn strings(value: &Value, f: &mut dyn FnMut(&str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, f)),
        Value::Object(map) => map.values().for_each(|v| strings(v, f)),
        _ => {}
    }
}

fn remove_stale(dir: &Path, ids: &[SessionId]) {
    let ids: std::collections::HashSet<&SessionId> = ids.iter().collect();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let stem = name
            .strip_suffix(".txt")
            .or_else(|| name.strip_suffix(".json"));
        let keep = stem
            .and_then(|s| SessionId::new(s).ok())
            .is_some_and(|id| ids.contains(&id));
        if !keep {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}
