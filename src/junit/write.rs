//! The one JUnit writer: every `<testsuites>`, `<testsuite>` and
//! `<testcase>` rocmatrix writes (the adapters' files, `test_suite::junit_out`,
//! and the merged report, `merged_junit`) is appended to a `String` here,
//! element by element, so a writer never holds more than the element it
//! writes.
//!
//! The bytes are those quick-junit 0.8 writes for the same report (its
//! indentation, attribute order, escapes; tests compare the two on random
//! cases), with two differences that are the reason this exists:
//!
//! - line breaks inside attribute values are written as `&#10;` (quick-junit
//!   writes them raw, and every XML reader turns them into spaces, so a
//!   multi-line failure `message` would come back as one line);
//! - strings are cleaned as quick-junit cleans them (ANSI escapes through
//!   `strip-ansi-escapes`, then C0 controls other than tab, line feed and
//!   carriage return) only when they hold something to clean: a
//!   printable-ASCII name is written as it is, where quick-junit's
//!   terminal parser spent 80% of a million-test merge on names that
//!   contain nothing to clean.

use std::borrow::Cow;
use std::time::Duration;

/// How a test case starts inside a suite.
pub const CASE_START: &str = "\n        <testcase ";
/// How a suite ends.
pub const SUITE_END: &str = "\n    </testsuite>";
/// The declaration every file starts with.
const DECLARATION: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>";

/// The root element's attributes.
pub struct ReportHead<'a> {
    pub name: &'a str,
    pub tests: u64,
    /// Left out when `None` (the merged report has never written it).
    pub skipped: Option<u64>,
    pub failures: u64,
    pub errors: u64,
    /// Seconds, with three decimals.
    pub time: Option<f64>,
}

/// A suite's attributes and properties.
pub struct SuiteHead<'a> {
    pub name: &'a str,
    pub tests: u64,
    pub skipped: u64,
    pub errors: u64,
    pub failures: u64,
    pub time: Option<f64>,
    pub properties: &'a [(&'a str, &'a str)],
}

/// One `<testcase>`.
pub struct CaseOut<'a> {
    pub name: &'a str,
    pub classname: Option<&'a str>,
    pub time: Option<f64>,
    pub properties: &'a [(&'a str, &'a str)],
    pub status: Status<'a>,
    pub system_out: Option<&'a str>,
}

/// How a test case ended, as its child elements say it.
pub enum Status<'a> {
    /// Passed; earlier failed runs become `<flakyFailure>`/`<flakyError>`.
    Success { flaky: &'a [Run<'a>] },
    /// `<failure>` or `<error>` (`run.error`); earlier failed runs become
    /// `<rerunFailure>`/`<rerunError>`.
    NonSuccess { run: Run<'a>, reruns: &'a [Run<'a>] },
    Skipped {
        message: Option<&'a str>,
        kind: Option<&'a str>,
    },
}

/// A failed run of a test: the test's own result or an earlier attempt.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    pub error: bool,
    pub message: Option<&'a str>,
    /// The `type` attribute.
    pub kind: Option<&'a str>,
    /// The element's text.
    pub text: Option<&'a str>,
}

/// The declaration and the root's start tag.
pub fn push_report_start(out: &mut String, head: &ReportHead) {
    out.push_str(DECLARATION);
    out.push_str("\n<testsuites");
    push_attribute(out, "name", head.name);
    push_number(out, "tests", head.tests);
    if let Some(s) = head.skipped {
        push_number(out, "skipped", s);
    }
    push_number(out, "failures", head.failures);
    push_number(out, "errors", head.errors);
    if let Some(t) = head.time {
        push_time(out, t);
    }
    out.push('>');
}

/// The root's end tag and the last line break.
pub const REPORT_END: &str = "\n</testsuites>\n";

/// A suite's start tag and its properties; [`SUITE_END`] closes it.
pub fn push_suite_start(out: &mut String, head: &SuiteHead) {
    out.push_str("\n    <testsuite");
    push_attribute(out, "name", head.name);
    push_number(out, "tests", head.tests);
    push_number(out, "skipped", head.skipped);
    push_number(out, "errors", head.errors);
    push_number(out, "failures", head.failures);
    if let Some(t) = head.time {
        push_time(out, t);
    }
    out.push('>');
    push_properties(out, head.properties, "        ");
}

/// One test case, from its [`CASE_START`] on.
pub fn push_case(out: &mut String, case: &CaseOut) {
    out.push_str(CASE_START.trim_end());
    push_attribute(out, "name", case.name);
    if let Some(c) = case.classname {
        push_attribute(out, "classname", c);
    }
    if let Some(t) = case.time {
        push_time(out, t);
    }
    let childless = case.properties.is_empty()
        && case.system_out.is_none()
        && matches!(case.status, Status::Success { flaky } if flaky.is_empty());
    if childless {
        out.push_str("/>");
        return;
    }
    out.push('>');
    push_properties(out, case.properties, "            ");
    match &case.status {
        Status::Success { flaky } => {
            for r in *flaky {
                push_rerun(out, r, "flaky");
            }
        }
        Status::NonSuccess { run, reruns } => {
            let tag = if run.error { "error" } else { "failure" };
            push_status(out, tag, run.message, run.kind, run.text);
            for r in *reruns {
                push_rerun(out, r, "rerun");
            }
        }
        Status::Skipped { message, kind } => push_status(out, "skipped", *message, *kind, None),
    }
    if let Some(s) = case.system_out {
        out.push_str("\n            <system-out>");
        push_text(out, s);
        out.push_str("</system-out>");
    }
    out.push_str("\n        </testcase>");
}

