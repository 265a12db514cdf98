//! Evidence of the flagship debug-LLVM run: the run store of
//! `matrix/hsa-metadata-debug.yaml` kept in tests/fixtures/debug-llvm/,
//! where llvm-mc of LLVM 21 was built from Debian's source with debug info
//! (tests/fixtures/debug-llvm/NOTES.md says how long it took) and rejected
//! the kernel whose arguments are named N and Y. The store must still read,
//! report and explain, with the backtrace down to where the YAML scalar
//! became a boolean.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/debug-llvm")
}

/// A copy of the fixture's run store (reporting writes into it).
fn copy_run(dir: &Path) -> PathBuf {
    let to = dir.join("run");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(fixture().join("run"))
        .arg(&to)
        .status()
        .unwrap();
    assert!(status.success());
    to
}

fn backtrace(run: &Path, cell: &str) -> Value {
    let c = read_json(&run.join("cells").join(cell).join("cell.json"));
    c["steps"][0]["backtrace"].clone()
}

fn stop<'a>(bt: &'a Value, at: &str) -> &'a Value {
    bt["stops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["at"] == at)
        .unwrap_or_else(|| panic!("no stop at {at}: {bt:#}"))
}

fn has_frame(stop: &Value, function: &str) -> bool {
    stop["frames"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["function"].as_str().unwrap().contains(function) && f["line"].is_u64())
}

#[test]
fn the_debug_llvm_shows_where_the_scalar_n_became_a_boolean() {
    let run = fixture().join("run");
    let bt = backtrace(&run, "21.debug.yn");
    assert_eq!(bt["debug_info"], true, "{bt:#}");
    // Where the untagged scalar parsed as a boolean: YAML's bool traits,
    // called by the msgpack document's fromString.
    let parsed = stop(&bt, "breakpoint YAMLTraits.cpp:930");
    assert!(has_frame(parsed, "ScalarTraits<bool"), "{parsed:#}");
    assert!(
        has_frame(parsed, "msgpack::DocNode::fromString"),
        "{parsed:#}"
    );
    // The verifier's rejection of a `.name` that is not a string.
    let rejected = stop(&bt, "breakpoint AMDGPUMetadataVerifier.cpp:38");
    assert!(
        has_frame(rejected, "MetadataVerifier::verifyScalar"),
        "{rejected:#}"
    );
    // The assembler's error, raised while parsing the directive.
    let error = stop(&bt, "breakpoint llvm::MCAsmParser::Error");
    assert!(has_frame(error, "ParseDirectiveHSAMetadata"), "{error:#}");
    let artifact = run
        .join("cells/21.debug.yn")
        .join(bt["artifact"].as_str().unwrap());
    assert!(artifact.is_file(), "{}", artifact.display());

    // Debian's release build shows the same failure without source lines.
    let release = backtrace(&run, "21.release.yn");
    assert_eq!(release["debug_info"], false, "{release:#}");
    assert!(
        release["note"]
            .as_str()
            .unwrap()
            .starts_with("no debug info: "),
        "{release:#}"
    );
    // The control kernels assemble; LLVM 22 accepts N and Y.
    for cell in ["21.debug.plain", "21.release.plain", "22.release.yn"] {
        let c = read_json(&run.join("cells").join(cell).join("cell.json"));
        assert_eq!(c["status"], "passed", "{cell}");
    }
}

