//! The result model: cells with their status and counts, the tests that did
//! not simply pass (with bounded messages and output), and the identities of
//! passing tests as 64-bit hashes — enough to diff against a baseline
//! without keeping a million names in memory.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::store::record::RunStatus as CellStatus;

/// Version of `results.json` (see `reports/results.schema.json`).
pub const RESULTS_VERSION: u32 = 1;

/// A test's status after expectations are applied (the vocabulary's, in
/// `src/outcome.rs`: the history's rows keep it too).
pub use crate::outcome::TestStatus;

/// Test counts by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub passed: u64,
    pub failed: u64,
    pub error: u64,
    pub skipped: u64,
    pub flaky: u64,
    pub xfail: u64,
    pub xpass: u64,
    /// Of the above, tests a `classify:` rule (or the built-in no-GPU rule)
    /// moved from a failure to another status; not a status of its own.
    #[serde(default)]
    pub classified: u64,
}

impl Counts {
    pub fn add(&mut self, s: TestStatus) {
        *self.get_mut(s) += 1;
    }

    fn get_mut(&mut self, s: TestStatus) -> &mut u64 {
        match s {
            TestStatus::Passed => &mut self.passed,
            TestStatus::Failed => &mut self.failed,
            TestStatus::Error => &mut self.error,
            TestStatus::Skipped => &mut self.skipped,
            TestStatus::Flaky => &mut self.flaky,
            TestStatus::Xfail => &mut self.xfail,
            TestStatus::Xpass => &mut self.xpass,
        }
    }

    pub fn get(&self, s: TestStatus) -> u64 {
        let mut c = *self;
        *c.get_mut(s)
    }

    pub fn total(&self) -> u64 {
        TestStatus::ALL.iter().map(|s| self.get(*s)).sum()
    }

    /// Unexpected failures and errors.
    pub fn failures(&self) -> u64 {
        self.failed + self.error
    }

    /// What the verdict needs of these counts ([`crate::outcome::TestTally`]),
    /// with `unreadable` JUnit files.
    pub fn tally(&self, unreadable: usize) -> crate::outcome::TestTally {
        crate::outcome::TestTally {
            failures: self.failures(),
            xfail: self.xfail,
            classified: self.classified,
            unreadable,
        }
    }

    pub fn merge(&mut self, o: &Counts) {
        for s in TestStatus::ALL {
            *self.get_mut(s) += o.get(s);
        }
        self.classified += o.classified;
    }
}

/// The stable identity hash of a test inside a cell: FNV-1a (64 bit) over
/// `suite 0x1f classname 0x1f name`. Stored in `results.json`, so it must
/// never change for a given results version.
pub fn test_hash(suite: &str, classname: &str, name: &str) -> u64 {
    TestHashPrefix::new(suite, classname).with_name(name)
}

/// [`test_hash`] taken as far as `suite 0x1f classname 0x1f`: the tests of
/// one suite and class share it, and FNV-1a goes on from it byte by byte,
/// so a reader of a million tests hashes each prefix once, not each time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestHashPrefix(u64);

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

impl TestHashPrefix {
    pub fn new(suite: &str, classname: &str) -> TestHashPrefix {
        let h = fnv1a(FNV_OFFSET, suite.as_bytes());
        let h = fnv1a(h, &[0x1f]);
        let h = fnv1a(h, classname.as_bytes());
        TestHashPrefix(fnv1a(h, &[0x1f]))
    }

    /// The [`test_hash`] of test `name` under this prefix.
    pub fn with_name(self, name: &str) -> u64 {
        fnv1a(self.0, name.as_bytes())
    }
}

/// A test that did not simply pass, with what is needed to show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub suite: String,
    pub classname: String,
    pub name: String,
    pub status: TestStatus,
    #[serde(default)]
    pub time: Option<f64>,
    /// The failure/error/skip `type`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Failure text, then system-out/err, bounded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
    /// Failed runs before the final one (flaky or rerun).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reruns: u32,
    /// Why the test is expected to fail (xfail/xpass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// The rule that moved this test from a failure to its status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classified: Option<super::classify::Classified>,
    /// The JUnit file it came from, relative to the cell directory.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl TestResult {
    pub fn hash(&self) -> u64 {
        test_hash(&self.suite, &self.classname, &self.name)
    }

    pub fn display_name(&self) -> String {
        display_name(&self.classname, &self.name)
    }
}

/// `classname.name` (or `name`), the way people write test ids.
pub fn display_name(classname: &str, name: &str) -> String {
    if classname.is_empty() {
        name.to_string()
    } else {
        format!("{classname}.{name}")
    }
}

