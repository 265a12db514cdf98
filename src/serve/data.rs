//! Each page's data, asked of the history per request and given back as a
//! JSON value: what `/api/…` answers and what the page's template renders.
//! Every list is bounded: a page reads the last `n` runs (clamped by
//! `super::route`), their cells and their non-passing rows — never a whole
//! history — but for the pages whose CLI commands read every run (the
//! flaky tests and the hosts, as `history flaky` and `history hosts` do).
//!
//! The words are the history's own: a failing test of a matrix's last run
//! reads as its report reads it (`history::past::read_recorded`), a test's
//! verdict as `history show` says it (`history::describe`), where a flaky
//! test is flaky as `history flaky` says it (`history::flaky_places`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::{json, Value};

use super::route::{encode, Page, MAX_ROWS};
use crate::history::backend::{RunRow, StoredCell, StoredTest};
use crate::history::past::Kind;
use crate::history::verdict::HistoryVerdict;
use crate::history::{self, record, History, HistoryError};
use crate::outcome::{CellVerdict, TestStatus};

/// Why a page has no data: the history could not be read (503), or what
/// it asks for is not there (404).
#[derive(Debug)]
pub enum Problem {
    History(HistoryError),
    NotFound(String),
}

impl From<HistoryError> for Problem {
    fn from(e: HistoryError) -> Problem {
        Problem::History(e)
    }
}

/// Where the data comes from.
pub struct Source<'a> {
    pub history: &'a mut History,
    /// `<out>/runs/`: the run stores.
    pub runs: &'a Path,
    /// `--out`, as the commands to reproduce a test name it.
    pub out: &'a Path,
}

/// The data of `page` over the last `n` runs.
pub fn of(src: &mut Source<'_>, page: &Page, n: usize) -> Result<Value, Problem> {
    let mut v = match page {
        Page::Matrices => matrices(src.history, n)?,
        Page::Matrix { name } => matrix(src, name, n)?,
        Page::Test { name, matrix } => test(src, name, matrix)?,
        Page::Flaky => flaky(src.history)?,
        Page::Runs { matrix } => runs(src, matrix, n)?,
        Page::Hosts => hosts(src.history, n)?,
    };
    v["history"] = json!(src.history.location().to_string());
    v["n"] = json!(n);
    Ok(v)
}

/// A run's verdict from its cells: `failed` when one failed, `passed`
/// when every one passed or was expected to fail, else the words of the
/// worst.
fn run_verdict<'a>(cells: impl Iterator<Item = &'a StoredCell>) -> &'static str {
    let mut word = "passed";
    for c in cells {
        match c.outcome {
            Some(CellVerdict::Failing) => return "failed",
            None => word = "unknown",
            _ => {}
        }
    }
    word
}

/// A cell's outcome as a mark and its CSS class (the report's marks).
fn cell_mark(c: &StoredCell) -> (char, &'static str, &'static str) {
    match c.outcome {
        Some(CellVerdict::Passed) => ('✓', "pass", "passed"),
        Some(CellVerdict::ExpectedFailure) => ('☑', "xfail", "expected failure"),
        Some(v @ (CellVerdict::Skipped | CellVerdict::Classified)) => ('·', "skip", v.word()),
        Some(CellVerdict::Failing) => ('✗', "fail", "failed"),
        None => ('!', "error", "an outcome this rocmatrix does not know"),
    }
}

/// The CSS class of a test's mark.
fn obs_css(c: char) -> &'static str {
    match c {
        '✓' => "pass",
        '✗' => "fail",
        '~' => "flaky",
        _ => "skip",
    }
}

/// Links of a matrix, a test, the runs.
pub fn matrix_link(name: &str) -> String {
    format!("/matrix?name={}", encode(name))
}

pub fn test_link(name: &str, matrix: &str) -> String {
    format!("/test?name={}&matrix={}", encode(name), encode(matrix))
}

