//! One environment image built at a time per tag, across processes. Two
//! runs on one engine that need the same environment (the same tag: the
//! environment hash over the rendered recipe and the base image id) would
//! otherwise both build it, the later build taking the tag from under the
//! earlier one, whose lock then names an image its cells never ran on.
//! The first takes an exclusive file lock (`flock`) under the cache
//! (`locks/<tag>.lock`); the second waits for it, then finds the tag and
//! reuses that image. The lock is the kernel's: it goes with the process
//! however that ends, so a killed build never blocks the next one.
//!
//! Waiting polls a non-blocking lock, so that a run that is interrupted
//! while waiting stops waiting (a blocking `flock` on a blocking thread
//! would hold the runtime's shutdown).

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a waiting process tries the lock again.
const POLL: Duration = Duration::from_millis(250);

/// A held build lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct BuildLock {
    _file: File,
    pub path: PathBuf,
}

/// Where the lock of `tag` lives under `cache`.
pub fn lock_path(cache: &Path, tag: &str) -> PathBuf {
    let name: String = tag
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    cache.join("locks").join(format!("{name}.lock"))
}

/// Takes the lock of `tag`, waiting while another process holds it;
/// `on_wait` is called once, before the first wait.
pub async fn acquire(
    cache: &Path,
    tag: &str,
    mut on_wait: impl FnMut(&Path),
) -> std::io::Result<BuildLock> {
    let path = lock_path(cache, tag);
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)?;
    let mut waited = false;
    loop {
        // flock(2), not File::try_lock: that is newer than the crate's MSRV.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r == 0 {
            return Ok(BuildLock { _file: file, path });
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::WouldBlock {
            return Err(e);
        }
        if !waited {
            on_wait(&path);
            waited = true;
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_holder_waits_for_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let tag = "rocmatrix/env:0123abcd";
        let first = acquire(dir.path(), tag, |_| panic!("nobody holds it"))
            .await
            .unwrap();
        assert!(first.path.ends_with("locks/rocmatrix_env_0123abcd.lock"));
        let second =
            tokio::time::timeout(Duration::from_millis(700), acquire(dir.path(), tag, |_| {}))
                .await;
        assert!(second.is_err(), "the lock is held");
        // Another tag is another lock.
        acquire(dir.path(), "rocmatrix/env:ffff", |_| panic!("free"))
            .await
            .unwrap();
        drop(first);
        let mut waited = 0;
        let again = acquire(dir.path(), tag, |_| waited += 1).await.unwrap();
        assert_eq!(waited, 0);
        drop(again);
    }
}
