//! Regression classification against a baseline run.
//!
//! Every (cell, test) present in either run is classified as new failure,
//! fixed, still failing, new test, removed test, flaky or newly skipped (or
//! nothing, when it passed both times); cells as added or missing, or as
//! broken/recovered when their own status crossed the failure line.
//!
//! Passing tests are known by identity hash only (see
//! [`crate::results::model::test_hash`]), so a new or removed test that passed is
//! counted, and named when a name is seen: new ones while the current run is
//! read ([`NameCatcher`]), removed ones by reading a baseline run again
//! ([`RemovedNames`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::results::collect::Sink;
use crate::results::junit::{Case, Limits};
use crate::results::model::{test_hash, CellResult, Results, TestStatus};
use crate::results::source::{CellSource, Source};
use crate::results::ResultsError;

/// How a test changed since the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    NewFailure,
    Fixed,
    StillFailing,
    NewTest,
    RemovedTest,
    Flaky,
    NewlySkipped,
}

impl Class {
    pub const ALL: [Class; 7] = [
        Class::NewFailure,
        Class::Fixed,
        Class::StillFailing,
        Class::NewTest,
        Class::RemovedTest,
        Class::Flaky,
        Class::NewlySkipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::NewFailure => "new_failure",
            Class::Fixed => "fixed",
            Class::StillFailing => "still_failing",
            Class::NewTest => "new_test",
            Class::RemovedTest => "removed_test",
            Class::Flaky => "flaky",
            Class::NewlySkipped => "newly_skipped",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Class::NewFailure => "new failure",
            Class::Fixed => "fixed",
            Class::StillFailing => "still failing",
            Class::NewTest => "new test",
            Class::RemovedTest => "removed test",
            Class::Flaky => "flaky",
            Class::NewlySkipped => "newly skipped",
        }
    }
}

/// How a cell changed since the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellClass {
    /// In this run, not in the baseline.
    Added,
    /// In the baseline, not in this run.
    Missing,
    /// Its status became a failure (timeout, oom, error …).
    Broken,
    /// Its status stopped being a failure.
    Recovered,
}

impl CellClass {
    pub fn as_str(self) -> &'static str {
        match self {
            CellClass::Added => "added",
            CellClass::Missing => "missing",
            CellClass::Broken => "broken",
            CellClass::Recovered => "recovered",
        }
    }
}

/// One classified test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub class: Class,
    pub cell: String,
    pub suite: String,
    pub classname: String,
    pub name: String,
    /// Status now (absent for removed tests).
    #[serde(default)]
    pub status: Option<TestStatus>,
    /// Status in the baseline (absent for new tests).
    #[serde(default)]
    pub baseline: Option<TestStatus>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl Change {
    pub fn display_name(&self) -> String {
        crate::results::model::display_name(&self.classname, &self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellChange {
    pub class: CellClass,
    pub cell: String,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
}

/// The comparison with a baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Regressions {
    /// What the baseline was (a path).
    pub baseline: String,
    /// Counts of every class, including tests listed without a name.
    pub counts: BTreeMap<Class, u64>,
    /// Classified tests (capped per class by [`MAX_LISTED`]; `counts` has all).
    pub changes: Vec<Change>,
    pub cells: Vec<CellChange>,
    /// Failure signatures new, known and gone against the baseline.
    #[serde(default)]
    pub signatures: SignatureChanges,
    /// What changed underneath: each environment against the baseline's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environments: Vec<super::env_changes::EnvironmentChange>,
    /// gfx targets libraries gained and lost against the baseline (`--coverage`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coverage: Vec<super::coverage_changes::CoverageChange>,
}

/// How a run's failure signatures compare with the baseline's
/// ([`super::signature::mark_against`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SignatureChanges {
    /// Signatures the baseline did not fail with.
    pub new: u64,
    /// Signatures the baseline failed with too.
    pub known: u64,
    /// The baseline's signatures that no longer occur.
    pub gone: u64,
}

/// Marks the run's signatures new or known against the baseline's. A
/// baseline written before signatures existed has none recorded: they are
/// found from its failures first.
pub fn compare_signatures(results: &mut Results, baseline: &Results) -> SignatureChanges {
    let found;
    let before = if baseline.signatures.is_empty() && baseline.failing_cells() > 0 {
        found = super::signature::find(baseline);
        &found
    } else {
        &baseline.signatures
    };
    let gone = super::signature::mark_against(&mut results.signatures, before);
    let new = results
        .signatures
        .iter()
        .filter(|s| s.baseline == Some(super::signature::Seen::New))
        .count() as u64;
    SignatureChanges {
        new,
        known: results.signatures.len() as u64 - new,
        gone: gone as u64,
    }
}

/// At most this many tests of one class are listed by name.
pub const MAX_LISTED: usize = 5000;

impl Regressions {
    /// New failures, cells that broke and gfx targets lost that a cell asks
    /// for: what `--fail-on regression` fails on.
    pub fn regression_count(&self) -> u64 {
        self.count(Class::NewFailure)
            + self
                .cells
                .iter()
                .filter(|c| c.class == CellClass::Broken)
                .count() as u64
            + super::coverage_changes::regressions(&self.coverage)
    }

    /// The changes of the environment a cell ran in, if it changed.
    pub fn environment_of(&self, cell: &str) -> Option<&super::env_changes::EnvironmentChange> {
        self.environments
            .iter()
            .find(|e| e.cells.iter().any(|c| c == cell))
    }

    pub fn count(&self, c: Class) -> u64 {
        self.counts.get(&c).copied().unwrap_or(0)
    }

    fn push(&mut self, change: Change) {
        let n = self.counts.entry(change.class).or_insert(0);
        *n += 1;
        if *n as usize <= MAX_LISTED {
            self.changes.push(change);
        }
    }

    fn add_unnamed(&mut self, class: Class, n: u64) {
        if n > 0 {
            *self.counts.entry(class).or_insert(0) += n;
        }
    }

    pub fn of_class(&self, c: Class) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(move |x| x.class == c)
    }
}

