//! The matrix file's parts that `plan.json` keeps, as the file spells them:
//! `expect:`/`flaky:` entries, `classify:` rules, the report layout, and the
//! GPU and backtrace settings of the cells' steps, each with its
//! conversions to and from `crate::spec`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::spec;

/// An `expect:` (or `flaky:`) entry (`spec::Expectation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    pub cells: BTreeMap<String, String>,
    pub tests: Vec<String>,
    pub reason: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flaky: bool,
}

/// A `classify:` rule (`spec::ClassifyRule`).
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

/// `spec::ClassifyAs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassifyAs {
    Skipped,
    Xfail,
    Error,
}

/// `spec::GpuCondition`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuCondition {
    #[default]
    Any,
    None,
}

/// Which axes span the report grid (`spec::ReportLayout`).
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

/// `spec::JunitFiles`.
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

/// `spec::GpuUse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuUse {
    None,
    Optional,
    Required,
}

/// `spec::GpuPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuPolicy {
    Exact,
    Compatible,
    Override,
    Extended,
}

/// A GPU count: a number, or `"all"` (`spec::GpuCount`).
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

/// A step's `backtrace:` (`spec::BacktraceSpec`); `timeout` in seconds.
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

/// `spec::BacktraceOn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BacktraceOn {
    Error,
    Crash,
}

impl From<&spec::Expectation> for Expectation {
    fn from(e: &spec::Expectation) -> Self {
        Expectation {
            cells: e.cells.clone(),
            tests: e.tests.clone(),
            reason: e.reason.clone(),
            flaky: e.flaky,
        }
    }
}

impl From<Expectation> for spec::Expectation {
    fn from(e: Expectation) -> Self {
        spec::Expectation {
            cells: e.cells,
            tests: e.tests,
            reason: e.reason,
            flaky: e.flaky,
        }
    }
}

impl From<&spec::ClassifyRule> for ClassifyRule {
    fn from(r: &spec::ClassifyRule) -> Self {
        ClassifyRule {
            pattern: r.pattern.clone(),
            outcome: match r.outcome {
                spec::ClassifyAs::Skipped => ClassifyAs::Skipped,
                spec::ClassifyAs::Xfail => ClassifyAs::Xfail,
                spec::ClassifyAs::Error => ClassifyAs::Error,
            },
            reason: r.reason.clone(),
            gpu: match r.gpu {
                spec::GpuCondition::Any => GpuCondition::Any,
                spec::GpuCondition::None => GpuCondition::None,
            },
        }
    }
}

impl From<ClassifyRule> for spec::ClassifyRule {
    fn from(r: ClassifyRule) -> Self {
        spec::ClassifyRule {
            pattern: r.pattern,
            outcome: match r.outcome {
                ClassifyAs::Skipped => spec::ClassifyAs::Skipped,
                ClassifyAs::Xfail => spec::ClassifyAs::Xfail,
                ClassifyAs::Error => spec::ClassifyAs::Error,
            },
            reason: r.reason,
            gpu: match r.gpu {
                GpuCondition::Any => spec::GpuCondition::Any,
                GpuCondition::None => spec::GpuCondition::None,
            },
        }
    }
}

impl From<&spec::ReportLayout> for ReportLayout {
    fn from(r: &spec::ReportLayout) -> Self {
        ReportLayout {
            rows: r.rows.clone(),
            columns: r.columns.clone(),
            packages: r.packages.clone(),
            gfx_targets: r.gfx_targets.clone(),
            junit: match r.junit {
                spec::JunitFiles::Merged => JunitFiles::Merged,
                spec::JunitFiles::PerCell => JunitFiles::PerCell,
            },
        }
    }
}

impl From<ReportLayout> for spec::ReportLayout {
    fn from(r: ReportLayout) -> Self {
        spec::ReportLayout {
            rows: r.rows,
            columns: r.columns,
            packages: r.packages,
            gfx_targets: r.gfx_targets,
            junit: match r.junit {
                JunitFiles::Merged => spec::JunitFiles::Merged,
                JunitFiles::PerCell => spec::JunitFiles::PerCell,
            },
        }
    }
}

impl From<spec::GpuUse> for GpuUse {
    fn from(g: spec::GpuUse) -> Self {
        match g {
            spec::GpuUse::None => GpuUse::None,
            spec::GpuUse::Optional => GpuUse::Optional,
            spec::GpuUse::Required => GpuUse::Required,
        }
    }
}

impl From<GpuUse> for spec::GpuUse {
    fn from(g: GpuUse) -> Self {
        match g {
            GpuUse::None => spec::GpuUse::None,
            GpuUse::Optional => spec::GpuUse::Optional,
            GpuUse::Required => spec::GpuUse::Required,
        }
    }
}

impl From<spec::GpuPolicy> for GpuPolicy {
    fn from(p: spec::GpuPolicy) -> Self {
        match p {
            spec::GpuPolicy::Exact => GpuPolicy::Exact,
            spec::GpuPolicy::Compatible => GpuPolicy::Compatible,
            spec::GpuPolicy::Override => GpuPolicy::Override,
            spec::GpuPolicy::Extended => GpuPolicy::Extended,
        }
    }
}

impl From<GpuPolicy> for spec::GpuPolicy {
    fn from(p: GpuPolicy) -> Self {
        match p {
            GpuPolicy::Exact => spec::GpuPolicy::Exact,
            GpuPolicy::Compatible => spec::GpuPolicy::Compatible,
            GpuPolicy::Override => spec::GpuPolicy::Override,
            GpuPolicy::Extended => spec::GpuPolicy::Extended,
        }
    }
}

impl From<spec::GpuCount> for GpuCount {
    fn from(c: spec::GpuCount) -> Self {
        match c {
            spec::GpuCount::N(n) => GpuCount::N(n),
            spec::GpuCount::All => GpuCount::All(All::All),
        }
    }
}

impl From<GpuCount> for spec::GpuCount {
    fn from(c: GpuCount) -> Self {
        match c {
            GpuCount::N(n) => spec::GpuCount::N(n),
            GpuCount::All(All::All) => spec::GpuCount::All,
        }
    }
}

impl From<&spec::BacktraceSpec> for BacktraceSpec {
    fn from(b: &spec::BacktraceSpec) -> Self {
        BacktraceSpec {
            on: b.on.map(|on| match on {
                spec::BacktraceOn::Error => BacktraceOn::Error,
                spec::BacktraceOn::Crash => BacktraceOn::Crash,
            }),
            on_timeout: b.on_timeout,
            breaks: b.breaks.clone(),
            timeout: b.timeout.as_secs(),
            frames: b.frames,
        }
    }
}

impl From<BacktraceSpec> for spec::BacktraceSpec {
    fn from(b: BacktraceSpec) -> Self {
        spec::BacktraceSpec {
            on: b.on.map(|on| match on {
                BacktraceOn::Error => spec::BacktraceOn::Error,
                BacktraceOn::Crash => spec::BacktraceOn::Crash,
            }),
            on_timeout: b.on_timeout,
            breaks: b.breaks,
            timeout: std::time::Duration::from_secs(b.timeout),
            frames: b.frames,
        }
    }
}
