//! Base images: use the engine's, else pull, else (Debian family) bootstrap
//! a root file system with debootstrap and import it; a base given as a
//! rootfs tarball is imported the same way.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::family::Profile;
use super::registry::{self, Fetched, Registries};
use super::{mirror, ImageError};
use crate::engine::{Engine, LABEL_KIND};
use crate::plan::Environment;
pub use crate::store::lock::{BaseImage, BaseOrigin, Bootstrap};

/// How long a pull may take before rocmatrix decides no registry is reachable.
const PULL_LIMIT: Duration = Duration::from_secs(60);

impl BaseOrigin {
    /// One plain line for the log.
    pub fn describe(&self, reference: &str) -> String {
        match self {
            BaseOrigin::Present { bootstrapped: None } => {
                format!("base image {reference}: present in the engine")
            }
            BaseOrigin::Present {
                bootstrapped: Some(b),
            } => format!(
                "base image {reference}: present in the engine (bootstrapped earlier from {} {})",
                b.mirror, b.suite
            ),
            BaseOrigin::Pulled => format!("base image {reference}: pulled"),
            BaseOrigin::Registry { reference: r, .. } => {
                format!("base image {reference}: pulled from {r} (bootstrapped by an earlier run)")
            }
            BaseOrigin::Bootstrapped(b) => format!(
                "base image {reference}: bootstrapped {} from {} (Release of {}) and imported",
                b.suite,
                b.mirror,
                b.release_date.as_deref().unwrap_or("unknown date")
            ),
            BaseOrigin::Imported { tarball, .. } => {
                format!("base image {reference}: imported from {tarball}")
            }
        }
    }
}

const LABEL_SUITE: &str = "rocmatrix.base.suite";
const LABEL_MIRROR: &str = "rocmatrix.base.mirror";
const LABEL_RELEASE_DATE: &str = "rocmatrix.base.release-date";

/// Whether `base` names a rootfs tarball rather than an image.
pub fn is_tarball(base: &str) -> bool {
    [".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.zst"]
        .iter()
        .any(|ext| base.ends_with(ext))
}

/// A registry that bootstrapped bases are shared through (`--registry`),
/// and what using it gave: failures to report, the reference pushed.
pub struct BaseShare<'a> {
    pub registries: &'a Registries,
    pub registry: &'a str,
    /// (registry, reason) for each registry that failed just now.
    pub unavailable: Vec<(String, String)>,
    /// `<registry>/base@sha256:…` when a bootstrapped base was pushed.
    pub pushed: Option<String>,
}

/// Makes sure the base image of `env` is in the engine. `profile` is the
/// family's (its `bootstrap` decides whether a base can be bootstrapped);
/// `work` is a scratch directory; `log` receives debootstrap's output. With
/// `share`, a base to bootstrap is first pulled from the registry, and one
/// that was bootstrapped is pushed there. With `proxy` (the package cache's
/// loopback URL), debootstrap downloads through it.
pub async fn ensure_base(
    engine: &Engine,
    env: &Environment,
    profile: &Profile,
    work: &Path,
    log: &Path,
    mut share: Option<&mut BaseShare<'_>>,
    proxy: Option<&str>,
) -> Result<BaseImage, ImageError> {
    if is_tarball(&env.base) {
        return import_tarball(engine, Path::new(&env.base)).await;
    }
    let reference = env.base.clone();
    let pull_error = match present_or_pulled(engine, &reference).await? {
        Found::Base(base) => return Ok(base),
        Found::PullFailed(e) => e,
    };
    if profile.bootstrap.as_str() != "debootstrap" {
        return Err(ImageError::NoBase {
            reference,
            why: format!("it cannot be pulled ({pull_error}) and this family has no bootstrap; import a rootfs tarball as `base:`"),
        });
    }
    let suite = suite_to_bootstrap(env, &reference)?;
    let mirror = env
        .mirror
        .clone()
        .unwrap_or_else(|| mirror::host_mirror(Path::new("/etc/apt")));
    let shared = share
        .as_deref()
        .map(|sh| registry::base_reference(sh.registry, &profile.family, &suite, &mirror));
    if let (Some(sh), Some(remote)) = (share.as_deref_mut(), &shared) {
        if let Some(base) = pull_shared(engine, sh, remote, &reference).await? {
            return Ok(base);
        }
    }
    let base = bootstrap(
        engine,
        &Bootstrapping {
            reference: &reference,
            suite: &suite,
            mirror: &mirror,
            work,
            log,
            pull_error: &pull_error,
            proxy,
        },
    )
    .await?;
    if let (Some(sh), Some(remote)) = (share, &shared) {
        match sh
            .registries
            .push_as(engine, sh.registry, &reference, remote)
            .await?
        {
            Fetched::Done(digest) => sh.pushed = Some(digest),
            Fetched::Unavailable { registry, reason } => sh.unavailable.push((registry, reason)),
            Fetched::Missing | Fetched::Skipped => {}
        }
    }
    Ok(base)
}

