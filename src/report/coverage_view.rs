//! The gfx coverage of the environment images as the reports show it: one
//! table per environment (library × gfx target, with which libraries keep
//! their code in compressed bundles and the environment's Comgr beside
//! them), and the release view — per environment and gfx target, how many
//! libraries run exactly, compatibly, only through the extended path from a
//! compressed bundle, or not at all.

use serde::Serialize;

use crate::bundle::coverage::{verdict_of, CoverageVerdict};
use crate::gpu::TargetId;
use crate::matrix_file::GpuPolicy;
use crate::results::Results;
use crate::store::coverage::{EnvironmentCoverage, VerdictKind};

/// One environment image's gfx coverage table.
#[derive(Serialize)]
pub struct CoverageView {
    pub environment: String,
    pub image: String,
    pub cells: String,
    pub policy: String,
    pub dirs: String,
    /// `libamd-comgr3 7.2.4+dfsg-1~exp1`, from the lock; empty if unknown.
    pub comgr: String,
    pub gfx: Vec<String>,
    /// Per gfx: libraries with exact code, compatible code, code only
    /// through the extended path from a compressed bundle, none.
    pub totals: Vec<[u64; 4]>,
    /// Libraries missing some gfx first, then the others, capped.
    pub libraries: Vec<LibraryView>,
    pub library_count: usize,
    /// Libraries holding code in compressed bundles.
    pub compressed_count: usize,
    pub more: usize,
    pub problems: Vec<String>,
}

#[derive(Serialize)]
pub struct LibraryView {
    pub library: String,
    pub targets: String,
    /// `CCOB v3 zstd` when its code is (partly) compressed.
    pub compression: String,
    pub verdicts: Vec<VerdictView>,
}

#[derive(Serialize)]
pub struct VerdictView {
    /// The badge class: pass (exact), flaky (compatible), xfail (extended
    /// from a compressed bundle), fail (missing).
    pub css: &'static str,
    pub text: String,
}

fn css(k: VerdictKind) -> &'static str {
    match k {
        VerdictKind::Exact => "pass",
        VerdictKind::Compatible => "flaky",
        VerdictKind::ExtendedCompressed => "xfail",
        VerdictKind::Missing => "fail",
    }
}

fn slot(k: VerdictKind) -> usize {
    match k {
        VerdictKind::Exact => 0,
        VerdictKind::Compatible => 1,
        VerdictKind::ExtendedCompressed => 2,
        VerdictKind::Missing => 3,
    }
}

/// The Comgr packages of the environment, from the run's facts.
fn comgr(results: &Results, c: &EnvironmentCoverage) -> String {
    let short = crate::digest::short(&c.environment);
    results
        .environments
        .iter()
        .find(|e| e.environment == short)
        .map(|e| {
            e.installed
                .iter()
                .filter(|(k, _)| k.starts_with("libamd-comgr") && !k.ends_with("-dev"))
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// The coverage tables, listing at most `cap` libraries per environment.
pub fn tables(results: &Results, cap: usize) -> Vec<CoverageView> {
    results
        .coverage
        .iter()
        .map(|c| {
            let mut totals = vec![[0u64; 4]; c.gfx.len()];
            for lib in &c.libraries {
                for (t, v) in totals.iter_mut().zip(&lib.verdicts) {
                    t[slot(v.kind)] += 1;
                }
            }
            let mut libs: Vec<_> = c.libraries.iter().collect();
            libs.sort_by_key(|l| !l.verdicts.iter().any(|v| v.kind == VerdictKind::Missing));
            let library_count = libs.len();
            let more = library_count.saturating_sub(cap);
            CoverageView {
                environment: crate::digest::short(&c.environment).to_string(),
                image: c.image.clone(),
                cells: c.cells.join(", "),
                policy: c.policy.clone(),
                dirs: c.dirs.join(", "),
                comgr: comgr(results, c),
                gfx: c.gfx.clone(),
                totals,
                compressed_count: c
                    .libraries
                    .iter()
                    .filter(|l| !l.compression.is_empty())
                    .count(),
                libraries: libs
                    .into_iter()
                    .take(cap)
                    .map(|l| LibraryView {
                        library: l.library.clone(),
                        targets: l.targets.join(" "),
                        compression: l.compression.join(", "),
                        verdicts: l
                            .verdicts
                            .iter()
                            .map(|v| VerdictView {
                                css: css(v.kind),
                                text: v.text.clone(),
                            })
                            .collect(),
                    })
                    .collect(),
                library_count,
                more,
                problems: c.problems.clone(),
            }
        })
        .collect()
}

/// One row of the release view: an environment and a gfx target.
#[derive(Debug, Serialize)]
pub struct ReleaseView {
    /// `suite=experimental` (the axis values its cells share), else the hash.
    pub environment: String,
    pub gfx: String,
    pub exact: u64,
    pub compatible: u64,
    pub compressed_extended: u64,
    pub missing: u64,
    pub comgr: String,
}

/// The release view: per environment with coverage, for each gfx target the
/// cells ask for and each of `report.gfx_targets`, the libraries by verdict
/// under the environment's policy. Targets that do not parse are left out
/// (the matrix file's validation names them).
pub fn release(results: &Results) -> Vec<ReleaseView> {
    let mut out = Vec::new();
    for c in &results.coverage {
        let mut gfx: Vec<TargetId> = Vec::new();
        for g in c.gfx.iter().chain(&results.report.gfx_targets) {
            if let Ok(t) = TargetId::parse(g) {
                if !gfx.contains(&t) {
                    gfx.push(t);
                }
            }
        }
        let policy = GpuPolicy::parse(&c.policy).unwrap_or_default();
        let parse = |v: &[String]| -> Vec<TargetId> {
            v.iter().filter_map(|t| TargetId::parse(t).ok()).collect()
        };
        let libs: Vec<(Vec<TargetId>, Vec<TargetId>)> = c
            .libraries
            .iter()
            .map(|l| (parse(&l.targets), parse(&l.compressed)))
            .collect();
        let label = results.environment_label(&c.cells, crate::digest::short(&c.environment));
        let comgr = comgr(results, c);
        for g in gfx {
            let mut row = ReleaseView {
                environment: label.clone(),
                gfx: g.to_string(),
                exact: 0,
                compatible: 0,
                compressed_extended: 0,
                missing: 0,
                comgr: comgr.clone(),
            };
            for (targets, compressed) in &libs {
                match verdict_of(targets, compressed, &g, policy) {
                    CoverageVerdict::Exact { .. } => row.exact += 1,
                    CoverageVerdict::Compatible { .. } => row.compatible += 1,
                    CoverageVerdict::ExtendedCompressed { .. } => row.compressed_extended += 1,
                    CoverageVerdict::Missing => row.missing += 1,
                }
            }
            out.push(row);
        }
    }
    out
}
