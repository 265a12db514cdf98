//! A lenient, streaming JUnit XML reader on quick-xml; the writer is
//! [`write`].
//!
//! It accepts what real tools write: a `<testsuites>` or a bare `<testsuite>`
//! root, nested suites, GoogleTest, CTest, pytest, Surefire's
//! `flakyFailure`/`rerunFailure`, nextest, Catch2 and Boost.Test. Each
//! complete `<testcase>` is handed to a [`Visitor`] as soon as its end tag is
//! read, so memory stays bounded by one test case (whose texts are capped by
//! [`Limits`]) however large the file is.
//!
//! Odd attributes (missing or unparseable `time`, `time="1,234.5"`, empty
//! names, invalid UTF-8) are tolerated and counted in [`Oddities`]. A file
//! that ends early keeps every complete test case and reports
//! [`Problem::Truncated`]; malformed XML reports [`Problem::Invalid`] with the
//! byte offset, again keeping what came before.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::BufRead;

use quick_xml::events::Event;
use quick_xml::Reader;

mod state;
mod tokens;
pub mod write;

use state::State;
use tokens::Tokens;

/// Elements nested deeper than this end the file with [`Problem::Invalid`].
/// Real reports nest suites a few levels; 200,000 nested `<testsuite>`s
/// would otherwise make a suite path per level.
pub const MAX_DEPTH: usize = 256;

/// Attributes read per element; more are ignored (and counted as odd).
pub const MAX_ATTRIBUTES: usize = 64;

/// The longest tag (`<…>`, attributes and all) read: GoogleTest writes a
/// failure's message into an attribute, and those can be long, but not
/// this long. A longer one ends the file with [`Problem::TooLarge`].
pub const MAX_TAG: u64 = 8 << 20;

/// The longest run of text (or of a CDATA section or comment) between two
/// `<`/`>` handed to the XML parser; the
/// rest of the run is skipped (texts kept per case are far smaller, see
/// [`Limits`]), so a 200 MB failure message costs no 200 MB buffer. The
/// last [`TEXT_TAIL`] bytes of a cut run are kept, so the end of a CDATA
/// section (`]]>`) survives.
pub const MAX_TEXT_RUN: u64 = 1 << 20;
const TEXT_TAIL: usize = 64;

/// Caps on what is kept per test case.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of a failure/error/skip `message` attribute.
    pub message: usize,
    /// Bytes of a failure/error/skip body (stack trace, assertion text).
    pub text: usize,
    /// Bytes of `system-out` and of `system-err`, each.
    pub output: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            message: 2048,
            text: 8192,
            output: 8192,
        }
    }
}

/// A text kept up to a cap, with the number of bytes that did not fit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bounded {
    pub text: String,
    pub dropped: u64,
}

impl Bounded {
    /// Appends `s`, keeping at most `cap` bytes in total (cut on a char boundary).
    pub fn push(&mut self, s: &str, cap: usize) {
        let room = cap.saturating_sub(self.text.len());
        if s.len() <= room {
            self.text.push_str(s);
        } else {
            let cut = floor_char_boundary(s, room);
            self.text.push_str(&s[..cut]);
            self.dropped += (s.len() - cut) as u64;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty() && self.dropped == 0
    }

    /// The text, with a note on what was cut.
    pub fn display(&self) -> Cow<'_, str> {
        if self.dropped == 0 {
            Cow::Borrowed(&self.text)
        } else {
            Cow::Owned(format!("{}\n… [{} bytes cut]", self.text, self.dropped))
        }
    }
}

/// The largest index ≤ `i` that is a char boundary of `s`.
pub fn floor_char_boundary(s: &str, i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    let mut i = i;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// `s` cut to at most `limit` bytes (on a char boundary), saying how much was cut.
pub fn clip(s: &str, limit: usize) -> String {
    if s.len() <= limit {
        return s.to_string();
    }
    let cut = floor_char_boundary(s, limit);
    format!("{}… [{} bytes cut]", &s[..cut], s.len() - cut)
}

/// What the file says about a test case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed,
    Error,
    Skipped,
    /// pytest's `<skipped type="pytest.xfail">`: an expected failure.
    Xfail,
}

/// A failed run of a test that was run again (`flakyFailure`, `rerunFailure` …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rerun {
    pub error: bool,
    pub message: String,
    pub kind: String,
}

/// One complete `<testcase>`.
#[derive(Debug, Clone)]
pub struct Case {
    pub classname: String,
    pub name: String,
    /// Seconds, when the file gave a usable `time`.
    pub time: Option<f64>,
    pub outcome: Outcome,
    /// The `type` attribute of the failure/error/skipped element.
    pub kind: String,
    pub message: String,
    /// The failure/error/skipped element's text.
    pub text: Bounded,
    pub system_out: Bounded,
    pub system_err: Bounded,
    /// Failed runs before a pass (`flakyFailure`, `flakyError`).
    pub flaky: Vec<Rerun>,
    /// Failed reruns beside a failure (`rerunFailure`, `rerunError`).
    pub reruns: Vec<Rerun>,
    pub file: Option<String>,
}

