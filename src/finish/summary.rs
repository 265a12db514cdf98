//! The table a finished run prints first: each cell with its status (its
//! verdict where the status alone does not say it), time and reason, the
//! cells not run, the tally line, image errors, lock checks and where the
//! run store is.

use crate::outcome::CellVerdict;
use crate::run::progress;
use crate::run::runner::RunReport;

/// The run's summary table and the lines after it.
pub fn table(r: &RunReport) -> String {
    let mut rows: Vec<[String; 4]> = r
        .judged()
        .map(|(c, judged)| {
            // The cell's judgement (crate::outcome::judge_cell): its status
            // all things considered, and its verdict when the status alone
            // does not say it.
            let status = judged.status.as_str();
            let reason = c.reason.clone().unwrap_or_default();
            let (status, reason) = match (judged.verdict, r.expectation(c)) {
                (CellVerdict::ExpectedFailure, Some(e)) => (
                    format!("{status} (expected)"),
                    format!("{reason}; expected: {}", e.reason),
                ),
                (CellVerdict::Passed, Some(e)) => (
                    format!("{status} (unexpectedly)"),
                    format!("expected to fail: {}", e.reason),
                ),
                (v, _) => (format!("{status}{}", progress::verdict_note(v)), reason),
            };
            [
                c.id.clone(),
                status,
                format!("{:.1}s", c.duration_secs),
                reason,
            ]
        })
        .collect();
    for (id, reason) in &r.outcome.not_run {
        rows.push([id.clone(), "not run".into(), "-".into(), reason.clone()]);
    }
    let header = ["cell", "status", "time", "reason"].map(String::from);
    let mut w = [0usize; 3];
    for row in std::iter::once(&header).chain(&rows) {
        for i in 0..3 {
            w[i] = w[i].max(row[i].chars().count());
        }
    }
    let mut s = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line = format!(
            "{:<a$}  {:<b$}  {:>c$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            a = w[0],
            b = w[1],
            c = w[2]
        );
        s.push_str(line.trim_end());
        s.push('\n');
    }
    let tally = crate::outcome::CellTally::of(r.judgements.iter().copied());
    s.push_str(&progress::tally_line(
        &tally,
        r.outcome.not_run.len(),
        r.secs,
    ));
    s.push('\n');
    for e in &r.outcome.image_errors {
        s.push_str(&format!("image error: {e}\n"));
    }
    for c in &r.outcome.lock_checks {
        s.push_str(&format!("{c}\n"));
    }
    s.push_str(&format!("run store: {}\n", r.store.dir.display()));
    if r.outcome.interrupted {
        s.push_str(&format!(
            "interrupted: finish it with `rocmatrix run --resume {}`\n",
            r.store.dir.display()
        ));
    }
    s
}
