//! Counting `o200k_base` tokens from a flat, verified table instead of the
//! tables `tiktoken-rs` builds in every process.
//!
//! Building `tiktoken-rs`'s `o200k_base` decodes 200,000 base64 tokens into
//! three hash maps and a sorted copy (about 0.1 s of CPU per process, more
//! than the rest of a whole-process compile of 10k events). The same ranks,
//! written once as a [`Table`] ([`Table::from_tiktoken`], [`Table::to_bytes`])
//! and read back by later processes ([`Table::from_bytes`]), need no
//! allocation per token: a rank is found by binary search in one buffer.
//! Storing the bytes is the caller's business (the compiler does no IO;
//! `git session compile` keeps them under the state directory).
//!
//! The count is `tiktoken-rs`'s, exactly: the same split pattern
//! ([`tiktoken_rs::O200K_BASE_PAT_STR`], through `fancy-regex` as there),
//! then per piece one rank if the piece is a token, else the same byte-pair
//! merge (lowest rank first, leftmost among equal ranks). The tests compare
//! the two on varied text.
//!
//! Table bytes are untrusted input: [`Table::from_bytes`] checks the
//! checksum, the layout (offsets in bounds, tokens strictly sorted, ranks a
//! permutation, every single byte a token so every piece can be counted)
//! and the count of a probe text, and refuses anything else.

use std::collections::BinaryHeap;

use sha2::{Digest, Sha256};

type Rank = u32;

/// What a table file starts with (the format's version is in it).
const MAGIC: &[u8; 8] = b"GSBPE01\n";
/// Header: magic, token count, SHA-256 of everything after the header.
const HEADER: usize = 8 + 4 + 32;
/// Largest table accepted (`o200k_base` takes about 3.6 MB).
pub const MAX_TABLE_BYTES: usize = 16 << 20;
/// Text every valid `o200k_base` table must count as [`PROBE_TOKENS`].
const PROBE: &str = "Hello, world! fn main() { let x = 42; } // naïve café 東京 \n\n  indented";
/// `tiktoken-rs`'s `o200k_base` count of [`PROBE`] (checked by a test).
const PROBE_TOKENS: usize = 24;

/// Why table bytes were refused.
#[derive(Debug, thiserror::Error)]
#[error("not a valid o200k_base table: {0}")]
pub struct TableError(&'static str);

/// The ranks of `o200k_base`, sorted by token bytes.
pub struct Table {
    /// Everything, as written ([`Table::to_bytes`]).
    data: Vec<u8>,
    n: usize,
    regex: fancy_regex::Regex,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("tokens", &self.n).finish()
    }
}

impl Table {
    /// Builds the table from `tiktoken-rs`'s `o200k_base` (the slow build
    /// this table is there to avoid; done once, then stored).
    pub fn from_tiktoken() -> Table {
        let bpe = tiktoken_rs::o200k_base_singleton();
        let mut tokens: Vec<(Vec<u8>, Rank)> = Vec::with_capacity(200_000);
        // Ordinary ranks are 0..n without gaps; the special tokens come
        // after a gap.
        let mut rank: Rank = 0;
        while let Ok(bytes) = bpe.decode_bytes(&[rank]) {
            tokens.push((bytes, rank));
            rank += 1;
        }
        tokens.sort();
        let n = tokens.len();
        let mut body = Vec::with_capacity(8 * n + 4 + n * 8);
        let mut offset = 0u32;
        for (bytes, _) in &tokens {
            body.extend_from_slice(&offset.to_le_bytes());
            offset += bytes.len() as u32;
        }
        body.extend_from_slice(&offset.to_le_bytes());
        for (_, rank) in &tokens {
            body.extend_from_slice(&rank.to_le_bytes());
        }
        for (bytes, _) in &tokens {
            body.extend_from_slice(bytes);
        }
        let mut data = Vec::with_capacity(HEADER + body.len());
        data.extend_from_slice(MAGIC);
        data.extend_from_slice(&(n as u32).to_le_bytes());
        data.extend_from_slice(&Sha256::digest(&body));
        data.extend_from_slice(&body);
        Table {
            data,
            n,
            regex: split_regex(),
        }
    }

