//! What one run leaves in the history, made from its run stores (the
//! shards of one plan are one run) and the results its report read:
//!
//! - the run: its id (shard ids joined by `+`), when it started (to the
//!   millisecond, the earliest shard), the matrix's name and hash, the
//!   source commits its cells checked out, and each environment's identity
//!   with the versions that matter and a digest of every installed package;
//! - each cell: axis values, outcome (its verdict: `passed`, `failed`, `expected
//!   failure`, `classified`, `skipped`), a digest of its inputs (the cell's definition, its
//!   environment's installed packages, its source commits: two runs of a
//!   cell with the same digest ran the same thing), its signatures, and
//!   its passing tests as a set of identity hashes (stored once per
//!   distinct set: a suite that passes the same way every night costs one
//!   row for all nights);
//! - each test that did not simply pass: outcome, time, reruns, signature.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::results::findings::Signature;
use crate::results::model::{
    display_name, test_hash, CellResult, CellVerdict, Results, TestResult, TestStatus,
};
use crate::store::RunStore;

/// One run, ready to be written.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub run: String,
    pub started_ms: i64,
    pub name: String,
    pub matrix_hash: String,
    /// Source name → commit.
    pub sources: BTreeMap<String, String>,
    pub environments: Vec<EnvRecord>,
    pub cells: Vec<CellRow>,
    pub tests: Vec<TestRow>,
    /// Digest → sorted identity hashes of passing tests.
    pub passsets: BTreeMap<String, Vec<u64>>,
}

/// An environment as the history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvRecord {
    pub environment: String,
    pub identity: String,
    pub base: String,
    /// The versions that matter (the report's selection).
    pub packages: BTreeMap<String, String>,
    /// SHA-256 of every installed package and version.
    pub installed_digest: String,
    pub cells: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CellRow {
    pub cell: String,
    pub axes: BTreeMap<String, String>,
    /// Its verdict ([`CellResult::verdict`], the reports' one judge).
    pub outcome: CellVerdict,
    pub inputs: String,
    /// The digest of its passing tests' set (a key of `passsets`).
    pub passed: String,
    pub signatures: Vec<String>,
    /// Where it ran (`cell.json`'s `host`).
    pub host: crate::store::host::HostFacts,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TestRow {
    pub cell: String,
    /// `classname.name`, as people write test ids.
    pub test: String,
    pub hash: u64,
    /// Its status as the history keeps it ([`outcome_of`]).
    pub outcome: TestStatus,
    pub time: Option<f64>,
    pub reruns: u32,
    pub signature: String,
    pub message: String,
}

/// Why a run could not be made into a record.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RecordError(pub String);

/// What a cell's `cell.json` gives its record: its definition hash, the
/// source commits it checked out, and where it ran.
#[derive(Debug, Clone, Default)]
struct FromStore {
    hash: String,
    sources: Vec<crate::store::lock::LockedSource>,
    host: crate::store::host::HostFacts,
}

/// [`FromStore`] by cell.
type CellInputs = BTreeMap<String, FromStore>;

/// The record of `results`, read from the run stores `runs` (one, or the
/// shards of one plan).
pub fn of_run(runs: &[&Path], results: &Results) -> Result<RunRecord, RecordError> {
    let (ids, started_ms, cell_inputs) = read_stores(runs)?;
    let environments = environments(results);
    let env_of: BTreeMap<&str, &str> = environments
        .iter()
        .flat_map(|e| {
            e.cells
                .iter()
                .map(|c| (c.as_str(), e.installed_digest.as_str()))
        })
        .collect();
    let mut record = RunRecord {
        run: ids.join("+"),
        started_ms,
        name: results.name.clone(),
        matrix_hash: results.matrix_hash.clone(),
        sources: BTreeMap::new(),
        environments: Vec::new(),
        cells: Vec::new(),
        tests: Vec::new(),
        passsets: BTreeMap::new(),
    };
    let signature_of = SignaturesByPlace::of(results);
    for c in &results.cells {
        let FromStore {
            hash,
            sources: srcs,
            host,
        } = cell_inputs.get(&c.id).cloned().unwrap_or_default();
        for s in &srcs {
            record.sources.insert(s.name.clone(), s.commit.clone());
        }
        let inputs = crate::digest::sha256_hex(
            format!(
                "{hash}\u{1f}{}\u{1f}{}",
                env_of.get(c.id.as_str()).copied().unwrap_or(""),
                srcs.iter()
                    .map(|s| format!("{}={}", s.name, s.commit))
                    .collect::<Vec<_>>()
                    .join(",")
            )
            .as_bytes(),
        );
        // Each distinct set of passing tests is stored once.
        let passed = passset_digest(&c.passed_hashes);
        record
            .passsets
            .entry(passed.clone())
            .or_insert_with(|| c.passed_hashes.clone());
        record.cells.push(CellRow {
            cell: c.id.clone(),
            axes: c.values.clone(),
            outcome: c.verdict(),
            inputs,
            passed,
            signatures: results
                .signatures
                .iter()
                .filter(|s| s.cells.contains(&c.id))
                .map(|s| s.id.clone())
                .collect(),
            host,
        });
        record.tests.extend(test_rows(c, &signature_of));
    }
    // One row per test and cell: a name reported twice keeps its first.
    let keep = firsts(
        record
            .tests
            .iter()
            .map(|t| (t.cell.as_str(), t.test.as_str())),
    );
    let mut kept = keep.into_iter();
    record.tests.retain(|_| kept.next().unwrap_or(true));
    record.environments = environments;
    Ok(record)
}

/// The id the run stores `runs` are recorded under: their run ids, sorted,
/// joined by `+` (as [`of_run`] names the run), from their `run.json`s only.
pub fn run_id(runs: &[&Path]) -> Result<String, RecordError> {
    let mut ids = runs
        .iter()
        .map(|dir| Ok(run_info(dir)?.0))
        .collect::<Result<Vec<String>, RecordError>>()?;
    ids.sort();
    Ok(ids.join("+"))
}

/// A test failing in a run, as the history follows it.
#[derive(Debug, Clone, PartialEq)]
pub struct FailingTest<'a> {
    pub cell: &'a str,
    /// `classname.name`.
    pub test: String,
    pub hash: u64,
}

