//! `cache:` rendered: each entry's key per cell (and per build), and the
//! named volume that holds it. Equal keys share one volume; caches feed no
//! hash, since they change how fast a step runs, not what it tests.

use serde::Serialize;

use super::render::Subject;
use super::Renderer;
use crate::matrix_file::{Spec, SpecError};

/// Prefix of every cache volume's name.
pub const VOLUME_PREFIX: &str = "rocmatrix-cache-";

/// A cache directory of one cell or build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CacheMount {
    /// Where it is mounted in the container.
    pub path: String,
    /// The rendered key.
    pub key: String,
    /// The named volume: [`VOLUME_PREFIX`], the key made name-safe, and a
    /// hash of the key (two keys that read alike stay apart).
    pub volume: String,
}

impl CacheMount {
    /// The bind as the engine takes it: `volume:path`.
    pub fn bind(&self) -> String {
        format!("{}:{}", self.volume, self.path)
    }
}

/// The volume name of a cache key.
pub fn volume_name(key: &str) -> String {
    let mut safe: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    safe.truncate(64);
    let hash = crate::digest::sha256_hex(key.as_bytes());
    format!("{VOLUME_PREFIX}{safe}-{}", &hash[..8])
}

/// The caches of one cell or build, keys rendered with `ctx`.
pub fn render(
    spec: &Spec,
    r: &Renderer,
    ctx: &minijinja::Value,
    subject: Subject<'_>,
) -> Result<Vec<CacheMount>, SpecError> {
    let mut out = Vec::with_capacity(spec.caches.len());
    for c in &spec.caches {
        let key = r.render_for(&c.key, ctx, subject)?.trim().to_string();
        if key.is_empty() {
            return Err(spec.error_at(
                c.key.pos,
                format!(
                    "{}: the key renders empty ({})",
                    c.key.field,
                    subject.describe()
                ),
            ));
        }
        out.push(CacheMount {
            path: c.path.clone(),
            volume: volume_name(&key),
            key,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_names_are_safe_and_keep_alike_keys_apart() {
        let a = volume_name("ccache-sid");
        assert!(a.starts_with("rocmatrix-cache-ccache-sid-"), "{a}");
        let (b, c) = (volume_name("x/y"), volume_name("x_y"));
        assert!(b.starts_with("rocmatrix-cache-x_y-"), "{b}");
        assert_ne!(b, c);
        let long = volume_name(&"k".repeat(500));
        assert!(long.len() < 100, "{long}");
    }
}
