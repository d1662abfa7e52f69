//! Forks are branches of a session's history.

use serde_json::Value;

use crate::support::*;

#[test]
fn fork_shares_the_parent_history_up_to_the_fork_point() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-parent", 4)));
    let batch_one = repo.git(&["rev-parse", "refs/sessions/s-parent"]);
    let more = repo.write_jsonl("b.jsonl", &(0..4).map(event).collect::<Vec<_>>());
    repo.ok(&["append", "s-parent", more.to_str().unwrap()]);

    // --at inside the second batch: the fork starts from that batch's commit.
    let id = repo.ok(&["fork", "s-parent", "--at", "5", "--id", "s-child"]);
    assert_eq!(id.trim(), "s-child");
    let tip = repo.git(&["rev-parse", "refs/sessions/s-parent"]);
    assert_eq!(
        repo.git(&[
            "merge-base",
            "refs/sessions/s-child",
            "refs/sessions/s-parent"
        ]),
        tip
    );
    let parent_events = repo.events("s-parent");
    let child_events = repo.events("s-child");
    assert_eq!(child_events.len(), 6);
    assert_eq!(
        child_events[..],
        parent_events[..6],
        "inherited events differ"
    );
    let shown: Value = serde_json::from_str(&repo.ok(&["show", "s-child", "--json"])).unwrap();
    let lineage = &shown["header"]["lineage"];
    assert_eq!(lineage["parent_session"], "s-parent");
    assert_eq!(lineage["fork_seq"], 5);
    assert_eq!(lineage["inherited_events"], 6);
    assert_eq!(lineage["parent_commit"], tip.as_str());

    // --at inside the first batch forks from the first commit.
    repo.ok(&["fork", "s-parent", "--at", "1", "--id", "s-early"]);
    assert_eq!(
        repo.git(&[
            "merge-base",
            "refs/sessions/s-early",
            "refs/sessions/s-parent"
        ]),
        batch_one
    );
    assert_eq!(repo.events("s-early").len(), 2);

    // The fork grows on its own; the parent is untouched.
    let next = repo.write_jsonl("c.jsonl", &[event(0), event(1)]);
    repo.ok(&["append", "s-child", next.to_str().unwrap()]);
    assert_eq!(repo.events("s-child").len(), 8);
    assert_eq!(repo.events("s-parent"), parent_events);
    let log = repo.ok(&["log", "s-child"]);
    assert_eq!(log.lines().count(), 2, "{log}");
    assert!(log.contains("fork of s-parent at seq 5"), "{log}");

    // A fork of a fork reaches back through both.
    repo.ok(&["fork", "s-child", "--at", "6", "--id", "s-grandchild"]);
    assert_eq!(repo.events("s-grandchild").len(), 7);
    repo.ok(&["verify"]);
    repo.fsck();
}

#[test]
fn fork_without_at_takes_everything_and_gets_a_new_id() {
    let repo = Repo::new();
    repo.import(&repo.write_jsonl("a.jsonl", &session_lines("s-p", 3)));
    let id = repo.ok(&["fork", "s-p"]).trim().to_owned();
    assert_eq!(id.len(), 36, "expected a uuid, got {id}");
    assert_eq!(repo.events(&id).len(), 3);
    let err = repo.fails(&["fork", "s-p", "--at", "3"], 1);
    assert!(err.contains("has 3 events; there is no seq 3"), "{err}");
    let err = repo.fails(&["fork", "s-p", "--id", &id], 1);
    assert!(err.contains("already exists"), "{err}");
}
