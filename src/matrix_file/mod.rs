//! Matrix files: the model, parsing, validation, expansion and cell ids.
//!
//! A matrix file is parsed once, into a positioned tree ([`tree`]) that keeps
//! scalars exactly as written and knows where every node is; a raw model that
//! rejects unknown keys ([`raw`]) is read from that tree by serde. Validation
//! ([`validate`]) combines both into a [`Spec`]; [`expand`] turns a spec into
//! combinations with GitHub Actions' include/exclude rules and [`cell_id`]
//! names them.

pub mod cell_id;
mod duration;
mod error;
pub mod expand;
mod raw;
mod registry;
pub mod source_pin;
mod suggest;
pub mod test_suite;
mod validate;

/// The positioned YAML tree every matrix file is parsed into (`src/yaml/`).
pub use crate::yaml as tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

pub use duration::{parse_duration, DurationError};
pub use error::SpecError;
pub use expand::{expand, Combination, Origin};
pub use registry::parse_registry;
pub use test_suite::{
    ClassifyAs, ClassifyRule, CtestTemplate, GpuCondition, GtestTemplate, TestSuiteTemplate,
};
pub use tree::Pos;

/// The default upper bound on the number of cells (`--max-cells`).
pub const DEFAULT_MAX_CELLS: usize = 4096;

/// The largest matrix file read: real ones are a few KiB, and a file of
/// 80,000 axis values is 600 KiB. Larger is a mistake or an attack (a
/// symlink to `/dev/zero` is refused before this, as no regular file).
pub const MAX_MATRIX_BYTES: u64 = 4 << 20;

/// A template string from the matrix file and where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Template {
    pub source: String,
    /// Dotted path of the field, e.g. `steps[1].run`, for error messages.
    pub field: String,
    pub pos: Pos,
}

/// One axis: a name and its values, in declaration order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axis {
    pub name: String,
    pub values: Vec<String>,
    pub pos: Pos,
}

/// An include or exclude entry: ordered key/value pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub pairs: Vec<(String, String)>,
    pub pos: Pos,
}

impl Entry {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Whether a step (or a cell by default) needs a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum GpuUse {
    #[default]
    None,
    Optional,
    Required,
}

impl GpuUse {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(GpuUse::None),
            "optional" => Some(GpuUse::Optional),
            "required" => Some(GpuUse::Required),
            _ => None,
        }
    }
}

/// How strictly a GPU's ISA must match the cell's gfx target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum GpuPolicy {
    #[default]
    Exact,
    Compatible,
    Override,
    Extended,
}

impl GpuPolicy {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "exact" => Some(GpuPolicy::Exact),
            "compatible" => Some(GpuPolicy::Compatible),
            "override" => Some(GpuPolicy::Override),
            "extended" => Some(GpuPolicy::Extended),
            _ => None,
        }
    }
}

/// How many GPUs a cell leases: a number, or every GPU that runs its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuCount {
    N(u32),
    All,
}

impl GpuCount {
    /// The number to ask for; `all` asks for at least one.
    pub fn at_least(self) -> u32 {
        match self {
            GpuCount::N(n) => n,
            GpuCount::All => 1,
        }
    }
}

impl Serialize for GpuCount {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            GpuCount::N(n) => s.serialize_u32(*n),
            GpuCount::All => s.serialize_str("all"),
        }
    }
}

impl<'de> serde::Deserialize<'de> for GpuCount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Either {
            N(u32),
            Word(String),
        }
        match Either::deserialize(d)? {
            Either::N(n) => Ok(GpuCount::N(n)),
            Either::Word(w) if w == "all" => Ok(GpuCount::All),
            Either::Word(w) => Err(serde::de::Error::custom(format!(
                "GPU count must be a number or `all`, not `{w}`"
            ))),
        }
    }
}

/// The matrix file's default GPU needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuTemplate {
    pub need: GpuUse,
    pub count: GpuCount,
    pub target: Option<Template>,
    pub policy: GpuPolicy,
    /// CDI device names (templates; an entry may render to several or none).
    pub cdi: Vec<Template>,
}

/// `environment.llvm`, before rendering per cell: the flavour (`release`,
/// `debug`, `source`) and, for `source`, what to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlvmTemplate {
    pub debug: Template,
    /// A git tree (URL or path relative to the matrix file) to build
    /// instead of the distribution's source, at `reference`.
    pub git: Option<Template>,
    pub reference: Option<Template>,
    /// The LLVM major version to build; none: the installed LLVM's.
    pub version: Option<Template>,
    /// Tools to build (`llvm-mc`, `llc`, `clang`…).
    pub tools: Vec<Template>,
    /// `LLVM_TARGETS_TO_BUILD` entries.
    pub targets: Vec<Template>,
    /// Patch files applied to the source before it is configured, paths
    /// relative to the matrix file.
    pub patches: Vec<Template>,
}

