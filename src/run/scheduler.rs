//! The scheduler: environment images first (each base provisioned once,
//! each environment built once, in plan order), and each environment's cells
//! as soon as its image is ready, `jobs` at a time, started in plan order.
//! Infrastructure errors are retried up to `retries` times; test failures
//! never are.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::cell::{container_name, run_cell, CellEnv};
use super::events::{Event, Events};
use super::gpu_gate::GpuGate;
use super::signals::Interrupt;
use crate::engine::Engine;
use crate::image::network::{bridge_reaches, mirror_endpoint, NetworkChoice};
use crate::image::{build, ensure_base, mirror, packages, BaseImage, EnvImage, Family, ImageError};
use crate::plan::{Cell, Environment};
use crate::store::lock::{Lock, LockedEnvironment};
use crate::store::record::{CellRecord, Status};
use crate::store::{now_rfc3339, RunStore};

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Cells run at once.
    pub jobs: usize,
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
    sources: crate::source::Sources,
    cleanups: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// The dispatcher task; it yields every cell task's result once its sender drops.
type Dispatcher = tokio::task::JoinHandle<Vec<Result<CellResult, tokio::task::JoinError>>>;

enum CellResult {
    Done(Box<CellRecord>),
    NotRun(String, String),
}

/// Runs `cells` (all of one plan) and returns their outcome.
#[allow(clippy::too_many_arguments)]
pub async fn execute(
    engine: &Engine,
    store: &RunStore,
    run_id: &str,
    cells: Vec<Cell>,
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
        sources: crate::source::Sources::new(&crate::dirs::cache_dir()),
        cleanups: std::sync::Mutex::new(Vec::new()),
    });
    let mut out = RunOutcome::default();
    let mut groups: Vec<(String, Option<Environment>, Vec<Cell>)> = Vec::new();
    for c in cells {
        match groups.iter_mut().find(|(h, _, _)| *h == c.environment_hash) {
            Some((_, _, v)) => v.push(c),
            None => groups.push((c.environment_hash.clone(), c.environment.clone(), vec![c])),
        }
    }

    let (ready, dispatcher) = start_dispatcher(shared.clone());
    let mut bases: HashMap<String, Result<BaseImage, String>> = HashMap::new();
    let mut network: Option<Option<String>> = None;
    for (hash, env, group) in groups {
        let short = crate::digest::short(&hash).to_string();
        if interrupt.is_set() {
            for c in group {
                out.not_run.push((c.id, "interrupted".into()));
            }
            continue;
        }
        let image = tokio::select! {
            r = prepare_image(&shared, &hash, env.as_ref(), group.len(), &mut bases, &mut network, &mut out) => r,
            _ = interrupt.fired() => Err("interrupted".to_string()),
        };
        match image {
            Ok(img) => {
                let tag = img.tag.clone();
                out.images.insert(hash.clone(), img);
                for c in group {
                    // The dispatcher outlives this loop; it only stops once `ready` drops.
                    let _ = ready.send((c, tag.clone()));
                }
            }
            Err(e) => {
                if e != "interrupted" {
                    shared.events.emit(Event::ImageFailed {
                        environment: short.clone(),
                        error: e.clone(),
                    });
                    out.image_errors.push(format!("environment {short}: {e}"));
                }
                for c in group {
                    let reason = if e == "interrupted" {
                        "interrupted".to_string()
                    } else {
                        format!("environment {short} could not be made (see the image error)")
                    };
                    shared.events.emit(Event::CellNotRun {
                        cell: c.id.clone(),
                        reason: reason.clone(),
                    });
                    out.not_run.push((c.id, reason));
                }
            }
        }
    }
    drop(ready);
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
            Ok(CellResult::NotRun(id, reason)) => out.not_run.push((id, reason)),
            Err(e) => out.image_errors.push(format!("a cell task failed: {e}")),
        }
    }
    let pending: Vec<_> =
        std::mem::take(&mut *shared.cleanups.lock().unwrap_or_else(|p| p.into_inner()));
    for removal in pending {
        let _ = removal.await;
    }
    crate::store::usage::record(
        &out.images
            .values()
            .map(|i| i.tag.clone())
            .collect::<Vec<_>>(),
    );
    out.interrupted = interrupt.is_set();
    if out.interrupted {
        let _ = super::sweep::remove_run_containers(engine, run_id).await;
    }
    out.bases = bases.into_values().filter_map(Result::ok).collect();
    out.bases.sort_by(|a, b| a.reference.cmp(&b.reference));
    out
}