impl Case {
    /// A passing case with no names, keeping this one's name buffers.
    pub fn recycled(self) -> Case {
        let (mut classname, mut name) = (self.classname, self.name);
        classname.clear();
        name.clear();
        Case {
            classname,
            name,
            ..Case::new()
        }
    }

    /// A passing case with no names (yet).
    pub fn new() -> Case {
        Case {
            classname: String::new(),
            name: String::new(),
            time: None,
            outcome: Outcome::Passed,
            kind: String::new(),
            message: String::new(),
            text: Bounded::default(),
            system_out: Bounded::default(),
            system_err: Bounded::default(),
            flaky: Vec::new(),
            reruns: Vec::new(),
            file: None,
        }
    }
}

impl Default for Case {
    fn default() -> Case {
        Case::new()
    }
}

/// Receives what the reader finds, in document order.
pub trait Visitor {
    /// A `<testsuite>` opened; `path` is the names of the open suites joined by `/`.
    fn suite_start(&mut self, _path: &str, _timestamp: Option<&str>) {}
    /// A complete test case inside the suite `suite`. The visitor may keep
    /// it (`std::mem::take`); the reader reuses what is left for the next.
    fn case(&mut self, suite: &str, case: &mut Case);
    /// The suite `path` closed.
    fn suite_end(&mut self, _path: &str) {}
}

/// Counts of odd but tolerated things, by kind.
pub type Oddities = BTreeMap<&'static str, u64>;

/// Why a file could not be read to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The file ends inside an element: the writer crashed or was killed.
    Truncated { offset: u64 },
    /// Not well-formed XML at `offset`.
    Invalid { offset: u64, message: String },
    /// Well-formed, but the root is not `testsuites`/`testsuite`.
    NotJunit { root: String },
    /// Reading the file failed.
    Io { message: String },
    /// A bound of the reader was hit at `offset`: the file is kept up to there.
    TooLarge { offset: u64, message: String },
}

impl Problem {
    /// A one-line description naming `file`.
    pub fn describe(&self, file: &str) -> String {
        match self {
            Problem::Truncated { offset } => format!(
                "{file}: report cut off at byte {offset}; complete test cases before it are kept"
            ),
            Problem::Invalid { offset, message } => {
                format!("{file}: invalid XML at byte {offset}: {message}")
            }
            Problem::NotJunit { root } => {
                format!("{file}: not a JUnit report (root element <{root}>)")
            }
            Problem::Io { message } => format!("{file}: cannot read: {message}"),
            Problem::TooLarge { offset, message } => format!(
                "{file}: {message} at byte {offset}; complete test cases before it are kept"
            ),
        }
    }
}

/// The result of reading one file.
#[derive(Debug, Default)]
pub struct ReadReport {
    pub cases: u64,
    pub oddities: Oddities,
    pub problem: Option<Problem>,
}

/// Reads one JUnit document from `input`, streaming test cases to `visitor`.
pub fn read<R: BufRead>(input: R, limits: Limits, visitor: &mut dyn Visitor) -> ReadReport {
    let mut reader = Reader::from_reader(std::io::BufReader::with_capacity(
        64 * 1024,
        Tokens::new(input),
    ));
    let cfg = reader.config_mut();
    cfg.allow_dangling_amp = true;
    let mut st = State::new(limits, visitor);
    let mut buf = Vec::with_capacity(4096);
    loop {
        buf.clear();
        let ev = match reader.read_event_into(&mut buf) {
            Ok(ev) => ev,
            Err(e) => {
                st.report.problem = Some(read_error(&mut reader, &e));
                break;
            }
        };
        if !step(&mut st, ev, &reader) {
            break;
        }
    }
    st.report
}

/// The reader of one document: quick-xml over the bounded bytes.
type Xml<R> = Reader<std::io::BufReader<Tokens<R>>>;

/// Hands one token to the state; false ends the document.
fn step<R: BufRead>(st: &mut State<'_>, ev: Event<'_>, reader: &Xml<R>) -> bool {
    match ev {
        Event::Start(_) if st.depth >= MAX_DEPTH => {
            st.report.problem = Some(Problem::TooLarge {
                offset: position(reader),
                message: format!("elements nested more than {MAX_DEPTH} deep"),
            });
            return false;
        }
        Event::Start(e) => return st.start(&e, false),
        Event::Empty(e) => return st.start(&e, true),
        Event::End(e) => st.end(e.local_name().as_ref()),
        Event::Text(t) => {
            if st.wants_text() {
                st.text(&String::from_utf8_lossy(t.as_ref()));
            }
        }
        Event::CData(t) => {
            if st.wants_text() {
                st.text(&String::from_utf8_lossy(t.as_ref()));
            }
        }
        Event::GeneralRef(r) => {
            if st.wants_text() {
                st.text(&resolve(&r));
            }
        }
        Event::Eof => {
            // Open elements, or no root at all (an empty file): the
            // writer did not finish.
            if st.depth > 0 || !st.seen_root {
                st.report.problem = Some(Problem::Truncated {
                    offset: position(reader),
                });
            }
            return false;
        }
        Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
    }
    true
}

