//! Bare mirrors under `<cache>/git/<hash of url>.git`, created on first use
//! and fetched incrementally after.

use std::path::{Path, PathBuf};

pub fn update(cache: &Path, url: &str) -> Result<PathBuf, git2::Error> {
    let dir = path(cache, url);
    let repo = match git2::Repository::open_bare(&dir) {
        Ok(r) => r,
        Err(_) => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| git2::Error::from_str(&format!("{}: {e}", dir.display())))?;
            let r = git2::Repository::init_bare(&dir)?;
            r.remote("origin", url)?;
            r
        }
    };
    let mut remote = repo.find_remote("origin")?;
    remote.fetch(
        &[
            "+refs/heads/*:refs/remotes/origin/*",
            "+refs/tags/*:refs/tags/*",
            "+HEAD:refs/remotes/origin/HEAD",
        ],
        None,
        None,
    )?;
    Ok(dir)
}

/// Where the bare mirror of `url` lives under `cache` (fetched or not).
pub fn path(cache: &Path, url: &str) -> PathBuf {
    cache.join(format!(
        "{}.git",
        &crate::digest::sha256_hex(url.as_bytes())[..24]
    ))
}
