//! Reading the run store's files, each through one typed reader here (or
//! beside its type): every read bounded, since a run store may be a CI
//! artifact someone downloaded, and every versioned file's version checked
//! before its content is, so that a file a newer rocmatrix wrote is refused
//! by name and version rather than by whichever field serde trips on.
//!
//! The caps, one per file:
//!
//! | file | cap | version |
//! | --- | --- | --- |
//! | `plan.json` | [`MAX_PLAN`] | `store_version` ([`super::record::STORE_VERSION`]): the run store's |
//! | `cells/*/cell.json`, `builds/*/build.json` | [`MAX_RECORD`] | the run store's |
//! | `run.json` | [`MAX_RECORD`] | the run store's |
//! | `lock.json` | [`MAX_LOCK`] | `lock_version` ([`super::lock::LOCK_VERSION`]) |
//! | `images/*.coverage.json` | [`MAX_COVERAGE`] | the run store's |
//! | the cache's `image-use.json` | [`MAX_IMAGE_USE`] | none (a map; unreadable is empty) |
//!
//! A plan of 4,096 cells with long scripts is a few MiB, a cell's record
//! with its log tails well under one; a lock lists every package of every
//! environment (some thousands each).

use std::path::Path;

use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::StoreError;

/// `plan.json`.
pub const MAX_PLAN: u64 = 64 << 20;
/// `cell.json`, `build.json`, `run.json`.
pub const MAX_RECORD: u64 = 64 << 20;
/// `lock.json`.
pub const MAX_LOCK: u64 = 64 << 20;
/// One environment's `*.coverage.json`.
pub const MAX_COVERAGE: u64 = 64 << 20;
/// The cache's `image-use.json`.
pub const MAX_IMAGE_USE: u64 = 16 << 20;

/// The text of `path`, refused above `limit` bytes; `what` names the files
/// in the error (`"plan.json files"`).
pub fn text(path: &Path, limit: u64, what: &str) -> Result<String, StoreError> {
    crate::safe_read::read_bounded_string(path, limit, what, "")
        .map_err(|e| StoreError::io(path, e))
}

/// `path` read (within `limit`) as JSON into `T`.
pub fn json<T: DeserializeOwned>(path: &Path, limit: u64, what: &str) -> Result<T, StoreError> {
    parse(path, &text(path, limit, what)?)
}

/// `text`, the content of `path`, as JSON into `T`.
pub fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// `path` (within `limit`) as JSON into `T`, once its `field` (a version
/// number) says this rocmatrix reads it: `known`, no other.
pub fn versioned<T: DeserializeOwned>(
    path: &Path,
    limit: u64,
    file: &'static str,
    field: &'static str,
    known: u32,
) -> Result<T, StoreError> {
    let text = text(path, limit, &format!("{file} files"))?;
    let found = version_of(path, &text, field)?;
    if found != known {
        return Err(StoreError::Version {
            path: path.to_path_buf(),
            file,
            field,
            found,
            known,
        });
    }
    parse(path, &text)
}

/// The number in the top-level `field` of the JSON object `text`, read
/// without building the rest of the document.
fn version_of(path: &Path, text: &str, field: &'static str) -> Result<u32, StoreError> {
    let mut de = serde_json::Deserializer::from_str(text);
    match Peek(field).deserialize(&mut de) {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            message: format!("missing field `{field}`"),
        }),
        Err(e) => Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
    }
}

/// Finds one top-level field of an object, skipping the others' values.
struct Peek(&'static str);

impl<'de> DeserializeSeed<'de> for Peek {
    type Value = Option<u32>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<u32>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Peek {
    type Value = Option<u32>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a JSON object with `{}`", self.0)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Option<u32>, A::Error> {
        let mut found = None;
        while let Some(key) = m.next_key::<String>()? {
            if key == self.0 {
                found = Some(m.next_value::<u32>()?);
            } else {
                m.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::lock::Lock;
    use crate::store::record::{CellRecord, RunManifest};

    #[test]
    fn a_plan_of_a_newer_store_version_is_refused_by_file_and_versions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(crate::store::layout::PLAN);
        // A newer rocmatrix may have changed anything but the version.
        std::fs::write(&path, r#"{"cells": 3, "store_version": 2, "new": {}}"#).unwrap();
        let e = RunManifest::load(&path).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::Version {
                    found: 2,
                    known: 1,
                    ..
                }
            ),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains("plan.json has store_version 2, newer than 1")
                && text.contains("read it with a newer rocmatrix")
                && text.starts_with(&path.display().to_string()),
            "{text}"
        );
    }

    #[test]
    fn a_lock_of_another_version_is_refused_and_one_without_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(crate::store::layout::LOCK);
        std::fs::write(&path, r#"{"lock_version": 0}"#).unwrap();
        let e = Lock::load(&path).unwrap_err().to_string();
        assert!(
            e.contains("lock.json has lock_version 0, older than 1"),
            "{e}"
        );
        std::fs::write(&path, r#"{"environments": {}}"#).unwrap();
        let e = Lock::load(&path).unwrap_err();
        assert!(
            matches!(&e, StoreError::Corrupt { message, .. } if message.contains("lock_version")),
            "{e:?}"
        );
    }

    #[test]
    fn reads_are_bounded_before_they_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = crate::store::layout::cell_record_in(dir.path());
        // Sparse: its size says too large; nothing of it is read.
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(MAX_RECORD + 1).unwrap();
        let e = CellRecord::load(&path).unwrap_err();
        assert!(matches!(e, StoreError::Io { .. }), "{e:?}");
        assert!(e.to_string().contains("cell.json files"), "{e}");
        let plan = crate::store::layout::plan_of(dir.path());
        std::fs::File::create(&plan)
            .unwrap()
            .set_len(MAX_PLAN + 1)
            .unwrap();
        assert!(RunManifest::load(&plan)
            .unwrap_err()
            .to_string()
            .contains("plan.json files"));
    }
}
