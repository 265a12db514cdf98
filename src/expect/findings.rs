//! What the history says a matrix file's `expect:` and `flaky:` lists
//! should become: known failures not expected yet (by test and signature,
//! with the run they started in), flaky tests not listed yet (with their
//! rate and the axis values they are flaky on), and entries whose tests
//! passed in each of the matrix's last N runs.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::history::backend::RunRow;
use crate::history::query::CellRun;
use crate::history::verdict::{where_flaky, HistoryVerdict, Obs};
use crate::history::{flaky_places, record, History, HistoryError, TestHistory};
use crate::matrix_file::{Expectation, Spec};
use crate::outcome::{CellVerdict, TestStatus};
use crate::plan::glob;

/// Which list of the matrix file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    Expect,
    Flaky,
}

impl Section {
    pub fn key(self) -> &'static str {
        match self {
            Section::Expect => "expect",
            Section::Flaky => "flaky",
        }
    }
}

/// An entry to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntry {
    /// YAML comment lines (without `# `): what the history says.
    pub comments: Vec<String>,
    pub cells: BTreeMap<String, String>,
    pub tests: Vec<String>,
    pub reason: String,
}

/// An entry (or some of its tests) to drop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drop {
    pub section: Section,
    /// The entry's place in its section.
    pub index: usize,
    /// The places in its `tests:` of the patterns to drop; every one (or,
    /// for a whole-cell entry, none) drops the entry.
    pub tests: Vec<usize>,
    pub whole: bool,
    /// What goes, in words: `expect[1] (Suite.Old)`.
    pub what: String,
    /// Why, in words.
    pub why: String,
}

/// Everything proposed.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    pub expect: Vec<NewEntry>,
    pub flaky: Vec<NewEntry>,
    pub drops: Vec<Drop>,
    /// Recorded runs of the matrix.
    pub runs: usize,
}

impl Findings {
    pub fn is_empty(&self) -> bool {
        self.expect.is_empty() && self.flaky.is_empty() && self.drops.is_empty()
    }
}

/// Whether `e` covers `test` in the cell with `axes` (globs as the results
/// apply them: `name`, `classname.name` or `classname::name`).
pub fn covers(e: &Expectation, axes: &BTreeMap<String, String>, test: &str) -> bool {
    cells_match(e, axes) && (e.is_whole_cell() || e.tests.iter().any(|p| test_matches(p, test)))
}

fn cells_match(e: &Expectation, axes: &BTreeMap<String, String>) -> bool {
    e.cells
        .iter()
        .all(|(k, pat)| axes.get(k).is_some_and(|v| glob::matches(pat, v)))
}

/// Whether pattern `p` names `test` (`classname.name`).
pub fn test_matches(p: &str, test: &str) -> bool {
    if !p.contains(['*', '?']) {
        // No glob: a comparison of each name (no allocation).
        return p == test
            || test.rsplit_once('.').is_some_and(|(class, name)| {
                p == name
                    || p.strip_prefix(class)
                        .and_then(|r| r.strip_prefix("::"))
                        .is_some_and(|r| r == name)
            });
    }
    if glob::matches(p, test) {
        return true;
    }
    match test.rsplit_once('.') {
        Some((class, name)) => {
            glob::matches(p, name) || glob::matches(p, &format!("{class}::{name}"))
        }
        None => false,
    }
}

/// Reads the history of `spec`'s matrix and finds what to change;
/// `drop_after`: the runs an entry's tests must have passed in.
pub fn find(
    spec: &Spec,
    history: &mut History,
    drop_after: usize,
) -> Result<Findings, HistoryError> {
    let runs = history.runs()?;
    let mine: Vec<usize> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.name == spec.name)
        .map(|(i, _)| i)
        .collect();
    let current = current_cells(spec);
    let is_current =
        |axes: &BTreeMap<String, String>| current.as_ref().is_none_or(|c| c.contains(axes));
    let all: Vec<TestHistory> = history
        .follow(None)?
        .into_iter()
        .filter(|t| t.matrix == spec.name && is_current(&t.axes))
        .collect();
    let mut findings = Findings {
        runs: mine.len(),
        ..Findings::default()
    };
    let cells = history.cells_of(&spec.name)?;
    let recorded: BTreeMap<&str, &BTreeMap<String, String>> = cells
        .iter()
        .filter(|c| is_current(&c.cell.axes))
        .map(|c| (c.cell.cell.as_str(), &*c.cell.axes))
        .collect();
    // Failures the latest run called expected that no rule of the file
    // covers: pytest's xfail, a `classify:` rule. Not proposed.
    let latest: Vec<String> = mine
        .last()
        .map(|i| runs[*i].run.clone())
        .into_iter()
        .collect();
    let xfail: HashSet<(String, String)> = history
        .rows_of_runs(&latest)?
        .into_iter()
        .filter(|t| t.outcome == Some(TestStatus::Xfail))
        .map(|t| (t.cell, t.test))
        .collect();
    findings.expect = known_failures(spec, &runs, &all, &recorded, &xfail);
    findings
        .expect
        .extend(failing_cells(spec, &runs, &cells, &all, &is_current));
    findings.flaky = flaky_tests(spec, &all);
    if drop_after > 0 && mine.len() >= drop_after {
        let window: BTreeSet<usize> = mine[mine.len() - drop_after..].iter().copied().collect();
        findings.drops = drops(spec, &all, &cells, &window);
    }
    Ok(findings)
}

