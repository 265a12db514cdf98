//! Axis attribution: which axis values separate the cells where a failure
//! signature occurs from the cells where the same step or test ran without it.
//!
//! The rule is the smallest conjunction of predicates `axis ∈ {values}` that
//! selects exactly the failing cells among the cells that ran. For a given
//! set of axes the tightest predicate per axis is the set of values the
//! failing cells have, so trying the axis subsets by size finds the smallest
//! exact rule. Axes whose values all read as numbers or dotted versions are
//! ordered (15 < 17 < 21 < 22; 5.7 < 6.4): a contiguous set of their values is
//! phrased as a range, and the first passing value past it is named ("passes
//! from llvm=22") when cells that meet the rest of the rule show it. Without
//! an exact rule the best single predicate is given with its counts.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// More axes than this are tried only in conjunctions of up to three.
const FULL_SEARCH_AXES: usize = 12;

/// One cell as attribution sees it: its axis values and whether it fails.
pub struct Point<'a> {
    pub values: &'a BTreeMap<String, String>,
    pub failing: bool,
}

pub use crate::results::findings::{Attribution, Predicate};

/// Attributes the failing points among `points` to axes `keys`.
pub fn attribute(keys: &[String], points: &[Point]) -> Attribution {
    let failing = points.iter().filter(|p| p.failing).count();
    let ran = points.len();
    let mut a = Attribution {
        exact: false,
        predicates: Vec::new(),
        boundaries: Vec::new(),
        failing,
        ran,
        text: String::new(),
    };
    if ran <= 1 {
        a.text = "one cell only: one cell cannot show which axis matters".into();
        return a;
    }
    if failing == ran {
        a.text = format!("occurs in every cell that ran it ({ran} of {ran}): no axis separates it");
        return a;
    }
    let axes: Vec<Axis> = keys
        .iter()
        .map(|k| Axis::new(k, points))
        .filter(|x| x.all.len() > 1)
        .collect();
    if let Some(rule) = smallest_exact(&axes, points) {
        a.exact = true;
        a.boundaries = boundaries(&axes, &rule, points);
        a.predicates = rule
            .iter()
            .map(|&(i, ref v)| axes[i].predicate(v))
            .collect();
        let rule_text = join_predicates(&a.predicates);
        a.text = if failing == 1 {
            format!("only in 1 of {ran} cells, the one with {rule_text}; one failing cell is thin evidence")
        } else {
            format!("occurs exactly when {rule_text} ({failing} of {ran} cells)")
        };
        for b in &a.boundaries {
            a.text.push_str(&format!("; {b}"));
        }
        return a;
    }
    best_single(&mut a, &axes, points);
    a
}

/// One axis: its values among the points that ran, ordered when they can be.
struct Axis {
    name: String,
    /// Distinct values, in order (numeric/version order when `ordered`).
    all: Vec<String>,
    ordered: bool,
}

impl Axis {
    fn new(name: &str, points: &[Point]) -> Axis {
        let set: BTreeSet<&str> = points
            .iter()
            .map(|p| p.values.get(name).map(String::as_str).unwrap_or(""))
            .collect();
        let mut all: Vec<String> = set.into_iter().map(str::to_string).collect();
        let ordered = all.iter().all(|v| version_parts(v).is_some());
        if ordered {
            all.sort_by(|a, b| compare_versions(a, b));
        }
        Axis {
            name: name.to_string(),
            all,
            ordered,
        }
    }

    fn value<'a>(&self, p: &'a Point) -> &'a str {
        p.values.get(&self.name).map(String::as_str).unwrap_or("")
    }

    /// Indices into `all` of `values`, sorted.
    fn positions(&self, values: &BTreeSet<String>) -> Vec<usize> {
        (0..self.all.len())
            .filter(|i| values.contains(&self.all[*i]))
            .collect()
    }

    fn predicate(&self, values: &BTreeSet<String>) -> Predicate {
        let pos = self.positions(values);
        let vals: Vec<String> = pos.iter().map(|i| self.all[*i].clone()).collect();
        let n = &self.name;
        let contiguous = pos.windows(2).all(|w| w[1] == w[0] + 1);
        let text = if vals.len() == 1 {
            format!("{n}={}", vals[0])
        } else if self.ordered && contiguous && pos[0] == 0 {
            format!("{n} ≤ {}", vals[vals.len() - 1])
        } else if self.ordered && contiguous && pos[pos.len() - 1] == self.all.len() - 1 {
            format!("{n} ≥ {}", vals[0])
        } else if self.ordered && contiguous {
            format!("{} ≤ {n} ≤ {}", vals[0], vals[vals.len() - 1])
        } else {
            format!("{n} ∈ {{{}}}", vals.join(", "))
        };
        Predicate {
            axis: n.clone(),
            values: vals,
            text,
        }
    }
}

