//! Test-suite steps (`gtest:`, `ctest:`, `autopkgtest:`) and `classify:`
//! rules: their typed form and their validation. The adapters that run the
//! suites are in `src/test_suite/` and `src/autopkgtest/`; the rules are applied
//! when results are collected.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::raw::{RawAutopkgtest, RawClassify, RawCtest, RawGtest};
use super::source_pin::parse_source;
use super::{parse_duration, SpecError, Template};

/// A step's test suite, before rendering per cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestSuiteTemplate {
    Gtest(GtestTemplate),
    Ctest(CtestTemplate),
    Autopkgtest(AutopkgtestTemplate),
}

/// `autopkgtest:`: a Debian source package's `debian/tests/control`, run by
/// Debian's `autopkgtest` in the cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutopkgtestTemplate {
    /// A source package name, fetched from the cell's archive: `NAME` (the
    /// newest version its Sources index holds) or `NAME=VERSION`.
    pub source: Option<Template>,
    /// A source tree inside the cell (`/src/rocfft`).
    pub path: Option<Template>,
    /// autopkgtest's `--timeout-test`; by default what is left of the step.
    pub timeout_per_test: Option<Duration>,
    /// `gtest: adapter`: a `rocm-test-launcher … run-tests` test's
    /// googletest binary runs through rocmatrix's gtest adapter.
    pub gtest_adapter: bool,
}

/// `gtest:`: a googletest binary (or a glob naming several).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GtestTemplate {
    pub binary: Template,
    /// `--gtest_filter` syntax.
    pub filter: Option<Template>,
    pub timeout_per_test: Option<Duration>,
    /// Run each failing test again, alone, up to this many times.
    pub rerun_failures: u32,
    pub args: Vec<Template>,
}

/// The most reruns `rerun_failures:` may ask for.
pub const MAX_RERUNS: u32 = 10;

/// `ctest:`: a CTest build directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtestTemplate {
    pub dir: Template,
    /// `-L`, `-LE`, `-R`, `-E`.
    pub labels: Option<Template>,
    pub exclude_labels: Option<Template>,
    pub regex: Option<Template>,
    pub exclude_regex: Option<Template>,
    pub timeout_per_test: Option<Duration>,
    /// `ctest --rerun-failed` while tests fail, up to this many times.
    pub rerun_failures: u32,
    pub args: Vec<Template>,
}

impl TestSuiteTemplate {
    pub fn templates(&self) -> Vec<&Template> {
        match self {
            TestSuiteTemplate::Gtest(g) => std::iter::once(&g.binary)
                .chain(&g.filter)
                .chain(&g.args)
                .collect(),
            TestSuiteTemplate::Ctest(c) => std::iter::once(&c.dir)
                .chain(&c.labels)
                .chain(&c.exclude_labels)
                .chain(&c.regex)
                .chain(&c.exclude_regex)
                .chain(&c.args)
                .collect(),
            TestSuiteTemplate::Autopkgtest(a) => a.source.iter().chain(&a.path).collect(),
        }
    }
}

/// What a `classify:` rule turns a failing test into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassifyAs {
    Skipped,
    Xfail,
    Error,
}

/// In which cells a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum GpuCondition {
    /// Every cell.
    #[default]
    Any,
    /// Only cells that were given no GPU.
    None,
}

/// A rule that reclassifies failing tests whose text matches `pattern`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassifyRule {
    /// A regular expression (Rust `regex` syntax) over the test's message,
    /// failure text and output.
    #[serde(rename = "match")]
    pub pattern: String,
    #[serde(rename = "as")]
    pub outcome: ClassifyAs,
    pub reason: String,
    #[serde(default)]
    pub gpu: GpuCondition,
}

