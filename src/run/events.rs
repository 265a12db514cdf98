//! Everything that happens in a run is an [`Event`]. The scheduler emits
//! events; listeners (the journal, the progress display) consume them and
//! never reach back into the scheduler.
//!
//! A finished cell is judged here, once, before its `cell_finished` goes
//! out ([`Events::finish_cell`]): by the run's [`CellJudge`] (the results
//! room's, which reads its JUnit files under `expect:` and `classify:` as
//! the reports do) or, without one, by its steps and whole-cell
//! expectation; either way [`crate::outcome::judge_cell`] decides. The
//! live lines, the journal, the last progress line and the run's summary
//! all show that one judgement.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use crate::image::registry::Fetched;
use crate::outcome::{judge_cell, CellFacts, CellTally, Judgement, TestTally};
pub use crate::store::journal::Event;
use crate::store::record::CellRecord;

/// Judges a finished cell: its record and what its JUnit files (under
/// `cell_dir`) say. The results room implements it over the same reading
/// the reports do; the runner asks it as each cell finishes.
pub trait CellJudge: Send + Sync {
    fn judge(
        &self,
        record: &crate::store::record::CellRecord,
        cell_dir: &std::path::Path,
    ) -> Judgement;
}

/// Consumes events. Implementations must be cheap: they run inline.
pub trait Listener: Send + Sync {
    fn on_event(&self, event: &Event);

    /// What the run is about, once, before its first cell or image event;
    /// listeners that show events to people keep it to say more than the
    /// events carry.
    fn on_context(&self, _context: &Arc<RunContext>) {}
}

/// What the events of a run refer to and do not carry themselves: which
/// cells the matrix expects to fail, and which axis values each
/// environment is for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunContext {
    /// Cell id → the reason of the whole-cell `expect:` that covers it.
    pub expected: HashMap<String, String>,
    /// Short environment hash → the axis values its cells share
    /// (`suite=bookworm`); absent when they share none.
    pub environments: HashMap<String, String>,
}

impl RunContext {
    /// The context of a run of `cells` under the matrix's `expect:` rules.
    pub fn new(
        cells: &[crate::plan::Cell],
        expect: &[crate::matrix_file::Expectation],
    ) -> RunContext {
        let expected = cells
            .iter()
            .filter_map(|c| {
                let value = |k: &str| {
                    c.values
                        .iter()
                        .find(|(key, _)| key == k)
                        .map(|(_, v)| v.as_str())
                };
                expect
                    .iter()
                    .find(|e| e.is_whole_cell() && e.matches_cell(value))
                    .map(|e| (c.id.clone(), e.reason.clone()))
            })
            .collect();
        let mut by_env: Vec<(&str, Vec<&crate::plan::Cell>)> = Vec::new();
        for c in cells {
            match by_env.iter_mut().find(|(h, _)| *h == c.environment_hash) {
                Some((_, v)) => v.push(c),
                None => by_env.push((&c.environment_hash, vec![c])),
            }
        }
        let environments = by_env
            .into_iter()
            .filter_map(|(hash, cells)| {
                let first = cells.first()?;
                let shared: Vec<String> = first
                    .values
                    .iter()
                    .filter(|kv| cells.iter().all(|c| c.values.contains(kv)))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                (!shared.is_empty())
                    .then(|| (crate::digest::short(hash).to_string(), shared.join(" · ")))
            })
            .collect();
        RunContext {
            expected,
            environments,
        }
    }

    /// Why the matrix expects `cell` to fail, if it does.
    pub fn expected(&self, cell: &str) -> Option<&str> {
        self.expected.get(cell).map(String::as_str)
    }

    /// The axis values environment `short` is for, if its cells share any.
    pub fn environment(&self, short: &str) -> Option<&str> {
        self.environments.get(short).map(String::as_str)
    }
}

/// Fans events out to listeners, and judges finished cells.
#[derive(Clone, Default)]
pub struct Events {
    listeners: Vec<Arc<dyn Listener>>,
    judging: Arc<Judging>,
}

