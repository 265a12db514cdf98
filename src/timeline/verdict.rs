//! Flaky told from broken: what one test's outcomes in one cell, run after
//! run, say about it. The rule goes by the shape of the sequence alone, as
//! a changepoint finder does, whatever the recorded inputs: what changes
//! underneath a GPU test most often (the host's kernel, driver, firmware,
//! the card itself) is not among them. Pure functions over a sequence, so
//! the rules are tested without a database (docs/history.md gives them with
//! strips as examples):
//!
//! - **failing since R** (a regression): passes, then only failures from R
//!   on (`✓✓✓✓✗✗✗✗`); **new** when R is the latest run (`✓✓✓✗`);
//! - **known since R**: failing in every run it was recorded in, the first
//!   being R (`✗✗✗`);
//! - **flaky**: failures that come and go — in two or more separate
//!   stretches (`✓✗✓✓✗✓`), or one failure between passes (`✓✓✗✓✓`) — or a
//!   failure that passed on a rerun inside one run (`✓~✓`);
//! - **fixed since R**: failing (from the first run, or for two runs or
//!   more), then passing in every run since R (`✗✗✓✓`, `✓✗✗✓`).
//!
//! Whether the inputs changed does not decide the verdict; it explains it
//! (`src/history/past.rs` says what changed, or that nothing the matrix controls
//! did, and which host facts moved).

use std::collections::BTreeMap;

use crate::outcome::TestStatus;

/// One run's outcome of a test in a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Obs {
    Pass,
    Fail,
    /// Failed, then passed on a rerun inside the run.
    Rerun,
    /// Skipped, or not run in that run.
    Absent,
}

impl Obs {
    /// A recorded outcome; a test missing from the non-passing rows is
    /// [`Obs::Pass`] when its cell's passing set has it.
    pub fn of(status: TestStatus) -> Obs {
        match status {
            TestStatus::Failed | TestStatus::Error | TestStatus::Xfail => Obs::Fail,
            TestStatus::Flaky => Obs::Rerun,
            TestStatus::Passed | TestStatus::Xpass => Obs::Pass,
            TestStatus::Skipped => Obs::Absent,
        }
    }

    /// A recorded outcome that may be a word this rocmatrix does not know
    /// (a newer one's): such a run says nothing of the test.
    pub fn of_recorded(status: Option<TestStatus>) -> Obs {
        status.map_or(Obs::Absent, Obs::of)
    }

    /// In words, for JSON: `passed`, `failed`, `passed on a rerun`, `not run`.
    pub fn word(self) -> &'static str {
        match self {
            Obs::Pass => "passed",
            Obs::Fail => "failed",
            Obs::Rerun => "passed on a rerun",
            Obs::Absent => "not run",
        }
    }

    /// One character for a strip of runs.
    pub fn mark(self) -> char {
        match self {
            Obs::Pass => '✓',
            Obs::Fail => '✗',
            Obs::Rerun => '~',
            Obs::Absent => '·',
        }
    }
}

/// A test's outcome in one run, with what went into that run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// The run's place in the history (by start time).
    pub run: usize,
    /// The digest of what the cell ran (shared by its tests' points).
    pub inputs: std::sync::Arc<str>,
    pub obs: Obs,
    /// Where the cell ran in that run (shared by its tests' points).
    pub host: std::sync::Arc<crate::store::host::HostFacts>,
}

/// What the sequence says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryVerdict {
    Passing,
    /// Failing since run `since` after passing before it.
    Regression {
        since: usize,
    },
    /// Failing in every recorded run, the first being `since`.
    KnownSince {
        since: usize,
    },
    /// Failing intermittently: `failures` of the `runs` it ran in.
    Flaky {
        failures: usize,
        runs: usize,
        why: &'static str,
    },
    /// Passing since `since`, after failing.
    Fixed {
        since: usize,
    },
}

impl HistoryVerdict {
    pub fn is_flaky(&self) -> bool {
        matches!(self, HistoryVerdict::Flaky { .. })
    }
}

