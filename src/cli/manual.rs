//! Manual pages and help as git gives them: one page per subcommand,
//! generated from the clap definitions (so every subcommand, whoever adds
//! it, has one), `git session install-man`, and `git session help <cmd>` /
//! `git session <cmd> --help` opening `git-session-<cmd>(1)` when it is
//! installed (falling back to the built-in help text, as `-h` always gives).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{CommandError, Env, status};

/// Install the manual pages (git-session(1), git-session-<command>(1)) into
/// a user directory; no root needed.
///
/// Writes every page into DIR/man1 (default $XDG_DATA_HOME/man, else
/// ~/.local/share/man) and removes git-session pages left there by an older
/// version. man finds that directory when ~/.local/bin is on PATH (man
/// derives its search path from PATH); otherwise it says what to add to
/// MANPATH. Afterwards `git session --help`, `git session help <command>`
/// and `git session <command> --help` open the pages.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The man directory (the one holding man1/).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Returns every manual page as (file name, roff text): git-session.1 and
/// one `git-session-<command>.1` per visible subcommand, nested ones too.
pub fn pages() -> Vec<(String, Vec<u8>)> {
    let mut cmd = super::command()
        .name("git-session")
        .bin_name("git session")
        .disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    collect(&cmd, &mut out);
    out
}

fn collect(cmd: &clap::Command, out: &mut Vec<(String, Vec<u8>)>) {
    let man = clap_mangen::Man::new(cmd.clone())
        .source(format!("git-session {}", env!("CARGO_PKG_VERSION")))
        .manual("git-session Manual");
    let mut text = Vec::new();
    render(&man, cmd, &mut text).expect("rendering into memory does not fail");
    out.push((man.get_filename(), text));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, out);
    }
}

/// Renders a page as clap_mangen does, but with a synopsis that names
/// each option's value (`[-C PATH]`, `[--agent AGENT]`), as git's pages do.
fn render(man: &clap_mangen::Man, cmd: &clap::Command, w: &mut dyn Write) -> std::io::Result<()> {
    man.render_title(w)?;
    man.render_name_section(w)?;
    writeln!(w, ".SH SYNOPSIS")?;
    writeln!(w, "{}", synopsis(cmd))?;
    man.render_description_section(w)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(w)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(w)?;
    }
    if cmd
        .get_after_long_help()
        .or_else(|| cmd.get_after_help())
        .is_some()
    {
        man.render_extra_section(w)?;
    }
    if cmd.get_version().is_some() {
        man.render_version_section(w)?;
    }
    if let Some((parent, _)) = cmd
        .get_display_name()
        .and_then(|n| n.rsplit_once('-'))
        .filter(|(p, _)| p.starts_with("git-session"))
    {
        writeln!(w, ".SH \"SEE ALSO\"")?;
        writeln!(w, "{}(1)", roff(parent))?;
    }
    Ok(())
}

/// Escapes text for roff: backslashes and hyphens (so they stay
/// hyphens), and a leading dot or quote.
fn roff(text: &str) -> String {
    let mut out = text.replace('\\', "\\e").replace('-', "\\-");
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// Returns the SYNOPSIS line: the command, then each visible option with
/// its value name, then the positionals and `<command>` for a command with
/// subcommands.
fn synopsis(cmd: &clap::Command) -> String {
    let name = cmd.get_bin_name().unwrap_or_else(|| cmd.get_name());
    let mut parts = vec![format!("\\fB{}\\fR", roff(name))];
    let value = |a: &clap::Arg| -> String {
        let names: Vec<String> = a
            .get_value_names()
            .map(|v| v.iter().map(|n| n.to_string()).collect())
            .unwrap_or_else(|| vec![a.get_id().to_string().to_uppercase()]);
        names
            .iter()
            .map(|n| format!("\\fI{}\\fR", roff(n)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for a in cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
    {
        let mut flag = match (a.get_short(), a.get_long()) {
            (Some(s), Some(l)) => format!("\\fB\\-{s}\\fR|\\fB\\-\\-{}\\fR", roff(l)),
            (Some(s), None) => format!("\\fB\\-{s}\\fR"),
            (None, Some(l)) => format!("\\fB\\-\\-{}\\fR", roff(l)),
            (None, None) => continue,
        };
        let takes_value = a.get_action().takes_values();
        if takes_value {
            let v = value(a);
            if a.get_num_args().is_some_and(|n| n.min_values() == 0) {
                flag = format!("{flag} [{v}]");
            } else {
                flag = format!("{flag} {v}");
            }
        }
        let repeat = matches!(
            a.get_action(),
            clap::ArgAction::Count | clap::ArgAction::Append
        );
        let dots = if repeat { "..." } else { "" };
        if a.is_required_set() {
            parts.push(format!("{flag}{dots}"));
        } else {
            parts.push(format!("[{flag}]{dots}"));
        }
    }
    let mut positionals: Vec<&clap::Arg> =
        cmd.get_positionals().filter(|a| !a.is_hide_set()).collect();
    positionals.sort_by_key(|a| a.get_index());
    for a in positionals {
        let v = value(a);
        let many = a.get_num_args().is_some_and(|n| n.max_values() > 1);
        let dots = if many { "..." } else { "" };
        if a.is_required_set() {
            parts.push(format!("{v}{dots}"));
        } else {
            parts.push(format!("[{v}]{dots}"));
        }
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        parts.push("<\\fIcommand\\fR> [<\\fIargs\\fR>]".to_owned());
    }
    parts.join(" ")
}

pub fn run(args: Args, env: &Env, _out: &mut dyn Write) -> Result<(), CommandError> {
    let dir = match args.dir {
        Some(d) => env.cwd.join(d),
        None => default_dir()?,
    };
    let man1 = dir.join("man1");
    std::fs::create_dir_all(&man1)
        .map_err(|e| CommandError::failure(format!("cannot create {}: {e}", man1.display())))?;
    let pages = pages();
    for (name, text) in &pages {
        let path = man1.join(name);
        std::fs::write(&path, text)
            .map_err(|e| CommandError::failure(format!("cannot write {}: {e}", path.display())))?;
    }
    // Pages of subcommands that no longer exist.
    let current: std::collections::BTreeSet<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
    for entry in std::fs::read_dir(&man1).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("git-session-")
            && name.ends_with(".1")
            && !current.contains(name.as_str())
        {
            let _ = std::fs::remove_file(entry.path());
            status(format!("Removed the stale page {}", entry.path().display()));
        }
    }
    status(format!(
        "Installed {} manual pages in {}",
        pages.len(),
        man1.display()
    ));
    if !man_finds(&dir) {
        status(format!(
            "man does not search {} yet: add `export MANPATH=\"{}:$MANPATH\"` to your shell's startup file (the empty entry keeps the system pages)",
            dir.display(),
            dir.display()
        ));
    }
    Ok(())
}

/// Returns `$XDG_DATA_HOME/man`, else `~/.local/share/man`.
fn default_dir() -> Result<PathBuf, CommandError> {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| Path::new(x).is_absolute()) {
        return Ok(PathBuf::from(x).join("man"));
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".local/share/man"))
        .ok_or_else(|| CommandError::usage("HOME is not set").hint("pass --dir DIR"))
}

/// Whether `manpath` lists `dir` (true when it cannot tell).
fn man_finds(dir: &Path) -> bool {
    let Ok(out) = std::process::Command::new("manpath")
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return true;
    };
    let listed = String::from_utf8_lossy(&out.stdout);
    let want = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    listed.trim().split(':').any(|p| {
        let p = Path::new(p);
        p == dir || p.canonicalize().is_ok_and(|c| c == want)
    })
}

