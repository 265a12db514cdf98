//! A cell's steps in order in its container: the leading ones from its
//! main process (`src/step/main_process.rs`), the rest by exec, each with its
//! own log, timeout and JUnit files, then its test suite; a step that stops
//! the cell makes the rest skipped with the reason, and the cell's verdict
//! comes from its steps.

use std::path::Path;

use super::step_reruns;
use crate::matrix_file::GpuUse;
use crate::plan::Cell;
use crate::step::clock;
use crate::step::judge::{judge_exec, Progress};
use crate::step::junit::collect_junit;
use crate::step::log::{skip_step, OpenStep, StepLog};
use crate::step::main_process;
use crate::step::protocol::{step_command, step_slug};
use crate::step::{CellEnv, CellError, StepAt};
use crate::store::record::{RunStatus, StepRecord};
use crate::test_suite::TestSuiteContext;

pub(super) struct StepsOutcome {
    pub(super) steps: Vec<StepRecord>,
    pub(super) junit: Vec<String>,
    pub(super) messages: Vec<String>,
    pub(super) verdict: (RunStatus, Option<String>),
}

/// What the cell got of GPUs: why none, or the variables of each.
#[derive(Clone, Copy)]
pub(super) struct GpuAt<'a> {
    pub(super) refusal: Option<&'a str>,
    pub(super) per_gpu: &'a [Vec<String>],
}

/// Runs the cell's steps in order in `container`: the leading ones from its
/// main process when `leading` says so, the rest by exec, each with its own
/// log, timeout and JUnit files; a step that stops the cell makes the rest
/// skipped with the reason.
pub(super) async fn run_steps(
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
        } else if record.status != RunStatus::Timeout && !step.junit.is_empty() {
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
    let verdict = p.verdict(refused);
    Ok(StepsOutcome {
        steps: p.records,
        junit: p.junit,
        messages: p.messages,
        verdict,
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
        (RunStatus::Passed, None, None)
    } else {
        exec_script(cx, at, log, ooms_seen).await?
    };
    let mut reran = None;
    if step.rerun_failures > 0 && status != RunStatus::Timeout {
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
    let mut package = None;
    if let (Some(suite), RunStatus::Passed) = (&step.suite, status) {
        let remaining = step.timeout.saturating_sub(t.elapsed());
        let sc = TestSuiteContext {
            engine: cx.engine,
            container: at.container,
            slug: &slug,
            junit_dir: at.cell_dir.join("junit").join(&slug),
            step_timeout: remaining,
            per_gpu: at.per_gpu,
            env,
            backtrace: at.step.backtrace.as_ref(),
        };
        let outcome = run_suite(&sc, suite, log).await?;
        let (judged, why) = outcome.step_status(sc.step_timeout);
        // The step's exit status is the tool's where it judges the package
        // as a whole (autopkgtest's), else none.
        let exit = outcome.package.as_ref().and_then(|p| p.exit);
        (status, exit_code, reason) = (judged, exit, why);
        package = outcome.package;
        suite_junit = outcome.junit.and_then(|p| {
            p.strip_prefix(at.cell_dir)
                .ok()
                .map(|r| r.to_string_lossy().into_owned())
        });
    }
    let mut record = open
        .finish(cx, cell, step, (status, exit_code, reason))
        .await?;
    record.package = package;
    Ok((record, suite_junit, reran))
}

/// Runs a step's suite through its adapter, its summary line into the log.
async fn run_suite(
    sc: &TestSuiteContext<'_>,
    suite: &crate::plan::TestSuite,
    log: &mut StepLog,
) -> Result<crate::test_suite::TestSuiteOutcome, CellError> {
    use crate::plan::TestSuite;
    let mut write = |b: &[u8]| log.write(b);
    let shared = std::sync::Mutex::new(&mut write as &mut (dyn FnMut(&[u8]) + Send));
    let outcome = match suite {
        TestSuite::Gtest(g) => crate::test_suite::gtest::run(sc, g, &shared).await?,
        TestSuite::Ctest(c) => crate::test_suite::ctest::run(sc, c, &shared).await?,
        TestSuite::Autopkgtest(a) => crate::autopkgtest::run(sc, a, &shared).await?,
    };
    let text = format!("rocmatrix: {}\n", outcome.summary());
    (*shared.lock().unwrap_or_else(|p| p.into_inner()))(text.as_bytes());
    Ok(outcome)
}

/// Runs the step's script by exec, its output into `log`, with its
/// timeout, and judges how it ended (a run of it again, too).
pub(super) async fn exec_script(
    cx: &CellEnv<'_>,
    at: &StepAt<'_>,
    log: &mut StepLog,
    ooms_seen: &mut u64,
) -> Result<(RunStatus, Option<i64>, Option<String>), CellError> {
    let (step, slug) = (at.step, step_slug(at.index, &at.step.name));
    let cmd = clock::clocked(&slug, &step.name, step_command(&slug, &step.run));
    let outcome = cx
        .engine
        .exec(
            at.container,
            cmd,
            Vec::new(),
            &mut |b: &[u8]| log.write(b),
            Some(step.timeout),
        )
        .await?;
    let outcome = clock::settle(cx.engine, at.container, &slug, step, outcome, log).await;
    let hang = crate::step::hang::HangAt {
        index: at.index,
        cell_dir: at.cell_dir,
    };
    judge_exec(
        cx.engine,
        at.container,
        outcome,
        step,
        log,
        ooms_seen,
        Some(hang),
    )
    .await
}
