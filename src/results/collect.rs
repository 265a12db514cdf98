//! Collecting a [`Source`] into [`Results`]: read every cell's JUnit files
//! once, judge each test (expectations turn failures into xfail and passes
//! into xpass), count passing tests and keep only their identity hashes, keep
//! bounded details of every other test, and hand each test to a [`Sink`] so
//! a writer (the merged JUnit file) can stream in the same pass.

use std::collections::BTreeMap;

use crate::matrix_file::Expectation;
use crate::store::record::RunStatus as CellStatus;

use super::classify::{Classified, Classifier};
use super::junit::{self, Case, Limits, Outcome, Visitor};
use super::model::{
    test_hash, CellResult, Counts, Results, StepResult, TestResult, TestStatus, RESULTS_VERSION,
};
use super::readers::{self, Ev, FileEvents};
use super::source::{CellSource, Source};
use crate::plan::glob;

/// Tests other than passes kept with their details per cell; more are
/// counted but not listed (a cell of a million failures is no list to read,
/// and each detail keeps up to 24 KiB of output).
pub const MAX_DETAILED_TESTS: usize = 10_000;

/// Bytes of a step's log tail kept per step.
pub const LOG_TAIL_LIMIT: usize = 16 * 1024;

/// Receives every test as it is read (for writers that stream).
pub trait Sink {
    fn cell_start(&mut self, _cell: &CellSource) {}
    fn suite_start(&mut self, _suite: &str, _timestamp: Option<&str>) {}
    fn case(&mut self, _suite: &str, _case: &Case, _status: TestStatus) {}
    fn suite_end(&mut self, _suite: &str) {}
    fn cell_end(&mut self, _cell: &CellResult) {}
}

/// A sink that ignores everything.
pub struct NoSink;
impl Sink for NoSink {}

/// The `expect:` rules that apply to one cell.
struct CellRules<'a> {
    /// A rule without `tests`: the whole cell is expected to fail.
    whole: Option<&'a Expectation>,
    tests: Vec<&'a Expectation>,
    /// `flaky:` entries: a failure of theirs counts as flaky.
    flaky: Vec<&'a Expectation>,
}

impl<'a> CellRules<'a> {
    fn new(expect: &'a [Expectation], values: &[(String, String)]) -> Self {
        let mut whole = None;
        let mut tests = Vec::new();
        let mut flaky = Vec::new();
        for e in expect {
            let applies = e.cells.iter().all(|(k, pat)| {
                values
                    .iter()
                    .any(|(vk, vv)| vk == k && glob::matches(pat, vv))
            });
            if !applies {
                continue;
            }
            if e.flaky {
                flaky.push(e);
            } else if e.tests.is_empty() {
                whole.get_or_insert(e);
            } else {
                tests.push(e);
            }
        }
        CellRules {
            whole,
            tests,
            flaky,
        }
    }

    /// The reason of the first rule naming this test.
    fn test_rule(&self, suite: &str, classname: &str, name: &str) -> Option<&'a Expectation> {
        Self::naming(&self.tests, suite, classname, name)
    }

    /// The first of `rules` naming this test.
    fn naming(
        rules: &[&'a Expectation],
        suite: &str,
        classname: &str,
        name: &str,
    ) -> Option<&'a Expectation> {
        if rules.is_empty() {
            return None;
        }
        let candidates = [
            name.to_string(),
            format!("{classname}.{name}"),
            format!("{classname}::{name}"),
            format!("{suite}.{name}"),
            format!("{suite}/{name}"),
        ];
        rules.iter().copied().find(|e| {
            e.tests
                .iter()
                .any(|p| candidates.iter().any(|c| glob::matches(p, c)))
        })
    }
}

struct CellCollector<'a, 'r> {
    rules: &'a CellRules<'r>,
    classifier: &'a Classifier,
    /// The cell's record says it was given no GPU (the built-in no-device
    /// rule applies).
    no_gpu: bool,
    limits: Limits,
    counts: Counts,
    tests: Vec<TestResult>,
    passed: Vec<u64>,
    source: String,
    /// Tests past [`MAX_DETAILED_TESTS`], counted only.
    undetailed: u64,
    sink: &'a mut dyn Sink,
    /// A plain passing case shown to the sink, its strings reused.
    scratch: Case,
}

impl CellCollector<'_, '_> {
    /// A test case that passed with nothing more than its names and time
    /// ([`Ev::Pass`]), `hash` its identity.
    fn pass(&mut self, suite: &str, name: &str, classname: &str, time: Option<f64>, hash: u64) {
        let c = &mut self.scratch;
        c.name.clear();
        c.name.push_str(name);
        c.classname.clear();
        c.classname.push_str(classname);
        c.time = time;
        if !self.rules.tests.is_empty() {
            // A rule may expect it to fail (an xpass, kept with its details).
            let mut case = c.clone();
            self.case(suite, &mut case);
            return;
        }
        self.counts.add(TestStatus::Passed);
        self.sink.case(suite, &self.scratch, TestStatus::Passed);
        self.passed.push(hash);
    }
}