/// Dotted numeric parts of a value (`6.4.3` → [6, 4, 3]), `v` allowed in front.
fn version_parts(v: &str) -> Option<Vec<u64>> {
    let v = v.strip_prefix('v').unwrap_or(v);
    if v.is_empty() {
        return None;
    }
    v.split('.').map(|p| p.parse::<u64>().ok()).collect()
}

/// Orders versions by their dotted numeric parts: 5.7 < 6.4 < 6.10.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (version_parts(a), version_parts(b)) {
        (Some(x), Some(y)) => x.cmp(&y).then_with(|| a.cmp(b)),
        _ => a.cmp(b),
    }
}

type Rule = Vec<(usize, BTreeSet<String>)>;

/// The failing cells' values of axis `i`.
fn failing_values(axis: &Axis, points: &[Point]) -> BTreeSet<String> {
    points
        .iter()
        .filter(|p| p.failing)
        .map(|p| axis.value(p).to_string())
        .collect()
}

/// The smallest conjunction that selects exactly the failing points; among
/// rules of one size, the one with the fewest values.
fn smallest_exact(axes: &[Axis], points: &[Point]) -> Option<Rule> {
    let tight: Vec<BTreeSet<String>> = axes.iter().map(|a| failing_values(a, points)).collect();
    // Axes where the failing cells do not cover every value can narrow.
    let useful: Vec<usize> = (0..axes.len())
        .filter(|i| tight[*i].len() < axes[*i].all.len())
        .collect();
    let max_size = if useful.len() > FULL_SEARCH_AXES {
        3
    } else {
        useful.len()
    };
    for size in 1..=max_size {
        let mut best: Option<Rule> = None;
        for combo in combinations(useful.len(), size) {
            let rule: Rule = combo
                .iter()
                .map(|&j| (useful[j], tight[useful[j]].clone()))
                .collect();
            if selects_exactly(axes, &rule, points) {
                let weight = |r: &Rule| r.iter().map(|(_, v)| v.len()).sum::<usize>();
                if best.as_ref().is_none_or(|b| weight(&rule) < weight(b)) {
                    best = Some(rule);
                }
            }
        }
        if best.is_some() {
            return best;
        }
    }
    None
}

fn matches(axes: &[Axis], rule: &Rule, p: &Point) -> bool {
    rule.iter()
        .all(|(i, vals)| vals.contains(axes[*i].value(p)))
}

fn selects_exactly(axes: &[Axis], rule: &Rule, points: &[Point]) -> bool {
    points.iter().all(|p| matches(axes, rule, p) == p.failing)
}

/// All `k`-subsets of `0..n`, in lexicographic order.
fn combinations(n: usize, k: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur = Vec::with_capacity(k);
    fn go(start: usize, n: usize, k: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if cur.len() == k {
            out.push(cur.clone());
            return;
        }
        for i in start..n {
            cur.push(i);
            go(i + 1, n, k, cur, out);
            cur.pop();
        }
    }
    go(0, n, k, &mut cur, &mut out);
    out
}

/// For each ordered range in the rule, the next value past each end, when
/// cells meeting the rest of the rule ran with it (and so passed).
fn boundaries(axes: &[Axis], rule: &Rule, points: &[Point]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, (i, vals)) in rule.iter().enumerate() {
        let axis = &axes[*i];
        let pos = axis.positions(vals);
        if !axis.ordered || pos.windows(2).any(|w| w[1] != w[0] + 1) {
            continue;
        }
        let rest: Rule = rule
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != k)
            .map(|(_, r)| r.clone())
            .collect();
        let seen = |v: &str| {
            points
                .iter()
                .any(|p| axis.value(p) == v && matches(axes, &rest, p))
        };
        let (first, last) = (pos[0], pos[pos.len() - 1]);
        if last + 1 < axis.all.len() && seen(&axis.all[last + 1]) {
            out.push(format!("passes from {}={}", axis.name, axis.all[last + 1]));
        }
        if first > 0 && seen(&axis.all[first - 1]) {
            out.push(format!(
                "passes up to {}={}",
                axis.name,
                axis.all[first - 1]
            ));
        }
    }
    out
}

/// No exact rule: the single value that covers the most failing cells with
/// the fewest passing ones, with its counts; or "no axis pattern".
fn best_single(a: &mut Attribution, axes: &[Axis], points: &[Point]) {
    let mut best: Option<(i64, usize, usize, &Axis, &str)> = None;
    for axis in axes {
        for v in &axis.all {
            let (mut tp, mut fp) = (0usize, 0usize);
            for p in points.iter().filter(|p| axis.value(p) == v) {
                if p.failing {
                    tp += 1;
                } else {
                    fp += 1;
                }
            }
            let score = tp as i64 - fp as i64;
            if best.as_ref().is_none_or(|b| (score, tp) > (b.0, b.1)) {
                best = Some((score, tp, fp, axis, v));
            }
        }
    }
    let (failing, ran) = (a.failing, a.ran);
    let no_pattern = format!(
        "no axis pattern: occurs in {failing} of {ran} cells that ran it, spread over the axis values"
    );
    let Some((score, tp, fp, axis, v)) = best else {
        a.text = no_pattern;
        return;
    };
    if score <= 0 || tp < 2 || tp * 2 < failing {
        a.text = no_pattern;
        return;
    }
    let passing = ran - failing;
    let pred = axis.predicate(&BTreeSet::from([v.to_string()]));
    a.text = format!(
        "no exact rule; best: {tp} of {failing} failing cells have {}; {} other; {fp} of {passing} passing cells have it too",
        pred.text,
        failing - tp
    );
    a.predicates = vec![pred];
}