/// Cells that failed in every run since some run with no failing test to
/// name in their latest (a build step failed, say), not expected yet:
/// whole-cell entries.
fn failing_cells(
    spec: &Spec,
    runs: &[RunRow],
    cells: &[CellRun],
    all: &[TestHistory],
    is_current: &dyn Fn(&BTreeMap<String, String>) -> bool,
) -> Vec<NewEntry> {
    let mut by_cell: BTreeMap<&str, Vec<&CellRun>> = BTreeMap::new();
    for c in cells.iter().filter(|c| is_current(&c.cell.axes)) {
        by_cell.entry(c.cell.cell.as_str()).or_default().push(c);
    }
    let (mut failing, mut others) = (Vec::new(), Vec::new());
    for (id, seq) in &by_cell {
        // Outcomes that judge the cell: skips, cells that failed only in
        // classified tests (not judged here) and words this rocmatrix does
        // not know do not.
        let judged: Vec<&&CellRun> = seq
            .iter()
            .filter(|c| {
                !matches!(
                    c.cell.outcome,
                    None | Some(CellVerdict::Skipped | CellVerdict::Classified)
                )
            })
            .collect();
        let Some(last) = judged.last() else {
            continue;
        };
        let fails = |c: &CellRun| c.cell.outcome != Some(CellVerdict::Passed);
        let named = all.iter().any(|t| {
            t.cell == *id
                && t.points
                    .iter()
                    .any(|p| p.run == last.run && p.obs == Obs::Fail)
        });
        let axes: &BTreeMap<String, String> = &last.cell.axes;
        let covered = spec
            .expect
            .iter()
            .any(|e| e.is_whole_cell() && cells_match(e, axes));
        if !fails(last) || named || covered {
            others.push(axes);
            continue;
        }
        let start = judged.iter().rposition(|c| !fails(c)).map_or(0, |i| i + 1);
        failing.push((axes, (judged[start].run, start > 0, *id)));
    }
    if failing.is_empty() {
        return Vec::new();
    }
    let these: Vec<&BTreeMap<String, String>> = failing.iter().map(|(a, _)| *a).collect();
    let rest: Vec<&BTreeMap<String, String>> = others;
    let comments: Vec<String> = failing
        .iter()
        .map(|&(_, (since, regression, id))| {
            format!(
                "{id}: {} {} with no failing test to name (a step failed)",
                if regression {
                    "failing since"
                } else {
                    "failing in every run since"
                },
                at(runs, since)
            )
        })
        .collect();
    let reason = "known failure of the whole cell (a step failed)".to_string();
    match placed(&these, &rest) {
        Some(cells) => vec![NewEntry {
            comments,
            cells,
            tests: Vec::new(),
            reason,
        }],
        None => these
            .iter()
            .zip(comments)
            .map(|(a, c)| NewEntry {
                comments: vec![c],
                cells: (*a).clone(),
                tests: Vec::new(),
                reason: reason.clone(),
            })
            .collect(),
    }
}

/// The current matrix's cells as axis values; `None` when it cannot be
/// expanded (then every recorded cell counts).
fn current_cells(spec: &Spec) -> Option<HashSet<BTreeMap<String, String>>> {
    let combos = crate::matrix_file::expand(spec, crate::matrix_file::DEFAULT_MAX_CELLS).ok()?;
    Some(
        combos
            .into_iter()
            .map(|c| c.values.into_iter().collect())
            .collect(),
    )
}

/// A failing run's words: `RUN (DATE)`.
fn at(runs: &[RunRow], i: usize) -> String {
    runs.get(i)
        .map(|r| format!("{} ({})", r.run, record::time_of(r.started_ms)))
        .unwrap_or_default()
}