/// The last `n` of `runs` (by start time), with their ids.
fn last(mut runs: Vec<RunRow>, n: usize) -> (Vec<RunRow>, Vec<String>) {
    let cut = runs.len().saturating_sub(n);
    runs.drain(..cut);
    let ids = runs.iter().map(|r| r.run.clone()).collect();
    (runs, ids)
}

/// Per run id, its cells.
fn by_run(cells: Vec<StoredCell>) -> HashMap<String, Vec<StoredCell>> {
    let mut out: HashMap<String, Vec<StoredCell>> = HashMap::new();
    for c in cells {
        out.entry(c.run.clone()).or_default().push(c);
    }
    out
}

/// Per run id, its non-passing tests counted: failed, flaky (passed on a
/// rerun), expected failures, skipped.
fn counts(rows: Vec<StoredTest>) -> HashMap<String, [usize; 4]> {
    let mut out: HashMap<String, [usize; 4]> = HashMap::new();
    for t in rows {
        let slot = match t.outcome {
            Some(TestStatus::Failed | TestStatus::Error) => 0,
            Some(TestStatus::Flaky) => 1,
            Some(TestStatus::Xfail) => 2,
            Some(TestStatus::Skipped) => 3,
            _ => continue,
        };
        out.entry(t.run).or_default()[slot] += 1;
    }
    out
}

/// The matrices, each with its last run's verdict and the failing cells
/// of its last `n` runs.
fn matrices(h: &mut History, n: usize) -> Result<Value, Problem> {
    let all = h.runs()?;
    let mut of: BTreeMap<String, Vec<RunRow>> = BTreeMap::new();
    for r in all {
        of.entry(r.name.clone()).or_default().push(r);
    }
    let mut windows = Vec::new();
    let mut ids = Vec::new();
    for (name, runs) in of {
        let total = runs.len();
        let (runs, mut some) = last(runs, n);
        ids.append(&mut some);
        windows.push((name, total, runs));
    }
    let cells = by_run(h.cells_of_runs(&ids)?);
    let mut out = Vec::new();
    for (name, total, runs) in windows {
        let trend: Vec<Value> = runs
            .iter()
            .map(|r| {
                let cs = cells.get(&r.run).map(Vec::as_slice).unwrap_or_default();
                let failing = cs
                    .iter()
                    .filter(|c| c.outcome == Some(CellVerdict::Failing))
                    .count();
                json!({"run": r.run, "cells": cs.len(), "failing": failing,
                       "verdict": run_verdict(cs.iter())})
            })
            .collect();
        let latest = runs.last();
        out.push(json!({
            "name": name, "link": matrix_link(&name), "runs": total,
            "last_run": latest.map(|r| r.run.clone()),
            "last_date": latest.map(|r| record::time_of(r.started_ms)),
            "verdict": trend.last().map(|t| t["verdict"].clone()),
            "trend_svg": super::svg::sparkline(&trend),
            "trend": trend,
        }));
    }
    Ok(json!({"page": "matrices", "matrices": out}))
}

