//! What each JUnit element means: the reader's state between tokens (open
//! suites, the test case being read, where its text goes), turned into
//! [`Case`]s for the [`Visitor`] as their end tags are read.

use std::borrow::Cow;

use quick_xml::events::BytesStart;

use super::{
    floor_char_boundary, Bounded, Case, Limits, Outcome, Problem, ReadReport, Rerun, Visitor,
    MAX_ATTRIBUTES,
};

/// Where text inside a test case goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Body,
    Out,
    Err,
    Ignore,
}

pub(super) struct State<'v> {
    limits: Limits,
    visitor: &'v mut dyn Visitor,
    pub(super) report: ReadReport,
    /// The length of `suite_path` before each open `<testsuite>` was added.
    suites: Vec<usize>,
    /// The names of the open suites joined by `/`, extended and cut in place.
    suite_path: String,
    case: Option<Case>,
    /// The last case the visitor was given, whose name buffers the next
    /// one reuses (a million cases, two allocations fewer each).
    spare: Case,
    /// Depth of open elements inside the current test case.
    case_depth: usize,
    target: Target,
    /// Depth of open elements in the document.
    pub(super) depth: usize,
    pub(super) seen_root: bool,
    /// Whether the failure/error/skipped element was already chosen (the first wins).
    outcome_set: bool,
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

impl<'v> State<'v> {
    pub(super) fn new(limits: Limits, visitor: &'v mut dyn Visitor) -> Self {
        State {
            limits,
            visitor,
            report: ReadReport::default(),
            suites: Vec::new(),
            suite_path: String::new(),
            case: None,
            spare: Case::new(),
            case_depth: 0,
            target: Target::Ignore,
            depth: 0,
            seen_root: false,
            outcome_set: false,
        }
    }

    pub(super) fn wants_text(&self) -> bool {
        self.case.is_some() && self.case_depth == 1 && self.target != Target::Ignore
    }

    fn odd(&mut self, what: &'static str) {
        *self.report.oddities.entry(what).or_insert(0) += 1;
    }

    /// Handles a start (or empty) tag; false stops reading (not JUnit).
    pub(super) fn start(&mut self, e: &BytesStart, empty: bool) -> bool {
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
            b"testsuite" => self.suite_start(e, empty),
            b"testcase" => self.case_start(e, empty),
            _ => {}
        }
        true
    }

    /// A `<testsuite>` opened (and closed again when `empty`): its name
    /// joins the suite path.
    fn suite_start(&mut self, e: &BytesStart, empty: bool) {
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

    /// A `<testcase>` opened: its names, time and not-run marks in one pass
    /// over its attributes; an empty one goes to the visitor at once.
    fn case_start(&mut self, e: &BytesStart, empty: bool) {
        let mut case = std::mem::take(&mut self.spare).recycled();
        let mut have_time = false;
        let mut notrun = false;
        for a in attributes(e) {
            match a.key.local_name().as_ref() {
                b"name" => self.value_into(&a.value, &mut case.name),
                b"classname" | b"class" => self.value_into(&a.value, &mut case.classname),
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
            self.visitor.case(&self.suite_path, &mut case);
            self.spare = case;
            self.report.cases += 1;
        } else {
            self.case = Some(case);
        }
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

    pub(super) fn text(&mut self, s: &str) {
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

    pub(super) fn end(&mut self, name: &[u8]) {
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
                if let Some(mut case) = self.case.take() {
                    self.visitor.case(&self.suite_path, &mut case);
                    self.spare = case;
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
    /// [`State::value`] into `out`, in place of what it held.
    fn value_into(&mut self, raw: &[u8], out: &mut String) {
        out.clear();
        match std::str::from_utf8(raw) {
            Ok(s) if !s.contains('&') => out.push_str(s),
            _ => out.push_str(&self.value(raw)),
        }
    }

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
