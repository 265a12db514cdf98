//! Running one cell: a container from its environment image, each step with
//! its own log, timeout and JUnit globs (the leading ones from the
//! container's main process, see `main_process`, the rest by exec), and the
//! container removed whatever happens.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::events::{Event, Events};
use super::gpu_gate::{GpuGate, GpuGrant};
use super::main_process;
use super::step_reruns;
use crate::engine::labels::owner_labels;
use crate::engine::{ContainerSpec, Engine, EngineError, ExecOutcome};
use crate::image::untar;
use crate::plan::{Cell, Step};
use crate::spec::GpuUse;
use crate::store::record::{CellRecord, Status, StepRecord};
use crate::store::{now_rfc3339, RunStore};
use crate::suite::{SuiteContext, SuiteError};

/// Exit code a step uses to say "skipped" (as Debian's ROCm test launcher does).
pub const EXIT_SKIPPED: i64 = 77;
/// Bytes of log kept in memory for the tail.
const TAIL_BYTES: usize = 64 * 1024;
/// Lines of log kept in the record.
const TAIL_LINES: usize = 40;
/// Largest JUnit archive copied out of a container.
pub(super) const MAX_JUNIT_ARCHIVE: u64 = 256 * 1024 * 1024;
/// Longest step script passed to bash as an argument: Linux takes at most
/// 128 KiB in one argument (`MAX_ARG_STRLEN`, its terminating NUL included).
const INLINE_SCRIPT_MAX: usize = 128 * 1024 - 1;

/// What a cell needs from the run around it.
pub struct CellEnv<'a> {
    pub engine: &'a Engine,
    pub store: &'a RunStore,
    pub run_id: &'a str,
    pub events: &'a Events,
    pub gpus: &'a Arc<dyn GpuGate>,
    pub sources: &'a Arc<crate::source::Sources>,
    /// Removals of finished cells' containers, awaited by the scheduler
    /// before the run ends (removing is off the cells' critical path).
    pub cleanups: &'a std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Why a cell could not be judged.
