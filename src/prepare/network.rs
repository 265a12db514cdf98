//! What builds download through: the run's package cache (an HTTP proxy in
//! the process, `src/image/aptcache.rs`) and the build network, as
//! configured or probed once (`auto`).

use super::{Preparer, Report};
use crate::image::aptcache::AptCache;
use crate::image::mirror;
use crate::image::network::{bridge_reaches, mirror_endpoint, NetworkChoice};
use crate::image::BaseImage;
use crate::plan::Environment;
use crate::store::journal::Event;
use crate::store::RunStore;

/// The package download cache of this run, in the cache directory, logged to
/// `images/package-cache.log`; when it cannot start, one warning and none.
pub(super) async fn start_package_cache(store: &RunStore, report: &dyn Report) -> Option<AptCache> {
    if crate::image::aptcache::switched_off() {
        return None;
    }
    let images = store.dir.join("images");
    let _ = tokio::fs::create_dir_all(&images).await;
    let dir = crate::image::aptcache::dir();
    match AptCache::start(dir.clone(), Some(&images.join("package-cache.log"))).await {
        Ok(c) => Some(c),
        Err(e) => {
            report.emit(Event::Warning {
                message: format!(
                    "package cache: cannot start over {} ({e}); downloading everything",
                    dir.display()
                ),
            });
            None
        }
    }
}

impl Preparer {
    /// The proxy URL for builds on `net`, or none (one warning per network).
    pub(super) async fn package_proxy(
        &self,
        c: &AptCache,
        base: &BaseImage,
        net: Option<&str>,
    ) -> Option<String> {
        match c.proxy_for(&self.engine, &base.reference, net).await {
            Ok(p) => p,
            Err(why) => {
                self.report.emit(Event::Warning {
                    message: format!(
                        "package cache: builds on the {} network cannot use it ({why}); they download everything",
                        net.unwrap_or("bridge")
                    ),
                });
                None
            }
        }
    }

    /// The network mode for builds: as configured, or probed once (`auto`).
    pub(super) async fn choose_network(
        &self,
        env: &Environment,
        base: &BaseImage,
    ) -> Option<String> {
        let choice = match (&self.opts.network, env.network.as_deref()) {
            (NetworkChoice::Auto, Some(n)) => NetworkChoice::parse(n),
            (c, _) => c.clone(),
        };
        match choice {
            NetworkChoice::Bridge => None,
            NetworkChoice::Host => Some("host".into()),
            NetworkChoice::Named(n) => Some(n),
            NetworkChoice::Auto => self.probe_network(env, base).await,
        }
    }

    /// `auto`: the bridge when a container on it reaches the mirror, else
    /// host networking; said once as a warning.
    async fn probe_network(&self, env: &Environment, base: &BaseImage) -> Option<String> {
        let mirror = env
            .mirror
            .clone()
            .unwrap_or_else(|| mirror::host_mirror(std::path::Path::new("/etc/apt")));
        let (host, port) = mirror_endpoint(&mirror)?;
        let (net, message) = match bridge_reaches(&self.engine, &base.reference, &host, port).await
        {
            Ok(true) => (None, format!("network: containers on the default bridge reach {host}:{port}; building on the bridge")),
            Ok(false) => (Some("host".into()), format!("network: containers on the default bridge cannot reach {host}:{port}; building with host networking")),
            Err(e) => (Some("host".into()), format!("network: probing the bridge failed ({e}); building with host networking")),
        };
        self.report.emit(Event::Warning { message });
        net
    }
}
