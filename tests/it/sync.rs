//! Sync over an ordinary bare remote (`file://`) between two clones.

use std::path::{Path, PathBuf};

use crate::support::*;

struct Clones {
    a: Repo,
    b: PathBuf,
    remote: PathBuf,
}

impl Clones {
    fn new() -> Clones {
        let a = Repo::new();
        let remote = a.outside("remote.git");
        a.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
        a.git(&[
            "remote",
            "add",
            "origin",
            &format!("file://{}", remote.display()),
        ]);
        a.git(&["push", "-q", "origin", "main"]);
        let b = a.outside("clone-b");
        a.git(&["clone", "-q", remote.to_str().unwrap(), b.to_str().unwrap()]);
        // Both clones chose origin for sessions.
        a.git(&["config", "session.remote", "origin"]);
        a.git_in(&b)
            .args(["config", "session.remote", "origin"])
            .output()
            .unwrap();
        Clones { a, b, remote }
    }

    fn on(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.a.session_in(dir).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "git session {args:?} in {}: {}",
            dir.display(),
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    fn refs(&self, dir: &Path) -> String {
        let out = self
            .a
            .git_in(dir)
            .args([
                "for-each-ref",
                "--format=%(refname) %(objectname)",
                "refs/sessions/",
            ])
            .output()
            .unwrap();
        text(&out.stdout)
    }

    fn events(&self, dir: &Path, id: &str) -> Vec<serde_json::Value> {
        let v: serde_json::Value =
            serde_json::from_str(&self.on(dir, &["show", id, "--json"])).unwrap();
        v["events"].as_array().unwrap().clone()
    }

    fn append(&self, dir: &Path, id: &str, tag: &str, n: usize) {
        let lines: Vec<serde_json::Value> = (0..n)
            .map(|i| {
                let mut e = event(0);
                e["payload"]["text"] = format!("{tag} {i}").into();
                e
            })
            .collect();
        let file = self.a.write_jsonl(&format!("{tag}.jsonl"), &lines);
        self.on(dir, &["append", id, file.to_str().unwrap()]);
    }
}

fn texts(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["payload"]["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn a_pushed_session_arrives_intact() {
    let c = Clones::new();
    c.a.import(&c.a.write_jsonl("s.jsonl", &session_lines("s-sync", 5)));
    c.on(&c.a.root, &["push"]);
    let fetched = c.on(&c.b, &["fetch"]);
    assert!(fetched.contains("new       s-sync"), "{fetched}");
    assert_eq!(c.refs(&c.a.root), c.refs(&c.b));
    assert_eq!(c.events(&c.a.root, "s-sync"), c.events(&c.b, "s-sync"));
    c.on(&c.b, &["verify"]);
    // A plain git push of the branch is unaffected and sends no sessions.
    let remote_refs = text(
        &c.a.git_in(&c.remote)
            .args(["for-each-ref", "--format=%(refname)"])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(
        remote_refs.contains("refs/sessions/s-sync") && remote_refs.contains("refs/heads/main"),
        "{remote_refs}"
    );
}

fn diverge_and_sync(first_a: bool) {
    let c = Clones::new();
    c.a.import(&c.a.write_jsonl("s.jsonl", &session_lines("s-both", 4)));
    c.on(&c.a.root, &["push"]);
    c.on(&c.b, &["fetch"]);
    c.append(&c.a.root, "s-both", "from-a", 3);
    c.append(&c.b, "s-both", "from-b", 2);
    let order: [&Path; 3] = if first_a {
        [&c.a.root, &c.b, &c.a.root]
    } else {
        [&c.b, &c.a.root, &c.b]
    };
    for dir in order {
        c.on(dir, &["sync"]);
    }
    assert_eq!(c.refs(&c.a.root), c.refs(&c.b), "clones differ after sync");
    assert_eq!(
        c.refs(&c.a.root).lines().count(),
        2,
        "{}",
        c.refs(&c.a.root)
    );
    // Every event is somewhere: one side's in the session, the other's in the fork.
    let all: Vec<String> = c
        .refs(&c.a.root)
        .lines()
        .flat_map(|l| {
            let id = l
                .split(' ')
                .next()
                .unwrap()
                .trim_start_matches("refs/sessions/")
                .to_owned();
            texts(&c.events(&c.a.root, &id))
        })
        .collect();
    for want in ["from-a 0", "from-a 2", "from-b 0", "from-b 1"] {
        assert!(all.iter().any(|t| t == want), "{want} lost: {all:?}");
    }
    let listed: serde_json::Value =
        serde_json::from_str(&c.on(&c.a.root, &["list", "--json"])).unwrap();
    let fork = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] != "s-both")
        .unwrap();
    assert_eq!(
        fork["parent"], "s-both",
        "the divergence shows in the lineage"
    );
    let fork_events = c.events(&c.b, fork["id"].as_str().unwrap());
    assert_eq!(
        texts(&fork_events[..4]),
        texts(&c.events(&c.b, "s-both")[..4]),
        "the fork starts from the shared events"
    );
    c.on(&c.a.root, &["verify"]);
    c.on(&c.b, &["verify"]);
    c.a.fsck();
}

#[test]
fn divergent_appends_converge_when_a_syncs_first() {
    diverge_and_sync(true);
}

#[test]
fn divergent_appends_converge_when_b_syncs_first() {
    diverge_and_sync(false);
}

/// Imports session `id` into A and notes its tip with `receipt`, as a
/// handoff's receipt would be; returns the tip.
fn noted_session(c: &Clones, id: &str, receipt: &str) -> String {
    c.a.import(&c.a.write_jsonl(&format!("{id}.jsonl"), &session_lines(id, 2)));
    let tip = c.a.git(&["rev-parse", &format!("refs/sessions/{id}")]);
    c.a.git(&[
        "notes",
        "--ref=git-session/receipts",
        "add",
        "-m",
        receipt,
        &tip,
    ]);
    tip
}

#[test]
fn receipts_from_both_sides_are_merged() {
    let c = Clones::new();
    c.a.import(&c.a.write_jsonl("s.jsonl", &session_lines("s-notes", 2)));
    c.on(&c.a.root, &["sync"]);
    c.on(&c.b, &["sync"]);
    let tip = c.a.git(&["rev-parse", "refs/sessions/s-notes"]);
    c.a.git(&[
        "notes",
        "--ref=git-session/receipts",
        "add",
        "-m",
        "receipt from a",
        &tip,
    ]);
    let out =
        c.a.git_in(&c.b)
            .args([
                "notes",
                "--ref=git-session/receipts",
                "add",
                "-m",
                "receipt from b",
                &tip,
            ])
            .output()
            .unwrap();
    assert!(out.status.success());
    c.on(&c.a.root, &["sync"]);
    c.on(&c.b, &["sync"]);
    c.on(&c.a.root, &["sync"]);
    for dir in [&c.a.root, &c.b] {
        let note = text(
            &c.a.git_in(dir)
                .args(["notes", "--ref=git-session/receipts", "show", &tip])
                .output()
                .unwrap()
                .stdout,
        );
        assert!(
            note.contains("receipt from a") && note.contains("receipt from b"),
            "{note}"
        );
    }
}

#[test]
fn a_remote_cannot_strip_or_replace_a_receipt_or_note_a_code_commit() {
    let c = Clones::new();
    let tip = noted_session(&c, "s-keep", "receipt from a");
    c.on(&c.a.root, &["sync"]);
    c.on(&c.b, &["sync"]);
    // B removes A's receipt, then replaces it with its own, and notes a
    // code commit; each pushed on top of what it fetched (a fast-forward
    // for A's notes ref).
    let notes = |args: &[&str]| {
        let out =
            c.a.git_in(&c.b)
                .args(["notes", "--ref=git-session/receipts"])
                .args(args)
                .output()
                .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    notes(&["remove", &tip]);
    notes(&["add", "-m", "forged receipt from b", &tip]);
    let code = c.a.git(&["rev-parse", "HEAD"]);
    notes(&["add", "-m", "\u{1b}[2J not a receipt", &code]);
    c.a.git(&[
        "-C",
        c.b.to_str().unwrap(),
        "push",
        "-q",
        "-f",
        "origin",
        "refs/notes/git-session/receipts",
    ]);
    c.on(&c.a.root, &["sync"]);
    let show = |commit: &str| {
        text(
            &c.a.git_in(&c.a.root)
                .args(["notes", "--ref=git-session/receipts", "show", commit])
                .output()
                .unwrap()
                .stdout,
        )
    };
    let note = show(&tip);
    assert!(
        note.contains("receipt from a"),
        "A's receipt is gone: {note}"
    );
    assert!(note.contains("forged receipt from b"), "{note}");
    assert_eq!(show(&code), "", "a note on a code commit was adopted");
    // The remote gets A's receipt back with the next push.
    let remote = text(
        &c.a.git_in(&c.remote)
            .args(["notes", "--ref=git-session/receipts", "show", &tip])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(remote.contains("receipt from a"), "{remote}");
}

#[test]
fn fetch_adopts_receipts_in_a_clone_with_no_identity() {
    // A fresh machine: no user.name or user.email anywhere. The notes ref
    // is one git logs, and a reflog entry needs a committer.
    let c = Clones::new();
    let tip = noted_session(&c, "s-anon", "receipt");
    c.on(&c.a.root, &["push"]);
    let out =
        c.a.anonymous_session_in(&c.b)
            .arg("fetch")
            .output()
            .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let note =
        c.a.git_in(&c.b)
            .args(["notes", "--ref=git-session/receipts", "show", &tip])
            .output()
            .unwrap();
    assert!(
        text(&note.stdout).contains("receipt"),
        "{}",
        text(&note.stderr)
    );
}

#[test]
fn an_interrupted_push_converges_on_rerun() {
    let c = Clones::new();
    for i in 0..3 {
        c.a.import(&c.a.write_jsonl(
            &format!("s{i}.jsonl"),
            &session_lines(&format!("s-int-{i}"), 3),
        ));
    }
    // The remote refuses one ref the first time, as if the push died midway.
    let hook = c.remote.join("hooks/update");
    let marker = c.remote.join("refused-once");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\nif [ \"$1\" = refs/sessions/s-int-1 ] && [ ! -e {0} ]; then touch {0}; exit 1; fi\nexit 0\n", marker.display()),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&hook)
        .status()
        .unwrap();
    let out = c.a.session().args(["push"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stdout).contains("refs/sessions/s-int-1"),
        "{}",
        text(&out.stdout)
    );
    c.on(&c.a.root, &["sync"]);
    c.on(&c.b, &["sync"]);
    assert_eq!(c.refs(&c.a.root), c.refs(&c.b));
    assert_eq!(c.refs(&c.b).lines().count(), 3);
}

#[test]
fn sessions_can_go_to_a_separate_remote() {
    let c = Clones::new();
    let private = c.a.outside("private-sessions.git");
    c.a.git(&["init", "-q", "--bare", private.to_str().unwrap()]);
    c.a.git(&["remote", "add", "sessions", private.to_str().unwrap()]);
    c.a.git(&["config", "session.remote", "sessions"]);
    c.a.import(&c.a.write_jsonl("s.jsonl", &session_lines("s-private", 2)));
    c.on(&c.a.root, &["sync"]);
    let public = text(
        &c.a.git_in(&c.remote)
            .args(["for-each-ref", "refs/sessions/"])
            .output()
            .unwrap()
            .stdout,
    );
    assert_eq!(public, "", "sessions leaked into the code remote");
    let private_refs = text(
        &c.a.git_in(&private)
            .args(["for-each-ref", "refs/sessions/"])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(private_refs.contains("s-private"));
}

/// Returns whether process `pid` is alive and not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z')
    })
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn a_killed_sync_leaves_no_git_child_running() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let repo = Repo::new();
    // A remote whose transport hangs: the "ssh" command records its pid
    // and sleeps, as a stalled network would.
    let pidfile = repo.outside("transport.pid");
    let slow = repo.outside("slow-ssh.sh");
    std::fs::write(
        &slow,
        format!(
            "#!/bin/sh\necho $$ > {}\nexec sleep 60\n",
            pidfile.display()
        ),
    )
    .unwrap();
    let fast = repo.outside("failing-ssh.sh");
    std::fs::write(&fast, "#!/bin/sh\nexit 1\n").unwrap();
    for script in [&slow, &fast] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    repo.git(&["remote", "add", "stalled", "ssh://nowhere.invalid/x.git"]);
    // Sessions go only to the remote chosen for them.
    repo.git(&["config", "session.remote", "stalled"]);
    repo.git(&["config", "core.sshCommand", slow.to_str().unwrap()]);
    let transport = |repo: &Repo| -> i32 {
        let _ = std::fs::remove_file(&pidfile);
        let mut sync = repo.spawnable_in(&repo.root);
        let child = sync.args(["sync", "stalled"]).spawn().unwrap();
        wait_for("the transport to start", || {
            std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n'))
        });
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut child = child;
        let parent = Pid::from_raw(child.id() as i32);
        // Stopped politely: the whole git process group goes with it.
        kill(parent, Signal::SIGTERM).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(143), "{status:?}");
        pid
    };
    let first = transport(&repo);
    wait_for("the transport to end with sync", || !alive(first));

    // Killed outright, the child outlives it; the next sync ends it first.
    let _ = std::fs::remove_file(&pidfile);
    let mut child = repo
        .spawnable_in(&repo.root)
        .args(["sync", "stalled"])
        .spawn()
        .unwrap();
    wait_for("the transport to start", || {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n'))
    });
    let second: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The record is written just after git is spawned: on a loaded machine
    // the transport can start first. A kill before it is written leaves
    // nothing to find (the window the module docs name).
    let record = repo
        .root
        .join(format!(".git/session/children/{}.pid", child.id()));
    wait_for("the sync to record its git child", || record.exists());
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(alive(second), "SIGKILL cannot be forwarded");
    repo.git(&["config", "core.sshCommand", fast.to_str().unwrap()]);
    let out = repo.session().args(["sync", "stalled"]).output().unwrap();
    assert!(!out.status.success());
    wait_for("the orphaned transport to be ended", || !alive(second));
}

