//! Offload bundles and gfx coverage: the CLI on files built here, and (module
//! `real`) on real Debian ROCm libraries and bundles that Debian's clang
//! writes, prepared once in containers and cached.

use std::path::{Path, PathBuf};

use clap::Parser;
use rocmatrix::bundle::compressed::{self, Method};
use rocmatrix::bundle::{elf, plain};
use rocmatrix::cli::Cli;
use rocmatrix::ExitCode;

mod golden;
mod memory;
mod real;

/// Runs the CLI in-process: (exit code, stdout).
pub fn run(args: &[&str]) -> (ExitCode, String) {
    let cli = Cli::try_parse_from(std::iter::once("rocmatrix").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let mut out = Vec::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let code = match cli.run(&runtime, &mut out) {
        Ok(c) => c,
        Err(e) => e.exit_code(),
    };
    (code, String::from_utf8(out).unwrap())
}

fn device(t: &str) -> String {
    format!("hipv4-amdgcn-amd-amdhsa--{t}")
}

/// A small image root: a library with a plain and a compressed bundle, a bare
/// code object, a host library without device code and a text file.
fn image_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let lib = root.path().join("usr/lib/x86_64-linux-gnu");
    std::fs::create_dir_all(&lib).unwrap();
    let a = plain::write(
        &[
            ("host-x86_64-unknown-linux-gnu-", b""),
            (&device("gfx1030"), b"A"),
            (&device("gfx90a:xnack-"), b"B"),
        ],
        4096,
    );
    let b = compressed::write(
        &plain::write(&[(&device("gfx11-generic"), b"C")], 8),
        2,
        Method::Zlib,
    );
    let mut fatbin = a;
    fatbin.extend_from_slice(&b);
    std::fs::write(
        lib.join("libfoo.so.1"),
        elf::write(62, 0, 0, &[(".hip_fatbin", &fatbin)]),
    )
    .unwrap();
    std::fs::write(
        lib.join("libbar.so.2"),
        elf::write(62, 0, 0, &[(".text", b"x")]),
    )
    .unwrap();
    std::fs::write(
        lib.join("kernel.hsaco"),
        elf::write(elf::EM_AMDGPU, 0x2f | 0x300 | 0x800, 2, &[]),
    )
    .unwrap();
    std::fs::write(lib.join("README"), "text").unwrap();
    std::os::unix::fs::symlink("libfoo.so.1", lib.join("libfoo.so")).unwrap();
    root
}

#[test]
fn bundles_lists_targets_per_file() {
    let root = image_root();
    let (code, out) = run(&["bundles", root.path().to_str().unwrap()]);
    assert_eq!(code, ExitCode::Success);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].ends_with("kernel.hsaco: gfx906:sramecc-:xnack+ [code object]"),
        "{out}"
    );
    assert!(
        lines[1].ends_with(
            "libfoo.so.1: gfx90a:xnack- gfx1030 gfx11-generic [2 bundle(s), 1 compressed: CCOB v2 zlib]"
        ),
        "{out}"
    );
    let (_, all) = run(&["bundles", "--all", root.path().to_str().unwrap()]);
    assert!(all.contains("libbar.so.2: no device code"), "{all}");
    let (_, json) = run(&["bundles", "--json", root.path().to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[1]["bundles"][1]["compression"]["version"], 2);
}

#[test]
fn coverage_table_and_json() {
    let root = image_root();
    let r = root.path().to_str().unwrap();
    let (code, out) = run(&[
        "coverage",
        r,
        "--gfx",
        "gfx1031,gfx1103,gfx90a,gfx942",
        "--policy",
        "compatible",
    ]);
    assert_eq!(code, ExitCode::Success);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("library"), "{out}");
    let foo = lines
        .iter()
        .find(|l| l.starts_with("/usr/lib/x86_64-linux-gnu/libfoo.so.1"))
        .unwrap();
    let cols: Vec<&str> = foo
        .split("  ")
        .filter(|c| !c.trim().is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        cols,
        [
            "/usr/lib/x86_64-linux-gnu/libfoo.so.1",
            "missing",
            "via gfx11-generic (generic gfx11-generic)",
            "exact",
            "missing"
        ]
    );
    let (_, json) = run(&[
        "coverage", r, "--gfx", "gfx1031", "--policy", "override", "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let foo = v["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["library"].as_str().unwrap().ends_with("libfoo.so.1"))
        .unwrap();
    assert_eq!(foo["cells"][0]["verdict"]["kind"], "compatible");
    assert_eq!(foo["cells"][0]["verdict"]["target"], "gfx1030");
    assert_eq!(foo["cells"][0]["verdict"]["how"]["value"], "10.3.0");
}

#[test]
fn malformed_files_exit_2_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = plain::write(&[(&device("gfx90a"), b"A")], 8);
    b[24..32].copy_from_slice(&1000u64.to_le_bytes());
    let f = dir.path().join("bad.hipfb");
    std::fs::write(&f, &b).unwrap();
    let mut c = compressed::write(
        &plain::write(&[(&device("gfx90a"), b"A")], 8),
        3,
        Method::Zstd,
    );
    let n = c.len();
    c[n - 3] ^= 0xff;
    std::fs::write(dir.path().join("bad.ccob"), &c).unwrap();
    let (code, out) = run(&["bundles", dir.path().to_str().unwrap()]);
    assert_eq!(code, ExitCode::Usage);
    assert_eq!(out, "");
    let (code, _) = run(&["bundles", "/nonexistent/rocmatrix"]);
    assert_eq!(code, ExitCode::Infrastructure);
}

fn fixture(machine: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kfd")
        .join(machine)
}

#[test]
fn gpus_command_on_fixtures() {
    let dev = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dev.path().join("dri")).unwrap();
    std::fs::write(dev.path().join("kfd"), "").unwrap();
    std::fs::write(dev.path().join("dri/renderD128"), "").unwrap();
    let sysfs = fixture("gfx1100");
    let (code, out) = run(&[
        "gpus",
        "--sysfs-root",
        sysfs.to_str().unwrap(),
        "--dev-root",
        dev.path().to_str().unwrap(),
    ]);
    assert_eq!(code, ExitCode::Success, "{out}");
    assert!(
        out.contains("gfx1100  0000:03:00.0  /dev/dri/renderD128  GPU-9e7f4de7ac7cf81b"),
        "{out}"
    );

    let matrix = dev.path().join("m.yaml");
    std::fs::write(
        &matrix,
        "matrix:\n  gfx: [gfx1030, gfx1100]\ngpu:\n  need: required\n  target: \"{{ matrix.gfx }}\"\nsteps:\n  - name: t\n    run: true\n",
    )
    .unwrap();
    let (code, out) = run(&[
        "gpus",
        "--json",
        "--sysfs-root",
        sysfs.to_str().unwrap(),
        "--dev-root",
        dev.path().to_str().unwrap(),
        "--matrix",
        matrix.to_str().unwrap(),
    ]);
    assert_eq!(code, ExitCode::Infrastructure, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let failed: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        failed,
        ["gfx1030: no GPU on this host runs it under policy exact; have gfx1100"]
    );

    let empty = tempfile::tempdir().unwrap();
    let (code, out) = run(&[
        "gpus",
        "--sysfs-root",
        empty.path().to_str().unwrap(),
        "--dev-root",
        empty.path().to_str().unwrap(),
    ]);
    assert_eq!(code, ExitCode::Infrastructure);
    assert!(out.contains("FAIL  amdgpu-module"), "{out}");
}
