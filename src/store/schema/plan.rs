//! The cells and builds of `plan.json` as the file spells them: one serde
//! type per `crate::plan` type a run store holds, with the conversions both
//! ways. The plan's own types keep `Serialize` for the hashes and `plan
//! --format json`; what `plan.json` holds is decided here, so that a change
//! to a plan type is a change to this file before it is one to the format.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::pairs;
use super::spec::{BacktraceSpec, GpuCount, GpuPolicy, GpuUse};
use crate::plan;

/// A rendered cell (`plan::Cell`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub id: String,
    #[serde(with = "pairs")]
    pub values: Vec<(String, String)>,
    pub environment: Option<Environment>,
    pub environment_hash: String,
    pub steps: Vec<Step>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceRef>,
    pub gpu: GpuRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caches: Vec<CacheMount>,
    pub hash: String,
}

/// A cell's image recipe (`plan::Environment`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub family: String,
    pub base: String,
    pub suite: Option<String>,
    pub mirror: Option<String>,
    pub packages: Vec<String>,
    pub llvm: Llvm,
    pub setup: Option<String>,
    pub env: BTreeMap<String, String>,
    pub network: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suites: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<String>,
}

/// `"release"`, `"debug"` or `{"source": {…}}` (`plan::Llvm`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Llvm {
    Release,
    Debug,
    Source(LlvmSource),
}

/// `plan::LlvmSource`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlvmSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub tools: Vec<String>,
    pub targets: Vec<String>,
    /// From a git tree (the toolchain build's source), not the distribution's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub git: bool,
}

/// A rendered step (`plan::Step`); times in whole seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub name: String,
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<TestSuite>,
    pub timeout: u64,
    pub junit: Vec<String>,
    pub gpu: GpuUse,
    pub continue_on_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<BacktraceSpec>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rerun_failures: u32,
}

/// A step's test suite (`plan::TestSuite`), tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TestSuite {
    Gtest(Gtest),
    Ctest(Ctest),
    Autopkgtest(Autopkgtest),
}

/// `plan::test_suite::Autopkgtest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Autopkgtest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_per_test: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gtest_adapter: bool,
}

/// `plan::test_suite::Gtest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gtest {
    pub binary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_per_test: Option<u64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rerun_failures: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// `plan::test_suite::Ctest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ctest {
    pub dir: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_labels: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_regex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_per_test: Option<u64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rerun_failures: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// What GPUs a cell asks for (`plan::GpuRequest`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuRequest {
    pub need: GpuUse,
    pub count: GpuCount,
    pub target: Option<String>,
    pub policy: GpuPolicy,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdi: Vec<String>,
}

/// A source as one cell sees it (`plan::SourceRef`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceRef {
    pub name: String,
    pub url: String,
    pub reference: String,
    pub patches: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// A cache directory (`plan::CacheMount`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheMount {
    pub path: String,
    pub key: String,
    pub volume: String,
}

/// A build of the plan (`plan::Build`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Build {
    pub key: String,
    #[serde(default, skip_serializing_if = "BuildKind::is_matrix")]
    pub kind: BuildKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(with = "pairs")]
    pub values: Vec<(String, String)>,
    pub environment_hash: String,
    pub steps: Vec<Step>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caches: Vec<CacheMount>,
    pub hash: String,
}

/// What a build makes (`plan::build::BuildKind`), in `plan.json` and
/// `build.json`; left out for a matrix build.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BuildKind {
    #[default]
    Matrix,
    LlvmDebug,
}

