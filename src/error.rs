//! The top-level error type and the documented exit codes: the one place
//! that decides what rocmatrix exits with.
//!
//! Every module has its own typed error; they all convert into [`Error`],
//! which knows which exit code it maps to. Outcomes that are not errors — a
//! finished run, a report under `--fail-on`, a repro — map to exit codes here
//! too ([`ExitCode::of_run`], [`ExitCode::of_report`], [`ExitCode::of_repro`]),
//! from facts the lower floors report. The codes are listed in
//! docs/architecture.md and the README.

use std::path::PathBuf;

use crate::bisect::BisectError;
use crate::bundle::BundleError;
use crate::engine::EngineError;
use crate::gpu::GpuError;
use crate::matrix_file::SpecError;
use crate::outcome::CellVerdict;
use crate::report::{ReportError, ReportSummary};
use crate::results::ResultsError;
use crate::run::runner::RunReport;
use crate::run::RunError;
use crate::store::StoreError;

/// Exit codes documented in the README and docs/architecture.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// All cells passed (or only expected failures).
    Success = 0,
    /// Test failures, or regressions under `--fail-on regression`.
    TestFailure = 1,
    /// Usage or matrix-file error.
    Usage = 2,
    /// Infrastructure error: engine unreachable, image build failed.
    Infrastructure = 3,
    /// Interrupted by SIGINT/SIGTERM.
    Interrupted = 130,
}

/// When a report makes the command exit with 1 (`--fail-on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Any failing cell or unexpected test failure.
    Failure,
    /// Only new failures or broken cells against --baseline; without one, the failing tests
    /// the history calls new or failing since an earlier run (failures without either).
    Regression,
    /// Always exit 0 once the reports are written.
    Never,
}

/// How a repro went: the cell ran again with the same outcome, a different
/// one, or not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReproOutcome {
    Same,
    Differs,
    NotRun,
    Interrupted,
}

impl ExitCode {
    pub fn code(self) -> i32 {
        self as i32
    }

    /// A report under `--fail-on`: 1 when it finds what `fail_on` names.
    pub fn of_report(summary: &ReportSummary, fail_on: FailOn) -> ExitCode {
        let failing = summary.failing_cells > 0;
        let bad = match (fail_on, summary.regressions) {
            (FailOn::Never, _) => false,
            (FailOn::Failure, _) => failing,
            (FailOn::Regression, Some(r)) => r > 0,
            // Without a baseline, the history judges: new and failing-since
            // tests are regressions, flaky and known ones are not.
            (FailOn::Regression, None) => match summary.history_regressions {
                Some(h) => h > 0,
                None => {
                    tracing::info!(
                        "--fail-on regression without --baseline or a history: failing on failures"
                    );
                    failing || summary.coverage_regressions > 0
                }
            },
        };
        if bad {
            ExitCode::TestFailure
        } else {
            ExitCode::Success
        }
    }

    /// A Slurm array (`run --executor slurm`), judged as a local run is:
    /// interrupted 130; test failures 1 (`--fail-on` decides, over the
    /// merged report); infrastructure errors (cells a task did not finish,
    /// `errors`) 3 unless tests failed too; else 0.
    pub fn of_array(
        summary: &ReportSummary,
        fail_on: FailOn,
        interrupted: bool,
        errors: bool,
    ) -> ExitCode {
        if interrupted {
            return ExitCode::Interrupted;
        }
        let failed = summary.totals.failed > 0;
        match ExitCode::of_report(summary, fail_on) {
            ExitCode::TestFailure if errors && !failed => ExitCode::Infrastructure,
            ExitCode::TestFailure => ExitCode::TestFailure,
            _ if errors => ExitCode::Infrastructure,
            other => other,
        }
    }

    /// A finished (or interrupted) run, judged with its reports when they
    /// could be written: interrupted 130; test failures 1 (expected failures
    /// do not count, and `--fail-on` decides); infrastructure errors 3 —
    /// cells that only errored are not test failures; else 0.
    pub fn of_run(run: &RunReport, report: Option<&ReportSummary>, fail_on: FailOn) -> ExitCode {
        RunExit::of(run, report, fail_on).code
    }
    /// `bisect`: 0 when a first bad (or, with `--regress success`, first
    /// good) point was found; 1 when the ends do not behave as claimed;
    /// 3 when an end could not be probed at all; 130 when interrupted.
    pub fn of_bisect(
        interrupted: bool,
        outcome: Option<crate::bisect::store::AnswerOutcome>,
    ) -> ExitCode {
        use crate::bisect::store::AnswerOutcome;
        match (interrupted, outcome) {
            (true, _) => ExitCode::Interrupted,
            (false, Some(AnswerOutcome::Found)) => ExitCode::Success,
            (false, Some(AnswerOutcome::Infrastructure)) => ExitCode::Infrastructure,
            (false, Some(AnswerOutcome::WrongEnds) | None) => ExitCode::TestFailure,
        }
    }

