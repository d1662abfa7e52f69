//! The canonical interchange file: import, export, idempotence, bad input.

use serde_json::{Value, json};

use crate::support::*;

#[test]
fn import_then_export_returns_identical_events() {
    let repo = Repo::new();
    let mut lines = session_lines("s-roundtrip", 6);
    // An unknown event type, unknown top-level fields and unknown header
    // fields must all survive.
    lines[0]["header"]["future_header_field"] = json!({"x": [1, 2]});
    lines.push(json!({"seq": 6, "ts": "2026-01-01T00:00:06Z", "agent": "codex", "actor": "system",
                      "type": "x.vendor.unknown", "level": 2, "payload": {"b": 1.25, "a": [null, true]},
                      "parent_seq": 3, "future_field": "kept"}));
    let file = repo.write_jsonl("in.jsonl", &lines);
    assert_eq!(repo.import(&file), "s-roundtrip");

    let exported = repo.ok(&["export", "s-roundtrip", "--canonical"]);
    let exported_lines: Vec<Value> = exported
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        exported_lines[0], lines[0],
        "header changed on the way through"
    );
    assert_eq!(exported_lines.len(), lines.len());
    for (got, want) in exported_lines[1..].iter().zip(&lines[1..]) {
        let mut got = got.clone();
        assert!(
            got.as_object_mut()
                .unwrap()
                .remove("checksum")
                .unwrap()
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
        assert_eq!(&got, want);
    }
    // show --json returns the same stored events as export.
    let shown = repo.events("s-roundtrip");
    assert_eq!(shown, exported_lines[1..].to_vec());

    // The export imports into another repository byte for byte.
    let other = Repo::new();
    let path = other.outside("exported.jsonl");
    std::fs::write(&path, &exported).unwrap();
    other.import(&path);
    assert_eq!(
        other.ok(&["export", "s-roundtrip", "--canonical"]),
        exported
    );
    repo.fsck();
    other.fsck();
}

