//! Reports: committed samples of tools that do not install here, broken
//! files (cut off, invalid, BOM), expectations, regression classes on two
//! crafted runs, shard merges, exit codes and the output limits.

use std::path::Path;

use rocmatrix::results::junit::{self, Limits};
use rocmatrix::results::{collect, NoSink, Source, TestStatus};
use serde_json::{json, Value};

use crate::harness::*;

/// Collects plain JUnit directories.
fn collect_dirs(dirs: &[&Path]) -> rocmatrix::results::Results {
    let dirs: Vec<_> = dirs.iter().map(|d| d.to_path_buf()).collect();
    collect(
        &Source::junit_dirs(&dirs).unwrap(),
        Limits::default(),
        &mut NoSink,
    )
}

fn one_file_cell(tmp: &Path, name: &str, file: &str, bytes: &[u8]) -> std::path::PathBuf {
    let d = tmp.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(file), bytes).unwrap();
    d
}

fn statuses(cell: &rocmatrix::results::CellResult) -> Vec<(String, TestStatus)> {
    cell.tests
        .iter()
        .map(|t| (t.name.clone(), t.status))
        .collect()
}

#[test]
fn surefire_flaky_and_rerun_failures() {
    let tmp = tempfile::tempdir().unwrap();
    let d = one_file_cell(
        tmp.path(),
        "java",
        "TEST-x.xml",
        &std::fs::read(fixture("surefire-3.2.xml")).unwrap(),
    );
    let r = collect_dirs(&[&d]);
    let c = &r.cells[0];
    assert_eq!(c.counts.passed, 1);
    assert_eq!(c.counts.flaky, 1);
    assert_eq!(c.counts.failed, 1);
    let flaky = c.tests.iter().find(|t| t.name == "sometimesFails").unwrap();
    assert_eq!(flaky.status, TestStatus::Flaky);
    assert_eq!(flaky.reruns, 1);
    assert!(flaky.message.contains("expected: <1>"), "{}", flaky.message);
    let bad = c.tests.iter().find(|t| t.name == "alwaysFails").unwrap();
    assert_eq!(bad.status, TestStatus::Failed);
    assert_eq!(bad.reruns, 2);
    assert!(bad.output.contains("RetryTest.java:30"));
    assert_eq!(c.status.as_str(), "failed");
}

#[test]
fn boost_test_junit() {
    let tmp = tempfile::tempdir().unwrap();
    let d = one_file_cell(
        tmp.path(),
        "boost",
        "boost.xml",
        &std::fs::read(fixture("boost-test-1.81.xml")).unwrap(),
    );
    let r = collect_dirs(&[&d]);
    let c = &r.cells[0];
    assert_eq!(
        (
            c.counts.passed,
            c.counts.failed,
            c.counts.error,
            c.counts.skipped
        ),
        (1, 1, 1, 1)
    );
    let saxpy = c.tests.iter().find(|t| t.name == "saxpy").unwrap();
    assert!(saxpy.output.contains("check y[3] == 7.0f has failed"));
    assert!(saxpy.output.contains("--- system-err ---"));
    assert_eq!(saxpy.suite, "rocm_smoke");
    assert_eq!(saxpy.classname, "hip_suite");
}

#[test]
fn old_pytest_xunit1() {
    let tmp = tempfile::tempdir().unwrap();
    let d = one_file_cell(
        tmp.path(),
        "py",
        "pytest.xml",
        &std::fs::read(fixture("pytest-4.6-xunit1.xml")).unwrap(),
    );
    let r = collect_dirs(&[&d]);
    let c = &r.cells[0];
    let s = statuses(c);
    assert!(s.contains(&("test_bad".into(), TestStatus::Failed)));
    assert!(s.contains(&("test_setup_error".into(), TestStatus::Error)));
    assert!(s.contains(&("test_known".into(), TestStatus::Xfail)));
    assert!(s.contains(&("test_skip".into(), TestStatus::Skipped)));
    assert_eq!(c.counts.passed, 1);
    let xf = c.tests.iter().find(|t| t.name == "test_known").unwrap();
    assert_eq!(xf.expected.as_deref(), Some("expected fail on gfx1031"));
}

#[test]
fn odd_attributes_are_tolerated_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let d = one_file_cell(
        tmp.path(),
        "odd",
        "odd.xml",
        &std::fs::read(fixture("odd-attributes.xml")).unwrap(),
    );
    let r = collect_dirs(&[&d]);
    let c = &r.cells[0];
    assert_eq!(c.counts.passed, 6);
    assert!(c.messages.is_empty(), "{:?}", c.messages);
    assert_eq!(c.oddities["testcase without time"], 1);
    assert_eq!(c.oddities["time with thousands separators or a unit"], 1);
    assert_eq!(c.oddities["unparseable time"], 1);
    assert_eq!(c.oddities["testcase without a name"], 1);
    assert_eq!(c.oddities["testsuite without a name"], 1);
    assert_eq!(c.status.as_str(), "passed");
}

