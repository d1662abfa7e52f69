//! Storage at scale: what keeps the user's own git fast as sessions grow
//! (the `-delta` attribute for event chunks, packs every N batches and
//! before a push, never more than a bounded number of loose objects).

use crate::support::*;

/// Loose objects as `git count-objects` counts them.
fn loose(repo: &Repo) -> u64 {
    let out = repo.git(&["count-objects", "-v"]);
    out.lines()
        .find_map(|l| l.strip_prefix("count: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn packs(repo: &Repo) -> usize {
    std::fs::read_dir(repo.root.join(".git/objects/pack"))
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "pack"))
            })
            .count()
        })
        .unwrap_or(0)
}

fn append_batches(repo: &Repo, id: &str, n: usize) {
    for round in 0..n {
        let file = repo.write_jsonl(&format!("batch-{round}.jsonl"), &[event(0), event(1)]);
        repo.ok(&["append", id, file.to_str().unwrap()]);
    }
}

#[test]
fn captures_pack_every_n_batches_so_loose_objects_stay_bounded() {
    let repo = Repo::new();
    repo.git(&["config", "session.packBatches", "10"]);
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-pack", 3)));
    append_batches(&repo, "s-pack", 44);
    // 45 batches of about five objects each: without packing 200+ loose
    // objects; with a pack every 10 batches at most 10 batches' worth
    // (plus the code commit's few) are ever loose.
    let count = loose(&repo);
    assert!(count <= 60, "{count} loose objects after 45 batches");
    assert!(packs(&repo) >= 4, "{} packs", packs(&repo));
    // Everything is still there and reads back.
    repo.fsck();
    repo.ok(&["verify", "s-pack"]);
    assert_eq!(repo.events("s-pack").len(), 3 + 44 * 2);
    // An empty pack is never left behind when everything was packed already.
    let before = packs(&repo);
    repo.git(&["gc", "-q"]);
    let after_gc = packs(&repo);
    append_batches(&repo, "s-pack", 10);
    assert!(packs(&repo) <= after_gc + 1, "{before} -> {}", packs(&repo));
}

/// The pack step packs git-session's refs too (a loose ref file per
/// session is an open per session for `list`), never the user's; a
/// session updated or removed after it reads and goes as before.
#[test]
fn the_pack_step_packs_session_refs_and_leaves_the_users_alone() {
    let repo = Repo::new();
    repo.git(&["config", "session.packBatches", "3"]);
    repo.git(&["branch", "users-own"]);
    for s in ["s-one", "s-two", "s-three"] {
        repo.import(&repo.write_jsonl(&format!("{s}.jsonl"), &session_lines(s, 3)));
    }
    let git_dir = repo.root.join(".git");
    let packed = std::fs::read_to_string(git_dir.join("packed-refs")).unwrap_or_default();
    for s in ["s-one", "s-two", "s-three"] {
        assert!(
            packed.contains(&format!(" refs/sessions/{s}\n")),
            "{packed}"
        );
        assert!(
            !git_dir.join("refs/sessions").join(s).exists(),
            "{s} still loose"
        );
    }
    assert!(!packed.contains("users-own"), "{packed}");
    assert!(git_dir.join("refs/heads/users-own").exists());
    // Appending to a packed session, and removing one, work as before.
    append_batches(&repo, "s-one", 1);
    assert_eq!(repo.events("s-one").len(), 5);
    repo.ok(&["rm", "s-two"]);
    let listed = repo.ok(&["list"]);
    assert!(
        listed.contains("s-one") && listed.contains("s-three"),
        "{listed}"
    );
    assert!(!listed.contains("s-two"), "{listed}");
    assert_eq!(
        repo.git(&["for-each-ref", "--format=%(refname)", "refs/sessions/"]),
        "refs/sessions/s-one\nrefs/sessions/s-three"
    );
    repo.fsck();
}

#[test]
fn zero_pack_batches_leaves_objects_loose() {
    let repo = Repo::new();
    repo.git(&["config", "session.packBatches", "0"]);
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-loose", 3)));
    append_batches(&repo, "s-loose", 12);
    assert_eq!(packs(&repo), 0);
    assert!(loose(&repo) > 50);
}