/// A step of a cell, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    pub name: String,
    pub status: CellStatus,
    #[serde(default)]
    pub exit_code: Option<i64>,
    pub duration_secs: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub log_tail: String,
    /// The step's whole log, relative to the cell's directory
    /// (`logs/02-compile.log`); empty when unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub log: String,
    /// gdb's backtrace of the failing command (`backtrace:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<crate::store::record::Backtrace>,
    /// The verdict on the package as a whole (autopkgtest's exit status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<crate::store::record::PackageOutcome>,
}

/// One cell's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    pub id: String,
    /// Axis values in the plan's key order.
    pub values: BTreeMap<String, String>,
    pub status: CellStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub duration_secs: f64,
    pub counts: Counts,
    /// The reason of the `expect:` rule without `tests` that covers the
    /// whole cell, set only when the cell failed as that rule says it
    /// would (a test failure: not an error, not a pass); a covered cell
    /// that passed has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_failure: Option<String>,
    #[serde(default)]
    pub steps: Vec<StepResult>,
    /// Every test that did not simply pass, in document order.
    #[serde(default)]
    pub tests: Vec<TestResult>,
    /// Identity hashes of passing tests, sorted; see [`test_hash`].
    #[serde(default, with = "hex_hashes")]
    pub passed_hashes: Vec<u64>,
    /// Problems found while reading results (cut-off or invalid reports …).
    #[serde(default)]
    pub messages: Vec<String>,
    /// Odd but tolerated input, counted by kind.
    #[serde(default)]
    pub oddities: BTreeMap<String, u64>,
    /// JUnit files read, relative to the cell directory.
    #[serde(default)]
    pub junit: Vec<String>,
    /// Where the cell ran (its record's host facts); empty for JUnit
    /// directories and runs recorded before.
    #[serde(
        default,
        skip_serializing_if = "crate::store::host::HostFacts::is_empty"
    )]
    pub host: crate::store::host::HostFacts,
}

/// How a cell ended, all things considered: decided by
/// [`crate::outcome::judge_cell`] alone, for the reports as for the run.
pub use crate::outcome::CellVerdict;

impl CellResult {
    /// The cell's verdict, as [`crate::outcome::judge_cell`] decides it
    /// from the cell's status, its tests' counts and its expectation.
    pub fn verdict(&self) -> CellVerdict {
        self.judgement().verdict
    }

    /// The cell's [`Judgement`](crate::outcome::Judgement): its status
    /// (already made worse by its tests when it was collected) and verdict.
    pub fn judgement(&self) -> crate::outcome::Judgement {
        crate::outcome::judge_cell(&crate::outcome::CellFacts {
            steps: self.status,
            tests: self.counts.tally(0),
            expected: self.expected_failure.as_deref(),
        })
    }

    /// How the reports name the cell's outcome in a word or two: its
    /// status (`passed`, `failed`, `timeout` …), except that a cell that
    /// failed as the matrix expected is an `expected failure`.
    pub fn outcome(&self) -> &'static str {
        match self.verdict() {
            CellVerdict::ExpectedFailure => CellVerdict::ExpectedFailure.label(),
            _ => self.status.as_str(),
        }
    }

    /// The worst verdict on a package among its steps (autopkgtest's exit
    /// status: badpkg, fail, tmpfail, neutral, pass), if a step gave one.
    pub fn package(&self) -> Option<&crate::store::record::PackageOutcome> {
        self.steps
            .iter()
            .filter_map(|s| s.package.as_ref())
            .max_by_key(|p| p.verdict)
    }

    /// Whether this cell fails the run (its verdict is failing).
    pub fn is_failure(&self) -> bool {
        self.verdict() == CellVerdict::Failing
    }

    pub fn value(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }
}

/// Everything a report shows about a run (or merged shards).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub version: u32,
    pub name: String,
    /// Run ids this was built from (several after a merge).
    pub runs: Vec<String>,
    #[serde(default)]
    pub matrix_hash: String,
    pub keys: Vec<String>,
    pub report: crate::matrix_file::ReportLayout,
    pub cells: Vec<CellResult>,
    /// Problems about the whole set (missing shards …).
    #[serde(default)]
    pub messages: Vec<String>,
    /// gfx coverage of the environment images (`run --coverage`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coverage: Vec<crate::store::coverage::EnvironmentCoverage>,
    /// Why cells fail: failures grouped by normalised text, with the axis
    /// values that separate their cells (`crate::analysis::signature`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<super::findings::Signature>,
    /// The versions that matter per environment (`lock.json`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environments: Vec<super::facts::EnvironmentFacts>,
    /// gfx targets libraries gain and lose from one environment to the next
    /// along the matrix (`crate::analysis::coverage_changes::along`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coverage_changes: Vec<super::findings::CoverageChange>,
    /// What chose the run's cells (`run --affected-by`), when something did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_by: Option<crate::store::record::SelectedBy>,
}

