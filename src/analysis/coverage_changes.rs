//! gfx coverage changes: per library, the gfx targets it gained and lost —
//! against the baseline's environment of the same identity, and from one
//! environment of a run to the next along the matrix (trixie → experimental).
//! Libraries are matched by file name without its version suffix
//! (`librocfft.so.0.1` → `librocfft.so`), so a soname or install-path version
//! change is still the same library. A lost target that a cell of the later
//! environment asks for is a regression.

use std::collections::BTreeMap;

use crate::results::model::Results;
use crate::store::coverage::EnvironmentCoverage;

pub use crate::results::findings::{CoverageChange, StorageChange};

/// `/usr/lib/x86_64-linux-gnu/librocfft.so.0.1` → `librocfft.so`;
/// `libfoo-6.1.2.so` stays as it is (a version inside the name is part of it).
pub fn library_key(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.find(".so.") {
        Some(i)
            if name[i + 4..]
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.') =>
        {
            name[..i + 3].to_string()
        }
        _ => name.to_string(),
    }
}

/// One library key's targets, and how its device code is stored.
#[derive(Default)]
struct Library {
    targets: Vec<String>,
    /// `CCOB v3 zstd` …, distinct; empty: no compressed bundle.
    compression: Vec<String>,
    /// Targets only in compressed bundles.
    compressed: usize,
}

impl Library {
    /// `uncompressed`, `CCOB v3 zstd`, or `CCOB v3 zstd and uncompressed`;
    /// `None` without device code.
    fn storage(&self) -> Option<String> {
        if self.targets.is_empty() {
            return None;
        }
        let packed = self.compression.join(", ");
        Some(match (self.compression.is_empty(), self.compressed) {
            (true, _) => "uncompressed".to_string(),
            (false, n) if n >= self.targets.len() => packed,
            (false, _) => format!("{packed} and uncompressed"),
        })
    }
}

/// Per library key, its targets and storage (a key seen twice merges).
fn libraries(c: &EnvironmentCoverage) -> BTreeMap<String, Library> {
    let mut m: BTreeMap<String, Library> = BTreeMap::new();
    for l in &c.libraries {
        let lib = m.entry(library_key(&l.library)).or_default();
        for g in &l.targets {
            if !lib.targets.contains(g) {
                lib.targets.push(g.clone());
            }
        }
        for c in &l.compression {
            if !lib.compression.contains(c) {
                lib.compression.push(c.clone());
            }
        }
        lib.compressed += l.compressed.len();
    }
    m
}

/// The libraries whose targets differ from `before` to `after`, named
/// `from` and `to`, in library order.
pub fn between(
    before: &EnvironmentCoverage,
    after: &EnvironmentCoverage,
    from: &str,
    to: &str,
) -> Vec<CoverageChange> {
    let a = libraries(before);
    let b = libraries(after);
    let none = Library::default();
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let (was, is) = (a.get(k).unwrap_or(&none), b.get(k).unwrap_or(&none));
            let (old, new) = (&was.targets, &is.targets);
            let gained: Vec<String> = new.iter().filter(|t| !old.contains(t)).cloned().collect();
            let lost: Vec<String> = old.iter().filter(|t| !new.contains(t)).cloned().collect();
            let storage = match (was.storage(), is.storage()) {
                (Some(from), Some(to)) if from != to => Some(StorageChange {
                    meaning: extended_meaning(new, &from, &to),
                    from,
                    to,
                }),
                _ => None,
            };
            if gained.is_empty() && lost.is_empty() && storage.is_none() {
                return None;
            }
            let lost_with_cells = lost
                .iter()
                .filter(|t| after.gfx.contains(t))
                .cloned()
                .collect();
            Some(CoverageChange {
                library: k.clone(),
                from: from.to_string(),
                to: to.to_string(),
                from_environment: crate::digest::short(&before.environment).to_string(),
                to_environment: crate::digest::short(&after.environment).to_string(),
                gained,
                lost,
                lost_with_cells,
                storage,
            })
        })
        .collect()
}

/// What a switch between plain and compressed bundles means under the
/// extended ISA policy (Debian's, Gentoo's, Solus's patches): a processor
/// that runs another's code only through that policy finds it in a plain
/// bundle, whose bundle IDs the loader scans, but in a compressed one
/// (CCOB) only through a Comgr that lists the bundle IDs before it extracts
/// — upstream's extracts the exact target and finds nothing
/// (`docs/gpus.md`, `extended-compressed`). `None` when no processor
/// depends on it.
fn extended_meaning(targets: &[String], from: &str, to: &str) -> Option<String> {
    let compressed = |s: &str| s.contains("CCOB");
    let now = match (compressed(from), compressed(to)) {
        (false, true) => "now need",
        (true, false) => "no longer need",
        _ => return None,
    };
    let processors: Vec<&str> = targets
        .iter()
        .map(|t| t.split(':').next().unwrap_or(t))
        .collect();
    let mut agents: Vec<&str> = Vec::new();
    for (codes, runs_on) in crate::gpu::compat::EXTENDED_SETS {
        if !codes.iter().any(|c| processors.contains(c)) {
            continue;
        }
        for a in *runs_on {
            if !processors.contains(a) && !agents.contains(a) {
                agents.push(a);
            }
        }
    }
    if agents.is_empty() {
        return None;
    }
    Some(format!(
        "under the extended ISA policy {} {now} a Comgr that lists bundle IDs before extracting",
        agents.join(", ")
    ))
}

