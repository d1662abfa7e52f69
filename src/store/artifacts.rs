//! Lazy artifacts (`git config session.syncArtifacts head`): a session
//! tree holds, for each large artifact, only a small **head** object (its
//! first 4 KiB, its SHA-256 and its size); the full blob lives in
//! `refs/session-artifacts/<id>`, which the session refspecs of `push` and
//! `fetch` leave out. `git session push --artifacts <id>` publishes the
//! full blobs, `git session fetch --artifacts <id>` brings them, and every
//! fetched blob is checked against its head (size from the object header
//! before it is read, then the SHA-256 of its bytes) before it is adopted.
//!
//! A head blob is one clear line and the first bytes:
//!
//! ```text
//! git-session-artifact-head/1 {"size":52428800,"sha256":"<hex>"}\n
//! <the first 4096 bytes (sealed as an artifact in an encrypted session)>
//! ```
//!
//! The ref's commit has a flat tree, one entry `<sha256 hex>` per full
//! blob (stored exactly as a full artifact would be: plain, or sealed in
//! an encrypted session), and the previous commit of the ref as parent.

use git_session_schema::{ArtifactId, SessionId};
use gix::ObjectId;
use gix::objs::Kind;
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;
use serde::{Deserialize, Serialize};

use super::{Store, StoreError, StoreResult, crypt, git, refs};

/// Starts every head blob.
pub const HEAD_MAGIC: &[u8] = b"git-session-artifact-head/1 ";

/// How many first bytes of an artifact its head keeps.
pub const HEAD_BYTES: usize = 4096;

/// A sealed blob is longer than its plaintext by at most this (the clear
/// line, age's header and stanzas, zstd framing of incompressible data).
const SEAL_SLACK: u64 = 64 << 10;

/// The entries of a full-artifacts tree: SHA-256 hex and blob.
type FlatEntries = Vec<(String, ObjectId)>;

/// The clear line of a head blob.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadLine {
    /// Length of the full artifact's bytes (plaintext).
    pub size: u64,
    /// SHA-256 hex of the full artifact's bytes: its name.
    pub sha256: String,
}

/// Says whether a stored artifact blob is a head.
pub(crate) fn is_head(blob: &[u8]) -> bool {
    blob.starts_with(HEAD_MAGIC)
}

/// Splits a head blob into its clear line and the head bytes as stored.
pub(crate) fn parse_head(blob: &[u8]) -> Result<(HeadLine, &[u8]), String> {
    let rest = blob
        .strip_prefix(HEAD_MAGIC)
        .ok_or("not an artifact head")?;
    let nl = rest
        .iter()
        .take(1024)
        .position(|&b| b == b'\n')
        .ok_or("the artifact head's clear line is missing or too long")?;
    let line: HeadLine = serde_json::from_slice(&rest[..nl])
        .map_err(|e| format!("the artifact head's clear line does not parse: {e}"))?;
    if line.sha256.len() != 64
        || !line
            .sha256
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return Err("the artifact head names no SHA-256".into());
    }
    Ok((line, &rest[nl + 1..]))
}

/// Returns a byte count for people: `52.4 MB`, `812 bytes`.
pub fn human_size(n: u64) -> String {
    match n {
        0..1_000 => format!("{n} bytes"),
        1_000..1_000_000 => format!("{:.1} kB", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        _ => format!("{:.1} GB", n as f64 / 1e9),
    }
}

/// Reports what `fetch --artifacts` adopted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArtifactsFetched {
    /// Full blobs checked and adopted: artifact and size.
    pub adopted: Vec<(ArtifactId, u64)>,
    /// Full blobs here already.
    pub present: usize,
    /// Fetched blobs refused: artifact and why.
    pub refused: Vec<(ArtifactId, String)>,
    /// Heads whose full blob the remote does not have.
    pub missing: Vec<ArtifactId>,
    /// The remote's ref had diverged from this clone's and the two were
    /// merged (the next `push --artifacts` is a fast-forward).
    pub merged: bool,
    /// Why the remote's ref, diverged from this clone's, was not merged.
    pub unmerged: Option<String>,
}

