//! The history of runs: every finished `run`, `report` and `report merge`
//! records into it, so that a failing test can be told new, failing since
//! a run, known, or flaky, and where. By default an SQLite file beside the
//! run stores (`<out>/history.sqlite`); for a fleet of CI runners, a
//! PostgreSQL server (`--history postgres://…`, `ROCMATRIX_HISTORY`).
//!
//! - [`location`]: where the history is, and a URL's password kept out of
//!   every message;
//! - [`record`]: what a run leaves in it;
//! - [`schema`], [`backend`], [`sqlite`], [`postgres`]: the tables and the
//!   two databases;
//! - [`verdict`], [`place`] (`src/timeline/`): flaky, regression, known,
//!   fixed — the rules — and where a flaky test is flaky (axes, hosts, GPUs);
//! - [`hosts`]: failures and flakes per host and GPU (`history hosts`);
//! - [`past`]: the history seen from one run, as its report shows it,
//!   its window followed from failsets by `window`;
//! - this module: opening, recording, and following tests across runs.
//!
//! A history that cannot be opened or written never costs a run its
//! results: the caller says so in one line and goes on (docs/history.md).

pub mod backend;
mod failset;
mod follow;
pub mod hosts;
pub mod location;
pub mod past;
mod postgres;
pub mod query;
pub mod record;
pub mod schema;
mod sql;
mod sqlite;
mod window;

use std::collections::BTreeMap;

pub use crate::timeline::place::{self, flaky_places, flaky_places_of, Place};
pub use crate::timeline::{verdict, TestHistory};
use backend::{Backend, DbError, RunRow, StoredCell};
pub use location::Location;
use record::RunRecord;
use verdict::HistoryVerdict;

/// A history that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("the history is off (--history off)")]
    Off,
    #[error("history {location}: {message}")]
    Database { location: String, message: String },
}

/// An open history.
pub struct History {
    backend: Box<dyn Backend>,
    location: Location,
}

impl History {
    /// Opens (creating or migrating) the history at `location`.
    pub fn open(location: &Location) -> Result<History, HistoryError> {
        let opened: Result<Box<dyn Backend>, DbError> = match location {
            Location::Off => return Err(HistoryError::Off),
            Location::Sqlite(path) => sqlite::Sqlite::open(path).map(|b| Box::new(b) as _),
            Location::Postgres(url) => postgres::Postgres::open(url).map(|b| Box::new(b) as _),
        };
        match opened {
            Ok(backend) => Ok(History {
                backend,
                location: location.clone(),
            }),
            Err(message) => Err(error(location, &message.0)),
        }
    }