/// The reader's position as an offset into the file itself.
fn position<R: BufRead>(reader: &Xml<R>) -> u64 {
    reader
        .get_ref()
        .get_ref()
        .original(reader.buffer_position())
}

/// A character or entity reference as text; an unknown entity as written.
fn resolve(r: &quick_xml::events::BytesRef) -> String {
    match r.resolve_char_ref() {
        Ok(Some(c)) => c.to_string(),
        _ => match r.as_ref() {
            b"amp" => "&".into(),
            b"lt" => "<".into(),
            b"gt" => ">".into(),
            b"quot" => "\"".into(),
            b"apos" => "'".into(),
            other => format!("&{};", String::from_utf8_lossy(other)),
        },
    }
}

/// The problem a parse error means: a tag or run the tokens refused, a file
/// that ends early, or malformed XML.
fn read_error<R: BufRead>(reader: &mut Xml<R>, e: &quick_xml::Error) -> Problem {
    // Any syntax error with nothing after it is a file that ends
    // early (`<![CD` at the very end), not a malformed one.
    let at_eof = reader.get_mut().fill_buf().is_ok_and(|b| b.is_empty());
    let tokens = reader.get_ref().get_ref();
    let offset = tokens.original(reader.error_position());
    let problem = match tokens.too_long.take() {
        Some(message) => Problem::TooLarge { offset, message },
        None => classify(e, offset),
    };
    match problem {
        Problem::Invalid { offset, .. } if at_eof => Problem::Truncated { offset },
        p => p,
    }
}

