//! Plain offload bundles: the 24-byte magic `__CLANG_OFFLOAD_BUNDLE__`, a
//! little-endian u64 entry count, then per entry u64 offset (from the bundle
//! start), u64 size, u64 id length and the id bytes.

use super::id::BundleId;
use super::{read_u64, FormatError};

pub const MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";

/// One entry of a plain bundle; `offset` is from the bundle start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    pub id: BundleId,
    pub offset: u64,
    pub size: u64,
}

/// A parsed plain bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainBundle {
    pub entries: Vec<RawEntry>,
    /// Bytes from the bundle start to the end of its last entry or header.
    pub len: u64,
}

/// Parses the plain bundle that starts at `buf[0]`. Offsets in errors are
/// relative to `buf`.
pub fn parse(buf: &[u8]) -> Result<PlainBundle, FormatError> {
    match parse_prefix(buf, buf.len() as u64) {
        Ok(b) => Ok(b),
        Err(Partial::Bad(e)) => Err(e),
        // A whole buffer never needs more bytes; kept as an error, not a panic.
        Err(Partial::Need(n)) => Err(FormatError::new(n, "truncated bundle header")),
    }
}

/// Why [`parse_prefix`] gave no bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Partial {
    /// The header goes on past the prefix: call again with at least this many bytes.
    Need(usize),
    /// Malformed, as [`parse`] says for the whole bundle.
    Bad(FormatError),
}

/// Reads fields of a bundle of `total` bytes of which `head` is the start.
struct View<'a> {
    head: &'a [u8],
    total: u64,
}

impl View<'_> {
    /// The bytes `at..at + n`: `Ok(None)` past the bundle's end, `Need`
    /// when they are in the bundle but not in the prefix.
    fn bytes(&self, at: usize, n: usize) -> Result<Option<&[u8]>, Partial> {
        let Some(end) = at.checked_add(n) else {
            return Ok(None);
        };
        if let Some(b) = self.head.get(at..end) {
            return Ok(Some(b));
        }
        if end as u64 <= self.total {
            return Err(Partial::Need(end));
        }
        Ok(None)
    }

    fn u64_at(&self, at: usize) -> Result<Option<u64>, Partial> {
        Ok(self.bytes(at, 8)?.and_then(|b| read_u64(b, 0)))
    }
}

/// Parses a plain bundle of `total` bytes from its first bytes `head` (at
/// most `total` of them): the entry table is at the start, the code after
/// it need not be read. With `head` the whole bundle this is [`parse`].
pub fn parse_prefix(head: &[u8], total: u64) -> Result<PlainBundle, Partial> {
    let head = &head[..head.len().min(usize::try_from(total).unwrap_or(usize::MAX))];
    let v = View { head, total };
    let bad = |at: usize, m: String| Partial::Bad(FormatError::new(at, m));
    if v.bytes(0, MAGIC.len())? != Some(&MAGIC[..]) {
        return Err(bad(0, "no __CLANG_OFFLOAD_BUNDLE__ magic".into()));
    }
    let count = v
        .u64_at(24)?
        .ok_or_else(|| bad(24, "truncated entry count".into()))?;
    // Each entry header takes at least 24 bytes: refuse counts the data cannot hold.
    if count > total.saturating_sub(32) / 24 {
        return Err(bad(
            24,
            format!("entry count {count} does not fit in {total} bytes"),
        ));
    }
    let mut at = 32usize;
    let mut len = 0u64;
    let mut entries = Vec::with_capacity(count.min(1024) as usize);
    for i in 0..count {
        let field = |at: usize, what: &str| {
            v.u64_at(at)?
                .ok_or_else(|| bad(at, format!("entry {i}: truncated {what}")))
        };
        let offset = field(at, "offset")?;
        let size = field(at + 8, "size")?;
        let id_len = field(at + 16, "id length")?;
        let id_start = at + 24;
        let id_end = usize::try_from(id_len)
            .ok()
            .and_then(|l| id_start.checked_add(l))
            .filter(|end| *end as u64 <= total)
            .ok_or_else(|| {
                bad(
                    at + 16,
                    format!("entry {i}: id length {id_len} past the end"),
                )
            })?;
        let id_bytes = v.bytes(id_start, id_end - id_start)?.unwrap_or_default();
        let id_text = std::str::from_utf8(id_bytes)
            .map_err(|_| bad(id_start, format!("entry {i}: id is not UTF-8")))?;
        let id = BundleId::parse(id_text)
            .ok_or_else(|| bad(id_start, format!("entry {i}: malformed id `{id_text}`")))?;
        let end = offset
            .checked_add(size)
            .filter(|end| *end <= total)
            .ok_or_else(|| {
                bad(
                    at,
                    format!(
                        "entry {i} (`{id_text}`): {size} bytes at offset {offset} past the end ({total} bytes)"
                    ),
                )
            })?;
        len = len.max(end);
        entries.push(RawEntry { id, offset, size });
        at = id_end;
    }
    Ok(PlainBundle {
        entries,
        len: len.max(at as u64),
    })
}

