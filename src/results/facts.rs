//! Environment facts: per environment image, the versions that decide what a
//! cell ran — the HIP runtime, LLVM/clang and the ROCm libraries — taken
//! from the run's `lock.json`, so a report can say "ROCm 6.4.3, LLVM 21.1.8"
//! where the matrix only says `suite=sid`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::plan::glob::matches;
use crate::plan::Cell;
use crate::store::lock::{BaseOrigin, Lock};

/// Packages shown by default: the HIP runtime and compiler, LLVM/clang, the
/// HSA runtime and the ROCm libraries as Debian and Ubuntu name them.
pub const DEFAULT_PACKAGES: &[&str] = &[
    "libamdhip64*",
    "hipcc",
    "clang-?",
    "clang-??",
    "llvm-?",
    "llvm-??",
    "libllvm*",
    "libhsa-runtime64*",
    "rocm*",
    "libroc*",
    "libhip*",
    "libmiopen*",
    "librccl*",
];

/// Packages listed per environment at most.
const MAX_PACKAGES: usize = 60;

/// One environment image and the versions that matter in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentFacts {
    /// The environment hash, short form.
    pub environment: String,
    /// The base image reference (`debian:sid`).
    pub base: String,
    /// The cells that ran in it.
    pub cells: Vec<String>,
    /// Package → version, for the packages the globs select (without the
    /// `:arch` suffix).
    pub packages: BTreeMap<String, String>,
    /// What the environment is, whatever its hash: a digest of its family,
    /// base, suites and the packages it asks for ([`identity`]). Matches an
    /// environment of one run with the same one of another.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub identity: String,
    /// Every installed package → version (`packages` holds the selected ones).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub installed: BTreeMap<String, String>,
    /// The base image's id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub base_id: String,
    /// The `Date:` of the suite's Release file the base was bootstrapped from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_date: Option<String>,
    /// Build key → the id of its snapshot image.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub builds: BTreeMap<String, String>,
    /// `source (ref)` → commit, of the environment's builds and cells.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<String, String>,
    /// Source name → the URL it was fetched from (what a report reads the
    /// commits between two runs' commits from).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub source_urls: BTreeMap<String, String>,
}

/// What an environment is, independent of rocmatrix's hash of it (which
/// changes with the family's template, say): family, base, suite, added
/// suites, preferred suite, the packages asked for (sorted), LLVM flavour,
/// setup script and variables. Two runs' environments with the same
/// identity are "the same environment, maybe changed underneath".
pub fn identity(cell: &Cell) -> String {
    let Some(env) = &cell.environment else {
        return String::new();
    };
    let mut packages = env.packages.clone();
    packages.sort();
    let what = serde_json::json!({
        "family": env.family,
        "base": env.base,
        "suite": env.suite,
        "suites": env.suites,
        "prefer": env.prefer,
        "packages": packages,
        "llvm": env.llvm,
        "setup": env.setup,
        "env": env.env,
    });
    crate::digest::short(&crate::digest::sha256_hex(what.to_string().as_bytes())).to_string()
}

