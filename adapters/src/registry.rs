//! The one list of agents and what each declares.
//!
//! Everything agent-specific that the root crate needs comes from here: the
//! names the command line accepts (`--agent`, `--to`, `--for`), where an
//! agent keeps its store and which environment variables move it, which
//! sources to read ([`crate::source::Source`]), the native tool vocabulary,
//! the tokenizer family, and the resume command to print. Adding an agent is
//! its folder under `adapters/src/` and one line in [`ADAPTERS`].

use git_session_schema::Agent;

use crate::Adapter;
use crate::source::Source;

/// Every agent with an adapter, in the order they are documented and
/// listed in help texts. Adding an agent adds one line here.
pub static ADAPTERS: &[&dyn Adapter] = &[
    &crate::claude::Claude,
    &crate::codex::Codex,
    &crate::pi::Pi,
    &crate::opencode::Opencode,
    &crate::hermes::Hermes,
    &crate::dsh::Dsh,
];

/// Declares what an agent is, in data: the registry's row for it.
#[derive(Debug)]
pub struct AgentSpec {
    /// The agent (its id is the name the command line accepts).
    pub agent: Agent,
    /// The product name for messages, e.g. "Claude Code".
    pub display: &'static str,
    /// Environment variables that move the store, for help and `doctor`
    /// (the adapter's [`Adapter::store_root`] applies them).
    pub env: &'static [&'static str],
    /// The default store location, relative to the home directory, for
    /// help and `doctor` (e.g. `.claude`).
    pub default_store: &'static str,
    /// Where the agent's sessions live under the store root.
    pub sources: &'static [Source],
    /// The native tool names by kind. The first name of a kind is the one a
    /// render uses when it maps a foreign call of that kind.
    pub tools: &'static [(ToolKind, &'static str)],
    /// The arguments each native tool takes, by tool name: what a foreign
    /// call's arguments are translated into ([`crate::tools::translate`]).
    /// A name ending in `:s` takes seconds where others take milliseconds
    /// (a `timeout`).
    pub arguments: &'static [(&'static str, &'static [&'static str])],
    /// Which tokenizer budgets context for this agent (`compile --for`,
    /// `handoff --to` count with it).
    pub tokenizer: TokenizerFamily,
    /// The command that resumes a native session, `{id}` standing for the
    /// native session id (e.g. `claude --resume {id}`).
    pub resume: &'static str,
    /// The payload key under which the adapter keeps the agent's own
    /// record of an event (`show` leaves it out of the event's fields).
    pub native_key: &'static str,
    /// Where git-session plugs into the agent: MCP server registration
    /// (`init --mcp`), capture hooks (`init --agent-hooks`), a skill.
    pub integration: Integration,
}

/// Where git-session plugs into an agent's own configuration, in data: the
/// root crate edits the files in the format named here, and knows no agent.
#[derive(Clone, Copy, Debug)]
pub struct Integration {
    /// Where and how the agent registers MCP servers, if it does.
    pub mcp: Option<McpConfig>,
    /// Where and how the agent runs hooks, if git-session can capture
    /// through them.
    pub hooks: Option<HookConfig>,
    /// The project directory of a skill the agent loads (installed with
    /// the hooks), e.g. `.claude/skills/git-session`.
    pub skill: Option<&'static str>,
}

impl Integration {
    /// No integration: `init --mcp` and `--agent-hooks` pass the agent by.
    pub const NONE: Integration = Integration {
        mcp: None,
        hooks: None,
        skill: None,
    };
}

/// Which directory an agent's configuration file is relative to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigDir {
    /// The repository's work tree (project configuration).
    Project,
    /// The agent's store root ([`Adapter::store_root`]: the default store
    /// or the directory its environment variable names).
    Store,
}

/// One configuration file of an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigFile {
    /// What `path` is relative to.
    pub dir: ConfigDir,
    /// The file, `/`-separated.
    pub path: &'static str,
}

/// How an agent registers an MCP server, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpConfig {
    /// A JSON object whose `mcpServers` maps server names to
    /// `{"type": "stdio", "command", "args"}` (e.g. a `.mcp.json`).
    JsonServers(ConfigFile),
    /// A TOML table `[mcp_servers.<name>]` with `command` and `args`.
    TomlServers(ConfigFile),
}