/// Judges `points` (in run order). Called for every failing test of every
/// report, so it walks the points without making lists of them.
pub fn judge(points: &[Point]) -> HistoryVerdict {
    // The runs the test ran in (an absent point is a run without it).
    let ran = || points.iter().filter(|p| p.obs != Obs::Absent);
    let runs = ran().count();
    let failures = ran().filter(|p| p.obs != Obs::Pass).count();
    let flaky = |why| HistoryVerdict::Flaky {
        failures,
        runs,
        why,
    };
    if failures == 0 {
        return HistoryVerdict::Passing;
    }
    if ran().any(|p| p.obs == Obs::Rerun) {
        return flaky(WHY_RERUN);
    }
    // The stretches of failures, in order: how many, and the first's
    // (start, end) among the runs it ran in.
    let mut stretches = 0;
    let (mut start, mut end) = (0, 0);
    let mut failing = false;
    for (i, p) in ran().enumerate() {
        let fails = p.obs != Obs::Pass;
        if fails && !failing {
            stretches += 1;
            if stretches == 1 {
                start = i;
            }
        }
        if fails && stretches == 1 {
            end = i;
        }
        failing = fails;
    }
    if stretches > 1 {
        return flaky(WHY_STRETCHES);
    }
    let run_at = |i: usize| ran().nth(i).map_or(0, |p| p.run);
    if end + 1 < runs {
        // Passing again: one failure between passes came and went; a
        // longer stretch, or one from the first run, was fixed.
        if start > 0 && start == end {
            return flaky(WHY_ONCE);
        }
        return HistoryVerdict::Fixed {
            since: run_at(end + 1),
        };
    }
    if start == 0 {
        HistoryVerdict::KnownSince { since: run_at(0) }
    } else {
        HistoryVerdict::Regression {
            since: run_at(start),
        }
    }
}

/// Why a test is flaky: it passed on a rerun within a run.
pub const WHY_RERUN: &str = "passed on a rerun within a run";
/// Why a test is flaky: its failures came in separate stretches.
pub const WHY_STRETCHES: &str = "failed in separate stretches of runs";
/// Why a test is flaky: it failed once between passes.
pub const WHY_ONCE: &str = "failed once between passes";

