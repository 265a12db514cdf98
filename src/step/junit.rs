//! A step's JUnit files copied out of its container through the engine's
//! archive API, unpacked by `src/image/untar.rs` (which refuses what
//! leaves the target) and filed under the step's JUnit directory.

use std::path::{Path, PathBuf};

use super::{blocking, CellError};
use crate::engine::{Engine, EngineError};
use crate::image::untar;

/// Largest JUnit archive copied out of a container.
pub(crate) const MAX_JUNIT_ARCHIVE: u64 = 256 * 1024 * 1024;

/// Finds files matching `globs` in the container and copies them out into `dest`.
pub(crate) async fn collect_junit(
    engine: &Engine,
    container: &str,
    globs: &[String],
    dest: &Path,
    cell_dir: &Path,
) -> Result<(Vec<String>, Vec<String>), CellError> {
    let script = format!(
        "shopt -s nullglob globstar; for f in {}; do if [ -e \"$f\" ] || [ -L \"$f\" ]; then printf '%s\\0' \"$f\"; fi; done",
        globs.join(" ")
    );
    let (code, out) = engine
        .exec_capture(container, &["bash", "-c", &script])
        .await?;
    let mut files = Vec::new();
    let mut messages = Vec::new();
    if code != 0 {
        messages.push(format!(
            "listing JUnit files ({}) failed with exit code {code}",
            globs.join(" ")
        ));
        return Ok((files, messages));
    }
    let paths: Vec<&str> = out.split('\0').filter(|p| !p.is_empty()).collect();
    if paths.is_empty() {
        messages.push(format!("no JUnit file matched {}", globs.join(" ")));
        return Ok((files, messages));
    }
    let mkdir = dest.to_path_buf();
    blocking("creating the JUnit directory", move || {
        std::fs::create_dir_all(&mkdir).map_err(|e| CellError::io(&mkdir, e))
    })
    .await??;
    for path in paths {
        let abs = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/work/{path}")
        };
        let archive = dest.join(".download.tar");
        match engine
            .download(container, &abs, &archive, MAX_JUNIT_ARCHIVE)
            .await
        {
            Ok(_) => {}
            Err(EngineError::Failed { message, .. }) => {
                messages.push(format!("{abs}: {message}"));
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        let (dest, cell_dir) = (dest.to_path_buf(), cell_dir.to_path_buf());
        let (got, msgs) = blocking("unpacking JUnit files", move || {
            unpack_junit(&archive, &dest, &cell_dir, &abs)
        })
        .await??;
        files.extend(got);
        messages.extend(msgs);
    }
    Ok((files, messages))
}

/// Unpacks one downloaded archive of `abs` into `dest`, refusing what
/// `untar` refuses; returns the files (relative to `cell_dir`) and messages.
fn unpack_junit(
    archive: &Path,
    dest: &Path,
    cell_dir: &Path,
    abs: &str,
) -> Result<(Vec<String>, Vec<String>), CellError> {
    let mut files = Vec::new();
    let mut messages = Vec::new();
    let staging = dest.join(".staging");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| CellError::io(&staging, e))?;
    let f = std::fs::File::open(archive).map_err(|e| CellError::io(archive, e))?;
    let limits = untar::Limits {
        max_total: MAX_JUNIT_ARCHIVE,
        max_entries: 10_000,
    };
    match untar::unpack(f, &staging, limits, abs) {
        Ok(u) => {
            messages.extend(u.refused);
            files = place_junit(&staging, &u.files, dest, cell_dir, abs)?;
        }
        Err(e) => messages.push(format!("{abs}: unreadable archive: {e}")),
    }
    let _ = std::fs::remove_dir_all(&staging);
    let _ = std::fs::remove_file(archive);
    Ok((files, messages))
}

/// Moves the JUnit files copied from `abs` (at `rels` under `from`: the file
/// itself, or a directory's files under its name) into `dest`, named after
/// `abs`; returns them relative to `cell_dir`.
pub(crate) fn place_junit(
    from: &Path,
    rels: &[PathBuf],
    dest: &Path,
    cell_dir: &Path,
    abs: &str,
) -> Result<Vec<String>, CellError> {
    let mut files = Vec::new();
    let flat = crate::matrix_file::cell_id::sanitize(abs.trim_start_matches('/'));
    for rel in rels {
        let name = if u_single(rel) {
            flat.clone()
        } else {
            format!(
                "{flat}-{}",
                crate::matrix_file::cell_id::sanitize(&rel.to_string_lossy())
            )
        };
        let final_path = dest.join(&name);
        std::fs::rename(from.join(rel), &final_path).map_err(|e| CellError::io(&final_path, e))?;
        if let Ok(r) = final_path.strip_prefix(cell_dir) {
            files.push(r.to_string_lossy().into_owned());
        }
    }
    Ok(files)
}

/// A path with a single component (the file itself, as docker archives a file).
fn u_single(rel: &Path) -> bool {
    rel.components().count() == 1
}
