//! One step's primitives, shared by the cell lifecycle (`src/run/cell.rs`,
//! `src/run/steps.rs`), the runner that runs a cell's leading steps as its
//! main process (`src/run/main_process.rs`), build stages and reruns: what a
//! step runs in ([`CellEnv`]) and how it fails ([`CellError`]), its log
//! ([`log`]), how its end is judged ([`judge`]), its JUnit files copied out
//! ([`junit`]) and the commands and marker lines of the runner's bash
//! protocol, built and parsed in one place ([`protocol`]). Nothing here
//! imports the cell lifecycle or the scheduler: they stand on it.

pub mod judge;
pub mod junit;
pub mod log;
pub mod protocol;
pub mod setup;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::events::Events;
use super::gpu_gate::GpuGate;
use crate::engine::{Engine, EngineError};
use crate::plan::Step;
use crate::store::RunStore;
use crate::suite::SuiteError;

/// What a cell needs from the run around it.
pub struct CellEnv<'a> {
    pub engine: &'a Engine,
    pub store: &'a RunStore,
    pub run_id: &'a str,
    pub events: &'a Events,
    pub gpus: &'a Arc<dyn GpuGate>,
    pub sources: &'a Arc<crate::source::Sources>,
    /// Removals of finished cells' containers, awaited by the scheduler
    /// before the run ends (removing is off the cells' critical path).
    pub cleanups: &'a std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Why a cell could not be judged.
#[derive(Debug, thiserror::Error)]
pub enum CellError {
    #[error(transparent)]
    Source(#[from] crate::source::SourceError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: cancelled (rocmatrix is shutting down)")]
    Cancelled(&'static str),
}

impl From<SuiteError> for CellError {
    fn from(e: SuiteError) -> Self {
        match e {
            SuiteError::Engine(e) => CellError::Engine(e),
            SuiteError::Io { path, source } => CellError::Io { path, source },
        }
    }
}

/// `run::blocking` for a step's (or a cell's) own work.
pub(crate) async fn blocking<T, F>(what: &'static str, work: F) -> Result<T, CellError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    super::blocking(what, work)
        .await
        .map_err(|_| CellError::Cancelled(what))
}

impl CellError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        CellError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn is_transient(&self) -> bool {
        match self {
            CellError::Engine(e) => e.is_transient(),
            CellError::Io { .. } | CellError::Source(_) | CellError::Cancelled(_) => false,
        }
    }
}

/// Where a step runs: its container, its place in the cell, the cell's
/// directory in the run store.
pub(crate) struct StepAt<'a> {
    pub(crate) container: &'a str,
    pub(crate) index: usize,
    pub(crate) step: &'a Step,
    pub(crate) cell_dir: &'a Path,
    pub(crate) per_gpu: &'a [Vec<String>],
}
