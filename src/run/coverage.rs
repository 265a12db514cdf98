//! `run --coverage`: the gfx coverage of each environment image. After an
//! environment's image is ready, its libraries are copied out and scanned for
//! offload code, and each is judged against the gfx targets its cells ask for
//! (`gpu.target`, by default `matrix.gfx`) under their policy. The result is
//! `images/<env>.coverage.json` in the run store; the HTML report shows one
//! table per environment.

use std::path::PathBuf;
use std::time::Instant;

use super::RunError;
use crate::bundle::{coverage, scan_paths, Check};
use crate::engine::Engine;
use crate::gpu::compat::policy_name;
use crate::gpu::TargetId;
use crate::image::libraries::{copy_libraries, ScratchDir, DEFAULT_DIRS};
use crate::matrix_file::GpuPolicy;
use crate::plan::Cell;
pub use crate::store::coverage::{EnvironmentCoverage, GfxVerdict, LibraryCoverage, VerdictKind};
use crate::store::RunStore;

/// The name of the stopped container the scan copies files out of.
pub fn container_name(run_id: &str, environment: &str) -> String {
    format!(
        "rocmatrix-{run_id}-coverage-{}",
        crate::digest::short(environment)
    )
}

/// The gfx targets and policy asked for by `cells` (one environment's).
fn wanted(cells: &[&Cell]) -> (Vec<TargetId>, GpuPolicy, Vec<String>) {
    let mut gfx: Vec<TargetId> = Vec::new();
    let mut problems = Vec::new();
    for c in cells {
        let Some(t) = &c.gpu.target else { continue };
        match TargetId::parse(t) {
            Ok(t) if !gfx.contains(&t) => gfx.push(t),
            Ok(_) => {}
            Err(e) => problems.push(format!("cell {}: {e}", c.id)),
        }
    }
    let policy = cells.first().map_or(GpuPolicy::Exact, |c| c.gpu.policy);
    (gfx, policy, problems)
}

/// Scans `image` (environment `environment`, run by `cells`) and writes
/// its coverage into the store. The copy goes through a scratch directory
/// that is removed afterwards.
pub async fn scan_environment(
    engine: &Engine,
    store: &RunStore,
    container: &str,
    environment: &str,
    image: &str,
    cells: &[&Cell],
) -> Result<EnvironmentCoverage, RunError> {
    let t0 = Instant::now();
    let short = crate::digest::short(environment);
    let (gfx, policy, mut problems) = wanted(cells);
    let scratch_dir = store.dir.join("images").join(format!(".coverage-{short}"));
    let create = scratch_dir.clone();
    let scratch = super::blocking("creating a scratch directory", move || {
        ScratchDir::create(create)
    })
    .await?
    .map_err(|e| RunError::io(&scratch_dir, e))?;
    let dirs: Vec<PathBuf> = DEFAULT_DIRS.iter().map(PathBuf::from).collect();
    let found = copy_libraries(engine, image, &dirs, &scratch.0, container).await?;
    let root = scratch.0.clone();
    let targets = gfx.clone();
    let (rows, unreadable) = super::blocking("scanning libraries", move || {
        let mut reports = Vec::new();
        let mut unreadable = Vec::new();
        for r in scan_paths(std::slice::from_ref(&root), Check::Table) {
            match r {
                Ok(r) => reports.push(r),
                Err(e) => unreadable.push(e.to_string().replace(&root.display().to_string(), "")),
            }
        }
        (
            coverage(&reports, &targets, policy, Some(&root)),
            unreadable,
        )
    })
    .await?;
    problems.extend(unreadable);
    let result = EnvironmentCoverage {
        environment: environment.to_string(),
        image: image.to_string(),
        cells: cells.iter().map(|c| c.id.clone()).collect(),
        policy: policy_name(policy).to_string(),
        gfx: gfx.iter().map(ToString::to_string).collect(),
        dirs: found.iter().map(|d| d.display().to_string()).collect(),
        libraries: rows.iter().map(|r| r.stored()).collect(),
        problems,
        secs: t0.elapsed().as_secs_f64(),
    };
    let (store, rel) = (store.clone(), EnvironmentCoverage::store_path(environment));
    super::blocking("writing coverage", move || {
        store.write_json(&rel, &result).map(|()| result)
    })
    .await?
    .map_err(RunError::from)
}
