//! Report writers: everything under a run's `report/`.
//!
//! - `junit.xml`: merged JUnit through `crate::junit::write`, streamed while collecting
//!   (`crate::merged_junit`); or `junit/<cell>.xml` per cell ([`junit_files`]);
//! - `results.json`: the documented, versioned model (`reports/results.schema.json`);
//! - `summary.md`: for a GitHub job summary or PR comment, at most 1 MiB;
//! - `index.html`: one self-contained page for release managers, with a
//!   page per cell under `cells/` ([`cell_pages`]).
//!
//! Markdown and HTML are rendered with minijinja from the templates in
//! `reports/` (embedded at build time) out of one view model ([`view`]).

pub mod cell_pages;
pub mod cell_view;
pub mod changes_view;
pub mod coverage_view;
pub mod envs;
pub mod grid;
pub mod history_html;
pub mod history_view;
pub mod junit_files;
pub mod regressions_view;
pub mod triage_view;
pub mod view;
pub mod why;

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

use crate::analysis;
use crate::analysis::regress::{self, NameCatcher, Regressions};
use crate::history::past::Past;
use crate::results::collect::Sink;
use crate::results::junit::{Case, Limits};
use crate::results::source::CellSource;
use crate::results::{
    collect, CellResult, CellVerdict, Counts, Results, ResultsError, Source, TestStatus,
};
use history_view::Shown;

/// `summary.md` is cut to fit this (GitHub's job-summary limit).
pub const SUMMARY_LIMIT: usize = 1024 * 1024;

/// The templates, by the names they include each other by.
const TEMPLATES: [(&str, &str); 8] = [
    ("summary.md", include_str!("../../reports/summary.md.j2")),
    ("index.html", include_str!("../../reports/index.html.j2")),
    ("cell.html", include_str!("../../reports/cell.html.j2")),
    (
        "cell_details.html",
        include_str!("../../reports/cell_details.html.j2"),
    ),
    (
        "skipped_steps.html",
        include_str!("../../reports/skipped_steps.html.j2"),
    ),
    (
        "expected.html",
        include_str!("../../reports/expected.html.j2"),
    ),
    (
        "package.html",
        include_str!("../../reports/package.html.j2"),
    ),
    ("report.css", include_str!("../../reports/report.css")),
];
/// The JSON schema of `results.json`, also embedded for tests and docs.
pub const RESULTS_SCHEMA: &str = include_str!("../../reports/results.schema.json");

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Results(#[from] ResultsError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("template {name}: {source}")]
    Template {
        name: &'static str,
        #[source]
        source: minijinja::Error,
    },
}

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
    move |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What `write_reports` did, for the caller's exit code and a one-line summary.
#[derive(Debug, Clone, Serialize)]
pub struct ReportSummary {
    pub dir: PathBuf,
    pub cells: usize,
    pub failing_cells: usize,
    /// Cells that failed as the matrix's `expect:` said they would.
    pub expected_cells: usize,
    /// Cells that failed only in tests a `classify:` rule moved.
    #[serde(default)]
    pub classified_cells: usize,
    pub totals: Counts,
    /// New failures and broken cells against the baseline, when there is one.
    pub regressions: Option<u64>,
    pub junit_bytes: u64,
    pub warnings: Vec<String>,
    /// gfx targets lost from one environment to the next that a cell asks
    /// for (counted in `regressions` too when there is a baseline).
    pub coverage_regressions: u64,
    /// What changed underneath against the baseline, and gfx targets gained
    /// and lost, one line each, for the terminal.
    pub changes: Vec<String>,
    /// What the history said, for the terminal: recorded where (or why
    /// not), and the failing tests against it. Empty without a history.
    pub history: String,
    /// New failures against the baseline that the history knows as flaky
    /// (`TEST in CELL`): `--fail-on regression` does not count them.
    pub flaky_regressions: Vec<String>,
    /// What the history calls regressions, when it was read: the failing
    /// tests it calls new or failing since an earlier run (never flaky or
    /// known ones), and failing cells with no failing test to judge.
    pub history_regressions: Option<u64>,
}

