//! The comparison with a baseline in `summary.md` and `index.html`: counts
//! per regression class, the changed tests of each class (capped), the
//! cells that came, went or changed, and which cells regressed.

use std::collections::HashSet;

use serde::Serialize;

use super::view::Caps;
use crate::analysis::regress::{CellClass, Class, Regressions};
use crate::results::junit::clip;

#[derive(Serialize)]
pub struct RegView {
    pub baseline: String,
    pub regressions: u64,
    pub counts: Vec<(String, u64)>,
    pub classes: Vec<ClassView>,
    pub cells: Vec<CellChangeView>,
    /// Failure signatures new, known and gone against the baseline.
    pub signatures: crate::analysis::regress::SignatureChanges,
    /// What changed underneath each environment, with its cells' regressions.
    pub environments: Vec<super::changes_view::EnvChangeView>,
    /// gfx targets libraries gained and lost against the baseline.
    pub coverage: Vec<String>,
}

#[derive(Serialize)]
pub struct ClassView {
    pub class: &'static str,
    pub label: &'static str,
    pub count: u64,
    pub tests: Vec<ChangeView>,
    pub more: u64,
}

#[derive(Serialize)]
pub struct ChangeView {
    pub cell: String,
    pub test: String,
    pub status: String,
    pub baseline: String,
    pub message: String,
}

#[derive(Serialize)]
pub struct CellChangeView {
    pub class: &'static str,
    pub cell: String,
    pub from: String,
    pub to: String,
}

/// Cells that regressed: new test failures, or broken against the baseline.
pub(super) fn regressed_cells(reg: Option<&Regressions>) -> HashSet<&str> {
    reg.map(|r| {
        r.of_class(Class::NewFailure)
            .map(|c| c.cell.as_str())
            .chain(
                r.cells
                    .iter()
                    .filter(|c| c.class == CellClass::Broken)
                    .map(|c| c.cell.as_str()),
            )
            .collect()
    })
    .unwrap_or_default()
}

/// The comparison with the baseline: counts per class, the changed tests of
/// each class present (capped), and the cells that came, went or changed.
pub(super) fn reg_view(r: &Regressions, caps: Caps) -> RegView {
    RegView {
        baseline: r.baseline.clone(),
        regressions: r.regression_count(),
        counts: Class::ALL
            .iter()
            .map(|c| (c.label().to_string(), r.count(*c)))
            .collect(),
        classes: Class::ALL
            .iter()
            .filter(|c| r.count(**c) > 0)
            .map(|c| class_view(r, *c, caps))
            .collect(),
        cells: r
            .cells
            .iter()
            .map(|c| CellChangeView {
                class: c.class.as_str(),
                cell: c.cell.clone(),
                from: c.from.clone().unwrap_or_else(|| "–".into()),
                to: c.to.clone().unwrap_or_else(|| "–".into()),
            })
            .collect(),
        signatures: r.signatures,
        environments: Vec::new(),
        coverage: Vec::new(),
    }
}

/// The tests that changed in class `c`, at most `caps.per_class` of them.
fn class_view(r: &Regressions, c: Class, caps: Caps) -> ClassView {
    let tests: Vec<ChangeView> = r
        .of_class(c)
        .take(caps.per_class)
        .map(|x| ChangeView {
            cell: x.cell.clone(),
            test: x.display_name(),
            status: x.status.map(|s| s.as_str()).unwrap_or("–").into(),
            baseline: x.baseline.map(|s| s.as_str()).unwrap_or("–").into(),
            message: clip(&x.message, 300),
        })
        .collect();
    ClassView {
        class: c.as_str(),
        label: c.label(),
        count: r.count(c),
        more: r.count(c).saturating_sub(tests.len() as u64),
        tests,
    }
}