impl CellCollector<'_, '_> {
    /// What the matrix's `expect:` and `flaky:` lists make of a case: its
    /// status, the reason of the rule that moved it, and whether a `flaky:`
    /// entry covered its failure (1: that is written as a flaky run of the
    /// case, but no rerun ran, and it is not counted as one: the history
    /// keeps it a failure).
    fn by_the_lists(&self, suite: &str, case: &mut Case) -> (TestStatus, Option<String>, usize) {
        let (mut status, mut expected) = match case.outcome {
            Outcome::Passed if !case.flaky.is_empty() => (TestStatus::Flaky, None),
            Outcome::Passed => (TestStatus::Passed, None),
            Outcome::Failed => (TestStatus::Failed, None),
            Outcome::Error => (TestStatus::Error, None),
            Outcome::Skipped => (TestStatus::Skipped, None),
            Outcome::Xfail => (TestStatus::Xfail, Some(case.message.clone())),
        };
        if status.is_failure() {
            if let Some(e) = self
                .rules
                .test_rule(suite, &case.classname, &case.name)
                .or(self.rules.whole)
            {
                status = TestStatus::Xfail;
                expected = Some(e.reason.clone());
            }
        } else if status.is_pass() {
            if let Some(e) = self.rules.test_rule(suite, &case.classname, &case.name) {
                status = TestStatus::Xpass;
                expected = Some(e.reason.clone());
            }
        }
        let mut listed = 0;
        if status.is_failure() {
            let rule = CellRules::naming(&self.rules.flaky, suite, &case.classname, &case.name);
            if let Some(e) = rule {
                listed = 1;
                case.flaky.push(junit::Rerun {
                    error: status == TestStatus::Error,
                    message: case.message.clone(),
                    kind: case.kind.clone(),
                });
                status = TestStatus::Flaky;
                expected = Some(e.reason.clone());
            }
        }
        (status, expected, listed)
    }
}

impl Visitor for CellCollector<'_, '_> {
    fn suite_start(&mut self, path: &str, timestamp: Option<&str>) {
        self.sink.suite_start(path, timestamp);
    }

    fn suite_end(&mut self, path: &str) {
        self.sink.suite_end(path);
    }

    fn case(&mut self, suite: &str, case: &mut Case) {
        let mut case = std::mem::take(case);
        let (mut status, expected, listed) = self.by_the_lists(suite, &mut case);
        let mut classified = None;
        if status.is_failure() {
            let (failure, text) = case_text(&case);
            if let Some((new, why)) = self
                .classifier
                .classify(status, &failure, &text, self.no_gpu)
            {
                status = new;
                classified = Some(why);
            }
        }
        self.counts.add(status);
        match &classified {
            Some(why) => {
                self.counts.classified += 1;
                self.sink.case(suite, &classified_case(&case, why), status);
            }
            None => self.sink.case(suite, &case, status),
        }
        if status == TestStatus::Passed {
            self.passed
                .push(test_hash(suite, &case.classname, &case.name));
            return;
        }
        if self.tests.len() >= MAX_DETAILED_TESTS {
            self.undetailed += 1;
            return;
        }
        let mut output = case.text.display().into_owned();
        for (label, b) in [
            ("system-out", &case.system_out),
            ("system-err", &case.system_err),
        ] {
            if !b.is_empty() {
                if !output.is_empty() {
                    output.push('\n');
                }
                output.push_str(&format!("--- {label} ---\n"));
                output.push_str(&b.display());
            }
        }
        let (message, kind) = match (case.message.is_empty(), case.flaky.first()) {
            (true, Some(f)) if status == TestStatus::Flaky => (f.message.clone(), f.kind.clone()),
            _ => (case.message, case.kind),
        };
        let bounded =
            junit::floor_char_boundary(&output, self.limits.text + 2 * self.limits.output);
        output.truncate(bounded);
        self.tests.push(TestResult {
            suite: suite.to_string(),
            classname: case.classname,
            name: case.name,
            status,
            time: case.time,
            kind,
            message,
            output,
            reruns: (case.flaky.len() + case.reruns.len() - listed) as u32,
            expected,
            classified,
            source: self.source.clone(),
        });
    }
}

