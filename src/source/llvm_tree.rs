//! A contributor's LLVM tree (`environment.llvm: {debug: source, git, ref}`)
//! read on the host: its ref resolved to a commit (and checked to be an LLVM
//! tree), and what an LLVM-only build needs of it — `llvm/` without its
//! tests, `cmake/`, `third-party/`, `clang/` when a tool asks for it —
//! streamed as a tar to `/usr/src/llvm-source`, a blob at a time (an LLVM
//! checkout is gigabytes; no whole archive is held in memory).
//!
//! A local path or `file://` URL is read where it is (an LLVM clone is too
//! big to mirror); any other URL through the cache's bare mirror, as
//! `sources:` entries are.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{SourceError, Sources};
use crate::plan::toolchain::TREE;
use crate::plan::SourceRef;
use crate::store::lock::{Lock, LockedSource};

/// Where the tree is unpacked (under `/`), as the Debian family's
/// `llvm_source` script unpacks the distribution's source.
pub const DIR: &str = "usr/src/llvm-source";

/// The bytes of a tar stream, in chunks; an error ends it.
pub type Chunk = Result<bytes::Bytes, std::io::Error>;

/// Whether the build needs the tree's `path` (`dir/name`).
pub fn wanted(path: &str, clang: bool) -> bool {
    let under = |dir: &str| path == dir || path.starts_with(&format!("{dir}/"));
    match path.split('/').next().unwrap_or_default() {
        "llvm" => !under("llvm/test") && !under("llvm/unittests"),
        "cmake" | "third-party" => true,
        "clang" => clang,
        _ => false,
    }
}

/// `url` as a local directory, when it is one (a path or `file://`).
fn local(url: &str) -> Option<PathBuf> {
    let path = url.strip_prefix("file://").unwrap_or(url);
    Path::new(path).is_absolute().then(|| PathBuf::from(path))
}

impl Sources {
    fn repository(&self, src: &SourceRef) -> Result<git2::Repository, SourceError> {
        let opened = match local(&src.url) {
            Some(dir) => git2::Repository::open(dir),
            None => git2::Repository::open_bare(self.mirror(src)?),
        };
        opened.map_err(|e| SourceError::Git {
            name: src.name.clone(),
            message: format!("`{}` is not a git repository: {}", src.url, e.message()),
        })
    }

    /// The tree's commit (its pinned one, else its ref resolved), refused
    /// when it has no `llvm/CMakeLists.txt`.
    pub fn resolve_tree(&self, src: &SourceRef) -> Result<LockedSource, SourceError> {
        let repo = self.repository(src)?;
        let commit = super::resolve(&repo, src)?;
        let tree = commit.tree().map_err(|e| git(src, e))?;
        if tree.get_path(Path::new("llvm/CMakeLists.txt")).is_err() {
            return Err(SourceError::Git {
                name: src.name.clone(),
                message: format!(
                    "commit {} (`{}`) of {} has no llvm/CMakeLists.txt: not an LLVM tree",
                    commit.id(),
                    src.reference,
                    src.url
                ),
            });
        }
        Ok(LockedSource {
            name: src.name.clone(),
            url: src.url.clone(),
            reference: src.reference.clone(),
            commit: commit.id().to_string(),
            patches: Vec::new(),
        })
    }

    /// Writes the wanted paths of the tree at `locked`'s commit to `out` as
    /// a tar under [`DIR`], with `.rocmatrix/source` (URL, ref, commit and
    /// LLVM major version) as the toolchain build's steps read it.
    pub fn write_tree(
        &self,
        src: &SourceRef,
        locked: &LockedSource,
        clang: bool,
        out: impl Write,
    ) -> Result<(), SourceError> {
        let pinned = SourceRef {
            commit: Some(locked.commit.clone()),
            ..src.clone()
        };
        let repo = self.repository(&pinned)?;
        let tree = super::resolve(&repo, &pinned)?
            .tree()
            .map_err(|e| git(src, e))?;
        let about = format!(
            "git {}\nref {}\ncommit {}\nllvm {}\n",
            src.url,
            src.reference,
            locked.commit,
            major(&repo, &tree).unwrap_or_else(|| "unknown".into())
        );
        let extra = [
            (".rocmatrix/source".to_string(), about.into_bytes()),
            (".rocmatrix/patches-applied".to_string(), Vec::new()),
            (".rocmatrix/patches-not-applied".to_string(), Vec::new()),
        ];
        let keep = |p: &str| wanted(p, clang);
        super::tree_tar::write_tree(&repo, &tree, DIR, (&keep, &extra), out)
            .and_then(|mut w| Ok(w.flush()?))
            .map_err(|e| SourceError::Git {
                name: src.name.clone(),
                message: format!("packing the tree: {e}"),
            })
    }
}

