//! One invocation of `rocmatrix run`: sweep what killed runs left, create or
//! reopen the run store, run the cells that are not finished, and write the
//! run's summary. The CLI only turns arguments into a [`RunRequest`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::events::{Event, Events, Listener};
use super::journal::Journal;
use super::scheduler::{execute, RunOptions, RunOutcome, RunScope};
use super::RunError;
use crate::engine::Engine;
use crate::gpu::gate::GpuGate;
use crate::image::{BaseImage, EnvImage};
use crate::stop::signals::Interrupt;
use crate::store::lock::{Lock, LockedBuild, LockedCell, LOCK_VERSION};
use crate::store::record::{CellRecord, RunManifest, RunStatus};
use crate::store::{layout, new_run_id, now_rfc3339, RunStore};

/// Where the cells come from.
pub enum RunSource {
    /// A new run of planned cells: the manifest (a plan's,
    /// [`RunManifest::planned`], or an earlier run's cells copied for
    /// `repro` and `try`) is written under a new run id.
    New(Box<RunManifest>),
    /// The unfinished cells of an earlier run: those without a record and
    /// those the infrastructure broke (`error`); with `rerun_failed`, also
    /// those that failed, timed out or ran out of memory.
    Resume { store: RunStore, rerun_failed: bool },
}

pub struct RunRequest {
    pub source: RunSource,
    /// Parent of `runs/`.
    pub out: PathBuf,
    pub options: RunOptions,
    pub listeners: Vec<Arc<dyn Listener>>,
    pub gpus: Arc<dyn GpuGate>,
    /// Judges each finished cell by its JUnit files too (the results
    /// room's); without one, by its steps and whole-cell expectation.
    pub judge: Option<Arc<dyn super::events::CellJudge>>,
}

/// What the run did, for the CLI's summary.
pub struct RunReport {
    pub store: RunStore,
    pub manifest: RunManifest,
    /// Records of every finished cell, earlier invocations included, in plan order.
    pub records: Vec<CellRecord>,
    /// Each record's judgement (`crate::outcome::judge_cell`), in the same order.
    pub judgements: Vec<crate::outcome::Judgement>,
    pub outcome: RunOutcome,
    pub secs: f64,
}

impl RunReport {
    /// The whole-cell expectation (`expect:` without `tests:`) covering `record`.
    pub fn expectation(&self, record: &CellRecord) -> Option<&crate::matrix_file::Expectation> {
        expectation(&self.manifest, record)
    }

    /// Each record with its judgement.
    pub fn judged(&self) -> impl Iterator<Item = (&CellRecord, crate::outcome::Judgement)> {
        self.records.iter().zip(self.judgements.iter().copied())
    }

    /// Whether an image failed, a cell errored (infrastructure) or a cell
    /// was not run.
    pub fn infrastructure_errors(&self) -> bool {
        !self.outcome.image_errors.is_empty()
            || self.judgements.iter().any(|j| j.is_error())
            || !self.outcome.not_run.is_empty()
    }
}

/// The whole-cell expectation of `manifest` covering `record`.
fn expectation<'m>(
    manifest: &'m RunManifest,
    record: &CellRecord,
) -> Option<&'m crate::matrix_file::Expectation> {
    manifest
        .expect
        .iter()
        .find(|e| e.is_whole_cell() && e.matches_cell(|k| record.values.get(k).map(String::as_str)))
}

/// `run.json`: how this invocation went (appended to on resume).
#[derive(Serialize)]
struct RunSummary<'a> {
    run_id: &'a str,
    started: String,
    finished: String,
    interrupted: bool,
    bases: &'a [BaseImage],
    images: &'a std::collections::BTreeMap<String, EnvImage>,
    image_errors: &'a [String],
    not_run: &'a [(String, String)],
}

