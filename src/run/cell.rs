//! Running one cell: a container from its environment image, each step with
//! its own log, timeout and JUnit globs (the leading ones from the
//! container's main process, see `main_process`, the rest by exec), and the
//! container removed whatever happens.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::events::Event;
use super::steps::{run_steps, GpuAt, StepsOutcome};
use crate::engine::labels::owner_labels;
use crate::engine::ContainerSpec;
use crate::gpu::gate::GpuGrant;
use crate::matrix_file::GpuUse;
use crate::plan::{Cell, Step};
use crate::step::main_process;
use crate::step::protocol::env_key;
use crate::step::setup::{fresh_dir, prepare_sources, upload_long_scripts};
use crate::step::{blocking, CellEnv, CellError};
use crate::store::now_rfc3339;
use crate::store::record::CellRecord;

/// Runs `cell` in a fresh container of `image` (its environment image, or
/// the snapshot of its build, which holds its sources already). The
/// container is removed before this returns, on every path but
/// cancellation (dropping the future), where the scheduler removes it by
/// label.
/// One piece: one cell's life in order (sources, container, steps, record),
/// each await a step of docs/architecture.md's walk.
pub async fn run_cell(
    cx: &CellEnv<'_>,
    cell: &Cell,
    image: &str,
    built: Option<&crate::build_stage::Built>,
    attempt: u32,
) -> Result<CellRecord, CellError> {
    let started_at = now_rfc3339();
    let t0 = Instant::now();
    let instrumented = crate::step::backtrace::instrument(cell);
    let cell: &Cell = &instrumented;
    let dir = cx.store.cell_dir(&cell.id);
    let logs = fresh_dir(&dir).await?;
    cx.events.emit(Event::CellStarted {
        cell: cell.id.clone(),
        attempt,
    });

    let (grant, gpu_refusal) = lease_gpus(cx, cell).await?;

    let name = container_name(cx.run_id, &cell.id, attempt);
    let spec = container_spec(cx.run_id, cell, image, grant.as_ref(), name);
    // Sources first: a patch that does not apply stops the cell before any
    // container exists. A matrix build's snapshot holds them already; a
    // toolchain's does not.
    let from_build = built.filter(|b| b.record.kind.is_matrix());
    let prepared = match from_build {
        Some(_) => Vec::new(),
        None => prepare_sources(cx, &cell.sources).await?,
    };
    let (notes, hooks) = grant
        .as_ref()
        .map(|g| (g.notes.clone(), g.after_start.clone()))
        .unwrap_or_default();
    let leading = main_process::leading_steps(cell);
    let nonce = crate::step::protocol::nonce();
    let (runner, cmd) = main_command(cell, leading, &hooks, &nonce, gpu_refusal.is_some());
    let container = cx.engine.create_container(&spec, cmd).await?;
    let attached = set_up(cx, cell, &container, &prepared, runner).await?;
    cx.engine.start_created(&container, &spec).await?;
    let per_gpu = grant
        .as_ref()
        .map(|g| g.per_gpu.clone())
        .unwrap_or_default();
    let devices: Vec<String> = grant
        .as_ref()
        .map(|g| g.devices.iter().map(|(_, c)| c.clone()).collect())
        .unwrap_or_default();
    let mut host = cx.gpus.host();
    host.gpus = grant.as_ref().map(|g| g.gpus.clone()).unwrap_or_default();
    let gpu = GpuAt {
        refusal: gpu_refusal.as_deref(),
        per_gpu: &per_gpu,
    };
    let leading = attached.map(|attached| main_process::Leading {
        attached,
        nonce,
        hooks,
        count: leading,
    });
    let mut result = run_steps(cx, cell, &container, &logs, gpu, leading).await;
    if let Ok(out) = &mut result {
        collect_backtraces(cx, cell, &container, &dir, out).await;
    }
    remove_later(cx, container, grant);
    let StepsOutcome {
        steps,
        junit,
        mut messages,
        verdict: (status, reason),
    } = result?;
    messages.splice(0..0, notes);

    let record = CellRecord {
        id: cell.id.clone(),
        values: cell.values.iter().cloned().collect::<BTreeMap<_, _>>(),
        hash: cell.hash.clone(),
        environment_hash: cell.environment_hash.clone(),
        image: Some(image.to_string()),
        status,
        reason,
        started: started_at,
        finished: now_rfc3339(),
        duration_secs: t0.elapsed().as_secs_f64(),
        attempts: attempt,
        steps,
        junit,
        messages,
        sources: match from_build {
            Some(b) => b.record.sources.clone(),
            None => prepared.iter().map(|p| p.locked.clone()).collect(),
        },
        devices,
        build: built.map(|b| b.record.key.clone()),
        host,
    };
    write_record(cx, dir, record).await
}

/// The container's main process: the runner (`src/step/protocol.rs`)
/// when it has leading steps or hook stand-ins to run (either would
/// otherwise cost an exec each), else an idle one; and whether it is the
/// runner. Steps that need a GPU the cell was refused are left out.
fn main_command(
    cell: &Cell,
    leading: usize,
    hooks: &[String],
    nonce: &str,
    gpu_refused: bool,
) -> (bool, Vec<String>) {
    if leading == 0 && hooks.is_empty() {
        return (false, vec!["sleep".into(), "infinity".into()]);
    }
    let steps: Vec<(usize, &Step)> = cell.steps[..leading]
        .iter()
        .enumerate()
        .filter(|(_, s)| !(s.gpu == GpuUse::Required && gpu_refused))
        .collect();
    (
        true,
        crate::step::protocol::runner_command(nonce, hooks, &steps),
    )
}