impl Sources {
    /// What a plan resolves a tree (`url`, `reference`) to
    /// ([`crate::plan::ResolveTree`]): the commit `lock` has for it among a
    /// toolchain build's sources (`--locked`: checked to be there), else
    /// its ref's commit now.
    pub fn tree_commit(
        &self,
        url: &str,
        reference: &str,
        lock: Option<&Lock>,
    ) -> Result<String, TreeUnresolved> {
        let locked = lock
            .into_iter()
            .flat_map(|l| l.builds.values())
            .flat_map(|b| &b.sources);
        let src = SourceRef {
            name: TREE.to_string(),
            url: url.to_string(),
            reference: reference.to_string(),
            patches: Vec::new(),
            commit: locked
                .filter(|s| s.name == TREE && s.url == url && s.reference == reference)
                .map(|s| s.commit.clone())
                .next(),
        };
        self.resolve_tree(&src)
            .map(|l| l.commit)
            .map_err(TreeUnresolved)
    }
}

/// Why an LLVM tree's URL and ref could not be resolved to a commit, said
/// without the source's name ([`SourceError::detail`]): a matrix's error
/// names its field instead.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.detail())]
pub struct TreeUnresolved(pub SourceError);

impl SourceError {
    /// What went wrong, without the source's name (a matrix's error names
    /// its field instead).
    pub fn detail(&self) -> String {
        match self {
            SourceError::Git { message, .. } => message.clone(),
            e => e.to_string(),
        }
    }
}

fn git(src: &SourceRef, e: git2::Error) -> SourceError {
    SourceError::Git {
        name: src.name.clone(),
        message: e.message().to_string(),
    }
}

/// `LLVM_VERSION_MAJOR` as the tree sets it (`cmake/Modules/LLVMVersion.cmake`
/// from LLVM 18, `llvm/CMakeLists.txt` before).
fn major(repo: &git2::Repository, tree: &git2::Tree) -> Option<String> {
    ["cmake/Modules/LLVMVersion.cmake", "llvm/CMakeLists.txt"]
        .iter()
        .find_map(|p| {
            let blob = repo
                .find_blob(tree.get_path(Path::new(p)).ok()?.id())
                .ok()?;
            let text = String::from_utf8_lossy(blob.content()).into_owned();
            let at = text.find("set(LLVM_VERSION_MAJOR")?;
            let digits: String = text[at + 22..]
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            (!digits.is_empty()).then_some(digits)
        })
}

/// A writer that sends what it is given as chunks of about 1 MiB down a
/// bounded channel (the tar stream an upload reads): a blocking thread
/// writes, the engine's upload reads at its pace.
pub struct ChunkWriter {
    tx: tokio::sync::mpsc::Sender<Chunk>,
    buf: Vec<u8>,
}

impl ChunkWriter {
    pub fn new(tx: tokio::sync::mpsc::Sender<Chunk>) -> ChunkWriter {
        ChunkWriter {
            tx,
            buf: Vec::with_capacity(CHUNK),
        }
    }

    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = bytes::Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::other("the upload stopped reading"))
    }
}

const CHUNK: usize = 1 << 20;

impl Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_llvm_only_build_gets_llvm_without_tests_cmake_third_party_and_clang_if_asked() {
        for p in [
            "llvm",
            "llvm/lib/Support/YAMLTraits.cpp",
            "llvm/utils/TableGen",
            "cmake/Modules",
            "third-party/siphash",
        ] {
            assert!(wanted(p, false), "{p}");
        }
        for p in [
            "llvm/test",
            "llvm/test/MC/x.s",
            "llvm/unittests",
            "clang",
            "lldb",
            "README.md",
            "llvm/testing",
        ] {
            assert_eq!(wanted(p, false), p == "llvm/testing", "{p}");
        }
        assert!(wanted("clang/lib/Sema/Sema.cpp", true));
    }

    #[test]
    fn a_local_path_or_file_url_is_read_where_it_is() {
        assert_eq!(
            local("/src/llvm-project"),
            Some(PathBuf::from("/src/llvm-project"))
        );
        assert_eq!(
            local("file:///src/llvm-project"),
            Some(PathBuf::from("/src/llvm-project"))
        );
        assert_eq!(local("https://github.com/llvm/llvm-project"), None);
        assert_eq!(local("git@github.com:llvm/llvm-project"), None);
    }
}
