//! Compact JSON for `serde_json::Value`s, byte for byte what
//! `serde_json::to_writer` writes, in fewer instructions.
//!
//! Every stored event is serialized once to be hashed and stored
//! ([`crate::Event::write_content`]), and every line a native write-back
//! renders once, so this runs over every byte of every session a capture
//! or a resume writes. serde_json tests each byte of a string against its
//! escape table; here a string is scanned eight bytes at a time for the
//! bytes that need escaping (below 0x20, `"` and `\`); only the words
//! that may hold one are looked at byte by byte, and the runs between
//! escapes are copied whole. Escapes are serde_json's: `\b \t \n \f \r
//! \" \\`, and `\u00xx` with lowercase hex for the other control
//! characters; nothing else is escaped (not DEL, not non-ASCII). Numbers
//! go through serde_json itself. Objects are written in their map's
//! order, as serde_json writes them.
//!
//! The bytes are the stored and hashed form: a test compares them with
//! serde_json's on random values of every byte and character class.

use serde_json::{Map, Value};

/// Appends `value` to `out` as compact JSON.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            serde_json::to_writer(&mut *out, n).expect("a number serializes into a Vec")
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

/// Appends `map` to `out` as a compact JSON object, in the map's order.
pub fn write_object(out: &mut Vec<u8>, map: &Map<String, Value>) {
    out.push(b'{');
    for (i, (key, item)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, key);
        out.push(b':');
        write_value(out, item);
    }
    out.push(b'}');
}

/// Strings from this many bytes on are long (a pasted log, a file read
/// whole): see [`write_str`].
const LONG: usize = 1 << 20;

/// Appends `text` to `out` as a JSON string.
///
/// A long string that does not fit reserves exactly its room and an
/// eighth more, for its escapes and the rest of its event: `Vec`'s
/// doubling would leave `out` twice the event's size (a 100 MB line held
/// 200 MB where it was serialized, and mimalloc does not give back a block
/// shrunk by half or less).
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    let need = bytes.len() + 2;
    if need >= LONG && out.capacity() - out.len() < need {
        out.reserve_exact(need + need / 8 + 4096);
    } else {
        out.reserve(need);
    }
    out.push(b'"');
    let mut run = 0;
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        if may_escape(u64::from_le_bytes(word.try_into().expect("eight bytes"))) {
            for (i, &byte) in word.iter().enumerate() {
                escape(out, bytes, &mut run, at + i, byte);
            }
        }
        at += 8;
    }
    for (i, &byte) in words.remainder().iter().enumerate() {
        escape(out, bytes, &mut run, at + i, byte);
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// Writes `byte` (at `at` in `bytes`) escaped when it must be, after the
/// run of plain bytes before it (from `run`).
#[inline(always)]
fn escape(out: &mut Vec<u8>, bytes: &[u8], run: &mut usize, at: usize, byte: u8) {
    let escape = ESCAPE[byte as usize];
    if escape == 0 {
        return;
    }
    out.extend_from_slice(&bytes[*run..at]);
    out.push(b'\\');
    out.push(escape);
    if escape == b'u' {
        out.extend_from_slice(b"00");
        out.push(HEX[(byte >> 4) as usize]);
        out.push(HEX[(byte & 0x0f) as usize]);
    }
    *run = at + 1;
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Says whether some byte of `word` may need escaping: below 0x20, `"` or
/// `\`. Never false when one does (each test is exact for "some byte");
/// a true answer is checked byte by byte.
fn may_escape(word: u64) -> bool {
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = has_zero(word ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(word ^ (ONES * u64::from(b'\\')));
    (below_space | quote | backslash) & HIGHS != 0
}

/// The high bit of a byte is set where `word` may have a zero byte (set
/// for at least one byte whenever it has one).
fn has_zero(word: u64) -> u64 {
    word.wrapping_sub(ONES) & !word
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// What follows the backslash for each byte that is escaped (0: written as
/// it is); `u` means `\u00xx`.
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_long_string_and_what_follows_it_fit_without_doubling() {
        // A pasted log with a line break every 60 bytes, in an object with
        // members after it: the buffer holds it with room to spare, not
        // twice over.
        let log: String = (0..40_000).map(|i| format!("{i:>59}\n")).collect();
        let value = json!({"text": log, "after": "a short member", "n": 1});
        let mut out = Vec::new();
        write_value(&mut out, &value);
        assert_eq!(out, serde_json::to_vec(&value).unwrap());
        assert!(
            out.capacity() < out.len() + out.len() / 4,
            "{} bytes in room for {}",
            out.len(),
            out.capacity()
        );
    }

    /// A small deterministic generator (xorshift), so a failure replays.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        /// Text mixing every class the writer treats apart: plain ASCII,
        /// control characters, quotes and backslashes, DEL, two- to
        /// four-byte characters, in runs that straddle eight-byte words.
        fn text(&mut self) -> String {
            let len = self.below(40);
            (0..len)
                .map(|_| match self.below(10) {
                    0 => char::from(self.below(0x20) as u8),
                    1 => '"',
                    2 => '\\',
                    3 => '\u{7f}',
                    4 => ['é', 'ü', 'ß'][self.below(3) as usize],
                    5 => ['€', '中', '\u{2028}'][self.below(3) as usize],
                    6 => ['😀', '\u{10ffff}'][self.below(2) as usize],
                    _ => char::from(0x20 + self.below(0x5f) as u8),
                })
                .collect()
        }

        fn value(&mut self, depth: u32) -> Value {
            let pick = if depth == 0 { 5 } else { 7 };
            match self.below(pick) {
                0 => Value::Null,
                1 => Value::Bool(self.below(2) == 0),
                2 => json!(self.next()),
                3 => json!(-(self.below(1 << 40) as i64)),
                4 => json!(f64::from_bits(self.next() >> 2) / 3.0),
                5 => Value::String(self.text()),
                6 => Value::Array((0..self.below(5)).map(|_| self.value(depth - 1)).collect()),
                _ => {
                    let mut map = Map::new();
                    for _ in 0..self.below(5) {
                        let key = self.text();
                        map.insert(key, self.value(depth - 1));
                    }
                    Value::Object(map)
                }
            }
        }
    }

    fn ours(value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        write_value(&mut out, value);
        out
    }

    #[test]
    fn every_byte_is_written_as_serde_json_writes_it() {
        // Each byte value alone and at every position of a word.
        for b in 0u8..0x80 {
            for at in 0..9 {
                let mut text = "a".repeat(at);
                text.push(char::from(b));
                text.push_str("bcdefghij");
                let value = Value::String(text);
                assert_eq!(
                    ours(&value),
                    serde_json::to_vec(&value).unwrap(),
                    "byte {b:#x} at {at}"
                );
            }
        }
    }

    #[test]
    fn random_values_are_written_as_serde_json_writes_them() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let value = rng.value(4);
            assert_eq!(
                ours(&value),
                serde_json::to_vec(&value).unwrap(),
                "{value:?}"
            );
        }
    }

    #[test]
    fn long_strings_with_rare_escapes() {
        let mut text = "x".repeat(1000);
        text.insert(997, '\n');
        text.insert(8, '"');
        text.insert(0, '\u{1f}');
        let value = json!({ "k\\ey": text, "list": [text.clone(), ""] });
        assert_eq!(ours(&value), serde_json::to_vec(&value).unwrap());
    }
}
