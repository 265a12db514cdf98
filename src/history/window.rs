//! Following a report's window ([`Scope::Recent`](super::Scope::Recent)):
//! the tests failing in the reported run, through the matrix's last runs,
//! read from each cell's `failset`. It gives the [`TestHistory`]s, in the
//! order, that [`super::follow::follow`] gives for the other scopes, but a
//! report pays for it on every run: 1,600 failing tests through 20 runs
//! are 32,000 entries, so cells and test names are numbered once (in name
//! order, so numbers sort as names do) and entries are grouped by number;
//! names are copied only into what is returned.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::backend::{Backend, DbError, RunRow};
use super::failset;
use super::follow::{follow_one, history_of, CellRuns};
use super::verdict::Obs;
use super::TestHistory;

/// One entry of a test's failset in a run: (run index, hash, outcome).
type Entry = (usize, u64, Obs);

/// Every test `hashes` names (identity hash → `classname.name`) in each
/// cell of matrix `matrix` whose failset has it in `runs`, followed and
/// judged, in (cell, test) order; then the flaky ones through the other
/// cells that ran them.
pub fn follow_window(
    backend: &mut dyn Backend,
    runs: &[RunRow],
    matrix: &str,
    cells: &CellRuns,
    hashes: &HashMap<u64, &str>,
) -> Result<Vec<TestHistory>, DbError> {
    let mut names: Vec<&str> = hashes.values().copied().collect();
    names.sort_unstable();
    names.dedup();
    let ids: Vec<String> = runs.iter().map(|r| r.run.clone()).collect();
    let sets = backend.failsets(&ids)?;
    let mut cell_names: Vec<&str> = sets.iter().map(|(_, c, _)| c.as_str()).collect();
    cell_names.sort_unstable();
    cell_names.dedup();
    let groups = group(&sets, runs, &names, &cell_names, hashes);
    let mut keys: Vec<(u32, u32)> = groups.keys().copied().collect();
    keys.sort_unstable();
    // A test's identity hash: its first row's, in the last of its cells.
    let mut hash_of: Vec<Option<u64>> = vec![None; names.len()];
    for k in &keys {
        if let Some((_, h, _)) = groups[k].first() {
            hash_of[k.1 as usize] = Some(*h);
        }
    }
    let ran_of: Vec<_> = cell_names
        .iter()
        .map(|c| cells.get(&(matrix.to_string(), c.to_string())))
        .collect();
    let mut passsets = HashMap::new();
    let mut out = Vec::new();
    let mut flaky = vec![false; names.len()];
    for (c, n) in &keys {
        let Some(ran) = ran_of[*c as usize] else {
            continue;
        };
        let by_run = &groups[&(*c, *n)];
        let row = |i: usize| {
            by_run
                .binary_search_by_key(&i, |(k, _, _)| *k)
                .ok()
                .map(|at| by_run[at].2)
        };
        let hash = hash_of[*n as usize].unwrap_or_default();
        let points = follow_one(backend, &mut passsets, ran, row, hash)?;
        let (cell, test) = (cell_names[*c as usize], names[*n as usize]);
        if let Some(t) = history_of(matrix, cell, test, ran, None, points) {
            flaky[*n as usize] |= t.verdict.is_flaky();
            out.push(t);
        }
    }
    // A flaky test's other cells: where it is flaky is found among them.
    for (n, test) in names.iter().enumerate().filter(|(n, _)| flaky[*n]) {
        let hash = hash_of[n].unwrap_or_default();
        for ((_, cell), ran) in cells.iter().filter(|((m, _), _)| m == matrix) {
            let numbered = cell_names.binary_search(&cell.as_str()).ok();
            if numbered.is_some_and(|c| groups.contains_key(&(c as u32, n as u32))) {
                continue;
            }
            let points = follow_one(backend, &mut passsets, ran, |_| None, hash)?;
            out.extend(history_of(matrix, cell, test, ran, None, points));
        }
    }
    Ok(out)
}

/// The failsets' entries of the tests `hashes` names, by (cell number,
/// name number), in run order: one per run (of two tests of one name, in
/// two suites, the lower hash's).
fn group(
    sets: &[(String, String, Vec<u8>)],
    runs: &[RunRow],
    names: &[&str],
    cell_names: &[&str],
    hashes: &HashMap<u64, &str>,
) -> HashMap<(u32, u32), Vec<Entry>, Quick> {
    let order: HashMap<&str, usize> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| (r.run.as_str(), i))
        .collect();
    let name_of: HashMap<u64, u32, Quick> = hashes
        .iter()
        .filter_map(|(h, n)| Some((*h, names.binary_search(n).ok()? as u32)))
        .collect();
    let obs: Vec<Obs> = (0..=u8::MAX)
        .map(|code| Obs::of_recorded(failset::status_of(code)))
        .collect();
    let mut groups: HashMap<(u32, u32), Vec<Entry>, Quick> = HashMap::default();
    for (run, cell, bytes) in sets {
        let (Some(&i), Ok(c)) = (
            order.get(run.as_str()),
            cell_names.binary_search(&cell.as_str()),
        ) else {
            continue;
        };
        for (hash, code) in failset::decode(bytes) {
            let Some(&n) = name_of.get(&hash) else {
                continue;
            };
            groups
                .entry((c as u32, n))
                .or_insert_with(|| Vec::with_capacity(runs.len()))
                .push((i, hash, obs[code as usize]));
        }
    }
    for v in groups.values_mut() {
        v.sort_unstable_by_key(|(i, h, _)| (*i, *h));
        v.dedup_by_key(|(i, _, _)| *i);
    }
    groups
}

/// Hashing for keys that are numbers already spread (test identity hashes)
/// or small (cell and name numbers): one multiply a word, as rustc's own
/// `FxHasher`, instead of SipHash's rounds on every one of the window's
/// entries.
type Quick = BuildHasherDefault<QuickHasher>;

#[derive(Default)]
struct QuickHasher(u64);

impl Hasher for QuickHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
