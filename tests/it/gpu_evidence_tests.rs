//! Evidence from a real GPU: the run store that `scripts/gpu-check` brought
//! back from a machine with an NVIDIA H100 (tests/fixtures/gpu-runs/h100/),
//! where matrix/cuda-smoke.yaml ran a CUDA googletest suite in a container
//! given the GPU through CDI edits. The store must still read, report and
//! say what happened on that GPU.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpu-runs/h100")
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

#[test]
fn the_h100_run_store_reports_every_cuda_test_with_its_real_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let run = copy_run(dir.path());
    let o = Rocmatrix::new().arg("report").arg(&run).run();
    // The run failed (a test fails on purpose): report exits 1.
    o.assert_code(1);
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report/results.json")).unwrap())
            .unwrap();
    let cell = |id: &str| {
        results["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .cloned()
            .unwrap()
    };
    let gfx = cell("gfx90a");
    assert_eq!(gfx["status"], "skipped");
    assert!(
        gfx["reason"].as_str().unwrap().contains("no KFD topology"),
        "{gfx:#}"
    );

    let sm = cell("sm_90");
    assert_eq!(sm["counts"]["passed"], 8, "{sm:#}");
    assert_eq!(sm["counts"]["failed"], 1);
    assert_eq!(sm["counts"]["error"], 2);
    let test = |name: &str| {
        sm["tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not listed: {sm:#}"))
    };
    let abort = test("IllegalAccessAborts");
    assert_eq!(
        (abort["status"].as_str(), abort["kind"].as_str()),
        (Some("error"), Some("SIGABRT"))
    );
    assert!(
        abort["output"].as_str().unwrap().contains("CUDA error 717"),
        "{abort:#}"
    );
    let hang = test("HangsAKernel");
    assert_eq!(
        (hang["status"].as_str(), hang["kind"].as_str()),
        (Some("error"), Some("timeout"))
    );
    assert!(test("FailsOnGpuResult")["message"]
        .as_str()
        .unwrap()
        .contains("GPU computed 6"));

    // Every listed test exactly once, the ones after each crash included.
    let junit = std::fs::read_to_string(run.join("cells/sm_90/junit/02-smoke/gtest.xml")).unwrap();
    for name in [
        "\"Adds\"",
        "\"SeesOneDevice\"",
        "\"AfterIllegalAccess\"",
        "\"AfterHang\"",
        "\"RunsOnItsGpu/3\"",
    ] {
        assert_eq!(junit.matches(&format!("name={name}")).count(), 1, "{name}");
    }
    assert_eq!(junit.matches("<testcase ").count(), 11);

    // The container saw the one GPU it was given, by the UUID the host's
    // nvidia-smi named, and ran CUDA code for sm_90 on it.
    let check = std::fs::read_to_string(fixture().join("gpu-check.txt")).unwrap();
    let log = std::fs::read_to_string(run.join("cells/sm_90/logs/02-smoke.log")).unwrap();
    let devices = std::fs::read_to_string(run.join("cells/sm_90/logs/01-devices.log")).unwrap();
    let uuid = devices
        .split("UUID: ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap();
    assert!(check.contains(&format!("sm_90    {uuid}")), "{check}");
    assert!(log.contains(&format!(
        "device count=1 uuid={uuid} name=NVIDIA H100 80GB HBM3 sm_90"
    )));
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("cells/sm_90/cell.json")).unwrap())
            .unwrap();
    let devices = record["devices"].to_string();
    assert!(
        devices.contains("/dev/nvidia0") && devices.contains("/dev/nvidiactl"),
        "{devices}"
    );
    // The rootfs had no package manager: locked by its image digest alone.
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("lock.json")).unwrap()).unwrap();
    let env = lock["environments"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    assert!(env["image"]["id"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(env["packages"], serde_json::json!({}));
}
