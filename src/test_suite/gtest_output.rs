//! What a googletest binary prints, read: the `--gtest_list_tests` listing,
//! the `[ RUN      ]` / `[       OK ]` progress lines as they stream, and the
//! XML report that `--gtest_output=xml:` writes when a process ends normally.
//! Pure functions over text; the driver is in [`super::gtest`].

use std::time::Instant;

use quick_xml::events::Event;
use quick_xml::Reader;

use super::{Case, CaseVerdict};

/// Bytes of a test's own output kept while it runs (the tail).
pub const CAPTURE_BYTES: usize = 32 * 1024;

/// A test named by `--gtest_list_tests`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// `Suite`, `Prefix/Suite/0` for typed and parameterised suites.
    pub suite: String,
    /// `Test`, `Test/3` for value-parameterised tests.
    pub name: String,
    /// The listing's comment: `GetParam() = …` or `TypeParam = …`.
    pub param: Option<String>,
}

impl Listed {
    /// `Suite.Test`, as `--gtest_filter` and the progress lines write it.
    pub fn full(&self) -> String {
        format!("{}.{}", self.suite, self.name)
    }

    /// Disabled tests are listed but never run without
    /// `--gtest_also_run_disabled_tests`.
    pub fn is_disabled(&self) -> bool {
        self.name.starts_with("DISABLED_")
            || self
                .suite
                .split('/')
                .any(|part| part.starts_with("DISABLED_"))
    }
}

/// Parses `--gtest_list_tests` output:
///
/// ```text
/// Suite.
///   Test
/// Prefix/Param/0.  # TypeParam = int
///   Test/1  # GetParam() = 4
/// ```
///
/// Lines that are neither (what a binary prints before main, say) are skipped.
pub fn parse_listing(text: &str) -> Vec<Listed> {
    let mut out = Vec::new();
    let mut suite: Option<(String, Option<String>)> = None;
    for line in text.lines() {
        let (body, comment) = match line.split_once("  # ") {
            Some((b, c)) => (b, Some(c.trim().to_string())),
            None => (line, None),
        };
        if let Some(test) = body.strip_prefix("  ") {
            let test = test.trim();
            if let (Some((s, suite_param)), false) = (&suite, test.is_empty()) {
                if !test.contains(char::is_whitespace) {
                    out.push(Listed {
                        suite: s.clone(),
                        name: test.to_string(),
                        param: comment.or_else(|| suite_param.clone()),
                    });
                }
            }
        } else if let Some(s) = body.trim_end().strip_suffix('.') {
            suite = (!s.is_empty() && !s.contains(char::is_whitespace))
                .then(|| (s.to_string(), comment));
        } else {
            suite = None;
        }
    }
    out
}

/// How a progress line ended a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnd {
    Ok,
    Failed,
    Skipped,
}

/// A test that the progress lines show as finished.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub full: String,
    pub end: LineEnd,
    /// What the test printed between its RUN line and its end line.
    pub output: String,
    pub time: Option<f64>,
}

/// Follows a process's output as it streams: which test runs now, which
/// have finished and how, and complete lines for the log.
#[derive(Debug, Default)]
pub struct OutputFollower {
    partial: Vec<u8>,
    /// The test that has started and not finished, and when it started.
    pub running: Option<(String, Instant)>,
    capture: String,
    pub finished: Vec<Finished>,
}

impl OutputFollower {
    /// Feeds output bytes; `each_line` gets every complete line they
    /// finished (without its line break).
    pub fn feed(&mut self, bytes: &[u8], mut each_line: impl FnMut(&str)) {
        let mut buf = std::mem::take(&mut self.partial);
        buf.extend_from_slice(bytes);
        // Lines are borrowed where they end and the rest moved once per
        // chunk (draining each line off the front moved the rest once per
        // line; a String per line cost more than the test did).
        let mut start = 0;
        while let Some(i) = memchr::memchr(b'\n', &buf[start..]) {
            let end = start + i;
            let text = String::from_utf8_lossy(&buf[start..end]);
            let line = text.trim_end_matches('\r');
            self.line(line);
            each_line(line);
            start = end + 1;
        }
        buf.drain(..start);
        self.partial = buf;
    }

    /// The unfinished last line, when the process has ended.
    pub fn flush(&mut self) -> Option<String> {
        if self.partial.is_empty() {
            return None;
        }
        let line = String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned();
        self.line(&line);
        Some(line)
    }

    /// The running test's output so far (its tail).
    pub fn captured(&self) -> &str {
        &self.capture
    }

