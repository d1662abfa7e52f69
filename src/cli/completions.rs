//! `git session completions`: shell completion for the `git session` form
//! (and the `git-session` binary), answered by the binary itself through
//! clap_complete's engine, so every subcommand and option is covered as it
//! is defined, and session ids complete from the repository at hand.

use std::ffi::OsString;
use std::io::Write;

use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};

use super::{CommandError, Env};

/// Print a shell completion script for `git session` (bash, zsh or fish).
///
/// The script asks the binary for candidates as you type, so subcommands,
/// options, their values and session ids (from the repository you are in)
/// are always current. Install:
///
///   bash: git session completions bash > ~/.local/share/bash-completion/completions/git-session
///         (git's own bash completion calls it for `git session`; or source it from ~/.bashrc)
///
///   zsh:  git session completions zsh > ~/.zfunc/_git-session, with ~/.zfunc on fpath
///         before compinit (it registers session as a git user command)
///
///   fish: git session completions fish > ~/.config/fish/completions/git-session.fish
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell.
    #[arg(value_enum, required_unless_present = "index")]
    shell: Option<Shell>,
    /// Complete the word at this index of WORDS (used by the scripts).
    #[arg(long, hide = true)]
    index: Option<usize>,
    /// The command line being completed, from `session` on.
    #[arg(last = true, hide = true)]
    words: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

pub fn run(args: Args, env: &Env, out: &mut dyn Write) -> Result<(), CommandError> {
    if let Some(index) = args.index {
        for c in candidates(args.words, index, env) {
            if args.shell.is_some_and(|s| matches!(s, Shell::Fish))
                && let Some(help) = c.get_help()
            {
                let help = help.to_string();
                let first = help.lines().next().unwrap_or("");
                writeln!(out, "{}\t{first}", c.get_value().to_string_lossy())?;
            } else {
                writeln!(out, "{}", c.get_value().to_string_lossy())?;
            }
        }
        return Ok(());
    }
    let script = match args.shell {
        Some(Shell::Bash) => BASH,
        Some(Shell::Zsh) => ZSH,
        Some(Shell::Fish) => FISH,
        None => unreachable!("clap requires a shell without --index"),
    };
    out.write_all(script.as_bytes())?;
    Ok(())
}

/// Returns the candidates for word `index` of `words` (`words[0]` is the
/// command name), every session argument completing to the ids here.
fn candidates(words: Vec<OsString>, index: usize, env: &Env) -> Vec<CompletionCandidate> {
    let cwd = env.cwd.clone();
    let ids = ArgValueCandidates::new(move || {
        crate::store::Store::discover(&cwd)
            .and_then(|s| s.session_ids())
            .map(|ids| {
                ids.iter()
                    .map(|id| CompletionCandidate::new(id.as_str()))
                    .collect()
            })
            .unwrap_or_default()
    });
    let mut cmd = super::command().disable_help_subcommand(true);
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        // `mut_args` keeps the arguments in place (`mut_arg` moves the one it
        // changes to the end, which renumbers positionals).
        cmd = cmd.mut_subcommand(&name, |sub| {
            sub.mut_args(|a| {
                if matches!(a.get_id().as_str(), "session" | "sessions") {
                    a.add(ids.clone())
                } else {
                    a
                }
            })
        });
    }
    let mut words = words;
    if words.is_empty() {
        words.push("git-session".into());
    }
    // Completing a new word after the last one typed.
    while words.len() <= index {
        words.push(OsString::new());
    }
    clap_complete::engine::complete(&mut cmd, words, index, Some(&env.cwd))
        .unwrap_or_default()
        .into_iter()
        .filter(|c| !c.is_hide_set())
        .collect()
}

const BASH: &str = r#"# bash completion for git session (git-session completions bash)
# git's own completion calls _git_session for `git session ...`.
_git_session() {
    local i start=0 cur_words cur_index
    if [[ -n ${words+x} && -n ${cword+x} ]]; then
        cur_words=("${words[@]}"); cur_index=$cword
    else
        cur_words=("${COMP_WORDS[@]}"); cur_index=$COMP_CWORD
    fi
    for ((i = 0; i < cur_index; i++)); do
        if [[ ${cur_words[i]} == session || ${cur_words[i]} == git-session ]]; then
            start=$i
            break
        fi
    done
    local IFS=$'\n'
    COMPREPLY=($(git-session completions --index $((cur_index - start)) -- "${cur_words[@]:start}" 2>/dev/null))
}
complete -o default -F _git_session git-session
"#;

const ZSH: &str = r#"#compdef git-session
# zsh completion for git session (git-session completions zsh)
_git-session() {
    local i start=1
    for ((i = 1; i < CURRENT; i++)); do
        if [[ $words[i] == session || $words[i] == git-session ]]; then
            start=$i
            break
        fi
    done
    local -a candidates
    candidates=("${(@f)$(git-session completions --index $((CURRENT - start)) -- "${(@)words[start,-1]}" 2>/dev/null)}")
    compadd -a candidates
}
zstyle ':completion:*:*:git:*' user-commands session:'keep coding-agent sessions in git'
if [[ $funcstack[1] == _git-session ]]; then
    _git-session "$@"
else
    compdef _git-session git-session
fi
"#;

const FISH: &str = r#"# fish completion for git session (git-session completions fish)
function __git_session_complete
    set -l tokens (commandline -opc) (commandline -ct)
    set -l start (contains -i -- session $tokens)
    or set start (contains -i -- git-session $tokens)
    or return
    set -l words $tokens[$start..-1]
    git-session completions fish --index (math (count $words) - 1) -- $words 2>/dev/null
end
complete -c git -n '__fish_use_subcommand' -f -a session -d 'keep coding-agent sessions in git'
complete -c git -n '__fish_seen_subcommand_from session' -f -a '(__git_session_complete)'
complete -c git-session -f -a '(__git_session_complete)'
"#;