/// Reads the step's `autopkgtest:`: exactly one of `source` (`NAME` or
/// `NAME=VERSION`) and `path`.
pub(super) fn read_autopkgtest(
    field: &str,
    raw: &RawAutopkgtest,
    template: &dyn Fn(String, &str) -> Template,
    err: &dyn Fn(&str, String) -> SpecError,
) -> Result<TestSuiteTemplate, SpecError> {
    let f = format!("{field}.autopkgtest");
    let source = raw.source.as_ref().filter(|s| !s.trim().is_empty());
    let path = raw.path.as_ref().filter(|s| !s.trim().is_empty());
    let templated = |v: Option<&String>| v.is_some_and(|s| s.contains("{{") || s.contains("{%"));
    let (source, path) = match (source, path) {
        // Templates may leave one of them empty per cell (`source: "{{ … }}"`
        // beside `path:`); the adapter refuses a cell that gets both.
        (Some(_), Some(_)) if templated(source) || templated(path) => (
            source.map(|s| template(format!("{f}.source"), s)),
            path.map(|p| template(format!("{f}.path"), p)),
        ),
        (Some(_), Some(_)) | (None, None) => {
            return Err(err(
                &f,
                "autopkgtest takes a source package (`source: rocfft`) or a tree in the cell (`path: /src/rocfft`): give one of them".into(),
            ))
        }
        (s, p) => (
            s.map(|s| template(format!("{f}.source"), s)),
            p.map(|p| template(format!("{f}.path"), p)),
        ),
    };
    // A template is checked once a cell renders it (`src/plan/test_suite.rs`).
    if let Some(s) = raw.source.as_ref().filter(|s| !templated(Some(s))) {
        if !s.trim().is_empty() {
            parse_source(s).map_err(|e| err(&format!("{f}.source"), e.to_string()))?;
        }
    }
    let timeout_per_test = raw
        .timeout_per_test
        .as_ref()
        .map(|t| {
            parse_duration(t).map_err(|e| err(&format!("{f}.timeout_per_test"), e.to_string()))
        })
        .transpose()?;
    let gtest_adapter = match raw.gtest.as_deref().map(str::trim) {
        None | Some("run-tests") => false,
        Some("adapter") => true,
        Some(other) => return Err(err(
            &format!("{f}.gtest"),
            format!("`{other}`: give `adapter` (a `rocm-test-launcher … run-tests` test's googletest binary run through rocmatrix's gtest adapter) or `run-tests` (the default: as autopkgtest runs it)"),
        )),
    };
    Ok(TestSuiteTemplate::Autopkgtest(AutopkgtestTemplate {
        source,
        path,
        timeout_per_test,
        gtest_adapter,
    }))
}

/// A `run:` step's `rerun_failures:` (its own, else the matrix file's):
/// only a step with `junit:` and no suite has one, since its JUnit is what
/// says which tests failed; a suite's reruns are its adapter's.
pub(super) fn read_step_reruns(
    field: &str,
    own: Option<u32>,
    default_reruns: Option<u32>,
    has_suite: bool,
    has_junit: bool,
    err: &dyn Fn(&str, String) -> SpecError,
) -> Result<u32, SpecError> {
    let at = format!("{field}.rerun_failures");
    if own.is_some() && has_suite {
        return Err(err(
            &at,
            "a suite step reruns its failing tests through its adapter: give \
             `gtest.rerun_failures` or `ctest.rerun_failures`"
                .to_string(),
        ));
    }
    if own.is_some() && !has_junit {
        return Err(err(
            &at,
            "rerun_failures runs a `run:` step again while its JUnit has failing tests: \
             give the step `junit:` too"
                .to_string(),
        ));
    }
    if has_suite || !has_junit {
        return Ok(0);
    }
    let n = own.or(default_reruns).unwrap_or(0);
    if n > MAX_RERUNS {
        let at = if own.is_some() {
            at
        } else {
            "rerun_failures".to_string()
        };
        return Err(err(
            &at,
            format!("rerun_failures is {n}; at most {MAX_RERUNS} reruns of a failing step"),
        ));
    }
    Ok(n)
}

