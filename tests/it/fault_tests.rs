//! Faults, tried as a GPU test farm meets them, against a private Docker
//! engine each test starts ([`PrivateEngine`]: its own data root, exec
//! root, socket, pidfile and bridge; the machine's engine is not touched):
//! the engine frozen (`SIGSTOP`) or killed mid-step, signals while it is
//! frozen, a torn journal, two runs of one matrix at once, an interrupted
//! image build. Each asserts the outcome, the exit code, a time bound and
//! that nothing of another run was touched.
//!
//! Tests of this module run one at a time (each freezes or kills an engine
//! and times what follows); `ROCMATRIX_ENGINE_DEADLINE` is lowered so that
//! the bounds are seconds, not the default half minute.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::private_engine::PrivateEngine;
use crate::harness::{bases, cell_json, engine_or_skip, unavailable, write, Rocmatrix};

/// One fault test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The engine-call deadline the tests run under (seconds).
const DEADLINE: u64 = 5;

struct Setup {
    engine: PrivateEngine,
    dir: tempfile::TempDir,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// A private engine with `debian:sid`, or `None` (the gate said why).
fn setup(test: &str) -> Option<Setup> {
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let _shared = engine_or_skip(test)?;
    let base = bases::ensure("sid");
    let engine = match PrivateEngine::start() {
        Ok(e) => e,
        Err(why) => {
            unavailable(test, &format!("no private engine: {why}"));
            return None;
        }
    };
    engine.load_from_shared(&base);
    Some(Setup {
        engine,
        dir: tempfile::tempdir().unwrap(),
        _serial: serial,
    })
}

impl Setup {
    /// `rocmatrix ARGS` against the private engine, its cache beside it.
    fn rocmatrix(&self) -> Rocmatrix {
        Rocmatrix::new()
            .env("DOCKER_HOST", self.engine.host())
            .env("ROCMATRIX_CACHE", self.engine.dir.path().join("cache"))
            .env("ROCMATRIX_ENGINE_DEADLINE", DEADLINE.to_string())
            .env("NO_COLOR", "1")
    }

    fn matrix(&self, name: &str, body: &str) -> PathBuf {
        write(
            self.dir.path(),
            &format!("{name}.yaml"),
            &format!(
                "name: {name}\nmatrix:\n  x: [a, b]\nenvironment:\n  base: debian:sid\n{body}"
            ),
        )
    }

