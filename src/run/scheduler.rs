//! The scheduler: environment images side by side (each base provisioned
//! once, each environment built once, `build_jobs` of them at a time), and
//! each environment's cells as soon as its image is ready, `jobs` at a time,
//! started in the order they are handed over. Infrastructure errors are
//! retried up to `retries` times; test failures never are. What the tasks
//! share is a few services (`src/run/services.rs`); the dispatcher is
//! `src/run/dispatch.rs`, an environment's build stages `src/run/stages.rs`,
//! and preparing the environments `src/prepare/`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::task::JoinSet;

use super::dispatch::{collect_cells, start_dispatcher, Job};
use super::events::{Event, Events};
use super::services::{Admission, Crew, NotRun, Shared};
use super::stages::{build_then_cells, toolchain_then_builds, BuildTaskOut, Staged};
use crate::engine::Engine;
use crate::gpu::gate::GpuGate;
use crate::image::network::NetworkChoice;
use crate::image::{BaseImage, EnvImage};
use crate::plan::{Build, Cell, Environment};
use crate::prepare::{bases_first, PrepareError, PrepareOptions, Preparer};
use crate::stop::signals::Interrupt;
use crate::store::lock::{Lock, LockedEnvironment};
use crate::store::record::{BuildRecord, CellRecord};
use crate::store::RunStore;

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Cells run at once.
    pub jobs: usize,
    /// Environments (their base and their image) prepared at once.
    pub build_jobs: usize,
    pub fail_fast: bool,
    /// Extra attempts after an infrastructure error.
    pub retries: u32,
    /// Network for image builds.
    pub network: NetworkChoice,
    /// Scratch space for bootstrapping base images.
    pub work_dir: PathBuf,
    /// Rebuild environments with the package versions of this lock.
    pub locked: Option<Arc<Lock>>,
    /// Scan each environment image for the gfx targets its libraries carry.
    pub coverage: bool,
    /// Share environment images through this registry (`--registry`,
    /// `registry:`): pull before building, push after.
    pub registry: Option<String>,
}

impl RunOptions {
    /// What preparing the environments takes of these options.
    pub fn prepare_options(&self) -> PrepareOptions {
        PrepareOptions {
            build_jobs: self.build_jobs,
            network: self.network.clone(),
            work_dir: self.work_dir.clone(),
            locked: self.locked.clone(),
            registry: self.registry.clone(),
        }
    }
}

/// The run's events are where preparing its environments reports.
impl crate::prepare::Report for Events {
    fn emit(&self, event: Event) {
        Events::emit(self, event)
    }
}

/// What happened to the cells given to [`execute`].
#[derive(Debug, Default)]
pub struct RunOutcome {
    pub records: Vec<CellRecord>,
    /// Cells that did not run, with the reason.
    pub not_run: Vec<(String, String)>,
    pub interrupted: bool,
    pub bases: Vec<BaseImage>,
    /// Environment hash → its image.
    pub images: BTreeMap<String, EnvImage>,
    /// Base or image failures, one line each.
    pub image_errors: Vec<String>,
    /// Environment hash → its base, image and installed packages (lock.json).
    pub locked_envs: BTreeMap<String, LockedEnvironment>,
    /// With a lock: per environment, whether the rebuilt package set is identical.
    pub lock_checks: Vec<String>,
    /// The build stages of this run, in the order they finished.
    pub builds: Vec<BuildRecord>,
}

/// The run [`execute`] works for.
pub struct RunScope<'a> {
    pub engine: &'a Engine,
    pub store: &'a RunStore,
    pub run_id: &'a str,
    pub events: &'a Events,
    pub gpus: Arc<dyn GpuGate>,
    pub interrupt: Interrupt,
}

/// What one build task of an environment does.
enum BuildTask {
    /// A build's key the plan does not have.
    Missing(String, Vec<Cell>),
    /// A build from the environment image, then its cells.
    One(Build, Vec<Cell>),
    /// A toolchain build, its own cells, and the builds starting from it.
    Toolchain(Build, Vec<Cell>, Vec<Staged>),
}