impl Store {
    /// Says whether new artifacts are stored as heads
    /// (`session.syncArtifacts=head`; `full`, the default, keeps them whole).
    pub fn lazy_artifacts(&self) -> bool {
        self.repo
            .config_snapshot()
            .string("session.syncArtifacts")
            .is_some_and(|v| v.eq_ignore_ascii_case(b"head"))
    }

    /// Writes an object straight into the object database (never into a
    /// bulk store's memory: the artifacts ref moves at once).
    fn write_direct(&self, kind: Kind, data: &[u8]) -> StoreResult<ObjectId> {
        let odb: &gix::odb::Handle = &self.repo.objects;
        gix::objs::Write::write_buf(odb, kind, data).map_err(git)
    }

    /// Stores `stored` (the artifact blob as it would be kept whole: plain,
    /// or sealed for session `sealed`) as a full blob; returns it and the
    /// bytes of its head blob.
    pub(crate) fn write_full_artifact(
        &self,
        sealed: Option<&SessionId>,
        plain: &[u8],
        stored: &[u8],
    ) -> StoreResult<(ObjectId, Vec<u8>)> {
        let full = self.write_direct(Kind::Blob, stored)?;
        let art = ArtifactId::of(plain);
        let first = &plain[..plain.len().min(HEAD_BYTES)];
        let head_bytes = match sealed {
            Some(id) => self.keys.seal_artifact(id, first)?,
            None => first.to_vec(),
        };
        let line = HeadLine {
            size: plain.len() as u64,
            sha256: art.hex().to_owned(),
        };
        let mut head = HEAD_MAGIC.to_vec();
        serde_json::to_writer(&mut head, &line).expect("json serializes");
        head.push(b'\n');
        head.extend_from_slice(&head_bytes);
        Ok((full, head))
    }

    /// Returns the tip of `refs/session-artifacts/<id>` and its entries.
    fn full_artifacts(&self, refname: &str) -> StoreResult<Option<(ObjectId, FlatEntries)>> {
        let Some(mut r) = self.repo.try_find_reference(refname).map_err(git)? else {
            return Ok(None);
        };
        let tip = r.peel_to_id().map_err(git)?.detach();
        Ok(Some((tip, self.flat_entries(tip)?)))
    }

    fn flat_entries(&self, commit: ObjectId) -> StoreResult<FlatEntries> {
        let tree = self.commit_tree(commit)?;
        let tree = self.repo.find_tree(tree).map_err(git)?;
        Ok(tree
            .decode()
            .map_err(git)?
            .entries
            .iter()
            .filter(|e| e.mode.is_blob())
            .map(|e| (e.filename.to_string(), e.oid.to_owned()))
            .collect())
    }

    /// Adds full blobs to `refs/session-artifacts/<id>` (one commit;
    /// called under the session lock, before the batch's ref moves).
    pub(crate) fn add_full_artifacts(
        &self,
        id: &SessionId,
        time: i64,
        blobs: &[(ArtifactId, ObjectId)],
    ) -> StoreResult<()> {
        self.add_full_artifacts_after(id, time, blobs, None)
    }

