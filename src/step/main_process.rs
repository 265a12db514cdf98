//! A cell's leading steps run as its container's main process.
//!
//! Running a step by exec costs the engine a `runc exec` and three API calls
//! on top of starting the container; `docker run` runs its command as the
//! container's main process instead. A cell does the same for the plain
//! `run:` steps it starts with: the container's command is a small bash
//! runner that runs them one after another, each as `bash -eo pipefail`
//! with its output (stdout and stderr through one pipe, so in order) on the
//! container's standard output, read through an attach made before the
//! start. Between steps the runner writes marker lines carrying a random
//! nonce (`<nonce> B <index>`, `<nonce> E <index> <exit> <oom kills>`),
//! which split the stream into step logs; a step's output
//! does not match one by chance.
//!
//! The runner stops where the controller would judge the cell stopped
//! (exit 77, a new out-of-memory kill, or a failure of a step without
//! `continue_on_error`); a timeout is the controller's, which kills the
//! container, as for an exec. A step's JUnit files are copied right after it
//! to `/rocmatrix/junit/NN/<path>` (its matches listed in `NN.list`) and
//! fetched once when the runner is done, so a later step overwriting a file
//! does not change what an earlier one wrote. The runner then idles
//! (`exec sleep infinity`) rather than exit, so its last output cannot be
//! lost with the process, and steps that need exec (a suite, or anything
//! after one) go on in the running container as before.
//!
//! A GPU's CDI hook stand-ins (ldconfig for the driver's libraries,
//! symlinks) are the runner's first part, before any step, each followed by
//! a marker with its exit code (`<nonce> H <index> <exit>`): they cost no
//! exec, and a cell with a GPU runs its steps as cheaply as one without.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use super::judge::{judge_exit, timed_out, timed_out_note, Progress};
use super::junit::{place_junit, MAX_JUNIT_ARCHIVE};
use super::log::{skip_step, OpenStep, StepLog};
use super::protocol::{passed_inline, step_slug, Marker, MarkerScanner, Piece, JUNIT_STAGING};
use super::{blocking, CellEnv, CellError, StepAt};
use crate::engine::{Attached, EngineError};
use crate::image::untar;
use crate::plan::{Cell, Step};
use crate::store::record::{RunStatus, StepRecord};

/// Scripts passed inline to the runner, in bytes, beyond which the rest run
/// by exec: the whole command line must stay under Linux's `ARG_MAX`.
const RUNNER_ARGS_MAX: usize = 1024 * 1024;

/// The steps a cell runs from its main process: the leading steps with no
/// test suite and no reruns (`rerun_failures:` runs a step again by exec),
/// as long as their scripts fit on one command line.
pub fn leading_steps(cell: &Cell) -> usize {
    let mut bytes = 0;
    cell.steps
        .iter()
        .take_while(|s| {
            if passed_inline(&s.run) {
                bytes += s.run.len();
            }
            s.suite.is_none() && s.rerun_failures == 0 && bytes <= RUNNER_ARGS_MAX
        })
        .count()
}

/// A cell's runner: its attached output, its markers' nonce, the hook
/// stand-ins it runs first, and how many of the cell's steps it covers
/// (those it does not run are skipped).
pub struct Leading {
    pub attached: Attached,
    pub nonce: String,
    pub hooks: Vec<String>,
    pub count: usize,
}

/// The runner's output, read a piece at a time.
struct Reader {
    attached: Attached,
    scanner: MarkerScanner,
    queue: VecDeque<Piece>,
    closed: bool,
}

impl Reader {
    async fn next(&mut self) -> Result<Option<Piece>, EngineError> {
        loop {
            if let Some(p) = self.queue.pop_front() {
                return Ok(Some(p));
            }
            if self.closed {
                return Ok(None);
            }
            match self.attached.next().await? {
                Some(chunk) => self.queue.extend(self.scanner.feed(&chunk)),
                None => {
                    self.closed = true;
                    self.queue.extend(self.scanner.finish().map(Piece::Output));
                }
            }
        }
    }
}

