//! Which of a run's cells a try runs again: those the run failed (its
//! report's verdict, `expect:` and `classify:` applied), or every cell with
//! `--all`, narrowed by `--only AXIS=VALUE` as elsewhere.

use crate::results::Results;
use crate::store::record::RunManifest;

use super::TrialError;

/// What the command line asks for.
pub struct Selection<'a> {
    pub all: bool,
    pub only: &'a [(String, String)],
}

/// The ids of the cells to try, in plan order.
pub fn cells(
    manifest: &RunManifest,
    before: &Results,
    ask: &Selection,
) -> Result<Vec<String>, TrialError> {
    for (k, _) in ask.only {
        if !manifest.keys.contains(k) {
            return Err(TrialError(format!(
                "--only {k}=…: the run's matrix has no axis `{k}` (its axes: {})",
                manifest.keys.join(", ")
            )));
        }
    }
    let wanted: Vec<String> = manifest
        .cells
        .iter()
        .filter(|c| {
            ask.only
                .iter()
                .all(|(k, v)| c.values.iter().any(|(ck, cv)| ck == k && cv == v))
        })
        .filter(|c| ask.all || before.cell(&c.id).is_some_and(|r| r.is_failure()))
        .map(|c| c.id.clone())
        .collect();
    if wanted.is_empty() {
        let among = if ask.only.is_empty() {
            String::new()
        } else {
            " among the cells --only keeps".to_string()
        };
        return Err(TrialError(match ask.all {
            true => format!("no cell of the run{among}: nothing to try"),
            false => format!(
                "the run has no failing cells{among}: nothing to fix; --all tries the patch on \
                 every cell"
            ),
        }));
    }
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_with_an_unknown_axis_and_a_run_with_nothing_failing_are_refused() {
        let manifest: RunManifest = crate::store::record::RunManifest {
            keys: vec!["case".into()],
            cells: Vec::new(),
            ..serde_json::from_value::<crate::store::schema::PlanFile>(serde_json::json!({
                "store_version": crate::store::record::STORE_VERSION,
                "run_id": "r", "rocmatrix_version": "0", "name": "m",
                "matrix_file": "m.yaml", "matrix_hash": "h", "keys": [], "expect": [],
                "classify": [], "report": {"rows": [], "columns": []}, "shard": null,
                "cells": [], "builds": [],
            }))
            .unwrap()
            .into()
        };
        let before: Results = serde_json::from_value(serde_json::json!({
            "version": 1, "name": "m", "runs": [], "keys": [],
            "report": {"rows": [], "columns": []}, "cells": [],
        }))
        .unwrap();
        let only = [("gfx".to_string(), "gfx900".to_string())];
        let e = cells(
            &manifest,
            &before,
            &Selection {
                all: false,
                only: &only,
            },
        )
        .unwrap_err();
        assert!(e.0.contains("no axis `gfx` (its axes: case)"), "{e}");
        let e = cells(
            &manifest,
            &before,
            &Selection {
                all: false,
                only: &[],
            },
        )
        .unwrap_err();
        assert!(
            e.0.contains("no failing cells") && e.0.contains("--all"),
            "{e}"
        );
    }
}
