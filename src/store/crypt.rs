//! The payload codec of encrypted sessions: the one seam where what the
//! store writes is sealed and what it reads is opened (docs/FORMAT.md,
//! "Encrypted sessions"). Plain sessions never pass through here.
//!
//! A sealed blob (chunk or artifact) is one clear line, then the age
//! ciphertext:
//!
//! ```text
//! git-session-sealed/1 {"first":0,"count":100,"prev":null,"last":"sha256:…","size":81234,"sha256":"<hex>"}\n
//! <age binary ciphertext of zstd(plaintext)>
//! ```
//!
//! `size` is the plaintext length (checked against the limit before
//! inflating), `sha256` the SHA-256 of the ciphertext bytes (checked
//! without any identity); a chunk's `first`/`count`/`prev`/`last` carry the
//! hash chain across chunks so `verify` checks it without decrypting.
//! The header keeps `format`, `id`, `agent`, `created`, `lineage` and
//! `spawned_by` in clear; everything else is sealed into its `sealed`
//! member (base64 of a sealed blob as above).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use git_session_schema::{SEALED_FORMAT, SessionHeader, SessionId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest as _;

use crate::security::{Identities, OpenError, Recipients};

use super::{StoreError, StoreResult};

/// What starts every sealed blob.
pub const SEALED_MAGIC: &[u8] = b"git-session-sealed/1 ";

/// The header member holding the sealed fields.
pub const SEALED_MEMBER: &str = "sealed";

/// Header members that stay clear in an encrypted session.
const CLEAR_MEMBERS: [&str; 7] = [
    "format",
    "id",
    "agent",
    "created",
    "lineage",
    "spawned_by",
    "diverged_from",
];

/// Where the keys come from: set by the caller that opened the store
/// (`git config session.recipients` / `session.recipientsFile` /
/// `session.identity`, home-expanded); parsed on first use, so a bad key
/// only fails the commands that need it.
#[derive(Clone, Debug, Default)]
pub struct KeyConfig {
    /// Recipients given inline (`session.recipients`, one per value).
    pub recipients: Vec<String>,
    /// Recipients files (`session.recipientsFile`).
    pub recipient_files: Vec<PathBuf>,
    /// Identity files (`session.identity`): age identity files or
    /// unencrypted OpenSSH private keys.
    pub identities: Vec<PathBuf>,
}

/// Holds the parsed keys of one store.
#[derive(Clone, Default)]
pub(crate) struct Keys {
    config: KeyConfig,
    recipients: OnceLock<Result<Option<Arc<Recipients>>, String>>,
    identities: OnceLock<Result<Option<Arc<Identities>>, String>>,
}

impl Keys {
    pub(crate) fn new(config: KeyConfig) -> Keys {
        Keys {
            config,
            ..Keys::default()
        }
    }

    /// Says whether new sessions are created encrypted.
    pub(crate) fn encrypts(&self) -> bool {
        !self.config.recipients.is_empty() || !self.config.recipient_files.is_empty()
    }

    /// Returns the recipients new batches are sealed to, or `None` when
    /// none are configured.
    pub(crate) fn recipients(&self) -> StoreResult<Option<Arc<Recipients>>> {
        self.recipients
            .get_or_init(|| {
                if !self.encrypts() {
                    return Ok(None);
                }
                let mut files = Vec::new();
                for path in &self.config.recipient_files {
                    let text = std::fs::read_to_string(path).map_err(|e| {
                        format!(
                            "session.recipientsFile {}: {e}; fix the path with git config session.recipientsFile",
                            path.display()
                        )
                    })?;
                    files.push((path.display().to_string(), text));
                }
                let items = self
                    .config
                    .recipients
                    .iter()
                    .map(|r| ("git config session.recipients", r.as_str(), false))
                    .chain(files.iter().map(|(p, t)| (p.as_str(), t.as_str(), true)));
                Recipients::parse(items).map(|r| Some(Arc::new(r)))
            })
            .clone()
            .map_err(StoreError::Refused)
    }

    /// Returns the identities that open sealed data, or `None` when
    /// `session.identity` is not set.
    pub(crate) fn identities(&self) -> StoreResult<Option<Arc<Identities>>> {
        self.identities
            .get_or_init(|| {
                let mut all: Option<Identities> = None;
                for path in &self.config.identities {
                    let name = path.display().to_string();
                    let bytes = std::fs::read(path).map_err(|e| {
                        format!("session.identity {name}: {e}; fix the path with git config session.identity")
                    })?;
                    let ids = Identities::parse_file(&bytes, &name)
                        .map_err(|e| format!("session.identity {e}"))?;
                    match &mut all {
                        Some(a) => a.extend(ids),
                        None => all = Some(ids),
                    }
                }
                Ok(all.map(Arc::new))
            })
            .clone()
            .map_err(StoreError::Refused)
    }

    fn require_recipients(&self, id: &SessionId) -> StoreResult<Arc<Recipients>> {
        self.recipients()?.ok_or_else(|| {
            StoreError::Refused(format!(
                "session {id} is encrypted and no recipients are configured here; set git config session.recipients (an age1… or ssh-ed25519 public key, once per recipient) to write to it"
            ))
        })
    }

