//! Compressed offload bundles (`CCOB`): magic, u16 version, u16 method
//! (0 zlib, 1 zstd), then v1: u32 uncompressed size, u64 hash (20-byte
//! header); v2: u32 total size, u32 uncompressed size, u64 hash (24 bytes);
//! v3: u64 total size, u64 uncompressed size, u64 hash (32 bytes). The hash
//! is the low 8 bytes of the MD5 of the uncompressed plain bundle.
//!
//! Reading a bundle's entry table needs only the start of its plain
//! bundle, but its size and hash can be checked only by decompressing it
//! whole, and a zstd frame's window (128 MiB in rocSPARSE 7.x) is then
//! resident. So a v2/v3 bundle, whose header frames its length, is read
//! as far as its table ([`Check::Table`], as clang itself lists bundles:
//! it checks the hash only with `-verbose`); [`Check::Whole`] (`--verify`)
//! decompresses it to the end. A v1 bundle is always read whole: only the
//! end of its stream says where it ends.

use std::cell::Cell;
use std::io::Read;

use md5::{Digest, Md5};
use serde::Serialize;

use super::plain::{self, Partial, PlainBundle};
use super::source::{RangeReader, ReadError, Source};
use super::{read_u16, read_u32, read_u64, FormatError};

pub const MAGIC: &[u8; 4] = b"CCOB";

/// Refuse payloads claiming to expand more than this factor: garbage must not
/// make us allocate gigabytes. Real bundles compress 3–20×.
const MAX_RATIO: u64 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Zlib,
    Zstd,
}

/// A parsed `CCOB` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Header {
    pub version: u16,
    pub method: Method,
    pub header_len: usize,
    /// Whole compressed bundle, header included (v2 and v3 only).
    pub total_size: Option<u64>,
    pub uncompressed_size: u64,
    pub hash: u64,
}

/// Parses the header at `buf[0]`. `Ok(None)` if the bytes start with `CCOB`
/// but the version or method is unknown (likely a chance match, not a bundle).
pub fn header(buf: &[u8]) -> Result<Option<Header>, FormatError> {
    if !buf.starts_with(MAGIC) {
        return Err(FormatError::new(0, "no CCOB magic"));
    }
    let truncated = |at: usize| FormatError::new(at, "truncated CCOB header");
    let version = read_u16(buf, 4).ok_or_else(|| truncated(4))?;
    let method = match read_u16(buf, 6).ok_or_else(|| truncated(6))? {
        0 => Method::Zlib,
        1 => Method::Zstd,
        _ => return Ok(None),
    };
    let (header_len, total_size, uncompressed_size, hash) = match version {
        1 => (
            20,
            None,
            read_u32(buf, 8).ok_or_else(|| truncated(8))? as u64,
            read_u64(buf, 12).ok_or_else(|| truncated(12))?,
        ),
        2 => (
            24,
            Some(read_u32(buf, 8).ok_or_else(|| truncated(8))? as u64),
            read_u32(buf, 12).ok_or_else(|| truncated(12))? as u64,
            read_u64(buf, 16).ok_or_else(|| truncated(16))?,
        ),
        3 => (
            32,
            Some(read_u64(buf, 8).ok_or_else(|| truncated(8))?),
            read_u64(buf, 16).ok_or_else(|| truncated(16))?,
            read_u64(buf, 24).ok_or_else(|| truncated(24))?,
        ),
        _ => return Ok(None),
    };
    Ok(Some(Header {
        version,
        method,
        header_len,
        total_size,
        uncompressed_size,
        hash,
    }))
}

/// The truncated MD5 clang stores: the first 8 digest bytes as a LE u64.
pub fn truncated_md5(data: &[u8]) -> u64 {
    low_u64(&Md5::digest(data))
}

fn low_u64(digest: &[u8]) -> u64 {
    let mut low = [0u8; 8];
    low.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(low)
}