/// The axis values that single out the cells in `flaky` among all cells
/// that ran the test (`flaky` and `steady`): `gfx=gfx1151` when every flaky
/// cell has it and no steady one does. Empty when no one value does.
pub fn where_flaky(
    flaky: &[&BTreeMap<String, String>],
    steady: &[&BTreeMap<String, String>],
) -> Vec<String> {
    let Some(first) = flaky.first() else {
        return Vec::new();
    };
    if steady.is_empty() {
        return Vec::new();
    }
    first
        .iter()
        .filter(|(k, v)| {
            flaky.iter().all(|c| c.get(*k) == Some(v))
                && steady.iter().all(|c| c.get(*k) != Some(v))
        })
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points from a strip: `✓✓✗✗` with inputs `aabb` (one letter a run).
    fn points(strip: &str, inputs: &str) -> Vec<Point> {
        strip
            .chars()
            .zip(inputs.chars())
            .enumerate()
            .map(|(run, (m, i))| Point {
                run,
                inputs: i.to_string().into(),
                host: Default::default(),
                obs: match m {
                    '✓' => Obs::Pass,
                    '✗' => Obs::Fail,
                    '~' => Obs::Rerun,
                    _ => Obs::Absent,
                },
            })
            .collect()
    }

    /// The verdict of a strip whose every run had the same inputs.
    fn of(strip: &str) -> HistoryVerdict {
        judge(&points(strip, &"a".repeat(strip.chars().count())))
    }

    fn flaky(failures: usize, runs: usize, why: &'static str) -> HistoryVerdict {
        HistoryVerdict::Flaky {
            failures,
            runs,
            why,
        }
    }

    /// The rule as docs/history.md gives it, strip by strip. The inputs
    /// never changed in any of them: the shape alone decides.
    #[test]
    fn the_documented_strips() {
        use HistoryVerdict::*;
        let table: &[(&str, HistoryVerdict)] = &[
            // A step change: failing since its first failure.
            ("✓✓✓✓✗✗✗✗", Regression { since: 4 }),
            ("✓✓✗✗", Regression { since: 2 }),
            // One new failure after passes: new (a regression since the latest).
            ("✓✓✓✗", Regression { since: 3 }),
            ("✓✓✓✓✗", Regression { since: 4 }),
            // Skipped runs do not break a stretch.
            ("✓✓·✗·✗", Regression { since: 3 }),
            // Failing from the first record.
            ("✗✗✗", KnownSince { since: 0 }),
            ("·✗✗", KnownSince { since: 1 }),
            ("✗", KnownSince { since: 0 }),
            // Failures that come and go.
            ("✓✗✓✓✗✓", flaky(2, 6, WHY_STRETCHES)),
            ("✓✗✓✓✗✓✗✓", flaky(3, 8, WHY_STRETCHES)),
            ("✓✗✓✓✗✗✗✗", flaky(5, 8, WHY_STRETCHES)),
            ("✗✓✗", flaky(2, 3, WHY_STRETCHES)),
            ("✓✓✗✓✓", flaky(1, 5, WHY_ONCE)),
            ("✓✗✓", flaky(1, 3, WHY_ONCE)),
            // A failure that passed on a rerun inside its run.
            ("✓~✓", flaky(1, 3, WHY_RERUN)),
            ("✓✓✓~", flaky(1, 4, WHY_RERUN)),
            // Fixed: a stretch of failures, then passes.
            ("✗✗✓✓", Fixed { since: 2 }),
            ("✗✓", Fixed { since: 1 }),
            ("✓✗✗✓", Fixed { since: 3 }),
            // Never failed.
            ("✓✓✓", Passing),
            ("··", Passing),
        ];
        for (strip, want) in table {
            assert_eq!(&of(strip), want, "{strip}");
        }
    }

    /// The rule written again over the strip's text, the way a reader
    /// applies it by eye: drop the runs it did not run in, then look at
    /// the stretches of `✗` between the `✓`s.
    fn by_eye(strip: &str) -> HistoryVerdict {
        let ran: Vec<(usize, char)> = strip
            .chars()
            .enumerate()
            .filter(|(_, c)| *c != '·')
            .collect();
        let marks: String = ran.iter().map(|(_, c)| *c).collect();
        let failures = marks.chars().filter(|c| *c != '✓').count();
        let runs = ran.len();
        if failures == 0 {
            return HistoryVerdict::Passing;
        }
        if marks.contains('~') {
            return flaky(failures, runs, WHY_RERUN);
        }
        let stretches: Vec<&str> = marks.split('✓').filter(|s| !s.is_empty()).collect();
        if stretches.len() > 1 {
            return flaky(failures, runs, WHY_STRETCHES);
        }
        let first_fail = marks.chars().position(|c| c == '✗').unwrap();
        let after: Vec<char> = marks
            .chars()
            .skip(first_fail + stretches[0].chars().count())
            .collect();
        let original = |i: usize| ran[i].0;
        if after.is_empty() {
            return if first_fail == 0 {
                HistoryVerdict::KnownSince { since: original(0) }
            } else {
                HistoryVerdict::Regression {
                    since: original(first_fail),
                }
            };
        }
        if first_fail > 0 && stretches[0].chars().count() == 1 {
            return flaky(failures, runs, WHY_ONCE);
        }
        HistoryVerdict::Fixed {
            since: original(first_fail + stretches[0].chars().count()),
        }
    }

    /// Every strip of up to 8 runs of pass, fail, rerun and absent (87,380
    /// strips), with unchanging inputs and with inputs changing every run:
    /// the judge agrees with the rule read by eye, and the inputs never
    /// change a verdict.
    #[test]
    fn every_strip_of_up_to_8_runs() {
        let alphabet = ['✓', '✗', '~', '·'];
        let mut count = 0;
        for len in 1..=8u32 {
            for n in 0..4usize.pow(len) {
                let strip: String = (0..len)
                    .map(|k| alphabet[(n / 4usize.pow(k)) % 4])
                    .collect();
                let same = judge(&points(&strip, &"a".repeat(len as usize)));
                let moving: String = (0..len).map(|k| (b'a' + k as u8) as char).collect();
                assert_eq!(same, by_eye(&strip), "{strip}");
                assert_eq!(judge(&points(&strip, &moving)), same, "{strip}");
                // A step change is never flaky: passes then two or more
                // failures, nothing else, is failing since.
                let marks: String = strip.chars().filter(|c| *c != '·').collect();
                let fails = marks.trim_start_matches('✓');
                if marks.starts_with('✓')
                    && fails.chars().count() >= 2
                    && fails.chars().all(|c| c == '✗')
                {
                    assert!(matches!(same, HistoryVerdict::Regression { .. }), "{strip}");
                }
                count += 1;
            }
        }
        assert_eq!(count, 87_380);
    }

    #[test]
    fn flakiness_is_placed_by_the_axis_value_only_flaky_cells_share() {
        let cell = |s: &str, g: &str| {
            BTreeMap::from([
                ("suite".to_string(), s.to_string()),
                ("gfx".to_string(), g.to_string()),
            ])
        };
        let (a, b, c, d) = (
            cell("sid", "gfx1151"),
            cell("trixie", "gfx1151"),
            cell("sid", "gfx1030"),
            cell("trixie", "gfx1030"),
        );
        assert_eq!(where_flaky(&[&a, &b], &[&c, &d]), ["gfx=gfx1151"]);
        assert!(where_flaky(&[&a, &d], &[&b, &c]).is_empty());
    }
}
