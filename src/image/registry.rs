//! Sharing environment images through a registry (`--registry`,
//! `registry:`): an environment image `rocmatrix/env:<hash>` lives there as
//! `<registry>/env:<hash>`, a build snapshot `rocmatrix/build:<hash>` as
//! `<registry>/build:<hash>`. Before a build the image is pulled; after one
//! it is pushed. A registry that cannot be used (unreachable, denied, bad
//! credentials) is reported once and left alone for the rest of the run:
//! rocmatrix builds locally instead. Only a digest that differs from the
//! lock's under `--locked` is an error.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use super::build::EnvImage;
use super::ImageError;
use crate::engine::{Engine, TransferError};

/// How long an environment image (gigabytes) may take to pull or push.
const TRANSFER_LIMIT: Duration = Duration::from_secs(30 * 60);

/// What asking a registry gave.
#[derive(Debug)]
pub enum Fetched<T> {
    Done(T),
    /// The registry works but has no such tag.
    Missing,
    /// The registry failed just now; say so once (registry, reason).
    Unavailable {
        registry: String,
        reason: String,
    },
    /// The registry failed earlier in this run and was not asked again.
    Skipped,
}

impl<T> Fetched<T> {
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Fetched<U> {
        match self {
            Fetched::Done(t) => Fetched::Done(f(t)),
            Fetched::Missing => Fetched::Missing,
            Fetched::Unavailable { registry, reason } => Fetched::Unavailable { registry, reason },
            Fetched::Skipped => Fetched::Skipped,
        }
    }
}

/// The registries of one run and which of them have failed.
#[derive(Debug, Default)]
pub struct Registries {
    down: Mutex<HashSet<String>>,
}

/// `<registry>/env:<tag>` for the local environment image tag
/// `rocmatrix/env:<tag>` (or a snapshot's tag).
pub fn env_reference(registry: &str, local_tag: &str) -> String {
    let (_, tag) = crate::engine::split_reference(local_tag);
    format!("{registry}/env:{tag}")
}

/// `<registry>/build:<hash>` for the build snapshot `rocmatrix/build:<hash>`
/// (`<registry>/llvm-debug:<hash>` for a toolchain's `rocmatrix/llvm-debug:…`).
pub fn snapshot_reference(registry: &str, snapshot: &str) -> String {
    let (_, tag) = crate::engine::split_reference(snapshot);
    format!("{registry}/{}:{tag}", snapshot_repo(snapshot))
}

/// `remote` (`<registry>/<repo>:<tag>`) pinned by `digest`: `<registry>/<repo>@sha256:…`.
fn by_digest(remote: &str, digest: &str) -> String {
    let (repo, _) = crate::engine::split_reference(remote);
    format!("{repo}@{digest}")
}

/// `build` or `llvm-debug`: the snapshot's repository under `rocmatrix/`.
fn snapshot_repo(snapshot: &str) -> &str {
    let (repo, _) = crate::engine::split_reference(snapshot);
    repo.rsplit('/')
        .next()
        .filter(|r| !r.is_empty())
        .unwrap_or("build")
}

/// `<registry>/base:<family>-<suite>-<hash>` for a base bootstrapped from
/// `suite` of `mirror`: the same inputs give the same name on every machine.
pub fn base_reference(registry: &str, family: &str, suite: &str, mirror: &str) -> String {
    let hash = crate::digest::sha256_hex(format!("{family}\0{suite}\0{mirror}").as_bytes());
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!(
        "{registry}/base:{}-{}-{}",
        clean(family),
        clean(suite),
        &hash[..12]
    )
}

/// The registry and digest of a lock's `<registry>/env@sha256:…`.
pub fn split_locked(locked: &str) -> Option<(&str, &str)> {
    let (repo, digest) = locked.split_once('@')?;
    Some((repo.strip_suffix("/env")?, digest))
}

impl Registries {
    fn is_down(&self, registry: &str) -> bool {
        self.down
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(registry)
    }

    fn fail<T>(&self, registry: &str, reason: String) -> Fetched<T> {
        self.down
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(registry.to_string());
        Fetched::Unavailable {
            registry: registry.to_string(),
            reason,
        }
    }

    /// Pulls `<registry>/env:<tag>` and tags it `local_tag`; the image
    /// records its registry digest.
    pub async fn pull_env(
        &self,
        engine: &Engine,
        registry: &str,
        local_tag: &str,
    ) -> Result<Fetched<EnvImage>, ImageError> {
        if self.is_down(registry) {
            return Ok(Fetched::Skipped);
        }
        let remote = env_reference(registry, local_tag);
        let digest = match engine.pull_digest(&remote, TRANSFER_LIMIT).await {
            Ok(d) => d,
            Err(TransferError::Missing { .. }) => return Ok(Fetched::Missing),
            Err(e) => return Ok(self.fail(registry, e.to_string())),
        };
        Ok(Fetched::Done(
            tag_pulled(engine, registry, &remote, local_tag, &digest).await?,
        ))
    }

    /// Under `--locked`: pulls the lock's `<registry>/env:<tag>` and accepts
    /// it only with the lock's digest; any other digest is an error (the tag
    /// was overwritten since the lock was written).
    pub async fn pull_locked(
        &self,
        engine: &Engine,
        environment: &str,
        locked: &str,
        local_tag: &str,
    ) -> Result<Fetched<EnvImage>, ImageError> {
        let Some((registry, expected)) = split_locked(locked) else {
            return Ok(Fetched::Missing);
        };
        if self.is_down(registry) {
            return Ok(Fetched::Skipped);
        }
        let remote = env_reference(registry, local_tag);
        let found = match engine.pull_digest(&remote, TRANSFER_LIMIT).await {
            Ok(d) => d,
            Err(TransferError::Missing { .. }) => return Ok(Fetched::Missing),
            Err(e) => return Ok(self.fail(registry, e.to_string())),
        };
        if found != expected {
            return Err(ImageError::DigestMismatch {
                env: crate::digest::short(environment).to_string(),
                tag: remote,
                expected: expected.to_string(),
                found,
            });
        }
        Ok(Fetched::Done(
            tag_pulled(engine, registry, &remote, local_tag, &found).await?,
        ))
    }