    /// The table as bytes, for [`Table::from_bytes`] in a later process.
    pub fn to_bytes(&self) -> &[u8] {
        &self.data
    }

    /// Reads a table written by [`Table::to_bytes`], verified (see the
    /// module docs).
    pub fn from_bytes(data: Vec<u8>) -> Result<Table, TableError> {
        if data.len() > MAX_TABLE_BYTES {
            return Err(TableError("too large"));
        }
        if data.len() < HEADER || &data[..8] != MAGIC {
            return Err(TableError("wrong header"));
        }
        let n = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes")) as usize;
        let body = &data[HEADER..];
        if n == 0 || body.len() < 8 * n + 4 {
            return Err(TableError("truncated"));
        }
        if Sha256::digest(body).as_slice() != &data[12..HEADER] {
            return Err(TableError("checksum mismatch"));
        }
        let table = Table {
            data,
            n,
            regex: split_regex(),
        };
        table.check()?;
        if table.count(PROBE) != PROBE_TOKENS {
            return Err(TableError("probe text counts wrong"));
        }
        Ok(table)
    }

    fn check(&self) -> Result<(), TableError> {
        let blob = self.blob_len();
        let mut seen = vec![false; self.n];
        let mut prev = 0;
        for i in 0..self.n {
            let (start, end) = (self.offset(i), self.offset(i + 1));
            if start != prev || end <= start || end > blob {
                return Err(TableError("offsets out of order or bounds"));
            }
            prev = end;
            if i > 0 && self.token(i - 1) >= self.token(i) {
                return Err(TableError("tokens not strictly sorted"));
            }
            let rank = self.rank_at(i) as usize;
            if rank >= self.n || std::mem::replace(&mut seen[rank], true) {
                return Err(TableError("ranks not a permutation"));
            }
        }
        if prev != blob {
            return Err(TableError("trailing bytes"));
        }
        if (0..=255u8).any(|b| self.rank(&[b]).is_none()) {
            return Err(TableError("a single byte is not a token"));
        }
        Ok(())
    }

    fn offset(&self, i: usize) -> usize {
        let at = HEADER + 4 * i;
        u32::from_le_bytes(self.data[at..at + 4].try_into().expect("4 bytes")) as usize
    }

    fn rank_at(&self, i: usize) -> Rank {
        let at = HEADER + 4 * (self.n + 1) + 4 * i;
        u32::from_le_bytes(self.data[at..at + 4].try_into().expect("4 bytes"))
    }

    fn blob_start(&self) -> usize {
        HEADER + 4 * (self.n + 1) + 4 * self.n
    }

    fn blob_len(&self) -> usize {
        self.data.len() - self.blob_start()
    }

    fn token(&self, i: usize) -> &[u8] {
        let base = self.blob_start();
        &self.data[base + self.offset(i)..base + self.offset(i + 1)]
    }

