//! How a step's end is judged (exit 0 passed, 77 skipped, 137 an
//! out-of-memory kill or SIGKILL, a timeout), whether it stops the cell,
//! and the cell's verdict from its steps ([`Progress`]).

use super::log::StepLog;
use super::protocol::EXIT_SKIPPED;
use super::CellError;
use crate::engine::{Engine, ExecOutcome};
use crate::matrix_file::GpuUse;
use crate::plan::Step;
use crate::store::record::{RunStatus, StepRecord};

/// A step's status, exit code and reason from how its exec ended: 0 passed,
/// 77 skipped, 137 an out-of-memory kill (when the cgroup counted a new one)
/// or SIGKILL, a timeout kills the container (after gdb looked at the
/// hang, where the step asks for it and `hang` says where it goes).
pub(crate) async fn judge_exec(
    engine: &Engine,
    container: &str,
    outcome: ExecOutcome,
    step: &Step,
    log: &mut StepLog,
    ooms_seen: &mut u64,
    hang: Option<super::hang::HangAt<'_>>,
) -> Result<(RunStatus, Option<i64>, Option<String>), CellError> {
    Ok(match outcome {
        ExecOutcome::Exited(code) => {
            let kills = match code {
                137 => oom_kills(engine, container).await,
                _ => 0,
            };
            judge_exit(code, kills, ooms_seen)
        }
        ExecOutcome::TimedOut => {
            if let Some(at) = hang {
                super::hang::capture(engine, container, step, at, log).await?;
            }
            log.note(&timed_out_note(step));
            engine.kill_container(container).await?;
            timed_out(step)
        }
    })
}

/// A timed-out step's line in its log.
pub(crate) fn timed_out_note(step: &Step) -> String {
    format!(
        "\nrocmatrix: step timed out after {} s; container killed\n",
        step.timeout.as_secs()
    )
}

/// A timed-out step's status and reason.
pub(crate) fn timed_out(step: &Step) -> (RunStatus, Option<i64>, Option<String>) {
    (
        RunStatus::Timeout,
        None,
        Some(format!("timed out after {} s", step.timeout.as_secs())),
    )
}

