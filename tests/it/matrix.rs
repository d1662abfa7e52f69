//! Any agent to any agent, checked by the real clients: for each of the six
//! sources a fresh session made by the source's own roundtrip script (a
//! shell call, a file edit, a failing command, then a second user turn),
//! captured, handed to each of the other five agents, and resumed there by
//! the real client (`shared/oracle/<agent>-resume-check.sh`). What the
//! target sends must be the brief first and then every user, assistant,
//! tool call (its command) and tool result (its output, the failure marked)
//! of the source, in order; anything missing must be named by the
//! handoff's loss report. The run generates `docs/compatibility.md`
//! (`SNAPSHOTS=overwrite` rewrites it; the test fails when it is stale).
//!
//! The scripts run from a copy of `shared/oracle` whose mocks are the
//! project's (`tests/oracle/`), which play `ORACLE_MOCK_SCRIPT`: several
//! tool calls in one turn.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::oracle::{prefix, resume_check_in, shared_oracle};
use crate::support::*;

/// The six agents, in the order of the table.
pub(crate) const AGENTS: [&str; 6] = ["claude", "codex", "pi", "hermes", "opencode", "dsh"];

/// One step of the mock's script: what the model says, the shell command
/// it runs, and what the command prints (when the check looks for it).
struct Step {
    text: &'static str,
    command: &'static str,
    output: Option<&'static str>,
    fails: bool,
}

const SCRIPT: [Step; 3] = [
    Step {
        text: "I will write the note.",
        command: "echo hello > note.txt",
        output: None,
        fails: false,
    },
    Step {
        text: "Now I will edit the note.",
        command: "sed -i s/hello/hello-world/ note.txt",
        output: None,
        fails: false,
    },
    Step {
        text: "Let me look at the other file.",
        command: "cat missing.txt",
        output: Some("No such file or directory"),
        fails: true,
    },
];

const SECOND_TURN: &str = "Second turn: is the note there?";
const NOTE: &str = "carry on";

fn script_env() -> String {
    let steps: Vec<Value> = SCRIPT
        .iter()
        .map(|s| serde_json::json!({"text": s.text, "command": s.command}))
        .collect();
    Value::Array(steps).to_string()
}

/// How many real clients run at once (`MATRIX_CLIENTS`, default 4): the
/// matrix runs its pairs in parallel threads, each with its own HOMEs, but
/// more clients than this on two cores only time out.
fn slot() -> impl Drop {
    use std::sync::{Condvar, Mutex};
    static SLOTS: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());
    let max = std::env::var("MATRIX_CLIENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4usize)
        .max(1);
    let (lock, cv) = &SLOTS;
    let mut used = cv.wait_while(lock.lock().unwrap(), |n| *n >= max).unwrap();
    *used += 1;
    struct Slot;
    impl Drop for Slot {
        fn drop(&mut self) {
            let (lock, cv) = &SLOTS;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
            cv.notify_one();
        }
    }
    Slot
}

/// Runs `f`, turning a panic into its message.
fn caught<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "panicked".into())
    })
}

/// Copies `shared/oracle` into `dir` with the project's mocks in place.
fn harness(dir: &Path) -> PathBuf {
    let out = Command::new("cp")
        .arg("-r")
        .arg(shared_oracle())
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mocks = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle");
    for mock in ["mockllm.py", "mockllm_openai.py"] {
        std::fs::copy(mocks.join(mock), dir.join(mock)).unwrap();
    }
    dir.to_owned()
}

