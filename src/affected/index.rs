//! An archive's package index (Debian's `Packages` file, uncompressed):
//! which binary packages each source package builds, for binaries a lock
//! lists without their source and for names no lock knows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::AffectedError;

/// The largest index read (sid's main/binary-amd64 is about 60 MB).
pub const MAX_INDEX: u64 = 512 << 20;

/// Source package → its binary packages, as the index lists them.
#[derive(Debug, Clone, Default)]
pub struct Index {
    binaries: BTreeMap<String, BTreeSet<String>>,
}

impl Index {
    /// Reads a `Packages` file at `path` ([`MAX_INDEX`] at most).
    pub fn load(path: &Path) -> Result<Index, AffectedError> {
        let text = crate::safe_read::read_bounded_string(path, MAX_INDEX, "a package index", "")
            .map_err(|e| AffectedError::Index {
                path: path.display().to_string(),
                why: e.to_string(),
            })?;
        Ok(Index::parse(&text))
    }

    /// Its stanzas' `Package:` and `Source:` (a package without `Source:`
    /// is its own source; `Source: name (version)` is read as `name`).
    pub fn parse(text: &str) -> Index {
        let mut index = Index::default();
        for stanza in text.split("\n\n") {
            let field = |name: &str| {
                stanza.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    (k == name).then(|| v.split_whitespace().next().unwrap_or(""))
                })
            };
            let Some(package) = field("Package").filter(|p| !p.is_empty()) else {
                continue;
            };
            let source = field("Source").filter(|s| !s.is_empty()).unwrap_or(package);
            index
                .binaries
                .entry(source.to_string())
                .or_default()
                .insert(package.to_string());
        }
        index
    }

    /// Whether the index lists binary package `name`.
    pub fn has_binary(&self, name: &str) -> bool {
        self.binaries.values().any(|b| b.contains(name))
    }

    /// Whether `source` builds binary package `name` (without its
    /// architecture), as the index says.
    pub fn builds(&self, source: &str, name: &str) -> bool {
        self.binaries.get(source).is_some_and(|b| b.contains(name))
    }

    /// Whether the index lists source package `name`.
    pub fn has_source(&self, name: &str) -> bool {
        self.binaries.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_binarys_source() {
        let i = Index::parse(
            "Package: libamdhip64-6\nSource: rocm-hipamd (6.4.3-5)\nVersion: 6.4.3-5+b1\n\n\
             Package: hipcc\nSource: rocm-hipamd\n\nPackage: bash\nVersion: 5.2\n",
        );
        assert!(i.builds("rocm-hipamd", "libamdhip64-6") && i.builds("rocm-hipamd", "hipcc"));
        assert!(i.builds("bash", "bash") && i.has_source("bash") && i.has_binary("hipcc"));
        assert!(!i.has_source("hipcc") && !i.has_binary("rocm-hipamd"));
    }
}
