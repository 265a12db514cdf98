//! The report grid of `summary.md` and `index.html`: the matrix file's
//! `report:` rows and columns, a chip per cell in its slot, labelled by the
//! values of the other axes.

use std::collections::HashSet;

use serde::Serialize;

use super::cell_view::{css, package_word};
use crate::results::{CellResult, Counts, Results};

#[derive(Serialize)]
pub struct Row {
    pub label: String,
    pub slots: Vec<Vec<Chip>>,
}

/// One cell inside a grid slot.
#[derive(Serialize)]
pub struct Chip {
    pub id: String,
    /// The values of the axes that are neither rows nor columns.
    pub label: String,
    pub status: &'static str,
    /// Its verdict in words ([`CellResult::outcome`]): the status, or
    /// `expected failure`.
    pub outcome: &'static str,
    pub css: &'static str,
    pub counts: Counts,
    /// Tests it counted, of any status.
    pub tests: u64,
    pub regressed: bool,
    /// The verdict on the package (autopkgtest's, `neutral`); empty when
    /// no step gave one.
    pub package: &'static str,
}

/// The report grid: which axes span rows and columns, and a chip per cell.
pub(super) struct Grid {
    pub(super) row_axes: Vec<String>,
    pub(super) col_axes: Vec<String>,
    pub(super) columns: Vec<String>,
    pub(super) rows: Vec<Row>,
}

impl Grid {
    /// Lays out the cells by the matrix file's `report:` rows and columns
    /// (by default the first axis down, the second across); the other axes
    /// label the chips.
    pub(super) fn new(results: &Results, regressed: &HashSet<&str>) -> Grid {
        let keys = &results.keys;
        let mut row_axes = results.report.rows.clone();
        let mut col_axes = results.report.columns.clone();
        if row_axes.is_empty() && col_axes.is_empty() {
            row_axes.extend(keys.first().cloned());
            col_axes.extend(keys.get(1).cloned());
        }
        let rest: Vec<String> = keys
            .iter()
            .filter(|k| !row_axes.contains(k) && !col_axes.contains(k))
            .cloned()
            .collect();
        // Row and column labels in order of first appearance (the plan's order).
        let mut labels: Vec<String> = Vec::new();
        let mut columns: Vec<String> = Vec::new();
        for c in &results.cells {
            let r = label(c, &row_axes);
            if !labels.contains(&r) {
                labels.push(r);
            }
            let k = label(c, &col_axes);
            if !columns.contains(&k) {
                columns.push(k);
            }
        }
        let mut rows: Vec<Row> = labels
            .iter()
            .map(|l| Row {
                label: l.clone(),
                slots: columns.iter().map(|_| Vec::new()).collect(),
            })
            .collect();
        for c in &results.cells {
            let r = labels.iter().position(|x| *x == label(c, &row_axes));
            let k = columns.iter().position(|x| *x == label(c, &col_axes));
            if let (Some(r), Some(k)) = (r, k) {
                rows[r].slots[k].push(Chip {
                    id: c.id.clone(),
                    label: values_label(c, &rest),
                    status: c.status.as_str(),
                    outcome: c.outcome(),
                    css: css(c),
                    counts: c.counts,
                    tests: c.counts.total(),
                    regressed: regressed.contains(c.id.as_str()),
                    package: package_word(c),
                });
            }
        }
        Grid {
            row_axes,
            col_axes,
            columns,
            rows,
        }
    }
}

/// A row or column label: the cell's values of `axes`, or `cells` for none.
fn label(c: &CellResult, axes: &[String]) -> String {
    if axes.is_empty() {
        return "cells".to_string();
    }
    values_label(c, axes)
}

/// The cell's values of `axes`, `–` where it has none, joined with ` · `.
fn values_label(c: &CellResult, axes: &[String]) -> String {
    axes.iter()
        .map(|a| c.value(a).unwrap_or("–"))
        .collect::<Vec<_>>()
        .join(" · ")
}
