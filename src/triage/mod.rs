//! `rocmatrix triage RUN [--baseline OLD]` and `run … --baseline OLD
//! --triage`: for every failure signature that is new in a run, where it
//! started, and for every one that disappeared, where it was fixed —
//! without anyone naming good and bad ends. The baseline's lock names the
//! good inputs, the run's lock the bad ones, and the signature is the judge.
//!
//! * [`targets`]: what to triage — the new and gone signatures, one cell
//!   each, and the searches each gets (a source's commits, an ordered
//!   axis, the packages that moved);
//! * [`ranges`]: what moved between two locks (sources with their commit
//!   counts and first subjects, packages);
//! * [`history`]: the good end from the history when no baseline is given;
//! * [`drive`]: each search carried out as a bisection (`crate::bisect`):
//!   the same probes, judge, skips and validation of the ends; an earlier
//!   bisection of the same question is reused or resumed; the budget;
//! * [`store`]: `triage.json` in the run store; [`report`]: its lines.

pub mod drive;
pub mod history;
pub mod ranges;
pub mod report;
pub mod store;
pub mod targets;

use std::path::{Path, PathBuf};

pub use drive::{triage, Budget, Options};

/// Why a triage could not be carried out at all. A signature that cannot
/// be triaged is not an error: triage.json records why beside it.
#[derive(Debug, thiserror::Error)]
pub enum TriageError {
    /// The command line (or the runs it names) cannot be triaged.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Bisect(#[from] crate::bisect::BisectError),
    #[error(transparent)]
    Spec(#[from] crate::matrix_file::SpecError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Results(#[from] crate::results::ResultsError),
    #[error(transparent)]
    History(#[from] crate::history::HistoryError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: unreadable: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error("triage's background work failed: {0}")]
    Join(String),
}

impl TriageError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        TriageError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Whether the command line (or the runs it names) is at fault.
    pub fn is_usage(&self) -> bool {
        match self {
            TriageError::Usage(_) | TriageError::Spec(_) => true,
            TriageError::Bisect(e) => e.is_usage(),
            TriageError::Store(
                crate::store::StoreError::NotARun(_) | crate::store::StoreError::Version { .. },
            ) => true,
            _ => false,
        }
    }
}
