//! `rocmatrix export RUN CELL DIR`: a self-contained reproducer for one cell
//! — a Containerfile with the locked package versions, the rendered step
//! scripts baked into the image, a `run.sh` that needs only the docker CLI,
//! and a README fit to paste into an upstream issue.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::cell::{env_key, step_slug, EXIT_SKIPPED};
use super::{RunError, RunStore};
use crate::image::build::recipe;
use crate::image::{BaseImage, BaseOrigin, Family};
use crate::plan::{Cell, Environment, Llvm};
use crate::source::Prepared;
use crate::spec::GpuUse;
use crate::store::lock::{Lock, LockedEnvironment, LockedSource};
use crate::store::record::{CellRecord, RunManifest};

/// Exit code of `run.sh` when a step timed out (as `timeout` reports it).
pub const EXIT_TIMEOUT: i32 = 124;

/// What an export wrote.
#[derive(Debug)]
pub struct Exported {
    pub dir: PathBuf,
    pub files: Vec<String>,
    /// Whether package versions are pinned from the run's lock.
    pub pinned: bool,
}

/// Finds `cell` in a run: its planned form, its record (if it ran) and the
/// run's lock (if written).
pub fn load_cell(
    store: &RunStore,
    cell: &str,
) -> Result<(RunManifest, Cell, Option<CellRecord>, Option<Lock>), RunError> {
    let manifest = store.manifest()?;
    let planned = manifest
        .cells
        .iter()
        .find(|c| c.id == cell)
        .cloned()
        .ok_or_else(|| {
            let ids: Vec<&str> = manifest
                .cells
                .iter()
                .map(|c| c.id.as_str())
                .take(20)
                .collect();
            RunError::Usage(format!(
                "run {} has no cell `{cell}` (cells: {}{})",
                store.dir.display(),
                ids.join(", "),
                if manifest.cells.len() > 20 {
                    ", …"
                } else {
                    ""
                }
            ))
        })?;
    let record = store.cell_record(cell).ok();
    let lock = Lock::load(&store.dir.join("lock.json")).ok();
    Ok((manifest, planned, record, lock))
}

/// Exports cell `cell_id` of the run in `store` into `dir` as a reproducer.
pub fn export(store: &RunStore, cell_id: &str, dir: &Path) -> Result<Exported, RunError> {
    let (manifest, cell, record, lock) = load_cell(store, cell_id)?;
    let env = cell.environment.clone().ok_or_else(|| {
        RunError::Usage(format!(
            "cell {cell_id} has no environment: its matrix file has no `environment:` section"
        ))
    })?;
    let family = Family::get(&env.family).map_err(|e| RunError::Usage(e.to_string()))?;
    let locked = lock
        .as_ref()
        .and_then(|l| l.environments.get(&cell.environment_hash));
    let (build_env, base) = build_environment(&env, &family, locked)?;
    let recipe = recipe(&family, &build_env, &cell.environment_hash, &base)
        .map_err(|e| RunError::Usage(e.to_string()))?;
    let sources = checkout_sources(&cell, record.as_ref())?;
    let chain = cell.build_chain(&manifest.builds);
    let containerfile = export_containerfile(recipe.containerfile, &sources, &chain);
    let locked_sources: Vec<LockedSource> = sources.iter().map(|(_, p)| p.locked.clone()).collect();
    let readme = readme(
        &manifest,
        &cell,
        &env,
        record.as_ref(),
        locked.map(|l| &l.packages),
        &locked_sources,
    )?;

    let mut out = ExportDir::create(dir, !sources.is_empty(), !chain.is_empty())?;
    for b in &chain {
        for (i, s) in b.steps.iter().enumerate() {
            let rel = format!("{}/{}.sh", build_dir(b), step_slug(i, &s.name));
            out.write(&rel, s.run.as_bytes(), true)?;
        }
    }
    for (name, p) in &sources {
        out.write(&format!("sources/{name}.tar"), &p.tar, false)?;
    }
    out.write("Containerfile", containerfile.as_bytes(), false)?;
    for (name, text) in &recipe.files {
        out.write(name, text.as_bytes(), false)?;
    }
    for (i, s) in cell.steps.iter().enumerate() {
        let rel = format!("steps/{}.sh", step_slug(i, &s.name));
        out.write(&rel, s.run.as_bytes(), true)?;
    }
    out.write("run.sh", run_script(&manifest, &cell).as_bytes(), true)?;
    out.write("README.md", readme.as_bytes(), false)?;
    Ok(Exported {
        dir: dir.to_path_buf(),
        files: out.files,
        pinned: locked.is_some(),
    })
}