fn join_predicates(p: &[Predicate]) -> String {
    p.iter()
        .map(|p| p.text.as_str())
        .collect::<Vec<_>>()
        .join(" and ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(rows: &[(&[(&str, &str)], bool)]) -> Vec<(BTreeMap<String, String>, bool)> {
        rows.iter()
            .map(|(vals, f)| {
                (
                    vals.iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    *f,
                )
            })
            .collect()
    }

    fn run(keys: &[&str], data: &[(BTreeMap<String, String>, bool)]) -> Attribution {
        let pts: Vec<Point> = data
            .iter()
            .map(|(v, f)| Point {
                values: v,
                failing: *f,
            })
            .collect();
        let keys: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
        attribute(&keys, &pts)
    }

    /// llvm × gfx × args, failing for args=yn and llvm ≤ 21.
    fn hsa(fails: impl Fn(&str, &str, &str) -> bool) -> Vec<(BTreeMap<String, String>, bool)> {
        let mut rows = Vec::new();
        for llvm in ["15", "17", "21", "22"] {
            for gfx in ["gfx900", "gfx1030"] {
                for args in ["yn", "plain"] {
                    let f = fails(llvm, gfx, args);
                    rows.push(
                        cells(&[(&[("llvm", llvm), ("gfx", gfx), ("args", args)], f)]).remove(0),
                    );
                }
            }
        }
        rows
    }

    #[test]
    fn two_interacting_axes_are_attributed_exactly() {
        let data = hsa(|llvm, _, args| args == "yn" && llvm != "22");
        let a = run(&["llvm", "gfx", "args"], &data);
        assert!(a.exact, "{a:?}");
        let texts: Vec<&str> = a.predicates.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(texts, ["llvm ≤ 21", "args=yn"]);
        assert_eq!(a.boundaries, ["passes from llvm=22"]);
        assert_eq!(
            a.text,
            "occurs exactly when llvm ≤ 21 and args=yn (6 of 16 cells); passes from llvm=22"
        );
    }

    #[test]
    fn a_middle_range_names_both_ends() {
        let data = hsa(|llvm, gfx, _| gfx == "gfx900" && (llvm == "17" || llvm == "21"));
        let a = run(&["llvm", "gfx", "args"], &data);
        assert!(a.exact);
        assert_eq!(a.predicates[0].text, "17 ≤ llvm ≤ 21");
        assert_eq!(
            a.boundaries,
            ["passes from llvm=22", "passes up to llvm=15"]
        );
    }

    #[test]
    fn no_pattern_is_said() {
        // A diagonal: every value of every axis has as many passes as fails.
        let data = hsa(|llvm, gfx, args| {
            let l = ["15", "17", "21", "22"]
                .iter()
                .position(|x| *x == llvm)
                .unwrap();
            (l + usize::from(gfx == "gfx900") + usize::from(args == "yn")) % 2 == 0
        });
        let a = run(&["llvm", "gfx", "args"], &data);
        assert!(!a.exact);
        assert!(a.predicates.is_empty());
        assert!(
            a.text.starts_with("no axis pattern: occurs in 8 of 16"),
            "{}",
            a.text
        );
    }

    #[test]
    fn an_inexact_rule_gives_counts() {
        // Fails on gfx1030 except one cell, and on one gfx900 cell.
        let data = hsa(|llvm, gfx, args| {
            (gfx == "gfx1030" && !(llvm == "15" && args == "yn"))
                || (gfx == "gfx900" && llvm == "17" && args == "yn")
        });
        let a = run(&["llvm", "gfx", "args"], &data);
        assert!(!a.exact);
        assert_eq!(
            a.text,
            "no exact rule; best: 7 of 8 failing cells have gfx=gfx1030; 1 other; 1 of 8 passing cells have it too"
        );
    }

    #[test]
    fn one_cell_says_so() {
        let data = cells(&[(&[("a", "1")], true)]);
        assert!(run(&["a"], &data).text.starts_with("one cell only"));
        let all = cells(&[(&[("a", "1")], true), (&[("a", "2")], true)]);
        assert!(run(&["a"], &all).text.contains("no axis separates"));
    }

    #[test]
    fn versions_order_numerically() {
        assert_eq!(compare_versions("5.7", "6.4"), Ordering::Less);
        assert_eq!(compare_versions("6.10", "6.4"), Ordering::Greater);
        assert_eq!(compare_versions("9", "15"), Ordering::Less);
        assert!(version_parts("gfx900").is_none());
    }
}