    /// The rank of `piece`, if it is a token.
    fn rank(&self, piece: &[u8]) -> Option<Rank> {
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.token(mid).cmp(piece) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.rank_at(mid)),
            }
        }
        None
    }

    /// How many `o200k_base` tokens `text` is.
    pub fn count(&self, text: &str) -> usize {
        let mut tokens = 0;
        let mut end = 0;
        for m in self.regex.find_iter(text) {
            let Ok(m) = m else {
                // The split pattern gave up (backtracking limit; tiktoken
                // would panic here): every byte left is at most one token.
                return tokens + text.len() - end;
            };
            end = m.end();
            let piece = m.as_str().as_bytes();
            tokens += if self.rank(piece).is_some() {
                1
            } else if piece.len() < 100 {
                self.merge_small(piece)
            } else {
                self.merge_large(piece)
            };
        }
        tokens
    }

    fn get(&self, piece: &[u8]) -> Rank {
        self.rank(piece).unwrap_or(Rank::MAX)
    }

    /// Tokens of a piece that is no token, merging the lowest-ranked pair
    /// first (`tiktoken`'s `_byte_pair_merge`).
    fn merge_small(&self, piece: &[u8]) -> usize {
        let mut parts: Vec<(usize, Rank)> = Vec::with_capacity(piece.len() + 1);
        let mut min: (Rank, usize) = (Rank::MAX, usize::MAX);
        for i in 0..piece.len() - 1 {
            let rank = self.get(&piece[i..i + 2]);
            if rank < min.0 {
                min = (rank, i);
            }
            parts.push((i, rank));
        }
        parts.push((piece.len() - 1, Rank::MAX));
        parts.push((piece.len(), Rank::MAX));
        let get_rank = |parts: &Vec<(usize, Rank)>, i: usize| {
            if i + 3 < parts.len() {
                self.get(&piece[parts[i].0..parts[i + 3].0])
            } else {
                Rank::MAX
            }
        };
        while min.0 != Rank::MAX {
            let i = min.1;
            if i > 0 {
                parts[i - 1].1 = get_rank(&parts, i - 1);
            }
            parts[i].1 = get_rank(&parts, i);
            parts.remove(i + 1);
            min = (Rank::MAX, usize::MAX);
            for (i, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
                if rank < min.0 {
                    min = (rank, i);
                }
            }
        }
        parts.len() - 1
    }

    /// The same merge with a heap, for long pieces (`tiktoken`'s
    /// `_byte_pair_merge_large`): the same order, without the quadratic
    /// rescans.
    fn merge_large(&self, piece: &[u8]) -> usize {
        #[derive(PartialEq, Eq)]
        struct Merge {
            start: usize,
            rank: Rank,
        }
        impl Ord for Merge {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                other
                    .rank
                    .cmp(&self.rank)
                    .then_with(|| other.start.cmp(&self.start))
            }
        }
        impl PartialOrd for Merge {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        struct State {
            prev: usize,
            end: usize,
            next_end: usize,
            next_rank: Rank,
        }
        let mut state = Vec::with_capacity(piece.len());
        state.push(State {
            prev: usize::MAX,
            end: 1,
            next_end: 2,
            next_rank: Rank::MAX,
        });
        let mut heap = BinaryHeap::with_capacity(piece.len());
        for i in 0..piece.len() - 1 {
            let rank = self.get(&piece[i..i + 2]);
            if rank != Rank::MAX {
                heap.push(Merge { start: i, rank });
                state[i].next_rank = rank;
            }
            state.push(State {
                prev: i,
                end: i + 2,
                next_end: i + 3,
                next_rank: Rank::MAX,
            });
        }
        let potential =
            |state: &mut Vec<State>, heap: &mut BinaryHeap<Merge>, start: usize, next: usize| {
                state[start].next_end = next;
                state[start].next_rank = Rank::MAX;
                if next <= piece.len() {
                    let rank = self.get(&piece[start..next]);
                    if rank != Rank::MAX {
                        heap.push(Merge { start, rank });
                        state[start].next_rank = rank;
                    }
                }
            };
        while let Some(left) = heap.pop() {
            if left.rank != state[left.start].next_rank {
                continue;
            }
            let left_start = left.start;
            let right_start = state[left_start].end;
            let right_end = state[left_start].next_end;
            let right_next_end = state[right_start].next_end;
            state[left_start].end = right_end;
            potential(&mut state, &mut heap, left_start, right_next_end);
            if right_end < state.len() {
                state[right_end].prev = left_start;
            }
            if left_start > 0 {
                let prev_start = state[left_start].prev;
                potential(&mut state, &mut heap, prev_start, right_end);
            }
            state[right_start].next_rank = Rank::MAX;
        }
        let mut tokens = 0;
        let mut i = 0;
        while i < state.len() {
            tokens += 1;
            i = state[i].end;
        }
        tokens
    }
}