/// The environment to build and its base image: pinned to the versions and
/// the base of the run's lock when there is one, else as the matrix file
/// says.
fn build_environment(
    env: &Environment,
    family: &Family,
    locked: Option<&LockedEnvironment>,
) -> Result<(Environment, BaseImage), RunError> {
    let Some(l) = locked else {
        let base = BaseImage {
            reference: env.base.clone(),
            id: String::new(),
            origin: BaseOrigin::Present { bootstrapped: None },
        };
        return Ok((env.clone(), base));
    };
    let mut pinned = env.clone();
    pinned.packages = l
        .packages
        .iter()
        .map(|(n, v)| family.pin(n, v))
        .collect::<Result<_, _>>()
        .map_err(|e| RunError::Usage(e.to_string()))?;
    Ok((pinned, l.base.clone()))
}

/// Checks out the cell's sources, each at exactly the commit the run had
/// when it got that far; with their names.
fn checkout_sources(
    cell: &Cell,
    record: Option<&CellRecord>,
) -> Result<Vec<(String, Arc<Prepared>)>, RunError> {
    if cell.sources.is_empty() {
        return Ok(Vec::new());
    }
    let ran = record.map(|r| r.sources.as_slice()).unwrap_or_default();
    let sources = crate::source::Sources::new(&crate::dirs::cache_dir());
    let mut out = Vec::with_capacity(cell.sources.len());
    for src in &cell.sources {
        let mut pinned = src.clone();
        if let Some(l) = ran.iter().find(|l| l.name == src.name) {
            pinned.reference = l.commit.clone();
        }
        let p = sources
            .prepare(&pinned)
            .map_err(|e| RunError::Usage(e.to_string()))?;
        out.push((src.name.clone(), p));
    }
    Ok(out)
}

/// The environment's Containerfile with the step scripts and the source
/// archives added, then the cell's build stage run (as the run's snapshot
/// was made: its steps in order, with the build's variables).
fn export_containerfile(
    mut text: String,
    sources: &[(String, Arc<Prepared>)],
    chain: &[&crate::plan::Build],
) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("COPY steps /rocmatrix/steps\n");
    for (name, _) in sources {
        text.push_str(&format!("ADD sources/{name}.tar /\n"));
    }
    if !chain.is_empty() {
        text.push_str("COPY build /rocmatrix/build\n");
    }
    for b in chain {
        let mut vars = format!("ROCMATRIX_BUILD={}", crate::plan::ci::shell_quote(&b.key));
        for (k, v) in &b.values {
            let _ = write!(
                vars,
                " {}",
                crate::plan::ci::shell_quote(&format!("ROCMATRIX_{}={v}", env_key(k)))
            );
        }
        for (i, s) in b.steps.iter().enumerate() {
            let slug = step_slug(i, &s.name);
            let _ = writeln!(
                text,
                "RUN {vars} ROCMATRIX_STEP={} bash -eo pipefail /rocmatrix/{}/{slug}.sh",
                crate::plan::ci::shell_quote(&s.name),
                build_dir(b),
            );
        }
        if b.kind == crate::plan::build::BuildKind::LlvmDebug {
            let _ = writeln!(text, "ENV PATH={}", crate::plan::toolchain::PATH);
        }
    }
    text
}