/// The largest baseline `results.json` read. Its size is bounded by what
/// collecting keeps (details of at most 10,000 tests per cell), and a
/// baseline may be a downloaded artifact.
pub const MAX_RESULTS_JSON: u64 = 256 << 20;

/// Loads a baseline: a run directory (its `report/results.json` when present,
/// else its cells are read again), a report directory holding `results.json`,
/// or a `results.json` file.
pub fn load_baseline(path: &Path) -> Result<Results, ResultsError> {
    if std::fs::symlink_metadata(path).is_err() {
        return Err(ResultsError::Store {
            path: path.to_path_buf(),
            message: "no such file or directory; --baseline takes a run directory, \
                      a report directory or a results.json"
                .into(),
        });
    }
    let json = if path.is_dir() {
        // A run directory, or the --out directory of `report merge`/`report junit`.
        let p = crate::store::layout::results_in(path);
        let Some(p) = p else {
            let src = Source::run(path)?;
            return Ok(super::collect(
                &src,
                Limits::default(),
                &mut crate::results::NoSink,
            ));
        };
        p
    } else {
        path.to_path_buf()
    };
    let bytes =
        crate::safe_read::read_bounded(&json, MAX_RESULTS_JSON, "a baseline's results.json", "")
            .map_err(|e| ResultsError::io(&json, e))?;
    let r: Results = serde_json::from_slice(&bytes).map_err(|e| ResultsError::Json {
        path: json.clone(),
        source: e,
    })?;
    if r.version != crate::results::model::RESULTS_VERSION {
        return Err(ResultsError::Store {
            path: json,
            message: format!(
                "results.json version {} is not the supported version {}",
                r.version,
                crate::results::model::RESULTS_VERSION
            ),
        });
    }
    Ok(r)
}

struct Index<'a> {
    details: HashMap<u64, &'a crate::results::model::TestResult>,
    passed: &'a [u64],
}

impl<'a> Index<'a> {
    fn new(c: &'a CellResult) -> Self {
        Index {
            details: c.tests.iter().map(|t| (t.hash(), t)).collect(),
            passed: &c.passed_hashes,
        }
    }

    fn status(&self, h: u64) -> Option<TestStatus> {
        if let Some(t) = self.details.get(&h) {
            return Some(t.status);
        }
        self.passed
            .binary_search(&h)
            .ok()
            .map(|_| TestStatus::Passed)
    }
}

