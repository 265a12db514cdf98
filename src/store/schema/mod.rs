//! The run store's file schemas: the serde types that say, field by field,
//! what `plan.json` (and the plan part of `build.json` and a cluster's
//! `array.json`) hold on disk, apart from the `crate::plan` and
//! `crate::matrix_file` types the rest of the program works with.
//!
//! The domain types may change (a field renamed, a default moved) without
//! the files changing: each schema type here is converted to and from its
//! domain type (`From` both ways), and only the schema types are read from
//! or written to disk. The JSON they write is the JSON the domain types
//! wrote before this module existed, byte for byte (the tests below read
//! the fixtures' `plan.json` files back and write them again).
//!
//! - [`PlanFile`]: `plan.json` ([`crate::store::record::RunManifest`] in
//!   memory);
//! - [`plan`]: its cells and builds (`crate::plan::Cell`, `Build`, …);
//! - [`spec`]: the matrix file's parts it keeps (`expect:`, `classify:`,
//!   `report:`, the steps' GPU and backtrace settings).

pub mod plan;
pub mod spec;

use serde::{Deserialize, Serialize};

use super::record::RunManifest;

/// `plan.json`: what was planned, and how to judge and show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanFile {
    pub store_version: u32,
    pub run_id: String,
    pub rocmatrix_version: String,
    pub name: String,
    pub matrix_file: String,
    pub matrix_hash: String,
    pub keys: Vec<String>,
    pub expect: Vec<spec::Expectation>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classify: Vec<spec::ClassifyRule>,
    pub report: spec::ReportLayout,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_by: Option<SelectedBy>,
    pub cells: Vec<plan::Cell>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub builds: Vec<plan::Build>,
}

impl From<&RunManifest> for PlanFile {
    fn from(m: &RunManifest) -> Self {
        PlanFile {
            store_version: m.store_version,
            run_id: m.run_id.clone(),
            rocmatrix_version: m.rocmatrix_version.clone(),
            name: m.name.clone(),
            matrix_file: m.matrix_file.clone(),
            matrix_hash: m.matrix_hash.clone(),
            keys: m.keys.clone(),
            expect: m.expect.iter().map(Into::into).collect(),
            classify: m.classify.iter().map(Into::into).collect(),
            report: (&m.report).into(),
            shard: m.shard.clone(),
            selected_by: m.selected_by.clone(),
            cells: m.cells.iter().map(Into::into).collect(),
            builds: m.builds.iter().map(Into::into).collect(),
        }
    }
}

impl From<PlanFile> for RunManifest {
    fn from(f: PlanFile) -> Self {
        RunManifest {
            store_version: f.store_version,
            run_id: f.run_id,
            rocmatrix_version: f.rocmatrix_version,
            name: f.name,
            matrix_file: f.matrix_file,
            matrix_hash: f.matrix_hash,
            keys: f.keys,
            expect: f.expect.into_iter().map(Into::into).collect(),
            classify: f.classify.into_iter().map(Into::into).collect(),
            report: f.report.into(),
            shard: f.shard,
            selected_by: f.selected_by,
            cells: f.cells.into_iter().map(Into::into).collect(),
            builds: f.builds.into_iter().map(Into::into).collect(),
        }
    }
}

/// What chose a run's cells out of its matrix's (`run --affected-by`):
/// the changes, and why each cell was chosen. A plain record, so the
/// schema type is the domain type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectedBy {
    /// The changes as given: `src:rocblas`, `file:patches/fix.patch`.
    pub changes: Vec<String>,
    /// The runs whose locks said what each cell installed and built.
    pub locks: Vec<String>,
    /// How many cells the matrix had to choose from.
    pub of: usize,
    /// The chosen cells, in plan order.
    pub cells: Vec<SelectedCell>,
}

/// Which runs' locks a selection read, as its lines end:
/// ` (lock of RUN)`, ` (locks of RUN and 2 more)`, ` (no lock)`.
pub fn locks_note(locks: &[String]) -> String {
    match locks {
        [] => " (no lock)".to_string(),
        [run] => format!(" (lock of {run})"),
        [run, more @ ..] => format!(" (locks of {run} and {} more)", more.len()),
    }
}

