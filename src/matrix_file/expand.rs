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
    check_product(spec, max_cells)?;
    let mut e = Expansion::new(spec, max_cells);
    e.product()?;
    let mut added = Added::default();
    for (n, inc) in spec.include.iter().enumerate() {
        e.include(n, inc, &mut added)?;
    }
    Ok(e.combos)
}

fn too_many(spec: &Spec, max_cells: usize, n: String) -> SpecError {
    SpecError::new(
        &spec.file,
        spec.axes.first().map(|a| a.pos),
        format!("the matrix expands to {n} cells, more than --max-cells {max_cells}; narrow it or raise --max-cells"),
    )
}

fn too_many_values(spec: &Spec, max_values: usize, pos: super::Pos) -> SpecError {
    SpecError::new(
        &spec.file,
        Some(pos),
        format!(
            "the matrix's cells would hold more than {max_values} key/value pairs in all \
             ({VALUES_PER_CELL} per cell --max-cells allows; include entries add their keys \
             to every cell they fit); use fewer include keys, or raise --max-cells"
        ),
    )
}

/// Refuses a product of the axes that is too large before building it.
fn check_product(spec: &Spec, max_cells: usize) -> Result<(), SpecError> {
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
        Some(n) if n <= limit => Ok(()),
        Some(n) if spec.exclude.is_empty() => Err(too_many(spec, max_cells, n.to_string())),
        Some(n) => Err(too_many(spec, max_cells, format!("{n} (before exclude)"))),
        None => Err(too_many(spec, max_cells, "more than 2^64".into())),
    }
}

/// Where original combinations hold include-added keys.
#[derive(Default)]
struct Added<'s> {
    key_ids: HashMap<&'s str, u32>,
    /// (combination, key id) → index in the combination's values.
    at: HashMap<(u32, u32), u32>,
}

/// The expansion in progress.
struct Expansion<'s> {
    spec: &'s Spec,
    max_cells: usize,
    max_values: usize,
    values_held: usize,
    axis_index: HashMap<&'s str, usize>,
    value_index: Vec<HashMap<&'s str, usize>>,
    combos: Vec<Combination>,
    /// The original combinations' value indices, one per axis each.
    held: Vec<u32>,
    /// Per axis and value index, the original combinations that have it.
    having: Vec<HashMap<usize, Vec<u32>>>,
    originals: usize,
}

impl<'s> Expansion<'s> {
    fn new(spec: &'s Spec, max_cells: usize) -> Self {
        Expansion {
            spec,
            max_cells,
            max_values: max_values(max_cells),
            values_held: 0,
            axis_index: spec
                .axes
                .iter()
                .enumerate()
                .map(|(i, a)| (a.name.as_str(), i))
                .collect(),
            value_index: spec
                .axes
                .iter()
                .map(|a| {
                    a.values
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (v.as_str(), i))
                        .collect()
                })
                .collect(),
            combos: Vec::new(),
            held: Vec::new(),
            having: vec![HashMap::new(); spec.axes.len()],
            originals: 0,
        }
    }

    /// The axes' product, in order, without the excluded combinations.
    fn product(&mut self) -> Result<(), SpecError> {
        let spec = self.spec;
        let n_axes = spec.axes.len();
        if n_axes == 0 {
            return Ok(());
        }
        let excludes = Excludes::new(spec, &self.axis_index, &self.value_index);
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
                    let n = self.combos.len() as u32;
                    self.having[a].entry(i).or_default().push(n);
                    self.held.push(i as u32);
                }
                self.push(values, Origin::Product, spec.axes[0].pos)?;
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
        self.originals = self.combos.len();
        Ok(())
    }

    /// Adds a combination, counting it and its values against the limits.
    fn push(
        &mut self,
        values: Vec<(String, String)>,
        origin: Origin,
        pos: super::Pos,
    ) -> Result<(), SpecError> {
        self.values_held += values.len();
        self.combos.push(Combination { values, origin });
        if self.combos.len() > self.max_cells {
            let n = format!("more than {}", self.max_cells);
            return Err(too_many(self.spec, self.max_cells, n));
        }
        if self.values_held > self.max_values {
            return Err(too_many_values(self.spec, self.max_values, pos));
        }
        Ok(())
    }

    /// Include entry `n`: merged into every original combination it fits,
    /// or a new combination when it fits none.
    fn include(
        &mut self,
        n: usize,
        inc: &'s super::Entry,
        added: &mut Added<'s>,
    ) -> Result<(), SpecError> {
        let n_axes = self.spec.axes.len();
        // (axis, value index) of each axis pair; a value the axis lacks fits nothing.
        let mut axis_pairs: Vec<(usize, usize)> = Vec::new();
        let mut fits_none = false;
        let mut extra: Vec<(u32, &str, &str)> = Vec::new();
        for (k, v) in &inc.pairs {
            match self.axis_index.get(k.as_str()) {
                Some(&a) => match self.value_index[a].get(v.as_str()) {
                    Some(&i) => axis_pairs.push((a, i)),
                    None => fits_none = true,
                },
                None => {
                    let next = added.key_ids.len() as u32;
                    let id = *added.key_ids.entry(k.as_str()).or_insert(next);
                    extra.push((id, k, v));
                }
            }
        }
        // The originals to look at: those having the rarest of the entry's
        // axis values (all of them when it names no axis).
        let candidates: Vec<u32> = if fits_none {
            Vec::new()
        } else {
            match axis_pairs
                .iter()
                .map(|(a, i)| self.having[*a].get(i).map_or(&[][..], Vec::as_slice))
                .min_by_key(|l| l.len())
            {
                Some(list) => list.to_vec(),
                None => (0..self.originals as u32).collect(),
            }
        };
        let mut matched = false;
        for ci in candidates {
            let at = ci as usize * n_axes;
            if !axis_pairs
                .iter()
                .all(|(a, i)| self.held[at + a] as usize == *i)
            {
                continue;
            }
            matched = true;
            for &(id, k, v) in &extra {
                let c = &mut self.combos[ci as usize];
                match added.at.entry((ci, id)) {
                    Entry::Occupied(at) => c.values[*at.get() as usize].1 = v.to_string(),
                    Entry::Vacant(slot) => {
                        slot.insert(c.values.len() as u32);
                        c.values.push((k.to_string(), v.to_string()));
                        self.values_held += 1;
                        if self.values_held > self.max_values {
                            return Err(too_many_values(self.spec, self.max_values, inc.pos));
                        }
                    }
                }
            }
        }
        if !matched {
            self.push(inc.pairs.clone(), Origin::Include(n), inc.pos)?;
        }
        Ok(())
    }
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
