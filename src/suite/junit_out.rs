//! The JUnit file an adapter writes: one `<testsuite>` per test suite in
//! listing order, one `<testcase>` per test, shaped as googletest's own XML
//! (classname = suite), with crashes as `<error type="SIGSEGV">` and per-test
//! timeouts as `<error type="timeout">`.
//!
//! The file is what quick-junit writes for these cases, byte for byte
//! (a test below holds it to that), but only the cases that carry a status
//! or an unusual string go through quick-junit: a passing test with a
//! printable-ASCII name and parameter is written directly
//! ([`crate::xml::push_passing_case`]), because quick-junit runs every
//! string through a terminal parser, which made writing 30,000 passing
//! tests cost more than running them.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::{Case, CaseVerdict};
use crate::xml::{is_plain, push_passing_case, quick_junit_case, quick_junit_text, SUITE_END};

/// Writes `cases` as a JUnit report named `name` to `path`.
pub fn write(path: &Path, name: &str, cases: &[Case]) -> std::io::Result<()> {
    save(path, render(name, cases)?.as_bytes())
}

/// The report's text.
fn render(name: &str, cases: &[Case]) -> std::io::Result<String> {
    // Suites in order of their first test, each with its tests in order.
    let mut suites: Vec<(&str, Vec<&Case>)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for case in cases {
        let at = *index.entry(case.suite.as_str()).or_insert_with(|| {
            suites.push((case.suite.as_str(), Vec::new()));
            suites.len() - 1
        });
        suites[at].1.push(case);
    }
    let mut body = String::with_capacity(cases.len() * 160);
    let mut total = Counts::default();
    for (suite, members) in &suites {
        let mut counts = Counts::default();
        let mut text = String::with_capacity(members.len() * 160);
        for case in members {
            counts.add(&case.verdict);
            if !push_plain(&mut text, case) {
                text.push_str(&quick_junit_case(test_case(case))?);
            }
        }
        body.push_str(&suite_start(suite, &counts)?);
        body.push_str(&text);
        body.push_str(SUITE_END);
        total.merge(&counts);
    }
    if suites.is_empty() {
        // quick-junit writes a report without suites as an empty element.
        return quick_junit_text(&Report::new(name));
    }
    let mut root = Report::new(name);
    let mut head = TestSuite::new("");
    (head.tests, head.skipped, head.failures, head.errors) =
        (total.tests, total.skipped, total.failures, total.errors);
    root.add_test_suite(head);
    let shell = quick_junit_text(&root)?;
    // quick-junit's root element with these totals; the suites go inside.
    let open = shell
        .find("<testsuites")
        .and_then(|i| shell[i..].find('>').map(|j| i + j + 1))
        .unwrap_or(shell.len());
    let mut out = String::with_capacity(open + body.len() + 16);
    out.push_str(&shell[..open]);
    out.push_str(&body);
    out.push_str("\n</testsuites>\n");
    Ok(out)
}

/// Writes `bytes` to `path`, making its directory.
pub fn save(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, bytes)
}

/// A suite's counts, as quick-junit keeps them.
#[derive(Default)]
struct Counts {
    tests: usize,
    skipped: usize,
    failures: usize,
    errors: usize,
}

impl Counts {
    fn add(&mut self, v: &CaseVerdict) {
        self.tests += 1;
        match v {
            CaseVerdict::Passed => {}
            CaseVerdict::Skipped { .. } => self.skipped += 1,
            CaseVerdict::Failed { .. } => self.failures += 1,
            CaseVerdict::Error { .. } | CaseVerdict::Timeout { .. } => self.errors += 1,
        }
    }

    fn merge(&mut self, o: &Counts) {
        self.tests += o.tests;
        self.skipped += o.skipped;
        self.failures += o.failures;
        self.errors += o.errors;
    }
}

