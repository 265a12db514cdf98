//! The run store, the floor every run-store reader and writer stands on: the
//! on-disk layout of a run (`.rocmatrix/runs/<run-id>/`) and the record types
//! written into it — `plan.json` ([`record::RunManifest`]), `cells/*/cell.json`
//! ([`record::CellRecord`]), `lock.json` ([`lock::Lock`]), `journal.jsonl`
//! ([`journal::Event`]), `images/*.coverage.json` ([`coverage`]) — plus the
//! image-use file of the cache ([`usage`]), the machine's run roots and the
//! images running runs hold ([`roots`]), a try's `try.json` ([`trial`]), and
//! atomic writes.
//!
//! `run/` writes these files; `results/`, `report/` and `cli/` read them.
//! Every file is written to a temporary name and renamed into place, so a
//! reader never sees half a file and an interrupted run loses nothing
//! finished. See [`record`] for the layout.

pub mod coverage;
pub mod host;
pub mod journal;
pub mod layout;
pub mod lock;
pub mod read;
pub mod record;
pub mod roots;
pub mod schema;
pub mod test_installs;
pub mod trial;
pub mod usage;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use record::{BuildRecord, CellRecord, RunManifest};

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
    /// A file of a version this rocmatrix does not read: one a newer
    /// rocmatrix wrote, or an old one.
    #[error("{}: {}", path.display(), version_words(file, field, *found, *known))]
    Version {
        path: PathBuf,
        /// `plan.json`, `lock.json`.
        file: &'static str,
        /// `store_version`, `lock_version`.
        field: &'static str,
        found: u32,
        known: u32,
    },
}

/// `plan.json has store_version 2, newer than 1, the one this rocmatrix
/// reads: read it with a newer rocmatrix`.
pub fn version_words(file: &str, field: &str, found: u32, known: u32) -> String {
    if found > known {
        format!(
            "{file} has {field} {found}, newer than {known}, the one this rocmatrix reads: \
             read it with a newer rocmatrix"
        )
    } else {
        format!("{file} has {field} {found}, older than {known}, the one this rocmatrix reads")
    }
}

impl StoreError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        StoreError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The part of `run.json` its readers use.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct RunInfo {
    pub run_id: String,
    /// RFC 3339, to the millisecond.
    pub started: String,
    pub finished: String,
    #[serde(default)]
    pub interrupted: bool,
}

/// Default parent of run directories.
pub const DEFAULT_OUT: &str = ".rocmatrix";

#[derive(Debug, Clone)]
pub struct RunStore {
    pub dir: PathBuf,
}

impl RunStore {
    /// Creates `<out>/runs/<run_id>/`.
    /// The root `out` is recorded as one of this machine's run roots, whose
    /// locked images `images --prune` keeps.
    pub fn create(out: &Path, run_id: &str) -> Result<RunStore, StoreError> {
        let dir = out.join("runs").join(run_id);
        std::fs::create_dir_all(dir.join("cells")).map_err(|e| StoreError::io(&dir, e))?;
        roots::register(out);
        Ok(RunStore { dir })
    }

    /// The run root this run is under (the parent of `runs/`).
    pub fn root(&self) -> PathBuf {
        self.dir
            .parent()
            .and_then(Path::parent)
            .map_or_else(|| self.dir.clone(), Path::to_path_buf)
    }

    /// Opens an existing run: a run directory, or a run id under `out`.
    pub fn open(run: &Path, out: &Path) -> Result<RunStore, StoreError> {
        let candidates = [run.to_path_buf(), out.join("runs").join(run)];
        for dir in candidates {
            if layout::is_run(&dir) {
                return Ok(RunStore { dir });
            }
        }
        Err(StoreError::NotARun(format!(
            "{} is not a run: no plan.json there or under {}",
            run.display(),
            out.join("runs").display()
        )))
    }

    /// The run's `plan.json`, refused when a newer (or older) rocmatrix
    /// wrote it.
    pub fn manifest(&self) -> Result<RunManifest, StoreError> {
        RunManifest::load(&layout::plan_of(&self.dir))
    }

    /// What `run.json` says of the run as a whole (written when the run
    /// finished).
    pub fn run_info(&self) -> Result<RunInfo, StoreError> {
        read::json(
            &self.dir.join(layout::RUN),
            read::MAX_RECORD,
            "run.json files",
        )
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
        CellRecord::load(&layout::cell_record_in(&self.cell_dir(cell)))
    }

