//! The test-suite adapters against the real engine: a googletest program
//! built in a Debian container (g++ and Debian's libgtest-dev) whose tests
//! pass, fail, skip, segfault, abort, call exit(3), hang past
//! `timeout_per_test`, are typed and value-parameterised, or fail only for
//! want of a GPU; and a suite sharded over two stand-in GPUs.

use std::path::Path;
use std::sync::Mutex;

use serde_json::Value;

use crate::harness::*;

/// The two tests share one environment image: the second waits and reuses it.
static IMAGE: Mutex<()> = Mutex::new(());

/// A matrix whose `build` step compiles `source` (a file of
/// tests/it/data/gtest/) into /work/t, then runs it through the gtest adapter.
fn gtest_matrix(source: &str, gtest_extra: &str, top_extra: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/data/gtest")
        .join(source);
    let code = std::fs::read_to_string(path).unwrap();
    let code: String = code.lines().map(|l| format!("      {l}\n")).collect();
    format!(
        "name: gtest\nmatrix:\n  os: [bookworm]\nenvironment:\n  base: debian:bookworm\n  packages: [g++, libgtest-dev]\n\
         timeout: 5m\n{top_extra}steps:\n  - name: build\n    gpu: none\n    run: |\n      cat > t.cc <<'CC'\n{code}      CC\n      \
         g++ -O0 -o /work/t t.cc -lgtest -lgtest_main -pthread\n  - name: tests\n    gtest:\n      binary: /work/t\n{gtest_extra}"
    )
}

/// The test cases of a JUnit file: (classname.name) → the element's text.
fn cases(junit: &Path) -> Vec<(String, String)> {
    let xml = std::fs::read_to_string(junit).unwrap();
    let mut out = Vec::new();
    for part in xml.split("<testcase ").skip(1) {
        let tag_end = part.find('>').unwrap_or(part.len());
        let tag = &part[..tag_end];
        let attr = |k: &str| {
            tag.strip_prefix(&format!("{k}=\""))
                .or_else(|| tag.split(&format!(" {k}=\"")).nth(1))
                .and_then(|r| r.split('"').next())
                .unwrap_or("")
                .to_string()
        };
        let name = format!("{}.{}", attr("classname"), attr("name"));
        let body = if tag.ends_with('/') {
            String::new()
        } else {
            part[tag_end..]
                .split("</testcase>")
                .next()
                .unwrap_or("")
                .to_string()
        };
        out.push((name, body));
    }
    out
}

fn case<'a>(all: &'a [(String, String)], name: &str) -> &'a str {
    let found: Vec<&(String, String)> = all.iter().filter(|(n, _)| n == name).collect();
    assert_eq!(
        found.len(),
        1,
        "{name} must have exactly one outcome: {all:#?}"
    );
    &found[0].1
}

