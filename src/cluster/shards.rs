//! The shards' run stores after the array: each task's run store under
//! `DIR/shards/<task>/runs/`, made for a task that never started one; an
//! `error` record (infrastructure: `--resume` runs it again) for every
//! cell a task did not finish, saying how the task ended; and the one
//! report over all of them, as `report merge` writes it.

use std::path::{Path, PathBuf};

use super::state::{ArrayState, TaskState};
use super::ClusterError;
use crate::store::record::{CellRecord, RunStatus};
use crate::store::{new_run_id, now_rfc3339, RunStore};

/// Where task `index` writes its run stores (`--out` of its run).
pub fn shard_dir(dir: &Path, index: usize) -> PathBuf {
    dir.join("shards").join(index.to_string())
}

/// The run store task `index` left, if any: the newest under its `runs/`.
pub fn store_of(dir: &Path, index: usize) -> Option<RunStore> {
    let runs = shard_dir(dir, index).join("runs");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&runs)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| crate::store::layout::is_run(p))
        .collect();
    found.sort();
    found.pop().map(|dir| RunStore { dir })
}

/// Whether task `t`'s shard is complete: every cell has a record and none
/// of them is an infrastructure error.
pub fn complete(dir: &Path, t: &TaskState) -> bool {
    let Some(store) = store_of(dir, t.index) else {
        return t.cell_ids.is_empty();
    };
    t.cell_ids.iter().all(|id| {
        store
            .cell_record(id)
            .is_ok_and(|r| r.status != RunStatus::Error)
    })
}

/// Whether task `t` runs again: its shard is not [`complete`], or, with
/// `rerun_failed`, a cell of it failed, timed out or ran out of memory.
pub fn needs_run(dir: &Path, t: &TaskState, rerun_failed: bool) -> bool {
    if !complete(dir, t) {
        return true;
    }
    rerun_failed
        && store_of(dir, t.index).is_some_and(|store| {
            t.cell_ids.iter().any(|id| {
                store.cell_record(id).is_ok_and(|r| {
                    matches!(
                        r.status,
                        RunStatus::Failed | RunStatus::Timeout | RunStatus::Oom
                    )
                })
            })
        })
}

/// Gives every cell of task `t` that has no record an `error` record
/// saying `why` (how the task ended), making the task's run store first
/// if it never made one. Returns how many cells it marked.
pub fn mark_unfinished(
    dir: &Path,
    state: &ArrayState,
    t: &TaskState,
    why: &str,
) -> Result<usize, ClusterError> {
    let store = match store_of(dir, t.index) {
        Some(s) => s,
        None => {
            let run_id = new_run_id();
            let store = RunStore::create(&shard_dir(dir, t.index), &run_id)?;
            store.write_manifest(&state.shard_manifest(t, &run_id))?;
            store
        }
    };
    let manifest = store.manifest()?;
    let done = store.finished_cells();
    let now = now_rfc3339();
    let mut marked = 0;
    for cell in manifest.cells.iter().filter(|c| !done.contains(&c.id)) {
        let record = CellRecord {
            id: cell.id.clone(),
            values: cell.values.iter().cloned().collect(),
            hash: cell.hash.clone(),
            environment_hash: cell.environment_hash.clone(),
            image: None,
            status: RunStatus::Error,
            reason: Some(why.to_string()),
            started: now.clone(),
            finished: now.clone(),
            duration_secs: 0.0,
            attempts: 0,
            steps: Vec::new(),
            junit: Vec::new(),
            messages: Vec::new(),
            sources: Vec::new(),
            devices: Vec::new(),
            build: cell.build.clone(),
            host: Default::default(),
        };
        store.write_cell(&record)?;
        marked += 1;
    }
    // A task that never started, or was killed, wrote no run.json: without
    // one the merged run could not be recorded into the history.
    store.close_unfinished(&manifest.run_id)?;
    Ok(marked)
}

/// The run stores of all tasks, in task order (tasks of no cells have none).
pub fn stores(dir: &Path, state: &ArrayState) -> Vec<PathBuf> {
    state
        .tasks
        .iter()
        .filter_map(|t| store_of(dir, t.index))
        .map(|s| s.dir)
        .collect()
}

/// The merged report of all shards in `DIR/report`, as `report merge`:
/// the array is one run, recorded into `history` (the tasks record
/// nothing of their own).
pub fn merge(
    dir: &Path,
    state: &ArrayState,
    baseline: Option<&Path>,
    junit: Option<crate::matrix_file::JunitFiles>,
    history: &crate::history::Location,
) -> Result<crate::report::ReportSummary, ClusterError> {
    let runs = stores(dir, state);
    let src = crate::results::source::Source::runs(&runs)
        .map_err(|e| ClusterError::Report(crate::report::ReportError::Results(e)))?;
    let finish = crate::finish::Finish {
        baseline,
        junit,
        history: Some(crate::history::past::Recorder {
            location: history.clone(),
            runs,
        }),
    };
    Ok(crate::finish::source_into(
        src,
        &crate::store::layout::report_of(dir),
        &finish,
    )?)
}
