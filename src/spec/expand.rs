//! Matrix expansion with exactly GitHub Actions' rules.
//!
//! 1. The Cartesian product of the axes, first axis outermost.
//! 2. `exclude` drops every combination that matches all pairs of an entry.
//! 3. Each `include` entry, in order, is merged into every *original*
//!    combination whose axis values it does not contradict (keys added by an
//!    earlier include may be overwritten, axis values never are); when it fits
//!    none, it is appended as a new combination. Combinations created by an
//!    include never receive later includes.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use super::{Spec, SpecError};

/// Where a combination came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// From the product of the axes.
    Product,
    /// Created by the include entry with this index.
    Include(usize),
}

/// One expanded combination: ordered key/value pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Combination {
    pub values: Vec<(String, String)>,
    pub origin: Origin,
}

impl Combination {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// How many combinations the product may have before `exclude`, relative to
/// `max_cells`; beyond this even enumerating them would take too long.
const PRODUCT_SLACK: usize = 100;

/// The most key/value pairs all combinations together may hold, per cell
/// that `--max-cells` allows (at least the default's). Include entries add
/// their keys to every combination they fit, so 1,000 entries over 4,096
/// cells could make four million; the plan, its JSON and every cell's
/// template context grow with this number. 64 pairs per cell is far beyond
/// any real matrix.
pub const VALUES_PER_CELL: usize = 64;

/// The pair limit for `max_cells` (see [`VALUES_PER_CELL`]).
pub fn max_values(max_cells: usize) -> usize {
    VALUES_PER_CELL.saturating_mul(max_cells.max(super::DEFAULT_MAX_CELLS))
}

/// Expands `spec` into combinations, refusing more than `max_cells`.
///
/// The work is linear in the size of the result: excludes are looked up by
/// hash (grouped by the axes they name), include entries compare axis
/// values by position, and the keys an include adds are found by hash.
pub fn expand(spec: &Spec, max_cells: usize) -> Result<Vec<Combination>, SpecError> {
    let too_many = |n: String| {
        SpecError::new(
            &spec.file,
            spec.axes.first().map(|a| a.pos),
            format!("the matrix expands to {n} cells, more than --max-cells {max_cells}; narrow it or raise --max-cells"),
        )
    };
    let max_values = max_values(max_cells);
    let too_many_values = |pos| {
        SpecError::new(
            &spec.file,
            Some(pos),
            format!(
                "the matrix's cells would hold more than {max_values} key/value pairs in all \
                 ({VALUES_PER_CELL} per cell --max-cells allows; include entries add their keys \
                 to every cell they fit); use fewer include keys, or raise --max-cells"
            ),
        )
    };
    let product = spec
        .axes
        .iter()
        .try_fold(1usize, |acc, a| acc.checked_mul(a.values.len()));
    let limit = if spec.exclude.is_empty() {
        max_cells
    } else {
        max_cells.saturating_mul(PRODUCT_SLACK)
    };
    match product {
        Some(n) if n <= limit => {}
        Some(n) if spec.exclude.is_empty() => return Err(too_many(n.to_string())),
        Some(n) => return Err(too_many(format!("{n} (before exclude)"))),
        None => return Err(too_many("more than 2^64".into())),
    }

    let axis_index: HashMap<&str, usize> = spec
        .axes
        .iter()
        .enumerate()
        .map(|(i, a)| (a.name.as_str(), i))
        .collect();
    let value_index: Vec<HashMap<&str, usize>> = spec
        .axes
        .iter()
        .map(|a| {
            a.values
                .iter()
                .enumerate()
                .map(|(i, v)| (v.as_str(), i))
                .collect()
        })
        .collect();
    let excludes = Excludes::new(spec, &axis_index, &value_index);
    let n_axes = spec.axes.len();
    let mut values_held = 0usize;

    let mut combos: Vec<Combination> = Vec::new();
    // The original combinations' value indices, n_axes per combination, and
    // per axis and value the combinations that have it.
    let mut held: Vec<u32> = Vec::new();
    let mut having: Vec<HashMap<usize, Vec<u32>>> = vec![HashMap::new(); n_axes];
    if !spec.axes.is_empty() {
        let mut idx = vec![0usize; n_axes];
        let mut key = Vec::with_capacity(n_axes);
        'product: loop {
            if !excludes.matches(&idx, &mut key) {
                let values: Vec<(String, String)> = spec
                    .axes
                    .iter()
                    .zip(&idx)
                    .map(|(a, &i)| (a.name.clone(), a.values[i].clone()))
                    .collect();
                for (a, &i) in idx.iter().enumerate() {
                    having[a].entry(i).or_default().push(combos.len() as u32);
                    held.push(i as u32);
                }
                combos.push(Combination {
                    values,
                    origin: Origin::Product,
                });
                if combos.len() > max_cells {
                    return Err(too_many(format!("more than {max_cells}")));
                }
                values_held += n_axes;
                if values_held > max_values {
                    return Err(too_many_values(spec.axes[0].pos));
                }
            }
            // Odometer: the last axis turns fastest.
            for pos in (0..idx.len()).rev() {
                idx[pos] += 1;
                if idx[pos] < spec.axes[pos].values.len() {
                    continue 'product;
                }
                idx[pos] = 0;
            }
            break;
        }
    }

