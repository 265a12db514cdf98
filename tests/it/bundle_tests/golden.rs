//! `bundles` and `coverage` print exactly what they printed before the
//! scanner streamed (when it read each file whole): stdout, stderr and exit
//! code of each command on the fixtures under `bundle_tests/fixtures/`
//! equal the files under `bundle_tests/golden/`, which the scanner of
//! commit 6f3ab9d wrote.
//!
//! The fixtures cover what the scanner reads: plain bundles and CCOB v1, v2
//! and v3 with zlib and zstd back to back in a `.hip_fatbin`, entry tables
//! longer than a first read, magics across the search window's edges, a
//! `CCOB` by chance, bare bundle files and code objects, host files, and
//! malformed files of each kind (errors on stderr naming file and offset).
//!
//! To write them again (fixtures from this file's generator, outputs from
//! the binary given):
//!
//!   ROCMATRIX_BLESS_BUNDLES=/path/to/rocmatrix cargo test --test it -- bundle_tests::golden

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rocmatrix::bundle::compressed::{self, Method};
use rocmatrix::bundle::{elf, plain};

const BLESS: &str = "ROCMATRIX_BLESS_BUNDLES";

fn here() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/bundle_tests")
}

const GFX: &str = "gfx1030,gfx1031,gfx90a,gfx906,gfx942,gfx1100,gfx1201";

/// (golden file, arguments with `F` for the fixtures' root)
const COMMANDS: &[(&str, &[&str])] = &[
    ("bundles", &["bundles", "F/good"]),
    ("bundles-all", &["bundles", "--all", "F/good"]),
    (
        "bundles-all-json",
        &["bundles", "--all", "--json", "F/good"],
    ),
    ("bundles-bad", &["bundles", "--all", "F/bad"]),
    ("bundles-bad-json", &["bundles", "--json", "F/bad"]),
    (
        "coverage",
        &["coverage", "F/good", "--gfx", GFX, "--policy", "compatible"],
    ),
    (
        "coverage-json",
        &[
            "coverage", "F/good", "--gfx", GFX, "--policy", "extended", "--json",
        ],
    ),
    (
        "coverage-against",
        &["coverage", "F/good", "--against", "F/old", "--gfx", GFX],
    ),
    (
        "coverage-against-json",
        &[
            "coverage",
            "F/good",
            "--against",
            "F/old",
            "--gfx",
            GFX,
            "--json",
        ],
    ),
];

/// One command's exit code, stdout and stderr as the golden file keeps them.
fn transcript(bin: &Path, root: &Path, args: &[&str]) -> String {
    let root_text = root.to_str().unwrap();
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("F/", &format!("{root_text}/")))
        .collect();
    let out = Command::new(bin)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let text = |b: &[u8]| String::from_utf8_lossy(b).replace(root_text, "FIXTURES");
    format!(
        "$ rocmatrix {}\nexit {}\n--- stdout\n{}--- stderr\n{}",
        args.join(" ").replace(root_text, "FIXTURES"),
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr)
    )
}