/// The tests of `results` that the history counts as failing (a failure or
/// an error, [`TestStatus::is_failure`]: expected failures aside), one per cell and name as [`of_run`] keeps its rows:
/// what reading a run back needs, without making its record.
pub fn failing_of(results: &Results) -> Vec<FailingTest<'_>> {
    let mut out = Vec::new();
    for c in &results.cells {
        let listed: Vec<&TestResult> = c
            .tests
            .iter()
            .filter(|t| t.status != TestStatus::Passed)
            .collect();
        let names: Vec<String> = listed
            .iter()
            .map(|t| display_name(&t.classname, &t.name))
            .collect();
        // Only a name's first row counts, failing or not.
        let first = firsts(names.iter().map(|n| (c.id.as_str(), n.as_str())));
        for ((t, test), first) in listed.into_iter().zip(names).zip(first) {
            if first && outcome_of(t).is_failure() {
                out.push(FailingTest {
                    cell: &c.id,
                    test,
                    hash: test_hash(&t.suite, &t.classname, &t.name),
                });
            }
        }
    }
    out
}

/// For each (cell, name) in order, whether it is its first: a test
/// reported twice in a cell counts by its first row.
fn firsts<'a>(keys: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<bool> {
    let mut seen = HashSet::new();
    keys.map(|k| seen.insert(k)).collect()
}

/// A test's outcome as the history keeps it. A failure the matrix's
/// `flaky:` list counts as flaky (no rerun passed) is a failure to the
/// history: the list must not hide a test that breaks for good.
fn outcome_of(t: &TestResult) -> TestStatus {
    if t.status == TestStatus::Flaky && t.reruns == 0 {
        TestStatus::Failed
    } else {
        t.status
    }
}

/// A run store's run id and start, in milliseconds, from its `run.json`.
fn run_info(dir: &Path) -> Result<(String, i64), RecordError> {
    let store = RunStore {
        dir: dir.to_path_buf(),
    };
    let info = store
        .run_info()
        .map_err(|e| RecordError(format!("{}: {e}", dir.display())))?;
    let ms = millis(&info.started).ok_or_else(|| {
        RecordError(format!(
            "{}: run.json's start `{}` is not an RFC 3339 time",
            dir.display(),
            info.started
        ))
    })?;
    Ok((info.run_id, ms))
}