/// How this run's cells are judged, and what was judged so far.
#[derive(Default)]
struct Judging {
    judge: OnceLock<Arc<dyn CellJudge>>,
    context: OnceLock<Arc<RunContext>>,
    /// Cell id → its judgement, as its `cell_finished` said.
    judged: Mutex<HashMap<String, Judgement>>,
}

impl Events {
    pub fn new(listeners: Vec<Arc<dyn Listener>>) -> Self {
        Events {
            listeners,
            judging: Arc::default(),
        }
    }

    /// Judges this run's cells with `judge` (the first one given stays).
    pub fn judge_with(&self, judge: Arc<dyn CellJudge>) {
        let _ = self.judging.judge.set(judge);
    }

    /// Tells every listener what the run is about ([`Listener::on_context`]).
    pub fn context(&self, context: RunContext) {
        let context = Arc::new(context);
        let _ = self.judging.context.set(context.clone());
        for l in &self.listeners {
            l.on_context(&context);
        }
    }

    /// `record`'s judgement, for a cell of the run in `run_dir`: the run's
    /// judge's, or without one its steps' under its whole-cell expectation.
    /// Reads its JUnit files: call it off the async threads.
    pub fn judge(&self, record: &CellRecord, run_dir: &Path) -> Judgement {
        match self.judging.judge.get() {
            Some(judge) => judge.judge(record, run_dir),
            None => self.judge_by_steps(record),
        }
    }

    /// Judges a finished cell (on a blocking thread), keeps its judgement
    /// and tells the listeners (`cell_finished`, with its judged status and
    /// verdict).
    pub async fn finish_cell(&self, record: &CellRecord, run_dir: &Path) -> Judgement {
        let (events, rec, dir) = (self.clone(), record.clone(), run_dir.to_path_buf());
        let judged = super::blocking("judging a finished cell", move || events.judge(&rec, &dir))
            .await
            .unwrap_or_else(|_| self.judge_by_steps(record));
        self.judging
            .judged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(record.id.clone(), judged);
        self.emit(Event::CellFinished {
            cell: record.id.clone(),
            status: judged.status,
            verdict: Some(judged.verdict),
            reason: record.reason.clone(),
            secs: record.duration_secs,
        });
        judged
    }

    /// A record judged by its steps and whole-cell expectation alone.
    fn judge_by_steps(&self, record: &CellRecord) -> Judgement {
        judge_cell(&CellFacts {
            steps: record.status,
            tests: TestTally::default(),
            expected: self
                .judging
                .context
                .get()
                .and_then(|c| c.expected(&record.id)),
        })
    }

    /// The judgements of `records` (a run's, in its order): as their
    /// `cell_finished` said, or judged now (cells an earlier invocation
    /// finished).
    pub async fn judgements(&self, records: &[CellRecord], run_dir: &Path) -> Vec<Judgement> {
        let (events, recs, dir) = (self.clone(), records.to_vec(), run_dir.to_path_buf());
        super::blocking("judging the run's cells", move || {
            let known = events
                .judging
                .judged
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            recs.iter()
                .map(|r| match known.get(&r.id) {
                    Some(j) => *j,
                    None => events.judge(r, &dir),
                })
                .collect()
        })
        .await
        .unwrap_or_else(|_| records.iter().map(|r| self.judge_by_steps(r)).collect())
    }

    pub fn emit(&self, event: Event) {
        for l in &self.listeners {
            l.on_event(&event);
        }
    }

    /// What a registry gave, if anything; a registry that just failed is
    /// reported (once per run: it is not asked again).
    pub fn fetched<T>(&self, f: Fetched<T>) -> Option<T> {
        (self as &dyn crate::step::EventSink).fetched(f)
    }
}

/// `run_finished`: the run's cells counted by their judgements.
pub fn run_finished(tally: CellTally, not_run: usize, interrupted: bool, secs: f64) -> Event {
    Event::RunFinished {
        passed: tally.passed,
        failed: tally.failed,
        expected: tally.expected,
        classified: tally.classified,
        errors: tally.errors,
        skipped: tally.skipped,
        not_run,
        interrupted,
        secs,
    }
}
