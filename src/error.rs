//! The top-level error type and the documented exit codes.
//!
//! Every module has its own typed error; they all convert into [`Error`],
//! which knows which exit code (see DESIGN.md) it maps to.

use std::path::PathBuf;

use crate::bundle::BundleError;
use crate::engine::EngineError;
use crate::gpu::GpuError;
use crate::report::ReportError;
use crate::results::ResultsError;
use crate::run::RunError;
use crate::spec::SpecError;

/// Exit codes documented in the README and DESIGN.md.
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

impl ExitCode {
    pub fn code(self) -> i32 {
        self as i32
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
    /// A file's offload bundles are malformed or unreadable.
    #[error(transparent)]
    Bundle(BundleError),
    /// Reading results or writing reports failed.
    #[error(transparent)]
    Report(#[from] ReportError),
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
            Error::Engine(_) | Error::Run(_) => ExitCode::Infrastructure,
            Error::Io { .. } => ExitCode::Infrastructure,
            Error::Gpu(GpuError::Target(_)) => ExitCode::Usage,
            Error::Gpu(_) => ExitCode::Infrastructure,
            Error::Bundle(BundleError::Format { .. }) => ExitCode::Usage,
            Error::Bundle(BundleError::Io { .. }) => ExitCode::Infrastructure,
            Error::Report(ReportError::Results(e)) => results_exit_code(e),
            Error::Report(_) => ExitCode::Infrastructure,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
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
