//! Just enough ELF64 to find offload code: the header (`e_machine`,
//! `e_flags`, ABI version), section headers and their names. Written by hand
//! rather than with the `object` crate: three structures, every offset
//! checked here, and the scanner stays allocation-light and easy to fuzz.

use super::source::{read_vec, ReadError, Source};
use super::{read_u16, read_u32, read_u64, FormatError};
use crate::gpu::target::processor_by_mach;
use crate::gpu::TargetId;

pub const EM_AMDGPU: u16 = 224;
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
const SHT_NOBITS: u32 = 8;

/// The ELF header fields we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub machine: u16,
    pub flags: u32,
    pub osabi: u8,
    pub abi_version: u8,
    pub shoff: u64,
    pub shentsize: u16,
    pub shnum: u16,
    pub shstrndx: u16,
}

/// A section: its name and where its bytes are in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub offset: u64,
    pub size: u64,
    /// `SHT_NOBITS` sections occupy no file bytes.
    pub nobits: bool,
}

/// Is this a 64-bit little-endian ELF file?
pub fn is_elf64le(buf: &[u8]) -> bool {
    buf.len() >= 6 && buf[..4] == *b"\x7fELF" && buf[4] == 2 && buf[5] == 1
}

pub fn is_elf(buf: &[u8]) -> bool {
    buf.starts_with(b"\x7fELF")
}

pub fn header(buf: &[u8]) -> Result<Header, FormatError> {
    if !is_elf64le(buf) {
        return Err(FormatError::new(0, "not a 64-bit little-endian ELF file"));
    }
    let t = |at: usize| FormatError::new(at, "truncated ELF header");
    Ok(Header {
        osabi: *buf.get(7).ok_or_else(|| t(7))?,
        abi_version: *buf.get(8).ok_or_else(|| t(8))?,
        machine: read_u16(buf, 18).ok_or_else(|| t(18))?,
        flags: read_u32(buf, 48).ok_or_else(|| t(48))?,
        shoff: read_u64(buf, 40).ok_or_else(|| t(40))?,
        shentsize: read_u16(buf, 58).ok_or_else(|| t(58))?,
        shnum: read_u16(buf, 60).ok_or_else(|| t(60))?,
        shstrndx: read_u16(buf, 62).ok_or_else(|| t(62))?,
    })
}

/// The header of the ELF file `src`, from its first 64 bytes.
pub fn header_of<S: Source + ?Sized>(src: &S) -> Result<Header, ReadError> {
    Ok(header(&read_vec(src, 0, 64)?)?)
}

/// One raw section header.
struct Shdr {
    name: u32,
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
}

fn shdr<S: Source + ?Sized>(src: &S, h: &Header, index: u64) -> Result<Shdr, ReadError> {
    let at = index
        .checked_mul(h.shentsize as u64)
        .and_then(|o| o.checked_add(h.shoff))
        .and_then(|o| usize::try_from(o).ok())
        .ok_or_else(|| FormatError::new(40, "section header offset overflows"))?;
    let raw = read_vec(src, at as u64, 48)?;
    let t = || {
        FormatError::new(
            at,
            format!("section header {index} past the end of the file"),
        )
    };
    Ok(Shdr {
        name: read_u32(&raw, 0).ok_or_else(t)?,
        kind: read_u32(&raw, 4).ok_or_else(t)?,
        offset: read_u64(&raw, 24).ok_or_else(t)?,
        size: read_u64(&raw, 32).ok_or_else(t)?,
        link: read_u32(&raw, 40).ok_or_else(t)?,
    })
}

/// All sections with their names. A file without section headers has none.
pub fn sections(buf: &[u8]) -> Result<Vec<Section>, FormatError> {
    sections_of(buf).map_err(|e| match e {
        ReadError::Format(e) => e,
        // A slice cannot fail to read; kept as an error, not a panic.
        ReadError::Io(e) => FormatError::new(0, e.to_string()),
    })
}

