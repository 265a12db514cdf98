//! The search itself, without containers: points `0..n` in order, the
//! first in the old state and the last in the new one; each probe says
//! old, new or skip; [`Search::next`] picks the points to probe next and
//! [`Search::outcome`] says where the change is once nothing is left to
//! probe.
//!
//! The change is searched between `lo`, the last old point below `hi`, and
//! `hi`, the first new point. The next point is the untested point of that
//! range nearest to its middle, so a range of `m` possible first-new points
//! takes ⌈log2 m⌉ probes, plus one for each skipped point probed (a skip
//! does not narrow the range; its neighbour is tried next, as `git bisect
//! skip` does). With `k` probes at a time the range is cut into `k + 1`
//! parts (a k-ary search). Which verdict is old and which new — passing,
//! or showing the signature — is the caller's choice (`--regress`).

use serde::{Deserialize, Serialize};

/// A probed point's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// As the old end: before the change.
    Old,
    /// As the new end: after the change.
    New,
    /// Neither: it could not be judged.
    Skip,
}

/// Where the change is, once nothing is left to probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The last point in the old state.
    pub last_old: usize,
    /// The first point in the new state that was probed.
    pub first_new: usize,
    /// The points that may be the first new one: `first_new` alone, or,
    /// when skipped points lie between `last_old` and `first_new`, those
    /// and `first_new`.
    pub candidates: Vec<usize>,
}

impl Outcome {
    /// Whether skips leave more than one candidate.
    pub fn is_ambiguous(&self) -> bool {
        self.candidates.len() > 1
    }
}

/// What is known about each point.
#[derive(Debug, Clone)]
pub struct Search {
    states: Vec<Option<State>>,
}