    fn line(&mut self, line: &str) {
        if let Some(name) = marker(line, "[ RUN      ]") {
            self.running = Some((name.to_string(), Instant::now()));
            self.capture.clear();
            return;
        }
        let end = [
            ("[       OK ]", LineEnd::Ok),
            ("[  FAILED  ]", LineEnd::Failed),
            ("[  SKIPPED ]", LineEnd::Skipped),
        ]
        .into_iter()
        .find_map(|(m, e)| marker(line, m).map(|n| (n, e)));
        if let (Some((name, end)), Some((running, _))) = (end, &self.running) {
            if name == running {
                self.finished.push(Finished {
                    full: name.to_string(),
                    end,
                    output: std::mem::take(&mut self.capture),
                    time: millis(line),
                });
                self.running = None;
                return;
            }
        }
        if self.running.is_some() {
            self.capture.push_str(line);
            self.capture.push('\n');
            if self.capture.len() > CAPTURE_BYTES {
                let cut = super::tail_start(&self.capture, CAPTURE_BYTES);
                self.capture.drain(..cut);
            }
        }
    }
}

/// The test name after a progress marker: `[  FAILED  ] A.B, where … (3 ms)` → `A.B`.
fn marker<'a>(line: &'a str, m: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(m)?.trim_start();
    let name = rest.split([' ', ',']).next()?;
    (!name.is_empty() && name.contains('.')).then_some(name)
}

/// `(12 ms)` at the end of a progress line, in seconds.
fn millis(line: &str) -> Option<f64> {
    let inner = line.trim_end().strip_suffix(" ms)")?;
    let n = inner.rsplit_once('(')?.1;
    n.trim().parse::<f64>().ok().map(|ms| ms / 1000.0)
}