/// A suite's start tag with its counts, as quick-junit writes it.
fn suite_start(name: &str, counts: &Counts) -> std::io::Result<String> {
    let mut suite = TestSuite::new(name);
    (suite.tests, suite.skipped, suite.failures, suite.errors) =
        (counts.tests, counts.skipped, counts.failures, counts.errors);
    let mut report = Report::new("");
    report.add_test_suite(suite);
    let xml = quick_junit_text(&report)?;
    let start = xml.find("\n    <testsuite").unwrap_or(0);
    let end = xml[start..].find("/>").map_or(xml.len(), |i| start + i);
    Ok(format!("{}>", &xml[start..end]))
}

/// A passing case whose strings need no cleaning, written directly; false
/// when the case is not one.
fn push_plain(out: &mut String, case: &Case) -> bool {
    // quick-junit writes an empty classname; push_passing_case leaves it out.
    let plain = case.verdict == CaseVerdict::Passed
        && case.reruns.is_empty()
        && case.output.is_empty()
        && !case.suite.is_empty()
        && is_plain(&case.name)
        && is_plain(&case.suite)
        && case.param.as_deref().is_none_or(is_plain);
    if !plain {
        return false;
    }
    let shard = case.shard.to_string();
    let mut properties = Vec::with_capacity(2);
    if let Some(p) = &case.param {
        properties.push(("param", p.as_str()));
    }
    if case.shard > 0 {
        properties.push(("shard", shard.as_str()));
    }
    push_passing_case(out, &case.name, &case.suite, case.time, &properties);
    true
}

/// One earlier failed run of a test, as JUnit's rerun elements say it.
/// What a verdict other than a pass or a skip writes.
struct Failure {
    kind: NonSuccessKind,
    message: String,
    /// The `type` attribute: the error's kind, `timeout`.
    kind_word: Option<String>,
    /// The element's text: a failure's whole report.
    text: String,
}

fn failure_of(v: &CaseVerdict) -> Option<Failure> {
    match v {
        CaseVerdict::Passed | CaseVerdict::Skipped { .. } => None,
        CaseVerdict::Failed { message, text } => Some(Failure {
            kind: NonSuccessKind::Failure,
            message: message.clone(),
            kind_word: None,
            text: text.clone(),
        }),
        CaseVerdict::Error { kind, message } => Some(Failure {
            kind: NonSuccessKind::Error,
            message: message.clone(),
            kind_word: Some(kind.clone()),
            text: String::new(),
        }),
        CaseVerdict::Timeout { secs } => Some(Failure {
            kind: NonSuccessKind::Error,
            message: format!("timed out after {secs} s (timeout_per_test); killed"),
            kind_word: Some("timeout".to_string()),
            text: String::new(),
        }),
    }
}

/// An earlier failed run, as a `<flakyFailure>` or `<rerunFailure>`.
fn rerun_of(v: &CaseVerdict) -> quick_junit::TestRerun {
    let Some(f) = failure_of(v) else {
        return quick_junit::TestRerun::new(NonSuccessKind::Failure);
    };
    let mut r = quick_junit::TestRerun::new(f.kind);
    r.set_message(f.message);
    if let Some(k) = f.kind_word {
        r.set_type(k);
    }
    if !f.text.is_empty() {
        r.set_description(f.text);
    }
    r
}

