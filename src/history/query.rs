//! Read-only questions for those who keep a matrix's expectations
//! (`rocmatrix expect`): how each cell of a matrix ended, run after run.

use super::backend::{Rows, StoredCell, StoredTest};
use super::{error, History, HistoryError};

/// A cell of one recorded run of a matrix.
#[derive(Debug, Clone)]
pub struct CellRun {
    /// The run's place in [`History::runs`] (by start time).
    pub run: usize,
    pub cell: StoredCell,
}

impl History {
    /// Every recorded cell of every run of `matrix`, in run order.
    pub fn cells_of(&mut self, matrix: &str) -> Result<Vec<CellRun>, HistoryError> {
        let location = self.location.clone();
        let runs = self.backend.runs().map_err(|m| error(&location, &m.0))?;
        let place: std::collections::HashMap<&str, usize> = runs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.name == matrix)
            .map(|(i, r)| (r.run.as_str(), i))
            .collect();
        let mut out: Vec<CellRun> = self
            .backend
            .cells()
            .map_err(|m| error(&location, &m.0))?
            .into_iter()
            .filter_map(|c| {
                let run = *place.get(c.run.as_str())?;
                Some(CellRun { run, cell: c })
            })
            .collect();
        out.sort_by(|a, b| (a.run, &a.cell.cell).cmp(&(b.run, &b.cell.cell)));
        Ok(out)
    }

    /// The non-passing test rows of the runs `ids`.
    pub fn rows_of_runs(&mut self, ids: &[String]) -> Result<Vec<StoredTest>, HistoryError> {
        let location = self.location.clone();
        self.backend
            .tests(Rows::OfRuns(ids))
            .map_err(|m| error(&location, &m.0))
    }
}

impl History {
    /// What changes when a run is recorded: how many runs there are and
    /// when the latest was recorded (`rocmatrix serve` keeps its pages
    /// until it changes).
    pub fn stamp(&mut self) -> Result<(i64, i64), HistoryError> {
        let location = self.location.clone();
        self.backend.stamp().map_err(|m| error(&location, &m.0))
    }

    /// How many tests passed in a cell whose passing set is `digest`
    /// (`StoredCell::passed`), without reading the set.
    pub fn passed_count(&mut self, digest: &str) -> Result<usize, HistoryError> {
        let location = self.location.clone();
        self.backend
            .passset_len(digest)
            .map_err(|m| error(&location, &m.0))
    }

    /// The recorded cells of the runs `ids` (`rocmatrix serve`'s pages read
    /// a window of runs, never every cell).
    pub fn cells_of_runs(&mut self, ids: &[String]) -> Result<Vec<StoredCell>, HistoryError> {
        let location = self.location.clone();
        self.backend
            .cells_of_runs(ids)
            .map_err(|m| error(&location, &m.0))
    }
}
