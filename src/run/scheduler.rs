//! The scheduler: environment images side by side (each base provisioned
//! once, each environment built once, `build_jobs` of them at a time), and
//! each environment's cells as soon as its image is ready, `jobs` at a time,
//! started in the order they are handed over. Infrastructure errors are
//! retried up to `retries` times; test failures never are.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::build_stage::{self, Built};
use super::cell::{container_name, run_cell, CellEnv};
use super::events::{Event, Events};
use super::gpu_gate::GpuGate;
use super::signals::Interrupt;
use crate::engine::Engine;
use crate::image::aptcache::AptCache;
use crate::image::base::BaseShare;
use crate::image::network::{bridge_reaches, mirror_endpoint, NetworkChoice};
use crate::image::registry::{Fetched, Registries};
use crate::image::{build, ensure_base, mirror, packages, BaseImage, EnvImage, Family, ImageError};
use crate::plan::{Build, Cell, Environment};
use crate::store::lock::{Lock, LockedEnvironment};
use crate::store::record::{BuildRecord, CellRecord, Status};
use crate::store::{now_rfc3339, RunStore};

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

struct Shared {
    engine: Engine,
    store: RunStore,
    run_id: String,
    events: Events,
    gpus: Arc<dyn GpuGate>,
    opts: RunOptions,
    interrupt: Interrupt,
    stop: AtomicBool,
    slots: Arc<Semaphore>,
    sources: Arc<crate::source::Sources>,
    cleanups: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Which registries failed in this run (each is reported once).
    registries: Registries,
    /// The package download cache, unless it is off or could not start.
    packages: Option<AptCache>,
    /// Environments being prepared at once (`build_jobs`).
    build_slots: Arc<Semaphore>,
    /// Each base once per run, whichever environment asks first.
    bases: std::sync::Mutex<Bases>,
    /// The build network, probed once, when the first build needs it.
    network: tokio::sync::OnceCell<Option<String>>,
}

/// The number of environments prepared at once when `--build-jobs` is not
/// given: twice the cores, at least 2 and at most 8. Bootstraps and image
/// builds wait on the mirror and the disk as much as on the CPU.
pub fn default_build_jobs() -> usize {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    (2 * cores).clamp(2, 8)
}

/// A build and the cells that start from it.
type Staged = (Build, Vec<Cell>);

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

/// The dispatcher task; it yields every cell task's result once its sender drops.
type Dispatcher = tokio::task::JoinHandle<Vec<Result<CellResult, tokio::task::JoinError>>>;

/// What the dispatcher is handed, in plan order.
enum Job {
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

/// What a build stage's task leaves for the run's outcome.
struct BuildTaskOut {
    records: Vec<BuildRecord>,
    not_run: Vec<(String, String)>,
}

enum CellResult {
    Done(Box<CellRecord>),
    NotRun(String, NotRun),
}

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
    fn stopped(interrupt: &Interrupt) -> NotRun {
        interrupt
            .engine_lost()
            .map_or(NotRun::Interrupted, NotRun::EngineLost)
    }
}

/// Why an environment's image could not be made in this run.
#[derive(Debug, thiserror::Error)]
enum ImageFailure {
    #[error("interrupted")]
    Interrupted,
    #[error("the matrix file has no `environment:` section")]
    NoEnvironment,
    /// The family, recipe or pins of the environment are wrong.
    #[error("{0}")]
    Recipe(String),
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    /// The base failed for an earlier environment of this run.
    #[error("{0}")]
    Base(Arc<ImageError>),
}

/// Each base image once per run: what obtaining it gave, filled by the
/// first environment on it while the others on it wait.
type Bases = HashMap<String, Arc<tokio::sync::OnceCell<Result<BaseImage, Arc<ImageError>>>>>;

