//! A step's test suite, rendered for one cell: what the adapters in
//! `src/test_suite/` and `src/autopkgtest/` run.

use std::time::Duration;

use serde::Serialize;

use super::render::Renderer;
use crate::matrix_file::{source_pin, SpecError, TestSuiteTemplate};

/// A rendered `gtest:`, `ctest:` or `autopkgtest:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TestSuite {
    Gtest(Gtest),
    Ctest(Ctest),
    Autopkgtest(Autopkgtest),
}

/// `autopkgtest:`: a source package of the cell's archive, or a tree in
/// the cell, whose `debian/tests/control` autopkgtest runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Autopkgtest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_secs"
    )]
    pub timeout_per_test: Option<Duration>,
    /// `gtest: adapter` (false: left out of the plan, so cell hashes stay
    /// what they were).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gtest_adapter: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gtest {
    /// A path or glob inside the container.
    pub binary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_secs"
    )]
    pub timeout_per_test: Option<Duration>,
    /// Reruns of each failing test (0: none; left out of the plan then, so
    /// cell hashes stay what they were).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rerun_failures: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_secs"
    )]
    pub timeout_per_test: Option<Duration>,
    /// `ctest --rerun-failed` while tests fail, up to this many times (0:
    /// never; left out of the plan then, so cell hashes stay what they were).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rerun_failures: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

pub(super) fn render(
    r: &Renderer,
    t: &TestSuiteTemplate,
    ctx: &minijinja::Value,
    id: &str,
) -> Result<TestSuite, SpecError> {
    let opt = |t: &Option<crate::matrix_file::Template>| -> Result<Option<String>, SpecError> {
        Ok(match t {
            Some(t) => Some(r.render(t, ctx, id)?).filter(|s| !s.trim().is_empty()),
            None => None,
        })
    };
    let args = |a: &[crate::matrix_file::Template]| -> Result<Vec<String>, SpecError> {
        a.iter().map(|t| r.render(t, ctx, id)).collect()
    };
    Ok(match t {
        TestSuiteTemplate::Gtest(g) => TestSuite::Gtest(Gtest {
            binary: r.render(&g.binary, ctx, id)?.trim().to_string(),
            filter: opt(&g.filter)?,
            timeout_per_test: g.timeout_per_test,
            rerun_failures: g.rerun_failures,
            args: args(&g.args)?,
        }),
        TestSuiteTemplate::Ctest(c) => TestSuite::Ctest(Ctest {
            dir: r.render(&c.dir, ctx, id)?.trim().to_string(),
            labels: opt(&c.labels)?,
            exclude_labels: opt(&c.exclude_labels)?,
            regex: opt(&c.regex)?,
            exclude_regex: opt(&c.exclude_regex)?,
            timeout_per_test: c.timeout_per_test,
            rerun_failures: c.rerun_failures,
            args: args(&c.args)?,
        }),
        TestSuiteTemplate::Autopkgtest(a) => TestSuite::Autopkgtest(Autopkgtest {
            source: match (&a.source, opt(&a.source)?) {
                (Some(t), Some(s)) => Some(source_pin::rendered(r.file(), t, &s, id)?),
                _ => None,
            },
            path: opt(&a.path)?.map(|s| s.trim().to_string()),
            timeout_per_test: a.timeout_per_test,
            gtest_adapter: a.gtest_adapter,
        }),
    })
}

pub(super) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A duration in whole seconds, or nothing.
fn opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(d.as_secs()),
        None => s.serialize_none(),
    }
}
