//! What a run writes about each cell: the on-disk contract between the
//! runner (which writes `cells/<cell-id>/cell.json`) and everything that reads
//! a run store (reports, resume, repro).
//!
//! Layout of a run store (`.rocmatrix/runs/<run-id>/`):
//!
//! ```text
//! plan.json                 RunManifest: the plan plus the matrix file's expect/report
//! journal.jsonl             one Event per line, appended and flushed per event
//! cells/<cell-id>/cell.json CellRecord, written when the cell finishes
//! cells/<cell-id>/logs/<NN>-<step>.log   one log per step
//! cells/<cell-id>/junit/…   JUnit files copied out of the container
//! builds/<key>/build.json   BuildRecord, written when a build stage ends
//! builds/<key>/logs/<NN>-<step>.log      one log per build step
//! report/                   written by the report writers
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{read, StoreError};
use crate::matrix_file::{Expectation, ReportLayout, Spec};
use crate::plan::{Cell, Plan};

/// Version of the run-store layout; bumped on incompatible changes.
pub const STORE_VERSION: u32 = 1;

/// `plan.json`: what was planned, and how to judge and show it. On disk it
/// is a [`super::schema::PlanFile`]: this is what the program works with.
#[derive(Debug, Clone)]
pub struct RunManifest {
    pub store_version: u32,
    pub run_id: String,
    pub rocmatrix_version: String,
    pub name: String,
    pub matrix_file: String,
    pub matrix_hash: String,
    /// Axes in order, then include-added keys.
    pub keys: Vec<String>,
    pub expect: Vec<Expectation>,
    /// `classify:` rules, applied when results are collected.
    pub classify: Vec<crate::matrix_file::ClassifyRule>,
    pub report: ReportLayout,
    pub shard: Option<String>,
    /// What chose the cells (`--affected-by`), when something did.
    pub selected_by: Option<SelectedBy>,
    pub cells: Vec<Cell>,
    /// The build stages the cells start from (`build:`).
    pub builds: Vec<crate::plan::Build>,
}

impl RunManifest {
    /// The manifest a run of `plan` (of `spec`) writes, without its run id
    /// and selection (the runner and `--affected-by` set those).
    pub fn planned(spec: &Spec, plan: &Plan) -> RunManifest {
        RunManifest {
            store_version: STORE_VERSION,
            run_id: String::new(),
            rocmatrix_version: env!("CARGO_PKG_VERSION").to_string(),
            name: plan.name.clone(),
            matrix_file: spec.file.display().to_string(),
            matrix_hash: spec.source_hash.clone(),
            keys: plan.keys.clone(),
            expect: spec.expect.clone(),
            classify: spec.classify.clone(),
            report: spec.report.clone(),
            shard: plan.shard.map(|s| s.to_string()),
            selected_by: None,
            cells: plan.cells.clone(),
            builds: plan.builds.clone(),
        }
    }

    /// Reads `plan.json` at `path` ([`super::read::MAX_PLAN`] at most),
    /// once its `store_version` is [`STORE_VERSION`].
    pub fn load(path: &Path) -> Result<RunManifest, StoreError> {
        read::versioned::<super::schema::PlanFile>(
            path,
            read::MAX_PLAN,
            "plan.json",
            "store_version",
            STORE_VERSION,
        )
        .map(Into::into)
    }
}

pub use super::schema::{locks_note, SelectedBy, SelectedCell};
pub use crate::outcome::RunStatus;

