//! Each cell's details, as index.html and the cell pages show them: its
//! values, verdict and environment, its non-passing tests (capped, their
//! messages and output clipped) and its steps with their log tails and
//! backtraces.

use std::collections::HashSet;

use serde::Serialize;

use super::regressions_view::regressed_cells;
use super::view::Caps;
use crate::analysis::regress::Regressions;
use crate::results::junit::clip;
use crate::results::model::StepResult;
use crate::results::{CellResult, CellVerdict, Counts, Results, TestResult, TestStatus};
use crate::store::record::PackageVerdict;

#[derive(Serialize)]
pub struct CellView {
    pub id: String,
    pub values: Vec<(String, String)>,
    pub status: &'static str,
    /// Its verdict in words ([`CellResult::outcome`]): the status, or
    /// `expected failure`; what its badge, page title and banner say.
    pub outcome: &'static str,
    /// The badge's class: the status's, `xfail` for an expected failure.
    pub badge: &'static str,
    pub css: &'static str,
    pub failing: bool,
    /// It failed as the matrix expected.
    pub expected: bool,
    pub regressed: bool,
    pub reason: String,
    pub expected_failure: String,
    /// The verdict on the package (autopkgtest's exit status in debci's
    /// words), its word (`neutral`) and its line (`neutral (exit 8: …)`);
    /// empty when no step gave one.
    pub package_verdict: &'static str,
    pub package: String,
    pub counts: Counts,
    pub duration: String,
    pub tests: Vec<TestView>,
    pub more_tests: usize,
    pub messages: Vec<String>,
    pub oddities: Vec<(String, u64)>,
    pub steps: Vec<StepView>,
    /// Its environment's base and versions that matter; empty when unknown.
    /// Its own page shows them; its card in index.html refers to the
    /// environment's row by [`CellView::environment_id`] instead.
    pub environment: String,
    /// Its environment's short hash (the row's anchor: `env-<hash>`);
    /// empty when unknown.
    pub environment_id: String,
    /// Its environment's base image (`debian:sid`).
    pub environment_base: String,
    /// Its own page, relative to index.html: `cells/<file>.html`; only
    /// characters that need no escaping (the templates write it as it is).
    pub page: String,
    /// The cell's directory relative to the page showing it (`../cells/<id>/`
    /// from index.html of a run's report), for links to its logs and JUnit
    /// files; empty where the page cannot reach it (a merged report).
    pub files: String,
    /// Its JUnit files, relative to its directory.
    pub junit: Vec<String>,
    /// Its outcome in its last recorded runs, oldest first, as the card's
    /// marks (`src/report/history_html.rs`); an empty string without a
    /// history.
    pub history: minijinja::Value,
}

#[derive(Serialize)]
pub struct TestView {
    pub name: String,
    pub suite: String,
    pub status: &'static str,
    pub message: String,
    pub output: String,
    pub expected: String,
    /// How a classify rule changed the test's status, in words.
    pub classified: String,
    pub time: String,
    /// For a regression: what changed underneath when it began.
    pub changed: String,
    /// Its badge (the words) and its strip of the cell's last recorded
    /// runs, oldest first (`✓✓✗`), as HTML (`src/report/history_html.rs`);
    /// none without a history or for a test not failing now.
    pub history_html: minijinja::Value,
}

#[derive(Serialize)]
pub struct StepView {
    pub name: String,
    pub status: &'static str,
    pub exit_code: String,
    pub duration: String,
    pub reason: String,
    pub log_tail: String,
    /// The line of the tail the failure's signature was made from, shown
    /// before the tail (a tail may open with unrelated noise); empty for a
    /// step that did not fail.
    pub error_line: String,
    /// Its whole log, relative to the cell's directory.
    pub log: String,
    /// The cell's first failing step: its tail is shown open.
    pub open: bool,
    /// gdb's top frames of the failing command, or its note; empty
    /// without a backtrace.
    pub backtrace: Vec<String>,
    /// gdb's whole output, relative to the cell's directory.
    pub backtrace_file: String,
}

/// CSS class (and Markdown emoji key) of a cell, from its verdict.
pub(super) fn css(c: &CellResult) -> &'static str {
    use crate::store::record::RunStatus as S;
    match c.verdict() {
        CellVerdict::Failing => match c.status {
            S::Timeout | S::Oom | S::Error => "error",
            _ => "fail",
        },
        CellVerdict::ExpectedFailure => "xfail",
        // Failed only in tests a rule classified (needs a GPU, on a host
        // without one): it did not pass, it could not be judged here.
        CellVerdict::Skipped | CellVerdict::Classified => "skip",
        CellVerdict::Passed if c.counts.xfail > 0 => "xfail",
        CellVerdict::Passed if c.counts.flaky > 0 || c.counts.xpass > 0 => "flaky",
        // Its tests passed, but autopkgtest says neutral (no test, or only
        // superficial ones, ran): britney does not count it as a pass.
        CellVerdict::Passed
            if c.package()
                .is_some_and(|p| p.verdict == PackageVerdict::Neutral) =>
        {
            "skip"
        }
        CellVerdict::Passed => "pass",
    }
}

/// The cell's verdict on its package in a word (`neutral`), as the grid's
/// chip and the cell's card show it; empty when no step gave one.
pub(super) fn package_word(c: &CellResult) -> &'static str {
    c.package().map(|p| p.verdict.as_str()).unwrap_or("")
}

/// The class of a cell's badge: its status's, or `xfail` when it failed as
/// expected.
fn badge(c: &CellResult) -> &'static str {
    match c.verdict() {
        CellVerdict::ExpectedFailure => "xfail",
        _ => c.status.as_str(),
    }
}

