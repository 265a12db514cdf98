//! Each tried cell before the patch (in the run tried against) and after
//! (in the try): fixed, still failing with the same signatures, failing
//! with others, newly failing, unchanged, or broken by the infrastructure;
//! the table `try` prints and the cells of `try.json`.

use std::collections::BTreeSet;

use crate::outcome::CellVerdict;
use crate::results::{CellResult, Results};
use crate::store::record::RunStatus;
use crate::store::trial::{TrialCell, TrialChange};

/// The rows of `cells`, in their order. A cell without a result in
/// `after` did not run (`not_run` says why, when it does).
pub fn rows(
    cells: &[String],
    before: &Results,
    after: &Results,
    not_run: &[(String, String)],
) -> Vec<TrialCell> {
    cells
        .iter()
        .map(|id| {
            let was = before.cell(id);
            let before_word = was.map(word).unwrap_or("not run").to_string();
            let Some(now) = after.cell(id) else {
                let reason = not_run
                    .iter()
                    .find(|(c, _)| c == id)
                    .map(|(_, r)| r.clone())
                    .unwrap_or_else(|| "no result in the try".into());
                return TrialCell {
                    cell: id.clone(),
                    before: before_word,
                    after: "not run".into(),
                    change: TrialChange::Error,
                    signatures: Vec::new(),
                    reason: Some(reason),
                };
            };
            let failing_before = was.is_some_and(CellResult::is_failure);
            let sigs_after = signatures(after, id);
            let change = if now.status == RunStatus::Error {
                TrialChange::Error
            } else {
                match (failing_before, now.is_failure()) {
                    (true, false) => TrialChange::Fixed,
                    (true, true) if sigs_after == signatures(before, id) => {
                        TrialChange::StillFailing
                    }
                    (true, true) => TrialChange::FailingDifferently,
                    (false, true) => TrialChange::NewlyFailing,
                    (false, false) => TrialChange::Unchanged,
                }
            };
            TrialCell {
                cell: id.clone(),
                before: before_word,
                after: word(now).to_string(),
                change,
                signatures: sigs_after.into_iter().collect(),
                reason: (change == TrialChange::Error)
                    .then(|| now.reason.clone())
                    .flatten(),
            }
        })
        .collect()
}

/// The ids of the signatures `cell` has in `results`.
fn signatures(results: &Results, cell: &str) -> BTreeSet<String> {
    results
        .signatures
        .iter()
        .filter(|s| s.cells.iter().any(|c| c == cell))
        .map(|s| s.id.clone())
        .collect()
}

/// A cell's outcome in a word: `passed`, `failed`, `expected failure` …
fn word(c: &CellResult) -> &'static str {
    match c.verdict() {
        CellVerdict::Passed => "passed",
        _ => c.outcome(),
    }
}

/// How a change reads in the table.
pub fn label(c: TrialChange) -> &'static str {
    match c {
        TrialChange::Fixed => "fixed",
        TrialChange::StillFailing => "still failing (same signature)",
        TrialChange::FailingDifferently => "still failing (another signature)",
        TrialChange::NewlyFailing => "newly failing",
        TrialChange::Unchanged => "unchanged",
        TrialChange::Error => "error",
    }
}

