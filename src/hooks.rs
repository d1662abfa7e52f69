//! Git hooks that capture sessions on commit, installed between marker
//! lines so that existing hook content is kept and `init --uninstall`
//! removes exactly what was added.
//!
//! The snippet calls `git-session hook <name>` only when the binary can be
//! found and ends with `true`, so a missing binary, a corrupt agent store or
//! any failure never fails or blocks the user's commit. The binary itself
//! exits 0 from hook entry points and logs failures to local state.

use std::path::{Path, PathBuf};

/// First line of the block git-session owns in a hook file.
pub const BEGIN: &str = "# >>> git-session >>>";
/// Last line of that block.
pub const END: &str = "# <<< git-session <<<";
/// The hooks git-session installs.
pub const HOOKS: [&str; 1] = ["post-commit"];

/// Says why a hook could not be installed or removed.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// The existing hook is not a shell script, so a shell snippet cannot
    /// be added safely.
    #[error(
        "{path} is a {interpreter} script; add `git-session hook {hook} || true` to it yourself"
    )]
    NotShell {
        /// The hook file.
        path: PathBuf,
        /// Its interpreter line.
        interpreter: String,
        /// The hook name.
        hook: String,
    },
    /// Filesystem trouble.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Returns the shell block for `hook`, calling `binary` (falling back to
/// `git-session` on PATH when that file is gone); without a binary (a
/// hooks folder tracked in the repository, such as husky's, where one
/// machine's path must not be committed) only `git-session` on PATH.
pub fn snippet(hook: &str, binary: Option<&Path>) -> String {
    let find = match binary {
        Some(binary) => format!(
            "gs='{}'\n[ -x \"$gs\" ] || gs=$(command -v git-session 2>/dev/null)\n",
            binary.to_string_lossy().replace('\'', "'\\''")
        ),
        None => "gs=$(command -v git-session 2>/dev/null)\n".to_owned(),
    };
    format!(
        "{BEGIN}\n\
         # Captures coding-agent sessions after each commit (git session init).\n\
         # It never fails the commit; failures go to .git/session/hook.log.\n\
         {find}\
         [ -n \"$gs\" ] && \"$gs\" hook {hook} </dev/null >/dev/null 2>&1\n\
         true\n\
         {END}\n"
    )
}

/// Adds or refreshes the block in `dir/hook`; returns whether the file
/// changed. A new block goes before a final top-level `exit` or `exec`
/// of an existing hook, which would otherwise end it before the block.
/// `binary` is left out of the block when `None` (see [`snippet`]).
pub fn install(dir: &Path, hook: &str, binary: Option<&Path>) -> Result<bool, HookError> {
    let path = dir.join(hook);
    let io = |source| HookError::Io {
        path: path.clone(),
        source,
    };
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    let block = snippet(hook, binary);
    let text = match &existing {
        None => format!("#!/bin/sh\n{block}"),
        Some(text) => {
            if let Some(first) = text.lines().next().filter(|l| l.starts_with("#!"))
                && !["sh", "bash", "dash", "zsh", "ksh"]
                    .iter()
                    .any(|s| first.ends_with(&format!("/{s}")) || first.ends_with(&format!(" {s}")))
            {
                return Err(HookError::NotShell {
                    path: path.clone(),
                    interpreter: first.trim_start_matches("#!").trim().to_owned(),
                    hook: hook.to_owned(),
                });
            }
            let (before, after) = split_block(text);
            let (before, tail) = if text.contains(BEGIN) {
                (before, "")
            } else {
                split_final_exit(before)
            };
            let mut out = before.to_owned();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&block);
            out.push_str(tail);
            out.push_str(after);
            out
        }
    };
    if existing.as_deref() == Some(text.as_str()) {
        return Ok(false);
    }
    std::fs::create_dir_all(dir).map_err(|source| HookError::Io {
        path: dir.to_owned(),
        source,
    })?;
    std::fs::write(&path, &text).map_err(io)?;
    make_executable(&path).map_err(io)?;
    Ok(true)
}

/// Removes the block from `dir/hook`; deletes a file that had nothing else.
pub fn uninstall(dir: &Path, hook: &str) -> Result<bool, HookError> {
    let path = dir.join(hook);
    let io = |source| HookError::Io {
        path: path.clone(),
        source,
    };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(false);
    };
    if !text.contains(BEGIN) {
        return Ok(false);
    }
    let (before, after) = split_block(&text);
    let rest = format!("{before}{after}");
    if rest.trim() == "#!/bin/sh" || rest.trim().is_empty() {
        std::fs::remove_file(&path).map_err(io)?;
    } else {
        std::fs::write(&path, rest).map_err(io)?;
    }
    Ok(true)
}

