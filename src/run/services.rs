//! What the scheduler's tasks share, as a few services: the [`Crew`] that
//! runs cells and builds (engine, run store, events, GPUs, sources) and the
//! [`Admission`] that decides whether a job may start (job slots, a signal
//! or a lost engine, fail-fast, retries).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::events::{Event, Events};
use crate::engine::Engine;
use crate::gpu::gate::GpuGate;
use crate::plan::Cell;
use crate::prepare::Preparer;
use crate::step::CellEnv;
use crate::stop::signals::Interrupt;
use crate::store::record::CellRecord;
use crate::store::RunStore;

/// Why a cell did not run in this invocation (said in `run.json` and the summary).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotRun {
    #[error("interrupted")]
    Interrupted,
    #[error("fail_fast: an earlier cell failed")]
    FailFast,
    #[error("the scheduler stopped")]
    SchedulerStopped,
    #[error("environment {0} could not be made (see the image error)")]
    ImageFailed(String),
    /// The engine went away or stopped answering before the cell started.
    #[error("{0}")]
    EngineLost(String),
}

impl NotRun {
    /// Why a cell that `interrupt` kept from starting did not run.
    pub(super) fn stopped(interrupt: &Interrupt) -> NotRun {
        interrupt
            .engine_lost()
            .map_or(NotRun::Interrupted, NotRun::EngineLost)
    }
}

/// What running a cell or a build needs of the run, and what it leaves
/// behind: the container removals still under way.
pub(super) struct Crew {
    pub(super) engine: Engine,
    pub(super) store: RunStore,
    pub(super) run_id: String,
    pub(super) events: Events,
    pub(super) gpus: Arc<dyn GpuGate>,
    pub(super) sources: Arc<crate::source::Sources>,
    pub(super) cleanups: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Crew {
    /// What cells and builds need of the run.
    pub(super) fn cell_env(&self) -> CellEnv<'_> {
        CellEnv {
            engine: &self.engine,
            store: &self.store,
            run_id: &self.run_id,
            events: &self.events,
            gpus: &self.gpus,
            sources: &self.sources,
            cleanups: &self.cleanups,
        }
    }

    /// Writes `cells/<id>/cell.json`; a failure is a warning (the cell's
    /// outcome is still in the journal and the summary).
    pub(super) async fn write_record(&self, rec: CellRecord) {
        let store = self.store.clone();
        let id = rec.id.clone();
        let written = super::blocking("writing cell.json", move || store.write_cell(&rec)).await;
        let error = match written {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        self.events.emit(Event::Warning {
            message: format!("cell {id}: cannot write its record: {error}"),
        });
    }

    /// Records `cells` as not run, each with an event.
    pub(super) fn not_run(&self, cells: &[Cell], reason: NotRun) -> Vec<(String, String)> {
        cells
            .iter()
            .map(|c| {
                self.events.emit(Event::CellNotRun {
                    cell: c.id.clone(),
                    reason: reason.to_string(),
                });
                (c.id.clone(), reason.to_string())
            })
            .collect()
    }

    /// Waits for the container removals under way; a lost engine removes
    /// nothing (the next run's sweep does).
    pub(super) async fn finish_cleanups(&self, engine_lost: bool) {
        let pending: Vec<_> =
            std::mem::take(&mut *self.cleanups.lock().unwrap_or_else(|p| p.into_inner()));
        for removal in pending {
            if engine_lost {
                removal.abort();
            }
            let _ = removal.await;
        }
    }
}

/// Whether a job (a cell or a build) may start: `jobs` slots, the run's
/// interrupt, fail-fast and the retries an infrastructure error gets.
pub(super) struct Admission {
    slots: Arc<Semaphore>,
    pub(super) interrupt: Interrupt,
    /// Set once a job failed under fail-fast.
    stop: AtomicBool,
    fail_fast: bool,
    retries: u32,
}

impl Admission {
    pub(super) fn new(jobs: usize, fail_fast: bool, retries: u32, interrupt: Interrupt) -> Self {
        Admission {
            slots: Arc::new(Semaphore::new(jobs.max(1))),
            interrupt,
            stop: AtomicBool::new(false),
            fail_fast,
            retries,
        }
    }

    /// A job slot, or why none comes (the run is stopping).
    pub(super) async fn slot(&self) -> Result<OwnedSemaphorePermit, NotRun> {
        tokio::select! {
            p = self.slots.clone().acquire_owned() => p.map_err(|_| NotRun::SchedulerStopped),
            _ = self.interrupt.fired() => Err(NotRun::stopped(&self.interrupt)),
        }
    }

    /// Why a job that holds its slot may not start now, if it may not.
    pub(super) fn may_start(&self) -> Result<(), NotRun> {
        if self.interrupt.is_set() {
            return Err(NotRun::stopped(&self.interrupt));
        }
        self.may_go_on()
    }

    /// `Err(FailFast)` once a job failed under fail-fast.
    pub(super) fn may_go_on(&self) -> Result<(), NotRun> {
        match self.stop.load(Ordering::SeqCst) {
            true => Err(NotRun::FailFast),
            false => Ok(()),
        }
    }

    /// A job failed: under fail-fast, no other starts.
    pub(super) fn failed(&self) {
        if self.fail_fast {
            self.stop.store(true, Ordering::SeqCst);
        }
    }

    /// Whether attempt `attempt` may be followed by another.
    pub(super) fn may_retry(&self, attempt: u32) -> bool {
        attempt <= self.retries
    }
}

/// What every task of one run shares: the crew that runs cells and builds,
/// the admission of jobs, and the preparation of environments.
pub(super) struct Shared {
    pub(super) crew: Crew,
    pub(super) admission: Admission,
    /// Bases, environment images, registries, the package cache.
    pub(super) prepare: Arc<Preparer>,
}

/// A step's events go to the run's fan-out.
impl crate::step::EventSink for Events {
    fn emit(&self, event: Event) {
        Events::emit(self, event);
    }
}
