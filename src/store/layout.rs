//! The names of the files and folders a run store (and a bisect store)
//! holds: the one place that spells them. Everything else asks for a path
//! here or goes through [`super::RunStore`]; the architecture test refuses
//! these names anywhere else under `src/`.

use std::path::{Path, PathBuf};

/// The plan the run was made from (`RunManifest`).
pub const PLAN: &str = "plan.json";
/// The run as a whole, written when it finishes (`RunInfo`).
pub const RUN: &str = "run.json";
/// The exact inputs: images, packages, sources (`Lock`).
pub const LOCK: &str = "lock.json";
/// One event per line, flushed as it happens.
pub const JOURNAL: &str = "journal.jsonl";
/// One cell's record (`CellRecord`), in `cells/<cell>/`.
pub const CELL: &str = "cell.json";
/// The folder of the cells.
pub const CELLS: &str = "cells";
/// A build stage's record (`BuildRecord`), in `builds/<key>/`.
pub const BUILD: &str = "build.json";
/// The folder of the build stages.
pub const BUILDS: &str = "builds";
/// The folder of a run's reports.
pub const REPORT: &str = "report";
/// The report's results (`results.json`), in `report/` of a run or in the
/// `--out` folder of `report merge` / `report junit`.
pub const RESULTS: &str = "results.json";
/// A bisection's state, in `.rocmatrix/bisects/<id>/`.
pub const BISECT: &str = "bisect.json";
/// A run's triage: where each new signature started and each gone one
/// was fixed (`Triage`, `src/triage/store.rs`), in the run directory.
pub const TRIAGE: &str = "triage.json";
/// A try's patches and how each cell it tried changed (`TrialFile`,
/// `src/store/trial.rs`), in the try's run directory.
pub const TRIAL: &str = "try.json";
/// The folder of a cell's backtrace files (gdb's output of a failing
/// command's rerun or a hang's look), in `cells/<cell>/`.
pub const BACKTRACES: &str = "backtraces";
/// The folder of bisections, under a run root (`.rocmatrix/bisects/`).
pub const BISECTS: &str = "bisects";
/// Probe outcomes kept by content, under a run root.
pub const PROBE_OUTCOMES: &str = "probe-outcomes";

/// The run root a run directory is in (the parent of its `runs/`), when
/// it is in one: a run directory copied elsewhere has none.
pub fn root_of(run_dir: &Path) -> Option<PathBuf> {
    let parent = run_dir.parent()?;
    (parent.file_name()? == "runs").then(|| parent.parent().map(Path::to_path_buf))?
}

/// Whether `dir` is a run directory (it holds a plan).
pub fn is_run(dir: &Path) -> bool {
    dir.join(PLAN).is_file()
}

/// The backtrace file of step `slug` (`NN-name`), relative to the cell's
/// directory.
pub fn backtrace_of(slug: &str) -> String {
    format!("{BACKTRACES}/{slug}.txt")
}

/// A run's lock.
pub fn lock_of(run_dir: &Path) -> PathBuf {
    run_dir.join(LOCK)
}

/// A run's own reports.
pub fn report_of(run_dir: &Path) -> PathBuf {
    run_dir.join(REPORT)
}

/// A run's plan.
pub fn plan_of(run_dir: &Path) -> PathBuf {
    run_dir.join(PLAN)
}

/// A run's journal.
pub fn journal_of(run_dir: &Path) -> PathBuf {
    run_dir.join(JOURNAL)
}

/// The record in a cell's directory.
pub fn cell_record_in(cell_dir: &Path) -> PathBuf {
    cell_dir.join(CELL)
}

/// A build stage's directory in a run (`builds/<key>`).
pub fn build_dir(run_dir: &Path, key: &str) -> PathBuf {
    run_dir.join(BUILDS).join(key)
}

/// The record in a build stage's directory.
pub fn build_record_in(build_dir: &Path) -> PathBuf {
    build_dir.join(BUILD)
}

/// Where `results.json` is for a run directory (`report/results.json`) or
/// a report folder (`results.json`): the first that exists, in that order.
pub fn results_in(dir: &Path) -> Option<PathBuf> {
    [dir.join(REPORT).join(RESULTS), dir.join(RESULTS)]
        .into_iter()
        .find(|p| p.is_file())
}

/// `results.json` in a report folder.
pub fn results_file(report_dir: &Path) -> PathBuf {
    report_dir.join(RESULTS)
}

/// A bisection's state file.
pub fn bisect_state(dir: &Path) -> PathBuf {
    dir.join(BISECT)
}

/// A run's triage (`triage.json` in the run directory).
pub fn triage_of(run_dir: &Path) -> PathBuf {
    run_dir.join(TRIAGE)
}

/// The kept probe outcomes under a run root (`<out>/probe-outcomes`).
pub fn probe_outcomes_in(out: &Path) -> PathBuf {
    out.join(PROBE_OUTCOMES)
}

/// The bisections under a run root (`<out>/bisects`).
pub fn bisects_in(out: &Path) -> PathBuf {
    out.join(BISECTS)
}
