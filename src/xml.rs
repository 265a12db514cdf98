//! XML as the JUnit writers need it beyond what quick-junit does.
//!
//! quick-junit escapes `&`, `<`, `>` and quotes in attribute values but
//! leaves line breaks and tabs as they are, and every XML reader normalises
//! those to spaces inside attributes: a multi-line failure `message` would
//! come back as one line. [`keep_attribute_whitespace`] writes them as the
//! character references `&#10;`, `&#13;` and `&#9;`, which readers keep.
//!
//! quick-junit also cleans every string of ANSI escapes through a terminal
//! parser, which costs more than everything else for names that contain
//! nothing to clean: [`push_passing_case`] and [`push_failing_case`] write
//! a passing or plainly failing test case with printable-ASCII strings byte
//! for byte as quick-junit would.

use std::borrow::Cow;
use std::time::Duration;

/// How quick-junit indents a test case (a child of `<testsuite>`).
pub const CASE_START: &str = "\n        <testcase ";
/// How quick-junit closes a suite.
pub const SUITE_END: &str = "\n    </testsuite>";

/// quick-junit's text of `report`, with line breaks in attributes kept.
pub fn quick_junit_text(report: &quick_junit::Report) -> std::io::Result<String> {
    let text = report
        .to_string()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(keep_attribute_whitespace(&text).into_owned())
}

/// One test case as quick-junit writes it inside a suite (from its
/// [`CASE_START`] on).
pub fn quick_junit_case(case: quick_junit::TestCase) -> std::io::Result<String> {
    let mut suite = quick_junit::TestSuite::new("");
    suite.add_test_case(case);
    let mut report = quick_junit::Report::new("");
    report.add_test_suite(suite);
    let xml = quick_junit_text(&report)?;
    let start = xml.find(CASE_START).unwrap_or(0);
    let end = xml.rfind(SUITE_END).unwrap_or(xml.len());
    Ok(xml[start..end.max(start)].to_string())
}