#[derive(Debug, thiserror::Error)]
pub enum CellError {
    #[error(transparent)]
    Source(#[from] crate::source::SourceError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: cancelled (rocmatrix is shutting down)")]
    Cancelled(&'static str),
}

impl From<SuiteError> for CellError {
    fn from(e: SuiteError) -> Self {
        match e {
            SuiteError::Engine(e) => CellError::Engine(e),
            SuiteError::Io { path, source } => CellError::Io { path, source },
        }
    }
}

/// `run::blocking` for the cell's own work.
pub(super) async fn blocking<T, F>(what: &'static str, work: F) -> Result<T, CellError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    super::blocking(what, work)
        .await
        .map_err(|_| CellError::Cancelled(what))
}

impl CellError {
    pub(super) fn io(path: &Path, source: std::io::Error) -> Self {
        CellError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn is_transient(&self) -> bool {
        match self {
            CellError::Engine(e) => e.is_transient(),
            CellError::Io { .. } | CellError::Source(_) | CellError::Cancelled(_) => false,
        }
    }
}

/// Runs `cell` in a fresh container of `image` (its environment image, or
/// the snapshot of its build, which holds its sources already). The
/// container is removed before this returns, on every path but
/// cancellation (dropping the future), where the scheduler removes it by
/// label.
pub async fn run_cell(
    cx: &CellEnv<'_>,
    cell: &Cell,
    image: &str,
    built: Option<&super::build_stage::Built>,
    attempt: u32,
) -> Result<CellRecord, CellError> {
    let started_at = now_rfc3339();
    let t0 = Instant::now();
    let instrumented = super::backtrace::instrument(cell);
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
    // The runner is the main process when it has steps or hook stand-ins
    // to run: either would otherwise cost an exec each.
    let runner = leading > 0 || !hooks.is_empty();
    let nonce = main_process::nonce();
    let cmd = if runner {
        let steps: Vec<(usize, &Step)> = cell.steps[..leading]
            .iter()
            .enumerate()
            .filter(|(_, s)| !(s.gpu == GpuUse::Required && gpu_refusal.is_some()))
            .collect();
        main_process::runner_command(&nonce, &hooks, &steps)
    } else {
        vec!["sleep".into(), "infinity".into()]
    };
    let container = cx.engine.create_container(&spec, cmd).await?;
    let attached = match set_up(cx, cell, &container, &prepared, runner).await {
        Ok(a) => a,
        Err(e) => {
            let _ = cx.engine.remove_container(&container).await;
            return Err(e);
        }
    };
    cx.engine.start_created(&container, &spec).await?;
    let per_gpu = grant
        .as_ref()
        .map(|g| g.per_gpu.clone())
        .unwrap_or_default();
    let devices: Vec<String> = grant
        .as_ref()
        .map(|g| g.devices.iter().map(|(_, c)| c.clone()).collect())
        .unwrap_or_default();
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
        if let Err(e) = super::backtrace::collect(
            cx,
            cell,
            &container,
            &dir,
            &mut out.steps,
            &mut out.messages,
        )
        .await
        {
            out.messages.push(format!("backtraces: {e}"));
        }
    }
    // The GPUs stay leased until the container is gone.
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
    };
    write_record(cx, dir, record).await
}

/// Fills a created container before it starts: the sources, the step
/// scripts too long to pass inline (usually none: an upload costs the
/// engine more than the step `true` itself); attaches to its output when
/// its main process runs steps.
async fn set_up(
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

/// Uploads the scripts of `steps` too long to pass inline to
/// `/rocmatrix/steps/` (usually none).
pub(super) async fn upload_long_scripts(
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
pub(super) async fn fresh_dir(dir: &Path) -> Result<PathBuf, CellError> {
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
pub(super) async fn prepare_sources(
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

struct StepsOutcome {
    steps: Vec<StepRecord>,
    junit: Vec<String>,
    messages: Vec<String>,
    verdict: (Status, Option<String>),
}

/// The container a cell runs in: its image, labels, the cell's values as
/// `ROCMATRIX_*` variables, and the devices, groups and variables of its GPUs.
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
        ..Default::default()
    }
}

/// What the cell got of GPUs: why none, or the variables of each.
#[derive(Clone, Copy)]
struct GpuAt<'a> {
    refusal: Option<&'a str>,
    per_gpu: &'a [Vec<String>],
}

/// What a cell's steps have come to so far: their records, JUnit files and
/// messages, and the step that stopped the cell, if one did.
#[derive(Default)]
pub(super) struct Progress {
    pub(super) records: Vec<StepRecord>,
    pub(super) junit: Vec<String>,
    pub(super) messages: Vec<String>,
    stop: Option<String>,
    verdict: Option<(Status, String)>,
    pub(super) ooms_seen: u64,
}

impl Progress {
    /// Why `step` does not run, if it does not: an earlier step stopped the
    /// cell, or it needs a GPU the cell was refused.
    pub(super) fn skip_reason(&self, step: &Step, gpu_refusal: Option<&str>) -> Option<String> {
        match (&self.stop, step.gpu, gpu_refusal) {
            (Some(why), _, _) => Some(why.clone()),
            (None, GpuUse::Required, Some(why)) => Some(format!("needs a GPU: {why}")),
            _ => None,
        }
    }

    /// Adds a step's record; a step that stops the cell decides its verdict.
    pub(super) fn push(&mut self, step: &Step, record: StepRecord) {
        if let Some(what) = stops_the_cell(record.status, step) {
            self.stop = Some(format!("step `{}` {what}", step.name));
            self.verdict = Some((
                record.status,
                format!(
                    "step `{}`: {}",
                    step.name,
                    record.reason.clone().unwrap_or_default()
                ),
            ));
        }
        self.records.push(record);
    }
}

/// Runs the cell's steps in order in `container`: the leading ones from its
/// main process when `leading` says so, the rest by exec, each with its own
/// log, timeout and JUnit files; a step that stops the cell makes the rest
/// skipped with the reason.
async fn run_steps(
    cx: &CellEnv<'_>,
    cell: &Cell,
    container: &str,
    logs: &Path,
    gpu: GpuAt<'_>,
    leading: Option<main_process::Leading>,
) -> Result<StepsOutcome, CellError> {
    let gpu_refusal = gpu.refusal;
    let dir = logs.parent().unwrap_or(logs).to_path_buf();
    let mut p = Progress::default();
    let first = match leading {
        Some(l) => {
            let count = l.count;
            main_process::run_leading(cx, cell, container, &dir, gpu_refusal, l, &mut p).await?;
            count
        }
        None => 0,
    };
    for (i, step) in cell.steps.iter().enumerate().skip(first) {
        if let Some(reason) = p.skip_reason(step, gpu_refusal) {
            let record = skip_step(cx, cell, i, step, &dir, reason).await?;
            p.records.push(record);
            continue;
        }
        let at = StepAt {
            container,
            index: i,
            step,
            cell_dir: &dir,
            per_gpu: gpu.per_gpu,
        };
        let (record, suite_junit, reran) = run_step(cx, cell, &at, &mut p.ooms_seen).await?;
        p.junit.extend(suite_junit);
        if let Some(reran) = reran {
            p.junit.extend(reran.files);
            p.messages.extend(reran.messages);
        } else if record.status != Status::Timeout && !step.junit.is_empty() {
            let dest = dir.join("junit").join(step_slug(i, &step.name));
            let (files, msgs) =
                collect_junit(cx.engine, container, &step.junit, &dest, &dir).await?;
            p.junit.extend(files);
            p.messages.extend(msgs);
        }
        p.push(step, record);
    }
    // A cell that needs a GPU and got none did not test what it is for,
    // whatever its GPU-free steps did.
    let refused = (cell.gpu.need == GpuUse::Required)
        .then_some(gpu_refusal)
        .flatten();
    let verdict = cell_status(p.verdict, &p.records, refused);
    Ok(StepsOutcome {
        steps: p.records,
        junit: p.junit,
        messages: p.messages,
        verdict,
    })
}

/// Where a step runs: its container, its place in the cell, the cell's
/// directory in the run store.
pub(super) struct StepAt<'a> {
    pub(super) container: &'a str,
    pub(super) index: usize,
    pub(super) step: &'a Step,
    pub(super) cell_dir: &'a Path,
    per_gpu: &'a [Vec<String>],
}

/// Records a step that does not run, with the reason in its log.
pub(super) async fn skip_step(
    cx: &CellEnv<'_>,
    cell: &Cell,
    index: usize,
    step: &Step,
    cell_dir: &Path,
    reason: String,
) -> Result<StepRecord, CellError> {
    let (dir, name) = (cell_dir.to_path_buf(), step.name.clone());
    let record = blocking("writing a step log", move || {
        not_run_step(&dir, index, &name, reason)
    })
    .await??;
    cx.events.emit(Event::StepFinished {
        cell: cell.id.clone(),
        step: step.name.clone(),
        status: Status::Skipped,
        exit_code: None,
        secs: 0.0,
    });
    Ok(record)
}

/// The record of step `index` (`name`) of a cell or build in `dir` that
/// did not run, its log saying why.
pub(super) fn not_run_step(
    dir: &Path,
    index: usize,
    name: &str,
    reason: String,
) -> Result<StepRecord, CellError> {
    let log = format!("logs/{}.log", step_slug(index, name));
    let path = dir.join(&log);
    std::fs::write(&path, format!("rocmatrix: step not run: {reason}\n"))
        .map_err(|e| CellError::io(&path, e))?;
    Ok(StepRecord {
        name: name.to_string(),
        status: Status::Skipped,
        exit_code: None,
        duration_secs: 0.0,
        log,
        reason: Some(reason),
        log_tail: String::new(),
        backtrace: None,
    })
}

/// Runs one step by exec, its output streamed into its log, and judges how
/// it ended; then its test suite, if it has one and the script passed.
/// `ooms_seen` tells a new out-of-memory kill from an old one. Returns the
/// record, the suite's JUnit file (relative to the cell directory) and, for
/// a step with `rerun_failures:`, its JUnit collected with its reruns.
async fn run_step(
    cx: &CellEnv<'_>,
    cell: &Cell,
    at: &StepAt<'_>,
    ooms_seen: &mut u64,
) -> Result<(StepRecord, Option<String>, Option<step_reruns::Reran>), CellError> {
    let (step, slug) = (at.step, step_slug(at.index, &at.step.name));
    let mut open = OpenStep::begin(cx, cell, at.index, step, at.cell_dir).await?;
    let (log, t) = (&mut open.log, open.started);
    let env = vec![format!("ROCMATRIX_STEP={}", step.name)];
    let (mut status, mut exit_code, mut reason) = if step.run.trim().is_empty() {
        (Status::Passed, None, None)
    } else {
        let cmd = step_command(&slug, &step.run);
        let outcome = cx
            .engine
            .exec(
                at.container,
                cmd,
                env.clone(),
                &mut |b: &[u8]| log.write(b),
                Some(step.timeout),
            )
            .await?;
        judge_exec(cx.engine, at.container, outcome, step, log, ooms_seen).await?
    };
    let mut reran = None;
    if step.rerun_failures > 0 && status != Status::Timeout {
        let r = step_reruns::run_again_while_failing(
            cx,
            at,
            log,
            (status, exit_code, reason),
            ooms_seen,
        )
        .await?;
        (status, exit_code, reason) = r.judged.clone();
        reran = Some(r);
    }
    let mut suite_junit = None;
    if let (Some(suite), Status::Passed) = (&step.suite, status) {
        let remaining = step.timeout.saturating_sub(t.elapsed());
        let sc = SuiteContext {
            engine: cx.engine,
            container: at.container,
            slug: &slug,
            junit_dir: at.cell_dir.join("junit").join(&slug),
            step_timeout: remaining,
            per_gpu: at.per_gpu,
            env,
            backtrace: at.step.backtrace.as_ref(),
        };
        let judged = run_suite(&sc, suite, log).await?;
        (status, exit_code, reason) = (judged.0, None, judged.1);
        suite_junit = judged.2.and_then(|p| {
            p.strip_prefix(at.cell_dir)
                .ok()
                .map(|r| r.to_string_lossy().into_owned())
        });
    }
    let record = open
        .finish(cx, cell, step, (status, exit_code, reason))
        .await?;
    Ok((record, suite_junit, reran))
}

/// A step under way: its log open, its start reported.
pub(super) struct OpenStep {
    pub(super) log: StepLog,
    log_rel: String,
    pub(super) started: Instant,
    cell_dir: PathBuf,
}

impl OpenStep {
    /// Reports step `index` of `cell` started and opens its log.
    pub(super) async fn begin(
        cx: &CellEnv<'_>,
        cell: &Cell,
        index: usize,
        step: &Step,
        cell_dir: &Path,
    ) -> Result<OpenStep, CellError> {
        cx.events.emit(Event::StepStarted {
            cell: cell.id.clone(),
            step: step.name.clone(),
            index: index + 1,
            total: cell.steps.len(),
        });
        let started = Instant::now();
        let log_rel = format!("logs/{}.log", step_slug(index, &step.name));
        let path = cell_dir.join(&log_rel);
        let create = path.clone();
        let log = blocking("creating a step log", move || StepLog::create(&create))
            .await?
            .map_err(|e| CellError::io(&path, e))?;
        Ok(OpenStep {
            log,
            log_rel,
            started,
            cell_dir: cell_dir.to_path_buf(),
        })
    }

