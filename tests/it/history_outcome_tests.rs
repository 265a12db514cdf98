//! Every outcome kind from the JUnit a tool wrote to the history's row and
//! `history show` (issue 50: one outcome type end to end). The run is the
//! H100 run kept in `tests/fixtures/gpu-runs/h100/run` (gtest's own XML:
//! passes, a failure, a timeout recorded as an error), with Surefire's and
//! pytest's XML beside it (`tests/fixtures/junit/`: a flaky test that
//! passed on a rerun, a failure with reruns, a setup error, pytest's xfail
//! and skip) and `expect:` rules for an unexpected pass and a failure the
//! `flaky:` list covers. `rocmatrix report` finishes it into the history
//! beside its run root.

use std::path::Path;

use crate::harness::*;

/// The H100 run under `root/runs/`, its `sm_90` cell given the other
/// tools' files and the plan the two `expect:` rules.
fn run_of_every_kind(root: &Path) -> std::path::PathBuf {
    let run = root.join("runs/20261123-111120-c738");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    std::fs::create_dir_all(run.parent().unwrap()).unwrap();
    copy_dir(&fixtures.join("gpu-runs/h100/run"), &run);
    std::fs::remove_dir_all(run.join("report")).unwrap();
    let cell = run.join("cells/sm_90");
    let junit = cell.join("junit/02-smoke");
    for f in ["surefire-3.2.xml", "pytest-4.6-xunit1.xml"] {
        std::fs::copy(fixture(f), junit.join(f)).unwrap();
    }
    let record = cell.join("cell.json");
    let mut doc = read_json(&record);
    doc["junit"] = serde_json::json!([
        "junit/02-smoke/gtest.xml",
        "junit/02-smoke/surefire-3.2.xml",
        "junit/02-smoke/pytest-4.6-xunit1.xml"
    ]);
    std::fs::write(&record, doc.to_string()).unwrap();
    let plan = run.join("plan.json");
    let mut doc = read_json(&plan);
    doc["expect"] = serde_json::json!([
        {"cells": {}, "tests": ["Gpu.AfterHang"], "reason": "hung on H100 once"},
        {"cells": {}, "tests": ["test_rocm.test_bad"], "reason": "flaky on H100", "flaky": true}
    ]);
    std::fs::write(&plan, doc.to_string()).unwrap();
    run
}

#[test]
fn every_outcome_kind_reaches_the_history_row_and_history_show() {
    let root = tempfile::tempdir().unwrap();
    let run = run_of_every_kind(root.path());
    let o = Rocmatrix::new().arg("report").arg(&run).run();
    o.assert_code(1);
    assert!(o.stdout().contains("history: recorded"), "{}", o.context());

    let db = rusqlite::Connection::open(root.path().join("history.sqlite")).unwrap();
    let rows = |sql: &str| -> Vec<(String, String)> {
        db.prepare(sql)
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    // The cells: one failed, one skipped (no AMD GPU on the H100 host).
    assert_eq!(
        rows("SELECT cell, outcome FROM cells ORDER BY cell"),
        [
            ("gfx90a".to_string(), "skipped".to_string()),
            ("sm_90".into(), "failed".into())
        ]
    );
    // Each test that did not simply pass, with its kind.
    let tests = rows("SELECT test, outcome FROM tests ORDER BY test");
    let outcome = |name: &str| {
        tests
            .iter()
            .find(|(t, _)| t == name)
            .map(|(_, o)| o.as_str())
            .unwrap_or_else(|| panic!("no row for {name}: {tests:?}"))
    };
    for (test, want) in [
        ("Gpu.FailsOnGpuResult", "failed"),
        ("Gpu.HangsAKernel", "error"),
        ("Gpu.AfterHang", "xpass"),
        ("com.example.RetryTest.sometimesFails", "flaky"),
        ("com.example.RetryTest.alwaysFails", "failed"),
        ("test_rocm.test_setup_error", "error"),
        ("test_rocm.test_known", "xfail"),
        ("test_rocm.test_skip", "skipped"),
        // The `flaky:` list covers it, no rerun passed: a failure to the
        // history.
        ("test_rocm.test_bad", "failed"),
    ] {
        assert_eq!(outcome(test), want, "{test}: {tests:?}");
    }

    // `history show`: the run's outcome in words, and the verdict.
    for (test, word) in [
        ("Gpu.FailsOnGpuResult", "failed"),
        ("Gpu.HangsAKernel", "failed"),
        ("com.example.RetryTest.sometimesFails", "passed on a rerun"),
        ("test_rocm.test_known", "failed"),
    ] {
        let shown = Rocmatrix::new()
            .args(["history", "--json", "--out"])
            .arg(root.path())
            .args(["show", test])
            .run();
        shown.assert_success();
        let v: serde_json::Value = serde_json::from_str(&shown.stdout()).unwrap();
        let row = &v[0];
        assert_eq!(row["cell"], "sm_90", "{v:#}");
        assert_eq!(row["runs"][0]["outcome"], word, "{test}: {v:#}");
        let verdict = row["verdict"].as_str().unwrap_or_default();
        let want = if word == "passed on a rerun" {
            "flaky"
        } else {
            "new"
        };
        assert!(verdict.starts_with(want), "{test}: {verdict}");
    }
}
