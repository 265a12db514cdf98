//! Results: reading JUnit files, the result model, and collecting a run (or
//! merged shard runs, or plain JUnit directories) into it, each test judged
//! by the matrix's `expect:` and `classify:` rules as it is read. What the
//! results mean (signatures, regressions, changes) is `crate::analysis`,
//! which stands above this room: nothing here uses it.
//!
//! Data flow: [`source::Source`] (what to read) → [`collect::collect`] (one
//! streaming pass over every JUnit file, with an optional [`collect::Sink`]
//! that sees every test) → [`model::Results`] → `crate::analysis`.

pub mod classify;
pub mod collect;
pub mod facts;
pub mod findings;
pub mod judge;
pub mod model;
mod readers;
pub mod source;

use std::path::{Path, PathBuf};

/// The JUnit reader, a room of its own on the lowest floor (`crate::junit`).
pub use crate::junit;
pub use collect::{collect, NoSink, Sink};
pub use model::{CellResult, CellVerdict, Counts, Results, TestResult, TestStatus};
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
