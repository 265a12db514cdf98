//! One submission of the array, followed to its end: `sbatch --array` per
//! kind of GPU request, then the tasks watched through `squeue` once a
//! second (one RPC to the controller for all of them, where `sbatch
//! --wait` polls per job) until none is pending or running; the tasks that
//! left the queue are asked once, through `scontrol`, how they ended.
//! SIGINT or SIGTERM cancels the arrays (`scancel`) and says so.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::commands::{self, Queue};
use super::state::{ArrayState, TaskState};
use super::{name_cells, ClusterError};

/// How often the queue is read.
pub const POLL: Duration = Duration::from_secs(1);
/// How long a controller may not answer before the run gives up on it.
pub const GIVE_UP: Duration = Duration::from_secs(120);
/// How long cancelled tasks are waited for to leave the queue.
pub const CANCEL_WAIT: Duration = Duration::from_secs(45);

/// The tasks to submit, grouped by their GPU request: `(gres, indices)`.
pub fn groups(tasks: &[&TaskState]) -> Vec<(Option<String>, Vec<usize>)> {
    let mut out: Vec<(Option<String>, Vec<usize>)> = Vec::new();
    for t in tasks {
        match out.iter_mut().find(|(g, _)| *g == t.gres) {
            Some((_, v)) => v.push(t.index),
            None => out.push((t.gres.clone(), vec![t.index])),
        }
    }
    out
}

/// Submits `tasks` of the array in `dir` (one `sbatch` per kind of GPU
/// request); records each job id in the state as soon as it is known.
/// Returns (job, tasks) per submission.
pub async fn submit(
    dir: &Path,
    state: &mut ArrayState,
    tasks: &[&TaskState],
    rerun_failed: bool,
) -> Result<Vec<(String, Vec<usize>)>, ClusterError> {
    let script = dir.join(super::state::SCRIPT);
    let mut out = Vec::new();
    for (gres, indices) in groups(tasks) {
        let mut options = state.options.clone();
        if rerun_failed {
            // The script resumes a shard with `--rerun-failed` when told so.
            options.push(format!(
                "--export=ALL,{}=1",
                crate::plan::slurm::RERUN_FAILED_VAR
            ));
        }
        options.push(format!(
            "--array={}",
            crate::plan::slurm::index_ranges(&indices)
        ));
        if let Some(g) = &gres {
            options.push(format!("--gres={g}"));
        }
        let cells = name_cells(
            tasks
                .iter()
                .filter(|t| indices.contains(&t.index))
                .flat_map(|t| &t.cell_ids),
        );
        let submitted = commands::sbatch(&options, &script, &cells).await;
        let job = match submitted {
            Ok(job) => job,
            Err(e) => {
                // What was submitted before this one runs on: cancel it.
                let earlier: Vec<String> =
                    out.iter().map(|(j, _): &(String, _)| j.clone()).collect();
                let _ = commands::scancel(&earlier).await;
                return Err(e);
            }
        };
        state.jobs.push(job.clone());
        state.save(dir)?;
        out.push((job, indices));
    }
    Ok(out)
}

/// The tasks of `jobs` (earlier submissions) still pending or running:
/// (job, tasks) for each job that has any. A controller lost while its
/// array ran, resumed, follows these instead of submitting them again.
pub async fn still_queued(jobs: &[String]) -> Result<Vec<(String, Vec<usize>)>, ClusterError> {
    let q = commands::squeue(jobs).await?;
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    for (job, task) in q.keys() {
        match out.iter_mut().find(|(j, _)| j == job) {
            Some((_, ts)) => ts.push(*task),
            None => out.push((job.clone(), vec![*task])),
        }
    }
    Ok(out)
}

/// How the array went.
#[derive(Debug, Default)]
pub struct Followed {
    /// A signal stopped it; the arrays were cancelled.
    pub interrupted: bool,
    /// Per task: how it ended (`JobState`, and Slurm's reason), as far as
    /// Slurm still knows.
    pub ended: BTreeMap<usize, (String, String)>,
}

