//! Where a flaky test is flaky: the axis values its flaky cells share and
//! no steady cell has (`only where gfx=gfx1151`), and the host facts its
//! failing units share and no steady unit has (`only on host node-b`, `only
//! on GPU …`). A unit is a cell on one host with one set of leased GPUs:
//! a test that failed now and then on node-b and never on node-a, in every
//! cell, is flaky only on node-b. The rule is the same for both
//! ([`super::verdict::where_flaky`]); with every run on one host, the host
//! facts single nothing out.

use std::collections::BTreeMap;

use super::verdict::{where_flaky, Obs};
use super::TestHistory;
use crate::store::host::HostFacts;

/// Where a test is flaky.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    /// Axis values, `gfx=gfx1151`.
    pub axes: Vec<String>,
    /// Host facts, `host=node-b`, `gpu=GPU-…`, `kernel=…`, `driver=…`.
    pub host: Vec<String>,
}

impl Place {
    pub fn is_empty(&self) -> bool {
        self.axes.is_empty() && self.host.is_empty()
    }

    /// `only where gfx=gfx1151`, `only on host node-b`, both joined by
    /// `, `; empty when nothing singles the flaky cells out.
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if !self.axes.is_empty() {
            parts.push(format!("only where {}", self.axes.join(", ")));
        }
        for kv in &self.host {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            parts.push(match k {
                "host" => format!("only on host {v}"),
                "gpu" => format!("only on GPU {v}"),
                "kernel" => format!("only with kernel {v}"),
                "driver" => format!("only with driver {v}"),
                _ => format!("only where {kv}"),
            });
        }
        parts.join(", ")
    }
}

/// Where each flaky test is flaky: per (matrix, test), its [`Place`].
pub fn flaky_places(all: &[TestHistory]) -> BTreeMap<(String, String), Place> {
    flaky_places_of(all)
        .into_iter()
        .map(|((m, t), p)| ((m.to_string(), t.to_string()), p))
        .collect()
}

/// [`flaky_places`], keyed by the tests' own names: only the tests flaky
/// somewhere are gathered (a report's tests are mostly not).
pub fn flaky_places_of(all: &[TestHistory]) -> BTreeMap<(&str, &str), Place> {
    let mut by_test: BTreeMap<(&str, &str), Vec<&TestHistory>> = all
        .iter()
        .filter(|t| t.verdict.is_flaky())
        .map(|t| ((t.matrix.as_str(), t.test.as_str()), Vec::new()))
        .collect();
    if by_test.is_empty() {
        return BTreeMap::new();
    }
    for t in all {
        if let Some(cells) = by_test.get_mut(&(t.matrix.as_str(), t.test.as_str())) {
            cells.push(t);
        }
    }
    by_test
        .into_iter()
        .map(|(k, cells)| (k, place_of(&cells)))
        .collect()
}

/// The place of one test, from every cell that ran it.
fn place_of(cells: &[&TestHistory]) -> Place {
    let (flaky, steady): (Vec<&TestHistory>, Vec<&TestHistory>) =
        cells.iter().partition(|t| t.verdict.is_flaky());
    let f: Vec<_> = flaky.iter().map(|t| &*t.axes).collect();
    let s: Vec<_> = steady.iter().map(|t| &*t.axes).collect();
    let units = units(cells);
    let (failing, clean): (Vec<_>, Vec<_>) = units.iter().partition(|(_, failed)| *failed);
    let failing: Vec<_> = failing.iter().map(|(f, _)| f).collect();
    let clean: Vec<_> = clean.iter().map(|(f, _)| f).collect();
    Place {
        axes: where_flaky(&f, &s),
        host: where_flaky(&failing, &clean),
    }
}

/// Each (cell, host facts) a test ran in, as its host facts and whether it
/// failed there at least once.
fn units(cells: &[&TestHistory]) -> Vec<(BTreeMap<String, String>, bool)> {
    let mut out: Vec<(&TestHistory, &HostFacts, bool)> = Vec::new();
    for t in cells {
        for p in t.points.iter().filter(|p| p.obs != Obs::Absent) {
            let failed = p.obs != Obs::Pass;
            match out
                .iter_mut()
                .find(|(c, h, _)| std::ptr::eq(*c, *t) && **h == *p.host)
            {
                Some(unit) => unit.2 |= failed,
                None => out.push((t, &p.host, failed)),
            }
        }
    }
    out.into_iter()
        .map(|(_, h, failed)| {
            let features = h
                .features()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            (features, failed)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::verdict::{judge, Point};
    use super::*;

    /// A test in cell `gfx`, one run per mark, on the host each run names.
    fn cell(gfx: &str, strip: &str, hosts: &[&str]) -> TestHistory {
        let points: Vec<Point> = strip
            .chars()
            .zip(hosts)
            .enumerate()
            .map(|(run, (m, h))| Point {
                run,
                inputs: "same".into(),
                obs: if m == '✗' { Obs::Fail } else { Obs::Pass },
                host: Arc::new(HostFacts {
                    host: h.to_string(),
                    kernel: "6.1.0-26-amd64".into(),
                    ..HostFacts::default()
                }),
            })
            .collect();
        TestHistory {
            matrix: "m".into(),
            cell: gfx.into(),
            axes: Arc::new(BTreeMap::from([("gfx".to_string(), gfx.to_string())])),
            test: "T.A".into(),
            verdict: judge(&points),
            points,
            signature: String::new(),
            message: String::new(),
        }
    }

    #[test]
    fn a_test_failing_now_and_then_only_on_one_host_in_every_cell_is_flaky_there() {
        let hosts = ["node-a", "node-b", "node-a", "node-b", "node-a", "node-b"];
        let all = [
            cell("gfx1030", "✓✗✓✓✓✗", &hosts),
            cell("gfx1151", "✓✓✓✗✓✗", &hosts),
        ];
        let p = &flaky_places(&all)[&("m".to_string(), "T.A".to_string())];
        assert!(p.axes.is_empty(), "{p:?}");
        assert_eq!(p.host, ["host=node-b"]);
        assert_eq!(p.words(), "only on host node-b");
    }

    #[test]
    fn on_one_host_only_the_axes_place_a_flaky_test() {
        let hosts = ["node-a"; 6];
        let all = [
            cell("gfx1030", "✓✓✓✓✓✓", &hosts),
            cell("gfx1151", "✓✗✓✓✗✓", &hosts),
        ];
        let p = &flaky_places(&all)[&("m".to_string(), "T.A".to_string())];
        assert_eq!(p.axes, ["gfx=gfx1151"]);
        assert!(p.host.is_empty());
        assert_eq!(p.words(), "only where gfx=gfx1151");
    }
}
