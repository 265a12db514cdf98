//! What the shared directory remembers of a cluster run (`array.json`
//! beside the array's script): the plan as every shard's plan
//! would hold it, the array's tasks (their cells, command and GPUs), the
//! `sbatch` options, and every array job submitted for it. `--resume`
//! reads it back; nothing in it is needed by the tasks themselves.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ClusterError;
use crate::store::record::RunManifest;

/// The state file in the shared directory.
pub const STATE: &str = "array.json";
/// The array's script in the shared directory.
pub const SCRIPT: &str = "array.sh";
/// This file's version.
pub const VERSION: u32 = 1;

/// One array task.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TaskState {
    /// 1-based, `SLURM_ARRAY_TASK_ID`.
    pub index: usize,
    /// `K/N`: the shard of the plan (or of its `--group-by` group) the
    /// task runs.
    pub shard: String,
    pub cell_ids: Vec<String>,
    /// `gpu[:TYPE]:N`, if the task's cells lease GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gres: Option<String>,
    /// The `rocmatrix run …` the task runs first (a later attempt resumes
    /// the run store it left).
    pub command: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArrayState {
    pub version: u32,
    /// The whole plan, as each shard's run store holds its part of it
    /// (and written as its `plan.json` is).
    #[serde(with = "crate::store::schema::plan_json")]
    pub manifest: RunManifest,
    pub tasks: Vec<TaskState>,
    /// The `sbatch` options every submission of the array gets.
    pub options: Vec<String>,
    /// Every array job submitted, oldest first.
    pub jobs: Vec<String>,
}

impl ArrayState {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(STATE)
    }

    pub fn load(dir: &Path) -> Result<ArrayState, ClusterError> {
        let path = Self::path(dir);
        let text = crate::safe_read::read_bounded_string(&path, 256 << 20, "array state files", "")
            .map_err(|e| {
                ClusterError::Usage(format!(
                    "{}: not a directory of `run --executor slurm` ({e}); --resume with \
                     --executor slurm takes the --slurm-dir of the run to resume",
                    dir.display()
                ))
            })?;
        let state: ArrayState = serde_json::from_str(&text).map_err(|e| {
            ClusterError::Usage(format!("{}: not an array state: {e}", path.display()))
        })?;
        if state.version != VERSION {
            return Err(ClusterError::Usage(format!(
                "{}: version {} of the array state; this rocmatrix reads version {VERSION}",
                path.display(),
                state.version
            )));
        }
        Ok(state)
    }

    pub fn save(&self, dir: &Path) -> Result<(), ClusterError> {
        let text = serde_json::to_vec_pretty(self).unwrap_or_default();
        crate::store::write_atomic(&Self::path(dir), &text)?;
        Ok(())
    }

    /// The cells of task `index`'s shard, as a manifest of their own.
    pub fn shard_manifest(&self, task: &TaskState, run_id: &str) -> RunManifest {
        let mut m = self.manifest.clone();
        m.run_id = run_id.to_string();
        m.cells.retain(|c| task.cell_ids.contains(&c.id));
        // As the task's own run would record it: a shard only where its
        // command has `--shard`.
        m.shard = task
            .command
            .contains(" --shard ")
            .then(|| task.shard.clone());
        m
    }
}