    /// Containers of the private engine: (id, labels).
    fn containers(&self) -> Vec<(String, serde_json::Map<String, Value>)> {
        let o = self.engine.docker(&["ps", "-a", "--format", "{{.ID}}"]);
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .filter_map(|id| {
                let o = self
                    .engine
                    .docker(&["inspect", "--format", "{{json .Config.Labels}}", id]);
                // Gone between `ps` and `inspect`: the engine removes an
                // interrupted build's intermediate container on its own.
                if !o.status.success() {
                    return None;
                }
                let labels: Option<serde_json::Map<String, Value>> =
                    serde_json::from_slice(&o.stdout).unwrap_or_default();
                Some((id.to_string(), labels.unwrap_or_default()))
            })
            .collect()
    }
}

/// The single run directory under `out`.
fn run_dir(out: &Path) -> PathBuf {
    crate::harness::run_dir(out)
}

/// Waits until `journal.jsonl` under `out` has `n` lines containing `what`.
fn wait_for_journal(out: &Path, what: &str, n: usize, limit: Duration, child: &mut Child) {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Ok(Some(s)) = child.try_wait() {
            panic!(
                "rocmatrix ended ({s}) before {n} `{what}` events: {}",
                output(child)
            );
        }
        let text = std::fs::read_dir(out.join("runs"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .and_then(|e| std::fs::read_to_string(e.path().join("journal.jsonl")).ok())
            .unwrap_or_default();
        if text.matches(what).count() >= n {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no {n} `{what}` events within {limit:?}");
}

/// Waits until both cells of a fault matrix have started their step.
fn both_steps_started(out: &Path, child: &mut Child) {
    wait_for_journal(out, "\"step_started\"", 2, Duration::from_secs(240), child);
}

fn output(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// Waits for `child` at most `limit`: (exit code, time taken, stderr).
fn wait(child: &mut Child, limit: Duration) -> (Option<i32>, Duration, String) {
    let t0 = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return (status.code(), t0.elapsed(), output(child));
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rocmatrix still running after {limit:?}: {}", output(child));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn journal_parses(run: &Path) {
    let text = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    assert!(text.ends_with('\n'));
    for (i, line) in text.lines().enumerate() {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("journal line {}: {e}: {line}", i + 1));
    }
}

const STEP: &str = "steps:\n  - name: work\n    run: 'sleep 6; echo done'\n    timeout: 20s\n";

/// A frozen engine (SIGSTOP) mid-step: noticed within the deadline, the
/// cells recorded `error` with words that say so, exit 3 well inside two
/// minutes; resume (after the engine thaws, and with the journal's last
/// line torn as a killed writer leaves it) runs them again and passes,
/// and the frozen run's containers are swept.
#[test]
fn a_frozen_engine_ends_the_run_with_exit_3_and_resume_reruns_its_cells() {
    let Some(s) = setup("a_frozen_engine_ends_the_run_with_exit_3_and_resume_reruns_its_cells")
    else {
        return;
    };
    let m = s.matrix("frozen", STEP);
    let out = s.dir.path().join("out");
    let mut child = s
        .rocmatrix()
        .arg("run")
        .arg(&m)
        .out(&out)
        .progress_plain()
        .spawn();
    both_steps_started(&out, &mut child);
    s.engine.signal(libc::SIGSTOP);
    let (code, took, err) = wait(&mut child, Duration::from_secs(120));
    s.engine.signal(libc::SIGCONT);
    eprintln!("frozen engine: exit {code:?} {took:?} after the freeze");
    assert_eq!(code, Some(3), "{err}");
    assert!(
        took < Duration::from_secs(DEADLINE + 30),
        "noticed after {took:?}: {err}"
    );
    assert!(
        !err.contains('\u{1b}'),
        "terminal escapes in plain output: {err:?}"
    );
    let run = run_dir(&out);
    for cell in ["a", "b"] {
        let c = cell_json(&run, cell);
        assert_eq!(c["status"], "error", "{c}");
        let reason = c["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("has not answered for"), "{reason}");
        assert!(reason.contains(&s.engine.host()), "{reason}");
    }
    journal_parses(&run);

    // A writer killed mid-line.
    let journal = run.join("journal.jsonl");
    let mut text = std::fs::read_to_string(&journal).unwrap();
    text.push_str("{\"event\":\"cell_fin");
    std::fs::write(&journal, text).unwrap();
    let ran = s
        .rocmatrix()
        .args(["run", "--resume"])
        .arg(&run)
        .out(&out)
        .progress_plain()
        .run();
    ran.assert_code(0);
    assert!(ran.stderr().contains("was incomplete"), "{}", ran.stderr());
    journal_parses(&run);
    for cell in ["a", "b"] {
        assert_eq!(cell_json(&run, cell)["status"], "passed");
    }
    let left: Vec<_> = s
        .containers()
        .into_iter()
        .filter(|(_, l)| l.contains_key("rocmatrix.run"))
        .collect();
    assert!(left.is_empty(), "containers left: {left:?}");
    let leftovers: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// A killed engine: the cells' errors say it went away, exit 3 in seconds.
#[test]
fn a_killed_engine_is_named_as_gone() {
    let Some(mut s) = setup("a_killed_engine_is_named_as_gone") else {
        return;
    };
    let m = s.matrix("killed", STEP);
    let out = s.dir.path().join("out");
    let mut child = s
        .rocmatrix()
        .arg("run")
        .arg(&m)
        .out(&out)
        .progress_plain()
        .spawn();
    both_steps_started(&out, &mut child);
    s.engine.signal(libc::SIGKILL);
    let (code, took, err) = wait(&mut child, Duration::from_secs(60));
    eprintln!("killed engine: exit {code:?} {took:?} after the kill");
    assert_eq!(code, Some(3), "{err}");
    assert!(took < Duration::from_secs(DEADLINE + 15), "{took:?}");
    assert!(err.contains("went away"), "{err}");
    let run = run_dir(&out);
    for cell in ["a", "b"] {
        assert_eq!(cell_json(&run, cell)["status"], "error");
    }
    // The finished line counts errors as errors.
    let last = err
        .lines()
        .find(|l| l.starts_with("finished:"))
        .unwrap_or_default()
        .to_string();
    assert!(
        last.contains("0 failed") && last.contains("2 errors"),
        "{last}"
    );
    s.engine.restart().expect("the engine comes back");
    let ran = s
        .rocmatrix()
        .args(["run", "--resume"])
        .arg(&run)
        .out(&out)
        .run();
    ran.assert_code(0);
}

/// Signals while the engine is frozen: the first ends the run within its
/// bound (exit 130); in a second run, a second signal quits at once and
/// names what may be left.
#[test]
fn signals_work_while_the_engine_is_frozen() {
    let Some(s) = setup("signals_work_while_the_engine_is_frozen") else {
        return;
    };
    let m = s.matrix("signals", STEP);
    let out = s.dir.path().join("out");
    // Engine calls wait this long on the frozen engine: a run that quits
    // well before it did not wait on one.
    const FROZEN_DEADLINE: u64 = 60;
    let mut child = s
        .rocmatrix()
        .env("ROCMATRIX_ENGINE_DEADLINE", FROZEN_DEADLINE.to_string())
        .arg("run")
        .arg(&m)
        .out(&out)
        .spawn();
    both_steps_started(&out, &mut child);
    s.engine.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(500));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let (code, _, err) = wait(&mut child, Duration::from_secs(2 * FROZEN_DEADLINE));
    eprintln!("second signal: exit {code:?} {:?} after it", t0.elapsed());
    // "At once": not after an engine call's deadline (wall time on a busy
    // machine says nothing finer about a debug binary).
    assert!(
        t0.elapsed() < Duration::from_secs(FROZEN_DEADLINE / 2),
        "{:?}: waited on the frozen engine",
        t0.elapsed()
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("quitting at once"), "{err}");
    let run = run_dir(&out);
    let id = run.file_name().unwrap().to_string_lossy().into_owned();
    assert!(err.contains(&format!("rocmatrix.run={id}")), "{err}");
    s.engine.signal(libc::SIGCONT);

    // One signal on a frozen engine: bounded by the engine deadline.
    let out2 = s.dir.path().join("out2");
    let mut child = s.rocmatrix().arg("run").arg(&m).out(&out2).spawn();
    both_steps_started(&out2, &mut child);
    s.engine.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(500));
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let (code, took, err) = wait(&mut child, Duration::from_secs(60));
    s.engine.signal(libc::SIGCONT);
    eprintln!("one signal, frozen engine: exit {code:?} {took:?} after it");
    assert!(matches!(code, Some(130) | Some(3)), "{code:?}: {err}");
    assert!(
        took < Duration::from_secs(4 * DEADLINE + 10),
        "{took:?}: {err}"
    );
}

/// Two runs of one matrix at once (different `--out`): the environment is
/// built once, and both locks name the image their cells ran on.
#[test]
fn two_runs_at_once_share_one_build_of_their_environment() {
    let Some(s) = setup("two_runs_at_once_share_one_build_of_their_environment") else {
        return;
    };
    let m = s.matrix(
        "twice",
        "  setup: 'sleep 4'\nsteps:\n  - name: t\n    run: 'true'\n",
    );
    let (o1, o2) = (s.dir.path().join("o1"), s.dir.path().join("o2"));
    let a = s.rocmatrix().arg("run").arg(&m).out(&o1).spawn();
    let b = s.rocmatrix().arg("run").arg(&m).out(&o2).spawn();
    for (mut c, o) in [(a, &o1), (b, &o2)] {
        let (code, _, err) = wait(&mut c, Duration::from_secs(400));
        assert_eq!(code, Some(0), "{}: {err}", o.display());
    }
    let image_of = |o: &Path| {
        let lock = crate::harness::read_json(&run_dir(o).join("lock.json"));
        let envs = lock["environments"].as_object().unwrap().clone();
        assert_eq!(envs.len(), 1);
        let img = envs.values().next().unwrap()["image"].clone();
        (
            img["tag"].as_str().unwrap().to_string(),
            img["id"].as_str().unwrap().to_string(),
        )
    };
    let (t1, id1) = image_of(&o1);
    let (t2, id2) = image_of(&o2);
    assert_eq!(t1, t2);
    assert_eq!(id1, id2, "both locks name the one image");
    let o = s
        .engine
        .docker(&["image", "inspect", "--format", "{{.Id}}", &t1]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), id1);
}

/// An image build interrupted (rocmatrix killed): whatever it left in the
/// engine carries labels the sweep reads, and `images --prune` removes it.
#[test]
fn an_interrupted_build_leaves_nothing_unlabelled() {
    let Some(s) = setup("an_interrupted_build_leaves_nothing_unlabelled") else {
        return;
    };
    let m = s.matrix(
        "interrupted",
        "  setup: 'sleep 120'\nsteps:\n  - name: t\n    run: 'true'\n",
    );
    let out = s.dir.path().join("out");
    let mut child = s.rocmatrix().arg("run").arg(&m).out(&out).spawn();
    let t0 = Instant::now();
    let building = loop {
        let c = s.containers();
        if let Some((id, labels)) = c
            .into_iter()
            .find(|(_, l)| l.contains_key("rocmatrix.builder"))
        {
            break (id, labels);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no build container appeared"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        building.1["rocmatrix.builder"].as_str().unwrap(),
        format!("{}/{}", crate::harness::label::hostname(), child.id())
    );
    let _ = child.kill();
    let _ = child.wait();
    std::thread::sleep(Duration::from_secs(1));
    for (id, labels) in s.containers() {
        assert!(
            labels.contains_key("rocmatrix.builder") || labels.contains_key("rocmatrix.run"),
            "container {id} carries no rocmatrix label: {labels:?}"
        );
    }
    let pruned = s
        .rocmatrix()
        .args(["images", "--prune", "--out"])
        .arg(&out)
        .run();
    pruned.assert_code(0);
    assert!(s.containers().is_empty(), "{}", pruned.stdout());
}

/// The `to_run` of the last `run_started` in the run's journal.
fn last_to_run(run: &Path) -> u64 {
    let text = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|v| v["event"] == "run_started")
        .and_then(|v| v["to_run"].as_u64())
        .expect("a run_started event")
}

/// `--resume` leaves a test failure alone; `--rerun-failed` runs it again.
#[test]
fn resume_reruns_a_failure_only_when_asked() {
    let Some(s) = setup("resume_reruns_a_failure_only_when_asked") else {
        return;
    };
    let m = s.matrix(
        "failing",
        "steps:\n  - name: t\n    run: '[ {{ matrix.x }} = a ]'\n",
    );
    let out = s.dir.path().join("out");
    let ran = s.rocmatrix().arg("run").arg(&m).out(&out).run();
    ran.assert_code(1);
    let run = ran.run_store();
    assert_eq!(cell_json(&run, "b")["status"], "failed");
    let resume = |extra: &[&str]| {
        s.rocmatrix()
            .args(["run", "--resume"])
            .arg(&run)
            .args(extra)
            .out(&out)
            .run()
    };
    resume(&[]).assert_code(1);
    assert_eq!(last_to_run(&run), 0, "a failure is not rerun by --resume");
    resume(&["--rerun-failed"]).assert_code(1);
    assert_eq!(last_to_run(&run), 1, "--rerun-failed runs the failed cell");
}

/// A run store on a 2 MB file system and a step printing 5 MB: exit 3
/// naming the path, in seconds; resumed after the file system grows, it
/// finishes and no temporary file is left.
#[test]
fn a_full_run_store_is_an_error_and_resume_leaves_no_temporary() {
    let Some(s) = setup("a_full_run_store_is_an_error_and_resume_leaves_no_temporary") else {
        return;
    };
    let m = s.matrix(
        "full",
        "steps:\n  - name: loud\n    run: 'head -c 5000000 /dev/zero | tr \"\\\\0\" x; echo'\n",
    );
    let out = s.dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mount = std::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=2m",
            "rocmatrix-fault",
            &out.to_string_lossy(),
        ])
        .output()
        .unwrap();
    if !mount.status.success() {
        unavailable(
            "a_full_run_store_is_an_error_and_resume_leaves_no_temporary",
            &format!(
                "cannot mount a tmpfs: {}",
                String::from_utf8_lossy(&mount.stderr)
            ),
        );
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).output();
        }
    }
    let _unmount = Unmount(out.clone());
    let t0 = Instant::now();
    let ran = s.rocmatrix().arg("run").arg(&m).out(&out).run();
    let took = t0.elapsed();
    eprintln!("full run store: exit {} after {took:?}", ran.code());
    ran.assert_code(3);
    assert!(ran.text().contains("No space left"), "{}", ran.context());
    let grown = std::process::Command::new("mount")
        .args(["-o", "remount,size=64m", &out.to_string_lossy()])
        .output()
        .unwrap();
    assert!(grown.status.success());
    let run = run_dir(&out);
    let resumed = s
        .rocmatrix()
        .args(["run", "--resume"])
        .arg(&run)
        .out(&out)
        .run();
    resumed.assert_code(0);
    let mut left = Vec::new();
    for dir in [run.clone(), run.join("cells/a"), run.join("cells/b")] {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.file_name().to_string_lossy().contains(".tmp-") {
                left.push(e.path());
            }
        }
    }
    assert!(left.is_empty(), "temporaries left: {left:?}");
    journal_parses(&run);
}
