//! Rebuilding an environment from a lock (`--locked`): every package pinned
//! at its locked version once a container of the base says each pin is
//! still obtainable, and whether the rebuilt package set is the locked one.

use std::collections::BTreeMap;

use super::{PrepareError, Preparer};
use crate::image::{packages, BaseImage, Family, ImageError};
use crate::plan::Environment;
use crate::store::lock::LockedEnvironment;

impl Preparer {
    /// `env` with every package of the lock pinned at its locked version, after
    /// checking in a container of the base image that each pin is still
    /// obtainable; the error lists every one that is not.
    pub(super) async fn pinned_environment(
        &self,
        family: &Family,
        env: &Environment,
        hash: &str,
        base: &BaseImage,
        locked: &LockedEnvironment,
    ) -> Result<Environment, PrepareError> {
        let pins = super::pins(&locked.packages);
        let script = family
            .missing_pins_script(env, &pins)
            .map_err(|e| PrepareError::Recipe(e.to_string()))?;
        let spec = crate::engine::ContainerSpec {
            name: format!(
                "rocmatrix-{}-pins-{}",
                self.run_id,
                crate::digest::short(hash)
            ),
            image: base.reference.clone(),
            labels: crate::engine::labels::owner_labels(&self.run_id, "pins"),
            ..Default::default()
        };
        let id = self.engine.start_container(&spec).await?;
        let checked = self.engine.exec_capture(&id, &["sh", "-c", &script]).await;
        let _ = self.engine.remove_container(&id).await;
        let (_, missing) = checked?;
        let missing: Vec<&str> = missing
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if !missing.is_empty() {
            return Err(ImageError::Pins {
                env: crate::digest::short(hash).to_string(),
                missing: missing.iter().map(|m| m.to_string()).collect(),
            }
            .into());
        }
        let mut pinned = env.clone();
        pinned.packages = pins
            .iter()
            .map(|(n, v)| family.pin(n, v))
            .collect::<Result<_, _>>()
            .map_err(|e| PrepareError::Recipe(e.to_string()))?;
        Ok(pinned)
    }
}

/// One line saying whether an environment rebuilt from a lock has the
/// locked package set.
pub(super) fn lock_check(
    short: &str,
    how: &str,
    locked: &BTreeMap<String, String>,
    installed: &BTreeMap<String, String>,
) -> String {
    let diff = packages::diff(locked, installed);
    if diff.is_empty() {
        format!(
            "environment {short}: {how}; the package set is identical ({} packages)",
            installed.len()
        )
    } else {
        format!(
            "environment {short}: {how}; the package set differs in {} packages:\n  {}",
            diff.len(),
            diff.join("\n  ")
        )
    }
}
