//! gfx coverage: for each library (a file carrying offload code) and each gfx
//! target asked for, whether the library has code for it exactly, code that
//! runs on it under the policy (which target and how), or nothing.
//!
//! Works on any directory root, e.g. an environment image's filesystem
//! exported to a temporary directory; paths are reported relative to it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::scan::FileReport;
use crate::gpu::compat::{best_for, How};
use crate::gpu::TargetId;
use crate::matrix_file::GpuPolicy;
use crate::store::coverage::{GfxVerdict, LibraryCoverage, VerdictKind};

/// One cell of the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CoverageVerdict {
    Exact {
        target: TargetId,
    },
    Compatible {
        target: TargetId,
        how: How,
    },
    /// Code that runs only through the distribution's extended ISA
    /// compatibility, held only in compressed bundles: a Comgr that extracts
    /// a compressed bundle by the device's exact target id finds nothing
    /// unless it lists the bundle's ids first (the Solus patches).
    #[serde(rename = "extended-compressed")]
    ExtendedCompressed {
        target: TargetId,
    },
    Missing,
}

impl CoverageVerdict {
    /// The kind the run store records.
    pub fn stored_kind(&self) -> VerdictKind {
        match self {
            CoverageVerdict::Exact { .. } => VerdictKind::Exact,
            CoverageVerdict::Compatible { .. } => VerdictKind::Compatible,
            CoverageVerdict::ExtendedCompressed { .. } => VerdictKind::ExtendedCompressed,
            CoverageVerdict::Missing => VerdictKind::Missing,
        }
    }

    /// `exact`, `compatible` or `missing` (the serialized `kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            CoverageVerdict::Exact { .. } => "exact",
            CoverageVerdict::Compatible { .. } => "compatible",
            CoverageVerdict::ExtendedCompressed { .. } => "extended-compressed",
            CoverageVerdict::Missing => "missing",
        }
    }
}

impl std::fmt::Display for CoverageVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CoverageVerdict::Exact { .. } => f.write_str("exact"),
            CoverageVerdict::Compatible { target, how } => write!(f, "via {target} ({how})"),
            CoverageVerdict::ExtendedCompressed { target } => write!(
                f,
                "via {target} ({}), compressed: {COMPRESSED_NOTE}",
                How::DistroExtended
            ),
            CoverageVerdict::Missing => f.write_str("missing"),
        }
    }
}

/// What an extended verdict on a compressed bundle depends on.
pub const COMPRESSED_NOTE: &str = "needs a Comgr that lists bundle IDs before extracting";

/// One library's verdict for one gfx target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoverageCell {
    pub gfx: TargetId,
    pub verdict: CoverageVerdict,
}

/// One library's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoverageRow {
    pub library: PathBuf,
    pub targets: Vec<TargetId>,
    /// Of `targets`, those whose code is only in compressed bundles.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub compressed_targets: Vec<TargetId>,
    /// How the compressed bundles are stored: `CCOB v3 zstd`, distinct.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub compression: Vec<String>,
    pub cells: Vec<CoverageCell>,
}

impl CoverageRow {
    /// The row as the run store keeps it (`images/<env>.coverage.json`).
    pub fn stored(&self) -> LibraryCoverage {
        let names = |t: &[TargetId]| t.iter().map(ToString::to_string).collect();
        LibraryCoverage {
            library: self.library.display().to_string(),
            targets: names(&self.targets),
            compressed: names(&self.compressed_targets),
            compression: self.compression.clone(),
            verdicts: self
                .cells
                .iter()
                .map(|c| GfxVerdict {
                    kind: c.verdict.stored_kind(),
                    text: c.verdict.to_string(),
                })
                .collect(),
        }
    }
}

/// The verdict for one library's targets on one gfx target.
pub fn verdict(targets: &[TargetId], gfx: &TargetId, policy: GpuPolicy) -> CoverageVerdict {
    match best_for(targets, gfx, policy) {
        Some((t, How::Exact)) => CoverageVerdict::Exact { target: t.clone() },
        Some((t, how)) => CoverageVerdict::Compatible {
            target: t.clone(),
            how,
        },
        None => CoverageVerdict::Missing,
    }
}

/// The verdict for one gfx target of a library whose code for
/// `compressed` targets is only in compressed bundles.
pub fn verdict_of(
    targets: &[TargetId],
    compressed: &[TargetId],
    gfx: &TargetId,
    policy: GpuPolicy,
) -> CoverageVerdict {
    match verdict(targets, gfx, policy) {
        CoverageVerdict::Compatible {
            target,
            how: How::DistroExtended,
        } if compressed.contains(&target) => CoverageVerdict::ExtendedCompressed { target },
        v => v,
    }
}

/// Rows for every report that carries device code. Paths under `root` are
/// shown relative to it (as `/usr/lib/...` for an image root).
pub fn coverage(
    reports: &[FileReport],
    gfx: &[TargetId],
    policy: GpuPolicy,
    root: Option<&Path>,
) -> Vec<CoverageRow> {
    reports
        .iter()
        .filter(|r| r.has_offload_code())
        .map(|r| {
            let targets = r.targets();
            let compressed_targets = r.compressed_targets();
            let library = match root.and_then(|root| r.path.strip_prefix(root).ok()) {
                Some(rel) => Path::new("/").join(rel),
                None => r.path.clone(),
            };
            CoverageRow {
                library,
                cells: gfx
                    .iter()
                    .map(|g| CoverageCell {
                        gfx: g.clone(),
                        verdict: verdict_of(&targets, &compressed_targets, g, policy),
                    })
                    .collect(),
                compression: r.compression(),
                compressed_targets,
                targets,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> TargetId {
        TargetId::parse(s).unwrap()
    }

    #[test]
    fn verdicts_per_policy() {
        let lib = [t("gfx900"), t("gfx1030"), t("gfx1100")];
        assert_eq!(
            verdict(&lib, &t("gfx1030"), GpuPolicy::Exact),
            CoverageVerdict::Exact {
                target: t("gfx1030")
            }
        );
        assert_eq!(
            verdict(&lib, &t("gfx1031"), GpuPolicy::Exact),
            CoverageVerdict::Missing
        );
        assert_eq!(
            verdict(&lib, &t("gfx1031"), GpuPolicy::Override).to_string(),
            "via gfx1030 (HSA_OVERRIDE_GFX_VERSION=10.3.0)"
        );
        assert_eq!(
            verdict(&lib, &t("gfx906"), GpuPolicy::Extended).to_string(),
            "via gfx900 (distro-extended)"
        );
        assert_eq!(
            verdict(&lib, &t("gfx942"), GpuPolicy::Extended),
            CoverageVerdict::Missing
        );
    }
}