/// What rules match: the failure (message and failure text), and all of
/// it (the failure and the test's output).
fn case_text(case: &Case) -> (String, String) {
    let mut failure = case.message.clone();
    if !case.text.is_empty() {
        failure.push('\n');
        failure.push_str(&case.text.display());
    }
    let mut all = failure.clone();
    for b in [&case.system_out, &case.system_err] {
        if !b.is_empty() {
            all.push('\n');
            all.push_str(&b.display());
        }
    }
    (failure, all)
}

/// The case as the merged JUnit shows a classified test: its message says
/// how it was classified and what it was.
fn classified_case(case: &Case, why: &Classified) -> Case {
    let mut c = case.clone();
    c.message = format!(
        "classified: {} (rule: {}; was {}: {})",
        why.reason,
        why.rule,
        why.was.as_str(),
        case.message
    );
    c.kind = "rocmatrix.classified".into();
    c
}

/// Collects `source`, streaming every test to `sink`.
///
/// Worker threads read and parse the JUnit files ([`readers`]); the calling
/// thread judges each test and feeds `sink`, file after file in the
/// source's order, so memory stays bounded and the order is the files'.
/// The analysis' fields (`signatures`, `coverage_changes`) stay empty:
/// `crate::analysis::collect` fills them.
pub fn collect(source: &Source, limits: Limits, sink: &mut dyn Sink) -> Results {
    collect_classified(source, &Classifier::new(&source.classify), limits, sink)
}

/// [`collect`] with `source.classify` already compiled as `classifier`
/// (a run's judge collects one cell at a time: compiling the rules once
/// keeps that off each cell's path).
pub fn collect_classified(
    source: &Source,
    classifier: &Classifier,
    limits: Limits,
    sink: &mut dyn Sink,
) -> Results {
    let cells = readers::read_all(source, limits, |events| {
        source
            .cells
            .iter()
            .map(|cs| collect_cell(source, cs, (limits, classifier), sink, events))
            .collect::<Vec<_>>()
    });
    Results {
        version: RESULTS_VERSION,
        name: source.name.clone(),
        runs: source.runs.clone(),
        matrix_hash: source.matrix_hash.clone(),
        keys: source.keys.clone(),
        report: source.report.clone(),
        cells,
        messages: source.messages.clone(),
        coverage: source.coverage.clone(),
        signatures: Vec::new(),
        environments: source.environments.clone(),
        coverage_changes: Vec::new(),
        selected_by: source.selected_by.clone(),
    }
}

/// Collects one cell: judges the events of its JUnit files, in order, and
/// combines them with its record.
fn collect_cell(
    source: &Source,
    cs: &CellSource,
    (limits, classifier): (Limits, &Classifier),
    sink: &mut dyn Sink,
    events: &mut FileEvents<'_>,
) -> CellResult {
    sink.cell_start(cs);
    let rules = CellRules::new(&source.expect, &cs.values);
    let mut cc = CellCollector {
        rules: &rules,
        classifier,
        // Only a run's record says whether the cell had a GPU; plain JUnit
        // directories say nothing, and the built-in rule stays out.
        no_gpu: cs.record.as_ref().is_some_and(|r| r.devices.is_empty()),
        limits,
        counts: Counts::default(),
        tests: Vec::new(),
        passed: Vec::new(),
        source: String::new(),
        undetailed: 0,
        sink,
        scratch: Case::new(),
    };
    let mut notes = FileNotes::default();
    for rel in &cs.junit {
        cc.source = rel.clone();
        let report = judge_file(&mut cc, events);
        notes.add(rel, report);
    }
    let CellCollector {
        counts,
        tests,
        mut passed,
        undetailed,
        sink,
        ..
    } = cc;
    if undetailed > 0 {
        notes.messages.push(format!(
            "{undetailed} more tests that did not pass are counted but not listed \
             (at most {MAX_DETAILED_TESTS} per cell are)"
        ));
    }
    passed.sort_unstable();

    let FileNotes {
        mut messages,
        problems,
        oddities,
    } = notes;
    let mut recorded = Recorded::new(cs, &counts, &mut messages);
    let judged = crate::outcome::judge_cell(&crate::outcome::CellFacts {
        steps: recorded.status,
        tests: counts.tally(problems),
        expected: rules.whole.map(|e| e.reason.as_str()),
    });
    if judged.status != recorded.status {
        recorded.status = judged.status;
        // An unreadable file made it an error: the first message says why.
        if judged.is_error() && recorded.reason.is_none() {
            recorded.reason = messages.first().cloned();
        }
    }
    let expected_failure = rules
        .whole
        .filter(|_| crate::outcome::is_test_failure(recorded.status))
        .map(|e| e.reason.clone());
    let cell = CellResult {
        id: cs.id.clone(),
        values: cs.values.iter().cloned().collect(),
        status: recorded.status,
        reason: recorded.reason,
        duration_secs: recorded.duration_secs,
        counts,
        expected_failure,
        steps: recorded.steps,
        tests,
        passed_hashes: passed,
        messages,
        oddities,
        junit: cs.junit.clone(),
        host: cs
            .record
            .as_ref()
            .map(|r| r.host.clone())
            .unwrap_or_default(),
    };
    sink.cell_end(&cell);
    cell
}

