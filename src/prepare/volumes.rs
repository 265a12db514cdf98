//! The cache volumes (`cache:`) that cells and their builds mount, made
//! before the first image, labelled as caches.

use std::collections::{BTreeSet, HashMap};

use super::Preparer;
use crate::plan::{Build, Cell};
use crate::store::journal::Event;

impl Preparer {
    /// Creates the cache volumes the cells and their builds mount, labelled as
    /// caches (the engine would make a missing one on use, unlabelled, so that
    /// `images --prune --caches` would not know it); a failure is a warning.
    pub async fn volumes(&self, cells: &[Cell], builds: &[Build]) {
        let mut seen = BTreeSet::new();
        let wanted = cells.iter().flat_map(|c| {
            c.caches
                .iter()
                .chain(c.build_chain(builds).into_iter().flat_map(|b| &b.caches))
        });
        for cache in wanted {
            if !seen.insert(cache.volume.clone()) {
                continue;
            }
            let labels = HashMap::from([
                (crate::engine::LABEL_KIND.to_string(), "cache".to_string()),
                (
                    crate::engine::LABEL_CACHE_KEY.to_string(),
                    cache.key.clone(),
                ),
            ]);
            if let Err(e) = self.engine.ensure_volume(&cache.volume, &labels).await {
                self.report.emit(Event::Warning {
                    message: format!("cache {}: {e}", cache.key),
                });
            }
        }
    }
}