/// Handles a help request the way git does, given the process arguments
/// (without the program) and clap's help error: `-h` prints the built-in
/// text; `--help` and `help <command>` open the installed manual page of
/// that command with `man`, else print the built-in text. Returns the exit
/// code.
pub fn help(args: &[String], error: &clap::Error) -> std::process::ExitCode {
    let (path, long) = help_target(args);
    if long {
        let page = std::iter::once("git-session".to_owned())
            .chain(path)
            .collect::<Vec<_>>()
            .join("-");
        if page_installed(&page)
            && std::process::Command::new("man")
                .arg(&page)
                .status()
                .is_ok_and(|s| s.success())
        {
            return std::process::ExitCode::SUCCESS;
        }
    }
    let _ = error.print();
    std::process::ExitCode::SUCCESS
}

fn page_installed(page: &str) -> bool {
    std::process::Command::new("man")
        .args(["-w", page])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Returns the subcommand path a help request names and whether it asks
/// for the manual (`--help`, `help <command>`) rather than `-h`.
fn help_target(args: &[String]) -> (Vec<String>, bool) {
    let mut cmd = super::command();
    let mut path = Vec::new();
    let mut long = false;
    let mut help_sub = false;
    let mut positional = false;
    let mut tokens = args.iter();
    while let Some(t) = tokens.next() {
        match t.as_str() {
            "--help" => long = true,
            "-h" => {}
            "-C" | "--color" => {
                tokens.next();
            }
            "--" => break,
            "help" if !help_sub && cmd.has_subcommands() => {
                help_sub = true;
                long = true;
            }
            s if s.starts_with('-') => {}
            s => {
                if positional {
                    continue;
                }
                let Some(sub) = cmd
                    .get_subcommands()
                    .find(|c| c.get_name() == s || c.get_all_aliases().any(|a| a == s))
                    .cloned()
                else {
                    // An argument: no subcommand after it, but a --help may follow.
                    positional = !help_sub;
                    continue;
                };
                path.push(sub.get_name().to_owned());
                cmd = sub;
            }
        }
    }
    (path, long)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(args: &[&str]) -> (Vec<String>, bool) {
        help_target(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn help_requests_name_their_command() {
        assert_eq!(target(&["import", "--help"]), (vec!["import".into()], true));
        assert_eq!(target(&["import", "-h"]), (vec!["import".into()], false));
        assert_eq!(target(&["help", "sync"]), (vec!["sync".into()], true));
        assert_eq!(target(&["-C", "import", "help"]), (vec![], true));
        assert_eq!(target(&["--help"]), (vec![], true));
        assert_eq!(
            target(&["--color", "never", "resume", "x", "--help"]),
            (vec!["resume".into()], true)
        );
    }

    #[test]
    fn every_visible_subcommand_has_a_page() {
        let names: Vec<String> = pages().into_iter().map(|(n, _)| n).collect();
        for sub in super::super::command()
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
        {
            let want = format!("git-session-{}.1", sub.get_name());
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        assert!(names.contains(&"git-session.1".to_owned()));
        assert!(
            !names.iter().any(|n| n.contains("hook")),
            "hidden commands have no page"
        );
    }
}
