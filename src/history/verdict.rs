//! Flaky told from broken: what one test's outcomes in one cell, run after
//! run, say about it. Pure functions over a sequence, so the rules are
//! tested without a database (docs/history.md gives them with examples):
//!
//! - **flaky**: it both passed and failed with the same inputs (the same
//!   cell definition, installed packages and source commits), or it failed
//!   and then passed on a rerun inside one run, or it failed in two or more
//!   separate stretches (fail, pass, fail): an intermittent failure;
//! - **regression since R**: it passed, then failed in every run since R,
//!   and the inputs changed between the last pass and R;
//! - **known since R**: it failed in every run it was recorded in, the
//!   first being R;
//! - **new**: a regression or known failure whose R is the latest run;
//! - **fixed since R**: it failed, then passed in every run since R.

use std::collections::BTreeMap;

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
    /// A recorded outcome (`results.json`'s words); a test missing from the
    /// non-passing rows is [`Obs::Pass`] when its cell's passing set has it.
    pub fn of(outcome: &str) -> Obs {
        match outcome {
            "failed" | "error" | "xfail" => Obs::Fail,
            "flaky" => Obs::Rerun,
            "passed" | "xpass" => Obs::Pass,
            _ => Obs::Absent,
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
        return flaky("passed on a rerun within a run");
    }
    if failures < runs && same_inputs_both_ways(ran()) {
        return flaky("passed and failed with the same inputs");
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
        return flaky("failed in separate stretches of runs");
    }
    let run_at = |i: usize| ran().nth(i).map_or(0, |p| p.run);
    if end + 1 < runs {
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

/// Whether one set of inputs both passed and failed in `ran` (asked only
/// of a test that did both: one that never passed cannot have).
fn same_inputs_both_ways<'a>(ran: impl Iterator<Item = &'a Point>) -> bool {
    let mut by_inputs: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
    for p in ran {
        let e = by_inputs.entry(&*p.inputs).or_default();
        match p.obs {
            Obs::Pass => e.0 = true,
            _ => e.1 = true,
        }
    }
    by_inputs.values().any(|(pass, fail)| *pass && *fail)
}

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
                obs: match m {
                    '✓' => Obs::Pass,
                    '✗' => Obs::Fail,
                    '~' => Obs::Rerun,
                    _ => Obs::Absent,
                },
            })
            .collect()
    }

    #[test]
    fn a_step_change_with_new_inputs_is_a_regression_since_its_first_run() {
        assert_eq!(
            judge(&points("✓✓✓✗✗", "aaabb")),
            HistoryVerdict::Regression { since: 3 }
        );
        // Skipped runs do not break the stretch.
        assert_eq!(
            judge(&points("✓✓·✗·✗", "aaabbb")),
            HistoryVerdict::Regression { since: 3 }
        );
    }

    #[test]
    fn failing_from_the_first_record_is_known_and_new_is_the_latest() {
        assert_eq!(
            judge(&points("✗✗✗", "abc")),
            HistoryVerdict::KnownSince { since: 0 }
        );
        assert_eq!(
            judge(&points("✓✓✗", "aab")),
            HistoryVerdict::Regression { since: 2 }
        );
    }

    #[test]
    fn intermittent_failures_and_same_inputs_are_flaky() {
        let v = judge(&points("✓✗✓✓✗✓✓✓", "abcdefgh"));
        assert_eq!(
            v,
            HistoryVerdict::Flaky {
                failures: 2,
                runs: 8,
                why: "failed in separate stretches of runs"
            }
        );
        // One step change, but the inputs did not change: not a regression.
        assert!(judge(&points("✓✓✗✗", "aaaa")).is_flaky());
        assert!(judge(&points("✓~✓", "abc")).is_flaky());
    }

    #[test]
    fn passing_again_is_fixed() {
        assert_eq!(
            judge(&points("✗✗✓✓", "aabb")),
            HistoryVerdict::Fixed { since: 2 }
        );
        assert_eq!(judge(&points("✓✓✓", "aaa")), HistoryVerdict::Passing);
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
