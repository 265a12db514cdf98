//! `lock.json`: what a run's environments and cells were made of, precisely
//! enough to make them again — base images and how they were obtained,
//! environment images, every installed package with its exact version, and
//! per cell its source commits and patch hashes.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::StoreError;

pub const LOCK_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Lock {
    pub lock_version: u32,
    pub rocmatrix_version: String,
    pub matrix_file: String,
    pub matrix_hash: String,
    /// Environment hash → what it was made of.
    pub environments: BTreeMap<String, LockedEnvironment>,
    /// Cell id → what it ran on.
    pub cells: BTreeMap<String, LockedCell>,
    /// Build key → the snapshot its cells started from.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub builds: BTreeMap<String, LockedBuild>,
}

/// A build stage's snapshot: enough to find it again, or to know that a
/// snapshot of the same name is not the one the lock saw.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LockedBuild {
    /// The build's hash from the plan.
    pub hash: String,
    pub environment: String,
    /// `rocmatrix/build:<hash>`.
    pub snapshot: String,
    pub id: String,
    #[serde(default)]
    pub sources: Vec<LockedSource>,
    /// `<registry>/build@sha256:…` when the run shared it through one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LockedEnvironment {
    pub family: String,
    pub base: BaseImage,
    pub image: EnvImage,
    /// Installed packages: name → exact version.
    pub packages: BTreeMap<String, String>,
    /// The source package of each installed package whose source differs
    /// from its own name or version, where the family's package manager
    /// says it (Debian's dpkg). A package not listed is its own source;
    /// locks older than this field list none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<String, PackageSource>,
}

/// The source package a binary package was built from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PackageSource {
    pub name: String,
    /// The source's version, where it differs from the package's (a
    /// binary-only upload's `+b1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl PackageSource {
    /// The source of package `name` at `version`, as the lock records it:
    /// none where it is the package's own name (without an architecture)
    /// and version, or unknown (empty).
    pub fn recorded(name: &str, version: &str, source: &str, source_version: &str) -> Option<Self> {
        let own = name.split(':').next().unwrap_or(name);
        let version = (!source_version.is_empty() && source_version != version)
            .then(|| source_version.to_string());
        (!source.is_empty() && (source != own || version.is_some())).then(|| PackageSource {
            name: source.to_string(),
            version,
        })
    }
}

impl LockedEnvironment {
    /// The source package of installed package `name` and its version:
    /// the recorded one, else the package itself (its name without an
    /// architecture, `libfoo:amd64` → `libfoo`).
    pub fn source_of<'a>(&'a self, name: &'a str) -> Option<(&'a str, &'a str)> {
        let version = self.packages.get(name)?;
        Some(match self.sources.get(name) {
            Some(s) => (s.name.as_str(), s.version.as_deref().unwrap_or(version)),
            None => (name.split(':').next().unwrap_or(name), version.as_str()),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct LockedCell {
    pub environment: String,
    /// The build stage it started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    #[serde(default)]
    pub sources: Vec<LockedSource>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LockedSource {
    pub name: String,
    pub url: String,
    /// The ref as rendered for the cell.
    pub reference: String,
    pub commit: String,
    pub patches: Vec<LockedPatch>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LockedPatch {
    pub file: String,
    pub sha256: String,
}

impl Lock {
    /// Reads a `lock.json` ([`super::read::MAX_LOCK`] at most), once its
    /// `lock_version` is [`LOCK_VERSION`].
    pub fn load(path: &Path) -> Result<Lock, StoreError> {
        super::read::versioned(
            path,
            super::read::MAX_LOCK,
            "lock.json",
            "lock_version",
            LOCK_VERSION,
        )
    }
}

/// A base image ready in the engine, and how it got there.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BaseImage {
    pub reference: String,
    pub id: String,
    pub origin: BaseOrigin,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "how", rename_all = "lowercase")]
pub enum BaseOrigin {
    /// The engine had it (it may have been bootstrapped by an earlier run:
    /// then `bootstrapped` says from where).
    Present {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bootstrapped: Option<Bootstrap>,
    },
    Pulled,
    /// Pulled from the run's registry, where an earlier run pushed the
    /// base it had bootstrapped (`<registry>/base:<family>-<suite>-<hash>`).
    Registry {
        reference: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bootstrapped: Option<Bootstrap>,
    },
    Bootstrapped(Bootstrap),
    Imported {
        tarball: String,
        sha256: String,
    },
}

/// Where a bootstrapped root file system came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Bootstrap {
    pub suite: String,
    pub mirror: String,
    /// The `Date:` of the suite's Release file at bootstrap time.
    pub release_date: Option<String>,
}

/// An environment image ready in the engine.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EnvImage {
    pub tag: String,
    pub id: String,
    /// True when the tag existed and nothing was built.
    pub reused: bool,
    /// True when it was pulled from the registry instead of built.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pulled: bool,
    /// Where the registry keeps exactly this image,
    /// `<registry>/env@sha256:…`, when it was pulled from or pushed to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
}
