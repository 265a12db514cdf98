//! Named volumes: the caches (`cache:`) kept across runs.

use std::collections::HashMap;

use bollard::models::VolumeCreateRequest;
use bollard::query_parameters::{ListVolumesOptions, RemoveVolumeOptions};

use super::{Context, Engine, EngineError};

/// A volume found by label.
#[derive(Debug, Clone)]
pub struct VolumeInfo {
    pub name: String,
    pub labels: HashMap<String, String>,
    /// RFC 3339, as the engine writes it, when it says.
    pub created: Option<String>,
}

impl Engine {
    /// Creates volume `name` with `labels` unless it exists (creating an
    /// existing volume gives it back, on Docker and Podman alike).
    pub async fn ensure_volume(
        &self,
        name: &str,
        labels: &HashMap<String, String>,
    ) -> Result<(), EngineError> {
        if self.docker().inspect_volume(name).await.is_ok() {
            return Ok(());
        }
        let request = VolumeCreateRequest {
            name: Some(name.to_string()),
            labels: Some(self.labelled(labels)),
            ..Default::default()
        };
        self.docker()
            .create_volume(request)
            .await
            .doing(|| format!("creating volume {name}"))?;
        Ok(())
    }

    /// Volumes carrying `label` (`key` or `key=value`).
    pub async fn volumes_with_label(&self, label: &str) -> Result<Vec<VolumeInfo>, EngineError> {
        let opts = ListVolumesOptions {
            filters: super::label_filter(label),
        };
        let list = self
            .docker()
            .list_volumes(Some(opts))
            .await
            .doing(|| format!("listing volumes labelled {label}"))?;
        Ok(list
            .volumes
            .unwrap_or_default()
            .into_iter()
            .map(|v| VolumeInfo {
                name: v.name,
                labels: v.labels,
                created: v.created_at,
            })
            .collect())
    }

    /// Removes volume `name`; the engine refuses one a container uses.
    pub async fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        self.docker()
            .remove_volume(name, Some(RemoveVolumeOptions { force: false }))
            .await
            .doing(|| format!("removing volume {name}"))
    }
}