#[test]
fn a_garbled_pack_state_file_is_rebuilt() {
    let repo = Repo::new();
    repo.git(&["config", "session.packBatches", "3"]);
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-state", 3)));
    let state = repo.root.join(".git/session/pack-pending");
    std::fs::write(&state, b"\xff\xfenot a count\nzzzz\n\x1b[31m\n").unwrap();
    append_batches(&repo, "s-state", 3);
    assert!(packs(&repo) >= 1);
    let text = std::fs::read_to_string(&state).unwrap();
    assert!(text.starts_with("0\n"), "{text:?}");
    repo.fsck();
    repo.ok(&["verify", "s-state"]);
}

#[test]
fn the_first_batch_keeps_chunks_out_of_delta_search_and_init_undoes_it() {
    let repo = Repo::new();
    let attributes = repo.root.join(".git/info/attributes");
    // The user's own lines, without a final newline, are kept.
    std::fs::write(&attributes, "*.bin binary").unwrap();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-attr", 3)));
    let chunk = repo.git(&["ls-tree", "-r", "--name-only", "refs/sessions/s-attr"]);
    let chunk = chunk.lines().find(|p| p.starts_with("events/")).unwrap();
    assert_eq!(
        repo.git(&["check-attr", "delta", "--", chunk]).trim(),
        format!("{chunk}: delta: unset")
    );
    // Pathnames that are not chunks keep git's default.
    assert_eq!(
        repo.git(&["check-attr", "delta", "--", "events/notes.jsonl"])
            .trim(),
        "events/notes.jsonl: delta: unspecified"
    );
    let text = std::fs::read_to_string(&attributes).unwrap();
    assert!(text.starts_with("*.bin binary\n"), "{text:?}");
    append_batches(&repo, "s-attr", 2);
    repo.ok(&["init"]);
    let text = std::fs::read_to_string(&attributes).unwrap();
    assert_eq!(
        text.matches("events/*/*/*.jsonl -delta").count(),
        1,
        "{text}"
    );
    repo.ok(&["init", "--uninstall"]);
    assert_eq!(
        std::fs::read_to_string(&attributes).unwrap(),
        "*.bin binary\n"
    );
}

#[test]
fn push_sends_packed_session_objects() {
    let repo = Repo::new();
    let remote = repo.outside("remote.git");
    repo.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    repo.git(&[
        "remote",
        "add",
        "origin",
        &format!("file://{}", remote.display()),
    ]);
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-push", 50)));
    assert!(loose(&repo) >= 4);
    repo.ok(&["push", "--to", "origin"]);
    // The session's objects were packed before the push: none is loose.
    let tip = repo.git(&["rev-parse", "refs/sessions/s-push"]);
    let objects = repo.git(&["rev-list", "--objects", "refs/sessions/s-push"]);
    for line in objects.lines() {
        let oid = line.split(' ').next().unwrap();
        let path = repo
            .root
            .join(".git/objects")
            .join(&oid[..2])
            .join(&oid[2..]);
        assert!(!path.exists(), "{oid} ({line}) is still loose");
    }
    let theirs = repo.git(&[
        "--git-dir",
        remote.to_str().unwrap(),
        "rev-parse",
        "refs/sessions/s-push",
    ]);
    assert_eq!(theirs.trim(), tip.trim());
}

fn list_json(repo: &Repo) -> serde_json::Value {
    serde_json::from_str(&repo.ok(&["list", "--json"])).unwrap()
}

#[test]
fn list_uses_a_local_index_that_follows_the_refs() {
    let repo = Repo::new();
    for id in ["s-one", "s-two", "s-three"] {
        repo.import(&repo.write_jsonl(&format!("{id}.jsonl"), &session_lines(id, 3)));
    }
    let index = repo.root.join(".git/session/list-index.json");
    let _ = std::fs::remove_file(&index);
    let first = list_json(&repo);
    assert_eq!(first.as_array().unwrap().len(), 3);
    assert!(index.is_file(), "list leaves its summary index");
    // Unchanged refs: the same answer.
    assert_eq!(list_json(&repo), first);
    // A moved ref is read from git again.
    append_batches(&repo, "s-two", 1);
    let moved = list_json(&repo);
    let two = moved
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "s-two")
        .unwrap();
    assert_eq!(two["events"], 5);
    // A removed session disappears even though the index still names it.
    repo.git(&["update-ref", "-d", "refs/sessions/s-one"]);
    let names: Vec<String> = list_json(&repo)
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["s-three", "s-two"]);
    // Missing, it is rebuilt with the same answer.
    let truth = list_json(&repo);
    std::fs::remove_file(&index).unwrap();
    assert_eq!(list_json(&repo), truth);
    assert!(index.is_file());
}