/// Follows the runner through the cell's leading steps: each step's output
/// into its log, its events, its record judged from the exit code the
/// runner reported; a step past its timeout kills the container. Then the
/// JUnit files the runner staged are copied out in one go.
pub(crate) async fn run_leading(
    cx: &CellEnv<'_>,
    cell: &Cell,
    container: &str,
    cell_dir: &Path,
    gpu_refusal: Option<&str>,
    leading: Leading,
    p: &mut Progress,
) -> Result<(), CellError> {
    let count = leading.count;
    let mut reader = Reader {
        attached: leading.attached,
        scanner: MarkerScanner::new(&leading.nonce),
        queue: VecDeque::new(),
        closed: false,
    };
    p.messages
        .extend(follow_hooks(cx, cell, container, &leading.hooks, &mut reader).await?);
    let mut staged = Vec::new();
    for (i, step) in cell.steps.iter().enumerate().take(count) {
        if let Some(reason) = p.skip_reason(step, gpu_refusal) {
            let record = skip_step(cx, cell, i, step, cell_dir, reason).await?;
            p.records.push(record);
            continue;
        }
        // Anything before the step's first marker is the runner's own.
        loop {
            match reader.next().await? {
                Some(Piece::Marker(Marker::Began(b))) if b == i => break,
                Some(_) => continue,
                None => {
                    let code = cx.engine.wait_exit(container).await?;
                    return Err(runner_lost(
                        cell,
                        format!(
                            "its container's main process ended (exit code {code}) before step `{}` began",
                            step.name
                        ),
                    ));
                }
            }
        }
        let at = StepAt {
            container,
            index: i,
            step,
            cell_dir,
            per_gpu: &[],
        };
        let record = follow_step(cx, cell, &at, &mut reader, p).await?;
        if record.status != RunStatus::Timeout && !step.junit.is_empty() {
            staged.push((i, step));
        }
        p.push(step, record);
    }
    if !staged.is_empty() {
        collect_staged(cx, container, cell_dir, &staged, p).await?;
    }
    Ok(())
}

/// Follows the runner through the hook stand-ins it runs first; what went
/// wrong with them, a message each (their steps run all the same).
async fn follow_hooks(
    cx: &CellEnv<'_>,
    cell: &Cell,
    container: &str,
    hooks: &[String],
    reader: &mut Reader,
) -> Result<Vec<String>, CellError> {
    let mut messages = Vec::new();
    for (i, cmd) in hooks.iter().enumerate() {
        let mut out = Vec::new();
        let code = loop {
            match reader.next().await? {
                Some(Piece::Marker(Marker::Hook { index, code })) if index == i => break code,
                Some(Piece::Output(bytes)) => out.extend_from_slice(&bytes),
                Some(Piece::Marker(_)) => {}
                None => {
                    let code = cx.engine.wait_exit(container).await?;
                    return Err(runner_lost(
                        cell,
                        format!(
                            "its container's main process ended (exit code {code}) in the CDI hook stand-in `{cmd}`"
                        ),
                    ));
                }
            }
        };
        if code != 0 {
            messages.push(format!(
                "CDI hook stand-in `{cmd}` exited {code}: {}",
                String::from_utf8_lossy(&out).trim()
            ));
        }
    }
    Ok(messages)
}

/// The runner's output ended where it cannot (`why`): an engine failure,
/// so the cell is retried or errored, never judged.
fn runner_lost(cell: &Cell, why: String) -> CellError {
    EngineError::failed(format!("running cell {}", cell.id), why).into()
}

/// One step of the runner, from its first marker to its last.
async fn follow_step(
    cx: &CellEnv<'_>,
    cell: &Cell,
    at: &StepAt<'_>,
    reader: &mut Reader,
    p: &mut Progress,
) -> Result<StepRecord, CellError> {
    let (container, cell_dir, index, step) = (at.container, at.cell_dir, at.index, at.step);
    let mut open = OpenStep::begin(cx, cell, index, step, cell_dir).await?;
    let log = &mut open.log;
    let deadline = tokio::time::Instant::from_std(open.started + step.timeout);
    let (status, mut exit_code, reason) = loop {
        match tokio::time::timeout_at(deadline, reader.next()).await {
            Err(_) => {
                let hang = super::hang::HangAt { index, cell_dir };
                super::hang::capture(cx.engine, container, step, hang, log).await?;
                cx.engine.kill_container(container).await?;
                // What the engine held back until the kill: if the step's
                // end marker is in it and the step's own clock says it
                // ended in time, it is judged by its exit code.
                if let Some((code, oom_kills)) =
                    ended_in_time(reader, log, index, step.timeout).await
                {
                    break judge_exit(code, oom_kills, &mut p.ooms_seen);
                }
                if let Some(rest) = reader.scanner.finish() {
                    log.write(&rest);
                }
                log.note(&timed_out_note(step));
                break timed_out(step);
            }
            Ok(piece) => match piece? {
                Some(Piece::Output(bytes)) => log.write(&bytes),
                Some(Piece::Marker(Marker::Ended {
                    index: e,
                    code,
                    oom_kills,
                    ..
                })) if e == index => break judge_exit(code, oom_kills, &mut p.ooms_seen),
                Some(Piece::Marker(_)) => {}
                // The main process ended inside the step (it never ends by
                // itself): killed from outside, or by the out-of-memory killer.
                None => {
                    let code = cx.engine.wait_exit(container).await?;
                    if code == 0 {
                        return Err(runner_lost(
                            cell,
                            format!(
                                "the output of step `{}` ended without its exit code",
                                step.name
                            ),
                        ));
                    }
                    let oom = cx.engine.oom_killed(container).await.unwrap_or(false);
                    let kills = p.ooms_seen + u64::from(oom);
                    break judge_exit(code, kills, &mut p.ooms_seen);
                }
            },
        }
    };
    if step.run.trim().is_empty() && status == RunStatus::Passed {
        exit_code = None;
    }
    open.finish(cx, cell, step, (status, exit_code, reason))
        .await
}

