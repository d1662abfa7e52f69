//! Keeping secrets out of what is stored and pushed: redaction at the
//! point events are stored ([`redact`], rule set in [`rules`]).
//!
//! Signing lives in `crate::sign` for now; encryption is not built yet.

pub mod redact;
pub mod rules;

pub use redact::{Finding, Redactor};
