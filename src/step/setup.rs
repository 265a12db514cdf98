//! Filling what a step runs in before it starts: the run-store directory of
//! a cell or build made fresh, its sources checked out (and patched) as tar
//! archives, and the step scripts too long to pass inline uploaded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::protocol::{passed_inline, scripts_tar_where};
use super::{blocking, CellEnv, CellError};
use crate::plan::Step;

/// Uploads the scripts of `steps` too long to pass inline to
/// `/rocmatrix/steps/` (usually none).
pub(crate) async fn upload_long_scripts(
    cx: &CellEnv<'_>,
    container: &str,
    steps: &[Step],
) -> Result<(), CellError> {
    if steps.iter().any(|s| !passed_inline(&s.run)) {
        let tar = scripts_tar_where(steps, |s| !passed_inline(&s.run))
            .map_err(|e| CellError::io(Path::new("/rocmatrix/steps"), e))?;
        cx.engine.upload(container, "/", tar).await?;
    }
    Ok(())
}

/// Empties `dir` (what an earlier attempt left) and makes `dir/logs`.
pub(crate) async fn fresh_dir(dir: &Path) -> Result<PathBuf, CellError> {
    let (dir, logs) = (dir.to_path_buf(), dir.join("logs"));
    blocking("creating a run-store directory", move || {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&logs)
            .map(|()| logs.clone())
            .map_err(|e| CellError::io(&logs, e))
    })
    .await?
}

/// `sources` checked out (and patched) as tar archives to upload.
pub(crate) async fn prepare_sources(
    cx: &CellEnv<'_>,
    sources: &[crate::plan::SourceRef],
) -> Result<Vec<Arc<crate::source::Prepared>>, CellError> {
    let mut prepared = Vec::with_capacity(sources.len());
    for src in sources {
        let (sources, src) = (cx.sources.clone(), src.clone());
        prepared.push(blocking("checking out sources", move || sources.prepare(&src)).await??);
    }
    Ok(prepared)
}
