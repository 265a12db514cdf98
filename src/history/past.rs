//! The history seen from one run. A report records its run as it is
//! written ([`record_and_read`]) and then shows, beside it, what the
//! history says: each failing test `new`, `failing since RUN`, `known since
//! RUN` or `flaky (K of the last N runs, where)`, a regression with what
//! changed underneath when it began, each cell's last runs and each failing
//! test's as a strip of marks — and the terminal's lines about it.
//!
//! Only the matrix's last [`WINDOW`] runs up to the reported one are read,
//! and only the rows of the tests failing now (and, for a flaky one, its
//! other cells): a report's cost must not grow with the history's length.
//! `history show` and `history flaky` read everything.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use super::backend::StoredCell;
#[cfg(test)]
use super::record::RunRecord;
use super::record::{self, FailingTest};
use super::verdict::{HistoryVerdict, Obs};
use super::{flaky_places_of, History, HistoryError, Location, Scope, TestHistory};
use crate::outcome::CellVerdict;
use crate::results::model::Results;

/// How many of a matrix's runs a report looks back over.
pub const WINDOW: usize = 20;

/// Where to record a report's run, and the run stores it was made from
/// (the shards of one plan are one run).
#[derive(Debug, Clone)]
pub struct Recorder {
    pub location: Location,
    pub runs: Vec<PathBuf>,
}

/// What the history says about one reported run.
#[derive(Debug, Clone, Default)]
pub struct Past {
    /// Lines for the terminal: recorded where, or why not and how to
    /// record it later; then the failing tests read against the history.
    pub text: String,
    /// The window's runs, oldest first, ending with the reported one.
    pub runs: Vec<PastRun>,
    /// Cell id → its outcome in each of `runs`.
    pub cells: HashMap<String, Vec<Mark>>,
    /// Each test failing in the reported run, as ((cell id,
    /// `classname.name`), what the history says), most telling first: by
    /// [`Kind`], then cell and test. Sorted once here for the terminal,
    /// summary.md and index.html alike.
    pub tests: Vec<((String, String), TestPast)>,
}

/// A run in the window.
#[derive(Debug, Clone)]
pub struct PastRun {
    pub run: String,
    /// When it started, `YYYY-MM-DD HH:MM` UTC.
    pub date: String,
}

/// One run's outcome in a strip.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Mark {
    /// `✓`, `✗`, `~` (passed on a rerun), `·` (did not run).
    pub mark: char,
    /// The CSS class of its colour: `pass`, `fail`, `flaky`, `skip`.
    pub css: &'static str,
    /// `RUN (DATE): OUTCOME`.
    pub title: String,
}

/// How a failing test reads against the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// It failed for the first time in this run.
    New,
    /// It passed before and fails in every run since an earlier one.
    FailingSince,
    /// It failed in every run it was recorded in.
    Known,
    /// It both passes and fails.
    Flaky,
    /// Anything else (it was fixed since, which a failing test cannot be).
    Other,
}

impl Kind {
    pub fn word(self) -> &'static str {
        match self {
            Kind::New => "new",
            Kind::FailingSince => "failing since an earlier run",
            Kind::Known => "known",
            Kind::Flaky => "flaky",
            Kind::Other => "other",
        }
    }
}

/// A test failing in the reported run, against its history.
#[derive(Debug, Clone)]
pub struct TestPast {
    pub kind: Kind,
    /// `new`, `failing since RUN (DATE)`, `known since RUN (DATE)`,
    /// `flaky (K of the last N runs), only where gfx=gfx1151`.
    pub words: String,
    /// For a regression: what changed underneath between the run before it
    /// and the run it began in.
    pub changed: Vec<String>,
    /// Its outcome in each of the window's runs of its cell, oldest first:
    /// `✓✓✗✗` (`~` passed on a rerun, `·` not run).
    pub strip: String,
}

impl Past {
    /// What the history says of `test` failing in `cell`: a linear search,
    /// for tests (the pages look tests up through
    /// `report::history_view::Shown`, made once).
    #[cfg(test)]
    pub fn test(&self, cell: &str, test: &str) -> Option<&TestPast> {
        self.tests
            .iter()
            .find(|((c, t), _)| c == cell && t == test)
            .map(|(_, p)| p)
    }