#[test]
fn reimport_is_a_no_op_and_a_longer_file_appends_the_rest() {
    let repo = Repo::new();
    let short = repo.write_jsonl("short.jsonl", &session_lines("s1", 4));
    repo.import(&short);
    let tip = repo.git(&["rev-parse", "refs/sessions/s1"]);
    let out = repo
        .session()
        .args(["import", "--canonical", short.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("up to date"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        repo.git(&["rev-parse", "refs/sessions/s1"]),
        tip,
        "a no-op import moved the ref"
    );

    let long = repo.write_jsonl("long.jsonl", &session_lines("s1", 10));
    repo.import(&long);
    assert_eq!(repo.git(&["rev-list", "--count", "refs/sessions/s1"]), "2");
    assert_eq!(repo.events("s1").len(), 10);

    // A file that disagrees with what is stored is refused.
    let mut diverged = session_lines("s1", 11);
    diverged[3]["payload"]["text"] = json!("something else");
    let file = repo.write_jsonl("diverged.jsonl", &diverged);
    let err = repo.fails(&["import", "--canonical", file.to_str().unwrap()], 1);
    assert!(
        err.contains("diverged.jsonl:4:") && err.contains("differs"),
        "{err}"
    );
    repo.fsck();
}

#[test]
fn malformed_line_aborts_the_import_with_file_and_line() {
    let repo = Repo::new();
    let path = repo.outside("bad.jsonl");
    let mut body: String = session_lines("s-bad", 3)
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    body.push_str("{\"seq\": 3, \"ts\": \"x\", \"agent\": \"claude\"\n");
    std::fs::write(&path, body).unwrap();
    let err = repo.fails(&["import", "--canonical", path.to_str().unwrap()], 1);
    assert!(err.contains("bad.jsonl:5:"), "{err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(
        repo.git(&["for-each-ref", "refs/sessions/"]),
        "",
        "a failed import created a ref"
    );

    // A gap in the seqs names the line too.
    let mut gap = session_lines("s-gap", 3);
    gap[3]["seq"] = json!(7);
    let file = repo.write_jsonl("gap.jsonl", &gap);
    let err = repo.fails(&["import", "--canonical", file.to_str().unwrap()], 1);
    assert!(
        err.contains("gap.jsonl:4:") && err.contains("expected seq 2, found 7"),
        "{err}"
    );

    // A level outside 0..=2 is refused, not stored.
    let mut level = session_lines("s-level", 2);
    level[1]["level"] = json!(5);
    let file = repo.write_jsonl("level.jsonl", &level);
    let err = repo.fails(&["import", "--canonical", file.to_str().unwrap()], 1);
    assert!(
        err.contains("level.jsonl:2:") && err.contains("level must be 0, 1 or 2"),
        "{err}"
    );

    // A file without a header line says what it expected.
    let file = repo.write_jsonl("noheader.jsonl", &[event(0)]);
    let err = repo.fails(&["import", "--canonical", file.to_str().unwrap()], 1);
    assert!(
        err.contains("noheader.jsonl:1:") && err.contains("header"),
        "{err}"
    );
    assert_eq!(repo.git(&["for-each-ref", "refs/sessions/"]), "");
}

#[test]
fn edited_checksums_are_refused_unless_resealed() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-sum", 3)));
    let exported = repo.ok(&["export", "s-sum", "--canonical"]);
    let edited = exported.replace("please fix bug 0", "please fix bug 9");
    assert_ne!(edited, exported);
    let other = Repo::new();
    let path = other.outside("edited.jsonl");
    std::fs::write(&path, &edited).unwrap();
    let err = other.fails(&["import", "--canonical", path.to_str().unwrap()], 1);
    assert!(
        err.contains("edited.jsonl:2:") && err.contains("checksum") && err.contains("--reseal"),
        "{err}"
    );
    other.ok(&["import", "--canonical", path.to_str().unwrap(), "--reseal"]);
    other.ok(&["verify", "s-sum"]);
}

#[test]
fn newer_format_is_refused_with_the_upgrade_message() {
    let repo = Repo::new();
    let mut lines = session_lines("s-new", 1);
    // Format 2 is the encrypted sessions' (read here); 3 is newer.
    lines[0]["header"]["format"] = json!(git_session_schema::NEWEST_FORMAT + 1);
    let file = repo.write_jsonl("new.jsonl", &lines);
    let err = repo.fails(&["import", "--canonical", file.to_str().unwrap()], 1);
    assert!(
        err.contains("written by a newer git-session") && err.contains("upgrade"),
        "{err}"
    );
    assert!(!err.contains("corrupt"), "{err}");

    lines[0]["header"]["format"] = json!(0);
    let file = repo.write_jsonl("old.jsonl", &lines);
    let err = repo.fails(&["import", "--canonical", file.to_str().unwrap()], 1);
    assert!(err.contains("no upgrade path"), "{err}");
}

#[test]
fn artifacts_are_stored_once_and_exported() {
    let repo = Repo::new();
    let png = b"\x89PNG\r\n\x1a\nnot really an image".to_vec();
    let mut artifact_line = Vec::new();
    let id = git_session_schema::ArtifactId::of(&png);
    git_session_schema::codec::encode_artifact_line(&id, &png, &mut artifact_line);
    let artifact: Value = serde_json::from_slice(&artifact_line).unwrap();
    let mut lines = session_lines("s-art", 2);
    lines[1]["refs"] = json!([id.to_ref()]);
    lines[2]["refs"] = json!([id.to_ref()]);
    lines.insert(1, artifact.clone());
    lines.push(artifact);
    repo.import(&repo.write_jsonl("art.jsonl", &lines));
    let tree = repo.git(&["ls-tree", "-r", "--name-only", "refs/sessions/s-art"]);
    let stored: Vec<&str> = tree
        .lines()
        .filter(|l| l.starts_with("artifacts/"))
        .collect();
    assert_eq!(
        stored,
        vec![format!("artifacts/{}/{}", &id.hex()[..2], id.hex())]
    );
    let blob = repo
        .git_in(&repo.root)
        .args([
            "cat-file",
            "blob",
            &format!("refs/sessions/s-art:{}", stored[0]),
        ])
        .output()
        .unwrap();
    assert_eq!(blob.stdout, png);
    let exported = repo.ok(&["export", "s-art", "--canonical"]);
    assert_eq!(
        exported
            .lines()
            .filter(|l| l.starts_with("{\"artifact\""))
            .count(),
        1
    );
    repo.ok(&["verify", "s-art"]);
    repo.fsck();
}

#[test]
fn append_numbers_events_after_the_end() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-app", 2)));
    let mut more: Vec<Value> = (0..3).map(event).collect();
    more[0].as_object_mut().unwrap().remove("seq");
    let file = repo.write_jsonl("more.jsonl", &more);
    assert_eq!(
        repo.ok(&["append", "s-app", file.to_str().unwrap()]).trim(),
        "5"
    );
    let seqs: Vec<u64> = repo
        .events("s-app")
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
    repo.ok(&["verify"]);
}