    /// Closes the log, reports the step finished and makes its record.
    pub(super) async fn finish(
        self,
        cx: &CellEnv<'_>,
        cell: &Cell,
        step: &Step,
        (status, exit_code, reason): (Status, Option<i64>, Option<String>),
    ) -> Result<StepRecord, CellError> {
        let path = self.cell_dir.join(&self.log_rel);
        let log = self.log;
        let tail = blocking("closing a step log", move || log.finish())
            .await?
            .map_err(|e| CellError::io(&path, e))?;
        let secs = self.started.elapsed().as_secs_f64();
        cx.events.emit(Event::StepFinished {
            cell: cell.id.clone(),
            step: step.name.clone(),
            status,
            exit_code,
            secs,
        });
        Ok(StepRecord {
            name: step.name.clone(),
            status,
            exit_code,
            duration_secs: secs,
            log: self.log_rel,
            reason,
            log_tail: tail,
            backtrace: None,
        })
    }
}

/// Runs a step's suite through its adapter: the step's status, reason and
/// the JUnit file the adapter wrote.
async fn run_suite(
    sc: &SuiteContext<'_>,
    suite: &crate::plan::TestSuite,
    log: &mut StepLog,
) -> Result<(Status, Option<String>, Option<PathBuf>), CellError> {
    let mut write = |b: &[u8]| log.write(b);
    let shared = std::sync::Mutex::new(&mut write as &mut (dyn FnMut(&[u8]) + Send));
    let outcome = crate::suite::run(sc, suite, &shared).await?;
    let summary = outcome.summary();
    let text = format!("rocmatrix: {summary}\n");
    (*shared.lock().unwrap_or_else(|p| p.into_inner()))(text.as_bytes());
    let (status, reason) = if let Some(problem) = outcome.problem {
        (Status::Failed, Some(problem))
    } else if outcome.step_timed_out {
        (
            Status::Timeout,
            Some(format!(
                "timed out after {} s ({summary})",
                sc.step_timeout.as_secs()
            )),
        )
    } else if outcome.failures() > 0 {
        (Status::Failed, Some(summary))
    } else {
        (Status::Passed, None)
    };
    Ok((status, reason, outcome.junit))
}

/// A step's status, exit code and reason from how its exec ended: 0 passed,
/// 77 skipped, 137 an out-of-memory kill (when the cgroup counted a new one)
/// or SIGKILL, a timeout kills the container.
pub(super) async fn judge_exec(
    engine: &Engine,
    container: &str,
    outcome: ExecOutcome,
    step: &Step,
    log: &mut StepLog,
    ooms_seen: &mut u64,
) -> Result<(Status, Option<i64>, Option<String>), CellError> {
    Ok(match outcome {
        ExecOutcome::Exited(code) => {
            let kills = match code {
                137 => oom_kills(engine, container).await,
                _ => 0,
            };
            judge_exit(code, kills, ooms_seen)
        }
        ExecOutcome::TimedOut => {
            log.note(&timed_out_note(step));
            engine.kill_container(container).await?;
            timed_out(step)
        }
    })
}

/// A timed-out step's line in its log.
pub(super) fn timed_out_note(step: &Step) -> String {
    format!(
        "\nrocmatrix: step timed out after {} s; container killed\n",
        step.timeout.as_secs()
    )
}

/// A timed-out step's status and reason.
pub(super) fn timed_out(step: &Step) -> (Status, Option<i64>, Option<String>) {
    (
        Status::Timeout,
        None,
        Some(format!("timed out after {} s", step.timeout.as_secs())),
    )
}

/// A step's status, exit code and reason from its exit code: 0 passed, 77
/// skipped, 137 an out-of-memory kill when the cgroup's count of them
/// (`oom_kills`) grew past `ooms_seen`, else SIGKILL; anything else failed.
pub(super) fn judge_exit(
    code: i64,
    oom_kills: u64,
    ooms_seen: &mut u64,
) -> (Status, Option<i64>, Option<String>) {
    match code {
        0 => (Status::Passed, Some(0), None),
        EXIT_SKIPPED => (
            Status::Skipped,
            Some(EXIT_SKIPPED),
            Some("exit 77: skipped".to_string()),
        ),
        137 if oom_kills > *ooms_seen => {
            *ooms_seen = oom_kills;
            (
                Status::Oom,
                Some(137),
                Some("killed by the out-of-memory killer".to_string()),
            )
        }
        137 => (
            Status::Failed,
            Some(137),
            Some("killed (SIGKILL)".to_string()),
        ),
        code => (
            Status::Failed,
            Some(code),
            Some(format!("exit code {code}")),
        ),
    }
}

/// Whether a step that ended with `status` stops the cell, and how to say so.
fn stops_the_cell(status: Status, step: &Step) -> Option<&'static str> {
    match status {
        Status::Skipped => Some("skipped itself (exit 77)"),
        Status::Timeout => Some("timed out"),
        Status::Oom => Some("ran out of memory"),
        Status::Failed if !step.continue_on_error => Some("failed"),
        _ => None,
    }
}

