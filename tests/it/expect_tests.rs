//! Expectations that keep themselves (issue 35): a matrix run four times
//! on debian:bookworm whose `Suite.Known` fails from the first run,
//! `Suite.Flaky` fails now and then on gfx1151 only, and `Suite.Fixed`,
//! expected to fail by hand, passes every time. `expect --propose` turns
//! the real SQLite history into the right diff; `--write` makes exactly
//! that diff, keeping the rest of the file; the file validates, proposes
//! nothing more, and the next run judges the known failure expected and
//! the flaky failure flaky (exit 0). A failure the suite itself expects
//! (pytest's xfail) is left alone. Bad input is a clear error, exit 2.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::postgres::{Postgres, PASSWORD};
use crate::harness::*;

/// The matrix file as a maintainer keeps it: comments, an `expect:` entry
/// for a test that was fixed since, and a `report:` after it.
fn matrix(dir: &Path, uniq: &str) -> PathBuf {
    write(
        dir,
        "keep.yaml",
        &format!(
            r#"name: keep   # kept by rocmatrix expect
matrix:
  gfx: [gfx1030, gfx1151]
environment:
  base: debian:bookworm
cache: [{{path: /cache, key: "keep-{{{{ matrix.gfx }}}}-{uniq}"}}]
steps:
  - name: test
    junit: [/work/junit/*.xml]
    run: |
      n=$(( $(cat /cache/n 2>/dev/null || echo 0) + 1 )); echo $n > /cache/n
      flaky=""
      if [ {{{{ matrix.gfx }}}} = gfx1151 ] && [ $((n % 3)) = 2 ]; then flaky='<failure message="queue never drained"/>'; fi
      mkdir -p /work/junit
      printf '<testsuite name="s" tests="5"><testcase classname="Suite" name="Flaky">%s</testcase><testcase classname="Suite" name="Known"><failure message="no device"/></testcase><testcase classname="Suite" name="Fixed"/><testcase classname="Suite" name="Steady"/><testcase classname="Suite" name="Marked"><skipped type="pytest.xfail" message="expected by the suite"/></testcase></testsuite>\n' "$flaky" > /work/junit/r.xml

# Known problems, kept by hand.
expect:
  # broken on ROCm 6.2, fixed since
  - tests: [Suite.Fixed]
    reason: wrong results on ROCm 6.2

# The grid.
report:
  rows: [gfx]
"#
        ),
    )
}

fn store_of(o: &Ran) -> PathBuf {
    o.stdout()
        .lines()
        .find_map(|l| l.strip_prefix("run store: "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no run store line: {}", o.context()))
}

fn expect(m: &Path, out: &Path, mode: &str) -> Ran {
    Rocmatrix::new()
        .args(["expect", mode, "--drop-after", "3", "--out"])
        .arg(out)
        .arg(m)
        .run()
}

/// (cell, test) → status in a run's results.json.
fn status(store: &Path, cell: &str, test: &str) -> String {
    let text = std::fs::read_to_string(store.join("report/results.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let c = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == cell)
        .unwrap_or_else(|| panic!("no cell {cell}"));
    c["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            format!(
                "{}.{}",
                t["classname"].as_str().unwrap_or(""),
                t["name"].as_str().unwrap_or("")
            ) == test
        })
        .map(|t| t["status"].as_str().unwrap().to_string())
        .unwrap_or_else(|| "passed".to_string())
}

#[test]
fn expect_proposes_writes_and_keeps_the_matrix_file() {
    let test = "expect_proposes_writes_and_keeps_the_matrix_file";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let uniq = format!("{}-{}", std::process::id(), label::value());
    let m = matrix(dir.path(), &uniq);
    let original = std::fs::read_to_string(&m).unwrap();
    let mut stores = Vec::new();
    for _ in 1..=4 {
        let o = Rocmatrix::run_matrix(&m).progress_plain().out(&out).run();
        o.assert_code(1);
        stores.push(store_of(&o));
    }
    let first = stores[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();

    // The proposal: the known failure expected everywhere, with the run it
    // started in; the flaky test listed where it is flaky; the fixed test's
    // entry (and its comment) dropped.
    let p = expect(&m, &out, "--propose");
    p.assert_success();
    let diff = p.stdout();
    let want_known = format!("+  # Suite.Known: known failure since {first} (");
    for want in [
        "-  # broken on ROCm 6.2, fixed since\n-  - tests: [Suite.Fixed]\n-    reason: wrong results on ROCm 6.2\n",
        want_known.as_str(),
        "+  - tests: [Suite.Known]\n+    reason: \"known failure: no device\"\n",
        "+flaky:\n+  # Suite.Flaky: flaky, 1 of 4 runs failed (failed once between passes), only where gfx=gfx1151\n+  - cells: {gfx: gfx1151}\n+    tests: [Suite.Flaky]\n+    reason: \"flaky: 1 of 4 runs failed, only where gfx=gfx1151\"\n",
    ] {
        assert!(diff.contains(want), "{want}\nnot in:\n{diff}\n{}", p.context());
    }
    // A failure the suite itself expects (pytest's xfail) is not proposed.
    assert!(!diff.contains("Suite.Marked"), "{diff}");
    assert!(
        diff.starts_with(&format!("--- {}\n+++ {}\n@@ ", m.display(), m.display())),
        "{diff}"
    );
    assert!(
        p.stderr().contains("expect: 4 runs of keep in "),
        "{}",
        p.context()
    );
    assert!(
        p.stderr()
            .contains("expect[0] (Suite.Fixed): passed in each of the last 3 runs"),
        "{}",
        p.context()
    );
    // Proposing changes nothing.
    assert_eq!(std::fs::read_to_string(&m).unwrap(), original);
    // The same runs in a PostgreSQL history, given by URL: the same diff.
    if let Some(pg) = Postgres::start(test) {
        pg.create_db("keep");
        let url = pg.url("keep");
        Rocmatrix::new()
            .args(["history", "import"])
            .args(&stores)
            .args(["--history", &url])
            .run()
            .assert_success();
        let on_pg = Rocmatrix::new()
            .args([
                "expect",
                "--propose",
                "--drop-after",
                "3",
                "--history",
                &url,
            ])
            .arg(&m)
            .run();
        on_pg.assert_success();
        assert_eq!(on_pg.stdout(), diff, "{}", on_pg.context());
        assert!(!on_pg.stderr().contains(PASSWORD), "{}", on_pg.context());
    }

    // --write makes exactly that diff (as patch(1) applies it), and the
    // rest of the file stays as it was.
    let copy = dir.path().join("copy.yaml");
    std::fs::write(&copy, &original).unwrap();
    let patched = std::process::Command::new("patch")
        .arg("--quiet")
        .arg(&copy)
        .stdin(std::fs::File::open(write(dir.path(), "proposal.diff", &diff)).unwrap())
        .output()
        .expect("patch(1)");
    assert!(
        patched.status.success(),
        "{}",
        String::from_utf8_lossy(&patched.stdout)
    );
    let w = expect(&m, &out, "--write");
    w.assert_success();
    assert_eq!(w.stdout(), diff, "--write shows what it wrote");
    let written = std::fs::read_to_string(&m).unwrap();
    assert_eq!(written, std::fs::read_to_string(&copy).unwrap());
    for kept in [
        "name: keep   # kept by rocmatrix expect\n",
        "\n# Known problems, kept by hand.\nexpect:\n",
        "\n# The grid.\nreport:\n  rows: [gfx]\n",
    ] {
        assert!(written.contains(kept), "{kept}\nnot in:\n{written}");
    }
    Rocmatrix::new()
        .arg("validate")
        .arg(&m)
        .run()
        .assert_success();
    let again = expect(&m, &out, "--propose");
    again.assert_success();
    assert_eq!(again.stdout(), "", "{}", again.context());
    assert!(
        again.stderr().contains("nothing to change"),
        "{}",
        again.context()
    );

    // The next run: the known failure is expected, the flaky failure on
    // gfx1151 (its counter's 5th run fails) is flaky: nothing fails.
    let o = Rocmatrix::run_matrix(&m).progress_plain().out(&out).run();
    o.assert_code(0);
    let fifth = store_of(&o);
    assert_eq!(status(&fifth, "gfx1030", "Suite.Known"), "xfail");
    assert_eq!(status(&fifth, "gfx1151", "Suite.Known"), "xfail");
    assert_eq!(status(&fifth, "gfx1151", "Suite.Flaky"), "flaky");
    assert_eq!(status(&fifth, "gfx1030", "Suite.Flaky"), "passed");
    let junit = std::fs::read_to_string(fifth.join("report/junit.xml")).unwrap();
    assert!(
        junit.contains("<flakyFailure") && junit.contains("queue never drained"),
        "{junit}"
    );
    let after = expect(&m, &out, "--propose");
    after.assert_success();
    assert_eq!(after.stdout(), "", "{}", after.context());

    // A matrix file whose name the history does not know.
    let other = write(
        dir.path(),
        "other.yaml",
        &original.replace("name: keep ", "name: other "),
    );
    let o = expect(&other, &out, "--propose");
    o.assert_code(2);
    assert!(
        o.stderr().contains("has no run of matrix `other`") && o.stderr().contains("runs of: keep"),
        "{}",
        o.context()
    );
}

#[test]
fn expect_refuses_a_missing_history_and_an_unreadable_matrix_file() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "m.yaml",
        "name: m\nmatrix:\n  gfx: [a]\nsteps:\n  - name: t\n    run: \"true\"\n",
    );
    let empty = dir.path().join("empty");
    let o = Rocmatrix::new()
        .args(["expect", "--propose", "--out"])
        .arg(&empty)
        .arg(&m)
        .run();
    o.assert_code(2);
    assert!(o.stderr().contains("no history at"), "{}", o.context());
    assert!(
        !empty.join("history.sqlite").exists(),
        "reading made no history"
    );
    for bad in [dir.path().join("nothere.yaml"), dir.path().to_path_buf()] {
        let o = Rocmatrix::new()
            .args(["expect", "--out"])
            .arg(&empty)
            .arg(&bad)
            .run();
        o.assert_code(2);
        assert!(o.stderr().contains("cannot read"), "{}", o.context());
    }
    let o = Rocmatrix::new()
        .args(["expect", "--history", "off"])
        .arg(&m)
        .run();
    o.assert_code(2);
    assert!(o.stderr().contains("--history off"), "{}", o.context());

    // `flaky:` entries are validated as `expect:` ones, and name tests.
    let base = "name: m\nmatrix:\n  gfx: [a]\nsteps:\n  - name: t\n    run: \"true\"\n";
    for (flaky, says) in [
        (
            "flaky:\n  - cells: {gfx: a}\n    reason: r\n",
            "m.yaml:8:10: a flaky entry names its tests",
        ),
        (
            "flaky:\n  - cells: {gpu: a}\n    tests: [T.A]\n    reason: r\n",
            "flaky entry names `gpu`, which is no axis or include key",
        ),
        (
            "flaky:\n  - tests: [T.A]\n    reason: \"\"\n",
            "a flaky entry needs a reason",
        ),
    ] {
        let f = write(dir.path(), "m.yaml", &format!("{base}{flaky}"));
        let o = Rocmatrix::new().arg("validate").arg(&f).run();
        o.assert_code(2);
        assert!(o.stderr().contains(says), "{says}\n{}", o.context());
    }
    let f = write(
        dir.path(),
        "m.yaml",
        &format!("{base}flaky:\n  - tests: [T.A]\n    reason: r\n"),
    );
    Rocmatrix::new()
        .arg("validate")
        .arg(&f)
        .run()
        .assert_success();
}
