//! Test-suite adapters: a step that says `gtest:` or `ctest:` is run through
//! the adapter for its kind, which knows how that kind of suite lists,
//! runs, crashes and reports, and writes one JUnit file that the rest of
//! rocmatrix reads like any other.
//!
//! - [`gtest`]: lists the tests, runs them in batches of one process each,
//!   survives crashes and hangs (the test that was running gets the blame,
//!   the rest run in a new process), shards over the cell's GPUs.
//! - [`ctest`]: CTest's own timeouts and JUnit, with the step's filters;
//!   timeouts and crashes named as its console lines name them.
//!
//! The adapters talk to the container through [`crate::engine`] only; the
//! cell runner (`src/run/steps.rs`) picks the adapter for a step's suite
//! and records what it returns. `autopkgtest:` steps have an adapter of
//! their own room (`src/autopkgtest/`), standing on this one and returning
//! the same outcome; this room never calls it.

pub mod crash_backtrace;
pub mod ctest;
mod ctest_output;
pub mod gtest;
pub mod gtest_output;
mod gtest_process;
pub mod junit_out;
mod process;
pub mod rerun;
mod trailer;

use std::path::PathBuf;
use std::time::Duration;

use crate::engine::{Engine, EngineError};
use crate::outcome::RunStatus;

/// How one test case ended, as the suite adapters judge it (from its
/// process, its output and its per-test timeout), before the step's JUnit
/// is written.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseVerdict {
    Passed,
    Failed {
        message: String,
        text: String,
    },
    Skipped {
        message: String,
    },
    /// The process died while the test ran: `kind` is the signal name
    /// (`SIGSEGV`) or `exit-code`.
    Error {
        kind: String,
        message: String,
    },
    /// The test ran past its per-test timeout and its process was killed.
    Timeout {
        secs: u64,
    },
}

impl CaseVerdict {
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            CaseVerdict::Failed { .. } | CaseVerdict::Error { .. } | CaseVerdict::Timeout { .. }
        )
    }
}

/// One test's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The suite (googletest's test suite; JUnit's classname).
    pub suite: String,
    pub name: String,
    /// `GetParam() = …` / `TypeParam = …`, when the listing gave one.
    pub param: Option<String>,
    pub verdict: CaseVerdict,
    pub time: Option<f64>,
    /// What the test printed (a bounded tail), when it is known.
    pub output: String,
    /// Which shard ran it (0 when unsharded).
    pub shard: usize,
    /// Earlier runs of it that failed, when a failure was run again
    /// (`rerun_failures:`): with a final pass it is flaky (JUnit's
    /// `<flakyFailure>`), with a final failure they are `<rerunFailure>`s.
    pub reruns: Vec<CaseVerdict>,
}

/// The step's log, shared by the processes (shards) that write to it.
pub type Log<'a> = std::sync::Mutex<&'a mut (dyn FnMut(&[u8]) + Send)>;

/// What the adapter needs from the cell runner.
pub struct TestSuiteContext<'a> {
    pub engine: &'a Engine,
    pub container: &'a str,
    /// `NN-name`: names the step's files in the container and the store.
    pub slug: &'a str,
    /// Where the step's JUnit file goes on the host.
    pub junit_dir: PathBuf,
    /// The step's timeout: everything must end by then.
    pub step_timeout: Duration,
    /// Per leased GPU, the variables that make a process see it alone;
    /// empty when the cell has no GPU (one unsharded process).
    pub per_gpu: &'a [Vec<String>],
    /// The step's variables (`ROCMATRIX_STEP=…`), given to every process.
    pub env: Vec<String>,
    /// The step's `backtrace:`: crashing tests run again under gdb.
    pub backtrace: Option<&'a crate::matrix_file::BacktraceSpec>,
}

/// How the suite ran, for the step's record.
#[derive(Debug)]
pub struct TestSuiteOutcome {
    /// Every test, in listing order.
    pub cases: Vec<Case>,
    /// The JUnit file written (absolute), if any test was found.
    pub junit: Option<PathBuf>,
    /// The step ran past its own timeout.
    pub step_timed_out: bool,
    /// Why the suite could not run at all (no binary, listing failed …).
    pub problem: Option<String>,
    /// The verdict on the package as a whole, where the tool gives one
    /// (autopkgtest's exit status); `None` for gtest and ctest.
    pub package: Option<crate::store::record::PackageOutcome>,
}

