//! Preparing a run's environments: each base image once (present, pulled,
//! bootstrapped or imported), each environment image once (reused, pulled
//! from a registry, rebuilt from a lock or built), with the run's package
//! cache, its build network and its cache volumes.
//!
//! The one service is [`Preparer`]: "prepare these environments, give me
//! their images". The scheduler (`src/run/scheduler.rs`) asks it for one
//! environment at a time, so that each environment's cells start as soon as
//! its image is ready; [`Preparer::prepare_all`] prepares a set of
//! environments without running anything (what a cluster controller does
//! before it submits cells). What happens is told through [`Report`] as the
//! run's journal [`Event`]s; this room never reaches into `src/run/`.

mod base;
mod image;
mod lock;
mod network;
mod volumes;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::engine::Engine;
use crate::image::aptcache::AptCache;
use crate::image::network::NetworkChoice;
use crate::image::registry::{Fetched, Registries};
use crate::image::{BaseImage, EnvImage, ImageError};
use crate::plan::Environment;
use crate::store::journal::Event;
use crate::store::lock::{Lock, LockedEnvironment};
use crate::store::RunStore;

/// Where a preparation tells what happens (the run's events).
pub trait Report: Send + Sync {
    fn emit(&self, event: Event);
}

/// What a registry gave, if anything; a registry that just failed is
/// reported (once per run: it is not asked again).
fn fetched<T>(report: &dyn Report, f: Fetched<T>) -> Option<T> {
    match f {
        Fetched::Done(t) => Some(t),
        Fetched::Unavailable { registry, reason } => {
            report.emit(Event::RegistryUnavailable { registry, reason });
            None
        }
        Fetched::Missing | Fetched::Skipped => None,
    }
}

/// How environments are prepared.
#[derive(Debug, Clone)]
pub struct PrepareOptions {
    /// Environments (their base and their image) prepared at once.
    pub build_jobs: usize,
    /// Network for image builds.
    pub network: NetworkChoice,
    /// Scratch space for bootstrapping base images.
    pub work_dir: PathBuf,
    /// Rebuild environments with the package versions of this lock.
    pub locked: Option<Arc<Lock>>,
    /// Share environment images through this registry: pull before
    /// building, push after.
    pub registry: Option<String>,
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

/// One environment, ready.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub image: EnvImage,
    /// Its base, image and installed packages (for lock.json).
    pub locked: LockedEnvironment,
    /// Under `--locked`: whether the package set is the locked one, in words.
    pub lock_check: Option<String>,
}

/// Why an environment's image could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
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

/// Prepares the environments of one run: shared by every environment's
/// task, it obtains each base once, probes the build network once and
/// keeps the package cache running while builds use it.
pub struct Preparer {
    engine: Engine,
    store: RunStore,
    run_id: String,
    report: Arc<dyn Report>,
    opts: PrepareOptions,
    /// Which registries failed in this run (each is reported once).
    registries: Registries,
    /// The package download cache, unless it is off or could not start.
    packages: Option<AptCache>,
    /// Environments being prepared at once (`build_jobs`).
    slots: Arc<Semaphore>,
    bases: Mutex<Bases>,
    /// The build network, probed once, when the first build needs it.
    network: tokio::sync::OnceCell<Option<String>>,
}

impl Preparer {
    /// The preparer of run `run_id`, its package cache started.
    pub async fn start(
        engine: &Engine,
        store: &RunStore,
        run_id: &str,
        report: Arc<dyn Report>,
        opts: PrepareOptions,
    ) -> Preparer {
        let packages = network::start_package_cache(store, report.as_ref()).await;
        Preparer {
            engine: engine.clone(),
            store: store.clone(),
            run_id: run_id.to_string(),
            report,
            slots: Arc::new(Semaphore::new(opts.build_jobs.max(1))),
            opts,
            registries: Registries::default(),
            packages,
            bases: Mutex::new(HashMap::new()),
            network: tokio::sync::OnceCell::new(),
        }
    }

