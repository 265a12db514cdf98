//! Results: reading JUnit files, the result model, collecting a run (or
//! merged shard runs, or plain JUnit directories) into it, and classifying
//! regressions against a baseline.
//!
//! Data flow: [`source::Source`] (what to read) → [`collect::collect`] (one
//! streaming pass over every JUnit file, with an optional [`collect::Sink`]
//! that sees every test) → [`model::Results`] → [`regress::compare`].

pub mod attribution;
pub mod classify;
pub mod collect;
pub mod coverage_changes;
pub mod env_changes;
pub mod facts;
pub mod junit;
pub mod model;
mod readers;
pub mod regress;
pub mod signature;
pub mod source;

use std::path::{Path, PathBuf};

pub use collect::{collect, NoSink, Sink};
pub use model::{CellResult, CellVerdict, Counts, Results, TestResult, TestStatus};
pub use regress::{compare, load_baseline, Class, Regressions};
pub use source::Source;

/// Errors reading results. Problems inside JUnit files are not errors: they
/// become messages on their cell (see [`junit::Problem`]).
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: invalid JSON: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: not a run directory (no plan.json)", path.display())]
    NotARun { path: PathBuf },
    #[error("{}: {message}", path.display())]
    Store { path: PathBuf, message: String },
    #[error("cannot merge: {0}")]
    Merge(String),
}

impl ResultsError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        ResultsError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
