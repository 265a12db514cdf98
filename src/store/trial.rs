//! `try.json` in a try's run directory (`rocmatrix try`): the run it tried
//! a patch against, the patches by content, and per cell tried how it went
//! before and after and what changed. The schema types are this file's
//! own; `crate::trial` maps its comparison onto them.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{layout, read, StoreError};

/// The version of `try.json` this rocmatrix writes and reads.
pub const TRIAL_VERSION: u32 = 1;

/// `try.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialFile {
    pub try_version: u32,
    /// The run the patches were tried against: its id and directory.
    pub against_run: String,
    pub against_dir: String,
    pub patches: Vec<TrialPatch>,
    pub cells: Vec<TrialCell>,
}

/// One `--patch NAME=FILE`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialPatch {
    /// The `sources:` entry it applies to.
    pub source: String,
    /// The file as given on the command line.
    pub file: String,
    pub sha256: String,
}

/// One cell tried: its outcome in the run tried against and in the try.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialCell {
    pub cell: String,
    pub before: String,
    pub after: String,
    pub change: TrialChange,
    /// The ids of the failure signatures the cell has after the patch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<String>,
    /// Why the cell has no outcome after the patch (not run, error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What the patch did to one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrialChange {
    Fixed,
    /// Failing before and after, with the same signatures.
    StillFailing,
    /// Failing before and after, with other signatures.
    FailingDifferently,
    NewlyFailing,
    Unchanged,
    /// The infrastructure broke the cell, or it did not run.
    Error,
}

impl TrialFile {
    /// Writes `try.json` into `run_dir`, atomically.
    pub fn write(&self, run_dir: &Path) -> Result<(), StoreError> {
        let store = super::RunStore {
            dir: run_dir.to_path_buf(),
        };
        store.write_json(layout::TRIAL, self)
    }

    /// Reads `try.json` of `run_dir` ([`read::MAX_RECORD`] at most), once
    /// its `try_version` is [`TRIAL_VERSION`].
    pub fn load(run_dir: &Path) -> Result<TrialFile, StoreError> {
        read::versioned(
            &run_dir.join(layout::TRIAL),
            read::MAX_RECORD,
            "try.json",
            "try_version",
            TRIAL_VERSION,
        )
    }
}
