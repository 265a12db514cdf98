//! A bisection over the packages that moved between two locks (a triage's
//! search when only packages moved): the moved packages in groups — those
//! that moved between the same two versions, as the binaries of one source
//! upload do — the groups that matter first. Point `k` of `N` groups is the
//! bad run's environment with groups `k+1..N` at the good run's versions:
//! point 0 is the good run's packages, point `N` the bad run's, and the first
//! bad point names the group that brought the failure. Each point is a
//! `--locked` rebuild of the environment (`crate::prepare::lock`), so an old
//! version the archive no longer serves makes its probe an error, said so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::store::lock::{Lock, LockedEnvironment, LOCK_VERSION};

/// One package's move: its version in the good run and in the bad one
/// (`None`: not installed there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad: Option<String>,
}

/// Packages that moved between the same two versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub packages: Vec<Moved>,
}

impl Group {
    /// `libfoo1, libfoo-dev 1.0-1 → 1.1-1`.
    pub fn label(&self) -> String {
        let names: Vec<&str> = self.packages.iter().map(|m| m.name.as_str()).collect();
        let first = &self.packages[0];
        let v = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
        format!(
            "{} {} → {}",
            names.join(", "),
            v(&first.good),
            v(&first.bad)
        )
    }
}

/// What a package bisection carries to its probes (kept in `bisect.json`,
/// so that a resumed bisection needs neither run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageSpace {
    /// The environment's hash.
    pub environment: String,
    /// The bad run's locked environment.
    pub bad: LockedEnvironment,
    pub groups: Vec<Group>,
}

/// The groups of the packages of `cell`'s environment that moved from
/// `good` to `bad`, those whose names `matters` first, then by name; `None`
/// when the cell or its environment is missing from either lock or nothing
/// moved.
pub fn space(
    good: &Lock,
    bad: &Lock,
    cell: &str,
    matters: impl Fn(&str) -> bool,
) -> Option<PackageSpace> {
    let env = |l: &Lock| {
        let c = l.cells.get(cell)?;
        Some((
            c.environment.clone(),
            l.environments.get(&c.environment)?.clone(),
        ))
    };
    let ((_, before), (hash, now)) = (env(good)?, env(bad)?);
    let mut by_move: BTreeMap<(Option<String>, Option<String>), Vec<Moved>> = BTreeMap::new();
    for (name, g, b) in crate::image::packages::changes(&before.packages, &now.packages) {
        by_move
            .entry((g.clone(), b.clone()))
            .or_default()
            .push(Moved {
                name,
                good: g,
                bad: b,
            });
    }
    // A group matters when one of its packages does.
    let mut groups: Vec<(bool, Group)> = by_move
        .into_values()
        .map(|packages| {
            // In name order, as changes() gives them.
            let later = !packages.iter().any(|m| matters(&m.name));
            (later, Group { packages })
        })
        .collect();
    groups.sort_by(|a, b| (a.0, &a.1.packages[0].name).cmp(&(b.0, &b.1.packages[0].name)));
    (!groups.is_empty()).then(|| PackageSpace {
        environment: hash,
        bad: now,
        groups: groups.into_iter().map(|(_, g)| g).collect(),
    })
}

impl PackageSpace {
    /// The points' values: the baseline's packages, then each group as it
    /// joins.
    pub fn point_values(&self) -> Vec<String> {
        let mut v = vec!["the baseline's packages".to_string()];
        v.extend(self.groups.iter().map(Group::label));
        v
    }

    /// The lock point `k` is rebuilt from: the bad run's environment with
    /// the groups after the `k`th at the good run's versions. Its image is
    /// always rebuilt (never pulled at the bad run's digest).
    pub fn lock_for(&self, k: usize, matrix_file: &str, matrix_hash: &str) -> Lock {
        let mut env = self.bad.clone();
        env.image.registry = None;
        for m in self.groups.iter().skip(k).flat_map(|g| &g.packages) {
            match &m.good {
                Some(v) => env.packages.insert(m.name.clone(), v.clone()),
                None => env.packages.remove(&m.name),
            };
        }
        Lock {
            lock_version: LOCK_VERSION,
            rocmatrix_version: env!("CARGO_PKG_VERSION").to_string(),
            matrix_file: matrix_file.to_string(),
            matrix_hash: matrix_hash.to_string(),
            environments: BTreeMap::from([(self.environment.clone(), env)]),
            cells: BTreeMap::new(),
            builds: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::lock::LockedCell;

    fn lock(packages: &[(&str, &str)]) -> Lock {
        let text = serde_json::json!({
            "lock_version": LOCK_VERSION, "rocmatrix_version": "0", "matrix_file": "m.yaml",
            "matrix_hash": "h",
            "environments": {"e1": {"family": "debian",
                "base": {"reference": "debian:sid", "id": "sha256:b", "origin": {"how": "pulled"}},
                "image": {"tag": "rocmatrix/env:1", "id": "sha256:i", "reused": false,
                          "registry": "127.0.0.1:5000/rocmatrix/env@sha256:d"},
                "packages": packages.iter().map(|(n, v)| (n.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>()}},
            "cells": {"c": LockedCell { environment: "e1".into(), ..Default::default() }},
        });
        serde_json::from_value(text).unwrap()
    }

    #[test]
    fn packages_that_moved_together_are_one_group_and_the_ones_that_matter_come_first() {
        let good = lock(&[
            ("bash", "5.2-1"),
            ("libamdhip64-6", "6.4.1-1"),
            ("hipcc", "6.4.1-1"),
            ("old", "1"),
        ]);
        let bad = lock(&[
            ("bash", "5.2-2"),
            ("libamdhip64-6", "6.4.3-1"),
            ("hipcc", "6.4.3-1"),
            ("new", "2"),
        ]);
        let s = space(&good, &bad, "c", |n| n.starts_with("lib")).unwrap();
        let labels: Vec<String> = s.groups.iter().map(Group::label).collect();
        assert_eq!(
            labels,
            [
                "hipcc, libamdhip64-6 6.4.1-1 → 6.4.3-1",
                "bash 5.2-1 → 5.2-2",
                "new none → 2",
                "old 1 → none",
            ]
        );
        assert_eq!(s.point_values().len(), 5);
        assert!(space(&good, &good, "c", |_| true).is_none());
        assert!(space(&good, &bad, "no-such-cell", |_| true).is_none());
    }

    #[test]
    fn point_k_keeps_the_first_k_groups_new_and_the_rest_old() {
        let good = lock(&[("a", "1"), ("b", "1"), ("gone", "1")]);
        let bad = lock(&[("a", "2"), ("b", "3"), ("added", "1")]);
        let s = space(&good, &bad, "c", |n| n == "a").unwrap();
        let pins = |k: usize| {
            s.lock_for(k, "m.yaml", "h").environments["e1"]
                .packages
                .clone()
        };
        let all_old = pins(0);
        assert_eq!(all_old, good.environments["e1"].packages);
        assert_eq!(pins(s.groups.len()), bad.environments["e1"].packages);
        let one = pins(1);
        assert_eq!((one["a"].as_str(), one["b"].as_str()), ("2", "1"));
        assert!(s.lock_for(0, "m", "h").environments["e1"]
            .image
            .registry
            .is_none());
        assert_ne!(
            s.lock_for(0, "m", "h").environments,
            s.lock_for(1, "m", "h").environments
        );
    }
}