/// [`sections`] of a file read by positioned reads: the header, the section
/// headers and the names, never the sections' contents.
pub fn sections_of<S: Source + ?Sized>(src: &S) -> Result<Vec<Section>, ReadError> {
    let h = header_of(src)?;
    if h.shoff == 0 {
        return Ok(Vec::new());
    }
    if h.shentsize < 64 {
        return Err(
            FormatError::new(58, format!("section header size {} < 64", h.shentsize)).into(),
        );
    }
    // More than 0xff00 sections: the real count and string table index live in section 0.
    let first = shdr(src, &h, 0)?;
    let count = if h.shnum == 0 {
        first.size
    } else {
        h.shnum as u64
    };
    let strndx = if h.shstrndx == 0xffff {
        first.link as u64
    } else {
        h.shstrndx as u64
    };
    if count > src.size() / 64 {
        return Err(
            FormatError::new(60, format!("{count} section headers cannot fit the file")).into(),
        );
    }
    if strndx >= count {
        return Err(
            FormatError::new(62, format!("section name table index {strndx} >= {count}")).into(),
        );
    }
    let strtab = shdr(src, &h, strndx)?;
    if !within(src.size(), strtab.offset, strtab.size) {
        return Err(
            FormatError::new(strtab.offset, "section name table past the end of the file").into(),
        );
    }
    let mut out = Vec::with_capacity(count.min(4096) as usize);
    for i in 0..count {
        let s = shdr(src, &h, i)?;
        out.push(Section {
            name: name_at(src, &strtab, s.name)?,
            offset: s.offset,
            size: s.size,
            nobits: s.kind == SHT_NOBITS,
        });
    }
    Ok(out)
}

/// Is `offset..offset + size` inside a file of `len` bytes (and addressable)?
pub fn within(len: u64, offset: u64, size: u64) -> bool {
    let (Ok(start), Ok(size)) = (usize::try_from(offset), usize::try_from(size)) else {
        return false;
    };
    start.checked_add(size).is_some_and(|end| end as u64 <= len)
}

/// The NUL-terminated name at `name` in the name table (empty past its end),
/// read a little at a time.
fn name_at<S: Source + ?Sized>(src: &S, strtab: &Shdr, name: u32) -> Result<String, ReadError> {
    if name as u64 > strtab.size {
        return Ok(String::new());
    }
    let end = strtab.offset + strtab.size;
    let mut at = strtab.offset + name as u64;
    let mut bytes = Vec::new();
    while at < end {
        let chunk = read_vec(src, at, (end - at).min(256))?;
        if let Some(nul) = memchr::memchr(0, &chunk) {
            bytes.extend_from_slice(&chunk[..nul]);
            break;
        }
        bytes.extend_from_slice(&chunk);
        at += chunk.len() as u64;
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `buf[offset..offset + size]` if it is inside `buf`.
pub fn range(buf: &[u8], offset: u64, size: u64) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(size).ok()?)?;
    buf.get(start..end)
}

/// The target of an AMDGPU code object from its `e_flags`: `EF_AMDGPU_MACH`
/// in the low byte; xnack/sramecc as on/off bits for code object v3, as
/// unsupported/any/off/on fields for v4 and later. `None` for another machine.
pub fn code_object_target(h: &Header) -> Result<Option<TargetId>, FormatError> {
    if h.machine != EM_AMDGPU {
        return Ok(None);
    }
    let mach = h.flags & 0xff;
    let p = processor_by_mach(mach)
        .ok_or_else(|| FormatError::new(48, format!("unknown EF_AMDGPU_MACH {mach:#x}")))?;
    let mut features = Vec::new();
    if h.osabi == ELFOSABI_AMDGPU_HSA {
        match h.abi_version {
            // Code object v2 keeps its ISA (features included) in a note.
            0 => {}
            1 => {
                if p.xnack {
                    features.push(("xnack".to_string(), h.flags & 0x100 != 0));
                }
                if p.sramecc {
                    features.push(("sramecc".to_string(), h.flags & 0x200 != 0));
                }
            }
            _ => {
                for (name, shift) in [("xnack", 8), ("sramecc", 10)] {
                    match (h.flags >> shift) & 0x3 {
                        2 => features.push((name.to_string(), false)),
                        3 => features.push((name.to_string(), true)),
                        _ => {} // unsupported, or any
                    }
                }
            }
        }
    }
    Ok(Some(TargetId::with_features(p.name, features)))
}

