//! Base images: each one obtained once per run (present, pulled,
//! bootstrapped or imported, or from the run's registry) and reused for
//! every environment on it.

use std::sync::Arc;

use super::{PrepareError, Preparer};
use crate::image::aptcache::AptCache;
use crate::image::base::BaseShare;
use crate::image::{ensure_base, BaseImage, BaseOrigin, Family, ImageError};
use crate::plan::Environment;
use crate::store::journal::Event;

impl Preparer {
    /// The environment's base image, obtained once per run and reused for
    /// every environment on it; an environment whose base another one is
    /// obtaining waits for it.
    pub(super) async fn obtain_base(
        &self,
        env: &Environment,
        family: &Family,
    ) -> Result<BaseImage, PrepareError> {
        let once = self
            .bases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(env.base.clone())
            .or_default()
            .clone();
        once.get_or_init(|| self.provision_base(env, family))
            .await
            .clone()
            .map_err(PrepareError::Base)
    }

    /// Obtains the base of `env` and says how (its events).
    async fn provision_base(
        &self,
        env: &Environment,
        family: &Family,
    ) -> Result<BaseImage, Arc<ImageError>> {
        let images = self.store.dir.join("images");
        let log = images.join(format!(
            "base-{}.log",
            crate::matrix_file::cell_id::sanitize(&env.base)
        ));
        let _ = tokio::fs::create_dir_all(&images).await;
        let mut share = self.opts.registry.as_deref().map(|registry| BaseShare {
            registries: &self.registries,
            registry,
            unavailable: Vec::new(),
            pushed: None,
        });
        let b = ensure_base(
            &self.engine,
            env,
            &family.profile,
            &self.opts.work_dir,
            &log,
            share.as_mut(),
            self.packages
                .as_ref()
                .map(AptCache::loopback_proxy)
                .as_deref(),
        )
        .await
        .map_err(Arc::new);
        if let Some(share) = share {
            for (registry, reason) in share.unavailable {
                self.report
                    .emit(Event::RegistryUnavailable { registry, reason });
            }
            if let Some(reference) = share.pushed {
                self.report.emit(Event::ImagePushed {
                    environment: env.base.clone(),
                    reference,
                });
            }
        }
        if let Ok(b) = &b {
            self.report.emit(Event::BaseImage {
                reference: b.reference.clone(),
                outcome: origin_word(&b.origin).into(),
                message: b.origin.describe(&b.reference),
            });
        }
        b
    }
}

fn origin_word(o: &BaseOrigin) -> &'static str {
    match o {
        BaseOrigin::Present { .. } => "present",
        BaseOrigin::Pulled => "pulled",
        BaseOrigin::Registry { .. } => "registry",
        BaseOrigin::Bootstrapped(_) => "bootstrapped",
        BaseOrigin::Imported { .. } => "imported",
    }
}