impl TestSuiteOutcome {
    /// `80 tests: 56 passed, 22 failed, 2 skipped`.
    pub fn summary(&self) -> String {
        let mut counts = std::collections::BTreeMap::new();
        for c in &self.cases {
            let word = match c.verdict {
                CaseVerdict::Passed => "passed",
                CaseVerdict::Failed { .. } => "failed",
                CaseVerdict::Skipped { .. } => "skipped",
                CaseVerdict::Error { .. } => "error",
                CaseVerdict::Timeout { .. } => "timeout",
            };
            *counts.entry(word).or_insert(0usize) += 1;
        }
        let parts: Vec<String> = counts.iter().map(|(w, n)| format!("{n} {w}")).collect();
        format!("{} tests: {}", self.cases.len(), parts.join(", "))
    }

    /// The step's status and reason from how its suite ran (`timeout`: the
    /// step's, for the reason's words): failed when the suite could not
    /// run or a test failed, timed out when the step ran past its timeout.
    pub fn step_status(&self, timeout: Duration) -> (RunStatus, Option<String>) {
        let summary = self.summary();
        if let Some(problem) = &self.problem {
            (RunStatus::Failed, Some(problem.clone()))
        } else if self.step_timed_out {
            let why = format!("timed out after {} s ({summary})", timeout.as_secs());
            (RunStatus::Timeout, Some(why))
        } else if self.failures() > 0 {
            (RunStatus::Failed, Some(summary))
        } else {
            (RunStatus::Passed, None)
        }
    }

    pub fn failures(&self) -> usize {
        self.cases.iter().filter(|c| c.verdict.is_failure()).count()
    }
}

/// Why an adapter stopped without judging the tests.
#[derive(Debug, thiserror::Error)]
pub enum TestSuiteError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Largest listing or report read back from the container.
const MAX_READ: usize = 64 * 1024 * 1024;

/// A file of the container as text, if it exists (bounded by [`MAX_READ`]).
async fn read_file(
    cx: &TestSuiteContext<'_>,
    path: &str,
) -> Result<Option<String>, TestSuiteError> {
    let mut out = Vec::new();
    let outcome = cx
        .engine
        .exec(
            cx.container,
            vec!["cat".into(), path.into()],
            Vec::new(),
            &mut |b: &[u8]| {
                if out.len() < MAX_READ {
                    out.extend_from_slice(b);
                }
            },
            Some(Duration::from_secs(120)),
        )
        .await?;
    Ok(match outcome {
        crate::engine::ExecOutcome::Exited(0) => Some(text_of(out)),
        _ => None,
    })
}

/// `bytes` as text, without a copy when they are UTF-8.
fn text_of(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Runs `work` on the host file `path` off the async threads.
async fn on_disk<T, F>(path: PathBuf, work: F) -> Result<T, TestSuiteError>
where
    T: Send + 'static,
    F: FnOnce(&std::path::Path) -> std::io::Result<T> + Send + 'static,
{
    let at = path.clone();
    tokio::task::spawn_blocking(move || work(&at))
        .await
        .map_err(|e| TestSuiteError::Io {
            path: path.clone(),
            source: std::io::Error::other(e.to_string()),
        })?
        .map_err(|source| TestSuiteError::Io { path, source })
}

/// Writes the adapter's JUnit file; hands `cases` back.
async fn write_junit(
    path: PathBuf,
    name: &'static str,
    cases: Vec<Case>,
) -> Result<Vec<Case>, TestSuiteError> {
    on_disk(path, move |p| {
        junit_out::write(p, name, &cases).map(|()| cases)
    })
    .await
}

/// At most `max` bytes of `text`'s first lines, cut at a line end.
pub fn first_lines(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    match text[..cut].rfind('\n') {
        Some(i) if i > 0 => text[..i].to_string(),
        _ => text[..cut].to_string(),
    }
}

/// Where the last `max` bytes of `text` begin, moved forward to a
/// character boundary.
pub fn tail_start(text: &str, max: usize) -> usize {
    let mut cut = text.len().saturating_sub(max);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    cut
}

/// The last `n` lines of `text`.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Writes `text` to the shared step log.
fn note(log: &Log<'_>, text: &str) {
    let mut sink = log.lock().unwrap_or_else(|p| p.into_inner());
    (*sink)(text.as_bytes());
}

/// `SIGSEGV` for 11; exit statuses 129–159 are read as 128 + a signal, as
/// shells and container runtimes report a process a signal killed.
pub fn signal_name(exit: i64) -> Option<&'static str> {
    let n = exit.checked_sub(128)?;
    Some(match n {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        31 => "SIGSYS",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals() {
        assert_eq!(signal_name(139), Some("SIGSEGV"));
        assert_eq!(signal_name(134), Some("SIGABRT"));
        assert_eq!(signal_name(3), None);
        assert_eq!(signal_name(-1), None);
    }
}
