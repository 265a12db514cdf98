//! Clang offload bundles: which gfx targets a file really carries code for.
//!
//! Reads plain bundles (`__CLANG_OFFLOAD_BUNDLE__`), compressed ones (`CCOB`
//! v1/v2/v3, zlib or zstd; read as far as the entry table, or whole with
//! the size and hash checked: [`compressed::Check`]), several bundles in one region, the
//! `.hip_fatbin` section of ELF shared libraries and executables, and bare
//! AMDGPU code objects (target from `e_flags`). Every length and offset is
//! checked: garbage is an error naming the file and offset, never a panic.
//! Files are read by positioned reads in bounded pieces ([`source`],
//! [`region`]), never whole: a compressed bundle is decompressed as a stream
//! keeping only its entry table.
//! [`coverage`] turns what files carry into a library × gfx table.

pub mod compressed;
pub mod coverage;
pub mod elf;
pub mod id;
pub mod plain;
pub mod region;
pub mod scan;
pub mod source;

use std::path::PathBuf;

pub use compressed::Check;
pub use coverage::{coverage, CoverageCell, CoverageRow, CoverageVerdict};
pub use id::BundleId;
pub use scan::{
    scan_bytes, scan_file, scan_paths, scan_source, Bundle, Entry, FileKind, FileReport,
};

/// A malformed structure at a byte offset (relative to the file when it is
/// reported through [`BundleError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at offset {offset:#x}: {message}")]
pub struct FormatError {
    pub offset: u64,
    pub message: String,
}

impl FormatError {
    pub fn new(offset: impl TryInto<u64>, message: impl Into<String>) -> FormatError {
        FormatError {
            offset: offset.try_into().unwrap_or(u64::MAX),
            message: message.into(),
        }
    }
}

/// Errors reading files for bundles.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {error}", path.display())]
    Format { path: PathBuf, error: FormatError },
}

/// Little-endian reads that fail instead of panicking.
pub(crate) fn read_u16(buf: &[u8], at: usize) -> Option<u16> {
    let b = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

pub(crate) fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

pub(crate) fn read_u64(buf: &[u8], at: usize) -> Option<u64> {
    let b = buf.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}
