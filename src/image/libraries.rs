//! Copies the shared libraries and code objects of an image out to a local
//! directory, keeping their paths, through the engine's archive API (so a
//! remote engine works too). `rocmatrix coverage --image` and the run's gfx
//! coverage scan read what this copies.

use std::path::{Path, PathBuf};

use super::ImageError;
use crate::engine::Engine;
use crate::image::untar::{unpack_filtered, Limits};

/// Where distributions put libraries carrying device code.
pub const DEFAULT_DIRS: &[&str] = &["/usr/lib", "/usr/local/lib", "/opt/rocm"];

/// Whether a file name is one the coverage scan reads: shared libraries and
/// bare code objects (`.hsaco`, `.co`, as rocBLAS/Tensile ship them).
pub fn is_library(path: &Path) -> bool {
    path.file_name().is_some_and(|n| {
        let n = n.to_string_lossy();
        n.ends_with(".so") || n.contains(".so.") || n.ends_with(".hsaco") || n.ends_with(".co")
    })
}

/// A directory the libraries are copied into, emptied when made and removed
/// when dropped.
pub struct ScratchDir(pub PathBuf);

impl ScratchDir {
    pub fn create(dir: PathBuf) -> std::io::Result<ScratchDir> {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(ScratchDir(dir))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Copies every library under `dirs` of `image` into `root` (a directory
/// that exists), so `/usr/lib/x/libfoo.so` lands at `root/usr/lib/x/libfoo.so`.
/// Directories the image does not have are skipped; returns those it had.
pub async fn copy_libraries(
    engine: &Engine,
    image: &str,
    dirs: &[PathBuf],
    root: &Path,
    container_name: &str,
) -> Result<Vec<PathBuf>, ImageError> {
    let id = engine.create_stopped(image, container_name).await?;
    let result = copy_from(engine, &id, image, dirs, root).await;
    let _ = engine.remove_container(&id).await;
    result
}

async fn copy_from(
    engine: &Engine,
    container: &str,
    image: &str,
    dirs: &[PathBuf],
    root: &Path,
) -> Result<Vec<PathBuf>, ImageError> {
    let mut found = Vec::new();
    let archive = root.join(".archive.tar");
    for dir in dirs {
        match engine
            .download(container, &dir.display().to_string(), &archive, 64 << 30)
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                let _ = tokio::fs::remove_file(&archive).await;
                return Err(e.into());
            }
        }
        // The archive's entries are named after the directory's last component.
        let dest = root
            .join(dir.strip_prefix("/").unwrap_or(dir))
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| root.to_path_buf());
        let (archive_path, dest_path, origin) = (archive.clone(), dest.clone(), image.to_string());
        let unpacked = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dest_path)
                .and_then(|_| std::fs::File::open(&archive_path))
                .and_then(|f| {
                    unpack_filtered(
                        f,
                        &dest_path,
                        Limits {
                            max_total: 64 << 30,
                            max_entries: 10_000_000,
                        },
                        &origin,
                        Some(&is_library),
                    )
                })
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
        let _ = tokio::fs::remove_file(&archive).await;
        unpacked.map_err(|e| ImageError::io(&dest, e))?;
        found.push(dir.clone());
    }
    Ok(found)
}
