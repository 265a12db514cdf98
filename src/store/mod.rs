//! The run store, the floor every run-store reader and writer stands on: the
//! on-disk layout of a run (`.rocmatrix/runs/<run-id>/`) and the record types
//! written into it — `plan.json` ([`record::RunManifest`]), `cells/*/cell.json`
//! ([`record::CellRecord`]), `lock.json` ([`lock::Lock`]), `journal.jsonl`
//! ([`journal::Event`]), `images/*.coverage.json` ([`coverage`]) — plus the
//! image-use file of the cache ([`usage`]) and atomic writes.
//!
//! `run/` writes these files; `results/`, `report/` and `cli/` read them.
//! Every file is written to a temporary name and renamed into place, so a
//! reader never sees half a file and an interrupted run loses nothing
//! finished. See [`record`] for the layout.

pub mod coverage;
pub mod journal;
pub mod lock;
pub mod record;
pub mod usage;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use record::{CellRecord, RunManifest};

/// Reading or writing a run store's files failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: unreadable: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    /// A path named as a run (or a lock) is not one this rocmatrix reads.
    #[error("{0}")]
    NotARun(String),
}

impl StoreError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        StoreError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Default parent of run directories.
pub const DEFAULT_OUT: &str = ".rocmatrix";

#[derive(Debug, Clone)]
pub struct RunStore {
    pub dir: PathBuf,
}

impl RunStore {
    /// Creates `<out>/runs/<run_id>/`.
    pub fn create(out: &Path, run_id: &str) -> Result<RunStore, StoreError> {
        let dir = out.join("runs").join(run_id);
        std::fs::create_dir_all(dir.join("cells")).map_err(|e| StoreError::io(&dir, e))?;
        Ok(RunStore { dir })
    }

    /// Opens an existing run: a run directory, or a run id under `out`.
    pub fn open(run: &Path, out: &Path) -> Result<RunStore, StoreError> {
        let candidates = [run.to_path_buf(), out.join("runs").join(run)];
        for dir in candidates {
            if dir.join("plan.json").is_file() {
                return Ok(RunStore { dir });
            }
        }
        Err(StoreError::NotARun(format!(
            "{} is not a run: no plan.json there or under {}",
            run.display(),
            out.join("runs").display()
        )))
    }

    pub fn manifest(&self) -> Result<RunManifest, StoreError> {
        let path = self.dir.join("plan.json");
        let text = std::fs::read_to_string(&path).map_err(|e| StoreError::io(&path, e))?;
        serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
            path,
            message: e.to_string(),
        })
    }

    pub fn cell_dir(&self, cell: &str) -> PathBuf {
        self.dir.join("cells").join(cell)
    }

    /// Ids of cells whose `cell.json` exists (finished in an earlier invocation).
    pub fn finished_cells(&self) -> BTreeSet<String> {
        let Ok(rd) = std::fs::read_dir(self.dir.join("cells")) else {
            return BTreeSet::new();
        };
        rd.filter_map(|e| e.ok())
            .filter(|e| e.path().join("cell.json").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    pub fn cell_record(&self, cell: &str) -> Result<CellRecord, StoreError> {
        let path = self.cell_dir(cell).join("cell.json");
        let text = std::fs::read_to_string(&path).map_err(|e| StoreError::io(&path, e))?;
        serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
            path,
            message: e.to_string(),
        })
    }

    /// Writes `value` as pretty JSON to `rel`, atomically.
    pub fn write_json<T: serde::Serialize>(&self, rel: &str, value: &T) -> Result<(), StoreError> {
        let text = serde_json::to_vec_pretty(value).map_err(|e| StoreError::Corrupt {
            path: self.dir.join(rel),
            message: e.to_string(),
        })?;
        write_atomic(&self.dir.join(rel), &text)
    }
}

/// Writes `bytes` to a temporary file beside `path`, syncs, renames.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mut f = std::fs::File::create(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| StoreError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e))
}

/// A new run id: UTC time plus a few random hex digits.
pub fn new_run_id() -> String {
    let now = std::time::SystemTime::now();
    let stamp = humantime::format_rfc3339_seconds(now).to_string();
    let stamp: String = stamp
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect::<String>()
        .replace('T', "-");
    let nanos = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{stamp}-{:04x}", (nanos ^ std::process::id()) & 0xffff)
}

/// Now, as RFC 3339.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}
