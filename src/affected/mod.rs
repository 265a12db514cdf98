//! `--affected-by`: the cells of a plan a change can affect, and why.
//!
//! A change ([`change`]) is a binary package, a source package, a
//! `sources:` entry of the matrix or a file of the matrix's own. A cell is
//! affected when its environment installed one of the packages (the lock
//! has the whole installed set, dependencies included, and each package's
//! source package: `src/store/lock.rs`), when it builds from the source
//! (its checkout or its build's), or when it uses the file (a patch of its
//! sources, a file under a local source, a step's or the environment's
//! script naming it). A cell that no lock describes is affected with that
//! reason. The locks are those of runs ([`lock`]): `--lock RUN…`, else
//! the matrix's runs under the run root, newest first; an archive's index
//! (`--index`, [`index`]) adds the binaries each source package builds.
//!
//! Names nothing knows are refused ([`AffectedError::Unknown`]): a typo
//! must not select nothing. Stands on `src/plan/` and `src/store/`; the
//! commands (`plan`, `run`) call it.

pub mod args;
pub mod change;
pub mod index;
pub mod lock;
mod reason;
mod select;

pub use change::Change;
pub use lock::FoundLock;
pub use reason::Reason;
pub use select::select;

use crate::store::record::{locks_note, SelectedBy, SelectedCell};

/// Why a list of changes cannot select cells.
#[derive(Debug, thiserror::Error)]
pub enum AffectedError {
    #[error("--affected-by: {count} changes; at most {max} are read (split the list)")]
    TooMany { count: usize, max: usize },
    #[error("--affected-by: `{start}` is {len} bytes long; a change has at most {max}")]
    TooLong {
        start: String,
        len: usize,
        max: usize,
    },
    #[error("--affected-by `{change}`: {why}")]
    Bad { change: String, why: String },
    #[error("--affected-by {change}: {why}")]
    Unknown { change: String, why: String },
    #[error("--lock {run}: not a run: {why}")]
    NotARun { run: String, why: String },
    #[error("--lock {run}: a run of matrix `{its}`, not of `{ours}`")]
    OtherMatrix {
        run: String,
        its: String,
        ours: String,
    },
    #[error("--lock {run}: the run has no lock.json (it ended before any environment was ready)")]
    NoLock { run: String },
    #[error("reading the lock: {0}")]
    Lock(crate::store::StoreError),
    #[error("--index {path}: {why}")]
    Index { path: String, why: String },
}

impl AffectedError {
    /// Whether the command line is at fault (exit 2); else reading a run
    /// store failed (exit 3).
    pub fn is_usage(&self) -> bool {
        match self {
            AffectedError::Lock(e) => matches!(
                e,
                crate::store::StoreError::NotARun(_) | crate::store::StoreError::Version { .. }
            ),
            _ => true,
        }
    }
}

/// One affected cell and every reason it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Affected {
    pub cell: String,
    pub reasons: Vec<Reason>,
}

/// The cells a list of changes selects out of a plan's.
#[derive(Debug, Clone)]
pub struct Selection {
    pub changes: Vec<Change>,
    /// The affected cells, in plan order.
    pub cells: Vec<Affected>,
    /// How many cells were looked at.
    pub total: usize,
    /// The runs whose locks were read, the first first.
    pub locks: Vec<std::path::PathBuf>,
    /// The archive's index read (`--index`).
    pub index: Option<std::path::PathBuf>,
}

/// The most reasons a cell's line shows.
const SHOWN_REASONS: usize = 3;

impl Selection {
    /// Whether cell `id` is affected.
    pub fn contains(&self, id: &str) -> bool {
        self.cells.iter().any(|c| c.cell == id)
    }

    /// The changes, as given: `src:rocm-hipamd, file:fix.patch`.
    pub fn changes_text(&self) -> String {
        let all: Vec<String> = self.changes.iter().map(ToString::to_string).collect();
        all.join(", ")
    }

    /// One line per affected cell, `cell: reason; reason`, then the count
    /// (`12 of 96 cells affected by …`), or that none is.
    pub fn lines(&self) -> String {
        let mut out = String::new();
        for a in &self.cells {
            let shown: Vec<String> = a
                .reasons
                .iter()
                .take(SHOWN_REASONS)
                .map(ToString::to_string)
                .collect();
            let more = a.reasons.len().saturating_sub(SHOWN_REASONS);
            let more = match more {
                0 => String::new(),
                n => format!("; and {n} more"),
            };
            out.push_str(&format!("{}: {}{more}\n", a.cell, shown.join("; ")));
        }
        let locks: Vec<String> = self.locks.iter().map(|p| p.display().to_string()).collect();
        let lock = locks_note(&locks);
        match self.cells.len() {
            0 => out.push_str(&format!(
                "no cell is affected by {}: 0 of {} cells{lock}\n",
                self.changes_text(),
                self.total
            )),
            n => out.push_str(&format!(
                "{n} of {} cells affected by {}{lock}\n",
                self.total,
                self.changes_text()
            )),
        }
        out
    }

    /// The selection as the run's `plan.json` records it.
    pub fn recorded(&self) -> SelectedBy {
        let strings = |v: &[Reason]| v.iter().map(ToString::to_string).collect();
        SelectedBy {
            changes: self.changes.iter().map(ToString::to_string).collect(),
            locks: self.locks.iter().map(|p| p.display().to_string()).collect(),
            of: self.total,
            cells: (self.cells.iter())
                .map(|a| SelectedCell {
                    id: a.cell.clone(),
                    reasons: strings(&a.reasons),
                })
                .collect(),
        }
    }

    /// The selection as `plan --format json` carries it: as recorded.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self.recorded()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
