//! "What changed underneath" as the reports show it: per environment of the
//! run, its state against the baseline, the regressions of its cells and
//! the package, base, build and source changes beside them — the packages
//! that matter (`report.packages`) first, the rest counted and listed on
//! demand.

use serde::Serialize;

use crate::analysis::env_changes::EnvState;
use crate::analysis::regress::{CellClass, Class, Regressions};
use crate::results::Results;

/// Changes listed in the one-line summary before "and N more".
pub const LINE_ITEMS: usize = 8;

#[derive(Debug, Serialize)]
pub struct EnvChangeView {
    /// `suite=sid` (the axis values its cells share), else its base.
    pub label: String,
    pub environment: String,
    pub baseline_environment: String,
    pub state: &'static str,
    /// `3 new failures, 1 broken cell in sid.gfx900, sid.gfx1030`; empty
    /// when its cells did not regress.
    pub regressions: String,
    /// The changes that matter first, at most [`LINE_ITEMS`], then "and N more".
    pub line: String,
    /// Every change, for the details.
    pub all: Vec<String>,
    /// How many package changes there are in all, and of packages that matter.
    pub packages: usize,
    pub important: usize,
}

impl EnvChangeView {
    /// `1 new failure in zones — part=zones`, or the label alone.
    pub fn head(&self) -> String {
        if self.regressions.is_empty() {
            self.label.clone()
        } else {
            format!("{} — {}", self.regressions, self.label)
        }
    }
}

/// One view per environment, those whose cells regressed first.
pub fn environments(results: &Results, reg: &Regressions) -> Vec<EnvChangeView> {
    let mut out: Vec<EnvChangeView> = reg
        .environments
        .iter()
        .map(|e| {
            let new_failures = reg
                .of_class(Class::NewFailure)
                .filter(|c| e.cells.contains(&c.cell))
                .count();
            let broken: Vec<&str> = reg
                .cells
                .iter()
                .filter(|c| c.class == CellClass::Broken && e.cells.contains(&c.cell))
                .map(|c| c.cell.as_str())
                .collect();
            let mut cells: Vec<&str> = reg
                .of_class(Class::NewFailure)
                .map(|c| c.cell.as_str())
                .filter(|c| e.cells.iter().any(|x| x == c))
                .chain(broken.iter().copied())
                .collect();
            cells.sort();
            cells.dedup();
            let mut parts = Vec::new();
            if new_failures > 0 {
                parts.push(plural(new_failures, "new failure"));
            }
            if !broken.is_empty() {
                parts.push(plural(broken.len(), "broken cell"));
            }
            let regressions = if parts.is_empty() {
                String::new()
            } else {
                format!("{} in {}", parts.join(", "), cells.join(", "))
            };
            let fallback = if e.base.is_empty() {
                e.environment.clone()
            } else {
                e.base.clone()
            };
            // A moved source's details name its first commits.
            let mut all: Vec<String> = e
                .other
                .iter()
                .map(|o| match o.subjects.as_slice() {
                    [] => o.text(),
                    s => format!("{}: {}", o.text(), s.join("; ")),
                })
                .collect();
            all.extend(e.packages.iter().map(|p| p.text()));
            EnvChangeView {
                label: results.environment_label(&e.cells, &fallback),
                environment: e.environment.clone(),
                baseline_environment: e.baseline_environment.clone(),
                state: match e.state {
                    EnvState::Changed => "changed",
                    EnvState::Unchanged => "unchanged",
                    EnvState::New => "new",
                    EnvState::Gone => "gone",
                    EnvState::Unknown => "unknown",
                },
                regressions,
                line: e.line(LINE_ITEMS),
                all,
                packages: e.packages.len(),
                important: e.important(),
            }
        })
        .collect();
    out.sort_by_key(|v| v.regressions.is_empty());
    out
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Lines for the terminal: each environment that changed (or is new or
/// gone), with its cells' regressions.
pub fn terminal_lines(views: &[EnvChangeView]) -> Vec<String> {
    views
        .iter()
        .filter(|v| v.state != "unchanged")
        .map(|v| format!("{} {}: {}", v.head(), v.state, v.line))
        .collect()
}