/// Decompresses the bundle at `buf[0]`: the plain bundle bytes and the number
/// of bytes the compressed bundle occupies.
pub fn decompress(buf: &[u8], h: &Header) -> Result<(Vec<u8>, u64), FormatError> {
    let mut out = Vec::new();
    match stream(buf, 0, buf.len() as u64, h, &mut |chunk| {
        out.extend_from_slice(chunk);
        Flow::Continue(())
    }) {
        Ok(len) => Ok((out, len)),
        Err(ReadError::Format(e)) => Err(e),
        // A slice cannot fail to read; kept as an error, not a panic.
        Err(ReadError::Io(e)) => Err(FormatError::new(0, e.to_string())),
    }
}

/// How far [`inspect`] reads a compressed bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// As far as its entry table (a v1 bundle whole): its header's sizes
    /// are taken as they are.
    Table,
    /// Whole: its decompressed size and hash checked.
    Whole,
}

impl Check {
    /// [`Check::Whole`] when `verify` (`--verify`), else [`Check::Table`].
    pub fn verifying(verify: bool) -> Check {
        match verify {
            true => Check::Whole,
            false => Check::Table,
        }
    }
}

/// What [`inspect`] learns of a compressed bundle without keeping it.
#[derive(Debug)]
pub struct Inspected {
    /// The plain bundle's entry table, or why it does not parse.
    pub bundle: Result<PlainBundle, FormatError>,
    /// Bytes the compressed bundle occupies.
    pub len: u64,
}

/// Decompresses the bundle at `src[start..]` (`avail` bytes there belong to
/// the region it sits in) as a stream, keeping only the start of the plain
/// bundle, up to the end of its entry table. With [`Check::Whole`] (or a
/// v1 bundle) it reads on to the end, the size and hash checked as by
/// [`decompress`]; else it stops once the table is read.
pub fn inspect<S: Source + ?Sized>(
    src: &S,
    start: u64,
    avail: u64,
    h: &Header,
    check: Check,
) -> Result<Inspected, ReadError> {
    let stop_at_table = check == Check::Table && h.total_size.is_some();
    let want = h.uncompressed_size;
    let mut head = Vec::new();
    // Keep bytes while the entry table may go on past them; try to parse it
    // again only when the prefix has doubled or reached what it needs.
    let mut next_try = 4096usize;
    let mut keeping = true;
    let len = stream(src, start, avail, h, &mut |chunk| {
        if !keeping {
            return Flow::Continue(());
        }
        head.extend_from_slice(chunk);
        if head.len() < next_try {
            return Flow::Continue(());
        }
        match plain::parse_prefix(&head, want) {
            Err(Partial::Need(n)) => next_try = n.max(head.len().saturating_mul(2)),
            _ => keeping = false,
        }
        match keeping || !stop_at_table {
            true => Flow::Continue(()),
            false => Flow::Break(()),
        }
    })?;
    let bundle = match plain::parse_prefix(&head, want) {
        Ok(b) => Ok(b),
        Err(Partial::Bad(e)) => Err(e),
        Err(Partial::Need(n)) => Err(FormatError::new(n, "truncated bundle header")),
    };
    Ok(Inspected { bundle, len })
}

