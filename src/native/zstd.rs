//! Zstd-framed sources: files of concatenated Zstandard frames (RFC 8878),
//! each frame holding whole JSONL lines, read frame by frame.
//!
//! The layout is DeepSeek Harness's session log (`shared/formats/dsh.md`),
//! and the reading rules are dsh's own, so that capture sees what dsh
//! would load:
//!
//! * the frame structure (magic, header, block headers and sizes, checksum
//!   trailer) is walked before anything is decoded; a skippable frame, a
//!   reserved header bit or block type, or an oversized block is corruption;
//! * **EOF inside the last frame is a torn tail**: the complete frames
//!   before it are returned and the cursor stays at the torn frame's first
//!   byte, so the next capture reads it once the writer finished it (or
//!   once dsh's crash repair rewrote it there);
//! * a complete frame whose decompression or content checksum fails, or
//!   whose text does not end with a newline, refuses the file with dsh's
//!   wording ("corrupt Zstandard session log: frame at byte N failed
//!   validation") and the byte offset;
//! * sizes are bounded before anything is inflated: a frame may hold at
//!   most [`MAX_FRAME_BYTES`] compressed and [`MAX_FRAME_PLAIN`] decoded.
//!
//! Cursor: the byte offset of the next frame, the frames and lines read.
//! Files are only opened for reading.
//!
//! [`encode_frame`] is the other direction, for write-back: the sink of a
//! framed file (`FileSink::begin_framed`) turns each frame an adapter
//! closes into one checksummed frame with it.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use git_session_adapters::Records;
use git_session_adapters::source::Frame;

use super::jsonl::{ReadPosition, RecordReader};
use super::{NativeError, NativeResult};

/// Decoded bytes handed to the adapter per parse call (whole frames).
pub const BATCH_BYTES: usize = 1 << 20;

/// Largest compressed frame accepted.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// Largest decoded frame accepted.
pub const MAX_FRAME_PLAIN: usize = 256 << 20;

/// The zstd frame magic number, little-endian on disk: `28 B5 2F FD`.
const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// The largest block the format allows (Block_Maximum_Size).
const MAX_BLOCK: usize = 128 << 10;

/// Reads a zstd-framed file from a frame boundary.
pub struct ZstdReader {
    path: PathBuf,
    file: BufReader<File>,
    frames: Vec<Frame>,
    pos: ReadPosition,
    /// The file size when opened: frames are read up to it only, so a
    /// frame appended meanwhile waits for the next capture.
    size: u64,
    done: bool,
    /// Set when the last frame was torn: its offset.
    torn: Option<u64>,
}

impl ZstdReader {
    /// Opens `path` at `offset` (a frame boundary), which is frame
    /// `first_frame` and decoded line `first_line`.
    pub fn open(
        path: &Path,
        offset: u64,
        first_frame: u64,
        first_line: u64,
    ) -> NativeResult<ZstdReader> {
        let mut file = File::open(path).map_err(NativeError::io(path))?;
        let size = file.metadata().map_err(NativeError::io(path))?.len();
        file.seek(SeekFrom::Start(offset))
            .map_err(NativeError::io(path))?;
        Ok(ZstdReader {
            path: path.to_owned(),
            file: BufReader::with_capacity(1 << 16, file),
            frames: Vec::new(),
            pos: ReadPosition {
                offset,
                lines: first_line,
                frames: first_frame,
            },
            size,
            done: offset >= size,
            torn: None,
        })
    }

    /// Returns the decoded first frame of a file, when it is complete (for
    /// learning a new file's session facts from its header).
    pub fn head(path: &Path) -> NativeResult<Option<Vec<u8>>> {
        let mut r = ZstdReader::open(path, 0, 0, 0)?;
        Ok(r.next_frame()?.map(|f| f.bytes))
    }

    /// Returns the offset of the torn last frame, when the read ended in one.
    pub fn torn(&self) -> Option<u64> {
        self.torn
    }

    fn corrupt(&self, at: u64, what: &str) -> NativeError {
        NativeError::Source {
            path: self.path.clone(),
            message: format!("corrupt Zstandard session log: frame at byte {at} {what}"),
        }
    }

    /// Reads exactly `buf.len()` bytes unless the file (as opened) ends
    /// first; returns whether it did.
    fn fill(&mut self, at: &mut u64, buf: &mut [u8]) -> NativeResult<bool> {
        if *at + buf.len() as u64 > self.size {
            return Ok(false);
        }
        self.file
            .read_exact(buf)
            .map_err(NativeError::io(&self.path))?;
        *at += buf.len() as u64;
        Ok(true)
    }

