//! Matrix expansion with exactly GitHub Actions' rules.
//!
//! 1. The Cartesian product of the axes, first axis outermost.
//! 2. `exclude` drops every combination that matches all pairs of an entry.
//! 3. Each `include` entry, in order, is merged into every *original*
//!    combination whose axis values it does not contradict (keys added by an
//!    earlier include may be overwritten, axis values never are); when it fits
//!    none, it is appended as a new combination. Combinations created by an
//!    include never receive later includes.

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

    fn set(&mut self, key: &str, value: &str) {
        match self.values.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value.to_string(),
            None => self.values.push((key.to_string(), value.to_string())),
        }
    }
}

/// How many combinations the product may have before `exclude`, relative to
/// `max_cells`; beyond this even enumerating them would take too long.
const PRODUCT_SLACK: usize = 100;

/// Expands `spec` into combinations, refusing more than `max_cells`.
pub fn expand(spec: &Spec, max_cells: usize) -> Result<Vec<Combination>, SpecError> {
    let too_many = |n: String| {
        SpecError::new(
            &spec.file,
            spec.axes.first().map(|a| a.pos),
            format!("the matrix expands to {n} cells, more than --max-cells {max_cells}; narrow it or raise --max-cells"),
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

    let mut combos: Vec<Combination> = Vec::new();
    if !spec.axes.is_empty() {
        let mut idx = vec![0usize; spec.axes.len()];
        'product: loop {
            let values: Vec<(String, String)> = spec
                .axes
                .iter()
                .zip(&idx)
                .map(|(a, &i)| (a.name.clone(), a.values[i].clone()))
                .collect();
            let excluded = spec.exclude.iter().any(|e| {
                e.pairs
                    .iter()
                    .all(|(k, v)| values.iter().any(|(ck, cv)| ck == k && cv == v))
            });
            if !excluded {
                combos.push(Combination {
                    values,
                    origin: Origin::Product,
                });
                if combos.len() > max_cells {
                    return Err(too_many(format!("more than {max_cells}")));
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
    for (n, inc) in spec.include.iter().enumerate() {
        let mut matched = false;
        for c in combos[..originals].iter_mut() {
            let fits = inc
                .pairs
                .iter()
                .all(|(k, v)| spec.axis(k).is_none() || c.get(k) == Some(v.as_str()));
            if fits {
                for (k, v) in &inc.pairs {
                    if spec.axis(k).is_none() {
                        c.set(k, v);
                    }
                }
                matched = true;
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
        }
    }
    Ok(combos)
}
