//! Guards `schema/event.schema.json` against drifting from the Rust types.

#![allow(clippy::disallowed_methods)]

use std::path::Path;

#[test]
fn checked_in_schema_matches_the_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("event.schema.json");
    let mut generated = serde_json::to_string_pretty(&git_session_schema::json_schema()).unwrap();
    generated.push('\n');
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "schema/event.schema.json is out of date with the types; run `UPDATE_GOLDEN=1 cargo test -p git-session-schema` and review the diff"
    );
}

#[test]
fn schema_requires_the_envelope_fields() {
    let schema = git_session_schema::json_schema();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for field in ["seq", "ts", "agent", "actor", "type", "level"] {
        assert!(required.contains(&field), "{field} not required");
    }
    assert!(schema["$defs"]["SessionHeader"].is_object());
}
