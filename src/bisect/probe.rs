//! One probe: the matrix's plan restricted to the point's one cell (for a
//! git source, with the source pinned to the commit), run by the ordinary
//! runner into a run store of its own under the bisection's `runs/`, then
//! read back as an [`Observation`]: the cell's status, whether its build
//! failed or was reused, and the failure signatures of the run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::judge::{Observation, Shown};
use super::space::{self, Kind, Space};
use super::store::ProbeBuild;
use super::BisectError;
use crate::engine::Engine;
use crate::gpu::gate::GpuGate;
use crate::matrix_file::Spec;
use crate::plan::Plan;
use crate::run::progress::{self, ProgressMode};
use crate::run::runner::{self, RunRequest, RunSource};
use crate::run::RunOptions;
use crate::stop::signals::Interrupt;
use crate::store::record::{RunManifest, RunStatus};

/// What every probe of a bisection shares.
pub struct Setup<'a> {
    pub engine: &'a Engine,
    pub spec: &'a Spec,
    pub space: &'a Space,
    pub only: &'a [(String, String)],
    pub max_cells: usize,
    pub options: &'a RunOptions,
    pub progress: ProgressMode,
    pub gpus: Arc<dyn GpuGate>,
    /// The bisection's directory; runs go under its `runs/`.
    pub dir: PathBuf,
    pub interrupt: Interrupt,
    /// Writes a finished probe's reports.
    pub reports: super::drive::ProbeReports,
}

/// A finished probe run.
#[derive(Debug, Clone)]
pub struct Ran {
    /// The run store, relative to the bisection's directory.
    pub run: String,
    pub cell: String,
    pub observation: Observation,
    pub build: Option<ProbeBuild>,
    pub started: String,
    pub secs: f64,
    /// The run was interrupted: the probe says nothing.
    pub interrupted: bool,
    /// An earlier probe's outcome of the same content: nothing ran.
    pub reused: bool,
}

/// The plan of point `point`: exactly one cell.
pub fn plan_of(setup: &Setup<'_>, point: usize) -> Result<Plan, BisectError> {
    let p = &setup.space.points[point];
    let (plan, only) = match setup.space.kind {
        Kind::Axis => {
            let mut only = setup.only.to_vec();
            only.push((setup.space.name.clone(), p.value.clone()));
            (Plan::build(setup.spec, setup.max_cells)?, only)
        }
        Kind::Git => {
            let spec = space::pinned(setup.spec, &setup.space.name, &p.value);
            (Plan::build(&spec, setup.max_cells)?, setup.only.to_vec())
        }
        // The cell is the same at every point: its environment's packages
        // differ, pinned by the point's lock (`options_of`).
        Kind::Packages => (
            Plan::build(setup.spec, setup.max_cells)?,
            setup.only.to_vec(),
        ),
    };
    let what = format!("point {}", p.label(setup.space.kind));
    let cell = space::one_cell(&plan, &only, &what)?;
    let mut plan = plan;
    plan.cells = vec![cell];
    Ok(plan)
}

/// The run options of point `point`: a package search's point rebuilds
/// the environment from its own lock.
fn options_of(setup: &Setup<'_>, point: usize) -> RunOptions {
    let mut options = setup.options.clone();
    if let Some(p) = &setup.space.packages {
        let file = setup.spec.file.display().to_string();
        let lock = p.lock_for(point, &file, &setup.spec.source_hash);
        options.locked = Some(Arc::new(lock));
    }
    options
}

