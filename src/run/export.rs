//! `rocmatrix export RUN CELL DIR`: a self-contained reproducer for one cell
//! — a Containerfile with the locked package versions, the rendered step
//! scripts baked into the image, a `run.sh` that needs only the docker CLI,
//! and a README fit to paste into an upstream issue.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::cell::{env_key, step_slug, EXIT_SKIPPED};
use super::{RunError, RunStore};
use crate::image::build::recipe;
use crate::image::{BaseImage, BaseOrigin, Family};
use crate::plan::{Cell, Environment};
use crate::spec::GpuUse;
use crate::store::lock::Lock;
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
    let (build_env, base) = match locked {
        Some(l) => {
            let mut pinned = env.clone();
            pinned.packages = l
                .packages
                .iter()
                .map(|(n, v)| family.pin(n, v))
                .collect::<Result<_, _>>()
                .map_err(|e| RunError::Usage(e.to_string()))?;
            (pinned, l.base.clone())
        }
        None => (
            env.clone(),
            BaseImage {
                reference: env.base.clone(),
                id: String::new(),
                origin: BaseOrigin::Present { bootstrapped: None },
            },
        ),
    };
    let mut containerfile = recipe(&family, &build_env, &cell.environment_hash, &base)
        .map_err(|e| RunError::Usage(e.to_string()))?
        .containerfile;
    if !containerfile.ends_with('\n') {
        containerfile.push('\n');
    }
    containerfile.push_str("COPY steps /rocmatrix/steps\n");
    let locked_sources = record
        .as_ref()
        .map(|r| r.sources.clone())
        .unwrap_or_default();
    let mut source_tars = Vec::new();
    if !cell.sources.is_empty() {
        let sources = crate::source::Sources::new(&crate::dirs::cache_dir());
        for src in &cell.sources {
            // Check out exactly the commit the run had, when it got that far.
            let mut pinned = src.clone();
            if let Some(l) = locked_sources.iter().find(|l| l.name == src.name) {
                pinned.reference = l.commit.clone();
            }
            let p = sources
                .prepare(&pinned)
                .map_err(|e| RunError::Usage(e.to_string()))?;
            containerfile.push_str(&format!("ADD sources/{}.tar /\n", src.name));
            source_tars.push((src.name.clone(), p.tar.clone(), p.locked.clone()));
        }
    }

    std::fs::create_dir_all(dir.join("steps")).map_err(|e| RunError::io(dir, e))?;
    if !source_tars.is_empty() {
        std::fs::create_dir_all(dir.join("sources")).map_err(|e| RunError::io(dir, e))?;
    }
    let mut files = Vec::new();
    for (name, tar, _) in &source_tars {
        let rel = format!("sources/{name}.tar");
        std::fs::write(dir.join(&rel), tar).map_err(|e| RunError::io(&dir.join(&rel), e))?;
        files.push(rel);
    }
    let locked_list: Vec<_> = source_tars.iter().map(|(_, _, l)| l.clone()).collect();
    let mut write = |rel: &str, text: &str, exec: bool| -> Result<(), RunError> {
        let p = dir.join(rel);
        std::fs::write(&p, text).map_err(|e| RunError::io(&p, e))?;
        if exec {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| RunError::io(&p, e))?;
        }
        files.push(rel.to_string());
        Ok(())
    };
    write("Containerfile", &containerfile, false)?;
    if let Some(setup) = &build_env.setup {
        write("setup.sh", setup, false)?;
    }
    for (i, s) in cell.steps.iter().enumerate() {
        write(&format!("steps/{}.sh", step_slug(i, &s.name)), &s.run, true)?;
    }
    write("run.sh", &run_script(&manifest, &cell), true)?;
    write(
        "README.md",
        &readme(
            &manifest,
            &cell,
            &env,
            record.as_ref(),
            locked.map(|l| &l.packages),
            &locked_list,
        ),
        false,
    )?;
    Ok(Exported {
        dir: dir.to_path_buf(),
        files,
        pinned: locked.is_some(),
    })
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