/// Names of passing tests, caught while collecting, for the hashes the
/// comparison could not name otherwise (new passing tests).
#[derive(Default)]
pub struct NameCatcher {
    /// For each cell: hashes of tests the baseline has.
    baseline: HashMap<String, HashSet<u64>>,
    baseline_cells: HashSet<String>,
    current_cell: Option<String>,
    /// (cell, suite, classname, name) of new passing tests, capped.
    pub names: HashMap<(String, u64), (String, String, String)>,
}

impl NameCatcher {
    pub fn new(baseline: &Results) -> Self {
        let mut m = HashMap::new();
        for c in &baseline.cells {
            let mut s: HashSet<u64> = c.passed_hashes.iter().copied().collect();
            s.extend(c.tests.iter().map(|t| t.hash()));
            m.insert(c.id.clone(), s);
        }
        NameCatcher {
            baseline_cells: m.keys().cloned().collect(),
            baseline: m,
            ..Default::default()
        }
    }
}

impl Sink for NameCatcher {
    fn cell_start(&mut self, cell: &CellSource) {
        self.current_cell = self
            .baseline_cells
            .contains(&cell.id)
            .then(|| cell.id.clone());
    }

    fn case(&mut self, suite: &str, case: &Case, status: TestStatus) {
        if status != TestStatus::Passed || self.names.len() >= MAX_LISTED {
            return;
        }
        let Some(cell) = &self.current_cell else {
            return;
        };
        let h = test_hash(suite, &case.classname, &case.name);
        if self.baseline.get(cell).is_some_and(|s| !s.contains(&h)) {
            self.names.insert(
                (cell.clone(), h),
                (suite.to_string(), case.classname.clone(), case.name.clone()),
            );
        }
    }
}

/// Compares `current` with `baseline`.
pub fn compare(
    current: &Results,
    baseline: &Results,
    label: &str,
    names: Option<&NameCatcher>,
) -> Regressions {
    let mut r = Regressions {
        baseline: label.to_string(),
        ..Default::default()
    };
    let base_cells: HashMap<&str, &CellResult> =
        baseline.cells.iter().map(|c| (c.id.as_str(), c)).collect();
    let cur_ids: HashSet<&str> = current.cells.iter().map(|c| c.id.as_str()).collect();
    for cur in &current.cells {
        let Some(base) = base_cells.get(cur.id.as_str()) else {
            r.cells.push(CellChange {
                class: CellClass::Added,
                cell: cur.id.clone(),
                from: None,
                to: Some(cur.status.as_str().into()),
            });
            continue;
        };
        // A cell status crossing the failure line that its tests do not
        // explain (a timeout, a crash, a build that no longer works).
        let (was, is) = (base.is_failure(), cur.is_failure());
        let class = if is && !was && cur.counts.failures() == 0 {
            Some(CellClass::Broken)
        } else if was && !is && base.counts.failures() == 0 {
            Some(CellClass::Recovered)
        } else {
            None
        };
        if let Some(class) = class {
            r.cells.push(CellChange {
                class,
                cell: cur.id.clone(),
                from: Some(base.status.as_str().into()),
                to: Some(cur.status.as_str().into()),
            });
        }
        compare_cell(&mut r, cur, base, names);
    }
    for base in &baseline.cells {
        if !cur_ids.contains(base.id.as_str()) {
            r.cells.push(CellChange {
                class: CellClass::Missing,
                cell: base.id.clone(),
                from: Some(base.status.as_str().into()),
                to: None,
            });
        }
    }
    r.environments = super::env_changes::compare(current, baseline);
    super::source_moves::count(&mut r.environments, current, &crate::dirs::cache_dir());
    r.coverage = super::coverage_changes::against_baseline(current, baseline);
    r
}

