//! Encryption at rest with age: parsing recipients and identities from
//! their text, and sealing / opening byte strings. No IO: the store reads
//! the key files and decides what is sealed (`store::crypt`).
//!
//! A sealed payload is `age(zstd(plaintext))`: compressed first, because
//! ciphertext does not compress and git cannot delta it. Recipients are age
//! X25519 (`age1…`) and SSH (`ssh-ed25519 …`, `ssh-rsa …`) public keys;
//! identities are age identity files (`AGE-SECRET-KEY-1…` lines) and
//! unencrypted OpenSSH private keys. Opening is bounded: the declared
//! plaintext size is checked against the caller's limit before anything is
//! inflated, and inflating stops at that size.

use std::io::{Read, Write};
use std::str::FromStr;

/// The zstd level sealed payloads are compressed with (speed over ratio:
/// level 1 is within 2 % of level 3's ratio on 4 MiB chunks).
const ZSTD_LEVEL: i32 = 1;

/// Holds the public keys new payloads are encrypted to.
pub struct Recipients {
    keys: Vec<Box<dyn age::Recipient + Send + Sync>>,
}

impl std::fmt::Debug for Recipients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recipients({})", self.keys.len())
    }
}

/// Parses one recipient: `age1…` or an SSH public key line.
pub fn parse_recipient(text: &str) -> Result<Box<dyn age::Recipient + Send + Sync>, String> {
    let text = text.trim();
    if text.starts_with("age1") {
        return age::x25519::Recipient::from_str(text)
            .map(|r| Box::new(r) as Box<dyn age::Recipient + Send + Sync>)
            .map_err(|e| format!("not an age recipient: {e}"));
    }
    if text.starts_with("ssh-") {
        return age::ssh::Recipient::from_str(text)
            .map(|r| Box::new(r) as Box<dyn age::Recipient + Send + Sync>)
            .map_err(|e| format!("not a supported SSH public key: {e:?}"));
    }
    Err(
        "not a recipient: expected an age public key (age1…) or an SSH public key (ssh-ed25519 …)"
            .into(),
    )
}

impl Recipients {
    /// Builds the recipient set from `(where, text)` pairs: `text` is one
    /// recipient, or with `file` a recipients file (one per line, blank
    /// lines and `#` comments skipped, as `age -R` reads). Errors name
    /// `where` and, for a file, the line.
    pub fn parse<'a>(
        items: impl IntoIterator<Item = (&'a str, &'a str, bool)>,
    ) -> Result<Recipients, String> {
        let mut keys = Vec::new();
        for (place, text, file) in items {
            if file {
                for (n, line) in text.lines().enumerate() {
                    let line = line.trim();
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    keys.push(
                        parse_recipient(line).map_err(|e| format!("{place}:{}: {e}", n + 1))?,
                    );
                }
            } else {
                keys.push(parse_recipient(text).map_err(|e| format!("{place}: {e}"))?);
            }
        }
        if keys.is_empty() {
            return Err("no recipients".into());
        }
        Ok(Recipients { keys })
    }

    /// Returns how many recipients there are.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Says whether there are none (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Seals `plain`: zstd, then age to every recipient.
    pub fn seal(&self, plain: &[u8]) -> Result<Vec<u8>, String> {
        let packed = zstd::bulk::compress(plain, ZSTD_LEVEL).map_err(|e| e.to_string())?;
        let encryptor = age::Encryptor::with_recipients(
            self.keys.iter().map(|k| k.as_ref() as &dyn age::Recipient),
        )
        .map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(packed.len() + 512);
        let mut w = encryptor.wrap_output(&mut out).map_err(|e| e.to_string())?;
        w.write_all(&packed).map_err(|e| e.to_string())?;
        w.finish().map_err(|e| e.to_string())?;
        Ok(out)
    }
}

/// Holds the private keys that open sealed payloads.
pub struct Identities {
    keys: Vec<Box<dyn age::Identity + Send + Sync>>,
}

impl std::fmt::Debug for Identities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identities({})", self.keys.len())
    }
}

/// Says why a sealed payload did not open.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    /// None of the identities is a recipient of the payload.
    #[error("none of the identities is a recipient")]
    NotForUs,
    /// The payload fails authentication or does not parse: it was changed
    /// or damaged after it was written.
    #[error("the ciphertext does not authenticate ({0}): it was changed or damaged")]
    Tampered(String),
    /// The declared plaintext size is over the limit.
    #[error("the plaintext would be {size} bytes, over the limit of {limit}")]
    TooLarge {
        /// The declared size.
        size: u64,
        /// The limit in force.
        limit: u64,
    },
}

