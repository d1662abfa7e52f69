//! The floor under a capture and a write-back of one stored session: the
//! per-byte work any import that keeps these bytes as git objects with
//! their event checksums must do, timed in process with the crates the
//! store uses, next to git doing the same writes and reads itself.
//!
//! `cargo bench --bench floor -- REPO [SESSION_ID]` reads the event chunks
//! of the session's tip (the first session when no id is given) with
//! `git cat-file --batch`, then times, median of 5:
//!
//! - deflate at level 1 of each chunk (gix's zlib, as `store::bulk` packs);
//! - SHA-1 of each chunk with collision detection (gix, as git names it);
//! - SHA-256 of each line (the event checksums);
//! - inflate of each deflated chunk (what every read of the session does);
//!
//! and, as the same-run reference, `git hash-object -w` of the chunks at
//! `core.loosecompression=1` into an empty repository and `git cat-file
//! --batch` of them. The first three are the import's floor: on two cores
//! an import can at best split them evenly, so half their sum is the least
//! wall time for any import that stores these bytes, before reading,
//! parsing or redacting anything. `benches/peer/session-loom.sh` prints
//! them next to the peer's figures.

#![allow(clippy::print_stdout)] // a bench reports on stdout

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::Digest;

const ROUNDS: usize = 5;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        println!("floor: bench");
        return;
    }
    let operands: Vec<&String> = args[1..].iter().filter(|a| !a.starts_with('-')).collect();
    // `cargo bench` alone runs every bench: this one needs a repository
    // holding a session (benches/peer/session-loom.sh passes one).
    let Some(repo) = operands.first().map(Path::new) else {
        println!("floor: skipped; usage: cargo bench --bench floor -- REPO [SESSION_ID]");
        return;
    };
    let reference = match operands.get(1) {
        Some(id) => format!("refs/sessions/{id}"),
        None => git(
            repo,
            &[
                "for-each-ref",
                "--count=1",
                "--format=%(refname)",
                "refs/sessions/",
            ],
        )
        .trim()
        .to_owned(),
    };
    assert!(!reference.is_empty(), "no session in {}", repo.display());
    let chunks = read_chunks(repo, &reference);
    let bytes: usize = chunks.iter().map(Vec::len).sum();
    println!(
        "{reference}: {} chunks, {:.1} MB stored",
        chunks.len(),
        bytes as f64 / 1e6
    );

    let mut packed = Vec::new();
    let deflate = median(|| {
        packed = chunks.iter().map(|c| deflate_fast(c)).collect();
    });
    let sha1 = median(|| {
        for c in &chunks {
            let mut h = gix::hash::hasher(gix::hash::Kind::Sha1);
            h.update(format!("blob {}\0", c.len()).as_bytes());
            h.update(c);
            std::hint::black_box(h.try_finalize().expect("no collision"));
        }
    });
    let sha256 = median(|| {
        for c in &chunks {
            for line in c.split(|&b| b == b'\n') {
                std::hint::black_box(sha2::Sha256::digest(line));
            }
        }
    });
    let inflated: usize = packed.iter().map(|p| inflate(p)).sum();
    assert_eq!(inflated, bytes, "inflate gave back what was deflated");
    let inflate = median(|| {
        for p in &packed {
            std::hint::black_box(inflate(p));
        }
    });
    let packed_bytes: usize = packed.iter().map(Vec::len).sum();

    let scratch = tempfile::tempdir().expect("tempdir");
    let paths: Vec<_> = chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let path = scratch.path().join(format!("{i:04}"));
            std::fs::write(&path, c).expect("write chunk");
            path
        })
        .collect();
    let target = scratch.path().join("repo");
    git(scratch.path(), &["init", "-q", "repo"]);
    git(&target, &["config", "core.loosecompression", "1"]);
    let list: String = paths.iter().map(|p| format!("{}\n", p.display())).collect();
    let git_write = median(|| {
        let _ = std::fs::remove_dir_all(target.join(".git/objects"));
        std::fs::create_dir_all(target.join(".git/objects")).expect("mkdir");
        run_git(&target, &["hash-object", "-w", "--stdin-paths"], &list);
    });
    let ids = chunk_ids(repo, &reference);
    let git_read = median(|| {
        std::hint::black_box(run_git(repo, &["cat-file", "--batch"], &ids));
    });

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let floor = deflate + sha1 + sha256;
    println!("{:<58} {:>9}", "step (median of 5)", "ms");
    for (what, d) in [
        (
            format!("deflate, level 1 (-> {:.1} MB)", packed_bytes as f64 / 1e6),
            deflate,
        ),
        ("SHA-1 of each chunk, collision-detecting".into(), sha1),
        ("SHA-256 of each line".into(), sha256),
        ("import floor: the three, CPU".into(), floor),
        (
            "import floor on two cores: half of that, wall".into(),
            floor / 2,
        ),
        ("inflate of each chunk".into(), inflate),
        (
            "git hash-object -w of the chunks, level 1".into(),
            git_write,
        ),
        ("git cat-file --batch of the chunks".into(), git_read),
    ] {
        println!("{what:<58} {:>9.1}", ms(d));
    }
}