/// A step's status, exit code and reason from its exit code: 0 passed, 77
/// skipped, 137 an out-of-memory kill when the cgroup's count of them
/// (`oom_kills`) grew past `ooms_seen`, else SIGKILL; anything else failed.
pub(crate) fn judge_exit(
    code: i64,
    oom_kills: u64,
    ooms_seen: &mut u64,
) -> (RunStatus, Option<i64>, Option<String>) {
    match code {
        0 => (RunStatus::Passed, Some(0), None),
        EXIT_SKIPPED => (
            RunStatus::Skipped,
            Some(EXIT_SKIPPED),
            Some("exit 77: skipped".to_string()),
        ),
        137 if oom_kills > *ooms_seen => {
            *ooms_seen = oom_kills;
            (
                RunStatus::Oom,
                Some(137),
                Some("killed by the out-of-memory killer".to_string()),
            )
        }
        137 => (
            RunStatus::Failed,
            Some(137),
            Some("killed (SIGKILL)".to_string()),
        ),
        code => (
            RunStatus::Failed,
            Some(code),
            Some(format!("exit code {code}")),
        ),
    }
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

/// What a cell's steps have come to so far: their records, JUnit files and
/// messages, and the step that stopped the cell, if one did.
#[derive(Default)]
pub(crate) struct Progress {
    pub(crate) records: Vec<StepRecord>,
    pub(crate) junit: Vec<String>,
    pub(crate) messages: Vec<String>,
    stop: Option<String>,
    verdict: Option<(RunStatus, String)>,
    pub(crate) ooms_seen: u64,
}

impl Progress {
    /// Why `step` does not run, if it does not: an earlier step stopped the
    /// cell, or it needs a GPU the cell was refused.
    pub(crate) fn skip_reason(&self, step: &Step, gpu_refusal: Option<&str>) -> Option<String> {
        match (&self.stop, step.gpu, gpu_refusal) {
            (Some(why), _, _) => Some(why.clone()),
            (None, GpuUse::Required, Some(why)) => Some(format!("needs a GPU: {why}")),
            _ => None,
        }
    }

    /// The cell's verdict from its steps so far (see [`cell_status`]).
    pub(crate) fn verdict(&mut self, gpu_refused: Option<&str>) -> (RunStatus, Option<String>) {
        cell_status(self.verdict.take(), &self.records, gpu_refused)
    }

    /// Adds a step's record; a step that stops the cell decides its verdict.
    pub(crate) fn push(&mut self, step: &Step, record: StepRecord) {
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

/// Whether a step that ended with `status` stops the cell, and how to say so.
fn stops_the_cell(status: RunStatus, step: &Step) -> Option<&'static str> {
    match status {
        RunStatus::Skipped => Some("skipped itself (exit 77)"),
        RunStatus::Timeout => Some("timed out"),
        RunStatus::Oom => Some("ran out of memory"),
        RunStatus::Failed if !step.continue_on_error => Some("failed"),
        _ => None,
    }
}

/// The cell's status: the step that stopped the cell (timeout, out of
/// memory, a failure of a step that may not fail, or exit 77) decides; a cell
/// that needs a GPU (`gpu.need: required`) and was refused one is skipped
/// with the reason; a cell whose steps were all skipped is skipped; otherwise
/// it passed.
fn cell_status(
    stopped_by: Option<(RunStatus, String)>,
    steps: &[StepRecord],
    gpu_refused: Option<&str>,
) -> (RunStatus, Option<String>) {
    if let Some((status, reason)) = stopped_by {
        return (status, Some(reason));
    }
    if let Some(why) = gpu_refused {
        return (RunStatus::Skipped, Some(format!("needs a GPU: {why}")));
    }
    if !steps.is_empty() && steps.iter().all(|s| s.status == RunStatus::Skipped) {
        return (RunStatus::Skipped, steps[0].reason.clone());
    }
    (RunStatus::Passed, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, status: RunStatus, reason: Option<&str>) -> StepRecord {
        StepRecord {
            name: name.into(),
            status,
            exit_code: None,
            duration_secs: 0.0,
            log: String::new(),
            reason: reason.map(str::to_string),
            log_tail: String::new(),
            backtrace: None,
            package: None,
        }
    }

    #[test]
    fn statuses() {
        assert_eq!(
            cell_status(None, &[step("a", RunStatus::Passed, None)], None).0,
            RunStatus::Passed
        );
        let stopped = Some((RunStatus::Failed, "step `a`: exit code 1".to_string()));
        assert_eq!(
            cell_status(stopped, &[], None),
            (RunStatus::Failed, Some("step `a`: exit code 1".into()))
        );
        // continue_on_error: a failed step stops nothing and decides nothing.
        let cont = [
            step("a", RunStatus::Failed, Some("exit code 1")),
            step("b", RunStatus::Passed, None),
        ];
        assert_eq!(cell_status(None, &cont, None).0, RunStatus::Passed);
        let skipped = [step("a", RunStatus::Skipped, Some("needs a GPU: none"))];
        assert_eq!(
            cell_status(None, &skipped, None),
            (RunStatus::Skipped, Some("needs a GPU: none".into()))
        );
        // A cell that needs a GPU and got none is skipped even when its
        // GPU-free steps passed; a failure still wins.
        let versions_ran = [
            step("versions", RunStatus::Passed, None),
            step("tests", RunStatus::Skipped, Some("needs a GPU: no GPU")),
        ];
        assert_eq!(
            cell_status(None, &versions_ran, Some("no gfx1030 GPU on this host")),
            (
                RunStatus::Skipped,
                Some("needs a GPU: no gfx1030 GPU on this host".into())
            )
        );
        let failed = Some((
            RunStatus::Failed,
            "step `versions`: exit code 1".to_string(),
        ));
        assert_eq!(
            cell_status(failed, &versions_ran, Some("no GPU")).0,
            RunStatus::Failed
        );
    }
}
