//! The merged `junit.xml`: one `<testsuite>` per cell and original suite,
//! named `<cell-id>/<suite>`, with the cell's axis values as properties,
//! written by the one JUnit writer (`crate::junit::write`) while the
//! results are collected.
//!
//! Suites are written in chunks of at most [`CHUNK`] test cases (a huge
//! suite becomes several `<testsuite>` elements of the same name), each
//! chunk's start tag carrying its counts; the root `<testsuites>` element
//! with the totals is written at the end. Memory is bounded by one chunk,
//! whatever the number of tests.
//!
//! The output validates against Jenkins' junit-10.xsd (see
//! `tests/fixtures/junit-10.xsd`), so only attributes that schema allows are
//! written. To stay under GitLab's 30 MB, passing tests carry no output and
//! failure texts shrink once the file passes [`FULL_TEXT_BUDGET`] bytes:
//! output is trimmed, never tests.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::junit::write::{self, CaseOut, ReportHead, Run, Status, SuiteHead, SUITE_END};
use crate::results::collect::Sink;
use crate::results::junit::{clip, Case, Rerun};
use crate::results::source::CellSource;
use crate::results::{CellResult, TestStatus};

/// Test cases per `<testsuite>` element before a suite is split.
pub const CHUNK: usize = 2000;
/// GitLab's per-file limit for JUnit reports.
pub const GITLAB_LIMIT: u64 = 30 * 1000 * 1000;
/// Body bytes after which failure texts are dropped (messages stay).
pub const FULL_TEXT_BUDGET: u64 = 20 * 1000 * 1000;
/// Bytes of a failure text while within the budget.
const TEXT_LIMIT: usize = 4096;
/// Bytes of a `message` attribute.
const MESSAGE_LIMIT: usize = 1024;

/// Streams the merged JUnit file; see the module docs.
pub struct JunitWriter {
    final_path: PathBuf,
    body_path: PathBuf,
    body: BufWriter<File>,
    written: u64,
    name: String,
    cell: String,
    properties: Vec<(String, String)>,
    /// Open suites of the current file (names only).
    stack: Vec<String>,
    /// Whether a chunk is open, and its rendered test cases and counts.
    open: bool,
    chunk: String,
    chunk_counts: ChunkCounts,
    cell_cases: u64,
    pub tests: u64,
    pub failures: u64,
    pub errors: u64,
    time: f64,
    error: Option<std::io::Error>,
}

impl JunitWriter {
    pub fn create(path: &Path, name: &str) -> std::io::Result<JunitWriter> {
        let body_path = path.with_extension("xml.body.tmp");
        let body = BufWriter::with_capacity(1 << 20, File::create(&body_path)?);
        Ok(JunitWriter {
            final_path: path.to_path_buf(),
            body_path,
            body,
            written: 0,
            name: name.to_string(),
            cell: String::new(),
            properties: Vec::new(),
            stack: Vec::new(),
            open: false,
            chunk: String::with_capacity(1 << 16),
            chunk_counts: ChunkCounts::default(),
            cell_cases: 0,
            tests: 0,
            failures: 0,
            errors: 0,
            time: 0.0,
            error: None,
        })
    }

    fn suite_name(&self) -> String {
        match self.stack.last() {
            Some(s) if !s.is_empty() => format!("{}/{}", self.cell, s),
            _ => self.cell.clone(),
        }
    }

