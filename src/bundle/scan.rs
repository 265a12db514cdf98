//! Finding offload code in files: ELF hosts (`.hip_fatbin`), bare AMDGPU
//! code objects, and raw bundle files (`.hipfb`, Tensile `.co`), each region
//! possibly holding several plain or compressed bundles back to back.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use memchr::memmem;
use serde::Serialize;

use super::compressed::{self, Method};
use super::id::BundleId;
use super::{elf, plain, BundleError, FormatError};
use crate::gpu::TargetId;

/// What a file is, as far as offload code goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    /// An ELF library or executable; bundles come from `.hip_fatbin`.
    HostElf,
    /// A bare AMDGPU code object (`e_machine` 224).
    CodeObject,
    /// A file that is a bundle (plain or compressed) itself.
    Bundle,
}

impl FileKind {
    /// The kind in words, for text output: the JSON name without its dash
    /// (`host-elf` is `host ELF`).
    pub fn label(self) -> &'static str {
        match self {
            FileKind::HostElf => "host ELF",
            FileKind::CodeObject => "code object",
            FileKind::Bundle => "bundle",
        }
    }
}

/// How a bundle is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Compression {
    pub version: u16,
    pub method: Method,
    pub compressed_size: u64,
    pub uncompressed_size: u64,
}

impl Compression {
    /// `CCOB v3 zstd`.
    pub fn describe(&self) -> String {
        let method = match self.method {
            Method::Zlib => "zlib",
            Method::Zstd => "zstd",
        };
        format!("CCOB v{} {method}", self.version)
    }
}

/// One entry of a bundle; `offset` is within the (decompressed) bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub id: BundleId,
    pub offset: u64,
    pub size: u64,
}

/// One bundle found in a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bundle {
    /// Byte offset of the bundle in the file.
    pub offset: u64,
    pub compression: Option<Compression>,
    pub entries: Vec<Entry>,
}

/// Everything found in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileReport {
    pub path: PathBuf,
    pub kind: FileKind,
    pub size: u64,
    pub bundles: Vec<Bundle>,
    /// The target of a bare code object.
    pub code_object: Option<TargetId>,
}

impl FileReport {
    /// Distinct device targets, sorted.
    pub fn targets(&self) -> Vec<TargetId> {
        let mut out: Vec<TargetId> = self
            .bundles
            .iter()
            .flat_map(|b| &b.entries)
            .filter(|e| e.id.is_amdgcn())
            .filter_map(|e| e.id.target.clone())
            .chain(self.code_object.clone())
            .collect();
        out.sort_by_key(natural);
        out.dedup();
        out
    }

    /// All entry ids in file order (host ones included).
    pub fn ids(&self) -> Vec<&str> {
        self.bundles
            .iter()
            .flat_map(|b| &b.entries)
            .map(|e| e.id.raw.as_str())
            .collect()
    }

    /// Device targets whose code is only in compressed bundles (not in a
    /// plain bundle, nor a bare code object), sorted.
    pub fn compressed_targets(&self) -> Vec<TargetId> {
        let plain: Vec<&TargetId> = self
            .bundles
            .iter()
            .filter(|b| b.compression.is_none())
            .flat_map(|b| &b.entries)
            .filter(|e| e.id.is_amdgcn())
            .filter_map(|e| e.id.target.as_ref())
            .chain(self.code_object.as_ref())
            .collect();
        self.targets()
            .into_iter()
            .filter(|t| {
                !plain.contains(&t)
                    && self
                        .bundles
                        .iter()
                        .filter(|b| b.compression.is_some())
                        .flat_map(|b| &b.entries)
                        .any(|e| e.id.target.as_ref() == Some(t))
            })
            .collect()
    }

