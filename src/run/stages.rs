//! The build stages of one environment: each build run once in a job slot
//! of its own (a toolchain build before the builds that start from it),
//! then its cells handed to the dispatcher, from its snapshot or as failed
//! by it.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use super::dispatch::Job;
use super::events::Event;
use super::services::{NotRun, Shared};
use crate::build_stage::{self, Built};
use crate::plan::{Build, Cell};
use crate::store::now_rfc3339;
use crate::store::record::{BuildRecord, RunStatus};

/// A build and the cells that start from it.
pub(super) type Staged = (Build, Vec<Cell>);

/// What a build stage's task leaves for the run's outcome.
pub(super) struct BuildTaskOut {
    pub(super) records: Vec<BuildRecord>,
    pub(super) not_run: Vec<(String, String)>,
}

/// Runs one build stage (holding a job slot) and then hands its cells to
/// the dispatcher: to run from the snapshot, or to be recorded as failed
/// by the build. Infrastructure errors are retried like a cell's.
pub(super) async fn build_then_cells(
    s: Arc<Shared>,
    build: Build,
    env_image: (String, String),
    cells: Vec<Cell>,
    ready: mpsc::UnboundedSender<Job>,
) -> BuildTaskOut {
    let ids: Vec<String> = cells.iter().map(|c| c.id.clone()).collect();
    match run_build_in_slot(&s, &build, &env_image, ids).await {
        Err(reason) => BuildTaskOut {
            records: Vec::new(),
            not_run: s.crew.not_run(&cells, reason),
        },
        Ok(built) => {
            dispatch_built(&built, cells, &ready);
            BuildTaskOut {
                records: vec![built.record.clone()],
                not_run: Vec::new(),
            }
        }
    }
}

/// Runs a toolchain build (`environment.llvm: {debug: source}`), then
/// hands its own cells to the dispatcher and runs the matrix builds that
/// start from its snapshot. When it fails, every cell depending on it is
/// recorded as failed by it.
pub(super) async fn toolchain_then_builds(
    s: Arc<Shared>,
    toolchain: Build,
    env_image: (String, String),
    cells: Vec<Cell>,
    dependents: Vec<Staged>,
    ready: mpsc::UnboundedSender<Job>,
) -> BuildTaskOut {
    let ids: Vec<String> = cells
        .iter()
        .chain(dependents.iter().flat_map(|(_, c)| c))
        .map(|c| c.id.clone())
        .collect();
    let built = match run_build_in_slot(&s, &toolchain, &env_image, ids).await {
        Ok(b) => b,
        Err(reason) => {
            let all: Vec<Cell> = cells
                .into_iter()
                .chain(dependents.into_iter().flat_map(|(_, c)| c))
                .collect();
            return BuildTaskOut {
                records: Vec::new(),
                not_run: s.crew.not_run(&all, reason),
            };
        }
    };
    let mut out = BuildTaskOut {
        records: vec![built.record.clone()],
        not_run: Vec::new(),
    };
    dispatch_built(&built, cells, &ready);
    let snapshot = match (built.snapshot(), &built.record.snapshot_id) {
        (Some(tag), Some(id)) => {
            crate::store::roots::hold(&s.crew.store.root(), [tag.to_string()]);
            (tag.to_string(), id.clone())
        }
        _ => {
            for (_, cells) in dependents {
                dispatch_built(&built, cells, &ready);
            }
            return out;
        }
    };
    for (build, cells) in dependents {
        let b = build_then_cells(s.clone(), build, snapshot.clone(), cells, ready.clone()).await;
        out.records.extend(b.records);
        out.not_run.extend(b.not_run);
    }
    out
}

/// Hands `cells` to the dispatcher: to run from the build's snapshot, or
/// to be recorded as failed by it.
fn dispatch_built(built: &Arc<Built>, cells: Vec<Cell>, ready: &mpsc::UnboundedSender<Job>) {
    for cell in cells {
        let job = match built.snapshot() {
            Some(snapshot) => Job::Run {
                cell,
                image: snapshot.to_string(),
                built: Some(built.clone()),
            },
            None => Job::BuildFailed {
                cell,
                built: built.clone(),
            },
        };
        let _ = ready.send(job);
    }
}

/// Runs `build` from `env_image` (tag, id) holding a job slot, retrying
/// infrastructure errors; `Err` when it never started (interrupted, or
/// stopped by fail-fast).
async fn run_build_in_slot(
    s: &Arc<Shared>,
    build: &Build,
    env_image: &(String, String),
    ids: Vec<String>,
) -> Result<Arc<Built>, NotRun> {
    let slot = s
        .admission
        .slot()
        .await
        .map_err(|_| NotRun::stopped(&s.admission.interrupt))?;
    s.admission.may_go_on()?;
    let cx = s.crew.cell_env();
    let binds: Vec<String> = build.caches.iter().map(|c| c.bind()).collect();
    let name = build_stage::container_name(&s.crew.run_id, &build.key);
    let share = s.prepare.registry().map(|registry| build_stage::Share {
        registries: s.prepare.registries(),
        registry,
    });
    let (started, t0) = (now_rfc3339(), Instant::now());
    let mut attempt = 1;
    let built = loop {
        let r = tokio::select! {
            r = build_stage::run_build(&cx, build, (&env_image.0, &env_image.1), ids.clone(), binds.clone(), share) => r,
            _ = s.admission.interrupt.fired() => {
                let _ = s.crew.engine.remove_container(&name).await;
                return Err(NotRun::stopped(&s.admission.interrupt));
            }
        };
        match r {
            Ok(b) => break b,
            Err(e) if e.is_transient() && s.admission.may_retry(attempt) => {
                s.crew.events.emit(Event::Warning {
                    message: format!(
                        "build {}: infrastructure error on attempt {attempt}, retrying: {e}",
                        build.key
                    ),
                });
                let _ = s.crew.engine.remove_container(&name).await;
                attempt += 1;
            }
            Err(e) => {
                let _ = s.crew.engine.remove_container(&name).await;
                let secs = t0.elapsed().as_secs_f64();
                let b = Built::errored(
                    build,
                    &env_image.0,
                    ids.clone(),
                    started,
                    secs,
                    e.to_string(),
                );
                s.crew.events.emit(Event::BuildFinished {
                    build: build.key.clone(),
                    snapshot: String::new(),
                    status: RunStatus::Error,
                    reused: false,
                    pulled: false,
                    reason: b.record.reason.clone(),
                    secs,
                });
                break b;
            }
        }
    };
    drop(slot);
    let built = Arc::new(built);
    if built.snapshot().is_none() {
        s.admission.failed();
    }
    Ok(built)
}