    /// `repro`: 0 when the outcome matches, 1 when it differs.
    pub fn of_repro(outcome: ReproOutcome) -> ExitCode {
        match outcome {
            ReproOutcome::Same => ExitCode::Success,
            ReproOutcome::Differs => ExitCode::TestFailure,
            ReproOutcome::NotRun => ExitCode::Infrastructure,
            ReproOutcome::Interrupted => ExitCode::Interrupted,
        }
    }
}

/// A run's exit code and why, in words: both from the cells' judgements
/// (`crate::outcome::judge_cell`, the verdicts the live lines, the summary
/// table and the reports give), the run's own troubles and `--fail-on`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunExit {
    pub code: ExitCode,
    /// `1 failing cell: bookworm.gfx1100`, `interrupted` …
    pub reason: String,
}

impl RunExit {
    /// How `run` exits, with its reports' summary when they were written.
    pub fn of(run: &RunReport, report: Option<&ReportSummary>, fail_on: FailOn) -> RunExit {
        let failing: Vec<&str> = run
            .judged()
            .filter(|(_, j)| j.verdict == CellVerdict::Failing && !j.is_error())
            .map(|(r, _)| r.id.as_str())
            .collect();
        let unexpected = !failing.is_empty();
        let infrastructure = run.infrastructure_errors();
        let exit = |code, reason: String| RunExit { code, reason };
        if run.outcome.interrupted {
            return exit(ExitCode::Interrupted, "interrupted".into());
        }
        let failing_reason = || {
            let cells = crate::run::progress::count(failing.len(), "failing cell");
            match failing.len() {
                0 => cells,
                n if n <= 5 => format!("{cells}: {}", failing.join(", ")),
                _ => format!("{cells}: {}, …", failing[..5].join(", ")),
            }
        };
        let Some(report) = report else {
            return if unexpected {
                exit(ExitCode::TestFailure, failing_reason())
            } else if infrastructure {
                exit(ExitCode::Infrastructure, infrastructure_reason(run))
            } else {
                exit(ExitCode::Success, success_reason(run))
            };
        };
        let tests_failed = report.totals.failed + report.totals.error > 0 || unexpected;
        match ExitCode::of_report(report, fail_on) {
            ExitCode::TestFailure if infrastructure && !unexpected && !tests_failed => {
                exit(ExitCode::Infrastructure, infrastructure_reason(run))
            }
            ExitCode::TestFailure => exit(
                ExitCode::TestFailure,
                match (fail_on, report.regressions, report.history_regressions) {
                    (FailOn::Regression, Some(r), _) if r > 0 => {
                        format!(
                            "{} against the baseline",
                            crate::run::progress::count(r as usize, "regression")
                        )
                    }
                    (FailOn::Regression, None, Some(h)) if h > 0 => format!(
                        "{} in the history (new, or failing since an earlier run)",
                        crate::run::progress::count(h as usize, "regression")
                    ),
                    _ if unexpected => failing_reason(),
                    _ if report.failing_cells > 0 => format!(
                        "{} in the report",
                        crate::run::progress::count(report.failing_cells, "failing cell")
                    ),
                    _ => format!(
                        "{} lost",
                        crate::run::progress::count(
                            report.coverage_regressions as usize,
                            "gfx target"
                        )
                    ),
                },
            ),
            _ if infrastructure && !unexpected => {
                exit(ExitCode::Infrastructure, infrastructure_reason(run))
            }
            _ if fail_on == FailOn::Never => exit(ExitCode::Success, "--fail-on never".into()),
            _ if fail_on == FailOn::Regression && report.regressions.is_some() => exit(
                ExitCode::Success,
                "no regression against the baseline".into(),
            ),
            _ if fail_on == FailOn::Regression && report.history_regressions.is_some() => exit(
                ExitCode::Success,
                "no regression in the history (no failing test new or failing since an earlier run)"
                    .into(),
            ),
            _ => exit(ExitCode::Success, success_reason(run)),
        }
    }

    /// `exit 1: 1 failing cell: bookworm.gfx1100`: the line the run ends with.
    pub fn line(&self) -> String {
        format!("exit {}: {}", self.code.code(), self.reason)
    }
}

/// `1 error, 2 not run, 1 image error`: what the infrastructure broke.
fn infrastructure_reason(run: &RunReport) -> String {
    let count = crate::run::progress::count;
    let errors = run.judgements.iter().filter(|j| j.is_error()).count();
    let mut parts = Vec::new();
    if errors > 0 {
        parts.push(format!("{} (infrastructure)", count(errors, "cell error")));
    }
    if !run.outcome.not_run.is_empty() {
        parts.push(format!(
            "{} not run",
            count(run.outcome.not_run.len(), "cell")
        ));
    }
    if !run.outcome.image_errors.is_empty() {
        parts.push(count(run.outcome.image_errors.len(), "image error"));
    }
    parts.join(", ")
}

