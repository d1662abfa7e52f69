//! Artifacts: large blobs (images, long tool output) kept beside the log and
//! referenced from events by content hash.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// Names an artifact by the SHA-256 of its bytes, written `sha256:<hex>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArtifactId(String);

impl ArtifactId {
    /// The prefix an event's `refs` entry uses to point at an artifact.
    pub const REF_PREFIX: &'static str = "artifact:";

    /// Returns the id of `bytes`.
    pub fn of(bytes: &[u8]) -> ArtifactId {
        let mut hex = String::with_capacity(64);
        crate::event::push_hex(&mut hex, &Sha256::digest(bytes));
        ArtifactId(hex)
    }

    /// Parses `sha256:<64 hex>` (lowercase), the form used in files and refs.
    pub fn parse(text: &str) -> Option<ArtifactId> {
        let hex = text.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| ArtifactId(hex.to_owned()))
    }

    /// Returns the artifact named by an event ref like `artifact:sha256:<hex>`.
    pub fn from_ref(reference: &str) -> Option<ArtifactId> {
        ArtifactId::parse(reference.strip_prefix(Self::REF_PREFIX)?)
    }

    /// Returns the 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0
    }

    /// Returns the event ref that points at this artifact.
    pub fn to_ref(&self) -> String {
        format!("{}{self}", Self::REF_PREFIX)
    }
}

impl fmt::Display for ArtifactId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.0)
    }
}

impl Serialize for ArtifactId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ArtifactId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        ArtifactId::parse(&text).ok_or_else(|| {
            serde::de::Error::custom("artifact id must be sha256:<64 lowercase hex>")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_round_trips_through_refs() {
        let id = ArtifactId::of(b"hello");
        assert_eq!(
            id.hex(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(ArtifactId::from_ref(&id.to_ref()), Some(id));
        assert_eq!(ArtifactId::parse("sha256:XYZ"), None);
    }
}