/// Runs a plan (or resumes one) and returns its report. One piece: the
/// run's phases in order (store, images, cells, run.json and lock), each
/// handing the next what it made.
pub async fn run(
    engine: &Engine,
    req: RunRequest,
    interrupt: Interrupt,
) -> Result<RunReport, RunError> {
    let t0 = Instant::now();
    let started = now_rfc3339();
    let out = req.out.clone();
    let source = req.source;
    let rerun_failed = matches!(
        source,
        RunSource::Resume {
            rerun_failed: true,
            ..
        }
    );
    let (store, manifest, done) = super::blocking("opening the run store", move || {
        let (store, manifest) = open_store(source, &out)?;
        let done = finished_cells(&store, rerun_failed);
        Ok::<_, RunError>((store, manifest, done))
    })
    .await??;
    let (events, journal) = open_events(&store, req.listeners)?;
    if let Some(judge) = req.judge {
        events.judge_with(judge);
    }
    interrupt.set_run(&manifest.run_id);
    let watchdog = crate::stop::watchdog::start(engine, &interrupt);
    sweep_orphans(engine, &events).await;

    let to_run: Vec<_> = manifest
        .cells
        .iter()
        .filter(|c| !done.contains(&c.id))
        .cloned()
        .collect();
    events.context(super::events::RunContext::new(
        &manifest.cells,
        &manifest.expect,
    ));
    events.emit(Event::RunStarted {
        run_id: manifest.run_id.clone(),
        name: manifest.name.clone(),
        cells: manifest.cells.len(),
        to_run: to_run.len(),
        environments: environment_count(&to_run),
        jobs: req.options.jobs,
    });
    let scope = RunScope {
        engine,
        store: &store,
        run_id: &manifest.run_id,
        events: &events,
        gpus: req.gpus,
        interrupt: interrupt.clone(),
    };
    let outcome = execute(scope, to_run, &manifest.builds, &req.options).await;
    if req.options.coverage {
        scan_coverage(engine, &store, &manifest, &outcome, &events, &interrupt).await;
    }
    drop(watchdog);
    if let Some(why) = interrupt.engine_lost() {
        events.emit(Event::Warning {
            message: format!(
                "{why}: the cells it cut short are recorded as errors; \
                 `rocmatrix run --resume {}` runs them again",
                store.dir.display()
            ),
        });
    }

    let (store, manifest, outcome, records) =
        super::blocking("writing run.json and lock.json", move || {
            let records = finish_store(&store, &manifest, &outcome, &done, started)?;
            Ok::<_, RunError>((store, manifest, outcome, records))
        })
        .await??;
    let secs = t0.elapsed().as_secs_f64();
    let judgements = events.judgements(&records, &store.dir).await;
    events.emit(super::events::run_finished(
        crate::outcome::CellTally::of(judgements.iter().copied()),
        outcome.not_run.len(),
        outcome.interrupted,
        secs,
    ));
    if let Some((path, e)) = journal.failure() {
        return Err(RunError::io(&path, e));
    }
    Ok(RunReport {
        store,
        manifest,
        records,
        judgements,
        outcome,
        secs,
    })
}

/// Creates the run store of a new run (writing `plan.json`) or opens the
/// store of a run to resume.
fn open_store(source: RunSource, out: &Path) -> Result<(RunStore, RunManifest), RunError> {
    match source {
        RunSource::New(mut manifest) => {
            manifest.run_id = new_run_id();
            let store = RunStore::create(out, &manifest.run_id)?;
            store.write_manifest(&manifest)?;
            Ok((store, *manifest))
        }
        RunSource::Resume { store, .. } => {
            let manifest = store.manifest()?;
            Ok((store, manifest))
        }
    }
}

/// Cells an earlier invocation finished: they keep their results. Errored
/// ones (the engine failed, went away or stopped answering: nothing the
/// cell did) run again; with `rerun_failed`, failed, timed-out and
/// out-of-memory ones too.
fn finished_cells(store: &RunStore, rerun_failed: bool) -> BTreeSet<String> {
    store
        .finished_cells()
        .into_iter()
        .filter(|id| {
            store.cell_record(id).is_ok_and(|r| match r.status {
                RunStatus::Error => false,
                RunStatus::Failed | RunStatus::Timeout | RunStatus::Oom => !rerun_failed,
                _ => true,
            })
        })
        .collect()
}

/// The journal first, then the caller's listeners; the journal is also
/// returned, to ask at the end whether every event was written.
fn open_events(
    store: &RunStore,
    listeners: Vec<Arc<dyn Listener>>,
) -> Result<(Events, Arc<Journal>), RunError> {
    let journal_path = layout::journal_of(&store.dir);
    let opened = Journal::open(&journal_path).map_err(|e| RunError::io(&journal_path, e))?;
    let journal = Arc::new(opened.journal);
    let mut all: Vec<Arc<dyn Listener>> = vec![journal.clone()];
    all.extend(listeners);
    let events = Events::new(all);
    if let Some(message) = opened.repaired {
        events.emit(Event::Warning { message });
    }
    Ok((events, journal))
}