/// Where a build's step scripts go in the export: `build/`, or
/// `build/<key>/` for a toolchain build another build starts from.
fn build_dir(b: &crate::plan::Build) -> String {
    match b.kind {
        crate::plan::build::BuildKind::Matrix => "build".to_string(),
        _ => format!("build/{}", b.key),
    }
}

/// The export's directory and the files written into it so far.
struct ExportDir<'a> {
    dir: &'a Path,
    files: Vec<String>,
}

impl<'a> ExportDir<'a> {
    /// Makes `dir/steps`, `dir/sources` when there are sources and
    /// `dir/build` when there is a build stage.
    fn create(dir: &'a Path, sources: bool, build: bool) -> Result<Self, RunError> {
        std::fs::create_dir_all(dir.join("steps")).map_err(|e| RunError::io(dir, e))?;
        for (wanted, sub) in [(sources, "sources"), (build, "build")] {
            if wanted {
                std::fs::create_dir_all(dir.join(sub)).map_err(|e| RunError::io(dir, e))?;
            }
        }
        Ok(ExportDir {
            dir,
            files: Vec::new(),
        })
    }

    /// Writes `rel`, executable when `exec`.
    fn write(&mut self, rel: &str, bytes: &[u8], exec: bool) -> Result<(), RunError> {
        let p = self.dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| RunError::io(parent, e))?;
        }
        std::fs::write(&p, bytes).map_err(|e| RunError::io(&p, e))?;
        if exec {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| RunError::io(&p, e))?;
        }
        self.files.push(rel.to_string());
        Ok(())
    }
}

fn run_script(manifest: &RunManifest, cell: &Cell) -> String {
    let tag = format!(
        "rocmatrix-repro/{}:{}",
        crate::spec::cell_id::sanitize(&cell.id)
            .to_ascii_lowercase()
            .trim_matches(['.', '-']),
        &cell.hash[..12]
    );
    let mut env_args = format!(
        "-e ROCMATRIX_CELL={}",
        crate::plan::ci::shell_quote(&cell.id)
    );
    for (k, v) in &cell.values {
        let _ = write!(
            env_args,
            " -e {}",
            crate::plan::ci::shell_quote(&format!("ROCMATRIX_{}={v}", env_key(k)))
        );
    }
    let memory = cell
        .memory
        .map(|m| format!(" --memory {m} --memory-swap {m}"))
        .unwrap_or_default();
    let mut inner = String::from("set -u\n");
    for (i, s) in cell.steps.iter().enumerate() {
        let slug = step_slug(i, &s.name);
        let gpu_guard = if s.gpu == GpuUse::Required {
            format!("if [ ! -e /dev/kfd ]; then echo '=== {slug}: skipped: needs a GPU (no /dev/kfd)'; else\n")
        } else {
            String::new()
        };
        let _ = write!(
            inner,
            "{gpu_guard}echo '=== {slug}'\nROCMATRIX_STEP={name} timeout {secs} bash -eo pipefail /rocmatrix/steps/{slug}.sh; rc=$?\n\
             case $rc in\n  0) echo '=== {slug}: passed' ;;\n  {skip}) echo '=== {slug}: skipped (exit {skip})'; exit {skip} ;;\n  {to}) echo '=== {slug}: timed out after {secs} s'; exit {to} ;;\n  *) echo \"=== {slug}: FAILED (exit $rc)\"; {on_fail} ;;\nesac\n{fi}",
            name = crate::plan::ci::shell_quote(&s.name),
            secs = s.timeout.as_secs().max(1),
            skip = EXIT_SKIPPED,
            to = EXIT_TIMEOUT,
            on_fail = if s.continue_on_error { "echo '(continue_on_error: going on)'" } else { "exit $rc" },
            fi = if s.gpu == GpuUse::Required { "fi\n" } else { "" },
        );
    }
    inner.push_str("echo '=== all steps done'\n");
    format!(
        r#"#!/usr/bin/env bash
# Reproducer for cell {cell} of {name} (made by `rocmatrix export`).
# Needs only the docker CLI (or podman with `alias docker=podman`).
# Exit code: 0 passed, {skip} skipped, {to} a step timed out, else the failing step's.
set -u
cd "$(dirname "$0")"
image={tag}
docker build -t "$image" -f Containerfile . || {{ echo "run.sh: building the image failed" >&2; exit 3; }}
gpu=()
if [ -e /dev/kfd ]; then
  gpu=(--device /dev/kfd --device /dev/dri --security-opt seccomp=unconfined --group-add video)
fi
docker run --rm {env_args}{memory} "${{gpu[@]}}" "$image" bash -c {inner}
"#,
        cell = cell.id,
        name = manifest.name,
        skip = EXIT_SKIPPED,
        to = EXIT_TIMEOUT,
        inner = crate::plan::ci::shell_quote(&inner),
    )
}

