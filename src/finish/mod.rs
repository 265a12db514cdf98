//! Finishing a run: the two steps every way of ending one goes through,
//! writing its reports and recording it into the history.
//!
//! `run`, `report`, `report merge`, Slurm's merged job array, `triage`,
//! `try` and bisect's probes all finish here; none of them writes reports
//! or records a run on its own, and neither `src/report/` nor
//! `src/history/` knows of the other's side of it.
//!
//! The order is the reports': they show what the history says beside each
//! failing test, so the run is recorded (while `results.json` is written,
//! which needs nothing of the history) and read back before the pages are
//! rendered. A history that cannot be used never stops the reports: its
//! line in the summary says why and how to record the run later.

pub mod summary;

use std::path::Path;

use crate::history::past::{self, Recorder};
use crate::matrix_file::JunitFiles;
use crate::report::{self, ReportError, ReportSummary};
use crate::results::{Results, Source};

/// How a run is finished.
#[derive(Debug, Clone, Default)]
pub struct Finish<'a> {
    /// Results (a run store or a `results.json`) to compare with.
    pub baseline: Option<&'a Path>,
    /// Overrides the matrix file's `report.junit`.
    pub junit: Option<JunitFiles>,
    /// Where the run is recorded, and the run stores it is made of; `None`
    /// for runs the history must not hold (a `try` of a patched source, a
    /// bisection's probe, JUnit directories that are no run).
    pub history: Option<Recorder>,
}

impl Finish<'_> {
    /// Reports only: nothing is recorded, nothing compared.
    pub fn reports_only() -> Finish<'static> {
        Finish::default()
    }
}

/// Finishes the run of one run store: its reports in `run_dir/report/`.
pub fn run_store(run_dir: &Path, finish: &Finish<'_>) -> Result<ReportSummary, ReportError> {
    let out = crate::store::layout::report_of(run_dir);
    source_into(Source::run(run_dir)?, &out, finish)
}

/// Finishes a run read from `source` (the shards of one plan, JUnit
/// directories) with its reports in `out`.
pub fn source_into(
    mut source: Source,
    out: &Path,
    finish: &Finish<'_>,
) -> Result<ReportSummary, ReportError> {
    if let Some(j) = finish.junit {
        source.report.junit = j;
    }
    let record = finish
        .history
        .as_ref()
        .map(|rec| move |results: &Results| past::record_and_read(rec, results));
    let past_of = record.as_ref().map(|f| f as report::PastOf<'_>);
    report::build_with(&source, out, finish.baseline, past_of)
}
