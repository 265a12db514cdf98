//! The exported `README.md` (`reports/repro-readme.md.j2`): what the cell
//! is, its environment, pinned packages and sources, what happened in the
//! run, and how to reproduce it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::base_pin::{base_line, BasePin};
use super::EXIT_TIMEOUT;
use crate::plan::{Cell, Environment, Llvm};
use crate::run::RunError;
use crate::step::protocol::EXIT_SKIPPED;
use crate::store::lock::LockedSource;
use crate::store::record::{CellRecord, RunManifest};

/// The README template, embedded at build time like the report templates.
const README_TEMPLATE: &str = include_str!("../../../reports/repro-readme.md.j2");

/// What the exported `README.md` shows (`reports/repro-readme.md.j2`).
#[derive(Serialize)]
struct ReadmeView<'a> {
    matrix: &'a str,
    run_id: &'a str,
    version: &'a str,
    cell: &'a str,
    /// The cell's values, `k=v, …`.
    values: String,
    /// The base image and how the reproducer gets it, one Markdown line.
    base: String,
    family: &'a str,
    llvm: &'static str,
    /// The packages the matrix file asks for, in backticks, or `none`.
    asked: String,
    /// Without a lock, nothing is pinned.
    pinned: Option<PinnedView<'a>>,
    sources: Vec<SourceView<'a>>,
    /// Without a record, the cell did not finish.
    outcome: Option<OutcomeView<'a>>,
    exit_skipped: i64,
    exit_timeout: i32,
}

#[derive(Serialize)]
struct PinnedView<'a> {
    count: usize,
    /// The ROCm and LLVM packages, and those the matrix file names
    /// ([`rocm_or_llvm`]).
    shown: Vec<PackageView<'a>>,
}

#[derive(Serialize)]
struct PackageView<'a> {
    name: &'a str,
    version: &'a str,
}

#[derive(Serialize)]
struct SourceView<'a> {
    name: &'a str,
    url: &'a str,
    commit: &'a str,
    reference: &'a str,
    patches: Vec<PatchView<'a>>,
}

#[derive(Serialize)]
struct PatchView<'a> {
    file: &'a str,
    /// The first 16 hex digits.
    sha256: &'a str,
}

#[derive(Serialize)]
struct OutcomeView<'a> {
    status: &'static str,
    reason: Option<&'a str>,
    steps: Vec<StepRow<'a>>,
    /// The first failed step and its log tail.
    failed: Option<FailedStep<'a>>,
}

#[derive(Serialize)]
struct StepRow<'a> {
    name: &'a str,
    status: &'static str,
    exit: String,
    /// Seconds, one decimal.
    time: String,
}

#[derive(Serialize)]
struct FailedStep<'a> {
    name: &'a str,
    log_tail: &'a str,
}

/// The README, fit to paste into an upstream issue: what the cell is, its
/// environment and sources, what happened in the run, and how to reproduce it.
pub(super) fn readme(
    manifest: &RunManifest,
    cell: &Cell,
    env: &Environment,
    record: Option<&CellRecord>,
    packages: Option<&BTreeMap<String, String>>,
    sources: &[LockedSource],
    pin: &BasePin,
) -> Result<String, RunError> {
    let view = ReadmeView {
        matrix: &manifest.name,
        run_id: &manifest.run_id,
        version: &manifest.rocmatrix_version,
        cell: &cell.id,
        values: cell
            .values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", "),
        base: base_line(pin),
        family: &env.family,
        llvm: match env.llvm {
            Llvm::Debug => "debug",
            Llvm::Release => "release",
            Llvm::Source(_) => "debug, built from the distribution's source",
        },
        asked: if env.packages.is_empty() {
            "none".to_string()
        } else {
            env.packages
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        },
        pinned: packages.map(|p| pinned_view(p, env)),
        sources: sources.iter().map(source_view).collect(),
        outcome: record.map(outcome_view),
        exit_skipped: EXIT_SKIPPED,
        exit_timeout: EXIT_TIMEOUT,
    };
    let template = |source| RunError::Template {
        name: "repro-readme.md",
        source,
    };
    let mut jinja = minijinja::Environment::new();
    jinja.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    jinja.set_trim_blocks(true);
    jinja.set_lstrip_blocks(true);
    jinja.set_keep_trailing_newline(true);
    jinja
        .add_template("README.md", README_TEMPLATE)
        .map_err(template)?;
    jinja
        .get_template("README.md")
        .and_then(|t| t.render(&view))
        .map_err(template)
}

/// Name parts that make a package a ROCm or LLVM one: `hipcc`,
/// `libamdhip64-6`, `rocm-device-libs-21`, `libhsa-runtime64-1`,
/// `libamd-comgr3`, `llvm-21`, `libclang-cpp21`, `lld-21`, `miopen-…`.
const ROCM_LLVM: [&str; 11] = [
    "hip", "roc", "amd", "hsa", "comgr", "miopen", "rccl", "llvm", "clang", "lld", "mlir",
];

/// Whether `name` (`name:arch` counts as `name`) is a ROCm or LLVM package:
/// one of its `-`-separated parts, less a `lib` prefix, starts with one of
/// [`ROCM_LLVM`]. The architecture is left out: `amd64` is no AMD package.
fn rocm_or_llvm(name: &str) -> bool {
    let bare = name.split(':').next().unwrap_or(name);
    bare.split('-').any(|part| {
        let part = part.strip_prefix("lib").unwrap_or(part);
        ROCM_LLVM.iter().any(|k| part.starts_with(k))
    })
}