impl LlvmTemplate {
    pub fn templates(&self) -> impl Iterator<Item = &Template> {
        std::iter::once(&self.debug)
            .chain(&self.git)
            .chain(&self.reference)
            .chain(&self.version)
            .chain(&self.tools)
            .chain(&self.targets)
            .chain(&self.patches)
    }
}

/// The image recipe, before rendering per cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvironmentTemplate {
    pub family: Template,
    pub base: Template,
    pub suite: Option<Template>,
    pub mirror: Option<Template>,
    pub packages: Vec<Template>,
    pub llvm: LlvmTemplate,
    pub setup: Option<Template>,
    pub env: BTreeMap<String, Template>,
    pub network: Option<Template>,
    /// Archives added beside the base's suite (`experimental`).
    pub suites: Vec<Template>,
    /// The suite whose packages win (`apt-get -t`), if any.
    pub prefer: Option<Template>,
}

/// A step, before rendering per cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepTemplate {
    pub name: String,
    /// A script; with a suite, it runs first.
    pub run: Option<Template>,
    /// A test suite the step runs through its adapter.
    pub suite: Option<TestSuiteTemplate>,
    pub timeout: Option<Duration>,
    pub junit: Vec<Template>,
    pub gpu: Option<GpuUse>,
    pub continue_on_error: bool,
    /// A debugger's view of the step's failing command (or crashing test).
    pub backtrace: Option<BacktraceSpec>,
    /// A `run:` step with `junit:`: run it again, up to this many times,
    /// while its JUnit has failing tests.
    pub rerun_failures: u32,
}

/// When a step's failing command is run again under gdb, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BacktraceSpec {
    /// Which failing commands run again under gdb; none with only
    /// `on: timeout`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on: Option<BacktraceOn>,
    /// `on: timeout`: a step (or a test) past its timeout gets gdb
    /// attached to its processes before the kill.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_timeout: bool,
    /// Breakpoints (`llvm::MCAsmParser::Error`); the backtrace is taken at
    /// the first one hit. Without any: where the command exits or crashes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breaks: Vec<String>,
    /// How long gdb may take, the command's rerun included.
    #[serde(with = "secs_serde")]
    pub timeout: Duration,
    /// How many frames are kept (the innermost first).
    pub frames: usize,
}

/// What makes a step's command worth a backtrace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BacktraceOn {
    /// Any failing command (a non-zero exit, a signal).
    Error,
    /// A command, or a test, that dies of a signal.
    Crash,
}

mod secs_serde {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_secs())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_secs(u64::deserialize(d)?))
    }
}

/// `build:`: steps run once per build key in a container of the
/// environment's image, committed as the image the key's cells start from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildTemplate {
    /// The axes whose values make a build key; empty: one build per
    /// environment.
    pub per: Vec<String>,
    /// Scripts only: no test suites, JUnit or GPUs in a build.
    pub steps: Vec<StepTemplate>,
}

/// A `cache:` entry: `path` in build stages and cells is a named volume,
/// one per rendered `key`, kept across runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheTemplate {
    /// Absolute path inside the containers.
    pub path: String,
    pub key: Template,
}

/// A git source checked out into each cell's container at `/src/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTemplate {
    pub name: String,
    pub url: Template,
    /// Branch, tag or commit; default `HEAD`.
    pub reference: Template,
    /// Patch files or globs, relative to the matrix file, applied in order.
    pub patches: Vec<Template>,
}

/// An expected failure (`expect:`): tests matching `tests` in cells
/// matching `cells`; or, with `flaky`, a known flaky test (`flaky:`), whose
/// failure counts as flaky rather than failing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Expectation {
    pub cells: BTreeMap<String, String>,
    pub tests: Vec<String>,
    pub reason: String,
    /// From `flaky:`, not `expect:`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flaky: bool,
}

impl Expectation {
    /// Whether this expectation covers the cell with these values.
    pub fn matches_cell<'a>(&self, value: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.cells.iter().all(|(k, v)| value(k) == Some(v.as_str()))
    }

    /// An expectation without `tests:` is about the cell as a whole: its
    /// failure (a build step, say) is expected.
    pub fn is_whole_cell(&self) -> bool {
        self.tests.is_empty() && !self.flaky
    }
}

/// Which axes span the report grid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, Default)]
pub struct ReportLayout {
    pub rows: Vec<String>,
    pub columns: Vec<String>,
    /// Globs of the packages whose versions the reports show per
    /// environment; empty: the HIP runtime, LLVM/clang and ROCm libraries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    /// gfx targets the report's release view covers beside those the cells
    /// ask for (`run --coverage`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gfx_targets: Vec<String>,
    /// One merged junit.xml, or one file per cell.
    #[serde(default, skip_serializing_if = "JunitFiles::is_merged")]
    pub junit: JunitFiles,
}