/// The cell's status: the step that stopped the cell (timeout, out of
/// memory, a failure of a step that may not fail, or exit 77) decides; a cell
/// that needs a GPU (`gpu.need: required`) and was refused one is skipped
/// with the reason; a cell whose steps were all skipped is skipped; otherwise
/// it passed.
fn cell_status(
    stopped_by: Option<(Status, String)>,
    steps: &[StepRecord],
    gpu_refused: Option<&str>,
) -> (Status, Option<String>) {
    if let Some((status, reason)) = stopped_by {
        return (status, Some(reason));
    }
    if let Some(why) = gpu_refused {
        return (Status::Skipped, Some(format!("needs a GPU: {why}")));
    }
    if !steps.is_empty() && steps.iter().all(|s| s.status == Status::Skipped) {
        return (Status::Skipped, steps[0].reason.clone());
    }
    (Status::Passed, None)
}

async fn oom_kills(engine: &Engine, container: &str) -> u64 {
    let script = "cat /sys/fs/cgroup/memory.events 2>/dev/null || cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null";
    let from_cgroup = match engine.exec_capture(container, &["sh", "-c", script]).await {
        Ok((_, out)) => out
            .lines()
            .find_map(|l| {
                l.strip_prefix("oom_kill ")
                    .and_then(|n| n.trim().parse().ok())
            })
            .unwrap_or(0),
        Err(_) => 0,
    };
    if from_cgroup > 0 {
        return from_cgroup;
    }
    u64::from(engine.oom_killed(container).await.unwrap_or(false))
}