    let originals = combos.len();
    // Where an original combination holds an include-added key: (combination, key) → index.
    let mut key_ids: HashMap<&str, u32> = HashMap::new();
    let mut added: HashMap<(u32, u32), u32> = HashMap::new();
    for (n, inc) in spec.include.iter().enumerate() {
        // (axis, value index) of each axis pair; a value the axis lacks fits nothing.
        let mut axis_pairs: Vec<(usize, usize)> = Vec::new();
        let mut fits_none = false;
        let mut extra: Vec<(u32, &str, &str)> = Vec::new();
        for (k, v) in &inc.pairs {
            match axis_index.get(k.as_str()) {
                Some(&a) => match value_index[a].get(v.as_str()) {
                    Some(&i) => axis_pairs.push((a, i)),
                    None => fits_none = true,
                },
                None => {
                    let next = key_ids.len() as u32;
                    let id = *key_ids.entry(k.as_str()).or_insert(next);
                    extra.push((id, k, v));
                }
            }
        }
        // The originals to look at: those having the rarest of the entry's
        // axis values (all of them when it names no axis).
        let all: Vec<u32>;
        let candidates: &[u32] = if fits_none {
            &[]
        } else {
            match axis_pairs
                .iter()
                .map(|(a, i)| having[*a].get(i).map_or(&[][..], Vec::as_slice))
                .min_by_key(|l| l.len())
            {
                Some(list) => list,
                None => {
                    all = (0..originals as u32).collect();
                    &all
                }
            }
        };
        let mut matched = false;
        for &ci in candidates {
            let at = ci as usize * n_axes;
            if !axis_pairs.iter().all(|(a, i)| held[at + a] as usize == *i) {
                continue;
            }
            let c = &mut combos[ci as usize];
            matched = true;
            for &(id, k, v) in &extra {
                match added.entry((ci, id)) {
                    Entry::Occupied(at) => c.values[*at.get() as usize].1 = v.to_string(),
                    Entry::Vacant(slot) => {
                        slot.insert(c.values.len() as u32);
                        c.values.push((k.to_string(), v.to_string()));
                        values_held += 1;
                        if values_held > max_values {
                            return Err(too_many_values(inc.pos));
                        }
                    }
                }
            }
        }
        if !matched {
            combos.push(Combination {
                values: inc.pairs.clone(),
                origin: Origin::Include(n),
            });
            if combos.len() > max_cells {
                return Err(too_many(format!("more than {max_cells}")));
            }
            values_held += inc.pairs.len();
            if values_held > max_values {
                return Err(too_many_values(inc.pos));
            }
        }
    }
    Ok(combos)
}

/// The exclude entries as sets of value indices, grouped by the axes they
/// name: a combination is excluded when, for some group, its values on
/// those axes are in the group's set.
struct Excludes {
    groups: Vec<(Vec<usize>, HashSet<Vec<usize>>)>,
}

impl Excludes {
    fn new(
        spec: &Spec,
        axis_index: &HashMap<&str, usize>,
        value_index: &[HashMap<&str, usize>],
    ) -> Excludes {
        let mut by_axes: HashMap<Vec<usize>, HashSet<Vec<usize>>> = HashMap::new();
        'entry: for e in &spec.exclude {
            let mut pairs: Vec<(usize, usize)> = Vec::with_capacity(e.pairs.len());
            for (k, v) in &e.pairs {
                // A key that is no axis, or a value the axis lacks, matches nothing.
                let Some(&a) = axis_index.get(k.as_str()) else {
                    continue 'entry;
                };
                let Some(&i) = value_index[a].get(v.as_str()) else {
                    continue 'entry;
                };
                pairs.push((a, i));
            }
            pairs.sort_unstable();
            pairs.dedup();
            let (axes, values): (Vec<usize>, Vec<usize>) = pairs.into_iter().unzip();
            by_axes.entry(axes).or_default().insert(values);
        }
        Excludes {
            groups: by_axes.into_iter().collect(),
        }
    }

    /// Whether the combination with value indices `idx` is excluded.
    fn matches(&self, idx: &[usize], key: &mut Vec<usize>) -> bool {
        self.groups.iter().any(|(axes, set)| {
            key.clear();
            key.extend(axes.iter().map(|&a| idx[a]));
            set.contains(key)
        })
    }
}