fn test_case(case: &Case) -> TestCase {
    let status = match (&case.verdict, failure_of(&case.verdict)) {
        (_, Some(f)) => {
            let mut s = TestCaseStatus::non_success(f.kind);
            s.set_message(f.message);
            if let Some(k) = f.kind_word {
                s.set_type(k);
            }
            if !f.text.is_empty() {
                s.set_description(f.text);
            }
            s
        }
        (CaseVerdict::Skipped { message }, None) => {
            let mut s = TestCaseStatus::skipped();
            if !message.is_empty() {
                s.set_message(message.as_str());
            }
            s
        }
        (_, None) => TestCaseStatus::success(),
    };
    let mut status = status;
    // Earlier failed runs: <flakyFailure> before a pass, <rerunFailure>
    // beside a final failure (Surefire's and nextest's elements).
    for earlier in &case.reruns {
        status.add_rerun(rerun_of(earlier));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole report as quick-junit alone writes it.
    fn by_quick_junit(name: &str, cases: &[Case]) -> String {
        let mut report = Report::new(name);
        let mut suites: Vec<TestSuite> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for case in cases {
            let at = *index.entry(case.suite.as_str()).or_insert_with(|| {
                suites.push(TestSuite::new(case.suite.as_str()));
                suites.len() - 1
            });
            suites[at].add_test_case(test_case(case));
        }
        report.add_test_suites(suites);
        quick_junit_text(&report).unwrap()
    }

    fn case(suite: &str, name: &str, verdict: CaseVerdict) -> Case {
        Case {
            suite: suite.into(),
            name: name.into(),
            param: None,
            verdict,
            time: None,
            output: String::new(),
            shard: 0,
            reruns: Vec::new(),
        }
    }

    #[test]
    fn written_as_quick_junit_writes_it() {
        let mut cases = vec![
            case("Basic", "Passes", CaseVerdict::Passed),
            case(
                "Basic",
                "Fails",
                CaseVerdict::Failed {
                    message: "x.cc:3\nExpected: 1".into(),
                    text: "x.cc:3\nExpected: 1\n\tWhich is: 2 \u{1b}[31mred\u{1b}[0m".into(),
                },
            ),
            case(
                "Crash",
                "Segfaults",
                CaseVerdict::Error {
                    kind: "SIGSEGV".into(),
                    message: "killed by SIGSEGV (exit status 139)".into(),
                },
            ),
            case("Hang", "Spins", CaseVerdict::Timeout { secs: 3 }),
            case(
                "Basic",
                "DISABLED_Off",
                CaseVerdict::Skipped {
                    message: "disabled (DISABLED_ prefix)".into(),
                },
            ),
            case("Values/Param", "IsSmall/0", CaseVerdict::Passed),
            case("Values/Param", "IsSmall/1", CaseVerdict::Passed),
            case("Odd\u{7}Suite", "näme<&>\"'", CaseVerdict::Passed),
            case("Timed", "Slow", CaseVerdict::Passed),
            case("Timed", "Zero", CaseVerdict::Passed),
            case("", "NoSuite", CaseVerdict::Passed),
        ];
        cases[2].output = "about to dereference\n\u{1b}[1mbold\u{1b}[0m\u{0}".into();
        cases[5].param = Some("GetParam() = 1".into());
        cases[5].shard = 2;
        cases[6].param = Some("GetParam() = \"a<b\\n\" & 'c'".into());
        cases[6].time = Some(0.001);
        cases[8].time = Some(12.3456);
        cases[9].time = Some(0.0);
        cases[9].shard = 1;
        assert_eq!(
            render("gtest", &cases).unwrap(),
            by_quick_junit("gtest", &cases)
        );
        assert_eq!(render("gtest", &[]).unwrap(), by_quick_junit("gtest", &[]));
    }

    #[test]
    fn reruns_are_flaky_failures_before_a_pass_and_rerun_failures_beside_a_failure() {
        let boom = CaseVerdict::Failed {
            message: "queue not ready".into(),
            text: String::new(),
        };
        let mut flaky = case("Rerun", "Flaky", CaseVerdict::Passed);
        flaky.reruns = vec![boom.clone()];
        let mut failing = case("Rerun", "Fails", boom.clone());
        failing.reruns = vec![boom, CaseVerdict::Timeout { secs: 3 }];
        let xml = render("gtest", &[flaky, failing]).unwrap();
        assert!(
            xml.contains(r#"<flakyFailure message="queue not ready">"#),
            "{xml}"
        );
        assert_eq!(xml.matches("<rerunFailure").count(), 1, "{xml}");
        assert!(
            xml.contains(
                r#"<rerunError message="timed out after 3 s (timeout_per_test); killed" type="timeout">"#
            ),
            "{xml}"
        );
        // The reader the report uses reads them back as one flaky test.
        let cases = crate::suite::gtest_output::parse_xml(&xml).unwrap();
        assert_eq!(cases[0].verdict, CaseVerdict::Passed);
        assert!(cases[1].verdict.is_failure());
    }
}
