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
use crate::store::lock::Bootstrap;
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
    /// How the reproducer gets the run's base image.
    pub base: BasePin,
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
    let lock = Lock::load(&crate::store::layout::lock_of(&store.dir)).ok();
    Ok((manifest, planned, record, lock))
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

/// How the reproducer gets the base image the run had: never a registry's
/// image of the same name that merely happens to be there today.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BasePin {
    /// No lock: the matrix file's base, whatever it is today.
    Unpinned { reference: String },
    /// `FROM name@sha256:…`: the registry gives exactly the run's base.
    Digest(String),
    /// From a registry, but the engine knows no digest for it: `run.sh`
    /// pulls it if missing and stops unless its image id is the run's.
    Id { reference: String, id: String },
    /// Bootstrapped: `make-base.sh` makes it again from the Debian snapshot
    /// archive; `run.sh` stops unless the local image carries the
    /// bootstrap's suite and Release date.
    Bootstrap {
        reference: String,
        bootstrap: Bootstrap,
        /// The snapshot archive's timestamp for the Release date,
        /// `20261030T080801Z`.
        snapshot: Option<String>,
    },
    /// Imported from a root file system tarball: `run.sh` stops unless it
    /// was imported again under the run's name.
    Tarball {
        reference: String,
        tarball: String,
        sha256: String,
    },
}

impl BasePin {
    /// The name the Containerfile's `FROM` uses.
    pub fn reference(&self) -> &str {
        match self {
            BasePin::Digest(r) => r,
            BasePin::Unpinned { reference }
            | BasePin::Id { reference, .. }
            | BasePin::Bootstrap { reference, .. }
            | BasePin::Tarball { reference, .. } => reference,
        }
    }
}

/// The pin for the lock's `base` (none without a lock): by registry digest
/// when it came from a registry and the engine knows one, else by what made
/// it.
fn base_pin(
    asked: &str,
    base: Option<&BaseImage>,
    digests: &dyn Fn(&str) -> Vec<String>,
) -> BasePin {
    let Some(base) = base else {
        return BasePin::Unpinned {
            reference: asked.to_string(),
        };
    };
    let reference = base.reference.clone();
    let bootstrapped = match &base.origin {
        BaseOrigin::Bootstrapped(b)
        | BaseOrigin::Present {
            bootstrapped: Some(b),
        }
        | BaseOrigin::Registry {
            bootstrapped: Some(b),
            ..
        } => Some(b.clone()),
        _ => None,
    };
    if let Some(b) = bootstrapped {
        return BasePin::Bootstrap {
            reference,
            snapshot: b.release_date.as_deref().and_then(snapshot_timestamp),
            bootstrap: b,
        };
    }
    if let BaseOrigin::Imported { tarball, sha256 } = &base.origin {
        return BasePin::Tarball {
            reference,
            tarball: tarball.clone(),
            sha256: sha256.clone(),
        };
    }
    let known = if base.id.is_empty() {
        Vec::new()
    } else {
        digests(&base.id)
    };
    match pick_digest(&reference, &known) {
        Some(d) => BasePin::Digest(format!("{reference}@{d}")),
        None => BasePin::Id {
            reference,
            id: base.id.clone(),
        },
    }
}

/// The `sha256:…` of the `RepoDigests` entry for `reference`'s repository
/// (`debian` for `debian:bookworm`; Podman's `docker.io/library/debian`
/// counts), else of the first one.
fn pick_digest(reference: &str, digests: &[String]) -> Option<String> {
    let repo = |r: &str| {
        let r = r.split('@').next().unwrap_or(r);
        // A tag is after the last `:` that follows the last `/`.
        let name = match r.rfind(':') {
            Some(i) if !r[i..].contains('/') => &r[..i],
            _ => r,
        };
        name.trim_start_matches("docker.io/")
            .trim_start_matches("library/")
            .to_string()
    };
    let split = |d: &String| {
        d.split_once('@')
            .filter(|(_, h)| h.starts_with("sha256:"))
            .map(|(n, h)| (n.to_string(), h.to_string()))
    };
    let all: Vec<(String, String)> = digests.iter().filter_map(split).collect();
    all.iter()
        .find(|(n, _)| repo(n) == repo(reference))
        .or(all.first())
        .map(|(_, h)| h.clone())
}

