//! Clocks on what a run waits for (issue 34, item 7): an image build that
//! prints nothing for `ROCMATRIX_BUILD_STALL` seconds is cut as stalled,
//! while the engine still answers (a build hung on a mirror); a step run by
//! exec that ended in time while the engine held its end back (its
//! container's shim stopped) is judged by its own clock, not as a timeout.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::harness::docker::tag_for_run;
use crate::harness::*;

/// How long the hanging setup sleeps: only a cut ends the build before it.
const SETUP_SLEEP: u64 = 3600;

#[test]
fn an_image_build_that_prints_nothing_is_cut_by_its_stall_timer() {
    let Some(_engine) =
        engine_or_skip("an_image_build_that_prints_nothing_is_cut_by_its_stall_timer")
    else {
        return;
    };
    bases::ensure("sid");
    let dir = tempfile::tempdir().unwrap();
    // The setup hangs (as `apt-get` on a mirror that stopped sending)
    // while the engine answers every ping of the watchdog.
    let m = write(
        dir.path(),
        "m.yaml",
        &format!(
            "name: stall\nmatrix:\n  x: [a]\nenvironment:\n  base: debian:sid\n  suite: sid\n  \
             setup: 'sleep {SETUP_SLEEP}'\n  env:\n    STALL_NONCE: \"{}\"\nretries: 0\nsteps:\n  - name: t\n    run: 'true'\n",
            tag_for_run("stall")
        ),
    );
    let t0 = Instant::now();
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .env("ROCMATRIX_BUILD_STALL", "5")
        .out(dir.path().join("out"))
        .run();
    let took = t0.elapsed();
    o.assert_code(3);
    assert!(
        o.text()
            .contains("no output for 5 s: the build stalled and was cut"),
        "{}",
        o.context()
    );
    // Cut by the stall timer, not ended by the setup's sleep: a run that
    // outlived the sleep was not cut (a logical bound, not a speed target).
    assert!(
        took < Duration::from_secs(SETUP_SLEEP),
        "{took:?}: {}",
        o.context()
    );
    let store = o.run_store();
    let log = std::fs::read_dir(store.join("images"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.ends_with(".log") && !name.starts_with("base-") && !name.starts_with("package-")
        })
        .expect("the environment's build log");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("the build stalled"),
        "{}: {text}",
        log.display()
    );
}

/// A build step and a cell step run by exec (`rerun_failures:` keeps a step
/// out of the runner) that end in 3 s of their 5 s, and a cell step that
/// really hangs.
const HELD_BACK: &str = r#"name: held-back
matrix:
  case: [held, hang]
environment:
  base: debian:sid
  suite: sid
retries: 0
build:
  steps:
    - name: daemon
      timeout: 5s
      run: touch /tmp/begun; sleep 3; echo ended
steps:
  - name: daemon
    timeout: 5s
    rerun_failures: 1
    junit: [none/*.xml]
    run: |
      {% if matrix.case == "held" %}touch /tmp/begun; sleep 3; echo ended{% else %}touch /tmp/begun; sleep 600{% endif %}
"#;

/// The one container of `child`'s that `filter` picks, once its step has
/// begun (made `/tmp/begun`), waited for at most 4 minutes.
fn wait_for_begun(child: &mut Child, filter: &str) -> String {
    let pid_label = format!("label=rocmatrix.pid={}", child.id());
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(240) {
        if let Ok(Some(s)) = child.try_wait() {
            panic!("rocmatrix ended ({s}) before the step of {filter} began");
        }
        let o = Command::new("docker")
            .args(["ps", "-q", "--filter", &pid_label, "--filter", filter])
            .output()
            .unwrap();
        let ids = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if ids.lines().count() == 1 {
            let begun = Command::new("docker")
                .args(["exec", &ids, "test", "-e", "/tmp/begun"])
                .output()
                .unwrap();
            if begun.status.success() {
                return ids;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the step of {filter} did not begin within 4 minutes");
}

/// Holds back everything the engine hears of `container` for 9 s: its
/// containerd shim, which carries the exec's output and end, is stopped,
/// then continued. The step inside runs on.
fn hold_back(container: &str) {
    let o = Command::new("docker")
        .args(["inspect", "-f", "{{.State.Pid}}", container])
        .output()
        .unwrap();
    let init: i32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{init}/stat")).unwrap();
    // The parent's pid is the second field after the command's `)`.
    let parent = stat.rsplit(')').next().unwrap().split_whitespace().nth(1);
    let shim: i32 = parent.unwrap().parse().unwrap();
    let comm = std::fs::read_to_string(format!("/proc/{shim}/comm")).unwrap();
    assert!(
        comm.starts_with("containerd-shim"),
        "parent of {init}: {comm}"
    );
    unsafe { libc::kill(shim, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_secs(9));
    unsafe { libc::kill(shim, libc::SIGCONT) };
}

#[test]
fn a_step_by_exec_whose_end_the_engine_held_back_is_judged_by_its_own_clock() {
    let Some(_engine) =
        engine_or_skip("a_step_by_exec_whose_end_the_engine_held_back_is_judged_by_its_own_clock")
    else {
        return;
    };
    bases::ensure("sid");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "m.yaml", HELD_BACK);
    let out = dir.path().join("out");
    let mut child = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .arg("--jobs")
        .arg("1")
        .out(&out)
        .spawn();
    // The build's step, then the held cell's, each held back once it began:
    // its 5 s pass while its end cannot reach rocmatrix.
    hold_back(&wait_for_begun(&mut child, "label=rocmatrix.pid"));
    hold_back(&wait_for_begun(&mut child, "label=rocmatrix.cell=held"));
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let run = run_dir(&out);
    let own_clock = "by its own clock, exit 0";
    let builds: Vec<_> = std::fs::read_dir(run.join("builds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(builds.len(), 1, "{builds:?}");
    let build = read_json(&builds[0].join("build.json"));
    assert_eq!(build["status"], "passed", "{build:#}");
    let log = std::fs::read_to_string(builds[0].join("logs/01-daemon.log")).unwrap();
    assert!(log.contains(own_clock), "{log}");

    let cell = cell_json(&run, "held");
    let step = step_of(&cell, "daemon");
    assert_eq!(step["status"], "passed", "{cell:#}");
    assert_eq!(step["exit_code"], 0, "{cell:#}");
    let log = std::fs::read_to_string(run.join("cells/held/logs/01-daemon.log")).unwrap();
    assert!(log.contains(own_clock), "{log}");

    // A step still running at its timeout has no clock to show.
    let hang = cell_json(&run, "hang");
    let step = step_of(&hang, "daemon");
    assert_eq!(step["status"], "timeout", "{hang:#}");
    let log = std::fs::read_to_string(run.join("cells/hang/logs/01-daemon.log")).unwrap();
    assert!(!log.contains("own clock"), "{log}");
    assert!(log.contains("step timed out after 5 s"), "{log}");
}