/// Returns whether `dir/hook` has the block.
pub fn is_installed(dir: &Path, hook: &str) -> bool {
    std::fs::read_to_string(dir.join(hook)).is_ok_and(|t| t.contains(BEGIN) && t.contains(END))
}

/// Returns whether the block in `dir/hook` runs: `Err` with the line that
/// ends the hook before it (a top-level `exit` or `exec`), if any.
pub fn reachable(dir: &Path, hook: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(dir.join(hook)).unwrap_or_default();
    let Some(at) = text.find(BEGIN) else {
        return Err("no git-session block".into());
    };
    for (n, line) in text[..at].lines().enumerate() {
        if ends_hook(line) {
            return Err(format!(
                "line {} `{}` ends the hook before it",
                n + 1,
                line.trim()
            ));
        }
    }
    Ok(())
}

/// Returns whether a line unconditionally ends a shell script: `exit` or
/// `exec` at the start of the line (indented ones are taken to be inside
/// a branch).
fn ends_hook(line: &str) -> bool {
    let word = line
        .split(|c: char| c.is_whitespace() || c == ';')
        .next()
        .unwrap_or("");
    !line.starts_with(char::is_whitespace) && (word == "exit" || word == "exec")
}

/// Splits `text` before its last command line when that ends the hook
/// (`exit 0`, `exec ...`), so the block can go in front of it.
fn split_final_exit(text: &str) -> (&str, &str) {
    let mut offset = 0;
    let mut last = None;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if !t.is_empty() && !t.starts_with('#') {
            last = Some((offset, line));
        }
        offset += line.len();
    }
    match last {
        Some((at, line)) if ends_hook(line) => (&text[..at], &text[at..]),
        _ => (text, ""),
    }
}

/// Splits a hook into the text before and after our block (block removed).
fn split_block(text: &str) -> (&str, &str) {
    match (text.find(BEGIN), text.find(END)) {
        (Some(b), Some(e)) if e > b => {
            let after = &text[e + END.len()..];
            (&text[..b], after.strip_prefix('\n').unwrap_or(after))
        }
        _ => (text, ""),
    }
}

#[cfg(unix)]
fn make_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path)?.permissions();
    perms.set_mode(perms.mode() | 0o111);
    std::fs::set_permissions(path, perms)
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_keeps_other_content_and_uninstall_restores_it() {
        let dir = tempfile::tempdir().unwrap();
        let own = "#!/bin/bash\necho mine\n";
        std::fs::write(dir.path().join("post-commit"), own).unwrap();
        let bin = Some(Path::new("/opt/bin/git-session"));
        assert!(install(dir.path(), "post-commit", bin).unwrap());
        assert!(
            !install(dir.path(), "post-commit", bin).unwrap(),
            "a second install changes nothing"
        );
        let text = std::fs::read_to_string(dir.path().join("post-commit")).unwrap();
        assert!(text.starts_with(own) && text.contains("hook post-commit"));
        assert_eq!(text.matches(BEGIN).count(), 1);
        assert!(uninstall(dir.path(), "post-commit").unwrap());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("post-commit")).unwrap(),
            own
        );

        // A hook we created is removed whole.
        install(dir.path(), "post-merge", bin).unwrap();
        uninstall(dir.path(), "post-merge").unwrap();
        assert!(!dir.path().join("post-merge").exists());
    }

    #[test]
    fn a_non_shell_hook_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("post-commit"),
            "#!/usr/bin/env python3\nprint(1)\n",
        )
        .unwrap();
        let err = install(dir.path(), "post-commit", Some(Path::new("/x"))).unwrap_err();
        assert!(err.to_string().contains("python3"), "{err}");
    }

    #[test]
    fn the_block_goes_before_a_final_exit_and_reachability_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let own = "#!/bin/sh
if [ -n \"$X\" ]; then
  exit 1
fi
echo mine
exit 0
\n";
        std::fs::write(dir.path().join("post-commit"), own).unwrap();
        assert!(reachable(dir.path(), "post-commit").is_err());
        install(dir.path(), "post-commit", None).unwrap();
        let text = std::fs::read_to_string(dir.path().join("post-commit")).unwrap();
        let block = text.find(BEGIN).unwrap();
        assert!(block < text.find("exit 0").unwrap(), "{text}");
        assert!(!text.contains("/git-session'"), "no binary path: {text}");
        assert_eq!(reachable(dir.path(), "post-commit"), Ok(()));
        uninstall(dir.path(), "post-commit").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("post-commit")).unwrap(),
            own
        );
        // A block an older version appended after `exit 0` is unreachable.
        let old = format!("#!/bin/sh\nexit 0\n{}", snippet("post-commit", None));
        std::fs::write(dir.path().join("post-commit"), old).unwrap();
        let why = reachable(dir.path(), "post-commit").unwrap_err();
        assert!(why.contains("line 2 `exit 0`"), "{why}");
    }
}