/// A minimal ELF64 file for tests and fuzz seeds: the given sections (name,
/// bytes), `e_machine` and `e_flags`.
pub fn write(machine: u16, flags: u32, abi_version: u8, sections: &[(&str, &[u8])]) -> Vec<u8> {
    let mut names = vec![0u8];
    let mut name_offsets = Vec::new();
    for (n, _) in sections.iter().copied().chain([(".shstrtab", &[][..])]) {
        name_offsets.push(names.len() as u32);
        names.extend_from_slice(n.as_bytes());
        names.push(0);
    }
    let mut out = vec![0u8; 64];
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = 2;
    out[5] = 1;
    out[6] = 1;
    out[7] = if machine == EM_AMDGPU {
        ELFOSABI_AMDGPU_HSA
    } else {
        0
    };
    out[8] = abi_version;
    out[16..18].copy_from_slice(&3u16.to_le_bytes());
    out[18..20].copy_from_slice(&machine.to_le_bytes());
    out[48..52].copy_from_slice(&flags.to_le_bytes());
    let mut placed = Vec::new();
    for (_, data) in sections.iter().copied().chain([("", &names[..])]) {
        placed.push((out.len() as u64, data.len() as u64));
        out.extend_from_slice(data);
    }
    while out.len() % 8 != 0 {
        out.push(0);
    }
    let shoff = out.len() as u64;
    out.extend_from_slice(&[0u8; 64]); // the null section
    for (i, (off, size)) in placed.iter().enumerate() {
        let mut sh = [0u8; 64];
        sh[..4].copy_from_slice(&name_offsets[i].to_le_bytes());
        let kind: u32 = if i == placed.len() - 1 { 3 } else { 1 };
        sh[4..8].copy_from_slice(&kind.to_le_bytes());
        sh[24..32].copy_from_slice(&off.to_le_bytes());
        sh[32..40].copy_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&sh);
    }
    let shnum = placed.len() as u16 + 1;
    out[40..48].copy_from_slice(&shoff.to_le_bytes());
    out[52..54].copy_from_slice(&64u16.to_le_bytes());
    out[58..60].copy_from_slice(&64u16.to_le_bytes());
    out[60..62].copy_from_slice(&shnum.to_le_bytes());
    out[62..64].copy_from_slice(&(shnum - 1).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(flags: u32, abi: u8) -> String {
        let f = write(EM_AMDGPU, flags, abi, &[(".text", b"\0\0\0\0")]);
        code_object_target(&header(&f).unwrap())
            .unwrap()
            .unwrap()
            .to_string()
    }

    #[test]
    fn e_flags_decode_per_code_object_version() {
        // v4+: xnack in bits 8-9, sramecc in bits 10-11.
        assert_eq!(target(0x3f | 0x200 | 0xc00, 2), "gfx90a:sramecc+:xnack-");
        assert_eq!(target(0x3f | 0x100 | 0x400, 3), "gfx90a");
        assert_eq!(target(0x2f | 0x300, 4), "gfx906:xnack+");
        assert_eq!(target(0x36, 2), "gfx1030");
        assert_eq!(target(0x53 | (1 << 24), 4), "gfx10-3-generic");
        assert_eq!(target(0x4c | 0x800 | 0x200, 3), "gfx942:sramecc-:xnack-");
        // v3: on/off bits for the features the processor has.
        assert_eq!(target(0x2f | 0x100, 1), "gfx906:sramecc-:xnack+");
        assert_eq!(target(0x36 | 0x100, 1), "gfx1030");
        // v2: the processor only (features live in a note).
        assert_eq!(target(0x2c, 0), "gfx900");
    }

    #[test]
    fn sections_are_found_and_garbage_rejected() {
        let f = write(62, 0, 0, &[(".text", b"abc"), (".hip_fatbin", b"xyz!")]);
        let s = sections(&f).unwrap();
        let fat = s.iter().find(|s| s.name == ".hip_fatbin").unwrap();
        assert_eq!(range(&f, fat.offset, fat.size), Some(&b"xyz!"[..]));
        assert_eq!(code_object_target(&header(&f).unwrap()).unwrap(), None);
        for n in 0..f.len() {
            let _ = sections(&f[..n]); // must not panic
        }
        let mut bad = f.clone();
        bad[40..48].copy_from_slice(&(u64::MAX - 10).to_le_bytes());
        assert!(sections(&bad).is_err());
        let mut unknown = write(EM_AMDGPU, 0x7e, 2, &[]);
        assert!(code_object_target(&header(&unknown).unwrap()).is_err());
        unknown[4] = 1;
        assert!(header(&unknown).is_err());
    }
}