    /// Writes a cell's record into its directory, atomically.
    pub fn write_cell(&self, record: &CellRecord) -> Result<(), StoreError> {
        self.write_json(
            &format!("{}/{}/{}", layout::CELLS, record.id, layout::CELL),
            record,
        )
    }

    /// Writes the run's `plan.json`, atomically, as [`schema::PlanFile`]
    /// spells it.
    pub fn write_manifest(&self, manifest: &RunManifest) -> Result<(), StoreError> {
        self.write_json(layout::PLAN, &schema::PlanFile::from(manifest))
    }

    /// Writes a build stage's record into its directory, atomically.
    pub fn write_build(&self, record: &BuildRecord) -> Result<(), StoreError> {
        self.write_json(
            &format!("{}/{}/{}", layout::BUILDS, record.key, layout::BUILD),
            record,
        )
    }

    /// Writes `value` as pretty JSON to `rel`, atomically.
    /// Writes the `run.json` of a run whose own process never wrote one (a
    /// Slurm task killed, or never started), marked interrupted, so that
    /// the run reads (and records into the history) as one; a `run.json`
    /// that exists is left as it is.
    pub fn close_unfinished(&self, run_id: &str) -> Result<(), StoreError> {
        if self.dir.join(layout::RUN).exists() {
            return Ok(());
        }
        let now = now_rfc3339();
        let info = serde_json::json!({
            "run_id": run_id, "started": now, "finished": now, "interrupted": true,
        });
        self.write_json(layout::RUN, &info)
    }

    pub fn write_json<T: serde::Serialize>(&self, rel: &str, value: &T) -> Result<(), StoreError> {
        let text = serde_json::to_vec_pretty(value).map_err(|e| StoreError::Corrupt {
            path: self.dir.join(rel),
            message: e.to_string(),
        })?;
        write_atomic(&self.dir.join(rel), &text)
    }
}

/// Writes `bytes` to a temporary file beside `path`, syncs, renames. A
/// write that fails (a full disk) removes its temporary file; one that
/// succeeds also removes the temporary files of `path` that processes now
/// gone left behind (killed, or failed before this fix), so a successful
/// retry leaves nothing but `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
    let prefix = format!(
        ".{}.tmp-",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    );
    let tmp = dir.join(format!("{prefix}{}", std::process::id()));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()))
        .map_err(|e| StoreError::io(&tmp, e))
        .and_then(|_| std::fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    remove_stale_temporaries(dir, &prefix);
    Ok(())
}

/// Removes `<prefix><pid>` files in `dir` whose process is gone.
fn remove_stale_temporaries(dir: &Path, prefix: &str) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        let gone = pid
            .parse::<u32>()
            .is_ok_and(|p| p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists());
        if gone {
            let _ = std::fs::remove_file(e.path());
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_its_process_never_closed_is_closed_interrupted_and_a_closed_one_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::create(dir.path(), "20261128-155023-8448").unwrap();
        store.close_unfinished("20261128-155023-8448").unwrap();
        let info = store.run_info().unwrap();
        assert_eq!(info.run_id, "20261128-155023-8448");
        assert!(info.interrupted);
        let written = std::fs::read(store.dir.join(layout::RUN)).unwrap();
        store.close_unfinished("another").unwrap();
        assert_eq!(std::fs::read(store.dir.join(layout::RUN)).unwrap(), written);
    }

    #[test]
    fn write_atomic_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        // What a writer killed (or failed on a full disk) left; no process
        // has that pid (above the kernel's pid_max).
        let stale = dir.path().join(".run.json.tmp-4294967");
        std::fs::write(&stale, b"half").unwrap();
        let other = dir.path().join(".lock.json.tmp-4294967");
        std::fs::write(&other, b"half").unwrap();
        write_atomic(&path, b"{}").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        assert!(!stale.exists());
        assert!(
            other.exists(),
            "another file's temporary is not this write's business"
        );
    }

    #[test]
    fn a_failed_write_removes_its_temporary() {
        let dir = tempfile::tempdir().unwrap();
        // The rename fails: the target is a non-empty directory.
        let path = dir.path().join("target");
        std::fs::create_dir_all(path.join("x")).unwrap();
        assert!(write_atomic(&path, b"{}").is_err());
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("target")]);
    }
}
