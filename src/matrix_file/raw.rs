//! The raw, serde-shaped model of a matrix file.
//!
//! It mirrors the YAML one to one and rejects unknown keys; it is never used
//! outside `matrix_file`: [`super::validate`] turns it into the typed [`super::Spec`].
//! Every scalar that a user may write unquoted (axis values, versions) is read
//! as a `String`, which the tree's deserializer (`src/yaml/de.rs`) fills
//! with the scalar exactly as written.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSpec {
    pub name: Option<String>,
    pub description: Option<String>,
    /// Read from the positioned tree directly (see [`super::tree`]): axis
    /// by axis, each value as written and with its own position.
    #[serde(default)]
    #[allow(dead_code)]
    pub matrix: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    #[serde(default)]
    pub environment: Option<RawEnvironment>,
    #[serde(default)]
    pub steps: Vec<RawStep>,
    #[serde(default)]
    pub build: Option<RawBuild>,
    #[serde(default)]
    pub cache: Vec<RawCache>,
    #[serde(default)]
    pub sources: Vec<RawSource>,
    #[serde(default)]
    pub gpu: Option<RawGpu>,
    pub timeout: Option<String>,
    pub retries: Option<u32>,
    /// The default of `gtest.rerun_failures`/`ctest.rerun_failures` and of
    /// a `run:` step's with `junit:`, for steps that do not give their own.
    pub rerun_failures: Option<u32>,
    pub fail_fast: Option<bool>,
    pub max_parallel: Option<usize>,
    pub registry: Option<String>,
    pub memory: Option<String>,
    #[serde(default)]
    pub expect: Vec<RawExpect>,
    #[serde(default)]
    pub flaky: Vec<RawExpect>,
    #[serde(default)]
    pub classify: Vec<RawClassify>,
    #[serde(default)]
    pub report: Option<RawReport>,
    #[serde(default)]
    pub ci: Option<RawCi>,
}

/// `build:`: steps run once per key, whose result the cells start from.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBuild {
    #[serde(default)]
    pub per: Vec<String>,
    #[serde(default)]
    pub steps: Vec<RawStep>,
}

/// A `cache:` entry: a directory kept in a named volume across runs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCache {
    pub path: String,
    pub key: String,
}

/// `ci:`: how generated CI jobs pick their runners.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCi {
    #[serde(default)]
    pub runs_on: Vec<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub slurm: Option<RawSlurm>,
    #[serde(default)]
    pub k8s: Option<RawK8s>,
}

/// `ci.slurm`: where the Slurm job array runs, and the site's gres type
/// for each gfx/sm processor.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSlurm {
    pub partition: Option<String>,
    pub account: Option<String>,
    pub time: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub gres: std::collections::BTreeMap<String, String>,
}

/// `ci.k8s`: the Indexed Jobs' image, namespace, results claim, and node
/// labels for each gfx/sm processor.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawK8s {
    pub image: Option<String>,
    pub namespace: Option<String>,
    pub claim: Option<String>,
    #[serde(default)]
    pub nodes: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEnvironment {
    pub family: Option<String>,
    pub base: Option<String>,
    pub suite: Option<String>,
    pub mirror: Option<String>,
    #[serde(default)]
    pub packages: Vec<String>,
    pub llvm: Option<RawLlvm>,
    pub setup: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub network: Option<String>,
    #[serde(default)]
    pub suites: Vec<String>,
    pub prefer: Option<String>,
}

/// `environment.llvm`: `release`, `debug` (the distribution's debug
/// packages), or a mapping that builds LLVM from the distribution's source.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawLlvm {
    Flavour(String),
    Source(RawLlvmSource),
}

/// `environment.llvm: {debug: source, git, ref, version, tools, targets,
/// patches}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLlvmSource {
    pub debug: String,
    /// A contributor's LLVM tree (URL or local path) instead of the
    /// distribution's source package.
    pub git: Option<String>,
    /// The tree's branch, tag or commit (default `HEAD`).
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    pub version: Option<String>,
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub targets: Vec<String>,
    #[serde(default)]
    pub patches: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStep {
    pub name: String,
    pub run: Option<String>,
    pub gtest: Option<RawGtest>,
    pub ctest: Option<RawCtest>,
    pub autopkgtest: Option<RawAutopkgtest>,
    pub timeout: Option<String>,
    #[serde(default)]
    pub junit: Vec<String>,
    pub gpu: Option<String>,
    #[serde(default)]
    pub continue_on_error: bool,
    pub backtrace: Option<RawBacktrace>,
    /// A `run:` step with `junit:` run again while its JUnit has failing
    /// tests (suite steps give theirs under `gtest:`/`ctest:`).
    pub rerun_failures: Option<u32>,
}

/// `backtrace: {on: error|crash|timeout or a list of them, break: […],
/// timeout, frames}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBacktrace {
    pub on: RawBacktraceOn,
    #[serde(rename = "break", default)]
    pub breaks: Vec<String>,
    pub timeout: Option<String>,
    pub frames: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGpu {
    pub need: Option<String>,
    pub count: Option<RawCount>,
    pub target: Option<String>,
    pub policy: Option<String>,
    #[serde(default)]
    pub cdi: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExpect {
    #[serde(default)]
    pub cells: BTreeMap<String, String>,
    #[serde(default)]
    pub tests: Vec<String>,
    pub reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReport {
    #[serde(default)]
    pub rows: Vec<String>,
    #[serde(default)]
    pub columns: Vec<String>,
    #[serde(default)]
    pub packages: Vec<String>,
    #[serde(default)]
    pub gfx_targets: Vec<String>,
    #[serde(default)]
    pub junit: super::JunitFiles,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSource {
    pub name: String,
    pub url: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    #[serde(default)]
    pub patches: Vec<String>,
}

/// `backtrace.on`: one word or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawBacktraceOn {
    One(String),
    Many(Vec<String>),
}

/// `gpu.count`: a number or `all`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawCount {
    Number(u32),
    Word(String),
}

/// A step's `gtest:` suite.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGtest {
    pub binary: String,
    pub filter: Option<String>,
    pub timeout_per_test: Option<String>,
    pub rerun_failures: Option<u32>,
    #[serde(default)]
    pub args: Vec<String>,
}

/// A step's `ctest:` suite.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCtest {
    pub dir: String,
    pub labels: Option<String>,
    pub exclude_labels: Option<String>,
    pub regex: Option<String>,
    pub exclude_regex: Option<String>,
    pub timeout_per_test: Option<String>,
    pub rerun_failures: Option<u32>,
    #[serde(default)]
    pub args: Vec<String>,
}

/// A step's `autopkgtest:`: a source package or a tree in the cell.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAutopkgtest {
    pub source: Option<String>,
    pub path: Option<String>,
    pub timeout_per_test: Option<String>,
    /// `adapter` or `run-tests` (docs/autopkgtest.md).
    pub gtest: Option<String>,
}

/// A `classify:` rule.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClassify {
    #[serde(rename = "match")]
    pub pattern: String,
    #[serde(rename = "as")]
    pub outcome: String,
    pub reason: String,
    #[serde(default)]
    pub when: Option<RawWhen>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWhen {
    pub gpu: Option<String>,
}