/// `cells/<cell-id>/cell.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellRecord {
    pub id: String,
    pub values: BTreeMap<String, String>,
    /// The cell's content hash from the plan.
    pub hash: String,
    pub environment_hash: String,
    /// The image the cell ran in (`rocmatrix/env:<hash>`), if it got that far.
    #[serde(default)]
    pub image: Option<String>,
    pub status: RunStatus,
    /// Why the cell was skipped or errored, in words.
    #[serde(default)]
    pub reason: Option<String>,
    /// RFC 3339 times.
    pub started: String,
    pub finished: String,
    pub duration_secs: f64,
    /// How many times infrastructure errors made the cell start again.
    #[serde(default)]
    pub attempts: u32,
    pub steps: Vec<StepRecord>,
    /// JUnit files copied out of the container, relative to the cell directory.
    #[serde(default)]
    pub junit: Vec<String>,
    /// Problems found while collecting results (refused archive entries …).
    #[serde(default)]
    pub messages: Vec<String>,
    /// Source checkouts streamed into the container.
    #[serde(default)]
    pub sources: Vec<super::lock::LockedSource>,
    /// Device nodes the cell's container was given for its GPUs (container
    /// paths); empty when the cell had no GPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// The key of the build stage the cell started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Where the cell ran: host, kernel, GPU driver, leased GPUs.
    #[serde(default, skip_serializing_if = "super::host::HostFacts::is_empty")]
    pub host: super::host::HostFacts,
}

impl CellRecord {
    /// Reads a `cell.json` ([`super::read::MAX_RECORD`] at most); its
    /// version is the run store's, which `plan.json` carries.
    pub fn load(path: &Path) -> Result<CellRecord, StoreError> {
        read::json(path, read::MAX_RECORD, "cell.json files")
    }
}

/// `builds/<key>/build.json`: how a build stage went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildRecord {
    pub key: String,
    /// A matrix build, or a toolchain (`llvm-debug`) build.
    #[serde(
        default,
        skip_serializing_if = "crate::plan::build::BuildKind::is_matrix",
        with = "super::schema::build_kind"
    )]
    pub kind: crate::plan::build::BuildKind,
    /// The build's hash from the plan.
    pub hash: String,
    pub environment_hash: String,
    /// The environment image it ran in.
    pub environment_image: String,
    /// The snapshot the cells start from: `rocmatrix/build:<hash>`, a hash
    /// of the build's hash, the environment image and the sources' commits.
    pub snapshot: String,
    /// The snapshot's image id, once it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    /// The snapshot existed: nothing ran.
    pub reused: bool,
    /// The snapshot came from the registry: nothing ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pulled: bool,
    /// `<registry>/build@sha256:…` when it was pulled from or pushed to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub started: String,
    pub finished: String,
    pub duration_secs: f64,
    /// The cells of this run that start from it.
    pub cells: Vec<String>,
    /// Its steps; their logs are relative to the build's directory.
    pub steps: Vec<StepRecord>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<super::lock::LockedSource>,
}

impl BuildRecord {
    /// Reads a `build.json` ([`super::read::MAX_RECORD`] at most); its
    /// version is the run store's.
    pub fn load(path: &Path) -> Result<BuildRecord, StoreError> {
        read::json(path, read::MAX_RECORD, "build.json files")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    pub name: String,
    pub status: RunStatus,
    #[serde(default)]
    pub exit_code: Option<i64>,
    pub duration_secs: f64,
    /// The step's log, relative to the cell directory.
    pub log: String,
    #[serde(default)]
    pub reason: Option<String>,
    /// The last lines of the log, kept for reports.
    #[serde(default)]
    pub log_tail: String,
    /// The debugger's view of the failing command (`backtrace:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<Backtrace>,
    /// The verdict on the package as a whole, for a step whose tool gives
    /// one beside its tests' (autopkgtest's exit status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<PackageOutcome>,
}

/// A package's verdict from the tool that ran its tests, in debci's words:
/// autopkgtest's exit status 0 and 2 are `pass`, 8 `neutral` (no tests, or
/// only superficial ones passed: britney does not count it as a pass), 4
/// and 6 `fail`, 12 and 14 `badpkg`, 16 and anything unexpected `tmpfail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PackageVerdict {
    Pass,
    Neutral,
    Tmpfail,
    Fail,
    Badpkg,
}