/// Copies a HOME (files and databases) so that a check leaves it alone.
fn copy_home(from: &Path, to: &Path) {
    let out = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Runs a resume check of `agent` from the harness.
fn check(harness: &Path, agent: &str, home: &Path, session: &str, project: &Path) -> Value {
    check_with(harness, agent, &[], home, session, project)
}

fn check_with(
    harness: &Path,
    agent: &str,
    env: &[(&str, &str)],
    home: &Path,
    session: &str,
    project: &Path,
) -> Value {
    let _slot = slot();
    // Slow clients (OpenCode, Hermes) on two busy cores need more than the
    // harness's default 180 s.
    let mut env = env.to_vec();
    env.push(("ORACLE_TIMEOUT", "600"));
    resume_check_in(harness, agent, &env, home, session, project)
}

/// A captured source session and what its own client sends for it.
pub(crate) struct Source {
    pub repo: Repo,
    pub harness: PathBuf,
    pub session: String,
    pub turns: Vec<Value>,
    pub version: String,
}

/// A fresh session by the real `agent`: the scripted turn, a second user
/// turn, captured; the source's own client check of it (on a copy).
pub(crate) fn source(agent: &str) -> Source {
    let repo = Repo::new();
    let harness = harness(&repo.outside("oracle"));
    let home = repo.outside(&format!("{agent}-home"));
    std::fs::create_dir_all(&home).unwrap();
    let slot = slot();
    let out = Command::new("bash")
        .arg(harness.join(format!("{agent}-roundtrip.sh")))
        .arg(&home)
        .arg(&repo.root)
        .env("ORACLE_PREFIX", prefix())
        .env("ORACLE_MOCK_SCRIPT", script_env())
        .env("ORACLE_TIMEOUT", "600")
        .output()
        .unwrap();
    drop(slot);
    assert!(
        out.status.success(),
        "{agent} roundtrip failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let session = made["session_id"].as_str().unwrap().to_owned();
    // The multi-turn exchange: the client continues its own session.
    check_with(
        &harness,
        agent,
        &[("PROMPT", SECOND_TURN)],
        &home,
        &session,
        &repo.root,
    );
    let captured = repo.ok(&["import", "--agent", agent, "--home", home.to_str().unwrap()]);
    assert!(captured.contains(&session), "{captured}");
    let copy = repo.outside(&format!("{agent}-source-check"));
    copy_home(&home, &copy);
    let report = check(&harness, agent, &copy, &session, &repo.root);
    let turns = conversation(&report);
    for step in &SCRIPT {
        assert!(
            turns
                .iter()
                .any(|t| t["kind"] == "tool_call" && text_of(t).contains(step.command)),
            "{agent}'s own session lacks the call {:?}: {turns:#?}",
            step.command
        );
    }
    assert!(
        turns.iter().any(|t| text_of(t) == SECOND_TURN),
        "{agent}'s own session lacks the second turn: {turns:#?}"
    );
    Source {
        version: report["version"].as_str().unwrap_or("?").to_owned(),
        repo,
        harness,
        session,
        turns,
    }
}

/// The turns of a check that are the conversation: no thinking (targets
/// differ on it), nothing the client injected.
fn conversation(report: &Value) -> Vec<Value> {
    report["turns"]
        .as_array()
        .expect("a report has turns")
        .iter()
        .filter(|t| t["injected"] != true && t["kind"] != "thinking")
        .cloned()
        .collect()
}

fn text_of(turn: &Value) -> &str {
    turn["text"].as_str().unwrap_or("")
}

/// A handoff as `--json` reports it.
pub(crate) struct Handed {
    pub home: PathBuf,
    pub native_id: String,
    pub losses: Vec<String>,
}

/// Hands `session` to `to` into a fresh home.
pub(crate) fn hand(repo: &Repo, session: &str, to: &str, tag: &str) -> Handed {
    let home = repo.outside(&format!("{to}-target-{tag}"));
    std::fs::create_dir_all(&home).unwrap();
    // The database agents create their store themselves (we never do).
    match to {
        "hermes" => {
            let _slot = slot();
            crate::hermes::init_hermes_home(&home)
        }
        "opencode" => {
            let _slot = slot();
            crate::opencode::init_client_db(&home, &repo.root)
        }
        _ => {}
    }
    let report = repo.ok_json(&[
        "handoff",
        session,
        "--to",
        to,
        "--home",
        home.to_str().unwrap(),
        "--note",
        NOTE,
        "--json",
    ]);
    Handed {
        home,
        native_id: report["native_id"].as_str().unwrap().to_owned(),
        losses: report["losses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_owned())
            .collect(),
    }
}

/// The stable code of a loss line (`code: what`).
fn code(line: &str) -> &str {
    line.split(':').next().unwrap_or(line).trim()
}

/// Whether a loss line could name what is missing of a `kind` of turn.
fn names(loss: &str, kind: &str) -> bool {
    let c = code(loss);
    match kind {
        "tool_call" | "tool_result" => c.contains("tool"),
        "failure" => c.contains("fail") || c.contains("error") || c.contains("status"),
        // `event-unmapped` is about events with no native form (meta), not
        // a conversation turn.
        _ => c.contains("message"),
    }
}

/// Whether a target's tool result marks the failure in its own way.
fn marked_failed(turn: &Value) -> bool {
    if turn["is_error"] == true {
        return true;
    }
    let t = text_of(turn)
        .to_lowercase()
        .replace([' ', '"', '[', ']'], "");
    [
        "exitcode1",
        "exitcode:1",
        "exitedwithcode1",
        "exit_code:1",
        "error",
    ]
    .iter()
    .any(|m| t.contains(m))
}

/// What one pair showed.
#[derive(Default)]
pub(crate) struct Verdict {
    /// Turns missing or failures unmarked that no loss line names.
    pub unreported: Vec<String>,
    /// Turns missing (or failures unmarked) that a loss line names.
    pub reported: Vec<String>,
    /// The handoff or a client run failed (the message).
    pub error: Option<String>,
}

impl Verdict {
    fn failed(&self) -> bool {
        self.error.is_some() || !self.unreported.is_empty()
    }

    fn error(message: String) -> Verdict {
        Verdict {
            error: Some(message),
            ..Default::default()
        }
    }
}

/// Checks that `got` (the target's check) holds the brief first and then
/// every turn of `source` in order, each missing one named by `losses`.
pub(crate) fn judge(source: &[Value], got: &Value, losses: &[String]) -> Verdict {
    let got = conversation(got);
    let mut v = Verdict::default();
    let miss = |v: &mut Verdict, kind: &str, what: String| {
        if losses.iter().any(|l| names(l, kind)) {
            v.reported.push(what);
        } else {
            v.unreported.push(what);
        }
    };
    match got.first() {
        Some(first) if first["kind"] == "user" && text_of(first).contains(NOTE) => {}
        _ => v.unreported.push("the brief is not the first turn".into()),
    }
    let mut at = 1;
    let mut last_call: Option<&Step> = None;
    for want in source {
        let kind = want["kind"].as_str().unwrap_or("");
        let found = match kind {
            "tool_call" => {
                let step = SCRIPT.iter().find(|s| text_of(want).contains(s.command));
                last_call = step;
                let needle = step.map_or(text_of(want), |s| s.command);
                (at..got.len())
                    .find(|&i| got[i]["kind"] == "tool_call" && text_of(&got[i]).contains(needle))
            }
            "tool_result" => {
                let found = (at..got.len()).find(|&i| got[i]["kind"] == "tool_result");
                if let (Some(i), Some(step)) = (found, last_call) {
                    if let Some(output) = step.output
                        && !text_of(&got[i]).contains(output)
                    {
                        miss(
                            &mut v,
                            "tool_result",
                            format!("the output of {:?}", step.command),
                        );
                    }
                    if step.fails && !marked_failed(&got[i]) {
                        miss(
                            &mut v,
                            "failure",
                            format!("the failure of {:?}", step.command),
                        );
                    }
                }
                found
            }
            _ => (at..got.len())
                .find(|&i| got[i]["kind"] == kind && text_of(&got[i]).contains(text_of(want))),
        };
        match found {
            Some(i) => at = i + 1,
            None => miss(
                &mut v,
                kind,
                format!(
                    "{kind} {:?}",
                    text_of(want).chars().take(80).collect::<String>()
                ),
            ),
        }
    }
    v
}

/// One pair's run: the verdict, the loss codes, the target's version.
pub(crate) struct Pair {
    pub from: &'static str,
    pub to: &'static str,
    pub verdict: Verdict,
    pub codes: BTreeSet<String>,
    pub version: String,
}

/// Hands one source to each of `targets` and checks each in parallel.
fn from_source(from: &'static str, targets: &[&'static str]) -> (String, Vec<Pair>) {
    let src = match caught(|| source(from)) {
        Ok(src) => src,
        Err(e) => {
            let pairs = targets
                .iter()
                .map(|to| Pair {
                    from,
                    to,
                    verdict: Verdict::error(format!("the {from} source session: {e}")),
                    codes: BTreeSet::new(),
                    version: "?".into(),
                })
                .collect();
            return ("?".into(), pairs);
        }
    };
    let handed: Vec<(&'static str, Result<Handed, String>)> = targets
        .iter()
        .map(|to| (*to, caught(|| hand(&src.repo, &src.session, to, "1"))))
        .collect();
    let root = src.repo.root.clone();
    let pairs = std::thread::scope(|scope| {
        let jobs: Vec<_> = handed
            .iter()
            .map(|(to, h)| {
                let (harness, root, turns) = (&src.harness, &root, &src.turns);
                scope.spawn(move || {
                    let h = match h {
                        Ok(h) => h,
                        Err(e) => {
                            return Pair {
                                from,
                                to,
                                verdict: Verdict::error(format!("handoff: {e}")),
                                codes: BTreeSet::new(),
                                version: "?".into(),
                            };
                        }
                    };
                    let codes = h.losses.iter().map(|l| code(l).to_owned()).collect();
                    match caught(|| check(harness, to, &h.home, &h.native_id, root)) {
                        Ok(report) => Pair {
                            from,
                            to,
                            verdict: judge(turns, &report, &h.losses),
                            codes,
                            version: report["version"].as_str().unwrap_or("?").to_owned(),
                        },
                        Err(e) => Pair {
                            from,
                            to,
                            verdict: Verdict::error(format!("{to}'s resume check: {e}")),
                            codes,
                            version: "?".into(),
                        },
                    }
                })
            })
            .collect();
        jobs.into_iter()
            .map(|j| j.join().unwrap())
            .collect::<Vec<_>>()
    });
    (src.version, pairs)
}

fn assert_pairs(pairs: &[Pair]) {
    let failed: Vec<String> = pairs
        .iter()
        .filter(|p| p.verdict.failed())
        .map(|p| {
            format!(
                "{} -> {}: {:#?} {}",
                p.from,
                p.to,
                p.verdict.unreported,
                p.verdict.error.as_deref().unwrap_or("")
            )
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} pairs lost something the loss report does not name:\n{}",
        failed.len(),
        pairs.len(),
        failed.join("\n")
    );
}

#[test]
fn seed_demo_claude_to_codex() {
    let (_, pairs) = from_source("claude", &["codex"]);
    assert_pairs(&pairs);
}

#[test]
fn seed_demo_pi_to_hermes() {
    let (_, pairs) = from_source("pi", &["hermes"]);
    assert_pairs(&pairs);
}

/// The 30 ordered pairs, six sources at once; writes the table.
/// `MATRIX_PAIRS=claude:hermes,pi:hermes` runs only those pairs (and
/// neither counts them nor writes the table).
#[test]
fn every_agent_hands_off_to_every_other_and_the_compatibility_table_is_current() {
    let only = std::env::var("MATRIX_PAIRS").ok();
    let wanted = |from: &str, to: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|p| p.trim() == format!("{from}:{to}")))
    };
    let runs: Vec<(String, Vec<Pair>)> = std::thread::scope(|scope| {
        let jobs: Vec<_> = AGENTS
            .iter()
            .filter(|from| AGENTS.iter().any(|to| to != *from && wanted(from, to)))
            .map(|from| {
                scope.spawn(move || {
                    let targets: Vec<&'static str> = AGENTS
                        .iter()
                        .copied()
                        .filter(|t| t != from && wanted(from, t))
                        .collect();
                    from_source(from, &targets)
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).collect()
    });
    let mut versions = std::collections::BTreeMap::new();
    let mut pairs = Vec::new();
    for (version, run) in runs {
        if let Some(p) = run.first() {
            versions.insert(p.from, version);
        }
        pairs.extend(run);
    }
    if only.is_some() {
        assert_pairs(&pairs);
        return;
    }
    assert_eq!(pairs.len(), 30);
    let doc = compatibility(&versions, &pairs);
    snapshot_file(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/compatibility.md"),
        &doc,
    );
    assert_pairs(&pairs);
}

/// The chain `claude -> codex -> pi -> hermes -> opencode -> dsh -> claude`:
/// each target's session captured and handed on; the last client still
/// sends every original turn.
#[test]
fn a_chain_through_all_six_agents_keeps_the_original_turns() {
    let src = source("claude");
    let mut session = src.session.clone();
    let mut losses = Vec::new();
    let chain = ["codex", "pi", "hermes", "opencode", "dsh", "claude"];
    let mut last = None;
    for (i, to) in chain.iter().enumerate() {
        let h = hand(&src.repo, &session, to, &format!("chain-{i}"));
        let captured = src
            .repo
            .ok(&["import", "--agent", to, "--home", h.home.to_str().unwrap()]);
        assert!(captured.contains(&h.native_id), "{to}: {captured}");
        session = h.native_id.clone();
        losses.extend(h.losses.clone());
        last = Some(h);
    }
    let last = last.unwrap();
    let report = check(
        &src.harness,
        "claude",
        &last.home,
        &last.native_id,
        &src.repo.root,
    );
    let verdict = judge(&src.turns, &report, &losses);
    assert!(
        verdict.unreported.is_empty(),
        "the chain lost: {:#?} (losses: {losses:#?})",
        verdict.unreported
    );
    src.repo.ok(&["verify"]);
}

/// `docs/compatibility.md` from a matrix run.
fn compatibility(versions: &std::collections::BTreeMap<&str, String>, pairs: &[Pair]) -> String {
    let mut doc = String::from(
        "# Compatibility\n\n\
         Generated by `cargo test --test it matrix::` (tests/it/matrix.rs) from a\n\
         run of the real clients against the mock model; `SNAPSHOTS=overwrite`\n\
         rewrites it, and the test fails when it is stale.\n\n\
         Each source session is made by the source's own client: a shell call\n\
         (`echo hello > note.txt`), a file edit (`sed -i` on it), a failing\n\
         command (`cat missing.txt`) and a second user turn. It is captured,\n\
         handed off with `git session handoff --to <target>`, and resumed by\n\
         the target's real client; what the client sends the model is\n\
         compared with what the source's client sends.\n\n\
         - **L2** (diagonal): the agent's own sessions resume with the same\n\
         \x20 history after capture and write-back (tests/it/oracle.rs,\n\
         \x20 conformance.rs, hermes.rs, opencode.rs, dsh.rs, pi).\n\
         - **L1**: the target's client sends the brief first, then every user,\n\
         \x20 assistant, tool call (its command) and tool result (its output,\n\
         \x20 the failure marked) of the source in order; whatever it does not\n\
         \x20 carry is named by a line of the handoff's loss report.\n\
         - **fail**: something was missing that no loss line names.\n\n\
         ## Ordered pairs (rows: from, columns: to)\n\n",
    );
    doc.push_str("| from \\ to |");
    for a in AGENTS {
        doc.push_str(&format!(" {a} |"));
    }
    doc.push_str("\n| --- |");
    for _ in AGENTS {
        doc.push_str(" --- |");
    }
    doc.push('\n');
    for from in AGENTS {
        doc.push_str(&format!("| {from} |"));
        for to in AGENTS {
            let cell = if from == to {
                "L2".to_owned()
            } else {
                let p = pairs.iter().find(|p| p.from == from && p.to == to).unwrap();
                if p.verdict.failed() {
                    "fail".to_owned()
                } else {
                    "L1".to_owned()
                }
            };
            doc.push_str(&format!(" {cell} |"));
        }
        doc.push('\n');
    }
    doc.push_str("\n## Client versions verified\n\n| agent | version |\n| --- | --- |\n");
    for a in AGENTS {
        doc.push_str(&format!("| {a} | {} |\n", versions[a]));
    }
    for p in pairs.iter().filter(|p| !p.verdict.failed()) {
        assert_eq!(
            &p.version, &versions[p.to],
            "one client, one version in a run"
        );
    }
    doc.push_str(
        "\n## Loss codes per pair\n\n\
         The codes of the loss lines each handoff reported (`git session\n\
         handoff --json`, `losses`), and what arrived only with a loss line.\n\n\
         | from | to | loss codes | carried only as a loss line |\n| --- | --- | --- | --- |\n",
    );
    for from in AGENTS {
        for to in AGENTS.iter().filter(|t| **t != from) {
            let p = pairs
                .iter()
                .find(|p| p.from == from && p.to == *to)
                .unwrap();
            let codes: Vec<String> = p.codes.iter().map(|c| format!("`{c}`")).collect();
            let mut missing = p.verdict.reported.clone();
            missing.extend(
                p.verdict
                    .unreported
                    .iter()
                    .map(|u| format!("{u} (unreported)")),
            );
            if p.verdict.error.is_some() {
                missing.push("the handoff or a client run failed (see the test output)".into());
            }
            doc.push_str(&format!(
                "| {from} | {to} | {} | {} |\n",
                if codes.is_empty() {
                    "none".to_owned()
                } else {
                    codes.join(", ")
                },
                if missing.is_empty() {
                    "nothing".to_owned()
                } else {
                    missing.join("; ").replace('|', "\\|")
                }
            ));
        }
    }
    doc
}

/// The check itself: what a target lost is found, and counted as reported
/// only when a loss line can name it.
#[test]
fn the_matrix_check_finds_what_a_target_lost() {
    let turn = |kind: &str, text: &str| serde_json::json!({"kind": kind, "text": text});
    let source = vec![
        turn("user", "Please write hello into note.txt"),
        turn("assistant", "Let me look at the other file."),
        turn("tool_call", r#"{"command":"cat missing.txt"}"#),
        turn(
            "tool_result",
            "Exit code 1\ncat: missing.txt: No such file or directory",
        ),
        turn("user", SECOND_TURN),
    ];
    let report = |turns: Vec<Value>| serde_json::json!({ "turns": turns });
    let brief = turn("user", "Brief ... Note from the user: carry on");
    // Everything carried, the failure marked: nothing to say.
    let mut all = vec![brief.clone()];
    all.extend(source.iter().cloned());
    let v = judge(&source, &report(all.clone()), &[]);
    assert!(
        v.unreported.is_empty() && v.reported.is_empty(),
        "{:?}",
        v.unreported
    );
    // The failure mark and the second turn dropped, nothing said.
    let mut lossy = all.clone();
    lossy[4] = turn("tool_result", "cat: missing.txt: No such file or directory");
    lossy.pop();
    let v = judge(&source, &report(lossy.clone()), &[]);
    assert_eq!(v.unreported.len(), 2, "{:?}", v.unreported);
    // Said by the loss report: reported, not unreported.
    let losses = [
        "failure-unmarked: seq 4: the error status".to_owned(),
        "message-dropped: seq 5".to_owned(),
    ];
    let v = judge(&source, &report(lossy), &losses);
    assert!(v.unreported.is_empty(), "{:?}", v.unreported);
    assert_eq!(v.reported.len(), 2);
    // Out of order, or no brief first: found.
    let mut swapped = all.clone();
    swapped.swap(1, 5);
    assert!(!judge(&source, &report(swapped), &[]).unreported.is_empty());
    assert!(
        !judge(&source, &report(all[1..].to_vec()), &[])
            .unreported
            .is_empty()
    );
}
