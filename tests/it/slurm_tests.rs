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