/// One chosen cell and its reasons (`installs librocblas4 … (src:rocblas)`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectedCell {
    /// The cell's id.
    pub id: String,
    pub reasons: Vec<String>,
}

/// A [`RunManifest`] field of another file (a cluster's `array.json`)
/// written as `plan.json` writes it: `#[serde(with = "…::plan_json")]`.
pub mod plan_json {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::PlanFile;
    use crate::store::record::RunManifest;

    pub fn serialize<S: Serializer>(m: &RunManifest, s: S) -> Result<S::Ok, S::Error> {
        PlanFile::from(m).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RunManifest, D::Error> {
        PlanFile::deserialize(d).map(Into::into)
    }
}

/// A `build.json` field of the plan's `BuildKind`, written as
/// [`plan::BuildKind`]: `#[serde(with = "…::build_kind")]`.
pub mod build_kind {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::plan::build::BuildKind;

    pub fn serialize<S: Serializer>(k: &BuildKind, s: S) -> Result<S::Ok, S::Error> {
        super::plan::BuildKind::from(*k).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BuildKind, D::Error> {
        super::plan::BuildKind::deserialize(d).map(Into::into)
    }
}

/// Ordered pairs as a JSON object, in their order both ways (a cell's and a
/// build's `values`).
mod pairs {
    use serde::de::{MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(pairs: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(pairs.len()))?;
        for (k, v) in pairs {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = Vec<(String, String)>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, String>()? {
                    out.push((k, v));
                }
                Ok(out)
            }
        }
        d.deserialize_map(Pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::lock::Lock;
    use crate::store::record::{BuildRecord, CellRecord};

    fn fixtures(name: &str) -> Vec<std::path::PathBuf> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut out = Vec::new();
        let mut dirs = vec![root];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.file_name().is_some_and(|n| n == name) {
                    out.push(p);
                }
            }
        }
        out.sort();
        out
    }

    fn pretty<T: Serialize>(v: &T) -> String {
        String::from_utf8(serde_json::to_vec_pretty(v).unwrap()).unwrap()
    }

    #[test]
    fn every_fixture_plan_reads_into_the_plan_types_and_writes_the_same_bytes() {
        let plans = fixtures(crate::store::layout::PLAN);
        assert!(plans.len() >= 3, "{plans:?}");
        for p in plans {
            let bytes = std::fs::read_to_string(&p).unwrap();
            let manifest = RunManifest::load(&p).unwrap();
            assert_eq!(pretty(&PlanFile::from(&manifest)), bytes, "{}", p.display());
        }
    }

    #[test]
    fn fixture_records_and_locks_write_the_same_bytes_again() {
        for p in fixtures(crate::store::layout::CELL) {
            let record = CellRecord::load(&p).unwrap();
            assert_eq!(pretty(&record), std::fs::read_to_string(&p).unwrap());
        }
        for p in fixtures(crate::store::layout::BUILD) {
            let record = BuildRecord::load(&p).unwrap();
            assert_eq!(pretty(&record), std::fs::read_to_string(&p).unwrap());
        }
        let locks = fixtures(crate::store::layout::LOCK);
        assert!(!locks.is_empty());
        for p in locks {
            let lock = Lock::load(&p).unwrap();
            assert_eq!(pretty(&lock), std::fs::read_to_string(&p).unwrap());
        }
    }