    /// Reads the next complete frame; `None` at the end or at a torn tail.
    fn next_frame(&mut self) -> NativeResult<Option<Frame>> {
        if self.done {
            return Ok(None);
        }
        let start = self.pos.offset;
        let mut at = start;
        let mut raw = Vec::new();
        macro_rules! take {
            ($n:expr) => {{
                let mut b = vec![0u8; $n];
                if !self.fill(&mut at, &mut b)? {
                    return Ok(self.torn_at(start));
                }
                raw.extend_from_slice(&b);
                b
            }};
        }
        let magic = take!(4);
        if magic != MAGIC {
            return Err(self.corrupt(
                start,
                "has an invalid frame magic (skippable frames are not allowed)",
            ));
        }
        let fhd = take!(1)[0];
        if fhd & 0x08 != 0 || fhd & 0x10 != 0 {
            return Err(self.corrupt(start, "has a reserved frame header bit set"));
        }
        let single = fhd & 0x20 != 0;
        let checksum = fhd & 0x04 != 0;
        let dict = [0, 1, 2, 4][usize::from(fhd & 0x03)];
        let fcs = match fhd >> 6 {
            0 => usize::from(single),
            1 => 2,
            2 => 4,
            _ => 8,
        };
        let rest = usize::from(!single) + dict + fcs;
        take!(rest);
        loop {
            let bh = take!(3);
            let header = u32::from(bh[0]) | u32::from(bh[1]) << 8 | u32::from(bh[2]) << 16;
            let last = header & 1 != 0;
            let kind = (header >> 1) & 3;
            let size = (header >> 3) as usize;
            let body = match kind {
                0 | 2 => size,
                1 => 1,
                _ => return Err(self.corrupt(start, "has a reserved block type")),
            };
            if size > MAX_BLOCK {
                return Err(self.corrupt(start, "has a block larger than the format allows"));
            }
            if raw.len() + body > MAX_FRAME_BYTES {
                return Err(self.corrupt(start, &format!("is larger than {MAX_FRAME_BYTES} bytes")));
            }
            take!(body);
            if last {
                break;
            }
        }
        if checksum {
            take!(4);
        }
        let plain = self.decode(start, &raw)?;
        let frame = Frame {
            index: self.pos.frames,
            offset: start,
            first_line: self.pos.lines,
            bytes: plain,
        };
        self.pos.offset = at;
        self.pos.frames += 1;
        self.pos.lines += frame.bytes.iter().filter(|&&b| b == b'\n').count() as u64;
        if at >= self.size {
            self.done = true;
        }
        Ok(Some(frame))
    }

    fn torn_at(&mut self, start: u64) -> Option<Frame> {
        self.done = true;
        self.torn = Some(start);
        None
    }

    /// Decompresses one complete frame, checksum verified, size bounded.
    fn decode(&self, start: u64, raw: &[u8]) -> NativeResult<Vec<u8>> {
        let failed = || self.corrupt(start, "failed validation");
        let mut dec = zstd::stream::read::Decoder::with_buffer(raw)
            .map_err(|_| failed())?
            .single_frame();
        let mut plain = Vec::new();
        (&mut dec)
            .take(MAX_FRAME_PLAIN as u64 + 1)
            .read_to_end(&mut plain)
            .map_err(|_| failed())?;
        if plain.len() > MAX_FRAME_PLAIN {
            return Err(self.corrupt(
                start,
                &format!("decodes to more than {MAX_FRAME_PLAIN} bytes"),
            ));
        }
        if plain.last().is_some_and(|&b| b != b'\n') {
            return Err(self.corrupt(start, "ends inside a line (a line never spans frames)"));
        }
        if self.pos.frames == 0 && plain.iter().filter(|&&b| b == b'\n').count() != 1 {
            return Err(self.corrupt(
                start,
                "is the first frame but does not hold exactly the header line",
            ));
        }
        Ok(plain)
    }
}

/// Returns one checksummed Zstandard frame holding `plain`.
///
/// Level 3 (zstd's default, like Node's `zlib.zstdCompress` that dsh
/// uses), content checksum on, no dictionary: the frames dsh writes and
/// accepts.
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