/// Finds files matching `globs` in the container and copies them out into `dest`.
pub(super) async fn collect_junit(
    engine: &Engine,
    container: &str,
    globs: &[String],
    dest: &Path,
    cell_dir: &Path,
) -> Result<(Vec<String>, Vec<String>), CellError> {
    let script = format!(
        "shopt -s nullglob globstar; for f in {}; do if [ -e \"$f\" ] || [ -L \"$f\" ]; then printf '%s\\0' \"$f\"; fi; done",
        globs.join(" ")
    );
    let (code, out) = engine
        .exec_capture(container, &["bash", "-c", &script])
        .await?;
    let mut files = Vec::new();
    let mut messages = Vec::new();
    if code != 0 {
        messages.push(format!(
            "listing JUnit files ({}) failed with exit code {code}",
            globs.join(" ")
        ));
        return Ok((files, messages));
    }
    let paths: Vec<&str> = out.split('\0').filter(|p| !p.is_empty()).collect();
    if paths.is_empty() {
        messages.push(format!("no JUnit file matched {}", globs.join(" ")));
        return Ok((files, messages));
    }
    let mkdir = dest.to_path_buf();
    blocking("creating the JUnit directory", move || {
        std::fs::create_dir_all(&mkdir).map_err(|e| CellError::io(&mkdir, e))
    })
    .await??;
    for path in paths {
        let abs = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/work/{path}")
        };
        let archive = dest.join(".download.tar");
        match engine
            .download(container, &abs, &archive, MAX_JUNIT_ARCHIVE)
            .await
        {
            Ok(_) => {}
            Err(EngineError::Failed { message, .. }) => {
                messages.push(format!("{abs}: {message}"));
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        let (dest, cell_dir) = (dest.to_path_buf(), cell_dir.to_path_buf());
        let (got, msgs) = blocking("unpacking JUnit files", move || {
            unpack_junit(&archive, &dest, &cell_dir, &abs)
        })
        .await??;
        files.extend(got);
        messages.extend(msgs);
    }
    Ok((files, messages))
}

/// Unpacks one downloaded archive of `abs` into `dest`, refusing what
/// `untar` refuses; returns the files (relative to `cell_dir`) and messages.
fn unpack_junit(
    archive: &Path,
    dest: &Path,
    cell_dir: &Path,
    abs: &str,
) -> Result<(Vec<String>, Vec<String>), CellError> {
    let mut files = Vec::new();
    let mut messages = Vec::new();
    let staging = dest.join(".staging");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| CellError::io(&staging, e))?;
    let f = std::fs::File::open(archive).map_err(|e| CellError::io(archive, e))?;
    let limits = untar::Limits {
        max_total: MAX_JUNIT_ARCHIVE,
        max_entries: 10_000,
    };
    match untar::unpack(f, &staging, limits, abs) {
        Ok(u) => {
            messages.extend(u.refused);
            files = place_junit(&staging, &u.files, dest, cell_dir, abs)?;
        }
        Err(e) => messages.push(format!("{abs}: unreadable archive: {e}")),
    }
    let _ = std::fs::remove_dir_all(&staging);
    let _ = std::fs::remove_file(archive);
    Ok((files, messages))
}