/// The identity of a coverage file's environment, from the run's facts.
fn identity_of<'a>(r: &'a Results, c: &EnvironmentCoverage) -> Option<&'a str> {
    let short = crate::digest::short(&c.environment);
    r.environments
        .iter()
        .find(|e| e.environment == short && !e.identity.is_empty())
        .map(|e| e.identity.as_str())
}

/// Each environment's coverage against the baseline's of the same identity.
pub fn against_baseline(run: &Results, baseline: &Results) -> Vec<CoverageChange> {
    let mut out = Vec::new();
    for now in &run.coverage {
        let Some(id) = identity_of(run, now) else {
            continue;
        };
        let before = baseline
            .coverage
            .iter()
            .find(|b| identity_of(baseline, b) == Some(id));
        if let Some(before) = before {
            let label = cell_label(run, &now.environment, None);
            out.extend(between(before, now, "baseline", &label));
        }
    }
    out
}

/// From each environment with coverage to the next, in the order their
/// first cells have in the run, labelled by the axis values that tell them
/// apart.
pub fn along(run: &Results) -> Vec<CoverageChange> {
    let first_cell = |c: &EnvironmentCoverage| {
        run.cells
            .iter()
            .position(|x| c.cells.contains(&x.id))
            .unwrap_or(usize::MAX)
    };
    let mut ordered: Vec<&EnvironmentCoverage> = run.coverage.iter().collect();
    ordered.sort_by_key(|c| first_cell(c));
    ordered
        .windows(2)
        .flat_map(|w| {
            let from = cell_label(run, &w[0].environment, Some(&w[1].environment));
            let to = cell_label(run, &w[1].environment, Some(&w[0].environment));
            between(w[0], w[1], &from, &to)
        })
        .collect()
}

/// The axis values all cells of `env` share and (when given) the cells of
/// `other` do not: `trixie`, or `suite=sid · llvm=21` when several differ.
/// Falls back to the environment's short hash.
fn cell_label(run: &Results, env: &str, other: Option<&str>) -> String {
    let common = |env: &str| -> Vec<(String, String)> {
        run.coverage
            .iter()
            .find(|c| c.environment == env)
            .map(|c| run.common_values(&c.cells))
            .unwrap_or_default()
    };
    let mine = common(env);
    let theirs = other.map(common).unwrap_or_default();
    let differing: Vec<&(String, String)> = mine
        .iter()
        .filter(|(k, v)| other.is_none() || theirs.iter().any(|(k2, v2)| k2 == k && v2 != v))
        .collect();
    match differing.as_slice() {
        [] => crate::digest::short(env).to_string(),
        [(_, v)] => v.clone(),
        many => many
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" · "),
    }
}

