//! Encryption at rest (`session.recipients`, `session.identity`): two
//! identities (an age key and an SSH key) and a third party with none,
//! across a push and fetches between clones of one bare remote.

use std::path::{Path, PathBuf};

use age::secrecy::ExposeSecret;
use serde_json::json;

use crate::support::*;

const SECRET_TEXT: &str = "PLAINTEXT-MARKER-7f3a the launch code is under the mat";
const SECRET_TITLE: &str = "TITLE-MARKER-91c2 migrate billing";
const SECRET_CWD: &str = "/home/alice/CWD-MARKER-55d0";
const SECRET_ARTIFACT: &str = "ARTIFACT-MARKER-0b7e large tool output";

struct Team {
    alice: Repo,
    remote: PathBuf,
    alice_age_pub: String,
    bob_key: PathBuf,
    bob_pub: String,
}

fn git_ok(repo: &Repo, dir: &Path, args: &[&str]) -> String {
    let out = repo.git_in(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn session_out(repo: &Repo, dir: &Path, args: &[&str]) -> std::process::Output {
    repo.session_in(dir).args(args).output().unwrap()
}

fn session_ok(repo: &Repo, dir: &Path, args: &[&str]) -> String {
    let out = session_out(repo, dir, args);
    assert!(
        out.status.success(),
        "git session {args:?} in {}: {}",
        dir.display(),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn age_pair(dir: &Path, name: &str) -> (String, PathBuf) {
    let id = age::x25519::Identity::generate();
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "# created by the test\n{}\n",
            id.to_string().expose_secret()
        ),
    )
    .unwrap();
    (id.to_public().to_string(), path)
}

fn ssh_pair(repo: &Repo, dir: &Path, name: &str) -> (String, PathBuf) {
    let path = dir.join(name);
    let out = repo
        .program_in("ssh-keygen", dir)
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "bob@example.com",
            "-f",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
    (public.trim().to_owned(), path)
}

/// Alice's clone encrypts to Alice (age) and Bob (SSH) and holds Alice's
/// identity; her session went to the bare remote.
fn team() -> (Team, String) {
    let alice = Repo::new();
    let keys = alice.outside("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (alice_age_pub, alice_key) = age_pair(&keys, "alice.agekey");
    let (bob_pub, bob_key) = ssh_pair(&alice, &keys, "bob_ed25519");
    let remote = alice.outside("remote.git");
    alice.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    alice.git(&[
        "remote",
        "add",
        "origin",
        &format!("file://{}", remote.display()),
    ]);
    alice.git(&["config", "--add", "session.recipients", &alice_age_pub]);
    alice.git(&["config", "--add", "session.recipients", &bob_pub]);
    alice.git(&["config", "session.identity", alice_key.to_str().unwrap()]);
    let art = SECRET_ARTIFACT.repeat(100);
    let art_id = format!("sha256:{}", sha256_hex(art.as_bytes()));
    let mut first = event(0);
    first["payload"]["text"] = json!(SECRET_TEXT);
    let mut second = event(3);
    second["seq"] = json!(1);
    second["refs"] = json!([format!("artifact:{art_id}")]);
    let lines = vec![
        json!({"header": {"format": 1, "id": "enc-1", "agent": "claude", "native_id": "n-1",
                          "cwd": SECRET_CWD, "created": "2026-01-01T00:00:00Z", "title": SECRET_TITLE}}),
        json!({"artifact": {"id": art_id, "base64": base64_of(art.as_bytes())}}),
        first,
        second,
        event(2)
            .as_object()
            .map(|o| {
                let mut o = o.clone();
                o.insert("seq".into(), json!(2));
                serde_json::Value::Object(o)
            })
            .unwrap(),
    ];
    let file = alice.write_jsonl("enc.jsonl", &lines);
    assert_eq!(alice.import(&file), "enc-1");
    session_ok(&alice, &alice.root, &["push", "--to", "origin"]);
    (
        Team {
            alice,
            remote,
            alice_age_pub,
            bob_key,
            bob_pub,
        },
        "enc-1".to_owned(),
    )
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A clone of the remote that fetched the sessions, with `identity` (or
/// none) as its `session.identity`.
fn clone_with(team: &Team, name: &str, identity: Option<&Path>) -> PathBuf {
    let dir = team.alice.outside(name);
    git_ok(
        &team.alice,
        &team.alice.root,
        &[
            "clone",
            "-q",
            team.remote.to_str().unwrap(),
            dir.to_str().unwrap(),
        ],
    );
    git_ok(&team.alice, &dir, &["config", "session.remote", "origin"]);
    if let Some(id) = identity {
        git_ok(
            &team.alice,
            &dir,
            &["config", "session.identity", id.to_str().unwrap()],
        );
    }
    session_ok(&team.alice, &dir, &["fetch"]);
    dir
}

#[test]
fn a_remote_holds_only_ciphertext_and_recipients_read_it_back() {
    let (team, id) = team();
    // The remote's objects, every one inflated: no marker in any of them.
    let all = git_ok(
        &team.alice,
        &team.remote,
        &["cat-file", "--batch-all-objects", "--batch"],
    );
    for marker in [
        "PLAINTEXT-MARKER-7f3a",
        "TITLE-MARKER-91c2",
        "CWD-MARKER-55d0",
        "ARTIFACT-MARKER-0b7e",
        "launch code",
    ] {
        assert!(
            !all.contains(marker),
            "{marker} reached the remote in clear"
        );
    }
    // What stays clear: the routing fields and the format.
    let header = git_ok(
        &team.alice,
        &team.remote,
        &["show", "refs/sessions/enc-1:header.json"],
    );
    let header: serde_json::Value = serde_json::from_str(&header).unwrap();
    assert_eq!(header["format"], 2);
    assert_eq!(header["id"], "enc-1");
    assert_eq!(header["agent"], "claude");
    assert!(header.get("title").is_none() && header.get("cwd").is_none());

    // Alice (age identity) reads everything locally.
    let shown = team.alice.ok(&["show", &id, "--json"]);
    assert!(shown.contains(SECRET_TEXT), "{shown}");
    let list = team.alice.ok(&["list"]);
    assert!(list.contains("TITLE-MARKER-91c2"), "{list}");
    assert!(team.alice.ok(&["verify", &id]).contains("ok"));

    // Bob (SSH identity, no recipients of his own) reads what he fetched.
    let bob = clone_with(&team, "bob", Some(&team.bob_key));
    let shown = session_ok(&team.alice, &bob, &["show", &id, "--json"]);
    assert!(shown.contains(SECRET_TEXT), "{shown}");
    let export = session_ok(&team.alice, &bob, &["export", "--canonical", &id]);
    assert!(export.contains(&base64_of(SECRET_ARTIFACT.repeat(100).as_bytes())));
    assert!(export.contains(SECRET_CWD), "{export}");
    session_ok(&team.alice, &bob, &["verify", &id]);

    // Carol has no identity: the session syncs and verifies, nothing reads.
    let carol = clone_with(&team, "carol", None);
    let v = session_ok(&team.alice, &carol, &["verify", &id, "--json"]);
    assert!(
        v.contains("\"ok\":true") || v.contains("\"ok\": true"),
        "{v}"
    );
    // Listed as encrypted, not as broken.
    let listed = session_ok(&team.alice, &carol, &["list"]);
    assert!(
        listed.contains(&id) && listed.contains("(encrypted; no key for it here)"),
        "{listed}"
    );
    assert!(!listed.contains("BROKEN"), "{listed}");
    let out = session_out(&team.alice, &carol, &["show", &id]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("encrypted") && err.contains("session.identity"),
        "{err}"
    );
    assert!(!text(&out.stdout).contains("PLAINTEXT-MARKER"));
    // A key that is not a recipient is named as such.
    let keys = team.alice.outside("keys");
    let (_, stranger) = age_pair(&keys, "stranger.agekey");
    git_ok(
        &team.alice,
        &carol,
        &["config", "session.identity", stranger.to_str().unwrap()],
    );
    let out = session_out(&team.alice, &carol, &["show", &id]);
    let err = text(&out.stderr);
    assert!(
        !out.status.success() && err.contains("none of the keys") && err.contains("recipients"),
        "{err}"
    );
    let _ = (&team.alice_age_pub, &team.bob_pub);
}

#[test]
fn a_new_recipient_reads_the_batches_written_after_it_was_added() {
    let (team, id) = team();
    let keys = team.alice.outside("keys");
    let (carol_pub, carol_key) = age_pair(&keys, "carol.agekey");
    team.alice
        .git(&["config", "--add", "session.recipients", &carol_pub]);
    let mut later = event(0);
    later["payload"]["text"] = json!("LATER-MARKER for carol");
    let file = team.alice.write_jsonl("later.jsonl", &[later]);
    team.alice.ok(&["append", &id, file.to_str().unwrap()]);
    session_ok(&team.alice, &team.alice.root, &["push"]);
    let carol = clone_with(&team, "carol", Some(&carol_key));
    let shown = session_ok(&team.alice, &carol, &["show", &id, "--seq", "3", "--json"]);
    assert!(shown.contains("LATER-MARKER"), "{shown}");
    // The first batch was sealed before she was a recipient.
    let out = session_out(&team.alice, &carol, &["show", &id, "--seq", "0", "--json"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("recipients"),
        "{}",
        text(&out.stderr)
    );
    // Structure verifies for her all the same.
    session_ok(&team.alice, &carol, &["verify", &id]);

    // Re-encryption as docs/FORMAT.md gives it: a copy under a new id,
    // sealed to everyone configured now.
    let export = team.alice.ok(&["export", "--canonical", &id]);
    let (first, rest) = export.split_once('\n').unwrap();
    let mut head: serde_json::Value = serde_json::from_str(first).unwrap();
    assert_eq!(head["header"]["format"], 1);
    head["header"]["id"] = json!("enc-2");
    let copy = team.alice.outside("copy.jsonl");
    std::fs::write(&copy, format!("{head}\n{rest}")).unwrap();
    assert_eq!(team.alice.import(&copy), "enc-2");
    team.alice.ok(&["rm", &id]);
    session_ok(&team.alice, &team.alice.root, &["push"]);
    session_ok(&team.alice, &carol, &["fetch"]);
    let shown = session_ok(&team.alice, &carol, &["show", "enc-2", "--json"]);
    assert!(shown.contains(SECRET_TEXT), "{shown}");
}

/// Replaces the session's one chunk by `change(chunk)` in a new root
/// commit with the same message, as a hostile remote could.
fn tamper(repo: &Repo, dir: &Path, id: &str, change: impl Fn(Vec<u8>) -> Vec<u8>) {
    let tip = git_ok(repo, dir, &["rev-parse", &format!("refs/sessions/{id}")]);
    let tip = tip.trim();
    let listing = git_ok(repo, dir, &["ls-tree", "-r", tip]);
    let (path, blob) = listing
        .lines()
        .find_map(|l| {
            let (meta, path) = l.split_once('\t')?;
            path.starts_with("events/").then(|| {
                (
                    path.to_owned(),
                    meta.split_whitespace().nth(2).unwrap().to_owned(),
                )
            })
        })
        .unwrap();
    let out = repo
        .git_in(dir)
        .args(["cat-file", "blob", &blob])
        .output()
        .unwrap();
    let changed = change(out.stdout);
    let new_blob = text(
        &repo
            .git_in(dir)
            .args(["hash-object", "-w", "--stdin"])
            .write_stdin(changed)
            .output()
            .unwrap()
            .stdout,
    );
    let index = dir.join(".git/tamper-index");
    let with_index = |args: &[&str]| {
        let out = repo
            .git_in(dir)
            .env("GIT_INDEX_FILE", &index)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    with_index(&["read-tree", tip]);
    with_index(&[
        "update-index",
        "--cacheinfo",
        &format!("100644,{},{path}", new_blob.trim()),
    ]);
    let tree = with_index(&["write-tree"]);
    std::fs::remove_file(&index).unwrap();
    let message = git_ok(repo, dir, &["log", "-1", "--format=%B", tip]);
    let commit = git_ok(
        repo,
        dir,
        &["commit-tree", tree.trim(), "-m", message.trim_end()],
    );
    git_ok(
        repo,
        dir,
        &["update-ref", &format!("refs/sessions/{id}"), commit.trim()],
    );
}

fn reseal_hash(mut blob: Vec<u8>, flip_at_end: bool) -> Vec<u8> {
    let nl = blob.iter().position(|&b| b == b'\n').unwrap();
    if flip_at_end {
        let at = blob.len() - 20;
        blob[at] ^= 0x01;
    }
    let prefix = b"git-session-sealed/1 ";
    let mut clear: serde_json::Value = serde_json::from_slice(&blob[prefix.len()..nl]).unwrap();
    clear["sha256"] = json!(sha256_hex(&blob[nl + 1..]));
    let mut out = prefix.to_vec();
    out.extend_from_slice(clear.to_string().as_bytes());
    out.push(b'\n');
    out.extend_from_slice(&blob[nl + 1..]);
    out
}

#[test]
fn tampered_ciphertext_is_refused_not_misread() {
    let (team, id) = team();
    let bob = clone_with(&team, "bob", Some(&team.bob_key));
    // A flipped byte with the clear hash fixed up: only age's
    // authentication can tell, and it does.
    tamper(&team.alice, &bob, &id, |b| reseal_hash(b, true));
    let out = session_out(&team.alice, &bob, &["show", &id, "--json"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("does not authenticate") && err.contains("refused"),
        "{err}"
    );
    assert!(!text(&out.stdout).contains("PLAINTEXT-MARKER"));
    let out = session_out(&team.alice, &bob, &["verify", &id]);
    assert!(!out.status.success(), "{}", text(&out.stdout));

    // A flipped byte left as is: caught without any identity.
    let carol = clone_with(&team, "carol", None);
    tamper(&team.alice, &carol, &id, |mut b| {
        let at = b.len() - 20;
        b[at] ^= 0x01;
        b
    });
    let out = session_out(&team.alice, &carol, &["verify", &id]);
    assert!(!out.status.success());
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(all.contains("SHA-256"), "{all}");
}

#[test]
fn bad_key_settings_are_named() {
    let repo = Repo::new();
    repo.git(&["config", "session.recipients", "age1notakey"]);
    let file = repo.write_jsonl("s.jsonl", &session_lines("bad-1", 2));
    let err = repo.fails(&["import", "--canonical", file.to_str().unwrap()], 1);
    assert!(err.contains("session.recipients"), "{err}");
    // Nothing was written.
    assert!(
        repo.git(&["for-each-ref", "refs/sessions/"])
            .trim()
            .is_empty()
    );
    repo.git(&["config", "--unset", "session.recipients"]);
    repo.git(&["config", "session.identity", "/nonexistent/key"]);
    repo.import(&file);
    // A plain session reads without touching the identity.
    assert_eq!(repo.events("bad-1").len(), 2);
}

#[test]
fn local_commands_read_an_encrypted_session_through_the_identity() {
    let (team, id) = team();
    let a = &team.alice;
    let found = a.ok(&["search", "launch code"]);
    assert!(found.contains(&id), "{found}");
    let brief = a.ok(&["compile", &id, "--for", "codex"]);
    assert!(brief.contains("launch code"), "{brief}");
    // A fork inside the first chunk: the kept lines are sealed again.
    let fork = a.ok(&["fork", &id, "--at", "0", "--id", "enc-fork"]);
    assert!(fork.contains("enc-fork"), "{fork}");
    let shown = a.ok(&["show", "enc-fork", "--json"]);
    assert!(shown.contains(SECRET_TEXT), "{shown}");
    assert_eq!(a.events("enc-fork").len(), 1);
    a.ok(&["verify", "enc-fork"]);
    let header = a.git(&["show", "refs/sessions/enc-fork:header.json"]);
    assert!(
        header.contains("\"format\": 2") && !header.contains("TITLE-MARKER"),
        "{header}"
    );
    // Not even the local objects hold the plaintext (the search index is
    // local state outside git objects).
    let all = a.git(&["cat-file", "--batch-all-objects", "--batch"]);
    assert!(!all.contains("PLAINTEXT-MARKER") && !all.contains("TITLE-MARKER"));
    // A handoff, its receipt pushed with the session.
    let home = a.outside("codex-home");
    a.ok(&[
        "handoff",
        &id,
        "--to",
        "codex",
        "--home",
        home.to_str().unwrap(),
    ]);
    a.ok(&["push"]);
    // The third party's verify says what it could not open; the receipt's
    // handoff event is sealed too, which is no fault of the session.
    let carol = clone_with(&team, "carol", None);
    let v = session_ok(a, &carol, &["verify", &id]);
    assert!(v.contains("structure only"), "{v}");
    assert!(
        v.contains("not matched with the log: the session is encrypted"),
        "{v}"
    );
    // Search skips what it cannot open instead of failing (nothing found:
    // exit 1, as git grep).
    let found = session_out(a, &carol, &["search", "launch code"]);
    assert_eq!(found.status.code(), Some(1), "{}", text(&found.stderr));
    assert!(!text(&found.stdout).contains("launch code"));
}
