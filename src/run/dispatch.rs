//! The dispatcher: cells handed over in plan order, each given a job slot
//! before the next asks, run (with retries after infrastructure errors) or
//! recorded as failed by their build; every cell's result collected.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::task::JoinSet;

use super::cell::{container_name, run_cell};
use super::events::Event;
use super::services::{NotRun, Shared};
use crate::build_stage::{self, Built};
use crate::plan::Cell;
use crate::store::now_rfc3339;
use crate::store::record::{CellRecord, RunStatus};

/// The dispatcher task; it yields every cell task's result once its sender drops.
pub(super) type Dispatcher =
    tokio::task::JoinHandle<Vec<Result<CellResult, tokio::task::JoinError>>>;

/// What the dispatcher is handed, in plan order.
pub(super) enum Job {
    /// A cell to run from `image`: its environment image, or its build's
    /// snapshot.
    Run {
        cell: Cell,
        image: String,
        built: Option<Arc<Built>>,
    },
    /// A cell whose build failed: its record says so; nothing runs.
    BuildFailed { cell: Cell, built: Arc<Built> },
}

pub(super) enum CellResult {
    Done(Box<CellRecord>),
    NotRun(String, NotRun),
}

/// Starts the task that hands out job slots. Cells arrive on the returned
/// sender in plan order and each one gets its slot before the next asks, so
/// cells start in plan order; spawned tasks would race for the semaphore in
/// whatever order the runtime polls them.
pub(super) fn start_dispatcher(shared: Arc<Shared>) -> (mpsc::UnboundedSender<Job>, Dispatcher) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
    let handle = tokio::spawn(async move {
        let mut tasks: JoinSet<CellResult> = JoinSet::new();
        while let Some(job) = rx.recv().await {
            let (cell, image, built) = match job {
                Job::Run { cell, image, built } => (cell, image, built),
                Job::BuildFailed { cell, built } => {
                    tasks.spawn(build_failed(shared.clone(), cell, built));
                    continue;
                }
            };
            let slot = shared.admission.slot().await;
            tasks.spawn(run_one(shared.clone(), cell, image, built, slot));
        }
        let mut results = Vec::new();
        while let Some(r) = tasks.join_next().await {
            results.push(r);
        }
        results
    });
    (tx, handle)
}

async fn run_one(
    s: Arc<Shared>,
    cell: Cell,
    image: String,
    built: Option<Arc<Built>>,
    slot: Result<OwnedSemaphorePermit, NotRun>,
) -> CellResult {
    let not_run = |reason: NotRun| {
        s.crew.events.emit(Event::CellNotRun {
            cell: cell.id.clone(),
            reason: reason.to_string(),
        });
        CellResult::NotRun(cell.id.clone(), reason)
    };
    let _permit = match slot {
        Ok(p) => p,
        Err(reason) => return not_run(reason),
    };
    if let Err(reason) = s.admission.may_start() {
        return not_run(reason);
    }
    let cx = s.crew.cell_env();
    let t0 = Instant::now();
    let started = now_rfc3339();
    let mut attempt = 1;
    let record = loop {
        let r = tokio::select! {
            r = run_cell(&cx, &cell, &image, built.as_deref(), attempt) => r,
            _ = s.admission.interrupt.fired() => {
                // Cut short by a signal: not run; by a lost engine: an
                // infrastructure error, which resume runs again (its
                // container is left to the next run's sweep: removing it
                // would only wait out the deadline once more).
                let Some(why) = s.admission.interrupt.engine_lost() else {
                    let _ = s.crew.engine.remove_container(&container_name(&s.crew.run_id, &cell.id, attempt)).await;
                    return not_run(NotRun::Interrupted);
                };
                let rec = errored(&cell, &image, why, &started, t0, attempt);
                s.crew.write_record(rec.clone()).await;
                break rec;
            }
        };
        let lost = match &r {
            Err(_) => crate::stop::watchdog::lost(&s.crew.engine, &s.admission.interrupt).await,
            Ok(_) => None,
        };
        match r {
            Ok(rec) => break rec,
            Err(e) if lost.is_none() && e.is_transient() && s.admission.may_retry(attempt) => {
                s.crew.events.emit(Event::CellRetry {
                    cell: cell.id.clone(),
                    attempt,
                    error: e.to_string(),
                });
                let _ = s
                    .crew
                    .engine
                    .remove_container(&container_name(&s.crew.run_id, &cell.id, attempt))
                    .await;
                attempt += 1;
            }
            Err(e) => {
                if lost.is_none() {
                    let _ = s
                        .crew
                        .engine
                        .remove_container(&container_name(&s.crew.run_id, &cell.id, attempt))
                        .await;
                }
                let why = lost.unwrap_or_else(|| e.to_string());
                let rec = errored(&cell, &image, why, &started, t0, attempt);
                s.crew.write_record(rec.clone()).await;
                break rec;
            }
        }
    };
    let judged = s.crew.events.finish_cell(&record, &s.crew.store.dir).await;
    if judged.status.is_failure() {
        s.admission.failed();
    }
    CellResult::Done(Box::new(record))
}