/// One matrix: its last run as the report's grid, each cell with its strip
/// of the last `n` runs; the counts per run; the failing tests of its last
/// run with the history's words.
fn matrix(src: &mut Source<'_>, name: &str, n: usize) -> Result<Value, Problem> {
    let all: Vec<RunRow> = src
        .history
        .runs()?
        .into_iter()
        .filter(|r| r.name == name)
        .collect();
    let total = all.len();
    let (runs, ids) = last(all, n);
    let Some(latest) = runs.last().cloned() else {
        return Err(Problem::NotFound(format!(
            "no run of a matrix named `{name}` is recorded"
        )));
    };
    let cells = by_run(src.history.cells_of_runs(&ids)?);
    let rows = src.history.rows_of_runs(&ids)?;
    // Each failing test's signature in the last run, for its triage line.
    let signature_of: HashMap<(String, String), String> = rows
        .iter()
        .filter(|t| t.run == latest.run && !t.signature.is_empty())
        .map(|t| ((t.cell.clone(), t.test.clone()), t.signature.clone()))
        .collect();
    let counted = counts(rows);
    let triages = triages_of(src.runs, &runs);
    let passed = passed_of(src.history, &runs, &cells)?;
    let per_run: Vec<Value> = runs
        .iter()
        .map(|r| {
            let cs = cells.get(&r.run).map(Vec::as_slice).unwrap_or_default();
            let [failed, flaky, xfail, skipped] =
                counted.get(&r.run).copied().unwrap_or_default();
            json!({"run": r.run, "date": record::time_of(r.started_ms),
                   "verdict": run_verdict(cs.iter()), "cells": cs.len(),
                   "failing_cells": cs.iter().filter(|c| c.outcome == Some(CellVerdict::Failing)).count(),
                   "passed": passed.get(&r.run).copied().unwrap_or(0),
                   "failed": failed, "flaky": flaky, "xfail": xfail, "skipped": skipped})
        })
        .collect();
    let grid = super::pages::grid_of(src.runs, &latest, &runs, &cells);
    let past = history::past::read_recorded(src.history, &latest.run, name)?;
    let failing: Vec<Value> = past
        .tests
        .iter()
        .take(MAX_ROWS)
        .map(|((cell, test), p)| {
            let triage = signature_of
                .get(&(cell.clone(), test.clone()))
                .filter(|_| matches!(p.kind, Kind::New | Kind::FailingSince))
                .and_then(|sig| triages.iter().find_map(|t| t.line_of(sig)));
            json!({"cell": cell, "test": test, "kind": p.kind.word(), "words": p.words,
                   "changed": p.changed, "strip": marks_of(&p.strip),
                   "triage": triage, "link": test_link(test, name)})
        })
        .collect();
    let store = super::files::store_of(src.runs, &latest.run);
    Ok(json!({
        "page": "matrix", "name": name, "runs": total, "shown": runs.len(),
        "runs_link": format!("/runs?matrix={}", encode(name)),
        "last_run": latest.run, "last_date": record::time_of(latest.started_ms),
        "verdict": per_run.last().map(|r| r["verdict"].clone()),
        "report": store.and_then(|s| super::files::report_of(src.runs, &s)).map(|p| format!("/store/{p}")),
        "grid": grid,
        "plot_svg": super::svg::counts_plot(&per_run),
        "per_run": per_run,
        "failing": failing,
        "failing_total": past.tests.len(),
    }))
}

/// Per run, how many tests passed in its cells (each passing set's size,
/// read once per set).
fn passed_of(
    h: &mut History,
    runs: &[RunRow],
    cells: &HashMap<String, Vec<StoredCell>>,
) -> Result<HashMap<String, usize>, HistoryError> {
    let mut size: HashMap<&str, usize> = HashMap::new();
    let mut out = HashMap::new();
    for r in runs {
        let mut sum = 0;
        for c in cells.get(&r.run).into_iter().flatten() {
            if !size.contains_key(c.passed.as_str()) {
                size.insert(&c.passed, h.passed_count(&c.passed)?);
            }
            sum += size[c.passed.as_str()];
        }
        out.insert(r.run.clone(), sum);
    }
    Ok(out)
}

/// The triages made in the run stores of `runs` (`run --triage`,
/// `triage`), newest first: where a regression's range is found.
fn triages_of(stores: &Path, runs: &[RunRow]) -> Vec<crate::triage::store::Triage> {
    runs.iter()
        .rev()
        .filter_map(|r| super::files::store_of(stores, &r.run))
        .filter_map(|s| crate::triage::store::load(&stores.join(s)).ok().flatten())
        .collect()
}

/// A strip of marks as (mark, css) pairs.
fn marks_of(strip: &str) -> Vec<Value> {
    strip
        .chars()
        .map(|m| json!({"mark": m.to_string(), "css": obs_css(m)}))
        .collect()
}