    /// What no fixture has: ctest, classify rules, flaky entries, a
    /// memory limit, CDI devices, sources, JUnit per cell.
    const RARE: &str = r#"{
  "store_version": 1,
  "run_id": "r",
  "rocmatrix_version": "0.1.0",
  "name": "m",
  "matrix_file": "m.yaml",
  "matrix_hash": "h",
  "keys": ["os"],
  "expect": [
    {"cells": {"os": "a"}, "tests": ["t.*"], "reason": "known", "flaky": true}
  ],
  "classify": [
    {"match": "no GPU", "as": "skipped", "reason": "needs a GPU", "gpu": "none"}
  ],
  "report": {"rows": ["os"], "columns": [], "packages": ["hip*"], "gfx_targets": ["gfx90a"], "junit": "per-cell"},
  "shard": "1/2",
  "cells": [
    {
      "id": "a",
      "values": {"os": "a", "cc": "b"},
      "environment": null,
      "environment_hash": "e",
      "steps": [
        {
          "name": "test", "run": "", "timeout": 60, "junit": [], "gpu": "required",
          "continue_on_error": true,
          "suite": {"kind": "ctest", "dir": "/b", "labels": "x", "exclude_labels": "y",
                    "regex": "r", "exclude_regex": "s", "timeout_per_test": 5,
                    "rerun_failures": 2, "args": ["-j2"]},
          "backtrace": {"on": "error", "timeout": 30, "frames": 8}
        }
      ],
      "sources": [{"name": "hip", "url": "/src/hip", "reference": "main", "patches": ["/p/1.patch"]}],
      "gpu": {"need": "optional", "count": 2, "target": "gfx90a", "policy": "extended",
              "cdi": ["amd.com/gpu=0"]},
      "memory": 1073741824,
      "hash": "c"
    }
  ]
}"#;

    #[test]
    fn what_no_fixture_has_reads_into_the_plan_types_and_back() {
        let file: PlanFile = serde_json::from_str(RARE).unwrap();
        let m = RunManifest::from(file.clone());
        assert!(m.expect[0].flaky && m.classify[0].gpu == crate::matrix_file::GpuCondition::None);
        assert_eq!(m.report.junit, crate::matrix_file::JunitFiles::PerCell);
        let c = &m.cells[0];
        assert_eq!(
            c.values,
            [("os".into(), "a".into()), ("cc".into(), "b".into())]
        );
        assert_eq!(c.gpu.count, crate::matrix_file::GpuCount::N(2));
        assert_eq!(c.memory, Some(1 << 30));
        assert_eq!(c.steps[0].timeout, std::time::Duration::from_secs(60));
        let Some(crate::plan::TestSuite::Ctest(ctest)) = &c.steps[0].suite else {
            panic!("{:?}", c.steps[0].suite)
        };
        assert_eq!(
            ctest.timeout_per_test,
            Some(std::time::Duration::from_secs(5))
        );
        let again = PlanFile::from(&m);
        assert_eq!(again, file);
        assert_eq!(
            serde_json::to_value(&again).unwrap(),
            serde_json::from_str::<serde_json::Value>(RARE).unwrap()
        );
    }

    #[test]
    fn a_gpu_count_is_a_number_or_all_and_nothing_else() {
        let all: spec::GpuCount = serde_json::from_str(r#""all""#).unwrap();
        assert_eq!(
            crate::matrix_file::GpuCount::from(all),
            crate::matrix_file::GpuCount::All
        );
        assert_eq!(serde_json::to_string(&all).unwrap(), r#""all""#);
        assert!(serde_json::from_str::<spec::GpuCount>(r#""some""#).is_err());
    }

    /// Whether a concrete type implements `Deserialize`: the inherent
    /// constant wins over the trait's where its bound holds.
    struct W<T>(std::marker::PhantomData<T>);
    trait No {
        const YES: bool = false;
    }
    impl<T> No for W<T> {}
    impl<T: serde::de::DeserializeOwned> W<T> {
        const YES: bool = true;
    }
    macro_rules! deserializes {
        ($t:ty) => {
            <W<$t>>::YES
        };
    }

    #[test]
    fn the_plan_types_are_no_longer_read_from_disk_only_the_schema_is() {
        // Checked as the test compiles.
        const { assert!(deserializes!(PlanFile) && deserializes!(plan::Cell)) };
        const { assert!(!deserializes!(RunManifest)) };
        const { assert!(!deserializes!(crate::plan::Cell)) };
        const { assert!(!deserializes!(crate::plan::Step)) };
        const { assert!(!deserializes!(crate::plan::Environment)) };
        const { assert!(!deserializes!(crate::plan::Llvm)) };
        const { assert!(!deserializes!(crate::plan::GpuRequest)) };
        const { assert!(!deserializes!(crate::plan::Build)) };
        const { assert!(!deserializes!(crate::plan::build::BuildKind)) };
        const { assert!(!deserializes!(crate::plan::TestSuite)) };
        const { assert!(!deserializes!(crate::plan::SourceRef)) };
        const { assert!(!deserializes!(crate::plan::CacheMount)) };
    }
}
