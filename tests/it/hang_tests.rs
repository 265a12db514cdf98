//! Hangs that explain themselves (`backtrace: {on: timeout}`) on the real
//! engine: a C program stuck in a busy loop two calls deep, run as the
//! container's main process and by exec after a test suite, and a
//! googletest test that hangs past its per-test timeout; gdb attaches
//! before the kill, and the frames (file:line) come back in the step
//! record, the test's JUnit error and `explain`, with one signature per
//! hang across cells. Without gdb in the image, or with a gdb that never
//! ends, the step still ends at its timeout and the note says why.

use std::path::Path;

use serde_json::Value;

use crate::harness::*;
use rocmatrix::matrix_file::Spec;
use rocmatrix::plan::Plan;

/// Cells: `spin-*` hang in their first step (the main process), `gtest-*`
/// in a googletest test and then in a step run by exec; `nogdb` has no
/// gdb, `stuckgdb` a gdb that never ends and holds its output open.
const MATRIX: &str = r#"name: hangs
matrix:
  cell: [spin-a, spin-b, nogdb, stuckgdb, gtest-a, gtest-b]
environment:
  base: "debian:bookworm"
  packages: [gcc, g++, libc6-dev, libgtest-dev, gdb]
retries: 0
build:
  steps:
    - name: compile
      run: |
        mkdir -p /work/src /work/bin && cd /work/src
        cat > spin.c <<'C'
        volatile int done = 0;
        int spin(int n) { while (!done) n++; return n; }
        int work(int n) { return spin(n) * 2; }
        int main(void) { return work(1); }
        C
        cat > hang.cpp <<'CPP'
        #include <gtest/gtest.h>
        volatile int ready = 0;
        int poll_device(int n) { while (!ready) n++; return n; }
        int wait_for_device(int n) { return poll_device(n) + 1; }
        TEST(Hang, Forever) { EXPECT_EQ(wait_for_device(1), 0); }
        TEST(Hang, Fine) { EXPECT_EQ(1, 1); }
        CPP
        gcc -g -O0 -o /work/bin/spin spin.c
        g++ -g -O0 -o /work/bin/hang hang.cpp -lgtest -lgtest_main -pthread
steps:
  - name: spin
    timeout: 5s
    backtrace: {on: [error, timeout], timeout: 20s}
    run: |
      {% if matrix.cell == 'nogdb' %}rm -f "$(command -v gdb)"{% endif %}
      {% if matrix.cell == 'stuckgdb' %}printf '#!/bin/sh\nsetsid sleep 1000 &\nexec sleep 1000\n' > /usr/local/bin/gdb && chmod +x /usr/local/bin/gdb{% endif %}
      {% if 'gtest' not in matrix.cell %}/work/bin/spin{% endif %}
  - name: tests
    continue_on_error: true
    backtrace: {on: timeout, timeout: 20s}
    gtest:
      binary: /work/bin/hang
      timeout_per_test: 5s
  - name: after
    timeout: 5s
    backtrace: {on: timeout, timeout: 20s}
    run: /work/bin/spin
"#;

fn plan(text: &str) -> Result<Plan, String> {
    let s = Spec::parse(Path::new("m.yaml"), text).map_err(|e| e.to_string())?;
    Plan::build(&s, 4096).map_err(|e| e.to_string())
}

#[test]
fn backtrace_on_takes_a_word_or_a_list_and_refuses_others_with_their_line() {
    let p = plan(MATRIX).unwrap();
    let bt = p.cells[0].steps[0].backtrace.as_ref().unwrap();
    assert_eq!(bt.on, Some(rocmatrix::matrix_file::BacktraceOn::Error));
    assert!(bt.on_timeout);
    let bt = p.cells[0].steps[1].backtrace.as_ref().unwrap();
    assert_eq!((bt.on, bt.on_timeout), (None, true));
    for (from, to, want) in [
        (
            "on: timeout, timeout: 20s}\n    gtest",
            "on: hang, timeout: 20s}\n    gtest",
            "backtrace.on must be error or crash, not `hang` (or timeout, or a list of them: [error, timeout])",
        ),
        (
            "on: [error, timeout]",
            "on: [error, timeout, soon]",
            "not `soon`",
        ),
        (
            "on: [error, timeout]",
            "on: [error, crash]",
            "error already covers a crash",
        ),
        ("on: [error, timeout]", "on: []", "needs at least one of"),
    ] {
        let text = MATRIX.replacen(from, to, 1);
        let e = plan(&text)
            .err()
            .unwrap_or_else(|| panic!("accepted:\n{text}"));
        assert!(e.contains(want), "{want}: {e}");
        assert!(e.contains("m.yaml:"), "{e}");
    }
    // The word's own line.
    let e = plan(&MATRIX.replacen("on: [error, timeout]", "on: [error, timeout, soon]", 1))
        .unwrap_err();
    assert!(e.contains("m.yaml:32:"), "{e}");
}

