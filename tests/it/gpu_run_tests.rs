//! GPUs through `rocmatrix run` without a GPU: a real-format KFD topology
//! (fixture) and stand-in device nodes (character devices made with mknod,
//! numbered like /dev/null), so the lease, the device list, the groups and
//! ROCR_VISIBLE_DEVICES reach a real container. And `coverage --image` over
//! a library that Debian's hipcc built.

use std::path::Path;
use std::process::Command;

use crate::harness::*;

fn stand_in_devices(dev: &Path) -> bool {
    let made = stand_in_nodes(dev, &["kfd", "dri/renderD128"]);
    // The render node belongs to a group of its own, as on real hosts.
    made && Command::new("chown")
        .args([":44"])
        .arg(dev.join("dri/renderD128"))
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_leased_gpu_reaches_the_container_and_a_missing_one_skips_with_the_reason() {
    let test = "a_leased_gpu_reaches_the_container_and_a_missing_one_skips_with_the_reason";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    if !stand_in_devices(&dev) && unavailable(test, "mknod needs root") {
        return;
    }
    bases::ensure("bookworm");
    let sysfs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kfd/gfx1100");
    let m = write(
        dir.path(),
        "gpu.yaml",
        "name: gpu\nmatrix:\n  gfx: [gfx1100, gfx90a]\nenvironment:\n  base: debian:bookworm\ngpu:\n  need: required\n  policy: exact\nsteps:\n  - name: devices\n    run: |\n      test -c /dev/kfd && test -c /dev/dri/renderD128\n      ls /dev/dri\n      echo \"visible=$ROCR_VISIBLE_DEVICES groups=$(id -G)\"\n  - name: listing\n    gpu: none\n    run: cat /etc/debian_version\n",
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .arg("--sysfs-root")
        .arg(&sysfs)
        .arg("--dev-root")
        .arg(&dev)
        .out(dir.path().join("out"))
        .run();
    o.assert_success();
    let run = o.run_store();
    let ran = cell_json(&run, "gfx1100");
    assert_eq!(ran["status"], "passed", "{ran:#}");
    let tail = ran["steps"][0]["log_tail"].as_str().unwrap();
    assert!(
        tail.contains("visible=GPU-") && tail.contains(" 44"),
        "{tail}"
    );
    assert_eq!(
        tail.lines().filter(|l| l.starts_with("renderD")).count(),
        1,
        "only the leased render node: {tail}"
    );
    let skipped = cell_json(&run, "gfx90a");
    // The cell needs a GPU: skipped, though its GPU-free step ran and passed.
    assert_eq!(skipped["status"], "skipped", "{skipped:#}");
    assert_eq!(skipped["steps"][1]["status"], "passed", "{skipped:#}");
    let reason = skipped["reason"].as_str().unwrap();
    assert!(
        reason.contains("no gfx90a GPU on this host; have gfx1100"),
        "{reason}"
    );

    // Without a KFD topology every GPU step skips, saying so.
    let o = Rocmatrix::run_matrix(&m)
        .args(["--only", "gfx=gfx1100"])
        .progress_plain()
        .arg("--sysfs-root")
        .arg(dir.path().join("empty-sys"))
        .out(dir.path().join("out2"))
        .run();
    o.assert_success();
    let c = cell_json(&o.run_store(), "gfx1100");
    assert_eq!(c["status"], "skipped");
    assert!(
        c["reason"].as_str().unwrap().contains("no GPU inventory"),
        "{c:#}"
    );
}

#[test]
fn coverage_reads_an_environment_images_libraries_through_the_engine_and_reaches_the_report() {
    let Some(_engine) = engine_or_skip(
        "coverage_reads_an_environment_images_libraries_through_the_engine_and_reaches_the_report",
    ) else {
        return;
    };
    bases::ensure("trixie");
    let dir = tempfile::tempdir().unwrap();
    // The same recipe as the smoke matrix's trixie environment (so its
    // layers are cached after the main job), plus a library built by hipcc.
    let m = write(
        dir.path(),
        "lib.yaml",
        "name: lib\nmatrix:\n  gfx: [gfx1030, gfx1031, gfx90a]\ngpu:\n  policy: extended\nenvironment:\n  base: debian:trixie\n  suite: trixie\n  packages: [hipcc, python3-pytest]\n  setup: |\n    printf '#include <hip/hip_runtime.h>\\n__global__ void k(float* x) { x[0] = 1; }\\n' > /tmp/k.hip\n    hipcc -shared -fPIC --offload-arch=gfx1030 --offload-arch=gfx1100 -o /usr/lib/libk.so /tmp/k.hip\nsteps:\n  - name: s\n    run: 'true'\n",
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .arg("--coverage")
        .out(dir.path().join("out"))
        .run();
    o.assert_success();
    assert!(o.stderr().contains("gfx coverage of"), "{}", o.stderr());
    let run = o.run_store();
    let image = cell_json(&run, "gfx1030")["image"]
        .as_str()
        .unwrap()
        .to_string();

    // run --coverage: one file per environment, judged for the cells' targets.
    let env = cell_json(&run, "gfx1030")["environment_hash"]
        .as_str()
        .unwrap()
        .to_string();
    let stored: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.join(format!("images/{}.coverage.json", &env[..12]))).unwrap(),
    )
    .unwrap();
    assert_eq!(
        stored["gfx"],
        serde_json::json!(["gfx1030", "gfx1031", "gfx90a"])
    );
    assert_eq!(stored["policy"], "extended");
    let k = stored["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["library"] == "/usr/lib/libk.so")
        .unwrap_or_else(|| panic!("libk.so not in the run's coverage: {stored:#}"));
    assert_eq!(k["targets"], serde_json::json!(["gfx1030", "gfx1100"]));
    let texts: Vec<&str> = k["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["exact", "via gfx1030 (distro-extended)", "missing"]);
    // The reports show it: a table in index.html, a line in summary.md,
    // the data in results.json.
    let html = std::fs::read_to_string(run.join("report/index.html")).unwrap();
    assert!(
        html.contains("gfx coverage of the environment images")
            && html.contains("<td>&#x2f;usr&#x2f;lib&#x2f;libk.so</td>")
            && html.contains("via gfx1030 (distro-extended)"),
        "{html}"
    );
    let md = std::fs::read_to_string(run.join("report/summary.md")).unwrap();
    // libk.so is the only library with device code in this image; the
    // environment's Comgr (hipcc brings it) stands beside the counts.
    assert!(
        md.contains("policy extended, Comgr libamd-comgr2 ")
            && md.contains("): gfx1030 1/0/0/0 · gfx1031 0/1/0/0 · gfx90a 0/0/0/1"),
        "{md}"
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report/results.json")).unwrap())
            .unwrap();
    assert!(results["coverage"][0]["environment"]
        .as_str()
        .unwrap()
        .starts_with(&env));
    let o = Rocmatrix::new()
        .args([
            "coverage",
            "--image",
            &image,
            "--gfx",
            "gfx1030,gfx1031,gfx1100,gfx90a",
            "--policy",
            "extended",
            "--json",
        ])
        .run();
    o.assert_success();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let libs = doc["libraries"].as_array().unwrap();
    let k = libs
        .iter()
        .find(|l| l["library"].as_str().unwrap().ends_with("usr/lib/libk.so"))
        .unwrap_or_else(|| panic!("libk.so not listed: {doc:#}"));
    let text = k.to_string();
    assert!(text.contains("exact") && text.contains("missing"), "{text}");
}
