//! `rocmatrix repro`'s choice of image: the run's own environment image when
//! the engine still has it and it is provably what the lock describes, else
//! a rebuild from the lock.

use std::collections::BTreeMap;

use crate::engine::Engine;
use crate::image::base::is_tarball;
use crate::image::{build, packages, BaseOrigin, Family};
use crate::plan::Cell;
use crate::store::lock::{Lock, LockedEnvironment};

/// The run's own environment image, checked: still in the engine under its
/// tag, the image the cell's recipe makes on the engine's base today, with
/// the lock's package set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnImage {
    pub environment: String,
    pub tag: String,
    pub id: String,
    pub packages: usize,
}

impl OwnImage {
    /// One line: which image, and that its package set is the lock's.
    pub fn describe(&self) -> String {
        format!(
            "environment {}: reused the run's own image {} ({}), still in the engine; the package set is identical ({} packages)",
            crate::digest::short(&self.environment),
            self.tag,
            short_id(&self.id),
            self.packages
        )
    }
}

/// `sha256:0123456789ab` for an image id.
pub fn short_id(id: &str) -> String {
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    format!("sha256:{}", crate::digest::short(hex))
}

/// Why the run's own image cannot stand in for the lock's rebuild, in a
/// phrase (`its package set differs from the lock's in 2 packages …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotReusable(pub String);

impl From<&str> for NotReusable {
    fn from(s: &str) -> Self {
        NotReusable(s.to_string())
    }
}

impl From<String> for NotReusable {
    fn from(s: String) -> Self {
        NotReusable(s)
    }
}

/// The run's own image of `cell`'s environment, if a run of `cell` with no
/// lock would use exactly it; else why not, in a phrase. `owner` names the
/// container that lists its packages when the cache has no list for it.
pub async fn own_image(
    engine: &Engine,
    cell: &Cell,
    lock: &Lock,
    owner: &str,
) -> Result<OwnImage, NotReusable> {
    let env = cell
        .environment
        .as_ref()
        .ok_or("the cell has no environment")?;
    let hash = &cell.environment_hash;
    let locked = lock
        .environments
        .get(hash)
        .ok_or("the lock has no entry for its environment")?;
    let family = Family::get(&env.family).map_err(|e| e.to_string())?;
    let lookup = |r: &str| {
        let r = r.to_string();
        async move {
            engine
                .image(&r)
                .await
                .map_err(|e| format!("cannot ask the engine for {r}: {e}"))
        }
    };

    same_base(env, locked, &lookup).await?;
    let recipe = build::recipe(&family, env, hash, &locked.base).map_err(|e| e.to_string())?;
    if recipe.tag != locked.image.tag {
        return Err(NotReusable(format!(
            "its recipe now makes {}, not the run's {}",
            recipe.tag, locked.image.tag
        )));
    }
    match lookup(&locked.image.tag).await? {
        None => {
            return Err(NotReusable(format!(
                "the run's image {} is no longer in the engine",
                locked.image.tag
            )))
        }
        Some(i) if i.id != locked.image.id => {
            return Err(NotReusable(format!(
                "{} is now {}, not the run's {}",
                locked.image.tag,
                short_id(&i.id),
                short_id(&locked.image.id)
            )))
        }
        Some(_) => {}
    }
    // Checked, not assumed: the packages of exactly this image id (the
    // cache's list for the id, else listed in a container of it).
    let (installed, _) =
        packages::installed_cached(engine, &family, &locked.image.id, &locked.image.id, owner)
            .await
            .map_err(|e| format!("cannot list its packages: {e}"))?;
    same_packages(locked, &installed.versions)?;
    Ok(OwnImage {
        environment: hash.clone(),
        tag: locked.image.tag.clone(),
        id: locked.image.id.clone(),
        packages: installed.versions.len(),
    })
}

