//! Commit messages of capture batches: a subject line and git trailers that
//! make each commit self-describing (`git log refs/sessions/<id>` reads like
//! a capture log) and let the store find the session's state from the tip
//! commit alone, without reading earlier history.

use gix::ObjectId;

use super::refs::*;

/// Holds what a batch commit's trailers say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trailers {
    /// The session the commit belongs to.
    pub session: String,
    /// The agent of the batch.
    pub agent: String,
    /// The batch's seq range (inclusive), `None` for commits that add no events.
    pub seq: Option<(u64, u64)>,
    /// Event count after the commit.
    pub events: u64,
    /// Chunk count after the commit.
    pub chunks: u64,
    /// Checksum of the last event after the commit.
    pub checksum: Option<String>,
    /// The code commit that was HEAD at capture.
    pub code_commit: Option<ObjectId>,
    /// Whether the post-commit hook captured the batch (its records led to
    /// `code_commit`) rather than a capture between commits (they lead to the
    /// commit after it); `None` on batches written before this was recorded.
    pub after_commit: Option<bool>,
    /// For a fork's first commit: the parent session and the last inherited seq.
    pub fork: Option<(String, u64)>,
}

impl Trailers {
    /// Returns the full commit message: `subject`, a blank line, the trailers.
    pub fn to_message(&self, subject: &str) -> String {
        let mut m = format!("{subject}\n\n{TRAILER_SESSION}: {}\n", self.session);
        m += &format!("{TRAILER_AGENT}: {}\n", self.agent);
        if let Some((a, b)) = self.seq {
            m += &format!("{TRAILER_SEQ}: {a}..{b}\n");
        }
        m += &format!("{TRAILER_EVENTS}: {}\n", self.events);
        m += &format!("{TRAILER_CHUNKS}: {}\n", self.chunks);
        if let Some(sum) = &self.checksum {
            m += &format!("{TRAILER_CHECKSUM}: {sum}\n");
        }
        if let Some((parent, seq)) = &self.fork {
            m += &format!("{TRAILER_FORK_OF}: {parent}\n{TRAILER_FORK_SEQ}: {seq}\n");
        }
        if let Some(code) = self.code_commit {
            m += &format!("{TRAILER_CODE_COMMIT}: {code}\n");
            if let Some(after) = self.after_commit {
                let when = if after {
                    "after-commit"
                } else {
                    "before-commit"
                };
                m += &format!("{TRAILER_CAPTURED}: {when}\n");
            }
        }
        m
    }

    /// Parses the trailers of a commit message; `None` if it has no
    /// `Session-Id` trailer (not a session commit) or a malformed one.
    pub fn parse(message: &[u8]) -> Option<Trailers> {
        let text = std::str::from_utf8(message).ok()?;
        let block = text.trim_end().rsplit("\n\n").next()?;
        let mut t = Trailers::default();
        let mut fork_of = None;
        let mut fork_seq = None;
        for line in block.lines() {
            let Some((key, value)) = line.split_once(": ") else {
                continue;
            };
            match key {
                TRAILER_SESSION => t.session = value.to_owned(),
                TRAILER_AGENT => t.agent = value.to_owned(),
                TRAILER_SEQ => {
                    let (a, b) = value.split_once("..")?;
                    t.seq = Some((a.parse().ok()?, b.parse().ok()?));
                }
                TRAILER_EVENTS => t.events = value.parse().ok()?,
                TRAILER_CHUNKS => t.chunks = value.parse().ok()?,
                TRAILER_CHECKSUM => t.checksum = Some(value.to_owned()),
                TRAILER_CODE_COMMIT => t.code_commit = ObjectId::from_hex(value.as_bytes()).ok(),
                TRAILER_CAPTURED => {
                    t.after_commit = match value {
                        "after-commit" => Some(true),
                        "before-commit" => Some(false),
                        _ => None,
                    }
                }
                TRAILER_FORK_OF => fork_of = Some(value.to_owned()),
                TRAILER_FORK_SEQ => fork_seq = value.parse().ok(),
                _ => {}
            }
        }
        t.fork = fork_of.zip(fork_seq);
        (!t.session.is_empty()).then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_round_trips() {
        let t = Trailers {
            session: "s1".into(),
            agent: "some-agent".into(),
            seq: Some((10, 19)),
            events: 20,
            chunks: 2,
            checksum: Some("sha256:ab".into()),
            code_commit: Some(
                ObjectId::from_hex(b"0123456789012345678901234567890123456789").unwrap(),
            ),
            fork: Some(("p".into(), 9)),
            after_commit: Some(false),
        };
        let msg = t.to_message("subject line");
        assert_eq!(Trailers::parse(msg.as_bytes()), Some(t));
        assert_eq!(Trailers::parse(b"just a commit\n\nSigned-off-by: x"), None);
    }
}
