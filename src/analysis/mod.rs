//! Analysis of collected results: what a run's failures have in common and
//! what changed against a baseline. It stands beside `crate::results` on its
//! floor and only above it: it reads the model, the model and its reading
//! know nothing of it (the architecture test holds that).
//!
//! - [`signature`]: failures grouped by normalised text, and
//!   [`attribution`]: the axis values that separate their cells;
//! - [`coverage_changes`]: gfx targets libraries gain and lose along the
//!   matrix or against a baseline;
//! - [`regress`]: tests and cells against a baseline, and [`env_changes`]:
//!   what changed in their environments ([`source_moves`]: by how many
//!   commits each source moved).
//!
//! Data flow: `results::collect` (reading) → [`analyse`] (signatures,
//! coverage changes) → [`regress::compare`] against a baseline.

pub mod attribution;
pub mod coverage_changes;
pub mod env_changes;
pub mod regress;
pub mod signature;
pub mod source_moves;

use crate::results::{junit::Limits, Results, Sink, Source};

pub use regress::{compare, load_baseline, Class, Regressions};

/// Fills in what the analysis finds in collected results: the failure
/// signatures and the coverage changes along the matrix.
pub fn analyse(results: &mut Results) {
    results.signatures = signature::find(results);
    results.coverage_changes = coverage_changes::along(results);
}

/// Collects `source` (streaming every test to `sink`, as
/// `results::collect` does) and analyses it: the results a report shows.
pub fn collect(source: &Source, limits: Limits, sink: &mut dyn Sink) -> Results {
    let mut results = crate::results::collect(source, limits, sink);
    analyse(&mut results);
    results
}
