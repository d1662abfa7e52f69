//! SSH signatures for handoff receipts (SshSig, namespace `git-session`),
//! interoperable with `ssh-keygen -Y sign/verify` and git's allowed-signers
//! files.
//!
//! Keys: an unencrypted OpenSSH private key is used in process. A public key
//! file (`key.pub`, or the `key::ssh-ed25519 …` literal git allows in
//! `user.signingKey`) signs through `ssh-keygen -Y sign`, i.e. through a
//! running ssh-agent, as git itself does. A passphrase-protected private key
//! without an agent is refused with what to do, never prompted for: hooks
//! and CI have no terminal.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use git_session_schema::receipt::SIGNATURE_NAMESPACE;
use ssh_key::{HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};

/// Says why a receipt could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The key file cannot be read or parsed.
    #[error("signing key {path}: {message}")]
    Key {
        /// The key file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A passphrase-protected key and no agent to sign with.
    #[error(
        "signing key {0} is passphrase-protected; add it to ssh-agent (ssh-add) and set session.signingKey to its .pub file"
    )]
    Encrypted(PathBuf),
    /// `ssh-keygen -Y sign` failed (no agent, key not loaded, ...).
    #[error("ssh-keygen could not sign with {path}: {message}")]
    Agent {
        /// The public key file.
        path: PathBuf,
        /// ssh-keygen's complaint.
        message: String,
    },
}

/// Where the key comes from: a file, or a public key literal for the agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// A private or public key file.
    File(PathBuf),
    /// `key::<openssh public key>`, signed by the agent.
    Literal(String),
}

impl KeySource {
    /// Parses a `session.signingKey` / `user.signingKey` value; `home`
    /// expands a leading `~/`.
    pub fn parse(value: &str, home: Option<&Path>) -> KeySource {
        if let Some(literal) = value.strip_prefix("key::") {
            return KeySource::Literal(literal.trim().to_owned());
        }
        if value.starts_with("ssh-") || value.starts_with("ecdsa-") || value.starts_with("sk-") {
            return KeySource::Literal(value.trim().to_owned());
        }
        match (value.strip_prefix("~/"), home) {
            (Some(rest), Some(home)) => KeySource::File(home.join(rest)),
            _ => KeySource::File(PathBuf::from(value)),
        }
    }
}

/// The namespace git signs and verifies commits in (`gpg.format=ssh`).
pub const GIT_NAMESPACE: &str = "git";

/// Signs `message` (a receipt) and returns the armored signature.
pub fn sign(key: &KeySource, message: &[u8]) -> Result<String, SignError> {
    sign_in(key, SIGNATURE_NAMESPACE, message)
}

/// Signs `message` in `namespace` (`git-session` for receipts, `git` for
/// commits, as `git commit -S` does with `gpg.format=ssh`).
pub fn sign_in(key: &KeySource, namespace: &str, message: &[u8]) -> Result<String, SignError> {
    let path = match key {
        KeySource::Literal(public) => {
            let mut tmp = tempfile::NamedTempFile::new().map_err(|e| SignError::Key {
                path: PathBuf::from("key::"),
                message: e.to_string(),
            })?;
            writeln!(tmp, "{public}").map_err(|e| SignError::Key {
                path: tmp.path().to_owned(),
                message: e.to_string(),
            })?;
            return ssh_keygen_sign(tmp.path(), namespace, message);
        }
        KeySource::File(path) => path,
    };
    let text = std::fs::read_to_string(path).map_err(|e| SignError::Key {
        path: path.clone(),
        message: e.to_string(),
    })?;
    if PublicKey::from_openssh(text.trim()).is_ok() {
        return ssh_keygen_sign(path, namespace, message);
    }
    let private = PrivateKey::from_openssh(&text).map_err(|e| SignError::Key {
        path: path.clone(),
        message: e.to_string(),
    })?;
    if private.is_encrypted() {
        let public = PathBuf::from(format!("{}.pub", path.display()));
        return if public.is_file() {
            ssh_keygen_sign(&public, namespace, message)
                .map_err(|_| SignError::Encrypted(path.clone()))
        } else {
            Err(SignError::Encrypted(path.clone()))
        };
    }
    let signature = private
        .sign(namespace, HashAlg::Sha512, message)
        .map_err(|e| SignError::Key {
            path: path.clone(),
            message: e.to_string(),
        })?;
    Ok(signature
        .to_pem(LineEnding::LF)
        .expect("an SSH signature always encodes"))
}