/// gdb's output of the steps with `backtrace:` into their records; a
/// failure is a message of the cell.
async fn collect_backtraces(
    cx: &CellEnv<'_>,
    cell: &Cell,
    container: &str,
    dir: &std::path::Path,
    out: &mut StepsOutcome,
) {
    let collected = crate::step::backtrace::collect(
        cx,
        &cell.steps,
        container,
        dir,
        &mut out.steps,
        &mut out.messages,
    )
    .await;
    if let Err(e) = collected {
        out.messages.push(format!("backtraces: {e}"));
    }
}

/// Removes the container off the cell's critical path (the scheduler
/// awaits it before the run ends); the GPUs stay leased until it is gone.
fn remove_later(cx: &CellEnv<'_>, container: String, grant: Option<GpuGrant>) {
    let engine = cx.engine.clone();
    let removal = tokio::spawn(async move {
        if let Err(e) = engine.remove_container(&container).await {
            tracing::warn!("{e}");
        }
        drop(grant);
    });
    cx.cleanups
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(removal);
}

/// Fills a created container before it starts: the sources, the step
/// scripts too long to pass inline (usually none: an upload costs the
/// engine more than the step `true` itself); attaches to its output when
/// its main process runs steps. When that fails, the container is removed.
async fn set_up(
    cx: &CellEnv<'_>,
    cell: &Cell,
    container: &str,
    prepared: &[Arc<crate::source::Prepared>],
    attach: bool,
) -> Result<Option<crate::engine::Attached>, CellError> {
    let filled = fill(cx, cell, container, prepared, attach).await;
    if filled.is_err() {
        let _ = cx.engine.remove_container(container).await;
    }
    filled
}

/// [`set_up`]'s work.
async fn fill(
    cx: &CellEnv<'_>,
    cell: &Cell,
    container: &str,
    prepared: &[Arc<crate::source::Prepared>],
    attach: bool,
) -> Result<Option<crate::engine::Attached>, CellError> {
    for p in prepared {
        cx.engine.upload(container, "/", p.tar.clone()).await?;
    }
    upload_long_scripts(cx, container, &cell.steps).await?;
    Ok(match attach {
        true => Some(cx.engine.attach_output(container).await?),
        false => None,
    })
}

/// The cell's GPUs, or why it has none; waiting for a busy GPU blocks.
async fn lease_gpus(
    cx: &CellEnv<'_>,
    cell: &Cell,
) -> Result<(Option<GpuGrant>, Option<String>), CellError> {
    if !cell.wants_gpu() {
        return Ok((None, None));
    }
    let (gpus, id, request) = (cx.gpus.clone(), cell.id.clone(), cell.gpu.clone());
    Ok(
        match blocking("waiting for a GPU", move || gpus.grant(&id, &request)).await? {
            Ok(g) => (Some(g), None),
            Err(refusal) => (None, Some(refusal.to_string())),
        },
    )
}

/// Writes `cells/<id>/cell.json` and returns the record.
async fn write_record(
    cx: &CellEnv<'_>,
    dir: PathBuf,
    record: CellRecord,
) -> Result<CellRecord, CellError> {
    let store = cx.store.clone();
    blocking("writing cell.json", move || {
        store
            .write_cell(&record)
            .map(|()| record)
            .map_err(|e| CellError::Io {
                path: crate::store::layout::cell_record_in(&dir),
                source: std::io::Error::other(e.to_string()),
            })
    })
    .await?
}

/// The container a cell runs in: its image, labels, the cell's values as
/// `ROCMATRIX_*` variables, the devices, groups and variables of its GPUs,
/// and `SYS_PTRACE` where a step asks for a hang's frames.
pub fn container_spec(
    run_id: &str,
    cell: &Cell,
    image: &str,
    grant: Option<&GpuGrant>,
    name: String,
) -> ContainerSpec {
    let mut env: Vec<String> = vec![format!("ROCMATRIX_CELL={}", cell.id)];
    for (k, v) in &cell.values {
        env.push(format!("ROCMATRIX_{}={v}", env_key(k)));
    }
    ContainerSpec {
        name,
        image: image.to_string(),
        labels: owner_labels(run_id, &cell.id),
        env: env
            .into_iter()
            .chain(grant.iter().flat_map(|g| g.env.clone()))
            .collect(),
        devices: grant.map(|g| g.devices.clone()).unwrap_or_default(),
        group_add: grant.map(|g| g.groups.clone()).unwrap_or_default(),
        binds: grant
            .map(|g| g.binds.clone())
            .unwrap_or_default()
            .into_iter()
            .chain(cell.caches.iter().map(|c| c.bind()))
            .collect(),
        memory_bytes: cell.memory.and_then(|m| i64::try_from(m).ok()),
        cap_add: crate::step::hang::ptrace_caps(&cell.steps),
        ..Default::default()
    }
}

/// Container names are unique per run, cell and attempt.
pub fn container_name(run: &str, cell: &str, attempt: u32) -> String {
    let mut cell = crate::matrix_file::cell_id::sanitize(cell);
    cell.truncate(100);
    format!("rocmatrix-{run}-{cell}-{attempt}")
}