/// A base the engine has or could pull, or why the pull failed.
enum Found {
    Base(BaseImage),
    PullFailed(String),
}

/// The base `reference` as the engine has it, else as pulled.
async fn present_or_pulled(engine: &Engine, reference: &str) -> Result<Found, ImageError> {
    if let Some(img) = engine.image(reference).await? {
        let bootstrapped = bootstrapped_from(&img.labels);
        return Ok(Found::Base(BaseImage {
            reference: reference.to_string(),
            id: img.id,
            origin: BaseOrigin::Present { bootstrapped },
        }));
    }
    match engine.pull(reference, PULL_LIMIT).await {
        Ok(()) => {
            let id = engine
                .image(reference)
                .await?
                .map(|i| i.id)
                .unwrap_or_default();
            Ok(Found::Base(BaseImage {
                reference: reference.to_string(),
                id,
                origin: BaseOrigin::Pulled,
            }))
        }
        Err(e) => Ok(Found::PullFailed(e.to_string())),
    }
}

/// The suite to bootstrap `reference` from: the environment's, else the
/// reference's tag (not `latest`).
fn suite_to_bootstrap(env: &Environment, reference: &str) -> Result<String, ImageError> {
    env.suite
        .clone()
        .or_else(|| reference.rsplit_once(':').map(|(_, t)| t.to_string()))
        .filter(|s| !s.is_empty() && s != "latest")
        .ok_or_else(|| ImageError::NoBase {
            reference: reference.to_string(),
            why: "it cannot be pulled and no suite is known to bootstrap: set environment.suite"
                .into(),
        })
}

/// The bootstrapped base shared as `remote`, pulled from the registry and
/// tagged `reference`; `None` when the registry does not have it (a failing
/// registry is noted in `sh.unavailable`).
async fn pull_shared(
    engine: &Engine,
    sh: &mut BaseShare<'_>,
    remote: &str,
    reference: &str,
) -> Result<Option<BaseImage>, ImageError> {
    match sh
        .registries
        .pull_as(engine, sh.registry, remote, reference)
        .await?
    {
        Fetched::Done(_) => {
            let img = engine
                .image(reference)
                .await?
                .ok_or_else(|| ImageError::NoBase {
                    reference: reference.to_string(),
                    why: format!("{remote} was pulled but the engine has no {reference}"),
                })?;
            Ok(Some(BaseImage {
                reference: reference.to_string(),
                id: img.id,
                origin: BaseOrigin::Registry {
                    reference: remote.to_string(),
                    bootstrapped: bootstrapped_from(&img.labels),
                },
            }))
        }
        Fetched::Unavailable { registry, reason } => {
            sh.unavailable.push((registry, reason));
            Ok(None)
        }
        Fetched::Missing | Fetched::Skipped => Ok(None),
    }
}

/// Where a bootstrapped base came from, as its labels say.
fn bootstrapped_from(labels: &std::collections::HashMap<String, String>) -> Option<Bootstrap> {
    labels.get(LABEL_SUITE).map(|suite| Bootstrap {
        suite: suite.clone(),
        mirror: labels.get(LABEL_MIRROR).cloned().unwrap_or_default(),
        release_date: labels.get(LABEL_RELEASE_DATE).cloned(),
    })
}