/// The table of `rows`, with each new signature's text after its cell and
/// a line of counts.
pub fn text(rows: &[TrialCell], after: &Results) -> String {
    let header = ["cell", "before", "after", "change"].map(String::from);
    let lines: Vec<[String; 4]> = rows
        .iter()
        .map(|r| {
            [
                r.cell.clone(),
                r.before.clone(),
                r.after.clone(),
                label(r.change).to_string(),
            ]
        })
        .collect();
    let mut w = [0usize; 3];
    for l in std::iter::once(&header).chain(&lines) {
        for i in 0..3 {
            w[i] = w[i].max(l[i].chars().count());
        }
    }
    let mut s = String::new();
    for (i, l) in std::iter::once(&header).chain(&lines).enumerate() {
        s.push_str(&format!(
            "{:<a$}  {:<b$}  {:<c$}  {}\n",
            l[0],
            l[1],
            l[2],
            l[3],
            a = w[0],
            b = w[1],
            c = w[2]
        ));
        let Some(r) = i.checked_sub(1).map(|i| &rows[i]) else {
            continue;
        };
        if let Some(reason) = &r.reason {
            s.push_str(&format!("  {reason}\n"));
        }
        if matches!(
            r.change,
            TrialChange::FailingDifferently | TrialChange::NewlyFailing
        ) {
            for sig in after
                .signatures
                .iter()
                .filter(|x| r.signatures.contains(&x.id))
            {
                s.push_str(&format!("  {} {}\n", sig.id, sig.message));
            }
        }
    }
    let count = |c: TrialChange| rows.iter().filter(|r| r.change == c).count();
    s.push_str(&format!(
        "{} fixed, {} still failing, {} newly failing, {} unchanged, {} errors\n",
        count(TrialChange::Fixed),
        count(TrialChange::StillFailing) + count(TrialChange::FailingDifferently),
        count(TrialChange::NewlyFailing),
        count(TrialChange::Unchanged),
        count(TrialChange::Error),
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Results of cells (id, status, signature ids).
    fn results(cells: &[(&str, &str, &[&str])]) -> Results {
        let mut sigs: Vec<(&str, Vec<&str>)> = Vec::new();
        for (id, _, ss) in cells {
            for s in *ss {
                match sigs.iter_mut().find(|(x, _)| x == s) {
                    Some((_, c)) => c.push(id),
                    None => sigs.push((s, vec![id])),
                }
            }
        }
        serde_json::from_value(serde_json::json!({
            "version": 1, "name": "m", "runs": [], "keys": [],
            "report": {"rows": [], "columns": []},
            "cells": cells.iter().map(|(id, status, _)| serde_json::json!({
                "id": id, "values": {}, "status": status,
                "counts": {"passed": 0, "failed": 0, "error": 0, "skipped": 0,
                           "flaky": 0, "xfail": 0, "xpass": 0},
            })).collect::<Vec<_>>(),
            "signatures": sigs.iter().map(|(s, c)| serde_json::json!({
                "id": s, "text": s, "message": format!("{s} went wrong"), "count": 1,
                "places": [], "cells": c, "example": "",
                "attribution": {"exact": false, "predicates": [], "failing": 1, "ran": 1, "text": ""},
            })).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    #[test]
    fn each_cell_is_told_by_its_verdicts_and_signatures_before_and_after() {
        let before = results(&[
            ("fixed", "failed", &["s1"]),
            ("same", "failed", &["s1"]),
            ("moved", "failed", &["s1"]),
            ("broken", "passed", &[]),
            ("fine", "passed", &[]),
            ("lost", "failed", &["s2"]),
            ("infra", "failed", &["s2"]),
        ]);
        let after = results(&[
            ("fixed", "passed", &[]),
            ("same", "failed", &["s1"]),
            ("moved", "failed", &["s3"]),
            ("broken", "failed", &["s3"]),
            ("fine", "passed", &[]),
            ("infra", "error", &[]),
        ]);
        let ids: Vec<String> = ["fixed", "same", "moved", "broken", "fine", "lost", "infra"]
            .map(String::from)
            .to_vec();
        let not_run = [("lost".to_string(), "image failed".to_string())];
        let rows = rows(&ids, &before, &after, &not_run);
        let got: Vec<(&str, TrialChange)> =
            rows.iter().map(|r| (r.cell.as_str(), r.change)).collect();
        assert_eq!(
            got,
            [
                ("fixed", TrialChange::Fixed),
                ("same", TrialChange::StillFailing),
                ("moved", TrialChange::FailingDifferently),
                ("broken", TrialChange::NewlyFailing),
                ("fine", TrialChange::Unchanged),
                ("lost", TrialChange::Error),
                ("infra", TrialChange::Error),
            ]
        );
        assert_eq!(rows[5].reason.as_deref(), Some("image failed"));
        assert_eq!(rows[2].signatures, ["s3"]);
        let table = text(&rows, &after);
        assert!(table.contains("  s3 s3 went wrong\n"), "{table}");
        assert!(
            table.ends_with("1 fixed, 2 still failing, 1 newly failing, 1 unchanged, 2 errors\n"),
            "{table}"
        );
    }
}