fn readme(
    manifest: &RunManifest,
    cell: &Cell,
    env: &Environment,
    record: Option<&CellRecord>,
    packages: Option<&std::collections::BTreeMap<String, String>>,
    sources: &[crate::store::lock::LockedSource],
) -> String {
    let mut s = format!("# Reproducer: {} / {}\n\n", manifest.name, cell.id);
    let values: Vec<String> = cell
        .values
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let _ = writeln!(
        s,
        "Cell `{}` ({}) of matrix `{}`, run `{}`, made with rocmatrix {}.\n",
        cell.id,
        values.join(", "),
        manifest.name,
        manifest.run_id,
        manifest.rocmatrix_version
    );
    let _ = writeln!(s, "## Environment\n");
    let _ = writeln!(
        s,
        "- base image: `{}` ({} family), LLVM flavour: {}",
        env.base,
        env.family,
        match env.llvm {
            crate::plan::Llvm::Debug => "debug",
            crate::plan::Llvm::Release => "release",
        }
    );
    let _ = writeln!(
        s,
        "- packages asked for: {}",
        if env.packages.is_empty() {
            "none".to_string()
        } else {
            env.packages
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    match packages {
        Some(p) => {
            let _ = writeln!(s, "- all {} installed packages are pinned in `Containerfile` at the versions the run had; the ROCm and LLVM ones:\n", p.len());
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
            let _ = writeln!(s, "| package | version |\n| --- | --- |");
            for (n, v) in p.iter().filter(|(n, _)| interesting(n)) {
                let _ = writeln!(s, "| {n} | {v} |");
            }
        }
        None => {
            let _ = writeln!(
                s,
                "- the run has no lock for this environment: package versions are not pinned"
            );
        }
    }
    if !sources.is_empty() {
        let _ = writeln!(s, "\n## Sources\n");
        for src in sources {
            let _ = writeln!(
                s,
                "- `/src/{}`: {} at commit `{}` (ref `{}`), in `sources/{}.tar`",
                src.name, src.url, src.commit, src.reference, src.name
            );
            for p in &src.patches {
                let _ = writeln!(s, "  - patch `{}` (sha256 `{}`)", p.file, &p.sha256[..16]);
            }
        }
    }
    let _ = writeln!(s, "\n## What happened\n");
    match record {
        Some(r) => {
            let _ = writeln!(
                s,
                "Outcome: **{}**{}\n",
                r.status.as_str(),
                r.reason
                    .as_ref()
                    .map(|x| format!(" — {x}"))
                    .unwrap_or_default()
            );
            let _ = writeln!(
                s,
                "| step | status | exit | time |\n| --- | --- | --- | --- |"
            );
            for st in &r.steps {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {:.1} s |",
                    st.name,
                    st.status.as_str(),
                    st.exit_code
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "-".into()),
                    st.duration_secs
                );
            }
            if let Some(bad) = r.steps.iter().find(|st| st.status.is_failure()) {
                let _ = writeln!(
                    s,
                    "\nLast lines of `{}`:\n\n```\n{}\n```",
                    bad.name, bad.log_tail
                );
            }
        }
        None => {
            let _ = writeln!(s, "The cell has no result in the run (it did not finish).");
        }
    }
    let _ = writeln!(s, "\n## Reproduce\n\n```sh\n./run.sh\n```\n");
    let _ = writeln!(s, "`run.sh` builds the image from `Containerfile` (the steps are in `steps/`, baked into the image) and runs the steps in order, each with its timeout, as `bash -eo pipefail`. Exit code: 0 passed, {EXIT_SKIPPED} skipped, {EXIT_TIMEOUT} timed out, else the failing step's. Steps that need a GPU run only where `/dev/kfd` exists.");
    s
}