impl ReportSummary {
    /// One line for the terminal.
    pub fn line(&self) -> String {
        let t = &self.totals;
        let mut expected = String::new();
        for (v, n) in [
            (CellVerdict::ExpectedFailure, self.expected_cells),
            (CellVerdict::Classified, self.classified_cells),
        ] {
            if n > 0 {
                expected.push_str(&format!(", {}", v.count(n)));
            }
        }
        let mut s = format!(
            "{} ({} failing{expected}), {}: {} passed, {} failed, {}, {} skipped, {} flaky, {} xfail, {} xpass",
            count(self.cells as u64, "cell", None),
            self.failing_cells,
            count(t.total(), "test", None),
            t.passed,
            t.failed,
            count(t.error, "error", None),
            t.skipped,
            t.flaky,
            t.xfail,
            t.xpass
        );
        if let Some(r) = self.regressions {
            s.push_str(&format!("; {}", count(r, "regression", None)));
        }
        s.push_str(&format!("; reports in {}", self.dir.display()));
        s
    }

    /// The summary line, then what changed underneath, one line each.
    pub fn lines(&self) -> String {
        let mut s = self.line();
        s.push('\n');
        for c in &self.changes {
            s.push_str(&format!("  {c}\n"));
        }
        s
    }
}

/// What the history says about the results being reported, asked once
/// they are collected (`src/finish/` records the run as it answers).
pub type PastOf<'a> = &'a (dyn Fn(&Results) -> Past + Sync);

/// (Re)builds the reports of one run under `run_dir/report/`, recording
/// nothing (`src/finish/` finishes a run: its reports and its history).
/// `junit` overrides the matrix file's `report.junit`.
pub fn write_reports(
    run_dir: &Path,
    baseline: Option<&Path>,
    junit: Option<crate::matrix_file::JunitFiles>,
) -> Result<ReportSummary, ReportError> {
    let mut source = Source::run(run_dir)?;
    if let Some(j) = junit {
        source.report.junit = j;
    }
    build(&source, &crate::store::layout::report_of(run_dir), baseline)
}

/// Fans every event out to two sinks.
struct Both<'a>(&'a mut dyn Sink, &'a mut dyn Sink);
impl Sink for Both<'_> {
    fn cell_start(&mut self, c: &CellSource) {
        self.0.cell_start(c);
        self.1.cell_start(c);
    }
    fn suite_start(&mut self, s: &str, t: Option<&str>) {
        self.0.suite_start(s, t);
        self.1.suite_start(s, t);
    }
    fn case(&mut self, s: &str, c: &Case, st: TestStatus) {
        self.0.case(s, c, st);
        self.1.case(s, c, st);
    }
    fn suite_end(&mut self, s: &str) {
        self.0.suite_end(s);
        self.1.suite_end(s);
    }
    fn cell_end(&mut self, c: &CellResult) {
        self.0.cell_end(c);
        self.1.cell_end(c);
    }
}

/// Collects `source` and writes all four reports into `out`.
pub fn build(
    source: &Source,
    out: &Path,
    baseline: Option<&Path>,
) -> Result<ReportSummary, ReportError> {
    build_with(source, out, baseline, None)
}

/// [`build`], showing what the history says (`past_of`, when given) beside
/// the failing tests: it is asked while results.json is written, before the
/// pages.
pub fn build_with(
    source: &Source,
    out: &Path,
    baseline: Option<&Path>,
    past_of: Option<PastOf<'_>>,
) -> Result<ReportSummary, ReportError> {
    std::fs::create_dir_all(out).map_err(io(out))?;
    let base = match baseline {
        Some(p) => Some(regress::load_baseline(p)?),
        None => None,
    };
    let title = format!("rocmatrix: {}", source.name);
    let mut junit = junit_files::JunitOut::create(source.report.junit, out, &title)?;
    let mut names = base.as_ref().map(NameCatcher::new);
    let mut results = match names.as_mut() {
        Some(n) => analysis::collect(source, Limits::default(), &mut Both(junit.sink(), n)),
        None => analysis::collect(source, Limits::default(), junit.sink()),
    };
    // junit.xml is finished (its body copied in behind the totals) on a
    // thread of its own while the comparison and the other outputs are
    // made: the readers' core is idle by then.
    std::thread::scope(|scope| {
        let junit_done = scope.spawn(|| junit.finish(out));
        let compared = compare_and_write(
            &mut results,
            Baseline {
                results: base.as_ref(),
                path: baseline,
                names: names.as_ref(),
            },
            past_of,
            out,
        );
        let junit_written = junit_done
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        let (regressions, past) = compared?;
        let mut summary = summarise(source, &results, regressions.as_ref(), junit_written, out);
        if let Some(past) = past {
            summary.flaky_regressions =
                history_view::flaky_regressions(&past, regressions.as_ref());
            summary.history_regressions = history_view::regressions(&past, &results);
            summary.history = past.text;
        }
        Ok(summary)
    })
}

