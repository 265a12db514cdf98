//! Where the scanner's bytes come from: positioned reads of a file (or of a
//! byte slice, for tests and the fuzzer), so that a library of hundreds of
//! megabytes is never held whole. Every read names its offset and length;
//! [`RangeReader`] streams one byte range to a decoder in bounded chunks.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, Read};
use std::os::unix::fs::FileExt;

use super::FormatError;

/// Bytes readable at any offset.
pub trait Source {
    /// The number of bytes.
    fn size(&self) -> u64;
    /// Reads up to `buf.len()` bytes at `offset`; fewer only at the end.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
}

impl Source for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.len());
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

/// An open file and its size when opened.
pub struct FileSource {
    file: File,
    size: u64,
}

impl FileSource {
    pub fn new(file: File) -> io::Result<FileSource> {
        let size = file.metadata()?.len();
        Ok(FileSource { file, size })
    }
}

impl Source for FileSource {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let room = self.size.saturating_sub(offset).min(buf.len() as u64) as usize;
        let mut n = 0;
        while n < room {
            match self.file.read_at(&mut buf[n..room], offset + n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }
}

/// Why reading a structure failed: the file could not be read, or its bytes
/// are malformed.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    Format(FormatError),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

impl From<FormatError> for ReadError {
    fn from(e: FormatError) -> Self {
        ReadError::Format(e)
    }
}

/// Reads `len` bytes at `offset`, or fewer where the source ends first.
pub fn read_vec<S: Source + ?Sized>(src: &S, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let len = len.min(src.size().saturating_sub(offset));
    let len = usize::try_from(len).map_err(|_| io::Error::other("read too large"))?;
    let mut buf = vec![0u8; len];
    let n = src.read_at(offset, &mut buf)?;
    if n < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the file shrank while being read ({n} of {len} bytes at offset {offset})"),
        ));
    }
    Ok(buf)
}

/// Chunk size of [`RangeReader`]: large enough that the decoders see whole
/// blocks most of the time, small enough not to matter for memory.
const CHUNK: usize = 256 << 10;

/// `src[start..end]` as a [`BufRead`], read `CHUNK` bytes at a time, counting
/// the bytes its reader has consumed. A read error of the source is kept
/// aside (see [`RangeReader::take_error`]) so that it is not mistaken for
/// malformed data by the decoder that sees it.
pub struct RangeReader<'a, S: Source + ?Sized> {
    src: &'a S,
    /// The next byte to read from `src`.
    next: u64,
    end: u64,
    buf: Vec<u8>,
    at: usize,
    used: &'a Cell<u64>,
    error: Option<io::Error>,
}

impl<'a, S: Source + ?Sized> RangeReader<'a, S> {
    pub fn new(src: &'a S, start: u64, end: u64, used: &'a Cell<u64>) -> Self {
        RangeReader {
            src,
            next: start,
            end,
            buf: Vec::new(),
            at: 0,
            used,
            error: None,
        }
    }

    /// The source's read error, if one ended the stream.
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }
}

impl<S: Source + ?Sized> Read for RangeReader<'_, S> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let have = self.fill_buf()?;
        let n = have.len().min(out.len());
        out[..n].copy_from_slice(&have[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<S: Source + ?Sized> BufRead for RangeReader<'_, S> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.at == self.buf.len() && self.next < self.end {
            let want = (self.end - self.next).min(CHUNK as u64);
            match read_vec(self.src, self.next, want) {
                Ok(b) => {
                    self.next += b.len() as u64;
                    self.buf = b;
                    self.at = 0;
                }
                Err(e) => {
                    let kind = e.kind();
                    self.error = Some(e);
                    return Err(io::Error::new(kind, "reading the file failed"));
                }
            }
        }
        Ok(&self.buf[self.at..])
    }

    fn consume(&mut self, n: usize) {
        let n = n.min(self.buf.len() - self.at);
        self.at += n;
        self.used.set(self.used.get() + n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_reader_streams_a_range_in_chunks() {
        let data: Vec<u8> = (0..(CHUNK * 2 + 77)).map(|i| (i % 251) as u8).collect();
        let used = Cell::new(0);
        let mut r = RangeReader::new(&data[..], 5, data.len() as u64 - 3, &used);
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        assert_eq!(out, &data[5..data.len() - 3]);
        assert_eq!(used.get(), out.len() as u64);
        assert!(read_vec(&data[..], data.len() as u64 + 9, 4)
            .unwrap()
            .is_empty());
        assert_eq!(read_vec(&data[..], 1, 2).unwrap(), [1, 2]);
    }
}
