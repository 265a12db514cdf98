//! rocmatrix against Podman's Docker-compatible API, for real: a rootful
//! `podman system service` of the test's own ([`PodmanService`]), reached
//! through `DOCKER_HOST`. The same small matrix runs on Docker and on
//! Podman and must end the same way; then a snapshot, the image listing and
//! pruning on Podman; and a first run that has to bootstrap its base.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::harness::podman::PodmanService;
use crate::harness::*;

/// Two steps; one cell fails on purpose, one skips; JUnit written by a step.
const MATRIX: &str = r#"name: podman
matrix:
  case: [pass, fail, skip]
environment:
  base: BASE
retries: 0
steps:
  - name: work
    junit: [/work/out/*.xml]
    run: |
      mkdir -p /work/out
      junit() {
        printf '<?xml version="1.0"?>\n<testsuite name="s" tests="1" failures="%s"><testcase classname="c" name="%s">%s</testcase></testsuite>\n' "$1" "$2" "$3" > /work/out/$2.xml
      }
      case {{ matrix.case }} in
        pass) junit 0 ok "" ;;
        fail) junit 1 broken '<failure message="boom">trace</failure>'; echo failing; exit 3 ;;
        skip) echo "no /dev/kfd"; exit 77 ;;
      esac
  - name: after
    run: test -f /work/out/ok.xml && echo after
"#;

/// What must be the same on both engines: per cell, its status and each
/// step's name, status and exit code, and the JUnit files copied out.
fn outcome(run: &Path) -> Vec<Value> {
    ["pass", "fail", "skip"]
        .iter()
        .map(|cell| {
            let c = cell_json(run, cell);
            let steps: Vec<Value> = c["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| serde_json::json!([s["name"], s["status"], s["exit_code"]]))
                .collect();
            serde_json::json!({
                "cell": cell,
                "status": c["status"],
                "steps": steps,
                "junit": c["junit"].as_array().map(Vec::len),
            })
        })
        .collect()
}

/// `debian:bookworm` of the Docker engine as a root file system tarball
/// (`docker export`, seconds), for Podman to import as a `base:` tarball.
/// Bootstrapping it again with debootstrap would take a minute, and the
/// tarball rocmatrix bootstraps is not kept after its import.
fn bookworm_tarball(dir: &Path) -> std::path::PathBuf {
    let base = bases::ensure("bookworm");
    let o = docker::docker(["create", "--label", &label::label(), &base, "true"]);
    assert!(o.status.success(), "docker create: {}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    let tar = dir.join("bookworm.tar");
    let o = docker::docker(["export", "-o", tar.to_str().unwrap(), &id]);
    let _ = docker::docker(["rm", "-f", &id]);
    assert!(o.status.success(), "docker export: {}", stderr(&o));
    tar
}

/// Starts a run on Podman whose one cell sleeps, kills rocmatrix (SIGKILL)
/// once the cell's container runs, and returns that container's id.
fn killed_run(podman: &PodmanService, dir: &Path, tarball: &Path) -> String {
    let stuck_dir = dir.join("stuck");
    std::fs::create_dir_all(&stuck_dir).unwrap();
    let m = write(
        &stuck_dir,
        "m.yaml",
        &format!(
            "name: stuck\nmatrix:\n  case: [stuck]\nenvironment:\n  base: {}\nsteps:\n  - name: wait\n    run: sleep 600\n",
            tarball.display()
        ),
    );
    let mut child = Rocmatrix::run_matrix(&m)
        .env("DOCKER_HOST", podman.docker_host())
        .progress_plain()
        .out(&stuck_dir)
        .spawn();
    let t0 = std::time::Instant::now();
    let container = loop {
        let running = podman.run(&["ps", "-q", "--filter", "label=rocmatrix.cell=stuck"]);
        if let Some(id) = running.lines().next() {
            break id.to_string();
        }
        if t0.elapsed() > std::time::Duration::from_secs(240) || child.try_wait().unwrap().is_some()
        {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the stuck cell's container never ran:\n{}\n{}",
                stdout(&out),
                stderr(&out)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    container
}

/// A cell that needs a GPU, given one by a KFD topology fixture and
/// stand-in device nodes (mknod, root only) in `out`: its device nodes and
/// the render node's group must reach the container.
fn gpu_cell(podman: &PodmanService, out: &Path, tarball: &Path) {
    let dev = out.join("dev");
    let made = stand_in_nodes(&dev, &["kfd", "dri/renderD128"])
        && Command::new("chown")
            .arg(":44")
            .arg(dev.join("dri/renderD128"))
            .status()
            .is_ok_and(|s| s.success());
    if !made
        && unavailable(
            "a_matrix_runs_on_podman_as_on_docker (GPU cell)",
            "mknod needs root",
        )
    {
        return;
    }
    let m = write(
        out,
        "gpu.yaml",
        &format!(
            "name: gpu\nmatrix:\n  gfx: [gfx1100]\nenvironment:\n  base: {}\ngpu:\n  need: required\n  policy: exact\nsteps:\n  - name: devices\n    run: |\n      test -c /dev/kfd && test -c /dev/dri/renderD128\n      echo \"visible=$ROCR_VISIBLE_DEVICES groups=$(id -G)\"\n",
            tarball.display()
        ),
    );
    let sysfs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kfd/gfx1100");
    let ran = Rocmatrix::run_matrix(&m)
        .env("DOCKER_HOST", podman.docker_host())
        .progress_plain()
        .arg("--sysfs-root")
        .arg(&sysfs)
        .arg("--dev-root")
        .arg(&dev)
        .out(out)
        .run();
    ran.assert_success();
    let cell = cell_json(&ran.run_store(), "gfx1100");
    let tail = cell["steps"][0]["log_tail"].as_str().unwrap_or_default();
    assert!(
        tail.contains("visible=GPU-") && tail.contains(" 44"),
        "{cell:#}"
    );
}

#[test]
fn a_matrix_runs_on_podman_as_on_docker() {
    const T: &str = "a_matrix_runs_on_podman_as_on_docker";
    let Some(_engine) = engine_or_skip(T) else {
        return;
    };
    let Some(podman) = PodmanService::start_or_skip(T) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tarball = bookworm_tarball(dir.path());

    let docker_dir = dir.path().join("docker");
    std::fs::create_dir_all(&docker_dir).unwrap();
    let m = write(
        &docker_dir,
        "m.yaml",
        &MATRIX.replace("BASE", "debian:bookworm"),
    );
    let on_docker = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(&docker_dir)
        .run();
    on_docker.assert_code(1);

    // A run killed outright leaves its cell's container running…
    let stuck = killed_run(&podman, dir.path(), &tarball);

    let podman_dir = dir.path().join("podman");
    std::fs::create_dir_all(&podman_dir).unwrap();
    let m = write(
        &podman_dir,
        "m.yaml",
        &MATRIX.replace("BASE", tarball.to_str().unwrap()),
    );
    let on_podman = Rocmatrix::run_matrix(&m)
        .env("DOCKER_HOST", podman.docker_host())
        .progress_plain()
        .out(&podman_dir)
        .run();
    on_podman.assert_code(1);
    let podman_run = on_podman.run_store();
    // …which the next run finds by its labels and removes.
    let text = on_podman.text();
    assert!(
        text.contains("removed container") && text.contains("its rocmatrix process"),
        "{}",
        on_podman.context()
    );
    let gone = podman
        .cli()
        .args(["container", "exists", &stuck])
        .status()
        .unwrap();
    assert!(
        !gone.success(),
        "the killed run's container {stuck} is still there"
    );

    let expected = outcome(&on_docker.run_store());
    assert_eq!(
        outcome(&podman_run),
        expected,
        "Podman ended the matrix otherwise than Docker: {}",
        on_podman.context()
    );
    // The runs are what the matrix says, not merely alike.
    assert_eq!(expected[0]["status"], "passed");
    assert_eq!(expected[1]["status"], "failed");
    assert_eq!(expected[1]["steps"][0][2], 3);
    assert_eq!(expected[1]["steps"][1][1], "skipped");
    assert_eq!(expected[2]["status"], "skipped");
    let copied = podman_run
        .join("cells/fail")
        .join(cell_json(&podman_run, "fail")["junit"][0].as_str().unwrap());
    assert!(
        std::fs::read_to_string(&copied).unwrap().contains("boom"),
        "{}",
        copied.display()
    );

    // Nothing of the run is left running; what rocmatrix made carries its
    // labels, is listed by kind under Docker's names, and is pruned by them.
    assert_eq!(
        podman.run(&["ps", "-a", "-q"]).trim(),
        "",
        "containers left"
    );
    let labelled = podman.run(&[
        "images",
        "--filter",
        &format!("label={}", label::label()),
        "--format",
        "{{.Repository}}:{{.Tag}} {{.Labels}}",
    ]);
    assert!(
        labelled.contains("rocmatrix/base:bookworm-") && labelled.contains("rocmatrix/env:"),
        "{labelled}"
    );
    assert!(labelled.contains("rocmatrix.kind:base"), "{labelled}");

    // Stand-in GPU device nodes and the render group reach the container.
    // The same environment as the matrix's: no image of its own.
    gpu_cell(&podman, &podman_dir, &tarball);

    // A snapshot after a step (a commit), under its own kind.
    let run_id = podman_run
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let shell = Rocmatrix::new()
        .args(["shell", &run_id, "pass", "--after", "work", "--out"])
        .arg(&podman_dir)
        .args(["--", "cat", "/work/out/ok.xml"])
        .env("DOCKER_HOST", podman.docker_host())
        .run();
    shell.assert_success();
    assert!(
        shell.stdout().contains(r#"name="ok""#),
        "{}",
        shell.context()
    );
    let images = Rocmatrix::new()
        .args(["images", "--json", "--out"])
        .arg(&podman_dir)
        .env("DOCKER_HOST", podman.docker_host())
        .run();
    images.assert_success();
    let rows: Vec<Value> = serde_json::from_str(&images.stdout()).unwrap();
    let mut kinds: Vec<(String, bool)> = rows
        .iter()
        .map(|r| {
            let tag = r["tag"].as_str().unwrap_or_default();
            (
                r["kind"].as_str().unwrap_or_default().to_string(),
                tag.starts_with("rocmatrix/"),
            )
        })
        .collect();
    kinds.sort();
    let want = [
        ("base".to_string(), true),
        ("env".to_string(), true),
        ("snapshot".to_string(), true),
    ];
    assert_eq!(kinds, want, "{}", images.stdout());
    // The run's lock names the base and the environment: kept, and the
    // snapshot without --snapshots; elsewhere nothing names them.
    let kept = Rocmatrix::new()
        .args(["images", "--prune", "--bases", "--out"])
        .arg(&podman_dir)
        .env("DOCKER_HOST", podman.docker_host())
        .run();
    kept.assert_success();
    let all = want.len();
    assert!(
        kept.stdout().contains(&format!("0 removed, {all} kept")),
        "{}",
        kept.context()
    );
    let pruned = Rocmatrix::new()
        .args(["images", "--prune", "--bases", "--snapshots", "--out"])
        .arg(dir.path().join("elsewhere"))
        .env("DOCKER_HOST", podman.docker_host())
        .run();
    pruned.assert_success();
    assert!(
        pruned.stdout().contains(&format!("{all} removed")),
        "{}",
        pruned.context()
    );
    let left = podman.run(&["images", "-q"]);
    assert_eq!(left.trim(), "", "images left in Podman");
    // Still a Docker engine beside it.
    assert!(Command::new("docker")
        .arg("info")
        .output()
        .unwrap()
        .status
        .success());
}

/// The first run a new user makes on Podman: no base image anywhere, so
/// rocmatrix bootstraps `debian:bookworm` with debootstrap and imports it.
/// That import used to fail ("the engine reports no such image
/// afterwards": Podman filed it as `debian:latest`, taking that tag from
/// whatever had it, and ran all its labels into one).
#[test]
fn a_base_bootstraps_into_podman_under_its_own_name() {
    const T: &str = "a_base_bootstraps_into_podman_under_its_own_name";
    let Some(_engine) = engine_or_skip(T) else {
        return;
    };
    if !Path::new("/usr/sbin/debootstrap").exists()
        && unavailable(T, "debootstrap is not installed (run .ci/install-base.sh)")
    {
        return;
    }
    let Some(podman) = PodmanService::start_or_skip(T) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A `debian:latest` of the user's, which the import must leave alone.
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("marker"), "the user's").unwrap();
    let tar = dir.path().join("latest.tar");
    let o = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .output()
        .unwrap();
    assert!(o.status.success(), "tar: {}", stderr(&o));
    podman.run(&["import", tar.to_str().unwrap(), "debian:latest"]);
    let latest = podman.run(&["image", "inspect", "--format", "{{.Id}}", "debian:latest"]);

    let m = write(
        dir.path(),
        "m.yaml",
        "name: boot\nmatrix:\n  x: [a]\nenvironment:\n  base: debian:bookworm\n  suite: bookworm\nsteps:\n  - name: release\n    run: grep -q bookworm /etc/os-release\n",
    );
    let first = Rocmatrix::run_matrix(&m)
        .env("DOCKER_HOST", podman.docker_host())
        .progress_plain()
        .out(dir.path())
        .run();
    first.assert_success();
    assert!(
        first
            .text()
            .contains("base image debian:bookworm: bootstrapped bookworm from"),
        "{}",
        first.context()
    );
    let labels = podman.run(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config.Labels}}",
        "debian:bookworm",
    ]);
    let labels: serde_json::Map<String, Value> = serde_json::from_str(&labels).unwrap();
    assert_eq!(labels["rocmatrix.kind"], "base", "{labels:?}");
    assert_eq!(labels["rocmatrix.base.suite"], "bookworm", "{labels:?}");
    assert_eq!(labels[label::KEY], label::value(), "{labels:?}");
    assert_eq!(
        podman.run(&["image", "inspect", "--format", "{{.Id}}", "debian:latest"]),
        latest,
        "the import moved debian:latest"
    );

    // The next run finds it, and knows where it came from.
    let second = Rocmatrix::run_matrix(&m)
        .env("DOCKER_HOST", podman.docker_host())
        .progress_plain()
        .out(dir.path())
        .run();
    second.assert_success();
    assert!(
        second.text().contains(
            "base image debian:bookworm: present in the engine (bootstrapped earlier from"
        ),
        "{}",
        second.context()
    );
}

/// Rootless Podman: the service runs as a user the test makes (subordinate
/// ids, its own runtime directory, in the group owning the stand-in GPU
/// nodes) and keeps that user's groups in its containers (crun's
/// `run.oci.keep_original_groups`, set in the service's configuration).
/// The matrix ends as the rootful one does, and a GPU cell opens device
/// nodes that only the group may open: through the user's own group, not
/// through a group added in the container (in a user namespace that would
/// be another group).
#[test]
fn a_matrix_runs_on_rootless_podman() {
    const T: &str = "a_matrix_runs_on_rootless_podman";
    let Some(_engine) = engine_or_skip(T) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The service's user reaches the base tarball and the device nodes here.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dev = dir.path().join("dev");
    if !stand_in_nodes(&dev, &["kfd", "dri/renderD128"]) && unavailable(T, "mknod needs root") {
        return;
    }
    for node in ["kfd", "dri/renderD128"] {
        let o = Command::new("chown")
            .arg("0:44")
            .arg(dev.join(node))
            .output()
            .unwrap();
        assert!(o.status.success(), "chown: {}", stderr(&o));
        std::fs::set_permissions(dev.join(node), std::fs::Permissions::from_mode(0o660)).unwrap();
    }
    let Some(podman) = PodmanService::start_rootless_or_skip(T, &[44]) else {
        return;
    };
    assert_eq!(
        podman
            .run(&["info", "--format", "{{.Host.Security.Rootless}}"])
            .trim(),
        "true"
    );
    let tarball = bookworm_tarball(dir.path());
    let work = dir.path().join("matrix");
    std::fs::create_dir_all(&work).unwrap();
    let m = write(
        &work,
        "m.yaml",
        &MATRIX.replace("BASE", tarball.to_str().unwrap()),
    );
    let ran = Rocmatrix::run_matrix(&m)
        .env("DOCKER_HOST", podman.docker_host())
        .progress_plain()
        .out(&work)
        .run();
    ran.assert_code(1);
    let got = outcome(&ran.run_store());
    assert_eq!(got[0]["status"], "passed", "{}", ran.context());
    assert_eq!(got[1]["status"], "failed", "{}", ran.context());
    assert_eq!(got[1]["steps"][0][2], 3);
    assert_eq!(got[1]["steps"][1][1], "skipped");
    assert_eq!(got[2]["status"], "skipped");
    assert_eq!(got[1]["junit"], 1, "{}", ran.context());

    // kfd and the render node are root:44 0660; the container's root is
    // the service's user on the host, which only its group 44 lets in.
    let m = write(
        &work,
        "gpu.yaml",
        &format!(
            "name: gpu\nmatrix:\n  gfx: [gfx1100]\nenvironment:\n  base: {}\ngpu:\n  need: required\n  policy: exact\nsteps:\n  - name: devices\n    run: |\n      : > /dev/kfd\n      : > /dev/dri/renderD128\n      echo \"opened visible=$ROCR_VISIBLE_DEVICES\"\n",
            tarball.display()
        ),
    );
    let sysfs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kfd/gfx1100");
    let gpu = Rocmatrix::run_matrix(&m)
        .env("DOCKER_HOST", podman.docker_host())
        .progress_plain()
        .arg("--sysfs-root")
        .arg(&sysfs)
        .arg("--dev-root")
        .arg(&dev)
        .out(&work)
        .run();
    gpu.assert_success();
    let cell = cell_json(&gpu.run_store(), "gfx1100");
    let tail = cell["steps"][0]["log_tail"].as_str().unwrap_or_default();
    assert!(tail.contains("opened visible=GPU-"), "{cell:#}");

    // `gpus` finds the engine rootless and its user ready: in group 44 of
    // both nodes, keep-groups in the user's containers.conf, crun.
    let gpus = Rocmatrix::new()
        .args(["gpus", "--json", "--sysfs-root"])
        .arg(&sysfs)
        .arg("--dev-root")
        .arg(&dev)
        .env("DOCKER_HOST", podman.docker_host())
        .run();
    gpus.assert_success();
    let report: Value = serde_json::from_str(&gpus.stdout()).unwrap();
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} check: {report:#}"))
    };
    let uid = podman.user_uid().unwrap();
    let groups = check("rootless-groups");
    assert_eq!(groups["status"], "ok", "{groups:#}");
    assert!(
        groups["message"].as_str().unwrap().contains(&format!(
            "(uid {uid}) is in the groups of 2 GPU device node(s)"
        )),
        "{groups:#}"
    );
    let keep = check("keep-groups");
    assert_eq!(keep["status"], "ok", "{keep:#}");
    assert!(
        keep["message"]
            .as_str()
            .unwrap()
            .contains(".config/containers/containers.conf"),
        "{keep:#}"
    );
    assert_eq!(
        podman.run(&["ps", "-a", "-q"]).trim(),
        "",
        "containers left"
    );
}

/// The registry on Podman: a plain-HTTP registry that the service's
/// `registries.conf` marks insecure (what a Podman user writes for a
/// registry without TLS) takes the environment image a first run built,
/// and a run whose engine lacks it pulls it instead of building.
#[test]
fn podman_pushes_to_and_pulls_from_a_registry() {
    const T: &str = "podman_pushes_to_and_pulls_from_a_registry";
    let Some(_engine) = engine_or_skip(T) else {
        return;
    };
    let serves = std::process::Command::new("docker-registry")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !serves
        && unavailable(
            T,
            "docker-registry is not installed (run .ci/install-registry.sh)",
        )
    {
        return;
    }
    let registry = registry::Registry::start();
    let Some(podman) = PodmanService::start_trusting_registry_or_skip(T, &registry.addr) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tarball = bookworm_tarball(dir.path());
    let m = write(
        dir.path(),
        "m.yaml",
        &format!(
            "name: podman-registry\nmatrix:\n  n: [a]\nenvironment:\n  base: {}\n  env: {{NONCE: '{}'}}\nsteps:\n  - name: t\n    run: test \"$NONCE\" = '{}'\n",
            tarball.display(),
            std::process::id(),
            std::process::id()
        ),
    );
    let repo = registry.repository("rocmatrix");
    let run = |out: &str| {
        let o = Rocmatrix::run_matrix(&m)
            .env("DOCKER_HOST", podman.docker_host())
            .args(["--registry", &repo])
            .progress_plain()
            .out(dir.path().join(out))
            .run();
        o.assert_success();
        o.run_store()
    };
    let first = run("first");
    let journal = std::fs::read_to_string(first.join("journal.jsonl")).unwrap();
    assert!(journal.contains("\"event\":\"image_pushed\""), "{journal}");
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(first.join("lock.json")).unwrap()).unwrap();
    let image = lock["environments"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()["image"]
        .clone();
    let reference = image["registry"].as_str().unwrap().to_string();
    assert!(
        reference.starts_with(&format!("{repo}/env@sha256:")),
        "{image}"
    );
    let tag = image["tag"].as_str().unwrap().to_string();
    let pushed = tag.replace("rocmatrix/", &format!("{repo}/"));
    assert!(
        registry
            .tags("rocmatrix/env")
            .contains(&tag.rsplit(':').next().unwrap().to_string()),
        "{:?}",
        registry.tags("rocmatrix/env")
    );

    // Gone from the engine, the image comes back from the registry.
    podman.run(&["rmi", "-f", &tag, &pushed]);
    let second = run("second");
    let journal = std::fs::read_to_string(second.join("journal.jsonl")).unwrap();
    let finished: Vec<Value> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "image_finished")
        .collect();
    assert_eq!(finished.len(), 1, "{journal}");
    assert_eq!(finished[0]["pulled"], true, "{journal}");
    assert!(!journal.contains("\"event\":\"image_pushed\""), "{journal}");
}
