//! Ref names, tree paths and trailer keys: every name the store writes into
//! git lives here, so the on-disk layout is defined in one place
//! (`docs/FORMAT.md` describes the same names for humans).

use git_session_schema::SessionId;

/// Every session is one ref under this prefix.
pub const SESSIONS_PREFIX: &str = "refs/sessions/";

/// Notes ref holding signed handoff receipts, on session commits only.
pub const RECEIPTS_NOTES_REF: &str = "refs/notes/git-session/receipts";

/// A removed session leaves a tombstone ref here (`<prefix><id>`): a
/// commit with an empty tree whose trailers name the session and its last
/// tip. Tombstones are pushed and fetched like sessions, and reconcile
/// never creates or updates a session that has one.
pub const TOMBSTONES_PREFIX: &str = "refs/session-tombstones/";

/// Each session's metadata (title, tags, notes, pinned, hidden, task) is
/// one ref under this prefix, one commit per change (see `store/meta.rs`).
pub const META_PREFIX: &str = "refs/session-meta/";
/// In a metadata commit: the change it makes.
pub const META_CHANGE_PATH: &str = "change.json";
/// In a metadata commit: the state after it.
pub const META_STATE_PATH: &str = "meta.json";

/// The full blobs of a session's lazy artifacts (`session.syncArtifacts
/// head`): one ref per session, left out of the session refspecs of push
/// and fetch (see `store/artifacts.rs`).
pub const ARTIFACTS_PREFIX: &str = "refs/session-artifacts/";

/// Returns the full-artifacts ref of a session.
pub fn artifacts_ref(id: &SessionId) -> String {
    format!("{ARTIFACTS_PREFIX}{id}")
}

/// Where `fetch --artifacts` puts a remote's full-artifacts refs before
/// their blobs are checked.
pub fn tracking_artifacts_prefix(remote: &str) -> String {
    format!("refs/remotes/{remote}/session-artifacts/")
}

/// Returns the metadata ref of a session.
pub fn meta_ref(id: &SessionId) -> String {
    format!("{META_PREFIX}{id}")
}

/// Where fetched metadata refs of `remote` land before reconciliation.
pub fn tracking_meta_prefix(remote: &str) -> String {
    format!("refs/remotes/{remote}/session-meta/")
}

/// Trailer on a tombstone: the session's tip when it was removed.
pub const TRAILER_REMOVED_TIP: &str = "Removed-Tip";

/// Trailer on the root commit of a history `purge` wrote: a tip of a
/// history it replaces (one line per purge, oldest first). Reconcile
/// refuses any fetched history related to one of them.
pub const TRAILER_PURGED_TIP: &str = "Purged-Tip";

/// Trailer on the root commit of a history `purge` wrote: one batch of the
/// replaced history, `A..B <code commit> after-commit|before-commit|-`, so
/// `which` still attributes its records to the commit they led to.
pub const TRAILER_PURGED_BATCH: &str = "Purged-Batch";
/// Returns the tombstone ref of a session.
pub fn tombstone_ref(id: &SessionId) -> String {
    format!("{TOMBSTONES_PREFIX}{id}")
}

/// Where fetched tombstones of `remote` land.
pub fn tracking_tombstones_prefix(remote: &str) -> String {
    format!("refs/remotes/{remote}/session-tombstones/")
}

/// Where fetched session refs of `remote` land before reconciliation.
pub fn tracking_prefix(remote: &str) -> String {
    format!("refs/remotes/{remote}/sessions/")
}

/// Where fetched git-session notes of `remote` land.
pub fn tracking_notes_prefix(remote: &str) -> String {
    format!("refs/notes/remotes/{remote}/git-session/")
}

/// Fetch refspecs for sessions and receipts of `remote` (globs only: an
/// exact refspec for a ref the remote lacks makes every `git fetch` fail).
pub fn fetch_refspecs(remote: &str) -> [String; 4] {
    [
        format!("+{SESSIONS_PREFIX}*:{}*", tracking_prefix(remote)),
        format!(
            "+{TOMBSTONES_PREFIX}*:{}*",
            tracking_tombstones_prefix(remote)
        ),
        format!(
            "+refs/notes/git-session/*:{}*",
            tracking_notes_prefix(remote)
        ),
        format!("+{META_PREFIX}*:{}*", tracking_meta_prefix(remote)),
    ]
}

