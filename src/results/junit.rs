//! A lenient, streaming JUnit XML reader on quick-xml.
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

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

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
    /// A complete test case inside the suite `suite`.
    fn case(&mut self, suite: &str, case: Case);
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

/// Where text inside a test case goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Body,
    Out,
    Err,
    Ignore,
}

struct State<'v> {
    limits: Limits,
    visitor: &'v mut dyn Visitor,
    report: ReadReport,
    /// The length of `suite_path` before each open `<testsuite>` was added.
    suites: Vec<usize>,
    /// The names of the open suites joined by `/`, extended and cut in place.
    suite_path: String,
    case: Option<Case>,
    /// Depth of open elements inside the current test case.
    case_depth: usize,
    target: Target,
    /// Depth of open elements in the document.
    depth: usize,
    seen_root: bool,
    /// Whether the failure/error/skipped element was already chosen (the first wins).
    outcome_set: bool,
}

/// Reads one JUnit document from `input`, streaming test cases to `visitor`.
pub fn read<R: BufRead>(input: R, limits: Limits, visitor: &mut dyn Visitor) -> ReadReport {
    let mut reader = Reader::from_reader(std::io::BufReader::with_capacity(
        64 * 1024,
        Tokens::new(input),
    ));
    let cfg = reader.config_mut();
    cfg.allow_dangling_amp = true;
    let mut st = State {
        limits,
        visitor,
        report: ReadReport::default(),
        suites: Vec::new(),
        suite_path: String::new(),
        case: None,
        case_depth: 0,
        target: Target::Ignore,
        depth: 0,
        seen_root: false,
        outcome_set: false,
    };
    let mut buf = Vec::with_capacity(4096);
    loop {
        buf.clear();
        let ev = match reader.read_event_into(&mut buf) {
            Ok(ev) => ev,
            Err(e) => {
                // Any syntax error with nothing after it is a file that ends
                // early (`<![CD` at the very end), not a malformed one.
                let at_eof = reader.get_mut().fill_buf().is_ok_and(|b| b.is_empty());
                let tokens = reader.get_ref().get_ref();
                let offset = tokens.original(reader.error_position());
                let problem = match tokens.too_long.take() {
                    Some(message) => Problem::TooLarge { offset, message },
                    None => classify(&e, offset),
                };
                st.report.problem = Some(match problem {
                    Problem::Invalid { offset, .. } if at_eof => Problem::Truncated { offset },
                    p => p,
                });
                break;
            }
        };
        match ev {
            Event::Start(_) if st.depth >= MAX_DEPTH => {
                st.report.problem = Some(Problem::TooLarge {
                    offset: reader
                        .get_ref()
                        .get_ref()
                        .original(reader.buffer_position()),
                    message: format!("elements nested more than {MAX_DEPTH} deep"),
                });
                break;
            }
            Event::Start(e) => {
                if !st.start(&e, false) {
                    break;
                }
            }
            Event::Empty(e) => {
                if !st.start(&e, true) {
                    break;
                }
            }
            Event::End(e) => st.end(e.local_name().as_ref()),
            Event::Text(t) => {
                if st.wants_text() {
                    let s = String::from_utf8_lossy(t.as_ref());
                    st.text(&s);
                }
            }
            Event::CData(t) => {
                if st.wants_text() {
                    let s = String::from_utf8_lossy(t.as_ref());
                    st.text(&s);
                }
            }
            Event::GeneralRef(r) => {
                if st.wants_text() {
                    let resolved = match r.resolve_char_ref() {
                        Ok(Some(c)) => c.to_string(),
                        _ => match r.as_ref() {
                            b"amp" => "&".into(),
                            b"lt" => "<".into(),
                            b"gt" => ">".into(),
                            b"quot" => "\"".into(),
                            b"apos" => "'".into(),
                            other => format!("&{};", String::from_utf8_lossy(other)),
                        },
                    };
                    st.text(&resolved);
                }
            }
            Event::Eof => {
                // Open elements, or no root at all (an empty file): the
                // writer did not finish.
                if st.depth > 0 || !st.seen_root {
                    st.report.problem = Some(Problem::Truncated {
                        offset: reader
                            .get_ref()
                            .get_ref()
                            .original(reader.buffer_position()),
                    });
                }
                break;
            }
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
    st.report
}

/// An element's attributes, at most [`MAX_ATTRIBUTES`] of them, unchecked
/// for duplicates (checking is quadratic in their number).
fn attributes<'a>(
    e: &'a BytesStart<'a>,
) -> impl Iterator<Item = quick_xml::events::attributes::Attribute<'a>> + 'a {
    let mut attrs = e.attributes();
    attrs.with_checks(false);
    attrs.flatten().take(MAX_ATTRIBUTES)
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

impl State<'_> {
    fn wants_text(&self) -> bool {
        self.case.is_some() && self.case_depth == 1 && self.target != Target::Ignore
    }

    fn odd(&mut self, what: &'static str) {
        *self.report.oddities.entry(what).or_insert(0) += 1;
    }

    /// Handles a start (or empty) tag; false stops reading (not JUnit).
    fn start(&mut self, e: &BytesStart, empty: bool) -> bool {
        let local = e.local_name();
        let name = local.as_ref();
        if !self.seen_root {
            self.seen_root = true;
            if name != b"testsuites" && name != b"testsuite" {
                self.report.problem = Some(Problem::NotJunit {
                    root: String::from_utf8_lossy(name).into_owned(),
                });
                return false;
            }
        }
        if !empty {
            self.depth += 1;
        }
        if self.case.is_some() {
            if !empty {
                self.case_depth += 1;
            }
            // Only direct children of <testcase> decide its outcome and texts.
            let direct = if empty {
                self.case_depth == 0
            } else {
                self.case_depth == 1
            };
            if direct {
                let target = self.case_child(name, e);
                if !empty {
                    self.target = target;
                }
            }
            return true;
        }
        match name {
            b"testsuite" => {
                let mut suite_name = String::new();
                let mut timestamp = None;
                for a in attributes(e) {
                    match a.key.local_name().as_ref() {
                        b"name" => suite_name = self.value(&a.value),
                        b"timestamp" => timestamp = Some(self.value(&a.value)),
                        _ => {}
                    }
                }
                if suite_name.is_empty() {
                    self.odd("testsuite without a name");
                }
                self.suites.push(self.suite_path.len());
                if self.suites.len() > 1 {
                    self.suite_path.push('/');
                }
                self.suite_path.push_str(&suite_name);
                self.visitor
                    .suite_start(&self.suite_path, timestamp.as_deref());
                if empty {
                    self.pop_suite();
                }
            }
            b"testcase" => {
                let mut case = Case::new();
                let mut have_time = false;
                let mut notrun = false;
                for a in attributes(e) {
                    match a.key.local_name().as_ref() {
                        b"name" => case.name = self.value(&a.value),
                        b"classname" | b"class" => case.classname = self.value(&a.value),
                        b"time" => {
                            have_time = true;
                            case.time = self.time(&a.value);
                        }
                        b"file" => case.file = Some(self.value(&a.value)),
                        // GoogleTest: status="notrun" result="suppressed" for DISABLED_ tests.
                        b"status" if a.value.as_ref() == b"notrun" => notrun = true,
                        b"result" if a.value.as_ref() == b"suppressed" => notrun = true,
                        _ => {}
                    }
                }
                if !have_time {
                    self.odd("testcase without time");
                }
                if case.name.is_empty() {
                    self.odd("testcase without a name");
                }
                if notrun {
                    case.outcome = Outcome::Skipped;
                }
                self.outcome_set = false;
                self.case_depth = 0;
                self.target = Target::Ignore;
                if empty {
                    self.visitor.case(&self.suite_path, case);
                    self.report.cases += 1;
                } else {
                    self.case = Some(case);
                }
            }
            _ => {}
        }
        true
    }

    /// A direct child of `<testcase>`: records the outcome, returns where its text goes.
    fn case_child(&mut self, name: &[u8], e: &BytesStart) -> Target {
        let (mut message, mut kind) = (String::new(), String::new());
        let want_attrs = matches!(
            name,
            b"failure"
                | b"error"
                | b"skipped"
                | b"flakyFailure"
                | b"flakyError"
                | b"rerunFailure"
                | b"rerunError"
        );
        if want_attrs {
            for a in attributes(e) {
                match a.key.local_name().as_ref() {
                    b"message" => {
                        message = self.value(&a.value);
                        let cut = floor_char_boundary(&message, self.limits.message);
                        message.truncate(cut);
                    }
                    b"type" => kind = self.value(&a.value),
                    _ => {}
                }
            }
        }
        let Some(case) = self.case.as_mut() else {
            return Target::Ignore;
        };
        let set = |outcome: Outcome, case: &mut Case, st_set: &mut bool| -> Target {
            // The first failure/error/skipped element decides; an error beats a
            // failure (pytest writes setup errors beside call failures).
            let replace = !*st_set || (outcome == Outcome::Error && case.outcome != Outcome::Error);
            if replace {
                case.outcome = outcome;
                case.message = message.clone();
                case.kind = kind.clone();
                case.text = Bounded::default();
                *st_set = true;
                Target::Body
            } else {
                Target::Ignore
            }
        };
        match name {
            b"failure" => set(Outcome::Failed, case, &mut self.outcome_set),
            b"error" => set(Outcome::Error, case, &mut self.outcome_set),
            b"skipped" => {
                let o = if kind == "pytest.xfail" {
                    Outcome::Xfail
                } else {
                    Outcome::Skipped
                };
                set(o, case, &mut self.outcome_set)
            }
            b"flakyFailure" | b"flakyError" => {
                case.flaky.push(Rerun {
                    error: name == b"flakyError",
                    message,
                    kind,
                });
                Target::Ignore
            }
            b"rerunFailure" | b"rerunError" => {
                case.reruns.push(Rerun {
                    error: name == b"rerunError",
                    message,
                    kind,
                });
                Target::Ignore
            }
            b"system-out" => Target::Out,
            b"system-err" => Target::Err,
            _ => Target::Ignore,
        }
    }

    fn text(&mut self, s: &str) {
        let limits = self.limits;
        let Some(case) = self.case.as_mut() else {
            return;
        };
        match self.target {
            Target::Body => case.text.push(s, limits.text),
            Target::Out => case.system_out.push(s, limits.output),
            Target::Err => case.system_err.push(s, limits.output),
            Target::Ignore => {}
        }
    }

    fn end(&mut self, name: &[u8]) {
        self.depth = self.depth.saturating_sub(1);
        if self.case.is_some() {
            if self.case_depth > 0 {
                self.case_depth -= 1;
                if self.case_depth == 0 {
                    self.target = Target::Ignore;
                }
                return;
            }
            if name == b"testcase" {
                if let Some(case) = self.case.take() {
                    self.visitor.case(&self.suite_path, case);
                    self.report.cases += 1;
                }
            }
            return;
        }
        if name == b"testsuite" {
            self.pop_suite();
        }
    }

    fn pop_suite(&mut self) {
        self.visitor.suite_end(&self.suite_path);
        if let Some(len) = self.suites.pop() {
            self.suite_path.truncate(len);
        }
    }

    /// An attribute value: lossily decoded, entities resolved.
    fn value(&mut self, raw: &[u8]) -> String {
        let s = match std::str::from_utf8(raw) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => {
                self.odd("attribute with invalid UTF-8");
                String::from_utf8_lossy(raw)
            }
        };
        if !s.contains('&') {
            return s.into_owned();
        }
        match quick_xml::escape::unescape(&s) {
            Ok(u) => u.into_owned(),
            Err(_) => {
                self.odd("attribute with an unknown entity");
                s.into_owned()
            }
        }
    }

    /// `time`: seconds; tolerates `1,234.5`, surrounding spaces and a trailing `s`.
    fn time(&mut self, raw: &[u8]) -> Option<f64> {
        let s = String::from_utf8_lossy(raw);
        let t = s.trim();
        if let Ok(v) = t.parse::<f64>() {
            if v.is_finite() {
                return Some(v);
            }
        }
        let cleaned: String = t
            .trim_end_matches('s')
            .chars()
            .filter(|c| *c != ',')
            .collect();
        match cleaned.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => {
                self.odd("time with thousands separators or a unit");
                Some(v)
            }
            _ => {
                self.odd("unparseable time");
                None
            }
        }
    }
}

