//! The record uuids of a transcript, packed small for the parse state.
//!
//! Parsing links each record to its parent's last event, so it must find the
//! seq for any uuid seen earlier in the file, also in a later incremental
//! parse. A map of uuid strings in the state costs ~50 bytes a record and,
//! worse, is rebuilt from JSON and written out again on every call (`ops`
//! parses a large file in blocks, and re-reads the state on each capture).
//! Here each record is 12 bytes, a 64-bit hash of the uuid and the seq,
//! written as exactly 16 base64 characters, so the whole index is one
//! string that moves in and out of the state without being decoded. A parent
//! is nearly always one of the last few records, found by decoding only
//! those; a lookup that misses them (a branch, a compaction, a parent in
//! another file) decodes the rest into a hash map once per call.
//!
//! The map outlives the call in the capture's [`crate::ParseMemo`]
//! ([`UuidIndex::keep_map`], [`UuidIndex::reuse_map`]): capture parses a
//! file in small blocks, and a map rebuilt for each would cost the whole
//! index every block.
//!
//! A 64-bit hash can collide; for two distinct uuids among a million records
//! the odds are about 1 in 3·10^7 per file, and the cost would be one wrong
//! `parent_seq`, which only orders the canonical tree (the renderer writes
//! the kept `parentUuid`).

use std::collections::HashMap;

use base64::Engine;

/// Characters per entry: 12 bytes make 16 base64 characters, no padding.
const ENTRY_CHARS: usize = 16;

/// Entries checked from the end before falling back to the full map.
const RECENT: usize = 64;

/// Maps record uuids to the seq of their line's last event.
#[derive(Clone, Debug, Default)]
pub(crate) struct UuidIndex {
    /// Every entry, oldest first, as base64 (see the module docs).
    packed: String,
    /// The entries of `packed[..indexed * ENTRY_CHARS]`, built on the first
    /// lookup the recent entries cannot answer; later entries overwrite
    /// earlier ones, as in the file.
    map: Option<HashMap<u64, u64>>,
    indexed: usize,
}

impl UuidIndex {
    /// Returns the index held by a state string; a string that is not a
    /// whole number of entries is cut back to one.
    pub(crate) fn from_packed(mut packed: String) -> UuidIndex {
        let whole = packed.len() / ENTRY_CHARS * ENTRY_CHARS;
        if !packed.is_char_boundary(whole) {
            packed.clear();
        }
        packed.truncate(whole);
        UuidIndex {
            packed,
            map: None,
            indexed: 0,
        }
    }

    /// Returns the packed form for the state.
    pub(crate) fn into_packed(self) -> String {
        self.packed
    }

    /// Leaves the map built so far (if any) in `memo` for the next call.
    pub(crate) fn keep_map(&mut self, memo: &mut crate::ParseMemo) {
        if let Some(map) = self.map.take() {
            memo.put(KeptMap {
                map,
                indexed: self.indexed,
            });
        }
    }

    /// Takes up the map the last call of this capture kept in `memo`. The
    /// state's index only grows between calls, so the map's entries are
    /// the first of this index; one that claims more entries than the
    /// index has is not this index's and is dropped.
    pub(crate) fn reuse_map(&mut self, memo: &mut crate::ParseMemo) {
        if let Some(kept) = memo.take::<KeptMap>()
            && kept.indexed <= self.packed.len() / ENTRY_CHARS
        {
            self.map = Some(kept.map);
            self.indexed = kept.indexed;
        }
    }

    /// Records that `uuid`'s line ended with event `seq`.
    pub(crate) fn insert(&mut self, uuid: &str, seq: u64) {
        let mut entry = [0u8; 12];
        entry[..8].copy_from_slice(&hash(uuid).to_le_bytes());
        // Seqs past u32 would need four billion events in one file; such an
        // entry is left out (its children get no parent_seq) rather than
        // stored wrong.
        let Ok(seq) = u32::try_from(seq) else {
            return;
        };
        entry[8..].copy_from_slice(&seq.to_le_bytes());
        base64::engine::general_purpose::STANDARD_NO_PAD.encode_string(entry, &mut self.packed);
    }