/// The locked packages worth showing: the ROCm and LLVM ones, and those the
/// matrix file asks for (`name:arch` counts as `name`).
fn pinned_view<'a>(packages: &'a BTreeMap<String, String>, env: &Environment) -> PinnedView<'a> {
    let asked = |n: &str| {
        env.packages
            .iter()
            .any(|q| n.split(':').next() == Some(q.as_str()))
    };
    PinnedView {
        count: packages.len(),
        shown: packages
            .iter()
            .filter(|(n, _)| rocm_or_llvm(n) || asked(n))
            .map(|(name, version)| PackageView { name, version })
            .collect(),
    }
}

fn source_view(src: &LockedSource) -> SourceView<'_> {
    SourceView {
        name: &src.name,
        url: &src.url,
        commit: &src.commit,
        reference: &src.reference,
        patches: src
            .patches
            .iter()
            .map(|p| PatchView {
                file: &p.file,
                sha256: p.sha256.get(..16).unwrap_or(&p.sha256),
            })
            .collect(),
    }
}

fn outcome_view(r: &CellRecord) -> OutcomeView<'_> {
    OutcomeView {
        status: r.status.as_str(),
        reason: r.reason.as_deref(),
        steps: r
            .steps
            .iter()
            .map(|st| StepRow {
                name: &st.name,
                status: st.status.as_str(),
                exit: st
                    .exit_code
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "-".into()),
                time: format!("{:.1}", st.duration_secs),
            })
            .collect(),
        failed: r
            .steps
            .iter()
            .find(|st| st.status.is_failure())
            .map(|st| FailedStep {
                name: &st.name,
                log_tail: &st.log_tail,
            }),
    }
}
#[cfg(test)]
mod tests {
    use super::super::fixtures::{cell, manifest};
    use super::*;

    #[test]
    fn readme_tells_the_outcome_and_the_pins() {
        let record: CellRecord = serde_json::from_value(serde_json::json!({
            "id": "c", "values": {}, "hash": "h", "environment_hash": "e", "status": "failed",
            "reason": "step test failed", "started": "s", "finished": "f", "duration_secs": 1.0,
            "steps": [{"name": "test", "status": "failed", "exit_code": 1, "duration_secs": 0.25,
                "log": "l", "log_tail": "expected 42, got 41"}]
        }))
        .unwrap();
        let packages: BTreeMap<String, String> =
            [("hipcc", "6.0"), ("bash", "5"), ("mypkg:amd64", "3")]
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .into();
        let (m, c) = (manifest(), cell());
        let env = c.environment.clone().unwrap();
        let pin = BasePin::Digest("debian:bookworm@sha256:ab".into());
        let text = readme(&m, &c, &env, Some(&record), Some(&packages), &[], &pin).unwrap();
        for line in [
            "Cell `gfx=gfx1030` (gfx=gfx1030) of matrix `m`, run `r1`, made with rocmatrix 0.1.0.\n\n",
            "- packages asked for: `mypkg`\n- all 3 installed packages are pinned",
            "the versions the run had; of them, the 2 ROCm and LLVM packages and those the matrix file asks for:\n\n",
            "- base image: `debian:bookworm@sha256:ab`, pinned by the digest",
            "| --- | --- |\n| hipcc | 6.0 |\n| mypkg:amd64 | 3 |\n\n## What happened\n\n",
            "Outcome: **failed** — step test failed\n\n",
            "| test | failed | 1 | 0.2 s |\n\nLast lines of `test`:\n\n```\nexpected 42, got 41\n```\n\n## Reproduce",
        ] {
            assert!(text.contains(line), "{line:?} not in\n{text}");
        }
        assert!(text.ends_with("where `/dev/kfd` exists.\n"), "{text}");
    }

    #[test]
    fn readme_without_a_lock_or_a_record() {
        let (m, c) = (manifest(), cell());
        let env = c.environment.clone().unwrap();
        let pin = BasePin::Unpinned {
            reference: "debian:bookworm".into(),
        };
        let text = readme(&m, &c, &env, None, None, &[], &pin).unwrap();
        assert!(
            text.contains("- base image: `debian:bookworm` as its registry gives it today (the run has no lock: not pinned)\n"),
            "{text}"
        );
        assert!(text.contains(
            "- the run has no lock for this environment: package versions are not pinned\n\n## What happened\n\nThe cell has no result in the run (it did not finish).\n\n## Reproduce"
        ), "{text}");
    }

    #[test]
    fn rocm_and_llvm_packages_are_told_apart_from_the_architecture() {
        for yes in [
            "hipcc",
            "libamdhip64-6:amd64",
            "rocm-device-libs-21",
            "rocminfo",
            "libhsa-runtime64-1:amd64",
            "libamd-comgr3:amd64",
            "libllvm21:amd64",
            "clang-21",
            "libclang-cpp21",
            "lld-21",
            "llvm-21-linker-tools",
        ] {
            assert!(rocm_or_llvm(yes), "{yes}");
        }
        for no in [
            "libkrb5-3:amd64",
            "zlib1g:amd64",
            "procps",
            "bash",
            "libc6:amd64",
            "binutils-x86-64-linux-gnu",
            "libhogweed6t64:amd64",
        ] {
            assert!(!rocm_or_llvm(no), "{no}");
        }
    }
}
