//! The controller prepares the array's environments before it submits it:
//! each environment of the plan is made here once (its base bootstrapped
//! or pulled, its image built or pulled from `--registry`, and pushed
//! there), so that the tasks find their images ready — in this engine on a
//! one-node cluster or a node sharing it, through the registry on the
//! others — instead of every task building the same image at once.
//!
//! An environment that cannot be made here is said in one line and left to
//! the tasks: each still prepares what it lacks, and a failure there is the
//! cell's `error`, as in a local run.

use std::path::Path;
use std::sync::Arc;

use crate::engine::Engine;
use crate::plan::Plan;
use crate::prepare::{PrepareOptions, Preparer, Report};
use crate::store::journal::Event;
use crate::store::RunStore;

/// Progress of the preparation as a local run's plain lines, on stderr.
struct Say {
    quiet: bool,
}

impl Report for Say {
    fn emit(&self, event: Event) {
        if self.quiet {
            return;
        }
        if let Some(line) = crate::run::progress::line(&event) {
            eprintln!("{line}");
        }
    }
}

/// Prepares every environment of `plan` in `engine`, its store under
/// `dir/prepare/` (what holds the images against `images --prune` while
/// it works). Returns one line per environment; without an engine (a
/// login node may have none), one line saying the tasks make them.
pub async fn environments(
    engine: Result<Engine, String>,
    plan: &Plan,
    dir: &Path,
    opts: PrepareOptions,
    quiet: bool,
) -> Result<String, super::ClusterError> {
    let engine = match engine {
        Ok(e) => e,
        Err(e) => {
            return Ok(format!(
                "slurm: no container engine on this machine ({e}): the tasks prepare their \
                 environments themselves\n"
            ))
        }
    };
    let store = RunStore::create(&dir.join("prepare"), "controller")?;
    let preparer = Arc::new(
        Preparer::start(&engine, &store, "controller", Arc::new(Say { quiet }), opts).await,
    );
    let envs: Vec<_> = plan
        .environments()
        .into_iter()
        .map(|(hash, env, cells)| (hash.to_string(), Some(env.clone()), cells.len()))
        .collect();
    let mut text = String::new();
    for (hash, r) in preparer.prepare_all(envs).await {
        let short = crate::digest::short(&hash);
        match r {
            Ok(p) => text.push_str(&format!(
                "slurm: environment {short} ready for the tasks: {}\n",
                p.image.tag
            )),
            Err(e) => text.push_str(&format!(
                "slurm: environment {short} could not be prepared here ({e}); its tasks \
                 prepare it themselves\n"
            )),
        }
    }
    Ok(text)
}