/// Moves the JUnit files copied from `abs` (at `rels` under `from`: the file
/// itself, or a directory's files under its name) into `dest`, named after
/// `abs`; returns them relative to `cell_dir`.
pub(super) fn place_junit(
    from: &Path,
    rels: &[PathBuf],
    dest: &Path,
    cell_dir: &Path,
    abs: &str,
) -> Result<Vec<String>, CellError> {
    let mut files = Vec::new();
    let flat = crate::spec::cell_id::sanitize(abs.trim_start_matches('/'));
    for rel in rels {
        let name = if u_single(rel) {
            flat.clone()
        } else {
            format!(
                "{flat}-{}",
                crate::spec::cell_id::sanitize(&rel.to_string_lossy())
            )
        };
        let final_path = dest.join(&name);
        std::fs::rename(from.join(rel), &final_path).map_err(|e| CellError::io(&final_path, e))?;
        if let Ok(r) = final_path.strip_prefix(cell_dir) {
            files.push(r.to_string_lossy().into_owned());
        }
    }
    Ok(files)
}

/// A path with a single component (the file itself, as docker archives a file).
fn u_single(rel: &Path) -> bool {
    rel.components().count() == 1
}

/// A step's log file: everything goes to disk as it arrives; only a bounded
/// tail stays in memory.
pub(super) struct StepLog {
    file: std::io::BufWriter<std::fs::File>,
    tail: VecDeque<u8>,
}