/// Per cell, its mark in each of `runs` it ran in.
pub fn cell_strips(
    runs: &[RunRow],
    cells: &HashMap<String, Vec<StoredCell>>,
) -> HashMap<String, Vec<Value>> {
    let mut out: HashMap<String, Vec<Value>> = HashMap::new();
    for r in runs {
        for c in cells.get(&r.run).into_iter().flatten() {
            let (mark, css, word) = cell_mark(c);
            out.entry(c.cell.clone()).or_default().push(json!({
                "mark": mark.to_string(), "css": css,
                "title": format!("{} ({}): {word}", r.run, record::time_of(r.started_ms)),
            }));
        }
    }
    out
}

/// The cell's verdict as (word, css).
pub fn cell_word(c: &StoredCell) -> (&'static str, &'static str) {
    let (_, css, word) = cell_mark(c);
    (word, css)
}

/// One test in every cell that ran it, as `history show` follows it, with
/// its words, signatures, where it is flaky and how to reproduce it.
fn test(src: &mut Source<'_>, name: &str, matrix: &str) -> Result<Value, Problem> {
    if name.is_empty() {
        return Err(Problem::NotFound(
            "which test? (/test?name=classname.name)".into(),
        ));
    }
    // `history show`'s reading (`History::follow` of the test), with the
    // runs its indices refer to read in the same call.
    let followed = src.history.follow_in(history::Scope::Test(name))?;
    let runs = followed.runs;
    let found: Vec<_> = followed
        .tests
        .into_iter()
        .filter(|t| matrix.is_empty() || t.matrix == matrix)
        .collect();
    if found.is_empty() {
        return Err(Problem::NotFound(format!(
            "{name}: no failure of it is recorded (the history keeps passing tests by hash, \
             so a test that never failed is not found by name)"
        )));
    }
    let latest = runs.len().saturating_sub(1);
    let places = history::flaky_places(&found);
    let out_dir = src.out.display().to_string();
    let cells: Vec<Value> = found
        .iter()
        .map(|t| {
            let strip: Vec<Value> = t
                .points
                .iter()
                .map(|p| {
                    let r = &runs[p.run];
                    json!({"mark": p.obs.mark().to_string(), "css": obs_css(p.obs.mark()),
                           "run": r.run, "outcome": p.obs.word(),
                           "title": format!("{}: {}", history::run_and_date(r), p.obs.word())})
                })
                .collect();
            let since = match t.verdict {
                HistoryVerdict::Regression { since } | HistoryVerdict::KnownSince { since } => {
                    runs.get(since).map(history::run_and_date)
                }
                _ => None,
            };
            let failed_in = t
                .points
                .iter()
                .rev()
                .find(|p| p.obs.mark() != '✓' && p.obs.mark() != '·')
                .map(|p| runs[p.run].run.clone());
            let store = failed_in.and_then(|r| super::files::store_of(src.runs, &r));
            let repro = store.map(|s| {
                let (s, c, o) = (quote(&s), quote(&t.cell), quote(&out_dir));
                vec![
                    format!("rocmatrix repro {s} {c} --out {o}"),
                    format!("rocmatrix shell {s} {c} --out {o}"),
                ]
            });
            json!({"matrix": t.matrix, "cell": t.cell, "axes": &*t.axes,
                   "verdict": history::describe(t, &runs, latest), "since": since,
                   "flaky": t.verdict.is_flaky(), "strip": strip,
                   "signature": t.signature, "message": t.message,
                   "repro": repro.unwrap_or_default()})
        })
        .collect();
    let flaky_where: Vec<Value> = places
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|((m, _), p)| json!({"matrix": m, "axes": p.axes, "host": p.host, "words": p.words()}))
        .collect();
    Ok(
        json!({"page": "test", "name": name, "matrix": matrix, "cells": cells,
              "flaky_where": flaky_where}),
    )
}