    /// Writes the open chunk as one `<testsuite>` element.
    fn flush_suite(&mut self) {
        if !std::mem::take(&mut self.open) {
            return;
        }
        let counts = std::mem::take(&mut self.chunk_counts);
        if self.error.is_some() {
            self.chunk.clear();
            return;
        }
        let name = self.suite_name();
        let mut properties = Vec::with_capacity(self.properties.len() + 1);
        properties.push(("rocmatrix.cell", self.cell.as_str()));
        properties.extend(
            self.properties
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let mut head = String::with_capacity(256);
        write::push_suite_start(
            &mut head,
            &SuiteHead {
                name: &name,
                tests: counts.tests as u64,
                skipped: counts.skipped as u64,
                errors: counts.errors as u64,
                failures: counts.failures as u64,
                time: Some(counts.time.max(0.0)),
                properties: &properties,
            },
        );
        let res = self
            .body
            .write_all(head.as_bytes())
            .and_then(|_| self.body.write_all(self.chunk.as_bytes()))
            .and_then(|_| self.body.write_all(SUITE_END.as_bytes()));
        self.written += (head.len() + self.chunk.len() + SUITE_END.len()) as u64;
        if let Err(e) = res {
            self.error = Some(e);
        }
        self.chunk.clear();
    }

    fn open_chunk(&mut self) {
        if !self.open {
            self.open = true;
            self.chunk.clear();
        }
    }

    /// Adds a test case, counted in its suite as `kind`.
    fn add(&mut self, case: &CaseOut, kind: Counted, time: Option<f64>) {
        self.open_chunk();
        write::push_case(&mut self.chunk, case);
        self.count(kind, time);
    }

    /// Adds a passing test case.
    fn add_plain(&mut self, name: &str, classname: &str, time: Option<f64>) {
        let case = CaseOut {
            name,
            classname: (!classname.is_empty()).then_some(classname),
            time,
            properties: &[],
            status: Status::Success { flaky: &[] },
            system_out: None,
        };
        self.add(&case, Counted::Other, time);
    }

    /// Counts an errored (`Error`) or failed (otherwise) test in the
    /// report's totals; returns whether it is an error and how its suite
    /// counts it.
    fn count_non_success(&mut self, status: TestStatus) -> (bool, Counted) {
        if status == TestStatus::Error {
            self.errors += 1;
            (true, Counted::Error)
        } else {
            self.failures += 1;
            (false, Counted::Failure)
        }
    }

    fn count(&mut self, kind: Counted, time: Option<f64>) {
        let c = &mut self.chunk_counts;
        c.tests += 1;
        match kind {
            Counted::Failure => c.failures += 1,
            Counted::Error => c.errors += 1,
            Counted::Skipped => c.skipped += 1,
            Counted::Other => {}
        }
        if let Some(t) = time {
            c.time += t;
        }
        let full = c.tests >= CHUNK;
        if full {
            self.flush_suite();
        }
    }

    fn budget_text(&self, text: &str) -> Option<String> {
        if text.is_empty() || self.written >= FULL_TEXT_BUDGET {
            return None;
        }
        Some(clip(text, TEXT_LIMIT))
    }

    /// Writes the root element and the body into place.
    pub fn finish(mut self) -> std::io::Result<u64> {
        self.flush_suite();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.body.flush()?;
        drop(self.body);
        let tmp = self.final_path.with_extension("xml.tmp");
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        let mut root = String::with_capacity(256);
        write::push_report_start(
            &mut root,
            &ReportHead {
                name: &self.name,
                tests: self.tests,
                skipped: None,
                failures: self.failures,
                errors: self.errors,
                time: Some(self.time.max(0.0)),
            },
        );
        out.write_all(root.as_bytes())?;
        // File to file: on Linux the kernel copies (copy_file_range), the
        // body's bytes never pass through this process.
        std::io::copy(&mut File::open(&self.body_path)?, &mut out)?;
        out.write_all(write::REPORT_END.as_bytes())?;
        out.flush()?;
        drop(out);
        std::fs::remove_file(&self.body_path)?;
        std::fs::rename(&tmp, &self.final_path)?;
        Ok(std::fs::metadata(&self.final_path)?.len())
    }
}

/// How a test case counts in its suite's attributes.
#[derive(Clone, Copy)]
enum Counted {
    Failure,
    Error,
    Skipped,
    Other,
}

#[derive(Default)]
struct ChunkCounts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
    time: f64,
}

/// Earlier runs of a test: their message clipped, their `type` the
/// default where they had none (junit-10.xsd requires one on reruns).
fn reruns(runs: &[Rerun], default_type: &str) -> Vec<(bool, Option<String>, String)> {
    runs.iter()
        .map(|r| {
            let kind = if r.kind.is_empty() {
                default_type.to_string()
            } else {
                r.kind.clone()
            };
            (
                r.error,
                (!r.message.is_empty()).then(|| clip(&r.message, MESSAGE_LIMIT)),
                kind,
            )
        })
        .collect()
}

fn as_runs(reruns: &[(bool, Option<String>, String)]) -> Vec<Run<'_>> {
    reruns
        .iter()
        .map(|(error, message, kind)| Run {
            error: *error,
            message: message.as_deref(),
            kind: Some(kind),
            text: None,
        })
        .collect()
}