/// Whether the base a run would start from now is the run's: the image's
/// tag is the hash of its recipe and of its base's id.
async fn same_base<F, Fut>(
    env: &crate::plan::Environment,
    locked: &LockedEnvironment,
    lookup: &F,
) -> Result<(), NotReusable>
where
    F: Fn(&str) -> Fut,
    Fut: std::future::Future<Output = Result<Option<crate::engine::ImageInfo>, String>>,
{
    if let BaseOrigin::Imported { tarball, sha256 } = &locked.base.origin {
        let path = std::path::PathBuf::from(tarball);
        let now = crate::run::blocking("hashing a base tarball", move || {
            crate::digest::sha256_file(&path)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("its base tarball {tarball}: {e}"))?;
        if &now != sha256 {
            return Err(NotReusable(format!(
                "its base tarball {tarball} changed since the run"
            )));
        }
    } else if is_tarball(&env.base) || env.base != locked.base.reference {
        return Err(NotReusable(format!(
            "its base is now {}, the lock's is {}",
            env.base, locked.base.reference
        )));
    }
    match lookup(&locked.base.reference).await? {
        None => {
            return Err(NotReusable(format!(
                "its base {} is no longer in the engine",
                locked.base.reference
            )))
        }
        Some(b) if b.id != locked.base.id => {
            return Err(NotReusable(format!(
                "its base {} is now {}, the run's was {}",
                locked.base.reference,
                short_id(&b.id),
                short_id(&locked.base.id)
            )))
        }
        Some(_) => {}
    }
    Ok(())
}

/// Whether `installed` is the lock's package set; else the difference.
fn same_packages(
    locked: &LockedEnvironment,
    installed: &BTreeMap<String, String>,
) -> Result<(), NotReusable> {
    let diff = packages::diff(&locked.packages, installed);
    if diff.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = diff.iter().take(5).map(String::as_str).collect();
    Err(NotReusable(format!(
        "its package set differs from the lock's in {} packages ({}{})",
        diff.len(),
        shown.join(", "),
        if diff.len() > shown.len() {
            ", …"
        } else {
            ""
        }
    )))
}

/// Whether the run that `repro` made used the image it was told to reuse:
/// the same id and the lock's package set; else what it used instead.
pub fn confirm(own: &OwnImage, used: Option<&LockedEnvironment>, locked: &Lock) -> String {
    let Some(used) = used else {
        return format!(
            "environment {}: the new run recorded no image for it",
            crate::digest::short(&own.environment)
        );
    };
    let wanted = locked.environments.get(&own.environment);
    match wanted {
        Some(w) if used.image.id == own.id => match same_packages(w, &used.packages) {
            Ok(()) => own.describe(),
            Err(why) => format!(
                "environment {}: reused the run's own image {} ({}), but {why}",
                crate::digest::short(&own.environment),
                own.tag,
                short_id(&own.id)
            ),
        },
        _ => format!(
            "environment {}: meant to reuse the run's own image {} ({}), but the new run used {} ({})",
            crate::digest::short(&own.environment),
            own.tag,
            short_id(&own.id),
            used.image.tag,
            short_id(&used.image.id)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::lock::{BaseImage, EnvImage};

    fn env(packages: &[(&str, &str)]) -> LockedEnvironment {
        LockedEnvironment {
            family: "debian".into(),
            base: BaseImage {
                reference: "debian:sid".into(),
                id: "sha256:b".into(),
                origin: BaseOrigin::Pulled,
            },
            image: EnvImage {
                tag: "rocmatrix/env:t".into(),
                id: format!("sha256:{}", "1".repeat(64)),
                reused: false,
                pulled: false,
                registry: None,
            },
            packages: packages
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            sources: Default::default(),
        }
    }

    fn lock(e: &LockedEnvironment) -> Lock {
        Lock {
            lock_version: crate::store::lock::LOCK_VERSION,
            rocmatrix_version: "0".into(),
            matrix_file: "m.yaml".into(),
            matrix_hash: "h".into(),
            environments: [("e".repeat(32), e.clone())].into(),
            cells: BTreeMap::new(),
            builds: BTreeMap::new(),
        }
    }

    fn own(e: &LockedEnvironment) -> OwnImage {
        OwnImage {
            environment: "e".repeat(32),
            tag: e.image.tag.clone(),
            id: e.image.id.clone(),
            packages: e.packages.len(),
        }
    }

    #[test]
    fn a_different_package_set_is_named() {
        let locked = env(&[("bash", "5.2"), ("hipcc", "7.0")]);
        assert_eq!(same_packages(&locked, &locked.packages), Ok(()));
        let other = env(&[("bash", "5.3"), ("hipcc", "7.0"), ("gdb", "16")]).packages;
        assert_eq!(
            same_packages(&locked, &other),
            Err("its package set differs from the lock's in 2 packages (~ bash 5.2 -> 5.3, + gdb 16)".into())
        );
    }

    #[test]
    fn confirms_the_image_the_new_run_used_once() {
        let locked = env(&[("bash", "5.2")]);
        let l = lock(&locked);
        let line = confirm(&own(&locked), Some(&locked), &l);
        assert_eq!(
            line,
            format!(
                "environment eeeeeeeeeeee: reused the run's own image rocmatrix/env:t (sha256:111111111111), still in the engine; the package set is identical (1 packages)"
            )
        );
        let mut rebuilt = locked.clone();
        rebuilt.image.id = format!("sha256:{}", "2".repeat(64));
        rebuilt.image.tag = "rocmatrix/env:u".into();
        assert!(
            confirm(&own(&locked), Some(&rebuilt), &l)
                .ends_with("but the new run used rocmatrix/env:u (sha256:222222222222)"),
            "{}",
            confirm(&own(&locked), Some(&rebuilt), &l)
        );
        let mut changed = locked.clone();
        changed.packages.insert("gdb".into(), "16".into());
        assert!(confirm(&own(&locked), Some(&changed), &l)
            .ends_with("but its package set differs from the lock's in 1 packages (+ gdb 16)"));
    }
}