    /// The failing tests the history knows as flaky, as (cell, test).
    pub fn flaky(&self) -> HashSet<(String, String)> {
        self.tests
            .iter()
            .filter(|(_, t)| t.kind == Kind::Flaky)
            .map(|(k, _)| k.clone())
            .collect()
    }
}

/// Records the run the report read as `results` into `rec.location`, and
/// reads back what the history says about it. Never fails: a history that
/// cannot be used is a [`Past`] whose text says so in one line, and how to
/// record the run later.
pub fn record_and_read(rec: &Recorder, results: &Results) -> Past {
    if rec.location == Location::Off {
        return Past::default();
    }
    let later = format!(
        "record it later with `rocmatrix history import {}`",
        rec.runs
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let not = |text: String| Past {
        text,
        ..Past::default()
    };
    let dirs: Vec<&std::path::Path> = rec.runs.iter().map(PathBuf::as_path).collect();
    let id = match record::run_id(&dirs) {
        Ok(id) => id,
        Err(e) => return not(format!("history: not recorded: {e}\n")),
    };
    let mut history = match History::open(&rec.location) {
        Ok(h) => h,
        Err(e) => return not(format!("history: not recorded ({e}); {later}\n")),
    };
    // A run recorded already (a report made again) is only read back: its
    // record, the costliest part, is made only to be written.
    let stored = match history.has_run(&id) {
        Ok(recorded) => recorded,
        Err(e) => return not(format!("history: not recorded ({e}); {later}\n")),
    };
    let added = if stored {
        false
    } else {
        let run = match record::of_run(&dirs, results) {
            Ok(r) => r,
            Err(e) => return not(format!("history: not recorded: {e}\n")),
        };
        match history.record(&run) {
            Ok(added) => added,
            Err(e) => return not(format!("history: not recorded ({e}); {later}\n")),
        }
    };
    let reported = Reported {
        run: id,
        name: &results.name,
        failing: record::failing_of(results),
    };
    match read(&mut history, &reported, added) {
        Ok(past) => past,
        Err(e) => not(format!(
            "history: recorded in {}, but not read back: {e}\n",
            rec.location
        )),
    }
}

/// What the history says about a recorded run `run` of matrix `name`, as
/// its report shows it (the same window, words, changes and strips), read
/// from the history alone: its failing tests are its recorded rows
/// (`rocmatrix serve`'s matrix page).
pub fn read_recorded(history: &mut History, run: &str, name: &str) -> Result<Past, HistoryError> {
    let rows = history.rows_of_runs(&[run.to_string()])?;
    let failing = rows
        .iter()
        .filter(|t| t.outcome.is_some_and(|o| o.is_failure()))
        .map(|t| FailingTest {
            cell: &t.cell,
            test: t.test.clone(),
            hash: t.hash,
        })
        .collect();
    let reported = Reported {
        run: run.to_string(),
        name,
        failing,
    };
    read(history, &reported, false)
}

/// The reported run as reading it back needs it.
struct Reported<'a> {
    run: String,
    /// Its matrix's name.
    name: &'a str,
    failing: Vec<FailingTest<'a>>,
}

impl Reported<'_> {
    /// What reading `run` back needs of its record, for the unit tests
    /// (a report reads it from its results: [`record::failing_of`]).
    #[cfg(test)]
    fn of_record(run: &RunRecord) -> Reported<'_> {
        Reported {
            run: run.run.clone(),
            name: &run.name,
            failing: run
                .tests
                .iter()
                .filter(|t| t.outcome.is_failure())
                .map(|t| FailingTest {
                    cell: &t.cell,
                    test: t.test.clone(),
                    hash: t.hash,
                })
                .collect(),
        }
    }
}

