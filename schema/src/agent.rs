//! The agents git-session knows, as the one list every other layer matches on.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Names the coding agent a session or event came from.
///
/// Known agents get a variant so that adapters can be chosen with one
/// exhaustive `match`. Names we do not know (a canonical file written by a
/// newer git-session or another tool) are kept verbatim in [`Agent::Other`]
/// rather than refused, so they survive a read/write cycle unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Agent {
    /// Claude Code (`claude`).
    Claude,
    /// OpenAI Codex CLI (`codex`).
    Codex,
    /// Pi coding agent (`pi`).
    Pi,
    /// Hermes Agent (`hermes`).
    Hermes,
    /// OpenCode (`opencode`).
    Opencode,
    /// DeepSeek Harness (`dsh`).
    Dsh,
    /// git-session itself, for events it authors (handoffs, forks, notes).
    GitSession,
    /// Any other agent name, kept as written.
    Other(String),
}

impl Agent {
    /// Every known agent, in the order they are documented.
    pub const KNOWN: [Agent; 7] = [
        Agent::Claude,
        Agent::Codex,
        Agent::Pi,
        Agent::Hermes,
        Agent::Opencode,
        Agent::Dsh,
        Agent::GitSession,
    ];

    /// Returns the agent's id as used in data and on the command line.
    pub fn as_str(&self) -> &str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Pi => "pi",
            Agent::Hermes => "hermes",
            Agent::Opencode => "opencode",
            Agent::Dsh => "dsh",
            Agent::GitSession => "git-session",
            Agent::Other(name) => name,
        }
    }

    /// Parses an agent id; unknown names become [`Agent::Other`].
    pub fn parse(name: &str) -> Agent {
        Agent::KNOWN
            .iter()
            .find(|a| a.as_str() == name)
            .cloned()
            .unwrap_or_else(|| Agent::Other(name.to_owned()))
    }
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Agent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Agent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<str>::deserialize(d)?;
        Ok(Agent::parse(&name))
    }
}

impl schemars::JsonSchema for Agent {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Agent".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Agent id: claude, codex, pi, hermes, opencode, dsh, git-session, or any other name (kept verbatim).",
            "type": "string",
            "minLength": 1,
            "examples": ["claude", "codex", "pi", "hermes", "opencode", "dsh", "git-session"]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_round_trip_and_unknown_names_are_kept() {
        for agent in Agent::KNOWN {
            assert_eq!(Agent::parse(agent.as_str()), agent);
        }
        let other: Agent = serde_json::from_str("\"gemini\"").unwrap();
        assert_eq!(other, Agent::Other("gemini".into()));
        assert_eq!(serde_json::to_string(&other).unwrap(), "\"gemini\"");
    }
}