/// A baseline to compare with: its results, where they were read from,
/// and the names of tests it knows by hash only, caught while collecting.
struct Baseline<'a> {
    results: Option<&'a Results>,
    path: Option<&'a Path>,
    names: Option<&'a NameCatcher>,
}

/// Compares `results` with the baseline, if any, asks what the history
/// says of them, if anything, and writes results.json, summary.md, index.html and the
/// cell pages.
fn compare_and_write(
    results: &mut Results,
    baseline: Baseline<'_>,
    past_of: Option<PastOf<'_>>,
    out: &Path,
) -> Result<(Option<Regressions>, Option<Past>), ReportError> {
    let Baseline {
        results: base,
        path: baseline,
        names,
    } = baseline;
    let mut regressions = base.map(|b| {
        let label = baseline
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        regress::compare(results, b, &label, names)
    });
    if let (Some(reg), Some(b)) = (regressions.as_mut(), base) {
        reg.signatures = regress::compare_signatures(results, b);
    }
    // Tests that passed in a baseline run and are gone are known by hash
    // only; when the baseline is a run whose JUnit files are still there,
    // read it once more to name them.
    if let (Some(reg), Some(b), Some(path)) = (regressions.as_mut(), base, baseline) {
        let wanted = regress::unnamed_removed(results, b);
        if !wanted.is_empty() && crate::store::layout::is_run(path) {
            let mut catcher = regress::RemovedNames::new(wanted);
            collect(&Source::run(path)?, Limits::default(), &mut catcher);
            reg.add_named_removed(catcher.found);
        }
    }
    let past = write_outputs(results, regressions.as_ref(), past_of, out)?;
    Ok((regressions, past))
}

/// What a report run says on the terminal.
fn summarise(
    source: &Source,
    results: &Results,
    regressions: Option<&Regressions>,
    junit_written: junit_files::Written,
    out: &Path,
) -> ReportSummary {
    let mut warnings = Vec::new();
    if junit_written.largest > crate::merged_junit::GITLAB_LIMIT {
        let (file, hint) = match source.report.junit {
            crate::matrix_file::JunitFiles::Merged => {
                ("junit.xml", "; `--junit per-cell` writes a file per cell")
            }
            crate::matrix_file::JunitFiles::PerCell => ("the largest file in junit/", ""),
        };
        warnings.push(format!(
            "{file} is {:.1} MB, above GitLab's 30 MB limit even with all output trimmed ({} test cases){hint}",
            junit_written.largest as f64 / 1e6,
            results.totals().total(),
        ));
    }
    let mut changes: Vec<String> = regressions
        .map(|r| {
            let mut v = changes_view::terminal_lines(&changes_view::environments(results, r));
            v.extend(r.coverage.iter().map(|c| c.line()));
            v
        })
        .unwrap_or_default();
    changes.extend(results.coverage_changes.iter().map(|c| c.line()));
    let coverage_regressions =
        crate::analysis::coverage_changes::regressions(&results.coverage_changes);
    let verdicts = |v: CellVerdict| results.cells.iter().filter(|c| c.verdict() == v).count();
    ReportSummary {
        coverage_regressions,
        changes,
        dir: out.to_path_buf(),
        cells: results.cells.len(),
        failing_cells: results.failing_cells(),
        expected_cells: verdicts(CellVerdict::ExpectedFailure),
        classified_cells: verdicts(CellVerdict::Classified),
        totals: results.totals(),
        regressions: regressions.map(Regressions::regression_count),
        junit_bytes: junit_written.bytes,
        warnings,
        history: String::new(),
        flaky_regressions: Vec::new(),
        history_regressions: None,
    }
}

