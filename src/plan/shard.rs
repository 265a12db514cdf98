//! Deterministic sharding: `K/N` takes the K-th of N contiguous, balanced
//! slices of the plan. Shards are disjoint, cover the plan, and differ in size
//! by at most one; contiguous slices keep cells of one environment together,
//! so each shard builds as few images as possible.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based index.
    pub index: usize,
    pub total: usize,
}

impl Shard {
    /// The cell indices of this shard in a plan of `len` cells.
    pub fn range(&self, len: usize) -> Range<usize> {
        let k = self.index - 1;
        (k * len / self.total)..((k + 1) * len / self.total)
    }
}

/// A text that is not a shard `K/N` with 1 ≤ K ≤ N, as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a shard; write K/N with 1 ≤ K ≤ N, e.g. 2/4")]
pub struct ShardError(pub String);

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(s: &str) -> Result<Self, ShardError> {
        let bad = || ShardError(s.to_string());
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = k.trim().parse().map_err(|_| bad())?;
        let total: usize = n.trim().parse().map_err(|_| bad())?;
        if total == 0 || index == 0 || index > total {
            return Err(bad());
        }
        Ok(Shard { index, total })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.total)
    }
}

impl Serialize for Shard {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn shards_partition_the_plan(len in 0usize..5000, total in 1usize..300) {
            let mut next = 0;
            let mut sizes = Vec::new();
            for index in 1..=total {
                let r = Shard { index, total }.range(len);
                prop_assert_eq!(r.start, next);
                next = r.end;
                sizes.push(r.len());
            }
            prop_assert_eq!(next, len);
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            prop_assert!(max - min <= 1);
        }
    }

    #[test]
    fn parses() {
        assert_eq!(
            "2/4".parse::<Shard>().unwrap(),
            Shard { index: 2, total: 4 }
        );
        assert!("0/4".parse::<Shard>().is_err());
        assert!("5/4".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
    }
}
