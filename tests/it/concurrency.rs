//! Writers that race: the lock serializes them, nothing is lost; a killed
//! writer leaves the old or the new tip, never a half batch.

use std::process::Stdio;

use serde_json::Value;

use crate::support::*;

#[test]
fn concurrent_appenders_all_land_with_contiguous_seqs() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-race", 1)));
    let writers = 6;
    let per_writer = 40;
    let files: Vec<_> = (0..writers)
        .map(|w| {
            let lines: Vec<Value> = (0..per_writer)
                .map(|i| {
                    let mut e = event(0);
                    e["payload"]["text"] = format!("writer {w} event {i}").into();
                    e
                })
                .collect();
            repo.write_jsonl(&format!("w{w}.jsonl"), &lines)
        })
        .collect();
    let children: Vec<_> = files
        .iter()
        .map(|f| {
            repo.spawnable_in(&repo.root)
                .args(["append", "s-race", f.to_str().unwrap()])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let events = repo.events("s-race");
    assert_eq!(events.len(), 1 + writers * per_writer);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64);
    }
    // Each writer's batch is contiguous and complete.
    for w in 0..writers {
        let mine: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| {
                e["payload"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with(&format!("writer {w} "))
            })
            .map(|(i, _)| i)
            .collect();
        assert_eq!(mine.len(), per_writer);
        assert_eq!(
            mine.last().unwrap() - mine[0],
            per_writer - 1,
            "writer {w} interleaved"
        );
    }
    assert_eq!(
        repo.git(&["rev-list", "--count", "refs/sessions/s-race"]),
        (1 + writers).to_string()
    );
    repo.ok(&["verify", "s-race"]);
    repo.fsck();
}

#[test]
fn a_killed_writer_leaves_the_old_or_the_new_tip() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-kill", 1)));
    let big: Vec<Value> = (0..20_000).map(event).collect();
    let file = repo.write_jsonl("big.jsonl", &big);
    let mut expected = vec![1usize];
    for delay_ms in [5u64, 30, 80, 150, 400] {
        let mut child = repo
            .spawnable_in(&repo.root)
            .args(["append", "s-kill", file.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let n = repo.events("s-kill").len();
        let last = *expected.last().unwrap();
        assert!(
            n == last || n == last + big.len(),
            "after a kill at {delay_ms} ms: {n} events"
        );
        if n != last {
            expected.push(n);
        }
        repo.ok(&["verify", "s-kill"]);
        repo.fsck();
    }
    // The next append after all that still works.
    let small = repo.write_jsonl("small.jsonl", &[event(0)]);
    repo.ok(&["append", "s-kill", small.to_str().unwrap()]);
    repo.ok(&["verify", "s-kill"]);
}

#[test]
fn a_stale_ref_lock_left_by_a_killed_process_is_cleared() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-stale", 1)));
    let lock = repo.root.join(".git/refs/sessions/s-stale.lock");
    std::fs::write(&lock, "").unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&lock)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let file = repo.write_jsonl("b.jsonl", &[event(0)]);
    repo.ok(&["append", "s-stale", file.to_str().unwrap()]);
    assert_eq!(repo.events("s-stale").len(), 2);
    assert!(!lock.exists());
}