/// `s` quoted for a POSIX shell when it needs it.
fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./+=:@".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The flaky tests, by rate (failures of runs), with where they are flaky:
/// `history flaky`'s list.
fn flaky(h: &mut History) -> Result<Value, Problem> {
    let all = h.follow(None)?;
    let places = history::flaky_places(&all);
    let mut rows: Vec<(f64, Value)> = all
        .iter()
        .filter_map(|t| match t.verdict {
            HistoryVerdict::Flaky { failures, runs, why } => {
                let p = places
                    .get(&(t.matrix.clone(), t.test.clone()))
                    .cloned()
                    .unwrap_or_default();
                let rate = failures as f64 / runs.max(1) as f64;
                Some((rate, json!({
                    "matrix": t.matrix, "test": t.test, "cell": t.cell, "axes": &*t.axes,
                    "failures": failures, "runs": runs, "why": why,
                    "rate": format!("{:.0}%", rate * 100.0),
                    "where": p.axes, "where_host": p.host, "where_words": p.words(),
                    "strip": marks_of(&t.points.iter().map(|p| p.obs.mark()).collect::<String>()),
                    "link": test_link(&t.test, &t.matrix),
                })))
            }
            _ => None,
        })
        .collect();
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total = rows.len();
    let tests: Vec<Value> = rows.into_iter().take(MAX_ROWS).map(|(_, v)| v).collect();
    Ok(json!({"page": "flaky", "total": total, "followed": all.len(), "tests": tests}))
}

/// The last `n` runs (of `matrix`, or of every matrix), newest first, each
/// with its verdict, counts, what changed since the run of its matrix
/// before it, and its report when its store is there.
fn runs(src: &mut Source<'_>, matrix: &str, n: usize) -> Result<Value, Problem> {
    let all: Vec<RunRow> = src
        .history
        .runs()?
        .into_iter()
        .filter(|r| matrix.is_empty() || r.name == matrix)
        .collect();
    let total = all.len();
    let cut = all.len().saturating_sub(n);
    // The run of each matrix before each shown one, for what changed.
    let mut before: HashMap<&str, &RunRow> = HashMap::new();
    let mut previous: Vec<Option<&RunRow>> = Vec::with_capacity(all.len());
    for r in &all {
        previous.push(before.insert(r.name.as_str(), r));
    }
    let ids: Vec<String> = all[cut..].iter().map(|r| r.run.clone()).collect();
    let cells = by_run(src.history.cells_of_runs(&ids)?);
    let counted = counts(src.history.rows_of_runs(&ids)?);
    let mut out = Vec::new();
    for (i, r) in all.iter().enumerate().skip(cut).rev() {
        let cs = cells.get(&r.run).map(Vec::as_slice).unwrap_or_default();
        let [failed, flaky, xfail, skipped] = counted.get(&r.run).copied().unwrap_or_default();
        let store = super::files::store_of(src.runs, &r.run);
        out.push(json!({
            "run": r.run, "date": record::time_of(r.started_ms), "matrix": r.name,
            "matrix_link": matrix_link(&r.name),
            "verdict": run_verdict(cs.iter()), "cells": cs.len(),
            "failing_cells": cs.iter().filter(|c| c.outcome == Some(CellVerdict::Failing)).count(),
            "failed": failed, "flaky": flaky, "xfail": xfail, "skipped": skipped,
            "changes": previous[i].map(|p| history::changes(p, r)).unwrap_or_default(),
            "report": store.and_then(|s| super::files::report_of(src.runs, &s)).map(|p| format!("/store/{p}")),
        }));
    }
    Ok(json!({"page": "runs", "matrix": matrix, "total": total, "runs": out}))
}

/// Each host and GPU of the last `n` runs: `history hosts`'s tallies.
fn hosts(h: &mut History, n: usize) -> Result<Value, Problem> {
    let (tallies, runs) = history::hosts::tally(h, n)?;
    Ok(json!({"page": "hosts", "runs": runs, "hosts": tallies}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_quotes_commands_for_a_shell() {
        assert_eq!(quote("sm_90"), "sm_90");
        assert_eq!(quote("a b'c"), r"'a b'\''c'");
        assert_eq!(quote(""), "''");
    }
}
