//! The scanner reads files in bounded pieces: `rocmatrix bundles` and
//! `coverage --against` on a library of hundreds of megabytes stay within a
//! memory bound (the child's peak RSS from `wait4`), where reading the file
//! whole (as the scanner did before) would take more than the file's size.
//!
//! The library is real-format and built here: a host ELF whose
//! `.hip_fatbin` holds a plain bundle with a 640 MiB code object (a hole of
//! a sparse file: no disk, and no time to write it) and compressed bundles
//! (zstd and zlib) of 96 MiB of low-entropy code each, as clang lays them out.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use rocmatrix::bundle::compressed::{self, Method};
use rocmatrix::bundle::{elf, plain};

/// A child's exit code, stdout, stderr and peak RSS in KiB.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub max_rss_kib: i64,
}

/// The variable that makes [`rss_probe`] run the rocmatrix binary: its
/// arguments and output files, one per line.
const PROBE: &str = "ROCMATRIX_TEST_RSS_PROBE";

/// Runs the rocmatrix binary with `args` and measures its peak RSS.
///
/// Linux counts a new process's peak RSS from the address space it had
/// before `exec` (for `posix_spawn`, the parent's own peak): spawned from
/// this test process, which holds the generated library and runs other
/// tests beside, the child would report their memory. So this test binary
/// starts itself again, running only [`rss_probe`], a small process that
/// spawns rocmatrix and reads its rusage with `wait4`.
pub fn run_child(args: &[&str]) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let spec: Vec<String> = [out.to_str().unwrap(), err.to_str().unwrap()]
        .into_iter()
        .chain(args.iter().copied())
        .map(str::to_string)
        .collect();
    let probe = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "bundle_tests::memory::rss_probe",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PROBE, spec.join("\n"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&probe.stdout);
    let field = |name: &str| -> i64 {
        said.lines()
            .filter_map(|l| Some(l.split_once("rss-probe: ")?.1))
            .find_map(|l| {
                l.split(' ')
                    .find_map(|kv| kv.strip_prefix(name)?.parse().ok())
            })
            .unwrap_or_else(|| {
                panic!(
                    "no {name} from the probe: {said}\n{}",
                    String::from_utf8_lossy(&probe.stderr)
                )
            })
    };
    Ran {
        code: field("code=") as i32,
        max_rss_kib: field("max_rss_kib="),
        stdout: std::fs::read_to_string(out).unwrap(),
        stderr: std::fs::read_to_string(err).unwrap(),
    }
}

/// Not a test on its own: with [`PROBE`] set (by [`run_child`]) it runs
/// rocmatrix and prints its exit code and peak RSS (`wait4` gives this
/// child's rusage alone); without, it does nothing.
#[test]
fn rss_probe() {
    let Ok(spec) = std::env::var(PROBE) else {
        return;
    };
    let spec: Vec<&str> = spec.split('\n').collect();
    // Reaped by wait4 below (Child::wait would not give the rusage).
    #[allow(clippy::zombie_processes)]
    let child = Command::new(env!("CARGO_BIN_EXE_rocmatrix"))
        .args(&spec[2..])
        .stdin(Stdio::null())
        .stdout(File::create(spec[0]).unwrap())
        .stderr(File::create(spec[1]).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("rocmatrix {spec:?}: {e}"));
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child, with valid pointers.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(
        pid,
        child.id() as i32,
        "wait4: {}",
        std::io::Error::last_os_error()
    );
    let status = std::process::ExitStatus::from_raw(status);
    println!(
        "rss-probe: code={} max_rss_kib={}",
        status.code().unwrap_or(-1),
        usage.ru_maxrss
    );
}

fn device(t: &str) -> String {
    format!("hipv4-amdgcn-amd-amdhsa--{t}")
}

/// A plain bundle of 96 MiB whose code is mostly zeros with a few
/// pseudo-random bytes in every 256 (it compresses about 30:1, well inside
/// the scanner's 1024:1 bomb limit), compressed as CCOB `version`.
fn big_compressed(target: &str, version: u16, method: Method) -> Vec<u8> {
    let mut code = vec![0u8; 96 << 20];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d ^ version as u64;
    for chunk in code.chunks_mut(256) {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        chunk[..8].copy_from_slice(&x.to_le_bytes());
    }
    let bundle = plain::write(
        &[
            ("host-x86_64-unknown-linux-gnu-", b""),
            (&device(target), &code),
        ],
        4096,
    );
    ccob(&bundle, version, method)
}

