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

use memchr::memmem;

use super::cell::{
    blocking, judge_exit, passed_inline, place_junit, skip_step, step_slug, timed_out,
    timed_out_note, CellEnv, CellError, OpenStep, Progress, StepLog, EXIT_SKIPPED,
};
use crate::engine::{Attached, EngineError};
use crate::image::untar;
use crate::plan::{Cell, Step};
use crate::store::record::{Status, StepRecord};

/// Scripts passed inline to the runner, in bytes, beyond which the rest run
/// by exec: the whole command line must stay under Linux's `ARG_MAX`.
const RUNNER_ARGS_MAX: usize = 1024 * 1024;
/// Where the runner copies JUnit files.
pub const JUNIT_STAGING: &str = "/rocmatrix/junit";

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

/// The runner's command line: runs the CDI hook stand-ins `hooks` (shell
/// commands), then `steps` (index into the cell's steps, the step) in
/// order, then idles. It never ends by itself: Docker may drop the last
/// output of a main process that exits at once (a step's last line, its end
/// marker), and the steps after a test suite need it running.
pub fn runner_command(nonce: &str, hooks: &[String], steps: &[(usize, &Step)]) -> Vec<String> {
    let mut script = String::from(
        "M=$1; s=0\n\
         oom() { local n; n=$(sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory.events 2>/dev/null); \
         [ -n \"$n\" ] || n=$(sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null); \
         echo \"${n:-0}\"; }\n",
    );
    let mut args = vec![
        "bash".to_string(),
        "-c".into(),
        String::new(),
        "rocmatrix-runner".into(),
        nonce.to_string(),
    ];
    // Like the steps' scripts, each hook is a positional argument.
    for (index, hook) in hooks.iter().enumerate() {
        args.push(hook.clone());
        script.push_str(&format!(
            "sh -c -- \"${{{}}}\" 2>&1; printf '%s H {index} %s\\n' \"$M\" \"$?\"\n",
            args.len() - 4
        ));
    }
    script.push_str("steps() {\n");
    for (index, step) in steps {
        let path = format!("/rocmatrix/steps/{}.sh", step_slug(*index, &step.name));
        // The script itself is a positional argument of the runner, never
        // part of the runner's own text; one too long for an argument was
        // uploaded (as for an exec, see `cell::step_command`).
        let cmd = if passed_inline(&step.run) {
            args.push(step.run.clone());
            format!(
                "bash -eo pipefail -c -- \"${{{}}}\" {}",
                args.len() - 4,
                crate::plan::ci::shell_quote(&path)
            )
        } else {
            format!("bash -eo pipefail {}", crate::plan::ci::shell_quote(&path))
        };
        // The step's own clock ($EPOCHREALTIME, bash 5; `-` without it):
        // its end marker says how long it ran, so a kill that came late
        // (a stuck engine held its output back) does not make it a timeout.
        script.push_str(&format!(
            "printf '%s B {index}\\n' \"$M\"\n\
             t=${{EPOCHREALTIME/[.,]/}}\n\
             ROCMATRIX_STEP={name} {cmd} 2>&1; rc=$?; o=$(oom)\n\
             if [ -n \"$t\" ]; then ms=$(( (${{EPOCHREALTIME/[.,]/}} - t) / 1000 )); else ms=-; fi\n",
            name = crate::plan::ci::shell_quote(&step.name),
        ));
        if !step.junit.is_empty() {
            script.push_str(&stage_junit(*index, &step.junit));
        }
        script.push_str(&format!(
            "printf '%s E {index} %s %s %s\\n' \"$M\" \"$rc\" \"$o\" \"$ms\"\n"
        ));
        // Where the controller would judge the cell stopped, so does the
        // runner (see `cell::stops_the_cell`).
        let stop_if = if step.continue_on_error {
            format!("[ $rc = {EXIT_SKIPPED} ] || {{ [ $rc = 137 ] && [ \"$o\" -gt \"$s\" ]; }}")
        } else {
            "[ $rc != 0 ]".to_string()
        };
        script.push_str(&format!("if {stop_if}; then return; fi; s=$o\n"));
    }
    script.push_str(":\n}\nsteps \"$@\"\nexec sleep infinity\n");
    args[2] = script;
    args
}

