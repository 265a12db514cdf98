//! Running a plan: images first, then cells in parallel containers, with
//! events, a journal, a run store that survives interruption, and resume.

pub mod cell;
pub mod coverage;
mod dispatch;
pub mod events;
pub mod journal;
pub mod progress;
pub mod runner;
pub mod scheduler;
mod services;
mod stages;
mod step_reruns;
mod steps;

use std::path::{Path, PathBuf};

use crate::engine::EngineError;
use crate::image::ImageError;

pub use crate::prepare::default_build_jobs;
pub use crate::store::RunStore;
pub use scheduler::{execute, RunOptions, RunOutcome, RunScope};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Usage(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Blocking work was cut short because the runtime is shutting down.
    #[error("{0}: cancelled (rocmatrix is shutting down)")]
    Cancelled(&'static str),
    #[error("template {name}: {source}")]
    Template {
        name: &'static str,
        #[source]
        source: minijinja::Error,
    },
}

impl RunError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        RunError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Runs blocking work — the file system, git2, sysfs, child processes,
/// waiting for a GPU lease — on tokio's blocking pool, so the async workers
/// that drive containers never wait on it. This is the one way async code
/// in rocmatrix blocks (docs/architecture.md). `what` names the work if the
/// runtime shuts down under it; a panic in `work` is passed on as a panic.
pub async fn blocking<T, F>(what: &'static str, work: F) -> Result<T, RunError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(v) => Ok(v),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(RunError::Cancelled(what)),
    }
}