/// The run ids (sorted), the earliest start and each cell's inputs, from
/// the run stores.
fn read_stores(runs: &[&Path]) -> Result<(Vec<String>, i64, CellInputs), RecordError> {
    let mut started: Option<i64> = None;
    let mut ids = Vec::new();
    let mut cell_inputs = CellInputs::new();
    for dir in runs {
        let (id, ms) = run_info(dir)?;
        ids.push(id);
        started = Some(started.map_or(ms, |s: i64| s.min(ms)));
        let store = RunStore {
            dir: dir.to_path_buf(),
        };
        for cell in store.finished_cells() {
            if let Ok(rec) = store.cell_record(&cell) {
                let from = FromStore {
                    hash: rec.hash,
                    sources: rec.sources,
                    host: rec.host,
                };
                cell_inputs.insert(cell, from);
            }
        }
    }
    ids.sort();
    let started_ms = started.ok_or_else(|| RecordError("no run store given".into()))?;
    Ok((ids, started_ms, cell_inputs))
}

/// Each environment as the history keeps it.
fn environments(results: &Results) -> Vec<EnvRecord> {
    results
        .environments
        .iter()
        .map(|e| EnvRecord {
            environment: e.environment.clone(),
            identity: e.identity.clone(),
            base: e.base.clone(),
            packages: e.packages.clone(),
            installed_digest: crate::digest::sha256_hex(
                serde_json::to_string(&e.installed)
                    .unwrap_or_default()
                    .as_bytes(),
            ),
            cells: e.cells.clone(),
        })
        .collect()
}

/// The rows of `c`'s tests that did not simply pass.
fn test_rows(c: &CellResult, signature_of: &SignaturesByPlace<'_>) -> Vec<TestRow> {
    let mut rows = Vec::new();
    for t in &c.tests {
        if t.status == TestStatus::Passed {
            continue;
        }
        let test = display_name(&t.classname, &t.name);
        rows.push(TestRow {
            cell: c.id.clone(),
            signature: signature_of
                .get(&c.id, &test)
                .unwrap_or_default()
                .to_string(),
            hash: test_hash(&t.suite, &t.classname, &t.name),
            test,
            outcome: outcome_of(t),
            time: t.time,
            reruns: t.reruns,
            message: first_line(&t.message),
        });
    }
    rows
}

/// The signatures of each place (test), in the results' order: a failure's
/// signature is the first of its place's whose cells hold its cell. (Not
/// every cell × place pair of a signature: one signature of 2,000 tests in
/// 20 cells would be 40,000 entries on every report.)
struct SignaturesByPlace<'a>(std::collections::HashMap<&'a str, Vec<&'a Signature>>);

impl<'a> SignaturesByPlace<'a> {
    fn of(results: &'a Results) -> Self {
        let mut by = std::collections::HashMap::<&str, Vec<&Signature>>::new();
        for s in &results.signatures {
            for place in &s.places {
                by.entry(place.as_str()).or_default().push(s);
            }
        }
        SignaturesByPlace(by)
    }

    /// The id of the signature of `test`'s failure in `cell`, if any.
    fn get(&self, cell: &str, test: &str) -> Option<&'a str> {
        self.0
            .get(test)?
            .iter()
            .find(|s| s.cells.iter().any(|c| c == cell))
            .map(|s| s.id.as_str())
    }
}

/// The digest that names a set of passing tests.
pub fn passset_digest(hashes: &[u64]) -> String {
    crate::digest::sha256_hex(&hashes_to_bytes(hashes))
}

/// Sorted hashes as little-endian bytes, as the history stores them.
pub fn hashes_to_bytes(hashes: &[u64]) -> Vec<u8> {
    hashes.iter().flat_map(|h| h.to_le_bytes()).collect()
}

pub fn hashes_from_bytes(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    line.chars().take(300).collect()
}

