//! Where a report's JUnit goes: the merged `junit.xml` ([`JunitWriter`]),
//! or with `report.junit: per-cell` (or `--junit per-cell`) one file per
//! cell, `junit/<cell>.xml`, for CI systems that limit the size of one file
//! (GitLab: 30 MB) or show results per job.
//!
//! Each per-cell file is written by its own [`JunitWriter`], so each keeps
//! under the text budget on its own; a shard's run writes its shard's cells
//! this way, and `report merge` all of them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::cell_pages::{file_stem, remove_stale};
use super::ReportError;
use crate::matrix_file::JunitFiles;
use crate::merged_junit::JunitWriter;
use crate::results::collect::Sink;
use crate::results::junit::Case;
use crate::results::source::CellSource;
use crate::results::{CellResult, TestStatus};

/// The JUnit output of one report, as the layout asks.
pub enum JunitOut {
    Merged(JunitWriter, PathBuf),
    PerCell(PerCellJunit),
}

/// What was written.
pub struct Written {
    /// Bytes in all files.
    pub bytes: u64,
    /// Bytes of the largest file.
    pub largest: u64,
}

impl JunitOut {
    pub fn create(layout: JunitFiles, out: &Path, title: &str) -> Result<JunitOut, ReportError> {
        Ok(match layout {
            JunitFiles::Merged => {
                let path = out.join("junit.xml");
                let w = JunitWriter::create(&path, title).map_err(super::io(&path))?;
                JunitOut::Merged(w, path)
            }
            JunitFiles::PerCell => JunitOut::PerCell(PerCellJunit::create(out, title)?),
        })
    }

    pub fn sink(&mut self) -> &mut dyn Sink {
        match self {
            JunitOut::Merged(w, _) => w,
            JunitOut::PerCell(p) => p,
        }
    }

    pub fn finish(self, out: &Path) -> Result<Written, ReportError> {
        match self {
            JunitOut::Merged(w, path) => {
                let bytes = w.finish().map_err(super::io(&path))?;
                // junit/ of an earlier per-cell report would contradict it.
                let stale = out.join(DIR);
                if stale.is_dir() {
                    remove_stale(&stale, ".xml", &HashSet::new())?;
                }
                Ok(Written {
                    bytes,
                    largest: bytes,
                })
            }
            JunitOut::PerCell(p) => p.finish(out),
        }
    }
}

/// The directory of the files, under the report directory.
pub const DIR: &str = "junit";

/// A [`Sink`] that writes each cell into its own file.
pub struct PerCellJunit {
    dir: PathBuf,
    title: String,
    current: Option<JunitWriter>,
    written: HashSet<String>,
    /// Bytes written, in all files.
    pub bytes: u64,
    /// The largest file, in bytes.
    pub largest: u64,
    error: Option<ReportError>,
}

impl PerCellJunit {
    pub fn create(out: &Path, title: &str) -> Result<PerCellJunit, ReportError> {
        let dir = out.join(DIR);
        std::fs::create_dir_all(&dir).map_err(super::io(&dir))?;
        Ok(PerCellJunit {
            dir,
            title: title.to_string(),
            current: None,
            written: HashSet::new(),
            bytes: 0,
            largest: 0,
            error: None,
        })
    }

    fn close(&mut self) {
        if let Some(w) = self.current.take() {
            match w.finish() {
                Ok(n) => {
                    self.bytes += n;
                    self.largest = self.largest.max(n);
                }
                Err(e) => {
                    let path = self.dir.clone();
                    self.error
                        .get_or_insert(ReportError::Io { path, source: e });
                }
            }
        }
    }

    /// Closes the last file and removes the files of cells this report
    /// does not have (a merged `junit.xml` of an earlier report too).
    pub fn finish(mut self, out: &Path) -> Result<Written, ReportError> {
        self.close();
        if let Some(e) = self.error {
            return Err(e);
        }
        remove_stale(&self.dir, ".xml", &self.written)?;
        let merged = out.join("junit.xml");
        if merged.is_file() {
            std::fs::remove_file(&merged).map_err(super::io(&merged))?;
        }
        Ok(Written {
            bytes: self.bytes,
            largest: self.largest,
        })
    }
}

impl Sink for PerCellJunit {
    fn cell_start(&mut self, c: &CellSource) {
        self.close();
        let file = format!("{}.xml", file_stem(&c.id));
        let path = self.dir.join(&file);
        match JunitWriter::create(&path, &format!("{}: {}", self.title, c.id)) {
            Ok(mut w) => {
                w.cell_start(c);
                self.current = Some(w);
                self.written.insert(file);
            }
            Err(source) => {
                self.error.get_or_insert(ReportError::Io { path, source });
            }
        }
    }
    fn suite_start(&mut self, s: &str, t: Option<&str>) {
        if let Some(w) = self.current.as_mut() {
            w.suite_start(s, t);
        }
    }
    fn case(&mut self, s: &str, c: &Case, st: TestStatus) {
        if let Some(w) = self.current.as_mut() {
            w.case(s, c, st);
        }
    }
    fn suite_end(&mut self, s: &str) {
        if let Some(w) = self.current.as_mut() {
            w.suite_end(s);
        }
    }
    fn cell_end(&mut self, c: &CellResult) {
        if let Some(w) = self.current.as_mut() {
            w.cell_end(c);
        }
        self.close();
    }
}