impl Results {
    /// The axis values every one of `cells` has, in key order.
    pub fn common_values(&self, cells: &[String]) -> Vec<(String, String)> {
        let of: Vec<&CellResult> = self
            .cells
            .iter()
            .filter(|c| cells.contains(&c.id))
            .collect();
        let Some(first) = of.first() else {
            return Vec::new();
        };
        self.keys
            .iter()
            .filter_map(|k| first.values.get(k).map(|v| (k, v)))
            .filter(|(k, v)| of.iter().all(|c| c.values.get(*k) == Some(*v)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// `suite=sid`: the axis values all of an environment's `cells` share,
    /// or `fallback` when they share none.
    pub fn environment_label(&self, cells: &[String], fallback: &str) -> String {
        let common = self.common_values(cells);
        if common.is_empty() {
            return fallback.to_string();
        }
        common
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" · ")
    }

    pub fn totals(&self) -> Counts {
        let mut c = Counts::default();
        for cell in &self.cells {
            c.merge(&cell.counts);
        }
        c
    }

    /// Cells by status.
    pub fn cell_counts(&self) -> BTreeMap<&'static str, u64> {
        let mut m = BTreeMap::new();
        for c in &self.cells {
            *m.entry(c.status.as_str()).or_insert(0) += 1;
        }
        m
    }

    /// Cells by verdict, in [`CellVerdict::ALL`]'s order, those with none left out.
    pub fn verdicts(&self) -> Vec<(CellVerdict, usize)> {
        let mut n: BTreeMap<CellVerdict, usize> = BTreeMap::new();
        for c in &self.cells {
            *n.entry(c.verdict()).or_insert(0) += 1;
        }
        CellVerdict::ALL
            .iter()
            .filter_map(|v| n.get(v).map(|n| (*v, *n)))
            .collect()
    }

    pub fn failing_cells(&self) -> usize {
        self.cells.iter().filter(|c| c.is_failure()).count()
    }

    pub fn cell(&self, id: &str) -> Option<&CellResult> {
        self.cells.iter().find(|c| c.id == id)
    }
}

/// Serializes sorted hashes as one string of 16-hex-digit groups: compact
/// (17 bytes a test would be JSON's minimum for a number array anyway) and
/// cheap to parse.
mod hex_hashes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(v.len() * 16);
        for h in v {
            // `{h:016x}` by hand: the formatter is most of the cost of a
            // million hashes.
            out.extend(
                (0..16)
                    .rev()
                    .map(|i| char::from(HEX[(h >> (i * 4)) as usize & 15])),
            );
        }
        s.serialize_str(&out)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        let s = String::deserialize(d)?;
        if !s.is_ascii() || s.len() % 16 != 0 {
            return Err(serde::de::Error::custom(
                "passed_hashes must be groups of 16 hex digits",
            ));
        }
        (0..s.len() / 16)
            .map(|i| {
                u64::from_str_radix(&s[i * 16..i * 16 + 16], 16)
                    .map_err(|_| serde::de::Error::custom("passed_hashes: not hex"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable() {
        // Pinned (checked with an independent FNV-1a): results.json files depend on it.
        assert_eq!(test_hash("", "", ""), 0x0879_e907_b528_1763);
        assert_ne!(test_hash("a", "b", "c"), test_hash("ab", "", "c"));
        // Pinned against the one-pass function it replaced, byte for byte
        // over `suite 0x1f classname 0x1f name`.
        let one_pass = |s: &str, c: &str, n: &str| {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in [s.as_bytes(), &[0x1f], c.as_bytes(), &[0x1f], n.as_bytes()].concat() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            h
        };
        for (s, c, n) in [
            ("Kernel000Suite00", "Kernel000Suite00", "Case000"),
            ("a/b", "", "élan"),
            ("", "k&", "t1"),
        ] {
            assert_eq!(test_hash(s, c, n), one_pass(s, c, n));
            assert_eq!(TestHashPrefix::new(s, c).with_name(n), one_pass(s, c, n));
        }
    }

    #[test]
    fn hashes_roundtrip() {
        #[derive(Serialize, Deserialize)]
        struct W(#[serde(with = "hex_hashes")] Vec<u64>);
        let w = W(vec![0, 1, u64::MAX]);
        let s = serde_json::to_string(&w).unwrap();
        let back: W = serde_json::from_str(&s).unwrap();
        assert_eq!(back.0, w.0);
        // Bad input is an error, never a panic.
        assert!(serde_json::from_str::<W>("\"ééééééééx\"").is_err());
        assert!(serde_json::from_str::<W>("\"zzzzzzzzzzzzzzzz\"").is_err());
    }
}