/// Removes what bootstraps of processes that are gone left in `work`
/// (`rootfs-<base>-<pid>` and its `.tar`).
fn remove_stale_scratch(work: &Path) {
    let Ok(entries) = std::fs::read_dir(work) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let stem = name.strip_suffix(".tar").unwrap_or(&name);
        let Some(pid) = stem
            .strip_prefix("rootfs-")
            .and_then(|s| s.rsplit_once('-'))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let p = e.path();
            let _ = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
        }
    }
}

/// What a debootstrap of a base needs: the base's reference, the suite and
/// mirror, a scratch directory (`work`), debootstrap's log, why the base
/// could not be pulled (for the error when debootstrap is missing) and the
/// package cache's proxy.
struct Bootstrapping<'a> {
    reference: &'a str,
    suite: &'a str,
    mirror: &'a str,
    work: &'a Path,
    log: &'a Path,
    pull_error: &'a str,
    proxy: Option<&'a str>,
}

impl Bootstrapping<'_> {
    fn no_base(&self, why: String) -> ImageError {
        ImageError::NoBase {
            reference: self.reference.to_string(),
            why,
        }
    }
}

async fn bootstrap(engine: &Engine, b: &Bootstrapping<'_>) -> Result<BaseImage, ImageError> {
    let debootstrap = find_program("debootstrap").ok_or_else(|| {
        b.no_base(format!(
            "it cannot be pulled ({}) and debootstrap is not installed (apt-get install debootstrap)",
            b.pull_error
        ))
    })?;
    // Per process and base: two runs bootstrapping the same suite at once,
    // or one run bootstrapping two bases of a suite side by side, must not
    // share (and delete) each other's root file system.
    let scratch = format!(
        "rootfs-{}-{}",
        crate::matrix_file::cell_id::sanitize(b.reference),
        std::process::id()
    );
    let root = b.work.join(&scratch);
    let stale = b.work.to_path_buf();
    let _ = tokio::task::spawn_blocking(move || remove_stale_scratch(&stale)).await;
    tokio::fs::create_dir_all(b.work)
        .await
        .map_err(|e| ImageError::io(b.work, e))?;
    run_debootstrap(b, &debootstrap, &root).await?;
    let suite_root = root.clone();
    let release_date = tokio::task::spawn_blocking(move || release_date(&suite_root))
        .await
        .unwrap_or(None);
    let tarball = b.work.join(format!("{scratch}.tar"));
    pack_rootfs(b, &root, &tarball).await?;
    let (suite, mirror) = (b.suite, b.mirror);
    let mut changes = vec![
        format!("LABEL {LABEL_KIND}=base"),
        format!("LABEL {LABEL_SUITE}={suite}"),
        format!("LABEL {LABEL_MIRROR}={mirror}"),
        "CMD [\"bash\"]".to_string(),
    ];
    if let Some(d) = &release_date {
        changes.push(format!("LABEL {LABEL_RELEASE_DATE}=\"{d}\""));
    }
    let id = engine.import_rootfs(&tarball, b.reference, changes).await;
    let _ = tokio::fs::remove_file(&tarball).await;
    Ok(BaseImage {
        reference: b.reference.to_string(),
        id: id?,
        origin: BaseOrigin::Bootstrapped(Bootstrap {
            suite: suite.to_string(),
            mirror: mirror.to_string(),
            release_date,
        }),
    })
}