/// Runs point `point` once — or, with `reuse`, takes the outcome an
/// earlier probe of the same content left ([`super::outcomes`]).
pub async fn run(setup: &Setup<'_>, point: usize, reuse: bool) -> Result<Ran, BisectError> {
    let plan = plan_of(setup, point)?;
    let cell = plan.cells[0].clone();
    let started = crate::store::now_rfc3339();
    // `<out>/bisects/<id>` → `<out>`.
    let root = setup
        .dir
        .parent()
        .and_then(std::path::Path::parent)
        .map(std::path::Path::to_path_buf);
    let options = options_of(setup, point);
    // A probe rebuilt from a lock is that cell on those package versions.
    let key = super::outcomes::key(&plan, &cell).map(|k| match &options.locked {
        Some(lock) => {
            let pins = serde_json::to_string(&lock.environments).unwrap_or_default();
            crate::digest::sha256_hex(format!("{k}\0{pins}").as_bytes())
        }
        None => k,
    });
    if let (true, Some(root), Some(key)) = (reuse, &root, &key) {
        if let Some(ran) = kept_outcome(root, key, &started).await? {
            return Ok(ran);
        }
    }
    let t0 = Instant::now();
    let listener: Arc<dyn crate::run::events::Listener> =
        Arc::from(progress::listener(setup.progress, 1));
    let request = RunRequest {
        source: RunSource::New(Box::new(RunManifest::planned(setup.spec, &plan))),
        out: setup.dir.clone(),
        options,
        listeners: vec![listener],
        gpus: setup.gpus.clone(),
        judge: None,
    };
    let report = runner::run(setup.engine, request, setup.interrupt.clone()).await?;
    let secs = t0.elapsed().as_secs_f64();
    let run_dir = report.store.dir.clone();
    let run = run_dir
        .strip_prefix(&setup.dir)
        .unwrap_or(&run_dir)
        .display()
        .to_string();
    let record = report.records.iter().find(|r| r.id == cell.id);
    let built = cell
        .build
        .as_ref()
        .and_then(|k| report.outcome.builds.iter().find(|b| &b.key == k));
    let mut observation = observe(&report, &cell, record, built);
    if record.is_some_and(|r| r.status.is_failure()) {
        let dir = run_dir.clone();
        observation.signatures = tokio::task::spawn_blocking(move || signatures(&dir))
            .await
            .map_err(|e| BisectError::Join(e.to_string()))?;
    }
    if !report.outcome.interrupted {
        let (dir, write) = (run_dir.clone(), setup.reports);
        let _ = tokio::task::spawn_blocking(move || write(&dir)).await;
    }
    let ran = Ran {
        run,
        cell: cell.id,
        observation,
        build: built.map(|b| ProbeBuild {
            key: b.key.clone(),
            reused: b.reused || b.pulled,
            snapshot: b.snapshot.clone(),
        }),
        started,
        secs,
        interrupted: report.outcome.interrupted,
        reused: false,
    };
    // Kept for later probes of the same content: what the cell showed,
    // not what the infrastructure did to it.
    let keep = !ran.interrupted
        && ran
            .observation
            .status
            .is_some_and(|s| s != RunStatus::Error);
    if let (true, Some(root), Some(key)) = (keep, root, key) {
        keep_outcome(root, key, &ran, run_dir).await;
    }
    Ok(ran)
}

/// The outcome an earlier probe of the same content kept under `root`, as
/// this probe's (started at `started`, reused, in no time).
async fn kept_outcome(root: &Path, key: &str, started: &str) -> Result<Option<Ran>, BisectError> {
    let (root, key) = (root.to_path_buf(), key.to_string());
    let kept = tokio::task::spawn_blocking(move || super::outcomes::load(&root, &key))
        .await
        .map_err(|e| BisectError::Join(e.to_string()))?;
    Ok(kept.map(|k| Ran {
        run: k.run.clone(),
        cell: k.cell.clone(),
        observation: k.observation(),
        build: k.build.clone().map(|b| ProbeBuild { reused: true, ..b }),
        started: started.to_string(),
        secs: 0.0,
        interrupted: false,
        reused: true,
    }))
}

/// What the probe's run showed of `cell`: its status and why, and whether
/// its build failed; the signatures are read afterwards.
fn observe(
    report: &runner::RunReport,
    cell: &crate::plan::Cell,
    record: Option<&crate::store::record::CellRecord>,
    built: Option<&crate::store::record::BuildRecord>,
) -> Observation {
    Observation {
        status: record.map(|r| r.status),
        reason: record.and_then(|r| r.reason.clone()).or_else(|| {
            // A one-cell run: an image error is its environment's, and it
            // says why (a pinned version no longer served, for one).
            let image = report.outcome.image_errors.first();
            let not_run = report.outcome.not_run.iter().find(|(id, _)| *id == cell.id);
            match (not_run, image) {
                (Some((_, why)), Some(e)) => Some(format!("{why}: {e}")),
                (Some((_, why)), None) => Some(why.clone()),
                (None, e) => e.cloned(),
            }
        }),
        signatures: Vec::new(),
        build_failed: built.is_some_and(|b| b.status != RunStatus::Passed),
    }
}

/// Keeps what `ran` showed under `root` for later probes of the same
/// content (`key`), naming its run store by its absolute path.
async fn keep_outcome(root: PathBuf, key: String, ran: &Ran, run_dir: PathBuf) {
    let kept = super::outcomes::Kept {
        key,
        status: ran.observation.status,
        reason: ran.observation.reason.clone(),
        signatures: ran.observation.signatures.clone(),
        build_failed: ran.observation.build_failed,
        run: std::path::absolute(&run_dir)
            .unwrap_or(run_dir)
            .display()
            .to_string(),
        cell: ran.cell.clone(),
        build: ran.build.clone(),
        secs: ran.secs,
    };
    let _ = tokio::task::spawn_blocking(move || super::outcomes::save(&root, &kept)).await;
}

/// The failure signatures of a run, with `expect:` set aside: an expected
/// failure is still the failure a bisection may be looking for.
fn signatures(run_dir: &std::path::Path) -> Vec<Shown> {
    let mut source = match crate::results::Source::run(run_dir) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("{}: {e}", run_dir.display());
            return Vec::new();
        }
    };
    source.expect.clear();
    let results = crate::analysis::collect(
        &source,
        crate::results::junit::Limits::default(),
        &mut crate::results::NoSink,
    );
    results.signatures.iter().map(Shown::of).collect()
}
