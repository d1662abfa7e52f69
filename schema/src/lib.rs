//! The canonical git-session model: the session header, the event envelope,
//! artifacts and the JSONL codec that turns them into the bytes we store.
//!
//! This crate is plain data. It never touches a disk, a clock, a process or
//! the environment (see `clippy.toml`); callers hand it bytes and values and
//! get bytes and values back. Everything that is hashed or stored is defined
//! here, so the wire format has exactly one home.

#![warn(missing_docs)]

pub mod agent;
pub mod artifact;
pub mod codec;
pub mod event;
pub mod header;
pub mod id;
pub mod json;
pub mod kinds;
pub mod meta;
pub mod receipt;

pub use agent::Agent;
pub use artifact::ArtifactId;
pub use codec::{CodecError, Record};
pub use event::{ContentBody, Event, Level, Origin};
pub use header::{
    FORMAT_VERSION, FormatError, Lineage, NEWEST_FORMAT, SEALED_FORMAT, SessionHeader, SpawnedBy,
};
pub use id::{IdError, SessionId};
pub use meta::{Meta, MetaChange, MetaOp};
pub use receipt::{Receipt, ReceiptNote};

/// Returns the JSON Schema of the canonical format: the event envelope, with
/// the header and origin as definitions.
///
/// `schema/event.schema.json` is this value, checked in; a test fails when
/// the types and the file disagree (`SNAPSHOTS=overwrite` rewrites the file).
pub fn json_schema() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let mut event = generator.clone().into_root_schema_for::<Event>();
    let header = generator.into_root_schema_for::<SessionHeader>();
    let mut value = serde_json::to_value(&mut event).expect("schemas serialize");
    let mut header = serde_json::to_value(header).expect("schemas serialize");
    let defs = value
        .as_object_mut()
        .expect("a root schema is an object")
        .entry("$defs")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(h) = header.as_object_mut() {
        let nested = h.remove("$defs");
        h.remove("$schema");
        if let (Some(serde_json::Value::Object(nested)), Some(d)) = (nested, defs.as_object_mut()) {
            d.extend(nested);
        }
        defs["SessionHeader"] = header;
    }
    value["$id"] = "https://git-session.invalid/schema/event.schema.json".into();
    value
}