    fn open(
        &self,
        id: &SessionId,
        what: &str,
        sealed: &[u8],
        size: u64,
        limit: u64,
        setting: &str,
    ) -> StoreResult<Vec<u8>> {
        let Some(ids) = self.identities()? else {
            return Err(StoreError::Sealed {
                id: id.clone(),
                message: format!(
                    "{what} is encrypted and no identity is configured: set git config session.identity to an age identity file or SSH private key of one of its recipients"
                ),
            });
        };
        ids.open(sealed, size, limit).map_err(|e| match e {
            OpenError::NotForUs => StoreError::Sealed {
                id: id.clone(),
                message: format!(
                    "{what} is encrypted and none of the keys in session.identity ({}) is one of its recipients; ask a recipient to add your public key to session.recipients and re-encrypt",
                    self.identity_names()
                ),
            },
            OpenError::TooLarge { size, limit } => StoreError::TooLarge {
                what: format!("session {id}: {what} (decrypted)"),
                size,
                limit,
                setting: setting.to_owned(),
            },
            e @ OpenError::Tampered(_) => StoreError::Corrupt {
                id: id.clone(),
                message: format!("{what}: {e}; refused"),
            },
        })
    }

    fn identity_names(&self) -> String {
        self.config
            .identities
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Seals a chunk of event lines (`count` events from `first`, chained
    /// from `prev` to `last`).
    pub(crate) fn seal_chunk(
        &self,
        id: &SessionId,
        plain: &[u8],
        first: u64,
        count: u64,
        prev: Option<&str>,
        last: Option<&str>,
    ) -> StoreResult<Vec<u8>> {
        let sealed = self
            .require_recipients(id)?
            .seal(plain)
            .map_err(|e| StoreError::Refused(format!("cannot encrypt: {e}")))?;
        let clear = SealLine {
            first: Some(first),
            count: Some(count),
            prev: prev.map(str::to_owned),
            last: last.map(str::to_owned),
            size: plain.len() as u64,
            sha256: hex(&sha2::Sha256::digest(&sealed)),
        };
        Ok(frame(&clear, &sealed))
    }

    /// Seals an artifact's bytes.
    pub(crate) fn seal_artifact(&self, id: &SessionId, plain: &[u8]) -> StoreResult<Vec<u8>> {
        let sealed = self
            .require_recipients(id)?
            .seal(plain)
            .map_err(|e| StoreError::Refused(format!("cannot encrypt: {e}")))?;
        let clear = SealLine {
            first: None,
            count: None,
            prev: None,
            last: None,
            size: plain.len() as u64,
            sha256: hex(&sha2::Sha256::digest(&sealed)),
        };
        Ok(frame(&clear, &sealed))
    }

    /// Opens a sealed blob (checked structurally first: see [`unframe`]).
    pub(crate) fn open_blob(
        &self,
        id: &SessionId,
        what: &str,
        blob: &[u8],
        limit: u64,
        setting: &str,
    ) -> StoreResult<Vec<u8>> {
        let (clear, sealed) = unframe(blob).map_err(|message| StoreError::Corrupt {
            id: id.clone(),
            message: format!("{what}: {message}"),
        })?;
        self.open(id, what, sealed, clear.size, limit, setting)
    }

    /// Returns the bytes of `header.json` for `header`: a plain header as
    /// is; an encrypted one with its clear members and `sealed`, kept
    /// verbatim when the header already carries it (a header read without
    /// opening it, as reconcile copies), else sealed now from the other
    /// members.
    pub(crate) fn header_bytes(&self, header: &SessionHeader) -> StoreResult<Vec<u8>> {
        if header.format != SEALED_FORMAT {
            return Ok(header.encode());
        }
        let Value::Object(all) = serde_json::to_value(header).expect("a header serializes") else {
            unreachable!("a header is an object")
        };
        let mut clear = serde_json::Map::new();
        let mut hidden = serde_json::Map::new();
        let mut kept = None;
        for (k, v) in all {
            if k == SEALED_MEMBER {
                kept = Some(v);
            } else if CLEAR_MEMBERS.contains(&k.as_str()) {
                clear.insert(k, v);
            } else {
                hidden.insert(k, v);
            }
        }
        let sealed = match kept {
            Some(v) if hidden.is_empty() => v,
            _ => {
                let plain = serde_json::to_vec(&hidden).expect("json serializes");
                let sealed = self.seal_artifact(&header.id, &plain)?;
                Value::String(base64::engine::general_purpose::STANDARD.encode(sealed))
            }
        };
        clear.insert(SEALED_MEMBER.into(), sealed);
        let mut out = serde_json::to_vec_pretty(&Value::Object(clear)).expect("json serializes");
        out.push(b'\n');
        Ok(out)
    }

    /// Fills an encrypted header's sealed members in place when an
    /// identity here opens them (removing `sealed`); without one the
    /// header stays as stored: clear members and `sealed`.
    pub(crate) fn open_header(&self, header: &mut SessionHeader, limit: u64) -> StoreResult<()> {
        if header.format != SEALED_FORMAT {
            return Ok(());
        }
        let id = header.id.clone();
        let Some(Value::String(text)) = header.extra.get(SEALED_MEMBER) else {
            return Err(StoreError::Corrupt {
                id,
                message: "header.json of an encrypted session has no \"sealed\" member".into(),
            });
        };
        if self.identities()?.is_none() {
            return Ok(());
        }
        let sealed = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| StoreError::Corrupt {
                id: id.clone(),
                message: format!("header.json: \"sealed\" is not base64: {e}"),
            })?;
        let plain = match self.open_blob(&id, "header.json", &sealed, limit, "fixed") {
            Err(StoreError::Sealed { .. }) => return Ok(()),
            other => other?,
        };
        let hidden: serde_json::Map<String, Value> =
            serde_json::from_slice(&plain).map_err(|e| StoreError::Corrupt {
                id: id.clone(),
                message: format!("header.json: the sealed members do not parse: {e}"),
            })?;
        let mut all = match serde_json::to_value(&*header).expect("a header serializes") {
            Value::Object(m) => m,
            _ => unreachable!("a header is an object"),
        };
        all.remove(SEALED_MEMBER);
        for (k, v) in hidden {
            if !CLEAR_MEMBERS.contains(&k.as_str()) {
                all.insert(k, v);
            }
        }
        *header = serde_json::from_value(Value::Object(all)).map_err(|e| StoreError::Corrupt {
            id: id.clone(),
            message: format!("header.json: the sealed members do not parse: {e}"),
        })?;
        Ok(())
    }
}

/// The clear line of a sealed blob.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SealLine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<String>,
    pub size: u64,
    pub sha256: String,
}