fn read(history: &mut History, run: &Reported, added: bool) -> Result<Past, HistoryError> {
    let location = history.location().to_string();
    let wanted: HashSet<(&str, &str)> = run
        .failing
        .iter()
        .map(|t| (t.cell, t.test.as_str()))
        .collect();
    let hashes: HashMap<u64, &str> = run
        .failing
        .iter()
        .map(|t| (t.hash, t.test.as_str()))
        .collect();
    let followed = history.follow_in(Scope::Recent {
        matrix: run.name,
        until: &run.run,
        last: WINDOW,
        hashes: &hashes,
    })?;
    let runs = &followed.runs;
    let Some(latest) = runs.iter().position(|r| r.run == run.run) else {
        return Ok(Past {
            text: format!("history: recorded run {} in {location}\n", run.run),
            ..Past::default()
        });
    };
    let total = followed.earlier + runs.len();
    let mut text = format!(
        "history: {} run {} in {location} ({} of {})",
        if added {
            "recorded"
        } else {
            "had already recorded"
        },
        run.run,
        crate::run::progress::count(total, "run"),
        run.name
    );
    // Each run as the words name it, `RUN (DATE)`, made once.
    let named: Vec<String> = runs.iter().map(super::run_and_date).collect();
    let cells = followed
        .cells
        .iter()
        .filter(|((m, _), _)| *m == run.name)
        .map(|((_, cell), ran)| (cell.clone(), cell_strip(&named, ran)))
        .collect();
    let places = flaky_places_of(&followed.tests);
    let mut tests = Vec::with_capacity(wanted.len());
    for t in followed.tests.iter().filter(|t| t.matrix == run.name) {
        if !wanted.contains(&(t.cell.as_str(), t.test.as_str())) {
            continue;
        }
        let here = places.get(&(t.matrix.as_str(), t.test.as_str()));
        let past = test_past(t, &followed, latest, here, &named);
        tests.push(((t.cell.clone(), t.test.clone()), past));
    }
    // (cell, test) pairs are unique: the window follows each once.
    tests.sort_unstable_by(|a, b| (a.1.kind, &a.0).cmp(&(b.1.kind, &b.0)));
    text.push_str(&terminal_lines(&tests));
    Ok(Past {
        text,
        runs: runs
            .iter()
            .map(|r| PastRun {
                run: r.run.clone(),
                date: record::time_of(r.started_ms),
            })
            .collect(),
        cells,
        tests,
    })
}

/// A failing test's kind, words, changes and strip; `named` is each run
/// as the words name it.
fn test_past(
    t: &TestHistory,
    followed: &super::Followed,
    latest: usize,
    places: Option<&super::Place>,
    named: &[String],
) -> TestPast {
    let runs = &followed.runs;
    let cut = followed.earlier > 0;
    let at = |i: usize| named.get(i).cloned().unwrap_or_default();
    let (kind, mut words) = match &t.verdict {
        HistoryVerdict::Regression { since } | HistoryVerdict::KnownSince { since }
            if *since == latest =>
        {
            (Kind::New, "new".to_string())
        }
        HistoryVerdict::Regression { since } => {
            (Kind::FailingSince, format!("failing since {}", at(*since)))
        }
        // Failing all through a window that does not reach back to the
        // matrix's first run: it may have begun earlier.
        HistoryVerdict::KnownSince { since }
            if cut && t.points.first().is_some_and(|p| p.run == *since) =>
        {
            (
                Kind::Known,
                format!(
                    "failing in all of the last {} runs, since {} or earlier",
                    t.points.len(),
                    at(*since)
                ),
            )
        }
        HistoryVerdict::KnownSince { since } => {
            (Kind::Known, format!("known since {}", at(*since)))
        }
        HistoryVerdict::Flaky {
            failures, runs: n, ..
        } => (
            Kind::Flaky,
            format!(
                "flaky ({failures} of {}{n} runs)",
                if cut { "the last " } else { "" }
            ),
        ),
        _ => (Kind::Other, super::describe(t, runs, latest)),
    };
    if let Some(p) = places.filter(|p| !p.is_empty() && kind == Kind::Flaky) {
        words.push_str(&format!(", {}", p.words()));
    }
    let mut changed = Vec::new();
    if let HistoryVerdict::Regression { since } = t.verdict {
        let before = t
            .points
            .iter()
            .rev()
            .find(|p| p.run < since && p.obs != Obs::Absent);
        let began = t.points.iter().find(|p| p.run == since);
        if let (Some(before), Some(began)) = (before, began) {
            let host = began.host.changes_since(&before.host);
            if began.inputs != before.inputs {
                changed = super::changes(&runs[before.run], &runs[since]);
                if changed.is_empty() {
                    // Not a package or a source: the cell's own definition.
                    changed.push("the cell's definition (its steps or recipe)".to_string());
                }
                changed.extend(host);
            } else {
                // The shape says it broke; the matrix says nothing did:
                // what moved is underneath it, if anything recorded shows it.
                words.push_str("; nothing the matrix controls changed — host facts: ");
                if host.is_empty() {
                    words.push_str("none recorded changed");
                } else {
                    words.push_str(&host.join(", "));
                }
            }
        }
    }
    let strip = t.points.iter().map(|p| p.obs.mark()).collect();
    TestPast {
        kind,
        words,
        changed,
        strip,
    }
}