#[test]
fn gtest_crashes_and_hangs_cost_one_test_each_and_every_test_gets_one_outcome() {
    let test = "gtest_crashes_and_hangs_cost_one_test_each_and_every_test_gets_one_outcome";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    let _image = IMAGE.lock().unwrap_or_else(|p| p.into_inner());
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "gtest.yaml",
        &gtest_matrix("crashy.cc", "      timeout_per_test: 3s\n", ""),
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("out"))
        .run();
    o.assert_code(1);
    let run = o.run_store();
    let cell = cell_json(&run, "bookworm");
    let step = &cell["steps"][1];
    assert_eq!(step["status"], "failed", "{cell:#}");
    let junit = run
        .join("cells/bookworm")
        .join(cell["junit"][0].as_str().unwrap());
    let all = cases(&junit);
    // 18 listed tests (one disabled), each exactly once.
    assert_eq!(all.len(), 18, "{all:#?}");
    for passing in [
        "Basic.Passes",
        "Crash.AfterSegfault",
        "Crash.AfterAbort",
        "Crash.AfterExit",
        "Hang.AfterHang",
        "Typed/0.ZeroIsFalse",
        "Typed/1.ZeroIsFalse",
        "Values/Param.IsSmall/0",
        "Values/Param.IsSmall/1",
    ] {
        let body = case(&all, passing);
        assert!(
            !body.contains("<failure") && !body.contains("<error") && !body.contains("<skipped"),
            "{passing}: {body}"
        );
    }
    let seg = case(&all, "Crash.Segfaults");
    assert!(
        seg.contains("type=\"SIGSEGV\"") && seg.contains("about to dereference"),
        "{seg}"
    );
    let abort = case(&all, "Crash.Aborts");
    assert!(
        abort.contains("type=\"SIGABRT\"") && abort.contains("hipErrorOutOfMemory"),
        "{abort}"
    );
    let exit = case(&all, "Crash.CallsExit");
    assert!(
        exit.contains("type=\"exit-code\"") && exit.contains("code 3"),
        "{exit}"
    );
    let hang = case(&all, "Hang.SpinsForever");
    assert!(
        hang.contains("type=\"timeout\"") && hang.contains("spinning"),
        "{hang}"
    );
    assert!(case(&all, "Basic.FailsAnAssertion").contains("GPU computed 6"));
    assert!(case(&all, "Values/Param.IsSmall/2").contains("<failure"));
    assert!(case(&all, "Values/Param.IsSmall/2").contains("GetParam() = 5"));
    assert!(case(&all, "Basic.Skips").contains("needs a feature this host lacks"));
    assert!(case(&all, "Basic.DISABLED_NeverRuns").contains("disabled"));
    assert!(case(&all, "Gpu.NeedsADevice").contains("<failure"));

    // The report classifies the no-device failure (this cell had no GPU),
    // and keeps it listed with the rule and what it was.
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report/results.json")).unwrap())
            .unwrap();
    let c = &results["cells"][0];
    assert_eq!(c["counts"]["classified"], 1, "{c:#}");
    let gpu = c["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "NeedsADevice")
        .expect("the classified test is listed");
    assert_eq!(gpu["status"], "skipped");
    assert_eq!(
        gpu["classified"]["reason"],
        "needs a GPU (no device on this host)"
    );
    assert_eq!(gpu["classified"]["was"], "failed");
    // Failures and errors that are not about a GPU stay what they are.
    assert_eq!(c["counts"]["failed"], 2, "{c:#}");
    assert_eq!(c["counts"]["error"], 4, "{c:#}");
}

#[test]
fn gtest_shards_over_two_gpus_each_process_seeing_only_its_own() {
    let test = "gtest_shards_over_two_gpus_each_process_seeing_only_its_own";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    let made = stand_in_nodes(&dev, &["kfd", "dri/renderD128", "dri/renderD129"]);
    if !made && unavailable(test, "mknod needs root") {
        return;
    }
    let _image = IMAGE.lock().unwrap_or_else(|p| p.into_inner());
    bases::ensure("bookworm");
    let m = write(
        dir.path(),
        "shards.yaml",
        &gtest_matrix(
            "shards.cc",
            "    gpu: required\n",
            "gpu:\n  target: gfx90a\n  count: all\n",
        ),
    );
    let sysfs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kfd/gfx90a");
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
    let cell = cell_json(&run, "bookworm");
    let junit = run
        .join("cells/bookworm")
        .join(cell["junit"][0].as_str().unwrap());
    let all = cases(&junit);
    assert_eq!(all.len(), 6, "the merged step has every test: {all:#?}");
    let in_shard = |k: &str| {
        all.iter()
            .filter(|(_, b)| b.contains(&format!("name=\"shard\" value=\"{k}\"")))
            .count()
    };
    assert_eq!((in_shard("1"), in_shard("2")), (3, 3), "{all:#?}");
    let log = std::fs::read_to_string(run.join("cells/bookworm/logs/02-tests.log")).unwrap();
    let seen = |k: &str| -> Vec<String> {
        log.lines()
            .filter_map(|l| l.strip_prefix(&format!("[shard {k}/2] visible=")))
            .map(|v| v.split(' ').next().unwrap_or("").to_string())
            .collect()
    };
    let (one, two) = (seen("1"), seen("2"));
    assert_eq!((one.len(), two.len()), (3, 3), "{log}");
    assert!(one.iter().all(|v| v == &one[0]), "{log}");
    assert!(two.iter().all(|v| v == &two[0]), "{log}");
    assert_ne!(one[0], two[0], "each shard has its own GPU: {log}");
    assert!(log.contains("hip=0"), "{log}");
}

