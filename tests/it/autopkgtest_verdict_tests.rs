//! autopkgtest's exit status as the verdict on the package, against
//! Debian's real `autopkgtest` (sid's, in the cell) on the trees under
//! tests/it/data/autopkgtest/exits/, each made to end with one status:
//! 0 (`pass/`), 2 (`skip/`), 4 (`fail/`), 8 (`superficial/`: only
//! superficial tests, as rocm-hipamd 6.4.3-5's) and 12 (`badpkg/`: a
//! test's Depends apt cannot satisfy). Each step's record keeps the status
//! autopkgtest exited with and debci's word for it; the report's grid, the
//! cell's card and summary.md show it.

use serde_json::Value;

use crate::autopkgtest_tests::{matrix, tree_repo, IMAGE};
use crate::harness::*;

/// Tree, the exit status autopkgtest gives it, debci's word.
const EXITS: [(&str, i64, &str); 5] = [
    ("pass", 0, "pass"),
    ("skip", 2, "pass"),
    ("fail", 4, "fail"),
    ("superficial", 8, "neutral"),
    ("badpkg", 12, "badpkg"),
];

fn steps() -> String {
    EXITS
        .iter()
        .map(|(tree, _, _)| {
            format!(
                "  - name: {tree}\n    continue_on_error: true\n    autopkgtest:\n      path: /src/trees/exits/{tree}\n"
            )
        })
        .collect()
}

#[test]
fn autopkgtest_exit_status_is_the_packages_verdict_in_debcis_words() {
    let test = "autopkgtest_exit_status_is_the_packages_verdict_in_debcis_words";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    let _image = IMAGE.lock().unwrap_or_else(|p| p.into_inner());
    bases::ensure("sid");
    let dir = tempfile::tempdir().unwrap();
    let repo = tree_repo(dir.path());
    let m = write(dir.path(), "a.yaml", &matrix(&repo, &steps()));
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("out"))
        .run();
    // fail/ and badpkg/ fail their steps, so the cell.
    o.assert_code(1);
    let run = o.run_store();
    let cell = cell_json(&run, "sid");
    for (i, (tree, exit, word)) in EXITS.iter().enumerate() {
        let step = &cell["steps"][i];
        assert_eq!(step["name"], *tree, "{cell:#}");
        // The status is autopkgtest's own: the step log has the line the
        // run script printed with it.
        let log =
            std::fs::read_to_string(run.join("cells/sid").join(step["log"].as_str().unwrap()))
                .unwrap();
        assert!(
            log.lines().any(|l| l.ends_with(&format!("exit {exit}"))),
            "{tree}: autopkgtest exited {exit}: {log}"
        );
        assert_eq!(step["exit_code"], *exit, "{tree}: {step:#}");
        assert_eq!(step["package"]["exit"], *exit, "{tree}: {step:#}");
        assert_eq!(step["package"]["verdict"], *word, "{tree}: {step:#}");
        assert!(
            log.contains(&format!("rocmatrix: the package: {word} (exit {exit}: ")),
            "{tree}: {log}"
        );
        let failed = matches!(*tree, "fail" | "badpkg");
        assert_eq!(
            step["status"],
            if failed { "failed" } else { "passed" },
            "{tree}: {step:#}"
        );
    }
    let superficial: &Value = &cell["steps"][3]["package"];
    assert!(
        superficial["meaning"]
            .as_str()
            .unwrap()
            .contains("all non-superficial tests were skipped; 2 of 2 tests superficial"),
        "{superficial:#}"
    );
    // The report says it: the chip, the cell's card, summary.md.
    let index = std::fs::read_to_string(run.join("report/index.html")).unwrap();
    assert!(index.contains(r#"<span class="pkg" title="the package's verdict: autopkgtest's exit status, in debci's words">badpkg</span>"#), "the chip");
    assert!(
        index.contains(r#"<span class="badge pkg-badpkg">badpkg</span> the package, as autopkgtest judged it: badpkg (exit 12: erroneous package)"#),
        "the card"
    );
    let summary = std::fs::read_to_string(run.join("report/summary.md")).unwrap();
    assert!(
        summary
            .contains("The package (autopkgtest's verdict): badpkg (exit 12: erroneous package)"),
        "{summary}"
    );
}

#[test]
fn autopkgtest_only_superficial_tests_passing_is_a_neutral_cell_not_a_green_one() {
    let test = "autopkgtest_only_superficial_tests_passing_is_a_neutral_cell_not_a_green_one";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    let _image = IMAGE.lock().unwrap_or_else(|p| p.into_inner());
    bases::ensure("sid");
    let dir = tempfile::tempdir().unwrap();
    let repo = tree_repo(dir.path());
    let steps =
        "  - name: superficial\n    autopkgtest:\n      path: /src/trees/exits/superficial\n";
    let m = write(dir.path(), "a.yaml", &matrix(&repo, steps));
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path().join("out"))
        .run();
    // Not a failure (debci's neutral is not one), not a pass either.
    o.assert_code(0);
    let run = o.run_store();
    let cell = cell_json(&run, "sid");
    assert_eq!(cell["status"], "passed", "{cell:#}");
    assert_eq!(cell["steps"][0]["package"]["verdict"], "neutral");
    let index = std::fs::read_to_string(run.join("report/index.html")).unwrap();
    assert!(
        index.contains(r#"<a class="chip skip filterable""#),
        "a grey chip, not a green one"
    );
    assert!(!index.contains(r#"<a class="chip pass"#));
    let summary = std::fs::read_to_string(run.join("report/summary.md")).unwrap();
    assert!(summary.contains("⏭️ 2/0/0 neutral"), "{summary}");
    assert!(
        summary.contains("The package (autopkgtest's verdict): neutral (exit 8: no tests in this package or all non-superficial tests were skipped; 2 of 2 tests superficial)"),
        "{summary}"
    );
}