/// How a report writes JUnit: `report.junit` in the matrix file, or
/// `--junit` on the report commands.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum JunitFiles {
    /// `junit.xml`, every cell in one file.
    #[default]
    Merged,
    /// `junit/<cell>.xml`, one file per cell (each under GitLab's 30 MB).
    PerCell,
}

impl JunitFiles {
    pub fn is_merged(&self) -> bool {
        *self == JunitFiles::Merged
    }
}

/// `ci:`: runner selection for the jobs of `plan --format github|gitlab`.
/// Rendered per job, never part of a cell: it decides where a cell runs,
/// not what it runs, so it feeds no hash.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CiTemplate {
    /// GitHub Actions `runs-on` labels.
    pub runs_on: Vec<Template>,
    /// GitLab `tags`.
    pub tags: Vec<Template>,
    /// `ci.slurm` (plain values, not templates; docs/cluster.md).
    pub slurm: SlurmCi,
    /// `ci.k8s` (plain values, not templates; docs/cluster.md).
    pub k8s: K8sCi,
}

/// `ci.slurm`: partition, account, time limit, more sbatch arguments, and
/// gfx/sm processor → the site's gres type.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlurmCi {
    pub partition: Option<String>,
    pub account: Option<String>,
    pub time: Option<String>,
    pub args: Vec<String>,
    pub gres: BTreeMap<String, String>,
}

/// `ci.k8s`: image, namespace, results claim, and gfx/sm processor → node
/// labels (the AMD node labeller's family and device id).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct K8sCi {
    pub image: Option<String>,
    pub namespace: Option<String>,
    pub claim: Option<String>,
    pub nodes: BTreeMap<String, BTreeMap<String, String>>,
}

impl CiTemplate {
    pub fn templates(&self) -> impl Iterator<Item = &Template> {
        self.runs_on.iter().chain(&self.tags)
    }
}

/// A validated matrix file.
#[derive(Debug, Clone)]
pub struct Spec {
    pub file: PathBuf,
    /// SHA-256 of the file's bytes, hex.
    pub source_hash: String,
    pub name: String,
    pub description: Option<String>,
    pub axes: Vec<Axis>,
    pub include: Vec<Entry>,
    pub exclude: Vec<Entry>,
    pub vars: BTreeMap<String, String>,
    pub environment: Option<EnvironmentTemplate>,
    pub steps: Vec<StepTemplate>,
    pub build: Option<BuildTemplate>,
    pub caches: Vec<CacheTemplate>,
    pub sources: Vec<SourceTemplate>,
    pub gpu: GpuTemplate,
    pub timeout: Duration,
    pub retries: u32,
    pub fail_fast: bool,
    pub max_parallel: Option<usize>,
    /// Where environment images are shared (`registry:`), see [`parse_registry`].
    pub registry: Option<String>,
    /// Memory limit of each cell's container, in bytes.
    pub memory: Option<u64>,
    /// `expect:` entries, then `flaky:` entries (marked [`Expectation::flaky`]).
    pub expect: Vec<Expectation>,
    pub classify: Vec<ClassifyRule>,
    pub report: ReportLayout,
    pub ci: CiTemplate,
}

impl Spec {
    /// Reads and validates a matrix file.
    ///
    /// The file must be a regular file (not a pipe or a device) of at most
    /// [`MAX_MATRIX_BYTES`].
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let bytes = crate::safe_read::read_bounded(path, MAX_MATRIX_BYTES, "matrix files", "")
            .map_err(|e| SpecError::new(path, None, format!("cannot read: {e}")))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| SpecError::new(path, None, format!("not UTF-8: {e}")))?;
        Self::parse(path, &text)
    }

    /// Validates matrix-file text; `path` is used in error messages only.
    /// A leading UTF-8 byte-order mark (as some Windows editors write) is
    /// skipped.
    pub fn parse(path: &Path, text: &str) -> Result<Spec, SpecError> {
        validate::validate(path, text.strip_prefix('\u{feff}').unwrap_or(text))
    }

    /// An error pointing at `pos` in this spec's file.
    pub fn error_at(&self, pos: Pos, message: impl Into<String>) -> SpecError {
        SpecError::new(&self.file, Some(pos), message)
    }

    pub fn axis(&self, name: &str) -> Option<&Axis> {
        self.axes.iter().find(|a| a.name == name)
    }

    /// Every key a cell can have: axes, then keys that include entries add.
    pub fn keys(&self) -> Vec<String> {
        validate::spec_keys(&self.axes, &self.include)
    }
}
