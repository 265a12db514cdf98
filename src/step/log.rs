//! A step's log and its life: opened with its start reported
//! ([`OpenStep`]), written as output arrives with a bounded tail in memory
//! ([`StepLog`]), closed into its record; a step that does not run gets a
//! log saying why.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::protocol::step_slug;
use super::{blocking, CellEnv, CellError};
use crate::plan::{Cell, Step};
use crate::store::journal::Event;
use crate::store::record::{RunStatus, StepRecord};

/// Bytes of log kept in memory for the tail.
const TAIL_BYTES: usize = 64 * 1024;
/// Lines of log kept in the record.
const TAIL_LINES: usize = 40;

/// A step under way: its log open, its start reported.
pub(crate) struct OpenStep {
    pub(crate) log: StepLog,
    log_rel: String,
    pub(crate) started: Instant,
    cell_dir: PathBuf,
}

impl OpenStep {
    /// Reports step `index` of `cell` started and opens its log.
    pub(crate) async fn begin(
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
    pub(crate) async fn finish(
        self,
        cx: &CellEnv<'_>,
        cell: &Cell,
        step: &Step,
        (status, exit_code, reason): (RunStatus, Option<i64>, Option<String>),
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
            package: None,
        })
    }
}

/// Records a step that does not run, with the reason in its log.
pub(crate) async fn skip_step(
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
        status: RunStatus::Skipped,
        exit_code: None,
        secs: 0.0,
    });
    Ok(record)
}

/// The record of step `index` (`name`) of a cell or build in `dir` that
/// did not run, its log saying why.
pub(crate) fn not_run_step(
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
        status: RunStatus::Skipped,
        exit_code: None,
        duration_secs: 0.0,
        log,
        reason: Some(reason),
        log_tail: String::new(),
        backtrace: None,
        package: None,
    })
}

/// A step's log file: everything goes to disk as it arrives; only a bounded
/// tail stays in memory.
pub(crate) struct StepLog {
    file: std::io::BufWriter<std::fs::File>,
    tail: VecDeque<u8>,
}

impl StepLog {
    pub(crate) fn create(path: &Path) -> std::io::Result<StepLog> {
        Ok(StepLog {
            file: std::io::BufWriter::new(std::fs::File::create(path)?),
            tail: VecDeque::with_capacity(TAIL_BYTES),
        })
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) {
        let _ = self.file.write_all(bytes);
        let keep = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
        let overflow = (self.tail.len() + keep.len()).saturating_sub(TAIL_BYTES);
        self.tail.drain(..overflow);
        self.tail.extend(keep);
    }

    pub(crate) fn note(&mut self, text: &str) {
        self.write(text.as_bytes());
    }

    /// Flushes the file and returns the last lines.
    pub(crate) fn finish(mut self) -> std::io::Result<String> {
        self.file.flush()?;
        let (a, b) = self.tail.as_slices();
        let text = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        Ok(lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
