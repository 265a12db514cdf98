//! The view model shared by `summary.md` and `index.html`: the grid from the
//! matrix file's `report:` rows and columns, regressions, failing tests per
//! cell and totals, with lists capped so a million tests stay readable.

use std::collections::HashSet;

use serde::Serialize;

use crate::analysis::regress::{CellClass, Class, Regressions};
use crate::results::junit::clip;
use crate::results::model::StepResult;
use crate::results::{CellResult, CellVerdict, Counts, Results, TestResult, TestStatus};
use crate::store::record::Status as CellStatus;

/// How much of each list the view shows.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Tests listed per cell.
    pub tests_per_cell: usize,
    /// Tests listed per regression class.
    pub per_class: usize,
    /// Bytes of a test's output.
    pub output: usize,
    /// Bytes of a step's log tail.
    pub log_tail: usize,
    /// Libraries listed per environment's gfx coverage table.
    pub libraries: usize,
    /// Failure signatures listed.
    pub signatures: usize,
    /// Bytes of a signature's example.
    pub example: usize,
}

#[derive(Serialize)]
pub struct View {
    pub name: String,
    pub runs: Vec<String>,
    pub verdict: &'static str,
    pub ok: bool,
    pub totals: Counts,
    pub total_tests: u64,
    pub cells_total: usize,
    pub cells_failing: usize,
    /// Cells by outcome, in words: `8 passed, 1 expected failure`.
    pub cell_outcomes: String,
    /// The same, one pill each: `("expected failure", "1 expected failure")`.
    pub cell_counts: Vec<(&'static str, String)>,
    /// Whether every cell simply passed.
    pub all_passed: bool,
    /// Cells by outcome word (`failed`, `timeout`, `expected failure` …),
    /// shown beside [`View::cell_outcomes`] only when it tells more:
    /// when some cell is failing or classified.
    pub cell_statuses: Vec<(String, u64)>,
    pub show_cell_statuses: bool,
    /// The cells that failed as the matrix expected, and why they were.
    pub expected_failures: Vec<ExpectedView>,
    pub messages: Vec<String>,
    pub regressions: Option<RegView>,
    pub row_axes: Vec<String>,
    pub col_axes: Vec<String>,
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
    pub cells: Vec<CellView>,
    pub coverage: Vec<super::coverage_view::CoverageView>,
    /// Per environment and gfx target: how many libraries run it, and how.
    pub release: Vec<super::coverage_view::ReleaseView>,
    /// gfx targets gained and lost from one environment to the next.
    pub coverage_changes: Vec<String>,
    /// Why cells fail, most cells first, capped.
    pub signatures: Vec<super::why::SignatureView>,
    /// All signatures, listed or not.
    pub signature_count: usize,
    /// The baseline's signatures that are gone, with their fix ranges,
    /// from the run's triage (`triage.json`); empty when not triaged.
    pub triage_gone: Vec<String>,
    /// The versions that matter per environment image.
    pub environments: Vec<super::envs::EnvView>,
    /// Whether index.html lists each cell's tests and log tails itself, or
    /// only links to the cell's page ([`super::cell_pages`]).
    pub inline_tests: bool,
    /// Steps that did not run, by step and reason: counted apart from
    /// tests, which they hold none of.
    pub skipped_steps: Vec<SkippedSteps>,
    /// The failing tests against the history, when the report has one.
    pub history: Option<super::history_view::HistoryView>,
}

/// A cell that failed as the matrix's `expect:` said it would.
#[derive(Serialize, Debug, PartialEq)]
pub struct ExpectedView {
    pub id: String,
    /// Its status, as it ran: `failed`, `timeout` ….
    pub status: &'static str,
    /// Why it ended so (`step \`compile\`: exit code 1`), if known.
    pub reason: String,
    /// Why the matrix expects it to fail; empty when only tests were
    /// expected to fail.
    pub expected: String,
}

/// One step skipped in some cells for one reason.
#[derive(Serialize, Debug, PartialEq)]
pub struct SkippedSteps {
    pub step: String,
    pub reason: String,
    pub cells: Vec<String>,
    /// `skipped in 8 cells` / `skipped in 1 cell`.
    pub line: String,
}

#[derive(Serialize)]
pub struct RegView {
    pub baseline: String,
    pub regressions: u64,
    pub counts: Vec<(String, u64)>,
    pub classes: Vec<ClassView>,
    pub cells: Vec<CellChangeView>,
    /// Failure signatures new, known and gone against the baseline.
    pub signatures: crate::analysis::regress::SignatureChanges,
    /// What changed underneath each environment, with its cells' regressions.
    pub environments: Vec<super::changes_view::EnvChangeView>,
    /// gfx targets libraries gained and lost against the baseline.
    pub coverage: Vec<String>,
}

#[derive(Serialize)]
pub struct ClassView {
    pub class: &'static str,
    pub label: &'static str,
    pub count: u64,
    pub tests: Vec<ChangeView>,
    pub more: u64,
}

#[derive(Serialize)]
pub struct ChangeView {
    pub cell: String,
    pub test: String,
    pub status: String,
    pub baseline: String,
    pub message: String,
}

#[derive(Serialize)]
pub struct CellChangeView {
    pub class: &'static str,
    pub cell: String,
    pub from: String,
    pub to: String,
}

#[derive(Serialize)]
pub struct Row {
    pub label: String,
    pub slots: Vec<Vec<Chip>>,
}

/// One cell inside a grid slot.
#[derive(Serialize)]
pub struct Chip {
    pub id: String,
    /// The values of the axes that are neither rows nor columns.
    pub label: String,
    pub status: &'static str,
    /// Its verdict in words ([`CellResult::outcome`]): the status, or
    /// `expected failure`.
    pub outcome: &'static str,
    pub css: &'static str,
    pub counts: Counts,
    /// Tests it counted, of any status.
    pub tests: u64,
    pub regressed: bool,
}

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
    /// Its outcome in its last recorded runs, oldest first (with a history).
    pub history: Vec<crate::history::past::Mark>,
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
    /// Against the history (with one): `new`, `failing since …`, `flaky …`.
    pub history: String,
    /// Its kind in one word (`new`, `flaky`, `known` …), for the badge.
    pub history_kind: &'static str,
    /// For a regression: what changed underneath when it began.
    pub changed: String,
    /// Its outcome in its cell's last recorded runs, oldest first: `✓✓✗`.
    pub strip: String,
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
fn css(c: &CellResult) -> &'static str {
    use crate::store::record::Status as S;
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
        CellVerdict::Passed => "pass",
    }
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