impl PackageVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            PackageVerdict::Pass => "pass",
            PackageVerdict::Neutral => "neutral",
            PackageVerdict::Tmpfail => "tmpfail",
            PackageVerdict::Fail => "fail",
            PackageVerdict::Badpkg => "badpkg",
        }
    }
}

/// A [`PackageVerdict`] with the exit status it came from and what that
/// status means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageOutcome {
    pub verdict: PackageVerdict,
    /// The tool's exit status; `None` when it did not run.
    pub exit: Option<i64>,
    /// What the status means, in the tool's words (`no tests in this
    /// package or all non-superficial tests were skipped`), and what
    /// rocmatrix adds (`5 of 5 tests superficial`).
    pub meaning: String,
}

impl PackageOutcome {
    /// `neutral (exit 8: no tests in this package …)`.
    pub fn line(&self) -> String {
        match self.exit {
            Some(code) => format!("{} (exit {code}: {})", self.verdict.as_str(), self.meaning),
            None => format!("{} ({})", self.verdict.as_str(), self.meaning),
        }
    }
}

/// Backtraces taken by gdb of a step's failing command, or of a test that
/// died of a signal: one per stop (each breakpoint's first hit, a signal,
/// the exit), innermost frame first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backtrace {
    /// What was run again under gdb, as the step wrote it (or the test).
    pub command: String,
    /// Where the program stopped, in order.
    pub stops: Vec<Stop>,
    /// Whether any frame has a source file and line.
    pub debug_info: bool,
    /// What a reader needs to know: "no debug info: 12 frames of ??", a
    /// command that could not be run again, gdb timing out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// gdb's whole output, relative to the cell directory.
    pub artifact: String,
}

/// Frames of each stop shown in reports, signatures and test output.
pub const TOP_FRAMES: usize = 12;

/// One stop of a [`Backtrace`] and the frames there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    /// `breakpoint llvm::MCAsmParser::Error`, `signal SIGSEGV
    /// (Segmentation fault)`, `exit`.
    pub at: String,
    /// The frames kept (the step's `frames`).
    pub frames: Vec<Frame>,
    /// Whether gdb had more frames than were kept.
    #[serde(default)]
    pub truncated: bool,
}

/// One frame of a [`Backtrace`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    pub index: u32,
    /// `??` where gdb knows no name.
    pub function: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The shared library, for a frame without source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
}

impl Frame {
    /// `#1 Parser::parse at lib/Parser.cpp:120` (the file's last three
    /// components), or `#3 ?? from libLLVM.so.21.1`.
    pub fn line_text(&self) -> String {
        let mut s = format!("#{} {}", self.index, self.function);
        match (&self.file, self.line, &self.library) {
            (Some(f), Some(l), _) => {
                s.push_str(&format!(" at {}:{l}", short_path(f)));
            }
            (Some(f), None, _) => s.push_str(&format!(" at {}", short_path(f))),
            (None, _, Some(lib)) => {
                s.push_str(&format!(" from {}", lib.rsplit('/').next().unwrap_or(lib)))
            }
            _ => {}
        }
        s
    }
}

/// The last three components of a source path: enough to find the file in
/// a tree, short enough for a report.
fn short_path(p: &str) -> String {
    let parts: Vec<&str> = p.split('/').filter(|x| !x.is_empty()).collect();
    parts[parts.len().saturating_sub(3)..].join("/")
}

impl Backtrace {
    /// Each stop as a header line and its top `n` frames, then the note.
    pub fn top(&self, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.stops {
            out.push(format!("stopped at {}:", s.at));
            out.extend(
                s.frames
                    .iter()
                    .take(n)
                    .map(|f| format!("  {}", f.line_text())),
            );
            if s.truncated || s.frames.len() > n {
                out.push("  …".to_string());
            }
        }
        if let Some(note) = &self.note {
            out.push(note.clone());
        }
        out
    }
}