/// The object ids of `reference`'s event chunks, one per line, in path order.
fn chunk_ids(repo: &Path, reference: &str) -> String {
    git(repo, &["ls-tree", "-r", reference])
        .lines()
        .filter(|l| l.ends_with(".jsonl") && l.contains("\tevents/"))
        .map(|l| format!("{}\n", l.split_whitespace().nth(2).expect("id")))
        .collect()
}

/// The chunks of `reference`'s event log, in path order.
fn read_chunks(repo: &Path, reference: &str) -> Vec<Vec<u8>> {
    let ids = chunk_ids(repo, reference);
    let out = run_git(repo, &["cat-file", "--batch"], &ids);
    // `<id> blob <size>\n<bytes>\n` each.
    let mut chunks = Vec::new();
    let mut rest = out.as_slice();
    while let Some(end) = rest.iter().position(|&b| b == b'\n') {
        let header = String::from_utf8_lossy(&rest[..end]);
        let size: usize = header
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("cat-file said {header:?}"));
        chunks.push(rest[end + 1..end + 1 + size].to_vec());
        rest = &rest[end + 2 + size..];
    }
    chunks
}

/// Deflates one chunk the way `store::bulk` writes a pack entry.
fn deflate_fast(chunk: &[u8]) -> Vec<u8> {
    use gix::zlib::stream::deflate::{Compress, FlushCompress};
    let mut z = Compress::new(gix::zlib::Compression::BEST_SPEED);
    let mut scratch = vec![0u8; 1 << 16];
    let mut out = Vec::new();
    let mut input = chunk;
    loop {
        let (read, wrote) = (z.total_in(), z.total_out());
        let status = z
            .compress(input, &mut scratch, FlushCompress::Finish)
            .expect("deflate");
        out.extend_from_slice(&scratch[..(z.total_out() - wrote) as usize]);
        input = &input[(z.total_in() - read) as usize..];
        if status == gix::zlib::Status::StreamEnd {
            return out;
        }
    }
}

/// Inflates one stream; returns how many bytes it gave.
fn inflate(packed: &[u8]) -> usize {
    let mut z = gix::zlib::Decompress::new();
    let mut out = vec![0; 8 << 20];
    let mut total = 0;
    loop {
        let used = z.total_in() as usize;
        let before = z.total_out();
        let status = z
            .decompress(
                &packed[used..],
                &mut out,
                gix::zlib::FlushDecompress::Finish,
            )
            .expect("inflate");
        total += (z.total_out() - before) as usize;
        if status == gix::zlib::Status::StreamEnd {
            return total;
        }
    }
}

fn median(mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[ROUNDS / 2]
}

fn git(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(run_git(dir, args, "")).expect("git printed UTF-8")
}

/// Runs git in `dir` with `input` on stdin; returns its stdout.
fn run_git(dir: &Path, args: &[&str], input: &str) -> Vec<u8> {
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_owned();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut out = Vec::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_end(&mut out)
        .expect("read");
    writer.join().expect("writer").expect("write stdin");
    assert!(child.wait().expect("wait").success(), "git {args:?} failed");
    out
}
