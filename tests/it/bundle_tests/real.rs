//! Real data: Debian's librocfft0 from trixie (ROCm 6.1.2) and experimental
//! (7.x), compressed bundles written by Debian's clang-offload-bundler
//! (trixie's clang 18 and 19, sid's clang 21), and rocBLAS's bare code
//! objects checked against llvm-readobj, all prepared once by
//! `tests/it/data/gpu-artifacts.sh` inside `debian:trixie` / `debian:sid`
//! containers and cached under `$ROCMATRIX_TEST_CACHE` (default
//! `target/test-cache`). The two base images come from the harness
//! (`bases::ensure`: the engine's, or bootstrapped once). Without Docker or
//! the network these tests skip with a message; with
//! `ROCMATRIX_REQUIRE_DOCKER=1` they fail.
//!
//! Trixie's clang 17 has no `-compress`, and Debian builds LLVM with zstd, so
//! clang never writes zlib bundles here: zlib is covered by the bundles built
//! in the unit tests.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rocmatrix::bundle::compressed::Method;
use rocmatrix::bundle::{elf, scan_bytes, scan_file, Check, FileKind, FileReport};
use rocmatrix::ExitCode;
use sha2::{Digest, Sha256};

use crate::harness::{bases, engine_or_skip, label, unavailable};

const SUITES: [&str; 2] = ["trixie", "sid"];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/data/gpu-artifacts.sh")
}

fn cache_root() -> PathBuf {
    match std::env::var_os("ROCMATRIX_TEST_CACHE") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-cache"),
    }
}

fn docker(args: &[&str]) -> Result<std::process::Output, String> {
    Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run docker: {e}"))
}