impl Sink for JunitWriter {
    fn cell_start(&mut self, cell: &CellSource) {
        self.flush_suite();
        self.cell = cell.id.clone();
        self.properties = cell.values.clone();
        self.stack.clear();
        self.cell_cases = 0;
    }

    fn suite_start(&mut self, suite: &str, _timestamp: Option<&str>) {
        self.flush_suite();
        self.stack.push(suite.to_string());
    }

    fn suite_end(&mut self, _suite: &str) {
        self.flush_suite();
        self.stack.pop();
    }

    fn case(&mut self, _suite: &str, case: &Case, status: TestStatus) {
        let time = case.time.filter(|t| *t >= 0.0 && *t < 1e9);
        self.tests += 1;
        self.cell_cases += 1;
        if let Some(t) = time {
            self.time += t;
        }
        if matches!(status, TestStatus::Passed | TestStatus::Xpass) {
            self.add_plain(&case.name, &case.classname, time);
            return;
        }
        let message = clip(&case.message, MESSAGE_LIMIT);
        let mut body = case.text.display().into_owned();
        for b in [&case.system_out, &case.system_err] {
            if !b.is_empty() {
                body.push('\n');
                body.push_str(&b.display());
            }
        }
        let description = self.budget_text(&body);
        let earlier = match status {
            TestStatus::Flaky => reruns(&case.flaky, "flaky"),
            _ => reruns(&case.reruns, "rerun"),
        };
        let earlier = as_runs(&earlier);
        let xfail_message;
        let (status, counted) = match status {
            TestStatus::Passed | TestStatus::Xpass | TestStatus::Flaky => {
                (Status::Success { flaky: &earlier }, Counted::Other)
            }
            TestStatus::Failed | TestStatus::Error => {
                let (error, counted) = self.count_non_success(status);
                let run = Run {
                    error,
                    message: (!message.is_empty()).then_some(message.as_str()),
                    kind: (!case.kind.is_empty()).then_some(case.kind.as_str()),
                    text: description.as_deref(),
                };
                let reruns = &earlier;
                (Status::NonSuccess { run, reruns }, counted)
            }
            TestStatus::Xfail => {
                xfail_message = if message.is_empty() {
                    "expected failure".to_string()
                } else {
                    format!("expected failure: {message}")
                };
                let (message, kind) = (Some(xfail_message.as_str()), Some("xfail"));
                (Status::Skipped { message, kind }, Counted::Skipped)
            }
            TestStatus::Skipped => {
                let message = (!message.is_empty()).then_some(message.as_str());
                (
                    Status::Skipped {
                        message,
                        kind: None,
                    },
                    Counted::Skipped,
                )
            }
        };
        let out = CaseOut {
            name: &case.name,
            classname: (!case.classname.is_empty()).then_some(case.classname.as_str()),
            time,
            properties: &[],
            status,
            system_out: None,
        };
        self.add(&out, counted, time);
    }

