//! Where rocmatrix keeps things outside a run store.

use std::path::PathBuf;

/// The user's cache directory for rocmatrix (`$XDG_CACHE_HOME/rocmatrix`,
/// else `~/.cache/rocmatrix`): bootstrap scratch space, git mirrors, image use,
/// package lists per image id.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("ROCMATRIX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .unwrap_or_else(std::env::temp_dir)
                .join("rocmatrix")
        })
}

/// Where rocmatrix keeps what it knows of this machine's runs (the run
/// roots and the images running runs hold, `crate::store::roots`):
/// `$ROCMATRIX_STATE`, else the cache directory. The tests give each
/// invocation its own, so that one test's runs never protect another's
/// images from its prune.
pub fn state_dir() -> PathBuf {
    std::env::var_os("ROCMATRIX_STATE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(cache_dir)
}