/// The view of `results`, compared with a baseline when `reg` is given,
/// with every list capped by `caps`.
pub fn build(results: &Results, reg: Option<&Regressions>, caps: Caps) -> View {
    let regressed = regressed_cells(reg);
    let grid = Grid::new(results, &regressed);
    let cells = cell_views(results, reg, caps);
    let regressions = reg.map(|r| RegView {
        environments: super::changes_view::environments(results, r),
        coverage: r.coverage.iter().map(|c| c.line()).collect(),
        ..reg_view(r, caps)
    });

    let totals = results.totals();
    let cells_failing = results.failing_cells();
    let any_regression = regressions.as_ref().is_some_and(|r| r.regressions > 0);
    View {
        name: results.name.clone(),
        runs: results.runs.clone(),
        verdict: if any_regression {
            "regressions"
        } else if cells_failing > 0 {
            "failures"
        } else {
            "passed"
        },
        ok: cells_failing == 0,
        totals,
        total_tests: totals.total(),
        cells_total: results.cells.len(),
        cells_failing,
        cell_outcomes: cell_outcomes(results),
        cell_counts: results
            .verdicts()
            .into_iter()
            .map(|(v, n)| (verdict_css(v), v.count(n)))
            .collect(),
        all_passed: results
            .cells
            .iter()
            .all(|c| c.status == CellStatus::Passed && !c.is_failure()),
        cell_statuses: cell_statuses(results),
        show_cell_statuses: results
            .cells
            .iter()
            .any(|c| matches!(c.verdict(), CellVerdict::Failing | CellVerdict::Classified)),
        expected_failures: expected_failures(results),
        messages: results.messages.clone(),
        regressions,
        columns: grid.columns,
        row_axes: grid.row_axes,
        col_axes: grid.col_axes,
        rows: grid.rows,
        coverage: super::coverage_view::tables(results, caps.libraries),
        release: super::coverage_view::release(results),
        coverage_changes: results.coverage_changes.iter().map(|c| c.line()).collect(),
        signatures: super::why::views(&results.signatures, caps.signatures, caps.example),
        signature_count: results.signatures.len(),
        triage_gone: Vec::new(),
        environments: super::envs::views(results),
        cells,
        inline_tests: true,
        skipped_steps: skipped_steps(results),
        history: None,
    }
}