    /// How the file's compressed bundles are stored (`CCOB v3 zstd`), distinct.
    pub fn compression(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in self.bundles.iter().filter_map(|b| b.compression) {
            let s = c.describe();
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    pub fn has_offload_code(&self) -> bool {
        !self.targets().is_empty()
    }
}

/// Sort key: gfx906 before gfx1030 (by version), then the text.
fn natural(t: &TargetId) -> (u32, String) {
    let v = crate::gpu::target::version_of(t.processor())
        .map(|(a, b, c)| a * 10000 + b * 100 + c)
        .unwrap_or(u32::MAX);
    (v, t.to_string())
}

/// Scans every bundle in `region`, which starts at file offset `base`.
fn scan_region(region: &[u8], base: u64) -> Result<Vec<Bundle>, FormatError> {
    let plain_finder = memmem::Finder::new(plain::MAGIC);
    let ccob_finder = memmem::Finder::new(compressed::MAGIC);
    let mut bundles = Vec::new();
    let mut pos = 0usize;
    let at_file = |rel: usize, e: FormatError| FormatError {
        offset: base.saturating_add(rel as u64).saturating_add(e.offset),
        message: e.message,
    };
    // Next match of each magic at or after `pos`, searched again only once
    // `pos` has passed it: re-searching the whole rest for every bundle would
    // be quadratic in sections with thousands of bundles.
    let mut next_plain: Option<Option<usize>> = None;
    let mut next_ccob: Option<Option<usize>> = None;
    let next = |finder: &memmem::Finder, cached: &mut Option<Option<usize>>, pos: usize| {
        if let Some(Some(at)) = *cached {
            if at >= pos {
                return Some(at);
            }
        } else if let Some(None) = *cached {
            return None;
        }
        let found = finder.find(&region[pos..]).map(|i| pos + i);
        *cached = Some(found);
        found
    };
    while pos < region.len() {
        let (start, is_plain) = match (
            next(&plain_finder, &mut next_plain, pos),
            next(&ccob_finder, &mut next_ccob, pos),
        ) {
            (None, None) => break,
            (Some(p), Some(c)) if c < p => (c, false),
            (Some(p), _) => (p, true),
            (None, Some(c)) => (c, false),
        };
        let here = &region[start..];
        if is_plain {
            let b = plain::parse(here).map_err(|e| at_file(start, e))?;
            bundles.push(Bundle {
                offset: base + start as u64,
                compression: None,
                entries: entries(b.entries),
            });
            pos = start + (b.len as usize).max(plain::MAGIC.len());
        } else {
            let Some(h) = compressed::header(here).map_err(|e| at_file(start, e))? else {
                // `CCOB` by chance, with no known version/method: not a bundle.
                pos = start + compressed::MAGIC.len();
                continue;
            };
            let (data, len) = compressed::decompress(here, &h).map_err(|e| at_file(start, e))?;
            let b = plain::parse(&data).map_err(|e| {
                at_file(
                    start,
                    FormatError::new(0, format!("decompressed bundle: {}", e)),
                )
            })?;
            bundles.push(Bundle {
                offset: base + start as u64,
                compression: Some(Compression {
                    version: h.version,
                    method: h.method,
                    compressed_size: len,
                    uncompressed_size: h.uncompressed_size,
                }),
                entries: entries(b.entries),
            });
            pos = start + (len as usize).max(compressed::MAGIC.len());
        }
    }
    Ok(bundles)
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

/// Is this the start of something [`scan_bytes`] understands?
pub fn recognised(head: &[u8]) -> bool {
    elf::is_elf(head) || head.starts_with(plain::MAGIC) || head.starts_with(compressed::MAGIC)
}

/// Scans a file's bytes. `Ok(None)` for files without offload structure
/// (not ELF64, not a bundle); host ELF files without `.hip_fatbin` give a
/// report with no bundles.
pub fn scan_bytes(path: &Path, data: &[u8]) -> Result<Option<FileReport>, BundleError> {
    let err = |error: FormatError| BundleError::Format {
        path: path.to_path_buf(),
        error,
    };
    let report = |kind, bundles, code_object| {
        Some(FileReport {
            path: path.to_path_buf(),
            kind,
            size: data.len() as u64,
            bundles,
            code_object,
        })
    };
    if elf::is_elf(data) {
        if !elf::is_elf64le(data) {
            return Ok(None);
        }
        let header = elf::header(data).map_err(err)?;
        if let Some(target) = elf::code_object_target(&header).map_err(err)? {
            return Ok(report(FileKind::CodeObject, Vec::new(), Some(target)));
        }
        let mut bundles = Vec::new();
        for s in elf::sections(data).map_err(err)? {
            if s.name != ".hip_fatbin" || s.nobits {
                continue;
            }
            let region = elf::range(data, s.offset, s.size).ok_or_else(|| {
                err(FormatError::new(
                    s.offset,
                    format!(".hip_fatbin ({} bytes) past the end of the file", s.size),
                ))
            })?;
            bundles.extend(scan_region(region, s.offset).map_err(err)?);
        }
        return Ok(report(FileKind::HostElf, bundles, None));
    }
    if data.starts_with(plain::MAGIC) || data.starts_with(compressed::MAGIC) {
        let bundles = scan_region(data, 0).map_err(err)?;
        return Ok(report(FileKind::Bundle, bundles, None));
    }
    Ok(None)
}

/// Scans one file, reading it whole only if its first bytes are recognised.
pub fn scan_file(path: &Path) -> Result<Option<FileReport>, BundleError> {
    let io = |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = fs::File::open(path).map_err(io)?;
    let mut head = [0u8; 24];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]).map_err(io)? {
            0 => break,
            k => n += k,
        }
    }
    if !recognised(&head[..n]) {
        return Ok(None);
    }
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut data = Vec::with_capacity(len as usize);
    data.extend_from_slice(&head[..n]);
    f.read_to_end(&mut data).map_err(io)?;
    scan_bytes(path, &data)
}