/// Scheme of a session URI, `session://<org>/<project>/<task>/<id>`
/// (`-` for a session in no task); any command that takes an id takes one.
pub const URI_SCHEME: &str = "session://";

/// The immutable session header inside each session tree.
pub const HEADER_PATH: &str = "header.json";
/// Directory of event chunks inside each session tree.
pub const EVENTS_DIR: &str = "events";
/// Directory of artifacts inside each session tree.
pub const ARTIFACTS_DIR: &str = "artifacts";

/// Local, rebuildable state under the git common dir; never pushed.
pub const STATE_DIR: &str = "session";
/// Under the state directory: records of running network git children
/// (see `store/child.rs`).
pub const CHILDREN_DIR: &str = "children";

/// Under [`STATE_DIR`]: the last tip `verify` found good, per session, so
/// a later verify reports a rollback against what this clone saw.
pub const VERIFIED_DIR: &str = "verified";

/// Trailer naming the session a commit belongs to.
pub const TRAILER_SESSION: &str = "Session-Id";
/// Trailer naming the agent the batch came from.
pub const TRAILER_AGENT: &str = "Session-Agent";
/// Trailer with the batch's seq range, `first..last` inclusive.
pub const TRAILER_SEQ: &str = "Session-Seq";
/// Trailer with the session's event count after this commit.
pub const TRAILER_EVENTS: &str = "Session-Events";
/// Trailer with the session's chunk count after this commit.
pub const TRAILER_CHUNKS: &str = "Session-Chunks";
/// Trailer with the checksum of the last event after this commit.
pub const TRAILER_CHECKSUM: &str = "Session-Checksum";
/// Trailer with the code commit that was `HEAD` when the batch was captured.
pub const TRAILER_CODE_COMMIT: &str = "Code-Commit";
/// Trailer saying when, relative to `Code-Commit`, the batch's records were
/// made: `after-commit` (captured by the post-commit hook: they led to that
/// commit) or `before-commit` (captured while it was HEAD: they lead to the
/// next commit). Batches from before this trailer have none.
pub const TRAILER_CAPTURED: &str = "Captured";
/// Trailer on a fork's first commit: the parent session.
pub const TRAILER_FORK_OF: &str = "Fork-Of";
/// Trailer on a fork's first commit: the last inherited seq.
pub const TRAILER_FORK_SEQ: &str = "Fork-Seq";

/// Returns the full ref name of a session.
pub fn session_ref(id: &SessionId) -> String {
    format!("{SESSIONS_PREFIX}{id}")
}

/// Returns the tree path of chunk number `index`, whose first event is `first_seq`.
///
/// Chunks fan out by index over three levels of at most 256 entries, so the
/// trees an append rewrites stay small however long the session grows; the
/// first seq in the file name makes `git show` listings readable and lets a
/// range read pick chunks without opening them.
pub fn chunk_path(index: u64, first_seq: u64) -> String {
    format!(
        "{EVENTS_DIR}/{:02x}/{:02x}/{:02x}-{first_seq}.jsonl",
        index >> 16,
        (index >> 8) & 0xff,
        index & 0xff
    )
}

/// Parses the parts of a chunk path below `events/` back into (index, first seq).
pub fn parse_chunk_path(l1: &str, l2: &str, file: &str) -> Option<(u64, u64)> {
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let (l3, rest) = file.split_once('-')?;
    let first_seq = rest.strip_suffix(".jsonl")?.parse().ok()?;
    let (a, b, c) = (hex(l1)?, hex(l2)?, hex(l3)?);
    (b < 256 && c < 256 && l2.len() == 2 && l3.len() == 2)
        .then_some(((a << 16) | (b << 8) | c, first_seq))
}

/// Returns the tree path of an artifact, fanned out by its first two hex digits.
pub fn artifact_path(hex: &str) -> String {
    format!("{ARTIFACTS_DIR}/{}/{hex}", &hex[..2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_paths_round_trip() {
        for (i, s) in [
            (0, 0),
            (255, 9),
            (256, 10),
            (0x12_3456, 77),
            (0x1_00_00_00, 5),
        ] {
            let path = chunk_path(i, s);
            let parts: Vec<&str> = path.split('/').collect();
            assert_eq!(parse_chunk_path(parts[1], parts[2], parts[3]), Some((i, s)));
        }
        assert_eq!(chunk_path(0x0102, 42), "events/00/01/02-42.jsonl");
    }
}