    /// [`Self::add_full_artifacts`], with `other` (another clone's tip of
    /// the ref, every entry of it checked) as a second parent, so that
    /// the next push of the ref is a fast-forward on the remote it came
    /// from: the two clones' full artifacts are merged, none is dropped.
    fn add_full_artifacts_after(
        &self,
        id: &SessionId,
        time: i64,
        blobs: &[(ArtifactId, ObjectId)],
        other: Option<ObjectId>,
    ) -> StoreResult<()> {
        if blobs.is_empty() && other.is_none() {
            return Ok(());
        }
        let name = refs::artifacts_ref(id);
        let (tip, mut entries) = match self.full_artifacts(&name)? {
            Some((t, e)) => (Some(t), e),
            None => (None, Vec::new()),
        };
        let before = entries.len();
        for (art, blob) in blobs {
            if !entries.iter().any(|(n, _)| n == art.hex()) {
                entries.push((art.hex().to_owned(), *blob));
            }
        }
        if entries.len() == before && tip.is_some() && other.is_none() {
            return Ok(());
        }
        entries.sort();
        let tree = gix::objs::Tree {
            entries: entries
                .iter()
                .map(|(n, oid)| gix::objs::tree::Entry {
                    mode: gix::objs::tree::EntryKind::Blob.into(),
                    filename: n.as_str().into(),
                    oid: *oid,
                })
                .collect(),
        };
        let mut bytes = Vec::new();
        gix::objs::WriteTo::write_to(&tree, &mut bytes)
            .map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
        let tree = self.write_direct(Kind::Tree, &bytes)?;
        let sig = self.signature(time);
        let commit = gix::objs::Commit {
            tree,
            parents: tip.into_iter().chain(other).collect(),
            author: sig.clone(),
            committer: sig,
            encoding: None,
            message: format!(
                "full artifacts of {id}\n\n{}: {id}\n",
                refs::TRAILER_SESSION
            )
            .into(),
            extra_headers: Vec::new(),
        };
        let mut bytes = Vec::new();
        gix::objs::WriteTo::write_to(&commit, &mut bytes)
            .map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
        let commit = self.write_direct(Kind::Commit, &bytes)?;
        let expected = match tip {
            Some(t) => PreviousValue::MustExistAndMatch(Target::Object(t)),
            None => PreviousValue::MustNotExist,
        };
        self.repo
            .reference(
                name.as_str(),
                commit,
                expected,
                "git session: full artifacts",
            )
            .map_err(git)?;
        Ok(())
    }

    /// Returns the sessions whose full artifacts may hold those of `id`:
    /// itself, then the sessions it was forked or diverged from.
    fn artifact_sources(&self, id: &SessionId) -> Vec<SessionId> {
        let mut out = vec![id.clone()];
        while out.len() < 64 {
            let last = out.last().expect("one");
            let Ok(tip) = self.existing_tip(last) else {
                break;
            };
            let Ok(h) = self.stored_header_at(last, tip) else {
                break;
            };
            let parent = h.lineage.map(|l| l.parent_session).or_else(|| {
                h.extra
                    .get("diverged_from")
                    .and_then(|v| v.as_str())
                    .and_then(|s| SessionId::new(s).ok())
            });
            match parent {
                Some(p) if !out.contains(&p) => out.push(p),
                _ => break,
            }
        }
        out
    }