/// The README template, embedded at build time like the report templates.
const README_TEMPLATE: &str = include_str!("../../reports/repro-readme.md.j2");

/// What the exported `README.md` shows (`reports/repro-readme.md.j2`).
#[derive(Serialize)]
struct ReadmeView<'a> {
    matrix: &'a str,
    run_id: &'a str,
    version: &'a str,
    cell: &'a str,
    /// The cell's values, `k=v, …`.
    values: String,
    base: &'a str,
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
    /// The ROCm and LLVM packages, and those the matrix file names.
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
fn readme(
    manifest: &RunManifest,
    cell: &Cell,
    env: &Environment,
    record: Option<&CellRecord>,
    packages: Option<&BTreeMap<String, String>>,
    sources: &[LockedSource],
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
        base: &env.base,
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

/// The locked packages worth showing: ROCm and LLVM ones, and those the
/// matrix file asks for (`name:arch` counts as `name`).
fn pinned_view<'a>(packages: &'a BTreeMap<String, String>, env: &Environment) -> PinnedView<'a> {
    let interesting = |n: &str| {
        [
            "hip", "roc", "llvm", "clang", "amd", "miopen", "comgr", "hsa",
        ]
        .iter()
        .any(|k| n.contains(k))
            || env
                .packages
                .iter()
                .any(|q| n.split(':').next() == Some(q.as_str()))
    };
    PinnedView {
        count: packages.len(),
        shown: packages
            .iter()
            .filter(|(n, _)| interesting(n))
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
    use super::*;

    fn manifest() -> RunManifest {
        serde_json::from_value(serde_json::json!({
            "store_version": 1, "run_id": "r1", "rocmatrix_version": "0.1.0",
            "name": "m", "matrix_file": "m.yaml", "matrix_hash": "h", "keys": ["gfx"],
            "expect": [], "report": {"rows": [], "columns": []}, "cells": []
        }))
        .unwrap()
    }

    fn cell() -> Cell {
        serde_json::from_value(serde_json::json!({
            "id": "gfx=gfx1030", "values": {"gfx": "gfx1030"},
            "environment": {"family": "debian", "base": "debian:bookworm", "suite": null,
                "mirror": null, "packages": ["mypkg"], "llvm": "release", "setup": null,
                "env": {}, "network": null},
            "environment_hash": "e", "steps": [],
            "gpu": {"need": "none", "count": 1, "target": null, "policy": "exact"},
            "hash": "0123456789abcdef"
        }))
        .unwrap()
    }

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
        let text = readme(&m, &c, &env, Some(&record), Some(&packages), &[]).unwrap();
        for line in [
            "Cell `gfx=gfx1030` (gfx=gfx1030) of matrix `m`, run `r1`, made with rocmatrix 0.1.0.\n\n",
            "- packages asked for: `mypkg`\n- all 3 installed packages are pinned",
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
        let text = readme(&m, &c, &env, None, None, &[]).unwrap();
        assert!(text.contains(
            "- the run has no lock for this environment: package versions are not pinned\n\n## What happened\n\nThe cell has no result in the run (it did not finish).\n\n## Reproduce"
        ), "{text}");
    }
}
