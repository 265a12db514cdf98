//! `images/<env>.coverage.json`: the gfx coverage of one environment image,
//! written by `run --coverage` and read by the reports.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `images/<env>.coverage.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentCoverage {
    /// The environment hash (full).
    pub environment: String,
    pub image: String,
    /// The cells that run in this environment.
    #[serde(default)]
    pub cells: Vec<String>,
    pub policy: String,
    /// The gfx targets the environment's cells ask for, in plan order.
    pub gfx: Vec<String>,
    /// Directories of the image that were scanned (those it has).
    pub dirs: Vec<String>,
    /// Libraries carrying device code, by path inside the image.
    pub libraries: Vec<LibraryCoverage>,
    /// Files that looked like offload code but could not be read, and
    /// targets that are not valid gfx target ids.
    #[serde(default)]
    pub problems: Vec<String>,
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LibraryCoverage {
    pub library: String,
    /// Every target the library carries code for.
    pub targets: Vec<String>,
    /// Of `targets`, those whose code is only in compressed bundles (CCOB).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compressed: Vec<String>,
    /// How its compressed bundles are stored: `CCOB v3 zstd`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compression: Vec<String>,
    /// One per entry of `gfx`, in that order.
    pub verdicts: Vec<GfxVerdict>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GfxVerdict {
    pub kind: VerdictKind,
    /// For people: `exact`, `via gfx1030 (HSA_OVERRIDE_GFX_VERSION=10.3.0)`, `missing`.
    pub text: String,
}

/// Whether a library has code for a gfx target: exactly, code that runs on
/// it under the policy, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictKind {
    Exact,
    Compatible,
    /// Runs only through the distribution's extended ISA compatibility, from
    /// a compressed bundle: depends on the Comgr (see docs/gpus.md).
    ExtendedCompressed,
    Missing,
}

impl VerdictKind {
    pub const ALL: [VerdictKind; 4] = [
        VerdictKind::Exact,
        VerdictKind::Compatible,
        VerdictKind::ExtendedCompressed,
        VerdictKind::Missing,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Exact => "exact",
            VerdictKind::Compatible => "compatible",
            VerdictKind::ExtendedCompressed => "extended-compressed",
            VerdictKind::Missing => "missing",
        }
    }
}

impl EnvironmentCoverage {
    /// The store path of an environment's coverage.
    pub fn store_path(environment: &str) -> String {
        format!("images/{}.coverage.json", crate::digest::short(environment))
    }

    /// Reads one environment's coverage ([`super::read::MAX_COVERAGE`] at
    /// most); its version is the run store's.
    pub fn load(path: &Path) -> Result<EnvironmentCoverage, super::StoreError> {
        super::read::json(path, super::read::MAX_COVERAGE, "coverage files")
    }

    /// Every coverage file of a run, in name order. Unreadable files are
    /// reported, not fatal: coverage is an addition to the report.
    pub fn load_all(run_dir: &Path) -> (Vec<EnvironmentCoverage>, Vec<String>) {
        let mut paths: Vec<PathBuf> = match std::fs::read_dir(run_dir.join("images")) {
            Ok(rd) => rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().ends_with(".coverage.json"))
                })
                .collect(),
            Err(_) => return (Vec::new(), Vec::new()),
        };
        paths.sort();
        let mut found = Vec::new();
        let mut problems = Vec::new();
        for p in paths {
            match Self::load(&p) {
                Ok(c) => found.push(c),
                Err(e) => problems.push(e.to_string()),
            }
        }
        (found, problems)
    }
}
