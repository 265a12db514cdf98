//! The view model shared by `summary.md` and `index.html`: the report's
//! headline, totals and cell counts, the cells that failed as expected and
//! the steps skipped, with lists capped so a million tests stay readable.
//! Its parts are rendered apart: the grid ([`super::grid`]), each cell's
//! details ([`super::cell_view`]), the comparison with a baseline
//! ([`super::regressions_view`]).

use serde::Serialize;

use super::cell_view::{cell_views, CellView};
use super::grid::{Grid, Row};
use super::regressions_view::{reg_view, regressed_cells, RegView};
use crate::analysis::regress::Regressions;
use crate::results::{CellVerdict, Counts, Results};
use crate::store::record::RunStatus as CellStatus;

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
    /// Where the cells ran: a row per host (and its GPUs).
    pub hosts: Vec<super::envs::HostView>,
    /// Whether index.html lists each cell's tests and log tails itself, or
    /// only links to the cell's page ([`super::cell_pages`]).
    pub inline_tests: bool,
    /// Steps that did not run, by step and reason: counted apart from
    /// tests, which they hold none of.
    pub skipped_steps: Vec<SkippedSteps>,
    /// The failing tests against the history, when the report has one.
    pub history: Option<super::history_view::HistoryView>,
    /// What chose the run's cells (`run --affected-by`), when something did.
    pub selected_by: Option<SelectedView>,
}

/// The line saying what chose a run's cells, and each cell's reasons.
#[derive(Serialize, Debug, PartialEq)]
pub struct SelectedView {
    /// `6 of 180 cells, selected by --affected-by src:rocblas (lock of RUN)`.
    pub line: String,
    /// Each chosen cell with its reasons joined: `(cell, "reason; reason")`.
    pub cells: Vec<(String, String)>,
}

/// [`SelectedView`] of the run's `--affected-by` selection.
fn selected_view(results: &Results) -> Option<SelectedView> {
    let s = results.selected_by.as_ref()?;
    let lock = crate::store::record::locks_note(&s.locks);
    Some(SelectedView {
        line: format!(
            "{} of {} cells, selected by --affected-by {}{lock}",
            s.cells.len(),
            s.of,
            s.changes.join(" ")
        ),
        cells: (s.cells.iter())
            .map(|c| (c.id.clone(), c.reasons.join("; ")))
            .collect(),
    })
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
        hosts: super::envs::hosts(results),
        cells,
        inline_tests: true,
        skipped_steps: skipped_steps(results),
        history: None,
        selected_by: selected_view(results),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::cell_view::css;

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
            md.contains(
                "⏭️ step **run-on-gpu** skipped in 2 cells: needs a GPU: no GPU inventory (a, b)"
            ),
            "{md}"
        );
        assert_eq!(md.matches("step **run-on-gpu**").count(), 1, "once: {md}");
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
