//! Sweeping containers that a killed run left behind: a container whose owning process (same host, PID gone) no
//! longer exists is removed at start-up, and so is an intermediate container
//! of an image build whose process is gone (`rocmatrix.builder`).

use crate::engine::labels::hostname;
use crate::engine::LABEL_BUILDER;
use crate::engine::{Engine, EngineError, LABEL_CELL, LABEL_HOST, LABEL_PID, LABEL_RUN};

fn process_alive(pid: &str) -> bool {
    pid.parse::<u32>()
        .is_ok_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
}

/// Removes containers of runs whose process is gone; returns one line per
/// removed container.
pub async fn sweep_orphans(engine: &Engine) -> Result<Vec<String>, EngineError> {
    let me = hostname();
    let mut removed = Vec::new();
    for c in engine.containers_with_label(LABEL_RUN).await? {
        let same_host = c.labels.get(LABEL_HOST).is_some_and(|h| *h == me);
        let pid = c.labels.get(LABEL_PID).cloned().unwrap_or_default();
        if !same_host || process_alive(&pid) {
            continue;
        }
        engine.remove_container(&c.id).await?;
        removed.push(format!(
            "removed container {} of run {} (cell {}): its rocmatrix process {pid} is gone",
            c.name(),
            c.labels.get(LABEL_RUN).map(String::as_str).unwrap_or("?"),
            c.labels.get(LABEL_CELL).map(String::as_str).unwrap_or("?"),
        ));
    }
    // Intermediate containers of image builds whose process is gone.
    for c in engine.containers_with_label(LABEL_BUILDER).await? {
        let owner = c.labels.get(LABEL_BUILDER).cloned().unwrap_or_default();
        let Some((host, pid)) = owner.rsplit_once('/') else {
            continue;
        };
        if host != me || process_alive(pid) {
            continue;
        }
        engine.remove_container(&c.id).await?;
        removed.push(format!(
            "removed container {} of an image build: its rocmatrix process {pid} is gone",
            c.name(),
        ));
    }
    Ok(removed)
}

/// Removes every container of run `run` (used on interrupt and at the end).
pub async fn remove_run_containers(engine: &Engine, run: &str) -> Result<usize, EngineError> {
    let list = engine
        .containers_with_label(&format!("{LABEL_RUN}={run}"))
        .await?;
    let n = list.len();
    for c in list {
        engine.remove_container(&c.id).await?;
    }
    Ok(n)
}