/// The staged cells of one environment as build tasks: builds that start
/// from a toolchain build go into that toolchain's task.
fn build_tasks_of(staged: Vec<(String, Vec<Cell>)>, builds: &[Build]) -> Vec<BuildTask> {
    let find = |key: &str| builds.iter().find(|b| b.key == key).cloned();
    // The builds that start from a toolchain, by the toolchain's key.
    let mut dependents: Vec<(String, Vec<Staged>)> = Vec::new();
    let mut direct: Vec<(String, Vec<Cell>)> = Vec::new();
    for (key, cells) in staged {
        match find(&key).and_then(|b| Some((b.from.clone()?, b))) {
            Some((from, b)) => match dependents.iter_mut().find(|(k, _)| *k == from) {
                Some((_, deps)) => deps.push((b, cells)),
                None => dependents.push((from, vec![(b, cells)])),
            },
            None => direct.push((key, cells)),
        }
    }
    let mut take = |key: &str| {
        let at = dependents.iter().position(|(k, _)| k == key)?;
        Some(dependents.remove(at).1)
    };
    let mut tasks: Vec<BuildTask> = direct
        .into_iter()
        .map(|(key, cells)| match (find(&key), take(&key)) {
            (None, deps) => {
                let all = cells
                    .into_iter()
                    .chain(deps.into_iter().flatten().flat_map(|(_, c)| c));
                BuildTask::Missing(key, all.collect())
            }
            (Some(b), None) => BuildTask::One(b, cells),
            (Some(b), Some(deps)) => BuildTask::Toolchain(b, cells, deps),
        })
        .collect();
    // Toolchains none of whose cells start from them directly.
    for (from, deps) in dependents {
        tasks.push(match find(&from) {
            Some(tc) => BuildTask::Toolchain(tc, Vec::new(), deps),
            None => BuildTask::Missing(from, deps.into_iter().flat_map(|(_, c)| c).collect()),
        });
    }
    tasks
}

/// Runs `cells` (all of one plan) and returns their outcome.
pub async fn execute(
    scope: RunScope<'_>,
    cells: Vec<Cell>,
    builds: &[Build],
    opts: &RunOptions,
) -> RunOutcome {
    let RunScope {
        engine,
        store,
        run_id,
        events,
        gpus,
        interrupt,
    } = scope;
    let prepare = Preparer::start(
        engine,
        store,
        run_id,
        Arc::new(events.clone()),
        opts.prepare_options(),
    )
    .await;
    let shared = Arc::new(Shared {
        crew: Crew {
            engine: engine.clone(),
            store: store.clone(),
            run_id: run_id.to_string(),
            events: events.clone(),
            gpus,
            sources: Arc::new(crate::source::Sources::new(&crate::dirs::cache_dir())),
            cleanups: std::sync::Mutex::new(Vec::new()),
        },
        admission: Admission::new(opts.jobs, opts.fail_fast, opts.retries, interrupt.clone()),
        prepare: Arc::new(prepare),
    });
    let mut out = RunOutcome::default();
    shared.prepare.volumes(&cells, builds).await;
    let (ready, dispatcher) = start_dispatcher(shared.clone());
    let builds: Arc<[Build]> = builds.into();
    let mut environments: JoinSet<RunOutcome> = JoinSet::new();
    // Each environment gets its build slot here, in this order, before its
    // task starts: tasks would race for the semaphore in whatever order the
    // runtime polls them.
    for (hash, env, group) in bases_first(by_environment(cells)) {
        let slot = match interrupt.is_set() {
            true => None,
            false => tokio::select! {
                p = shared.prepare.slot() => p,
                _ = interrupt.fired() => None,
            },
        };
        let Some(slot) = slot else {
            for c in group {
                out.not_run
                    .push((c.id, NotRun::stopped(&interrupt).to_string()));
            }
            continue;
        };
        environments.spawn(environment(
            shared.clone(),
            (hash, env, group),
            builds.clone(),
            ready.clone(),
            slot,
        ));
    }
    drop(ready);
    while let Some(done) = environments.join_next().await {
        match done {
            Ok(o) => merge(&mut out, o),
            Err(e) => out
                .image_errors
                .push(format!("an environment task failed: {e}")),
        }
    }
    let cells = collect_cells(dispatcher).await;
    out.records.extend(cells.records);
    out.not_run.extend(cells.not_run);
    out.image_errors.extend(cells.errors);
    shared
        .crew
        .finish_cleanups(interrupt.engine_lost().is_some())
        .await;
    record_image_use(&out).await;
    shared.prepare.report_package_cache();
    out.interrupted = interrupt.by_signal();
    if out.interrupted {
        let _ = crate::stop::sweep::remove_run_containers(engine, run_id).await;
    }
    out.bases = shared.prepare.bases();
    out
}