impl StepLog {
    pub(super) fn create(path: &Path) -> std::io::Result<StepLog> {
        Ok(StepLog {
            file: std::io::BufWriter::new(std::fs::File::create(path)?),
            tail: VecDeque::with_capacity(TAIL_BYTES),
        })
    }

    pub(super) fn write(&mut self, bytes: &[u8]) {
        let _ = self.file.write_all(bytes);
        let keep = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
        let overflow = (self.tail.len() + keep.len()).saturating_sub(TAIL_BYTES);
        self.tail.drain(..overflow);
        self.tail.extend(keep);
    }

    pub(super) fn note(&mut self, text: &str) {
        self.write(text.as_bytes());
    }

    /// Flushes the file and returns the last lines.
    pub(super) fn finish(mut self) -> std::io::Result<String> {
        self.file.flush()?;
        let (a, b) = self.tail.as_slices();
        let text = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        Ok(lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n"))
    }
}

/// `NN-name` for step files: sortable and file-system safe.
pub fn step_slug(index: usize, name: &str) -> String {
    format!("{:02}-{}", index + 1, crate::spec::cell_id::sanitize(name))
}

pub fn env_key(k: &str) -> String {
    k.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Container names are unique per run, cell and attempt.
pub fn container_name(run: &str, cell: &str, attempt: u32) -> String {
    let mut cell = crate::spec::cell_id::sanitize(cell);
    cell.truncate(100);
    format!("rocmatrix-{run}-{cell}-{attempt}")
}

/// Whether a step's script goes to bash as an argument rather than as an
/// uploaded file: when it fits in one argument and holds no NUL (which no
/// argument can).
pub(super) fn passed_inline(run: &str) -> bool {
    run.len() <= INLINE_SCRIPT_MAX && !run.contains('\0')
}

/// The command that runs a step's script: `bash -eo pipefail -c -- SCRIPT`,
/// or the uploaded file for a script too long for that. Either way `$0` is
/// `/rocmatrix/steps/<slug>.sh`, so bash's messages name the step alike.
/// (`--`: a script that starts with `-` is a script, not bash's options.)
pub(super) fn step_command(slug: &str, run: &str) -> Vec<String> {
    let path = format!("/rocmatrix/steps/{slug}.sh");
    let mut cmd = vec!["bash".to_string(), "-eo".into(), "pipefail".into()];
    if passed_inline(run) {
        cmd.extend(["-c".to_string(), "--".into(), run.to_string()]);
    }
    cmd.push(path);
    cmd
}

/// Every step's script as `rocmatrix/steps/<slug>.sh` in a tar archive (for
/// `shell`, which runs them from files).
pub fn scripts_tar(steps: &[Step]) -> std::io::Result<Vec<u8>> {
    scripts_tar_where(steps, |_| true)
}

/// [`scripts_tar`] of the steps that `keep` selects, at their own slugs.
pub(super) fn scripts_tar_where(
    steps: &[Step],
    keep: impl Fn(&Step) -> bool,
) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    for (i, s) in steps.iter().enumerate().filter(|(_, s)| keep(s)) {
        let mut h = tar::Header::new_gnu();
        h.set_size(s.run.len() as u64);
        h.set_mode(0o755);
        h.set_cksum();
        b.append_data(
            &mut h,
            format!("rocmatrix/steps/{}.sh", step_slug(i, &s.name)),
            s.run.as_bytes(),
        )?;
    }
    b.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, status: Status, reason: Option<&str>) -> StepRecord {
        StepRecord {
            name: name.into(),
            status,
            exit_code: None,
            duration_secs: 0.0,
            log: String::new(),
            reason: reason.map(str::to_string),
            log_tail: String::new(),
            backtrace: None,
        }
    }

