//! The JUnit file an adapter writes: one `<testsuite>` per test suite in
//! listing order, one `<testcase>` per test, shaped as googletest's own XML
//! (classname = suite), with crashes as `<error type="SIGSEGV">` and per-test
//! timeouts as `<error type="timeout">`, written by the one JUnit writer
//! (`crate::junit::write`; a test below holds the file to what quick-junit
//! writes for the same cases).

use std::collections::HashMap;
use std::path::Path;

use super::{Case, CaseVerdict};
use crate::junit::write::{self, CaseOut, ReportHead, Run, Status, SuiteHead};

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
    let mut total = Counts::default();
    let mut written = Vec::with_capacity(suites.len());
    for (suite, members) in &suites {
        let mut counts = Counts::default();
        let mut text = String::with_capacity(members.len() * 160);
        for case in members {
            counts.add(&case.verdict);
            push_case(&mut text, case);
        }
        total.merge(&counts);
        written.push((counts.head(suite), text));
    }
    Ok(write::report(
        &ReportHead {
            name,
            tests: total.tests,
            skipped: Some(total.skipped),
            failures: total.failures,
            errors: total.errors,
            time: None,
        },
        &written,
    ))
}

/// Writes `bytes` to `path`, making its directory.
pub fn save(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, bytes)
}

/// A suite's counts.
#[derive(Default)]
struct Counts {
    tests: u64,
    skipped: u64,
    failures: u64,
    errors: u64,
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

    fn head<'a>(&self, name: &'a str) -> SuiteHead<'a> {
        SuiteHead {
            name,
            tests: self.tests,
            skipped: self.skipped,
            errors: self.errors,
            failures: self.failures,
            time: None,
            properties: &[],
        }
    }
}

/// What a verdict other than a pass or a skip writes.
struct Failure {
    error: bool,
    message: String,
    /// The `type` attribute: the error's kind, `timeout`.
    kind_word: Option<String>,
    /// The element's text: a failure's whole report.
    text: String,
}

impl Failure {
    fn run(&self) -> Run<'_> {
        Run {
            error: self.error,
            message: Some(&self.message),
            kind: self.kind_word.as_deref(),
            text: (!self.text.is_empty()).then_some(self.text.as_str()),
        }
    }
}

fn failure_of(v: &CaseVerdict) -> Option<Failure> {
    match v {
        CaseVerdict::Passed | CaseVerdict::Skipped { .. } => None,
        CaseVerdict::Failed { message, text } => Some(Failure {
            error: false,
            message: message.clone(),
            kind_word: None,
            text: text.clone(),
        }),
        CaseVerdict::Error { kind, message } => Some(Failure {
            error: true,
            message: message.clone(),
            kind_word: Some(kind.clone()),
            text: String::new(),
        }),
        CaseVerdict::Timeout { secs } => Some(Failure {
            error: true,
            message: format!("timed out after {secs} s (timeout_per_test); killed"),
            kind_word: Some("timeout".to_string()),
            text: String::new(),
        }),
    }
}

/// Appends one test case: earlier failed runs as `<flakyFailure>` before a
/// pass and `<rerunFailure>` beside a final failure (Surefire's and
/// nextest's elements).
fn push_case(out: &mut String, case: &Case) {
    with_case(case, |c| write::push_case(out, c))
}

/// `case` as the writer takes it.
fn with_case<T>(case: &Case, f: impl FnOnce(&CaseOut) -> T) -> T {
    // An earlier run that did not fail writes an element with nothing in it.
    let earlier: Vec<Option<Failure>> = case.reruns.iter().map(failure_of).collect();
    let runs: Vec<Run> = earlier
        .iter()
        .map(|f| {
            f.as_ref().map_or(
                Run {
                    error: false,
                    message: None,
                    kind: None,
                    text: None,
                },
                Failure::run,
            )
        })
        .collect();
    let own = failure_of(&case.verdict);
    let status = match (&case.verdict, &own) {
        (_, Some(f)) => Status::NonSuccess {
            run: f.run(),
            reruns: &runs,
        },
        (CaseVerdict::Skipped { message }, None) => Status::Skipped {
            message: (!message.is_empty()).then_some(message.as_str()),
            kind: None,
        },
        (_, None) => Status::Success { flaky: &runs },
    };
    let shard = case.shard.to_string();
    let mut properties = Vec::with_capacity(2);
    if let Some(p) = &case.param {
        properties.push(("param", p.as_str()));
    }
    if case.shard > 0 {
        properties.push(("shard", shard.as_str()));
    }
    f(&CaseOut {
        name: &case.name,
        classname: Some(&case.suite),
        time: case.time,
        properties: &properties,
        status,
        system_out: (!case.output.is_empty()).then_some(case.output.as_str()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::junit::write::oracle::quick_junit_text;
    use quick_junit::{Report, TestCase, TestSuite};

    /// `case` as quick-junit's test case.
    fn test_case(case: &Case) -> TestCase {
        with_case(case, crate::junit::write::oracle::test_case)
    }

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
        let cases = crate::test_suite::gtest_output::parse_xml(&xml).unwrap();
        assert_eq!(cases[0].verdict, CaseVerdict::Passed);
        assert!(cases[1].verdict.is_failure());
    }
}
