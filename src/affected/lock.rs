//! Which lock says what each cell installed and built from: the run
//! `--lock RUN` names (refused when it is not a run of this matrix), else
//! the newest run of the matrix under the run root that has a lock.

use std::path::{Path, PathBuf};

use super::AffectedError;
use crate::store::lock::Lock;
use crate::store::{layout, RunStore, StoreError};

/// The most run directories looked at for the newest run of a matrix.
const MAX_RUNS_READ: usize = 10_000;

/// A run's lock, and the run it is from.
#[derive(Debug, Clone)]
pub struct FoundLock {
    pub run: PathBuf,
    pub lock: Lock,
}

/// The lock of `run` (a run directory, or a run id under `out`), which
/// must be a run of the matrix named `matrix`.
pub fn named(run: &Path, out: &Path, matrix: &str) -> Result<FoundLock, AffectedError> {
    let store = RunStore::open(run, out).map_err(|e| AffectedError::NotARun {
        run: run.display().to_string(),
        why: e.to_string(),
    })?;
    let manifest = store.manifest().map_err(|e| AffectedError::NotARun {
        run: run.display().to_string(),
        why: e.to_string(),
    })?;
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
    Ok(FoundLock {
        run: store.dir,
        lock,
    })
}

/// The newest run of `matrix` under `out` that has a readable lock (run
/// ids begin with their UTC time, so the newest sorts last); none when
/// there is none.
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
    for dir in dirs.into_iter().rev() {
        let Ok(manifest) = crate::store::record::RunManifest::load(&layout::plan_of(&dir)) else {
            continue;
        };
        if manifest.name != matrix {
            continue;
        }
        if let Ok(lock) = Lock::load(&layout::lock_of(&dir)) {
            return Ok(Some(FoundLock { run: dir, lock }));
        }
    }
    Ok(None)
}