/// Signs through `ssh-keygen -Y sign -f <public key>` (uses ssh-agent).
fn ssh_keygen_sign(public: &Path, namespace: &str, message: &[u8]) -> Result<String, SignError> {
    let fail = |message: String| SignError::Agent {
        path: public.to_owned(),
        message,
    };
    let mut child = Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", namespace, "-f"])
        .arg(public)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    child
        .stdin
        .take()
        .expect("stdin was piped")
        .write_all(message)
        .map_err(|e| fail(e.to_string()))?;
    let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    let pem = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() || !pem.contains("BEGIN SSH SIGNATURE") {
        return Err(fail(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
    }
    Ok(pem)
}

/// Says what checking a signature found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Valid, by a key the allowed-signers file lists for the principal.
    Good {
        /// The signer's key fingerprint.
        fingerprint: String,
    },
    /// Valid signature, but no allowed-signers file to say whose key it is.
    ValidUnknownSigner {
        /// The signer's key fingerprint.
        fingerprint: String,
    },
    /// Valid signature by a key the allowed-signers file does not list for
    /// the principal (or not for the git-session namespace).
    NotAllowed {
        /// The signer's key fingerprint.
        fingerprint: String,
    },
    /// The signature does not verify (tampered message, wrong namespace, junk).
    Bad(String),
}

/// Checks `pem` over `message`; `principal` is who the receipt says signed,
/// `allowed_signers` the content of git's `gpg.ssh.allowedSignersFile`.
pub fn verify(
    pem: &str,
    message: &[u8],
    principal: Option<&str>,
    allowed_signers: Option<&str>,
) -> Verdict {
    let signature = match SshSig::from_pem(pem) {
        Ok(s) => s,
        Err(e) => return Verdict::Bad(format!("unreadable signature: {e}")),
    };
    let key = PublicKey::from(signature.public_key().clone());
    if let Err(e) = key.verify(SIGNATURE_NAMESPACE, message, &signature) {
        return Verdict::Bad(e.to_string());
    }
    let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
    let Some(allowed) = allowed_signers else {
        return Verdict::ValidUnknownSigner { fingerprint };
    };
    let listed = allowed.lines().any(|line| {
        allowed_entry(line).is_some_and(|(principals, namespaces, listed_key)| {
            listed_key.key_data() == key.key_data()
                && principal.is_some_and(|p| principals.iter().any(|pat| glob_match(pat, p)))
                && namespaces.is_none_or(|ns| ns.iter().any(|n| n == SIGNATURE_NAMESPACE))
        })
    });
    if listed {
        Verdict::Good { fingerprint }
    } else {
        Verdict::NotAllowed { fingerprint }
    }
}

/// Checks a commit signature `pem` over the commit bytes `message` the
/// way `git verify-commit` does with `gpg.format=ssh`: valid in the `git`
/// namespace, by a key the allowed-signers file lists (for any principal,
/// with no `namespaces=` option or one naming `git`).
pub fn verify_commit(pem: &str, message: &[u8], allowed_signers: Option<&str>) -> Verdict {
    let signature = match SshSig::from_pem(pem) {
        Ok(s) => s,
        Err(e) => return Verdict::Bad(format!("unreadable signature: {e}")),
    };
    let key = PublicKey::from(signature.public_key().clone());
    if let Err(e) = key.verify(GIT_NAMESPACE, message, &signature) {
        return Verdict::Bad(e.to_string());
    }
    let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
    let Some(allowed) = allowed_signers else {
        return Verdict::ValidUnknownSigner { fingerprint };
    };
    let listed = allowed.lines().any(|line| {
        allowed_entry(line).is_some_and(|(_, namespaces, listed_key)| {
            listed_key.key_data() == key.key_data()
                && namespaces.is_none_or(|ns| ns.iter().any(|n| n == GIT_NAMESPACE))
        })
    });
    if listed {
        Verdict::Good { fingerprint }
    } else {
        Verdict::NotAllowed { fingerprint }
    }
}

/// Judges one session commit's signature (`signature` as the store
/// returns it: armored signature and the bytes it covers): `Ok(true)` for
/// a good one, `Ok(false)` for none when none is required, else what is
/// wrong. A bad signature, or one by a key the allowed-signers file does
/// not list, is always a problem; a missing one only when `required`.
pub fn judge_commit(
    signature: Option<&(String, Vec<u8>)>,
    allowed_signers: Option<&str>,
    required: bool,
) -> Result<bool, String> {
    let Some((pem, bytes)) = signature else {
        return if required {
            Err("is not signed (session.requireSigned is set)".into())
        } else {
            Ok(false)
        };
    };
    match verify_commit(pem, bytes, allowed_signers) {
        Verdict::Good { .. } => Ok(true),
        Verdict::ValidUnknownSigner { fingerprint } if !required => {
            let _ = fingerprint;
            Ok(true)
        }
        Verdict::ValidUnknownSigner { fingerprint } => Err(format!(
            "is signed by {fingerprint}, but no gpg.ssh.allowedSignersFile says whose key that is"
        )),
        Verdict::NotAllowed { fingerprint } => Err(format!(
            "is signed by {fingerprint}, which the allowed-signers file does not list"
        )),
        Verdict::Bad(reason) => Err(format!("has a bad signature: {reason}")),
    }
}

/// Parses one allowed-signers line (`principals [options] keytype key`).
fn allowed_entry(line: &str) -> Option<(Vec<String>, Option<Vec<String>>, PublicKey)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (principals, rest) = line.split_once(char::is_whitespace)?;
    let rest = rest.trim_start();
    let mut namespaces = None;
    let key_text =
        if rest.starts_with("ssh-") || rest.starts_with("ecdsa-") || rest.starts_with("sk-") {
            rest
        } else {
            let (options, key) = rest.split_once(char::is_whitespace)?;
            for option in split_options(options) {
                if let Some(value) = option.strip_prefix("namespaces=") {
                    namespaces = Some(
                        value
                            .trim_matches('"')
                            .split(',')
                            .map(str::to_owned)
                            .collect(),
                    );
                }
            }
            key.trim_start()
        };
    let key = PublicKey::from_openssh(key_text).ok()?;
    let principals = principals
        .trim_matches('"')
        .split(',')
        .map(str::to_owned)
        .collect();
    Some((principals, namespaces, key))
}

/// Splits an allowed-signers options field at commas outside quotes
/// (`namespaces="git,git-session",valid-after=…`).
fn split_options(options: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in options.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&options[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&options[start..]);
    out
}

/// Matches `*` and `?` wildcards like OpenSSH principal patterns.
fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_namespaces_keep_their_commas() {
        assert_eq!(
            split_options("namespaces=\"git-session,git\",cert-authority"),
            vec!["namespaces=\"git-session,git\"", "cert-authority"]
        );
    }

    #[test]
    fn principals_match_like_openssh() {
        assert!(glob_match("*@example.com", "a@example.com"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a@example.com", "b@example.com"));
    }

    #[test]
    fn key_values_parse_like_git() {
        let home = Path::new("/home/u");
        assert_eq!(
            KeySource::parse("~/.ssh/id", Some(home)),
            KeySource::File(home.join(".ssh/id"))
        );
        assert_eq!(
            KeySource::parse("key::ssh-ed25519 AAAA x", None),
            KeySource::Literal("ssh-ed25519 AAAA x".into())
        );
    }
}
