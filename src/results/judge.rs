//! The runner's [`CellJudge`]: a finished cell's JUnit files read and
//! judged under the run's `expect:` and `classify:` rules exactly as the
//! reports collect them ([`collect`]), so that the live lines, the journal
//! and the exit code give a cell the verdict its report will.

use std::path::Path;
use std::sync::OnceLock;

use super::classify::Classifier;
use super::collect::collect_classified;
use super::junit::Limits;
use super::source::{self, CellSource, Source};
use super::NoSink;
use crate::outcome::{judge_cell, CellFacts, Judgement};
use crate::run::events::CellJudge;
use crate::store::record::CellRecord;

/// Judges the cells of one run by their tests; the run's rules are read
/// from its `plan.json` (and its `classify:` patterns compiled) the first
/// time a cell asks.
#[derive(Default)]
pub struct ByTests {
    /// The run's rules, as an empty source, and its compiled `classify:`;
    /// `None` when its plan could not be read (cells are then judged by
    /// their steps).
    rules: OnceLock<Option<(Source, Classifier)>>,
}

impl ByTests {
    pub fn new() -> ByTests {
        ByTests::default()
    }
}

impl CellJudge for ByTests {
    fn judge(&self, record: &CellRecord, run_dir: &Path) -> Judgement {
        let rules = self.rules.get_or_init(|| {
            let m = source::manifest(run_dir).ok()?;
            let classifier = Classifier::new(&m.classify);
            let rules = Source {
                name: m.name,
                runs: vec![m.run_id],
                matrix_hash: m.matrix_hash,
                keys: m.keys,
                expect: m.expect,
                classify: m.classify,
                report: m.report,
                cells: Vec::new(),
                messages: Vec::new(),
                coverage: Vec::new(),
                environments: Vec::new(),
                selected_by: None,
            };
            Some((rules, classifier))
        });
        let Some((rules, classifier)) = rules else {
            return judge_cell(&CellFacts {
                steps: record.status,
                tests: Default::default(),
                expected: None,
            });
        };
        let mut one = rules.clone();
        one.cells = vec![CellSource {
            id: record.id.clone(),
            values: record
                .values
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            dir: run_dir.join(crate::store::layout::CELLS).join(&record.id),
            record: Some(record.clone()),
            junit: record.junit.clone(),
            from_run: true,
        }];
        let results = collect_classified(&one, classifier, Limits::default(), &mut NoSink);
        match results.cells.first() {
            Some(c) => c.judgement(),
            None => judge_cell(&CellFacts {
                steps: record.status,
                tests: Default::default(),
                expected: None,
            }),
        }
    }
}