impl McpConfig {
    /// Returns the file the registration goes into.
    pub fn file(&self) -> &ConfigFile {
        match self {
            McpConfig::JsonServers(f) | McpConfig::TomlServers(f) => f,
        }
    }
}

/// How an agent runs hooks, and where they are configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookConfig {
    /// A JSON settings object whose `hooks.<event>` arrays hold groups
    /// `{"matcher"?, "hooks": [{"type": "command", "command"}]}`. The agent
    /// passes a hook its JSON payload (with `cwd`, and for a session start
    /// `source` and `session_id`) on stdin, and adds what a session-start
    /// hook prints as `hookSpecificOutput.additionalContext` to the context.
    JsonEvents {
        /// The settings file.
        file: ConfigFile,
        /// The hooks, in the order they are listed.
        hooks: &'static [Hook],
    },
    /// One program, a top-level `notify = [program, args...]` of a TOML
    /// file, that the agent runs with its JSON payload (with `cwd`) as the
    /// last argument.
    TomlNotify {
        /// The configuration file.
        file: ConfigFile,
        /// The hook the program runs.
        hook: Hook,
    },
}

impl HookConfig {
    /// Returns the file the hooks go into.
    pub fn file(&self) -> &ConfigFile {
        match self {
            HookConfig::JsonEvents { file, .. } | HookConfig::TomlNotify { file, .. } => file,
        }
    }

    /// Returns the hooks, in order.
    pub fn hooks(&self) -> &[Hook] {
        match self {
            HookConfig::JsonEvents { hooks, .. } => hooks,
            HookConfig::TomlNotify { hook, .. } => std::slice::from_ref(hook),
        }
    }
}

/// One hook git-session installs into an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hook {
    /// The agent's event that runs it (e.g. `Stop`; `notify` for a notify
    /// program).
    pub event: &'static str,
    /// The name `git session hook <name>` runs it by, conventionally
    /// `<agent>-<event>`. Installed configurations call it: never rename.
    pub name: &'static str,
    /// What it does.
    pub action: HookAction,
}

/// What an agent hook does when it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookAction {
    /// Captures the agent's sessions, silently.
    Capture,
    /// Prints the brief of the latest other agent's session on the branch
    /// for a new session: only for payloads whose `source` is `matcher`,
    /// which is also the hook's matcher. Installed only with `--brief`.
    Brief {
        /// The session source the hook is for (e.g. `startup`).
        matcher: &'static str,
    },
}

impl AgentSpec {
    /// Returns the agent's command-line name.
    pub fn name(&self) -> &str {
        self.agent.as_str()
    }

    /// Returns the resume command for native session `id`, the id quoted
    /// as one shell word: an id from a fetched session can hold any text
    /// the agent allows, and the user pastes this line into a shell.
    pub fn resume_command(&self, id: &str) -> String {
        self.resume.replace("{id}", &shell_quote(id))
    }

    /// Returns the kind of the native tool `name`, [`ToolKind::Other`] when
    /// the agent has no tool of that name.
    pub fn tool_kind(&self, name: &str) -> ToolKind {
        self.tools
            .iter()
            .find(|(_, n)| *n == name)
            .map_or(ToolKind::Other, |(k, _)| *k)
    }

    /// Returns whether the agent has a tool named `name`.
    pub fn has_tool(&self, name: &str) -> bool {
        self.tools.iter().any(|(_, n)| *n == name)
    }

    /// Returns the argument names native tool `tool` takes (empty when the
    /// registry does not list them).
    pub fn arguments_of(&self, tool: &str) -> &'static [&'static str] {
        self.arguments
            .iter()
            .find(|(t, _)| *t == tool)
            .map_or(&[], |(_, a)| *a)
    }

    /// Returns the agent's own tool for `kind`, if it has one.
    pub fn tool_for(&self, kind: ToolKind) -> Option<&'static str> {
        self.tools.iter().find(|(k, _)| *k == kind).map(|(_, n)| *n)
    }
}