/// Lost targets some cell asks for, over all changes.
pub fn regressions(changes: &[CoverageChange]) -> u64 {
    changes.iter().map(|c| c.lost_with_cells.len() as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::coverage::LibraryCoverage;

    fn cov(env: &str, gfx: &[&str], libs: &[(&str, &[&str])]) -> EnvironmentCoverage {
        EnvironmentCoverage {
            environment: env.into(),
            image: String::new(),
            cells: Vec::new(),
            policy: "exact".into(),
            gfx: gfx.iter().map(|s| s.to_string()).collect(),
            dirs: Vec::new(),
            libraries: libs
                .iter()
                .map(|(l, t)| LibraryCoverage {
                    library: l.to_string(),
                    targets: t.iter().map(|s| s.to_string()).collect(),
                    compressed: Vec::new(),
                    compression: Vec::new(),
                    verdicts: Vec::new(),
                })
                .collect(),
            problems: Vec::new(),
            secs: 0.0,
        }
    }

    #[test]
    fn along_the_run_environments_are_ordered_by_their_first_cells_and_named_by_axis_values() {
        let mut run: Results = serde_json::from_value(serde_json::json!({
            "version": 1, "name": "m", "runs": [], "keys": ["suite", "gfx"],
            "report": {"rows": [], "columns": []},
            "cells": [
                {"id": "trixie.gfx1011", "values": {"suite": "trixie", "gfx": "gfx1011"},
                 "status": "passed", "counts": {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "flaky": 0, "xfail": 0, "xpass": 0}},
                {"id": "experimental.gfx1011", "values": {"suite": "experimental", "gfx": "gfx1011"},
                 "status": "passed", "counts": {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "flaky": 0, "xfail": 0, "xpass": 0}}
            ]
        }))
        .unwrap();
        let mut late = cov(
            "0000",
            &["gfx1011"],
            &[("/usr/lib/librocfft.so.0.1", &["gfx942"])],
        );
        late.cells = vec!["experimental.gfx1011".into()];
        let mut early = cov(
            "ffff",
            &["gfx1011"],
            &[("/usr/lib/librocfft.so.0.1", &["gfx1011"])],
        );
        early.cells = vec!["trixie.gfx1011".into()];
        // Stored in hash order, which is not the run's.
        run.coverage = vec![late, early];
        let c = along(&run);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].line(),
            "librocfft.so: trixie → experimental: +gfx942 −gfx1011 (regression: cells ask for gfx1011)"
        );
    }

    #[test]
    fn library_keys_drop_the_version_suffix_only() {
        assert_eq!(
            library_key("/usr/lib/x86_64-linux-gnu/librocfft.so.0.1"),
            "librocfft.so"
        );
        assert_eq!(
            library_key("/opt/rocm-6.1.2/lib/librocfft.so"),
            "librocfft.so"
        );
        assert_eq!(library_key("/usr/lib/libfoo.so.1.beta"), "libfoo.so.1.beta");
        assert_eq!(library_key("kernels.co"), "kernels.co");
    }

    #[test]
    fn gained_and_lost_targets_and_regressions() {
        let a = cov(
            "aaaa",
            &["gfx1011"],
            &[
                ("/usr/lib/librocfft.so.0.1", &["gfx900", "gfx1011"]),
                ("/usr/lib/libx.so", &["gfx900"]),
            ],
        );
        let b = cov(
            "bbbb",
            &["gfx1011"],
            &[
                ("/usr/lib/librocfft.so.1.0", &["gfx900", "gfx942"]),
                ("/usr/lib/libx.so", &["gfx900"]),
            ],
        );
        let c = between(&a, &b, "trixie", "experimental");
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].line(),
            "librocfft.so: trixie → experimental: +gfx942 −gfx1011 (regression: cells ask for gfx1011)"
        );
        assert_eq!(regressions(&c), 1);
    }

    #[test]
    fn a_switch_to_compressed_bundles_is_a_change_even_with_the_same_targets() {
        let a = cov(
            "aaaa",
            &[],
            &[("/usr/lib/librocsparse.so.0.1", &["gfx1030"])],
        );
        let mut b = cov(
            "bbbb",
            &[],
            &[("/usr/lib/librocsparse.so.1.0", &["gfx1030", "gfx942"])],
        );
        b.libraries[0].compressed = vec!["gfx1030".into(), "gfx942".into()];
        b.libraries[0].compression = vec!["CCOB v3 zstd".into()];
        let c = between(&a, &b, "trixie", "experimental");
        let meaning = "under the extended ISA policy gfx1031, gfx1032, gfx1033, gfx1034, \
                       gfx1035, gfx1036 now need a Comgr that lists bundle IDs before extracting";
        assert_eq!(
            c[0].line(),
            format!(
                "librocsparse.so: trixie → experimental: +gfx942; device code uncompressed → \
                 CCOB v3 zstd ({meaning})"
            )
        );
        let json = serde_json::to_value(&c[0]).unwrap();
        assert_eq!(json["storage"]["to"], "CCOB v3 zstd");
        assert_eq!(json["storage"]["meaning"], meaning);
        // Back to plain bundles: no longer needed; code no other
        // processor runs through the policy means nothing.
        let back = between(&b, &a, "experimental", "trixie");
        assert!(
            back[0].line().contains("gfx1036 no longer need a Comgr"),
            "{}",
            back[0].line()
        );
        assert_eq!(
            extended_meaning(&["gfx942".into()], "uncompressed", "CCOB v3 zstd"),
            None
        );
        // The same targets, now compressed: still a change.
        let mut d = cov(
            "dddd",
            &[],
            &[("/usr/lib/librocsparse.so.1.0", &["gfx1030"])],
        );
        d.libraries[0].compressed = vec!["gfx1030".into()];
        d.libraries[0].compression = vec!["CCOB v3 zstd".into()];
        let c = between(&a, &d, "trixie", "experimental");
        assert_eq!(
            c[0].line(),
            format!(
                "librocsparse.so: trixie → experimental: device code uncompressed → CCOB v3 \
                 zstd ({meaning})"
            )
        );
        assert_eq!(regressions(&c), 0);
        assert!(between(&d, &d, "a", "b").is_empty());
    }
}
