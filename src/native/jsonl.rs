//! JSONL sources: a file read from a byte offset in blocks of complete
//! lines. A line the agent is still writing (no `\n` yet) waits for the
//! next capture; the cursor is the offset after the last complete line.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use git_session_adapters::Records;

use super::{NativeError, NativeResult};

/// Native bytes handed to the adapter per parse call (whole lines).
pub const BLOCK_BYTES: usize = 1 << 20;

/// Reads batches of records from a file, in order.
///
/// Implemented by the JSONL and zstd-framed readers, so capture drives both
/// the same way.
pub trait RecordReader: Send {
    /// Returns the next batch of complete records, or `None` at the end of
    /// what is complete.
    fn next_batch(&mut self) -> NativeResult<Option<Records<'_>>>;
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
    pos: ReadPosition,
    eof: bool,
    /// Where to stop (a line boundary), if not at the end of the file.
    end: Option<u64>,
}

impl JsonlReader {
    /// Opens `path` for reading at `offset`, which is line `first_line`.
    pub fn open(path: &Path, offset: u64, first_line: u64) -> NativeResult<JsonlReader> {
        let mut file = File::open(path).map_err(NativeError::io(path))?;
        file.seek(SeekFrom::Start(offset))
            .map_err(NativeError::io(path))?;
        Ok(JsonlReader {
            path: path.to_owned(),
            file,
            buf: Vec::with_capacity(BLOCK_BYTES),
            handed: 0,
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

    /// Reads at most `limit` bytes from the start and returns the complete
    /// lines among them (for learning a new file's session facts).
    pub fn head(path: &Path, limit: u64) -> NativeResult<Vec<u8>> {
        let file = File::open(path).map_err(NativeError::io(path))?;
        let mut buf = Vec::new();
        file.take(limit)
            .read_to_end(&mut buf)
            .map_err(NativeError::io(path))?;
        let end = buf.iter().rposition(|&b| b == b'\n').map_or(0, |e| e + 1);
        buf.truncate(end);
        Ok(buf)
    }
}

impl RecordReader for JsonlReader {
    fn next_batch(&mut self) -> NativeResult<Option<Records<'_>>> {
        self.buf.drain(..self.handed);
        self.handed = 0;
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
            let Some(end) = self.buf.iter().rposition(|&b| b == b'\n') else {
                continue;
            };
            let block = &self.buf[..=end];
            let records = Records::lines(block, self.pos.lines, self.pos.offset);
            self.pos.lines += block.iter().filter(|&&b| b == b'\n').count() as u64;
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