fn secs(t: f64) -> String {
    if t >= 60.0 {
        format!("{}m{:02}s", (t / 60.0) as u64, (t % 60.0) as u64)
    } else {
        format!("{t:.1}s")
    }
}

/// Order in which non-passing tests are listed.
fn rank(s: TestStatus) -> u8 {
    match s {
        TestStatus::Failed | TestStatus::Error => 0,
        TestStatus::Xpass => 1,
        TestStatus::Flaky => 2,
        TestStatus::Xfail => 3,
        TestStatus::Skipped => 4,
        TestStatus::Passed => 5,
    }
}

/// Every cell's details, as index.html and the cell pages show them.
pub fn cell_views(results: &Results, reg: Option<&Regressions>, caps: Caps) -> Vec<CellView> {
    let regressed = regressed_cells(reg);
    let envs = super::envs::by_cell(&results.environments);
    results
        .cells
        .iter()
        .map(|c| {
            let mut v = cell_view(c, &results.keys, &regressed, caps);
            if let Some(e) = envs.get(c.id.as_str()) {
                v.environment = e.line.clone();
                v.environment_id = e.environment.clone();
                v.environment_base = e.base.clone();
            }
            v
        })
        .collect()
}

/// One cell's details: its non-passing tests first (capped), its steps.
fn cell_view(c: &CellResult, keys: &[String], regressed: &HashSet<&str>, caps: Caps) -> CellView {
    let mut listed: Vec<&TestResult> = c
        .tests
        .iter()
        .filter(|t| t.status != TestStatus::Skipped)
        .collect();
    listed.sort_by_key(|t| rank(t.status));
    let more_tests = listed.len().saturating_sub(caps.tests_per_cell);
    listed.truncate(caps.tests_per_cell);
    CellView {
        id: c.id.clone(),
        values: keys
            .iter()
            .filter_map(|k| c.value(k).map(|v| (k.clone(), v.to_string())))
            .collect(),
        status: c.status.as_str(),
        outcome: c.outcome(),
        badge: badge(c),
        css: css(c),
        failing: c.is_failure(),
        expected: c.verdict() == CellVerdict::ExpectedFailure,
        regressed: regressed.contains(c.id.as_str()),
        reason: c.reason.clone().unwrap_or_default(),
        expected_failure: c.expected_failure.clone().unwrap_or_default(),
        package_verdict: package_word(c),
        package: c.package().map(|p| p.line()).unwrap_or_default(),
        counts: c.counts,
        duration: secs(c.duration_secs),
        tests: listed.into_iter().map(|t| test_view(t, caps)).collect(),
        more_tests,
        messages: c.messages.iter().take(50).cloned().collect(),
        oddities: c.oddities.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        steps: step_views(c, caps),
        environment: String::new(),
        environment_id: String::new(),
        environment_base: String::new(),
        page: format!("cells/{}", super::cell_pages::file_name(&c.id)),
        files: String::new(),
        junit: c.junit.clone(),
        history: minijinja::Value::from_safe_string(String::new()),
    }
}

/// A cell's steps; the first failing one is shown open.
fn step_views(c: &CellResult, caps: Caps) -> Vec<StepView> {
    let mut steps: Vec<StepView> = c.steps.iter().map(|s| step_view(s, caps)).collect();
    if let Some(first) = steps.iter_mut().find(|s| !s.log_tail.is_empty()) {
        first.open = true;
    }
    steps
}

/// Links `cells` to their directories in a run's report: `prefix` is the
/// run directory as seen from the page (`../` from index.html, `../../`
/// from a cell's page). A cell whose id is not a plain file name gets none.
pub fn link_cell_files(cells: &mut [CellView], prefix: &str) {
    for c in cells {
        if super::cell_pages::file_stem(&c.id) == c.id {
            c.files = format!("{prefix}cells/{}/", c.id);
        }
    }
}

/// A listed test, its message and output clipped.
fn test_view(t: &TestResult, caps: Caps) -> TestView {
    TestView {
        name: t.display_name(),
        suite: t.suite.clone(),
        status: t.status.as_str(),
        message: clip(&t.message, 1024),
        output: clip(&t.output, caps.output),
        expected: t.expected.clone().unwrap_or_default(),
        classified: t
            .classified
            .as_ref()
            .map(|c| format!("{} (rule: {}; was {})", c.reason, c.rule, c.was.as_str()))
            .unwrap_or_default(),
        time: t.time.map(secs).unwrap_or_default(),
        changed: String::new(),
        history_html: minijinja::Value::from(()),
    }
}

/// A step; only a failed step shows its log tail.
fn step_view(s: &StepResult, caps: Caps) -> StepView {
    StepView {
        name: s.name.clone(),
        status: s.status.as_str(),
        exit_code: s.exit_code.map(|e| e.to_string()).unwrap_or_default(),
        duration: secs(s.duration_secs),
        reason: s.reason.clone().unwrap_or_default(),
        log_tail: if s.status.is_failure() {
            crate::results::collect::tail(&s.log_tail, caps.log_tail)
        } else {
            String::new()
        },
        error_line: if s.status.is_failure() {
            crate::analysis::signature::error_line(&s.log_tail)
                .unwrap_or_default()
                .to_string()
        } else {
            String::new()
        },
        log: s.log.clone(),
        open: false,
        backtrace: s
            .backtrace
            .as_ref()
            .map(|b| b.top(crate::analysis::signature::TOP_FRAMES))
            .unwrap_or_default(),
        backtrace_file: s
            .backtrace
            .as_ref()
            .map(|b| b.artifact.clone())
            .unwrap_or_default(),
    }
}
