//! Where results come from: a run store (`plan.json` + `cells/*/cell.json`),
//! several shard runs of one plan, or plain directories of JUnit files (one
//! per cell). All three become a [`Source`]: the plan's keys, expectations
//! and report layout, and per cell its directory, record and JUnit files.

use std::path::{Path, PathBuf};

use crate::matrix_file::{Expectation, ReportLayout};
use crate::store::coverage::EnvironmentCoverage;
use crate::store::record::{CellRecord, RunManifest};
use crate::store::StoreError;

use super::ResultsError;

/// One cell to collect.
#[derive(Debug, Clone)]
pub struct CellSource {
    pub id: String,
    /// Axis values in key order.
    pub values: Vec<(String, String)>,
    /// The cell directory; JUnit paths are relative to it.
    pub dir: PathBuf,
    /// `cell.json`, when the cell finished (always `None` for plain directories).
    pub record: Option<CellRecord>,
    /// JUnit files relative to `dir`.
    pub junit: Vec<String>,
    /// Whether this came from a run store (a missing record then means "did not finish").
    pub from_run: bool,
}

/// Everything to collect, with how to judge and show it.
#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    pub runs: Vec<String>,
    pub matrix_hash: String,
    pub keys: Vec<String>,
    pub expect: Vec<Expectation>,
    /// `classify:` rules of the matrix file.
    pub classify: Vec<crate::matrix_file::ClassifyRule>,
    pub report: ReportLayout,
    pub cells: Vec<CellSource>,
    pub messages: Vec<String>,
    /// Environment images' gfx coverage (`run --coverage`), one per environment.
    pub coverage: Vec<EnvironmentCoverage>,
    /// Versions that matter per environment, from each run's `lock.json`.
    pub environments: Vec<super::facts::EnvironmentFacts>,
    /// What chose the cells (`run --affected-by`): the first run's.
    pub selected_by: Option<crate::store::record::SelectedBy>,
}

/// A run-store reader's error as the results room words it: a file it
/// cannot read is the disk's (or the network's) fault, one it cannot
/// understand the user's (a store of another version, a file that is not
/// one of a run store).
fn store_error(e: StoreError) -> ResultsError {
    match e {
        StoreError::Io { path, source } => ResultsError::Io { path, source },
        StoreError::Corrupt { path, message } => ResultsError::Store {
            path,
            message: format!("invalid JSON: {message}"),
        },
        StoreError::Version {
            path,
            file,
            field,
            found,
            known,
        } => ResultsError::Store {
            path,
            message: crate::store::version_words(file, field, found, known),
        },
        // No reader of a file gives it; only `RunStore::open` does.
        StoreError::NotARun(message) => ResultsError::Store {
            path: PathBuf::new(),
            message,
        },
    }
}

/// Reads a run store's manifest.
pub fn manifest(run_dir: &Path) -> Result<RunManifest, ResultsError> {
    if !crate::store::layout::is_run(run_dir) {
        return Err(ResultsError::NotARun {
            path: run_dir.to_path_buf(),
        });
    }
    RunManifest::load(&crate::store::layout::plan_of(run_dir)).map_err(store_error)
}

impl Source {
    /// One run store.
    pub fn run(run_dir: &Path) -> Result<Source, ResultsError> {
        Source::runs(&[run_dir.to_path_buf()])
    }

    /// Shard runs of one plan (or one run). Cells are taken in the order of
    /// the runs given; a cell in two runs is taken from the first.
    pub fn runs(run_dirs: &[PathBuf]) -> Result<Source, ResultsError> {
        let mut out: Option<Source> = None;
        let mut shards: Vec<String> = Vec::new();
        for dir in run_dirs {
            let m = manifest(dir)?;
            let src = out.get_or_insert_with(|| Source::of_plan(&m));
            if m.matrix_hash != src.matrix_hash {
                return Err(ResultsError::Merge(format!(
                    "{} ran matrix {} ({}), but {} ran {} ({}): shards of different plans cannot be merged",
                    dir.display(),
                    m.name,
                    short(&m.matrix_hash),
                    run_dirs[0].display(),
                    src.name,
                    short(&src.matrix_hash)
                )));
            }
            src.runs.push(m.run_id.clone());
            src.note_shard(&m, &mut shards);
            src.add_cells(dir, &m)?;
            src.add_environments(dir, &m);
        }
        let mut src = out.ok_or_else(|| ResultsError::Merge("no run given".into()))?;
        src.note_missing_shards(&shards, run_dirs.len());
        Ok(src)
    }

    /// An empty source for the plan `m` ran.
    fn of_plan(m: &RunManifest) -> Source {
        Source {
            name: m.name.clone(),
            runs: Vec::new(),
            matrix_hash: m.matrix_hash.clone(),
            keys: m.keys.clone(),
            expect: m.expect.clone(),
            classify: m.classify.clone(),
            report: m.report.clone(),
            cells: Vec::new(),
            messages: Vec::new(),
            coverage: Vec::new(),
            environments: Vec::new(),
            selected_by: m.selected_by.clone(),
        }
    }