/// After a step's timeout and the kill: reads what is left of the killed
/// runner's output (briefly: its stream closes with the container) into the
/// step's log, up to the step's end marker. The marker's exit code and OOM
/// count when the step's own clock says it ended within `timeout`.
async fn ended_in_time(
    reader: &mut Reader,
    log: &mut StepLog,
    index: usize,
    timeout: std::time::Duration,
) -> Option<(i64, u64)> {
    let drain = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match tokio::time::timeout_at(drain, reader.next()).await {
            Ok(Ok(Some(Piece::Output(bytes)))) => log.write(&bytes),
            Ok(Ok(Some(Piece::Marker(Marker::Ended {
                index: e,
                code,
                oom_kills,
                elapsed_ms: Some(ms),
            }))))
                if e == index =>
            {
                return (u128::from(ms) < timeout.as_millis()).then_some((code, oom_kills));
            }
            Ok(Ok(Some(Piece::Marker(_)))) => {}
            _ => return None,
        }
    }
}

/// Copies the JUnit files the runner staged out of the container (running
/// or not) in one archive and files them under each step's JUnit directory,
/// as if each had been collected right after its step.
async fn collect_staged(
    cx: &CellEnv<'_>,
    container: &str,
    cell_dir: &Path,
    staged: &[(usize, &Step)],
    p: &mut Progress,
) -> Result<(), CellError> {
    let archive = cell_dir.join(".junit-staged.tar");
    if let Err(e) = cx
        .engine
        .download(container, JUNIT_STAGING, &archive, MAX_JUNIT_ARCHIVE)
        .await
    {
        match e {
            EngineError::Failed { message, .. } => {
                p.messages.push(format!("{JUNIT_STAGING}: {message}"));
                return Ok(());
            }
            e => return Err(e.into()),
        }
    }
    let steps: Vec<(usize, String, Vec<String>)> = staged
        .iter()
        .map(|(i, s)| (*i, s.name.clone(), s.junit.clone()))
        .collect();
    let dir = cell_dir.to_path_buf();
    let (files, messages) = blocking("unpacking JUnit files", move || {
        let out = file_staged(&archive, &dir, &steps);
        let _ = std::fs::remove_file(&archive);
        out
    })
    .await??;
    p.junit.extend(files);
    p.messages.extend(messages);
    Ok(())
}

/// [`collect_staged`]'s work on disk: unpacks the archive, then files each
/// step's matches as its `NN.list` names them.
fn file_staged(
    archive: &Path,
    cell_dir: &Path,
    steps: &[(usize, String, Vec<String>)],
) -> Result<(Vec<String>, Vec<String>), CellError> {
    let (mut files, mut messages) = (Vec::new(), Vec::new());
    let root = cell_dir.join(".junit-staged");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).map_err(|e| CellError::io(&root, e))?;
    let f = std::fs::File::open(archive).map_err(|e| CellError::io(archive, e))?;
    let limits = untar::Limits {
        max_total: MAX_JUNIT_ARCHIVE,
        max_entries: 10_000,
    };
    let unpacked = match untar::unpack(f, &root, limits, JUNIT_STAGING) {
        Ok(u) => u,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&root);
            messages.push(format!("{JUNIT_STAGING}: unreadable archive: {e}"));
            return Ok((files, messages));
        }
    };
    messages.extend(unpacked.refused);
    for (index, name, globs) in steps {
        let list = root.join("junit").join(format!("{index:02}.list"));
        let Ok(listed) = std::fs::read(&list) else {
            messages.push(format!("listing JUnit files ({}) failed", globs.join(" ")));
            continue;
        };
        let matched: Vec<String> = listed
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        if matched.is_empty() {
            messages.push(format!("no JUnit file matched {}", globs.join(" ")));
            continue;
        }
        let dest = cell_dir.join("junit").join(step_slug(*index, name));
        std::fs::create_dir_all(&dest).map_err(|e| CellError::io(&dest, e))?;
        for abs in matched {
            let at = staged(&root, *index, &abs);
            let Some(from) = at.parent() else { continue };
            let base = PathBuf::from(at.file_name().unwrap_or_default());
            let rels: Vec<PathBuf> = unpacked
                .files
                .iter()
                .filter_map(|f| root.join(f).strip_prefix(&at).ok().map(Path::to_path_buf))
                .map(|rest| match rest.as_os_str().is_empty() {
                    true => base.clone(),
                    false => base.join(rest),
                })
                .collect();
            if rels.is_empty() {
                messages.push(format!("{abs}: could not be copied out"));
                continue;
            }
            files.extend(place_junit(from, &rels, &dest, cell_dir, &abs)?);
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok((files, messages))
}

/// The staged copy of `abs` for step `index` under the unpacked staging
/// directory `root` (which holds `junit/NN/...`).
fn staged(root: &Path, index: usize, abs: &str) -> PathBuf {
    root.join("junit")
        .join(format!("{index:02}"))
        .join(abs.trim_start_matches('/'))
}
