//! `rocmatrix export RUN CELL DIR`: a self-contained reproducer for one cell
//! — a Containerfile with the locked package versions, the rendered step
//! scripts baked into the image, a `run.sh` that needs only the docker CLI,
//! and a README fit to paste into an upstream issue.

mod base_pin;
#[cfg(test)]
mod fixtures;
mod readme;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::load_cell;
use crate::image::build::recipe;
use crate::image::{BaseImage, BaseOrigin, Family};
use crate::matrix_file::GpuUse;
use crate::plan::{Cell, Environment};
use crate::run::{RunError, RunStore};
use crate::source::Prepared;
use crate::step::protocol::{env_key, step_slug, EXIT_SKIPPED};
use crate::store::lock::{LockedEnvironment, LockedSource};
use crate::store::record::{CellRecord, RunManifest};
pub use base_pin::BasePin;
use base_pin::{base_check, base_pin, make_base_script};
use readme::readme;

/// Exit code of `run.sh` when a step timed out (as `timeout` reports it).
pub const EXIT_TIMEOUT: i32 = 124;

/// What an export wrote.
#[derive(Debug)]
pub struct Exported {
    pub dir: PathBuf,
    pub files: Vec<String>,
    /// Whether package versions are pinned from the run's lock.
    pub pinned: bool,
    /// How the reproducer gets the run's base image.
    pub base: BasePin,
}

/// Exports cell `cell_id` of the run in `store` into `dir` as a reproducer.
/// `digests` gives the registry digests (`name@sha256:…`) the engine knows
/// for an image id; it is asked only for a base that came from a registry.
pub fn export(
    store: &RunStore,
    cell_id: &str,
    dir: &Path,
    digests: &dyn Fn(&str) -> Vec<String>,
) -> Result<Exported, RunError> {
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
    let (build_env, mut base) = build_environment(&env, &family, locked)?;
    let pin = base_pin(&env.base, locked.map(|l| &l.base), digests);
    if let BasePin::Digest(reference) = &pin {
        base.reference = reference.clone();
    }
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
        &pin,
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
    if let BasePin::Bootstrap { .. } = &pin {
        out.write("make-base.sh", make_base_script(&pin).as_bytes(), true)?;
    }
    out.write(
        "run.sh",
        run_script(&manifest, &cell, &pin).as_bytes(),
        true,
    )?;
    out.write("README.md", readme.as_bytes(), false)?;
    Ok(Exported {
        dir: dir.to_path_buf(),
        files: out.files,
        pinned: locked.is_some(),
        base: pin,
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

fn run_script(manifest: &RunManifest, cell: &Cell, pin: &BasePin) -> String {
    let tag = format!(
        "rocmatrix-repro/{}:{}",
        crate::matrix_file::cell_id::sanitize(&cell.id)
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
{base_check}image={tag}
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
        base_check = base_check(pin),
    )
}

#[cfg(test)]
mod tests {
    use super::fixtures::{bootstrap, cell, manifest};
    use super::*;

    #[test]
    fn the_scripts_are_valid_shell() {
        let tarball = BasePin::Tarball {
            reference: "rocmatrix/base:root-0123".into(),
            tarball: "/srv/root fs.tar".into(),
            sha256: "0123".into(),
        };
        let pins = [
            BasePin::Unpinned {
                reference: "debian:bookworm".into(),
            },
            BasePin::Digest("debian:bookworm@sha256:bb".into()),
            BasePin::Id {
                reference: "debian:bookworm".into(),
                id: "sha256:1d".into(),
            },
            BasePin::Bootstrap {
                reference: "debian:sid".into(),
                bootstrap: bootstrap(Some("Fri, 30 Oct 2026 08:08:01 UTC")),
                snapshot: Some("20261030T080801Z".into()),
            },
            tarball,
        ];
        let (m, c) = (manifest(), cell());
        for pin in &pins {
            for script in [run_script(&m, &c, pin), make_base_script(pin)] {
                let o = std::process::Command::new("bash")
                    .args(["-n", "-c", &script])
                    .output()
                    .unwrap();
                assert!(
                    o.status.success(),
                    "{}\n{script}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
    }
}
