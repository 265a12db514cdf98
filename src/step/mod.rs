//! One step's primitives, shared by the cell lifecycle (`src/run/cell.rs`,
//! `src/run/steps.rs`), build stages (`src/build_stage.rs`) and reruns: what
//! a step runs in ([`CellEnv`]) and how it fails ([`CellError`]), its log
//! ([`log`]), how its end is judged ([`judge`]) and an exec'd step's own clock
//! ([`clock`]), its JUnit files copied out
//! ([`junit`]), the commands and marker lines of the runner's bash protocol,
//! built and parsed in one place ([`protocol`]), the runner that runs a
//! cell's leading steps as its main process ([`main_process`]) and a step's
//! backtraces under gdb ([`backtrace`]) and a hung step's, taken before
//! its kill ([`hang`]). A room of its own: nothing here
//! imports `run` or the build stages; they stand on it (the architecture
//! test checks it). Events go to whatever [`EventSink`] the run gives.

pub mod backtrace;
pub mod clock;
pub mod hang;
pub mod judge;
pub mod junit;
pub mod log;
pub mod main_process;
pub mod protocol;
pub mod setup;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::{Engine, EngineError};
use crate::gpu::gate::GpuGate;
use crate::image::registry::Fetched;
use crate::plan::Step;
use crate::store::journal::Event;
use crate::store::RunStore;
use crate::test_suite::TestSuiteError;

/// What a cell needs from the run around it.
pub struct CellEnv<'a> {
    pub engine: &'a Engine,
    pub store: &'a RunStore,
    pub run_id: &'a str,
    pub events: &'a dyn EventSink,
    pub gpus: &'a Arc<dyn GpuGate>,
    pub sources: &'a Arc<crate::source::Sources>,
    /// Removals of finished cells' containers, awaited by the scheduler
    /// before the run ends (removing is off the cells' critical path).
    pub cleanups: &'a std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Where a step's (and a cell's, and a build's) events go: the run's
/// event fan-out (`run::events::Events`).
pub trait EventSink: Send + Sync {
    fn emit(&self, event: Event);
}

impl dyn EventSink + '_ {
    /// What a registry gave, if anything; a registry that just failed is
    /// reported (as `run::events::Events::fetched` reports it).
    pub fn fetched<T>(&self, f: Fetched<T>) -> Option<T> {
        match f {
            Fetched::Done(t) => Some(t),
            Fetched::Unavailable { registry, reason } => {
                self.emit(Event::RegistryUnavailable { registry, reason });
                None
            }
            Fetched::Missing | Fetched::Skipped => None,
        }
    }
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

impl From<TestSuiteError> for CellError {
    fn from(e: TestSuiteError) -> Self {
        match e {
            TestSuiteError::Engine(e) => CellError::Engine(e),
            TestSuiteError::Io { path, source } => CellError::Io { path, source },
        }
    }
}

/// Blocking work of a step (or a cell) on tokio's blocking pool, as
/// `run::blocking` runs it: a panic is passed on, a runtime shutting down
/// under it is [`CellError::Cancelled`].
pub(crate) async fn blocking<T, F>(what: &'static str, work: F) -> Result<T, CellError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(v) => Ok(v),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(CellError::Cancelled(what)),
    }
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