/// The record of a cell whose build failed, written; the cell is not run.
async fn build_failed(s: Arc<Shared>, cell: Cell, built: Arc<Built>) -> CellResult {
    let dir = s.crew.store.dir.clone();
    let (c, b) = (cell.clone(), built.clone());
    let written = super::blocking("recording a failed build's cell", move || {
        build_stage::failed_cell_record(&dir, &c, &b).map_err(|e| e.to_string())
    })
    .await
    .unwrap_or_else(|e| Err(e.to_string()));
    let record = written.unwrap_or_else(|e| {
        errored(
            &cell,
            &built.record.environment_image,
            e,
            &now_rfc3339(),
            Instant::now(),
            1,
        )
    });
    s.crew.write_record(record.clone()).await;
    s.crew.events.finish_cell(&record, &s.crew.store.dir).await;
    CellResult::Done(Box::new(record))
}

/// Waits for every cell task and files its result.
pub(super) async fn collect_cells(dispatcher: Dispatcher) -> Collected {
    let mut out = Collected::default();
    let results = match dispatcher.await {
        Ok(results) => results,
        Err(e) => {
            out.errors.push(format!("the cell dispatcher failed: {e}"));
            Vec::new()
        }
    };
    for r in results {
        match r {
            Ok(CellResult::Done(rec)) => out.records.push(*rec),
            Ok(CellResult::NotRun(id, reason)) => out.not_run.push((id, reason.to_string())),
            Err(e) => out.errors.push(format!("a cell task failed: {e}")),
        }
    }
    out
}

/// Every cell's result, as the dispatcher's tasks left them.
#[derive(Default)]
pub(super) struct Collected {
    pub(super) records: Vec<CellRecord>,
    /// Cells that did not run, with the reason.
    pub(super) not_run: Vec<(String, String)>,
    /// Tasks that failed, one line each.
    pub(super) errors: Vec<String>,
}

/// The record of a cell that could not be judged: an infrastructure error
/// after its retries.
pub(super) fn errored(
    cell: &Cell,
    image: &str,
    reason: String,
    started: &str,
    t0: Instant,
    attempts: u32,
) -> CellRecord {
    CellRecord {
        id: cell.id.clone(),
        values: cell.values.iter().cloned().collect(),
        hash: cell.hash.clone(),
        environment_hash: cell.environment_hash.clone(),
        image: Some(image.to_string()),
        status: RunStatus::Error,
        reason: Some(reason),
        started: started.to_string(),
        finished: now_rfc3339(),
        duration_secs: t0.elapsed().as_secs_f64(),
        attempts,
        steps: Vec::new(),
        junit: Vec::new(),
        messages: Vec::new(),
        sources: Vec::new(),
        devices: Vec::new(),
        build: cell.build.clone(),
        host: Default::default(),
    }
}