/// The bytes of a JUnit file as the XML parser gets them: a tag longer than
/// [`MAX_TAG`] ends the input with an error, and of a text run longer than
/// [`MAX_TEXT_RUN`] only its start and its last [`TEXT_TAIL`] bytes are
/// passed on. The parser buffers one token at a time, so this bounds its
/// memory whatever the file holds.
struct Tokens<R> {
    inner: R,
    /// Bytes since the last `<` or `>`.
    run: u64,
    /// Whether the last delimiter was `>` (or none yet): text, not a tag.
    in_text: bool,
    /// Skipping the rest of a long text run.
    skipping: bool,
    /// The last byte handed out was `<`.
    after_lt: bool,
    /// The last bytes skipped, passed on before the next `<`.
    tail: std::collections::VecDeque<u8>,
    /// Bytes to hand out before reading more.
    pending: Vec<u8>,
    /// Bytes handed out, and (handed out, skipped so far) at each cut.
    out: u64,
    cuts: Vec<(u64, u64)>,
    skipped: u64,
    /// Why the input was ended early, for [`Problem::TooLarge`].
    too_long: std::cell::Cell<Option<String>>,
}

impl<R: BufRead> Tokens<R> {
    fn new(inner: R) -> Self {
        Tokens {
            inner,
            run: 0,
            in_text: true,
            skipping: false,
            after_lt: false,
            tail: std::collections::VecDeque::with_capacity(TEXT_TAIL),
            pending: Vec::new(),
            out: 0,
            cuts: Vec::new(),
            skipped: 0,
            too_long: std::cell::Cell::new(None),
        }
    }