/// `20261030T080801Z` for a Release file's `Date:`, `Fri, 30 Oct 2026
/// 08:08:01 UTC`: the form snapshot.debian.org's archive URLs take.
fn snapshot_timestamp(date: &str) -> Option<String> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut w = date.split_whitespace();
    let mut first = w.next()?;
    if first.ends_with(',') {
        first = w.next()?;
    }
    let day: u32 = first.parse().ok()?;
    let month = w.next()?;
    let month = MONTHS.iter().position(|m| *m == month)? + 1;
    let year: u32 = w.next()?.parse().ok()?;
    let time: Vec<u32> = w
        .next()?
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let zone = w.next().unwrap_or("UTC");
    if time.len() != 3 || !matches!(zone, "UTC" | "GMT" | "+0000" | "Z") || !(1..=31).contains(&day)
    {
        return None;
    }
    Some(format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        time[0], time[1], time[2]
    ))
}

/// The snapshot archive's URL for a timestamp.
fn snapshot_url(timestamp: &str) -> String {
    format!("https://snapshot.debian.org/archive/debian/{timestamp}/")
}

/// The bootstrap command the run used, as a user types it.
fn debootstrap_command(b: &Bootstrap, root: &str, mirror: &str) -> String {
    format!(
        "debootstrap --variant=minbase {} {root} {mirror}",
        crate::plan::ci::shell_quote(&b.suite)
    )
}

