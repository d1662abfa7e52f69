//! zstd-framed JSONL sources: a file of concatenated Zstandard frames
//! (RFC 8878), each frame holding whole JSONL lines, appended one frame per
//! durable write.
//!
//! The reader walks the file from its cursor (the byte offset of the next
//! frame) frame by frame. Each complete frame is decoded, its content
//! checksum verified by the decoder, and its size bounded
//! ([`MAX_FRAME_BYTES`]) before anything is kept. EOF inside the last frame
//! is a torn tail, a frame the agent is still writing or crashed in: it is
//! left for the next capture (the cursor stays at its first byte). A
//! complete frame that fails (bad magic, failed checksum, bad block, too
//! large, a line that does not end inside its frame) stops the reader: the
//! frames before it are handed over and the problem is reported
//! ([`RecordReader::problem`]), naming the byte offset. What capture does
//! with that is the source's [`Corrupt`] rule: keep the frames before it,
//! or refuse the whole file as the agent does.
//!
//! The checks are those of DeepSeek Harness, the agent whose logs have this
//! layout (`shared/formats/dsh.md`): only the zstd frame magic (a skippable
//! frame is corruption), no reserved header bit or block type (the decoder's
//! frame walk refuses them), every frame ends with a newline (a line never
//! spans frames), and both sizes bounded before anything is inflated
//! ([`MAX_FRAME_COMPRESSED`] compressed, [`MAX_FRAME_BYTES`] decoded).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use git_session_adapters::Records;
pub use git_session_adapters::source::Corrupt;
use git_session_adapters::source::Frame;
use zstd::zstd_safe;

use super::jsonl::{BLOCK_BYTES, ReadPosition, RecordReader};
use super::{NativeError, NativeResult};

/// The most one frame may decode to; a larger frame is refused, not inflated.
pub const MAX_FRAME_BYTES: u64 = 256 << 20;

/// The most compressed bytes one frame may take; a larger one is refused
/// before it is buffered whole.
pub const MAX_FRAME_COMPRESSED: usize = 64 << 20;

/// The zstd frame magic number, as it appears in the file.
const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// Compressed bytes read from the file at a time.
const READ_BYTES: usize = 1 << 20;

/// Reads a zstd-framed file from a frame boundary, frame by frame.
pub struct FramedReader {
    path: PathBuf,
    file: File,
    /// Compressed bytes from `base` on.
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    base: u64,
    eof: bool,
    pos: ReadPosition,
    frames: Vec<Frame>,
    problem: Option<String>,
    /// Where to stop (a frame boundary), if not at the end of the file.
    end: Option<u64>,
}

impl FramedReader {
    /// Opens `path` at `offset`, which must be a frame boundary that starts
    /// frame `frames` and decoded line `lines`.
    pub fn open(path: &Path, offset: u64, lines: u64, frames: u64) -> NativeResult<FramedReader> {
        let mut file = File::open(path).map_err(NativeError::io(path))?;
        file.seek(SeekFrom::Start(offset))
            .map_err(NativeError::io(path))?;
        Ok(FramedReader {
            path: path.to_owned(),
            file,
            buf: Vec::new(),
            base: offset,
            eof: false,
            pos: ReadPosition {
                offset,
                lines,
                frames,
            },
            frames: Vec::new(),
            problem: None,
            end: None,
        })
    }

    /// Stops reading at byte `end` (a frame boundary) instead of at the end
    /// of the file: the reader then ends there as at a file's end.
    pub fn until(mut self, end: u64) -> FramedReader {
        self.end = Some(end);
        self
    }

    /// Returns the next complete, verified frame, or `None` at the end (or
    /// at a torn tail, or after a problem).
    fn next_frame(&mut self) -> NativeResult<Option<Frame>> {
        if self.problem.is_some() {
            return Ok(None);
        }
        loop {
            let start = (self.pos.offset - self.base) as usize;
            let rest = &self.buf[start..];
            if rest.is_empty() && self.eof {
                return Ok(None);
            }
            if rest.len() >= MAGIC.len() && rest[..4] != MAGIC {
                self.fail(
                    "has an invalid frame magic (not a zstd frame; skippable frames are not allowed)",
                );
                return Ok(None);
            }
            match zstd_safe::find_frame_compressed_size(rest) {
                Ok(size) if rest.len() >= MAGIC.len() => {
                    let frame = self.decode(start, size)?;
                    return Ok(frame);
                }
                Err(code)
                    if zstd_safe::is_error_kind(
                        code,
                        zstd_safe::zstd_sys::ZSTD_ErrorCode::ZSTD_error_srcSize_wrong,
                    ) || rest.len() < MAGIC.len() =>
                {
                    // The frame goes on past what was read: read more, or,
                    // at EOF, leave the torn tail for the next capture.
                    if self.eof {
                        return Ok(None);
                    }
                    if rest.len() > MAX_FRAME_COMPRESSED {
                        self.fail(&format!(
                            "is larger than {} MiB compressed; refused",
                            MAX_FRAME_COMPRESSED >> 20
                        ));
                        return Ok(None);
                    }
                    self.fill()?;
                }
                Ok(_) => {
                    if self.eof {
                        return Ok(None);
                    }
                    self.fill()?;
                }
                Err(code) => {
                    self.fail(&format!(
                        "failed validation ({})",
                        zstd_safe::get_error_name(code)
                    ));
                    return Ok(None);
                }
            }
        }
    }