/// A CCOB as REFERENCE.md lays it out, compressed fast (clang's levels are
/// slow on 96 MiB in a debug test).
fn ccob(plain: &[u8], version: u16, method: Method) -> Vec<u8> {
    let payload = match method {
        Method::Zstd => zstd::bulk::compress(plain, 1).unwrap(),
        Method::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(plain).unwrap();
            e.finish().unwrap()
        }
    };
    let mut out = compressed::MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(method as u16).to_le_bytes());
    match version {
        2 => {
            out.extend_from_slice(&((24 + payload.len()) as u32).to_le_bytes());
            out.extend_from_slice(&(plain.len() as u32).to_le_bytes());
        }
        _ => {
            out.extend_from_slice(&((32 + payload.len()) as u64).to_le_bytes());
            out.extend_from_slice(&(plain.len() as u64).to_le_bytes());
        }
    }
    out.extend_from_slice(&compressed::truncated_md5(plain).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Writes the library: ELF header, `.hip_fatbin` at 4096 (the plain bundle
/// whose 640 MiB entry is a hole, then the compressed bundles, 4096-aligned),
/// the name table and the section headers at the end.
fn write_library(path: &Path, compressed: &[Vec<u8>]) {
    const HUGE: u64 = 640 << 20;
    let fatbin_at = 4096u64;
    let header = plain::write(
        &[
            ("host-x86_64-unknown-linux-gnu-", b""),
            (&device("gfx90a:xnack-"), b"x"),
        ],
        4096,
    );
    // The same bundle, its one code entry 640 MiB long: patch the size.
    let mut plain_bundle = header.clone();
    let parsed = plain::parse(&header).unwrap();
    let entry = &parsed.entries[1];
    let size_field = 32 + 24 + "host-x86_64-unknown-linux-gnu-".len() + 8;
    plain_bundle[size_field..size_field + 8].copy_from_slice(&HUGE.to_le_bytes());
    plain_bundle.truncate(entry.offset as usize);
    let mut at = fatbin_at + entry.offset + HUGE;
    let f = File::create(path).unwrap();
    f.write_all_at(&plain_bundle, fatbin_at).unwrap();
    for c in compressed {
        at = at.div_ceil(4096) * 4096;
        f.write_all_at(c, at).unwrap();
        at += c.len() as u64;
    }
    let fatbin_size = at - fatbin_at;
    // Take the ELF header and section table of a small file with the same
    // sections, and move the table to the end.
    let small = elf::write(62, 0, 0, &[(".text", b"\xc3"), (".hip_fatbin", b"")]);
    let shoff = u64::from_le_bytes(small[40..48].try_into().unwrap()) as usize;
    let mut table = small[shoff..].to_vec();
    let names_at = at;
    // Section 2 is .hip_fatbin, section 3 the name table.
    let names_sh = 3 * 64;
    let names_off = u64::from_le_bytes(table[names_sh + 24..names_sh + 32].try_into().unwrap());
    let names_len = u64::from_le_bytes(table[names_sh + 32..names_sh + 40].try_into().unwrap());
    let names = &small[names_off as usize..(names_off + names_len) as usize];
    f.write_all_at(names, names_at).unwrap();
    table[names_sh + 24..names_sh + 32].copy_from_slice(&names_at.to_le_bytes());
    table[2 * 64 + 24..2 * 64 + 32].copy_from_slice(&fatbin_at.to_le_bytes());
    table[2 * 64 + 32..2 * 64 + 40].copy_from_slice(&fatbin_size.to_le_bytes());
    let table_at = (names_at + names_len).div_ceil(8) * 8;
    f.write_all_at(&table, table_at).unwrap();
    let mut head = small[..64].to_vec();
    head[40..48].copy_from_slice(&table_at.to_le_bytes());
    f.write_all_at(&head, 0).unwrap();
}

/// What the old scanner held at least (the whole file); the bound asserted.
const LIMIT_MIB: i64 = 200;

#[test]
fn scanning_a_large_library_keeps_memory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libhuge.so.1");
    let parts = [
        big_compressed("gfx1100", 3, Method::Zstd),
        big_compressed("gfx942:sramecc+:xnack-", 2, Method::Zlib),
    ];
    write_library(&lib, &parts);
    drop(parts);
    let size = std::fs::metadata(&lib).unwrap().len();
    assert!(size > 640 << 20, "the library is {size} bytes");
    let path = lib.to_str().unwrap();

    let ran = run_child(&["bundles", "--json", path]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let v: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let bundles = v[0]["bundles"].as_array().unwrap();
    assert_eq!(bundles.len(), 3, "{}", ran.stdout);
    assert_eq!(bundles[0]["entries"][1]["size"], 640u64 << 20);
    assert_eq!(bundles[1]["compression"]["version"], 3);
    assert_eq!(bundles[2]["compression"]["method"], "zlib");
    let ids: Vec<&str> = bundles
        .iter()
        .flat_map(|b| b["entries"].as_array().unwrap())
        .filter_map(|e| e["id"]["target"].as_str())
        .collect();
    assert_eq!(ids, ["gfx90a:xnack-", "gfx1100", "gfx942:sramecc+:xnack-"]);
    let mib = ran.max_rss_kib / 1024;
    assert!(
        mib < LIMIT_MIB,
        "bundles on a {} MiB library peaked at {mib} MiB (limit {LIMIT_MIB})",
        size >> 20
    );

    // Both sides of a comparison, one after the other: still bounded.
    let root = dir.path().to_str().unwrap();
    let ran = run_child(&[
        "coverage",
        root,
        "--against",
        root,
        "--gfx",
        "gfx1100,gfx90a",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(ran.stdout.contains("changes against"), "{}", ran.stdout);
    let mib = ran.max_rss_kib / 1024;
    assert!(
        mib < LIMIT_MIB,
        "coverage --against peaked at {mib} MiB (limit {LIMIT_MIB})"
    );
}