/// The signature of `run` (as `explain --json` gives them) whose text
/// holds `text`.
fn signature_with(run: &Path, text: &str) -> Value {
    let sigs: Value = serde_json::from_str(
        &Rocmatrix::new()
            .arg("explain")
            .arg(run)
            .arg("--json")
            .run()
            .stdout(),
    )
    .unwrap();
    sigs.as_array()
        .unwrap()
        .iter()
        .find(|s| s["text"].as_str().unwrap().contains(text))
        .unwrap_or_else(|| panic!("no signature with {text}: {sigs:#}"))
        .clone()
}

/// The step hung in `spin ← work ← main`, with files and lines.
fn assert_spin_frames(cell: &Value, name: &str) {
    let s = step_of(cell, name);
    assert_eq!(s["status"], "timeout", "{s}");
    // No hang: the kill came soon after the timeout and gdb's look.
    assert!(s["duration_secs"].as_f64().unwrap() < 90.0, "{s}");
    let bt = &s["backtrace"];
    assert_eq!(bt["debug_info"], true, "{bt}");
    let stop = &bt["stops"][0];
    assert!(
        stop["at"].as_str().unwrap().starts_with("hang: pid "),
        "{bt}"
    );
    assert_eq!(frame_functions(stop)[..3], ["spin", "work", "main"], "{bt}");
    assert!(
        stop["frames"][0]["file"]
            .as_str()
            .unwrap()
            .ends_with("spin.c"),
        "{bt}"
    );
    assert_eq!(stop["frames"][0]["line"], 2, "{bt}");
    assert_eq!(stop["frames"][1]["line"], 3, "{bt}");
    assert_eq!(stop["frames"][2]["line"], 4, "{bt}");
    assert!(
        bt["command"].as_str().unwrap().contains("/work/bin/spin"),
        "{bt}"
    );
}

#[test]
fn hung_steps_and_tests_come_back_with_their_frames_for_real() {
    let Some(_engine) = engine_or_skip("hung_steps_and_tests_come_back_with_their_frames_for_real")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "hangs.yaml", MATRIX);
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("store"))
        .run();
    o.assert_code(1);
    let run = o.run_store();

    // The main process's step and the exec'd one: frames with file:line.
    for c in ["spin-a", "spin-b"] {
        let cell = cell_json(&run, c);
        assert_eq!(cell["status"], "timeout", "{cell}");
        assert_spin_frames(&cell, "spin");
        let log =
            std::fs::read_to_string(run.join("cells").join(c).join("logs/01-spin.log")).unwrap();
        assert!(log.contains("attaching gdb to its processes"), "{log}");
        assert!(log.contains("#1 work at "), "{log}");
        // The container had CAP_SYS_PTRACE (bit 19) for gdb's attach.
        let raw = std::fs::read_to_string(run.join("cells").join(c).join("backtraces/01-spin.txt"))
            .unwrap();
        let cap = raw
            .split("cap=")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .unwrap();
        assert_ne!(
            u64::from_str_radix(cap, 16).unwrap() & (1 << 19),
            0,
            "{raw}"
        );
    }
    for c in ["gtest-a", "gtest-b"] {
        let cell = cell_json(&run, c);
        assert_spin_frames(&cell, "after");
        // The hung test: its frames in its JUnit error, the other passed.
        let junit =
            std::fs::read_to_string(run.join("cells").join(c).join("junit/02-tests/gtest.xml"))
                .unwrap_or_else(|e| panic!("{c}: {e}"));
        assert!(
            junit.contains("timed out after 5 s (timeout_per_test)"),
            "{junit}"
        );
        assert!(
            junit.contains(
                "rocmatrix: hung in poll_device ← wait_for_device ← Hang_Forever_Test::TestBody"
            ),
            "{junit}"
        );
        assert!(junit.contains("backtrace (gdb):"), "{junit}");
        assert!(junit.contains("#0 poll_device at "), "{junit}");
        assert!(junit.contains("hang.cpp:3"), "{junit}");
        assert!(junit.contains("#1 wait_for_device at "), "{junit}");
    }

    // No gdb: the step ended at its timeout, and the note says why.
    let nogdb = cell_json(&run, "nogdb");
    let s = step_of(&nogdb, "spin");
    assert_eq!(s["status"], "timeout", "{s}");
    let note = s["backtrace"]["note"].as_str().unwrap();
    assert!(note.contains("gdb is not installed"), "{note}");
    assert!(note.contains("(spin)"), "{note}");
    // A gdb that never ends, and leaves a process of another session
    // holding its output open (gdb's own `timeout` cannot end that): the
    // exec is cut off at its bound, then the kill, with a generous
    // deadline for "no hang".
    let stuck = cell_json(&run, "stuckgdb");
    let s = step_of(&stuck, "spin");
    assert_eq!(s["status"], "timeout", "{s}");
    assert!(s["duration_secs"].as_f64().unwrap() < 120.0, "{s}");
    let note = s["backtrace"]["note"].as_str().unwrap();
    assert!(note.contains("ran out of time"), "{note}");

    // One signature per hang across its cells, named by where it hung.
    let sig = |text: &str| signature_with(&run, text);
    let spin = sig("hung in spin ← work ← main");
    assert_eq!(
        spin["cells"],
        serde_json::json!(["spin-a", "spin-b"]),
        "{spin}"
    );
    assert!(
        spin["frames"][1].as_str().unwrap().contains("spin at "),
        "{spin}"
    );
    let test = sig("hung in poll_device ← wait_for_device");
    assert_eq!(
        test["cells"],
        serde_json::json!(["gtest-a", "gtest-b"]),
        "{test}"
    );
    let explain = Rocmatrix::new().arg("explain").arg(&run).run();
    explain.assert_success();
    let text = explain.stdout();
    assert!(text.contains("stopped at hang: pid "), "{text}");
    assert!(text.contains("#2 main at "), "{text}");
}

