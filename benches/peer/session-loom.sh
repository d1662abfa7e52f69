#!/usr/bin/env bash
# First imports side by side with session-loom (github.com/JC0v0/session-loom),
# the nearest peer (issue 18), on the files git-session's own benches generate.
#
# usage: benches/peer/session-loom.sh SESSION_LOOM_SRC [ROUNDS]
#
# SESSION_LOOM_SRC  a checkout of session-loom (its Cargo workspace root);
#                   it is not on crates.io: clone it first. Built here with
#                   its own lock file; nothing of it enters git-session.
# ROUNDS            runs of each side, alternated (default 3); each run
#                   imports into a fresh copy of an empty store.
#
# For each agent store (Claude 100k records, Codex 100k lines, Pi 100k
# entries: `cargo bench --bench capture -- --generate`; OpenCode 1,000
# sessions / 200k parts: `cargo bench --bench opencode -- --generate`) it
# prints the median wall time and peak RSS of `git session import --agent A`
# and of one session-loom mirror pass (`ssl-scan`, benches/peer/ssl_scan.rs:
# what its daemon does on start), and their ratio (git-session / peer).
# Then the Claude session written back into a fresh home (`git session
# resume --agent claude`, `ssl restore --to claude`, with the bytes each
# wrote) and `list` of the 1,000 OpenCode sessions (`git session list`,
# `ssl list`). Last, the floor under the Claude and Codex imports and the
# write-back (benches/floor: deflate, SHA-1 and SHA-256 of the bytes
# git-session stored, inflate of them, and git writing and reading them).
# session-loom keeps less than git-session stores (no thinking, and
# no raw records for write-back): the figures compare the same input, not
# the same output. Needs GNU time (/usr/bin/time) and python3.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,22p' "$0" >&2; exit 2; }
SRC="$(cd "$1" && pwd)"; ROUNDS="${2:-3}"
HERE="$(cd "$(dirname "$0")" && pwd)"; ROOT="$(cd "$HERE/../.." && pwd)"
[ -f "$SRC/crates/session-loom-core/Cargo.toml" ] || { echo "$SRC: not a session-loom checkout" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU time at /usr/bin/time (Debian: apt-get install time)" >&2; exit 2; }
W="$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/peer.XXXXXX")"
trap 'rm -rf "$W"' EXIT
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"

echo "building git-session and the generators (release)" >&2
(cd "$ROOT" && cargo build -q --release --bin git-session)
GS="$TARGET/release/git-session"
(cd "$ROOT" && cargo bench -q --bench capture -- --generate "$W/gen" >/dev/null)
(cd "$ROOT" && cargo bench -q --bench opencode -- --generate "$W/oc" >/dev/null)

echo "building session-loom's ssl and the ssl-scan harness (release)" >&2
mkdir -p "$W/harness/src"
cp "$HERE/ssl_scan.rs" "$W/harness/src/main.rs"
cat > "$W/harness/Cargo.toml" <<TOML
[package]
name = "ssl-scan"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
session-loom-core = { path = "$SRC/crates/session-loom-core" }

[workspace]
TOML
cp "$SRC/Cargo.lock" "$W/harness/Cargo.lock"
CARGO_TARGET_DIR="$W/peer-target" cargo build -q --release --manifest-path "$W/harness/Cargo.toml"
CARGO_TARGET_DIR="$W/peer-target" cargo build -q --release --manifest-path "$SRC/Cargo.toml" -p session-loom-cli
SCAN="$W/peer-target/release/ssl-scan"; SSL="$W/peer-target/release/ssl"

# run LABEL DIR CMD...: one timed run in DIR; appends "seconds kib" to
# $W/LABEL (wall time from bash's clock, peak RSS from GNU time).
run() {
  local label="$1" dir="$2"; shift 2
  local start end
  start=$EPOCHREALTIME
  (cd "$dir" && /usr/bin/time -f "%M" -o "$W/t" "$@" >/dev/null 2>"$W/err") \
    || { cat "$W/err" >&2; echo "$label failed" >&2; exit 1; }
  end=$EPOCHREALTIME
  echo "$(echo "$end - $start" | bc -l) $(cat "$W/t")" >> "$W/$label"
}

# median FILE COLUMN
median() { sort -n -k"$2" "$1" | awk -v c="$2" '{v[NR]=$c} END{print v[int((NR+1)/2)]}'; }

