//! JSONL sources: a file read from a byte offset in blocks of complete
//! lines. A line the agent is still writing (no `\n` yet) waits for the
//! next capture; the cursor is the offset after the last complete line.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use git_session_adapters::Records;

use super::{NativeError, NativeResult};

/// Native bytes handed to the adapter per parse call (whole lines).
///
/// Small, so that a block's events are still in the core's cache when
/// they are redacted and written: 1 MiB blocks (their parsed trees several
/// times that) cost a Claude or Codex import of 100k records about 1.4x the
/// CPU time and 1.7x the peak memory of 64 KiB ones. What an adapter keeps
/// across blocks must not be rebuilt per call (see
/// `git_session_adapters::ParseMemo`).
pub const BLOCK_BYTES: usize = 64 << 10;

/// The UTF-8 byte order mark some editors put at the start of a file.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Reads batches of records from a file, in order.
///
/// Implemented by the JSONL and zstd-framed readers, so capture drives both
/// the same way.
pub trait RecordReader: Send {
    /// Returns the next batch of complete records, or `None` at the end of
    /// what is complete.
    fn next_batch(&mut self) -> NativeResult<Option<Records<'_>>>;
    /// Gives back what the batch handed over last holds beyond an ordinary
    /// block (a long line), once its records are parsed: the caller has
    /// them, and the room is not kept for the lines after it.
    fn release(&mut self) {}
    /// Returns how far the reader got: the cursor to save.
    fn position(&self) -> ReadPosition;
    /// Returns why the reader stopped before the end, when it did (a
    /// corrupt frame): what was read before it is good, the rest is not.
    fn problem(&self) -> Option<String> {
        None
    }
}

/// Says how far a file was read: what a [`super::cursor::FileCursor`] keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadPosition {
    /// Bytes of the file consumed.
    pub offset: u64,
    /// Lines consumed (decoded lines, for a framed file).
    pub lines: u64,
    /// Frames consumed (0 for JSONL).
    pub frames: u64,
}

/// Reads a JSONL file from an offset in blocks of whole lines.
pub struct JsonlReader {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    /// Bytes at the front of `buf` handed out by the last batch.
    handed: usize,
    /// Bytes at the front of `buf` (after `handed`) already searched for a
    /// newline and holding none: each byte is searched once, so a line of
    /// any length is read in linear time.
    searched: usize,
    /// Bytes searched for newlines in all (for the linearity test).
    #[cfg(test)]
    searched_total: u64,
    pos: ReadPosition,
    eof: bool,
    /// Where to stop (a line boundary), if not at the end of the file.
    end: Option<u64>,
}

impl JsonlReader {
    /// Opens `path` for reading at `offset`, which is line `first_line`.
    ///
    /// A UTF-8 byte order mark at the start of the file is not part of its
    /// first line: reading from offset 0 starts after it.
    pub fn open(path: &Path, mut offset: u64, first_line: u64) -> NativeResult<JsonlReader> {
        let mut file = File::open(path).map_err(NativeError::io(path))?;
        if offset == 0 {
            let mut head = Vec::with_capacity(3);
            (&mut file)
                .take(3)
                .read_to_end(&mut head)
                .map_err(NativeError::io(path))?;
            if head == BOM {
                offset = 3;
            }
        }
        file.seek(SeekFrom::Start(offset))
            .map_err(NativeError::io(path))?;
        Ok(JsonlReader {
            path: path.to_owned(),
            file,
            buf: Vec::with_capacity(BLOCK_BYTES),
            handed: 0,
            searched: 0,
            #[cfg(test)]
            searched_total: 0,
            pos: ReadPosition {
                offset,
                lines: first_line,
                frames: 0,
            },
            eof: false,
            end: None,
        })
    }

    /// Stops reading at byte `end` (a line boundary) instead of at the end
    /// of the file: the reader then ends there as at a file's end.
    pub fn until(mut self, end: u64) -> JsonlReader {
        self.end = Some(end);
        self
    }
}

impl RecordReader for JsonlReader {
    fn release(&mut self) {
        self.buf.drain(..self.handed);
        self.handed = 0;
        if self.buf.capacity() > 64 * BLOCK_BYTES && self.buf.len() < BLOCK_BYTES {
            self.buf.shrink_to(2 * BLOCK_BYTES);
        }
    }

