//! Encoding dsh's physical log: concatenated standard Zstandard frames
//! (RFC 8878), each with the content checksum, one per append batch.
//!
//! Only encoding lives here, because it is pure (bytes in, bytes out) and
//! render needs it; decoding, checksum checks and torn tails belong to the
//! root crate's zstd-framed native source, which reads files.

/// Largest plaintext render puts in one frame. dsh's own batches are 88 B
/// to 8 KB; any size works, and a line never spans two frames.
pub const FRAME_PLAINTEXT: usize = 64 * 1024;

/// Returns one checksummed Zstandard frame holding `plain`.
///
/// Level 3 (zstd's default, like Node's `zlib.zstdCompress`), content
/// checksum on, no dictionary: the frames dsh writes and accepts.
pub fn encode_frame(plain: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(plain.len() / 3 + 32);
    let mut enc = zstd::stream::Encoder::new(&mut out, 3)
        .expect("a zstd encoder at level 3 can always be made");
    enc.include_checksum(true)
        .expect("the checksum flag is a valid parameter");
    std::io::Write::write_all(&mut enc, plain).expect("writing into a Vec cannot fail");
    enc.finish().expect("finishing into a Vec cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_magic_and_checksum_and_decode() {
        let frame = encode_frame(b"{\"a\":1}\n");
        assert_eq!(&frame[..4], &[0x28, 0xB5, 0x2F, 0xFD]);
        // Frame header descriptor: bit 2 = Content_Checksum_flag.
        assert_ne!(frame[4] & 0x04, 0);
        let mut two = frame.clone();
        two.extend(encode_frame(b"x\n"));
        assert_eq!(zstd::decode_all(&two[..]).unwrap(), b"{\"a\":1}\nx\n");
    }
}