    #[test]
    fn statuses() {
        assert_eq!(
            cell_status(None, &[step("a", Status::Passed, None)], None).0,
            Status::Passed
        );
        let stopped = Some((Status::Failed, "step `a`: exit code 1".to_string()));
        assert_eq!(
            cell_status(stopped, &[], None),
            (Status::Failed, Some("step `a`: exit code 1".into()))
        );
        // continue_on_error: a failed step stops nothing and decides nothing.
        let cont = [
            step("a", Status::Failed, Some("exit code 1")),
            step("b", Status::Passed, None),
        ];
        assert_eq!(cell_status(None, &cont, None).0, Status::Passed);
        let skipped = [step("a", Status::Skipped, Some("needs a GPU: none"))];
        assert_eq!(
            cell_status(None, &skipped, None),
            (Status::Skipped, Some("needs a GPU: none".into()))
        );
        // A cell that needs a GPU and got none is skipped even when its
        // GPU-free steps passed; a failure still wins.
        let versions_ran = [
            step("versions", Status::Passed, None),
            step("tests", Status::Skipped, Some("needs a GPU: no GPU")),
        ];
        assert_eq!(
            cell_status(None, &versions_ran, Some("no gfx1030 GPU on this host")),
            (
                Status::Skipped,
                Some("needs a GPU: no gfx1030 GPU on this host".into())
            )
        );
        let failed = Some((Status::Failed, "step `versions`: exit code 1".to_string()));
        assert_eq!(
            cell_status(failed, &versions_ran, Some("no GPU")).0,
            Status::Failed
        );
    }

    #[test]
    fn scripts_go_inline_unless_too_long_for_an_argument() {
        assert_eq!(
            step_command("01-a", "-x"),
            [
                "bash",
                "-eo",
                "pipefail",
                "-c",
                "--",
                "-x",
                "/rocmatrix/steps/01-a.sh"
            ]
        );
        let longest = "#".repeat(INLINE_SCRIPT_MAX);
        assert_eq!(step_command("01-a", &longest)[5], longest);
        let long = format!("{longest}\n");
        assert_eq!(
            step_command("02-b", &long),
            ["bash", "-eo", "pipefail", "/rocmatrix/steps/02-b.sh"]
        );
        assert_eq!(
            step_command("03-c", "echo \0")[3],
            "/rocmatrix/steps/03-c.sh"
        );
    }

    #[test]
    fn log_keeps_a_bounded_tail() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("l.log");
        let mut log = StepLog::create(&p).unwrap();
        for i in 0..100_000 {
            log.write(format!("line {i}\n").as_bytes());
        }
        assert!(log.tail.len() <= TAIL_BYTES);
        let tail = log.finish().unwrap();
        assert!(tail.ends_with("line 99999"));
        assert_eq!(tail.lines().count(), TAIL_LINES);
        assert!(std::fs::metadata(&p).unwrap().len() > 1_000_000);
    }
}