fn classify(e: &quick_xml::Error, offset: u64) -> Problem {
    use quick_xml::errors::{IllFormedError, SyntaxError};
    match e {
        quick_xml::Error::Syntax(
            SyntaxError::UnclosedTag
            | SyntaxError::UnclosedComment
            | SyntaxError::UnclosedCData
            | SyntaxError::UnclosedPI
            | SyntaxError::UnclosedXmlDecl
            | SyntaxError::UnclosedDoctype
            | SyntaxError::UnclosedSingleQuotedAttributeValue
            | SyntaxError::UnclosedDoubleQuotedAttributeValue,
        )
        | quick_xml::Error::IllFormed(IllFormedError::MissingEndTag(_)) => {
            Problem::Truncated { offset }
        }
        quick_xml::Error::Io(io) => Problem::Io {
            message: io.to_string(),
        },
        other => Problem::Invalid {
            offset,
            message: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect(Vec<(String, Case)>);
    impl Visitor for Collect {
        fn case(&mut self, suite: &str, case: &mut Case) {
            // A copy: the reader reuses what it is left for the next case.
            self.0.push((suite.to_string(), case.clone()));
        }
    }

    #[test]
    fn a_case_keeps_nothing_of_the_one_before() {
        let (cases, _) = parse(
            r#"<testsuite name="s"><testcase classname="A" name="x" time="1" file="f.c"><failure message="m">t</failure></testcase><testcase name="y" time="1"/></testsuite>"#,
        );
        let y = &cases[1].1;
        assert_eq!((y.classname.as_str(), y.name.as_str()), ("", "y"));
        assert_eq!((y.outcome, y.file.as_deref()), (Outcome::Passed, None));
        assert!(y.message.is_empty() && y.text.is_empty());
    }

    fn parse(xml: &str) -> (Vec<(String, Case)>, ReadReport) {
        let mut c = Collect::default();
        let r = read(xml.as_bytes(), Limits::default(), &mut c);
        (c.0, r)
    }

    #[test]
    fn bare_suite_and_entities() {
        let (cases, r) = parse(
            "<testsuite name=\"s\"><testcase classname=\"a&amp;b\" name=\"t&lt;1&gt;\" time=\"1,234.5\">\
             <failure message=\"m\">x &amp; y<![CDATA[<raw>]]></failure></testcase></testsuite>",
        );
        assert_eq!(r.problem, None);
        assert_eq!(cases.len(), 1);
        let (suite, c) = &cases[0];
        assert_eq!(suite, "s");
        assert_eq!(c.classname, "a&b");
        assert_eq!(c.name, "t<1>");
        assert_eq!(c.time, Some(1234.5));
        assert_eq!(c.outcome, Outcome::Failed);
        assert_eq!(c.text.text, "x & y<raw>");
        assert_eq!(r.oddities["time with thousands separators or a unit"], 1);
    }

    #[test]
    fn nested_suites_and_flaky() {
        let (cases, r) = parse(
            "<testsuites><testsuite name=\"outer\"><testsuite name=\"inner\">\
             <testcase name=\"f\" time=\"0\"><flakyFailure message=\"boom\" type=\"t\">\
             <system-out>inner out</system-out></flakyFailure><system-out>kept</system-out></testcase>\
             </testsuite><testcase name=\"p\"/></testsuite></testsuites>",
        );
        assert_eq!(r.problem, None);
        assert_eq!(cases[0].0, "outer/inner");
        assert_eq!(cases[0].1.outcome, Outcome::Passed);
        assert_eq!(cases[0].1.flaky.len(), 1);
        assert_eq!(cases[0].1.system_out.text, "kept");
        assert_eq!(cases[1].0, "outer");
        assert_eq!(r.oddities["testcase without time"], 1);
    }

    #[test]
    fn truncated_keeps_complete_cases() {
        let (cases, r) = parse(
            "<testsuites><testsuite name=\"s\"><testcase name=\"a\"/><testcase name=\"b\"><failure>half",
        );
        assert_eq!(cases.len(), 1);
        assert!(matches!(r.problem, Some(Problem::Truncated { .. })));
        let (cases, r) =
            parse("<testsuites><testsuite name=\"s\"><testcase name=\"a\"/><testcase na");
        assert_eq!(cases.len(), 1);
        assert!(matches!(r.problem, Some(Problem::Truncated { .. })));
    }

    #[test]
    fn invalid_names_offset() {
        let xml =
            "<testsuites><testsuite name=\"s\"><testcase name=\"a\"/></testcase></testsuites>";
        let (cases, r) = parse(xml);
        assert_eq!(cases.len(), 1);
        match r.problem {
            Some(Problem::Invalid { offset, .. }) => assert!(offset > 40, "offset {offset}"),
            other => panic!("{other:?}"),
        }
    }

    const DOC: &str = "<?xml version=\"1.0\"?><testsuites><testsuite name=\"s\">\
        <testcase name=\"a\" time=\"1\"/><testcase name=\"b&amp;c\"><failure message=\"m\">t<![CDATA[x]]></failure>\
        <system-out>o</system-out></testcase><testsuite name=\"n\"><testcase name=\"d\">\
        <flakyFailure type=\"x\"/></testcase></testsuite><testcase name=\"e\"><skipped/></testcase>\
        </testsuite></testsuites>";

    proptest::proptest! {
        /// Any prefix of a document keeps a prefix of its test cases, and says
        /// it was cut off unless it is whole.
        #[test]
        fn any_cut_keeps_complete_cases(cut in 0usize..DOC.len()) {
            let (all, _) = parse(DOC);
            let (cases, r) = parse(&DOC[..cut]);
            proptest::prop_assert!(cases.len() <= all.len());
            for (x, y) in cases.iter().zip(&all) {
                proptest::prop_assert_eq!(&x.1.name, &y.1.name);
            }
            let cut_off = matches!(r.problem, Some(Problem::Truncated { .. }));
            proptest::prop_assert!(cut_off, "{:?}", r.problem);
        }

        /// Arbitrary bytes never panic the reader.
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
                                at in 0usize..DOC.len()) {
            let mut doc = DOC.as_bytes()[..at].to_vec();
            doc.extend(bytes);
            let mut c = Collect::default();
            let _ = read(&doc[..], Limits::default(), &mut c);
        }
    }

    #[test]
    fn long_text_runs_are_cut_keeping_their_tail() {
        let big = "y".repeat(3 << 20);
        let xml = format!(
            "<testsuite><testcase name=\"a\"><failure><![CDATA[{big}]]></failure></testcase>\
             <testcase name=\"b\"/></testsuite>"
        );
        let (cases, r) = parse(&xml);
        assert_eq!(r.problem, None);
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[0].1.outcome, Outcome::Failed);
        // An error after the cut is reported at its offset in the file.
        let xml = format!("<testsuite>{big}</testcase></testsuite>");
        let (_, r) = parse(&xml);
        match r.problem {
            Some(Problem::Invalid { offset, .. }) => assert_eq!(offset, 11 + (3 << 20)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bounded_texts() {
        let big = "y".repeat(100_000);
        let xml = format!(
            "<testsuite><testcase name=\"a\"><system-out>{big}</system-out></testcase></testsuite>"
        );
        let (cases, _) = parse(&xml);
        assert_eq!(cases[0].1.system_out.text.len(), 8192);
        assert_eq!(cases[0].1.system_out.dropped, 100_000 - 8192);
    }
}
