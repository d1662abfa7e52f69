//! Keeping secrets out of what is stored and pushed: redaction at the
//! point events are stored ([`redact`], rule set in [`rules`]) and
//! encryption at rest with age ([`encrypt`]; the store decides what is
//! sealed, in `store::crypt`).
//!
//! Signing lives in `crate::sign`.

pub mod encrypt;
pub mod redact;
pub mod rules;

pub use encrypt::{Identities, OpenError, Recipients};
pub use redact::{Finding, Redactor};
