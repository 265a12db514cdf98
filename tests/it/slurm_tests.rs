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

/// Four cells in Debian containers, one of them failing a test.
const ARRAY_MATRIX: &str = r#"name: array
matrix:
  case: [one, two, three, four]
environment:
  base: debian:bookworm
retries: 0
steps:
  - name: work
    junit: [/work/out/*.xml]
    run: |
      mkdir -p /work/out
      f=0; body=""
      if [ {{ matrix.case }} = three ]; then f=1; body='<failure message="boom">trace</failure>'; fi
      printf '<?xml version="1.0"?>\n<testsuite name="s" tests="2" failures="%s"><testcase classname="c" name="a">%s</testcase><testcase classname="c" name="b"/></testsuite>\n' "$f" "$body" > /work/out/{{ matrix.case }}.xml
      exit $f
"#;

/// A cell's id, status and (test, status) pairs.
type Outcome = (String, String, Vec<(String, String)>);

/// Each cell's outcome in a results.json.
fn outcomes(results: &std::path::Path) -> Vec<Outcome> {
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results).unwrap()).unwrap();
    let mut v: Vec<Outcome> = j["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let mut tests: Vec<(String, String)> = c["tests"]
                .as_array()
                .map(|ts| {
                    ts.iter()
                        .map(|t| (t["name"].to_string(), t["status"].to_string()))
                        .collect()
                })
                .unwrap_or_default();
            tests.sort();
            // Passing tests are kept as hashes only.
            tests.push(("passed".into(), c["passed_hashes"].to_string()));
            (c["id"].to_string(), c["status"].to_string(), tests)
        })
        .collect();
    v.sort();
    v
}

/// `run --executor slurm` on the real cluster: two array tasks of two
/// cells each, their shards merged, give the report a local run of the same
/// matrix gives; and the tasks really ran through Slurm.
#[test]
fn run_through_a_slurm_array_reports_what_a_local_run_reports() {
    let Some(_engine) = crate::harness::engine_or_skip("run --executor slurm") else {
        return;
    };
    let Some(s) = Slurm::start("run --executor slurm") else {
        return;
    };
    crate::harness::bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    // An environment of its own, built by neither an earlier test nor the
    // local run (which comes after): the controller makes it.
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let m = crate::harness::write(
        dir.path(),
        "m.yaml",
        &ARRAY_MATRIX.replace(
            "retries: 0\n",
            &format!("  env:\n    NONCE: \"{nonce}\"\nretries: 0\n"),
        ),
    );

    let slurm_dir = dir.path().join("shared");
    let mut cmd = crate::harness::Rocmatrix::run_matrix(&m)
        .args([
            "--executor",
            "slurm",
            "--shards",
            "2",
            "--partition",
            slurm::PARTITION,
        ])
        .arg("--slurm-dir")
        .arg(&slurm_dir)
        .current_dir(dir.path());
    for (k, v) in s.env() {
        cmd = cmd.env(k, v);
    }
    let ran = cmd.run();
    ran.assert_code(1);
    let text = ran.text();
    assert!(text.contains("slurm: array job "), "{text}\n{}", s.logs());
    // The controller built the environment before the array went out, and
    // the tasks found it made.
    assert!(text.contains(": built rocmatrix/env:"), "{text}");
    assert!(
        text.contains("ready for the tasks: rocmatrix/env:"),
        "{text}"
    );
    let local = crate::harness::Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("local"))
        .run();
    local.assert_code(1);
    let local_results = local.run_store().join("report/results.json");
    assert!(
        text.contains("0 pending, 0 running, 2 done of 2 tasks"),
        "{text}"
    );
    let merged = outcomes(&slurm_dir.join("report/results.json"));
    assert_eq!(merged, outcomes(&local_results), "{text}");
    assert_eq!(merged.len(), 4);
    let three = merged.iter().find(|c| c.0 == "\"three\"").unwrap();
    assert_eq!(three.1, "\"failed\"");
    assert!(three.2.iter().any(|t| t.0 == "\"a\""), "{three:?}");
    // Each task's own run store, and its output, from Slurm.
    for task in 1..=2 {
        let runs = slurm_dir.join(format!("shards/{task}/runs"));
        assert_eq!(std::fs::read_dir(&runs).unwrap().count(), 1, "{text}");
        let log = std::fs::read_to_string(slurm_dir.join(format!("logs/{task}.out"))).unwrap();
        assert!(log.contains("run store:"), "{log}");
        assert!(log.contains(": reusing rocmatrix/env:"), "{log}");
    }
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(slurm_dir.join("array.json")).unwrap())
            .unwrap();
    let job = state["jobs"][0].as_str().unwrap().to_string();
    let shown = s.show_job(&format!("{job}_2"));
    // The task of the failing cell exits 1, as `rocmatrix run` does.
    assert_eq!(shown.get("JobState").map(String::as_str), Some("FAILED"));
    assert_eq!(shown.get("ExitCode").map(String::as_str), Some("1:0"));

    // `--resume --rerun-failed`: only the task of the failed cell goes out
    // again, and only that cell runs again in its shard.
    let started = |task: usize, cell: &str| {
        let store = std::fs::read_dir(slurm_dir.join(format!("shards/{task}/runs")))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        crate::harness::cell_json(&store, cell)["started"].to_string()
    };
    let before: Vec<String> = [(1, "one"), (1, "two"), (2, "three"), (2, "four")]
        .iter()
        .map(|(t, c)| started(*t, c))
        .collect();
    let mut again = crate::harness::Rocmatrix::new()
        .args(["run", "--executor", "slurm", "--rerun-failed", "--resume"])
        .arg(&slurm_dir)
        .current_dir(dir.path());
    for (k, v) in s.env() {
        again = again.env(k, v);
    }
    let again = again.run();
    again.assert_code(1);
    let said = again.text();
    assert!(
        said.contains("0 pending, 0 running, 1 done of 1 task"),
        "{said}\n{}",
        s.logs()
    );
    let after: Vec<String> = [(1, "one"), (1, "two"), (2, "three"), (2, "four")]
        .iter()
        .map(|(t, c)| started(*t, c))
        .collect();
    assert_eq!(after[..2], before[..2], "task 1 did not run again: {said}");
    assert_eq!(
        after[3], before[3],
        "the passing cell of task 2 kept its result"
    );
    assert_ne!(after[2], before[2], "the failed cell ran again: {said}");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(slurm_dir.join("array.json")).unwrap())
            .unwrap();
    assert_eq!(state["jobs"].as_array().unwrap().len(), 2, "{state}");
    assert_eq!(outcomes(&slurm_dir.join("report/results.json")), merged);

    // The array is one run of the history, recorded by its merged report
    // where --out says (`.rocmatrix` beside the matrix); the tasks record
    // nothing under shards/. A second array into the same history: two.
    assert!(text.contains("history: recorded run "), "{text}");
    let second = executor(&s, dir.path(), &m)
        .args(["--shards", "2", "--partition", slurm::PARTITION])
        .arg("--slurm-dir")
        .arg(dir.path().join("shared2"))
        .run();
    second.assert_code(1);
    for shared in ["shared", "shared2"] {
        let shards = dir.path().join(shared).join("shards");
        for task in std::fs::read_dir(&shards).unwrap() {
            let task = task.unwrap().path();
            assert!(
                !task.join("history.sqlite").exists(),
                "{} has a history of its own",
                task.display()
            );
        }
    }
    let recorded: serde_json::Value = serde_json::from_str(
        &crate::harness::Rocmatrix::new()
            .args(["history", "--json", "--out"])
            .arg(dir.path().join(".rocmatrix"))
            .run()
            .assert_success()
            .stdout(),
    )
    .unwrap();
    let recorded = recorded.as_array().unwrap();
    assert_eq!(recorded.len(), 2, "{recorded:#?}\n{}", second.text());
    assert!(
        recorded
            .iter()
            .all(|r| r["run"].as_str().unwrap().contains('+')),
        "each array is one run of its shards' ids joined: {recorded:#?}"
    );
}

/// `--triage` with `--executor slurm` is refused before anything is
/// submitted (no cluster needed): a triage probes one run store, an array
/// leaves one per shard.
#[test]
fn triage_with_the_slurm_executor_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let m = crate::harness::write(dir.path(), "m.yaml", ARRAY_MATRIX);
    let o = crate::harness::Rocmatrix::run_matrix(&m)
        .args(["--executor", "slurm", "--triage", "--baseline"])
        .arg(dir.path())
        .arg("--slurm-dir")
        .arg(dir.path().join("shared"))
        .run();
    o.assert_code(2);
    assert!(
        o.stderr()
            .contains("--triage is not supported with --executor slurm"),
        "{}",
        o.text()
    );
    assert!(!dir.path().join("shared").exists());
}

/// `rocmatrix run M --executor slurm …` against the cluster `s`, in `dir`.
fn executor(s: &Slurm, dir: &std::path::Path, m: &std::path::Path) -> crate::harness::Rocmatrix {
    let mut cmd = crate::harness::Rocmatrix::run_matrix(m)
        .args(["--executor", "slurm"])
        .current_dir(dir);
    for (k, v) in s.env() {
        cmd = cmd.env(k, v);
    }
    cmd
}

/// What cannot be submitted is a clear error before anything runs, naming
/// the cells: no sbatch (3), a partition or a gres type the cluster does
/// not have (2: sbatch's own words).
#[test]
fn what_slurm_cannot_run_is_refused_naming_the_cells() {
    let Some(s) = Slurm::start("slurm refusals") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let m = crate::harness::write(dir.path(), "m.yaml", GPU_MATRIX);
    let d = |name: &str| dir.path().join(name).display().to_string();

    let ran = executor(&s, dir.path(), &m)
        .args(["--only", "gfx=gfx1100", "--slurm-dir", &d("a")])
        .env("PATH", "/nonexistent")
        .run();
    ran.assert_code(3);
    let err = ran.stderr();
    assert!(err.contains("`sbatch` cannot be run"), "{err}");
    assert!(
        err.contains("cells gfx1100.bookworm, gfx1100.trixie not run"),
        "{err}"
    );

    let ran = executor(&s, dir.path(), &m)
        .args([
            "--only",
            "gfx=gfx1100",
            "--partition",
            "nope",
            "--slurm-dir",
            &d("b"),
        ])
        .run();
    ran.assert_code(2);
    let err = ran.stderr();
    assert!(err.contains("sbatch refused the array"), "{err}");
    assert!(err.to_lowercase().contains("invalid partition"), "{err}");
    assert!(err.contains("gfx1100.bookworm"), "{err}");

    // gfx942 mapped to a gres type no node has.
    let other = GPU_MATRIX.replace("gfx942: fake", "gfx942: mi300x");
    let m2 = crate::harness::write(dir.path(), "m2.yaml", &other);
    let ran = executor(&s, dir.path(), &m2)
        .args(["--only", "gfx=gfx942", "--slurm-dir", &d("c")])
        .run();
    ran.assert_code(2);
    let err = ran.stderr();
    assert!(
        err.contains("sbatch refused the array (cells gfx942.bookworm, gfx942.trixie not run)"),
        "{err}"
    );
    assert!(s.job_states().is_empty(), "{:?}", s.job_states());
}

/// Two cells; `slow` sleeps on its first attempt only (a cache volume of
/// the test's own remembers the attempt).
fn interrupt_matrix(key: &str) -> String {
    format!(
        r#"name: interrupt
matrix:
  case: [quick, slow]
environment:
  base: debian:bookworm
retries: 0
cache:
  - path: /state
    key: "{key}"
steps:
  - name: work
    run: |
      if [ {{{{ matrix.case }}}} = slow ] && [ ! -e /state/once ]; then
        touch /state/once; echo sleeping; sleep 600
      fi
      echo done
"#
    )
}

/// Marks the slow cell's first attempt in its cache volume from outside
/// (read from the shard's plan), so the next attempt is quick whether or
/// not the cut-short one got to its first command.
fn mark_attempt(slurm_dir: &std::path::Path) {
    let runs = slurm_dir.join("shards/2/runs");
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("plan.json")).unwrap()).unwrap();
    let volume = plan["cells"][0]["caches"][0]["volume"]
        .as_str()
        .unwrap()
        .to_string();
    let out = crate::harness::docker::docker([
        "run",
        "--rm",
        "-v",
        &format!("{volume}:/state"),
        "debian:bookworm",
        "touch",
        "/state/once",
    ]);
    assert!(out.status.success(), "{out:?}");
}

/// Ctrl-C cancels the array (scancel) and says so; the cell its task did
/// not finish is `error`; `--resume` submits only that task again, and
/// the merged report then has every cell passed.
#[test]
fn sigint_cancels_the_array_and_resume_submits_only_the_unfinished_task() {
    let Some(_engine) = crate::harness::engine_or_skip("slurm interrupt") else {
        return;
    };
    let Some(s) = Slurm::start("slurm interrupt") else {
        return;
    };
    crate::harness::bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let key = format!(
        "slurm-interrupt-{}",
        dir.path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace('.', "")
    );
    let m = crate::harness::write(dir.path(), "m.yaml", &interrupt_matrix(&key));
    let slurm_dir = dir.path().join("shared");
    let child = executor(&s, dir.path(), &m)
        .args(["--shards", "2"])
        .arg("--slurm-dir")
        .arg(&slurm_dir)
        .spawn();
    let deadline = Instant::now() + Duration::from_secs(240);
    // Task 2's progress says when the slow cell's step runs (its first
    // command marks the attempt in the volume).
    let task2 = || std::fs::read_to_string(slurm_dir.join("logs/2.out")).unwrap_or_default();
    while !task2().contains("slow: step 1/1 work") {
        assert!(
            Instant::now() < deadline,
            "the slow cell did not start in 240 s\ntask 2: {}\n{}",
            task2(),
            s.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // And the quick task has finished (its summary's last line).
    let task1 = || std::fs::read_to_string(slurm_dir.join("logs/1.out")).unwrap_or_default();
    wait_until("the quick task", &s, || task1().contains("run store:"));
    let pid = child.id();
    assert!(std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let out = wait_output(child, Duration::from_secs(180));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(130), "{text}\n{}", s.logs());
    assert!(
        text.contains("interrupted: cancelled Slurm array job"),
        "{text}"
    );
    assert!(text.contains("--executor slurm"), "{text}");
    assert!(s.job_states().is_empty(), "{:?}", s.job_states());
    let merged = outcomes(&slurm_dir.join("report/results.json"));
    let status = |o: &[Outcome], id: &str| {
        o.iter()
            .find(|c| c.0 == format!("\"{id}\""))
            .map(|c| c.1.clone())
            .unwrap_or_default()
    };
    assert_eq!(status(&merged, "quick"), "\"passed\"", "{text}");
    assert_eq!(status(&merged, "slow"), "\"error\"", "{text}");
    mark_attempt(&slurm_dir);

    let mut resume = crate::harness::Rocmatrix::new()
        .args(["run", "--executor", "slurm", "--resume"])
        .arg(&slurm_dir)
        .current_dir(dir.path());
    for (k, v) in s.env() {
        resume = resume.env(k, v);
    }
    let out = wait_output(resume.spawn(), Duration::from_secs(240));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("0 pending, 0 running, 1 done of 1 tasks"),
        "{text}"
    );
    let merged = outcomes(&slurm_dir.join("report/results.json"));
    assert_eq!(status(&merged, "quick"), "\"passed\"", "{text}");
    assert_eq!(status(&merged, "slow"), "\"passed\"", "{text}");
    // Task 1 was not run again: still its one run store.
    let runs = std::fs::read_dir(slurm_dir.join("shards/1/runs"))
        .unwrap()
        .count();
    assert_eq!(runs, 1);
}

/// The output of `child`, killing it after `limit` (a "no hang" deadline).
fn wait_output(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

/// Inside an array task, rocmatrix leases only the GPU Slurm gave the
/// job: of a node with two GPUs (a real-format KFD topology of a gfx1103
/// APU and a gfx1102 card, and stand-in device nodes), a task given one
/// (`--gres=gpu:1`) runs the cell of that GPU's target, and the cell of
/// the other is skipped: that GPU is not the task's, though it is on the
/// node.
#[test]
fn a_task_leases_only_the_gpu_slurm_gave_it() {
    let test = "slurm GPU share";
    let Some(_engine) = crate::harness::engine_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    if !crate::harness::stand_in_nodes(&dev, &["kfd", "dri/renderD128", "dri/renderD129"])
        && crate::harness::unavailable(test, "mknod needs root")
    {
        return;
    }
    let Some(s) = Slurm::start(test) else {
        return;
    };
    crate::harness::bases::ensure("bookworm");
    let sysfs =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kfd/apu-dgpu");
    let m = crate::harness::write(
        dir.path(),
        "m.yaml",
        "name: share\nmatrix:\n  gfx: [gfx1103, gfx1102]\nenvironment:\n  base: debian:bookworm\ngpu:\n  need: required\n  target: '{{ matrix.gfx }}'\n  policy: exact\nsteps:\n  - name: devices\n    run: |\n      ls /dev/dri\n      echo \"visible=$ROCR_VISIBLE_DEVICES\"\n",
    );
    let slurm_dir = dir.path().join("shared");
    let ran = executor(&s, dir.path(), &m)
        .args(["--shards", "1"])
        .arg("--sysfs-root")
        .arg(&sysfs)
        .arg("--dev-root")
        .arg(&dev)
        .arg("--slurm-dir")
        .arg(&slurm_dir)
        .run();
    ran.assert_success();
    let text = ran.text();
    let script = std::fs::read_to_string(slurm_dir.join("array.sh")).unwrap();
    assert!(script.contains("#SBATCH --gres=gpu:1\n"), "{script}");
    let store = std::fs::read_dir(slurm_dir.join("shards/1/runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let cells: Vec<serde_json::Value> = ["gfx1103", "gfx1102"]
        .iter()
        .map(|c| crate::harness::cell_json(&store, c))
        .collect();
    let passed: Vec<&serde_json::Value> =
        cells.iter().filter(|c| c["status"] == "passed").collect();
    let skipped: Vec<&serde_json::Value> =
        cells.iter().filter(|c| c["status"] == "skipped").collect();
    assert_eq!((passed.len(), skipped.len()), (1, 1), "{text}\n{cells:#?}");
    let tail = passed[0]["steps"][0]["log_tail"].as_str().unwrap();
    assert_eq!(
        tail.lines().filter(|l| l.starts_with("renderD")).count(),
        1,
        "only the given GPU's render node: {tail}"
    );
    let reason = skipped[0]["reason"].as_str().unwrap();
    let other = skipped[0]["values"]["gfx"].as_str().unwrap();
    assert!(reason.contains(&format!("no {other} GPU")), "{reason}");
}

/// Collects a child's stderr as it comes, for waiting on a line.
fn stderr_reader(child: &mut std::process::Child) -> std::sync::Arc<std::sync::Mutex<String>> {
    use std::io::Read;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut err = child.stderr.take().unwrap();
    let into = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    seen
}

/// Waits (bounded) until `what` holds.
fn wait_until(what: &str, s: &Slurm, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(240);
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "{what}: not in 240 s\n{}",
            s.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A controller killed while its array runs is resumed from the shared
/// directory: the new one follows the task still running instead of
/// submitting it again. That task, killed mid-run (scancel), leaves its
/// cell `error` (exit 3, saying how the task ended); the next `--resume`
/// submits only it, and everything passes.
#[test]
fn a_lost_controller_resumes_and_a_killed_task_is_error_then_rerun() {
    let Some(_engine) = crate::harness::engine_or_skip("slurm lost controller") else {
        return;
    };
    let Some(s) = Slurm::start("slurm lost controller") else {
        return;
    };
    crate::harness::bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let key = format!(
        "slurm-lost-{}",
        dir.path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace('.', "")
    );
    let m = crate::harness::write(dir.path(), "m.yaml", &interrupt_matrix(&key));
    let slurm_dir = dir.path().join("shared");
    let mut first = executor(&s, dir.path(), &m)
        .args(["--shards", "2"])
        .arg("--slurm-dir")
        .arg(&slurm_dir)
        .spawn();
    let task2 = || std::fs::read_to_string(slurm_dir.join("logs/2.out")).unwrap_or_default();
    wait_until("the slow cell's step", &s, || {
        task2().contains("slow: step 1/1 work")
    });
    // The controller is lost; its array runs on.
    first.kill().unwrap();
    let _ = first.wait();
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(slurm_dir.join("array.json")).unwrap())
            .unwrap();
    let job = state["jobs"][0].as_str().unwrap().to_string();

    let resume = || {
        let mut r = crate::harness::Rocmatrix::new()
            .args(["run", "--executor", "slurm", "--resume"])
            .arg(&slurm_dir)
            .current_dir(dir.path());
        for (k, v) in s.env() {
            r = r.env(k, v);
        }
        r
    };
    let mut second = resume().spawn();
    let said = stderr_reader(&mut second);
    wait_until("the resumed controller following the array", &s, || {
        said.lock()
            .unwrap()
            .contains(&format!("following array job {job}"))
    });
    // The task is killed mid-run.
    let out = s
        .client("scancel")
        .arg(format!("{job}_2"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = wait_output(second, Duration::from_secs(180));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        said.lock().unwrap()
    );
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains(&format!("slurm: task 2 (job {job}_2) ended CANCELLED")),
        "{text}"
    );
    let merged = outcomes(&slurm_dir.join("report/results.json"));
    let status = |o: &[Outcome], id: &str| {
        o.iter()
            .find(|c| c.0 == format!("\"{id}\""))
            .map(|c| c.1.clone())
            .unwrap_or_default()
    };
    assert_eq!(status(&merged, "slow"), "\"error\"", "{text}");
    assert_eq!(status(&merged, "quick"), "\"passed\"", "{text}");
    mark_attempt(&slurm_dir);

    let out = wait_output(resume().spawn(), Duration::from_secs(240));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("done of 1 tasks"), "{text}");
    let merged = outcomes(&slurm_dir.join("report/results.json"));
    assert_eq!(status(&merged, "slow"), "\"passed\"", "{text}");
}
