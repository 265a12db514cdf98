//! `rocmatrix try` on the real engine with a real C project in a
//! `sources:` entry: a build compiles it, four cells run it. Cells a, b
//! and c fail (an off-by-one in `add`, and `square` wrong besides), d
//! passes. The fix of `add` fixes a and b, leaves c failing with another
//! signature and d unchanged; tried again it reuses its build snapshot; a
//! patch that breaks d is newly failing (exit 1); a patch that does not
//! apply, a source the matrix has not, a binary patch and a run with
//! nothing failing are refused (exit 2) before anything is built.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

const CALC: &str = r#"#include <stdio.h>
#include <string.h>
static int add(int a, int b) { return a + b + 1; }
static int twice(int a) { return add(a, a); }
static int square(int a) { return a * a + 1; }
static int check(int ok, const char *what) {
    if (!ok) fprintf(stderr, "calc: %s is wrong\n", what);
    return !ok;
}
int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "a")) return check(add(2, 2) == 4, "add");
    if (!strcmp(c, "b")) return check(twice(3) == 6, "twice");
    if (!strcmp(c, "c")) return check(add(0, 0) == 0, "add") || check(square(3) == 9, "square");
    return check(5 - 2 == 3, "subtraction");
}
"#;

const FIX: &str = "--- a/calc.c\n+++ b/calc.c\n@@ -1,5 +1,5 @@\n #include <stdio.h>\n #include <string.h>\n-static int add(int a, int b) { return a + b + 1; }\n+static int add(int a, int b) { return a + b; }\n static int twice(int a) { return add(a, a); }\n static int square(int a) { return a * a + 1; }\n";

const BREAK_D: &str = "--- a/calc.c\n+++ b/calc.c\n@@ -13,4 +13,4 @@\n     if (!strcmp(c, \"b\")) return check(twice(3) == 6, \"twice\");\n     if (!strcmp(c, \"c\")) return check(add(0, 0) == 0, \"add\") || check(square(3) == 9, \"square\");\n-    return check(5 - 2 == 3, \"subtraction\");\n+    return check(5 - 2 == 4, \"subtraction\");\n }\n";

const STALE: &str = "--- a/calc.c\n+++ b/calc.c\n@@ -3,3 +3,3 @@\n static int add(int a, int b) { return a + b + 1; }\n-static int twice(int a) { return 2 * a + 7; }\n+static int twice(int a) { return 2 * a; }\n static int square(int a) { return a * a + 1; }\n";

fn calc_repo(root: &Path) -> PathBuf {
    let repo = root.join("calc");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("calc.c"), CALC).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "calc"]);
    repo
}

/// The environment is hang_tests' own, so that one image serves both.
fn matrix(repo: &Path, nonce: &str) -> String {
    format!(
        r#"name: calc
matrix:
  case: [a, b, c, d]
environment:
  base: "debian:bookworm"
  packages: [gcc, g++, libc6-dev, libgtest-dev, gdb]
retries: 0
sources:
  - name: calc
    url: {}
    ref: main
build:
  steps:
    - name: compile
      run: |
        # {nonce}
        mkdir -p /work/bin
        gcc -O0 -o /work/bin/calc /src/calc/calc.c
steps:
  - name: check
    run: /work/bin/calc {{{{ matrix.case }}}}
"#,
        repo.display()
    )
}

fn tried(o: &Ran) -> PathBuf {
    let line = o
        .stdout()
        .lines()
        .find_map(|l| l.strip_prefix("try run: ").map(PathBuf::from))
        .unwrap_or_else(|| panic!("no try run: line\n{}", o.text()));
    line
}