/// Runs the preparation script for one suite unless its results are cached.
fn prepare_suite(dir: &Path, suite: &str) -> Result<(), String> {
    if dir.join(suite).join("done").exists() {
        return Ok(());
    }
    let image = bases::ensure(suite);
    let data = script().parent().unwrap().to_path_buf();
    let out = docker(&[
        "run",
        "--rm",
        "--label",
        "rocmatrix.test=gpu-artifacts",
        "--label",
        &label::label(),
        "-v",
        &format!("{}:/out", dir.display()),
        "-v",
        &format!("{}:/data:ro", data.display()),
        &image,
        "bash",
        "/data/gpu-artifacts.sh",
        suite,
    ])?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(8).collect();
        return Err(format!(
            "preparing {suite} artifacts failed (network to deb.debian.org?):\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    Ok(())
}

/// The cache directory of this version of the script.
fn cache_dir() -> Result<PathBuf, String> {
    let text = std::fs::read(script()).map_err(|e| e.to_string())?;
    let key = hex(&Sha256::digest(&text)[..6]);
    let dir = cache_root().join(format!("gpu-bundles-{key}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    dir.canonicalize().map_err(|e| e.to_string())
}

fn cached(dir: &Path) -> bool {
    SUITES.iter().all(|s| dir.join(s).join("done").exists())
}

/// Prepares what is not cached; the caller holds the engine.
fn prepare() -> Result<PathBuf, String> {
    let dir = cache_dir()?;
    if cached(&dir) {
        return Ok(dir);
    }
    // Both suites at once: the downloads dominate.
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = SUITES
            .iter()
            .map(|suite| {
                let dir = &dir;
                s.spawn(move || prepare_suite(dir, suite))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("preparing panicked (see above)".into()))
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>, String>>()?;
    // Artifacts of older versions of the script are stale: drop them.
    if let Ok(entries) = std::fs::read_dir(cache_root()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("gpu-bundles-") && e.path() != dir {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    Ok(dir)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The prepared artifacts, or `None` (after the skip gate said why) when
/// they cannot be made. Cached ones need no engine.
fn artifacts(test: &str) -> Option<PathBuf> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let _engine = match cache_dir() {
        Ok(dir) if cached(&dir) => None,
        _ => Some(engine_or_skip(test)?),
    };
    match DIR.get_or_init(prepare) {
        Ok(d) => Some(d.clone()),
        Err(why) => {
            unavailable(test, why);
            None
        }
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

fn id_set(report: &FileReport) -> BTreeSet<String> {
    report.ids().into_iter().map(str::to_string).collect()
}

fn targets(report: &FileReport) -> Vec<String> {
    report.targets().iter().map(|t| t.to_string()).collect()
}

/// The library and what clang-offload-bundler listed for its `.hip_fatbin`.
fn check_rocfft(dir: &Path, suite: &str) -> FileReport {
    let base = dir.join(suite);
    let rel = lines(&base.join("rocfft.path")).remove(0);
    let lib = base.join("root").join(rel.trim_start_matches('/'));
    let report = scan_file(&lib, Check::Table).unwrap().unwrap();
    assert_eq!(report.kind, FileKind::HostElf);
    assert_eq!(report.bundles.len(), 1, "one plain bundle in .hip_fatbin");
    assert!(report.bundles[0].compression.is_none());
    let listed: Vec<String> = lines(&base.join("rocfft.list"));
    let listed_set: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(report.ids().len(), listed.len());
    assert_eq!(
        id_set(&report),
        listed_set,
        "{suite}: ids differ from clang-offload-bundler --list"
    );
    assert!(report.ids()[0].starts_with("host-"), "host entry first");

    // The section bytes we read are the ones objcopy dumped, and the dump
    // scanned as a bundle file gives the same ids.
    let data = std::fs::read(&lib).unwrap();
    let fatbin = elf::sections(&data)
        .unwrap()
        .into_iter()
        .find(|s| s.name == ".hip_fatbin")
        .unwrap();
    let dumped = std::fs::read(base.join("rocfft.hip_fatbin")).unwrap();
    assert_eq!(
        elf::range(&data, fatbin.offset, fatbin.size).unwrap(),
        &dumped[..]
    );
    let as_file = scan_bytes(Path::new("dump"), &dumped).unwrap().unwrap();
    assert_eq!(as_file.kind, FileKind::Bundle);
    assert_eq!(id_set(&as_file), listed_set);
    report
}

#[test]
fn trixie_rocfft_targets_equal_clang_offload_bundler_list() {
    let Some(dir) = artifacts("trixie_rocfft_targets_equal_clang_offload_bundler_list") else {
        return;
    };
    assert!(lines(&dir.join("trixie/rocfft.version"))[0].starts_with("6.1.2"));
    let report = check_rocfft(&dir, "trixie");
    assert_eq!(
        targets(&report),
        [
            "gfx803", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx1010", "gfx1011", "gfx1030",
            "gfx1100", "gfx1101", "gfx1102"
        ]
    );
}

#[test]
fn experimental_rocfft_targets_equal_clang_offload_bundler_list() {
    let Some(dir) = artifacts("experimental_rocfft_targets_equal_clang_offload_bundler_list")
    else {
        return;
    };
    assert!(lines(&dir.join("sid/rocfft.version"))[0].starts_with('7'));
    let report = check_rocfft(&dir, "sid");
    let t = targets(&report);
    for added in ["gfx942", "gfx1151", "gfx1200", "gfx1201"] {
        assert!(t.contains(&added.to_string()), "{added} missing from {t:?}");
    }
    assert!(
        !t.contains(&"gfx1011".to_string()),
        "7.x dropped gfx1011: {t:?}"
    );
}

/// (file, CCOB version clang wrote)
const COMPRESSED: &[(&str, &str, u16)] = &[
    ("trixie", "clang18-default", 1),
    ("trixie", "clang19-default", 2),
    ("sid", "clang21-default", 2),
    ("sid", "clang21-v2", 2),
    ("sid", "clang21-v3", 3),
];

#[test]
fn compressed_bundles_from_debian_clang_read_correctly() {
    let Some(dir) = artifacts("compressed_bundles_from_debian_clang_read_correctly") else {
        return;
    };
    for (suite, name, version) in COMPRESSED {
        let ccob = dir.join(suite).join("ccob");
        let path = ccob.join(format!("{name}.bundle"));
        let report = scan_file(&path, Check::Whole).unwrap().unwrap();
        // Read as far as its table, the bundle lists the same.
        let table = scan_file(&path, Check::Table).unwrap().unwrap();
        assert_eq!(format!("{table:?}"), format!("{report:?}"), "{name}");
        assert_eq!(report.bundles.len(), 1, "{name}");
        let c = report.bundles[0].compression.expect("compressed");
        assert_eq!((c.version, c.method), (*version, Method::Zstd), "{name}");
        // Device ids equal what clang lists. The host id is stored as written
        // by clang 21, but clang 18 and 19 store `host-x86_64-unknown-linux-gnu-`
        // twice over (`host-…-gnu-host-…-gnu-`) while their --list prints it
        // once: compare device ids exactly and hosts by count.
        let listed = lines(&ccob.join(format!("{name}.list")));
        let device = |ids: &[String]| -> BTreeSet<String> {
            ids.iter()
                .filter(|i| !i.starts_with("host-"))
                .cloned()
                .collect()
        };
        let ours: Vec<String> = report.ids().into_iter().map(str::to_string).collect();
        assert_eq!(device(&ours), device(&listed), "{name}");
        assert_eq!(
            device(&ours),
            device(&lines(&ccob.join("targets"))),
            "{name}"
        );
        let hosts = |ids: &[String]| ids.iter().filter(|i| i.starts_with("host-")).count();
        assert_eq!((hosts(&ours), hosts(&listed)), (1, 1), "{name}");
        if *suite == "sid" {
            assert_eq!(id_set(&report), listed.into_iter().collect(), "{name}");
        }
    }
}

#[test]
fn real_compressed_bundles_back_to_back_in_a_hip_fatbin() {
    let Some(dir) = artifacts("real_compressed_bundles_back_to_back_in_a_hip_fatbin") else {
        return;
    };
    // As a library built with --offload-compress holds them: one per
    // translation unit, padded, v1 (no total size) included.
    let mut fatbin = Vec::new();
    let mut expected = 0;
    for (suite, name, _) in COMPRESSED {
        fatbin.extend(
            std::fs::read(dir.join(suite).join("ccob").join(format!("{name}.bundle"))).unwrap(),
        );
        fatbin.resize(fatbin.len().div_ceil(4096) * 4096, 0);
        expected += 1;
    }
    let plain = std::fs::read(dir.join("trixie/rocfft.hip_fatbin")).unwrap();
    fatbin.extend(&plain);
    expected += 1;
    let so = elf::write(62, 0, 0, &[(".text", b"\xc3"), (".hip_fatbin", &fatbin)]);
    let report = scan_bytes(Path::new("libmixed.so"), &so).unwrap().unwrap();
    assert_eq!(report.bundles.len(), expected);
    let versions: Vec<Option<u16>> = report
        .bundles
        .iter()
        .map(|b| b.compression.map(|c| c.version))
        .collect();
    assert_eq!(
        versions,
        [Some(1), Some(2), Some(2), Some(2), Some(3), None]
    );
    assert_eq!(
        targets(&report).len(),
        11 + 1,
        "trixie's 11 plus gfx1201 from sid"
    );

    // Corrupting real compressed data is an error naming the offset, never a panic.
    let clean = std::fs::read(dir.join("sid/ccob/clang21-v3.bundle")).unwrap();
    for at in [40, clean.len() / 2, clean.len() - 1] {
        let mut bad = clean.clone();
        bad[at] ^= 0x5a;
        let e = scan_bytes(Path::new("bad.bundle"), &bad)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.bundle: at offset 0x"), "{e}");
    }
}

#[test]
fn coverage_of_the_trixie_rocfft_image_root() {
    let Some(dir) = artifacts("coverage_of_the_trixie_rocfft_image_root") else {
        return;
    };
    let root = dir.join("trixie/root");
    let (code, out) = super::run(&[
        "coverage",
        root.to_str().unwrap(),
        "--gfx",
        "gfx1030,gfx1031,gfx942",
        "--policy",
        "extended",
    ]);
    assert_eq!(code, ExitCode::Success);
    let row = out.lines().find(|l| l.contains("librocfft.so")).unwrap();
    let cols: Vec<&str> = row
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cols,
        [
            "/usr/lib/x86_64-linux-gnu/librocfft.so.0.1",
            "exact",
            "via gfx1030 (distro-extended)",
            "missing"
        ]
    );
    let (_, out) = super::run(&["bundles", root.to_str().unwrap()]);
    assert_eq!(
        out.lines().count(),
        1,
        "only librocfft carries device code: {out}"
    );
}

/// The target llvm-readobj's `Flags [...]` block names, as a target id.
fn readobj_target(headers: &str) -> String {
    let mut processor = None;
    let mut features = Vec::new();
    for line in headers.lines().map(str::trim) {
        let name = line.split_whitespace().next().unwrap_or("");
        if let Some(p) = name.strip_prefix("EF_AMDGPU_MACH_AMDGCN_") {
            processor = Some(p.to_lowercase().replace('_', "-"));
        } else if let Some(f) = name.strip_prefix("EF_AMDGPU_FEATURE_") {
            let (feature, mode) = f.trim_end_matches("_V4").split_once('_').unwrap();
            match mode {
                "ON" => features.push(format!("{}+", feature.to_lowercase())),
                "OFF" => features.push(format!("{}-", feature.to_lowercase())),
                _ => {} // ANY or UNSUPPORTED: no setting
            }
        }
    }
    features.sort();
    std::iter::once(processor.expect("no EF_AMDGPU_MACH in llvm-readobj output"))
        .chain(features)
        .collect::<Vec<_>>()
        .join(":")
}

#[test]
fn rocblas_code_objects_match_llvm_readobj() {
    let Some(dir) = artifacts("rocblas_code_objects_match_llvm_readobj") else {
        return;
    };
    let cases = [
        ("Kernels.so-000-gfx1030.hsaco", "gfx1030"),
        ("Kernels.so-000-gfx90a-xnack+.hsaco", "gfx90a:xnack+"),
        ("Kernels.so-000-gfx90a-xnack-.hsaco", "gfx90a:xnack-"),
    ];
    for (file, expected) in cases {
        let path = dir.join("trixie/codeobjects").join(file);
        let report = scan_file(&path, Check::Table).unwrap().unwrap();
        assert_eq!(report.kind, FileKind::CodeObject, "{file}");
        let ours = report.code_object.unwrap().to_string();
        assert_eq!(ours, expected, "{file}");
        let headers = std::fs::read_to_string(format!("{}.headers", path.display())).unwrap();
        assert_eq!(
            ours,
            readobj_target(&headers),
            "{file}: llvm-readobj says otherwise"
        );
    }
    // The command lists each file once, as a code object.
    let root = dir.join("trixie/codeobjects");
    let (_, out) = super::run(&["bundles", root.to_str().unwrap()]);
    assert_eq!(out.lines().count(), 3, "{out}");
}

/// Debian's rocFFT from trixie (6.1.2) to experimental (7.x): the targets
/// gained and lost, exactly, with the lost one a regression where --gfx asks
/// for it.
#[test]
fn coverage_against_names_the_targets_rocfft_gained_and_lost() {
    let Some(dir) = artifacts("coverage_against_names_the_targets_rocfft_gained_and_lost") else {
        return;
    };
    let (old, new) = (dir.join("trixie/root"), dir.join("sid/root"));
    let (code, out) = super::run(&[
        "coverage",
        new.to_str().unwrap(),
        "--against",
        old.to_str().unwrap(),
        "--gfx",
        "gfx1011,gfx1030",
    ]);
    assert_eq!(code, ExitCode::Success, "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("librocfft.so:"))
        .unwrap_or_else(|| panic!("no change line: {out}"));
    assert_eq!(
        line,
        format!(
            "librocfft.so: {} → {}: +gfx942 +gfx1151 +gfx1200 +gfx1201 −gfx1011 (regression: cells ask for gfx1011)",
            old.display(),
            new.display()
        )
    );
    // The same comparison as JSON, and none of a root against itself.
    let (_, json) = super::run(&[
        "coverage",
        new.to_str().unwrap(),
        "--against",
        old.to_str().unwrap(),
        "--gfx",
        "gfx1030",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["changes"][0]["lost"], serde_json::json!(["gfx1011"]));
    assert_eq!(v["changes"][0]["lost_with_cells"], serde_json::Value::Null);
    let (_, same) = super::run(&[
        "coverage",
        new.to_str().unwrap(),
        "--against",
        new.to_str().unwrap(),
        "--gfx",
        "gfx1030",
    ]);
    assert!(same.contains(": none"), "{same}");
}

/// A compressed bundle written by Debian's clang-offload-bundler-21
/// `-compress`: named compressed, and an extended verdict that depends on it
/// is the compressed kind; the same code in a plain bundle keeps the plain
/// verdict.
#[test]
fn an_extended_verdict_from_a_real_compressed_bundle_is_its_own_kind() {
    let Some(dir) = artifacts("an_extended_verdict_from_a_real_compressed_bundle_is_its_own_kind")
    else {
        return;
    };
    let ccob = std::fs::read(dir.join("sid/ccob/clang21-v3.bundle")).unwrap();
    let carried = targets(&scan_bytes(Path::new("b"), &ccob).unwrap().unwrap());
    // A gfx target that runs the compressed bundle's code only through the
    // distributions' extended compatibility.
    let candidates = [
        "gfx1031", "gfx1032", "gfx1034", "gfx902", "gfx904", "gfx909", "gfx90c", "gfx1012",
        "gfx1013", "gfx1101", "gfx1102", "gfx1103", "gfx1152", "gfx1200", "gfx1201",
    ];
    let parse = |t: &str| rocmatrix::gpu::TargetId::parse(t).unwrap();
    let carried_ids: Vec<_> = carried.iter().map(|t| parse(t)).collect();
    let (gfx, via) = candidates
        .iter()
        .find_map(|g| {
            match rocmatrix::bundle::coverage::verdict(
                &carried_ids,
                &parse(g),
                rocmatrix::matrix_file::GpuPolicy::Extended,
            ) {
                rocmatrix::bundle::coverage::CoverageVerdict::Compatible {
                    target,
                    how: rocmatrix::gpu::compat::How::DistroExtended,
                } => Some((g.to_string(), target.to_string())),
                _ => None,
            }
        })
        .unwrap_or_else(|| panic!("no extended neighbour of {carried:?}"));
    let root = tempfile::tempdir().unwrap();
    let lib = root.path().join("usr/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(
        lib.join("libccob.so.1"),
        elf::write(62, 0, 0, &[(".text", b"\xc3"), (".hip_fatbin", &ccob)]),
    )
    .unwrap();
    // The same entries, plain: unbundled from the compressed one by our reader.
    let report = scan_bytes(Path::new("b"), &ccob).unwrap().unwrap();
    let (plain, _) = rocmatrix::bundle::compressed::decompress(
        &ccob,
        &rocmatrix::bundle::compressed::header(&ccob)
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    std::fs::write(
        lib.join("libplain.so.1"),
        elf::write(62, 0, 0, &[(".text", b"\xc3"), (".hip_fatbin", &plain)]),
    )
    .unwrap();
    assert!(report.bundles[0].compression.is_some());
    let r = root.path().to_str().unwrap();
    let (_, bundles) = super::run(&["bundles", r]);
    assert!(
        bundles
            .lines()
            .any(|l| l.contains("libccob.so.1") && l.ends_with("1 compressed: CCOB v3 zstd]")),
        "{bundles}"
    );
    let (code, out) = super::run(&[
        "coverage", r, "--gfx", &gfx, "--policy", "extended", "--json",
    ]);
    assert_eq!(code, ExitCode::Success, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = |name: &str| {
        v["libraries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["library"].as_str().unwrap().ends_with(name))
            .unwrap()
            .clone()
    };
    let (c, p) = (row("libccob.so.1"), row("libplain.so.1"));
    assert_eq!(c["cells"][0]["verdict"]["kind"], "extended-compressed");
    assert_eq!(c["compression"], serde_json::json!(["CCOB v3 zstd"]));
    assert_eq!(p["cells"][0]["verdict"]["kind"], "compatible");
    let (_, table) = super::run(&["coverage", r, "--gfx", &gfx, "--policy", "extended"]);
    assert!(
        table.contains(&format!(
            "via {via} (distro-extended), compressed: needs a Comgr that lists bundle IDs before extracting"
        )),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.contains("libplain.so.1")
            && l.trim_end()
                .ends_with(&format!("via {via} (distro-extended)"))),
        "{table}"
    );
}