/// The index also holds what `list` derives from the events (title, last
/// event time) and the metadata with its ref's tip, so a session whose
/// refs did not move is listed without opening an object; a moved
/// metadata ref (a tag, a title) is read again though the session's own
/// tip stayed.
#[test]
fn the_list_index_holds_titles_and_metadata_and_follows_the_metadata_refs() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-meta", 3)));
    let first = list_json(&repo);
    let index_path = repo.root.join(".git/session/list-index.json");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index_path).unwrap()).unwrap();
    let entry = &index["sessions"][0];
    assert!(
        entry["derived"].is_object() && entry.get("meta").is_some(),
        "{entry}"
    );
    assert_eq!(entry["derived"]["last_event"], first[0]["updated"]);
    assert_eq!(list_json(&repo), first);
    // The metadata moves, the session's tip does not.
    repo.ok(&["tag", "s-meta", "urgent"]);
    repo.ok(&["title", "s-meta", "Fix the login bug"]);
    let tagged = list_json(&repo);
    assert_eq!(tagged[0]["tags"], serde_json::json!(["urgent"]));
    assert_eq!(tagged[0]["title"], "Fix the login bug");
    assert_eq!(tagged[0]["events"], first[0]["events"]);
    // The same again from the index, and after a rebuild.
    assert_eq!(list_json(&repo), tagged);
    std::fs::remove_file(&index_path).unwrap();
    assert_eq!(list_json(&repo), tagged);
    // A metadata ref removed (purged) is not listed from the index.
    repo.git(&["update-ref", "-d", "refs/session-meta/s-meta"]);
    let bare = list_json(&repo);
    assert_eq!(bare[0]["tags"], serde_json::json!([]));
    assert_ne!(bare[0]["title"], "Fix the login bug");
}

/// `compile` keeps the o200k table under the state directory and later
/// processes count from it, with the same output; a stored table that is
/// damaged is refused and written again, never trusted.
#[test]
fn compile_keeps_a_verified_tokenizer_table() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-tok", 40)));
    let table = repo.root.join(".git/session/cache/o200k_base.table");
    let args = ["compile", "s-tok", "--for", "codex", "--budget", "3000"];
    let first = repo.ok(&args);
    assert!(table.is_file(), "the first compile stores the table");
    let stored = std::fs::read(&table).unwrap();
    assert_eq!(repo.ok(&args), first, "counted from the stored table");
    for damage in [
        stored[..stored.len() / 3].to_vec(),
        b"GSBPE01\n\x05\x00\x00\x00 not a table".to_vec(),
        {
            let mut b = stored.clone();
            let at = b.len() - 7;
            b[at] ^= 0x40;
            b
        },
    ] {
        std::fs::write(&table, &damage).unwrap();
        assert_eq!(repo.ok(&args), first);
        assert_eq!(
            std::fs::read(&table).unwrap(),
            stored,
            "a refused table is written again"
        );
    }
}

#[test]
fn a_hostile_list_index_never_adds_or_breaks_sessions() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-real", 3)));
    let truth = list_json(&repo);
    let index = repo.root.join(".git/session/list-index.json");
    let hdr = |id: &str| header(id)["header"].clone();
    for garbage in [
        b"\xff\xfe\x00not json".to_vec(),
        br#"{"version":1,"sessions":[{"id":"../../etc","tip":"x"}]}"#.to_vec(),
        serde_json::to_vec(&serde_json::json!({"version": 1, "sessions": [
            {"id": "s-phantom", "tip": "0000000000000000000000000000000000000001",
             "events": 9, "updated": 0, "code_commit": null, "header": hdr("s-phantom")},
            {"id": "s-real", "tip": "0000000000000000000000000000000000000002",
             "events": 999, "updated": 0, "code_commit": "zz", "header": hdr("s-real")},
        ]}))
        .unwrap(),
        serde_json::to_vec(&serde_json::json!({"version": 99, "sessions": []})).unwrap(),
    ] {
        std::fs::write(&index, &garbage).unwrap();
        assert_eq!(list_json(&repo), truth, "with index {:?}", text(&garbage));
    }
}

