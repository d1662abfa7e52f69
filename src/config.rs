//! Settings read from `git config`: `session.*` keys (`session.remote`,
//! `session.signingKey`, `session.signCommits`, `session.requireSigned`
//! and `session.<remote>.requireSigned`, `session.redact`; the size
//! limits are read by the store; the encryption keys `session.recipients`,
//! `session.recipientsFile`, `session.identity`), and the git keys git-session honours
//! (`user.signingKey` with `gpg.format=ssh`, `gpg.ssh.allowedSignersFile`,
//! `user.email`).

use std::path::Path;

use crate::sign::KeySource;
use crate::store::Store;

fn get(store: &Store, key: &str) -> Option<String> {
    let cli = std::env::var("GIT_CONFIG_PARAMETERS").ok();
    cli.as_deref()
        .and_then(|p| command_line_value(p, key))
        .or_else(|| {
            store
                .repo()
                .config_snapshot()
                .string(key)
                .map(|v| v.to_string())
        })
        .filter(|v| !v.is_empty())
}

/// Returns the value `git -c KEY=VALUE session …` gave `key`: git passes
/// `-c` settings to subcommands in `GIT_CONFIG_PARAMETERS` as shell-quoted
/// `'key'='value'` (or, before git 2.31, `'key=value'`) words, which gix
/// does not read. The last setting wins; a key without `=` is true.
/// Section and variable names compare case-insensitively, a subsection
/// exactly, as git compares them.
fn command_line_value(params: &str, key: &str) -> Option<String> {
    let same = |a: &str, b: &str| {
        let split = |k: &str| -> Option<(String, String, String)> {
            let (section, rest) = k.split_once('.')?;
            let (sub, var) = rest.rsplit_once('.').unwrap_or(("", rest));
            Some((
                section.to_ascii_lowercase(),
                sub.to_owned(),
                var.to_ascii_lowercase(),
            ))
        };
        split(a).is_some_and(|x| Some(x) == split(b))
    };
    let mut words: Vec<(String, bool)> = Vec::new(); // (text, followed by '=')
    let mut chars = params.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\'' {
            continue;
        }
        let mut word = String::new();
        loop {
            match chars.next() {
                None => return None,
                Some('\'') => {
                    // `'\''` is an escaped quote inside a word.
                    if chars.peek() == Some(&'\\') {
                        chars.next();
                        chars.next();
                        word.push('\'');
                        if chars.next() != Some('\'') {
                            return None;
                        }
                        continue;
                    }
                    break;
                }
                Some(ch) => word.push(ch),
            }
        }
        let eq = chars.peek() == Some(&'=');
        if eq {
            chars.next();
        }
        words.push((word, eq));
    }
    let mut found = None;
    let mut it = words.into_iter();
    while let Some((word, eq)) = it.next() {
        let (k, v) = if eq {
            (word, it.next().map(|(v, _)| v).unwrap_or_default())
        } else {
            match word.split_once('=') {
                Some((k, v)) => (k.to_owned(), v.to_owned()),
                None => (word, "true".to_owned()),
            }
        };
        if same(&k, key) {
            found = Some(v);
        }
    }
    found
}

/// Returns the remote sessions are fetched from by default and init adds
/// fetch refspecs to: `session.remote`, else `origin`. Pushes need a choice
/// ([`chosen_remote`]).
pub fn sessions_remote(store: &Store) -> String {
    get(store, "session.remote").unwrap_or_else(|| "origin".to_owned())
}

/// Returns the remote chosen for sessions (`session.remote`) and the URL
/// it had when it was chosen (`session.remoteUrl`); pushes go nowhere else.
pub fn chosen_remote(store: &Store) -> (Option<String>, Option<String>) {
    (
        get(store, "session.remote"),
        get(store, "session.remoteUrl"),
    )
}

