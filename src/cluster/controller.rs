//! The controller's side of an array run: what an earlier controller
//! submitted and still runs followed, the incomplete rest submitted and
//! followed, and `error` recorded for every cell a task did not finish.
//! `src/cli/slurm_run.rs` turns the command line into these calls.

use std::path::Path;

use super::state::{self, ArrayState, TaskState};
use super::{array, shards, ClusterError};
use crate::matrix_file::Spec;
use crate::plan::jobs::Job;
use crate::plan::slurm::{self, ScriptPaths, SlurmSettings};
use crate::plan::Plan;
use crate::store::record::RunManifest;

/// Submitted arrays: (job, task indices) each.
pub type Jobs = Vec<(String, Vec<usize>)>;

/// Follows what an earlier controller submitted that still runs, then
/// submits the incomplete rest of `todo` (with `rerun_failed`, also the
/// tasks whose cells failed, their tasks told to run those again) and
/// follows it. Progress lines go to stderr unless `quiet` (the
/// interruption's line is said anyway).
pub async fn execute(
    dir: &Path,
    state: &mut ArrayState,
    todo: &[TaskState],
    quiet: bool,
    rerun_failed: bool,
) -> Result<(Jobs, array::Followed), ClusterError> {
    let mut say = |line: String| {
        if !quiet || line.starts_with("interrupted") {
            eprintln!("{line}")
        }
    };
    let mut jobs = array::still_queued(&state.jobs).await?;
    let mut followed = array::Followed::default();
    if !jobs.is_empty() {
        let ids: Vec<&str> = jobs.iter().map(|(j, _)| j.as_str()).collect();
        say(format!(
            "slurm: following array job {} of the earlier submission",
            ids.join(", ")
        ));
        followed = array::follow(&jobs, &mut say).await?;
    }
    let rest: Vec<&TaskState> = todo
        .iter()
        .filter(|t| shards::needs_run(dir, t, rerun_failed))
        .filter(|t| !jobs.iter().any(|(_, ts)| ts.contains(&t.index)))
        .collect();
    if !followed.interrupted && !rest.is_empty() {
        let submitted = array::submit(dir, state, &rest, rerun_failed).await?;
        let more = array::follow(&submitted, &mut say).await?;
        followed.interrupted = more.interrupted;
        followed.ended.extend(more.ended);
        jobs.extend(submitted);
    }
    Ok((jobs, followed))
}

/// Records `error` for every cell of `todo` that its task did not finish,
/// saying how the task ended; a line per task that left any.
pub fn mark(
    dir: &Path,
    state: &ArrayState,
    todo: &[TaskState],
    jobs: &Jobs,
    followed: &array::Followed,
) -> Result<String, ClusterError> {
    let mut text = String::new();
    for t in todo {
        let job = jobs
            .iter()
            .find(|(_, ts)| ts.contains(&t.index))
            .map(|(j, _)| j.as_str())
            .unwrap_or("?");
        let how = match followed.ended.get(&t.index) {
            Some((st, why)) if why.is_empty() || why == "None" => st.clone(),
            Some((st, why)) => format!("{st} ({why})"),
            None => "without Slurm knowing how".into(),
        };
        let why = format!(
            "Slurm array task {} (job {job}_{}) ended {how} before this cell finished; \
             `rocmatrix run --resume {} --executor slurm` runs it again",
            t.index,
            t.index,
            dir.display()
        );
        let marked = shards::mark_unfinished(dir, state, t, &why)?;
        if marked > 0 {
            text.push_str(&format!(
                "slurm: task {} (job {job}_{}) ended {how}: {} recorded `error`\n",
                t.index,
                t.index,
                crate::run::progress::count(marked, "cell")
            ));
        }
    }
    Ok(text)
}

/// A new array in `dir`: the plan's tasks, the script every task runs
/// (`rocmatrix` with `run_args`) and the state the controller keeps.
pub fn create(
    dir: &Path,
    spec: &Spec,
    plan: &Plan,
    jobs: &[Job],
    settings: &SlurmSettings,
    run_args: Vec<String>,
) -> Result<ArrayState, ClusterError> {
    let tasks =
        slurm::tasks(plan, jobs, settings).map_err(|e| ClusterError::Usage(e.to_string()))?;
    let exe = std::env::current_exe().map_err(|source| ClusterError::Io {
        path: "the rocmatrix binary".into(),
        source,
    })?;
    let paths = ScriptPaths {
        rocmatrix: exe.display().to_string(),
        dir: dir.display().to_string(),
        run_args,
    };
    for sub in ["logs", "shards"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|source| ClusterError::Io {
            path: dir.join(sub),
            source,
        })?;
    }
    let script = slurm::script(plan, &tasks, settings, &paths);
    let script_path = dir.join(state::SCRIPT);
    crate::store::write_atomic(&script_path, script.as_bytes())?;
    let state = ArrayState {
        version: state::VERSION,
        manifest: RunManifest::planned(spec, plan),
        tasks: tasks
            .iter()
            .map(|t| TaskState {
                index: t.index,
                shard: t.job.shard.to_string(),
                cell_ids: t.job.cell_ids.clone(),
                gres: t.gres.as_ref().map(|g| g.to_string()),
                command: t.job.command.clone(),
            })
            .collect(),
        options: slurm::common_options(&plan.name, settings, &paths),
        jobs: Vec::new(),
    };
    state.save(dir)?;
    Ok(state)
}