/// Decompresses the bundle at `src[start..start + avail]` into `sink`, chunk
/// by chunk, checking the sizes, the expansion ratio and the hash; returns
/// the bytes the compressed bundle occupies. A sink that breaks stops it
/// there, unchecked (only a bundle whose header has its total size may be
/// stopped: the length is the header's). Offsets in errors are relative to
/// `start`.
fn stream<S: Source + ?Sized>(
    src: &S,
    start: u64,
    avail: u64,
    h: &Header,
    sink: &mut dyn FnMut(&[u8]) -> Flow,
) -> Result<u64, ReadError> {
    let payload_end = match h.total_size {
        Some(total) => {
            if total < h.header_len as u64 || total > avail {
                return Err(FormatError::new(
                    8,
                    format!("total size {total} outside 20..={avail} bytes"),
                )
                .into());
            }
            total
        }
        None => avail,
    };
    if (h.header_len as u64) > payload_end {
        return Err(FormatError::new(0, "truncated CCOB header").into());
    }
    let payload_len = payload_end - h.header_len as u64;
    let limit = payload_len.saturating_mul(MAX_RATIO).max(1 << 20);
    if h.uncompressed_size > limit {
        return Err(FormatError::new(
            h.header_len - 16,
            format!(
                "uncompressed size {} implausible for {payload_len} compressed bytes",
                h.uncompressed_size
            ),
        )
        .into());
    }
    let want = h.uncompressed_size;
    let used = Cell::new(0u64);
    let mut input = RangeReader::new(src, start + h.header_len as u64, start + payload_end, &used);
    let mut out = Out {
        len: 0,
        md5: Md5::new(),
        sink,
        stopped: false,
    };
    // The check above divides by the payload as the header frames it, which
    // may be mostly padding; while decompressing, the output must also stay
    // within MAX_RATIO of the input the decoder has actually consumed.
    let result = match h.method {
        Method::Zlib => {
            let mut d = flate2::bufread::ZlibDecoder::new(&mut input);
            expand(&mut d, want, &used, &mut out, h).map(|()| d.total_in())
        }
        Method::Zstd => match zstd::stream::read::Decoder::with_buffer(&mut input) {
            Ok(d) => {
                let mut d = d.single_frame();
                expand(&mut d, want, &used, &mut out, h).map(|()| used.get())
            }
            Err(e) => Err(Expand::Io(e)),
        },
    };
    if let Some(e) = input.take_error() {
        return Err(ReadError::Io(e));
    }
    if let (true, Ok(_), Some(total)) = (out.stopped, &result, h.total_size) {
        return Ok(total);
    }
    let consumed = result.map_err(|e| {
        e.or_else(|e| {
            FormatError::new(
                h.header_len,
                format!("{:?} payload does not decompress: {e}", h.method),
            )
        })
    })?;
    if out.len != want {
        return Err(FormatError::new(
            h.header_len,
            format!("decompressed to {} bytes, header says {want}", out.len),
        )
        .into());
    }
    let got = low_u64(&out.md5.finalize());
    if got != h.hash {
        return Err(FormatError::new(
            h.header_len - 8,
            format!("hash mismatch: header {:#018x}, data {got:#018x}", h.hash),
        )
        .into());
    }
    Ok(match h.total_size {
        Some(t) => t,
        None => h.header_len as u64 + consumed,
    })
}

/// Whether a sink of [`stream`] wants more.
type Flow = std::ops::ControlFlow<()>;

/// The decompressed stream: counted, hashed and handed on.
struct Out<'a> {
    len: u64,
    md5: Md5,
    sink: &'a mut dyn FnMut(&[u8]) -> Flow,
    /// Whether the sink broke off the stream.
    stopped: bool,
}

/// A decompression error: from the decoder, or our ratio check.
enum Expand {
    Io(std::io::Error),
    Format(FormatError),
}

impl Expand {
    fn or_else(self, f: impl FnOnce(std::io::Error) -> FormatError) -> FormatError {
        match self {
            Expand::Io(e) => f(e),
            Expand::Format(e) => e,
        }
    }
}

/// Reads `d` into `out` up to `want + 1` bytes, refusing output of more
/// than [`MAX_RATIO`] times the input consumed so far (or 1 MiB).
fn expand(
    d: &mut impl Read,
    want: u64,
    used: &Cell<u64>,
    out: &mut Out<'_>,
    h: &Header,
) -> Result<(), Expand> {
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let room = (want + 1).saturating_sub(out.len).min(chunk.len() as u64) as usize;
        if room == 0 {
            return Ok(());
        }
        let n = d.read(&mut chunk[..room]).map_err(Expand::Io)?;
        if n == 0 {
            return Ok(());
        }
        out.len += n as u64;
        out.md5.update(&chunk[..n]);
        if (out.sink)(&chunk[..n]).is_break() {
            out.stopped = true;
            return Ok(());
        }
        let allowed = used.get().saturating_mul(MAX_RATIO).max(1 << 20);
        if out.len > allowed {
            return Err(Expand::Format(FormatError::new(
                h.header_len,
                format!(
                    "{:?} payload expands more than {MAX_RATIO}:1 ({} bytes from the first {} \
                     compressed bytes; header claims {want}); refused as a decompression bomb",
                    h.method,
                    out.len,
                    used.get()
                ),
            )));
        }
    }
}