#[test]
fn sessions_are_pushed_only_to_the_remote_chosen_for_them() {
    let a = Repo::new();
    let owner = a.outside("acme");
    let mallory = a.outside("mallory");
    std::fs::create_dir_all(&owner).unwrap();
    std::fs::create_dir_all(&mallory).unwrap();
    let sessions = owner.join("app-sessions.git");
    let fork = mallory.join("app-sessions.git");
    let other = a.outside("elsewhere.git");
    for bare in [&sessions, &fork, &other] {
        a.git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    }
    a.git(&["remote", "add", "origin", sessions.to_str().unwrap()]);
    a.git(&["remote", "add", "fork", fork.to_str().unwrap()]);
    a.git(&["remote", "add", "other", other.to_str().unwrap()]);
    a.import(&a.write_jsonl("s.jsonl", &session_lines("s-consent", 2)));
    let refs = |bare: &Path| {
        text(
            &a.git_in(bare)
                .args(["for-each-ref", "refs/sessions/"])
                .output()
                .unwrap()
                .stdout,
        )
    };
    // init says how it works.
    assert!(a.ok(&["init"]).contains("push --to NAME"));
    // Nothing chosen: nothing goes anywhere, not even to origin.
    let err = a.fails(&["push"], 1);
    assert!(
        err.contains("no remote is chosen") && err.contains("--to"),
        "{err}"
    );
    let err = a.fails(&["sync"], 1);
    assert!(err.contains("no remote is chosen"), "{err}");
    assert_eq!(refs(&sessions), "");
    // Choosing records it; then a plain push goes there.
    a.ok(&["push", "--to", "origin"]);
    assert_eq!(a.git(&["config", "session.remote"]).trim(), "origin");
    assert!(refs(&sessions).contains("refs/sessions/s-consent"));
    a.ok(&["push"]);
    a.ok(&["push", "origin"]);
    // Any other remote is refused with the reason, and receives nothing.
    let err = a.fails(&["push", "other"], 1);
    assert!(err.contains("go only to origin"), "{err}");
    let err = a.fails(&["push", "--to", "other"], 1);
    assert!(err.contains("go to origin, not other"), "{err}");
    let err = a.fails(&["sync", "other"], 1);
    assert!(err.contains("go only to origin"), "{err}");
    let err = a.fails(&["push", "fork"], 1);
    assert!(err.contains("looks like a fork"), "{err}");
    let err = a.fails(&["push", fork.to_str().unwrap()], 1);
    assert!(err.contains("looks like a fork"), "{err}");
    assert_eq!(refs(&other), "");
    assert_eq!(refs(&fork), "");
    // The chosen remote quietly repointed at the fork: refused too.
    a.git(&["remote", "set-url", "origin", fork.to_str().unwrap()]);
    let err = a.fails(&["push"], 1);
    assert!(
        err.contains("now points to") && err.contains("fork"),
        "{err}"
    );
    assert_eq!(refs(&fork), "");
}
