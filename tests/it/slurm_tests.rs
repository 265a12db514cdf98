//! rocmatrix and Slurm (issue 40), against a real one-node cluster the
//! harness starts from Debian's packages (`tests/it/harness/slurm.rs`):
//! the cluster itself, `plan --format slurm` submitted as it is, and
//! `plan --format k8s` checked by `kubernetes-validate --strict`.

use std::time::{Duration, Instant};

use crate::harness::slurm::{self, Slurm};

/// Waits (up to a generous "no hang" deadline) until the cluster has no
/// job left pending or running.
fn wait_idle(s: &Slurm, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let states = s.job_states();
        if states
            .iter()
            .all(|(_, st)| st != "PENDING" && st != "RUNNING" && st != "COMPLETING")
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: jobs still not done after 180 s: {states:?}\n{}",
            s.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_harness_cluster_runs_an_array_whose_tasks_get_one_fake_gpu_each() {
    let Some(s) = Slurm::start("slurm harness") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("job.sh");
    std::fs::write(
        &script,
        "#!/bin/bash\necho \"task=$SLURM_ARRAY_TASK_ID rocr=$ROCR_VISIBLE_DEVICES cuda=$CUDA_VISIBLE_DEVICES gpus=$SLURM_JOB_GPUS\"\n",
    )
    .unwrap();
    let out = s
        .client("sbatch")
        .args(["--parsable", "--array=1-3"])
        .arg(format!("--gres=gpu:{}:1", slurm::GPU_TYPE))
        .arg(format!("--output={}/task-%a.out", dir.path().display()))
        .arg(&script)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "sbatch: {out:?}\n{}", s.logs());
    let job = String::from_utf8_lossy(&out.stdout).trim().to_string();
    wait_idle(&s, "the array");
    for task in 1..=3 {
        let text = std::fs::read_to_string(dir.path().join(format!("task-{task}.out")))
            .unwrap_or_else(|e| panic!("task {task} wrote no output ({e})\n{}", s.logs()));
        assert!(text.contains(&format!("task={task} ")), "{text}");
        // One of the node's two fake GPUs, named the same way to ROCm,
        // CUDA and Slurm's own variable.
        let gpu = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("gpus="))
            .unwrap_or_default();
        assert!(gpu == "0" || gpu == "1", "{text}");
        assert!(text.contains("rocr=") && !text.contains("rocr= "), "{text}");
        assert!(text.contains("cuda="), "{text}");
        let shown = s.show_job(&format!("{job}_{task}"));
        assert_eq!(shown.get("JobState").map(String::as_str), Some("COMPLETED"));
    }
}

/// A matrix of GPU cells of two gfx targets, with `ci.slurm` and `ci.k8s`
/// tables mapping them to the cluster's gres type and to the AMD node
/// labeller's labels.
const GPU_MATRIX: &str = r#"name: ROCm smoke
matrix:
  gfx: [gfx90a, gfx942, gfx1100]
  os: [bookworm, trixie]
gpu: {need: required, target: '{{ matrix.gfx }}'}
steps:
  - {name: s, run: 'true'}
ci:
  slurm:
    partition: rm
    time: "10"
    args: [--nice=10]
    gres: {gfx90a: fake, gfx942: fake}
  k8s:
    image: ghcr.io/example/rocmatrix:6.2
    claim: rocmatrix-results
    nodes:
      gfx90a: {amd.com/gpu.family: AI, amd.com/gpu.device-id: "740f"}
      gfx942: {amd.com/gpu.family: AI, amd.com/gpu.device-id: "74a1"}
"#;

