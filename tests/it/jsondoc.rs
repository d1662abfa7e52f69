//! docs/json.md against the code: every command with `--json` has a
//! section there, and every field each command prints is named in its
//! command's section (the other way round for `status`, whose whole shape
//! is checked field by field and type by type).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::*;

fn doc() -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.md"))
        .unwrap()
}

/// Returns the text of the section `## <name> …` of docs/json.md, up to
/// the next `## `.
fn section(doc: &str, name: &str) -> Option<String> {
    let mut lines = doc.lines();
    lines.find(|l| {
        l.strip_prefix("## ")
            .and_then(|rest| rest.split_whitespace().next())
            == Some(name)
    })?;
    Some(
        lines
            .take_while(|l| !l.starts_with("## "))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// Collects every object key in `value`, except under the keys in `opaque`
/// (stored events and headers, documented by the event schema).
fn keys(value: &Value, opaque: &[&str], out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                out.insert(k.clone());
                if !opaque.contains(&k.as_str()) {
                    keys(v, opaque, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| keys(v, opaque, out)),
        _ => {}
    }
}

/// Asserts that every key of `value` is quoted in the section of `command`
/// (`sync`'s includes `fetch`'s, which it extends).
fn documented(doc: &str, command: &str, value: &Value, opaque: &[&str]) {
    let mut text =
        section(doc, command).unwrap_or_else(|| panic!("docs/json.md has no ## {command}"));
    if command == "sync" {
        text += &section(doc, "fetch").unwrap();
    }
    let mut found = BTreeSet::new();
    keys(value, opaque, &mut found);
    let missing: Vec<_> = found
        .iter()
        .filter(|k| !text.contains(&format!("\"{k}\"")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/json.md, ## {command}, lacks {missing:?} of {value:#}"
    );
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn every_command_with_json_has_a_section() {
    let doc = doc();
    let mut with_json = Vec::new();
    for sub in git_session::cli::command().get_subcommands() {
        if sub.get_arguments().any(|a| a.get_id() == "json") {
            let name = sub.get_name().to_owned();
            assert!(
                section(&doc, &name).is_some(),
                "`git session {name} --json` has no section in docs/json.md"
            );
            with_json.push(name);
        }
    }
    assert!(with_json.len() >= 18, "{with_json:?}");
    // The list at the top names them all.
    let intro = doc.split("\n## ").next().unwrap().to_owned();
    for name in &with_json {
        assert!(
            intro.contains(&format!("`{name}`")),
            "docs/json.md's list of commands with --json lacks {name}"
        );
    }
}

#[test]
fn every_printed_field_is_documented() {
    let doc = doc();
    let repo = Repo::new();
    let remote = repo.outside("doc-remote.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    let source = claude_home(&repo);
    let src = source.to_str().unwrap();
    let run = |args: &[&str]| parse(&repo.ok(args));

    documented(
        &doc,
        "import",
        &run(&["import", "--home", src, "--json"]),
        &[],
    );
    let canonical = repo.write_jsonl("c.jsonl", &session_lines("s-doc", 3));
    documented(
        &doc,
        "import",
        &run(&[
            "import",
            "--canonical",
            canonical.to_str().unwrap(),
            "--json",
        ]),
        &[],
    );
    documented(&doc, "list", &run(&["list", "--json"]), &[]);
    documented(
        &doc,
        "show",
        &run(&["show", ROUNDTRIP, "--json"]),
        &["header", "events"],
    );
    documented(&doc, "log", &run(&["log", ROUNDTRIP, "--json"]), &[]);
    documented(&doc, "verify", &run(&["verify", "--json"]), &[]);
    documented(&doc, "which", &run(&["which", "HEAD", "--json"]), &[]);
    documented(
        &doc,
        "fork",
        &run(&["fork", "s-doc", "--at", "1", "--id", "s-doc-fork", "--json"]),
        &[],
    );
    let more = repo.write_jsonl("more.jsonl", &[event(3)]);
    documented(
        &doc,
        "append",
        &run(&["append", "s-doc", more.to_str().unwrap(), "--json"]),
        &[],
    );
    let home = repo.outside("home-doc");
    let h = home.to_str().unwrap();
    documented(
        &doc,
        "resume",
        &run(&[
            "resume", ROUNDTRIP, "--agent", "codex", "--home", h, "--json",
        ]),
        &[],
    );
    documented(
        &doc,
        "handoff",
        &run(&["handoff", ROUNDTRIP, "--to", "pi", "--home", h, "--json"]),
        &[],
    );
    documented(
        &doc,
        "search",
        &run(&["search", "-F", "bug", "--json"]),
        &[],
    );
    documented(&doc, "status", &run(&["status", "--json"]), &[]);
    documented(
        &doc,
        "push",
        &run(&["push", "--to", "origin", "--json"]),
        &[],
    );
    documented(&doc, "fetch", &run(&["fetch", "--json"]), &[]);
    documented(&doc, "sync", &run(&["sync", "--json"]), &[]);
    documented(&doc, "redact", &run(&["redact", "--check", "--json"]), &[]);
    documented(&doc, "doctor", &run(&["doctor", "--json"]), &[]);
    documented(&doc, "rm", &run(&["rm", "s-doc-fork", "--json"]), &[]);
}

/// The documented shape of `status --json`, field by field: every field of
/// the section is printed, with the documented type.
#[test]
fn status_json_is_the_documented_shape() {
    let repo = Repo::new();
    captured_claude(&repo);
    repo.ok(&["init"]);
    let s = parse(&repo.ok(&["status", "--json"]));
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let top: Vec<(&str, &str)> = s
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), kind(v)))
        .collect();
    assert_eq!(
        top,
        [
            ("state_dir", "string"),
            ("sessions", "number"),
            ("agents", "array"),
            ("remote", "null"),
            ("fetch_remote", "string"),
            ("fetch_remote_exists", "bool"),
            ("remote_url", "null"),
            ("unpushed", "array"),
            ("git_hooks", "array"),
            ("agent_hooks", "array"),
            ("watch", "null"),
            ("hook_log", "array"),
            ("leads", "array"),
        ]
    );
    assert_eq!(
        s["git_hooks"],
        json!([{"hook": "post-commit", "installed": true}])
    );
    let hooks = s["agent_hooks"].as_array().unwrap();
    assert_eq!(hooks[0]["agent"], "claude");
    assert_eq!(hooks[0]["installed"], false);
    assert!(
        hooks[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("settings.local.json")
    );
    let claude = s["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == "claude")
        .unwrap();
    let fields: Vec<&String> = claude.as_object().unwrap().keys().collect();
    assert_eq!(
        fields,
        [
            "agent", "store", "present", "tracked", "sessions", "changed", "unseen"
        ]
    );
    assert_eq!(
        s["unpushed"][0],
        json!({"session": ROUNDTRIP, "batches": 1, "on_remote": false, "diverged": false,
               "replaced": false})
    );
    // A handoff moves the lead: `leads` has a row.
    let home = repo.outside("codex-home");
    repo.ok(&[
        "handoff",
        ROUNDTRIP,
        "--to",
        "codex",
        "--home",
        home.to_str().unwrap(),
    ]);
    let s = parse(&repo.ok(&["status", "--json"]));
    let lead = &s["leads"][0];
    assert_eq!(
        (
            lead["session"].as_str(),
            lead["owner"].as_str(),
            lead["key"].as_str()
        ),
        (Some(ROUNDTRIP), Some("codex"), None)
    );
    assert!(
        lead["handoff_seq"].is_u64() && lead["foreign"] == json!([]),
        "{lead}"
    );
    // Every field the section names is one status prints (`foreign` rows
    // are empty here; tests/it/lifecycle.rs makes one).
    let text = section(&doc(), "status").unwrap();
    let mut printed = BTreeSet::new();
    keys(&s, &[], &mut printed);
    printed.extend(["agent", "first", "last"].map(String::from));
    for (at, quoted) in quoted_keys(&text) {
        assert!(
            printed.contains(quoted),
            "docs/json.md, ## status, names {quoted:?} (at byte {at}), which status does not print"
        );
    }
}

/// Returns the quoted names in `text` that stand where a key does (after
/// `{` or `,`), with their offsets.
fn quoted_keys(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut rest = 0;
    while let Some(open) = text[rest..].find('"').map(|i| rest + i) {
        let Some(close) = text[open + 1..].find('"').map(|i| open + 1 + i) else {
            break;
        };
        let before = text[..open].trim_end().chars().last();
        if matches!(before, Some('{' | ',')) {
            out.push((open, &text[open + 1..close]));
        }
        rest = close + 1;
    }
    out
}