/// Milliseconds since the epoch of an RFC 3339 time (`…T09:38:47.468Z`).
pub fn millis(rfc3339: &str) -> Option<i64> {
    let t = humantime::parse_rfc3339_weak(rfc3339.trim_end_matches('Z')).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_millis()).ok()
}

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// An RFC 3339 time (UTC, to the second) of milliseconds since the epoch.
pub fn time_of(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_hash_sets_round_trip() {
        let ms = millis("2026-11-26T09:38:47.468Z").unwrap();
        assert_eq!(ms % 1000, 468);
        assert_eq!(time_of(ms), "2026-11-26T09:38:47Z");
        let set = vec![1u64, 7, u64::MAX];
        assert_eq!(hashes_from_bytes(&hashes_to_bytes(&set)), set);
        assert_ne!(passset_digest(&set), passset_digest(&[1, 7]));
    }

    /// A report reads a recorded run back through [`failing_of`], without
    /// its record: both must name the same failing tests, a name reported
    /// twice counting by its first row, a flaky-listed failure counting as
    /// failing and an expected failure not.
    #[test]
    fn failing_of_names_what_the_record_counts_as_failing() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/gpu-runs/h100/run");
        let report = dir.join(crate::store::layout::REPORT);
        let text = std::fs::read_to_string(crate::store::layout::results_file(&report)).unwrap();
        let mut results: Results = serde_json::from_str(&text).unwrap();
        let cell = &mut results.cells[0];
        let failed = cell
            .tests
            .iter()
            .find(|t| t.status.is_failure())
            .unwrap()
            .clone();
        let named = |name: &str, status: TestStatus, reruns: u32| TestResult {
            name: name.to_string(),
            status,
            reruns,
            ..failed.clone()
        };
        cell.tests.extend([
            named("SkippedThenFailed", TestStatus::Skipped, 0),
            named("SkippedThenFailed", TestStatus::Failed, 0),
            named("FailedThenSkipped", TestStatus::Failed, 0),
            named("FailedThenSkipped", TestStatus::Skipped, 0),
            named("ListedFlaky", TestStatus::Flaky, 0),
            named("PassedOnARerun", TestStatus::Flaky, 1),
            named("Expected", TestStatus::Xfail, 0),
        ]);
        let record = of_run(&[&dir], &results).unwrap();
        let from_record: Vec<(String, String, u64)> = record
            .tests
            .iter()
            .filter(|t| t.outcome.is_failure())
            .map(|t| (t.cell.clone(), t.test.clone(), t.hash))
            .collect();
        let read: Vec<(String, String, u64)> = failing_of(&results)
            .into_iter()
            .map(|t| (t.cell.to_string(), t.test, t.hash))
            .collect();
        assert_eq!(read, from_record);
        let names: Vec<&str> = read.iter().map(|(_, t, _)| t.as_str()).collect();
        let added = |n: &str| names.iter().any(|t| t.ends_with(&format!(".{n}")));
        assert!(
            added("FailedThenSkipped") && added("ListedFlaky"),
            "{names:?}"
        );
        assert!(!added("SkippedThenFailed") && !added("PassedOnARerun"));
        assert!(!added("Expected"), "{names:?}");
        assert_eq!(run_id(&[&dir]).unwrap(), record.run);
    }

    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let dest = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_tree(&e.path(), &dest);
            } else {
                std::fs::copy(e.path(), dest).unwrap();
            }
        }
    }

    /// A failure the matrix's `flaky:` list covers is reported flaky, but
    /// no rerun passed: the history must keep it as the failure it was, so
    /// that a listed test that breaks for good shows as broken there. Read
    /// through the results' own collecting, as a report reads it.
    #[test]
    fn a_failure_the_flaky_list_covers_is_recorded_as_a_failure() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/gpu-runs/h100/run");
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        copy_tree(&fixture, &run);
        let source = crate::results::source::Source::run(&run).unwrap();
        let plain =
            crate::results::collect(&source, Default::default(), &mut crate::results::NoSink);
        let failing = plain
            .cells
            .iter()
            .flat_map(|c| &c.tests)
            .find(|t| t.status == TestStatus::Failed)
            .expect("the fixture has a failing test")
            .clone();
        let name = display_name(&failing.classname, &failing.name);
        let plan = crate::store::layout::plan_of(&run);
        let mut doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
        doc["expect"] = serde_json::json!([{
            "cells": {}, "tests": [name], "reason": "flaky on H100", "flaky": true
        }]);
        std::fs::write(&plan, doc.to_string()).unwrap();
        let source = crate::results::source::Source::run(&run).unwrap();
        let listed =
            crate::results::collect(&source, Default::default(), &mut crate::results::NoSink);
        let t = listed
            .cells
            .iter()
            .flat_map(|c| &c.tests)
            .find(|t| t.name == failing.name && t.classname == failing.classname)
            .unwrap();
        assert_eq!(t.status, TestStatus::Flaky, "the report counts it flaky");
        let record = of_run(&[&run], &listed).unwrap();
        let row = record.tests.iter().find(|r| r.test == name).unwrap();
        assert_eq!(row.outcome, TestStatus::Failed, "{row:?}");
        assert_eq!(row.reruns, 0, "no rerun ran");
    }
}