/// Cells by outcome word, as [`CellResult::outcome`] names them.
fn cell_statuses(results: &Results) -> Vec<(String, u64)> {
    let mut m: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for c in &results.cells {
        *m.entry(c.outcome()).or_insert(0) += 1;
    }
    m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The cells whose verdict is an expected failure, in the plan's order.
pub fn expected_failures(results: &Results) -> Vec<ExpectedView> {
    results
        .cells
        .iter()
        .filter(|c| c.verdict() == CellVerdict::ExpectedFailure)
        .map(|c| ExpectedView {
            id: c.id.clone(),
            status: c.status.as_str(),
            reason: c.reason.clone().unwrap_or_default(),
            expected: c.expected_failure.clone().unwrap_or_default(),
        })
        .collect()
}

/// The badge class of a count of cells with verdict `v`.
fn verdict_css(v: CellVerdict) -> &'static str {
    match v {
        CellVerdict::Failing => "fail",
        CellVerdict::Passed => "pass",
        CellVerdict::ExpectedFailure => "xfail",
        CellVerdict::Classified | CellVerdict::Skipped => "skip",
    }
}

/// The steps skipped in any cell (a step that needs a GPU, on a host
/// without one), grouped by step and reason, in the order first met.
fn skipped_steps(results: &Results) -> Vec<SkippedSteps> {
    let mut out: Vec<SkippedSteps> = Vec::new();
    for c in &results.cells {
        for st in c.steps.iter().filter(|st| st.status == CellStatus::Skipped) {
            let reason = st.reason.clone().unwrap_or_default();
            match out
                .iter_mut()
                .find(|g| g.step == st.name && g.reason == reason)
            {
                Some(g) => g.cells.push(c.id.clone()),
                None => out.push(SkippedSteps {
                    step: st.name.clone(),
                    reason,
                    cells: vec![c.id.clone()],
                    line: String::new(),
                }),
            }
        }
    }
    for g in &mut out {
        let n = g.cells.len();
        g.line = format!("skipped in {n} cell{}", if n == 1 { "" } else { "s" });
    }
    out
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

/// Cells that regressed: new test failures, or broken against the baseline.
fn regressed_cells(reg: Option<&Regressions>) -> HashSet<&str> {
    reg.map(|r| {
        r.of_class(Class::NewFailure)
            .map(|c| c.cell.as_str())
            .chain(
                r.cells
                    .iter()
                    .filter(|c| c.class == CellClass::Broken)
                    .map(|c| c.cell.as_str()),
            )
            .collect()
    })
    .unwrap_or_default()
}

/// The report grid: which axes span rows and columns, and a chip per cell.
struct Grid {
    row_axes: Vec<String>,
    col_axes: Vec<String>,
    columns: Vec<String>,
    rows: Vec<Row>,
}

impl Grid {
    /// Lays out the cells by the matrix file's `report:` rows and columns
    /// (by default the first axis down, the second across); the other axes
    /// label the chips.
    fn new(results: &Results, regressed: &HashSet<&str>) -> Grid {
        let keys = &results.keys;
        let mut row_axes = results.report.rows.clone();
        let mut col_axes = results.report.columns.clone();
        if row_axes.is_empty() && col_axes.is_empty() {
            row_axes.extend(keys.first().cloned());
            col_axes.extend(keys.get(1).cloned());
        }
        let rest: Vec<String> = keys
            .iter()
            .filter(|k| !row_axes.contains(k) && !col_axes.contains(k))
            .cloned()
            .collect();
        // Row and column labels in order of first appearance (the plan's order).
        let mut labels: Vec<String> = Vec::new();
        let mut columns: Vec<String> = Vec::new();
        for c in &results.cells {
            let r = label(c, &row_axes);
            if !labels.contains(&r) {
                labels.push(r);
            }
            let k = label(c, &col_axes);
            if !columns.contains(&k) {
                columns.push(k);
            }
        }
        let mut rows: Vec<Row> = labels
            .iter()
            .map(|l| Row {
                label: l.clone(),
                slots: columns.iter().map(|_| Vec::new()).collect(),
            })
            .collect();
        for c in &results.cells {
            let r = labels.iter().position(|x| *x == label(c, &row_axes));
            let k = columns.iter().position(|x| *x == label(c, &col_axes));
            if let (Some(r), Some(k)) = (r, k) {
                rows[r].slots[k].push(Chip {
                    id: c.id.clone(),
                    label: values_label(c, &rest),
                    status: c.status.as_str(),
                    outcome: c.outcome(),
                    css: css(c),
                    counts: c.counts,
                    tests: c.counts.total(),
                    regressed: regressed.contains(c.id.as_str()),
                });
            }
        }
        Grid {
            row_axes,
            col_axes,
            columns,
            rows,
        }
    }
}

/// A row or column label: the cell's values of `axes`, or `cells` for none.
fn label(c: &CellResult, axes: &[String]) -> String {
    if axes.is_empty() {
        return "cells".to_string();
    }
    values_label(c, axes)
}

/// The cell's values of `axes`, `–` where it has none, joined with ` · `.
fn values_label(c: &CellResult, axes: &[String]) -> String {
    axes.iter()
        .map(|a| c.value(a).unwrap_or("–"))
        .collect::<Vec<_>>()
        .join(" · ")
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
        history: Vec::new(),
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

/// Cells counted by their verdicts, most serious first:
/// `1 failing, 8 passed, 1 expected failure`.
fn cell_outcomes(results: &Results) -> String {
    results
        .verdicts()
        .into_iter()
        .map(|(v, n)| v.count(n))
        .collect::<Vec<_>>()
        .join(", ")
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
        history: String::new(),
        history_kind: "",
        changed: String::new(),
        strip: String::new(),
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

/// The comparison with the baseline: counts per class, the changed tests of
/// each class present (capped), and the cells that came, went or changed.
fn reg_view(r: &Regressions, caps: Caps) -> RegView {
    RegView {
        baseline: r.baseline.clone(),
        regressions: r.regression_count(),
        counts: Class::ALL
            .iter()
            .map(|c| (c.label().to_string(), r.count(*c)))
            .collect(),
        classes: Class::ALL
            .iter()
            .filter(|c| r.count(**c) > 0)
            .map(|c| class_view(r, *c, caps))
            .collect(),
        cells: r
            .cells
            .iter()
            .map(|c| CellChangeView {
                class: c.class.as_str(),
                cell: c.cell.clone(),
                from: c.from.clone().unwrap_or_else(|| "–".into()),
                to: c.to.clone().unwrap_or_else(|| "–".into()),
            })
            .collect(),
        signatures: r.signatures,
        environments: Vec::new(),
        coverage: Vec::new(),
    }
}

/// The tests that changed in class `c`, at most `caps.per_class` of them.
fn class_view(r: &Regressions, c: Class, caps: Caps) -> ClassView {
    let tests: Vec<ChangeView> = r
        .of_class(c)
        .take(caps.per_class)
        .map(|x| ChangeView {
            cell: x.cell.clone(),
            test: x.display_name(),
            status: x.status.map(|s| s.as_str()).unwrap_or("–").into(),
            baseline: x.baseline.map(|s| s.as_str()).unwrap_or("–").into(),
            message: clip(&x.message, 300),
        })
        .collect();
    ClassView {
        class: c.as_str(),
        label: c.label(),
        count: r.count(c),
        more: r.count(c).saturating_sub(tests.len() as u64),
        tests,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(id: &str, status: &str, extra: &str) -> String {
        format!(
            r#"{{"id": "{id}", "values": {{}}, "status": "{status}", "counts": {{"passed": 1, "failed": 0, "error": 0, "skipped": 0, "flaky": 0, "xfail": 0, "xpass": 0}}{extra}}}"#
        )
    }

    #[test]
    fn an_expected_failure_is_not_all_passed() {
        let cells = [
            cell("a", "passed", ""),
            cell("b", "passed", ""),
            cell(
                "c",
                "failed",
                r#", "expected_failure": "no gfx1100 libraries""#,
            ),
        ];
        let json = format!(
            r#"{{"version": 1, "name": "m", "runs": [], "keys": [], "report": {{"rows": [], "columns": []}}, "cells": [{}]}}"#,
            cells.join(",")
        );
        let results: Results = serde_json::from_str(&json).unwrap();
        assert_eq!(cell_outcomes(&results), "2 passed, 1 expected failure");
        assert!(!results.cells.iter().all(|c| c.status == CellStatus::Passed));
        assert_eq!(results.failing_cells(), 0);
    }

    /// The smoke's bookworm.gfx1100: its compile step failed, as the
    /// matrix's `expect:` says, and it has no tests.
    fn with_an_expected_failure() -> Results {
        let xfail = r#"{"id": "bookworm.gfx1100", "values": {"suite": "bookworm", "gfx": "gfx1100"}, "status": "failed", "reason": "step `compile`: exit code 1", "counts": {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "flaky": 0, "xfail": 0, "xpass": 0}, "expected_failure": "no gfx1100 device libraries"}"#;
        let pass = r#"{"id": "bookworm.gfx900", "values": {"suite": "bookworm", "gfx": "gfx900"}, "status": "passed", "counts": {"passed": 3, "failed": 0, "error": 0, "skipped": 0, "flaky": 0, "xfail": 0, "xpass": 0}}"#;
        let json = format!(
            r#"{{"version": 1, "name": "smoke", "runs": [], "keys": ["suite", "gfx"], "report": {{"rows": ["suite"], "columns": ["gfx"]}}, "cells": [{pass}, {xfail}]}}"#
        );
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn an_expected_failure_reads_as_one_everywhere() {
        let results = with_an_expected_failure();
        let cell = &results.cells[1];
        assert_eq!(cell.verdict(), CellVerdict::ExpectedFailure);
        assert_eq!(cell.outcome(), "expected failure");
        assert_eq!(css(cell), "xfail");

        // summary.md: the grid mark, the cells line, and the cell named.
        let md = crate::report::render_summary(&results, None).unwrap();
        assert!(
            md.contains("| **bookworm** | ✅ 3/0/0 | ☑️ expected failure |"),
            "{md}"
        );
        assert!(
            md.contains("2 cells: 1 passed, 1 expected failure.\n"),
            "{md}"
        );
        assert!(!md.contains("cell statuses"), "{md}");
        assert!(
            md.contains("☑️ **bookworm.gfx1100**: expected failure — it failed (step \\`compile\\`: exit code 1), as the matrix's `expect:` says: no gfx1100 device libraries."),
            "{md}"
        );
        assert!(
            md.contains("<summary>☑️ bookworm.gfx1100: expected failure ("),
            "{md}"
        );

        // index.html: the card's badge, the grid entry, the counts labelled.
        let html = crate::report::render_html(&results, None).unwrap();
        assert!(
            html.contains(
                "<h3>bookworm.gfx1100 <span class=\"badge xfail\">expected failure</span>"
            ),
            "{html}"
        );
        assert!(!html.contains("badge failed"), "{html}");
        assert!(
            html.contains("title=\"bookworm.gfx1100: expected failure\">☑ expected failure</a>"),
            "{html}"
        );
        assert!(
            html.contains("<span>cells:</span><span class=\"pass\">1 passed</span><span class=\"xfail\">1 expected failure</span>"),
            "{html}"
        );
        assert!(
            html.contains("<span>tests:</span><span>3 passed</span>"),
            "{html}"
        );

        // Its page: title, banner and badge.
        let dir = tempfile::tempdir().unwrap();
        let caps = Caps {
            tests_per_cell: 10,
            per_class: 10,
            output: 100,
            log_tail: 100,
            libraries: 10,
            signatures: 10,
            example: 100,
        };
        crate::report::cell_pages::write("smoke", &cell_views(&results, None, caps), dir.path())
            .unwrap();
        let page = std::fs::read_to_string(dir.path().join("cells/bookworm.gfx1100.html")).unwrap();
        assert!(
            page.contains("<title>bookworm.gfx1100: expected failure — smoke"),
            "{page}"
        );
        assert!(
            page.contains("<header class=\"xfail\">\n<h1>bookworm.gfx1100: expected failure</h1>"),
            "{page}"
        );
        assert!(
            page.contains("<span class=\"badge xfail\">expected failure</span>"),
            "{page}"
        );
        assert!(!page.contains("badge failed"), "{page}");

        // explain names it.
        let text = crate::report::why::explain(&results);
        assert!(text.starts_with("No cell fails unexpectedly.\n"), "{text}");
        assert!(
            text.contains("  bookworm.gfx1100: failed (step `compile`: exit code 1)\n    expected: no gfx1100 device libraries\n"),
            "{text}"
        );
    }

    #[test]
    fn environments_once_in_the_matrix_order_and_cards_refer_to_them() {
        let cell = |id: &str, suite: &str, gfx: &str| {
            format!(
                r#"{{"id": "{id}", "values": {{"suite": "{suite}", "gfx": "{gfx}"}}, "status": "passed", "counts": {{"passed": 1, "failed": 0, "error": 0, "skipped": 0, "flaky": 0, "xfail": 0, "xpass": 0}}}}"#
            )
        };
        let cells = [
            cell("bookworm.gfx900", "bookworm", "gfx900"),
            cell("bookworm.gfx1100", "bookworm", "gfx1100"),
            cell("sid.gfx900", "sid", "gfx900"),
        ];
        // As a lock keeps them: by hash, and cell ids sorted as strings.
        let envs = r#"[
            {"environment": "0aaaaaaaaaaa", "base": "debian:sid", "cells": ["sid.gfx900"], "packages": {"hipcc": "7.0.2"}},
            {"environment": "1bbbbbbbbbbb", "base": "debian:bookworm", "cells": ["bookworm.gfx1100", "bookworm.gfx900"], "packages": {"hipcc": "5.2.3-8", "rocminfo": "5.2.3-2"}}
        ]"#;
        let json = format!(
            r#"{{"version": 1, "name": "smoke", "runs": [], "keys": ["suite", "gfx"], "report": {{"rows": ["suite"], "columns": ["gfx"]}}, "cells": [{}], "environments": {envs}}}"#,
            cells.join(",")
        );
        let results: Results = serde_json::from_str(&json).unwrap();

        let md = crate::report::render_summary(&results, None).unwrap();
        let bookworm = md
            .find("| debian:bookworm 1bbbbbbbbbbb (suite=bookworm) | bookworm.gfx900, bookworm.gfx1100 | hipcc 5.2.3-8, rocminfo 5.2.3-2 |")
            .unwrap_or_else(|| panic!("{md}"));
        let sid = md
            .find("| debian:sid 0aaaaaaaaaaa | sid.gfx900 |")
            .unwrap_or_else(|| panic!("{md}"));
        assert!(
            bookworm < sid,
            "bookworm first, as the matrix has it:\n{md}"
        );
        assert!(md.contains("# smoke: ✅ all 3 cells passed"), "{md}");

        let html = crate::report::render_html(&results, None).unwrap();
        // The package line once, in the environment's row; cards link to it.
        assert_eq!(
            html.matches("hipcc 5.2.3-8, rocminfo 5.2.3-2").count(),
            1,
            "{html}"
        );
        assert!(
            html.contains("<tr id=\"env-1bbbbbbbbbbb\"><td>debian:bookworm"),
            "{html}"
        );
        assert_eq!(
            html.matches(
                "environment <a href=\"#env-1bbbbbbbbbbb\">debian:bookworm 1bbbbbbbbbbb</a>"
            )
            .count(),
            2,
            "{html}"
        );
        assert!(
            html.find("<tr id=\"env-1bbbbbbbbbbb\">").unwrap()
                < html.find("<tr id=\"env-0aaaaaaaaaaa\">").unwrap()
        );
        assert!(html.contains("3 tests in 3 cells"), "{html}");
        assert!(html.contains("<span>0 errors</span>"), "{html}");
    }

    #[test]
    fn skipped_steps_are_counted_by_step_and_reason_and_shown() {
        let gpu = r#", "steps": [{"name": "compile", "status": "passed", "duration_secs": 1.0}, {"name": "run-on-gpu", "status": "skipped", "duration_secs": 0.0, "reason": "needs a GPU: no GPU inventory"}]"#;
        let cells = [
            cell("a", "passed", gpu),
            cell("b", "passed", gpu),
            cell("c", "passed", ""),
        ];
        let json = format!(
            r#"{{"version": 1, "name": "m", "runs": [], "keys": [], "report": {{"rows": [], "columns": []}}, "cells": [{}]}}"#,
            cells.join(",")
        );
        let results: Results = serde_json::from_str(&json).unwrap();
        assert_eq!(
            skipped_steps(&results),
            [SkippedSteps {
                step: "run-on-gpu".into(),
                reason: "needs a GPU: no GPU inventory".into(),
                cells: vec!["a".into(), "b".into()],
                line: "skipped in 2 cells".into(),
            }]
        );
        let md = crate::report::render_summary(&results, None).unwrap();
        assert!(
            md.contains("⏭️ step **run-on-gpu** skipped in 2 cells: needs a GPU: no GPU inventory"),
            "{md}"
        );
        let html = crate::report::render_html(&results, None).unwrap();
        assert!(
            html.contains("step <b>run-on-gpu</b> skipped in 2 cells: needs a GPU"),
            "{html}"
        );
        // Each card says which of its steps were skipped, and why.
        assert_eq!(
            html.matches(
                "<span class=\"badge skipped\">skipped</span> step <b>run-on-gpu</b> — needs a GPU"
            )
            .count(),
            2,
            "{html}"
        );
    }
}