/// Scans files and directories (walked recursively, symlinks not followed,
/// in name order). Every regular file is tried; one result per recognised
/// file, errors included so one bad file does not hide the others.
pub fn scan_paths(paths: &[PathBuf]) -> Vec<Result<FileReport, BundleError>> {
    let mut out = Vec::new();
    for p in paths {
        walk(p, true, &mut out);
    }
    out
}

fn walk(path: &Path, explicit: bool, out: &mut Vec<Result<FileReport, BundleError>>) {
    let meta = if explicit {
        fs::metadata(path)
    } else {
        fs::symlink_metadata(path)
    };
    let meta = match meta {
        Ok(m) => m,
        Err(source) => {
            out.push(Err(BundleError::Io {
                path: path.to_path_buf(),
                source,
            }));
            return;
        }
    };
    if meta.is_dir() {
        let mut children: Vec<PathBuf> = match fs::read_dir(path) {
            Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(source) => {
                out.push(Err(BundleError::Io {
                    path: path.to_path_buf(),
                    source,
                }));
                return;
            }
        };
        children.sort();
        for c in children {
            walk(&c, false, out);
        }
    } else if meta.is_file() {
        match scan_file(path) {
            Ok(Some(r)) => out.push(Ok(r)),
            Ok(None) => {}
            Err(e) => out.push(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(t: &str) -> String {
        format!("hipv4-amdgcn-amd-amdhsa--{t}")
    }

    #[test]
    fn several_bundles_in_one_fatbin_section() {
        let a = plain::write(
            &[
                ("host-x86_64-unknown-linux-gnu-", b""),
                (&device("gfx90a"), b"A"),
            ],
            4096,
        );
        let b = compressed::write(
            &plain::write(
                &[(&device("gfx1100"), b"B"), (&device("gfx906:xnack-"), b"C")],
                8,
            ),
            1,
            Method::Zlib,
        );
        let c = compressed::write(
            &plain::write(&[(&device("gfx11-generic"), b"D")], 8),
            3,
            Method::Zstd,
        );
        let mut fatbin = a.clone();
        fatbin.resize(8192, 0);
        fatbin.extend_from_slice(&b);
        fatbin.extend_from_slice(&[0; 13]);
        fatbin.extend_from_slice(&c);
        let so = elf::write(62, 0, 0, &[(".text", b"code"), (".hip_fatbin", &fatbin)]);
        let r = scan_bytes(Path::new("lib.so"), &so).unwrap().unwrap();
        assert_eq!(r.kind, FileKind::HostElf);
        assert_eq!(r.bundles.len(), 3);
        assert_eq!(r.bundles[1].compression.unwrap().version, 1);
        assert_eq!(r.bundles[2].compression.unwrap().method, Method::Zstd);
        let t: Vec<String> = r.targets().iter().map(|t| t.to_string()).collect();
        assert_eq!(t, ["gfx906:xnack-", "gfx90a", "gfx1100", "gfx11-generic"]);
        // Garbage anywhere never panics.
        for i in (0..so.len()).step_by(7) {
            let mut bad = so.clone();
            bad[i] ^= 0xa5;
            let _ = scan_bytes(Path::new("x"), &bad);
            let _ = scan_bytes(Path::new("x"), &so[..i]);
        }
    }

    #[test]
    fn errors_carry_file_offsets() {
        let mut b = plain::write(&[(&device("gfx90a"), b"A")], 8);
        let n = b.len();
        b[32..40].copy_from_slice(&(n as u64 + 1).to_le_bytes());
        let so = elf::write(62, 0, 0, &[(".hip_fatbin", &b)]);
        let e = scan_bytes(Path::new("lib.so"), &so).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("lib.so: at offset 0x60:"), "{text}");
    }

    #[test]
    fn bare_code_objects_and_other_files() {
        let co = elf::write(elf::EM_AMDGPU, 0x41, 2, &[(".text", b"")]);
        let r = scan_bytes(Path::new("k.hsaco"), &co).unwrap().unwrap();
        assert_eq!(r.kind, FileKind::CodeObject);
        assert_eq!(r.targets()[0].to_string(), "gfx1100");
        assert!(scan_bytes(Path::new("t"), b"just text").unwrap().is_none());
        let host = elf::write(62, 0, 0, &[(".text", b"")]);
        assert!(!scan_bytes(Path::new("h"), &host)
            .unwrap()
            .unwrap()
            .has_offload_code());
    }
}