    fn cell_end(&mut self, cell: &CellResult) {
        self.flush_suite();
        // A cell that failed without a failing test (a timeout, a build that
        // broke, a cut-off report) gets one synthetic test case, so that CI
        // systems reading only JUnit still see it.
        if cell.is_failure() && cell.counts.failures() == 0 {
            self.stack.clear();
            let mut msg = format!("cell {}", cell.status.as_str());
            if let Some(r) = &cell.reason {
                msg.push_str(": ");
                msg.push_str(r);
            }
            let msg = clip(&msg, MESSAGE_LIMIT);
            let mut text = cell.messages.join("\n");
            if let Some(step) = cell.steps.iter().rev().find(|s| !s.log_tail.is_empty()) {
                text.push_str(&format!(
                    "\n--- log tail of step {} ---\n{}",
                    step.name, step.log_tail
                ));
            }
            let description = self.budget_text(text.trim());
            let run = Run {
                error: true,
                message: Some(&msg),
                kind: Some(cell.status.as_str()),
                text: description.as_deref(),
            };
            let case = CaseOut {
                name: "(cell)",
                classname: Some("rocmatrix"),
                time: None,
                properties: &[],
                status: Status::NonSuccess { run, reruns: &[] },
                system_out: None,
            };
            self.tests += 1;
            self.errors += 1;
            self.add(&case, Counted::Error, None);
            self.flush_suite();
        } else if self.cell_cases == 0 {
            // Keep the cell visible (with its properties) even without tests.
            self.stack.clear();
            self.open_chunk();
            self.flush_suite();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::junit::write::oracle::quick_junit_text;
    use crate::junit::write::CASE_START;
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    use std::time::Duration;

    /// One suite as quick-junit writes it, without the declaration and the
    /// `<testsuites>` wrapper.
    fn render(suite: TestSuite) -> std::io::Result<String> {
        let mut report = Report::new("");
        report.add_test_suite(suite);
        let xml = quick_junit_text(&report)?;
        let start = xml
            .find("<testsuites")
            .and_then(|i| xml[i..].find('>').map(|j| i + j + 1))
            .unwrap_or(0);
        let end = xml.rfind("\n</testsuites>").unwrap_or(xml.len());
        Ok(xml[start..end].to_string())
    }

    /// A failing case through the writer, as the merged report writes one.
    fn push_failing_case(
        c: &mut String,
        (name, classname, time): (&str, &str, Option<f64>),
        tag: &str,
        message: Option<&str>,
        kind: Option<&str>,
        text: Option<&str>,
    ) {
        let run = Run {
            error: tag == "error",
            message,
            kind,
            text,
        };
        let case = CaseOut {
            name,
            classname: (!classname.is_empty()).then_some(classname),
            time,
            properties: &[],
            status: Status::NonSuccess { run, reruns: &[] },
            system_out: None,
        };
        write::push_case(c, &case);
    }

    #[test]
    fn plain_cases_are_written_as_quick_junit_writes_them() {
        let tmp = tempfile::tempdir().unwrap();
        let mut w = JunitWriter::create(&tmp.path().join("junit.xml"), "t").unwrap();
        for (name, classname, time) in [
            ("Case001", "Kernel000Suite00", Some(0.001)),
            ("q\"<&>'", "", None),
            ("slow", "c", Some(12.3456)),
            ("zero", "c", Some(0.0)),
        ] {
            let mut tc = TestCase::new(name, TestCaseStatus::success());
            if !classname.is_empty() {
                tc.set_classname(classname);
            }
            if let Some(t) = time {
                tc.set_time(Duration::from_secs_f64(t));
            }
            let mut suite = TestSuite::new("");
            suite.add_test_case(tc);
            let xml = render(suite).unwrap();
            let want = &xml[xml.find(CASE_START).unwrap()..xml.rfind(SUITE_END).unwrap()];
            w.chunk.clear();
            w.add_plain(name, classname, time);
            assert_eq!(w.chunk, want);
        }
    }

    #[test]
    fn plain_failures_are_written_as_quick_junit_writes_them() {
        let text = "a.cc:12: Failure\nExpected: x == \"y\" & <z>\n  Which is: 'q'\n\nend";
        for (name, classname, time, error, message, kind, description) in [
            (
                "Case001",
                "Suite",
                Some(0.001),
                false,
                "boom",
                "",
                Some(text),
            ),
            ("q\"<&>'", "", None, true, "", "SIGSEGV", Some("x")),
            ("t", "c", Some(12.3456), false, "m & <n>", "assert", None),
            ("t", "c", Some(0.0), true, "", "", None),
            (
                "t",
                "c",
                None,
                false,
                "m",
                "k",
                Some("\n\nleading and trailing\n"),
            ),
            (
                "t",
                "c",
                Some(1.5),
                false,
                "k.cc:4\nExpected: \"a\"\n  b\n",
                "",
                Some(text),
            ),
        ] {
            let mut st = TestCaseStatus::non_success(if error {
                NonSuccessKind::Error
            } else {
                NonSuccessKind::Failure
            });
            if !message.is_empty() {
                st.set_message(message);
            }
            if !kind.is_empty() {
                st.set_type(kind);
            }
            if let Some(d) = description {
                st.set_description(d);
            }
            let mut tc = TestCase::new(name, st);
            if !classname.is_empty() {
                tc.set_classname(classname);
            }
            if let Some(t) = time {
                tc.set_time(Duration::from_secs_f64(t));
            }
            let want = crate::junit::write::oracle::quick_junit_case(tc).unwrap();
            let mut got = String::new();
            push_failing_case(
                &mut got,
                (name, classname, time),
                if error { "error" } else { "failure" },
                (!message.is_empty()).then_some(message),
                (!kind.is_empty()).then_some(kind),
                description,
            );
            assert_eq!(got, want);
        }
    }
}