/// Reads the step's `gtest:` or `ctest:` into a template; `field` is the
/// step's dotted path (`steps[2]`).
pub(super) fn read_suite(
    field: &str,
    gtest: Option<&RawGtest>,
    ctest: Option<&RawCtest>,
    default_reruns: Option<u32>,
    template: &dyn Fn(String, &str) -> Template,
    err: &dyn Fn(&str, String) -> SpecError,
) -> Result<Option<TestSuiteTemplate>, SpecError> {
    let timeout = |sub: &str, t: &Option<String>| -> Result<Option<Duration>, SpecError> {
        let f = format!("{field}.{sub}.timeout_per_test");
        t.as_ref()
            .map(|t| parse_duration(t).map_err(|e| err(&f, e.to_string())))
            .transpose()
    };
    // A step's own `rerun_failures:`, else the matrix file's.
    let reruns = |sub: &str, own: Option<u32>| -> Result<u32, SpecError> {
        let n = own.or(default_reruns).unwrap_or(0);
        if n > MAX_RERUNS {
            return Err(err(
                &if own.is_some() {
                    format!("{field}.{sub}.rerun_failures")
                } else {
                    "rerun_failures".to_string()
                },
                format!("rerun_failures is {n}; at most {MAX_RERUNS} reruns of a failing test"),
            ));
        }
        Ok(n)
    };
    let opt = |f: String, v: &Option<String>| v.as_ref().map(|s| template(f, s));
    let args = |sub: &str, a: &[String]| {
        a.iter()
            .enumerate()
            .map(|(i, s)| template(format!("{field}.{sub}.args[{i}]"), s))
            .collect()
    };
    match (gtest, ctest) {
        (Some(_), Some(_)) => Err(err(
            &format!("{field}.ctest"),
            "a step runs one suite: give `gtest` or `ctest`, not both".to_string(),
        )),
        (Some(g), None) => {
            if g.binary.trim().is_empty() {
                return Err(err(
                    &format!("{field}.gtest.binary"),
                    "gtest.binary names the test binary (a path or glob inside the container)"
                        .to_string(),
                ));
            }
            let rerun_failures = reruns("gtest", g.rerun_failures)?;
            Ok(Some(TestSuiteTemplate::Gtest(GtestTemplate {
                binary: template(format!("{field}.gtest.binary"), &g.binary),
                filter: opt(format!("{field}.gtest.filter"), &g.filter),
                timeout_per_test: timeout("gtest", &g.timeout_per_test)?,
                rerun_failures,
                args: args("gtest", &g.args),
            })))
        }
        (None, Some(c)) => Ok(Some(TestSuiteTemplate::Ctest(CtestTemplate {
            rerun_failures: reruns("ctest", c.rerun_failures)?,
            dir: template(format!("{field}.ctest.dir"), &c.dir),
            labels: opt(format!("{field}.ctest.labels"), &c.labels),
            exclude_labels: opt(format!("{field}.ctest.exclude_labels"), &c.exclude_labels),
            regex: opt(format!("{field}.ctest.regex"), &c.regex),
            exclude_regex: opt(format!("{field}.ctest.exclude_regex"), &c.exclude_regex),
            timeout_per_test: timeout("ctest", &c.timeout_per_test)?,
            args: args("ctest", &c.args),
        }))),
        (None, None) => Ok(None),
    }
}

/// Reads `classify:`; each pattern must compile.
pub(super) fn read_classify(
    raw: &[RawClassify],
    err: &dyn Fn(&str, String) -> SpecError,
) -> Result<Vec<ClassifyRule>, SpecError> {
    let mut rules = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        let f = format!("classify[{i}]");
        if let Err(e) = regex::Regex::new(&r.pattern) {
            return Err(err(
                &format!("{f}.match"),
                format!("not a regular expression: {e}"),
            ));
        }
        let outcome = match r.outcome.as_str() {
            "skipped" => ClassifyAs::Skipped,
            "xfail" => ClassifyAs::Xfail,
            "error" => ClassifyAs::Error,
            other => {
                return Err(err(
                    &format!("{f}.as"),
                    format!("`as` must be skipped, xfail or error, not `{other}`"),
                ))
            }
        };
        if r.reason.trim().is_empty() {
            return Err(err(&format!("{f}.reason"), "a rule needs a reason".into()));
        }
        let gpu = match r.when.as_ref().and_then(|w| w.gpu.as_deref()) {
            None | Some("any") => GpuCondition::Any,
            Some("none") => GpuCondition::None,
            Some(other) => {
                return Err(err(
                    &format!("{f}.when.gpu"),
                    format!("when.gpu must be none (cells given no GPU) or any, not `{other}`"),
                ))
            }
        };
        rules.push(ClassifyRule {
            pattern: r.pattern.clone(),
            outcome,
            reason: r.reason.clone(),
            gpu,
        });
    }
    Ok(rules)
}