/// Shell copying what `globs` match to the staging directory of step
/// `index`, listing the matches NUL-separated; relative matches are under
/// `/work`, as when the files are collected by exec.
fn stage_junit(index: usize, globs: &[String]) -> String {
    let dir = format!("{JUNIT_STAGING}/{index:02}");
    format!(
        "( shopt -s nullglob globstar; mkdir -p {dir}; : > {dir}.list; \
         for f in {globs}; do if [ -e \"$f\" ] || [ -L \"$f\" ]; then \
         case $f in /*) a=$f;; *) a=/work/$f;; esac; printf '%s\\0' \"$a\" >> {dir}.list; \
         cp -a --parents -- \"$a\" {dir}/; fi; done ) >/dev/null 2>&1\n",
        globs = globs.join(" ")
    )
}

/// A marker the runner wrote between steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    /// Step `index` begins.
    Began(usize),
    /// Step `index` exited with `code`; the cgroup had counted `oom_kills`.
    Ended {
        index: usize,
        code: i64,
        oom_kills: u64,
        /// How long the step ran by its own clock, when the shell knew.
        elapsed_ms: Option<u64>,
    },
    /// Hook stand-in `index` exited with `code`.
    Hook { index: usize, code: i64 },
}

/// What the stream holds next: a step's output or a marker.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    Output(Vec<u8>),
    Marker(Marker),
}

/// Splits the runner's output into step output and markers, whatever the
/// chunk boundaries.
pub struct MarkerScanner {
    prefix: Vec<u8>,
    pending: Vec<u8>,
}

impl MarkerScanner {
    pub fn new(nonce: &str) -> MarkerScanner {
        MarkerScanner {
            prefix: format!("{nonce} ").into_bytes(),
            pending: Vec::new(),
        }
    }

    /// Feeds a chunk; returns the pieces it completes, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Piece> {
        self.pending.extend_from_slice(chunk);
        let mut pieces = Vec::new();
        loop {
            match memmem::find(&self.pending, &self.prefix) {
                Some(at) => {
                    let Some(nl) = memchr::memchr(b'\n', &self.pending[at..]) else {
                        if at > 0 {
                            pieces.push(Piece::Output(self.pending.drain(..at).collect()));
                        }
                        break;
                    };
                    if at > 0 {
                        pieces.push(Piece::Output(self.pending[..at].to_vec()));
                    }
                    let line = &self.pending[at + self.prefix.len()..at + nl];
                    if let Some(m) = parse_marker(line) {
                        pieces.push(Piece::Marker(m));
                    }
                    self.pending.drain(..at + nl + 1);
                }
                None => {
                    // Hold back only a tail that could begin a marker.
                    let longest = self.prefix.len().saturating_sub(1).min(self.pending.len());
                    let keep = (1..=longest)
                        .rev()
                        .find(|k| self.pending.ends_with(&self.prefix[..*k]))
                        .unwrap_or(0);
                    let cut = self.pending.len() - keep;
                    if cut > 0 {
                        pieces.push(Piece::Output(self.pending.drain(..cut).collect()));
                    }
                    break;
                }
            }
        }
        pieces
    }

    /// What is left when the stream ends.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        (!self.pending.is_empty()).then(|| std::mem::take(&mut self.pending))
    }
}

fn parse_marker(line: &[u8]) -> Option<Marker> {
    let text = std::str::from_utf8(line).ok()?;
    let mut words = text.split(' ');
    match words.next()? {
        "B" => Some(Marker::Began(words.next()?.parse().ok()?)),
        "E" => Some(Marker::Ended {
            index: words.next()?.parse().ok()?,
            code: words.next()?.parse().ok()?,
            oom_kills: words.next()?.trim().parse().unwrap_or(0),
            elapsed_ms: words.next().and_then(|w| w.trim().parse().ok()),
        }),
        "H" => Some(Marker::Hook {
            index: words.next()?.parse().ok()?,
            code: words.next()?.trim().parse().ok()?,
        }),
        _ => None,
    }
}

