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

/// Two cells on two real H200s (tests/fixtures/gpu-runs/h200-two/): each
/// cell's record says where it ran — the NVIDIA driver and its own GPU's
/// UUID — locally and as a Slurm array with real gres, and the report made
/// again from the run store shows it.
#[test]
fn two_h200_cells_record_the_driver_and_each_its_own_gpu() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpu-runs/h200-two");
    let host = |cell: &Path| -> Value {
        let text = std::fs::read_to_string(cell.join("cell.json")).unwrap();
        serde_json::from_str::<Value>(&text).unwrap()["host"].clone()
    };
    let mut shards: Vec<PathBuf> = Vec::new();
    for task in ["1", "2"] {
        let runs = fixture.join("slurm/shards").join(task).join("runs");
        for store in std::fs::read_dir(&runs).unwrap() {
            shards.push(store.unwrap().path());
        }
        assert!(
            !fixture
                .join("slurm/shards")
                .join(task)
                .join("history.sqlite")
                .exists(),
            "task {task} recorded a history of its own"
        );
    }
    let mut cells: Vec<PathBuf> = ["sm_90.a", "sm_90.b"]
        .iter()
        .map(|c| fixture.join("run/cells").join(c))
        .collect();
    for store in &shards {
        for cell in std::fs::read_dir(store.join("cells")).unwrap() {
            cells.push(cell.unwrap().path());
        }
    }
    assert_eq!(cells.len(), 4, "{cells:?}");
    let mut uuids = Vec::new();
    for cell in &cells {
        let h = host(cell);
        assert_eq!(
            h["driver"],
            "nvidia 580.159.04",
            "{}: {h:#}",
            cell.display()
        );
        let gpus = h["gpus"].as_array().unwrap();
        assert_eq!(gpus.len(), 1, "{}: one GPU each: {h:#}", cell.display());
        assert_eq!(gpus[0]["model"], "NVIDIA H200");
        assert!(gpus[0]["firmware"]["vbios"]
            .as_str()
            .is_some_and(|v| !v.is_empty()));
        uuids.push(gpus[0]["id"].as_str().unwrap().to_string());
    }
    assert!(uuids.iter().all(|u| u.starts_with("GPU-")), "{uuids:?}");
    assert_ne!(uuids[0], uuids[1], "the local cells had a GPU each");
    assert_ne!(uuids[2], uuids[3], "the Slurm tasks had a GPU each");

    // The report, made again here from the local run store.
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(fixture.join("run"))
        .arg(&run)
        .status()
        .unwrap();
    assert!(status.success());
    Rocmatrix::new()
        .arg("report")
        .arg(&run)
        .args(["--history", "off"])
        .run()
        .assert_success();
    let summary = std::fs::read_to_string(run.join("report/summary.md")).unwrap();
    assert!(summary.contains("## Where the cells ran"), "{summary}");
    for u in &uuids[..2] {
        assert!(
            summary.contains(&format!("nvidia 580.159.04, GPU {u} (NVIDIA H200, ")),
            "{summary}"
        );
    }
}
