//! `journal.jsonl`: the line format. Every event of a run is one JSON object
//! per line (an [`Event`] plus its `time`), appended and flushed as it
//! happens by `run::journal`, so a killed run still tells what it did.

use serde::{Deserialize, Serialize};

use super::record::RunStatus;

/// Everything that happens in a run; one line of `journal.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        run_id: String,
        name: String,
        cells: usize,
        to_run: usize,
        environments: usize,
        jobs: usize,
    },
    /// How a base image was obtained (once per base per run).
    BaseImage {
        reference: String,
        outcome: String,
        message: String,
    },
    ImageStarted {
        environment: String,
        cells: usize,
    },
    ImageFinished {
        environment: String,
        tag: String,
        reused: bool,
        /// Pulled from the registry: nothing was built.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pulled: bool,
        secs: f64,
    },
    /// The registry could not be used (one per registry per run); images
    /// are built locally instead.
    RegistryUnavailable {
        registry: String,
        reason: String,
    },
    /// A build snapshot was pushed to the registry.
    BuildPushed {
        build: String,
        reference: String,
    },
    /// An environment image was pushed to the registry.
    ImagePushed {
        environment: String,
        reference: String,
    },
    ImageFailed {
        environment: String,
        error: String,
    },
    /// A build stage starts (or finds its snapshot).
    BuildStarted {
        build: String,
        cells: usize,
    },
    BuildStepFinished {
        build: String,
        step: String,
        status: RunStatus,
        exit_code: Option<i64>,
        secs: f64,
    },
    BuildFinished {
        build: String,
        snapshot: String,
        status: RunStatus,
        reused: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pulled: bool,
        reason: Option<String>,
        secs: f64,
    },
    CellStarted {
        cell: String,
        attempt: u32,
    },
    StepStarted {
        cell: String,
        step: String,
        index: usize,
        total: usize,
    },
    StepFinished {
        cell: String,
        step: String,
        status: RunStatus,
        exit_code: Option<i64>,
        secs: f64,
    },
    /// An infrastructure error; the cell starts again.
    CellRetry {
        cell: String,
        attempt: u32,
        error: String,
    },
    /// `status` is the cell's all things considered (its steps', made worse
    /// by its tests) and `verdict` what `crate::outcome::judge_cell` made
    /// of it (absent in journals of earlier versions).
    CellFinished {
        cell: String,
        status: RunStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verdict: Option<crate::outcome::CellVerdict>,
        reason: Option<String>,
        secs: f64,
    },
    /// An environment image's gfx coverage was written (`run --coverage`).
    CoverageScanned {
        environment: String,
        libraries: usize,
        secs: f64,
    },
    /// A cell that will not run in this invocation (fail-fast, interrupt,
    /// or its image failed).
    CellNotRun {
        cell: String,
        reason: String,
    },
    Warning {
        message: String,
    },
    /// The counts are those of the run's summary table, cells counted by
    /// their verdicts (`crate::outcome::CellTally`): `failed` the failing
    /// cells, `expected` the failures an `expect:` foretold, `classified`
    /// those that failed only in classified tests, `errors` the cells the
    /// infrastructure broke.
    RunFinished {
        passed: usize,
        failed: usize,
        #[serde(default)]
        expected: usize,
        #[serde(default)]
        classified: usize,
        #[serde(default)]
        errors: usize,
        skipped: usize,
        not_run: usize,
        interrupted: bool,
        secs: f64,
    },
}