#[test]
fn the_debug_llvm_came_from_a_kept_toolchain_snapshot() {
    let run = fixture().join("run");
    let lock = read_json(&run.join("lock.json"));
    let builds = lock["builds"].as_object().unwrap();
    let (key, b) = builds
        .iter()
        .find(|(k, _)| k.starts_with("llvm-debug-"))
        .unwrap_or_else(|| panic!("{lock:#}"));
    assert!(
        b["snapshot"]
            .as_str()
            .unwrap()
            .starts_with("rocmatrix/llvm-debug:"),
        "{b:#}"
    );
    let record = read_json(&run.join("builds").join(key).join("build.json"));
    assert_eq!(record["kind"], "llvm-debug", "{record:#}");
    assert_eq!(record["status"], "passed");
    // This run reused the snapshot the first one built (kept beside it).
    assert_eq!(record["reused"], true, "{record:#}");
    let first = read_json(&fixture().join("toolchain-build/build.json"));
    assert_eq!(first["snapshot"], record["snapshot"]);
    assert_eq!(first["reused"], false);
    let steps: Vec<&str> = first["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["configure", "compile", "install"]);
}

#[test]
fn the_kept_run_reports_and_explains_one_signature_with_its_frames() {
    let dir = tempfile::tempdir().unwrap();
    let run = copy_run(dir.path());
    let o = Rocmatrix::new().arg("report").arg(&run).run();
    o.assert_code(1);
    let summary = std::fs::read_to_string(run.join("report/summary.md")).unwrap();
    assert!(
        summary.contains("ParseDirectiveHSAMetadata at "),
        "{summary}"
    );
    assert!(summary.contains("no debug info: "), "{summary}");

    let explain = Rocmatrix::new().arg("explain").arg(&run).run();
    explain.assert_success();
    let text = explain.stdout();
    assert!(text.starts_with("Why cells fail: 1 signature\n"), "{text}");
    assert!(text.contains("invalid HSA metadata"), "{text}");
    assert!(
        text.contains("2 failures in 2 cells: 21.release.yn, 21.debug.yn"),
        "{text}"
    );
    assert!(
        text.contains("     stopped at breakpoint YAMLTraits.cpp:930:"),
        "{text}"
    );
    assert!(text.contains("msgpack::DocNode::fromString at "), "{text}");
}

/// The story's fourth step, kept in tests/fixtures/debug-llvm/try/: the
/// N/Y fix of matrix/patches/ tried on a run of the flagship matrix with
/// `rocmatrix try RUN --patch llvm=FILE --all` (NOTES.md has the command and
/// its times). The debug LLVM's N/Y cell is fixed; Debian's release build
/// fails as before, with the same signature; the control kernels and LLVM
/// 22 are unchanged.
#[test]
fn the_n_y_fix_tried_on_the_debug_llvm_fixes_its_cell_and_nothing_else() {
    let tried = fixture().join("try");
    let t = read_json(&tried.join("try.json"));
    let change = |cell: &str| {
        t["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cell"] == cell)
            .unwrap_or_else(|| panic!("no {cell} in try.json: {t:#}"))["change"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(change("21.debug.yn"), "fixed");
    assert_eq!(change("21.release.yn"), "still-failing");
    for cell in ["21.debug.plain", "21.release.plain", "22.release.yn"] {
        assert_eq!(change(cell), "unchanged", "{cell}");
    }
    // The patch tried is the one kept in matrix/patches/ (its content, given
    // git's headers, is in the plan's patch step).
    let name = "llvm-21-hsa-metadata-true-false-only.patch";
    assert_eq!(t["patches"][0]["source"], "llvm", "{t:#}");
    assert!(
        t["patches"][0]["file"].as_str().unwrap().ends_with(name),
        "{t:#}"
    );
    let kept = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("matrix/patches")
            .join(name),
    )
    .unwrap();
    let fix = kept
        .lines()
        .find(|l| l.starts_with("+  if (Tag == \"!bool\""))
        .expect("the fix's line");
    let plan = std::fs::read_to_string(tried.join("plan.json")).unwrap();
    let in_json = serde_json::to_string(fix).unwrap();
    assert!(
        plan.contains(in_json.trim_matches('"')),
        "the plan's patch step lacks {fix}"
    );

    // The patched LLVM is a toolchain build of its own: the patch is its
    // first step, then the configure, compile and install of the kept run.
    let builds = std::fs::read_dir(tried.join("builds")).unwrap();
    let build = builds
        .filter_map(Result::ok)
        .map(|e| read_json(&e.path().join("build.json")))
        .find(|b| b["kind"] == "llvm-debug")
        .expect("the try's llvm-debug build");
    let steps: Vec<&str> = build["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["patch", "configure", "compile", "install"]);
    assert_eq!(build["reused"], false, "{build:#}");

    // The fixed cell assembled the kernel whose arguments are N and Y.
    let log =
        std::fs::read_to_string(tried.join("cells/21.debug.yn/logs/01-assemble.log")).unwrap();
    assert!(log.contains("assembled: arguments N and Y"), "{log}");
    // Debian's LLVM 21 still rejects it, with the signature it had.
    let results = read_json(&tried.join("report/results.json"));
    let sigs = results["signatures"].as_array().unwrap();
    assert_eq!(sigs.len(), 1, "{sigs:#?}");
    assert!(
        sigs[0]["text"]
            .as_str()
            .unwrap()
            .contains("invalid HSA metadata"),
        "{sigs:#?}"
    );
    assert_eq!(sigs[0]["cells"], serde_json::json!(["21.release.yn"]));
}