/// Reads the XML report of one process: every `<testcase>` with its verdict.
/// `None` when the document is not a complete gtest report (the process died
/// while writing it, or wrote none).
pub fn parse_xml(xml: &str) -> Option<Vec<Case>> {
    let mut reader = Reader::from_str(xml);
    let mut cases = Vec::new();
    let mut current: Option<XmlCase> = None;
    let mut in_text = false;
    let mut in_out = false;
    let mut depth = 0usize;
    let mut closed_root = false;
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) if e.local_name().as_ref() == b"testcase" => {
                depth += 1;
                current = Some(XmlCase::from_element(&e));
            }
            Event::Empty(e) if e.local_name().as_ref() == b"testcase" => {
                cases.push(XmlCase::from_element(&e).finish());
            }
            Event::Start(e) => {
                depth += 1;
                if let Some(c) = current.as_mut() {
                    in_out = matches!(e.local_name().as_ref(), b"system-out" | b"system-err");
                    in_text = c.child(&e);
                }
            }
            Event::Empty(e) => {
                if let Some(c) = current.as_mut() {
                    c.child(&e);
                }
            }
            // What the test printed (CTest's reports carry it; gtest's
            // do not), its tail kept.
            Event::CData(t) if in_out => {
                if let Some(c) = current.as_mut() {
                    c.printed(&String::from_utf8_lossy(t.as_ref()));
                }
            }
            Event::Text(t) if in_out => {
                if let Some(c) = current.as_mut() {
                    c.printed(&unescaped(t.as_ref()));
                }
            }
            Event::CData(t) if in_text => {
                if let Some(c) = current.as_mut() {
                    c.text.push_str(&String::from_utf8_lossy(t.as_ref()));
                }
            }
            Event::Text(t) if in_text => {
                if let Some(c) = current.as_mut() {
                    c.text.push_str(&String::from_utf8_lossy(t.as_ref()));
                }
            }
            Event::End(e) => {
                depth = depth.saturating_sub(1);
                // The root element closed: the writer finished (gtest's root
                // is <testsuites>, CTest's <testsuite>).
                closed_root |= depth == 0;
                match e.local_name().as_ref() {
                    b"testcase" => {
                        if let Some(c) = current.take() {
                            cases.push(c.finish());
                        }
                    }
                    b"failure" | b"error" => in_text = false,
                    b"system-out" | b"system-err" => in_out = false,
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    closed_root.then_some(cases)
}

/// A parameter as `--gtest_list_tests` writes it (`GetParam() = 4`): on
/// one line, cut after 250 bytes with `...`, so that a test's parameter
/// reads the same whether a listing or a report named it.
fn listing_param(label: &str, value: &str) -> String {
    // googletest's PrintOnOneLine: bytes counted, a line break as two.
    const MAX: usize = 250;
    let mut out = format!("{label} = ");
    let mut n = 0;
    for c in value.chars() {
        if n >= MAX {
            out.push_str("...");
            break;
        }
        if c == '\n' {
            out.push_str("\\n");
            n += 2;
        } else {
            out.push(c);
            n += c.len_utf8();
        }
    }
    out.trim_end().to_string()
}

/// An element's attributes, unescaped (lossily where they are not UTF-8).
fn attributes(e: &quick_xml::events::BytesStart) -> Vec<(String, String)> {
    e.attributes()
        .flatten()
        .map(|a| {
            let key = String::from_utf8_lossy(a.key.local_name().as_ref()).into_owned();
            (key, unescaped(&a.value))
        })
        .collect()
}

/// An attribute's raw value unescaped (lossily where it is not UTF-8).
fn unescaped(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    match quick_xml::escape::unescape(&text) {
        Ok(v) => v.into_owned(),
        Err(_) => text.into_owned(),
    }
}

struct XmlCase {
    suite: String,
    name: String,
    time: Option<f64>,
    notrun: bool,
    skipped: bool,
    failure: Option<String>,
    text: String,
    skip_message: Option<String>,
    param: Option<String>,
    output: String,
}

impl XmlCase {
    fn from_element(e: &quick_xml::events::BytesStart) -> XmlCase {
        let mut c = XmlCase {
            suite: String::new(),
            name: String::new(),
            time: None,
            notrun: false,
            skipped: false,
            failure: None,
            text: String::new(),
            skip_message: None,
            param: None,
            output: String::new(),
        };
        // Only the attributes read here are decoded: a report of 30,000
        // tests carries ten attributes on each (file, line, timestamp …).
        for a in e.attributes().with_checks(false).flatten() {
            let raw = a.value.as_ref();
            match a.key.local_name().as_ref() {
                b"classname" => c.suite = unescaped(raw),
                b"name" => c.name = unescaped(raw),
                b"time" => c.time = std::str::from_utf8(raw).ok().and_then(|t| t.parse().ok()),
                // gtest: status="notrun" / result="suppressed" for disabled
                // tests; CTest: status="notrun" or "disabled".
                b"status" => c.notrun |= matches!(raw, b"notrun" | b"disabled"),
                b"result" => {
                    c.notrun |= raw == b"suppressed";
                    c.skipped = raw == b"skipped";
                }
                b"value_param" if c.param.is_none() => {
                    c.param = Some(listing_param("GetParam()", &unescaped(raw)));
                }
                b"type_param" if c.param.is_none() => {
                    c.param = Some(listing_param("TypeParam", &unescaped(raw)));
                }
                _ => {}
            }
        }
        c
    }

    /// Text the test printed, its tail kept within [`CAPTURE_BYTES`].
    fn printed(&mut self, text: &str) {
        self.output.push_str(text);
        if self.output.len() > CAPTURE_BYTES {
            let cut = super::tail_start(&self.output, CAPTURE_BYTES);
            self.output.drain(..cut);
        }
    }

    /// A child of `<testcase>`; true when its text is the failure's body.
    fn child(&mut self, e: &quick_xml::events::BytesStart) -> bool {
        let message = attributes(e)
            .into_iter()
            .find(|(a, _)| a == "message")
            .map(|(_, v)| v)
            .unwrap_or_default();
        match e.local_name().as_ref() {
            b"failure" | b"error" => {
                self.failure.get_or_insert(message);
                true
            }
            b"skipped" => {
                self.skip_message = Some(message);
                self.skipped = true;
                false
            }
            _ => false,
        }
    }

    fn finish(self) -> Case {
        let verdict = if let Some(message) = self.failure {
            CaseVerdict::Failed {
                message,
                text: self.text,
            }
        } else if self.notrun {
            CaseVerdict::Skipped {
                message: "disabled (not run by googletest)".into(),
            }
        } else if self.skipped {
            CaseVerdict::Skipped {
                message: self.skip_message.unwrap_or_default(),
            }
        } else {
            CaseVerdict::Passed
        };
        Case {
            suite: self.suite,
            name: self.name,
            param: self.param,
            verdict,
            time: self.time,
            output: self.output,
            shard: 0,
            reruns: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_with_typed_and_parameterised_tests() {
        let text = "Running main() from gtest_main.cc\n\
            Basic.\n  Passes\n  DISABLED_Off\n\
            Typed/0.  # TypeParam = int\n  Works\n\
            Inst/Param.\n  Square/0  # GetParam() = 2\n  Square/1  # GetParam() = 3\n";
        let l = parse_listing(text);
        let full: Vec<String> = l.iter().map(Listed::full).collect();
        assert_eq!(
            full,
            [
                "Basic.Passes",
                "Basic.DISABLED_Off",
                "Typed/0.Works",
                "Inst/Param.Square/0",
                "Inst/Param.Square/1"
            ]
        );
        assert_eq!(l[2].param.as_deref(), Some("TypeParam = int"));
        assert_eq!(l[4].param.as_deref(), Some("GetParam() = 3"));
        assert!(l[1].is_disabled() && !l[0].is_disabled());
    }

    #[test]
    fn progress_follows_split_chunks() {
        let mut p = OutputFollower::default();
        p.feed(
            b"[ RUN      ] A.b\nhello\n[       OK ] A.b (3 ms)\n[ RUN   ",
            |_| {},
        );
        assert_eq!(p.finished.len(), 1);
        assert_eq!(p.finished[0].time, Some(0.003));
        let mut lines = Vec::new();
        p.feed(
            b"   ] A.c\nboom: expected 1\r\n[  FAILED  ] A.c, where GetParam() = 4 (0 ms)\n",
            |l| lines.push(l.to_string()),
        );
        assert_eq!(lines[0], "[ RUN      ] A.c");
        assert_eq!(lines[1], "boom: expected 1");
        assert_eq!(p.finished[1].end, LineEnd::Failed);
        assert_eq!(p.finished[1].output, "boom: expected 1\n");
        p.feed(b"[ RUN      ] A.d\nSegmentation", |_| {});
        assert_eq!(p.running.as_ref().map(|r| r.0.as_str()), Some("A.d"));
        assert_eq!(p.flush().as_deref(), Some("Segmentation"));
        assert_eq!(p.captured(), "Segmentation\n");
        // The summary at the end names failed tests again: not a new outcome.
        p.feed(b"[  FAILED  ] A.c, where GetParam() = 4\n", |_| {});
        assert_eq!(p.finished.len(), 2);
    }

    #[test]
    fn xml_report_verdicts() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" name="AllTests">
  <testsuite name="A" tests="3">
    <testcase name="ok" status="run" result="completed" time="0.001" classname="A" />
    <testcase name="bad" status="run" result="completed" time="0" classname="A">
      <failure message="x.cc:3&#x0A;Expected: 1" type=""><![CDATA[x.cc:3
Expected: 1]]></failure>
    </testcase>
    <testcase name="skip" status="run" result="skipped" time="0" classname="A">
      <skipped message="x.cc:9&#x0A;not here"/>
    </testcase>
  </testsuite>
</testsuites>"#;
        let cases = parse_xml(xml).unwrap();
        assert_eq!(cases.len(), 3);
        assert_eq!(cases[0].verdict, CaseVerdict::Passed);
        match &cases[1].verdict {
            CaseVerdict::Failed { message, text } => {
                assert_eq!(message, "x.cc:3\nExpected: 1");
                assert!(text.contains("Expected: 1"));
            }
            v => panic!("{v:?}"),
        }
        assert!(matches!(cases[2].verdict, CaseVerdict::Skipped { .. }));
        assert!(parse_xml(&xml[..xml.len() - 20]).is_none());
    }

    /// googletest 1.12.1's own listing and report of one binary
    /// (tests/it/data/gtest/quiet.cc): a report names the same tests with
    /// the same parameters as the listing, a long one cut and a line break
    /// written as the listing writes them.
    #[test]
    fn report_names_tests_and_parameters_as_the_listing_does() {
        let listing = parse_listing(include_str!("../../tests/fixtures/gtest/quiet-1.12.1.list"));
        let report =
            parse_xml(include_str!("../../tests/fixtures/gtest/quiet-1.12.1.xml")).unwrap();
        assert_eq!(listing.len(), 12);
        let from_listing: Vec<(String, Option<String>)> = listing
            .iter()
            .map(|t| (t.full(), t.param.clone()))
            .collect();
        let from_report: Vec<(String, Option<String>)> = report
            .iter()
            .map(|c| (format!("{}.{}", c.suite, c.name), c.param.clone()))
            .collect();
        assert_eq!(from_report, from_listing);
        let long = listing[10].param.as_deref().unwrap();
        assert!(
            long.starts_with("GetParam() = \"xxx") && long.ends_with("x..."),
            "{long}"
        );
        assert_eq!(
            listing[11].param.as_deref(),
            Some("GetParam() = \"two\\nlines\"")
        );
        assert_eq!(report[5].param.as_deref(), Some("TypeParam = int"));
        assert!(matches!(report[3].verdict, CaseVerdict::Skipped { .. }));
    }
}
