//! quick-junit 0.8 as the reference the writer is held to (tests only):
//! a [`CaseOut`](super::CaseOut) as quick-junit's own types, and what
//! quick-junit writes for them with line breaks in attributes kept.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestRerun};

use super::{CaseOut, Run, Status};

/// quick-junit's text of `report`, with line breaks and tabs inside
/// attribute values written as character references, as the writer does.
pub fn quick_junit_text(report: &Report) -> std::io::Result<String> {
    let text = report
        .to_string()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(keep_attribute_whitespace(&text))
}

/// One test case as quick-junit writes it inside a suite (from its
/// [`super::CASE_START`] on).
pub fn quick_junit_case(case: TestCase) -> std::io::Result<String> {
    let mut suite = quick_junit::TestSuite::new("");
    suite.add_test_case(case);
    let mut report = Report::new("");
    report.add_test_suite(suite);
    let xml = quick_junit_text(&report)?;
    let start = xml.find(super::CASE_START).unwrap_or(0);
    let end = xml.rfind(super::SUITE_END).unwrap_or(xml.len());
    Ok(xml[start..end.max(start)].to_string())
}

fn kind(error: bool) -> NonSuccessKind {
    if error {
        NonSuccessKind::Error
    } else {
        NonSuccessKind::Failure
    }
}

fn rerun(r: &Run) -> TestRerun {
    let mut t = TestRerun::new(kind(r.error));
    if let Some(m) = r.message {
        t.set_message(m);
    }
    if let Some(k) = r.kind {
        t.set_type(k);
    }
    if let Some(x) = r.text {
        t.set_description(x);
    }
    t
}

/// `case` as quick-junit's test case.
pub fn test_case(case: &CaseOut) -> TestCase {
    let status = match &case.status {
        Status::Success { flaky } => TestCaseStatus::Success {
            flaky_runs: flaky.iter().map(rerun).collect(),
        },
        Status::NonSuccess { run, reruns } => {
            let mut s = TestCaseStatus::non_success(kind(run.error));
            if let Some(m) = run.message {
                s.set_message(m);
            }
            if let Some(k) = run.kind {
                s.set_type(k);
            }
            if let Some(x) = run.text {
                s.set_description(x);
            }
            s.add_reruns(reruns.iter().map(rerun));
            s
        }
        Status::Skipped { message, kind } => {
            let mut s = TestCaseStatus::skipped();
            if let Some(m) = message {
                s.set_message(*m);
            }
            if let Some(k) = kind {
                s.set_type(*k);
            }
            s
        }
    };
    let mut tc = TestCase::new(case.name, status);
    if let Some(c) = case.classname {
        tc.set_classname(c);
    }
    if let Some(t) = case.time {
        tc.set_time(Duration::from_secs_f64(t.max(0.0)));
    }
    for (k, v) in case.properties {
        tc.add_property(Property::new(*k, *v));
    }
    if let Some(s) = case.system_out {
        tc.set_system_out(s);
    }
    tc
}

/// `xml` (markup as quick-junit writes it: no CDATA, no comments) with line
/// breaks and tabs inside attribute values as character references.
pub fn keep_attribute_whitespace(xml: &str) -> String {
    let mut out = String::with_capacity(xml.len() + 64);
    let (mut in_tag, mut quote): (bool, Option<char>) = (false, None);
    for c in xml.chars() {
        match (in_tag, quote, c) {
            (false, _, '<') => in_tag = true,
            (true, None, '>') => in_tag = false,
            (true, None, '"' | '\'') => quote = Some(c),
            (true, Some(q), _) if c == q => quote = None,
            (true, Some(_), '\n') => {
                out.push_str("&#10;");
                continue;
            }
            (true, Some(_), '\r') => {
                out.push_str("&#13;");
                continue;
            }
            (true, Some(_), '\t') => {
                out.push_str("&#9;");
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}