/// `plan --format slurm` makes a script that the real cluster's `sbatch`
/// accepts as it is (`--test-only`: checked by the controller, not run):
/// the partition, time and gres type from the matrix file's table.
#[test]
fn plan_format_slurm_is_a_script_the_real_sbatch_accepts() {
    let Some(s) = Slurm::start("plan --format slurm") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let m = crate::harness::write(dir.path(), "m.yaml", GPU_MATRIX);
    let ran = crate::harness::Rocmatrix::new()
        .args(["plan", "--format", "slurm", "--only", "gfx=gfx90a"])
        .arg(&m)
        .args(["--shards", "2"])
        .current_dir(dir.path())
        .run();
    ran.assert_success();
    let script = ran.stdout();
    assert!(script.contains("#SBATCH --partition=rm\n"), "{script}");
    assert!(script.contains("#SBATCH --time=10\n"), "{script}");
    assert!(script.contains("#SBATCH --nice=10\n"), "{script}");
    assert!(script.contains("#SBATCH --array=1-2\n"), "{script}");
    assert!(script.contains("#SBATCH --gres=gpu:fake:1\n"), "{script}");
    assert!(
        script.contains("--only gfx=gfx90a --shard 2/2 ;;"),
        "{script}"
    );
    let path = dir.path().join("array.sh");
    std::fs::write(&path, &script).unwrap();
    std::fs::create_dir_all(dir.path().join("rocmatrix-slurm/logs")).unwrap();
    let test = |extra: &[&str]| {
        s.client("sbatch")
            .arg("--test-only")
            .args(extra)
            .arg(&path)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let ok = test(&[]);
    assert!(ok.status.success(), "{ok:?}\n{}", s.logs());
    // The same check refuses what the cluster does not have.
    let bad = test(&["--gres=gpu:mi300x:1"]);
    assert!(!bad.status.success(), "{bad:?}");

    // Tasks of different GPU kinds: one sbatch line per kind.
    let ran = crate::harness::Rocmatrix::new()
        .args(["plan", "--format", "slurm", "--group-by", "gfx"])
        .arg(&m)
        .current_dir(dir.path())
        .run();
    ran.assert_success();
    let script = ran.stdout();
    // gfx90a and gfx942 both map to the cluster's one type: one array.
    assert!(
        script.contains("#   sbatch --array=1-2 --gres=gpu:fake:1 THIS-SCRIPT"),
        "{script}"
    );
    assert!(
        script.contains("#   sbatch --array=3 --gres=gpu:1 THIS-SCRIPT"),
        "{script}"
    );
    // Without --group-by, a task that would mix kinds is refused, naming
    // two of its cells.
    let ran = crate::harness::Rocmatrix::new()
        .args(["plan", "--format", "slurm", "--shards", "2"])
        .arg(&m)
        .current_dir(dir.path())
        .run();
    ran.assert_code(2);
    assert!(
        ran.stderr()
            .contains("cells gfx942.trixie and gfx1100.bookworm share array task 2"),
        "{}",
        ran.stderr()
    );
}

/// `kubernetes-validate` from the venv `.ci/install-slurm.sh` makes.
fn kubernetes_validate() -> Option<std::path::PathBuf> {
    let venv = std::env::var_os("ROCMATRIX_CI_TOOLS")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(std::path::PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache"))
                })
                .map(|c| c.join("rocmatrix-ci/venv"))
        })?;
    let bin = venv.join("bin/kubernetes-validate");
    bin.is_file().then_some(bin)
}

/// `plan --format k8s`: Indexed Jobs, one per GPU kind, valid for
/// Kubernetes 1.27 to 1.37 under `kubernetes-validate --strict` (unknown
/// fields refused).
#[test]
fn plan_format_k8s_passes_kubernetes_validate_strict() {
    let Some(validate) = kubernetes_validate() else {
        crate::harness::unavailable(
            "plan --format k8s",
            "kubernetes-validate is not installed (.ci/install-slurm.sh installs it)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let m = crate::harness::write(dir.path(), "m.yaml", GPU_MATRIX);
    let ran = crate::harness::Rocmatrix::new()
        .args([
            "plan",
            "--format",
            "k8s",
            "--group-by",
            "gfx",
            "--shards",
            "2",
        ])
        .arg(&m)
        .run();
    ran.assert_success();
    let text = ran.stdout();
    assert_eq!(text.matches("kind: Job").count(), 3, "{text}");
    assert!(text.contains("completionMode: Indexed"), "{text}");
    assert!(text.contains("amd.com/gpu.device-id: 74a1"), "{text}");
    assert!(text.contains("claimName: rocmatrix-results"), "{text}");
    let file = dir.path().join("jobs.yaml");
    std::fs::write(&file, &text).unwrap();
    for version in ["1.27.0", "1.31.0", "1.37.0"] {
        let out = std::process::Command::new(&validate)
            .args(["--strict", "--kubernetes-version", version])
            .arg(&file)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "Kubernetes {version}: {said}\n{text}");
        assert_eq!(
            said.matches(" passed for resource job/").count(),
            3,
            "{version}: {said}"
        );
    }
    // And one that is not valid is refused: the check checks.
    std::fs::write(&file, text.replace("completionMode", "completionMood")).unwrap();
    let out = std::process::Command::new(&validate)
        .args(["--strict"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
}