/// Counts of the tasks: pending, running, done.
fn counts(q: &Queue, total: usize) -> (usize, usize, usize) {
    let pending = q.values().filter(|s| s.as_str() == "PENDING").count();
    let running = q.len() - pending;
    (pending, running, total.saturating_sub(q.len()))
}

/// Follows `jobs` until no task of them is queued; `say` gets a progress
/// line whenever the counts change.
pub async fn follow(
    jobs: &[(String, Vec<usize>)],
    say: &mut (dyn FnMut(String) + Send),
) -> Result<Followed, ClusterError> {
    use tokio::signal::unix::{signal, SignalKind};
    let ids: Vec<String> = jobs.iter().map(|(j, _)| j.clone()).collect();
    let total: usize = jobs.iter().map(|(_, t)| t.len()).sum();
    let (mut int, mut term) = (
        signal(SignalKind::interrupt()).map_err(|e| ClusterError::io("SIGINT handler", e))?,
        signal(SignalKind::terminate()).map_err(|e| ClusterError::io("SIGTERM handler", e))?,
    );
    let mut last = None;
    let mut followed = Followed::default();
    let mut failing_since: Option<std::time::Instant> = None;
    loop {
        // A controller that does not answer for a while (a restart) is
        // waited for, up to GIVE_UP; then the run stops with an error and
        // the array is left to the cluster (resume reads its shards).
        let q = match commands::squeue(&ids).await {
            Ok(q) => {
                failing_since = None;
                q
            }
            Err(e) => {
                let since = *failing_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() > GIVE_UP {
                    return Err(ClusterError::Command {
                        program: "squeue".into(),
                        message: format!(
                            "the Slurm controller has not answered for {} s ({e}); array job {} \
                             may still run: `rocmatrix run --resume DIR --executor slurm` \
                             follows what is left of it",
                            GIVE_UP.as_secs(),
                            ids.join(", ")
                        ),
                    });
                }
                say(format!("slurm: squeue failed, trying again: {e}"));
                tokio::time::sleep(POLL).await;
                continue;
            }
        };
        let now = counts(&q, total);
        if last != Some(now) {
            say(format!(
                "slurm: array job {}: {} pending, {} running, {} done of {total} tasks",
                ids.join(", "),
                now.0,
                now.1,
                now.2
            ));
            last = Some(now);
        }
        if q.is_empty() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = int.recv() => { followed.interrupted = true; }
            _ = term.recv() => { followed.interrupted = true; }
        }
        if followed.interrupted {
            if let Err(e) = commands::scancel(&ids).await {
                say(format!(
                    "interrupted: scancel {} failed: {e}",
                    ids.join(" ")
                ));
            }
            say(format!(
                "interrupted: cancelled Slurm array job {} (scancel); its unfinished cells are \
                 recorded `error`",
                ids.join(", ")
            ));
            wait_gone(&ids).await;
            break;
        }
    }
    // How each task ended; a controller that stops answering is not asked
    // about the rest.
    'ask: for (job, tasks) in jobs {
        for &t in tasks {
            match tokio::time::timeout(commands::DEADLINE, commands::task_end(job, t)).await {
                Ok(Some(end)) => {
                    followed.ended.insert(t, end);
                }
                Ok(None) => {}
                Err(_) => break 'ask,
            }
        }
    }
    Ok(followed)
}

/// After `scancel`: until the tasks have left the queue, for at most
/// [`CANCEL_WAIT`] (Slurm's own KillWait is 30 s by default).
async fn wait_gone(ids: &[String]) {
    let deadline = std::time::Instant::now() + CANCEL_WAIT;
    while std::time::Instant::now() < deadline {
        match tokio::time::timeout(CANCEL_WAIT, commands::squeue(ids)).await {
            Ok(Ok(q)) if !q.is_empty() => tokio::time::sleep(Duration::from_millis(500)).await,
            _ => return,
        }
    }
}