    /// Returns the seq recorded last for `uuid`.
    pub(crate) fn get(&mut self, uuid: &str) -> Option<u64> {
        let h = hash(uuid);
        let n = self.packed.len() / ENTRY_CHARS;
        for i in (n.saturating_sub(RECENT)..n).rev() {
            match self.entry(i) {
                Some((eh, seq)) if eh == h => return Some(seq),
                _ => {}
            }
        }
        if n <= RECENT {
            return None;
        }
        let mut map = self.map.take().unwrap_or_default();
        for i in self.indexed..n {
            if let Some((eh, seq)) = self.entry(i) {
                map.insert(eh, seq);
            }
        }
        self.indexed = n;
        let found = map.get(&h).copied();
        self.map = Some(map);
        found
    }

    fn entry(&self, i: usize) -> Option<(u64, u64)> {
        let chars = self.packed.get(i * ENTRY_CHARS..(i + 1) * ENTRY_CHARS)?;
        let mut bytes = [0u8; 12];
        base64::engine::general_purpose::STANDARD_NO_PAD
            .decode_slice(chars, &mut bytes)
            .ok()?;
        let (h, seq) = bytes.split_at(8);
        let h = u64::from_le_bytes(h.try_into().ok()?);
        let seq = u32::from_le_bytes(seq.try_into().ok()?);
        Some((h, u64::from(seq)))
    }
}

/// A [`UuidIndex`]'s map between two parse calls.
struct KeptMap {
    map: HashMap<u64, u64>,
    indexed: usize,
}

/// Returns the 64-bit FNV-1a hash of `s`: stable across builds and
/// platforms, unlike the standard library's hasher.
fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A map kept by one call is taken up by the next (nothing decoded
    /// again), goes on answering as the index grows, and one that claims
    /// more entries than the index has is not taken.
    #[test]
    fn the_map_outlives_the_call_in_the_memo_and_a_foreign_one_is_dropped() {
        let mut first = UuidIndex::default();
        for i in 0..500u64 {
            first.insert(&format!("uuid-{i}"), i);
        }
        assert_eq!(first.get("uuid-3"), Some(3), "builds the map");
        let mut memo = crate::ParseMemo::default();
        first.keep_map(&mut memo);
        let packed = first.into_packed();

        let mut next = UuidIndex::from_packed(packed.clone());
        next.reuse_map(&mut memo);
        assert_eq!(next.indexed, 500, "the kept map is taken up");
        assert!(next.map.is_some());
        next.insert("late", 9_000);
        for _ in 0..RECENT {
            next.insert("filler", 1);
        }
        assert_eq!(next.get("uuid-4"), Some(4));
        assert_eq!(next.get("late"), Some(9_000), "entries after the kept map");
        assert_eq!(next.get("missing"), None);

        next.keep_map(&mut memo);
        let mut shorter = UuidIndex::from_packed(packed[..10 * ENTRY_CHARS].to_owned());
        shorter.reuse_map(&mut memo);
        assert!(
            shorter.map.is_none(),
            "a map of more entries is another index's"
        );
        assert_eq!(shorter.get("uuid-400"), None);
        assert_eq!(shorter.get("uuid-9"), Some(9));
    }

    #[test]
    fn recent_and_far_uuids_are_found_and_the_last_entry_wins() {
        let mut index = UuidIndex::default();
        for i in 0..1000u64 {
            index.insert(&format!("uuid-{i}"), i * 2);
        }
        index.insert("uuid-5", 7777);
        assert_eq!(index.get("uuid-999"), Some(1998), "recent");
        assert_eq!(index.get("uuid-3"), Some(6), "far back");
        assert_eq!(index.get("uuid-5"), Some(7777), "later entry wins");
        assert_eq!(index.get("missing"), None);
        // Entries added after the map was built are found too.
        index.insert("late", 1);
        for i in 0..RECENT as u64 {
            index.insert(&format!("filler-{i}"), 2);
        }
        assert_eq!(index.get("late"), Some(1));
        // The packed form carries everything to the next call.
        let mut again = UuidIndex::from_packed(index.into_packed());
        assert_eq!(again.get("uuid-3"), Some(6));
        assert_eq!(again.get("late"), Some(1));
    }

    #[test]
    fn a_damaged_packed_string_is_cut_to_whole_entries() {
        let mut index = UuidIndex::default();
        index.insert("a", 1);
        let mut packed = index.into_packed();
        packed.push_str("xyz");
        let mut again = UuidIndex::from_packed(packed);
        assert_eq!(again.get("a"), Some(1));
    }
}