fn split_regex() -> fancy_regex::Regex {
    fancy_regex::Regex::new(tiktoken_rs::O200K_BASE_PAT_STR).expect("tiktoken's pattern compiles")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(text: &str) -> usize {
        tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(text)
            .len()
    }

    fn table() -> &'static Table {
        static TABLE: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
        TABLE.get_or_init(|| Table::from_bytes(Table::from_tiktoken().to_bytes().to_vec()).unwrap())
    }

    #[test]
    fn the_probe_constant_is_tiktokens_count() {
        assert_eq!(exact(PROBE), PROBE_TOKENS);
        assert_eq!(table().n, 199_998);
    }

    /// The table counts exactly what tiktoken-rs counts, on prose, code,
    /// whitespace runs, non-Latin scripts, and long pieces that take the
    /// heap merge (base64, one long word, long digit and symbol runs).
    #[test]
    fn counts_equal_tiktoken() {
        let mut texts: Vec<String> = vec![
            String::new(),
            "hello world".into(),
            "fn main() {\n    println!(\"hi\");\n}\n".repeat(30),
            "   \t\n\n\r\n  trailing   ".into(),
            "naïve café, Ünïcödé façade — “quotes” and ‘apostrophes’ I'M YOU'RE they'll".into(),
            "東京都の天気は晴れです。ありがとうございました。 한국어 텍스트 русский текст العربية"
                .into(),
            "x".repeat(250),
            "ab".repeat(333),
            "1234567890".repeat(20),
            "!@#$%^&*()_+-=[]{}|;:,.<>?/~`".repeat(10),
            "😀🎉👍🏽 emoji 🧑‍🚀".repeat(7),
            "aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQgZW5jb2RlZCB0ZXh0IHRoYXQgaXMgbG9uZw==".repeat(9),
            "diff --git a/src/x.rs b/src/x.rs\n@@ -1,4 +1,5 @@\n-old line\n+new line\n".repeat(12),
        ];
        // Pseudo-random byte soup of valid UTF-8 (a fixed LCG, so the test
        // is the same every run).
        let alphabet: Vec<char> = "aZ9 _\n\t.,'é東😀-+\"{}()ßøΩжß\r".chars().collect();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in [10, 57, 99, 100, 101, 400, 2000] {
            let mut s = String::new();
            for _ in 0..len {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                s.push(alphabet[(x >> 33) as usize % alphabet.len()]);
            }
            texts.push(s.clone());
            texts.push(s.replace([' ', '\n', '\t', '\r'], ""));
        }
        for text in &texts {
            assert_eq!(table().count(text), exact(text), "{text:?}");
        }
    }

    #[test]
    fn broken_tables_are_refused() {
        let good = table().to_bytes().to_vec();
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let mut resealed = good.clone();
        // Two tokens with one rank, checksum recomputed: the layout check
        // catches it.
        let at = HEADER + 4 * (table().n + 1);
        let second: [u8; 4] = resealed[at + 4..at + 8].try_into().unwrap();
        resealed[at..at + 4].copy_from_slice(&second);
        let digest = Sha256::digest(&resealed[HEADER..]);
        resealed[12..HEADER].copy_from_slice(&digest);
        for (bytes, why) in [
            (Vec::new(), "wrong header"),
            (good[..good.len() / 2].to_vec(), "truncated"),
            (good[..good.len() - 100].to_vec(), "checksum"),
            (flipped, "checksum"),
            (resealed, "permutation"),
            (vec![0; MAX_TABLE_BYTES + 1], "too large"),
        ] {
            let err = Table::from_bytes(bytes).unwrap_err().to_string();
            assert!(err.contains(why), "{err} ({why})");
        }
    }
}