#[test]
fn output_is_byte_identical_to_the_whole_file_scanner() {
    let fixtures = here().join("fixtures");
    let golden = here().join("golden");
    if let Some(bin) = std::env::var_os(BLESS) {
        let _ = std::fs::remove_dir_all(&fixtures);
        write_fixtures(&fixtures);
        std::fs::create_dir_all(&golden).unwrap();
        for (name, args) in COMMANDS {
            let t = transcript(Path::new(&bin), &fixtures, args);
            std::fs::write(golden.join(format!("{name}.txt")), t).unwrap();
        }
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_rocmatrix"));
    for (name, args) in COMMANDS {
        let want = std::fs::read_to_string(golden.join(format!("{name}.txt"))).unwrap();
        let got = transcript(bin, &fixtures, args);
        assert_eq!(got, want, "{name}: output differs from golden/{name}.txt");
    }
}

fn device(t: &str) -> String {
    format!("hipv4-amdgcn-amd-amdhsa--{t}")
}

const HOST: &str = "host-x86_64-unknown-linux-gnu-";

fn put(path: PathBuf, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn so(fatbin: &[u8]) -> Vec<u8> {
    elf::write(62, 0, 0, &[(".text", b"\xc3"), (".hip_fatbin", fatbin)])
}

fn pad(v: &mut Vec<u8>, align: usize) {
    v.resize(v.len().div_ceil(align) * align, 0);
}

/// A plain bundle of `n` device entries (cycling through a few targets),
/// whose entry table is longer than the scanner's first read.
fn many(n: usize) -> Vec<u8> {
    let targets = ["gfx900", "gfx906:xnack-", "gfx1010", "gfx1102", "gfx1151"];
    let ids: Vec<String> = (0..n)
        .map(|i| format!("hip{i}-amdgcn-amd-amdhsa--{}", targets[i % targets.len()]))
        .collect();
    let mut entries: Vec<(&str, &[u8])> = vec![(HOST, b"")];
    entries.extend(ids.iter().map(|id| (id.as_str(), &b"code"[..])));
    plain::write(&entries, 8)
}

fn write_fixtures(root: &Path) {
    let good = root.join("good/usr/lib");
    let mut fatbin = plain::write(
        &[
            (HOST, b""),
            (&device("gfx1030"), b"A"),
            (&device("gfx90a:xnack-"), b"B"),
        ],
        4096,
    );
    fatbin.extend(compressed::write(
        &plain::write(&[(&device("gfx11-generic"), b"C")], 8),
        2,
        Method::Zlib,
    ));
    fatbin.extend([0; 13]);
    fatbin.extend(compressed::write(
        &plain::write(&[(HOST, b""), (&device("gfx942:sramecc+"), b"D")], 8),
        1,
        Method::Zstd,
    ));
    pad(&mut fatbin, 4096);
    fatbin.extend(compressed::write(
        &plain::write(
            &[(&device("gfx1100"), b"E"), (&device("gfx1201"), b"F")],
            4096,
        ),
        3,
        Method::Zstd,
    ));
    put(good.join("libfoo.so.1"), &so(&fatbin));
    put(
        good.join("libbar.so.2"),
        &elf::write(62, 0, 0, &[(".text", b"x")]),
    );
    put(
        good.join("kernel.hsaco"),
        &elf::write(elf::EM_AMDGPU, 0x2f | 0x300 | 0x800, 2, &[]),
    );
    put(good.join("README"), b"text");
    // Long entry tables, plain and compressed (v1 zlib: no total size).
    let mut fatbin = many(300);
    pad(&mut fatbin, 4096);
    fatbin.extend(compressed::write(&many(200), 1, Method::Zlib));
    put(good.join("libmany.so"), &so(&fatbin));
    // Magics cut by the first (64 KiB) and second (128 KiB more) windows.
    let mut fatbin = vec![0u8; (64 << 10) - 10];
    fatbin.extend(plain::write(&[(&device("gfx1030"), b"G")], 8));
    fatbin.resize((64 << 10) + (128 << 10) - 2 - 24, 0);
    fatbin.extend(compressed::write(
        &plain::write(&[(&device("gfx1200"), b"H")], 8),
        3,
        Method::Zstd,
    ));
    put(good.join("libwindow.so"), &so(&fatbin));
    // `CCOB` by chance, then a bundle.
    let mut fatbin = b"xxCCOB\x09\x00\x01\x00yy".to_vec();
    fatbin.extend(plain::write(&[(&device("gfx803"), b"I")], 8));
    put(good.join("libchance.so"), &so(&fatbin));
    put(
        good.join("app.hipfb"),
        &plain::write(&[(HOST, b""), (&device("gfx908"), b"J")], 4096),
    );
    put(
        good.join("k.ccob"),
        &compressed::write(
            &plain::write(&[(&device("gfx10-3-generic"), b"K")], 8),
            2,
            Method::Zstd,
        ),
    );
    let mut elf32 = elf::write(62, 0, 0, &[(".hip_fatbin", b"")]);
    elf32[4] = 1;
    put(good.join("elf32.so"), &elf32);

    let old = root.join("old/usr/lib");
    let fatbin = plain::write(
        &[
            (HOST, b""),
            (&device("gfx1030"), b"A"),
            (&device("gfx906"), b"B"),
        ],
        4096,
    );
    put(old.join("libfoo.so.1"), &so(&fatbin));
    put(
        old.join("libgone.so.1"),
        &so(&plain::write(&[(&device("gfx1100"), b"Z")], 8)),
    );

    write_bad(&root.join("bad"));
}

/// Malformed files, one mistake each.
fn write_bad(bad: &Path) {
    let one = plain::write(&[(&device("gfx90a"), b"A")], 8);
    let mut count = one.clone();
    count[24..32].copy_from_slice(&1000u64.to_le_bytes());
    put(bad.join("count.hipfb"), &count);
    let mut far = one.clone();
    far[32..40].copy_from_slice(&4096u64.to_le_bytes());
    put(bad.join("entry-past-end.so"), &so(&far));
    let good = compressed::write(&one, 3, Method::Zstd);
    let mut hash = good.clone();
    hash[24] ^= 1;
    put(bad.join("hash.ccob"), &hash);
    let mut payload = good.clone();
    let n = payload.len();
    payload[n - 3] ^= 0xff;
    put(bad.join("payload.ccob"), &payload);
    let mut size = good.clone();
    let unc = u64::from_le_bytes(size[16..24].try_into().unwrap());
    size[16..24].copy_from_slice(&(unc + 1).to_le_bytes());
    put(bad.join("size.ccob"), &size);
    let mut bomb = good.clone();
    bomb[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    put(bad.join("bomb.ccob"), &bomb);
    put(bad.join("truncated.ccob"), &good[..good.len() - 5]);
    let mut inner = one.clone();
    inner[40..48].copy_from_slice(&999u64.to_le_bytes());
    put(
        bad.join("inner.ccob"),
        &compressed::write(&inner, 2, Method::Zlib),
    );
    let mut shoff = so(&one);
    shoff[40..48].copy_from_slice(&(1u64 << 30).to_le_bytes());
    put(bad.join("shoff.so"), &shoff);
    let mut past = so(&one);
    let table = u64::from_le_bytes(past[40..48].try_into().unwrap()) as usize;
    let fat = table + 2 * 64;
    past[fat + 32..fat + 40].copy_from_slice(&(1u64 << 20).to_le_bytes());
    put(bad.join("fatbin-past-end.so"), &past);
    put(bad.join("short.elf"), &so(&one)[..30]);
    put(
        bad.join("mach.hsaco"),
        &elf::write(elf::EM_AMDGPU, 0x7e, 2, &[]),
    );
}