#[test]
fn gtest_suite_that_ends_normally_runs_as_one_process_without_a_listing() {
    let test = "gtest_suite_that_ends_normally_runs_as_one_process_without_a_listing";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    let _image = IMAGE.lock().unwrap_or_else(|p| p.into_inner());
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    // A second step names a binary that is not there.
    let missing =
        "    continue_on_error: true\n  - name: missing\n    gtest:\n      binary: /work/missing\n";
    let m = write(
        dir.path(),
        "quiet.yaml",
        &gtest_matrix("quiet.cc", missing, ""),
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("out"))
        .run();
    o.assert_code(1);
    let run = o.run_store();
    let log = std::fs::read_to_string(run.join("cells/bookworm/logs/02-tests.log")).unwrap();
    // One process, by the step's filter, and its report: no listing.
    assert!(log.contains("/work/t: 12 tests reported"), "{log}");
    assert!(!log.contains("tests listed"), "{log}");
    assert_eq!(log.matches("[==========] Running").count(), 1, "{log}");
    let cell = cell_json(&run, "bookworm");
    let junit = run
        .join("cells/bookworm")
        .join(cell["junit"][0].as_str().unwrap());
    let all = cases(&junit);
    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    // Listing order, the disabled test in its place.
    assert_eq!(
        names,
        [
            "Basic.Passes",
            "Basic.FailsAnAssertion",
            "Basic.Skips",
            "Basic.DISABLED_NeverRuns",
            "Later.Passes",
            "Typed/0.ZeroIsFalse",
            "Typed/1.ZeroIsFalse",
            "Values/Param.IsSmall/0",
            "Values/Param.IsSmall/1",
            "Values/Param.IsSmall/2",
            "Strings/Text.IsNotEmpty/0",
            "Strings/Text.IsNotEmpty/1",
        ]
    );
    assert!(case(&all, "Basic.FailsAnAssertion").contains("GPU computed 6"));
    assert!(case(&all, "Basic.Skips").contains("needs a feature this host lacks"));
    assert!(case(&all, "Basic.DISABLED_NeverRuns").contains("disabled (DISABLED_ prefix)"));
    // Parameters read as a listing writes them.
    assert!(case(&all, "Typed/1.ZeroIsFalse").contains("TypeParam = double"));
    let small = case(&all, "Values/Param.IsSmall/2");
    assert!(
        small.contains("<failure") && small.contains("GetParam() = 5"),
        "{small}"
    );
    assert!(case(&all, "Strings/Text.IsNotEmpty/0").contains("xxx..."));
    assert!(
        case(&all, "Strings/Text.IsNotEmpty/1").contains(r#"GetParam() = &quot;two\nlines&quot;"#)
    );
    let gone = &cell["steps"][2];
    assert_eq!(gone["status"], "failed", "{cell:#}");
    assert_eq!(
        gone["reason"], "no executable file matches `/work/missing`",
        "{cell:#}"
    );
}

/// Asserts that `body` is a per-test timeout of `secs` seconds.
#[track_caller]
fn assert_per_test_timeout(name: &str, body: &str, secs: u64) {
    assert!(
        body.contains("type=\"timeout\"")
            && body.contains(&format!("timed out after {secs} s (timeout_per_test)")),
        "{name} must be a per-test timeout: {body}"
    );
}

/// A step's time in the cell's record, in seconds.
fn step_secs(step: &Value) -> f64 {
    step["duration_secs"].as_f64().expect("a step's duration")
}

#[test]
fn gtest_hangs_that_print_nothing_are_timed_out_and_blamed() {
    // Issue 33: the adapter held back the newline of a test's `[ RUN ]`
    // line, so a test that then hung in silence was never seen running,
    // never timed out, and was reported passed when it ended.
    let test = "gtest_hangs_that_print_nothing_are_timed_out_and_blamed";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    let _image = IMAGE.lock().unwrap_or_else(|p| p.into_inner());
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    // Each hang sleeps 600 s; the step's own bound is 2 minutes.
    let m = write(
        dir.path(),
        "silent.yaml",
        &gtest_matrix(
            "silent.cc",
            "      timeout_per_test: 3s\n      filter: \"Gamma.*\"\n    timeout: 2m\n",
            "",
        ),
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("out"))
        .run();
    o.assert_code(1);
    let run = o.run_store();
    let cell = cell_json(&run, "bookworm");
    let step = &cell["steps"][1];
    assert_eq!(step["status"], "failed", "{cell:#}");
    assert!(
        step_secs(step) < 120.0,
        "the step ended by its per-test timeouts, not its own: {cell:#}"
    );
    let junit = run
        .join("cells/bookworm")
        .join(cell["junit"][0].as_str().unwrap());
    let all = cases(&junit);
    assert_eq!(all.len(), 6, "{all:#?}");
    // First test of the first process; first of the process after a
    // crash; after half a line without its newline.
    for hung in [
        "Gamma.Hangs",
        "Gamma.HangsAfterCrash",
        "Gamma.PartialLineThenHangs",
    ] {
        assert_per_test_timeout(hung, case(&all, hung), 3);
    }
    assert!(
        case(&all, "Gamma.PartialLineThenHangs").contains("waiting for the queue to drain"),
        "{all:#?}"
    );
    assert!(case(&all, "Gamma.Segfaults").contains("type=\"SIGSEGV\""));
    for passing in ["Gamma.Pass6", "Gamma.Last"] {
        let body = case(&all, passing);
        assert!(
            !body.contains("<failure") && !body.contains("<error") && !body.contains("<skipped"),
            "{passing}: {body}"
        );
    }
    let log = std::fs::read_to_string(run.join("cells/bookworm/logs/02-tests.log")).unwrap();
    assert!(
        log.contains("Gamma.Hangs ran past its per-test timeout; process killed"),
        "{log}"
    );
    assert!(!log.contains("[       OK ] Gamma.Hangs"), "{log}");
}

#[test]
fn ctest_timeouts_and_crashes_are_named_as_the_gtest_adapter_names_them() {
    // CTest's JUnit calls a timeout and a crash a plain failure with an
    // empty message; the adapter reads its console lines to tell them.
    let test = "ctest_timeouts_and_crashes_are_named_as_the_gtest_adapter_names_them";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "ctest.yaml",
        "name: ctest\nmatrix:\n  os: [bookworm]\nenvironment:\n  base: debian:bookworm\n  packages: [cmake, make]\n\
         timeout: 5m\nsteps:\n  - name: configure\n    gpu: none\n    run: |\n      mkdir -p /work/p && cd /work/p\n      \
         cat > CMakeLists.txt <<'CMAKE'\n      cmake_minimum_required(VERSION 3.16)\n      project(hangs NONE)\n      \
         enable_testing()\n      add_test(NAME hangs_silently COMMAND sleep 600)\n      add_test(NAME passes COMMAND true)\n      \
         add_test(NAME crashes COMMAND sh -c \"echo about to crash; kill -SEGV $$\")\n      \
         add_test(NAME hangs_after_crash COMMAND sleep 600)\n      \
         add_test(NAME partial_line_then_hangs COMMAND sh -c \"printf 'half a line'; exec sleep 600\")\n      \
         add_test(NAME fails COMMAND false)\n      add_test(NAME last COMMAND true)\n      CMAKE\n      \
         cmake -S . -B build\n  - name: tests\n    timeout: 2m\n    ctest:\n      dir: /work/p/build\n      timeout_per_test: 3s\n",
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("out"))
        .run();
    o.assert_code(1);
    let run = o.run_store();
    let cell = cell_json(&run, "bookworm");
    let step = &cell["steps"][1];
    assert_eq!(step["status"], "failed", "{cell:#}");
    assert!(step_secs(step) < 120.0, "{cell:#}");
    let junit = run
        .join("cells/bookworm")
        .join(cell["junit"][0].as_str().unwrap());
    let all = cases(&junit);
    assert_eq!(all.len(), 7, "{all:#?}");
    for hung in [
        "hangs_silently.hangs_silently",
        "hangs_after_crash.hangs_after_crash",
        "partial_line_then_hangs.partial_line_then_hangs",
    ] {
        assert_per_test_timeout(hung, case(&all, hung), 3);
    }
    let crash = case(&all, "crashes.crashes");
    assert!(
        crash.contains("type=\"SIGSEGV\"") && crash.contains("about to crash"),
        "{crash}"
    );
    assert!(case(&all, "fails.fails").contains("<failure"));
    for passing in ["passes.passes", "last.last"] {
        let body = case(&all, passing);
        assert!(
            !body.contains("<failure") && !body.contains("<error"),
            "{passing}: {body}"
        );
    }
}