/// A build step that hangs: its frames in the build's record and in each
/// cell that starts from it, gdb's output linked into the cells, and one
/// signature for the hang in both cells. The same build crashing, with
/// `on: error`: the crash's frames, as a cell's step gets them.
const HUNG_BUILD: &str = r#"name: hung-build
matrix:
  cell: [a, b]
environment:
  base: "debian:bookworm"
  packages: [gcc, libc6-dev, gdb]
retries: 0
build:
  steps:
    - name: compile
      timeout: 5s
      backtrace: {on: timeout, timeout: 20s}
      run: |
        mkdir -p /work/src /work/bin && cd /work/src
        cat > spin.c <<'C'
        volatile int done = 0;
        int spin(int n) { while (!done) n++; return n; }
        int work(int n) { return spin(n) * 2; }
        int main(void) { return work(1); }
        C
        gcc -g -O0 -o /work/bin/spin spin.c
        /work/bin/spin
steps:
  - name: use
    run: /work/bin/spin
"#;

#[test]
fn a_hung_build_step_comes_back_with_its_frames_in_every_cell() {
    let Some(_engine) =
        engine_or_skip("a_hung_build_step_comes_back_with_its_frames_in_every_cell")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "hung-build.yaml", HUNG_BUILD);
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("store"))
        .run();
    assert_ne!(o.code(), 0, "{}", o.stdout());
    let run = o.run_store();
    let builds: Vec<_> = std::fs::read_dir(run.join("builds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(builds.len(), 1, "{builds:?}");
    let build: Value =
        serde_json::from_str(&std::fs::read_to_string(builds[0].join("build.json")).unwrap())
            .unwrap();
    assert_spin_frames(&build, "compile");
    let log = std::fs::read_to_string(builds[0].join("logs/01-compile.log")).unwrap();
    assert!(log.contains("attaching gdb to its processes"), "{log}");
    for c in ["a", "b"] {
        let cell = cell_json(&run, c);
        assert_spin_frames(&cell, "build: compile");
        let artifact = step_of(&cell, "build: compile")["backtrace"]["artifact"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(artifact, "backtraces/build-01-compile.txt");
        let raw = std::fs::read_to_string(run.join("cells").join(c).join(&artifact)).unwrap();
        assert!(raw.contains("spin.c:2"), "{raw}");
    }
    let hang = signature_with(&run, "hung in spin ← work ← main");
    assert_eq!(hang["cells"], serde_json::json!(["a", "b"]), "{hang}");

    // The build crashes instead: its failing command runs again under gdb.
    let crash = HUNG_BUILD
        .replace(
            "backtrace: {on: timeout, timeout: 20s}",
            "backtrace: {on: error}",
        )
        .replace(
            "while (!done) n++; return n;",
            "return *(volatile int *)0 + n;",
        );
    let m = write(dir.path(), "crashed-build.yaml", &crash);
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("crashed"))
        .run();
    assert_ne!(o.code(), 0, "{}", o.stdout());
    let run = o.run_store();
    for c in ["a", "b"] {
        let cell = cell_json(&run, c);
        let s = step_of(&cell, "build: compile");
        assert_eq!(s["status"], "failed", "{s}");
        let stop = &s["backtrace"]["stops"][0];
        assert!(stop["at"].as_str().unwrap().contains("SIGSEGV"), "{s}");
        assert_eq!(frame_functions(stop)[..3], ["spin", "work", "main"], "{s}");
        let artifact = s["backtrace"]["artifact"].as_str().unwrap();
        assert!(run.join("cells").join(c).join(artifact).is_file(), "{s}");
    }
}
