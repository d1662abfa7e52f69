//! git-session: coding-agent sessions as append-only histories inside the
//! project's own git repository.
//!
//! Layers, each depending only on the ones below it:
//! `cli` (parse, call one op, print) → `ops` (use cases) → `store` (the only
//! code that touches git; it redacts what it writes with `security`) →
//! `git_session_schema` (pure data). See `docs/ARCHITECTURE.md`.

#[cfg(test)]
mod agent_names;
pub mod cli;
pub mod clock;
pub mod config;
pub mod hooks;
pub mod mcp;
pub mod native;
pub mod ops;
pub mod security;
pub mod sign;
pub mod store;
