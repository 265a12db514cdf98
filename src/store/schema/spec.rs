//! The matrix file's parts that `plan.json` keeps, as the file spells them:
//! `expect:`/`flaky:` entries, `classify:` rules, the report layout, and the
//! GPU and backtrace settings of the cells' steps, each with its
//! conversions to and from `crate::matrix_file`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::matrix_file;

/// An `expect:` (or `flaky:`) entry (`matrix_file::Expectation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    pub cells: BTreeMap<String, String>,
    pub tests: Vec<String>,
    pub reason: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flaky: bool,
}

/// A `classify:` rule (`matrix_file::ClassifyRule`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassifyRule {
    #[serde(rename = "match")]
    pub pattern: String,
    #[serde(rename = "as")]
    pub outcome: ClassifyAs,
    pub reason: String,
    #[serde(default)]
    pub gpu: GpuCondition,
}

/// `matrix_file::ClassifyAs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassifyAs {
    Skipped,
    Xfail,
    Error,
}

/// `matrix_file::GpuCondition`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuCondition {
    #[default]
    Any,
    None,
}

/// Which axes span the report grid (`matrix_file::ReportLayout`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportLayout {
    pub rows: Vec<String>,
    pub columns: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gfx_targets: Vec<String>,
    #[serde(default, skip_serializing_if = "JunitFiles::is_merged")]
    pub junit: JunitFiles,
}

/// `matrix_file::JunitFiles`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JunitFiles {
    #[default]
    Merged,
    PerCell,
}

impl JunitFiles {
    pub fn is_merged(&self) -> bool {
        *self == JunitFiles::Merged
    }
}

/// `matrix_file::GpuUse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuUse {
    None,
    Optional,
    Required,
}

/// `matrix_file::GpuPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuPolicy {
    Exact,
    Compatible,
    Override,
    Extended,
}

/// A GPU count: a number, or `"all"` (`matrix_file::GpuCount`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GpuCount {
    N(u32),
    All(All),
}

/// The word `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum All {
    #[serde(rename = "all")]
    All,
}

/// A step's `backtrace:` (`matrix_file::BacktraceSpec`); `timeout` in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BacktraceSpec {
    /// None with only `on: timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<BacktraceOn>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_timeout: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breaks: Vec<String>,
    pub timeout: u64,
    pub frames: usize,
}

/// `matrix_file::BacktraceOn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BacktraceOn {
    Error,
    Crash,
}

impl From<&matrix_file::Expectation> for Expectation {
    fn from(e: &matrix_file::Expectation) -> Self {
        Expectation {
            cells: e.cells.clone(),
            tests: e.tests.clone(),
            reason: e.reason.clone(),
            flaky: e.flaky,
        }
    }
}

impl From<Expectation> for matrix_file::Expectation {
    fn from(e: Expectation) -> Self {
        matrix_file::Expectation {
            cells: e.cells,
            tests: e.tests,
            reason: e.reason,
            flaky: e.flaky,
        }
    }
}

impl From<&matrix_file::ClassifyRule> for ClassifyRule {
    fn from(r: &matrix_file::ClassifyRule) -> Self {
        ClassifyRule {
            pattern: r.pattern.clone(),
            outcome: match r.outcome {
                matrix_file::ClassifyAs::Skipped => ClassifyAs::Skipped,
                matrix_file::ClassifyAs::Xfail => ClassifyAs::Xfail,
                matrix_file::ClassifyAs::Error => ClassifyAs::Error,
            },
            reason: r.reason.clone(),
            gpu: match r.gpu {
                matrix_file::GpuCondition::Any => GpuCondition::Any,
                matrix_file::GpuCondition::None => GpuCondition::None,
            },
        }
    }
}

impl From<ClassifyRule> for matrix_file::ClassifyRule {
    fn from(r: ClassifyRule) -> Self {
        matrix_file::ClassifyRule {
            pattern: r.pattern,
            outcome: match r.outcome {
                ClassifyAs::Skipped => matrix_file::ClassifyAs::Skipped,
                ClassifyAs::Xfail => matrix_file::ClassifyAs::Xfail,
                ClassifyAs::Error => matrix_file::ClassifyAs::Error,
            },
            reason: r.reason,
            gpu: match r.gpu {
                GpuCondition::Any => matrix_file::GpuCondition::Any,
                GpuCondition::None => matrix_file::GpuCondition::None,
            },
        }
    }
}

