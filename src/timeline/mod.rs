//! One test's outcomes in one cell, run after run — its timeline — and
//! what they say, with no database: the rule that tells failing since,
//! known, flaky and fixed apart by the sequence's shape ([`verdict`]), and
//! where a flaky test is flaky, by axis values and by host facts
//! ([`place`]). `src/history/` reads the timelines out of its database and
//! asks these; the rules are tested here on strips alone.

pub mod place;
pub mod verdict;

use std::collections::BTreeMap;

use verdict::{HistoryVerdict, Point};

/// One test in one cell of one matrix, followed across the recorded runs.
#[derive(Debug, Clone)]
pub struct TestHistory {
    /// The matrix's name.
    pub matrix: String,
    pub cell: String,
    pub axes: std::sync::Arc<BTreeMap<String, String>>,
    pub test: String,
    /// Its outcome in each run its cell ran in, in run order.
    pub points: Vec<Point>,
    pub verdict: HistoryVerdict,
    /// The latest failure's signature id and first line.
    pub signature: String,
    pub message: String,
}
