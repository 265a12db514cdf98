//! One environment's image: under `--locked`, pulled at the locked digest
//! or rebuilt with the locked package versions; else reused, pulled from
//! the run's registry or built (and pushed there); then its installed
//! packages, recorded for the lock.

use std::time::Instant;

use super::{PrepareError, Prepared, Preparer};
use crate::image::{build, packages, BaseImage, EnvImage, Family};
use crate::plan::Environment;
use crate::store::journal::Event;
use crate::store::lock::LockedEnvironment;

impl Preparer {
    /// The image of one environment (see the module's doc).
    pub(super) async fn image(
        &self,
        hash: &str,
        env: Option<&Environment>,
        cells: usize,
    ) -> Result<Prepared, PrepareError> {
        let env = env.ok_or(PrepareError::NoEnvironment)?;
        let family = Family::get(&env.family).map_err(|e| PrepareError::Recipe(e.to_string()))?;
        self.report.emit(Event::ImageStarted {
            environment: crate::digest::short(hash).to_string(),
            cells,
        });
        let t0 = Instant::now();
        let base = self.obtain_base(env, &family).await?;
        let pinned = self
            .opts
            .locked
            .as_ref()
            .and_then(|l| l.environments.get(hash));
        // Under --locked, an image the lock knows by registry digest is pulled
        // and must still have that digest; only when the registry cannot give
        // it is the environment rebuilt with the locked package versions.
        let locked_ref = pinned.and_then(|l| l.image.registry.as_ref().map(|r| (l, r)));
        if let Some((locked, reference)) = locked_ref {
            let fetched = self
                .registries
                .pull_locked(&self.engine, hash, reference, &locked.image.tag)
                .await?;
            if let Some(img) = self.fetched(fetched) {
                let how = format!("pulled at the locked digest {reference}");
                let ready = Ready {
                    hash,
                    family: &family,
                    base,
                    t0,
                };
                return self.finish(ready, img, Some((locked, how.as_str()))).await;
            }
        }
        let build_env = match pinned {
            Some(locked) => {
                self.pinned_environment(&family, env, hash, &base, locked)
                    .await?
            }
            None => env.clone(),
        };
        let img = self
            .pull_or_build(hash, env, &family, &build_env, &base)
            .await?;
        let check = pinned.map(|l| (l, "rebuilt from the lock"));
        let ready = Ready {
            hash,
            family: &family,
            base,
            t0,
        };
        self.finish(ready, img, check).await
    }

    /// The image of `build_env`: from the run's registry when the engine
    /// lacks it, else reused or built on the build network through the
    /// package cache (and pushed to the registry).
    async fn pull_or_build(
        &self,
        hash: &str,
        env: &Environment,
        family: &Family,
        build_env: &Environment,
        base: &BaseImage,
    ) -> Result<EnvImage, PrepareError> {
        let short = crate::digest::short(hash);
        let recipe = build::recipe(family, build_env, hash, base)?;
        let registry = self.opts.registry.as_deref();
        if let Some(reg) = registry {
            if self.engine.image(&recipe.tag).await?.is_none() {
                let fetched = self
                    .registries
                    .pull_env(&self.engine, reg, &recipe.tag)
                    .await?;
                if let Some(img) = self.fetched(fetched) {
                    return Ok(img);
                }
            }
        }
        let net = match self.network.get() {
            Some(n) => n.clone(),
            // Nothing to build: decide when a build needs it.
            None if self.engine.image(&recipe.tag).await?.is_some() => None,
            None => self
                .network
                .get_or_init(|| self.choose_network(env, base))
                .await
                .clone(),
        };
        let proxy = match &self.packages {
            Some(c) if self.engine.image(&recipe.tag).await?.is_none() => {
                self.package_proxy(c, base, net.as_deref()).await
            }
            _ => None,
        };
        let log = self.store.dir.join("images").join(format!("{short}.log"));
        let mut img = build::ensure_env_image(
            &self.engine,
            &recipe,
            hash,
            base,
            net.as_deref(),
            proxy.as_deref(),
            &log,
        )
        .await?;
        if let Some(reg) = registry {
            self.share(reg, short, &mut img).await?;
        }
        Ok(img)
    }

    /// Records an image that is ready: its event, its installed packages (and
    /// under `--locked` whether they are the locked ones), its lock entry.
    async fn finish(
        &self,
        ready: Ready<'_>,
        img: EnvImage,
        check: Option<(&LockedEnvironment, &str)>,
    ) -> Result<Prepared, PrepareError> {
        let short = crate::digest::short(ready.hash);
        self.report.emit(Event::ImageFinished {
            environment: short.to_string(),
            tag: img.tag.clone(),
            reused: img.reused,
            pulled: img.pulled,
            secs: ready.t0.elapsed().as_secs_f64(),
        });
        let (installed, note) =
            packages::installed_cached(&self.engine, ready.family, &img.tag, &img.id, &self.run_id)
                .await?;
        if let Some(message) = note {
            self.report.emit(Event::Warning { message });
        }
        // Said once, in the command's result (`run`, `repro`), not also as a
        // warning of the live log.
        let lock_check = check.map(|(locked, how)| {
            super::lock::lock_check(short, how, &locked.packages, &installed.versions)
        });
        let locked = LockedEnvironment {
            family: ready.family.profile.family.clone(),
            base: ready.base,
            image: img.clone(),
            packages: installed.versions,
            sources: installed.sources,
        };
        Ok(Prepared {
            image: img,
            locked,
            lock_check,
        })
    }

    /// Puts a built (or reused) image into the registry unless the engine
    /// already knows its digest there; the digest goes into the lock.
    async fn share(
        &self,
        registry: &str,
        short: &str,
        img: &mut EnvImage,
    ) -> Result<(), PrepareError> {
        if img.reused {
            img.registry = self
                .registries
                .known_digest(&self.engine, registry, &img.tag)
                .await;
            if img.registry.is_some() {
                return Ok(());
            }
        }
        let fetched = self
            .registries
            .push_env(&self.engine, registry, &img.tag)
            .await?;
        if let Some(reference) = self.fetched(fetched) {
            self.report.emit(Event::ImagePushed {
                environment: short.to_string(),
                reference: reference.clone(),
            });
            img.registry = Some(reference);
        }
        Ok(())
    }
}

/// An environment whose image is there: what recording it needs.
struct Ready<'a> {
    hash: &'a str,
    family: &'a Family,
    base: BaseImage,
    t0: Instant,
}