    /// A build slot: one of `build_jobs` environments prepared at once.
    /// Take it before [`Preparer::environment`], in the order the
    /// environments should start ([`bases_first`]).
    pub async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().acquire_owned().await.ok()
    }

    /// Prepares one environment (`hash`, for `cells` cells): its base once
    /// per run, the pinned environment under a lock, the image reused,
    /// pulled or built (and pushed), its installed packages. What it uses
    /// is held against a concurrent `images --prune` from now on.
    pub async fn environment(
        &self,
        hash: &str,
        env: Option<&Environment>,
        cells: usize,
    ) -> Result<Prepared, PrepareError> {
        if let Some(e) = env {
            crate::store::roots::hold(&self.store.root(), [e.base.clone()]);
        }
        let prepared = self.image(hash, env, cells).await?;
        crate::store::roots::hold(&self.store.root(), [prepared.image.tag.clone()]);
        Ok(prepared)
    }

    /// Prepares `envs` (hash, environment, cells), `build_jobs` at a time,
    /// the first environment of each base first, and runs nothing else:
    /// each one's outcome, in the order given. Dropping the future stops
    /// the preparations under way.
    pub async fn prepare_all(
        self: &Arc<Self>,
        envs: Vec<(String, Option<Environment>, usize)>,
    ) -> Vec<(String, Result<Prepared, PrepareError>)> {
        let order: Vec<String> = envs.iter().map(|e| e.0.clone()).collect();
        let mut tasks = tokio::task::JoinSet::new();
        for (hash, env, cells) in bases_first(envs) {
            let slot = self.slot().await;
            let me = self.clone();
            tasks.spawn(async move {
                let r = me.environment(&hash, env.as_ref(), cells).await;
                drop(slot);
                (hash, r)
            });
        }
        let mut done: HashMap<String, Result<Prepared, PrepareError>> = HashMap::new();
        while let Some(r) = tasks.join_next().await {
            if let Ok((hash, r)) = r {
                done.insert(hash, r);
            }
        }
        order
            .into_iter()
            .filter_map(|h| done.remove(&h).map(|r| (h, r)))
            .collect()
    }

    /// The registries of this run, for build snapshots shared the same way.
    pub fn registries(&self) -> &Registries {
        &self.registries
    }

    /// The registry environments are shared through, if any.
    pub fn registry(&self) -> Option<&str> {
        self.opts.registry.as_deref()
    }

    /// The bases obtained so far, by reference.
    pub fn bases(&self) -> Vec<BaseImage> {
        let bases = self.bases.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<BaseImage> = bases
            .values()
            .filter_map(|b| b.get()?.clone().ok())
            .collect();
        out.sort_by(|a, b| a.reference.cmp(&b.reference));
        out
    }

    /// Says what the package cache served and stored, if anything.
    pub fn report_package_cache(&self) {
        let Some(c) = &self.packages else { return };
        let st = c.stats();
        if st.hits + st.stored > 0 {
            self.report.emit(Event::Warning {
                message: format!(
                    "package cache: {} files served from {}, {} downloaded into it",
                    st.hits,
                    c.dir().display(),
                    st.stored
                ),
            });
        }
    }

    fn fetched<T>(&self, f: Fetched<T>) -> Option<T> {
        fetched(self.report.as_ref(), f)
    }
}

/// The environments reordered so that the first one on each base comes
/// first (in the given order), then the rest (in order): with fewer build
/// slots than environments, every base starts bootstrapping before a
/// second environment waits on one.
pub fn bases_first<T>(
    groups: Vec<(String, Option<Environment>, T)>,
) -> Vec<(String, Option<Environment>, T)> {
    let mut seen = HashSet::new();
    let (first, rest): (Vec<_>, Vec<_>) = groups
        .into_iter()
        .partition(|(_, env, _)| seen.insert(env.as_ref().map(|e| e.base.clone())));
    first.into_iter().chain(rest).collect()
}

/// A lock's package set as (name, version) pairs.
fn pins(packages: &BTreeMap<String, String>) -> Vec<(String, String)> {
    packages
        .iter()
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_environment_of_each_base_goes_first() {
        let text = "matrix:\n  n: [a]\nenvironment:\n  base: debian:sid\nsteps:\n  - name: t\n    run: 'true'\n";
        let spec = crate::matrix_file::Spec::parse(std::path::Path::new("m.yaml"), text).unwrap();
        let p = crate::plan::Plan::build(&spec, 64).unwrap();
        let env = |base: &str| {
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
}
