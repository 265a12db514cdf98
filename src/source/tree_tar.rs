//! A git tree as a tar archive under `<prefix>/`, straight from the object
//! database: regular files, executables and symlinks; submodules are skipped.
//! Written to any sink (a whole tree in memory, or an LLVM tree's chosen
//! paths streamed), one blob in memory at a time.

/// Why a tree could not be packed: the entry (when one is to blame) and
/// what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("{}{message}", path.as_ref().map(|p| format!("{p}: ")).unwrap_or_default())]
pub struct PackError {
    pub path: Option<String>,
    pub message: String,
}

impl From<std::io::Error> for PackError {
    fn from(e: std::io::Error) -> Self {
        PackError {
            path: None,
            message: e.to_string(),
        }
    }
}

/// Whether a path of the tree goes into the archive.
pub type Keep<'a> = &'a dyn Fn(&str) -> bool;

pub fn tree_tar(
    repo: &git2::Repository,
    tree: &git2::Tree,
    prefix: &str,
) -> Result<Vec<u8>, PackError> {
    write_tree(repo, tree, prefix, (&|_| true, &[]), Vec::new())
}

/// The entries of `tree` whose path (`dir/name`, without the prefix) `keep`
/// says yes to, written to `out` (a directory said no to is skipped
/// whole), then the `extra` files (paths under the prefix, contents); the
/// tar's end is written and `out` returned.
pub fn write_tree<W: std::io::Write>(
    repo: &git2::Repository,
    tree: &git2::Tree,
    prefix: &str,
    (keep, extra): (Keep, &[(String, Vec<u8>)]),
    out: W,
) -> Result<W, PackError> {
    let mut b = tar::Builder::new(out);
    let mut failure: Option<PackError> = None;
    // Every directory of the prefix, so the archive unpacks anywhere.
    let mut so_far = String::new();
    for part in prefix.split('/') {
        so_far.push_str(part);
        so_far.push('/');
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_mode(0o755);
        dir.set_size(0);
        dir.set_cksum();
        b.append_data(&mut dir, &so_far, std::io::empty())?;
    }
    tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
        let name = match entry.name() {
            Ok(n) => n,
            Err(_) => return git2::TreeWalkResult::Skip,
        };
        if !keep(&format!("{root}{name}")) {
            return git2::TreeWalkResult::Skip;
        }
        let path = format!("{prefix}/{root}{name}");
        let result = match entry.kind() {
            Some(git2::ObjectType::Tree) => {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                h.set_cksum();
                b.append_data(&mut h, format!("{path}/"), std::io::empty())
            }
            Some(git2::ObjectType::Blob) => match repo.find_blob(entry.id()) {
                Ok(blob) => {
                    let mut h = tar::Header::new_gnu();
                    if entry.filemode() == 0o120000 {
                        h.set_entry_type(tar::EntryType::Symlink);
                        h.set_size(0);
                        h.set_mode(0o777);
                        let target = String::from_utf8_lossy(blob.content()).into_owned();
                        b.append_link(&mut h, &path, target)
                    } else {
                        h.set_size(blob.content().len() as u64);
                        h.set_mode(if entry.filemode() == 0o100755 {
                            0o755
                        } else {
                            0o644
                        });
                        h.set_cksum();
                        b.append_data(&mut h, &path, blob.content())
                    }
                }
                Err(e) => Err(std::io::Error::other(e.message().to_string())),
            },
            // Submodule commits: nothing to pack here.
            _ => Ok(()),
        };
        match result {
            Ok(()) => git2::TreeWalkResult::Ok,
            Err(e) => {
                failure = Some(PackError {
                    path: Some(path),
                    message: e.to_string(),
                });
                git2::TreeWalkResult::Abort
            }
        }
    })
    .map_err(|e| PackError {
        path: None,
        message: e.message().to_string(),
    })?;
    if let Some(f) = failure {
        return Err(f);
    }
    for (path, bytes) in extra {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, format!("{prefix}/{path}"), bytes.as_slice())?;
    }
    Ok(b.into_inner()?)
}