async fn prepare_image(
    s: &Shared,
    hash: &str,
    env: Option<&Environment>,
    cells: usize,
    bases: &mut HashMap<String, Result<BaseImage, String>>,
    network: &mut Option<Option<String>>,
    out: &mut RunOutcome,
) -> Result<EnvImage, String> {
    let short = crate::digest::short(hash);
    let env = env.ok_or("the matrix file has no `environment:` section")?;
    let family = Family::get(&env.family).map_err(|e| e.to_string())?;
    s.events.emit(Event::ImageStarted {
        environment: short.to_string(),
        cells,
    });
    let t0 = Instant::now();
    let base = match bases.get(&env.base) {
        Some(b) => b.clone(),
        None => {
            let log = s.store.dir.join("images").join(format!(
                "base-{}.log",
                crate::spec::cell_id::sanitize(&env.base)
            ));
            let _ = std::fs::create_dir_all(s.store.dir.join("images"));
            let b = ensure_base(
                &s.engine,
                env,
                &family.profile.bootstrap,
                &s.opts.work_dir,
                &log,
            )
            .await
            .map_err(|e| e.to_string());
            if let Ok(b) = &b {
                s.events.emit(Event::BaseImage {
                    reference: b.reference.clone(),
                    outcome: origin_word(&b.origin).into(),
                    message: b.origin.describe(&b.reference),
                });
            }
            bases.insert(env.base.clone(), b.clone());
            b
        }
    }?;
    let pinned = s
        .opts
        .locked
        .as_ref()
        .and_then(|l| l.environments.get(hash));
    let build_env = match pinned {
        Some(locked) => pinned_environment(s, &family, env, hash, &base, locked).await?,
        None => env.clone(),
    };
    let recipe = build::recipe(&family, &build_env, hash, &base).map_err(|e| e.to_string())?;
    let net = match network {
        Some(n) => n.clone(),
        // Nothing to build: decide when a build needs it.
        None if s
            .engine
            .image(&recipe.tag)
            .await
            .map_err(|e| e.to_string())?
            .is_some() =>
        {
            None
        }
        None => {
            let chosen = choose_network(s, env, &base).await;
            *network = Some(chosen.clone());
            chosen
        }
    };
    let log = s.store.dir.join("images").join(format!("{short}.log"));
    let img = build::ensure_env_image(&s.engine, &recipe, hash, &base, net.as_deref(), &log)
        .await
        .map_err(|e| e.to_string())?;
    s.events.emit(Event::ImageFinished {
        environment: short.to_string(),
        tag: img.tag.clone(),
        reused: img.reused,
        secs: t0.elapsed().as_secs_f64(),
    });
    let installed = packages::installed(&s.engine, &family, &img.tag, &s.run_id)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(locked) = pinned {
        let diff = packages::diff(&locked.packages, &installed);
        let line = if diff.is_empty() {
            format!("environment {short}: rebuilt from the lock; the package set is identical ({} packages)", installed.len())
        } else {
            format!(
                "environment {short}: rebuilt from the lock; the package set differs in {} packages:\n  {}",
                diff.len(),
                diff.join("\n  ")
            )
        };
        s.events.emit(Event::Warning {
            message: line.clone(),
        });
        out.lock_checks.push(line);
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
) -> Result<Environment, String> {
    let pins: Vec<(String, String)> = locked
        .packages
        .iter()
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    let script = family
        .missing_pins_script(&pins)
        .map_err(|e| e.to_string())?;
    let spec = crate::engine::ContainerSpec {
        name: format!("rocmatrix-{}-pins-{}", s.run_id, crate::digest::short(hash)),
        image: base.reference.clone(),
        labels: crate::engine::labels::owner_labels(&s.run_id, "pins"),
        ..Default::default()
    };
    let id = s
        .engine
        .start_container(&spec)
        .await
        .map_err(|e| e.to_string())?;
    let checked = s.engine.exec_capture(&id, &["sh", "-c", &script]).await;
    let _ = s.engine.remove_container(&id).await;
    let (_, missing) = checked.map_err(|e| e.to_string())?;
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
        .to_string());
    }
    let mut pinned = env.clone();
    pinned.packages = pins
        .iter()
        .map(|(n, v)| family.pin(n, v).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    Ok(pinned)
}