    /// Decodes the frame of `size` bytes at `buf[start..]`.
    fn decode(&mut self, start: usize, size: usize) -> NativeResult<Option<Frame>> {
        let compressed = &self.buf[start..start + size];
        let mut bytes = Vec::new();
        let decoded = zstd::stream::read::Decoder::with_buffer(compressed)
            .map(|d| d.single_frame())
            .and_then(|d| d.take(MAX_FRAME_BYTES + 1).read_to_end(&mut bytes));
        match decoded {
            Err(e) => {
                self.fail(&format!("failed validation ({e})"));
                Ok(None)
            }
            Ok(n) if n as u64 > MAX_FRAME_BYTES => {
                self.fail(&format!(
                    "decodes to more than {} MiB; refused",
                    MAX_FRAME_BYTES >> 20
                ));
                Ok(None)
            }
            Ok(_) if bytes.last().is_some_and(|&b| b != b'\n') => {
                self.fail("ends inside a line (a line never spans frames)");
                Ok(None)
            }
            Ok(_) => {
                let frame = Frame {
                    index: self.pos.frames,
                    offset: self.pos.offset,
                    first_line: self.pos.lines,
                    bytes,
                };
                let lines = memchr::memchr_iter(b'\n', &frame.bytes).count() as u64;
                self.pos.offset += size as u64;
                self.pos.frames += 1;
                self.pos.lines += lines;
                Ok(Some(frame))
            }
        }
    }

    /// Reads more compressed bytes, dropping what is already consumed.
    fn fill(&mut self) -> NativeResult<()> {
        let consumed = (self.pos.offset - self.base) as usize;
        self.buf.drain(..consumed);
        self.base = self.pos.offset;
        let mut want = READ_BYTES as u64;
        if let Some(end) = self.end {
            want = want.min(end.saturating_sub(self.base + self.buf.len() as u64));
        }
        let n = (&mut self.file)
            .take(want)
            .read_to_end(&mut self.buf)
            .map_err(NativeError::io(&self.path))?;
        self.eof = n == 0;
        Ok(())
    }

    /// Records why reading stopped, in DeepSeek Harness's words for it
    /// (`what` says what is wrong with the frame at the cursor).
    fn fail(&mut self, what: &str) {
        self.problem = Some(format!(
            "corrupt Zstandard session log: frame at byte {} {what}",
            self.pos.offset
        ));
    }
}