/// Compresses a plain bundle the way clang does (used by tests and fuzz seeds).
pub fn write(plain: &[u8], version: u16, method: Method) -> Vec<u8> {
    use std::io::Write;
    let payload = match method {
        Method::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
            let _ = e.write_all(plain);
            e.finish().unwrap_or_default()
        }
        Method::Zstd => zstd::bulk::compress(plain, 19).unwrap_or_default(),
    };
    let hash = truncated_md5(plain);
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(method as u16).to_le_bytes());
    match version {
        1 => out.extend_from_slice(&(plain.len() as u32).to_le_bytes()),
        2 => {
            out.extend_from_slice(&((24 + payload.len()) as u32).to_le_bytes());
            out.extend_from_slice(&(plain.len() as u32).to_le_bytes());
        }
        _ => {
            out.extend_from_slice(&((32 + payload.len()) as u64).to_le_bytes());
            out.extend_from_slice(&(plain.len() as u64).to_le_bytes());
        }
    }
    out.extend_from_slice(&hash.to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::plain;

    fn sample() -> Vec<u8> {
        plain::write(
            &[
                ("host-x86_64-unknown-linux-gnu-", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx1030", &[7u8; 5000]),
            ],
            4096,
        )
    }

    #[test]
    fn every_version_and_method_round_trips() {
        let plain = sample();
        for version in [1, 2, 3] {
            for method in [Method::Zlib, Method::Zstd] {
                let mut c = write(&plain, version, method);
                let h = header(&c).unwrap().unwrap();
                assert_eq!((h.version, h.method), (version, method));
                assert_eq!(h.header_len, [20, 24, 32][version as usize - 1]);
                let n = c.len() as u64;
                // Trailing bytes (the next bundle) are not consumed.
                c.extend_from_slice(b"CCOB\x09\x00trailing");
                let (out, len) = decompress(&c, &h).unwrap();
                assert_eq!(out, plain);
                assert_eq!(len, n, "v{version} {method:?}");
            }
        }
    }

    #[test]
    fn hash_is_checked() {
        let mut c = write(&sample(), 2, Method::Zstd);
        c[16] ^= 1;
        let h = header(&c).unwrap().unwrap();
        assert!(decompress(&c, &h)
            .unwrap_err()
            .message
            .contains("hash mismatch"));
    }

    #[test]
    fn the_table_is_read_without_the_rest_only_where_the_header_frames_it() {
        for version in [1, 2, 3] {
            let mut c = write(&sample(), version, Method::Zstd);
            let n = c.len() as u64;
            let hash_at = [12, 16, 24][version as usize - 1];
            c[hash_at] ^= 1;
            let h = header(&c).unwrap().unwrap();
            let table = inspect(&c[..], 0, n, &h, Check::Table);
            let whole = inspect(&c[..], 0, n, &h, Check::Whole);
            assert!(matches!(&whole, Err(ReadError::Format(e)) if e.message.contains("hash")));
            match version {
                // v1 has no total size: only its stream's end says its length.
                1 => assert!(table.is_err(), "v1 is read whole"),
                _ => {
                    let found = table.unwrap();
                    assert_eq!(found.len, n);
                    assert_eq!(found.bundle.unwrap().entries.len(), 2);
                }
            }
        }
    }

    #[test]
    fn known_md5_low_bytes() {
        // MD5("") = d41d8cd98f00b204e9800998ecf8427e
        assert_eq!(
            truncated_md5(b"").to_le_bytes(),
            [0xd4, 0x1d, 0x8c, 0xd9, 0x8f, 0x00, 0xb2, 0x04]
        );
    }

    #[test]
    fn lies_in_headers_are_errors() {
        let c = write(&sample(), 3, Method::Zlib);
        for n in 0..c.len() {
            if let Ok(Some(h)) = header(&c[..n]) {
                assert!(decompress(&c[..n], &h).is_err(), "truncated to {n}");
            }
        }
        let mut big = c.clone();
        big[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        let h = header(&big).unwrap().unwrap();
        assert!(decompress(&big, &h)
            .unwrap_err()
            .message
            .contains("implausible"));
        assert_eq!(header(b"CCOB\x07\x00\x01\x00").unwrap(), None);
        assert_eq!(header(b"CCOB\x01\x00\x05\x00").unwrap(), None);
    }
}