#[test]
fn a_reference_to_a_missing_artifact_is_refused_at_import() {
    let repo = Repo::new();
    let absent = git_session_schema::ArtifactId::of(b"never stored");
    let mut lines = session_lines("s-dangling", 3);
    lines[2]["refs"] = json!([absent.to_ref()]);
    let file = repo.write_jsonl("dangling.jsonl", &lines);
    let err = repo.fails(&["import", "--canonical", file.to_str().unwrap()], 1);
    assert!(err.contains("dangling.jsonl:3"), "{err}");
    assert!(err.contains(absent.hex()), "{err}");
    assert_eq!(repo.git(&["for-each-ref", "refs/sessions/"]), "");

    // An artifact stored by an earlier batch may be referenced later, by
    // import and by append; one nobody stored may not.
    let png = b"\x89PNG stored once".to_vec();
    let id = git_session_schema::ArtifactId::of(&png);
    let mut artifact_line = Vec::new();
    git_session_schema::codec::encode_artifact_line(&id, &png, &mut artifact_line);
    let mut first = session_lines("s-art2", 1);
    first.push(serde_json::from_slice(&artifact_line).unwrap());
    repo.import(&repo.write_jsonl("first.jsonl", &first));
    let mut later = session_lines("s-art2", 3);
    later[3]["refs"] = json!([id.to_ref()]);
    repo.import(&repo.write_jsonl("later.jsonl", &later));
    let mut bad = vec![event(0)];
    bad[0]["refs"] = json!([absent.to_ref()]);
    let file = repo.write_jsonl("bad-append.jsonl", &bad);
    let err = repo.fails(&["append", "s-art2", file.to_str().unwrap()], 1);
    assert!(err.contains("bad-append.jsonl:1"), "{err}");
    let mut good = vec![event(0)];
    good[0]["refs"] = json!([id.to_ref()]);
    let file = repo.write_jsonl("good-append.jsonl", &good);
    repo.ok(&["append", "s-art2", file.to_str().unwrap()]);
    repo.ok(&["verify"]);
}

#[test]
fn transcript_export_escapes_hostile_agent_text() {
    use base64::Engine;
    use sha2::Digest;
    let repo = Repo::new();
    // A 1x1 PNG, stored as an artifact and referenced by an image event.
    let png = base64::engine::general_purpose::STANDARD
        .decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
        .unwrap();
    let art = format!("sha256:{:x}", sha2::Sha256::digest(&png));
    let hostile =
        "<script>alert(1)</script> \u{1b}]0;pwned\u{7}\u{1b}[2J \u{202e}evil [REDACTED:gitlab-pat]";
    let mut lines = session_lines("s-transcript", 4);
    lines[1]["payload"]["text"] = json!(hostile);
    lines[3]["payload"]["arguments"]["command"] = json!("echo '<img src=x onerror=alert(2)>'");
    lines[4]["payload"]["content"] = json!("```\n</details><script>alert(3)</script>\n````\nend");
    lines.insert(
        1,
        json!({"artifact": {"id": art, "base64": base64::engine::general_purpose::STANDARD.encode(&png)}}),
    );
    let mut image = event(4);
    image["type"] = json!("message.user");
    image["actor"] = json!("user");
    image["payload"] = json!({"image": {"media_type": "image/png", "artifact": art}});
    image["refs"] = json!([art]);
    lines.push(image);
    repo.import(&repo.write_jsonl("t.jsonl", &lines));

    let md = repo.ok(&["export", "s-transcript", "--format", "md"]);
    let html = repo.ok(&["export", "s-transcript", "--format", "html"]);
    // Markdown outside its code fences (inside them nothing is interpreted).
    let mut prose = String::new();
    let mut fence: Option<String> = None;
    for line in md.lines() {
        match &fence {
            Some(f) if line == f => fence = None,
            Some(_) => {}
            None if line.starts_with("```") => {
                fence = Some(line.chars().take_while(|c| *c == '`').collect())
            }
            None => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    assert!(fence.is_none(), "every fence is closed");
    assert_eq!(
        prose.matches("<details>").count(),
        prose.matches("</details>").count(),
        "{prose}"
    );
    for (name, out) in [("md", &md), ("html", &html)] {
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\u{202e}'),
            "{name}: raw control characters"
        );
    }
    for (name, out) in [("md", &prose), ("html", &html)] {
        assert!(
            !out.contains("<script>") && !out.contains("<img src=x"),
            "{name}: {out}"
        );
        assert!(out.contains("&lt;script&gt;alert(1)"), "{name}: {out}");
        assert!(
            out.contains("[REDACTED:gitlab-pat]"),
            "{name}: redaction markers stay visible"
        );
        assert!(out.contains("Tool call: Bash: echo"), "{name}: {out}");
        assert!(out.contains("Looking at bug 1."), "{name}");
    }
    // The tool output cannot close its fence: the fence outruns its backticks.
    assert!(
        md.contains("\n`````text\n```\n</details><script>alert(3)</script>\n````\nend\n`````\n"),
        "{md}"
    );
    // HTML: no script may run, the image is inline.
    assert!(
        html.contains("Content-Security-Policy") && html.contains("default-src 'none'"),
        "{html}"
    );
    assert!(
        html.contains("<img alt=\"image sha256:")
            && html.contains("src=\"data:image/png;base64,iVBOR"),
        "{html}"
    );
    assert!(!html.contains("</details><script>"), "{html}");
    assert!(md.contains(&format!("[image {art} (image/png)]")), "{md}");

    // -o writes the same bytes; export still needs a format.
    let path = repo.outside("t.html");
    repo.ok(&[
        "export",
        "s-transcript",
        "--format",
        "html",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), html);
    repo.fails(&["export", "s-transcript"], 2);
    repo.fails(
        &["export", "s-transcript", "--canonical", "--format", "md"],
        2,
    );
    assert!(
        repo.ok(&["export", "s-transcript", "--format", "canonical"])
            .starts_with("{\"header\"")
    );
}