#[test]
fn gtest_rerun_failures_tells_a_flaky_test_from_a_failing_one() {
    let test = "gtest_rerun_failures_tells_a_flaky_test_from_a_failing_one";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    let _image = IMAGE.lock().unwrap_or_else(|p| p.into_inner());
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "rerun.yaml",
        &gtest_matrix("rerun.cc", "      rerun_failures: 2\n", ""),
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("out"))
        .run();
    o.assert_code(1);
    let run = o.run_store();
    let cell = cell_json(&run, "bookworm");
    let junit = run
        .join("cells/bookworm")
        .join(cell["junit"][0].as_str().unwrap());
    let all = cases(&junit);
    let flaky = case(&all, "Rerun.PassesTheSecondTime");
    assert_eq!(flaky.matches("<flakyFailure").count(), 1, "{flaky}");
    assert!(flaky.contains("queue not ready yet"), "{flaky}");
    assert!(!flaky.contains("<failure"), "{flaky}");
    let failing = case(&all, "Rerun.AlwaysFails");
    assert!(failing.contains("<failure"), "{failing}");
    assert_eq!(failing.matches("<rerunFailure").count(), 2, "{failing}");
    let log = std::fs::read_to_string(run.join("cells/bookworm/logs/02-tests.log")).unwrap();
    assert!(
        log.contains("running Rerun.AlwaysFails again (2 of 2)"),
        "{log}"
    );
    assert!(!log.contains("running Rerun.Passes again"), "{log}");
    // The report reads it as flaky, not failed.
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report/results.json")).unwrap())
            .unwrap();
    let c = &results["cells"][0];
    assert_eq!(c["counts"]["flaky"], 1, "{c:#}");
    assert_eq!(c["counts"]["failed"], 1, "{c:#}");
}

