//! Bundle entry ids: `<kind>-<triple>-<target id>`, e.g.
//! `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-` (empty environment, hence `--`),
//! the older `hip-amdgcn-amd-amdhsa-unknown-gfx906`, and host entries such as
//! `host-x86_64-unknown-linux-gnu-`.

use serde::Serialize;

use crate::gpu::TargetId;

/// A parsed entry id; `raw` is kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BundleId {
    pub raw: String,
    /// `host`, `hip`, `hipv4`, `openmp`, …
    pub kind: String,
    /// The triple without a trailing empty component (`amdgcn-amd-amdhsa`).
    pub triple: String,
    /// The gfx target for device entries.
    pub target: Option<TargetId>,
}

impl BundleId {
    /// Parses an id; `None` if it has no `kind-` prefix. A device id whose
    /// target does not parse keeps `target: None`.
    pub fn parse(raw: &str) -> Option<BundleId> {
        let (kind, rest) = raw.split_once('-')?;
        if kind.is_empty() {
            return None;
        }
        let (triple, target) = match rest.find("-gfx") {
            Some(i) => (&rest[..i], TargetId::parse(&rest[i + 1..]).ok()),
            None => (rest, None),
        };
        Some(BundleId {
            raw: raw.to_string(),
            kind: kind.to_string(),
            triple: triple.trim_end_matches('-').to_string(),
            target,
        })
    }

    pub fn is_host(&self) -> bool {
        self.kind == "host"
    }

    pub fn is_amdgcn(&self) -> bool {
        self.triple.starts_with("amdgcn")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_every_spelling() {
        let id = BundleId::parse("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-").unwrap();
        assert_eq!(id.kind, "hipv4");
        assert_eq!(id.triple, "amdgcn-amd-amdhsa");
        assert_eq!(id.target.unwrap().to_string(), "gfx90a:xnack-");

        let old = BundleId::parse("hip-amdgcn-amd-amdhsa-unknown-gfx906").unwrap();
        assert_eq!(old.triple, "amdgcn-amd-amdhsa-unknown");
        assert_eq!(old.target.unwrap().to_string(), "gfx906");

        let generic = BundleId::parse("hipv4-amdgcn-amd-amdhsa--gfx10-3-generic").unwrap();
        assert_eq!(generic.target.unwrap().to_string(), "gfx10-3-generic");

        let feats = BundleId::parse("openmp-amdgcn-amd-amdhsa--gfx942:xnack+:sramecc-").unwrap();
        assert_eq!(feats.target.unwrap().to_string(), "gfx942:sramecc-:xnack+");

        let host = BundleId::parse("host-x86_64-unknown-linux-gnu-").unwrap();
        assert!(host.is_host());
        assert_eq!(host.triple, "x86_64-unknown-linux-gnu");
        assert_eq!(host.target, None);

        assert!(BundleId::parse("nodash").is_none());
        assert!(BundleId::parse("-x").is_none());
        let bad = BundleId::parse("hip-amdgcn-amd-amdhsa--gfxzz").unwrap();
        assert_eq!(bad.target, None);
    }
}