/// A Claude home holding `n` copies of the roundtrip session under fresh
/// ids, recorded as run in `repo`.
fn many_claude_sessions(repo: &Repo, n: usize) -> std::path::PathBuf {
    let source = repo.outside("many");
    copy_tree(
        &fixtures().join("claude/roundtrip/native"),
        &source.join(".claude"),
        "/tmp/oracle-sample/claude/project",
        repo.root.to_str().unwrap(),
    );
    let old = "d05046d2-74b1-4451-90dc-37fbd42c25e6";
    let project = std::fs::read_dir(source.join(".claude/projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = project.join(format!("{old}.jsonl"));
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    for i in 0..n {
        let id = format!("{i:08x}-0000-4000-8000-{i:012x}");
        std::fs::write(project.join(format!("{id}.jsonl")), text.replace(old, &id)).unwrap();
    }
    source
}

fn session_count(repo: &Repo) -> usize {
    repo.git(&["for-each-ref", "refs/sessions/"])
        .lines()
        .count()
}

#[test]
fn a_first_import_of_many_sessions_writes_packs_not_loose_objects() {
    let repo = Repo::new();
    // Redaction is not what is tested here, and slow in a debug build.
    repo.git(&["config", "session.redact", "false"]);
    let home = many_claude_sessions(&repo, 70);
    let loose_before = loose(&repo);
    repo.ok(&[
        "import",
        "--agent",
        "claude",
        "--home",
        home.to_str().unwrap(),
    ]);
    assert_eq!(session_count(&repo), 70);
    // One batch per session, five objects or more each: 350+ loose
    // objects batch by batch (no periodic pack before 100 batches); the
    // bulk capture packs them.
    let loose_after = loose(&repo);
    assert!(
        loose_after <= loose_before + 5,
        "{loose_before} -> {loose_after} loose objects"
    );
    assert!(packs(&repo) >= 1);
    repo.fsck();
    repo.ok(&["verify"]);
    let id = "00000045-0000-4000-8000-000000000045";
    assert!(!repo.events(id).is_empty());
    // Nothing is read twice, and a grown session is appended as before.
    let again = repo.ok(&[
        "import",
        "--agent",
        "claude",
        "--home",
        home.to_str().unwrap(),
    ]);
    assert_eq!(session_count(&repo), 70, "{again}");
    let events = repo.events(id).len();
    let file = home
        .join(".claude/projects")
        .read_dir()
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join(format!("{id}.jsonl"));
    let text = std::fs::read_to_string(&file).unwrap();
    let last = text.lines().last().unwrap().to_owned();
    let grown = last.replace("\"uuid\":\"", "\"uuid\":\"0000aaaa-");
    std::fs::write(&file, format!("{text}{grown}\n")).unwrap();
    repo.ok(&[
        "import",
        "--agent",
        "claude",
        "--home",
        home.to_str().unwrap(),
    ]);
    assert!(repo.events(id).len() > events);
    repo.fsck();
}

/// A first import of more sessions than one flush holds (256 refs, see
/// `store::bulk`) writes a pack per flush; the capture then merges them:
/// one pack, every session readable, `git fsck` clean.
#[test]
fn a_first_import_of_many_sessions_leaves_one_pack() {
    let repo = Repo::new();
    repo.git(&["config", "session.redact", "false"]);
    let home = many_claude_sessions(&repo, 300);
    let out = repo.ok(&[
        "import",
        "--agent",
        "claude",
        "--home",
        home.to_str().unwrap(),
    ]);
    assert_eq!(session_count(&repo), 300, "{out}");
    assert_eq!(packs(&repo), 1, "{out}");
    repo.fsck();
    repo.ok(&["verify"]);
    let id = "0000012b-0000-4000-8000-00000000012b";
    assert!(!repo.events(id).is_empty());
}