/// Returns where encryption keys come from: every `session.recipients`
/// value (one recipient each), `session.recipientsFile` and
/// `session.identity` values (paths; `~/` is the home directory).
pub fn encryption_keys(store: &Store, home: Option<&Path>) -> crate::store::crypt::KeyConfig {
    let snapshot = store.repo().config_snapshot();
    let all = |key: &str| -> Vec<String> {
        snapshot
            .strings(key)
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.to_string())
            .filter(|v| !v.trim().is_empty())
            .collect()
    };
    let path = |v: String| match (v.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => h.join(rest),
        _ => std::path::PathBuf::from(v),
    };
    crate::store::crypt::KeyConfig {
        recipients: all("session.recipients"),
        recipient_files: all("session.recipientsFile")
            .into_iter()
            .map(path)
            .collect(),
        identities: all("session.identity").into_iter().map(path).collect(),
    }
}

/// Returns the key receipts are signed with: `session.signingKey`, else
/// `user.signingKey` when `gpg.format` is `ssh`.
pub fn signing_key(store: &Store, home: Option<&Path>) -> Option<KeySource> {
    if let Some(key) = get(store, "session.signingKey") {
        return Some(KeySource::parse(&key, home));
    }
    let ssh = get(store, "gpg.format").is_some_and(|f| f.eq_ignore_ascii_case("ssh"));
    get(store, "user.signingKey")
        .filter(|_| ssh)
        .map(|key| KeySource::parse(&key, home))
}

/// Returns the setting [`signing_key`] takes the key from, to name in
/// hints: `session.signingKey`, else `user.signingKey`.
pub fn signing_key_setting(store: &Store) -> &'static str {
    if get(store, "session.signingKey").is_some() {
        "session.signingKey"
    } else {
        "user.signingKey"
    }
}

/// Returns who signs receipts: `user.email`.
pub fn signer(store: &Store) -> Option<String> {
    get(store, "user.email")
}

/// Returns the content of `gpg.ssh.allowedSignersFile`, if configured and
/// readable (`~/` is expanded with `home`).
pub fn allowed_signers(store: &Store, home: Option<&Path>) -> Option<String> {
    let path = get(store, "gpg.ssh.allowedSignersFile")?;
    let path = match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => Path::new(&path).to_owned(),
    };
    std::fs::read_to_string(path).ok()
}

/// Returns whether capture commits are signed when a signing key is
/// configured: `session.signCommits`, default true.
pub fn sign_commits(store: &Store) -> bool {
    store
        .repo()
        .config_snapshot()
        .boolean("session.signCommits")
        .unwrap_or(true)
}

/// Returns whether every batch must carry a good commit signature by an
/// allowed signer: `session.<remote>.requireSigned` for that remote, else
/// `session.requireSigned`, default false.
pub fn require_signed(store: &Store, remote: Option<&str>) -> bool {
    let config = store.repo().config_snapshot();
    remote
        .and_then(|r| config.boolean(format!("session.{r}.requireSigned").as_str()))
        .or_else(|| config.boolean("session.requireSigned"))
        .unwrap_or(false)
}

/// Returns git's `color.ui` (`auto`, `always`, `never`, `true`, `false`).
pub fn color_ui(store: &Store) -> Option<String> {
    get(store, "color.ui")
}

/// Returns git's `core.pager`.
pub fn core_pager(store: &Store) -> Option<String> {
    get(store, "core.pager")
}

#[cfg(test)]
mod tests {
    use super::command_line_value;

    #[test]
    fn git_dash_c_settings_are_read_as_git_passes_them() {
        // git 2.31+: key and value quoted apart; older: one word.
        let p = "'color.ui'='never' 'core.pager=less -R' 'Session.Origin.requireSigned'";
        assert_eq!(command_line_value(p, "color.ui").as_deref(), Some("never"));
        assert_eq!(command_line_value(p, "COLOR.UI").as_deref(), Some("never"));
        assert_eq!(
            command_line_value(p, "core.pager").as_deref(),
            Some("less -R")
        );
        assert_eq!(
            command_line_value(p, "session.Origin.requiresigned").as_deref(),
            Some("true")
        );
        assert_eq!(command_line_value(p, "session.origin.requireSigned"), None);
        assert_eq!(command_line_value(p, "user.email"), None);
        // The last one wins; a quote inside a value is '\''.
        let p = r"'color.ui'='always' 'user.name'='O'\''Brien' 'color.ui'='auto'";
        assert_eq!(command_line_value(p, "color.ui").as_deref(), Some("auto"));
        assert_eq!(
            command_line_value(p, "user.name").as_deref(),
            Some("O'Brien")
        );
    }
}
