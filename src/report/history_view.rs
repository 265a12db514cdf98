//! The history beside a report ([`crate::history::past`]): each failing
//! test's words (`new`, `failing since …`, `known since …`, `flaky …`) and
//! strip of its last runs on the cell pages and in index.html, each cell's
//! last runs as a strip on its card, and a table of the failing tests in
//! `summary.md`. A report made without a history shows none of it.

use std::collections::{HashMap, HashSet};

use minijinja::Value;
use serde::Serialize;

use super::cell_view::CellView;
use super::view::View;
use crate::analysis::regress::{Class, Regressions};
use crate::history::past::{Kind, Past};
use crate::results::Results;

/// `summary.md`'s and index.html's section on the failing tests.
#[derive(Debug, Serialize)]
pub struct HistoryView {
    /// How many runs the strips cover (the window, ending with this one).
    pub runs: usize,
    /// `("new", 2)`, `("flaky", 1)`, … in that order.
    pub tally: Vec<(&'static str, usize)>,
    /// The rows, for summary.md; index.html's view takes them to make
    /// `html` and keeps none.
    pub rows: Vec<HistoryRow>,
    /// Failing tests not listed (the list is capped).
    pub more: usize,
    /// New failures against the baseline that the history knows as flaky:
    /// `--fail-on regression` does not count them.
    pub flaky_regressions: Vec<String>,
    /// `rows` as index.html's table rows (`src/report/history_html.rs`),
    /// made for index.html only.
    pub html: minijinja::Value,
}

#[derive(Debug, Serialize)]
pub struct HistoryRow {
    pub cell: String,
    pub test: String,
    pub kind: &'static str,
    pub words: String,
    pub changed: String,
    /// Its strip as text, oldest run first: `✓✓✗✗`.
    pub marks: String,
}

/// The section's rows, most telling first (new, then failing since, known,
/// flaky), at most `cap`.
pub fn section(past: &Past, reg: Option<&Regressions>, cap: usize) -> Option<HistoryView> {
    // Nothing failing: no table (a heading and a legend over no rows).
    if past.runs.is_empty() || past.tests.is_empty() {
        return None;
    }
    // In the order the history gives them: most telling first.
    let tests = &past.tests;
    let mut tally: Vec<(&'static str, usize)> = Vec::new();
    for (_, t) in tests {
        match tally.last_mut() {
            Some((w, n)) if *w == t.kind.word() => *n += 1,
            _ => tally.push((t.kind.word(), 1)),
        }
    }
    let rows = tests
        .iter()
        .take(cap)
        .map(|((cell, test), t)| HistoryRow {
            cell: cell.clone(),
            test: test.clone(),
            kind: t.kind.word(),
            words: t.words.clone(),
            changed: t.changed.join(", "),
            marks: t.strip.clone(),
        })
        .collect();
    Some(HistoryView {
        runs: past.runs.len(),
        tally,
        rows,
        more: tests.len().saturating_sub(cap),
        flaky_regressions: flaky_regressions(past, reg),
        html: minijinja::Value::UNDEFINED,
    })
}

/// What `--fail-on regression` counts of the history, when it was read:
/// the failing tests it calls new or failing since an earlier run, and the
/// failing cells without a failing test (a broken build) it cannot judge.
pub fn regressions(past: &Past, results: &Results) -> Option<u64> {
    if past.runs.is_empty() {
        return None;
    }
    let tests = past
        .tests
        .iter()
        .filter(|(_, t)| matches!(t.kind, Kind::New | Kind::FailingSince))
        .count();
    let judged: HashSet<&str> = past.tests.iter().map(|((c, _), _)| c.as_str()).collect();
    let bare = results
        .cells
        .iter()
        .filter(|c| c.is_failure() && !judged.contains(c.id.as_str()))
        .count();
    Some((tests + bare) as u64)
}

/// The new failures of `reg` that `past` knows as flaky, `TEST in CELL`.
pub fn flaky_regressions(past: &Past, reg: Option<&Regressions>) -> Vec<String> {
    let Some(reg) = reg else {
        return Vec::new();
    };
    let flaky = past.flaky();
    reg.of_class(Class::NewFailure)
        .filter(|c| flaky.contains(&(c.cell.clone(), c.display_name())))
        .map(|c| format!("{} in {}", c.display_name(), c.cell))
        .collect()
}

/// What the pages show of the history, as HTML made once and shared by
/// index.html and the cell pages: each cell's strip, and each failing
/// test's badge (its words and strip) and what changed when it began.
pub struct Shown<'a> {
    pub past: &'a Past,
    /// Cell id → its strip.
    cells: HashMap<&'a str, Value>,
    /// Cell id → test name → its badge, and its changes in words.
    tests: HashMap<&'a str, HashMap<&'a str, (Value, String)>>,
}

impl<'a> Shown<'a> {
    pub fn of(past: &'a Past) -> Shown<'a> {
        let mut tests: HashMap<&str, HashMap<&str, (Value, String)>> = HashMap::new();
        // Many failing tests read alike (`known since RUN`, one strip):
        // each distinct badge is made once and shared.
        let mut badges: HashMap<(Kind, &str, &str), Value> = HashMap::new();
        for ((cell, test), p) in &past.tests {
            let badge = badges
                .entry((p.kind, p.words.as_str(), p.strip.as_str()))
                .or_insert_with(|| super::history_html::test_badge(p))
                .clone();
            let shown = (badge, p.changed.join(", "));
            tests
                .entry(cell.as_str())
                .or_default()
                .insert(test.as_str(), shown);
        }
        Shown {
            past,
            cells: past
                .cells
                .iter()
                .map(|(id, marks)| (id.as_str(), super::history_html::cell_strip(marks)))
                .collect(),
            tests,
        }
    }
}

/// Puts the history on the view's cell cards and their tests.
pub fn apply(view: &mut View, shown: Option<&Shown>, reg: Option<&Regressions>, cap: usize) {
    let Some(shown) = shown else {
        return;
    };
    view.history = section(shown.past, reg, cap);
    apply_cells(&mut view.cells, shown);
}

/// Each cell's strip, and each failing test's badge and changes.
pub fn apply_cells(cells: &mut [CellView], shown: &Shown) {
    for c in cells {
        if let Some(strip) = shown.cells.get(c.id.as_str()) {
            c.history = strip.clone();
        }
        let Some(tests) = shown.tests.get(c.id.as_str()) else {
            continue;
        };
        // Only tests failing now have a badge: the passing ones a page
        // lists (most of them) are not looked up.
        for t in c.tests.iter_mut().filter(|t| t.status != "passed") {
            if let Some((badge, changed)) = tests.get(t.name.as_str()) {
                t.history_html = badge.clone();
                t.changed.clone_from(changed);
            }
        }
    }
}