/// The run a steady failure started in, and whether it is a regression.
fn steady(v: &HistoryVerdict) -> Option<(usize, bool)> {
    match v {
        HistoryVerdict::KnownSince { since } => Some((*since, false)),
        HistoryVerdict::Regression { since } => Some((*since, true)),
        _ => None,
    }
}

/// Tests failing in every run since some run, not expected yet: one entry
/// per (cells, signature), with the run each started in as a comment. An
/// entry's cells single out the failing ones among every cell the matrix
/// still has (`current`): never wider than where it fails, and no query per
/// test (a nightly of thousands of known failures asks nothing more).
/// One piece: the grouping by test, then by signature and cells, shares
/// the maps it builds once.
fn known_failures(
    spec: &Spec,
    runs: &[RunRow],
    all: &[TestHistory],
    current: &BTreeMap<&str, &BTreeMap<String, String>>,
    xfail: &HashSet<(String, String)>,
) -> Vec<NewEntry> {
    let mut by_test: BTreeMap<&str, Vec<&TestHistory>> = BTreeMap::new();
    for t in all {
        if steady(&t.verdict).is_some()
            && !spec.expect.iter().any(|e| covers(e, &t.axes, &t.test))
            && !xfail.contains(&(t.cell.clone(), t.test.clone()))
        {
            by_test.entry(t.test.as_str()).or_default().push(t);
        }
    }
    // (cells, signature) → the entry.
    let mut entries: BTreeMap<(Vec<(String, String)>, String), NewEntry> = BTreeMap::new();
    for (test, failing) in by_test {
        let failing_cells: BTreeSet<&str> = failing.iter().map(|t| t.cell.as_str()).collect();
        let others: Vec<&BTreeMap<String, String>> = current
            .iter()
            .filter(|(id, _)| !failing_cells.contains(*id))
            .map(|(_, axes)| *axes)
            .collect();
        let places = placed(
            &failing.iter().map(|t| &*t.axes).collect::<Vec<_>>(),
            &others,
        );
        let first = failing
            .iter()
            .filter_map(|t| steady(&t.verdict).map(|(s, reg)| (s, reg, *t)))
            .min_by_key(|(s, _, _)| *s);
        let Some((since, regression, t)) = first else {
            continue;
        };
        let mut comment = format!(
            "{test}: {} {}",
            if regression {
                "failing since"
            } else {
                "known failure since"
            },
            at(runs, since)
        );
        if places.is_none() && failing.len() == 1 {
            comment.push_str(&format!(" in {}", t.cell));
        }
        if !t.signature.is_empty() {
            comment.push_str(&format!(
                "; signature {}",
                crate::digest::short(&t.signature)
            ));
        }
        if !t.message.is_empty() {
            comment.push_str(&format!(": {}", clip(&t.message, 100)));
        }
        let reason = if t.message.is_empty() {
            "known failure".to_string()
        } else {
            format!("known failure: {}", clip(&t.message, 100))
        };
        let groups: Vec<BTreeMap<String, String>> = match places {
            Some(cells) => vec![cells],
            None => failing.iter().map(|t| (*t.axes).clone()).collect(),
        };
        for cells in groups {
            let key = (
                cells.clone().into_iter().collect::<Vec<_>>(),
                t.signature.clone(),
            );
            let e = entries.entry(key).or_insert_with(|| NewEntry {
                comments: Vec::new(),
                cells,
                tests: Vec::new(),
                reason: reason.clone(),
            });
            if !e.tests.iter().any(|x| x == test) {
                e.tests.push(test.to_string());
                e.comments.push(comment.clone());
            }
        }
    }
    entries
        .into_iter()
        .map(|((_, signature), mut e)| {
            // One reason for many tests: their signature, not one message.
            if e.tests.len() > 1 && !signature.is_empty() {
                e.reason = format!(
                    "{} known failures of signature {}",
                    e.tests.len(),
                    crate::digest::short(&signature)
                );
            }
            e
        })
        .collect()
}

