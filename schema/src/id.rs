//! Session ids: the name of a session's ref, so they must be safe in a ref name.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Identifies one canonical session; `refs/sessions/<id>` is its ref.
///
/// Ids are 1 to 128 characters of ASCII letters, digits, `.`, `_` and `-`,
/// starting with a letter or digit, without `..` and not ending in `.lock`
/// or `.`. That keeps every id a valid, single-component git ref name, so a
/// session ref can never collide with a directory of refs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

/// Says why a string is not a valid session id.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid session id {id:?}: {reason}")]
pub struct IdError {
    /// The rejected text.
    pub id: String,
    /// What rule it broke.
    pub reason: &'static str,
}

impl SessionId {
    /// Longest id accepted.
    pub const MAX_LEN: usize = 128;

    /// Validates `id` and wraps it.
    pub fn new(id: impl Into<String>) -> Result<SessionId, IdError> {
        let id = id.into();
        let fail = |reason| {
            Err(IdError {
                id: id.clone(),
                reason,
            })
        };
        if id.is_empty() || id.len() > Self::MAX_LEN {
            return fail("must be 1 to 128 characters");
        }
        if !id.as_bytes()[0].is_ascii_alphanumeric() {
            return fail("must start with a letter or digit");
        }
        if !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return fail("may only contain ASCII letters, digits, '.', '_' and '-'");
        }
        if id.contains("..") || id.ends_with(".lock") || id.ends_with('.') {
            return fail("must not contain '..' or end in '.lock' or '.'");
        }
        Ok(SessionId(id))
    }

    /// Returns the id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for SessionId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SessionId::new(s)
    }
}

impl Serialize for SessionId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        SessionId::new(text).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for SessionId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SessionId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Session id, also the ref name refs/sessions/<id>.",
            "type": "string",
            "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_uuids_and_rejects_ref_breaking_names() {
        assert!(SessionId::new("0196f1d2-7c1e-7a3b-9a55-3b1d2c4e5f60").is_ok());
        assert!(SessionId::new("sess_8f3a").is_ok());
        for bad in ["", "-x", "a/b", "a..b", "x.lock", "x.", "a b", "ü"] {
            assert!(SessionId::new(bad).is_err(), "{bad:?} accepted");
        }
        assert!(SessionId::new("a".repeat(129)).is_err());
    }
}
