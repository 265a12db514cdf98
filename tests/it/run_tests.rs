//! `rocmatrix run` against the real Docker engine: statuses, image reuse,
//! interruption and resume, hostile archives, an unreachable engine.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::*;

const CASES: &str = r#"name: cases
matrix:
  case: [pass, fail, timeout, skip, oom, hostile]
environment:
  base: debian:bookworm
memory: 96m
retries: 0
steps:
  - name: work
    timeout: 6s
    junit: [/work/out/*.xml]
    run: |
      mkdir -p /work/out
      junit() {
        printf '<?xml version="1.0"?>\n<testsuite name="s" tests="1" failures="%s"><testcase classname="c" name="%s">%s</testcase></testsuite>\n' "$1" "$2" "$3" > /work/out/$2.xml
      }
      case {{ matrix.case }} in
        pass) junit 0 ok "" ;;
        fail) junit 1 broken '<failure message="boom">trace</failure>'; echo failing; exit 3 ;;
        timeout) echo sleeping; sleep 600 ;;
        skip) echo "no /dev/kfd"; exit 77 ;;
        oom) head -c 1024m /dev/zero | tail > /dev/null ;;
        hostile) junit 0 fine ""; ln -s /etc/shadow /work/out/evil.xml ;;
      esac
  - name: after
    run: echo after
"#;

#[test]
fn cells_pass_fail_time_out_skip_and_oom_for_real() {
    let Some(_engine) = engine_or_skip("cells_pass_fail_time_out_skip_and_oom_for_real") else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "cases.yaml", CASES);
    let t0 = Instant::now();
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .args(["--jobs", "3"])
        .out(dir.path())
        .run();
    let out = o.stdout();
    o.assert_code(1);
    assert!(
        t0.elapsed() < Duration::from_secs(240),
        "the timeout cell was not cut short"
    );
    let run = o.run_store();

    let status = |cell: &str| {
        cell_json(&run, cell)["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(status("pass"), "passed");
    assert_eq!(status("fail"), "failed");
    assert_eq!(status("timeout"), "timeout");
    assert_eq!(status("skip"), "skipped");
    assert_eq!(status("oom"), "oom", "{:#}", cell_json(&run, "oom"));
    assert_eq!(status("hostile"), "passed");

    let fail = cell_json(&run, "fail");
    assert_eq!(fail["steps"][0]["exit_code"], 3);
    assert_eq!(fail["steps"][1]["status"], "skipped");
    assert_eq!(fail["steps"][1]["reason"], "step `work` failed");
    let junit = fail["junit"][0].as_str().unwrap();
    let copied = std::fs::read_to_string(run.join("cells/fail").join(junit)).unwrap();
    assert!(copied.contains("<failure message=\"boom\">"), "{copied}");
    assert!(fail["steps"][0]["log_tail"]
        .as_str()
        .unwrap()
        .contains("failing"));

    let timeout = cell_json(&run, "timeout");
    assert!(timeout["reason"]
        .as_str()
        .unwrap()
        .contains("timed out after 6 s"));
    let log = std::fs::read_to_string(run.join("cells/timeout/logs/01-work.log")).unwrap();
    assert!(
        log.contains("sleeping") && log.contains("timed out"),
        "{log}"
    );

    let skip = cell_json(&run, "skip");
    assert_eq!(skip["steps"][0]["exit_code"], 77);
    assert_eq!(
        skip["steps"][1]["status"], "skipped",
        "exit 77 skips the rest of the cell"
    );
    assert!(skip["reason"].as_str().unwrap().contains("exit 77"));

    // The symlink to /etc/shadow is refused; the real report is kept.
    let hostile = cell_json(&run, "hostile");
    let messages = hostile["messages"].to_string();
    assert!(
        messages.contains("/etc/shadow") && messages.contains("leaves the target"),
        "{messages}"
    );
    assert_eq!(hostile["junit"].as_array().unwrap().len(), 1);
    assert!(!run
        .join("cells/hostile/junit/01-work/work-out-evil.xml")
        .exists());

    let run_id = run.file_name().unwrap().to_str().unwrap();
    assert!(containers_of(run_id).is_empty(), "containers left behind");
    let journal = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    assert!(journal
        .lines()
        .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
    assert!(journal.contains("\"event\":\"run_finished\""));
    assert!(
        out.contains("timeout  ") && out.contains("run store:"),
        "{out}"
    );

    // A second run builds nothing.
    let o = Rocmatrix::run_matrix(&m)
        .args(["--only", "case=pass"])
        .progress_plain()
        .out(dir.path())
        .run();
    o.assert_success();
    assert!(
        o.stderr().contains("reusing rocmatrix/env:"),
        "{}",
        o.stderr()
    );
    assert!(!o.stderr().contains(": built "), "{}", o.stderr());
}

/// Scripts go to bash inline (`bash -c`) while they fit in one argument;
/// one over Linux's 128 KiB argument limit is uploaded and run from its file.
/// Both see `$0` as the step's path, so bash's messages name the step alike;
/// only the long one's exists (the short ones cost no upload).
#[test]
fn short_scripts_run_inline_and_one_over_128_kib_from_a_file() {
    let Some(_engine) = engine_or_skip("short_scripts_run_inline_and_one_over_128_kib_from_a_file")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    // 3,000 comment lines of 60 bytes: 180 KB, then the real work.
    let padding = format!("      # {}\n", "p".repeat(51)).repeat(3000);
    let big = format!(
        "  - name: big\n    run: |\n{padding}      echo \"big $0 $(( 6 * 7 ))\"; test -f \"$0\"\n"
    );
    assert!(big.len() > 128 * 1024);
    let yaml = format!(
        "name: scripts\nmatrix:\n  a: [1]\nenvironment:\n  base: debian:bookworm\nsteps:\n  \
         - name: small\n    run: echo \"small $0\"; test ! -e \"$0\"\n\
         {big}  \
         - name: missing\n    continue_on_error: true\n    run: |\n      true\n      no-such-command\n  \
         - name: after\n    run: echo after\n"
    );
    let m = write(dir.path(), "scripts.yaml", &yaml);
    let o = Rocmatrix::run_matrix(&m).out(dir.path()).run();
    o.assert_success();
    let run = o.run_store();
    let cell = cell_json(&run, "1");
    let statuses: Vec<&str> = cell["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["passed", "passed", "failed", "passed"],
        "{cell:#}"
    );
    let log = |name: &str| std::fs::read_to_string(run.join("cells/1/logs").join(name)).unwrap();
    assert_eq!(log("01-small.log"), "small /rocmatrix/steps/01-small.sh\n");
    assert_eq!(log("02-big.log"), "big /rocmatrix/steps/02-big.sh 42\n");
    let missing = log("03-missing.log");
    assert!(
        missing
            .contains("/rocmatrix/steps/03-missing.sh: line 2: no-such-command: command not found"),
        "{missing}"
    );
    assert_eq!(cell["steps"][2]["exit_code"], 127);
    assert_eq!(log("04-after.log"), "after\n");
}

/// A cell's leading plain steps run as its container's main process (as
/// `docker run` runs its command), not by exec: their output comes through
/// one pipe in the order written, and each step's JUnit file is the one it
/// wrote even when a later step overwrites it.
#[test]
fn leading_steps_run_as_the_main_process_each_with_its_own_log_and_junit() {
    let Some(_engine) =
        engine_or_skip("leading_steps_run_as_the_main_process_each_with_its_own_log_and_junit")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let junit = |name: &str| {
        format!(
            "echo '<testsuite name=\"{name}\" tests=\"1\"><testcase classname=\"c\" name=\"{name}\"/></testsuite>' > /work/r.xml"
        )
    };
    let yaml = format!(
        "name: leading\nmatrix:\n  a: [1]\nenvironment:\n  base: debian:bookworm\nsteps:\n  \
         - name: first\n    junit: [/work/r.xml]\n    run: |\n      \
         tr '\\0' ' ' < /proc/1/cmdline | grep -q rocmatrix-runner\n      \
         for i in 1 2 3; do echo out$i; echo err$i >&2; done; printf 'rocmatrix- B 1'\n      {}\n  \
         - name: second\n    junit: [/work/r.xml]\n    run: |\n      {}\n      echo \"$ROCMATRIX_STEP\"\n",
        junit("first"),
        junit("second")
    );
    let m = write(dir.path(), "leading.yaml", &yaml);
    let o = Rocmatrix::run_matrix(&m).out(dir.path()).run();
    o.assert_success();
    let run = o.run_store();
    let log = |name: &str| std::fs::read_to_string(run.join("cells/1/logs").join(name)).unwrap();
    assert_eq!(
        log("01-first.log"),
        "out1\nerr1\nout2\nerr2\nout3\nerr3\nrocmatrix- B 1"
    );
    assert_eq!(log("02-second.log"), "second\n");
    let cell = cell_json(&run, "1");
    let files: Vec<String> = cell["junit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        files,
        ["junit/01-first/work-r.xml", "junit/02-second/work-r.xml"],
        "{cell:#}"
    );
    for (file, name) in files.iter().zip(["first", "second"]) {
        let text = std::fs::read_to_string(run.join("cells/1").join(file)).unwrap();
        assert!(text.contains(&format!("name=\"{name}\"")), "{file}: {text}");
    }
}

#[test]
fn sigint_leaves_no_containers_and_resume_finishes_the_run() {
    let Some(_engine) = engine_or_skip("sigint_leaves_no_containers_and_resume_finishes_the_run")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "slow.yaml",
        "name: slow\nmatrix:\n  n: [quick, s1, s2, s3]\nenvironment:\n  base: debian:bookworm\nsteps:\n  - name: wait\n    run: |\n      if [ {{ matrix.n }} = quick ]; then exit 0; fi\n      sleep 10\n",
    );
    let child = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .args(["--jobs", "1"])
        .out(dir.path())
        .spawn();
    // Wait until the quick cell finished and a slow one is running.
    let t0 = Instant::now();
    let run = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "the run never started a slow cell"
        );
        std::thread::sleep(Duration::from_millis(200));
        let Ok(rd) = std::fs::read_dir(dir.path().join("runs")) else {
            continue;
        };
        let Some(run) = rd.filter_map(|e| e.ok()).map(|e| e.path()).next() else {
            continue;
        };
        let journal = std::fs::read_to_string(run.join("journal.jsonl")).unwrap_or_default();
        if journal.contains("\"cell\":\"s1\",\"step\":\"wait\"") {
            break run;
        }
    };
    let run_id = run.file_name().unwrap().to_str().unwrap().to_string();
    assert!(!containers_of(&run_id).is_empty(), "a cell container runs");
    // SIGINT, as Ctrl-C sends it.
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        containers_of(&run_id).is_empty(),
        "containers left after SIGINT"
    );
    assert!(stdout(&out).contains("--resume"), "{}", stdout(&out));
    let quick_before = cell_json(&run, "quick");
    assert!(!run.join("cells/s3/cell.json").exists());
    // With one job, cells start in plan order.
    let journal = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    let started: Vec<String> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "cell_started")
        .map(|e| e["cell"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        started.len() >= 2
            && ["quick", "s1", "s2", "s3"]
                .iter()
                .zip(&started)
                .all(|(want, got)| want == got),
        "{journal}"
    );

    let o = Rocmatrix::new()
        .args(["run", "--resume"])
        .arg(&run)
        .progress_plain()
        .args(["--jobs", "2"])
        .run();
    o.assert_success();
    assert!(o.stderr().contains("3 of 4 cells to run"), "{}", o.stderr());
    for c in ["quick", "s1", "s2", "s3"] {
        assert_eq!(cell_json(&run, c)["status"], "passed", "{c}");
    }
    assert_eq!(
        cell_json(&run, "quick"),
        quick_before,
        "a finished cell keeps its result"
    );
    assert!(containers_of(&run_id).is_empty());
}

#[test]
fn an_unreachable_engine_is_one_clear_line_and_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "m.yaml", "matrix:\n  a: [1]\nenvironment:\n  base: debian:bookworm\nsteps:\n  - name: s\n    run: 'true'\n");
    let o = Rocmatrix::run_matrix(&m)
        .out(dir.path())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .run();
    assert_eq!(o.status.code(), Some(3));
    let e = o.stderr();
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("unix:///nonexistent/docker.sock") && e.contains("DOCKER_HOST"),
        "{e}"
    );
    let o = Rocmatrix::run_matrix(&m)
        .out(dir.path())
        .env("DOCKER_HOST", "tcp://127.0.0.1:9")
        .run();
    assert_eq!(o.status.code(), Some(3));
    assert!(o.stderr().contains("tcp://127.0.0.1:9"), "{}", o.stderr());
}
