//! Running a plan on a cluster: `run --executor slurm`. The controller
//! writes the plan's Slurm job array (`src/plan/slurm.rs`) into a shared
//! directory, prepares the plan's environments in its own engine when it
//! has one (`src/cluster/prepare.rs`), submits the array
//! (`src/cluster/commands.rs`), follows its tasks
//! until none is pending or running (`src/cluster/array.rs`), gives the
//! cells a task did not finish an `error` record, and merges the shards'
//! run stores into one report as `report merge` does
//! (`src/cluster/shards.rs`). `--resume` submits again only the tasks
//! whose shards are not complete; `src/cluster/state.rs` is what the
//! directory remembers between the two. docs/cluster.md is the user's side.

pub mod array;
pub mod commands;
pub mod controller;
pub mod gpus;
pub mod prepare;
pub mod shards;
pub mod state;

use std::path::PathBuf;

/// Why a cluster run could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("`{program}` cannot be run ({source}): run --executor slurm needs Slurm's client commands (sbatch, squeue, scontrol, scancel) on this machine's PATH{}", cells_note(cells))]
    Missing {
        program: String,
        cells: String,
        #[source]
        source: std::io::Error,
    },
    #[error("sbatch refused the array{}: {message}", cells_note(cells))]
    Refused {
        cells: String,
        message: String,
        /// The request was wrong (exit 2), not the cluster (exit 3).
        usage: bool,
    },
    #[error("{program}: {message}")]
    Command { program: String, message: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
}

fn cells_note(cells: &str) -> String {
    if cells.is_empty() {
        String::new()
    } else {
        format!(" (cells {cells} not run)")
    }
}

impl ClusterError {
    /// Exit 2: the command line, the matrix file or what was asked of
    /// Slurm is wrong; else 3.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ClusterError::Usage(_) | ClusterError::Refused { usage: true, .. }
        )
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ClusterError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Cell ids for a message: the first few, then how many more.
pub fn name_cells<'a>(ids: impl IntoIterator<Item = &'a String>) -> String {
    let ids: Vec<&String> = ids.into_iter().collect();
    const SHOWN: usize = 8;
    let mut s = ids
        .iter()
        .take(SHOWN)
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > SHOWN {
        s.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    s
}
