//! Following tests across the recorded runs: which runs a scope covers,
//! each cell's runs in order, each followed test's rows, and from them one
//! [`Point`] per run of its cell — its own row where it did not simply
//! pass, else passed when the cell's passing set has its hash.
//!
//! The rows are gathered with as little copying as a row allows: keyed by
//! (matrix, cell, test) moved out of the row, held in run order. A report's
//! window reads failsets instead of rows, in [`super::window`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::backend::{Backend, DbError, Rows, RunRow, StoredCell, StoredTest};
use super::verdict::{self, Obs, Point};
use super::{Scope, TestHistory};

/// (matrix, cell) → the cell in each run it ran in, in run order.
pub type CellRuns = BTreeMap<(String, String), Vec<(usize, StoredCell)>>;

/// A followed test's rows, by run index, in run order.
type ByRun = Vec<(usize, Seen)>;

/// What a followed test's row says.
#[derive(Debug)]
struct Seen {
    hash: u64,
    obs: Obs,
    /// Signature and message, when the row has either.
    detail: Option<Box<(String, String)>>,
}

impl Seen {
    fn of(t: StoredTest) -> Seen {
        let detail = (!t.signature.is_empty() || !t.message.is_empty())
            .then(|| Box::new((t.signature, t.message)));
        Seen {
            hash: t.hash,
            obs: Obs::of_recorded(t.outcome),
            detail,
        }
    }
}

/// (matrix index, cell, test).
type Key = (usize, String, String);

/// The runs `scope` covers, by start time, and how many of the scope's
/// runs came before them (a window's cut).
pub fn window(runs: Vec<RunRow>, scope: Scope<'_>) -> (Vec<RunRow>, usize) {
    let mut runs = runs;
    let Scope::Recent {
        matrix,
        until,
        last,
        ..
    } = scope
    else {
        return (runs, 0);
    };
    runs.retain(|r| r.name == matrix);
    if let Some(at) = runs.iter().position(|r| r.run == until) {
        runs.truncate(at + 1);
    }
    let earlier = runs.len().saturating_sub(last);
    runs.drain(..earlier);
    (runs, earlier)
}

/// The cells of `runs`, each with its runs in order.
pub fn cells_of(cells: Vec<StoredCell>, runs: &[RunRow]) -> CellRuns {
    let order: HashMap<&str, usize> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| (r.run.as_str(), i))
        .collect();
    let mut out: CellRuns = BTreeMap::new();
    for c in cells {
        if let Some(&i) = order.get(c.run.as_str()) {
            out.entry((runs[i].name.clone(), c.cell.clone()))
                .or_default()
                .push((i, c));
        }
    }
    for v in out.values_mut() {
        v.sort_by_key(|(i, _)| *i);
    }
    out
}

/// The followed rows of `runs`, and the matrices' names their keys index.
struct Gathered {
    matrices: Vec<String>,
    rows: HashMap<Key, ByRun>,
}

/// Reads the rows `scope` selects and keys them.
fn gather(
    backend: &mut dyn Backend,
    runs: &[RunRow],
    scope: Scope<'_>,
) -> Result<Gathered, DbError> {
    let (matrices, order) = index_runs(runs);
    let mut rows: HashMap<Key, ByRun> = HashMap::new();
    let which = match scope {
        Scope::Test(t) => Rows::Named(t),
        _ => Rows::All,
    };
    for mut t in backend.tests(which)? {
        let Some(&(i, m)) = order.get(t.run.as_str()) else {
            continue;
        };
        let key = (m, std::mem::take(&mut t.cell), std::mem::take(&mut t.test));
        rows.entry(key).or_default().push((i, Seen::of(t)));
    }
    for v in rows.values_mut() {
        // Rows of one run and cell are one per test: keep the run order.
        v.sort_by_key(|(i, _)| *i);
        v.dedup_by_key(|(i, _)| *i);
    }
    Ok(Gathered { matrices, rows })
}

/// The matrices' names, and each run's (place, matrix index) by id.
fn index_runs(runs: &[RunRow]) -> (Vec<String>, HashMap<&str, (usize, usize)>) {
    let mut matrices: Vec<String> = Vec::new();
    let mut matrix_of: HashMap<&str, usize> = HashMap::new();
    let mut order: HashMap<&str, (usize, usize)> = HashMap::new();
    for (i, r) in runs.iter().enumerate() {
        let m = *matrix_of.entry(r.name.as_str()).or_insert_with(|| {
            matrices.push(r.name.clone());
            matrices.len() - 1
        });
        order.insert(r.run.as_str(), (i, m));
    }
    (matrices, order)
}

