//! Backtraces in a cell: the steps that ask for one (`backtrace:`) run
//! with the capture in front of their script ([`crate::debugger::capture`]);
//! after the steps, the backtrace of each failed one is read out of the
//! container, kept as `backtraces/<step>.txt` in the cell's directory and
//! parsed into its step record.

use std::borrow::Cow;
use std::path::Path;

use super::protocol::step_slug;
use super::{blocking, CellEnv, CellError};
use crate::debugger::{capture, gdb_output, MAX_OUTPUT};
use crate::plan::{Cell, Step};
use crate::store::record::{RunStatus, StepRecord};

/// The cell as it runs: its steps with `backtrace:` instrumented.
pub fn instrument(cell: &Cell) -> Cow<'_, Cell> {
    match instrument_steps(&cell.steps) {
        Cow::Borrowed(_) => Cow::Borrowed(cell),
        Cow::Owned(steps) => Cow::Owned(Cell {
            steps,
            ..cell.clone()
        }),
    }
}

/// `steps` (a cell's or a build's) as they run: those with `backtrace:
/// {on: error|crash}` with the capture in front of their script.
pub fn instrument_steps(steps: &[Step]) -> Cow<'_, [Step]> {
    let rerun = |s: &Step| s.backtrace.as_ref().is_some_and(|b| b.on.is_some());
    if !steps.iter().any(rerun) {
        return Cow::Borrowed(steps);
    }
    let mut steps = steps.to_vec();
    for (i, s) in steps.iter_mut().enumerate() {
        if let (Some(spec), false) = (&s.backtrace, s.run.trim().is_empty()) {
            s.run = capture::instrument(&step_slug(i, &s.name), spec, &s.run);
        }
    }
    Cow::Owned(steps)
}

/// Reads the backtraces of the failed ones of `steps` (a cell's or a
/// build's) out of `container` into their records; what cannot be read
/// becomes a message, never an error of the cell.
pub async fn collect(
    cx: &CellEnv<'_>,
    steps: &[Step],
    container: &str,
    cell_dir: &Path,
    records: &mut [StepRecord],
    messages: &mut Vec<String>,
) -> Result<(), CellError> {
    for (i, step) in steps.iter().enumerate() {
        let Some(spec) = &step.backtrace else {
            continue;
        };
        let Some(record) = records.get_mut(i) else {
            continue;
        };
        if matches!(record.status, RunStatus::Passed | RunStatus::Skipped)
            || record.name != step.name
        {
            continue;
        }
        let slug = step_slug(i, &step.name);
        if record.status == RunStatus::Timeout && spec.on_timeout {
            // Taken before the kill and kept on the host (`super::hang`).
            if let Some(bt) = super::hang::read(cell_dir, i, step).await? {
                record.backtrace = Some(bt);
            }
            continue;
        }
        if spec.on.is_none() {
            continue;
        }
        let (cmd, _, out) = capture::files(&slug);
        let script = format!(
            "[ -f {cmd} ] || exit 3; head -c 4096 {cmd}; printf '\\0'; head -c {MAX_OUTPUT} {out} 2>/dev/null"
        );
        let (code, text) = match cx
            .engine
            .exec_capture(container, &["sh", "-c", &script])
            .await
        {
            Ok(r) => r,
            Err(e) if e.is_transient() => return Err(e.into()),
            Err(e) => {
                messages.push(format!(
                    "step `{}`: reading its backtrace failed: {e}",
                    step.name
                ));
                continue;
            }
        };
        if code == 3 {
            // The failure was not the kind the step asked about (or the
            // step timed out before its command failed).
            continue;
        }
        let (command, output) = text.split_once('\0').unwrap_or((text.as_str(), ""));
        let rel = crate::store::layout::backtrace_of(&slug);
        let bt = gdb_output::parse(command, output, &spec.breaks, spec.frames, &rel);
        let (path, body) = (
            cell_dir.join(&rel),
            format!("$ {}\n{output}", command.trim()),
        );
        blocking("writing a backtrace", move || {
            crate::store::write_atomic(&path, body.as_bytes())
                .map_err(|e| CellError::io(&path, std::io::Error::other(e)))
        })
        .await??;
        record.backtrace = Some(bt);
    }
    Ok(())
}