/// A cell's outcome in each run of the window it ran in; `named` is each
/// run as the words name it.
fn cell_strip(named: &[String], ran: &[(usize, StoredCell)]) -> Vec<Mark> {
    ran.iter()
        .map(|(i, c)| {
            let (mark, css) = match c.outcome {
                Some(CellVerdict::Passed) => ('✓', "pass"),
                Some(CellVerdict::ExpectedFailure) => ('☑', "xfail"),
                Some(CellVerdict::Skipped | CellVerdict::Classified) => ('·', "skip"),
                Some(CellVerdict::Failing) => ('✗', "fail"),
                None => ('!', "error"),
            };
            let when = named.get(*i).map_or("", String::as_str);
            let word = c
                .outcome
                .map_or("an outcome this rocmatrix does not know", CellVerdict::word);
            Mark {
                mark,
                css,
                title: format!("{when}: {word}"),
            }
        })
        .collect()
}

/// `; 3 failing tests: 1 new, 2 flaky` and a line per test (at most 20).
fn terminal_lines(tests: &[((String, String), TestPast)]) -> String {
    if tests.is_empty() {
        return "\n".to_string();
    }
    let mut tally: BTreeMap<Kind, usize> = BTreeMap::new();
    for (_, t) in tests {
        *tally.entry(t.kind).or_default() += 1;
    }
    // Only the lines shown are written.
    let mut lines = Vec::new();
    for ((cell, test), t) in tests.iter().take(20) {
        let mut line = format!("  {test} in {cell}: {}", t.words);
        if !t.changed.is_empty() {
            line.push_str(&format!(
                "; changed since the run before: {}",
                t.changed.join(", ")
            ));
        }
        lines.push(line);
    }
    let parts: Vec<String> = tally
        .iter()
        .map(|(k, n)| format!("{n} {}", k.word()))
        .collect();
    let mut text = format!(
        "; {}: {}\n",
        crate::run::progress::count(tests.len(), "failing test"),
        parts.join(", ")
    );
    for l in &lines {
        text.push_str(l);
        text.push('\n');
    }
    if tests.len() > 20 {
        text.push_str(&format!(
            "  …and {} more (`rocmatrix history flaky`, `history show TEST`)\n",
            tests.len() - 20
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::super::record::{passset_digest, CellRow, TestRow};
    use super::*;
    use crate::outcome::TestStatus;

    /// Run `k` of matrix `m`: cells `(suite, gfx, failing)` running test `Q.D`.
    fn run(k: i64, cells: &[(&str, &str, bool)]) -> RunRecord {
        let hash = crate::results::model::test_hash("s", "Q", "D");
        let mut r = RunRecord {
            run: format!("run-{k}"),
            started_ms: 1_000 + k,
            name: "m".into(),
            matrix_hash: String::new(),
            sources: BTreeMap::new(),
            environments: Vec::new(),
            cells: Vec::new(),
            tests: Vec::new(),
            passsets: BTreeMap::new(),
        };
        for (suite, gfx, fail) in cells {
            let cell = format!("{suite}.{gfx}");
            let passed: Vec<u64> = if *fail { vec![] } else { vec![hash] };
            let digest = passset_digest(&passed);
            r.passsets.insert(digest.clone(), passed);
            r.cells.push(CellRow {
                cell: cell.clone(),
                axes: BTreeMap::from([
                    ("suite".to_string(), suite.to_string()),
                    ("gfx".to_string(), gfx.to_string()),
                ]),
                outcome: if *fail {
                    CellVerdict::Failing
                } else {
                    CellVerdict::Passed
                },
                inputs: "same".into(),
                passed: digest,
                signatures: Vec::new(),
                host: Default::default(),
            });
            if *fail {
                r.tests.push(TestRow {
                    cell,
                    test: "Q.D".into(),
                    hash,
                    outcome: TestStatus::Failed,
                    time: None,
                    reruns: 0,
                    signature: String::new(),
                    message: "queue never drained".into(),
                });
            }
        }
        r
    }

    #[test]
    fn a_flaky_test_failing_now_in_one_cell_is_placed_by_its_other_cells() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = History::open(&Location::Sqlite(dir.path().join("h.sqlite"))).unwrap();
        // Flaky on gfx1151 in both suites; steady on gfx1030. In the last
        // run it fails only in a.gfx1151: b.gfx1151's rows, not failing
        // now, must still count as flaky for the place to be gfx=gfx1151.
        let plan = [
            [false, true, false, false],
            [false, false, false, true],
            [false, false, false, false],
            [false, true, false, false],
        ];
        let mut last = None;
        for (k, fails) in plan.iter().enumerate() {
            let r = run(
                k as i64,
                &[
                    ("a", "gfx1030", fails[0]),
                    ("a", "gfx1151", fails[1]),
                    ("b", "gfx1030", fails[2]),
                    ("b", "gfx1151", fails[3]),
                ],
            );
            h.record(&r).unwrap();
            last = Some(r);
        }
        let past = read(&mut h, &Reported::of_record(last.as_ref().unwrap()), true).unwrap();
        let t = past.test("a.gfx1151", "Q.D").unwrap();
        assert_eq!(t.kind, Kind::Flaky);
        assert_eq!(t.words, "flaky (2 of 4 runs), only where gfx=gfx1151");
        assert_eq!(t.strip, "✗✓✓✗");
        assert_eq!(past.tests.len(), 1, "only the tests failing now");
        assert_eq!(past.cells["b.gfx1151"].len(), 4);
        assert!(
            past.text.contains("1 failing test: 1 flaky"),
            "{}",
            past.text
        );
    }

    #[test]
    fn a_schema_1_history_moves_to_3_and_reads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        let loc = Location::Sqlite(path.clone());
        let plan = [[false, true], [true, true], [false, false], [false, true]];
        let mut last = None;
        {
            let mut h = History::open(&loc).unwrap();
            for (k, fails) in plan.iter().enumerate() {
                let r = run(
                    k as i64,
                    &[("a", "gfx1030", fails[0]), ("a", "gfx1151", fails[1])],
                );
                h.record(&r).unwrap();
                last = Some(r);
            }
        }
        let last = last.unwrap();
        let now = read(
            &mut History::open(&loc).unwrap(),
            &Reported::of_record(&last),
            false,
        )
        .unwrap();
        // What version 1 had: the rows, no failsets, no cells' hosts.
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch(
            "DROP TABLE failsets; ALTER TABLE cells DROP COLUMN host;
             UPDATE meta SET value = '1' WHERE key = 'schema_version';",
        )
        .unwrap();
        drop(db);
        let moved = read(
            &mut History::open(&loc).unwrap(),
            &Reported::of_record(&last),
            false,
        )
        .unwrap();
        let db = rusqlite::Connection::open(&path).unwrap();
        let (version, sets): (String, i64) = db
            .query_row(
                "SELECT (SELECT value FROM meta WHERE key = 'schema_version'),
                        (SELECT count(*) FROM failsets)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((version.as_str(), sets), ("3", 4));
        let t = moved.test("a.gfx1151", "Q.D").unwrap();
        assert_eq!(t.strip, "✗✗✓✗");
        assert_eq!(moved.text, now.text);
        assert_eq!(
            format!("{:?}", moved.test("a.gfx1151", "Q.D")),
            format!("{:?}", now.test("a.gfx1151", "Q.D"))
        );
    }

    #[test]
    fn a_test_failing_through_the_whole_window_may_have_begun_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = History::open(&Location::Sqlite(dir.path().join("h.sqlite"))).unwrap();
        let mut last = None;
        for k in 0..(WINDOW as i64 + 5) {
            let r = run(k, &[("a", "gfx1030", true)]);
            h.record(&r).unwrap();
            last = Some(r);
        }
        let past = read(&mut h, &Reported::of_record(last.as_ref().unwrap()), true).unwrap();
        let t = past.test("a.gfx1030", "Q.D").unwrap();
        assert_eq!(t.kind, Kind::Known);
        assert!(
            t.words
                .starts_with("failing in all of the last 20 runs, since run-5 (")
                && t.words.ends_with(") or earlier"),
            "{}",
            t.words
        );
        assert_eq!(t.strip, "✗".repeat(WINDOW));
        assert!(past.text.contains("(25 runs of m)"), "{}", past.text);
    }
}