/// Whether quick-junit would write `s` unchanged (no escapes or controls to strip).
pub fn is_plain(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// Whether quick-junit would write `s` unchanged as text (printable ASCII
/// and line breaks: nothing to strip, only `&`, `<`, `>` and quotes to escape).
pub fn is_plain_text(s: &str) -> bool {
    s.bytes().all(|b| b == b'\n' || (0x20..0x7f).contains(&b))
}

/// Appends a passing `<testcase>` (its properties as `(name, value)`) the
/// way quick-junit writes it; every string must be [`is_plain`].
pub fn push_passing_case(
    c: &mut String,
    name: &str,
    classname: &str,
    time: Option<f64>,
    properties: &[(&str, &str)],
) {
    push_case_tag(c, name, classname, time);
    if properties.is_empty() {
        c.push_str("/>");
        return;
    }
    c.push_str(">\n            <properties>");
    for (k, v) in properties {
        c.push_str("\n                <property name=\"");
        c.push_str(&quick_xml::escape::escape(*k));
        c.push_str("\" value=\"");
        c.push_str(&quick_xml::escape::escape(*v));
        c.push_str("\"/>");
    }
    c.push_str("\n            </properties>\n        </testcase>");
}

/// Appends a `<testcase>` with one `<failure>` or `<error>` (`tag`) and no
/// reruns, properties or outputs, the way quick-junit writes it (with
/// [`keep_attribute_whitespace`]); `name`, `classname` and `kind` must be
/// [`is_plain`], `message` and `description` [`is_plain_text`].
pub fn push_failing_case(
    c: &mut String,
    (name, classname, time): (&str, &str, Option<f64>),
    tag: &str,
    message: Option<&str>,
    kind: Option<&str>,
    description: Option<&str>,
) {
    push_case_tag(c, name, classname, time);
    c.push_str(">\n            <");
    c.push_str(tag);
    for (attribute, value) in [("message", message), ("type", kind)] {
        if let Some(v) = value {
            c.push(' ');
            c.push_str(attribute);
            c.push_str("=\"");
            // Line breaks as keep_attribute_whitespace writes them.
            for (i, line) in quick_xml::escape::escape(v).split('\n').enumerate() {
                if i > 0 {
                    c.push_str("&#10;");
                }
                c.push_str(line);
            }
            c.push('"');
        }
    }
    match description {
        Some(d) => {
            c.push('>');
            c.push_str(&quick_xml::escape::escape(d));
            c.push_str("</");
            c.push_str(tag);
            c.push('>');
        }
        None => c.push_str("/>"),
    }
    c.push_str("\n        </testcase>");
}

/// Appends a `<testcase` start tag's name, classname and time, unclosed.
fn push_case_tag(c: &mut String, name: &str, classname: &str, time: Option<f64>) {
    c.push_str(CASE_START);
    c.push_str("name=\"");
    c.push_str(&quick_xml::escape::escape(name));
    c.push('"');
    if !classname.is_empty() {
        c.push_str(" classname=\"");
        c.push_str(&quick_xml::escape::escape(classname));
        c.push('"');
    }
    if let Some(t) = time {
        // quick-junit writes `{:.3}` of the seconds; integer milliseconds
        // give the same digits (up to ties) at a fraction of the cost.
        // (u64 is enough up to 584 million years; u128 digits cost a
        // division routine per digit.)
        let ms = ((Duration::from_secs_f64(t.max(0.0)).as_nanos() + 500_000) / 1_000_000) as u64;
        c.push_str(" time=\"");
        push_decimal(c, ms / 1000);
        c.push('.');
        let frac = ms % 1000;
        c.push(char::from(b'0' + (frac / 100) as u8));
        c.push(char::from(b'0' + (frac / 10 % 10) as u8));
        c.push(char::from(b'0' + (frac % 10) as u8));
        c.push('"');
    }
}

/// Appends the decimal digits of `n`.
pub fn push_decimal(s: &mut String, n: u64) {
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

/// `xml` with line breaks and tabs inside attribute values written as
/// character references. `xml` is markup as quick-junit writes it: text
/// and attribute values escaped, no CDATA, no comments.
pub fn keep_attribute_whitespace(xml: &str) -> Cow<'_, str> {
    if !xml.contains(['\n', '\r', '\t']) {
        return Cow::Borrowed(xml);
    }
    // Bytes, not chars: every byte that matters is ASCII, and runs between
    // replacements are copied whole.
    let bytes = xml.as_bytes();
    let mut out = String::with_capacity(xml.len() + 64);
    let (mut in_tag, mut quote): (bool, Option<u8>) = (false, None);
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let reference = match (in_tag, quote, b) {
            (false, _, b'<') => {
                in_tag = true;
                continue;
            }
            (true, None, b'>') => {
                in_tag = false;
                continue;
            }
            (true, None, b'"' | b'\'') => {
                quote = Some(b);
                continue;
            }
            (true, Some(q), _) if b == q => {
                quote = None;
                continue;
            }
            (true, Some(_), b'\n') => "&#10;",
            (true, Some(_), b'\r') => "&#13;",
            (true, Some(_), b'\t') => "&#9;",
            _ => continue,
        };
        out.push_str(&xml[run..i]);
        out.push_str(reference);
        run = i + 1;
    }
    out.push_str(&xml[run..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_attribute_values_change() {
        let xml = "<a m=\"one\ntwo\tx\r\">text\nstays</a>\n<b k='y\nz'/>";
        assert_eq!(
            keep_attribute_whitespace(xml),
            "<a m=\"one&#10;two&#9;x&#13;\">text\nstays</a>\n<b k='y&#10;z'/>"
        );
        assert!(matches!(
            keep_attribute_whitespace("<a b=\"c\"/>"),
            Cow::Borrowed(_)
        ));
    }
}