impl EnvironmentFacts {
    /// `libamdhip64-6 6.4.3-5, libllvm21 1:21.1.8-14, …`.
    pub fn summary(&self) -> String {
        self.packages
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The facts of every environment in `lock`, packages selected by `globs`;
/// `cells` (the plan's) give each environment its identity, and the
/// matrix's order: environments by their first cell, each one's cells as the
/// plan has them (bookworm before sid, gfx900 before gfx1100), not sorted
/// by hash or name as the lock keeps them.
pub fn from_lock(lock: &Lock, globs: &[&str], cells: &[Cell]) -> Vec<EnvironmentFacts> {
    let position = |id: &str| cells.iter().position(|c| c.id == id).unwrap_or(usize::MAX);
    let mut facts = unordered(lock, globs, cells);
    for f in &mut facts {
        f.cells.sort_by_key(|c| position(c));
    }
    facts.sort_by_key(|f| {
        f.cells
            .iter()
            .map(|c| position(c))
            .min()
            .unwrap_or(usize::MAX)
    });
    facts
}

/// [`from_lock`]'s facts in the lock's order.
fn unordered(lock: &Lock, globs: &[&str], cells: &[Cell]) -> Vec<EnvironmentFacts> {
    lock.environments
        .iter()
        .map(|(hash, env)| {
            let installed: BTreeMap<String, String> = env
                .packages
                .iter()
                .map(|(k, v)| (k.split(':').next().unwrap_or(k).to_string(), v.clone()))
                .collect();
            let packages = installed
                .iter()
                .filter(|(k, _)| globs.iter().any(|g| matches(g, k)))
                .take(MAX_PACKAGES)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let release_date = match &env.base.origin {
                BaseOrigin::Bootstrapped(b) => b.release_date.clone(),
                BaseOrigin::Present { bootstrapped: b }
                | BaseOrigin::Registry {
                    bootstrapped: b, ..
                } => b.as_ref().and_then(|b| b.release_date.clone()),
                BaseOrigin::Pulled | BaseOrigin::Imported { .. } => None,
            };
            let mut sources = BTreeMap::new();
            let mut source_urls = BTreeMap::new();
            let mut builds = BTreeMap::new();
            for (key, b) in lock.builds.iter().filter(|(_, b)| &b.environment == hash) {
                builds.insert(key.clone(), b.id.clone());
                for s in &b.sources {
                    sources.insert(format!("{} ({})", s.name, s.reference), s.commit.clone());
                    source_urls.insert(s.name.clone(), s.url.clone());
                }
            }
            for c in lock.cells.values().filter(|c| &c.environment == hash) {
                for s in &c.sources {
                    sources.insert(format!("{} ({})", s.name, s.reference), s.commit.clone());
                    source_urls.insert(s.name.clone(), s.url.clone());
                }
            }
            EnvironmentFacts {
                identity: cells
                    .iter()
                    .find(|c| &c.environment_hash == hash)
                    .map(identity)
                    .unwrap_or_default(),
                installed,
                base_id: env.base.id.clone(),
                release_date,
                builds,
                sources,
                source_urls,
                environment: crate::digest::short(hash).to_string(),
                base: env.base.reference.clone(),
                cells: lock
                    .cells
                    .iter()
                    .filter(|(_, c)| &c.environment == hash)
                    .map(|(id, _)| id.clone())
                    .collect(),
                packages,
            }
        })
        .collect()
}

/// The facts of a run directory's `lock.json`, packages selected by the
/// matrix file's `report.packages` globs (or [`DEFAULT_PACKAGES`]); a
/// problem reading it is a message, not an error (a run killed early has no
/// lock).
pub fn load(
    run_dir: &Path,
    packages: &[String],
    cells: &[Cell],
) -> (Vec<EnvironmentFacts>, Option<String>) {
    let path = crate::store::layout::lock_of(run_dir);
    if !path.is_file() {
        return (Vec::new(), None);
    }
    match Lock::load(&path) {
        Ok(lock) if packages.is_empty() => (from_lock(&lock, DEFAULT_PACKAGES, cells), None),
        Ok(lock) => {
            let globs: Vec<&str> = packages.iter().map(String::as_str).collect();
            (from_lock(&lock, &globs, cells), None)
        }
        Err(e) => (Vec::new(), Some(format!("environment facts: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environments_and_their_cells_come_in_the_matrix_order() {
        let text = "matrix:\n  suite: [bookworm, trixie, sid]\n  gfx: [gfx900, gfx1030, gfx1100]\n\
            environment:\n  family: debian\n  base: \"debian:{{ matrix.suite }}\"\n  packages: [hipcc]\n\
            steps:\n  - name: compile\n    run: hipcc --offload-arch={{ matrix.gfx }}\n";
        let spec = crate::matrix_file::Spec::parse(Path::new("m.yaml"), text)
            .unwrap_or_else(|e| panic!("{e}"));
        let plan = crate::plan::Plan::build(&spec, 100).unwrap_or_else(|e| panic!("{e}"));
        let mut environments = serde_json::Map::new();
        let mut cells = serde_json::Map::new();
        for c in &plan.cells {
            let base = format!("debian:{}", c.values[0].1);
            environments.insert(
                c.environment_hash.clone(),
                serde_json::json!({
                    "family": "debian",
                    "base": {"reference": base, "id": "sha256:x", "origin": {"how": "pulled"}},
                    "image": {"tag": "t", "id": "i", "reused": false},
                    "packages": {"hipcc": "1"}
                }),
            );
            cells.insert(
                c.id.clone(),
                serde_json::json!({"environment": c.environment_hash}),
            );
        }
        let lock: Lock = serde_json::from_value(serde_json::json!({
            "lock_version": 1, "rocmatrix_version": "0", "matrix_file": "m.yaml", "matrix_hash": "h",
            "environments": environments, "cells": cells
        }))
        .unwrap();
        let f = from_lock(&lock, DEFAULT_PACKAGES, &plan.cells);
        let bases: Vec<&str> = f.iter().map(|e| e.base.as_str()).collect();
        assert_eq!(bases, ["debian:bookworm", "debian:trixie", "debian:sid"]);
        assert_eq!(
            f[0].cells,
            ["bookworm.gfx900", "bookworm.gfx1030", "bookworm.gfx1100"]
        );
    }

    #[test]
    fn the_versions_that_matter_are_picked_from_the_lock() {
        let lock: Lock = serde_json::from_value(serde_json::json!({
            "lock_version": 1, "rocmatrix_version": "0", "matrix_file": "m.yaml", "matrix_hash": "h",
            "environments": {"61d5432b2ba0ffff": {
                "family": "debian",
                "base": {"reference": "debian:sid", "id": "sha256:x", "origin": {"how": "pulled"}},
                "image": {"tag": "t", "id": "i", "reused": false},
                "packages": {
                    "libamdhip64-6:amd64": "6.4.3-5", "libllvm21:amd64": "1:21.1.8-14",
                    "clang-21": "1:21.1.8-14", "clang-format": "1", "librocblas4": "6.4.4-4",
                    "bash": "5.3-4", "coreutils": "9.10-1"
                }
            }},
            "cells": {"sid.gfx1030": {"environment": "61d5432b2ba0ffff"}, "other": {"environment": "x"}}
        }))
        .unwrap();
        let f = from_lock(&lock, DEFAULT_PACKAGES, &[]);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].base, "debian:sid");
        assert_eq!(f[0].cells, ["sid.gfx1030"]);
        assert_eq!(
            f[0].summary(),
            "clang-21 1:21.1.8-14, libamdhip64-6 6.4.3-5, libllvm21 1:21.1.8-14, librocblas4 6.4.4-4"
        );
    }
}