/// The cells of an entry that singles out `these` among `these` and
/// `others`: every cell (`{}`) when there are no others, the axis values
/// only these share, or `None` when no value does (one entry a cell then).
fn placed(
    these: &[&BTreeMap<String, String>],
    others: &[&BTreeMap<String, String>],
) -> Option<BTreeMap<String, String>> {
    if others.is_empty() {
        return Some(BTreeMap::new());
    }
    let values = where_flaky(these, others);
    if values.is_empty() {
        return None;
    }
    Some(
        values
            .iter()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// Flaky tests not listed yet, with their rate and where they are flaky.
fn flaky_tests(spec: &Spec, all: &[TestHistory]) -> Vec<NewEntry> {
    let places = flaky_places(all);
    let mut by_test: BTreeMap<&str, (Vec<&TestHistory>, Vec<&TestHistory>)> = BTreeMap::new();
    for t in all {
        let e = by_test.entry(t.test.as_str()).or_default();
        if t.verdict.is_flaky() {
            e.0.push(t);
        } else {
            e.1.push(t);
        }
    }
    let mut out = Vec::new();
    for (test, (flaky, steady)) in by_test {
        let open: Vec<&&TestHistory> = flaky
            .iter()
            .filter(|t| !spec.expect.iter().any(|e| covers(e, &t.axes, test)))
            .collect();
        if open.is_empty() {
            continue;
        }
        let (mut failures, mut ran, mut why) = (0, 0, "");
        for t in &open {
            if let HistoryVerdict::Flaky {
                failures: f,
                runs: r,
                why: w,
            } = t.verdict
            {
                failures += f;
                ran += r;
                why = w;
            }
        }
        let found = places
            .get(&(spec.name.clone(), test.to_string()))
            .filter(|p| !p.axes.is_empty());
        let cells: Vec<BTreeMap<String, String>> = match found {
            Some(p) => vec![p
                .axes
                .iter()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()],
            None if steady.is_empty() => vec![BTreeMap::new()],
            None => open.iter().map(|t| (*t.axes).clone()).collect(),
        };
        let place = match (found, &open[..]) {
            (Some(p), _) => format!(", {}", p.words()),
            (None, [one]) if !steady.is_empty() => format!(" in {}", one.cell),
            _ => String::new(),
        };
        let rate = format!("{failures} of {ran} runs failed");
        for cells in cells {
            out.push(NewEntry {
                comments: vec![format!("{test}: flaky, {rate} ({why}){place}")],
                cells,
                tests: vec![test.to_string()],
                reason: format!("flaky: {rate}{place}"),
            });
        }
    }
    out
}

/// Entries (or tests of them) that passed in every run of `window`.
fn drops(
    spec: &Spec,
    all: &[TestHistory],
    cells: &[CellRun],
    window: &BTreeSet<usize>,
) -> Vec<Drop> {
    let n = window.len();
    let mut out = Vec::new();
    let mut index = BTreeMap::<Section, usize>::new();
    for e in &spec.expect {
        let section = if e.flaky {
            Section::Flaky
        } else {
            Section::Expect
        };
        let i = {
            let c = index.entry(section).or_default();
            *c += 1;
            *c - 1
        };
        let covered: Vec<&CellRun> = cells
            .iter()
            .filter(|c| window.contains(&c.run) && cells_match(e, &c.cell.axes))
            .collect();
        // Every run of the window ran a cell it covers, or it is not judged.
        if window.iter().any(|r| !covered.iter().any(|c| c.run == *r)) {
            continue;
        }
        if e.is_whole_cell() {
            if covered
                .iter()
                .all(|c| c.cell.outcome == Some(CellVerdict::Passed))
            {
                out.push(Drop {
                    section,
                    index: i,
                    tests: Vec::new(),
                    whole: true,
                    what: format!("{}[{i}] (whole cells: {})", section.key(), e.reason),
                    why: format!("its cells passed in each of the last {n} runs"),
                });
            }
            continue;
        }
        let mut dropped = Vec::new();
        let mut passed_all = true;
        let in_cells: Vec<&TestHistory> = all.iter().filter(|t| cells_match(e, &t.axes)).collect();
        for (k, p) in e.tests.iter().enumerate() {
            let points = in_cells
                .iter()
                .filter(|t| test_matches(p, &t.test))
                .flat_map(|t| t.points.iter().filter(|pt| window.contains(&pt.run)));
            let (mut failed, mut passed) = (false, false);
            for pt in points {
                match pt.obs {
                    Obs::Fail | Obs::Rerun => failed = true,
                    Obs::Pass => passed = true,
                    Obs::Absent => {}
                }
            }
            if !failed {
                dropped.push(k);
                passed_all &= passed;
            }
        }
        if dropped.is_empty() {
            continue;
        }
        let names: Vec<&str> = dropped.iter().map(|k| e.tests[*k].as_str()).collect();
        out.push(Drop {
            section,
            index: i,
            whole: dropped.len() == e.tests.len(),
            what: format!("{}[{i}] ({})", section.key(), names.join(", ")),
            why: if passed_all {
                format!("passed in each of the last {n} runs")
            } else {
                format!("did not fail in any of the last {n} runs")
            },
            tests: dropped,
        });
    }
    out
}

/// `text` cut to `n` characters, with `…` when cut.
fn clip(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_string();
    }
    let mut s: String = text.chars().take(n).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(cells: &[(&str, &str)], tests: &[&str]) -> Expectation {
        Expectation {
            cells: cells
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            tests: tests.iter().map(|t| t.to_string()).collect(),
            reason: "r".into(),
            flaky: false,
        }
    }

    #[test]
    fn rules_cover_tests_by_any_of_their_names_and_cells_by_glob() {
        let axes = BTreeMap::from([("gfx".to_string(), "gfx1151".to_string())]);
        assert!(covers(
            &rule(&[("gfx", "gfx11*")], &["Suite.A"]),
            &axes,
            "Suite.A"
        ));
        assert!(covers(&rule(&[], &["A"]), &axes, "Suite.A"));
        assert!(covers(&rule(&[], &["Suite::A"]), &axes, "Suite.A"));
        assert!(covers(&rule(&[], &["Su*::A"]), &axes, "Suite.A"));
        assert!(!covers(&rule(&[], &["Suite::B"]), &axes, "Suite.A"));
        assert!(!covers(&rule(&[], &["Suit::A"]), &axes, "Suite.A"));
        assert!(covers(&rule(&[], &["a.b.C"]), &axes, "a.b.C"));
        assert!(covers(&rule(&[], &["a.b::C"]), &axes, "a.b.C"));
        assert!(covers(&rule(&[("gfx", "gfx1151")], &[]), &axes, "Suite.B"));
        assert!(!covers(
            &rule(&[("gfx", "gfx1030")], &["*"]),
            &axes,
            "Suite.A"
        ));
        assert!(!covers(&rule(&[], &["Suite.B"]), &axes, "Suite.A"));
    }

    #[test]
    fn a_cell_failing_with_no_test_to_name_gets_a_whole_cell_entry() {
        let spec = Spec::parse(
            std::path::Path::new("m.yaml"),
            "name: m\nmatrix:\n  gfx: [gfx1030, gfx1100]\nsteps:\n  - name: t\n    run: \"true\"\n",
        )
        .unwrap();
        let runs: Vec<RunRow> = (0..3)
            .map(|i| RunRow {
                run: format!("run-{i}"),
                started_ms: 1_000 * i,
                name: "m".into(),
                sources: BTreeMap::new(),
                environments: Vec::new(),
            })
            .collect();
        let cell = |run: usize, gfx: &str, outcome: &str| CellRun {
            run,
            cell: crate::history::backend::StoredCell {
                run: format!("run-{run}"),
                cell: gfx.into(),
                axes: BTreeMap::from([("gfx".to_string(), gfx.to_string())]).into(),
                outcome: CellVerdict::of_word(outcome),
                inputs: "".into(),
                passed: String::new(),
                host: Default::default(),
            },
        };
        let mut cells = Vec::new();
        for run in 0..3 {
            cells.push(cell(run, "gfx1030", "passed"));
            let broken = if run == 0 { "passed" } else { "failed" };
            cells.push(cell(run, "gfx1100", broken));
        }
        let found = failing_cells(&spec, &runs, &cells, &[], &|_| true);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].cells,
            BTreeMap::from([("gfx".to_string(), "gfx1100".to_string())])
        );
        assert!(found[0].tests.is_empty());
        assert!(
            found[0].comments[0].starts_with("gfx1100: failing since run-1 ("),
            "{found:?}"
        );
        // An infrastructure error in the latest run judges nothing.
        cells.push(cell(3, "gfx1100", "error"));
        assert_eq!(failing_cells(&spec, &runs, &cells, &[], &|_| true).len(), 1);
    }

    #[test]
    fn an_entry_singles_out_its_cells_by_the_values_only_they_share() {
        let cell = |g: &str, s: &str| {
            BTreeMap::from([
                ("gfx".to_string(), g.to_string()),
                ("suite".to_string(), s.to_string()),
            ])
        };
        let (a, b, c) = (
            cell("gfx1151", "sid"),
            cell("gfx1151", "trixie"),
            cell("gfx1030", "sid"),
        );
        assert_eq!(placed(&[&a, &b], &[]), Some(BTreeMap::new()));
        assert_eq!(
            placed(&[&a, &b], &[&c]),
            Some(BTreeMap::from([("gfx".to_string(), "gfx1151".to_string())]))
        );
        let d = cell("gfx1030", "trixie");
        assert_eq!(placed(&[&a, &d], &[&b, &c]), None);
    }
}