# pair LABEL AGENT REPO HOME PEER_ROOT: ROUNDS alternated runs of each side.
pair() {
  local what="$1"; shift
  local agent="$1" repo="$2" home="$3" peer_root="$4"
  mv "$repo" "$W/$agent.pristine"
  # Used copies are moved aside, not deleted, until the end: a run right
  # after thousands of deletions pays for them in ext4's inode allocator
  # (docs/benchmarks.md, 2026-12-06).
  mkdir -p "$W/used"
  for i in $(seq "$ROUNDS"); do
    [ -e "$repo" ] && mv "$repo" "$W/used/$agent-repo-$i"
    cp -a "$W/$agent.pristine" "$repo"
    run "gs-$agent" "$repo" env HOME="$home" "$GS" import --agent "$agent" --home "$home"
    [ -e "$W/store-$agent" ] && mv "$W/store-$agent" "$W/used/$agent-store-$i"
    run "ssl-$agent" "$W" env HOME="$home" "$SCAN" "$agent" "$peer_root" "$W/store-$agent"
  done
  local n
  n=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from sessions').fetchone()[0])" "$W/store-$agent/sessions.db")
  [ "$n" -gt 0 ] || { echo "session-loom stored no $agent session" >&2; exit 1; }
  # shellcheck disable=SC2046
  row "$what" $(medians "$agent")
  echo "(stored: git-session $(du -sb "$repo/.git/objects" | cut -f1) bytes of objects, session-loom $(du -sb "$W/store-$agent" | cut -f1) bytes)"
}

# row WHAT GS_SECONDS GS_KIB SSL_SECONDS SSL_KIB
row() {
  printf "| %-44s | %7.3f s, %4d MB | %7.3f s, %4d MB | %5.2f | %5.2f |\n" \
    "$1" "$2" $(($3 / 1024)) "$4" $(($5 / 1024)) \
    "$(echo "$2 / $4" | bc -l)" "$(echo "$3 / $5" | bc -l)"
}

# medians LABEL: "seconds kib" medians of $W/gs-LABEL and $W/ssl-LABEL.
medians() {
  echo "$(median "$W/gs-$1" 1) $(median "$W/gs-$1" 2) $(median "$W/ssl-$1" 1) $(median "$W/ssl-$1" 2)"
}

echo "| what | git-session | session-loom | time ratio | RSS ratio |"
echo "| --- | --- | --- | --- | --- |"
pair "first import, Claude 100k records" claude "$W/gen/claude-repo" "$W/gen/claude-home" "$W/gen/claude-home/.claude/projects"
pair "first import, Codex 100k lines" codex "$W/gen/codex-repo" "$W/gen/codex-home" "$W/gen/codex-home/.codex/sessions"
pair "first import, Pi 100k entries" pi "$W/gen/pi-repo" "$W/gen/pi-home" "$W/gen/pi-home/.pi/agent/sessions"
pair "first import, OpenCode 1,000 sessions" opencode "$W/oc/repo" "$W/oc/home" "$W/oc/home/.local/share/opencode/opencode.db"

# The Claude session written back into a fresh home by each
# (`git session resume --agent claude`, `ssl restore --to claude`).
SSL_ID=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select session_id from sessions').fetchone()[0])" "$W/store-claude/sessions.db")
GS_ID=d05046d2-74b1-4451-90dc-37fbd42c25e6
for i in $(seq "$ROUNDS"); do
  rm -rf "$W/to-gs" "$W/to-ssl"; mkdir -p "$W/to-gs" "$W/to-ssl"
  run gs-restore "$W/gen/claude-repo" "$GS" resume "$GS_ID" --agent claude --home "$W/to-gs"
  run ssl-restore "$W" env HOME="$W/to-ssl" SESSION_LOOM_STORE="$W/store-claude" "$SSL" restore --to claude "$SSL_ID"
done
# shellcheck disable=SC2046
row "resume / restore, the Claude session" $(medians restore)
echo "(bytes written: git-session $(find "$W/to-gs" -type f -printf '%s\n' | awk '{s+=$1} END{print s}'), session-loom $(find "$W/to-ssl" -type f -printf '%s\n' | awk '{s+=$1} END{print s}'))"

# list of the 1,000 OpenCode sessions each side now holds.
for i in $(seq "$ROUNDS"); do
  run gs-list "$W/oc/repo" "$GS" list
  run ssl-list "$W" env SESSION_LOOM_STORE="$W/store-opencode" "$SSL" list
done
# shellcheck disable=SC2046
row "list, 1,000 OpenCode sessions" $(medians list)

for agent in claude codex; do
  echo
  echo "floor under the $agent import (cargo bench --bench floor):"
  (cd "$ROOT" && cargo bench -q --bench floor -- "$W/gen/$agent-repo")
done