#[test]
fn truncated_file_keeps_complete_cases_and_errors_the_cell() {
    let full = gtest_xml(&[
        ("S", "a", "pass"),
        ("S", "b", "fail"),
        ("S", "c", "pass"),
        ("S", "d", "pass"),
    ]);
    // Cut inside the testcase of `c`: a, b complete, c not.
    let cut = full.find("name=\"c\"").unwrap() + 3;
    let tmp = tempfile::tempdir().unwrap();
    let d = one_file_cell(tmp.path(), "crash", "t.xml", &full.as_bytes()[..cut]);
    let r = collect_dirs(&[&d]);
    let c = &r.cells[0];
    assert_eq!((c.counts.passed, c.counts.failed), (1, 1));
    assert_eq!(c.status.as_str(), "failed");
    assert!(
        c.messages
            .iter()
            .any(|m| m.contains("t.xml") && m.contains("report cut off")),
        "{:?}",
        c.messages
    );
    // Only passing tests, but cut: the cell is an error.
    let cut = full.find("name=\"b\"").unwrap();
    let d = one_file_cell(tmp.path(), "crash2", "t.xml", &full.as_bytes()[..cut]);
    let r = collect_dirs(&[&d]);
    assert_eq!(r.cells[0].counts.passed, 1);
    assert_eq!(r.cells[0].status.as_str(), "error");
    assert!(r.cells[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("report cut off"));
}

#[test]
fn invalid_xml_names_file_and_offset() {
    let xml = "<testsuites><testsuite name=\"s\"><testcase name=\"a\"/>\n<testcase name=\"b\"></testsuite></testsuites>";
    let tmp = tempfile::tempdir().unwrap();
    let d = one_file_cell(tmp.path(), "bad", "broken.xml", xml.as_bytes());
    let r = collect_dirs(&[&d]);
    let c = &r.cells[0];
    assert_eq!(c.counts.passed, 1);
    let m = c
        .messages
        .iter()
        .find(|m| m.starts_with("broken.xml: invalid XML at byte "))
        .unwrap_or_else(|| panic!("{:?}", c.messages));
    let offset: u64 = m["broken.xml: invalid XML at byte ".len()..]
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((50..xml.len() as u64).contains(&offset), "{m}");
    assert_eq!(c.status.as_str(), "error");
    // Not JUnit at all.
    let d = one_file_cell(tmp.path(), "html", "page.xml", b"<html><body/></html>");
    let r = collect_dirs(&[&d]);
    assert!(r.cells[0].messages[0].contains("not a JUnit report (root element <html>)"));
}

#[test]
fn utf8_bom_is_fine() {
    let mut bytes = vec![0xef, 0xbb, 0xbf];
    bytes.extend(gtest_xml(&[("S", "ä", "pass"), ("S", "b", "fail")]).as_bytes());
    let tmp = tempfile::tempdir().unwrap();
    let d = one_file_cell(tmp.path(), "bom", "t.xml", &bytes);
    let r = collect_dirs(&[&d]);
    assert_eq!((r.cells[0].counts.passed, r.cells[0].counts.failed), (1, 1));
    assert!(r.cells[0].messages.is_empty(), "{:?}", r.cells[0].messages);
}

#[test]
fn reader_streams_a_large_document_with_bounded_texts() {
    // 200,000 test cases and a 5 MB system-out, from a generator (no file):
    // every case arrives, texts stay capped.
    struct Gen {
        stage: usize,
        i: usize,
        buf: Vec<u8>,
        pos: usize,
    }
    impl std::io::Read for Gen {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.pos == self.buf.len() {
                self.buf.clear();
                self.pos = 0;
                match self.stage {
                    0 => {
                        self.buf.extend(b"<testsuites><testsuite name=\"big\"><testcase name=\"chatty\"><system-out>");
                        self.stage = 1;
                    }
                    1 if self.i < 5000 => {
                        self.buf.extend(std::iter::repeat_n(b'x', 1000));
                        self.i += 1;
                    }
                    1 => {
                        self.buf.extend(b"</system-out></testcase>");
                        self.stage = 2;
                        self.i = 0;
                    }
                    2 if self.i < 200_000 => {
                        self.buf
                            .extend(format!("<testcase name=\"t{}\" time=\"0\"/>", self.i).bytes());
                        self.i += 1;
                    }
                    2 => {
                        self.buf.extend(b"</testsuite></testsuites>");
                        self.stage = 3;
                    }
                    _ => return Ok(0),
                }
            }
            let n = out.len().min(self.buf.len() - self.pos);
            out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }
    struct Count(u64, usize);
    impl junit::Visitor for Count {
        fn case(&mut self, _: &str, c: &mut junit::Case) {
            self.0 += 1;
            self.1 = self.1.max(c.system_out.text.len());
        }
    }
    let mut count = Count(0, 0);
    let gen = Gen {
        stage: 0,
        i: 0,
        buf: Vec::new(),
        pos: 0,
    };
    let report = junit::read(std::io::BufReader::new(gen), Limits::default(), &mut count);
    assert_eq!(report.problem, None);
    assert_eq!(count.0, 200_001);
    assert_eq!(count.1, Limits::default().output);
}

const KEYS: &[&str] = &["distro", "gfx"];

#[test]
fn expectations_make_xfail_and_xpass() {
    let tmp = tempfile::tempdir().unwrap();
    let expect = json!([
        {"cells": {"gfx": "gfx1031"}, "tests": ["Conv.*"], "reason": "MIOpen asm kernels, vanilla clang 14"},
        {"cells": {"gfx": "gfx90a"}, "tests": [], "reason": "no gfx90a code objects"}
    ]);
    let run = make_run(
        tmp.path(),
        "r1",
        "h",
        KEYS,
        expect,
        (&["distro"], &["gfx"]),
        None,
        &[
            CellSpec::new(
                "sid.gfx1031",
                &[("distro", "sid"), ("gfx", "gfx1031")],
                "failed",
            )
            .junit(
                "t.xml",
                gtest_xml(&[
                    ("Conv", "Fwd", "fail"),
                    ("Conv", "Bwd", "pass"),
                    ("Gemm", "Big", "pass"),
                ]),
            ),
            CellSpec {
                reason: Some("step test timed out after 1h"),
                ..CellSpec::new(
                    "sid.gfx90a",
                    &[("distro", "sid"), ("gfx", "gfx90a")],
                    "timeout",
                )
            },
        ],
    );
    let o = Rocmatrix::new()
        .args(["report", run.to_str().unwrap()])
        .run();
    o.assert_code(0);
    let j = read_json(&run.join("report/results.json"));
    let c0 = &j["cells"][0];
    assert_eq!(c0["counts"]["xfail"], 1);
    assert_eq!(c0["counts"]["xpass"], 1);
    assert_eq!(c0["counts"]["passed"], 1);
    let tests = c0["tests"].as_array().unwrap();
    let fwd = tests.iter().find(|t| t["name"] == "Fwd").unwrap();
    assert_eq!(fwd["status"], "xfail");
    assert_eq!(fwd["expected"], "MIOpen asm kernels, vanilla clang 14");
    assert_eq!(
        tests.iter().find(|t| t["name"] == "Bwd").unwrap()["status"],
        "xpass"
    );
    assert_eq!(j["cells"][1]["expected_failure"], "no gfx90a code objects");
    assert_valid_junit(&run.join("report/junit.xml"));
}

/// The baseline and current runs for the regression classes.
fn regression_runs(tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let v1: &[(&str, &str)] = &[("distro", "sid"), ("gfx", "gfx1030")];
    let v2: &[(&str, &str)] = &[("distro", "sid"), ("gfx", "gfx1100")];
    let v3: &[(&str, &str)] = &[("distro", "trixie"), ("gfx", "gfx1030")];
    let v4: &[(&str, &str)] = &[("distro", "trixie"), ("gfx", "gfx1100")];
    let base = make_run(
        tmp,
        "base",
        "h",
        KEYS,
        json!([]),
        (&["distro"], &["gfx"]),
        None,
        &[
            CellSpec::new("sid.gfx1030", v1, "failed").junit(
                "t.xml",
                gtest_xml(&[
                    ("K", "A", "pass"),
                    ("K", "B", "fail"),
                    ("K", "C", "fail"),
                    ("K", "E", "pass"),
                    ("K", "F", "pass"),
                    ("K", "G", "pass"),
                    ("K", "H", "pass"),
                ]),
            ),
            CellSpec::new("sid.gfx1100", v2, "passed")
                .junit("t.xml", gtest_xml(&[("K", "A", "pass")])),
            CellSpec::new("trixie.gfx1030", v3, "passed")
                .junit("t.xml", gtest_xml(&[("K", "A", "pass")])),
        ],
    );
    let cur = make_run(
        tmp,
        "cur",
        "h",
        KEYS,
        json!([]),
        (&["distro"], &["gfx"]),
        None,
        &[
            CellSpec::new("sid.gfx1030", v1, "failed").junit(
                "t.xml",
                gtest_xml(&[
                    ("K", "A", "fail"),
                    ("K", "B", "pass"),
                    ("K", "C", "fail"),
                    ("K", "D", "pass"),
                    ("K", "F", "flaky"),
                    ("K", "G", "skip"),
                    ("K", "H", "pass"),
                ]),
            ),
            CellSpec {
                reason: Some("step test timed out after 10m"),
                log_tail: "running K.A\n<script>alert('log')</script>\n",
                ..CellSpec::new("sid.gfx1100", v2, "timeout")
            },
            CellSpec::new("trixie.gfx1100", v4, "passed")
                .junit("t.xml", gtest_xml(&[("K", "A", "pass")])),
        ],
    );
    (base, cur)
}

#[test]
fn regression_classes_on_two_crafted_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cur) = regression_runs(tmp.path());
    let o = Rocmatrix::new()
        .args([
            "report",
            cur.to_str().unwrap(),
            "--baseline",
            base.to_str().unwrap(),
            "--fail-on",
            "regression",
        ])
        .run();
    o.assert_code(1);
    let stdout = o.stdout();
    assert!(stdout.contains("2 regressions"), "{stdout}");
    let j = read_json(&cur.join("report/results.json"));
    let reg = &j["regressions"];
    let class_of = |name: &str| -> Vec<String> {
        reg["changes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"] == name && c["cell"] == "sid.gfx1030")
            .map(|c| c["class"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(class_of("A"), ["new_failure"]);
    assert_eq!(class_of("B"), ["fixed"]);
    assert_eq!(class_of("C"), ["still_failing"]);
    assert_eq!(class_of("D"), ["new_test"], "new passing tests are named");
    assert_eq!(class_of("F"), ["flaky"]);
    assert_eq!(class_of("G"), ["newly_skipped"]);
    assert!(class_of("H").is_empty());
    // E passed in the baseline and is gone: named by reading the baseline run again.
    assert_eq!(class_of("E"), ["removed_test"]);
    assert_eq!(
        reg["counts"]["removed_test"], 2,
        "E, and K.A of the timed-out cell"
    );
    assert_eq!(reg["counts"]["new_failure"], 1);
    let cells: Vec<(String, String)> = reg["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cell"].as_str().unwrap().to_string(),
                c["class"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(cells.contains(&("sid.gfx1100".into(), "broken".into())));
    assert!(cells.contains(&("trixie.gfx1100".into(), "added".into())));
    assert!(cells.contains(&("trixie.gfx1030".into(), "missing".into())));

    // Markdown: regressions come first, before the grid.
    let md = std::fs::read_to_string(cur.join("report/summary.md")).unwrap();
    let (r, g) = (
        md.find("## Regressions").unwrap(),
        md.find("## Matrix").unwrap(),
    );
    assert!(r < g);
    assert!(md.contains("### New failure (1)"), "{md}");
    assert!(
        md.contains("| sid.gfx1030 | K.A | passed → failed |"),
        "{md}"
    );
    assert!(md.len() <= 1024 * 1024);

    // The same against the baseline's results.json, and other --fail-on modes.
    let o = Rocmatrix::new()
        .args(["report", base.to_str().unwrap()])
        .run();
    assert_eq!(o.code(), 1, "the baseline itself has failures");
    let bj = base.join("report/results.json");
    let o = Rocmatrix::new()
        .args([
            "report",
            cur.to_str().unwrap(),
            "--baseline",
            bj.to_str().unwrap(),
            "--fail-on",
            "never",
        ])
        .run();
    assert_eq!(o.code(), 0);
    let j2 = read_json(&cur.join("report/results.json"));
    assert_eq!(j2["regressions"]["counts"], reg["counts"]);
    // From a results.json, passing tests are hashes: E is counted, not named.
    let named_e = j2["regressions"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "E");
    assert!(!named_e);
    // A run compared with itself has no regressions.
    let o = Rocmatrix::new()
        .args([
            "report",
            cur.to_str().unwrap(),
            "--baseline",
            cur.to_str().unwrap(),
            "--fail-on",
            "regression",
        ])
        .run();
    o.assert_code(0);
    assert_valid_junit(&cur.join("report/junit.xml"));
}

#[test]
fn library_entry_point_for_the_runner() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cur) = regression_runs(tmp.path());
    let s = rocmatrix::report::write_reports(&cur, Some(&base), None).unwrap();
    assert_eq!(s.cells, 3);
    assert_eq!(s.failing_cells, 2);
    assert_eq!(s.regressions, Some(2), "K.A and the timed-out cell");
    for f in ["junit.xml", "results.json", "summary.md", "index.html"] {
        assert!(cur.join("report").join(f).is_file(), "{f}");
    }
    // The timed-out cell has no failing test: JUnit readers still see it.
    let xml = std::fs::read_to_string(cur.join("report/junit.xml")).unwrap();
    assert!(xml.contains("<testsuite name=\"sid.gfx1100\""), "{xml}");
    assert!(xml.contains("name=\"(cell)\" classname=\"rocmatrix\""));
    assert!(xml.contains("cell timeout: step test timed out after 10m"));
    assert!(xml.contains("<property name=\"gfx\" value=\"gfx1100\"/>"));
}