    /// Reads full blob `blob` claimed to be artifact `line` of session
    /// `id`: its size from the object header first (never inflating more
    /// than the head declares, within `session.maxArtifactSize`), then its
    /// bytes, opened in an encrypted session, must be `line.size` long and
    /// hash to `line.sha256`.
    /// Without an identity for an encrypted session, only the sealed
    /// blob's structure and declared size can be checked: `Ok(None)`,
    /// unless `need` (the caller reads the bytes).
    fn checked_full(
        &self,
        id: &SessionId,
        blob: ObjectId,
        line: &HeadLine,
        sealed: bool,
        need: bool,
    ) -> StoreResult<Option<Vec<u8>>> {
        let what = format!("full artifact sha256:{} (object {blob})", line.sha256);
        let refuse = |message: String| StoreError::Corrupt {
            id: id.clone(),
            message,
        };
        if line.size > self.limits.artifact {
            return Err(StoreError::TooLarge {
                what: format!("session {id}: {what}"),
                size: line.size,
                limit: self.limits.artifact,
                setting: "session.maxArtifactSize".into(),
            });
        }
        let header = self
            .repo
            .find_header(blob)
            .map_err(|e| refuse(format!("{what} cannot be read: {e}")))?;
        if header.kind() != Kind::Blob {
            return Err(refuse(format!("{what} is a {}, not a blob", header.kind())));
        }
        // A sealed blob is its plaintext compressed and encrypted: at most
        // a little longer (age adds 16 bytes per 64 KiB, plus its header).
        let most = if sealed {
            line.size + line.size / 1024 + SEAL_SLACK
        } else {
            line.size
        };
        if header.size() > most || (!sealed && header.size() != line.size) {
            return Err(refuse(format!(
                "{what} is {} bytes, its head says the artifact is {}: refused unread",
                header.size(),
                line.size
            )));
        }
        let data = self
            .repo
            .find_blob(blob)
            .map_err(|e| refuse(format!("{what} cannot be read: {e}")))?
            .detach()
            .data;
        let data = if sealed {
            match self
                .keys
                .open_blob(id, &what, &data, line.size, "session.maxArtifactSize")
            {
                Ok(plain) => plain,
                Err(StoreError::Sealed { .. }) if !need => {
                    let (clear, _) =
                        crypt::unframe(&data).map_err(|m| refuse(format!("{what}: {m}")))?;
                    if clear.size != line.size {
                        return Err(refuse(format!(
                            "{what} says it holds {} bytes, its head says {}",
                            clear.size, line.size
                        )));
                    }
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        } else {
            data
        };
        if data.len() as u64 != line.size || ArtifactId::of(&data).hex() != line.sha256 {
            return Err(refuse(format!(
                "{what} does not match its head: it is not the artifact the session names"
            )));
        }
        Ok(Some(data))
    }

    /// Returns the full bytes of the artifact whose head is `head` in
    /// session `id`, from the full artifacts here; an error saying what to
    /// run when only the head is here.
    pub(crate) fn full_artifact(&self, id: &SessionId, head: &[u8]) -> StoreResult<Vec<u8>> {
        let (line, first) = parse_head(head).map_err(|message| StoreError::Corrupt {
            id: id.clone(),
            message,
        })?;
        // An encrypted session's head holds its first bytes sealed.
        let sealed = crypt::is_sealed(first);
        for source in self.artifact_sources(id) {
            let Some((_, entries)) = self.full_artifacts(&refs::artifacts_ref(&source))? else {
                continue;
            };
            if let Some((_, blob)) = entries.iter().find(|(n, _)| *n == line.sha256) {
                return Ok(self
                    .checked_full(id, *blob, &line, sealed, true)?
                    .expect("read when needed"));
            }
        }
        Err(StoreError::HeadOnly {
            id: id.clone(),
            artifact: format!("sha256:{}", line.sha256),
            size: line.size,
        })
    }

    /// Returns the heads of session `id` at its tip: artifact, head blob
    /// and clear line.
    pub fn artifact_heads(&self, id: &SessionId) -> StoreResult<Vec<(ArtifactId, HeadLine, bool)>> {
        let mut out = Vec::new();
        for (art, blob) in self.artifacts(id)? {
            let size = self.repo.find_header(blob).map_err(git)?.size();
            if size > (HEAD_BYTES as u64) + SEAL_SLACK + 1024 {
                continue;
            }
            let data = self.blob(blob)?;
            if is_head(&data) {
                let (line, first) = parse_head(&data).map_err(|message| StoreError::Corrupt {
                    id: id.clone(),
                    message: format!("artifact {art}: {message}"),
                })?;
                let sealed = crypt::is_sealed(first);
                out.push((art, line, sealed));
            }
        }
        Ok(out)
    }

    /// Fetches `refs/session-artifacts/<id>` of `remote` into
    /// `refs/remotes/<remote>/session-artifacts/<id>`, checks every full
    /// blob a head of the session names, and adopts those that match into
    /// the local `refs/session-artifacts/<id>`.
    pub fn fetch_artifacts(
        &self,
        remote: &str,
        id: &SessionId,
        time: i64,
    ) -> StoreResult<ArtifactsFetched> {
        let heads = self.artifact_heads(id)?;
        let mut report = ArtifactsFetched::default();
        let mut wanted = Vec::new();
        for (art, line, sealed) in heads {
            let here = self.full_artifact_blob(id, &line);
            if here {
                report.present += 1;
            } else {
                wanted.push((art, line, sealed));
            }
        }
        // With nothing wanted, the remote's ref still matters when this
        // clone has one: the two may have diverged (each captured new
        // artifacts), and merging them is what lets the next push through.
        let local = self.full_artifacts(&refs::artifacts_ref(id))?;
        if wanted.is_empty() && local.is_none() {
            return Ok(report);
        }
        let tracking = format!(
            "{}{id}",
            refs::tracking_artifacts_prefix(&super::tracking_name(remote))
        );
        let args = vec![
            // Streamed to disk, never inflated whole while received.
            "-c".to_owned(),
            "core.bigFileThreshold=16m".to_owned(),
            "fetch".to_owned(),
            "--quiet".to_owned(),
            "--no-write-fetch-head".to_owned(),
            remote.to_owned(),
            format!("+{}:{tracking}", refs::artifacts_ref(id)),
        ];
        let out = self.run_git_network(&args)?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("couldn't find remote ref") {
                report.missing = wanted.into_iter().map(|(a, _, _)| a).collect();
                return Ok(report);
            }
            return Err(StoreError::Remote(format!(
                "git fetch {remote} {} failed: {}",
                refs::artifacts_ref(id),
                err.trim()
            )));
        }
        let Some(mut r) = self
            .repo
            .try_find_reference(tracking.as_str())
            .map_err(git)?
        else {
            report.missing = wanted.into_iter().map(|(a, _, _)| a).collect();
            return Ok(report);
        };
        let fetched = r.peel_to_id().map_err(git)?.detach();
        let entries = match self.repo.find_header(fetched).map(|h| h.kind()) {
            Ok(Kind::Commit) => self.flat_entries(fetched)?,
            _ => {
                for (art, _, _) in wanted {
                    report
                        .refused
                        .push((art, format!("{tracking} is not a commit")));
                }
                return Ok(report);
            }
        };
        let mut adopt = Vec::new();
        for (art, line, sealed) in wanted {
            let Some((_, blob)) = entries.iter().find(|(n, _)| *n == line.sha256) else {
                report.missing.push(art);
                continue;
            };
            match self.checked_full(id, *blob, &line, sealed, false) {
                Ok(_) => {
                    adopt.push((art.clone(), *blob));
                    report.adopted.push((art, line.size));
                }
                Err(e) => report.refused.push((art, e.to_string())),
            }
        }
        let _lock = super::lock::SessionLock::acquire(&self.state_dir, id)?;
        // The remote's tip joins this clone's history only when every
        // entry of it was checked here: adopted just now, or the same
        // blob under the same name as this clone's.
        let local = self.full_artifacts(&refs::artifacts_ref(id))?;
        let checked = entries.iter().all(|(n, blob)| {
            adopt.iter().any(|(a, b)| a.hex() == n && b == blob)
                || local
                    .as_ref()
                    .is_some_and(|(_, e)| e.iter().any(|(ln, lb)| ln == n && lb == blob))
        });
        let local_tip = local.as_ref().map(|(t, _)| *t);
        let behind = match local_tip {
            Some(t) => t == fetched || self.is_ancestor(fetched, t)?,
            None => false,
        };
        if !checked || behind {
            if !checked && !behind {
                report.unmerged = Some(format!(
                    "{tracking} holds artifacts no head here names or that did not check; run git session fetch first, then fetch --artifacts {id} again"
                ));
            }
            self.add_full_artifacts(id, time, &adopt)?;
            return Ok(report);
        }
        // This clone has nothing the remote lacks: take its tip as it is.
        let ours_in_theirs = local.as_ref().is_none_or(|(t, e)| {
            e.iter().all(|l| entries.contains(l)) && self.is_ancestor(*t, fetched).unwrap_or(false)
        });
        if ours_in_theirs {
            let expected = match local_tip {
                Some(t) => PreviousValue::MustExistAndMatch(Target::Object(t)),
                None => PreviousValue::MustNotExist,
            };
            self.repo
                .reference(
                    refs::artifacts_ref(id).as_str(),
                    fetched,
                    expected,
                    "git session: full artifacts (fetched)",
                )
                .map_err(git)?;
            return Ok(report);
        }
        report.merged = true;
        self.add_full_artifacts_after(id, time, &adopt, Some(fetched))?;
        Ok(report)
    }

    /// Says whether commit `ancestor` is `of` or reachable from it.
    fn is_ancestor(&self, ancestor: ObjectId, of: ObjectId) -> StoreResult<bool> {
        if ancestor == of {
            return Ok(true);
        }
        // Artifact refs grow by one commit per capture or fetch; the walk
        // is bounded all the same (a hostile remote's history is not).
        for info in self.repo.rev_walk([of]).all().map_err(git)?.take(100_000) {
            if info.map_err(git)?.id == ancestor {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Says whether the full blob of head `line` is here (not checked).
    fn full_artifact_blob(&self, id: &SessionId, line: &HeadLine) -> bool {
        self.artifact_sources(id).iter().any(|s| {
            self.full_artifacts(&refs::artifacts_ref(s))
                .ok()
                .flatten()
                .is_some_and(|(_, e)| e.iter().any(|(n, _)| *n == line.sha256))
        })
    }

    /// Pushes `refs/session-artifacts/<id>` to `remote` without force;
    /// returns git's reason when the remote refused it.
    pub fn push_artifacts(&self, remote: &str, id: &SessionId) -> StoreResult<Option<String>> {
        let name = refs::artifacts_ref(id);
        if self
            .repo
            .try_find_reference(name.as_str())
            .map_err(git)?
            .is_none()
        {
            return Err(StoreError::Refused(format!(
                "session {id} has no full artifacts here ({name}): only sessions captured with session.syncArtifacts=head keep them apart"
            )));
        }
        let out = self.run_git_network(&[
            "push".to_owned(),
            "--porcelain".to_owned(),
            remote.to_owned(),
            format!("{name}:{name}"),
        ])?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if let Some(l) = stdout.lines().find(|l| l.starts_with('!')) {
            return Ok(Some(l.split('\t').nth(2).unwrap_or("rejected").to_owned()));
        }
        if !out.status.success() {
            return Err(StoreError::Remote(format!(
                "git push {remote} {name} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_heads_are_refused_with_the_reason() {
        assert!(parse_head(b"plain bytes").is_err());
        let mut long = HEAD_MAGIC.to_vec();
        long.extend(std::iter::repeat_n(b'x', 5000));
        assert!(parse_head(&long).unwrap_err().contains("too long"));
        let mut bad = HEAD_MAGIC.to_vec();
        bad.extend_from_slice(b"{\"size\":1,\"sha256\":\"../../etc\"}\nX");
        assert!(parse_head(&bad).unwrap_err().contains("SHA-256"));
        let mut good = HEAD_MAGIC.to_vec();
        good.extend_from_slice(
            format!("{{\"size\":9,\"sha256\":\"{}\"}}\nHEAD", "a".repeat(64)).as_bytes(),
        );
        let (line, rest) = parse_head(&good).unwrap();
        assert_eq!((line.size, rest), (9, &b"HEAD"[..]));
        assert_eq!(human_size(52_428_800), "52.4 MB");
    }
}