/// Every test `scope` selects, followed through every run of its cell and
/// judged, in (matrix, cell, test) order; then, for a test asked for by
/// name or found flaky, every other cell of its matrix that ran it.
pub fn follow(
    backend: &mut dyn Backend,
    runs: &[RunRow],
    cells: &CellRuns,
    scope: Scope<'_>,
) -> Result<Vec<TestHistory>, DbError> {
    if let Scope::Recent { matrix, hashes, .. } = scope {
        return super::window::follow_window(backend, runs, matrix, cells, hashes);
    }
    let Gathered { matrices, rows } = gather(backend, runs, scope)?;
    let mut keys: Vec<&Key> = rows.keys().collect();
    keys.sort_by(|a, b| (&matrices[a.0], &a.1, &a.2).cmp(&(&matrices[b.0], &b.1, &b.2)));
    // A test's identity hash: its first row's, in the last of its cells
    // (in key order).
    let mut hash_of: HashMap<(usize, &str), u64> = HashMap::new();
    for k in &keys {
        if let Some((_, r)) = rows[*k].first() {
            hash_of.insert((k.0, k.2.as_str()), r.hash);
        }
    }
    let mut sets: HashMap<String, Vec<u64>> = HashMap::new();
    let mut out = Vec::new();
    // First the cells where each test failed.
    for k in &keys {
        let (m, cell, test) = (&matrices[k.0], &k.1, &k.2);
        let Some(ran) = cells.get(&(m.clone(), cell.clone())) else {
            continue;
        };
        let by_run = &rows[*k];
        let row = |i: usize| {
            by_run
                .binary_search_by_key(&i, |(k, _)| *k)
                .ok()
                .map(|at| by_run[at].1.obs)
        };
        let points = follow_one(backend, &mut sets, ran, row, hash_of[&(k.0, test.as_str())])?;
        let last = by_run.last().and_then(|(_, t)| t.detail.as_deref());
        out.extend(history_of(m, cell, test, ran, last, points));
    }
    // Then, for a test asked for by name or found flaky, every other cell
    // of its matrix that ran it: where it never failed counts too
    // (`history show`, and where a flaky test is flaky). Following every
    // failing test into every cell would cost runs × cells × tests.
    let widen: BTreeSet<(usize, &str)> = match scope {
        Scope::Test(_) => hash_of.keys().copied().collect(),
        _ => {
            let flaky: HashSet<(&str, &str)> = out
                .iter()
                .filter(|t| t.verdict.is_flaky())
                .map(|t| (t.matrix.as_str(), t.test.as_str()))
                .collect();
            hash_of
                .keys()
                .filter(|(m, t)| flaky.contains(&(matrices[*m].as_str(), *t)))
                .copied()
                .collect()
        }
    };
    let mut widened = Vec::new();
    let mut widen: Vec<(usize, &str)> = widen.into_iter().collect();
    widen.sort_by(|a, b| (&matrices[a.0], a.1).cmp(&(&matrices[b.0], b.1)));
    for (m, test) in widen {
        let hash = hash_of[&(m, test)];
        let matrix = &matrices[m];
        for ((_, cell), ran) in cells.iter().filter(|((x, _), _)| x == matrix) {
            if rows.contains_key(&(m, cell.clone(), test.to_string())) {
                continue;
            }
            let points = follow_one(backend, &mut sets, ran, |_| None, hash)?;
            widened.extend(history_of(matrix, cell, test, ran, None, points));
        }
    }
    out.extend(widened);
    Ok(out)
}

/// A test's outcome in each run of its cell: its row's (`row` of the run's
/// index) where it did not simply pass, else passed when the cell's passing
/// set has its hash.
pub(super) fn follow_one(
    backend: &mut dyn Backend,
    sets: &mut HashMap<String, Vec<u64>>,
    ran: &[(usize, StoredCell)],
    row: impl Fn(usize) -> Option<Obs>,
    hash: u64,
) -> Result<Vec<Point>, DbError> {
    let mut points = Vec::with_capacity(ran.len());
    for (i, c) in ran {
        let obs = match row(*i) {
            Some(obs) => obs,
            None => {
                if !sets.contains_key(&c.passed) {
                    let set = backend.passset(&c.passed)?;
                    sets.insert(c.passed.clone(), set);
                }
                if sets[&c.passed].binary_search(&hash).is_ok() {
                    Obs::Pass
                } else {
                    Obs::Absent
                }
            }
        };
        points.push(Point {
            run: *i,
            inputs: Arc::clone(&c.inputs),
            obs,
            host: Arc::clone(&c.host),
        });
    }
    Ok(points)
}

/// The followed test, judged, with its latest row's signature and message
/// (`last`); `None` when its cell never ran it.
pub(super) fn history_of(
    matrix: &str,
    cell: &str,
    test: &str,
    ran: &[(usize, StoredCell)],
    last: Option<&(String, String)>,
    points: Vec<Point>,
) -> Option<TestHistory> {
    if points.iter().all(|p| p.obs == Obs::Absent) {
        return None;
    }
    Some(TestHistory {
        verdict: verdict::judge(&points),
        axes: ran
            .last()
            .map(|(_, c)| Arc::clone(&c.axes))
            .unwrap_or_default(),
        signature: last.map(|(s, _)| s.clone()).unwrap_or_default(),
        message: last.map(|(_, m)| m.clone()).unwrap_or_default(),
        matrix: matrix.to_string(),
        cell: cell.to_string(),
        test: test.to_string(),
        points,
    })
}