    /// The offset in the file of byte `pos` of what was handed out.
    fn original(&self, pos: u64) -> u64 {
        let i = self.cuts.partition_point(|(at, _)| *at <= pos);
        pos + if i == 0 { 0 } else { self.cuts[i - 1].1 }
    }

    /// Hands out as many whole runs (and their delimiters) as fit `out`
    /// while none reaches its limit, in one copy; 0 when the next run needs
    /// the byte-by-byte path of `read` (a limit, the end of the input).
    /// Tracks `run`, `in_text` and `after_lt` as that path would.
    fn read_runs(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let chunk = self.inner.fill_buf()?;
        let max = chunk.len().min(out.len());
        let (mut run, mut in_text, mut after_lt) = (self.run, self.in_text, self.after_lt);
        let mut i = 0;
        while i < max {
            if std::mem::take(&mut after_lt) && chunk[i] == b'!' {
                in_text = true;
            }
            let limit = if in_text { MAX_TEXT_RUN } else { MAX_TAG };
            let seg = memchr::memchr2(b'<', b'>', &chunk[i..max]).unwrap_or(max - i);
            if run + seg as u64 >= limit {
                break;
            }
            run += seg as u64;
            i += seg;
            if i < max {
                let b = chunk[i];
                in_text = b == b'>';
                after_lt = b == b'<';
                run = 0;
                i += 1;
            }
        }
        if i == 0 {
            return Ok(0);
        }
        // `after_lt` of a `<` not yet followed by a byte stays set.
        out[..i].copy_from_slice(&chunk[..i]);
        self.inner.consume(i);
        (self.run, self.in_text, self.after_lt) = (run, in_text, after_lt);
        self.out += i as u64;
        Ok(i)
    }

