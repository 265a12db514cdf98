//! Which locks say what each cell installed and built from: those of the
//! runs `--lock RUN…` names (refused when one is not a run of this
//! matrix), else those of the matrix's runs under the run root, newest
//! first. Locks are merged in that order: an environment or a cell takes
//! the first lock that has it, so a run of a few cells does not hide what
//! an earlier run of the whole matrix said of the others.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::AffectedError;
use crate::store::lock::Lock;
use crate::store::record::RunManifest;
use crate::store::{layout, RunStore, StoreError};

/// The most run directories looked at for the runs of a matrix.
const MAX_RUNS_READ: usize = 10_000;
/// The most runs whose locks are merged.
const MAX_MERGED: usize = 64;

/// The merged lock, and the runs it is from (those that added something),
/// first the one read first.
#[derive(Debug, Clone)]
pub struct FoundLock {
    pub runs: Vec<PathBuf>,
    pub lock: Lock,
    /// Cell → package → version its autopkgtests installed when they ran
    /// (`crate::store::test_installs`), from the first run that has any.
    pub tests: BTreeMap<String, BTreeMap<String, String>>,
}

impl FoundLock {
    /// `the lock of RUN`, `the locks of RUN and 2 older runs`.
    pub fn describe(&self) -> String {
        let first = self
            .runs
            .first()
            .map(|r| r.display().to_string())
            .unwrap_or_default();
        match self.runs.len() {
            0 | 1 => format!("the lock of {first}"),
            2 => format!("the locks of {first} and 1 more run"),
            n => format!("the locks of {first} and {} more runs", n - 1),
        }
    }

    /// `lock` (of `run`) merged into `found`, or `found` started with it.
    fn absorb(found: &mut Option<FoundLock>, run: PathBuf, lock: Lock) {
        match found {
            Some(f) => {
                f.merge(run, lock);
            }
            None => {
                *found = Some(FoundLock {
                    tests: tests_of(&run, &lock),
                    runs: vec![run],
                    lock,
                })
            }
        }
    }

    /// Adds what `lock` says of environments, cells and builds this lock
    /// does not have yet; whether it added anything.
    pub fn merge(&mut self, run: PathBuf, lock: Lock) -> bool {
        let before = (
            self.lock.environments.len(),
            self.lock.cells.len(),
            self.lock.builds.len(),
        );
        for (cell, installed) in tests_of(&run, &lock) {
            self.tests.entry(cell).or_insert(installed);
        }
        for (k, v) in lock.environments {
            self.lock.environments.entry(k).or_insert(v);
        }
        for (k, v) in lock.cells {
            self.lock.cells.entry(k).or_insert(v);
        }
        for (k, v) in lock.builds {
            self.lock.builds.entry(k).or_insert(v);
        }
        let after = (
            self.lock.environments.len(),
            self.lock.cells.len(),
            self.lock.builds.len(),
        );
        let added = after != before;
        if added {
            self.runs.push(run);
        }
        added
    }
}

/// What the autopkgtests of each cell of run `run` (its lock's cells)
/// installed when they ran; cells whose tests installed nothing are left out.
fn tests_of(run: &Path, lock: &Lock) -> BTreeMap<String, BTreeMap<String, String>> {
    (lock.cells.keys())
        .map(|c| (c.clone(), crate::store::test_installs::of_cell(run, c)))
        .filter(|(_, installed)| !installed.is_empty())
        .collect()
}

/// The merged locks of `runs` (run directories, or run ids under `out`),
/// each of which must be a run of the matrix named `matrix` with a lock.
pub fn named(runs: &[PathBuf], out: &Path, matrix: &str) -> Result<FoundLock, AffectedError> {
    let mut found: Option<FoundLock> = None;
    for run in runs {
        let not_a_run = |e: StoreError| AffectedError::NotARun {
            run: run.display().to_string(),
            why: e.to_string(),
        };
        let store = RunStore::open(run, out).map_err(not_a_run)?;
        let manifest = store.manifest().map_err(not_a_run)?;
        if manifest.name != matrix {
            return Err(AffectedError::OtherMatrix {
                run: store.dir.display().to_string(),
                its: manifest.name,
                ours: matrix.to_string(),
            });
        }
        let path = layout::lock_of(&store.dir);
        if !path.is_file() {
            return Err(AffectedError::NoLock {
                run: store.dir.display().to_string(),
            });
        }
        let lock = Lock::load(&path).map_err(AffectedError::Lock)?;
        FoundLock::absorb(&mut found, store.dir, lock);
    }
    found.ok_or_else(|| AffectedError::NoLock { run: String::new() })
}

/// The merged locks of `matrix`'s runs under `out`, newest first (run ids
/// begin with their UTC time); none when no run of it has a lock.
pub fn newest(out: &Path, matrix: &str) -> Result<Option<FoundLock>, AffectedError> {
    let runs = out.join("runs");
    let entries = match std::fs::read_dir(&runs) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(AffectedError::Lock(StoreError::Io {
                path: runs,
                source: e,
            }))
        }
    };
    let mut dirs: Vec<PathBuf> = entries
        .take(MAX_RUNS_READ)
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| layout::is_run(p) && layout::lock_of(p).is_file())
        .collect();
    dirs.sort();
    let mut found: Option<FoundLock> = None;
    for dir in dirs.into_iter().rev() {
        if found.as_ref().is_some_and(|f| f.runs.len() >= MAX_MERGED) {
            break;
        }
        let ours = RunManifest::load(&layout::plan_of(&dir)).is_ok_and(|m| m.name == matrix);
        let Some(lock) = ours
            .then(|| Lock::load(&layout::lock_of(&dir)).ok())
            .flatten()
        else {
            continue;
        };
        FoundLock::absorb(&mut found, dir, lock);
    }
    Ok(found)
}