fn frame(clear: &SealLine, sealed: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(sealed.len() + 256);
    out.extend_from_slice(SEALED_MAGIC);
    serde_json::to_writer(&mut out, clear).expect("json serializes");
    out.push(b'\n');
    out.extend_from_slice(sealed);
    out
}

/// Says whether a stored blob is sealed.
pub(crate) fn is_sealed(blob: &[u8]) -> bool {
    blob.starts_with(SEALED_MAGIC)
}

/// Splits a sealed blob into its clear line and ciphertext, checking the
/// ciphertext's SHA-256 (no identity needed).
pub(crate) fn unframe(blob: &[u8]) -> Result<(SealLine, &[u8]), String> {
    let rest = blob.strip_prefix(SEALED_MAGIC).ok_or("not a sealed blob")?;
    let nl = rest
        .iter()
        .take(4096)
        .position(|&b| b == b'\n')
        .ok_or("the sealed blob's clear line is missing or too long")?;
    let clear: SealLine = serde_json::from_slice(&rest[..nl])
        .map_err(|e| format!("the sealed blob's clear line does not parse: {e}"))?;
    let sealed = &rest[nl + 1..];
    if hex(&sha2::Sha256::digest(sealed)) != clear.sha256 {
        return Err("the ciphertext does not match its SHA-256: it was changed or damaged".into());
    }
    Ok((clear, sealed))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_sealed_blobs_are_refused_with_the_reason() {
        assert!(unframe(b"{\"seq\":0}\n").is_err());
        let mut long = SEALED_MAGIC.to_vec();
        long.extend(std::iter::repeat_n(b'x', 10_000));
        assert!(unframe(&long).unwrap_err().contains("too long"));
        let mut bad = SEALED_MAGIC.to_vec();
        bad.extend_from_slice(b"not json\nCIPHER");
        assert!(unframe(&bad).unwrap_err().contains("does not parse"));
        let clear = SealLine {
            first: Some(0),
            count: Some(1),
            prev: None,
            last: Some("sha256:00".into()),
            size: 5,
            sha256: hex(&sha2::Sha256::digest(b"CIPHER")),
        };
        let good = frame(&clear, b"CIPHER");
        assert_eq!(unframe(&good).unwrap(), (clear.clone(), &b"CIPHER"[..]));
        let mut changed = good.clone();
        *changed.last_mut().unwrap() ^= 1;
        assert!(unframe(&changed).unwrap_err().contains("SHA-256"));
    }

    #[test]
    fn a_stored_sealed_header_is_copied_verbatim_without_keys() {
        // No recipients here: a header carrying "sealed" and no hidden
        // members is written as is (reconcile's fork), anything else needs
        // recipients.
        let keys = Keys::default();
        let mut h = SessionHeader::new(
            SessionId::new("s1").unwrap(),
            git_session_schema::Agent::parse("claude"),
            "2026-01-01T00:00:00Z",
        );
        h.format = SEALED_FORMAT;
        h.extra
            .insert(SEALED_MEMBER.into(), Value::String("QUJD".into()));
        let bytes = keys.header_bytes(&h).unwrap();
        let back: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back["sealed"], "QUJD");
        h.title = Some("secret title".into());
        let err = keys.header_bytes(&h).unwrap_err().to_string();
        assert!(err.contains("session.recipients"), "{err}");
    }
}