/// Writes results.json, summary.md and index.html for already collected
/// results; with `past_of`, asks what the history says of them (while
/// results.json is written: it needs nothing of the history) and returns it.
pub fn write_outputs(
    results: &Results,
    reg: Option<&Regressions>,
    past_of: Option<PastOf<'_>>,
    out: &Path,
) -> Result<Option<Past>, ReportError> {
    // Three independent files, side by side: results.json (the whole
    // model), the cell pages, and summary.md with index.html.
    std::thread::scope(|scope| {
        let json =
            scope.spawn(|| write_json(results, reg, &crate::store::layout::results_file(out)));
        let past = past_of.map(|ask| ask(results));
        let shown = past.as_ref().map(history_view::Shown::of);
        let joined = |r: Result<Result<(), ReportError>, _>| {
            r.unwrap_or_else(|p| std::panic::resume_unwind(p))
        };
        let pages = std::thread::scope(|inner| {
            let cells = inner.spawn(|| write_cell_pages(results, reg, shown.as_ref(), out));
            let pages = write_pages(results, reg, shown.as_ref(), out);
            joined(cells.join())?;
            pages
        });
        joined(json.join())?;
        pages.map(|()| past)
    })
}

/// Writes summary.md and index.html.
fn write_pages(
    results: &Results,
    reg: Option<&Regressions>,
    shown: Option<&Shown>,
    out: &Path,
) -> Result<(), ReportError> {
    let triage = triage_view::of(out);
    let past = shown.map(|s| s.past);
    write_atomic(
        &out.join("summary.md"),
        render_summary_triaged(results, reg, past, triage.as_ref())?.as_bytes(),
    )?;
    write_atomic(
        &out.join("index.html"),
        html(results, reg, shown, triage.as_ref(), run_report(out))?.as_bytes(),
    )
}

/// Whether `out` is a run's own `report/` folder, whose pages can link to
/// the cells' logs and JUnit files beside it.
fn run_report(out: &Path) -> bool {
    out.file_name()
        .is_some_and(|n| n == crate::store::layout::REPORT)
        && out.parent().is_some_and(crate::store::layout::is_run)
}

/// Writes a page per cell under cells/.
fn write_cell_pages(
    results: &Results,
    reg: Option<&Regressions>,
    shown: Option<&Shown>,
    out: &Path,
) -> Result<(), ReportError> {
    let page_caps = view::Caps {
        tests_per_cell: 2000,
        log_tail: 64 * 1024,
        ..HTML_CAPS
    };
    let mut cells = cell_view::cell_views(results, reg, page_caps);
    if let Some(shown) = shown {
        history_view::apply_cells(&mut cells, shown);
    }
    if run_report(out) {
        cell_view::link_cell_files(&mut cells, "../../");
    }
    cell_pages::write(&results.name, &cells, out)?;
    Ok(())
}

#[derive(Serialize)]
struct ResultsFile<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    #[serde(flatten)]
    results: &'a Results,
    #[serde(skip_serializing_if = "Option::is_none")]
    regressions: Option<&'a Regressions>,
}

fn write_json(
    results: &Results,
    reg: Option<&Regressions>,
    path: &Path,
) -> Result<(), ReportError> {
    let tmp = path.with_extension("json.tmp");
    let f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let doc = ResultsFile {
        schema: "https://rocmatrix.invalid/schemas/results-v1.json",
        results,
        regressions: reg,
    };
    serde_json::to_writer(&mut w, &doc).map_err(|e| ReportError::Io {
        path: tmp.clone(),
        source: e.into(),
    })?;
    w.write_all(b"\n").map_err(io(&tmp))?;
    w.flush().map_err(io(&tmp))?;
    drop(w);
    std::fs::rename(&tmp, path).map_err(io(path))
}

pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// Escapes text for Markdown tables and lists: no HTML, no formatting, no
/// line breaks, no @-mentions.
fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for ch in s.chars() {
        match ch {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '@' => out.push_str("&#64;"),
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '~' | '!' => {
                out.push('\\');
                out.push(ch);
            }
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// `1 cell`, `9 cells`, `1 unexpected pass`, `2 unexpected passes`
/// (`many` when the plural is not `one` + s). The templates' `count` filter.
fn count(n: u64, one: &str, many: Option<&str>) -> String {
    match (n, many) {
        (1, _) => format!("1 {one}"),
        (n, Some(many)) => format!("{n} {many}"),
        (n, None) => format!("{n} {one}s"),
    }
}

/// A fenced code block around `s` whose fence no backtick run inside can close.
fn fence(s: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let f = "`".repeat((longest + 1).max(3));
    format!("{f}text\n{}\n{f}", s.trim_end())
}

/// HTML of a message written for the terminal: escaped, its `` `name` ``
/// spans as `<code>name</code>` (the pages showed the backticks). An
/// unpaired backtick stays as it is.
fn ticks(s: &str) -> minijinja::Value {
    let parts: Vec<&str> = s.split('`').collect();
    let mut out = String::with_capacity(s.len() + 16);
    for (i, part) in parts.iter().enumerate() {
        let text = minijinja::HtmlEscape(part).to_string();
        let paired = i % 2 == 1 && i + 1 < parts.len();
        match (paired, i % 2 == 1) {
            (true, _) => out.push_str(&format!("<code>{text}</code>")),
            (false, true) => out.push_str(&format!("`{text}")),
            (false, false) => out.push_str(&text),
        }
    }
    minijinja::Value::from_safe_string(out)
}

pub(crate) fn env() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.add_filter("md", |s: String| md_escape(&s));
    env.add_filter("ticks", |s: String| ticks(&s));
    env.add_filter("fence", |s: String| fence(&s));
    env.add_filter("count", |n: u64, one: String, many: Option<String>| {
        count(n, &one, many.as_deref())
    });
    env
}

/// Adds the report templates to `env`.
pub(crate) fn add_templates(env: &mut Environment<'static>) -> Result<(), ReportError> {
    for (name, source) in TEMPLATES {
        env.add_template(name, source)
            .map_err(|e| ReportError::Template { name, source: e })?;
    }
    Ok(())
}

fn render(name: &'static str, view: &view::View) -> Result<String, ReportError> {
    let mut env = env();
    add_templates(&mut env)?;
    let t = env
        .get_template(name)
        .map_err(|e| ReportError::Template { name, source: e })?;
    t.render(view)
        .map_err(|e| ReportError::Template { name, source: e })
}

/// `summary.md`, shrinking the lists until it fits [`SUMMARY_LIMIT`].
pub fn render_summary(results: &Results, reg: Option<&Regressions>) -> Result<String, ReportError> {
    render_summary_with(results, reg, None)
}

/// [`render_summary`], with the failing tests against the history.
pub fn render_summary_with(
    results: &Results,
    reg: Option<&Regressions>,
    past: Option<&Past>,
) -> Result<String, ReportError> {
    render_summary_triaged(results, reg, past, None)
}

/// [`render_summary_with`], with the run's triage beside its signatures.
pub fn render_summary_triaged(
    results: &Results,
    reg: Option<&Regressions>,
    past: Option<&Past>,
    triage: Option<&crate::triage::store::Triage>,
) -> Result<String, ReportError> {
    let mut caps = view::Caps {
        tests_per_cell: 50,
        per_class: 100,
        output: 0,
        log_tail: 3000,
        libraries: 0,
        signatures: 50,
        example: 1500,
    };
    loop {
        let mut v = view::build(results, reg, caps);
        // summary.md shows the section only, not the cells' strips.
        v.history = past.and_then(|p| history_view::section(p, reg, caps.per_class));
        triage_view::apply(&mut v, triage);
        let text = render("summary.md", &v)?;
        if text.len() <= SUMMARY_LIMIT {
            return Ok(text);
        }
        if caps.tests_per_cell == 0
            && caps.per_class == 0
            && caps.log_tail == 0
            && caps.signatures == 0
        {
            // Even the bare grid is too large: cut it, at a line end.
            let note = "\n\n… summary cut at 1 MiB; see index.html and results.json.\n";
            let cut = crate::results::junit::floor_char_boundary(&text, SUMMARY_LIMIT - note.len());
            let cut = text[..cut].rfind('\n').unwrap_or(cut);
            return Ok(format!("{}{note}", &text[..cut]));
        }
        caps.tests_per_cell /= 4;
        caps.per_class /= 4;
        caps.log_tail /= 4;
        caps.signatures /= 4;
        caps.example /= 4;
    }
}

/// What index.html shows of each list.
const HTML_CAPS: view::Caps = view::Caps {
    tests_per_cell: 200,
    per_class: 500,
    output: 4096,
    log_tail: 16 * 1024,
    libraries: 500,
    signatures: 500,
    example: 4096,
};

/// `index.html`: the cells' tests inline while they fit
/// [`cell_pages::INLINE_BYTES`], else links to the cells' pages.
pub fn render_html(results: &Results, reg: Option<&Regressions>) -> Result<String, ReportError> {
    html(results, reg, None, None, false)
}

/// index.html, linking the cells' files when `links` (a run's own report).
fn html(
    results: &Results,
    reg: Option<&Regressions>,
    shown: Option<&Shown>,
    triage: Option<&crate::triage::store::Triage>,
    links: bool,
) -> Result<String, ReportError> {
    let mut v = view::build(results, reg, HTML_CAPS);
    history_view::apply(&mut v, shown, reg, HTML_CAPS.per_class);
    if let Some(h) = &mut v.history {
        // index.html prints the rows as made here, not field by field:
        // they are not handed to the template a second time.
        h.html = history_html::rows(&std::mem::take(&mut h.rows));
    }
    triage_view::apply(&mut v, triage);
    if links {
        cell_view::link_cell_files(&mut v.cells, "../");
    }
    v.inline_tests = cell_pages::details_bytes(&v) <= cell_pages::INLINE_BYTES;
    render("index.html", &v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_messages_backtick_spans_are_code_and_everything_else_is_escaped() {
        assert_eq!(
            ticks("step `compile` failed: <exit 1>").to_string(),
            "step <code>compile</code> failed: &lt;exit 1&gt;"
        );
        assert_eq!(ticks("a ` alone").to_string(), "a ` alone");
        assert_eq!(
            ticks("`<img src=x onerror=alert(1)>`").to_string(),
            "<code>&lt;img src=x onerror=alert(1)&gt;</code>"
        );
    }

    #[test]
    fn a_failing_steps_tail_shows_its_error_first_and_links_its_whole_log_in_a_runs_report() {
        let tail = "Traceback (most recent call last):\\nFileNotFoundError: no KFD topology\\nclang: error: cannot find ROCm device library for gfx1100\\n";
        let json = format!(
            r#"{{"version": 1, "name": "m", "runs": [], "keys": [], "report": {{"rows": [], "columns": []}}, "cells": [{{"id": "bookworm.gfx1100", "values": {{}}, "status": "failed", "counts": {{"passed": 0, "failed": 0, "error": 0, "skipped": 0, "flaky": 0, "xfail": 0, "xpass": 0}}, "junit": ["junit/01-t/r.xml"], "steps": [{{"name": "compile", "status": "failed", "exit_code": 1, "duration_secs": 1.0, "log_tail": "{tail}", "log": "logs/01-compile.log"}}]}}]}}"#
        );
        let results: Results = serde_json::from_str(&json).unwrap();
        let page = html(&results, None, None, None, true).unwrap();
        let error = page
            .find("✗ <code>clang: error: cannot find ROCm device library for gfx1100</code>")
            .expect("the error line, first");
        assert!(
            error < page.find("<pre>Traceback").expect("then the tail"),
            "{page}"
        );
        // The first failure is open; the whole log and JUnit files are linked.
        assert!(
            page.contains(r#"<details class="test" open><summary>Log tail of step <b>compile</b>"#),
            "{page}"
        );
        assert!(
            page.contains("..&#x2f;cells&#x2f;bookworm.gfx1100&#x2f;logs&#x2f;01-compile.log"),
            "{page}"
        );
        assert!(
            page.contains(">junit/01-t/r.xml</a>")
                || page.contains(">junit&#x2f;01-t&#x2f;r.xml</a>"),
            "{page}"
        );
        // A report that is not a run's own links nothing.
        let merged = render_html(&results, None).unwrap();
        assert!(!merged.contains("the whole log"), "{merged}");
        let md = render_summary(&results, None).unwrap();
        assert!(
            md.contains(
                "; the failure: clang: error: cannot find ROCm device library for gfx1100:"
            ),
            "{md}"
        );
    }

    #[test]
    fn counts_say_one_without_an_s() {
        assert_eq!(count(1, "environment", None), "1 environment");
        assert_eq!(count(3, "cell", None), "3 cells");
        assert_eq!(count(0, "error", None), "0 errors");
        assert_eq!(
            count(2, "unexpected pass", Some("unexpected passes")),
            "2 unexpected passes"
        );
    }

    #[test]
    fn markdown_escape() {
        assert_eq!(
            md_escape("<img src=x>|a_b\n@you"),
            "&lt;img src=x&gt;\\|a\\_b &#64;you"
        );
        assert_eq!(fence("a ``` b"), "````text\na ``` b\n````");
    }
}