impl Search {
    /// `n` points (at least 2): point 0 is old, point `n - 1` new.
    pub fn new(n: usize) -> Search {
        let mut states = vec![None; n.max(2)];
        states[0] = Some(State::Old);
        let last = states.len() - 1;
        states[last] = Some(State::New);
        Search { states }
    }

    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Records what point `i` showed (a later probe of a point replaces
    /// an earlier one).
    pub fn record(&mut self, i: usize, state: State) {
        if let Some(s) = self.states.get_mut(i) {
            *s = Some(state);
        }
    }

    pub fn state(&self, i: usize) -> Option<State> {
        self.states.get(i).copied().flatten()
    }

    /// `(lo, hi)`: the first new point, and the last old point below it.
    pub fn bounds(&self) -> (usize, usize) {
        let hi = (0..self.states.len())
            .find(|&i| self.state(i) == Some(State::New))
            .unwrap_or(self.states.len() - 1);
        let lo = (0..hi)
            .rev()
            .find(|&i| self.state(i) == Some(State::Old))
            .unwrap_or(0);
        (lo, hi)
    }

    /// The untested points strictly between the bounds.
    fn untested(&self) -> Vec<usize> {
        let (lo, hi) = self.bounds();
        (lo + 1..hi).filter(|&i| self.state(i).is_none()).collect()
    }

    /// Up to `k` points to probe next (at once), in order; empty when the
    /// search is over.
    pub fn next(&self, k: usize) -> Vec<usize> {
        let k = k.max(1);
        let untested = self.untested();
        if untested.len() <= k {
            return untested;
        }
        let (lo, hi) = self.bounds();
        let m = hi - lo;
        let mut picked: Vec<usize> = Vec::with_capacity(k);
        for part in 1..=k {
            // The ideal cut: `lo + part * m / (k + 1)`, rounded down, but
            // never `lo` itself.
            let ideal = (lo + part * m / (k + 1)).max(lo + 1);
            if let Some(&p) = untested
                .iter()
                .filter(|p| !picked.contains(p))
                .min_by_key(|&&p| (p.abs_diff(ideal), p))
            {
                picked.push(p);
            }
        }
        picked.sort_unstable();
        picked
    }

    /// Where the change is, when [`Search::next`] has nothing left.
    pub fn outcome(&self) -> Option<Outcome> {
        if !self.untested().is_empty() {
            return None;
        }
        let (lo, hi) = self.bounds();
        let mut candidates: Vec<usize> = (lo + 1..hi)
            .filter(|&i| self.state(i) == Some(State::Skip))
            .collect();
        candidates.push(hi);
        Some(Outcome {
            last_old: lo,
            first_new: hi,
            candidates,
        })
    }

    /// Points probed new below a point probed old: the verdicts are not
    /// monotonic (a flaky test, or a change that came and went).
    pub fn inconsistent(&self) -> Vec<usize> {
        let (_, hi) = self.bounds();
        (hi + 1..self.states.len())
            .filter(|&i| self.state(i) == Some(State::Old))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a whole search over `n` points against `oracle`, `k` at a
    /// time; returns the outcome and the probed points in order (the ends
    /// are not counted: they are known before the search starts).
    fn run(n: usize, k: usize, oracle: impl Fn(usize) -> State) -> (Outcome, Vec<usize>) {
        let mut s = Search::new(n);
        let mut probed = Vec::new();
        loop {
            let next = s.next(k);
            if next.is_empty() {
                break;
            }
            for i in next {
                assert!(!probed.contains(&i), "{i} probed twice");
                probed.push(i);
                s.record(i, oracle(i));
            }
            assert!(probed.len() <= n, "the search does not end");
        }
        (s.outcome().expect("finished"), probed)
    }

    fn first_new_at(at: usize) -> impl Fn(usize) -> State {
        move |i| if i >= at { State::New } else { State::Old }
    }

    fn log2_ceil(m: usize) -> usize {
        (usize::BITS - (m.max(1) - 1).leading_zeros()) as usize
    }

    #[test]
    fn every_first_new_point_is_found_in_log2_probes() {
        for n in [2usize, 3, 4, 5, 7, 8, 9, 16, 33, 64, 100] {
            for at in 1..n {
                let (o, probed) = run(n, 1, first_new_at(at));
                assert_eq!(o.first_new, at, "n={n} at={at}");
                assert_eq!(o.last_old, at - 1, "n={n} at={at}");
                assert_eq!(o.candidates, [at]);
                assert!(
                    probed.len() <= log2_ceil(n - 1),
                    "n={n} at={at}: {} probes {probed:?}",
                    probed.len()
                );
            }
        }
    }

    /// The 64-commit scenario of the integration test, by index: commit c
    /// is point c - 1; commit 41 brings the failure, commit 23 does not
    /// build and commits 50–55 fail otherwise.
    fn scenario(i: usize) -> State {
        let commit = i + 1;
        if commit == 23 || (50..=55).contains(&commit) {
            State::Skip
        } else if commit >= 41 {
            State::New
        } else {
            State::Old
        }
    }

    #[test]
    fn the_64_commit_scenario_names_commit_41_within_log2_64_probes_with_the_ends() {
        let (o, probed) = run(64, 1, scenario);
        assert_eq!(o.first_new + 1, 41);
        assert_eq!(o.last_old + 1, 40);
        assert!(!o.is_ambiguous());
        // Two end probes plus the search: at most ⌈log2 64⌉ + 2.
        assert!(probed.len() + 2 <= 6 + 2, "{probed:?}");
    }

    #[test]
    fn skips_are_probed_around_and_counted_once_each() {
        for at in 1..64 {
            let skipped = |i: usize| i % 7 == 3 && i != at;
            let oracle = |i: usize| {
                if skipped(i) {
                    State::Skip
                } else {
                    first_new_at(at)(i)
                }
            };
            let (o, probed) = run(64, 1, oracle);
            let skips = probed.iter().filter(|&&i| skipped(i)).count();
            assert!(
                probed.len() <= log2_ceil(63) + skips + 1,
                "at={at}: {probed:?}"
            );
            assert_eq!(*o.candidates.last().unwrap(), at, "at={at}");
            assert!(o.candidates.iter().all(|&c| c == at || skipped(c)));
        }
    }

    #[test]
    fn skips_next_to_the_change_leave_candidates() {
        // 10 points; 4, 5 and 6 cannot be judged; the change is at 5.
        let oracle = |i: usize| match i {
            4..=6 => State::Skip,
            i if i >= 5 => State::New,
            _ => State::Old,
        };
        let (o, _) = run(10, 1, oracle);
        assert_eq!(o.last_old, 3);
        assert_eq!(o.first_new, 7);
        assert_eq!(o.candidates, [4, 5, 6, 7]);
        assert!(o.is_ambiguous());
    }

    #[test]
    fn everything_skipped_between_the_ends_leaves_every_point() {
        let oracle = |_: usize| State::Skip;
        let (o, probed) = run(5, 1, oracle);
        assert_eq!(probed.len(), 3);
        assert_eq!((o.last_old, o.first_new), (0, 4));
        assert_eq!(o.candidates, [1, 2, 3, 4]);
    }

    #[test]
    fn k_probes_at_a_time_take_fewer_rounds() {
        for k in [2usize, 3, 4] {
            for at in 1..64 {
                let mut s = Search::new(64);
                let mut rounds = 0;
                loop {
                    let next = s.next(k);
                    if next.is_empty() {
                        break;
                    }
                    assert!(next.len() <= k);
                    rounds += 1;
                    for i in next {
                        s.record(i, first_new_at(at)(i));
                    }
                }
                assert_eq!(s.outcome().unwrap().first_new, at, "k={k} at={at}");
                // log_{k+1}(63), rounded up, plus one for uneven cuts.
                let mut bound = 0;
                let mut reach = 1usize;
                while reach < 63 {
                    reach *= k + 1;
                    bound += 1;
                }
                assert!(rounds <= bound + 1, "k={k} at={at}: {rounds} rounds");
            }
        }
    }

    #[test]
    fn the_smallest_spaces_need_no_probe() {
        let s = Search::new(2);
        assert!(s.next(1).is_empty());
        assert_eq!(
            s.outcome(),
            Some(Outcome {
                last_old: 0,
                first_new: 1,
                candidates: vec![1]
            })
        );
    }

    #[test]
    fn an_old_point_above_a_new_one_is_inconsistent_and_ignored() {
        let mut s = Search::new(10);
        s.record(4, State::New);
        s.record(7, State::Old);
        assert_eq!(s.bounds(), (0, 4));
        assert_eq!(s.inconsistent(), [7]);
    }

    #[test]
    fn a_later_probe_of_a_point_replaces_the_earlier_verdict() {
        let mut s = Search::new(10);
        s.record(5, State::New);
        s.record(5, State::Skip);
        assert_eq!(s.state(5), Some(State::Skip));
        assert_eq!(s.bounds(), (0, 9));
    }
}
