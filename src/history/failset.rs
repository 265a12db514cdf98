//! A cell's tests that did not simply pass in one run, as one byte string
//! (the `failsets` table): each test's identity hash and its outcome, sorted
//! by hash. A report's window reads one of these per cell and run instead
//! of a row per failing test: 20 runs of 1,600 failing tests are 400 short
//! byte strings rather than 32,000 rows. The rows stay (with the test's
//! name, time, signature and message) for `history show` and `history
//! flaky`.
//!
//! An entry is 9 bytes: the hash as 8 little-endian bytes, then the
//! outcome's code, its place in [`TestStatus::ALL`] (255 for a word this
//! rocmatrix does not know, read back as no status).

use std::collections::BTreeMap;

use super::record::RunRecord;
use crate::outcome::TestStatus;

const ENTRY: usize = 9;
const UNKNOWN: u8 = 255;

fn code_of(outcome: Option<TestStatus>) -> u8 {
    outcome
        .and_then(|o| TestStatus::ALL.iter().position(|s| *s == o))
        .map_or(UNKNOWN, |i| i as u8)
}

/// The status a code stands for (`None`: unknown).
pub fn status_of(code: u8) -> Option<TestStatus> {
    TestStatus::ALL.get(code as usize).copied()
}

/// The byte string of `(hash, outcome)` entries (in any order).
pub fn encode(entries: impl IntoIterator<Item = (u64, Option<TestStatus>)>) -> Vec<u8> {
    let mut v: Vec<(u64, u8)> = entries.into_iter().map(|(h, o)| (h, code_of(o))).collect();
    v.sort_unstable();
    v.dedup_by_key(|(h, _)| *h);
    let mut out = Vec::with_capacity(v.len() * ENTRY);
    for (h, c) in v {
        out.extend_from_slice(&h.to_le_bytes());
        out.push(c);
    }
    out
}

/// The entries of a byte string, in hash order; a cut-off last entry is
/// left out.
pub fn decode(bytes: &[u8]) -> impl Iterator<Item = (u64, u8)> + '_ {
    bytes.chunks_exact(ENTRY).map(|e| {
        let mut h = [0u8; 8];
        h.copy_from_slice(&e[..8]);
        (u64::from_le_bytes(h), e[8])
    })
}

/// One byte string per cell of `r` that has tests that did not simply pass.
pub fn of_record(r: &RunRecord) -> BTreeMap<&str, Vec<u8>> {
    let mut by_cell: BTreeMap<&str, Vec<(u64, Option<TestStatus>)>> = BTreeMap::new();
    for t in &r.tests {
        by_cell
            .entry(t.cell.as_str())
            .or_default()
            .push((t.hash, Some(t.outcome)));
    }
    by_cell
        .into_iter()
        .map(|(cell, entries)| (cell, encode(entries)))
        .collect()
}

/// The byte strings of rows read back as (run, cell, hash, outcome), in
/// any order: what a database of schema 1 is given when it moves to 2.
pub fn of_rows(rows: Vec<(String, String, u64, String)>) -> Vec<(String, String, Vec<u8>)> {
    let mut by_cell: BTreeMap<(String, String), Vec<(u64, String)>> = BTreeMap::new();
    for (run, cell, hash, outcome) in rows {
        by_cell
            .entry((run, cell))
            .or_default()
            .push((hash, outcome));
    }
    by_cell
        .into_iter()
        .map(|((run, cell), entries)| {
            let bytes = encode(entries.iter().map(|(h, o)| (*h, TestStatus::parse(o))));
            (run, cell, bytes)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_back_sorted_by_hash_with_their_outcomes() {
        let word = |w: &str| TestStatus::parse(w);
        let bytes = encode([
            (7, word("failed")),
            (u64::MAX, word("flaky")),
            (3, word("made-up")),
        ]);
        assert_eq!(bytes.len(), 27);
        let back: Vec<(u64, Option<TestStatus>)> =
            decode(&bytes).map(|(h, c)| (h, status_of(c))).collect();
        assert_eq!(
            back,
            vec![
                (3, None),
                (7, Some(TestStatus::Failed)),
                (u64::MAX, Some(TestStatus::Flaky))
            ]
        );
        // A cut-off entry is not read.
        assert_eq!(decode(&bytes[..20]).count(), 2);
    }

    #[test]
    fn every_test_status_has_a_code() {
        for s in TestStatus::ALL {
            assert_eq!(status_of(code_of(Some(s))), Some(s));
        }
    }
}