impl RecordReader for ZstdReader {
    fn next_batch(&mut self) -> NativeResult<Option<Records<'_>>> {
        self.frames.clear();
        let mut bytes = 0;
        while bytes < BATCH_BYTES {
            match self.next_frame()? {
                Some(f) => {
                    bytes += f.bytes.len();
                    self.frames.push(f);
                }
                None => break,
            }
        }
        if self.frames.is_empty() {
            return Ok(None);
        }
        Ok(Some(Records::Frames(&self.frames)))
    }

    fn position(&self) -> ReadPosition {
        self.pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(plain: &[u8]) -> Vec<u8> {
        let out = encode_frame(plain);
        // Content checksum flag set, as dsh writes them.
        assert_ne!(out[4] & 0x04, 0);
        out
    }

    fn log(frames: &[&[u8]]) -> (Vec<u8>, Vec<u64>) {
        let mut out = Vec::new();
        let mut offsets = Vec::new();
        for f in frames {
            offsets.push(out.len() as u64);
            out.extend(frame(f));
        }
        (out, offsets)
    }

    fn read_all(bytes: &[u8]) -> (NativeResult<Vec<Frame>>, ReadPosition, Option<u64>) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("session.v4.jsonl.zstd");
        std::fs::write(&p, bytes).unwrap();
        let mut r = ZstdReader::open(&p, 0, 0, 0).unwrap();
        let mut all = Vec::new();
        let res = loop {
            match r.next_batch() {
                Ok(Some(Records::Frames(fs))) => all.extend(fs.iter().cloned()),
                Ok(Some(_)) => unreachable!(),
                Ok(None) => break Ok(all),
                Err(e) => break Err(e),
            }
        };
        (res, r.position(), r.torn())
    }

    const H: &[u8] = b"{\"type\":\"session\"}\n";

    #[test]
    fn reads_frames_with_positions() {
        let (bytes, offsets) = log(&[H, b"{\"seq\":0}\n{\"seq\":1}\n", b"{\"seq\":2}\n"]);
        let (frames, pos, torn) = read_all(&bytes);
        let frames = frames.unwrap();
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[2].offset, offsets[2]);
        assert_eq!(frames[2].first_line, 3);
        assert_eq!(pos.offset, bytes.len() as u64);
        assert_eq!((pos.frames, pos.lines), (3, 4));
        assert_eq!(torn, None);
    }

    #[test]
    fn a_torn_last_frame_is_left_for_later_at_every_cut() {
        let (bytes, offsets) = log(&[H, b"{\"seq\":0}\n", b"{\"seq\":1}\n{\"seq\":2}\n"]);
        for cut in offsets[2] + 1..bytes.len() as u64 {
            let (frames, pos, torn) = read_all(&bytes[..cut as usize]);
            assert_eq!(frames.unwrap().len(), 2, "cut at {cut}");
            assert_eq!(pos.offset, offsets[2]);
            assert_eq!(torn, Some(offsets[2]));
        }
    }

    #[test]
    fn flipped_bytes_in_a_complete_frame_are_refused_with_the_offset() {
        let (bytes, offsets) = log(&[
            H,
            b"{\"seq\":0,\"data\":\"hello hello\"}\n",
            b"{\"seq\":1}\n",
        ]);
        let end = offsets[2] as usize;
        for at in offsets[1] as usize + 4..end {
            let mut bad = bytes.clone();
            bad[at] ^= 0x55;
            let (res, _, _) = read_all(&bad);
            match res {
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.contains("corrupt Zstandard session log"), "{msg}");
                    assert!(msg.contains("session.v4.jsonl.zstd"), "{msg}");
                }
                // A flip in the window or a size field can leave the
                // content intact or make the frame look torn; changed
                // content never passes (the checksum covers it).
                Ok(frames) => {
                    assert!(frames.len() <= 3, "flip at {at}");
                    for (f, want) in frames.iter().zip([
                        H,
                        b"{\"seq\":0,\"data\":\"hello hello\"}\n",
                        b"{\"seq\":1}\n",
                    ]) {
                        assert_eq!(f.bytes, want, "flip at {at} changed content");
                    }
                }
            }
        }
        let mut bad = bytes.clone();
        bad[end - 1] ^= 1;
        let msg = read_all(&bad).0.unwrap_err().to_string();
        assert!(
            msg.contains(&format!("frame at byte {} failed validation", offsets[1])),
            "{msg}"
        );
    }

    #[test]
    fn skippable_frames_two_line_headers_and_split_lines_are_refused() {
        let mut skippable = vec![0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
        skippable.extend(frame(H));
        assert!(
            read_all(&skippable)
                .0
                .unwrap_err()
                .to_string()
                .contains("invalid frame magic")
        );
        let (two, _) = log(&[b"{\"type\":\"session\"}\n{\"seq\":0}\n"]);
        assert!(
            read_all(&two)
                .0
                .unwrap_err()
                .to_string()
                .contains("header line")
        );
        let (split, _) = log(&[H, b"{\"seq\":0,", b"\"x\":1}\n"]);
        assert!(
            read_all(&split)
                .0
                .unwrap_err()
                .to_string()
                .contains("ends inside a line")
        );
    }

    #[test]
    fn reading_resumes_at_a_frame_boundary() {
        let (bytes, offsets) = log(&[H, b"{\"seq\":0}\n", b"{\"seq\":1}\n"]);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.zstd");
        std::fs::write(&p, &bytes).unwrap();
        let mut r = ZstdReader::open(&p, offsets[2], 2, 2).unwrap();
        let Some(Records::Frames(fs)) = r.next_batch().unwrap() else {
            panic!()
        };
        assert_eq!(fs.len(), 1);
        assert_eq!((fs[0].index, fs[0].first_line), (2, 2));
        assert_eq!(fs[0].bytes, b"{\"seq\":1}\n");
        assert!(ZstdReader::head(&p).unwrap().unwrap() == H);
    }
}
