//! `rocmatrix bisect`: the first point of an ordered space — an axis's
//! values, or a git source's commits — where a failure's signature appears
//! (or, with `--regress success`, is gone), each point probed as one cell
//! through the ordinary runner, and judged by its signature, not its exit
//! code.
//!
//! * [`space`]: the ordered points, from an axis or a git range, or
//!   [`packages`]: groups of the packages that moved between two locks;
//! * [`search`]: the bisection itself, pure: skips, k-ary probes;
//! * [`judge`]: a probe's verdict (good, bad, skip) from its cell and its
//!   signatures;
//! * [`probe`]: one point run as a one-cell run store;
//! * [`outcomes`]: probe outcomes kept by content, reused by later
//!   bisections and triages;
//! * [`drive`]: the ends, then the search, retries, resume;
//! * [`store`]: `bisect.json`; [`report`]: the Markdown, HTML and terminal
//!   views of it.

pub mod drive;
pub mod judge;
pub mod outcomes;
pub mod packages;
pub mod probe;
pub mod report;
pub mod search;
pub mod space;
pub mod store;

use std::path::{Path, PathBuf};

pub use drive::{bisect, Begin, Finished, Options, Target as What};

/// Why a bisection could not be carried out (its verdicts are not errors).
#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    /// The command line asks for something the matrix or the history
    /// cannot give.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Spec(#[from] crate::matrix_file::SpecError),
    #[error(transparent)]
    Run(#[from] crate::run::RunError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: unreadable: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error("a probe's background work failed: {0}")]
    Join(String),
}

impl BisectError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        BisectError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Whether the command line (or the matrix file) is at fault.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            BisectError::Usage(_)
                | BisectError::Spec(_)
                | BisectError::Run(crate::run::RunError::Usage(_))
        )
    }
}