/// `make-base.sh`: the base bootstrapped again, from the Debian snapshot
/// archive at the run's Release, checked, and imported under the run's name
/// with the labels `run.sh` checks.
fn make_base_script(pin: &BasePin) -> String {
    let BasePin::Bootstrap {
        reference,
        bootstrap: b,
        snapshot,
    } = pin
    else {
        return String::new();
    };
    let q = crate::plan::ci::shell_quote;
    let want = b.release_date.clone().unwrap_or_default();
    format!(
        r#"#!/usr/bin/env bash
# Makes the base image {reference} as the run had it (made by `rocmatrix export`):
# the run bootstrapped it with
#   {run_cmd}
# at the suite's Release of {date}.
# This bootstraps {suite} again from the Debian snapshot archive at that time,
# checks that the Release is the run's, and imports it as {reference}.
# Needs root (debootstrap), debootstrap, tar and the docker CLI.
# SNAPSHOT=<timestamp> picks another snapshot (https://snapshot.debian.org/archive/debian/);
# MIRROR=<url> another mirror altogether.
set -eu
reference={qref}
suite={qsuite}
want={qwant}
snapshot=${{SNAPSHOT:-{stamp}}}
if [ -z "${{MIRROR:-}}" ] && [ -z "$snapshot" ]; then
  echo "make-base.sh: the run did not record the Release date of its bootstrap: set SNAPSHOT=<timestamp> or MIRROR=<url>" >&2
  exit 2
fi
mirror=${{MIRROR:-https://snapshot.debian.org/archive/debian/$snapshot/}}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase "$suite" "$root" "$mirror"
got=$(sed -n 's/^Date: *//p' "$root"/var/lib/apt/lists/*_Release "$root"/var/lib/apt/lists/*_InRelease 2>/dev/null | head -n 1)
if [ -n "$want" ] && [ "$got" != "$want" ]; then
  echo "make-base.sh: $mirror has the Release of $got, the run's was $want;" >&2
  echo "  pick the snapshot that has it (the list of the day is under https://snapshot.debian.org/archive/debian/) and run SNAPSHOT=<timestamp> $0" >&2
  exit 1
fi
tar --numeric-owner -C "$root" -c . | docker import \
  -c 'CMD ["bash"]' \
  -c "LABEL rocmatrix.kind=base" \
  -c "LABEL rocmatrix.base.suite=$suite" \
  -c "LABEL rocmatrix.base.mirror=$mirror" \
  -c "LABEL rocmatrix.base.release-date=\"$got\"" \
  - "$reference"
echo "make-base.sh: imported $reference ({suite} at the Release of $got)"
"#,
        run_cmd = debootstrap_command(b, "ROOT", &b.mirror),
        date = b.release_date.as_deref().unwrap_or("an unrecorded date"),
        suite = b.suite,
        qref = q(reference),
        qsuite = q(&b.suite),
        qwant = q(&want),
        stamp = snapshot.as_deref().unwrap_or(""),
    )
}

/// The lines of `run.sh` that make sure the base it builds on is the run's,
/// before `docker build` can pull a different image of the same name.
fn base_check(pin: &BasePin) -> String {
    let q = crate::plan::ci::shell_quote;
    match pin {
        BasePin::Unpinned { .. } | BasePin::Digest(_) => String::new(),
        BasePin::Id { reference, id } => format!(
            r#"base={r}
want={id}
id=$(docker image inspect -f '{{{{.Id}}}}' "$base" 2>/dev/null) || {{ docker pull "$base" >&2 && id=$(docker image inspect -f '{{{{.Id}}}}' "$base"); }} || id=
if [ "${{id#sha256:}}" != "${{want#sha256:}}" ]; then
  echo "run.sh: the base image $base is ${{id:-not here}}, the run's was $want: another image of the same name; get the run's base and tag it $base (see README.md)" >&2
  exit 3
fi
"#,
            r = q(reference),
            id = q(id),
        ),
        BasePin::Bootstrap {
            reference,
            bootstrap: b,
            ..
        } => format!(
            r#"base={r}
want={want}
got=$(docker image inspect -f '{{{{ index .Config.Labels "rocmatrix.base.suite" }}}} {{{{ index .Config.Labels "rocmatrix.base.release-date" }}}}' "$base" 2>/dev/null) || got=
case "$got" in
  "$want"*) ;;
  *) echo "run.sh: $base here is not the base the run bootstrapped ({suite} at the Release of {date}): make it with ./make-base.sh (see README.md)" >&2
     exit 3 ;;
esac
"#,
            r = q(reference),
            want = q(format!("{} {}", b.suite, b.release_date.as_deref().unwrap_or("")).trim_end()),
            suite = b.suite,
            date = b.release_date.as_deref().unwrap_or("an unrecorded date"),
        ),
        BasePin::Tarball {
            reference,
            tarball,
            sha256,
        } => format!(
            r#"base={r}
if ! docker image inspect "$base" >/dev/null 2>&1; then
  echo "run.sh: the base image $base is not here: import the run's root file system (sha256 {sha256}) with: docker import -c 'CMD [\"bash\"]' {t} $base" >&2
  exit 3
fi
"#,
            r = q(reference),
            t = q(tarball),
        ),
    }
}

/// One Markdown line for the README: what the base is and how `run.sh`
/// gets it.
fn base_line(pin: &BasePin) -> String {
    match pin {
        BasePin::Unpinned { reference } => format!(
            "`{reference}` as its registry gives it today (the run has no lock: not pinned)"
        ),
        BasePin::Digest(r) => format!(
            "`{r}`, pinned by the digest the registry gave the run (its tag may move; the digest does not)"
        ),
        BasePin::Id { reference, id } => format!(
            "`{reference}`, image id `{id}`; the run's engine knew no registry digest for it, so `run.sh` checks the id of the `{reference}` it finds (or pulls) and stops if it is another image"
        ),
        BasePin::Bootstrap {
            reference,
            bootstrap: b,
            snapshot,
        } => format!(
            "`{reference}`, bootstrapped by the run: `{cmd}` at the suite's Release of {date}. A registry's `{reference}` is another image: `run.sh` stops unless the local `{reference}` carries that suite and Release date, and `sudo ./make-base.sh` makes it with `{again}`{checks}",
            cmd = debootstrap_command(b, "ROOT", &b.mirror),
            date = b.release_date.as_deref().unwrap_or("an unrecorded date"),
            again = debootstrap_command(
                b,
                "ROOT",
                &snapshot
                    .as_deref()
                    .map(snapshot_url)
                    .unwrap_or_else(|| "$MIRROR".to_string())
            ),
            checks = if b.release_date.is_some() {
                " (the Debian snapshot archive at the Release date) and checks that the Release is the run's"
            } else {
                " (set `SNAPSHOT=` or `MIRROR=`: the run did not record the Release date)"
            },
        ),
        BasePin::Tarball {
            reference,
            tarball,
            sha256,
        } => format!(
            "`{reference}`, imported by the run from `{tarball}` (sha256 `{sha256}`); `run.sh` stops unless it is imported again under that name"
        ),
    }
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
fn readme(
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

    fn base(origin: BaseOrigin) -> BaseImage {
        BaseImage {
            reference: "debian:bookworm".into(),
            id: "sha256:1d".into(),
            origin,
        }
    }

    fn bootstrap(date: Option<&str>) -> Bootstrap {
        Bootstrap {
            suite: "sid".into(),
            mirror: "http://deb.debian.org/debian".into(),
            release_date: date.map(str::to_string),
        }
    }

    #[test]
    fn a_release_date_is_a_snapshot_timestamp() {
        assert_eq!(
            snapshot_timestamp("Fri, 30 Oct 2026 08:08:01 UTC").as_deref(),
            Some("20261030T080801Z")
        );
        assert_eq!(
            snapshot_timestamp("Sat, 1 Aug 2026 20:01:09 +0000").as_deref(),
            Some("20260801T200109Z")
        );
        for bad in [
            "",
            "Fri, 30 Foo 2026 08:08:01 UTC",
            "Fri, 30 Oct 2026 08:08 UTC",
            "Fri, 30 Oct 2026 08:08:01 CET",
        ] {
            assert_eq!(snapshot_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_registry_base_is_pinned_by_its_digest() {
        let d = |_: &str| {
            vec![
                "127.0.0.1:5000/base@sha256:aa".to_string(),
                "debian@sha256:bb".to_string(),
            ]
        };
        for origin in [
            BaseOrigin::Pulled,
            BaseOrigin::Present { bootstrapped: None },
        ] {
            assert_eq!(
                base_pin("debian:bookworm", Some(&base(origin)), &d),
                BasePin::Digest("debian:bookworm@sha256:bb".into())
            );
        }
        // Podman's names count; another repository only when it is the only one.
        assert_eq!(
            pick_digest(
                "debian:bookworm",
                &["docker.io/library/debian@sha256:cc".into()]
            ),
            Some("sha256:cc".into())
        );
        assert_eq!(
            pick_digest("localhost:5000/x:1", &["other@sha256:dd".into()]),
            Some("sha256:dd".into())
        );
        // No digest known: the reproducer checks the image id.
        let none = |_: &str| Vec::new();
        let pin = base_pin("debian:bookworm", Some(&base(BaseOrigin::Pulled)), &none);
        assert_eq!(
            pin,
            BasePin::Id {
                reference: "debian:bookworm".into(),
                id: "sha256:1d".into()
            }
        );
        let script = base_check(&pin);
        assert!(script.contains("want=sha256:1d"), "{script}");
        assert!(
            script.contains("another image of the same name"),
            "{script}"
        );
    }

    #[test]
    fn a_bootstrapped_base_says_how_to_make_it_and_is_checked() {
        let never =
            |_: &str| -> Vec<String> { panic!("a bootstrapped base has no registry digest") };
        let b = bootstrap(Some("Fri, 30 Oct 2026 08:08:01 UTC"));
        for origin in [
            BaseOrigin::Bootstrapped(b.clone()),
            BaseOrigin::Present {
                bootstrapped: Some(b.clone()),
            },
        ] {
            let pin = base_pin("debian:sid", Some(&base(origin)), &never);
            assert_eq!(
                pin,
                BasePin::Bootstrap {
                    reference: "debian:bookworm".into(),
                    bootstrap: b.clone(),
                    snapshot: Some("20261030T080801Z".into())
                }
            );
            let line = base_line(&pin);
            for part in [
                "bootstrapped by the run: `debootstrap --variant=minbase sid ROOT http://deb.debian.org/debian` at the suite's Release of Fri, 30 Oct 2026 08:08:01 UTC",
                "`sudo ./make-base.sh` makes it with `debootstrap --variant=minbase sid ROOT https://snapshot.debian.org/archive/debian/20261030T080801Z/`",
            ] {
                assert!(line.contains(part), "{part:?} not in {line}");
            }
            let check = base_check(&pin);
            assert!(
                check.contains("want='sid Fri, 30 Oct 2026 08:08:01 UTC'"),
                "{check}"
            );
            assert!(check.contains("make it with ./make-base.sh"), "{check}");
            let make = make_base_script(&pin);
            assert!(
                make.contains("snapshot=${SNAPSHOT:-20261030T080801Z}"),
                "{make}"
            );
            assert!(
                make.contains("want='Fri, 30 Oct 2026 08:08:01 UTC'"),
                "{make}"
            );
        }
        // No Release date recorded: no snapshot to name, and the script says so.
        let pin = base_pin(
            "debian:sid",
            Some(&base(BaseOrigin::Bootstrapped(bootstrap(None)))),
            &never,
        );
        assert!(base_line(&pin).contains("set `SNAPSHOT=` or `MIRROR=`"));
        assert!(make_base_script(&pin).contains("snapshot=${SNAPSHOT:-}"));
    }

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