impl RecordReader for FramedReader {
    fn next_batch(&mut self) -> NativeResult<Option<Records<'_>>> {
        self.frames.clear();
        let mut bytes = 0;
        while bytes < BLOCK_BYTES {
            match self.next_frame()? {
                Some(frame) => {
                    bytes += frame.bytes.len();
                    self.frames.push(frame);
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

    fn problem(&self) -> Option<String> {
        self.problem.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(text: &str) -> Vec<u8> {
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_checksum(true).unwrap();
        std::io::Write::write_all(&mut enc, text.as_bytes()).unwrap();
        enc.finish().unwrap()
    }

    fn read_all(path: &Path, offset: u64) -> (Vec<String>, ReadPosition, Option<String>) {
        let mut r = FramedReader::open(path, offset, 0, 0).unwrap();
        let mut lines = Vec::new();
        while let Some(batch) = r.next_batch().unwrap() {
            lines.extend(
                batch
                    .iter()
                    .map(|rec| String::from_utf8_lossy(rec.bytes).into_owned()),
            );
        }
        (lines, r.position(), r.problem())
    }

    #[test]
    fn a_reader_until_a_frame_boundary_stops_there_and_one_from_it_reads_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl.zst");
        let (a, b) = (frame("{\"a\":1}\n"), frame("{\"b\":2}\n{\"c\":3}\n"));
        std::fs::write(&path, [a.clone(), b.clone()].concat()).unwrap();
        let mut r = FramedReader::open(&path, 0, 0, 0)
            .unwrap()
            .until(a.len() as u64);
        let mut lines = 0;
        while let Some(batch) = r.next_batch().unwrap() {
            lines += batch.iter().count();
        }
        let pos = r.position();
        assert_eq!(
            (lines, pos.offset, pos.frames, pos.lines),
            (1, a.len() as u64, 1, 1)
        );
        assert_eq!(r.problem(), None);
        let (rest, end, _) = read_all(&path, pos.offset);
        assert_eq!(rest, ["{\"b\":2}", "{\"c\":3}"]);
        assert_eq!(end.offset, (a.len() + b.len()) as u64);
    }

    #[test]
    fn frames_are_read_one_by_one_and_a_torn_tail_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl.zst");
        let (a, b, c) = (
            frame("{\"a\":1}\n"),
            frame("{\"b\":2}\n{\"c\":3}\n"),
            frame("{\"d\":4}\n"),
        );
        let mut bytes = [a.clone(), b.clone()].concat();
        bytes.extend_from_slice(&c[..c.len() - 3]);
        std::fs::write(&path, &bytes).unwrap();
        let (lines, pos, problem) = read_all(&path, 0);
        assert_eq!(lines, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
        assert_eq!(pos.offset, (a.len() + b.len()) as u64);
        assert_eq!((pos.frames, pos.lines), (2, 3));
        assert_eq!(problem, None);
        // Completed: the next read starts at the torn frame and gets it.
        bytes.extend_from_slice(&c[c.len() - 3..]);
        std::fs::write(&path, &bytes).unwrap();
        let (lines, pos, _) = read_all(&path, (a.len() + b.len()) as u64);
        assert_eq!(lines, ["{\"d\":4}"]);
        assert_eq!(pos.offset, bytes.len() as u64);
    }

    #[test]
    fn a_frame_failing_its_checksum_stops_the_reader_with_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl.zst");
        let a = frame("{\"a\":1}\n");
        let mut b = frame(&format!("{{\"b\":\"{}\"}}\n", "x".repeat(50)));
        let at = b.len() - 1;
        b[at] ^= 0xFF; // the checksum's last byte
        std::fs::write(&path, [a.clone(), b].concat()).unwrap();
        let (lines, pos, problem) = read_all(&path, 0);
        assert_eq!(lines, ["{\"a\":1}"]);
        assert_eq!(pos.offset, a.len() as u64);
        let problem = problem.expect("reported");
        assert!(
            problem.contains(&format!("at byte {}", a.len())),
            "{problem}"
        );
        // Garbage is not a frame either.
        std::fs::write(&path, b"{\"plain\": \"json\"}\n").unwrap();
        let (lines, _, problem) = read_all(&path, 0);
        assert!(lines.is_empty());
        assert!(problem.unwrap().contains("invalid frame magic"));
    }

    #[test]
    fn a_torn_last_frame_is_left_for_later_at_every_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl.zst");
        let (a, b) = (frame("{\"a\":1}\n"), frame("{\"b\":2}\n{\"c\":3}\n"));
        let whole = [a.clone(), b].concat();
        for cut in a.len() + 1..whole.len() {
            std::fs::write(&path, &whole[..cut]).unwrap();
            let (lines, pos, problem) = read_all(&path, 0);
            assert_eq!(lines, ["{\"a\":1}"], "cut at {cut}");
            assert_eq!(pos.offset, a.len() as u64, "cut at {cut}");
            assert_eq!(problem, None, "cut at {cut}");
        }
    }

    #[test]
    fn a_flipped_byte_never_changes_what_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl.zst");
        let texts = ["{\"a\":1}\n", "{\"b\":\"hello hello\"}\n", "{\"c\":3}\n"];
        let frames: Vec<Vec<u8>> = texts.iter().map(|t| frame(t)).collect();
        let whole = frames.concat();
        let b_at = frames[0].len();
        for at in b_at..b_at + frames[1].len() {
            let mut bad = whole.clone();
            bad[at] ^= 0x55;
            std::fs::write(&path, &bad).unwrap();
            let (lines, pos, problem) = read_all(&path, 0);
            // Whatever is read is what was written (the checksum covers the
            // content); a frame that fails names its offset.
            for (got, want) in lines.iter().zip(texts) {
                assert_eq!(format!("{got}\n"), want, "flip at {at}");
            }
            if let Some(problem) = problem {
                assert!(
                    problem.contains(&format!("frame at byte {b_at}")),
                    "flip at {at}: {problem}"
                );
                assert_eq!(pos.offset, b_at as u64);
            }
        }
    }

    #[test]
    fn skippable_frames_reserved_bits_and_split_lines_are_problems() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl.zst");
        let a = frame("{\"a\":1}\n");
        let problem_of = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            let (lines, pos, problem) = read_all(&path, 0);
            assert_eq!(lines, ["{\"a\":1}"]);
            assert_eq!(pos.offset, a.len() as u64);
            problem.expect("a problem")
        };
        // A skippable frame (valid zstd, but not a frame of records).
        let skippable = [0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
        let p = problem_of(&[a.clone(), skippable.to_vec()].concat());
        assert!(p.contains("invalid frame magic"), "{p}");
        // A reserved bit in the frame header descriptor.
        let mut reserved = frame("{\"b\":2}\n");
        reserved[4] |= 0x08;
        let p = problem_of(&[a.clone(), reserved].concat());
        assert!(p.contains(&format!("frame at byte {}", a.len())), "{p}");
        // A line that goes on in the next frame.
        let split = [a.clone(), frame("{\"b\":"), frame("2}\n")].concat();
        let p = problem_of(&split);
        assert!(p.contains("ends inside a line"), "{p}");
    }
}
