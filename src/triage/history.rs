//! The other end without `--baseline`, from the history. For a signature
//! of the run: the last run before it where the signature's cell ran and
//! did not show it — it passed, or failed only in tests of other
//! signatures. For the signatures gone from the run: the run just before
//! it, where they were last seen. Its run store (under the same run root)
//! gives the lock the search starts from.

use std::path::{Path, PathBuf};

use super::TriageError;
use crate::history::History;
use crate::outcome::CellVerdict;

/// Where the good end of `cell`'s signature `sig` comes from.
pub enum Found {
    /// That run's directory.
    Run(PathBuf),
    /// Why there is none, in words.
    None(String),
}

/// The last run of matrix `name` before `run_id` where `cell` did not show
/// the signature `sig` (an id), as a run directory under `out`.
pub fn good_run(
    history: &mut History,
    name: &str,
    run_id: &str,
    cell: &str,
    sig: &str,
    out: &Path,
) -> Result<Found, TriageError> {
    let (_, now) = runs_and_place(history, run_id)?;
    let mut earlier: Vec<_> = history
        .cells_of(name)?
        .into_iter()
        .filter(|c| c.cell.cell == cell && c.run < now)
        .collect();
    earlier.sort_by_key(|c| std::cmp::Reverse(c.run));
    for c in earlier {
        let clean = match c.cell.outcome {
            Some(CellVerdict::Passed) => true,
            Some(CellVerdict::Failing) => {
                let rows = history.rows_of_runs(std::slice::from_ref(&c.cell.run))?;
                let mine: Vec<_> = rows.iter().filter(|r| r.cell == cell).collect();
                !mine.is_empty() && mine.iter().all(|r| r.signature != sig)
            }
            _ => false,
        };
        if !clean {
            continue;
        }
        let dir = out.join("runs").join(&c.cell.run);
        if crate::store::layout::is_run(&dir) {
            return Ok(Found::Run(dir));
        }
        return Ok(Found::None(format!(
            "the history's last run where cell {cell} did not show it, {}, is no longer \
             under {}",
            c.cell.run,
            out.join("runs").display()
        )));
    }
    Ok(Found::None(format!(
        "the history holds no earlier run where cell {cell} ran without it"
    )))
}

/// The run of matrix `name` the history recorded last before `run_id`, as
/// a run directory under `out`: the signatures it showed that the run does
/// not are gone, and their fix ranges end there.
pub fn previous_run(
    history: &mut History,
    name: &str,
    run_id: &str,
    out: &Path,
) -> Result<Found, TriageError> {
    let (runs, now) = runs_and_place(history, run_id)?;
    let Some(before) = runs[..now].iter().rev().find(|r| r.name == name) else {
        return Ok(Found::None(
            "the history holds no earlier run of this matrix".into(),
        ));
    };
    let dir = out.join("runs").join(&before.run);
    if crate::store::layout::is_run(&dir) {
        return Ok(Found::Run(dir));
    }
    Ok(Found::None(format!(
        "the history's run before it, {}, is no longer under {}",
        before.run,
        out.join("runs").display()
    )))
}

/// The recorded runs and `run_id`'s place among them: a run not recorded
/// yet (`run --triage` triages before it records) comes after every
/// recorded one.
fn runs_and_place(
    history: &mut History,
    run_id: &str,
) -> Result<(Vec<crate::history::backend::RunRow>, usize), TriageError> {
    let runs = history.runs()?;
    let now = runs
        .iter()
        .position(|r| r.run == run_id)
        .unwrap_or(runs.len());
    Ok((runs, now))
}