impl Identities {
    /// Parses the identities in one key file's bytes: an age identity file
    /// or an unencrypted OpenSSH private key. `name` names the file in
    /// errors.
    pub fn parse_file(bytes: &[u8], name: &str) -> Result<Identities, String> {
        let text =
            std::str::from_utf8(bytes).map_err(|_| format!("{name}: not a text key file"))?;
        if text.contains("-----BEGIN") {
            let id = age::ssh::Identity::from_buffer(text.as_bytes(), Some(name.to_owned()))
                .map_err(|e| format!("{name}: not a usable SSH private key: {e}"))?;
            return match id {
                age::ssh::Identity::Unencrypted(_) => Ok(Identities {
                    keys: vec![Box::new(id)],
                }),
                age::ssh::Identity::Encrypted(_) => Err(format!(
                    "{name}: the SSH key is passphrase-protected, which git-session cannot prompt for; use an unencrypted key or an age identity file (age-keygen)"
                )),
                age::ssh::Identity::Unsupported(_) => Err(format!(
                    "{name}: this kind of SSH key cannot decrypt age files; use ssh-ed25519 or ssh-rsa, or an age identity file"
                )),
            };
        }
        let file = age::IdentityFile::from_buffer(text.as_bytes())
            .map_err(|e| format!("{name}: not an age identity file: {e}"))?;
        let keys = file
            .into_identities()
            .map_err(|e| format!("{name}: not an age identity file: {e}"))?;
        if keys.is_empty() {
            return Err(format!("{name}: holds no identity"));
        }
        Ok(Identities { keys })
    }

    /// Adds the identities of `other`.
    pub fn extend(&mut self, other: Identities) {
        self.keys.extend(other.keys);
    }

    /// Opens a payload [`Recipients::seal`] made whose plaintext was
    /// declared as `size` bytes: refused before anything is decrypted when
    /// `size > limit`, and when the plaintext is not exactly `size` bytes.
    pub fn open(&self, sealed: &[u8], size: u64, limit: u64) -> Result<Vec<u8>, OpenError> {
        if size > limit {
            return Err(OpenError::TooLarge { size, limit });
        }
        let decryptor =
            age::Decryptor::new_buffered(sealed).map_err(|e| OpenError::Tampered(e.to_string()))?;
        let mut reader = decryptor
            .decrypt(self.keys.iter().map(|k| k.as_ref() as &dyn age::Identity))
            .map_err(|e| match e {
                age::DecryptError::NoMatchingKeys => OpenError::NotForUs,
                e => OpenError::Tampered(e.to_string()),
            })?;
        // The compressed stream is never longer than the ciphertext, which
        // the caller already bounded by its blob size.
        let mut packed = Vec::with_capacity(sealed.len());
        reader
            .read_to_end(&mut packed)
            .map_err(|e| OpenError::Tampered(e.to_string()))?;
        let capacity = usize::try_from(size).map_err(|_| OpenError::TooLarge { size, limit })?;
        let plain = zstd::bulk::decompress(&packed, capacity)
            .map_err(|e| OpenError::Tampered(format!("zstd: {e}")))?;
        if plain.len() as u64 != size {
            return Err(OpenError::Tampered(format!(
                "{} bytes of plaintext, {size} declared",
                plain.len()
            )));
        }
        Ok(plain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use age::secrecy::ExposeSecret;

    fn pair() -> (String, String) {
        let id = age::x25519::Identity::generate();
        (
            id.to_public().to_string(),
            id.to_string().expose_secret().to_owned(),
        )
    }

    #[test]
    fn sealed_payloads_open_for_every_recipient_and_nobody_else() {
        let (pub_a, sec_a) = pair();
        let (pub_b, sec_b) = pair();
        let (_, sec_c) = pair();
        let r = Recipients::parse([("a", pub_a.as_str(), false), ("b", pub_b.as_str(), false)])
            .unwrap();
        let plain = b"the secret plan, repeated, repeated, repeated".repeat(10);
        let sealed = r.seal(&plain).unwrap();
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        for sec in [&sec_a, &sec_b] {
            let ids = Identities::parse_file(sec.as_bytes(), "k").unwrap();
            assert_eq!(
                ids.open(&sealed, plain.len() as u64, 1 << 20).unwrap(),
                plain
            );
        }
        let c = Identities::parse_file(sec_c.as_bytes(), "c").unwrap();
        assert_eq!(
            c.open(&sealed, plain.len() as u64, 1 << 20),
            Err(OpenError::NotForUs)
        );
    }

    #[test]
    fn tampering_sizes_and_limits_are_refused() {
        let (pub_a, sec_a) = pair();
        let r = Recipients::parse([("a", pub_a.as_str(), false)]).unwrap();
        let ids = Identities::parse_file(sec_a.as_bytes(), "k").unwrap();
        let plain = vec![b'x'; 100_000];
        let sealed = r.seal(&plain).unwrap();
        let mut bad = sealed.clone();
        let last = bad.len() - 5;
        bad[last] ^= 1;
        assert!(matches!(
            ids.open(&bad, 100_000, 1 << 20),
            Err(OpenError::Tampered(_))
        ));
        // A lying size: smaller than the plaintext is refused, not truncated.
        assert!(matches!(
            ids.open(&sealed, 10, 1 << 20),
            Err(OpenError::Tampered(_))
        ));
        assert_eq!(
            ids.open(&sealed, 100_000, 1000),
            Err(OpenError::TooLarge {
                size: 100_000,
                limit: 1000
            })
        );
    }

    #[test]
    fn bad_recipients_name_where_they_came_from() {
        let err = Recipients::parse([("keys.txt", "# team\nage1nope\n", true)]).unwrap_err();
        assert!(err.starts_with("keys.txt:2: "), "{err}");
        let err = Recipients::parse([("session.recipients", "hello", false)]).unwrap_err();
        assert!(err.contains("session.recipients"), "{err}");
    }
}
