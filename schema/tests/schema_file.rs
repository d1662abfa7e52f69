//! Guards `schema/event.schema.json` against drifting from the Rust types.

use std::path::Path;

#[test]
fn checked_in_schema_matches_the_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("event.schema.json");
    let mut generated = serde_json::to_string_pretty(&git_session_schema::json_schema()).unwrap();
    generated.push('\n');
    // Out of date with the types: `SNAPSHOTS=overwrite cargo test -p
    // git-session-schema` rewrites it; review the diff.
    snapbox::Assert::new()
        .action_env(snapbox::assert::DEFAULT_ACTION_ENV)
        .eq(generated, snapbox::Data::read_from(&path, None).raw());
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