fn changes(run: &Path) -> Vec<(String, String)> {
    let t = read_json(&run.join("try.json"));
    t["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cell"].as_str().unwrap().to_string(),
                c["change"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn builds_that_ran(run: &Path) -> usize {
    std::fs::read_to_string(run.join("journal.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "build_step_finished")
        .count()
}

fn runs_in(out: &Path) -> usize {
    std::fs::read_dir(out.join("runs")).map_or(0, |d| d.count())
}

#[test]
fn try_a_patch_fixes_two_cells_leaves_one_failing_differently_and_reuses_its_build_for_real() {
    let test =
        "try_a_patch_fixes_two_cells_leaves_one_failing_differently_and_reuses_its_build_for_real";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let repo = calc_repo(dir.path());
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let m = write(dir.path(), "calc.yaml", &matrix(&repo, &nonce));
    let out = dir.path().join("out");
    let o = Rocmatrix::run_matrix(&m).progress_plain().out(&out).run();
    o.assert_code(1);
    let run = o.run_store();
    let patch = |name: &str, text: &str| write(dir.path(), name, text);
    let try_ = |args: &[&str]| {
        Rocmatrix::new()
            .arg("try")
            .arg(&run)
            .args(args)
            .args(["--progress", "plain"])
            .out(&out)
            .run()
    };

    // Bad input first: refused with exit 2, and nothing runs.
    let runs = runs_in(&out);
    let stale = patch("stale.patch", STALE);
    let o = try_(&["--patch", &format!("calc={}", stale.display())]);
    o.assert_code(2);
    assert!(
        o.stderr().contains("stale.patch")
            && o.stderr().contains("does not apply")
            && o.stderr().contains("calc.c")
            && o.stderr().contains("@@ -3,3 +3,3 @@")
            && o.stderr().contains("nothing was built"),
        "{}",
        o.text()
    );
    let fix = patch("fix.patch", FIX);
    let o = try_(&["--patch", &format!("mesa={}", fix.display())]);
    o.assert_code(2);
    assert!(
        o.stderr().contains("no source `mesa` (its sources: calc)"),
        "{}",
        o.text()
    );
    let bin = patch(
        "bin.patch",
        "diff --git a/x b/x\nindex 1..2 100644\nGIT binary patch\nliteral 3\nKcmZ?\n",
    );
    let o = try_(&["--patch", &format!("calc={}", bin.display())]);
    o.assert_code(2);
    assert!(o.stderr().contains("binary patch"), "{}", o.text());
    let o = try_(&[
        "--patch",
        &format!("calc={}", fix.display()),
        "--only",
        "case=d",
    ]);
    o.assert_code(2);
    assert!(o.stderr().contains("no failing cells"), "{}", o.text());
    assert_eq!(runs_in(&out), runs, "a refused try makes no run");

    // The fix: a and b fixed, c failing on `square` now, d not tried.
    let o = try_(&["--patch", &format!("calc={}", fix.display())]);
    eprintln!("{}", o.text());
    o.assert_success();
    let first = tried(&o);
    assert_eq!(
        changes(&first),
        [
            ("a".to_string(), "fixed".to_string()),
            ("b".into(), "fixed".into()),
            ("c".into(), "failing-differently".into()),
        ]
    );
    assert!(
        o.stdout()
            .contains("2 fixed, 1 still failing, 0 newly failing"),
        "{}",
        o.stdout()
    );
    assert!(o.stdout().contains("still failing (another signature)"));
    assert_eq!(builds_that_ran(&first), 1, "the patched build ran");
    let c = cell_json(&first, "c");
    assert_eq!(c["status"], "failed", "{c}");
    let log = std::fs::read_to_string(first.join("cells/c/logs/01-check.log")).unwrap();
    assert!(log.contains("calc: square is wrong"), "{log}");
    // The try's report compares against the run it tried.
    let summary = std::fs::read_to_string(first.join("report/summary.md")).unwrap();
    assert!(summary.contains("fixed"), "{summary}");
    let t = read_json(&first.join("try.json"));
    assert_eq!(t["against_dir"], run.display().to_string());
    assert_eq!(t["patches"][0]["source"], "calc");

    // Tried again: the patched snapshot is reused, the outcome the same.
    let o = try_(&["--patch", &format!("calc={}", fix.display())]);
    o.assert_success();
    let second = tried(&o);
    assert_eq!(builds_that_ran(&second), 0, "{}", o.text());
    assert_eq!(changes(&second), changes(&first));

    // A patch that breaks the passing cell, on every cell: newly failing.
    let breaks = patch("break-d.patch", BREAK_D);
    let o = try_(&["--patch", &format!("calc={}", breaks.display()), "--all"]);
    o.assert_code(1);
    let third = tried(&o);
    assert_eq!(
        changes(&third),
        [
            ("a".to_string(), "still-failing".to_string()),
            ("b".into(), "still-failing".into()),
            ("c".into(), "still-failing".into()),
            ("d".into(), "newly-failing".into()),
        ]
    );
    assert!(o.stdout().contains("newly failing"), "{}", o.stdout());
}