#[test]
fn ctest_rerun_failures_reruns_what_ctest_says_failed_and_tells_flaky_from_failing() {
    let test = "ctest_rerun_failures_reruns_what_ctest_says_failed_and_tells_flaky_from_failing";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    // `second_time` fails until a marker exists; `always` never passes;
    // `passes` must not be run again (CTest's --rerun-failed list).
    let m = write(
        dir.path(),
        "ctest-rerun.yaml",
        "name: ctest-rerun\nmatrix:\n  os: [bookworm]\nenvironment:\n  base: debian:bookworm\n  packages: [cmake, make]\n\
         timeout: 5m\nsteps:\n  - name: configure\n    gpu: none\n    run: |\n      mkdir -p /work/p && cd /work/p\n      \
         cat > CMakeLists.txt <<'CMAKE'\n      cmake_minimum_required(VERSION 3.16)\n      project(reruns NONE)\n      \
         enable_testing()\n      add_test(NAME passes COMMAND sh -c \"echo ran >> /work/p/passes.count\")\n      \
         add_test(NAME second_time COMMAND sh -c \"test -e /work/p/m || { touch /work/p/m; echo queue not ready yet; exit 1; }\")\n      \
         add_test(NAME always COMMAND sh -c \"echo wrong answer; exit 1\")\n      CMAKE\n      \
         cmake -S . -B build\n  - name: tests\n    timeout: 2m\n    continue_on_error: true\n    ctest:\n      dir: /work/p/build\n      rerun_failures: 2\n  \
         - name: count\n    run: test \"$(wc -l < /work/p/passes.count)\" = 1\n",
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("out"))
        .run();
    o.assert_code(1);
    let run = o.run_store();
    let cell = cell_json(&run, "bookworm");
    assert_eq!(
        cell["steps"][2]["status"], "passed",
        "passes ran once: {cell:#}"
    );
    let junit = run
        .join("cells/bookworm")
        .join(cell["junit"][0].as_str().unwrap());
    let all = cases(&junit);
    let flaky = case(&all, "second_time.second_time");
    assert_eq!(flaky.matches("<flakyFailure").count(), 1, "{flaky}");
    assert!(!flaky.contains("<failure"), "{flaky}");
    let failing = case(&all, "always.always");
    assert!(failing.contains("<failure"), "{failing}");
    assert_eq!(failing.matches("<rerunFailure").count(), 2, "{failing}");
    let log = std::fs::read_to_string(run.join("cells/bookworm/logs/02-tests.log")).unwrap();
    assert!(
        log.contains("ctest --rerun-failed: 2 failing tests again (1 of 2)")
            && log.contains("ctest --rerun-failed: 1 failing test again (2 of 2)"),
        "{log}"
    );
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report/results.json")).unwrap())
            .unwrap();
    let c = &results["cells"][0];
    assert_eq!(c["counts"]["flaky"], 1, "{c:#}");
    assert_eq!(c["counts"]["failed"], 1, "{c:#}");
}

