//! Git sources: bare mirrors cached under the user's cache directory and
//! fetched incrementally, a ref resolved to a commit, a patch series applied
//! in memory with git2, and the resulting tree as a tar stream for the cell's
//! container (`/src/<name>`, an upload, so remote engines work too).

pub mod llvm_tree;
mod mirror;
pub mod range;
mod tree_tar;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::plan::SourceRef;
use crate::store::lock::{LockedPatch, LockedSource};

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("source {name}: {message}")]
    Git { name: String, message: String },
    #[error("source {name}: patch {patch} does not apply: {hunk}")]
    Patch {
        name: String,
        patch: String,
        hunk: String,
    },
    #[error("source {name}: {}: {source}", path.display())]
    Io {
        name: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A source ready to go into a container.
#[derive(Debug)]
pub struct Prepared {
    pub locked: LockedSource,
    /// A tar archive whose entries are under `src/<name>/`, to unpack at `/`.
    pub tar: Vec<u8>,
}

/// Prepares sources for a run: each mirror is fetched once per run, each
/// (url, ref, patches) is checked out and patched once.
pub struct Sources {
    cache: PathBuf,
    fetched: Mutex<HashMap<String, Result<PathBuf, String>>>,
    prepared: Mutex<HashMap<String, Arc<Prepared>>>,
}

impl Sources {
    /// Mirrors live under `<cache>/git/`.
    pub fn new(cache: &Path) -> Sources {
        Sources {
            cache: cache.join("git"),
            fetched: Mutex::new(HashMap::new()),
            prepared: Mutex::new(HashMap::new()),
        }
    }

    pub fn prepare(&self, src: &SourceRef) -> Result<Arc<Prepared>, SourceError> {
        let key = format!(
            "{}\0{}\0{}\0{}",
            src.name,
            src.url,
            src.reference,
            src.patches.join("\0")
        );
        if let Some(p) = self
            .prepared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(p.clone());
        }
        let mirror = self.mirror(src)?;
        let prepared = Arc::new(checkout(&mirror, src)?);
        self.prepared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, prepared.clone());
        Ok(prepared)
    }
}

/// The commit `src` names in `repo`: its pinned commit, else its ref (a
/// branch of the mirror's remote too).
fn resolve<'r>(
    repo: &'r git2::Repository,
    src: &SourceRef,
) -> Result<git2::Commit<'r>, SourceError> {
    let not_found = |what: String, e: git2::Error| SourceError::Git {
        name: src.name.clone(),
        message: format!("{what} not found in {}: {}", src.url, e.message()),
    };
    if let Some(c) = &src.commit {
        return git2::Oid::from_str(c)
            .and_then(|oid| repo.find_commit(oid))
            .map_err(|e| not_found(format!("commit {c} (`{}`)", src.reference), e));
    }
    repo.revparse_single(&src.reference)
        .or_else(|_| repo.revparse_single(&format!("origin/{}", src.reference)))
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| not_found(format!("ref `{}`", src.reference), e))
}

impl Sources {
    /// The bare mirror of `src`'s URL, fetched once per run.
    fn mirror(&self, src: &SourceRef) -> Result<PathBuf, SourceError> {
        let mut fetched = self.fetched.lock().unwrap_or_else(|p| p.into_inner());
        fetched
            .entry(src.url.clone())
            .or_insert_with(|| mirror::update(&self.cache, &src.url).map_err(|e| e.to_string()))
            .clone()
            .map_err(|message| SourceError::Git {
                name: src.name.clone(),
                message,
            })
    }
}

fn checkout(mirror: &Path, src: &SourceRef) -> Result<Prepared, SourceError> {
    let git = |e: git2::Error| SourceError::Git {
        name: src.name.clone(),
        message: e.message().to_string(),
    };
    let repo = git2::Repository::open_bare(mirror).map_err(git)?;
    let commit = resolve(&repo, src)?;
    let mut tree = commit.tree().map_err(git)?;
    let mut patches = Vec::with_capacity(src.patches.len());
    for path in &src.patches {
        let shown = Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.clone());
        let bytes = std::fs::read(path).map_err(|e| SourceError::Io {
            name: src.name.clone(),
            path: PathBuf::from(path),
            source: e,
        })?;
        let diff = git2::Diff::from_buffer(&bytes).map_err(|e| SourceError::Patch {
            name: src.name.clone(),
            patch: shown.clone(),
            hunk: format!("not a patch git can read: {}", e.message()),
        })?;
        let last_hunk: std::cell::RefCell<Option<String>> = Default::default();
        let last_file: std::cell::RefCell<Option<String>> = Default::default();
        let mut opts = git2::ApplyOptions::new();
        opts.delta_callback(|d| {
            *last_file.borrow_mut() = d
                .and_then(|d| d.new_file().path().or(d.old_file().path()))
                .map(|p| p.display().to_string());
            true
        });
        opts.hunk_callback(|h| {
            *last_hunk.borrow_mut() =
                h.map(|h| String::from_utf8_lossy(h.header()).trim().to_string());
            true
        });
        let index = repo
            .apply_to_tree(&tree, &diff, Some(&mut opts))
            .map_err(|e| SourceError::Patch {
                name: src.name.clone(),
                patch: shown.clone(),
                hunk: match (last_file.borrow().as_deref(), last_hunk.borrow().as_deref()) {
                    (Some(f), Some(h)) => format!("hunk `{h}` of {f} ({})", e.message()),
                    (Some(f), None) => format!("{f}: {}", e.message()),
                    _ => e.message().to_string(),
                },
            })?;
        let mut index = index;
        let oid = index.write_tree_to(&repo).map_err(git)?;
        tree = repo.find_tree(oid).map_err(git)?;
        patches.push(LockedPatch {
            file: path.clone(),
            sha256: crate::digest::sha256_hex(&bytes),
        });
    }
    let tar = tree_tar::tree_tar(&repo, &tree, &format!("src/{}", src.name)).map_err(|e| {
        SourceError::Git {
            name: src.name.clone(),
            message: format!("packing the checkout: {e}"),
        }
    })?;
    Ok(Prepared {
        locked: LockedSource {
            name: src.name.clone(),
            url: src.url.clone(),
            reference: src.reference.clone(),
            commit: commit.id().to_string(),
            patches,
        },
        tar,
    })
}