    /// Pushes the local image `local_tag` as `<registry>/env:<tag>`;
    /// returns `<registry>/env@sha256:…`.
    pub async fn push_env(
        &self,
        engine: &Engine,
        registry: &str,
        local_tag: &str,
    ) -> Result<Fetched<String>, ImageError> {
        let remote = env_reference(registry, local_tag);
        self.push_as(engine, registry, local_tag, &remote).await
    }

    /// Pushes the local image `local` as `remote` (`<registry>/<repo>:<tag>`);
    /// returns `<registry>/<repo>@sha256:…`.
    pub async fn push_as(
        &self,
        engine: &Engine,
        registry: &str,
        local: &str,
        remote: &str,
    ) -> Result<Fetched<String>, ImageError> {
        if self.is_down(registry) {
            return Ok(Fetched::Skipped);
        }
        engine.tag(local, remote).await?;
        match engine.push_digest(remote, TRANSFER_LIMIT).await {
            Ok(d) => Ok(Fetched::Done(by_digest(remote, &d))),
            Err(e) => Ok(self.fail(registry, e.to_string())),
        }
    }

    /// Pulls `remote` (in `registry`) and tags it `local`; returns the digest.
    pub async fn pull_as(
        &self,
        engine: &Engine,
        registry: &str,
        remote: &str,
        local: &str,
    ) -> Result<Fetched<String>, ImageError> {
        if self.is_down(registry) {
            return Ok(Fetched::Skipped);
        }
        match engine.pull_digest(remote, TRANSFER_LIMIT).await {
            Ok(d) => {
                engine.tag(remote, local).await?;
                Ok(Fetched::Done(d))
            }
            Err(TransferError::Missing { .. }) => Ok(Fetched::Missing),
            Err(e) => Ok(self.fail(registry, e.to_string())),
        }
    }

    /// Pulls the build snapshot `snapshot` from the registry, tagged as
    /// itself; returns `<registry>/build@sha256:…`.
    pub async fn pull_snapshot(
        &self,
        engine: &Engine,
        registry: &str,
        snapshot: &str,
    ) -> Result<Fetched<String>, ImageError> {
        let remote = snapshot_reference(registry, snapshot);
        let got = self.pull_as(engine, registry, &remote, snapshot).await?;
        Ok(got.map(|digest| by_digest(&remote, &digest)))
    }

    /// Pushes the build snapshot `snapshot` unless the engine already knows
    /// it there; returns `<registry>/build@sha256:…` and whether it pushed.
    pub async fn share_snapshot(
        &self,
        engine: &Engine,
        registry: &str,
        snapshot: &str,
    ) -> Result<Fetched<(String, bool)>, ImageError> {
        let remote = snapshot_reference(registry, snapshot);
        if let Ok(Some(d)) = engine.repo_digest(&remote).await {
            return Ok(Fetched::Done((by_digest(&remote, &d), false)));
        }
        let pushed = self.push_as(engine, registry, snapshot, &remote).await?;
        Ok(pushed.map(|r| (r, true)))
    }

    /// The digest the engine already knows for a local image in this
    /// registry (it was pulled from or pushed to it before).
    pub async fn known_digest(
        &self,
        engine: &Engine,
        registry: &str,
        local_tag: &str,
    ) -> Option<String> {
        let remote = env_reference(registry, local_tag);
        match engine.repo_digest(&remote).await {
            Ok(Some(d)) => Some(by_digest(&remote, &d)),
            _ => None,
        }
    }
}

async fn tag_pulled(
    engine: &Engine,
    registry: &str,
    remote: &str,
    local_tag: &str,
    digest: &str,
) -> Result<EnvImage, ImageError> {
    engine.tag(remote, local_tag).await?;
    let id = engine
        .image(local_tag)
        .await?
        .map(|i| i.id)
        .ok_or_else(|| {
            crate::engine::EngineError::failed(
                format!("pulling {remote}"),
                "the engine reports no such image afterwards",
            )
        })?;
    Ok(EnvImage {
        tag: local_tag.to_string(),
        id,
        reused: false,
        pulled: true,
        registry: Some(format!("{registry}/env@{digest}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_env_images_in_the_registry() {
        assert_eq!(
            env_reference("127.0.0.1:5000/rm", "rocmatrix/env:abc"),
            "127.0.0.1:5000/rm/env:abc"
        );
        assert_eq!(
            split_locked("ghcr.io/o/r/env@sha256:00"),
            Some(("ghcr.io/o/r", "sha256:00"))
        );
        assert_eq!(split_locked("ghcr.io/o/r/base@sha256:00"), None);
        assert_eq!(
            snapshot_reference("127.0.0.1:5000/rm", "rocmatrix/build:abc"),
            "127.0.0.1:5000/rm/build:abc"
        );
        assert_eq!(
            snapshot_reference("127.0.0.1:5000/rm", "rocmatrix/llvm-debug:abc"),
            "127.0.0.1:5000/rm/llvm-debug:abc"
        );
        assert_eq!(
            by_digest("127.0.0.1:5000/rm/llvm-debug:abc", "sha256:00"),
            "127.0.0.1:5000/rm/llvm-debug@sha256:00"
        );
    }
}