#[test]
fn merge_shards_of_one_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let a: &[(&str, &str)] = &[("distro", "sid"), ("gfx", "gfx1030")];
    let b: &[(&str, &str)] = &[("distro", "sid"), ("gfx", "gfx1100")];
    let c: &[(&str, &str)] = &[("distro", "trixie"), ("gfx", "gfx1030")];
    let s1 = make_run(
        tmp.path(),
        "s1",
        "h",
        KEYS,
        json!([]),
        (&["distro"], &["gfx"]),
        Some("1/3"),
        &[CellSpec::new("sid.gfx1030", a, "passed").junit(
            "t.xml",
            gtest_xml(&[("K", "A", "pass"), ("K", "B", "pass")]),
        )],
    );
    let s2 = make_run(
        tmp.path(),
        "s2",
        "h",
        KEYS,
        json!([]),
        (&["distro"], &["gfx"]),
        Some("2/3"),
        &[
            CellSpec::new("sid.gfx1100", b, "passed")
                .junit("t.xml", gtest_xml(&[("K", "A", "pass")])),
            CellSpec {
                status: None,
                ..CellSpec::new("trixie.gfx1030", c, "passed")
            },
        ],
    );
    let out = tmp.path().join("merged");
    let o = Rocmatrix::new()
        .args([
            "report",
            "merge",
            s1.to_str().unwrap(),
            s2.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .run();
    assert_eq!(o.code(), 1, "a cell did not finish");
    let j = read_json(&out.join("results.json"));
    assert_eq!(j["runs"], json!(["s1", "s2"]));
    assert_eq!(j["cells"].as_array().unwrap().len(), 3);
    assert_eq!(j["cells"][2]["status"], "error");
    assert!(j["cells"][2]["reason"]
        .as_str()
        .unwrap()
        .contains("did not finish"));
    assert!(j["messages"][0].as_str().unwrap().contains("shards 3/3"));
    let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(xml.contains("tests=\"4\""), "{}", &xml[..300]);
    assert_valid_junit(&out.join("junit.xml"));
    // The merged report is a baseline too.
    let o = Rocmatrix::new()
        .args([
            "report",
            s1.to_str().unwrap(),
            "--baseline",
            out.to_str().unwrap(),
            "--fail-on",
            "regression",
        ])
        .run();
    o.assert_code(0);

    // Shards of another plan are refused (usage error).
    let other = make_run(
        tmp.path(),
        "other",
        "different",
        KEYS,
        json!([]),
        (&[], &[]),
        Some("3/3"),
        &[],
    );
    let o = Rocmatrix::new()
        .args([
            "report",
            "merge",
            s1.to_str().unwrap(),
            other.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .run();
    assert_eq!(o.code(), 2);
    assert!(o.stderr().contains("shards of different plans"));
}

#[test]
fn exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let ok = make_run(
        tmp.path(),
        "ok",
        "h",
        KEYS,
        json!([]),
        (&[], &[]),
        None,
        &[
            CellSpec::new("a", &[("distro", "sid"), ("gfx", "gfx1030")], "passed").junit(
                "t.xml",
                gtest_xml(&[("K", "A", "pass"), ("K", "S", "skip")]),
            ),
        ],
    );
    Rocmatrix::new()
        .args(["report", ok.to_str().unwrap()])
        .run()
        .assert_code(0);
    // Not a run directory, or a bad flag: usage.
    let o = Rocmatrix::new()
        .args(["report", tmp.path().to_str().unwrap()])
        .run();
    assert_eq!(o.code(), 2);
    assert!(o.stderr().contains("not a run directory"));
    Rocmatrix::new()
        .args(["report", ok.to_str().unwrap(), "--fail-on", "sometimes"])
        .run()
        .assert_code(2);
    let o = Rocmatrix::new()
        .args(["report", "junit", ok.to_str().unwrap()])
        .run();
    assert_eq!(o.code(), 2, "--cell-from-dir is required");
    // A broken baseline file: usage.
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{").unwrap();
    let o = Rocmatrix::new()
        .args([
            "report",
            ok.to_str().unwrap(),
            "--baseline",
            bad.to_str().unwrap(),
        ])
        .run();
    assert_eq!(o.code(), 2);
    assert!(o.stderr().contains("bad.json"));
}

#[test]
fn junit_dirs_command() {
    let tmp = tempfile::tempdir().unwrap();
    let a = one_file_cell(
        tmp.path(),
        "gfx1030",
        "a.xml",
        gtest_xml(&[("K", "A", "pass"), ("K", "B", "fail")]).as_bytes(),
    );
    let b = tmp.path().join("gfx1100");
    std::fs::create_dir_all(b.join("nested")).unwrap();
    std::fs::write(b.join("nested/b.xml"), gtest_xml(&[("K", "A", "pass")])).unwrap();
    let out = tmp.path().join("out");
    let o = Rocmatrix::new()
        .args([
            "report",
            "junit",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--cell-from-dir",
            "--out",
            out.to_str().unwrap(),
        ])
        .run();
    assert_eq!(o.code(), 1);
    let j = read_json(&out.join("results.json"));
    assert_eq!(j["cells"][0]["id"], "gfx1030");
    assert_eq!(j["cells"][1]["junit"], json!(["nested/b.xml"]));
    assert_eq!(j["cells"][1]["status"], "passed");
    assert_valid_junit(&out.join("junit.xml"));
    let o = Rocmatrix::new()
        .args([
            "report",
            "junit",
            b.to_str().unwrap(),
            "--cell-from-dir",
            "--out",
            out.to_str().unwrap(),
        ])
        .run();
    assert_eq!(o.code(), 0);
}

#[test]
fn junit_xml_stays_under_gitlab_limit_by_trimming_output() {
    // 6,000 failing tests with 8 KB of failure text each (about 50 MB of
    // input): every test stays, texts go once the budget is spent.
    let tmp = tempfile::tempdir().unwrap();
    let text = "E".repeat(8000);
    let mut xml = String::from("<testsuites><testsuite name=\"big\">");
    for i in 0..6000 {
        xml.push_str(&format!(
            "<testcase classname=\"Big\" name=\"t{i}\" time=\"0.1\"><failure message=\"m{i}\">{text}</failure><system-out>{text}</system-out></testcase>"
        ));
    }
    xml.push_str("</testsuite></testsuites>");
    let d = one_file_cell(tmp.path(), "big", "big.xml", xml.as_bytes());
    let out = tmp.path().join("out");
    let s = rocmatrix::report::build(&Source::junit_dirs(&[d]).unwrap(), &out, None).unwrap();
    assert!(s.junit_bytes < 30_000_000, "{}", s.junit_bytes);
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert_eq!(junit.matches("<testcase ").count(), 6000);
    assert!(junit.contains("message=\"m5999\""));
    assert!(std::fs::metadata(out.join("summary.md")).unwrap().len() <= 1024 * 1024);
    assert_valid_junit(&out.join("junit.xml"));
}

#[test]
fn summary_md_stays_within_one_mib() {
    // 120 failing cells with 100 failing tests each, with long messages:
    // about 5 MB of Markdown before the lists shrink.
    let tmp = tempfile::tempdir().unwrap();
    let mut dirs = Vec::new();
    for c in 0..120 {
        let mut cases = String::new();
        for t in 0..100 {
            cases.push_str(&format!(
                "<testcase classname=\"Suite{c}\" name=\"test_{t}_{}\"><failure message=\"{}\"/></testcase>",
                "n".repeat(60),
                "m".repeat(800)
            ));
        }
        dirs.push(one_file_cell(
            tmp.path(),
            &format!("cell{c:03}"),
            "t.xml",
            format!("<testsuite name=\"s\">{cases}</testsuite>").as_bytes(),
        ));
    }
    let out = tmp.path().join("out");
    rocmatrix::report::build(&Source::junit_dirs(&dirs).unwrap(), &out, None).unwrap();
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.len() <= 1024 * 1024, "{}", md.len());
    assert!(md.contains("## Matrix"));
    assert!(md.contains("| **cell119** |"));
    assert!(md.contains("## Totals"));
    assert!(md.contains("12000 tests"));
}

#[test]
fn results_json_follows_its_schema_shape() {
    // Every required property of the schema is present (a structural check;
    // the schema itself is JSON and names the version).
    let tmp = tempfile::tempdir().unwrap();
    let (base, cur) = regression_runs(tmp.path());
    rocmatrix::report::write_reports(&cur, Some(&base), None).unwrap();
    let doc = read_json(&cur.join("report/results.json"));
    let schema: Value = serde_json::from_str(rocmatrix::report::RESULTS_SCHEMA).unwrap();
    assert_eq!(schema["properties"]["version"]["const"], doc["version"]);
    let check = |obj: &Value, def: &Value, what: &str| {
        for req in def["required"].as_array().unwrap() {
            assert!(
                obj.get(req.as_str().unwrap()).is_some(),
                "{what} lacks required `{req}`"
            );
        }
    };
    check(&doc, &schema, "results");
    for c in doc["cells"].as_array().unwrap() {
        check(c, &schema["$defs"]["cell"], "cell");
        for t in c["tests"].as_array().unwrap() {
            check(t, &schema["$defs"]["test"], "test");
        }
        let h = c["passed_hashes"].as_str().unwrap();
        assert!(h.len() % 16 == 0 && h.bytes().all(|b| b.is_ascii_hexdigit()));
    }
    check(
        &doc["regressions"],
        &schema["$defs"]["regressions"],
        "regressions",
    );
    for s in doc["signatures"].as_array().into_iter().flatten() {
        check(s, &schema["$defs"]["signature"], "signature");
        check(
            &s["attribution"],
            &schema["$defs"]["attribution"],
            "attribution",
        );
    }
}

#[test]
fn a_multi_line_failure_message_survives_junit_xml_and_reading_it_back() {
    let tmp = tempfile::tempdir().unwrap();
    // Line breaks only: quick-junit drops other control characters (tabs,
    // carriage returns) from every string it writes.
    let message =
        "x.cc:3: Failure\nExpected equality of these values:\n  computed\n    Which is: 6";
    let escaped = message
        .replace('\n', "&#10;")
        .replace('\r', "&#13;")
        .replace('\t', "&#9;");
    let cell = tmp.path().join("cell");
    std::fs::create_dir_all(&cell).unwrap();
    std::fs::write(
        cell.join("t.xml"),
        format!("<testsuites><testsuite name=\"S\"><testcase classname=\"S\" name=\"t\"><failure message=\"{escaped}\">body</failure></testcase></testsuite></testsuites>"),
    )
    .unwrap();
    let first = tmp.path().join("first");
    Rocmatrix::new()
        .args([
            "report",
            "junit",
            cell.to_str().unwrap(),
            "--cell-from-dir",
            "--out",
        ])
        .arg(&first)
        .run();
    let merged = std::fs::read_to_string(first.join("junit.xml")).unwrap();
    assert!(merged.contains("Failure&#10;Expected"), "{merged}");
    // Read the merged file back: the message is the same, line breaks and all.
    let again = tmp.path().join("again");
    std::fs::create_dir_all(&again).unwrap();
    std::fs::copy(first.join("junit.xml"), again.join("merged.xml")).unwrap();
    let second = tmp.path().join("second");
    Rocmatrix::new()
        .args([
            "report",
            "junit",
            again.to_str().unwrap(),
            "--cell-from-dir",
            "--out",
        ])
        .arg(&second)
        .run();
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(second.join("results.json")).unwrap())
            .unwrap();
    assert_eq!(
        results["cells"][0]["tests"][0]["message"], message,
        "{results:#}"
    );
}

#[test]
fn signatures_come_first_and_hostile_text_is_escaped() {
    // Two cells with one failure that differs only in its temp path and
    // address, and one cell where the test passes: one signature, escaped
    // in both reports and shown before the grid.
    let tmp = tempfile::tempdir().unwrap();
    let mut dirs = Vec::new();
    for (c, fails) in [
        ("a", Some("0x7ffd10")),
        ("b", Some("0x55aa20")),
        ("c", None),
    ] {
        let body = match fails {
            Some(addr) => format!(
                "<failure message=\"&lt;script&gt;alert(1)&lt;/script&gt; at /tmp/x{c}9/k.cc:3 ptr {addr}\"/>"
            ),
            None => String::new(),
        };
        let xml = format!(
            "<testsuite name=\"s\"><testcase classname=\"S\" name=\"t\">{body}</testcase></testsuite>"
        );
        dirs.push(one_file_cell(tmp.path(), c, "t.xml", xml.as_bytes()));
    }
    let out = tmp.path().join("out");
    rocmatrix::report::build(&Source::junit_dirs(&dirs).unwrap(), &out, None).unwrap();
    let doc = read_json(&out.join("results.json"));
    let sigs = doc["signatures"].as_array().unwrap();
    assert_eq!(sigs.len(), 1, "{sigs:?}");
    assert_eq!(
        sigs[0]["text"],
        "<script>alert(1)</script> at k.cc:3 ptr <hex>"
    );
    assert_eq!(sigs[0]["count"], 2);
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(!html.contains("<script>alert"));
    let why = html.find("id=\"why\"").expect("a Why cells fail section");
    assert!(why < html.find("id=\"matrix\"").unwrap());
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    // Raw text only inside fenced code blocks, where Markdown shows it as is.
    let mut fenced = false;
    for line in md.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            assert!(!line.contains("<script>"), "{line}");
        }
    }
    assert!(md.contains("&lt;script&gt;alert(1)&lt;/script&gt; at k.cc:3 ptr &lt;hex&gt;"));
    assert!(md.find("## Why cells fail").unwrap() < md.find("## Matrix").unwrap());
}

