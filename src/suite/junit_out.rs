//! The JUnit file an adapter writes: one `<testsuite>` per test suite in
//! listing order, one `<testcase>` per test, shaped as googletest's own XML
//! (classname = suite), with crashes as `<error type="SIGSEGV">` and per-test
//! timeouts as `<error type="timeout">`.

use std::path::Path;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::{Case, Verdict};

/// Writes `cases` as a JUnit report named `name` to `path`.
pub fn write(path: &Path, name: &str, cases: &[Case]) -> std::io::Result<()> {
    let mut report = Report::new(name);
    let mut suites: Vec<TestSuite> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for case in cases {
        let at = *index.entry(case.suite.as_str()).or_insert_with(|| {
            suites.push(TestSuite::new(case.suite.as_str()));
            suites.len() - 1
        });
        suites[at].add_test_case(test_case(case));
    }
    report.add_test_suites(suites);
    let text = report
        .to_string()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    save(
        path,
        crate::xml::keep_attribute_whitespace(&text).as_bytes(),
    )
}

/// Writes `bytes` to `path`, making its directory.
pub fn save(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, bytes)
}

fn test_case(case: &Case) -> TestCase {
    let status = match &case.verdict {
        Verdict::Passed => TestCaseStatus::success(),
        Verdict::Skipped { message } => {
            let mut s = TestCaseStatus::skipped();
            if !message.is_empty() {
                s.set_message(message.as_str());
            }
            s
        }
        Verdict::Failed { message, text } => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(message.as_str());
            if !text.is_empty() {
                s.set_description(text.as_str());
            }
            s
        }
        Verdict::Error { kind, message } => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message(message.as_str()).set_type(kind.as_str());
            s
        }
        Verdict::Timeout { secs } => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message(format!(
                "timed out after {secs} s (timeout_per_test); killed"
            ))
            .set_type("timeout");
            s
        }
    };
    let mut tc = TestCase::new(case.name.as_str(), status);
    tc.set_classname(case.suite.as_str());
    if let Some(t) = case.time {
        tc.set_time(Duration::from_secs_f64(t.max(0.0)));
    }
    if let Some(p) = &case.param {
        tc.add_property(Property::new("param", p.as_str()));
    }
    if case.shard > 0 {
        tc.add_property(Property::new("shard", case.shard.to_string()));
    }
    if !case.output.is_empty() {
        tc.set_system_out(case.output.as_str());
    }
    tc
}