    /// Records the run's shard, saying so when it is a repeat.
    fn note_shard(&mut self, m: &RunManifest, shards: &mut Vec<String>) {
        let Some(s) = &m.shard else {
            return;
        };
        // `plan --group-by` jobs shard each group: runs of different
        // groups share shard names but no cells. A shard named twice
        // is a repeat only when the runs share cells.
        let repeat = m
            .cells
            .iter()
            .any(|cell| self.cells.iter().any(|c| c.id == cell.id));
        if shards.contains(s) && repeat {
            self.messages
                .push(format!("shard {s} appears twice (run {})", m.run_id));
        }
        shards.push(s.clone());
    }

    /// The run's cells with their records; a cell already taken from an
    /// earlier run is left out, with a message.
    fn add_cells(&mut self, dir: &Path, m: &RunManifest) -> Result<(), ResultsError> {
        for cell in &m.cells {
            if self.cells.iter().any(|c| c.id == cell.id) {
                self.messages.push(format!(
                    "cell {} is in more than one run; kept the first, ignored run {}",
                    cell.id, m.run_id
                ));
                continue;
            }
            let cdir = dir.join(crate::store::layout::CELLS).join(&cell.id);
            let rec_path = crate::store::layout::cell_record_in(&cdir);
            let record: Option<CellRecord> = if rec_path.is_file() {
                Some(CellRecord::load(&rec_path).map_err(store_error)?)
            } else {
                None
            };
            let junit = record.as_ref().map(|r| r.junit.clone()).unwrap_or_default();
            self.cells.push(CellSource {
                id: cell.id.clone(),
                values: cell.values.clone(),
                dir: cdir,
                record,
                junit,
                from_run: true,
            });
        }
        Ok(())
    }

    /// The run's environments: their gfx coverage and the versions that
    /// matter (`lock.json`), each environment once across runs.
    fn add_environments(&mut self, dir: &Path, m: &RunManifest) {
        let (coverage, problems) = EnvironmentCoverage::load_all(dir);
        for c in coverage {
            if !self.coverage.iter().any(|o| o.environment == c.environment) {
                self.coverage.push(c);
            }
        }
        self.messages.extend(problems);
        let (facts, problem) = super::facts::load(dir, &m.report.packages, &m.cells);
        for f in facts {
            match self
                .environments
                .iter_mut()
                .find(|o| o.environment == f.environment)
            {
                Some(o) => {
                    for c in f.cells {
                        if !o.cells.contains(&c) {
                            o.cells.push(c);
                        }
                    }
                }
                None => self.environments.push(f),
            }
        }
        self.messages.extend(problem);
    }

    /// Says which shards of K/N are missing among `shards`.
    fn note_missing_shards(&mut self, shards: &[String], runs: usize) {
        let Some(total) = shards
            .first()
            .and_then(|s| s.split_once('/'))
            .and_then(|(_, n)| n.parse::<usize>().ok())
        else {
            return;
        };
        if runs > 1 || total > 1 {
            let missing: Vec<String> = (1..=total)
                .map(|k| format!("{k}/{total}"))
                .filter(|s| !shards.contains(s))
                .collect();
            if !missing.is_empty() {
                self.messages.push(format!(
                    "shards {} of this plan are not included: their cells are not in this report",
                    missing.join(", ")
                ));
            }
        }
    }

    /// Plain directories of JUnit files, one directory per cell, named after it.
    pub fn junit_dirs(dirs: &[PathBuf]) -> Result<Source, ResultsError> {
        let mut cells: Vec<CellSource> = Vec::new();
        for dir in dirs {
            if !dir.is_dir() {
                return Err(ResultsError::Store {
                    path: dir.clone(),
                    message: "not a directory".into(),
                });
            }
            let id = dir
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| dir.display().to_string());
            if cells.iter().any(|c| c.id == id) {
                return Err(ResultsError::Store {
                    path: dir.clone(),
                    message: format!(
                        "another directory is also named `{id}`; cell ids come from directory names and must differ"
                    ),
                });
            }
            let mut junit = Vec::new();
            find_xml(dir, dir, &mut junit)?;
            junit.sort();
            cells.push(CellSource {
                values: vec![("cell".to_string(), id.clone())],
                id,
                dir: dir.clone(),
                record: None,
                junit,
                from_run: false,
            });
        }
        Ok(Source {
            name: "junit".into(),
            runs: Vec::new(),
            matrix_hash: String::new(),
            keys: vec!["cell".into()],
            expect: Vec::new(),
            classify: Vec::new(),
            report: ReportLayout {
                rows: vec!["cell".into()],
                columns: Vec::new(),
                packages: Vec::new(),
                gfx_targets: Vec::new(),
                junit: Default::default(),
            },
            cells,
            messages: Vec::new(),
            coverage: Vec::new(),
            environments: Vec::new(),
            selected_by: None,
        })
    }
}

fn short(hash: &str) -> &str {
    &hash[..super::junit::floor_char_boundary(hash, 12)]
}

/// Every `*.xml` file under `dir`, as paths relative to `root`.
fn find_xml(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), ResultsError> {
    let rd = std::fs::read_dir(dir).map_err(|e| ResultsError::io(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| ResultsError::io(dir, e))?;
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| ResultsError::io(&path, e))?;
        if ft.is_dir() {
            find_xml(root, &path, out)?;
        } else if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("xml"))
        {
            if let Ok(rel) = path.strip_prefix(root) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    Ok(())
}