/// Writes a plain bundle (host code first is the caller's business). Used by
/// tests and the fuzz seed corpus; entries are aligned to `align` bytes.
pub fn write(entries: &[(&str, &[u8])], align: usize) -> Vec<u8> {
    let mut header = Vec::new();
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let header_len = 32 + entries.iter().map(|(id, _)| 24 + id.len()).sum::<usize>();
    let align = align.max(1);
    let mut offsets = Vec::new();
    let mut at = header_len;
    for (_, data) in entries {
        at = at.div_ceil(align) * align;
        offsets.push(at);
        at += data.len();
    }
    for ((id, data), off) in entries.iter().zip(&offsets) {
        header.extend_from_slice(&(*off as u64).to_le_bytes());
        header.extend_from_slice(&(data.len() as u64).to_le_bytes());
        header.extend_from_slice(&(id.len() as u64).to_le_bytes());
        header.extend_from_slice(id.as_bytes());
    }
    let mut out = header;
    for ((_, data), off) in entries.iter().zip(&offsets) {
        out.resize(*off, 0);
        out.extend_from_slice(data);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let b = write(
            &[
                ("host-x86_64-unknown-linux-gnu-", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", b"code a"),
                ("hipv4-amdgcn-amd-amdhsa--gfx1100", b"code bb"),
            ],
            4096,
        );
        let p = parse(&b).unwrap();
        assert_eq!(p.entries.len(), 3);
        assert_eq!(p.entries[1].offset, 4096);
        assert_eq!(p.entries[2].offset, 8192);
        assert_eq!(p.len as usize, b.len());
        assert_eq!(
            p.entries[2].id.target.as_ref().unwrap().to_string(),
            "gfx1100"
        );
    }

    /// A prefix either asks for more bytes than it has or parses as the whole.
    #[test]
    fn prefixes_parse_as_the_whole_or_ask_for_more() {
        let b = write(
            &[
                ("host-x86_64-unknown-linux-gnu-", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", &[1u8; 300]),
            ],
            64,
        );
        let whole = parse(&b).unwrap();
        for n in 0..=b.len() {
            match parse_prefix(&b[..n], b.len() as u64) {
                Ok(p) => assert_eq!(p, whole, "prefix {n}"),
                Err(Partial::Need(k)) => assert!(k > n && k <= b.len(), "prefix {n}: need {k}"),
                Err(Partial::Bad(e)) => panic!("prefix {n}: {e}"),
            }
        }
        let mut bad = b.clone();
        bad[24..32].copy_from_slice(&3u64.to_le_bytes());
        for n in 0..=bad.len() {
            if let Err(Partial::Bad(e)) = parse_prefix(&bad[..n], bad.len() as u64) {
                assert_eq!(e, parse(&bad).unwrap_err(), "prefix {n}");
            }
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        let b = write(&[("hipv4-amdgcn-amd-amdhsa--gfx906", b"0123456789")], 8);
        for n in 0..b.len() {
            assert!(parse(&b[..n]).is_err(), "truncated to {n} parsed");
        }
        let mut huge = b.clone();
        huge[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse(&huge).unwrap_err().message.contains("entry count"));
        let mut far = b.clone();
        far[32..40].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
        assert!(parse(&far).unwrap_err().message.contains("past the end"));
    }
}