/// A whole report of `suites` (each its head and its rendered cases).
pub fn report(head: &ReportHead, suites: &[(SuiteHead, String)]) -> String {
    let body: usize = suites.iter().map(|(_, c)| c.len() + 128).sum();
    let mut out = String::with_capacity(body + 256);
    push_report_start(&mut out, head);
    for (suite, cases) in suites {
        push_suite_start(&mut out, suite);
        out.push_str(cases);
        out.push_str(SUITE_END);
    }
    out.push_str(REPORT_END);
    out
}

fn push_properties(out: &mut String, properties: &[(&str, &str)], indent: &str) {
    if properties.is_empty() {
        return;
    }
    out.push('\n');
    out.push_str(indent);
    out.push_str("<properties>");
    for (k, v) in properties {
        out.push('\n');
        out.push_str(indent);
        out.push_str("    <property");
        push_attribute(out, "name", k);
        push_attribute(out, "value", v);
        out.push_str("/>");
    }
    out.push('\n');
    out.push_str(indent);
    out.push_str("</properties>");
}

/// `<failure>`, `<error>` or `<skipped>` with its attributes and text.
fn push_status(
    out: &mut String,
    tag: &str,
    message: Option<&str>,
    kind: Option<&str>,
    text: Option<&str>,
) {
    out.push_str("\n            <");
    out.push_str(tag);
    if let Some(m) = message {
        push_attribute(out, "message", m);
    }
    if let Some(k) = kind {
        push_attribute(out, "type", k);
    }
    match text {
        Some(t) => {
            out.push('>');
            push_text(out, t);
            out.push_str("</");
            out.push_str(tag);
            out.push('>');
        }
        None => out.push_str("/>"),
    }
}

/// `<flakyFailure>`, `<rerunError>` …: never empty, its text inside.
fn push_rerun(out: &mut String, r: &Run, prefix: &str) {
    let tag = match (prefix, r.error) {
        ("flaky", false) => "flakyFailure",
        ("flaky", true) => "flakyError",
        (_, false) => "rerunFailure",
        (_, true) => "rerunError",
    };
    out.push_str("\n            <");
    out.push_str(tag);
    if let Some(m) = r.message {
        push_attribute(out, "message", m);
    }
    if let Some(k) = r.kind {
        push_attribute(out, "type", k);
    }
    out.push('>');
    match r.text {
        Some(t) => push_text(out, t),
        None => {
            // An element with nothing inside closes on its own line.
            out.push_str("\n            ");
        }
    }
    out.push_str("</");
    out.push_str(tag);
    out.push('>');
}

/// ` key="value"`: the value cleaned, escaped, its line breaks kept.
fn push_attribute(out: &mut String, key: &str, value: &str) {
    out.push(' ');
    out.push_str(key);
    out.push_str("=\"");
    // Almost every name is printable ASCII with nothing to escape: one pass
    // says so, instead of cleaning, escaping and splitting it in three.
    if value
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && !matches!(b, b'<' | b'>' | b'&' | b'"' | b'\''))
    {
        out.push_str(value);
        out.push('"');
        return;
    }
    let value = clean(value);
    let escaped = quick_xml::escape::escape(value.as_ref());
    for (i, line) in escaped.split('\n').enumerate() {
        if i > 0 {
            out.push_str("&#10;");
        }
        out.push_str(line);
    }
    out.push('"');
}

/// Element text: cleaned and escaped.
fn push_text(out: &mut String, text: &str) {
    out.push_str(&quick_xml::escape::escape(clean(text).as_ref()));
}

fn push_number(out: &mut String, key: &str, n: u64) {
    out.push(' ');
    out.push_str(key);
    out.push_str("=\"");
    push_decimal(out, n);
    out.push('"');
}

/// ` time="12.346"`: seconds with three decimals, from whole milliseconds
/// (the digits `{:.3}` gives, up to ties, at a fraction of its cost).
fn push_time(out: &mut String, t: f64) {
    // u64 is enough up to 584 million years; u128 digits cost a division
    // routine per digit.
    let ms = ((Duration::from_secs_f64(t.max(0.0)).as_nanos() + 500_000) / 1_000_000) as u64;
    out.push_str(" time=\"");
    push_decimal(out, ms / 1000);
    out.push('.');
    let frac = ms % 1000;
    out.push(char::from(b'0' + (frac / 100) as u8));
    out.push(char::from(b'0' + (frac / 10 % 10) as u8));
    out.push(char::from(b'0' + (frac % 10) as u8));
    out.push('"');
}

/// Appends the decimal digits of `n`.
fn push_decimal(s: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    s.extend(digits[i..].iter().map(|d| char::from(*d)));
}

/// `s` as quick-junit cleans it: ANSI escapes and control characters
/// (other than line feed) removed. Printable ASCII and line feeds are
/// what almost every string is, and pass untouched.
pub fn clean(s: &str) -> Cow<'_, str> {
    if s.bytes().all(|b| b == b'\n' || (0x20..0x7f).contains(&b)) {
        return Cow::Borrowed(s);
    }
    let stripped = strip_ansi_escapes::strip_str(s);
    Cow::Owned(stripped.replace(
        |c| matches!(c, '\x00'..='\x08' | '\x0b' | '\x0c' | '\x0e'..='\x1f'),
        "",
    ))
}

#[cfg(test)]
pub mod oracle;

#[cfg(test)]
mod tests;
