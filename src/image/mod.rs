//! Images: distribution families and their templates, base images
//! (present, pulled, bootstrapped or imported), environment image builds,
//! and the network the builds use.

pub mod aptcache;
pub mod base;
pub mod build;
pub mod build_lock;
pub mod family;
pub mod inventory;
pub mod libraries;
pub mod mirror;
pub mod network;
pub mod packages;
pub mod registry;
pub mod untar;

use std::path::{Path, PathBuf};

use crate::engine::EngineError;

pub use base::{ensure_base, BaseImage, BaseOrigin};
pub use build::{ensure_env_image, EnvImage};
pub use family::Family;

/// What [`ImageError::Pins`] says of the versions a lock pins that the
/// archive no longer serves (a triage tells that error from others by it).
pub const PINS_GONE: &str = "no longer obtainable";

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("base image {reference} is not available: {why}")]
    NoBase { reference: String, why: String },
    #[error("environment {env}: {message}")]
    Recipe { env: String, message: String },
    #[error("{} pinned versions are {PINS_GONE} (environment {env}):\n  {}", missing.len(), missing.join("\n  "))]
    Pins { env: String, missing: Vec<String> },
    #[error("environment {env}: the registry's {tag} has digest {found}, but the lock says {expected}; the tag was overwritten since the lock was written")]
    DigestMismatch {
        env: String,
        tag: String,
        expected: String,
        found: String,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ImageError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        ImageError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn missing_pins_say_they_are_no_longer_obtainable() {
        let e = super::ImageError::Pins {
            env: "e1".into(),
            missing: vec!["a=1".into(), "b=2".into()],
        };
        assert_eq!(
            e.to_string(),
            "2 pinned versions are no longer obtainable (environment e1):\n  a=1\n  b=2"
        );
    }
}
