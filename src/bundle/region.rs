//! The bundles of one region of a file (a `.hip_fatbin` section, or a whole
//! bundle file), read in bounded pieces: the bundle magics are searched for
//! in a sliding window, a plain bundle's entry table is read by itself, and a
//! compressed bundle is decompressed as a stream keeping only its table
//! (and, unless it is to be checked whole, only as far as its table).
//! Memory stays at the window, one entry table and the decoder's state,
//! whatever the size of the region.

use memchr::memmem;

use super::compressed::{self, Check};
use super::plain::{self, Partial, PlainBundle};
use super::scan::{Bundle, Compression, Entry};
use super::source::{read_vec, ReadError, Source};
use super::FormatError;

/// The first window read at a position; it doubles while no magic is found.
const FIRST_WINDOW: usize = 64 << 10;
const MAX_WINDOW: usize = 4 << 20;
/// The longer magic: a match must fit in the window to be trusted.
const LONGEST: usize = plain::MAGIC.len();

/// Finds the next bundle magic at or after a position, reading the region
/// through a window of at most [`MAX_WINDOW`] bytes.
struct Magics<'s, S: Source + ?Sized> {
    src: &'s S,
    end: u64,
    start: u64,
    window: Vec<u8>,
    plain: memmem::Finder<'static>,
    ccob: memmem::Finder<'static>,
}

impl<'s, S: Source + ?Sized> Magics<'s, S> {
    fn new(src: &'s S, end: u64) -> Self {
        Magics {
            src,
            end,
            start: 0,
            window: Vec::new(),
            plain: memmem::Finder::new(plain::MAGIC),
            ccob: memmem::Finder::new(compressed::MAGIC),
        }
    }

    /// The file offset of the next magic at or after `pos`, and whether it
    /// is the plain one.
    fn next(&mut self, mut pos: u64) -> std::io::Result<Option<(u64, bool)>> {
        let mut size = FIRST_WINDOW;
        loop {
            if pos >= self.end {
                return Ok(None);
            }
            let win_end = self.start + self.window.len() as u64;
            // Read again unless `pos` is in the window with a whole magic after it
            // (or the window reaches the region's end).
            if pos < self.start
                || pos >= win_end
                || (win_end - pos < LONGEST as u64 && win_end < self.end)
            {
                self.window = read_vec(self.src, pos, (self.end - pos).min(size as u64))?;
                self.start = pos;
            }
            let win_end = self.start + self.window.len() as u64;
            let rest = &self.window[(pos - self.start) as usize..];
            let found = match (self.plain.find(rest), self.ccob.find(rest)) {
                (None, None) => None,
                (Some(p), Some(c)) if c < p => Some((c, false)),
                (Some(p), _) => Some((p, true)),
                (None, Some(c)) => Some((c, false)),
            };
            let reaches_end = win_end == self.end;
            if let Some((at, is_plain)) = found {
                let at = pos + at as u64;
                // An earlier plain magic cut by the window's end would be missed.
                if reaches_end || at + LONGEST as u64 <= win_end {
                    return Ok(Some((at, is_plain)));
                }
            }
            if reaches_end {
                return Ok(None);
            }
            // Nothing trusted here: go on where a magic may start unseen.
            let resume = win_end - (LONGEST as u64 - 1);
            pos = match found {
                Some((at, _)) => (pos + at as u64).min(resume),
                None => resume,
            };
            self.window = Vec::new();
            size = (size * 2).min(MAX_WINDOW);
        }
    }
}

/// Scans every bundle in `src[base..base + len]`, compressed ones read as
/// far as `check` says; offsets in errors are file offsets.
pub fn scan_region<S: Source + ?Sized>(
    src: &S,
    base: u64,
    len: u64,
    check: Check,
) -> Result<Vec<Bundle>, ReadError> {
    let end = base + len;
    let at_file = |start: u64, e: FormatError| FormatError {
        offset: start.saturating_add(e.offset),
        message: e.message,
    };
    let mut magics = Magics::new(src, end);
    let mut bundles = Vec::new();
    let mut pos = base;
    while let Some((start, is_plain)) = magics.next(pos)? {
        let avail = end - start;
        if is_plain {
            let b = read_plain(src, start, avail).map_err(|e| at(e, start, &at_file))?;
            bundles.push(Bundle {
                offset: start,
                compression: None,
                entries: entries(b.entries),
            });
            pos = start + b.len.max(plain::MAGIC.len() as u64);
        } else {
            let head = read_vec(src, start, avail.min(32))?;
            let Some(h) = compressed::header(&head).map_err(|e| at_file(start, e))? else {
                // `CCOB` by chance, with no known version/method: not a bundle.
                pos = start + compressed::MAGIC.len() as u64;
                continue;
            };
            let found = compressed::inspect(src, start, avail, &h, check)
                .map_err(|e| at(e, start, &at_file))?;
            let b = found.bundle.map_err(|e| {
                at_file(
                    start,
                    FormatError::new(0, format!("decompressed bundle: {}", e)),
                )
            })?;
            bundles.push(Bundle {
                offset: start,
                compression: Some(Compression {
                    version: h.version,
                    method: h.method,
                    compressed_size: found.len,
                    uncompressed_size: h.uncompressed_size,
                }),
                entries: entries(b.entries),
            });
            pos = start + found.len.max(compressed::MAGIC.len() as u64);
        }
    }
    Ok(bundles)
}

fn at(e: ReadError, start: u64, at_file: &impl Fn(u64, FormatError) -> FormatError) -> ReadError {
    match e {
        ReadError::Format(e) => ReadError::Format(at_file(start, e)),
        io => io,
    }
}

/// The plain bundle at `start` with `avail` bytes to the region's end: its
/// entry table read from a prefix that grows until the table is whole.
fn read_plain<S: Source + ?Sized>(
    src: &S,
    start: u64,
    avail: u64,
) -> Result<PlainBundle, ReadError> {
    let mut want = avail.min(4096);
    loop {
        let head = read_vec(src, start, want)?;
        match plain::parse_prefix(&head, avail) {
            Ok(b) => return Ok(b),
            Err(Partial::Bad(e)) => return Err(e.into()),
            Err(Partial::Need(n)) => want = (n as u64).max(want.saturating_mul(2)).min(avail),
        }
    }
}

fn entries(raw: Vec<plain::RawEntry>) -> Vec<Entry> {
    raw.into_iter()
        .map(|e| Entry {
            id: e.id,
            offset: e.offset,
            size: e.size,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Magics cut by every window edge are found, in order, never twice.
    #[test]
    fn magics_across_window_edges() {
        let mut data = vec![0u8; FIRST_WINDOW * 3 + 100];
        let mut put = Vec::new();
        for (i, at) in [
            5,
            FIRST_WINDOW - 10,
            FIRST_WINDOW - 2,
            FIRST_WINDOW * 3 - 20,
        ]
        .into_iter()
        .enumerate()
        {
            let magic: &[u8] = if i % 2 == 0 {
                plain::MAGIC
            } else {
                compressed::MAGIC
            };
            data[at..at + magic.len()].copy_from_slice(magic);
            put.push((at as u64 + 100, i % 2 == 0));
        }
        let mut region = vec![7u8; 100];
        region.extend_from_slice(&data);
        let mut m = Magics::new(&region[..], region.len() as u64);
        let mut got = Vec::new();
        let mut pos = 100;
        while let Some((at, plain)) = m.next(pos).unwrap() {
            got.push((at, plain));
            pos = at + 1;
        }
        assert_eq!(got, put);
    }
}