/// Removes containers of dead runs; what it removed (or could not) becomes
/// a warning, never an error.
async fn sweep_orphans(engine: &Engine, events: &Events) {
    match crate::stop::sweep::sweep_orphans(engine).await {
        Ok(lines) => {
            for message in lines {
                events.emit(Event::Warning { message });
            }
        }
        Err(e) => events.emit(Event::Warning {
            message: format!("could not sweep containers of dead runs: {e}"),
        }),
    }
}

fn environment_count(cells: &[crate::plan::Cell]) -> usize {
    cells
        .iter()
        .map(|c| c.environment_hash.as_str())
        .collect::<BTreeSet<_>>()
        .len()
}

/// Writes `run.json` and `lock.json`; returns the records of every finished
/// cell, earlier invocations' included, in plan order.
fn finish_store(
    store: &RunStore,
    manifest: &RunManifest,
    outcome: &RunOutcome,
    done: &BTreeSet<String>,
    started: String,
) -> Result<Vec<CellRecord>, RunError> {
    let mut records = Vec::new();
    for c in &manifest.cells {
        if let Some(r) = outcome.records.iter().find(|r| r.id == c.id) {
            records.push(r.clone());
        } else if done.contains(&c.id) {
            records.push(store.cell_record(&c.id)?);
        }
    }
    let summary = RunSummary {
        run_id: &manifest.run_id,
        started,
        finished: now_rfc3339(),
        interrupted: outcome.interrupted,
        bases: &outcome.bases,
        images: &outcome.images,
        image_errors: &outcome.image_errors,
        not_run: &outcome.not_run,
    };
    store.write_json(layout::RUN, &summary)?;
    store.write_json(layout::LOCK, &lock(store, manifest, outcome))?;
    Ok(records)
}

/// `run --coverage`: each environment image of this invocation, scanned one
/// after the other once the cells are done (the scan reads every library of
/// the image and would compete with the cells for the disk).
async fn scan_coverage(
    engine: &Engine,
    store: &RunStore,
    manifest: &RunManifest,
    outcome: &RunOutcome,
    events: &Events,
    interrupt: &Interrupt,
) {
    for (hash, image) in &outcome.images {
        if interrupt.is_set() {
            return;
        }
        let short = crate::digest::short(hash);
        let cells: Vec<_> = manifest
            .cells
            .iter()
            .filter(|c| c.environment_hash == *hash)
            .collect();
        let container = super::coverage::container_name(&manifest.run_id, hash);
        let scanned = tokio::select! {
            r = super::coverage::scan_environment(engine, store, &container, hash, &image.tag, &cells) => r,
            _ = interrupt.fired() => {
                let _ = engine.remove_container(&container).await;
                return;
            }
        };
        match scanned {
            Ok(c) => events.emit(Event::CoverageScanned {
                environment: short.to_string(),
                libraries: c.libraries.len(),
                secs: c.secs,
            }),
            Err(e) => events.emit(Event::Warning {
                message: format!("image {short}: gfx coverage scan failed: {e}"),
            }),
        }
    }
}

/// The run's lock: what an earlier invocation locked, updated with this one.
fn lock(store: &RunStore, manifest: &RunManifest, outcome: &RunOutcome) -> Lock {
    let mut lock = Lock::load(&layout::lock_of(&store.dir)).unwrap_or_else(|_| Lock {
        lock_version: LOCK_VERSION,
        rocmatrix_version: env!("CARGO_PKG_VERSION").to_string(),
        matrix_file: manifest.matrix_file.clone(),
        matrix_hash: manifest.matrix_hash.clone(),
        environments: Default::default(),
        cells: Default::default(),
        builds: Default::default(),
    });
    lock.rocmatrix_version = env!("CARGO_PKG_VERSION").to_string();
    lock.environments.extend(outcome.locked_envs.clone());
    for b in &outcome.builds {
        if let Some(id) = &b.snapshot_id {
            lock.builds.insert(
                b.key.clone(),
                LockedBuild {
                    hash: b.hash.clone(),
                    environment: b.environment_hash.clone(),
                    snapshot: b.snapshot.clone(),
                    id: id.clone(),
                    sources: b.sources.clone(),
                    registry: b.registry.clone(),
                },
            );
        }
    }
    for r in &outcome.records {
        lock.cells.insert(
            r.id.clone(),
            LockedCell {
                environment: r.environment_hash.clone(),
                build: r.build.clone(),
                sources: r.sources.clone(),
            },
        );
    }
    lock
}
