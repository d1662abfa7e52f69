//! The canonical git-session model: the session header, the event envelope,
//! artifacts and the JSONL codec that turns them into the bytes we store.
//!
//! This crate is plain data. It never touches a disk, a clock, a process or
//! the environment (see `clippy.toml`); callers hand it bytes and values and
//! get bytes and values back. Everything that is hashed or stored is defined
//! here, so the wire format has exactly one home.

pub mod agent;
pub mod artifact;
pub mod codec;
pub mod event;
pub mod header;
pub mod id;
pub mod kinds;

pub use agent::Agent;
pub use artifact::ArtifactId;
pub use codec::{CodecError, Record};
pub use event::{Event, Level, Origin};
pub use header::{FORMAT_VERSION, FormatError, Lineage, SessionHeader};
pub use id::{IdError, SessionId};