/// Records the images and snapshots this run used in the cache's
/// `image-use.json` (for `images --prune`).
async fn record_image_use(out: &RunOutcome) {
    let tags: Vec<String> = out
        .images
        .values()
        .map(|i| i.tag.clone())
        .chain(
            out.builds
                .iter()
                .filter(|b| b.snapshot_id.is_some())
                .map(|b| b.snapshot.clone()),
        )
        .collect();
    let _ = super::blocking("recording image use", move || {
        crate::store::usage::record(&tags)
    })
    .await;
}

/// Cells grouped by environment, environments in the order their first
/// cell comes in the plan.
fn by_environment(cells: Vec<Cell>) -> Vec<(String, Option<Environment>, Vec<Cell>)> {
    let mut groups: Vec<(String, Option<Environment>, Vec<Cell>)> = Vec::new();
    for c in cells {
        match groups.iter_mut().find(|(h, _, _)| *h == c.environment_hash) {
            Some((_, _, v)) => v.push(c),
            None => groups.push((c.environment_hash.clone(), c.environment.clone(), vec![c])),
        }
    }
    groups
}

/// Prepares one environment's image holding a build slot, then hands its
/// cells to the dispatcher and runs its build stages; what it gives is
/// merged into the run's outcome.
async fn environment(
    s: Arc<Shared>,
    (hash, env, group): (String, Option<Environment>, Vec<Cell>),
    builds: Arc<[Build]>,
    ready: mpsc::UnboundedSender<Job>,
    slot: OwnedSemaphorePermit,
) -> RunOutcome {
    let mut out = RunOutcome::default();
    // What this run uses is held from now on, so that a concurrent
    // `images --prune` keeps it (the lock naming it comes at the end).
    let prepared = tokio::select! {
        r = s.prepare.environment(&hash, env.as_ref(), group.len()) => r.map_err(Some),
        // Interrupted.
        _ = s.admission.interrupt.fired() => Err(None),
    };
    drop(slot);
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => {
            image_failed(&s, &hash, e.as_ref(), group, &mut out);
            return out;
        }
    };
    let (tag, id) = (prepared.image.tag.clone(), prepared.image.id.clone());
    out.lock_checks.extend(prepared.lock_check);
    out.locked_envs.insert(hash.clone(), prepared.locked);
    out.images.insert(hash.clone(), prepared.image);
    let (direct, staged) = by_build(group);
    for cell in direct {
        // The dispatcher outlives this task; it only stops once every `ready` drops.
        let _ = ready.send(Job::Run {
            cell,
            image: tag.clone(),
            built: None,
        });
    }
    let env_image = (tag, id);
    let mut build_tasks: JoinSet<BuildTaskOut> = JoinSet::new();
    for task in build_tasks_of(staged, &builds) {
        match task {
            BuildTask::Missing(key, cells) => {
                for c in cells {
                    out.not_run
                        .push((c.id, format!("build `{key}` is not in the plan")));
                }
            }
            BuildTask::One(build, cells) => {
                build_tasks.spawn(build_then_cells(
                    s.clone(),
                    build,
                    env_image.clone(),
                    cells,
                    ready.clone(),
                ));
            }
            BuildTask::Toolchain(toolchain, cells, dependents) => {
                build_tasks.spawn(toolchain_then_builds(
                    s.clone(),
                    toolchain,
                    env_image.clone(),
                    cells,
                    dependents,
                    ready.clone(),
                ));
            }
        }
    }
    drop(ready);
    while let Some(done) = build_tasks.join_next().await {
        match done {
            Ok(b) => {
                out.builds.extend(b.records);
                out.not_run.extend(b.not_run);
            }
            Err(e) => out.image_errors.push(format!("a build task failed: {e}")),
        }
    }
    out
}

/// Adds what one environment's task gave to the run's outcome.
fn merge(out: &mut RunOutcome, o: RunOutcome) {
    out.records.extend(o.records);
    out.not_run.extend(o.not_run);
    out.images.extend(o.images);
    out.image_errors.extend(o.image_errors);
    out.locked_envs.extend(o.locked_envs);
    out.lock_checks.extend(o.lock_checks);
    out.builds.extend(o.builds);
}