/// `no failing cell (1 expected failure)`.
fn success_reason(run: &RunReport) -> String {
    let t = crate::outcome::CellTally::of(run.judgements.iter().copied());
    let mut notes = Vec::new();
    if t.expected > 0 {
        notes.push(CellVerdict::ExpectedFailure.count(t.expected));
    }
    if t.classified > 0 {
        notes.push(CellVerdict::Classified.count(t.classified));
    }
    match notes.is_empty() {
        true => "no failing cell".into(),
        false => format!("no failing cell ({})", notes.join(", ")),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A matrix file is malformed or invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The command line asks for something impossible.
    #[error("{0}")]
    Usage(String),
    /// The container engine is unreachable or refused something.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A run could not be carried out.
    #[error(transparent)]
    Run(#[from] RunError),
    /// Reading the GPU topology or device nodes failed.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// A CDI spec is malformed, or a device name unknown or in conflict.
    #[error(transparent)]
    Cdi(#[from] crate::gpu::cdi::CdiError),
    /// A file's offload bundles are malformed or unreadable.
    #[error(transparent)]
    Bundle(BundleError),
    /// A run store's files are missing, unreadable or of another version.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading results or writing reports failed.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// A bisection could not be carried out.
    #[error(transparent)]
    Bisect(#[from] BisectError),
    /// A triage could not be carried out.
    #[error(transparent)]
    Triage(#[from] crate::triage::TriageError),
    /// The history database could not be opened, read or written.
    #[error(transparent)]
    History(#[from] crate::history::HistoryError),
    /// A cluster run (`run --executor slurm`) could not be carried out.
    #[error(transparent)]
    Cluster(crate::cluster::ClusterError),
    /// `expect` could not read its matrix file or history.
    #[error(transparent)]
    Expect(#[from] crate::expect::ExpectError),
    /// `--affected-by` names something nothing knows, or a lock that is
    /// not this matrix's.
    #[error(transparent)]
    Affected(#[from] crate::affected::AffectedError),
    /// `serve` could not start: no history, or its address cannot be had.
    #[error(transparent)]
    Serve(#[from] crate::serve::ServeError),
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Spec(_) | Error::Usage(_) | Error::Run(RunError::Usage(_)) => ExitCode::Usage,
            Error::Store(e) | Error::Run(RunError::Store(e)) => store_exit_code(e),
            Error::Engine(_) | Error::Run(_) => ExitCode::Infrastructure,
            Error::Io { .. } => ExitCode::Infrastructure,
            Error::Gpu(GpuError::Target(_)) => ExitCode::Usage,
            Error::Gpu(_) => ExitCode::Infrastructure,
            Error::Cdi(crate::gpu::cdi::CdiError::Io { .. }) => ExitCode::Infrastructure,
            Error::Cdi(_) => ExitCode::Usage,
            Error::Bundle(BundleError::Format { .. }) => ExitCode::Usage,
            Error::Bundle(BundleError::Io { .. }) => ExitCode::Infrastructure,
            Error::Report(ReportError::Results(e)) => results_exit_code(e),
            Error::Report(_) => ExitCode::Infrastructure,
            Error::Bisect(e) if e.is_usage() => ExitCode::Usage,
            Error::Bisect(_) => ExitCode::Infrastructure,
            Error::Triage(e) if e.is_usage() => ExitCode::Usage,
            Error::Triage(_) => ExitCode::Infrastructure,
            Error::History(_) => ExitCode::Infrastructure,
            Error::Expect(e) if e.is_usage() => ExitCode::Usage,
            Error::Expect(_) => ExitCode::Infrastructure,
            Error::Cluster(e) if e.is_usage() => ExitCode::Usage,
            Error::Cluster(_) => ExitCode::Infrastructure,
            Error::Affected(e) if e.is_usage() => ExitCode::Usage,
            Error::Affected(_) => ExitCode::Infrastructure,
            Error::Serve(e) if e.is_usage() => ExitCode::Usage,
            Error::Serve(_) => ExitCode::Infrastructure,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// A path that is not a run (or a lock of another version) is a usage error;
/// failing I/O and damaged files are infrastructure.
fn store_exit_code(e: &StoreError) -> ExitCode {
    match e {
        StoreError::NotARun(_) | StoreError::Version { .. } => ExitCode::Usage,
        StoreError::Io { .. } | StoreError::Corrupt { .. } => ExitCode::Infrastructure,
    }
}

/// Bad input named on the command line is a usage error; failing I/O is infrastructure.
fn results_exit_code(e: &ResultsError) -> ExitCode {
    match e {
        ResultsError::Io { .. } => ExitCode::Infrastructure,
        ResultsError::Json { .. }
        | ResultsError::NotARun { .. }
        | ResultsError::Store { .. }
        | ResultsError::Merge(_) => ExitCode::Usage,
    }
}

impl From<ResultsError> for Error {
    fn from(e: ResultsError) -> Self {
        Error::Report(ReportError::Results(e))
    }
}