    fn next_batch(&mut self) -> NativeResult<Option<Records<'_>>> {
        self.release();
        // What is left after the last batch's final newline has none.
        self.searched = self.buf.len();
        while !self.eof {
            let mut want = BLOCK_BYTES.saturating_sub(self.buf.len()).max(1 << 16) as u64;
            if let Some(end) = self.end {
                want = want.min(end.saturating_sub(self.pos.offset + self.buf.len() as u64));
            }
            let n = (&mut self.file)
                .take(want)
                .read_to_end(&mut self.buf)
                .map_err(NativeError::io(&self.path))?;
            self.eof = n == 0;
            // Only the bytes just read: the ones before them hold no newline.
            let fresh = &self.buf[self.searched..];
            #[cfg(test)]
            {
                self.searched_total += fresh.len() as u64;
            }
            let Some(end) = memchr::memrchr(b'\n', fresh) else {
                self.searched = self.buf.len();
                continue;
            };
            let end = self.searched + end;
            let block = &self.buf[..=end];
            let records = Records::lines(block, self.pos.lines, self.pos.offset);
            self.pos.lines += memchr::memchr_iter(b'\n', block).count() as u64;
            self.pos.offset += block.len() as u64;
            self.handed = end + 1;
            return Ok(Some(records));
        }
        Ok(None)
    }

    fn position(&self) -> ReadPosition {
        self.pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_until_a_line_boundary_stops_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n").unwrap();
        let mut r = JsonlReader::open(&path, 0, 0).unwrap().until(16);
        let mut seen = Vec::new();
        while let Some(batch) = r.next_batch().unwrap() {
            seen.extend(batch.iter().map(|rec| rec.pos.ordinal()));
        }
        assert_eq!(seen, [0, 1]);
        assert_eq!((r.position().offset, r.position().lines), (16, 2));
    }

    #[test]
    fn a_long_line_is_searched_for_its_end_once() {
        // 8 MiB on one line, then a short one: each byte is looked at once
        // (searching the whole buffer after each 64 KiB read looks at
        // about 500 times as many).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let long = 8 << 20;
        let mut bytes = vec![b'x'; long];
        bytes.extend_from_slice(b"\n{}\n");
        std::fs::write(&path, &bytes).unwrap();
        let mut r = JsonlReader::open(&path, 0, 0).unwrap();
        let mut lens = Vec::new();
        while let Some(batch) = r.next_batch().unwrap() {
            lens.extend(batch.iter().map(|rec| rec.bytes.len()));
        }
        assert_eq!(lens, [long, 2]);
        assert_eq!(r.position().offset, bytes.len() as u64);
        assert!(
            r.searched_total <= 2 * bytes.len() as u64,
            "searched {} bytes of {}",
            r.searched_total,
            bytes.len()
        );
    }

    #[test]
    fn a_long_line_parsed_gives_its_room_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut bytes = vec![b'x'; 16 << 20];
        bytes.extend_from_slice(b"\n{}\n");
        std::fs::write(&path, &bytes).unwrap();
        let mut r = JsonlReader::open(&path, 0, 0).unwrap();
        let lens: Vec<usize> = r
            .next_batch()
            .unwrap()
            .unwrap()
            .iter()
            .map(|rec| rec.bytes.len())
            .collect();
        assert_eq!(lens, [16 << 20, 2]);
        assert!(r.buf.capacity() > 16 << 20);
        r.release();
        assert!(r.buf.capacity() <= 2 * BLOCK_BYTES, "{}", r.buf.capacity());
        assert!(r.next_batch().unwrap().is_none());
        assert_eq!(r.position().offset, bytes.len() as u64);
    }

    #[test]
    fn a_line_still_being_written_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, b"{\"a\":1}\n{\"b\":2}\n{\"c\"").unwrap();
        let mut r = JsonlReader::open(&path, 0, 0).unwrap();
        let mut seen = Vec::new();
        while let Some(batch) = r.next_batch().unwrap() {
            seen.extend(batch.iter().map(|rec| rec.pos.ordinal()));
        }
        assert_eq!(seen, vec![0, 1]);
        assert_eq!(
            r.position(),
            ReadPosition {
                offset: 16,
                lines: 2,
                frames: 0
            }
        );
        let mut r = JsonlReader::open(&path, 8, 1).unwrap();
        let batch = r.next_batch().unwrap().unwrap();
        let recs: Vec<_> = batch.iter().collect();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].bytes, b"{\"b\":2}");
    }
}