/// An environment's cells split into those that start from its image and
/// those that start from a build, by build key in plan order.
fn by_build(cells: Vec<Cell>) -> (Vec<Cell>, Vec<(String, Vec<Cell>)>) {
    let mut direct = Vec::new();
    let mut staged: Vec<(String, Vec<Cell>)> = Vec::new();
    for c in cells {
        match c.build.clone() {
            None => direct.push(c),
            Some(key) => match staged.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(c),
                None => staged.push((key, vec![c])),
            },
        }
    }
    (direct, staged)
}

/// An environment whose image could not be made: the error once, and each
/// of its cells as not run.
/// (`None`: interrupted.)
fn image_failed(
    s: &Shared,
    hash: &str,
    e: Option<&PrepareError>,
    group: Vec<Cell>,
    out: &mut RunOutcome,
) {
    let short = crate::digest::short(hash).to_string();
    let reason = match e {
        None => NotRun::stopped(&s.admission.interrupt),
        Some(e) => {
            s.crew.events.emit(Event::ImageFailed {
                environment: short.clone(),
                error: e.to_string(),
            });
            out.image_errors.push(format!("environment {short}: {e}"));
            NotRun::ImageFailed(short)
        }
    };
    for c in group {
        s.crew.events.emit(Event::CellNotRun {
            cell: c.id.clone(),
            reason: reason.to_string(),
        });
        out.not_run.push((c.id, reason.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(build: &str) -> crate::plan::Plan {
        let text = format!(
            "matrix:\n  flavour: [release, debug]\n  n: [a, b]\nenvironment:\n  base: debian:sid\n  \
             llvm:\n    debug: \"{{{{ 'source' if matrix.flavour == 'debug' else 'none' }}}}\"\n    \
             tools: [llvm-mc]\n{build}steps:\n  - name: t\n    run: 'true'\n"
        );
        let spec = crate::matrix_file::Spec::parse(std::path::Path::new("m.yaml"), &text).unwrap();
        crate::plan::Plan::build(&spec, 64).unwrap()
    }

    /// What each task of the environment of `flavour` holds.
    fn shapes(p: &crate::plan::Plan, flavour: &str) -> Vec<String> {
        let cells: Vec<Cell> = p
            .cells
            .iter()
            .filter(|c| c.value("flavour") == Some(flavour))
            .cloned()
            .collect();
        let (_, staged) = by_build(cells);
        build_tasks_of(staged, &p.builds)
            .into_iter()
            .map(|t| match t {
                BuildTask::Missing(k, c) => format!("missing {k}: {}", c.len()),
                BuildTask::One(b, c) => format!("one {}: {}", b.key, c.len()),
                BuildTask::Toolchain(b, c, deps) => format!(
                    "toolchain {}: {} then {}",
                    &b.key[..10],
                    c.len(),
                    deps.iter()
                        .map(|(d, c)| format!("{} ({})", d.key, c.len()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
            .collect()
    }

    #[test]
    fn a_toolchain_task_carries_its_cells_or_the_builds_that_start_from_it() {
        let p = plan("");
        // Without a `build:`, the toolchain is a build like any other.
        let debug = shapes(&p, "debug");
        assert_eq!(debug.len(), 1);
        assert!(
            debug[0].starts_with("one llvm-debug-") && debug[0].ends_with(": 2"),
            "{debug:?}"
        );
        assert!(shapes(&p, "release").is_empty());
        let p = plan("build:\n  per: [flavour, n]\n  steps:\n    - name: make\n      run: make\n");
        assert_eq!(
            shapes(&p, "debug"),
            ["toolchain llvm-debug: 0 then debug-a (1), debug-b (1)"]
        );
        assert_eq!(
            shapes(&p, "release"),
            ["one release-a: 1", "one release-b: 1"]
        );
    }

    #[test]
    fn cells_of_a_build_the_plan_lacks_are_one_missing_task() {
        let mut p =
            plan("build:\n  per: [flavour, n]\n  steps:\n    - name: make\n      run: make\n");
        p.builds.retain(|b| !b.key.starts_with("llvm-debug-"));
        assert_eq!(shapes(&p, "debug").len(), 1);
        assert!(
            shapes(&p, "debug")[0].starts_with("missing llvm-debug-"),
            "{:?}",
            shapes(&p, "debug")
        );
        assert!(shapes(&p, "debug")[0].ends_with(": 2"));
    }
}