/// Says what a native tool does, across agents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// Runs a shell command.
    Shell,
    /// Reads a file.
    Read,
    /// Writes a whole file.
    Write,
    /// Edits or patches a file.
    Edit,
    /// Searches files or names (grep, glob, ls).
    Search,
    /// Fetches or searches the web.
    Web,
    /// Starts a sub-agent.
    SubAgent,
    /// Keeps a todo list.
    Todo,
    /// Anything else.
    Other,
}

/// Names the tokenizer family that budgets context for an agent; the names
/// are the compiler's `Tokenizer` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerFamily {
    /// OpenAI `o200k_base`, exact for the models Codex runs.
    O200kBase,
    /// A conservative estimate for models whose tokenizer is not public.
    ClaudeEstimate,
}

impl TokenizerFamily {
    /// Returns the compiler's name for it.
    pub fn name(self) -> &'static str {
        match self {
            TokenizerFamily::O200kBase => "o200k_base",
            TokenizerFamily::ClaudeEstimate => "claude_estimate",
        }
    }
}

/// Returns the adapter for `agent`, or `None` for agents without one yet.
pub fn adapter(agent: &Agent) -> Option<&'static dyn Adapter> {
    ADAPTERS.iter().copied().find(|a| a.spec().agent == *agent)
}

/// Returns the adapter whose command-line name is `name`.
pub fn by_name(name: &str) -> Option<&'static dyn Adapter> {
    ADAPTERS.iter().copied().find(|a| a.spec().name() == name)
}

/// Returns the agent hook `git session hook <name>` runs: its adapter,
/// how the agent runs it, and the hook.
pub fn hook(name: &str) -> Option<(&'static dyn Adapter, &'static HookConfig, &'static Hook)> {
    ADAPTERS.iter().copied().find_map(|a| {
        let config = a.spec().integration.hooks.as_ref()?;
        let hook = config.hooks().iter().find(|h| h.name == name)?;
        Some((a, config, hook))
    })
}

/// Returns whether `key` is the payload key under which some adapter
/// keeps an agent's own record.
pub fn is_native_key(key: &str) -> bool {
    ADAPTERS.iter().any(|a| a.spec().native_key == key)
}

/// Returns the command-line names of every agent with an adapter.
pub fn names() -> Vec<&'static str> {
    ADAPTERS.iter().map(|a| a.spec().agent.as_str()).collect()
}

/// Returns what the tool `name` does in whichever agent has it (the first
/// agent in [`ADAPTERS`] that knows the name), for foreign tool calls.
pub fn tool_kind_anywhere(name: &str) -> ToolKind {
    ADAPTERS
        .iter()
        .map(|a| a.spec().tool_kind(name))
        .find(|k| *k != ToolKind::Other)
        .unwrap_or(ToolKind::Other)
}

/// Returns `text` as one shell word (single-quoted unless it needs nothing).
pub fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@".contains(&b))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_adapter_is_listed_once_under_its_agent() {
        let names = names();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "duplicate agent in the registry");
        for a in ADAPTERS {
            assert_eq!(a.agent(), a.spec().agent);
            assert!(adapter(&a.agent()).is_some());
            assert!(by_name(a.spec().name()).is_some());
            assert!(!a.spec().sources.is_empty(), "{} reads nothing", a.agent());
            assert!(a.spec().resume.contains("{id}"));
        }
        assert!(by_name("foo").is_none());
    }

    #[test]
    fn hook_names_are_unique_and_lead_to_their_agent() {
        let mut seen = Vec::new();
        for a in ADAPTERS {
            let Some(config) = &a.spec().integration.hooks else {
                continue;
            };
            assert!(!config.hooks().is_empty(), "{} has no hooks", a.agent());
            for h in config.hooks() {
                assert!(!seen.contains(&h.name), "hook {} twice", h.name);
                seen.push(h.name);
                assert!(h.name.starts_with(&format!("{}-", a.spec().name())));
                let (found, c, same) = hook(h.name).expect("found by name");
                assert_eq!((found.agent(), c, same), (a.agent(), config, h));
            }
        }
        assert!(hook("post-commit").is_none());
        assert!(hook("").is_none());
    }
}