/// A fresh random nonce (128 bits, hex), for one container's markers.
pub fn nonce() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::from("rocmatrix-");
    for _ in 0..2 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
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
pub(super) async fn run_leading(
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
        let record = follow_step(cx, cell, container, cell_dir, i, step, &mut reader, p).await?;
        if record.status != Status::Timeout && !step.junit.is_empty() {
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
#[allow(clippy::too_many_arguments)]
async fn follow_step(
    cx: &CellEnv<'_>,
    cell: &Cell,
    container: &str,
    cell_dir: &Path,
    index: usize,
    step: &Step,
    reader: &mut Reader,
    p: &mut Progress,
) -> Result<StepRecord, CellError> {
    let mut open = OpenStep::begin(cx, cell, index, step, cell_dir).await?;
    let log = &mut open.log;
    let deadline = tokio::time::Instant::from_std(open.started + step.timeout);
    let (status, mut exit_code, reason) = loop {
        match tokio::time::timeout_at(deadline, reader.next()).await {
            Err(_) => {
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
    if step.run.trim().is_empty() && status == Status::Passed {
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
        .download(
            container,
            JUNIT_STAGING,
            &archive,
            super::cell::MAX_JUNIT_ARCHIVE,
        )
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
        max_total: super::cell::MAX_JUNIT_ARCHIVE,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts the runner `args` describe, its stdout piped.
    fn spawn_runner(args: &[String]) -> (std::process::Child, std::process::ChildStdout) {
        let mut child = std::process::Command::new(&args[0])
            .args(&args[1..])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        (child, out)
    }

    /// Reads `out` into `text` until it holds `marker`.
    fn read_until(out: &mut impl std::io::Read, text: &mut String, marker: &str) {
        let mut buf = [0u8; 4096];
        while !text.contains(marker) {
            let got = out.read(&mut buf).unwrap();
            assert!(got > 0, "{text}");
            text.push_str(&String::from_utf8_lossy(&buf[..got]));
        }
    }

    #[test]
    fn markers_split_output_across_any_chunk_boundary() {
        let n = "rocmatrix-abc";
        let stream = format!("{n} B 0\nhello\nno newline{n} E 0 3 0 1520\n{n} B 1\nx{n} E 1 0 2\n");
        let bytes = stream.as_bytes();
        for size in 1..bytes.len() {
            let mut s = MarkerScanner::new(n);
            let mut out = Vec::new();
            for chunk in bytes.chunks(size) {
                out.extend(s.feed(chunk));
            }
            assert_eq!(s.finish(), None);
            // Merge adjacent outputs (chunking splits them).
            let mut merged: Vec<Piece> = Vec::new();
            for p in out {
                match (merged.last_mut(), p) {
                    (Some(Piece::Output(a)), Piece::Output(b)) => a.extend(b),
                    (_, p) => merged.push(p),
                }
            }
            assert_eq!(
                merged,
                vec![
                    Piece::Marker(Marker::Began(0)),
                    Piece::Output(b"hello\nno newline".to_vec()),
                    Piece::Marker(Marker::Ended {
                        index: 0,
                        code: 3,
                        oom_kills: 0,
                        elapsed_ms: Some(1520),
                    }),
                    Piece::Marker(Marker::Began(1)),
                    Piece::Output(b"x".to_vec()),
                    Piece::Marker(Marker::Ended {
                        index: 1,
                        code: 0,
                        oom_kills: 2,
                        elapsed_ms: None,
                    }),
                ],
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn output_that_only_resembles_a_marker_stays_output() {
        let mut s = MarkerScanner::new("rocmatrix-abc");
        let mut out = s.feed(b"rocmatrix-ab B 0\nrocmatrix-abc");
        out.extend(s.finish().map(Piece::Output));
        let text: Vec<u8> = out
            .into_iter()
            .flat_map(|p| match p {
                Piece::Output(b) => b,
                Piece::Marker(m) => panic!("{m:?}"),
            })
            .collect();
        assert_eq!(text, b"rocmatrix-ab B 0\nrocmatrix-abc");
    }

    #[test]
    fn output_is_held_back_only_where_a_marker_could_begin() {
        let mut s = MarkerScanner::new("rocmatrix-abc");
        assert_eq!(
            s.feed(b"sleeping\n"),
            vec![Piece::Output(b"sleeping\n".to_vec())]
        );
        assert_eq!(s.feed(b"x rocm"), vec![Piece::Output(b"x ".to_vec())]);
        assert_eq!(s.finish(), Some(b"rocm".to_vec()));
    }

    /// The runner's own script through real bash: each step runs with its
    /// script, its output and exit code between its markers; a failing step
    /// without `continue_on_error` stops it; then it idles.
    #[test]
    fn the_runner_runs_each_step_between_its_markers_and_stops_where_the_cell_would() {
        use std::io::Read;
        let step = |name: &str, run: &str, continue_on_error: bool| Step {
            name: name.into(),
            run: run.into(),
            suite: None,
            timeout: std::time::Duration::from_secs(5),
            junit: Vec::new(),
            gpu: crate::spec::GpuUse::None,
            continue_on_error,
            backtrace: None,
            rerun_failures: 0,
        };
        let steps = [
            step("one", "echo \"one $0\"; exit 3", true),
            step("two", "echo two >&2; false; echo unreached", false),
            step("three", "echo three", false),
        ];
        let listed: Vec<(usize, &Step)> = steps.iter().enumerate().collect();
        let n = "rocmatrix-0123";
        let args = runner_command(n, &[], &listed);
        let (mut child, mut out) = spawn_runner(&args);
        let mut text = String::new();
        // Until the runner idles: the second step's end marker.
        read_until(&mut out, &mut text, &format!("{n} E 1 "));
        std::thread::sleep(std::time::Duration::from_millis(200));
        let still_running = child.try_wait().unwrap().is_none();
        let _ = child.kill();
        let _ = child.wait();
        let _ = out.read_to_string(&mut text);
        // The OOM-kill count is this host's cgroup's, whatever it is; the
        // step's own time (milliseconds, by bash's clock) whatever it was.
        let text = regex::Regex::new(r"(E \d+ \d+) \d+ \d+\n")
            .unwrap()
            .replace_all(&text, "$1 K T\n");
        assert_eq!(
            text,
            format!(
                "{n} B 0\none /rocmatrix/steps/01-one.sh\n{n} E 0 3 K T\n\
                 {n} B 1\ntwo\n{n} E 1 1 K T\n"
            )
        );
        assert!(still_running, "the runner idles instead of exiting");
    }

    /// Hook stand-ins come first, each with its output and a marker for its
    /// exit code; a failing one does not stop the steps.
    #[test]
    fn the_runner_runs_hook_stand_ins_before_the_steps() {
        let step = Step {
            name: "one".into(),
            run: "echo step".into(),
            suite: None,
            timeout: std::time::Duration::from_secs(5),
            junit: Vec::new(),
            gpu: crate::spec::GpuUse::None,
            continue_on_error: false,
            backtrace: None,
            rerun_failures: 0,
        };
        let n = "rocmatrix-0123";
        let hooks = [
            "echo \"it's linked\"".to_string(),
            "echo bad >&2; exit 4".into(),
        ];
        let args = runner_command(n, &hooks, &[(0, &step)]);
        let (mut child, mut out) = spawn_runner(&args);
        let mut text = String::new();
        read_until(&mut out, &mut text, &format!("{n} E 0 "));
        let _ = child.kill();
        let _ = child.wait();
        let text = text.split(&format!("{n} E 0 ")).next().unwrap();
        assert_eq!(
            text,
            format!("it's linked\n{n} H 0 0\nbad\n{n} H 1 4\n{n} B 0\nstep\n")
        );
        let mut scanner = MarkerScanner::new(n);
        assert_eq!(
            scanner.feed(format!("{n} H 1 4\n").as_bytes()),
            vec![Piece::Marker(Marker::Hook { index: 1, code: 4 })]
        );
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(nonce(), nonce());
        assert_eq!(nonce().len(), "rocmatrix-".len() + 32);
    }

    #[test]
    fn quoting_survives_the_shell() {
        for w in ["plain", "it's", "a b", "", "$(x)", "\"q\""] {
            let out = std::process::Command::new("bash")
                .args([
                    "-c",
                    &format!("printf %s {}", crate::plan::ci::shell_quote(w)),
                ])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), w);
        }
    }
}