#[test]
fn index_links_cell_pages_once_the_tests_are_large_and_inlines_them_while_small() {
    // 40 cells with 300 failing tests each and 200-byte messages: about
    // 2.4 MB of test text, far more than index.html lists itself.
    let tmp = tempfile::tempdir().unwrap();
    let mut dirs = Vec::new();
    for c in 0..40 {
        let mut cases = String::new();
        for t in 0..300 {
            cases.push_str(&format!(
                "<testcase classname=\"Suite{c}\" name=\"test_{t}\"><failure message=\"kernel.cpp:{t}: {}\"/></testcase>",
                "m".repeat(200)
            ));
        }
        dirs.push(one_file_cell(
            tmp.path(),
            &format!("cell{c:02}"),
            "t.xml",
            format!("<testsuite name=\"s\">{cases}</testsuite>").as_bytes(),
        ));
    }
    // A cell whose directory name is markup and a path: its page still
    // gets a safe file name and the link finds it.
    let odd = tmp.path().join("odd").join("<b>x");
    std::fs::create_dir_all(&odd).unwrap();
    std::fs::write(odd.join("t.xml"), gtest_xml(&[("K", "Bad", "fail")])).unwrap();
    dirs.push(odd);
    let out = tmp.path().join("out");
    rocmatrix::report::build(&Source::junit_dirs(&dirs).unwrap(), &out, None).unwrap();
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(index.len() < 400_000, "index.html is {} bytes", index.len());
    assert!(
        !index.contains("test_150</b>"),
        "tests are on the cells' pages"
    );
    assert!(index.contains(r#"<a href="cells/cell07.html">300 non-passing tests (200 listed) and log tails on the cell's page →</a>"#), "{index}");
    let page = std::fs::read_to_string(out.join("cells/cell07.html")).unwrap();
    assert_eq!(page.matches("<details class=\"test\"").count(), 300);
    assert!(page.contains("Suite7.test_299"));
    assert!(page.contains("href=\"../index.html#cell-cell07\""));
    // Every link to a cell page names a file that exists.
    let links: Vec<&str> = index
        .split("href=\"cells/")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    assert_eq!(
        links.len(),
        41 * 2,
        "a page link per cell heading and one per details line"
    );
    for l in &links {
        let file = l.replace("&lt;", "<").replace("&gt;", ">");
        assert!(out.join("cells").join(&file).is_file(), "{l}");
        assert!(!file.contains('/') && !file.contains('<'), "{file}");
    }

    // A small report lists the tests in index.html too; pages of cells it
    // no longer has are removed.
    let small = Source::junit_dirs(&dirs[..2]).unwrap();
    rocmatrix::report::build(&small, &out, None).unwrap();
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(index.contains("Suite1.test_199</b>"), "inline while small");
    let mut pages: Vec<String> = std::fs::read_dir(out.join("cells"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    assert_eq!(pages, ["cell00.html", "cell01.html"]);
}

#[test]
fn junit_per_cell_writes_one_valid_file_per_cell() {
    let tmp = tempfile::tempdir().unwrap();
    let a = one_file_cell(
        tmp.path(),
        "gfx1030",
        "a.xml",
        gtest_xml(&[("K", "A", "pass"), ("K", "B", "fail")]).as_bytes(),
    );
    let b = one_file_cell(
        tmp.path(),
        "gfx 1100",
        "b.xml",
        gtest_xml(&[("K", "A", "pass")]).as_bytes(),
    );
    let out = tmp.path().join("out");
    let report = |extra: &[&str]| {
        Rocmatrix::new()
            .args(["report", "junit"])
            .arg(&a)
            .arg(&b)
            .args(["--cell-from-dir", "--out"])
            .arg(&out)
            .args(extra)
            .run()
    };
    report(&[]).assert_code(1);
    assert!(out.join("junit.xml").is_file());
    report(&["--junit", "per-cell"]).assert_code(1);
    assert!(
        !out.join("junit.xml").exists(),
        "per-cell replaces the merged file"
    );
    let mut files: Vec<String> = std::fs::read_dir(out.join("junit"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[0], "gfx1030.xml");
    assert!(files[1].starts_with("gfx_1100-"), "{files:?}");
    for f in &files {
        assert_valid_junit(&out.join("junit").join(f));
    }
    let one = std::fs::read_to_string(out.join("junit/gfx1030.xml")).unwrap();
    assert!(one.contains(r#"tests="2" failures="1""#), "{one}");
    assert!(!one.contains("gfx 1100"), "only its own cell");
    // Back to one merged file: the per-cell files go.
    report(&["--junit", "merged"]).assert_code(1);
    assert!(out.join("junit.xml").is_file());
    assert_eq!(std::fs::read_dir(out.join("junit")).unwrap().count(), 0);
    // A value it does not know is a usage error.
    report(&["--junit", "per-suite"]).assert_code(2);
}
