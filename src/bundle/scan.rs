//! Finding offload code in files: ELF hosts (`.hip_fatbin`), bare AMDGPU
//! code objects, and raw bundle files (`.hipfb`, Tensile `.co`), each region
//! possibly holding several plain or compressed bundles back to back.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::compressed::{self, Check, Method};
use super::id::BundleId;
use super::region::scan_region;
use super::source::{read_vec, FileSource, ReadError, Source};
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

/// Is this the start of something [`scan_bytes`] understands?
pub fn recognised(head: &[u8]) -> bool {
    elf::is_elf(head) || head.starts_with(plain::MAGIC) || head.starts_with(compressed::MAGIC)
}

/// Scans a file's bytes. `Ok(None)` for files without offload structure
/// (not ELF64, not a bundle); host ELF files without `.hip_fatbin` give a
/// report with no bundles. Compressed bundles are checked whole: the
/// bytes are in memory already.
pub fn scan_bytes(path: &Path, data: &[u8]) -> Result<Option<FileReport>, BundleError> {
    scan_source(path, data, Check::Whole)
}

/// Scans what `src` holds, by positioned reads: the ELF header and section
/// table, then each region's bundles a window at a time (see
/// [`region`](super::region)); the file is never read whole.
pub fn scan_source<S: Source + ?Sized>(
    path: &Path,
    src: &S,
    check: Check,
) -> Result<Option<FileReport>, BundleError> {
    let err = |e: ReadError| match e {
        ReadError::Format(error) => BundleError::Format {
            path: path.to_path_buf(),
            error,
        },
        ReadError::Io(source) => BundleError::Io {
            path: path.to_path_buf(),
            source,
        },
    };
    let report = |kind, bundles, code_object| {
        Some(FileReport {
            path: path.to_path_buf(),
            kind,
            size: src.size(),
            bundles,
            code_object,
        })
    };
    let head = read_vec(src, 0, 64).map_err(|e| err(e.into()))?;
    if elf::is_elf(&head) {
        if !elf::is_elf64le(&head) {
            return Ok(None);
        }
        let header = elf::header(&head).map_err(|e| err(e.into()))?;
        if let Some(target) = elf::code_object_target(&header).map_err(|e| err(e.into()))? {
            return Ok(report(FileKind::CodeObject, Vec::new(), Some(target)));
        }
        let mut bundles = Vec::new();
        for s in elf::sections_of(src).map_err(err)? {
            if s.name != ".hip_fatbin" || s.nobits {
                continue;
            }
            if !elf::within(src.size(), s.offset, s.size) {
                return Err(err(FormatError::new(
                    s.offset,
                    format!(".hip_fatbin ({} bytes) past the end of the file", s.size),
                )
                .into()));
            }
            bundles.extend(scan_region(src, s.offset, s.size, check).map_err(err)?);
        }
        return Ok(report(FileKind::HostElf, bundles, None));
    }
    if head.starts_with(plain::MAGIC) || head.starts_with(compressed::MAGIC) {
        let bundles = scan_region(src, 0, src.size(), check).map_err(err)?;
        return Ok(report(FileKind::Bundle, bundles, None));
    }
    Ok(None)
}

/// Scans one file if its first bytes are recognised, reading it by
/// positioned reads in bounded pieces (never whole).
pub fn scan_file(path: &Path, check: Check) -> Result<Option<FileReport>, BundleError> {
    let io = |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    };
    let f = fs::File::open(path).map_err(io)?;
    let src = FileSource::new(f).map_err(io)?;
    let head = read_vec(&src, 0, 24).map_err(io)?;
    if !recognised(&head) {
        return Ok(None);
    }
    scan_source(path, &src, check)
}

/// Scans files and directories (walked recursively, symlinks not followed,
/// in name order). Every regular file is tried; one result per recognised
/// file, errors included so one bad file does not hide the others.
pub fn scan_paths(paths: &[PathBuf], check: Check) -> Vec<Result<FileReport, BundleError>> {
    let mut out = Vec::new();
    for p in paths {
        walk(p, true, check, &mut out);
    }
    out
}

fn walk(path: &Path, explicit: bool, check: Check, out: &mut Vec<Result<FileReport, BundleError>>) {
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
            walk(&c, false, check, out);
        }
    } else if meta.is_file() {
        match scan_file(path, check) {
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
