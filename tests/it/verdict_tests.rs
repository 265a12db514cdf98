//! One verdict everywhere (issue 34): a cell whose step exits 0 with a
//! failing JUnit test, one whose only failure a `classify:` rule moves, and
//! one whose failing test an `expect:` foretells each get the same verdict
//! on their live line, the last progress line, the run's summary table, the
//! exit code's reason line, the journal and `summary.md` — and the
//! history keeps that verdict: the classified cell is `classified`, not
//! `failed` (issue 50), and `history show` gives each test's own outcome.

use crate::harness::*;

const VERDICTS: &str = r#"name: verdicts
matrix:
  case: [junit, classified, expected]
environment:
  base: debian:bookworm
retries: 0
classify:
  - match: "mirror unreachable"
    as: skipped
    reason: the package mirror, not the code
expect:
  - cells: {case: expected}
    tests: [c.known_bug]
    reason: known bug 1234
steps:
  - name: tests
    junit: [/work/out/*.xml]
    run: |
      mkdir -p /work/out
      case {{ matrix.case }} in
        junit) name=broken; message=boom; code=0 ;;
        classified) name=fetch; message="mirror unreachable"; code=1 ;;
        expected) name=known_bug; message=wrong; code=1 ;;
      esac
      printf '<?xml version="1.0"?>\n<testsuite name="s" tests="2" failures="1"><testcase classname="c" name="ok"/><testcase classname="c" name="%s"><failure message="%s">trace</failure></testcase></testsuite>\n' "$name" "$message" > /work/out/t.xml
      exit $code
"#;

#[test]
fn a_cell_has_one_verdict_live_in_the_table_the_exit_reason_and_the_report() {
    let test = "a_cell_has_one_verdict_live_in_the_table_the_exit_reason_and_the_report";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "verdicts.yaml", VERDICTS);
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .args(["--jobs", "3"])
        .out(dir.path())
        .run();
    let (out, err) = (o.stdout(), o.stderr());
    if let Ok(keep) = std::env::var("ROCMATRIX_VERDICT_OUT") {
        let _ = std::fs::write(format!("{keep}.stdout"), &out);
        let _ = std::fs::write(format!("{keep}.stderr"), &err);
    }
    o.assert_code(1);
    let run = o.run_store();

    // The steps of `junit` passed: its record says so, its tests do not.
    assert_eq!(cell_json(&run, "junit")["status"], "passed");

    // The live lines.
    for (cell, line) in [
        ("junit", "junit: FAILED ("),
        ("classified", "classified: FAILED (classified): "),
        ("expected", "expected: FAILED (expected): "),
    ] {
        assert!(
            err.lines().any(|l| l.starts_with(line)),
            "{cell}: no live line `{line}…`:\n{err}"
        );
    }
    // The last progress line and the summary table's count line.
    let counts = "0 passed, 1 failed, 1 expected failure, 1 failed only in classified tests, \
                  0 skipped, 0 errors, 0 not run in ";
    let last = err
        .lines()
        .rev()
        .find(|l| l.starts_with("finished: "))
        .unwrap_or_default();
    assert!(last.starts_with(&format!("finished: {counts}")), "{err}");
    assert!(out.lines().any(|l| l.starts_with(counts)), "{out}");
    // The summary table.
    let row = |cell: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(cell))
            .unwrap_or_else(|| panic!("no row for {cell}:\n{out}"))
            .split_whitespace()
            .skip(1)
            .take_while(|w| !w.ends_with('s') || w.starts_with('('))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(row("junit"), "failed", "{out}");
    assert_eq!(row("classified"), "failed (classified)", "{out}");
    assert_eq!(row("expected"), "failed (expected)", "{out}");
    // The exit code's reason.
    assert!(
        out.lines().any(|l| l == "exit 1: 1 failing cell: junit"),
        "{out}"
    );
    // The journal.
    let journal = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    for (cell, verdict) in [
        ("junit", "failing"),
        ("classified", "classified"),
        ("expected", "expected_failure"),
    ] {
        let finished = journal
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["event"] == "cell_finished" && e["cell"] == cell)
            .unwrap_or_else(|| panic!("no cell_finished for {cell}:\n{journal}"));
        assert_eq!(finished["verdict"], verdict, "{finished}");
        assert_eq!(finished["status"], "failed", "{finished}");
    }
    // summary.md.
    let md = std::fs::read_to_string(run.join("report/summary.md")).unwrap();
    assert!(
        md.contains("3 cells: 1 failing, 1 expected failure, 1 failed only in classified tests"),
        "{md}"
    );
    assert!(md.contains("❌ 1 of 3 cells failing"), "{md}");

    // The history's rows: each cell's verdict, from the JUnit up.
    let db = rusqlite::Connection::open(dir.path().join("history.sqlite")).unwrap();
    let mut rows: Vec<(String, String)> = db
        .prepare("SELECT cell, outcome FROM cells ORDER BY cell")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            ("classified".to_string(), "classified".to_string()),
            ("expected".into(), "expected failure".into()),
            ("junit".into(), "failed".into()),
        ]
    );
    // `history show`: each test where it ran, its mark and its verdict; a
    // classified test (moved to skipped) is no failure, so not found.
    let show = |name: &str| {
        Rocmatrix::new()
            .args(["history", "--json", "--out"])
            .arg(dir.path())
            .args(["show", name])
            .run()
    };
    let fetch = show("c.fetch");
    fetch.assert_code(2);
    assert!(
        fetch
            .stderr()
            .contains("c.fetch: no failure of it is recorded"),
        "{}",
        fetch.context()
    );
    let mut shown = Vec::new();
    for name in ["c.broken", "c.known_bug"] {
        let out = show(name).assert_success().stdout();
        let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
        for r in rows.as_array().unwrap() {
            shown.push(format!(
                "{name} {} {} {}",
                r["cell"].as_str().unwrap_or(""),
                r["runs"][0]["outcome"].as_str().unwrap_or(""),
                r["verdict"].as_str().unwrap_or("")
            ));
        }
    }
    // An expected failure still fails: its strip marks it so.
    assert_eq!(
        shown,
        [
            "c.broken junit failed new",
            "c.known_bug expected failed new"
        ],
        "{shown:#?}"
    );
}
