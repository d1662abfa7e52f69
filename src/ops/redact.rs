//! `git session redact --check`: re-scan what is stored with the current
//! rules and say where secrets remain (sessions captured before a rule
//! existed, or with `session.redact=false`). Reads only; the history is
//! append-only and is not rewritten.

use git_session_schema::SessionId;

use super::OpResult;
use crate::security::Redactor;
use crate::store::{Store, StoreError};

/// Where the current rules find secrets in one place of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The session.
    pub session: SessionId,
    /// The event's seq; `None` for the header (title, cwd).
    pub seq: Option<u64>,
    /// Rule ids with how many secrets each found there.
    pub rules: Vec<(String, usize)>,
}

/// Scans the sessions `ids` (header and every event) and returns the hits,
/// in session and seq order. The secrets themselves are never returned.
pub fn check(store: &Store, ids: &[SessionId]) -> OpResult<Vec<Hit>> {
    let redactor = Redactor::shared();
    let mut hits = Vec::new();
    for id in ids {
        let mut header = store.header(id)?;
        let mut counts = std::collections::BTreeMap::new();
        redactor.redact_header_counts(&mut header, &mut counts);
        if !counts.is_empty() {
            hits.push(Hit {
                session: id.clone(),
                seq: None,
                rules: counts.into_iter().map(|(r, n)| (r.to_owned(), n)).collect(),
            });
        }
        for line in store.lines(id, 0, None)? {
            let line = line?;
            let mut event = line.decode().map_err(|e| StoreError::Corrupt {
                id: id.clone(),
                message: format!("seq {}: {e}", line.seq),
            })?;
            // What was redacted when it was stored is not a hit.
            event.extra.remove("redacted");
            let mut counts = std::collections::BTreeMap::new();
            redactor.redact_counts(&mut event, &mut counts);
            if !counts.is_empty() {
                hits.push(Hit {
                    session: id.clone(),
                    seq: Some(line.seq),
                    rules: counts.into_iter().map(|(r, n)| (r.to_owned(), n)).collect(),
                });
            }
        }
    }
    Ok(hits)
}