impl BuildKind {
    pub fn is_matrix(&self) -> bool {
        *self == BuildKind::Matrix
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn secs(d: Duration) -> u64 {
    d.as_secs()
}

impl From<&plan::Cell> for Cell {
    fn from(c: &plan::Cell) -> Self {
        Cell {
            id: c.id.clone(),
            values: c.values.clone(),
            environment: c.environment.as_ref().map(Environment::from),
            environment_hash: c.environment_hash.clone(),
            steps: c.steps.iter().map(Step::from).collect(),
            sources: c.sources.iter().map(SourceRef::from).collect(),
            gpu: (&c.gpu).into(),
            memory: c.memory,
            build: c.build.clone(),
            caches: c.caches.iter().map(CacheMount::from).collect(),
            hash: c.hash.clone(),
        }
    }
}

impl From<Cell> for plan::Cell {
    fn from(c: Cell) -> Self {
        plan::Cell {
            id: c.id,
            values: c.values,
            environment: c.environment.map(Into::into),
            environment_hash: c.environment_hash,
            steps: c.steps.into_iter().map(Into::into).collect(),
            sources: c.sources.into_iter().map(Into::into).collect(),
            gpu: c.gpu.into(),
            memory: c.memory,
            build: c.build,
            caches: c.caches.into_iter().map(Into::into).collect(),
            hash: c.hash,
        }
    }
}

impl From<&plan::Environment> for Environment {
    fn from(e: &plan::Environment) -> Self {
        Environment {
            family: e.family.clone(),
            base: e.base.clone(),
            suite: e.suite.clone(),
            mirror: e.mirror.clone(),
            packages: e.packages.clone(),
            llvm: match &e.llvm {
                plan::Llvm::Release => Llvm::Release,
                plan::Llvm::Debug => Llvm::Debug,
                plan::Llvm::Source(s) => Llvm::Source(LlvmSource {
                    version: s.version.clone(),
                    tools: s.tools.clone(),
                    targets: s.targets.clone(),
                    git: s.from_tree,
                }),
            },
            setup: e.setup.clone(),
            env: e.env.clone(),
            network: e.network.clone(),
            suites: e.suites.clone(),
            prefer: e.prefer.clone(),
        }
    }
}

impl From<Environment> for plan::Environment {
    fn from(e: Environment) -> Self {
        plan::Environment {
            family: e.family,
            base: e.base,
            suite: e.suite,
            mirror: e.mirror,
            packages: e.packages,
            llvm: match e.llvm {
                Llvm::Release => plan::Llvm::Release,
                Llvm::Debug => plan::Llvm::Debug,
                // The patches live on in the toolchain build's first step.
                Llvm::Source(s) => plan::Llvm::Source(plan::LlvmSource {
                    version: s.version,
                    tools: s.tools,
                    targets: s.targets,
                    patches: Vec::new(),
                    // The tree lives on in the toolchain build's sources.
                    from_tree: s.git,
                    tree: None,
                }),
            },
            setup: e.setup,
            env: e.env,
            network: e.network,
            suites: e.suites,
            prefer: e.prefer,
        }
    }
}

impl From<&plan::Step> for Step {
    fn from(s: &plan::Step) -> Self {
        Step {
            name: s.name.clone(),
            run: s.run.clone(),
            suite: s.suite.as_ref().map(TestSuite::from),
            timeout: secs(s.timeout),
            junit: s.junit.clone(),
            gpu: s.gpu.into(),
            continue_on_error: s.continue_on_error,
            backtrace: s.backtrace.as_ref().map(BacktraceSpec::from),
            rerun_failures: s.rerun_failures,
        }
    }
}

impl From<Step> for plan::Step {
    fn from(s: Step) -> Self {
        plan::Step {
            name: s.name,
            run: s.run,
            suite: s.suite.map(Into::into),
            timeout: Duration::from_secs(s.timeout),
            junit: s.junit,
            gpu: s.gpu.into(),
            continue_on_error: s.continue_on_error,
            backtrace: s.backtrace.map(Into::into),
            rerun_failures: s.rerun_failures,
        }
    }
}

impl From<&plan::TestSuite> for TestSuite {
    fn from(t: &plan::TestSuite) -> Self {
        use plan::test_suite as p;
        match t {
            p::TestSuite::Gtest(g) => TestSuite::Gtest(Gtest {
                binary: g.binary.clone(),
                filter: g.filter.clone(),
                timeout_per_test: g.timeout_per_test.map(secs),
                rerun_failures: g.rerun_failures,
                args: g.args.clone(),
            }),
            p::TestSuite::Ctest(c) => TestSuite::Ctest(Ctest {
                dir: c.dir.clone(),
                labels: c.labels.clone(),
                exclude_labels: c.exclude_labels.clone(),
                regex: c.regex.clone(),
                exclude_regex: c.exclude_regex.clone(),
                timeout_per_test: c.timeout_per_test.map(secs),
                rerun_failures: c.rerun_failures,
                args: c.args.clone(),
            }),
            p::TestSuite::Autopkgtest(a) => TestSuite::Autopkgtest(Autopkgtest {
                source: a.source.clone(),
                path: a.path.clone(),
                timeout_per_test: a.timeout_per_test.map(secs),
                gtest_adapter: a.gtest_adapter,
            }),
        }
    }
}

impl From<TestSuite> for plan::TestSuite {
    fn from(t: TestSuite) -> Self {
        use plan::test_suite as p;
        match t {
            TestSuite::Gtest(g) => p::TestSuite::Gtest(p::Gtest {
                binary: g.binary,
                filter: g.filter,
                timeout_per_test: g.timeout_per_test.map(Duration::from_secs),
                rerun_failures: g.rerun_failures,
                args: g.args,
            }),
            TestSuite::Ctest(c) => p::TestSuite::Ctest(p::Ctest {
                dir: c.dir,
                labels: c.labels,
                exclude_labels: c.exclude_labels,
                regex: c.regex,
                exclude_regex: c.exclude_regex,
                timeout_per_test: c.timeout_per_test.map(Duration::from_secs),
                rerun_failures: c.rerun_failures,
                args: c.args,
            }),
            TestSuite::Autopkgtest(a) => p::TestSuite::Autopkgtest(p::Autopkgtest {
                source: a.source,
                path: a.path,
                timeout_per_test: a.timeout_per_test.map(Duration::from_secs),
                gtest_adapter: a.gtest_adapter,
            }),
        }
    }
}

impl From<&plan::GpuRequest> for GpuRequest {
    fn from(g: &plan::GpuRequest) -> Self {
        GpuRequest {
            need: g.need.into(),
            count: g.count.into(),
            target: g.target.clone(),
            policy: g.policy.into(),
            cdi: g.cdi.clone(),
        }
    }
}

impl From<GpuRequest> for plan::GpuRequest {
    fn from(g: GpuRequest) -> Self {
        plan::GpuRequest {
            need: g.need.into(),
            count: g.count.into(),
            target: g.target,
            policy: g.policy.into(),
            cdi: g.cdi,
        }
    }
}

impl From<&plan::SourceRef> for SourceRef {
    fn from(s: &plan::SourceRef) -> Self {
        SourceRef {
            name: s.name.clone(),
            url: s.url.clone(),
            reference: s.reference.clone(),
            patches: s.patches.clone(),
            commit: s.commit.clone(),
        }
    }
}

impl From<SourceRef> for plan::SourceRef {
    fn from(s: SourceRef) -> Self {
        plan::SourceRef {
            name: s.name,
            url: s.url,
            reference: s.reference,
            patches: s.patches,
            commit: s.commit,
        }
    }
}

impl From<&plan::CacheMount> for CacheMount {
    fn from(c: &plan::CacheMount) -> Self {
        CacheMount {
            path: c.path.clone(),
            key: c.key.clone(),
            volume: c.volume.clone(),
        }
    }
}

impl From<CacheMount> for plan::CacheMount {
    fn from(c: CacheMount) -> Self {
        plan::CacheMount {
            path: c.path,
            key: c.key,
            volume: c.volume,
        }
    }
}

impl From<&plan::Build> for Build {
    fn from(b: &plan::Build) -> Self {
        Build {
            key: b.key.clone(),
            kind: b.kind.into(),
            from: b.from.clone(),
            values: b.values.clone(),
            environment_hash: b.environment_hash.clone(),
            steps: b.steps.iter().map(Step::from).collect(),
            sources: b.sources.iter().map(SourceRef::from).collect(),
            caches: b.caches.iter().map(CacheMount::from).collect(),
            hash: b.hash.clone(),
        }
    }
}

impl From<Build> for plan::Build {
    fn from(b: Build) -> Self {
        plan::Build {
            key: b.key,
            kind: b.kind.into(),
            from: b.from,
            values: b.values,
            environment_hash: b.environment_hash,
            steps: b.steps.into_iter().map(Into::into).collect(),
            sources: b.sources.into_iter().map(Into::into).collect(),
            caches: b.caches.into_iter().map(Into::into).collect(),
            hash: b.hash,
        }
    }
}

impl From<plan::build::BuildKind> for BuildKind {
    fn from(k: plan::build::BuildKind) -> Self {
        match k {
            plan::build::BuildKind::Matrix => BuildKind::Matrix,
            plan::build::BuildKind::LlvmDebug => BuildKind::LlvmDebug,
        }
    }
}

impl From<BuildKind> for plan::build::BuildKind {
    fn from(k: BuildKind) -> Self {
        match k {
            BuildKind::Matrix => plan::build::BuildKind::Matrix,
            BuildKind::LlvmDebug => plan::build::BuildKind::LlvmDebug,
        }
    }
}
