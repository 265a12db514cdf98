//! What the history asks of a database, and the rows it reads back. Two
//! backends answer it: [`super::sqlite`] and [`super::postgres`]; they share
//! the schema ([`super::schema`]) and differ only in their drivers.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::record::{EnvRecord, RunRecord};
use crate::outcome::{CellVerdict, TestStatus};
use crate::store::host::HostFacts;

/// A recorded run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub run: String,
    pub started_ms: i64,
    pub name: String,
    pub sources: BTreeMap<String, String>,
    pub environments: Vec<EnvRecord>,
}

/// A recorded cell of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCell {
    pub run: String,
    pub cell: String,
    /// Shared by every test followed through this cell's run.
    pub axes: Arc<BTreeMap<String, String>>,
    /// Its verdict; `None` for a word this rocmatrix does not know (a
    /// newer one's).
    pub outcome: Option<CellVerdict>,
    /// Shared by every point followed through this cell's run.
    pub inputs: Arc<str>,
    pub passed: String,
    /// Where it ran; empty for runs recorded before schema 3.
    pub host: Arc<HostFacts>,
}

/// A recorded test that did not simply pass.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTest {
    pub run: String,
    pub cell: String,
    pub test: String,
    pub hash: u64,
    /// Its status; `None` for a word this rocmatrix does not know.
    pub outcome: Option<TestStatus>,
    pub reruns: u32,
    pub signature: String,
    pub message: String,
}

/// Which non-passing test rows to read.
#[derive(Debug, Clone, Copy)]
pub enum Rows<'a> {
    /// Every row of every run.
    All,
    /// The rows of one test (by its `classname.name`), in every run.
    Named(&'a str),
    /// Every row of these runs (a report's window of recent runs).
    OfRuns(&'a [String]),
}

/// A database's error, in the driver's words (the caller adds where).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DbError(pub String);

impl DbError {
    pub fn of(e: impl std::fmt::Display) -> DbError {
        DbError(e.to_string())
    }
}

/// One database. Errors are the driver's words (the caller adds where).
pub trait Backend {
    /// Writes `r` in one transaction; false when the run was recorded
    /// already (nothing is written then).
    fn record(&mut self, r: &RunRecord) -> Result<bool, DbError>;
    /// Whether the run `run` is recorded.
    fn has_run(&mut self, run: &str) -> Result<bool, DbError>;
    /// How many runs are recorded, and the latest one's recording time.
    fn stamp(&mut self) -> Result<(i64, i64), DbError>;
    /// Every run, by start time.
    fn runs(&mut self) -> Result<Vec<RunRow>, DbError>;
    /// The runs of one matrix, by start time.
    fn runs_of(&mut self, name: &str) -> Result<Vec<RunRow>, DbError>;
    /// Every cell of every run.
    fn cells(&mut self) -> Result<Vec<StoredCell>, DbError>;
    /// The non-passing rows that `which` selects.
    fn tests(&mut self, which: Rows<'_>) -> Result<Vec<StoredTest>, DbError>;
    /// How many tests a set of passing tests holds.
    fn passset_len(&mut self, digest: &str) -> Result<usize, DbError>;
    /// The identity hashes of a set of passing tests.
    fn passset(&mut self, digest: &str) -> Result<Vec<u64>, DbError>;
    /// The cells of these runs.
    fn cells_of_runs(&mut self, runs: &[String]) -> Result<Vec<StoredCell>, DbError>;
    /// Each cell's non-passing tests in these runs, as (run, cell, the
    /// byte string of `super::failset`).
    fn failsets(&mut self, runs: &[String]) -> Result<Vec<(String, String, Vec<u8>)>, DbError>;
}

/// A JSON column's text.
pub fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// A JSON column read back; a value this rocmatrix cannot read is the
/// type's default (the row still counts).
pub fn from_json<T: serde::de::DeserializeOwned + Default>(text: &str) -> T {
    serde_json::from_str(text).unwrap_or_default()
}

/// The `host` column's text: empty when nothing was recorded.
pub fn host_json(h: &HostFacts) -> String {
    if h.is_empty() {
        String::new()
    } else {
        to_json(h)
    }
}

/// The `host` column read back (empty or unreadable: no facts).
pub fn host_from(text: &str) -> Arc<HostFacts> {
    Arc::new(if text.is_empty() {
        HostFacts::default()
    } else {
        from_json(text)
    })
}