/// Runs `cells` (all of one plan) and returns their outcome.
#[allow(clippy::too_many_arguments)]
pub async fn execute(
    engine: &Engine,
    store: &RunStore,
    run_id: &str,
    cells: Vec<Cell>,
    builds: &[Build],
    opts: &RunOptions,
    events: &Events,
    gpus: Arc<dyn GpuGate>,
    interrupt: Interrupt,
) -> RunOutcome {
    let shared = Arc::new(Shared {
        engine: engine.clone(),
        store: store.clone(),
        run_id: run_id.to_string(),
        events: events.clone(),
        gpus,
        opts: opts.clone(),
        interrupt: interrupt.clone(),
        stop: AtomicBool::new(false),
        slots: Arc::new(Semaphore::new(opts.jobs.max(1))),
        sources: Arc::new(crate::source::Sources::new(&crate::dirs::cache_dir())),
        cleanups: std::sync::Mutex::new(Vec::new()),
        registries: Registries::default(),
        packages: start_package_cache(store, events).await,
        build_slots: Arc::new(Semaphore::new(opts.build_jobs.max(1))),
        bases: std::sync::Mutex::new(HashMap::new()),
        network: tokio::sync::OnceCell::new(),
    });
    let mut out = RunOutcome::default();
    create_caches(&shared, &cells, builds).await;
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
                p = shared.build_slots.clone().acquire_owned() => p.ok(),
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
    collect_cells(dispatcher, &mut out).await;
    let pending: Vec<_> =
        std::mem::take(&mut *shared.cleanups.lock().unwrap_or_else(|p| p.into_inner()));
    for removal in pending {
        // A lost engine removes nothing: the next run's sweep does.
        if interrupt.engine_lost().is_some() {
            removal.abort();
        }
        let _ = removal.await;
    }
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
    if let Some(c) = &shared.packages {
        let st = c.stats();
        if st.hits + st.stored > 0 {
            events.emit(Event::Warning {
                message: format!(
                    "package cache: {} files served from {}, {} downloaded into it",
                    st.hits,
                    c.dir().display(),
                    st.stored
                ),
            });
        }
    }
    out.interrupted = interrupt.by_signal();
    if out.interrupted {
        let _ = super::sweep::remove_run_containers(engine, run_id).await;
    }
    let bases = shared.bases.lock().unwrap_or_else(|p| p.into_inner());
    out.bases = bases
        .values()
        .filter_map(|b| b.get()?.clone().ok())
        .collect();
    drop(bases);
    out.bases.sort_by(|a, b| a.reference.cmp(&b.reference));
    out
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

/// The environments reordered so that the first one on each base comes
/// first (in plan order), then the rest (in plan order): with fewer build
/// slots than environments, every base starts bootstrapping before a
/// second environment waits on one.
fn bases_first<T>(
    groups: Vec<(String, Option<Environment>, T)>,
) -> Vec<(String, Option<Environment>, T)> {
    let mut seen = std::collections::HashSet::new();
    let (first, rest): (Vec<_>, Vec<_>) = groups
        .into_iter()
        .partition(|(_, env, _)| seen.insert(env.as_ref().map(|e| e.base.clone())));
    first.into_iter().chain(rest).collect()
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
    if let Some(e) = &env {
        crate::store::roots::hold(&s.store.root(), [e.base.clone()]);
    }
    let image = tokio::select! {
        r = prepare_image(&s, &hash, env.as_ref(), group.len(), &mut out) => r,
        _ = s.interrupt.fired() => Err(ImageFailure::Interrupted),
    };
    drop(slot);
    let img = match image {
        Ok(img) => img,
        Err(e) => {
            image_failed(&s, &hash, &e, group, &mut out);
            return out;
        }
    };
    let (tag, id) = (img.tag.clone(), img.id.clone());
    crate::store::roots::hold(&s.store.root(), [tag.clone()]);
    out.images.insert(hash.clone(), img);
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

/// Creates the cache volumes the cells and their builds mount, labelled as
/// caches (the engine would make a missing one on use, unlabelled, so that
/// `images --prune --caches` would not know it); a failure is a warning.
async fn create_caches(s: &Shared, cells: &[Cell], builds: &[Build]) {
    let mut seen = std::collections::BTreeSet::new();
    let wanted = cells.iter().flat_map(|c| {
        c.caches
            .iter()
            .chain(c.build_chain(builds).into_iter().flat_map(|b| &b.caches))
    });
    for cache in wanted {
        if !seen.insert(cache.volume.clone()) {
            continue;
        }
        let labels = HashMap::from([
            (crate::engine::LABEL_KIND.to_string(), "cache".to_string()),
            (
                crate::engine::LABEL_CACHE_KEY.to_string(),
                cache.key.clone(),
            ),
        ]);
        if let Err(e) = s.engine.ensure_volume(&cache.volume, &labels).await {
            s.events.emit(Event::Warning {
                message: format!("cache {}: {e}", cache.key),
            });
        }
    }
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

/// Runs one build stage (holding a job slot) and then hands its cells to
/// the dispatcher: to run from the snapshot, or to be recorded as failed
/// by the build. Infrastructure errors are retried like a cell's.
async fn build_then_cells(
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
            not_run: not_run(&s, &cells, reason),
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
async fn toolchain_then_builds(
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
                not_run: not_run(&s, &all, reason),
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
            crate::store::roots::hold(&s.store.root(), [tag.to_string()]);
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

/// Records `cells` as not run, each with an event.
fn not_run(s: &Shared, cells: &[Cell], reason: NotRun) -> Vec<(String, String)> {
    cells
        .iter()
        .map(|c| {
            s.events.emit(Event::CellNotRun {
                cell: c.id.clone(),
                reason: reason.to_string(),
            });
            (c.id.clone(), reason.to_string())
        })
        .collect()
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
    let slot = tokio::select! {
        p = s.slots.clone().acquire_owned() => p.ok(),
        _ = s.interrupt.fired() => None,
    };
    let Some(slot) = slot else {
        return Err(NotRun::stopped(&s.interrupt));
    };
    if s.stop.load(Ordering::SeqCst) {
        return Err(NotRun::FailFast);
    }
    let cx = s.cell_env();
    let binds: Vec<String> = build.caches.iter().map(|c| c.bind()).collect();
    let name = build_stage::container_name(&s.run_id, &build.key);
    let share = s
        .opts
        .registry
        .as_deref()
        .map(|registry| build_stage::Share {
            registries: &s.registries,
            registry,
        });
    let (started, t0) = (now_rfc3339(), Instant::now());
    let mut attempt = 1;
    let built = loop {
        let r = tokio::select! {
            r = build_stage::run_build(&cx, build, (&env_image.0, &env_image.1), ids.clone(), binds.clone(), share) => r,
            _ = s.interrupt.fired() => {
                let _ = s.engine.remove_container(&name).await;
                return Err(NotRun::stopped(&s.interrupt));
            }
        };
        match r {
            Ok(b) => break b,
            Err(e) if e.is_transient() && attempt <= s.opts.retries => {
                s.events.emit(Event::Warning {
                    message: format!(
                        "build {}: infrastructure error on attempt {attempt}, retrying: {e}",
                        build.key
                    ),
                });
                let _ = s.engine.remove_container(&name).await;
                attempt += 1;
            }
            Err(e) => {
                let _ = s.engine.remove_container(&name).await;
                let secs = t0.elapsed().as_secs_f64();
                let b = Built::errored(
                    build,
                    &env_image.0,
                    ids.clone(),
                    started,
                    secs,
                    e.to_string(),
                );
                s.events.emit(Event::BuildFinished {
                    build: build.key.clone(),
                    snapshot: String::new(),
                    status: Status::Error,
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
    if built.snapshot().is_none() && s.opts.fail_fast {
        s.stop.store(true, Ordering::SeqCst);
    }
    Ok(built)
}

/// The record of a cell whose build failed, written; the cell is not run.
async fn build_failed(s: Arc<Shared>, cell: Cell, built: Arc<Built>) -> CellResult {
    let dir = s.store.dir.clone();
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
    write_record(&s, record.clone()).await;
    s.events.emit(Event::CellFinished {
        cell: cell.id.clone(),
        status: record.status,
        reason: record.reason.clone(),
        secs: record.duration_secs,
    });
    CellResult::Done(Box::new(record))
}

/// An environment whose image could not be made: the error once, and each
/// of its cells as not run.
fn image_failed(s: &Shared, hash: &str, e: &ImageFailure, group: Vec<Cell>, out: &mut RunOutcome) {
    let short = crate::digest::short(hash).to_string();
    let reason = match e {
        ImageFailure::Interrupted => NotRun::stopped(&s.interrupt),
        e => {
            s.events.emit(Event::ImageFailed {
                environment: short.clone(),
                error: e.to_string(),
            });
            out.image_errors.push(format!("environment {short}: {e}"));
            NotRun::ImageFailed(short)
        }
    };
    for c in group {
        s.events.emit(Event::CellNotRun {
            cell: c.id.clone(),
            reason: reason.to_string(),
        });
        out.not_run.push((c.id, reason.to_string()));
    }
}

/// Waits for every cell task and files its result.
async fn collect_cells(dispatcher: Dispatcher, out: &mut RunOutcome) {
    let results = match dispatcher.await {
        Ok(results) => results,
        Err(e) => {
            out.image_errors
                .push(format!("the cell dispatcher failed: {e}"));
            Vec::new()
        }
    };
    for r in results {
        match r {
            Ok(CellResult::Done(rec)) => out.records.push(*rec),
            Ok(CellResult::NotRun(id, reason)) => out.not_run.push((id, reason.to_string())),
            Err(e) => out.image_errors.push(format!("a cell task failed: {e}")),
        }
    }
}

/// The image of one environment: its base (once per run), the pinned
/// environment under `--locked`, the build (or reuse) and its installed
/// packages, recorded for lock.json.
async fn prepare_image(
    s: &Shared,
    hash: &str,
    env: Option<&Environment>,
    cells: usize,
    out: &mut RunOutcome,
) -> Result<EnvImage, ImageFailure> {
    let short = crate::digest::short(hash);
    let env = env.ok_or(ImageFailure::NoEnvironment)?;
    let family = Family::get(&env.family).map_err(|e| ImageFailure::Recipe(e.to_string()))?;
    s.events.emit(Event::ImageStarted {
        environment: short.to_string(),
        cells,
    });
    let t0 = Instant::now();
    let base = obtain_base(s, env, &family).await?;
    let pinned = s
        .opts
        .locked
        .as_ref()
        .and_then(|l| l.environments.get(hash));
    // Under --locked, an image the lock knows by registry digest is pulled
    // and must still have that digest; only when the registry cannot give
    // it is the environment rebuilt with the locked package versions.
    let locked_ref = pinned.and_then(|l| l.image.registry.as_ref().map(|r| (l, r)));
    if let Some((locked, reference)) = locked_ref {
        let fetched = s
            .registries
            .pull_locked(&s.engine, hash, reference, &locked.image.tag)
            .await?;
        if let Some(img) = s.fetched(fetched) {
            let how = format!("pulled at the locked digest {reference}");
            return finish_image(
                s,
                hash,
                &family,
                base,
                img,
                Some((locked, how.as_str())),
                t0,
                out,
            )
            .await;
        }
    }
    let build_env = match pinned {
        Some(locked) => pinned_environment(s, &family, env, hash, &base, locked).await?,
        None => env.clone(),
    };
    let recipe = build::recipe(&family, &build_env, hash, &base)?;
    let registry = s.opts.registry.as_deref();
    let mut pulled = None;
    if let Some(reg) = registry {
        if s.engine.image(&recipe.tag).await?.is_none() {
            let fetched = s.registries.pull_env(&s.engine, reg, &recipe.tag).await?;
            pulled = s.fetched(fetched);
        }
    }
    let img = match pulled {
        Some(img) => img,
        None => {
            let net = match s.network.get() {
                Some(n) => n.clone(),
                // Nothing to build: decide when a build needs it.
                None if s.engine.image(&recipe.tag).await?.is_some() => None,
                None => s
                    .network
                    .get_or_init(|| choose_network(s, env, &base))
                    .await
                    .clone(),
            };
            let proxy = match &s.packages {
                Some(c) if s.engine.image(&recipe.tag).await?.is_none() => {
                    package_proxy(s, c, &base, net.as_deref()).await
                }
                _ => None,
            };
            let log = s.store.dir.join("images").join(format!("{short}.log"));
            let mut img = build::ensure_env_image(
                &s.engine,
                &recipe,
                hash,
                &base,
                net.as_deref(),
                proxy.as_deref(),
                &log,
            )
            .await?;
            if let Some(reg) = registry {
                share(s, reg, short, &mut img).await?;
            }
            img
        }
    };
    let check = pinned.map(|l| (l, "rebuilt from the lock"));
    finish_image(s, hash, &family, base, img, check, t0, out).await
}

/// Records an image that is ready: its event, its installed packages (and
/// under `--locked` whether they are the locked ones), its lock entry.
#[allow(clippy::too_many_arguments)]
async fn finish_image(
    s: &Shared,
    hash: &str,
    family: &Family,
    base: BaseImage,
    img: EnvImage,
    check: Option<(&LockedEnvironment, &str)>,
    t0: Instant,
    out: &mut RunOutcome,
) -> Result<EnvImage, ImageFailure> {
    let short = crate::digest::short(hash);
    s.events.emit(Event::ImageFinished {
        environment: short.to_string(),
        tag: img.tag.clone(),
        reused: img.reused,
        pulled: img.pulled,
        secs: t0.elapsed().as_secs_f64(),
    });
    let (installed, note) =
        packages::installed_cached(&s.engine, family, &img.tag, &img.id, &s.run_id).await?;
    if let Some(message) = note {
        s.events.emit(Event::Warning { message });
    }
    // Said once, in the command's result (`run`, `repro`), not also as a
    // warning of the live log.
    if let Some((locked, how)) = check {
        out.lock_checks
            .push(lock_check(short, how, &locked.packages, &installed));
    }
    out.locked_envs.insert(
        hash.to_string(),
        LockedEnvironment {
            family: family.profile.family.clone(),
            base,
            image: img.clone(),
            packages: installed,
        },
    );
    Ok(img)
}

/// Puts a built (or reused) image into the registry unless the engine
/// already knows its digest there; the digest goes into the lock.
async fn share(
    s: &Shared,
    registry: &str,
    short: &str,
    img: &mut EnvImage,
) -> Result<(), ImageFailure> {
    if img.reused {
        img.registry = s
            .registries
            .known_digest(&s.engine, registry, &img.tag)
            .await;
        if img.registry.is_some() {
            return Ok(());
        }
    }
    let fetched = s.registries.push_env(&s.engine, registry, &img.tag).await?;
    if let Some(reference) = s.fetched(fetched) {
        s.events.emit(Event::ImagePushed {
            environment: short.to_string(),
            reference: reference.clone(),
        });
        img.registry = Some(reference);
    }
    Ok(())
}

impl Shared {
    /// What cells and builds need of the run.
    fn cell_env(&self) -> CellEnv<'_> {
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

    /// What a registry gave, if anything (see [`Events::fetched`]).
    fn fetched<T>(&self, f: Fetched<T>) -> Option<T> {
        self.events.fetched(f)
    }
}

/// The environment's base image, obtained once per run (present, pulled,
/// bootstrapped or imported) and reused for every environment on it; an
/// environment whose base another one is obtaining waits for it.
async fn obtain_base(
    s: &Shared,
    env: &Environment,
    family: &Family,
) -> Result<BaseImage, ImageFailure> {
    let once = s
        .bases
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(env.base.clone())
        .or_default()
        .clone();
    once.get_or_init(|| provision_base(s, env, family))
        .await
        .clone()
        .map_err(ImageFailure::Base)
}

/// Obtains the base of `env` and says how (its events).
async fn provision_base(
    s: &Shared,
    env: &Environment,
    family: &Family,
) -> Result<BaseImage, Arc<ImageError>> {
    let images = s.store.dir.join("images");
    let log = images.join(format!(
        "base-{}.log",
        crate::spec::cell_id::sanitize(&env.base)
    ));
    let _ = super::blocking("creating images/", move || std::fs::create_dir_all(images)).await;
    let mut share = s.opts.registry.as_deref().map(|registry| BaseShare {
        registries: &s.registries,
        registry,
        unavailable: Vec::new(),
        pushed: None,
    });
    let b = ensure_base(
        &s.engine,
        env,
        &family.profile,
        &s.opts.work_dir,
        &log,
        share.as_mut(),
        s.packages.as_ref().map(AptCache::loopback_proxy).as_deref(),
    )
    .await
    .map_err(Arc::new);
    if let Some(share) = share {
        for (registry, reason) in share.unavailable {
            s.events
                .emit(Event::RegistryUnavailable { registry, reason });
        }
        if let Some(reference) = share.pushed {
            s.events.emit(Event::ImagePushed {
                environment: env.base.clone(),
                reference,
            });
        }
    }
    if let Ok(b) = &b {
        s.events.emit(Event::BaseImage {
            reference: b.reference.clone(),
            outcome: origin_word(&b.origin).into(),
            message: b.origin.describe(&b.reference),
        });
    }
    b
}

/// One line saying whether an environment rebuilt from a lock has the
/// locked package set.
fn lock_check(
    short: &str,
    how: &str,
    locked: &BTreeMap<String, String>,
    installed: &BTreeMap<String, String>,
) -> String {
    let diff = packages::diff(locked, installed);
    if diff.is_empty() {
        format!(
            "environment {short}: {how}; the package set is identical ({} packages)",
            installed.len()
        )
    } else {
        format!(
            "environment {short}: {how}; the package set differs in {} packages:\n  {}",
            diff.len(),
            diff.join("\n  ")
        )
    }
}

/// `env` with every package of the lock pinned at its locked version, after
/// checking in a container of the base image that each pin is still
/// obtainable; the error lists every one that is not.
async fn pinned_environment(
    s: &Shared,
    family: &Family,
    env: &Environment,
    hash: &str,
    base: &BaseImage,
    locked: &LockedEnvironment,
) -> Result<Environment, ImageFailure> {
    let pins: Vec<(String, String)> = locked
        .packages
        .iter()
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    let script = family
        .missing_pins_script(env, &pins)
        .map_err(|e| ImageFailure::Recipe(e.to_string()))?;
    let spec = crate::engine::ContainerSpec {
        name: format!("rocmatrix-{}-pins-{}", s.run_id, crate::digest::short(hash)),
        image: base.reference.clone(),
        labels: crate::engine::labels::owner_labels(&s.run_id, "pins"),
        ..Default::default()
    };
    let id = s.engine.start_container(&spec).await?;
    let checked = s.engine.exec_capture(&id, &["sh", "-c", &script]).await;
    let _ = s.engine.remove_container(&id).await;
    let (_, missing) = checked?;
    let missing: Vec<&str> = missing
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if !missing.is_empty() {
        return Err(ImageError::Pins {
            env: crate::digest::short(hash).to_string(),
            missing: missing.iter().map(|m| m.to_string()).collect(),
        }
        .into());
    }
    let mut pinned = env.clone();
    pinned.packages = pins
        .iter()
        .map(|(n, v)| family.pin(n, v))
        .collect::<Result<_, _>>()
        .map_err(|e| ImageFailure::Recipe(e.to_string()))?;
    Ok(pinned)
}

fn origin_word(o: &crate::image::BaseOrigin) -> &'static str {
    match o {
        crate::image::BaseOrigin::Present { .. } => "present",
        crate::image::BaseOrigin::Pulled => "pulled",
        crate::image::BaseOrigin::Registry { .. } => "registry",
        crate::image::BaseOrigin::Bootstrapped(_) => "bootstrapped",
        crate::image::BaseOrigin::Imported { .. } => "imported",
    }
}

/// The package download cache of this run, in the cache directory, logged to
/// `images/package-cache.log`; when it cannot start, one warning and none.
async fn start_package_cache(store: &RunStore, events: &Events) -> Option<AptCache> {
    if crate::image::aptcache::switched_off() {
        return None;
    }
    let images = store.dir.join("images");
    let _ = tokio::fs::create_dir_all(&images).await;
    let dir = crate::image::aptcache::dir();
    match AptCache::start(dir.clone(), Some(&images.join("package-cache.log"))).await {
        Ok(c) => Some(c),
        Err(e) => {
            events.emit(Event::Warning {
                message: format!(
                    "package cache: cannot start over {} ({e}); downloading everything",
                    dir.display()
                ),
            });
            None
        }
    }
}

/// The proxy URL for builds on `net`, or none (one warning per network).
async fn package_proxy(
    s: &Shared,
    c: &AptCache,
    base: &BaseImage,
    net: Option<&str>,
) -> Option<String> {
    match c.proxy_for(&s.engine, &base.reference, net).await {
        Ok(p) => p,
        Err(why) => {
            s.events.emit(Event::Warning {
                message: format!(
                    "package cache: builds on the {} network cannot use it ({why}); they download everything",
                    net.unwrap_or("bridge")
                ),
            });
            None
        }
    }
}

/// The network mode for builds: as configured, or probed once (`auto`).
async fn choose_network(s: &Shared, env: &Environment, base: &BaseImage) -> Option<String> {
    let choice = match (&s.opts.network, env.network.as_deref()) {
        (NetworkChoice::Auto, Some(n)) => NetworkChoice::parse(n),
        (c, _) => c.clone(),
    };
    match choice {
        NetworkChoice::Bridge => None,
        NetworkChoice::Host => Some("host".into()),
        NetworkChoice::Named(n) => Some(n),
        NetworkChoice::Auto => {
            let mirror = env
                .mirror
                .clone()
                .unwrap_or_else(|| mirror::host_mirror(std::path::Path::new("/etc/apt")));
            let (host, port) = mirror_endpoint(&mirror)?;
            match bridge_reaches(&s.engine, &base.reference, &host, port).await {
                Ok(true) => {
                    s.events.emit(Event::Warning {
                        message: format!("network: containers on the default bridge reach {host}:{port}; building on the bridge"),
                    });
                    None
                }
                Ok(false) => {
                    s.events.emit(Event::Warning {
                        message: format!("network: containers on the default bridge cannot reach {host}:{port}; building with host networking"),
                    });
                    Some("host".into())
                }
                Err(e) => {
                    s.events.emit(Event::Warning {
                        message: format!("network: probing the bridge failed ({e}); building with host networking"),
                    });
                    Some("host".into())
                }
            }
        }
    }
}

/// The record of a cell that could not be judged: an infrastructure error
/// after its retries.
fn errored(
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
        status: Status::Error,
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
    }
}

/// Writes `cells/<id>/cell.json`; a failure is a warning (the cell's
/// outcome is still in the journal and the summary).
async fn write_record(s: &Shared, rec: CellRecord) {
    let store = s.store.clone();
    let id = rec.id.clone();
    let written = super::blocking("writing cell.json", move || store.write_cell(&rec)).await;
    let error = match written {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    };
    s.events.emit(Event::Warning {
        message: format!("cell {id}: cannot write its record: {error}"),
    });
}

/// Starts the task that hands out job slots. Cells arrive on the returned
/// sender in plan order and each one gets its slot before the next asks, so
/// cells start in plan order; spawned tasks would race for the semaphore in
/// whatever order the runtime polls them.
fn start_dispatcher(shared: Arc<Shared>) -> (mpsc::UnboundedSender<Job>, Dispatcher) {
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
            let slot = tokio::select! {
                p = shared.slots.clone().acquire_owned() => p.map_err(|_| NotRun::SchedulerStopped),
                _ = shared.interrupt.fired() => Err(NotRun::stopped(&shared.interrupt)),
            };
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
        s.events.emit(Event::CellNotRun {
            cell: cell.id.clone(),
            reason: reason.to_string(),
        });
        CellResult::NotRun(cell.id.clone(), reason)
    };
    let _permit = match slot {
        Ok(p) => p,
        Err(reason) => return not_run(reason),
    };
    if s.interrupt.is_set() {
        return not_run(NotRun::stopped(&s.interrupt));
    }
    if s.stop.load(Ordering::SeqCst) {
        return not_run(NotRun::FailFast);
    }
    let cx = s.cell_env();
    let t0 = Instant::now();
    let started = now_rfc3339();
    let mut attempt = 1;
    let record = loop {
        let r = tokio::select! {
            r = run_cell(&cx, &cell, &image, built.as_deref(), attempt) => r,
            _ = s.interrupt.fired() => {
                // Cut short by a signal: not run; by a lost engine: an
                // infrastructure error, which resume runs again (its
                // container is left to the next run's sweep: removing it
                // would only wait out the deadline once more).
                let Some(why) = s.interrupt.engine_lost() else {
                    let _ = s.engine.remove_container(&container_name(&s.run_id, &cell.id, attempt)).await;
                    return not_run(NotRun::Interrupted);
                };
                let rec = errored(&cell, &image, why, &started, t0, attempt);
                write_record(&s, rec.clone()).await;
                break rec;
            }
        };
        let lost = match &r {
            Err(_) => super::watchdog::lost(&s.engine, &s.interrupt).await,
            Ok(_) => None,
        };
        match r {
            Ok(rec) => break rec,
            Err(e) if lost.is_none() && e.is_transient() && attempt <= s.opts.retries => {
                s.events.emit(Event::CellRetry {
                    cell: cell.id.clone(),
                    attempt,
                    error: e.to_string(),
                });
                let _ = s
                    .engine
                    .remove_container(&container_name(&s.run_id, &cell.id, attempt))
                    .await;
                attempt += 1;
            }
            Err(e) => {
                if lost.is_none() {
                    let _ = s
                        .engine
                        .remove_container(&container_name(&s.run_id, &cell.id, attempt))
                        .await;
                }
                let why = lost.unwrap_or_else(|| e.to_string());
                let rec = errored(&cell, &image, why, &started, t0, attempt);
                write_record(&s, rec.clone()).await;
                break rec;
            }
        }
    };
    if record.status.is_failure() && s.opts.fail_fast {
        s.stop.store(true, Ordering::SeqCst);
    }
    s.events.emit(Event::CellFinished {
        cell: cell.id.clone(),
        status: record.status,
        reason: record.reason.clone(),
        secs: record.duration_secs,
    });
    CellResult::Done(Box::new(record))
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
        let spec = crate::spec::Spec::parse(std::path::Path::new("m.yaml"), &text).unwrap();
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
    fn the_first_environment_of_each_base_goes_first() {
        let env = |base: &str| {
            let p = plan("");
            let mut e = p.cells[0].environment.clone().unwrap();
            e.base = base.into();
            Some(e)
        };
        let groups = vec![
            ("a".to_string(), env("debian:sid"), ()),
            ("b".to_string(), env("debian:sid"), ()),
            ("c".to_string(), env("debian:trixie"), ()),
            ("d".to_string(), None, ()),
            ("e".to_string(), env("debian:trixie"), ()),
            ("f".to_string(), env("debian:bookworm"), ()),
        ];
        let order: Vec<String> = bases_first(groups).into_iter().map(|g| g.0).collect();
        assert_eq!(order, ["a", "c", "d", "f", "b", "e"]);
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
