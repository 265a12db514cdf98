//! `rocmatrix bundles PATH…`: per file, the gfx targets its offload bundles
//! (or bare code object) carry. Directories are walked.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::bundle::{scan_paths, BundleError, Check, FileReport};
use crate::error::{Error, ExitCode};

#[derive(Debug, Args)]
pub struct BundlesArgs {
    /// Files or directories.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Print JSON (every bundle and entry) instead of one line per file.
    #[arg(long)]
    pub json: bool,
    /// Also list host files without device code.
    #[arg(long)]
    pub all: bool,
    /// Decompress each compressed bundle whole, checking its size and hash
    /// (a zstd window of up to 128 MiB resident); by default it is read as
    /// far as its entry table, as clang lists bundles.
    #[arg(long)]
    pub verify: bool,
}

/// Scans, printing errors to stderr; returns the reports and the exit code
/// the errors call for (2 for malformed files, 3 for unreadable ones).
pub(crate) fn scan(paths: &[PathBuf], check: Check) -> (Vec<FileReport>, ExitCode) {
    give_freed_memory_back();
    let mut reports = Vec::new();
    let mut code = ExitCode::Success;
    for r in scan_paths(paths, check) {
        match r {
            Ok(r) => reports.push(r),
            Err(e) => {
                eprintln!("error: {e}");
                let c = Error::from(e).exit_code();
                if code == ExitCode::Success || c == ExitCode::Infrastructure {
                    code = c;
                }
            }
        }
    }
    (reports, code)
}

/// The scanner streams, but a zstd decoder's window is one allocation of up
/// to 128 MiB, and bundles of every size come and go. glibc raises its mmap
/// threshold each time such a buffer is freed, so the next ones (up to 32 MiB)
/// come from the heap, whose freed memory stays resident up to twice that:
/// on librocsparse.so.1.0 (7.2.4) that was 20 MB more peak RSS (164 MB, not
/// 144 MB). A fixed threshold keeps buffers of 1 MiB and more in mappings of
/// their own, given back when freed.
fn give_freed_memory_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tuning parameter of glibc's allocator.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

pub fn run(args: BundlesArgs, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let (reports, code) = scan(&args.paths, Check::verifying(args.verify));
    let shown: Vec<&FileReport> = reports
        .iter()
        .filter(|r| args.all || r.has_offload_code())
        .collect();
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&shown).unwrap_or_default();
        s.push('\n');
        s
    } else {
        shown.iter().map(|r| line(r)).collect()
    };
    super::write_out(out, &text)?;
    Ok(code)
}

/// One file's line of the text output: its targets and, in brackets, its
/// bundles, or what the file is when it has none (`code object`, or
/// `host ELF` for a library or executable without `.hip_fatbin`; the JSON's
/// `kind`).
fn line(r: &FileReport) -> String {
    let targets: Vec<String> = r.targets().iter().map(|t| t.to_string()).collect();
    let compressed = r.bundles.iter().filter(|b| b.compression.is_some()).count();
    let how = match (r.bundles.len(), compressed) {
        (0, _) => r.kind.label().to_string(),
        (n, 0) => format!("{n} bundle(s)"),
        (n, c) => format!(
            "{n} bundle(s), {c} compressed: {}",
            r.compression().join(", ")
        ),
    };
    let list = if targets.is_empty() {
        "no device code".to_string()
    } else {
        targets.join(" ")
    };
    format!("{}: {list} [{how}]\n", r.path.display())
}

impl From<BundleError> for Error {
    fn from(e: BundleError) -> Self {
        Error::Bundle(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundles(all: bool, json: bool) -> String {
        let args = BundlesArgs {
            paths: vec![PathBuf::from("/bin/ls")],
            json,
            all,
            verify: false,
        };
        let mut out = Vec::new();
        assert_eq!(run(args, &mut out).unwrap(), ExitCode::Success);
        String::from_utf8(out).unwrap()
    }

    /// `/bin/ls` is a host executable without device code: the text says
    /// `host ELF`, as the JSON says `host-elf`, not `code object`.
    #[test]
    fn a_host_elf_without_device_code_is_labelled_a_host_file() {
        assert_eq!(bundles(true, false), "/bin/ls: no device code [host ELF]\n");
        let json: serde_json::Value = serde_json::from_str(&bundles(true, true)).unwrap();
        assert_eq!(json[0]["kind"], "host-elf");
        assert_eq!(bundles(false, false), "");
    }
}