#[test]
fn a_run_steps_rerun_failures_runs_it_again_while_its_junit_fails() {
    let test = "a_run_steps_rerun_failures_runs_it_again_while_its_junit_fails";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    // Each attempt writes the same file: `second_time` fails on the first
    // attempt only, `always` (in the `mixed` cell) on every one, `passes`
    // never. The step exits 1 while any of its tests fails.
    let m = write(
        dir.path(),
        "step-rerun.yaml",
        "name: step-rerun\nmatrix:\n  mode: [mixed, flaky]\nenvironment:\n  base: debian:bookworm\n\
         timeout: 5m\nsteps:\n  - name: tests\n    gpu: none\n    continue_on_error: true\n    rerun_failures: 2\n    \
         junit: [out/*.xml]\n    run: |\n      n=$(( $(cat /work/n 2>/dev/null || echo 0) + 1 )); echo $n > /work/n\n      \
         mkdir -p /work/out; f=0\n      if [ $n -ge 2 ]; then second='<testcase classname=\"t\" name=\"second_time\"/>'; \
         else f=1; second='<testcase classname=\"t\" name=\"second_time\"><failure message=\"queue not ready yet\">try '$n'</failure></testcase>'; fi\n      \
         always=''\n      if [ {{ matrix.mode }} = mixed ]; then f=1; always='<testcase classname=\"t\" name=\"always\"><failure message=\"wrong answer\">try '$n'</failure></testcase>'; fi\n      \
         printf '<testsuites><testsuite name=\"t\"><testcase classname=\"t\" name=\"passes\"/>%s%s</testsuite></testsuites>\\n' \"$second\" \"$always\" > /work/out/results.xml\n      \
         exit $f\n  - name: count\n    run: echo attempts $(cat /work/n)\n",
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("out"))
        .run();
    o.assert_code(1);
    let run = o.run_store();
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report/results.json")).unwrap())
            .unwrap();
    let counts = |cell: &str| {
        results["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == cell)
            .unwrap_or_else(|| panic!("{cell}: {results:#}"))["counts"]
            .clone()
    };

    // mixed: always fails, so the step ran three times.
    let cell = cell_json(&run, "mixed");
    assert_eq!(cell["steps"][0]["status"], "failed", "{cell:#}");
    assert_eq!(cell["junit"].as_array().unwrap().len(), 1, "{cell:#}");
    let junit = run
        .join("cells/mixed")
        .join(cell["junit"][0].as_str().unwrap());
    let all = cases(&junit);
    let flaky = case(&all, "t.second_time");
    assert_eq!(flaky.matches("<flakyFailure").count(), 1, "{flaky}");
    assert!(flaky.contains("queue not ready yet"), "{flaky}");
    assert!(!flaky.contains("<failure"), "{flaky}");
    let failing = case(&all, "t.always");
    assert!(failing.contains("<failure"), "{failing}");
    assert_eq!(failing.matches("<rerunFailure").count(), 2, "{failing}");
    let passes = case(&all, "t.passes");
    assert!(!passes.contains("Failure"), "{passes}");
    let log = std::fs::read_to_string(run.join("cells/mixed/logs/01-tests.log")).unwrap();
    assert!(
        log.contains("2 failing tests; running the step again (1 of 2)")
            && log.contains("1 failing test; running the step again (2 of 2)"),
        "{log}"
    );
    let count = std::fs::read_to_string(run.join("cells/mixed/logs/02-count.log")).unwrap();
    assert!(count.contains("attempts 3"), "{count}");
    assert!(run.join("cells/mixed/junit/01-tests.rerun-2").is_dir());
    assert_eq!(counts("mixed")["flaky"], 1);
    assert_eq!(counts("mixed")["failed"], 1);

    // flaky: the second attempt passes, and so does the step.
    let cell = cell_json(&run, "flaky");
    assert_eq!(cell["steps"][0]["status"], "passed", "{cell:#}");
    let count = std::fs::read_to_string(run.join("cells/flaky/logs/02-count.log")).unwrap();
    assert!(count.contains("attempts 2"), "{count}");
    assert_eq!(counts("flaky")["flaky"], 1);
    assert_eq!(counts("flaky")["failed"], 0);
}