impl From<&matrix_file::ReportLayout> for ReportLayout {
    fn from(r: &matrix_file::ReportLayout) -> Self {
        ReportLayout {
            rows: r.rows.clone(),
            columns: r.columns.clone(),
            packages: r.packages.clone(),
            gfx_targets: r.gfx_targets.clone(),
            junit: match r.junit {
                matrix_file::JunitFiles::Merged => JunitFiles::Merged,
                matrix_file::JunitFiles::PerCell => JunitFiles::PerCell,
            },
        }
    }
}

impl From<ReportLayout> for matrix_file::ReportLayout {
    fn from(r: ReportLayout) -> Self {
        matrix_file::ReportLayout {
            rows: r.rows,
            columns: r.columns,
            packages: r.packages,
            gfx_targets: r.gfx_targets,
            junit: match r.junit {
                JunitFiles::Merged => matrix_file::JunitFiles::Merged,
                JunitFiles::PerCell => matrix_file::JunitFiles::PerCell,
            },
        }
    }
}

impl From<matrix_file::GpuUse> for GpuUse {
    fn from(g: matrix_file::GpuUse) -> Self {
        match g {
            matrix_file::GpuUse::None => GpuUse::None,
            matrix_file::GpuUse::Optional => GpuUse::Optional,
            matrix_file::GpuUse::Required => GpuUse::Required,
        }
    }
}

impl From<GpuUse> for matrix_file::GpuUse {
    fn from(g: GpuUse) -> Self {
        match g {
            GpuUse::None => matrix_file::GpuUse::None,
            GpuUse::Optional => matrix_file::GpuUse::Optional,
            GpuUse::Required => matrix_file::GpuUse::Required,
        }
    }
}

impl From<matrix_file::GpuPolicy> for GpuPolicy {
    fn from(p: matrix_file::GpuPolicy) -> Self {
        match p {
            matrix_file::GpuPolicy::Exact => GpuPolicy::Exact,
            matrix_file::GpuPolicy::Compatible => GpuPolicy::Compatible,
            matrix_file::GpuPolicy::Override => GpuPolicy::Override,
            matrix_file::GpuPolicy::Extended => GpuPolicy::Extended,
        }
    }
}

impl From<GpuPolicy> for matrix_file::GpuPolicy {
    fn from(p: GpuPolicy) -> Self {
        match p {
            GpuPolicy::Exact => matrix_file::GpuPolicy::Exact,
            GpuPolicy::Compatible => matrix_file::GpuPolicy::Compatible,
            GpuPolicy::Override => matrix_file::GpuPolicy::Override,
            GpuPolicy::Extended => matrix_file::GpuPolicy::Extended,
        }
    }
}

impl From<matrix_file::GpuCount> for GpuCount {
    fn from(c: matrix_file::GpuCount) -> Self {
        match c {
            matrix_file::GpuCount::N(n) => GpuCount::N(n),
            matrix_file::GpuCount::All => GpuCount::All(All::All),
        }
    }
}

impl From<GpuCount> for matrix_file::GpuCount {
    fn from(c: GpuCount) -> Self {
        match c {
            GpuCount::N(n) => matrix_file::GpuCount::N(n),
            GpuCount::All(All::All) => matrix_file::GpuCount::All,
        }
    }
}

impl From<&matrix_file::BacktraceSpec> for BacktraceSpec {
    fn from(b: &matrix_file::BacktraceSpec) -> Self {
        BacktraceSpec {
            on: b.on.map(|on| match on {
                matrix_file::BacktraceOn::Error => BacktraceOn::Error,
                matrix_file::BacktraceOn::Crash => BacktraceOn::Crash,
            }),
            on_timeout: b.on_timeout,
            breaks: b.breaks.clone(),
            timeout: b.timeout.as_secs(),
            frames: b.frames,
        }
    }
}

impl From<BacktraceSpec> for matrix_file::BacktraceSpec {
    fn from(b: BacktraceSpec) -> Self {
        matrix_file::BacktraceSpec {
            on: b.on.map(|on| match on {
                BacktraceOn::Error => matrix_file::BacktraceOn::Error,
                BacktraceOn::Crash => matrix_file::BacktraceOn::Crash,
            }),
            on_timeout: b.on_timeout,
            breaks: b.breaks,
            timeout: std::time::Duration::from_secs(b.timeout),
            frames: b.frames,
        }
    }
}
