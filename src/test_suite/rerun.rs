//! A failing test run again, and what its later runs make of it, as
//! Surefire tells it: a pass makes it flaky (the failed runs before it kept
//! as `<flakyFailure>`s); another failure takes the earlier one's place,
//! which is kept as a `<rerunFailure>`; a skip when run again leaves the
//! failure as it was. The gtest adapter folds each test's rerun in this
//! way, `ctest --rerun-failed` and a `run:` step run again each fold a
//! whole attempt ([`fold_attempt`]).

use std::collections::HashMap;

use super::{Case, CaseVerdict};

impl Case {
    /// Folds `again`, a later run of this test, into it when it is
    /// failing; returns whether it still fails (and is worth another run).
    pub fn fold_rerun(&mut self, again: Case) -> bool {
        if !self.verdict.is_failure() {
            return false;
        }
        match again.verdict {
            CaseVerdict::Passed => {
                let earlier = std::mem::replace(&mut self.verdict, CaseVerdict::Passed);
                self.reruns.push(earlier);
                self.time = again.time;
                false
            }
            v if v.is_failure() => {
                let earlier = std::mem::replace(&mut self.verdict, v);
                self.reruns.push(earlier);
                self.output = again.output;
                true
            }
            // Skipped when run again: the failure stands as it was.
            _ => false,
        }
    }
}

/// Folds `again`, a later attempt's tests, into the failing tests of
/// `cases` (matched by suite and name; tests the attempt did not run keep
/// their failure); returns how many of them still fail.
pub fn fold_attempt(cases: &mut [Case], again: Vec<Case>) -> usize {
    let mut by_name: HashMap<(String, String), Case> = again
        .into_iter()
        .map(|c| ((c.suite.clone(), c.name.clone()), c))
        .collect();
    let mut failing = 0;
    for case in cases.iter_mut().filter(|c| c.verdict.is_failure()) {
        let key = (case.suite.clone(), case.name.clone());
        let still = match by_name.remove(&key) {
            Some(again) => case.fold_rerun(again),
            None => true,
        };
        failing += usize::from(still && case.verdict.is_failure());
    }
    failing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, verdict: CaseVerdict) -> Case {
        Case {
            suite: "S".into(),
            name: name.into(),
            param: None,
            verdict,
            time: Some(0.5),
            output: format!("{name} printed"),
            shard: 0,
            reruns: Vec::new(),
        }
    }

    fn failed(msg: &str) -> CaseVerdict {
        CaseVerdict::Failed {
            message: msg.into(),
            text: String::new(),
        }
    }

    #[test]
    fn a_pass_makes_a_failure_flaky_and_a_failure_takes_its_place() {
        let mut cases = vec![
            case("passes", CaseVerdict::Passed),
            case("flaky", failed("first")),
            case("broken", failed("first")),
            case("skips", failed("first")),
            case("gone", failed("first")),
        ];
        let again = vec![
            case("passes", failed("a pass never reruns")),
            case("flaky", CaseVerdict::Passed),
            case("broken", failed("second")),
            case(
                "skips",
                CaseVerdict::Skipped {
                    message: "no GPU".into(),
                },
            ),
        ];
        assert_eq!(fold_attempt(&mut cases, again), 2, "broken and gone fail");
        assert_eq!(cases[0].verdict, CaseVerdict::Passed);
        assert!(cases[0].reruns.is_empty());
        assert_eq!(cases[1].verdict, CaseVerdict::Passed);
        assert_eq!(cases[1].reruns, vec![failed("first")]);
        assert_eq!(cases[2].verdict, failed("second"));
        assert_eq!(cases[2].reruns, vec![failed("first")]);
        assert_eq!(cases[3].verdict, failed("first"), "a skip leaves it");
        assert!(cases[3].reruns.is_empty());
        assert_eq!(cases[4].verdict, failed("first"), "not run again");

        let third = vec![case("broken", CaseVerdict::Passed)];
        assert_eq!(fold_attempt(&mut cases, third), 2, "skips and gone");
        assert_eq!(cases[2].reruns, vec![failed("first"), failed("second")]);
        assert_eq!(cases[2].verdict, CaseVerdict::Passed);
    }
}