fn compare_cell(
    r: &mut Regressions,
    cur: &CellResult,
    base: &CellResult,
    names: Option<&NameCatcher>,
) {
    let bi = Index::new(base);
    let ci = Index::new(cur);
    let change = |class: Class, t: &crate::results::model::TestResult, status, baseline| Change {
        class,
        cell: cur.id.clone(),
        suite: t.suite.clone(),
        classname: t.classname.clone(),
        name: t.name.clone(),
        status,
        baseline,
        message: t.message.clone(),
    };
    // Tests that did not simply pass now.
    for t in &cur.tests {
        let b = bi.status(t.hash());
        let class = match (t.status, b) {
            (s, Some(b)) if s.is_failure() && b.is_failure() => Some(Class::StillFailing),
            (s, _) if s.is_failure() => Some(Class::NewFailure),
            (TestStatus::Flaky, _) => Some(Class::Flaky),
            (_, None) => Some(Class::NewTest),
            (TestStatus::Skipped, Some(b)) if b != TestStatus::Skipped => Some(Class::NewlySkipped),
            _ => None,
        };
        if let Some(class) = class {
            r.push(change(class, t, Some(t.status), b));
        }
    }
    // Tests that pass now: fixed, or new.
    let mut new_passing = 0u64;
    for h in &cur.passed_hashes {
        match bi.details.get(h) {
            Some(bt) if bt.status.is_failure() => {
                r.push(change(
                    Class::Fixed,
                    bt,
                    Some(TestStatus::Passed),
                    Some(bt.status),
                ));
            }
            Some(_) => {}
            None => {
                if bi.passed.binary_search(h).is_err() {
                    match names.and_then(|n| n.names.get(&(cur.id.clone(), *h))) {
                        Some((suite, classname, name)) => r.push(Change {
                            class: Class::NewTest,
                            cell: cur.id.clone(),
                            suite: suite.clone(),
                            classname: classname.clone(),
                            name: name.clone(),
                            status: Some(TestStatus::Passed),
                            baseline: None,
                            message: String::new(),
                        }),
                        None => new_passing += 1,
                    }
                }
            }
        }
    }
    r.add_unnamed(Class::NewTest, new_passing);
    // Tests that are gone.
    let mut removed_passing = 0u64;
    for t in &base.tests {
        if ci.status(t.hash()).is_none() {
            r.push(change(Class::RemovedTest, t, None, Some(t.status)));
        }
    }
    for h in &base.passed_hashes {
        if ci.status(*h).is_none() {
            removed_passing += 1;
        }
    }
    r.add_unnamed(Class::RemovedTest, removed_passing);
}

/// For each cell in both runs: hashes of tests that passed in the baseline
/// and are gone now — removed tests the comparison could only count.
pub fn unnamed_removed(current: &Results, baseline: &Results) -> HashMap<String, HashSet<u64>> {
    let cur: HashMap<&str, &CellResult> =
        current.cells.iter().map(|c| (c.id.as_str(), c)).collect();
    let mut out = HashMap::new();
    for base in &baseline.cells {
        let Some(c) = cur.get(base.id.as_str()) else {
            continue;
        };
        let ci = Index::new(c);
        let gone: HashSet<u64> = base
            .passed_hashes
            .iter()
            .copied()
            .filter(|h| ci.status(*h).is_none())
            .collect();
        if !gone.is_empty() {
            out.insert(base.id.clone(), gone);
        }
    }
    out
}

/// Catches the names of removed tests while the baseline run is read again.
pub struct RemovedNames {
    wanted: HashMap<String, HashSet<u64>>,
    cell: Option<String>,
    pub found: Vec<Change>,
}

impl RemovedNames {
    pub fn new(wanted: HashMap<String, HashSet<u64>>) -> Self {
        RemovedNames {
            wanted,
            cell: None,
            found: Vec::new(),
        }
    }
}

impl Sink for RemovedNames {
    fn cell_start(&mut self, cell: &CellSource) {
        self.cell = self.wanted.contains_key(&cell.id).then(|| cell.id.clone());
    }

    fn case(&mut self, suite: &str, case: &Case, status: TestStatus) {
        if status != TestStatus::Passed || self.found.len() >= MAX_LISTED {
            return;
        }
        let Some(cell) = &self.cell else { return };
        let h = test_hash(suite, &case.classname, &case.name);
        if self.wanted.get_mut(cell).is_some_and(|s| s.remove(&h)) {
            self.found.push(Change {
                class: Class::RemovedTest,
                cell: cell.clone(),
                suite: suite.to_string(),
                classname: case.classname.clone(),
                name: case.name.clone(),
                status: None,
                baseline: Some(TestStatus::Passed),
                message: String::new(),
            });
        }
    }
}

impl Regressions {
    /// Lists removed tests named after the fact; they are already counted.
    pub fn add_named_removed(&mut self, found: Vec<Change>) {
        let listed = self.of_class(Class::RemovedTest).count();
        let room = MAX_LISTED.saturating_sub(listed);
        self.changes.extend(found.into_iter().take(room));
    }
}