    /// Opens the history at `location` for reading only: nothing is
    /// created, migrated or written (`rocmatrix serve`).
    pub fn open_read_only(location: &Location) -> Result<History, HistoryError> {
        let opened: Result<Box<dyn Backend>, DbError> = match location {
            Location::Off => return Err(HistoryError::Off),
            Location::Sqlite(path) => {
                sqlite::Sqlite::open_read_only(path).map(|b| Box::new(b) as _)
            }
            Location::Postgres(url) => {
                postgres::Postgres::open_read_only(url).map(|b| Box::new(b) as _)
            }
        };
        match opened {
            Ok(backend) => Ok(History {
                backend,
                location: location.clone(),
            }),
            Err(message) => Err(error(location, &message.0)),
        }
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Records `r`; false when it was recorded already.
    pub fn record(&mut self, r: &RunRecord) -> Result<bool, HistoryError> {
        let location = self.location.clone();
        self.backend.record(r).map_err(|m| error(&location, &m.0))
    }

    /// Whether the run `run` is recorded.
    pub fn has_run(&mut self, run: &str) -> Result<bool, HistoryError> {
        let location = self.location.clone();
        self.backend
            .has_run(run)
            .map_err(|m| error(&location, &m.0))
    }

    /// Every recorded run, by start time.
    pub fn runs(&mut self) -> Result<Vec<RunRow>, HistoryError> {
        let location = self.location.clone();
        self.backend.runs().map_err(|m| error(&location, &m.0))
    }

    /// Every test that failed at least once (or only `test`), followed
    /// through every run of each cell it failed in; `test`, and every test
    /// found flaky, also through the other cells of its matrix that ran it.
    pub fn follow(&mut self, test: Option<&str>) -> Result<Vec<TestHistory>, HistoryError> {
        let scope = match test {
            Some(t) => Scope::Test(t),
            None => Scope::Everything,
        };
        Ok(self.follow_in(scope)?.tests)
    }

    /// What `scope` selects, followed and judged as [`History::follow`]
    /// does, with the runs its points' indices refer to. In a report's
    /// window ([`Scope::Recent`]) the tests carry no signature or message:
    /// the report has its run's own.
    pub fn follow_in(&mut self, scope: Scope<'_>) -> Result<Followed, HistoryError> {
        let location = self.location.clone();
        let e = |m: DbError| error(&location, &m.0);
        let all = match scope {
            Scope::Recent { matrix, .. } => self.backend.runs_of(matrix),
            _ => self.backend.runs(),
        };
        let (runs, earlier) = follow::window(all.map_err(e)?, scope);
        let stored = match scope {
            Scope::Recent { .. } => {
                let ids: Vec<String> = runs.iter().map(|r| r.run.clone()).collect();
                self.backend.cells_of_runs(&ids)
            }
            _ => self.backend.cells(),
        };
        let cells = follow::cells_of(stored.map_err(e)?, &runs);
        let tests = follow::follow(&mut *self.backend, &runs, &cells, scope).map_err(e)?;
        Ok(Followed {
            runs,
            earlier,
            cells,
            tests,
        })
    }
}

/// Tests followed across runs.
pub struct Followed {
    /// The runs followed through, by start time: a [`Point`]'s `run` and a
    /// verdict's `since` are places in this list.
    pub runs: Vec<RunRow>,
    /// How many runs of the scope came before `runs` (a window's cut).
    pub earlier: usize,
    /// (matrix, cell) → the cell in each run it ran in, in order.
    pub cells: BTreeMap<(String, String), Vec<(usize, StoredCell)>>,
    pub tests: Vec<TestHistory>,
}

/// What [`History::follow_in`] follows.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// Every test that ever failed.
    Everything,
    /// One test, by `classname.name`, in every cell that ran it.
    Test(&'a str),
    /// The tests `hashes` names (identity hash → `classname.name`) of
    /// matrix `matrix`, in every cell, over its `last` runs up to `until`
    /// only (and the flaky ones into its other cells): what a report shows
    /// beside a run's failing tests.
    Recent {
        matrix: &'a str,
        /// The run the window ends with (the run being reported).
        until: &'a str,
        last: usize,
        hashes: &'a std::collections::HashMap<u64, &'a str>,
    },
}

fn error(location: &Location, message: &str) -> HistoryError {
    HistoryError::Database {
        location: location.to_string(),
        message: location.scrub(message),
    }
}

/// A run as the history's words name it: `RUN (DATE)`.
pub fn run_and_date(r: &RunRow) -> String {
    format!("{} ({})", r.run, record::time_of(r.started_ms))
}

/// How a failing test of the latest run reads against its history, in
/// words: `new`, `failing since RUN (DATE)`, `known since RUN (DATE)`,
/// `flaky (K of N)`.
pub fn describe(t: &TestHistory, runs: &[RunRow], latest: usize) -> String {
    let at = |i: usize| runs.get(i).map(run_and_date).unwrap_or_default();
    match &t.verdict {
        HistoryVerdict::Regression { since } | HistoryVerdict::KnownSince { since }
            if *since == latest =>
        {
            "new".to_string()
        }
        HistoryVerdict::Regression { since } => format!("failing since {}", at(*since)),
        HistoryVerdict::KnownSince { since } => format!("known since {}", at(*since)),
        HistoryVerdict::Flaky { failures, runs, .. } => {
            format!("flaky ({failures} of {runs} runs)")
        }
        HistoryVerdict::Fixed { since } => format!("fixed since {}", at(*since)),
        HistoryVerdict::Passing => "passing".to_string(),
    }
}

/// What changed underneath between run `before` and run `at`: versions
/// of the packages that matter, per environment identity, and source
/// commits.
pub fn changes(before: &RunRow, at: &RunRow) -> Vec<String> {
    let mut out = Vec::new();
    for env in &at.environments {
        let Some(old) = before
            .environments
            .iter()
            .find(|e| e.identity == env.identity && !env.identity.is_empty())
        else {
            continue;
        };
        for (pkg, new) in &env.packages {
            match old.packages.get(pkg) {
                Some(was) if was != new => out.push(format!("{pkg} {was} → {new}")),
                None => out.push(format!("{pkg} added ({new})")),
                _ => {}
            }
        }
        if out.is_empty() && old.installed_digest != env.installed_digest {
            out.push(format!("{}: other installed packages moved", env.base));
        }
    }
    for (name, commit) in &at.sources {
        if let Some(was) = before.sources.get(name).filter(|w| *w != commit) {
            out.push(format!(
                "source {name} {} → {}",
                crate::digest::short(was),
                crate::digest::short(commit)
            ));
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::record::{CellRow, TestRow};
    use super::*;
    use crate::outcome::{CellVerdict, TestStatus};

    /// Run `k` of matrix `m`: cell `gfx` with test `T.A` failing when `fail`.
    fn run(k: i64, cells: &[(&str, bool, &str)]) -> RunRecord {
        let hash = crate::results::model::test_hash("s", "T", "A");
        let mut r = RunRecord {
            run: format!("run-{k}"),
            started_ms: 1_000 + k,
            name: "m".into(),
            matrix_hash: String::new(),
            sources: BTreeMap::new(),
            environments: Vec::new(),
            cells: Vec::new(),
            tests: Vec::new(),
            passsets: BTreeMap::new(),
        };
        for (gfx, fail, inputs) in cells {
            let passed: Vec<u64> = if *fail { vec![] } else { vec![hash] };
            let digest = record::passset_digest(&passed);
            r.passsets.insert(digest.clone(), passed);
            r.cells.push(CellRow {
                cell: gfx.to_string(),
                axes: BTreeMap::from([("gfx".to_string(), gfx.to_string())]),
                outcome: if *fail {
                    CellVerdict::Failing
                } else {
                    CellVerdict::Passed
                },
                inputs: inputs.to_string(),
                passed: digest,
                signatures: Vec::new(),
                host: Default::default(),
            });
            if *fail {
                r.tests.push(TestRow {
                    cell: gfx.to_string(),
                    test: "T.A".into(),
                    hash,
                    outcome: TestStatus::Failed,
                    time: None,
                    reruns: 0,
                    signature: String::new(),
                    message: "boom".into(),
                });
            }
        }
        r
    }

    #[test]
    fn recorded_runs_are_followed_and_judged() {
        let dir = tempfile::tempdir().unwrap();
        let loc = Location::Sqlite(dir.path().join("h.sqlite"));
        let mut h = History::open(&loc).unwrap();
        // gfx1151 fails now and then with the same inputs; gfx1030 breaks
        // at run 4 when its inputs change.
        let plan = [
            [("gfx1030", false, "a"), ("gfx1151", false, "x")],
            [("gfx1030", false, "a"), ("gfx1151", true, "x")],
            [("gfx1030", false, "a"), ("gfx1151", false, "x")],
            [("gfx1030", true, "b"), ("gfx1151", false, "x")],
            [("gfx1030", true, "b"), ("gfx1151", false, "x")],
        ];
        for (k, cells) in plan.iter().enumerate() {
            assert!(h.record(&run(k as i64, cells)).unwrap());
        }
        assert!(!h.record(&run(0, &plan[0])).unwrap(), "idempotent");
        let all = h.follow(None).unwrap();
        let of = |cell: &str| all.iter().find(|t| t.cell == cell).unwrap();
        assert_eq!(
            of("gfx1030").verdict,
            HistoryVerdict::Regression { since: 3 }
        );
        assert!(of("gfx1151").verdict.is_flaky());
        let strip: String = of("gfx1030").points.iter().map(|p| p.obs.mark()).collect();
        assert_eq!(strip, "✓✓✓✗✗");
        // gfx1030 is not flaky: only gfx1151 is, and it says so.
        let places = flaky_places(&all);
        assert_eq!(
            places[&("m".to_string(), "T.A".to_string())].axes,
            ["gfx=gfx1151"]
        );
        let runs = h.runs().unwrap();
        assert_eq!(
            describe(of("gfx1030"), &runs, 4),
            format!("failing since run-3 ({})", record::time_of(1_003))
        );
        // Reopening a database of this version migrates nothing.
        drop(h);
        assert_eq!(History::open(&loc).unwrap().runs().unwrap().len(), 5);
        // Opened read-only (`serve`), it reads and never writes.
        let mut ro = History::open_read_only(&loc).unwrap();
        assert_eq!(ro.runs().unwrap().len(), 5);
        assert_eq!(ro.stamp().unwrap().0, 5);
        let e = ro.record(&run(9, &plan[0])).unwrap_err().to_string();
        assert!(e.contains("readonly"), "{e}");
        assert!(History::open_read_only(&Location::Sqlite(dir.path().join("none"))).is_err());
    }

    #[test]
    fn a_history_that_cannot_be_opened_says_where_without_the_password() {
        let loc = Location::resolve(
            Some("postgres://ci:hunter2-pw@127.0.0.1:1/rocm?connect_timeout=2"),
            std::path::Path::new("."),
        );
        let e = History::open(&loc)
            .err()
            .expect("nothing listens on port 1");
        let text = e.to_string();
        assert!(
            text.contains("postgres://ci:***@127.0.0.1:1/rocm"),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("h.sqlite");
        std::fs::write(&bad, b"not a database, not at all, really not").unwrap();
        let e = History::open(&Location::Sqlite(bad))
            .err()
            .expect("corrupt");
        assert!(e.to_string().contains("h.sqlite"), "{e}");
    }
}