fn origin_word(o: &crate::image::BaseOrigin) -> &'static str {
    match o {
        crate::image::BaseOrigin::Present { .. } => "present",
        crate::image::BaseOrigin::Pulled => "pulled",
        crate::image::BaseOrigin::Bootstrapped(_) => "bootstrapped",
        crate::image::BaseOrigin::Imported { .. } => "imported",
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

/// Starts the task that hands out job slots. Cells arrive on the returned
/// sender in plan order and each one gets its slot before the next asks, so
/// cells start in plan order; spawned tasks would race for the semaphore in
/// whatever order the runtime polls them.
fn start_dispatcher(shared: Arc<Shared>) -> (mpsc::UnboundedSender<(Cell, String)>, Dispatcher) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Cell, String)>();
    let handle = tokio::spawn(async move {
        let mut tasks: JoinSet<CellResult> = JoinSet::new();
        while let Some((cell, image)) = rx.recv().await {
            let slot = tokio::select! {
                p = shared.slots.clone().acquire_owned() => p.map_err(|_| "the scheduler stopped"),
                _ = shared.interrupt.fired() => Err("interrupted"),
            };
            tasks.spawn(run_one(shared.clone(), cell, image, slot));
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
    slot: Result<OwnedSemaphorePermit, &'static str>,
) -> CellResult {
    let not_run = |reason: &str| {
        s.events.emit(Event::CellNotRun {
            cell: cell.id.clone(),
            reason: reason.to_string(),
        });
        CellResult::NotRun(cell.id.clone(), reason.to_string())
    };
    let _permit = match slot {
        Ok(p) => p,
        Err(reason) => return not_run(reason),
    };
    if s.interrupt.is_set() {
        return not_run("interrupted");
    }
    if s.stop.load(Ordering::SeqCst) {
        return not_run("fail_fast: an earlier cell failed");
    }
    let cx = CellEnv {
        engine: &s.engine,
        store: &s.store,
        run_id: &s.run_id,
        events: &s.events,
        gpus: s.gpus.as_ref(),
        sources: &s.sources,
        cleanups: &s.cleanups,
    };
    let t0 = Instant::now();
    let started = now_rfc3339();
    let mut attempt = 1;
    let record = loop {
        let r = tokio::select! {
            r = run_cell(&cx, &cell, &image, attempt) => r,
            _ = s.interrupt.fired() => {
                let _ = s.engine.remove_container(&container_name(&s.run_id, &cell.id, attempt)).await;
                return not_run("interrupted");
            }
        };
        match r {
            Ok(rec) => break rec,
            Err(e) if e.is_transient() && attempt <= s.opts.retries => {
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
                let _ = s
                    .engine
                    .remove_container(&container_name(&s.run_id, &cell.id, attempt))
                    .await;
                let rec = CellRecord {
                    id: cell.id.clone(),
                    values: cell.values.iter().cloned().collect(),
                    hash: cell.hash.clone(),
                    environment_hash: cell.environment_hash.clone(),
                    image: Some(image.clone()),
                    status: Status::Error,
                    reason: Some(e.to_string()),
                    started: started.clone(),
                    finished: now_rfc3339(),
                    duration_secs: t0.elapsed().as_secs_f64(),
                    attempts: attempt,
                    steps: Vec::new(),
                    junit: Vec::new(),
                    messages: Vec::new(),
                    sources: Vec::new(),
                };
                if let Err(w) = s
                    .store
                    .write_json(&format!("cells/{}/cell.json", cell.id), &rec)
                {
                    s.events.emit(Event::Warning {
                        message: format!("cell {}: cannot write its record: {w}", cell.id),
                    });
                }
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
