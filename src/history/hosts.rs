//! `history hosts`: each host and each GPU the history has seen over the
//! last runs, with how many cells ran there, how many of them failed, how
//! many test failures it saw and how many tests failed there while flaky —
//! so that a fleet's bad card or a host with a bad driver stands out.

use std::collections::BTreeMap;

use serde::Serialize;

use super::verdict::Obs;
use super::{Followed, History, HistoryError, Scope};
use crate::outcome::CellVerdict;

/// One host or GPU over the last runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// `host` or `gpu`.
    pub kind: &'static str,
    /// The host name, or the GPU's id.
    pub name: String,
    /// What else is known of it: the kernel and driver of a host, the
    /// model, PCI address and host of a GPU (the latest seen).
    pub about: String,
    /// Cells that ran there.
    pub cells: usize,
    /// Of them, cells that failed.
    pub failing_cells: usize,
    /// Test failures seen there (a test failing in 3 runs is 3).
    pub failures: usize,
    /// Tests (in a cell) flaky in the history that failed there.
    pub flaky: usize,
}

/// Every host and GPU of the history's last `last` runs (every matrix),
/// hosts first, each by name.
pub fn tally(h: &mut History, last: usize) -> Result<(Vec<Tally>, usize), HistoryError> {
    let followed = h.follow_in(Scope::Everything)?;
    let from = followed.runs.len().saturating_sub(last.max(1));
    Ok((of(&followed, from), followed.runs.len() - from))
}

/// The tallies of the runs from index `from` on.
fn of(f: &Followed, from: usize) -> Vec<Tally> {
    let mut by: BTreeMap<(&'static str, String), Tally> = BTreeMap::new();
    let mut entry = |kind: &'static str, name: &str, about: String| {
        let t = by.entry((kind, name.to_string())).or_insert_with(|| Tally {
            kind,
            name: name.to_string(),
            ..Tally::default()
        });
        if !about.is_empty() {
            t.about = about;
        }
        (kind, name.to_string())
    };
    let mut keys_of = |host: &crate::store::host::HostFacts| {
        let mut keys = Vec::new();
        if !host.host.is_empty() {
            let about = [host.kernel.as_str(), host.driver.as_str()]
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            keys.push(entry("host", &host.host, about));
        }
        for g in &host.gpus {
            let about = [g.model.as_str(), g.pci.as_str(), host.host.as_str()]
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            keys.push(entry("gpu", &g.id, about));
        }
        keys
    };
    let mut cells: Vec<((&'static str, String), bool)> = Vec::new();
    for ran in f.cells.values() {
        for (_, c) in ran.iter().filter(|(i, _)| *i >= from) {
            for k in keys_of(&c.host) {
                cells.push((k, c.outcome == Some(CellVerdict::Failing)));
            }
        }
    }
    let mut failures: Vec<((&'static str, String), bool)> = Vec::new();
    for t in &f.tests {
        let mut flaky_on: Vec<(&'static str, String)> = Vec::new();
        for p in t.points.iter().filter(|p| p.run >= from) {
            if matches!(p.obs, Obs::Pass | Obs::Absent) {
                continue;
            }
            for k in keys_of(&p.host) {
                if t.verdict.is_flaky() && !flaky_on.contains(&k) {
                    flaky_on.push(k.clone());
                }
                failures.push((k, false));
            }
        }
        for k in flaky_on {
            failures.push((k, true));
        }
    }
    for (k, failed) in cells {
        if let Some(t) = by.get_mut(&k) {
            t.cells += 1;
            t.failing_cells += usize::from(failed);
        }
    }
    for (k, flaky) in failures {
        if let Some(t) = by.get_mut(&k) {
            if flaky {
                t.flaky += 1;
            } else {
                t.failures += 1;
            }
        }
    }
    by.into_values().collect()
}

/// The tallies as text: a line each, then what the counts cover.
pub fn lines(tallies: &[Tally], runs: usize) -> String {
    let mut s = String::new();
    for t in tallies {
        let what = if t.kind == "host" { "host" } else { "GPU" };
        s.push_str(&format!(
            "{what} {}: {} run, {} failing, {}, {} flaky{}\n",
            t.name,
            crate::run::progress::count(t.cells, "cell"),
            t.failing_cells,
            crate::run::progress::count(t.failures, "test failure"),
            t.flaky,
            if t.about.is_empty() {
                String::new()
            } else {
                format!(" ({})", t.about)
            }
        ));
    }
    if tallies.is_empty() {
        s.push_str("no host recorded (runs recorded before rocmatrix recorded hosts)\n");
    }
    s.push_str(&format!(
        "over the last {}; flaky: tests flaky in the history that failed there\n",
        crate::run::progress::count(runs, "run")
    ));
    s
}
