//! `fork`: start a new session from a point of an existing one.

use git_session_schema::SessionId;
use gix::ObjectId;

use super::OpResult;
use super::canonical::commit_info;
use crate::clock::Clock;
use crate::store::Store;

/// Reports a fork.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkSummary {
    /// The new session.
    pub id: SessionId,
    /// The last inherited seq.
    pub at: u64,
    /// The parent's commit the fork starts from.
    pub parent_commit: ObjectId,
    /// The fork's first commit.
    pub commit: ObjectId,
}

/// Forks `id` after seq `at` (default: its last event) into `new_id`
/// (default: a fresh time-ordered id).
pub fn fork(
    store: &Store,
    clock: &Clock,
    id: &SessionId,
    at: Option<u64>,
    new_id: Option<SessionId>,
) -> OpResult<ForkSummary> {
    let stat = store.stat(id)?;
    let at = at.unwrap_or(stat.events.saturating_sub(1));
    let new_id = match new_id {
        Some(n) => {
            // An id that is a prefix of another session's would take over
            // the prefix users type for that one (an exact id wins).
            if let Some(other) = store
                .session_ids()?
                .into_iter()
                .find(|o| o != &n && o.as_str().starts_with(n.as_str()))
            {
                return Err(super::OpError::Conflict {
                    message: format!(
                        "the id {n} is a prefix of session {other}: `{n}` would stop naming it; nothing was written"
                    ),
                    hint: Some("choose an id that no other session starts with".into()),
                });
            }
            n
        }
        None => new_session_id(clock),
    };
    let info = commit_info(store, clock);
    let (header, commit) = store.fork(id, at, &new_id, &clock.now_rfc3339(), &info)?;
    let parent_commit = header
        .lineage
        .as_ref()
        .and_then(|l| ObjectId::from_hex(l.parent_commit.as_bytes()).ok())
        .expect("the store sets the lineage of a fork it just wrote");
    Ok(ForkSummary {
        id: new_id,
        at,
        parent_commit,
        commit,
    })
}

/// Returns a new time-ordered session id (UUID v7) stamped with the clock.
pub fn new_session_id(clock: &Clock) -> SessionId {
    let now = clock.now();
    let ts = uuid::Timestamp::from_unix(
        uuid::NoContext,
        now.as_second().max(0) as u64,
        now.subsec_nanosecond().max(0) as u32,
    );
    SessionId::new(uuid::Uuid::new_v7(ts).to_string()).expect("a uuid is a valid session id")
}
