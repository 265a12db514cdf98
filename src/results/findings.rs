//! What the analysis of a run found, as `results.json` keeps it: failure
//! signatures with the axis values that separate their cells, and the gfx
//! coverage changes along the matrix. Only the data lives here, beside the
//! model that carries it; `crate::analysis` computes it (`signature`,
//! `attribution`, `coverage_changes`), so reading a run depends on nothing
//! of the analysis.

use serde::{Deserialize, Serialize};

/// One cause of failure, with where it occurs and what the axes say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signature {
    /// A short stable name: the first 12 hex digits of the SHA-256 of the
    /// text's skeleton (every number as `<n>`), so the same cause has the
    /// same id in every run (`bisect --signature ID`).
    #[serde(default)]
    pub id: String,
    /// The normalised text: what all its failures share.
    pub text: String,
    /// One failure's own first line, as written.
    pub message: String,
    /// Failures it covers (tests, or failing steps).
    pub count: u64,
    /// Where it occurs: test names, or `step <name>`.
    pub places: Vec<String>,
    /// The cells it occurs in, in the run's order.
    pub cells: Vec<String>,
    /// One failure in full (bounded).
    pub example: String,
    /// Which axis values separate its cells from the cells that ran without it.
    pub attribution: Attribution,
    /// Against a baseline (`--baseline`): whether the baseline had it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Seen>,
    /// The top frames of a backtrace of one of its failures (one with
    /// debug info where there is one), or what gdb said when it had none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
}

/// Whether a baseline run failed with a signature too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Seen {
    /// The baseline had no failure with this text.
    New,
    /// The baseline failed with it too.
    Known,
}

/// One predicate of a rule: `axis ∈ values`, phrased.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Predicate {
    pub axis: String,
    pub values: Vec<String>,
    /// `llvm ≤ 21`, `args=yn`, `gfx ∈ {gfx900, gfx1030}`.
    pub text: String,
}

/// What the data says about where a signature occurs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    /// Whether `predicates` select exactly the failing cells.
    pub exact: bool,
    /// The rule (exact) or the best single predicate (not exact); empty when
    /// no predicate says anything.
    pub predicates: Vec<Predicate>,
    /// The first passing value past an ordered range: `passes from llvm=22`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boundaries: Vec<String>,
    /// Cells where the signature occurs.
    pub failing: usize,
    /// Cells where the step or test ran, with or without it.
    pub ran: usize,
    /// The whole finding in one sentence.
    pub text: String,
}

/// One library whose targets changed between two environments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageChange {
    /// The library's file name without its version (`librocfft.so`).
    pub library: String,
    /// What is compared: `baseline` or axis values (`trixie`), and the later
    /// side (`experimental`).
    pub from: String,
    pub to: String,
    /// The environment hashes (short) of both sides.
    pub from_environment: String,
    pub to_environment: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gained: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<String>,
    /// Of `lost`, the targets a cell of the later environment asks for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_with_cells: Vec<String>,
    /// How the device code is stored, when that changed: `uncompressed`
    /// → `CCOB v3 zstd`. A loader that cannot read compressed bundles (or
    /// one that rewrites a target's ISA in place, as Debian's extended
    /// compatibility does for gfx1031 and gfx1011) reads the two sides
    /// differently even where the targets are the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageChange>,
}

/// How a library's device code was stored on each side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageChange {
    pub from: String,
    pub to: String,
    /// What the change means under the extended ISA policy, when the
    /// library has code that other processors run only through it:
    /// `gfx1031 … now need a Comgr that lists bundle IDs before
    /// extracting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning: Option<String>,
}

impl CoverageChange {
    /// `librocfft.so: trixie → experimental: +gfx942 +gfx1151 −gfx1011`.
    pub fn line(&self) -> String {
        let mut s = format!("{}: {} → {}:", self.library, self.from, self.to);
        for g in &self.gained {
            s.push_str(&format!(" +{g}"));
        }
        for g in &self.lost {
            s.push_str(&format!(" −{g}"));
        }
        if !self.lost_with_cells.is_empty() {
            s.push_str(&format!(
                " (regression: cells ask for {})",
                self.lost_with_cells.join(", ")
            ));
        }
        if let Some(st) = &self.storage {
            if !self.gained.is_empty() || !self.lost.is_empty() {
                s.push(';');
            }
            s.push_str(&format!(" device code {} → {}", st.from, st.to));
            if let Some(m) = &st.meaning {
                s.push_str(&format!(" ({m})"));
            }
        }
        s
    }
}