/// debootstrap's minbase of the suite into `root`, its output in the log;
/// `root` is removed when it fails.
async fn run_debootstrap(
    b: &Bootstrapping<'_>,
    debootstrap: &Path,
    root: &Path,
) -> Result<(), ImageError> {
    let log_file = tokio::fs::File::create(b.log)
        .await
        .map_err(|e| ImageError::io(b.log, e))?
        .into_std()
        .await;
    let log_err = log_file.try_clone().map_err(|e| ImageError::io(b.log, e))?;
    let mut command = tokio::process::Command::new(debootstrap);
    // debootstrap fetches with wget, which honours `http_proxy`; nothing of
    // it reaches the root file system.
    if let Some(p) = b.proxy {
        command.envs(super::aptcache::proxy_vars(p));
    }
    let status = command
        .args(["--variant=minbase", b.suite])
        .arg(root)
        .arg(b.mirror)
        .stdin(std::process::Stdio::null())
        .stdout(log_file)
        .stderr(log_err)
        .kill_on_drop(true)
        .status()
        .await
        .map_err(|e| b.no_base(format!("cannot run {}: {e}", debootstrap.display())))?;
    if !status.success() {
        let _ = tokio::fs::remove_dir_all(root).await;
        return Err(b.no_base(format!(
            "debootstrap {} from {} failed ({status}); see {}",
            b.suite,
            b.mirror,
            b.log.display()
        )));
    }
    Ok(())
}

/// `root` packed into `tarball` (numeric owners); `root` is removed.
async fn pack_rootfs(b: &Bootstrapping<'_>, root: &Path, tarball: &Path) -> Result<(), ImageError> {
    let tar = tokio::process::Command::new("tar")
        .args(["--numeric-owner", "-C"])
        .arg(root)
        .args(["-cf"])
        .arg(tarball)
        .arg(".")
        .stdin(std::process::Stdio::null())
        .status()
        .await
        .map_err(|e| b.no_base(format!("cannot run tar: {e}")))?;
    let _ = tokio::fs::remove_dir_all(root).await;
    if !tar.success() {
        return Err(b.no_base(format!("packing the root file system failed ({tar})")));
    }
    Ok(())
}

async fn import_tarball(engine: &Engine, tarball: &Path) -> Result<BaseImage, ImageError> {
    let sha = {
        let path = tarball.to_path_buf();
        tokio::task::spawn_blocking(move || crate::digest::sha256_file(&path))
            .await
            .map_err(|e| ImageError::io(tarball, std::io::Error::other(e)))?
            .map_err(|e| ImageError::io(tarball, e))?
    };
    let stem = tarball
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = stem
        .split(".tar")
        .next()
        .unwrap_or("rootfs")
        .to_ascii_lowercase();
    let reference = format!(
        "rocmatrix/base:{}-{}",
        crate::matrix_file::cell_id::sanitize(&stem).trim_matches(['.', '-']),
        &sha[..12]
    );
    let origin = BaseOrigin::Imported {
        tarball: tarball.display().to_string(),
        sha256: sha,
    };
    if let Some(img) = engine.image(&reference).await? {
        return Ok(BaseImage {
            reference,
            id: img.id,
            origin,
        });
    }
    let id = engine
        .import_rootfs(
            tarball,
            &reference,
            vec![format!("LABEL {LABEL_KIND}=base"), "CMD [\"bash\"]".into()],
        )
        .await?;
    Ok(BaseImage {
        reference,
        id,
        origin,
    })
}

/// The `Date:` field of the suite's Release file inside a bootstrapped root.
fn release_date(root: &Path) -> Option<String> {
    let lists = root.join("var/lib/apt/lists");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(lists)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.to_string_lossy();
            n.ends_with("_Release") || n.ends_with("_InRelease")
        })
        .collect();
    entries.sort();
    entries.iter().find_map(|p| {
        let text = std::fs::read_to_string(p).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("Date:").map(|d| d.trim().to_string()))
    })
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin"].iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_tarballs() {
        assert!(is_tarball("/srv/rootfs/gentoo-stage3.tar.xz"));
        assert!(!is_tarball("debian:trixie"));
    }

    #[test]
    fn reads_release_date() {
        let d = tempfile::tempdir().unwrap();
        let lists = d.path().join("var/lib/apt/lists");
        std::fs::create_dir_all(&lists).unwrap();
        std::fs::write(
            lists.join("deb.debian.org_debian_dists_trixie_Release"),
            "Origin: Debian\nDate: Sat, 12 Sep 2026 07:55:41 UTC\n",
        )
        .unwrap();
        assert_eq!(
            release_date(d.path()).as_deref(),
            Some("Sat, 12 Sep 2026 07:55:41 UTC")
        );
    }
}
