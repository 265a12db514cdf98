//! The vocabulary of outcomes, and the one function that decides a cell's
//! verdict.
//!
//! A cell's steps end with a [`RunStatus`] (the record's, `cell.json`); its
//! JUnit files, judged by the matrix's `expect:` and `classify:` rules,
//! leave a [`TestTally`]; an `expect:` rule without `tests:` may foretell
//! that the whole cell fails. [`judge_cell`] turns these facts into the
//! cell's [`Judgement`] — its status all things considered and its
//! [`CellVerdict`] — and every place that says how a cell ended asks it: the
//! live lines and the last progress line (`src/run/progress.rs`), the
//! journal's `cell_finished`, the run's summary table and the exit code with
//! its reason (`src/cli/run.rs`, `src/error.rs`), and the reports
//! (`CellResult::verdict`, in `src/results/`). The live side reaches the JUnit
//! files through the runner's `CellJudge` (`src/run/events.rs`), which the
//! results room implements (it stands above the runner, which may not
//! import it). This module imports nothing of the crate: the run store's
//! records (`src/store/`) use its words, not the other way.

use serde::{Deserialize, Serialize};

/// How running something ended: a step, a build, or a cell (its steps'
/// status made worse by its tests). It is what `cell.json`, `build.json` and
/// the journal record as `status`; what a cell's ending *means*, after
/// `expect:` and `classify:`, is its [`CellVerdict`], and a single test's
/// status is a [`TestStatus`]. `cell.json`'s
/// record type re-exports it (`store::record::RunStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Passed,
    Failed,
    Timeout,
    Oom,
    /// Infrastructure trouble: the cell could not be judged.
    Error,
    Skipped,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Passed => "passed",
            RunStatus::Failed => "failed",
            RunStatus::Timeout => "timeout",
            RunStatus::Oom => "oom",
            RunStatus::Error => "error",
            RunStatus::Skipped => "skipped",
        }
    }

    /// Whether this outcome fails the run.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            RunStatus::Failed | RunStatus::Timeout | RunStatus::Oom | RunStatus::Error
        )
    }
}

/// How a cell ended, all things considered: the one verdict that the live
/// lines, the summary table, the reports (badge, banner, grid mark,
/// counts), `explain` and the exit code give a cell, decided by
/// [`judge_cell`] alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellVerdict {
    /// Fails the run: an unexpected test failure, or a failing status that
    /// nothing expected explains (a cell the infrastructure broke, status
    /// `error`, is one too; the exit code tells it apart by its status).
    Failing,
    Passed,
    /// Failed where the matrix's `expect:` said it would (the whole cell,
    /// or only tests expected to fail).
    ExpectedFailure,
    /// Failed only in tests a `classify:` rule moved (needs a GPU, on a
    /// host without one): it could not be judged here.
    Classified,
    Skipped,
}

impl CellVerdict {
    /// In the order the reports count them, most serious first.
    pub const ALL: [CellVerdict; 5] = [
        CellVerdict::Failing,
        CellVerdict::Passed,
        CellVerdict::ExpectedFailure,
        CellVerdict::Classified,
        CellVerdict::Skipped,
    ];

    /// `expected failure`: the words every report uses for a cell.
    pub fn label(self) -> &'static str {
        match self {
            CellVerdict::Failing => "failing",
            CellVerdict::Passed => "passed",
            CellVerdict::ExpectedFailure => "expected failure",
            CellVerdict::Classified => "failed only in classified tests",
            CellVerdict::Skipped => "skipped",
        }
    }

    /// The verdict in one word, as the history's `cells` rows keep it:
    /// `passed`, `failed`, `expected failure`, `classified`, `skipped`.
    pub fn word(self) -> &'static str {
        match self {
            CellVerdict::Failing => "failed",
            CellVerdict::Passed => "passed",
            CellVerdict::ExpectedFailure => "expected failure",
            CellVerdict::Classified => "classified",
            CellVerdict::Skipped => "skipped",
        }
    }

    /// The verdict `word` stands for ([`CellVerdict::word`]'s), if it is one.
    pub fn of_word(word: &str) -> Option<CellVerdict> {
        CellVerdict::ALL.into_iter().find(|v| v.word() == word)
    }

    /// `1 expected failure`, `2 expected failures`.
    pub fn count(self, n: usize) -> String {
        match (self, n) {
            (CellVerdict::ExpectedFailure, n) if n != 1 => format!("{n} expected failures"),
            (v, n) => format!("{n} {}", v.label()),
        }
    }
}

/// A test's status after expectations are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestStatus {
    Passed,
    Failed,
    Error,
    Skipped,
    /// Failed, then passed when run again.
    Flaky,
    /// Failed, and an `expect:` rule (or pytest's xfail) says it should.
    Xfail,
    /// Passed although an `expect:` rule says it should fail.
    Xpass,
}

