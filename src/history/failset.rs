//! A cell's tests that did not simply pass in one run, as one byte string
//! (the `failsets` table): each test's identity hash and its outcome, sorted
//! by hash. A report's window reads one of these per cell and run instead
//! of a row per failing test: 20 runs of 1,600 failing tests are 400 short
//! byte strings rather than 32,000 rows. The rows stay (with the test's
//! name, time, signature and message) for `history show` and `history
//! flaky`.
//!
//! An entry is 9 bytes: the hash as 8 little-endian bytes, then the
//! outcome's code in [`OUTCOMES`] (255 for a word this rocmatrix does not
//! know, read back as `unknown`).

use std::collections::BTreeMap;

use super::record::RunRecord;

/// The outcome words a code stands for, by code.
pub const OUTCOMES: &[&str] = &[
    "passed", "failed", "error", "skipped", "flaky", "xfail", "xpass",
];

const ENTRY: usize = 9;
const UNKNOWN: u8 = 255;

fn code_of(outcome: &str) -> u8 {
    OUTCOMES
        .iter()
        .position(|o| *o == outcome)
        .map_or(UNKNOWN, |i| i as u8)
}

/// The word a code stands for.
pub fn word_of(code: u8) -> &'static str {
    OUTCOMES.get(code as usize).copied().unwrap_or("unknown")
}

/// The byte string of `(hash, outcome)` entries (in any order).
pub fn encode<'a>(entries: impl IntoIterator<Item = (u64, &'a str)>) -> Vec<u8> {
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
    let mut by_cell: BTreeMap<&str, Vec<(u64, &str)>> = BTreeMap::new();
    for t in &r.tests {
        by_cell
            .entry(t.cell.as_str())
            .or_default()
            .push((t.hash, t.outcome.as_str()));
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
            let bytes = encode(entries.iter().map(|(h, o)| (*h, o.as_str())));
            (run, cell, bytes)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_back_sorted_by_hash_with_their_outcomes() {
        let bytes = encode([(7, "failed"), (u64::MAX, "flaky"), (3, "made-up")]);
        assert_eq!(bytes.len(), 27);
        let back: Vec<(u64, &str)> = decode(&bytes).map(|(h, c)| (h, word_of(c))).collect();
        assert_eq!(
            back,
            vec![(3, "unknown"), (7, "failed"), (u64::MAX, "flaky")]
        );
        // A cut-off entry is not read.
        assert_eq!(decode(&bytes[..20]).count(), 2);
    }

    #[test]
    fn every_test_status_word_has_a_code() {
        use crate::results::model::TestStatus::*;
        for s in [Passed, Failed, Error, Skipped, Flaky, Xfail, Xpass] {
            assert_eq!(word_of(code_of(s.as_str())), s.as_str());
        }
    }
}
