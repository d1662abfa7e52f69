//! OpenCode's id shapes: `<prefix>_<12 hex><14 base62>`.
//!
//! The 12 hex digits are the low 48 bits of `ms * 0x1000 + counter`, so ids
//! made later sort later (messages and parts are read in id order); session
//! ids use the bitwise complement, so newer sessions sort first. The tail is
//! random in OpenCode; here it is derived from a seed, so a render is
//! deterministic.

/// The base62 alphabet OpenCode uses for id tails.
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Returns the 64-bit FNV-1a hash of `bytes`: a stable, cheap fingerprint
/// (not a defence against crafted collisions; nothing here needs one).
pub fn fnv64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Returns `len` base62 characters derived from `seed`.
pub fn base62(seed: &str, len: usize) -> String {
    let mut out = String::with_capacity(len);
    let mut h = fnv64(seed.as_bytes());
    let mut round = 0u64;
    while out.len() < len {
        if h == 0 {
            round += 1;
            h = fnv64(format!("{seed}#{round}").as_bytes());
        }
        out.push(BASE62[(h % 62) as usize] as char);
        h /= 62;
    }
    out
}

/// Returns an ascending id (`msg`, `prt`) for time `ms` and `counter`.
pub fn ascending(prefix: &str, ms: i64, counter: u64, seed: &str) -> String {
    let value = ((ms.max(0) as u64) << 12).wrapping_add(counter & 0xfff) & 0xffff_ffff_ffff;
    format!("{prefix}_{value:012x}{}", base62(seed, 14))
}

/// Returns a session id (`ses_…`, descending with time) for time `ms`.
pub fn session(ms: i64, seed: &str) -> String {
    let value = ((ms.max(0) as u64) << 12).wrapping_add(1) & 0xffff_ffff_ffff;
    format!("ses_{:012x}{}", !value & 0xffff_ffff_ffff, base62(seed, 14))
}

/// Returns whether `id` can be used as an OpenCode id with `prefix`: the
/// prefix, `_`, then 1 to 64 ASCII letters, digits or `_`.
pub fn valid(prefix: &str, id: &str) -> bool {
    let Some(rest) = id.strip_prefix(prefix).and_then(|r| r.strip_prefix('_')) else {
        return false;
    };
    !rest.is_empty()
        && rest.len() <= 64
        && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_clients_shape_and_order() {
        let a = ascending("msg", 1_795_938_125_774, 1, "x");
        let b = ascending("msg", 1_795_938_125_774, 2, "x");
        let c = ascending("msg", 1_795_938_125_775, 0, "x");
        assert_eq!(a.len(), 4 + 12 + 14);
        assert!(a < b && b < c, "{a} {b} {c}");
        // The sample's first message id has this time prefix.
        assert!(ascending("msg", 1_795_938_125_774, 1, "x").starts_with("msg_2264107ce001"));
        let old = session(1_795_938_125_444, "a");
        let new = session(1_795_938_225_444, "a");
        assert!(new < old, "newer sessions sort first");
        assert!(old.starts_with("ses_dd9bef97bffe"), "{old}");
        assert!(valid("ses", &old));
        assert!(!valid("ses", "msg_x"));
        assert!(!valid("ses", "ses_../../x"));
        assert!(!valid("ses", "ses_"));
    }
}