impl TestStatus {
    pub const ALL: [TestStatus; 7] = [
        TestStatus::Passed,
        TestStatus::Failed,
        TestStatus::Error,
        TestStatus::Skipped,
        TestStatus::Flaky,
        TestStatus::Xfail,
        TestStatus::Xpass,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TestStatus::Passed => "passed",
            TestStatus::Failed => "failed",
            TestStatus::Error => "error",
            TestStatus::Skipped => "skipped",
            TestStatus::Flaky => "flaky",
            TestStatus::Xfail => "xfail",
            TestStatus::Xpass => "xpass",
        }
    }

    /// Whether the test fails the run.
    pub fn is_failure(self) -> bool {
        matches!(self, TestStatus::Failed | TestStatus::Error)
    }

    /// The status `word` stands for (`as_str`'s), if it is one.
    pub fn parse(word: &str) -> Option<TestStatus> {
        TestStatus::ALL.into_iter().find(|s| s.as_str() == word)
    }

    /// Whether the test ran and its code worked (for regression diffing).
    pub fn is_pass(self) -> bool {
        matches!(
            self,
            TestStatus::Passed | TestStatus::Flaky | TestStatus::Xpass
        )
    }
}

/// What a cell's tests said, after `expect:` and `classify:`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TestTally {
    /// Tests that failed or errored and nothing expected or classified.
    pub failures: u64,
    /// Tests that failed as an `expect:` rule said they would.
    pub xfail: u64,
    /// Failing tests a `classify:` rule (or the built-in no-GPU rule) moved.
    pub classified: u64,
    /// JUnit files that could not be read in full.
    pub unreadable: usize,
}

/// Everything a cell's verdict depends on.
#[derive(Debug, Clone, Copy)]
pub struct CellFacts<'a> {
    /// How its steps ended (the record's status).
    pub steps: RunStatus,
    pub tests: TestTally,
    /// The reason of the `expect:` rule without `tests:` that covers the
    /// whole cell, if one does.
    pub expected: Option<&'a str>,
}

/// A cell's status all things considered and its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judgement {
    /// The steps' status, made worse by what the tests said: `failed` by a
    /// failing test, `error` by a JUnit file that could not be read.
    pub status: RunStatus,
    pub verdict: CellVerdict,
}

impl Judgement {
    /// Whether the cell failed where the whole cell was expected to.
    pub fn is_expected(self) -> bool {
        self.verdict == CellVerdict::ExpectedFailure
    }

    /// Whether the infrastructure broke the cell (status `error`).
    pub fn is_error(self) -> bool {
        self.status == RunStatus::Error
    }
}

/// Whether `status` is a test failure an `expect:` can foretell: failed,
/// timed out, out of memory. An infrastructure error is none: it says
/// nothing of the code under test.
pub fn is_test_failure(status: RunStatus) -> bool {
    matches!(
        status,
        RunStatus::Failed | RunStatus::Timeout | RunStatus::Oom
    )
}

/// The one function that decides how a cell ended.
///
/// The status: the steps', made `failed` by an unexpected failing test and
/// `error` by an unreadable JUnit file (tests only make a cell worse). The
/// verdict: failing when a test failed unexpectedly, or the status failed
/// and neither a whole-cell expectation, expected tests nor classified
/// tests explain it; an expected failure when the whole cell was expected
/// to fail (and did: failed, timed out, ran out of memory) or its expected
/// tests failed; classified when only classified tests failed; else
/// skipped or passed as the status says.
pub fn judge_cell(facts: &CellFacts<'_>) -> Judgement {
    let t = facts.tests;
    let mut status = facts.steps;
    if t.failures > 0 && !status.is_failure() {
        status = RunStatus::Failed;
    }
    if t.unreadable > 0 && !status.is_failure() {
        status = RunStatus::Error;
    }
    let expected = facts.expected.is_some() && is_test_failure(status);
    let failing = if t.failures > 0 {
        true
    } else if !status.is_failure() || expected {
        false
    } else {
        // A `failed` cell whose only failures were expected, or classified
        // (a test that needs a GPU, on a cell without one), is fine.
        !(status == RunStatus::Failed && (t.xfail > 0 || t.classified > 0))
    };
    let verdict = if failing {
        CellVerdict::Failing
    } else if expected || t.xfail > 0 && status.is_failure() {
        CellVerdict::ExpectedFailure
    } else if status.is_failure() {
        // Not a failure, not expected: only classified tests failed.
        CellVerdict::Classified
    } else if status == RunStatus::Skipped {
        CellVerdict::Skipped
    } else {
        CellVerdict::Passed
    };
    Judgement { status, verdict }
}

/// Cells counted by their judgement, as the last progress line and the
/// summary table count them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellTally {
    pub passed: usize,
    /// Failing cells the infrastructure did not break.
    pub failed: usize,
    pub expected: usize,
    pub classified: usize,
    pub skipped: usize,
    /// Cells the infrastructure broke (status `error`).
    pub errors: usize,
}

