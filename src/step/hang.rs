//! A step past its timeout, with `backtrace: {on: timeout}`: before the
//! kill, gdb attaches to the step's processes in the container
//! ([`crate::debugger::attach`]) and its output is kept on the host, as
//! `backtraces/<step>.txt` in the cell's directory (the container is killed
//! right after); [`super::backtrace::collect`] reads it into the step's
//! record. Bounded by the spec's `timeout`: the kill comes after it
//! whatever gdb did.

use std::path::Path;

use super::log::StepLog;
use super::protocol::step_slug;
use super::{blocking, CellError};
use crate::debugger::attach::{self, Tree};
use crate::engine::Engine;
use crate::plan::Step;

/// `SYS_PTRACE` for a container (a cell's or a build's) with a step that
/// asks for a hang's frames (`backtrace: {on: timeout}`): gdb attaches from
/// an exec, no parent of the hung process, which a host's
/// `kernel.yama.ptrace_scope` of 1 or 2 (Ubuntu's default is 1) refuses
/// without the capability; with it, the engine's default seccomp profile
/// allows ptrace on any kernel too.
pub(crate) fn ptrace_caps(steps: &[Step]) -> Vec<String> {
    let hangs = steps
        .iter()
        .any(|s| s.backtrace.as_ref().is_some_and(|b| b.on_timeout));
    if hangs {
        vec!["SYS_PTRACE".to_string()]
    } else {
        Vec::new()
    }
}

/// The frames of step `index`'s hang, as [`capture`] kept them in
/// `cell_dir` (a cell's or a build's directory); `None` when the step does
/// not ask for them or nothing was kept.
pub(crate) async fn read(
    cell_dir: &Path,
    index: usize,
    step: &Step,
) -> Result<Option<crate::store::record::Backtrace>, CellError> {
    let Some(spec) = step.backtrace.as_ref().filter(|b| b.on_timeout) else {
        return Ok(None);
    };
    let rel = crate::store::layout::backtrace_of(&step_slug(index, &step.name));
    let path = cell_dir.join(&rel);
    let text = blocking("reading a hang's backtrace", move || {
        std::fs::read_to_string(&path)
    })
    .await?;
    Ok(text.ok().map(|t| attach::parse(&t, spec.frames, &rel)))
}

/// Where a timed-out step's hang goes: its place in the cell and the
/// cell's directory.
#[derive(Clone, Copy)]
pub(crate) struct HangAt<'a> {
    pub(crate) index: usize,
    pub(crate) cell_dir: &'a Path,
}

/// When `step` asks for it, attaches gdb to its processes in `container`
/// and keeps the output as its hang's file; a line in its log either way.
/// Never fails the step: what goes wrong is in the file's note.
pub(crate) async fn capture(
    engine: &Engine,
    container: &str,
    step: &Step,
    at: HangAt<'_>,
    log: &mut StepLog,
) -> Result<(), CellError> {
    let Some(spec) = step.backtrace.as_ref().filter(|b| b.on_timeout) else {
        return Ok(());
    };
    log.note(&format!(
        "\nrocmatrix: step ran past its timeout; attaching gdb to its processes (at most {} s)\n",
        spec.timeout.as_secs()
    ));
    let text = attach::take(engine, container, &Tree::Step(&step.name), spec).await;
    let rel = crate::store::layout::backtrace_of(&step_slug(at.index, &step.name));
    let bt = attach::parse(&text, spec.frames, &rel);
    log.note(&format!(
        "rocmatrix: {}\n",
        bt.top(crate::store::record::TOP_FRAMES)
            .join("\nrocmatrix: ")
    ));
    let path = at.cell_dir.join(&rel);
    blocking("writing a hang's backtrace", move || {
        crate::store::write_atomic(&path, text.as_bytes())
            .map_err(|e| CellError::io(&path, std::io::Error::other(e)))
    })
    .await?
}