    fn give(&mut self, out: &mut [u8], bytes: &[u8]) -> usize {
        let n = bytes.len().min(out.len());
        out[..n].copy_from_slice(&bytes[..n]);
        self.out += n as u64;
        n
    }
}

impl<R: BufRead> std::io::Read for Tokens<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            let n = self.give(out, &pending);
            self.pending = pending[n..].to_vec();
            return Ok(n);
        }
        if !self.skipping {
            let n = self.read_runs(out)?;
            if n > 0 {
                return Ok(n);
            }
        }
        loop {
            let chunk = self.inner.fill_buf()?;
            if chunk.is_empty() {
                if self.skipping {
                    self.skipping = false;
                    let tail: Vec<u8> = self.tail.drain(..).collect();
                    self.cuts.push((self.out, self.skipped));
                    let n = self.give(out, &tail);
                    self.pending = tail[n..].to_vec();
                    return Ok(n);
                }
                return Ok(0);
            }
            let delim = memchr::memchr2(b'<', b'>', chunk);
            let seg_len = delim.unwrap_or(chunk.len());
            if self.skipping {
                let seg = &chunk[..seg_len];
                for &b in &seg[seg.len().saturating_sub(TEXT_TAIL)..] {
                    if self.tail.len() == TEXT_TAIL {
                        self.skipped += 1;
                        self.tail.pop_front();
                    }
                    self.tail.push_back(b);
                }
                self.skipped += seg.len().saturating_sub(TEXT_TAIL) as u64;
                self.inner.consume(seg_len);
                if delim.is_some() {
                    // The `<` ends the run: pass on its tail, then go on.
                    self.skipping = false;
                    self.cuts.push((self.out, self.skipped));
                    let tail: Vec<u8> = self.tail.drain(..).collect();
                    let n = self.give(out, &tail);
                    self.pending = tail[n..].to_vec();
                    return Ok(n);
                }
                continue;
            }
            if std::mem::take(&mut self.after_lt) && chunk[0] == b'!' {
                // `<![CDATA[`, `<!--`: text to the parser's reader, bounded as text.
                self.in_text = true;
            }
            let limit = if self.in_text { MAX_TEXT_RUN } else { MAX_TAG };
            let room = (limit - self.run) as usize;
            if seg_len == 0 {
                // A delimiter: starts a new run.
                let b = chunk[0];
                self.in_text = b == b'>';
                self.after_lt = b == b'<';
                self.run = 0;
                self.inner.consume(1);
                return Ok(self.give(out, &[b]));
            }
            if room == 0 {
                if self.in_text {
                    self.skipping = true;
                    continue;
                }
                let message = format!(
                    "a tag longer than {} MiB (the limit for one element and its attributes)",
                    MAX_TAG >> 20
                );
                self.too_long.set(Some(message.clone()));
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    message,
                ));
            }
            let take = seg_len.min(room).min(out.len());
            out[..take].copy_from_slice(&chunk[..take]);
            self.inner.consume(take);
            self.run += take as u64;
            self.out += take as u64;
            return Ok(take);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect(Vec<(String, Case)>);
    impl Visitor for Collect {
        fn case(&mut self, suite: &str, case: Case) {
            self.0.push((suite.to_string(), case));
        }
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