impl CellTally {
    pub fn add(&mut self, j: Judgement) {
        match j.verdict {
            CellVerdict::Failing if j.is_error() => self.errors += 1,
            CellVerdict::Failing => self.failed += 1,
            CellVerdict::Passed => self.passed += 1,
            CellVerdict::ExpectedFailure => self.expected += 1,
            CellVerdict::Classified => self.classified += 1,
            CellVerdict::Skipped => self.skipped += 1,
        }
    }

    pub fn of(judgements: impl IntoIterator<Item = Judgement>) -> CellTally {
        let mut t = CellTally::default();
        for j in judgements {
            t.add(j);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(
        steps: RunStatus,
        tests: TestTally,
        expected: Option<&str>,
    ) -> (RunStatus, CellVerdict) {
        let j = judge_cell(&CellFacts {
            steps,
            tests,
            expected,
        });
        (j.status, j.verdict)
    }

    fn failing(n: u64) -> TestTally {
        TestTally {
            failures: n,
            ..TestTally::default()
        }
    }

    #[test]
    fn steps_that_pass_with_failing_tests_fail() {
        assert_eq!(
            judge(RunStatus::Passed, failing(2), None),
            (RunStatus::Failed, CellVerdict::Failing)
        );
        // A skipped cell (exit 77) with a failing test fails too.
        assert_eq!(
            judge(RunStatus::Skipped, failing(1), None),
            (RunStatus::Failed, CellVerdict::Failing)
        );
        // Expecting the whole cell to fail does not excuse a test that
        // failed outside it: collecting turns its tests into xfail first.
        assert_eq!(
            judge(RunStatus::Passed, failing(1), Some("known")).1,
            CellVerdict::Failing
        );
        assert_eq!(
            judge(RunStatus::Passed, TestTally::default(), None),
            (RunStatus::Passed, CellVerdict::Passed)
        );
        assert_eq!(
            judge(RunStatus::Skipped, TestTally::default(), None),
            (RunStatus::Skipped, CellVerdict::Skipped)
        );
    }

    #[test]
    fn unreadable_junit_is_an_error() {
        let t = TestTally {
            unreadable: 1,
            ..TestTally::default()
        };
        assert_eq!(
            judge(RunStatus::Passed, t, None),
            (RunStatus::Error, CellVerdict::Failing)
        );
        let j = judge_cell(&CellFacts {
            steps: RunStatus::Passed,
            tests: t,
            expected: Some("known"),
        });
        // An error is not the failure an expectation foretold.
        assert!(j.is_error() && !j.is_expected());
    }

    #[test]
    fn expectations_and_classified_tests() {
        // The whole cell expected to fail, and it did.
        for steps in [RunStatus::Failed, RunStatus::Timeout, RunStatus::Oom] {
            assert_eq!(
                judge(steps, TestTally::default(), Some("no gfx1100 libraries")),
                (steps, CellVerdict::ExpectedFailure)
            );
        }
        // An infrastructure error is not what an expectation foretells.
        assert_eq!(
            judge(RunStatus::Error, TestTally::default(), Some("known")),
            (RunStatus::Error, CellVerdict::Failing)
        );
        // Expected to fail, and passed: passed (the table says unexpectedly).
        assert_eq!(
            judge(RunStatus::Passed, TestTally::default(), Some("known")).1,
            CellVerdict::Passed
        );
        // A step that failed because only expected tests failed.
        let xfail = TestTally {
            xfail: 2,
            ..TestTally::default()
        };
        assert_eq!(
            judge(RunStatus::Failed, xfail, None).1,
            CellVerdict::ExpectedFailure
        );
        // Expected tests that failed while the steps passed: passed.
        assert_eq!(judge(RunStatus::Passed, xfail, None).1, CellVerdict::Passed);
        // Only classified tests failed.
        let classified = TestTally {
            classified: 1,
            ..TestTally::default()
        };
        assert_eq!(
            judge(RunStatus::Failed, classified, None),
            (RunStatus::Failed, CellVerdict::Classified)
        );
        assert_eq!(
            judge(RunStatus::Passed, classified, None).1,
            CellVerdict::Passed
        );
        // A timeout is not explained by classified tests.
        assert_eq!(
            judge(RunStatus::Timeout, classified, None).1,
            CellVerdict::Failing
        );
        // A failed step with no tests to explain it.
        assert_eq!(
            judge(RunStatus::Failed, TestTally::default(), None).1,
            CellVerdict::Failing
        );
    }

    #[test]
    fn the_tally_counts_errors_apart_from_failures() {
        let j = |status, verdict| Judgement { status, verdict };
        let t = CellTally::of([
            j(RunStatus::Failed, CellVerdict::Failing),
            j(RunStatus::Error, CellVerdict::Failing),
            j(RunStatus::Failed, CellVerdict::ExpectedFailure),
            j(RunStatus::Failed, CellVerdict::Classified),
            j(RunStatus::Passed, CellVerdict::Passed),
            j(RunStatus::Skipped, CellVerdict::Skipped),
        ]);
        assert_eq!(
            t,
            CellTally {
                passed: 1,
                failed: 1,
                expected: 1,
                classified: 1,
                skipped: 1,
                errors: 1
            }
        );
    }
}