/// Feeds the events of one JUnit file to `cc`, up to the file's end, and
/// returns how reading it went.
fn judge_file(cc: &mut CellCollector, events: &mut FileEvents<'_>) -> junit::ReadReport {
    let mut suite = String::new();
    loop {
        match events.next() {
            Some(Ev::SuiteStart(p, ts)) => cc.suite_start(&p, ts.as_deref()),
            Some(Ev::SuiteEnd(p)) => cc.suite_end(&p),
            Some(Ev::Suite(s)) => suite = s,
            Some(Ev::Pass {
                name,
                classname,
                time,
                hash,
            }) => cc.pass(
                &suite,
                events.text(name),
                events.text(classname),
                time,
                hash,
            ),
            Some(Ev::Case(mut c)) => cc.case(&suite, &mut c),
            Some(Ev::FileDone(r)) => return r,
            None => {
                return junit::ReadReport {
                    problem: Some(junit::Problem::Io {
                        message: "the reading thread stopped".into(),
                    }),
                    ..Default::default()
                }
            }
        }
    }
}

/// What a cell's JUnit files said besides their tests.
#[derive(Default)]
struct FileNotes {
    messages: Vec<String>,
    /// Files that could not be read in full.
    problems: usize,
    oddities: BTreeMap<String, u64>,
}

impl FileNotes {
    /// Adds the report of reading file `rel`.
    fn add(&mut self, rel: &str, report: junit::ReadReport) {
        for (k, v) in report.oddities {
            *self.oddities.entry(k.to_string()).or_insert(0) += v;
        }
        if let Some(p) = report.problem {
            self.problems += 1;
            self.messages.push(p.describe(rel));
        }
    }
}

/// A cell's status as its record (or its tests alone) says, why it has
/// it, how long it took and its steps; [`crate::outcome::judge_cell`] makes
/// the status worse by what its tests say.
struct Recorded {
    status: CellStatus,
    reason: Option<String>,
    duration_secs: f64,
    steps: Vec<StepResult>,
}

impl Recorded {
    /// As the cell's record says (adding its messages to `messages`).
    /// Without a record, a cell of a run did not finish, and a plain JUnit
    /// directory is judged by its tests.
    fn new(cs: &CellSource, counts: &Counts, messages: &mut Vec<String>) -> Recorded {
        match &cs.record {
            Some(r) => {
                messages.extend(r.messages.iter().cloned());
                Recorded {
                    status: r.status,
                    reason: r.reason.clone(),
                    duration_secs: r.duration_secs,
                    steps: r
                        .steps
                        .iter()
                        .map(|s| StepResult {
                            name: s.name.clone(),
                            status: s.status,
                            exit_code: s.exit_code,
                            duration_secs: s.duration_secs,
                            reason: s.reason.clone(),
                            log_tail: tail(&s.log_tail, LOG_TAIL_LIMIT),
                            log: s.log.clone(),
                            backtrace: s.backtrace.clone(),
                            package: s.package.clone(),
                        })
                        .collect(),
                }
            }
            None if cs.from_run => Recorded {
                status: CellStatus::Error,
                reason: Some("the cell did not finish: it has no cell.json".to_string()),
                duration_secs: 0.0,
                steps: Vec::new(),
            },
            None => Recorded {
                status: status_of_tests(cs, counts, messages),
                reason: None,
                duration_secs: 0.0,
                steps: Vec::new(),
            },
        }
    }
}

/// The status of a cell known only by its tests; a cell without any is an
/// error (with a message when it has no JUnit files at all).
fn status_of_tests(cs: &CellSource, counts: &Counts, messages: &mut Vec<String>) -> CellStatus {
    if counts.failures() > 0 || counts.xfail > 0 {
        CellStatus::Failed
    } else if counts.total() == 0 {
        if cs.junit.is_empty() {
            messages.push("no JUnit files (*.xml) in this directory".into());
        }
        CellStatus::Error
    } else if counts.total() == counts.skipped {
        CellStatus::Skipped
    } else {
        CellStatus::Passed
    }
}

/// The last `limit` bytes of `s`, starting at a line start when possible.
pub fn tail(s: &str, limit: usize) -> String {
    if s.len() <= limit {
        return s.to_string();
    }
    let mut start = s.len() - limit;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    let t = &s[start..];
    match t.find('\n') {
        Some(i) if i + 1 < t.len() => format!("…\n{}", &t[i + 1..]),
        _ => format!("…{t}"),
    }
}
