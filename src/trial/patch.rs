//! A patch given to `rocmatrix try`: read within [`MAX_PATCH`], refused
//! when it is binary or not a patch git can read, and kept by its content
//! as `<cache>/try/patches/<sha256>.patch`. The plan names that path, so a
//! build's snapshot (named by its sources' commits and patch hashes) is
//! the same on the next try of the same patch, wherever the file was.

use std::path::{Path, PathBuf};

use super::TrialError;

use crate::plan::patch_file::{binary, MAX_PATCH};

/// One `--patch NAME=FILE`, read and kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// The `sources:` entry it applies to.
    pub source: String,
    /// The file as given.
    pub given: PathBuf,
    pub sha256: String,
    /// Where it is kept by its content: the path the plan names.
    pub kept: PathBuf,
    /// Its text, as kept.
    pub text: String,
}

/// Reads `file`, checks that it is a text patch, and keeps it under
/// `cache` (a plain `diff -u` with git's headers added, [`as_git_diff`]).
pub fn read(source: &str, file: &Path, cache: &Path) -> Result<Patch, TrialError> {
    let shown = file.display();
    let bytes = crate::safe_read::read_bounded(file, MAX_PATCH, "patches", "")
        .map_err(|e| TrialError(format!("--patch {source}={shown}: {e}")))?;
    if let Some(why) = binary(&bytes) {
        return Err(TrialError(format!(
            "--patch {source}={shown}: {why}; try applies text patches only"
        )));
    }
    let text = as_git_diff(&String::from_utf8_lossy(&bytes));
    let bytes = text.as_bytes();
    let diff = git2::Diff::from_buffer(bytes).map_err(|e| {
        TrialError(format!(
            "--patch {source}={shown}: not a patch git can read ({}); expected a unified \
             diff (`git diff`, `git format-patch`, `diff -u`)",
            e.message()
        ))
    })?;
    if diff.deltas().len() == 0 {
        return Err(TrialError(format!(
            "--patch {source}={shown}: no file changes in it; expected a unified diff \
             (`git diff`, `git format-patch`, `diff -u`)"
        )));
    }
    let sha256 = crate::digest::sha256_hex(bytes);
    let kept = cache.join("try/patches").join(format!("{sha256}.patch"));
    if !kept.is_file() {
        crate::store::write_atomic(&kept, bytes)
            .map_err(|e| TrialError(format!("keeping --patch {source}={shown}: {e}")))?;
    }
    Ok(Patch {
        source: source.to_string(),
        given: file.to_path_buf(),
        sha256,
        kept,
        text,
    })
}

/// `text` as git reads a patch: unchanged when it has git's own headers
/// (`git diff`, `git format-patch`), else each `---`/`+++` pair of a plain
/// unified diff (`diff -ru old new`, `diff -u a/f b/f`) gets a
/// `diff --git` line, its paths without their first component as `patch
/// -p1` takes them, and a file mode where one side is `/dev/null`.
pub fn as_git_diff(text: &str) -> String {
    if text.lines().any(|l| l.starts_with("diff --git ")) {
        return text.to_string();
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len() + 256);
    let mut i = 0;
    while i < lines.len() {
        let (l, next) = (lines[i], lines.get(i + 1));
        match (
            l.strip_prefix("--- "),
            next.and_then(|n| n.strip_prefix("+++ ")),
        ) {
            (Some(old), Some(new)) => {
                let (old, new) = (p1(old), p1(new));
                let name = if new == "/dev/null" { old } else { new };
                out.push_str(&format!("diff --git a/{name} b/{name}\n"));
                if old == "/dev/null" {
                    out.push_str("new file mode 100644\n");
                } else if new == "/dev/null" {
                    out.push_str("deleted file mode 100644\n");
                }
                let side = |p: &str, s: &str| match p {
                    "/dev/null" => "/dev/null".to_string(),
                    _ => format!("{s}/{name}"),
                };
                out.push_str(&format!("--- {}\n+++ {}\n", side(old, "a"), side(new, "b")));
                i += 2;
            }
            _ => {
                out.push_str(l);
                i += 1;
            }
        }
    }
    out
}

/// A unified diff's path without its timestamp and first component.
fn p1(header: &str) -> &str {
    let path = header.trim_end_matches(['\n', '\r']);
    let path = path.split('\t').next().unwrap_or(path);
    if path == "/dev/null" {
        return path;
    }
    path.split_once('/').map_or(path, |(_, rest)| rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIX: &str = "--- a/calc.c\n+++ b/calc.c\n@@ -1,1 +1,1 @@\n-int add(int a, int b) { return a + b + 1; }\n+int add(int a, int b) { return a + b; }\n";

    #[test]
    fn a_patch_is_kept_by_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("fix.patch");
        std::fs::write(&file, FIX).unwrap();
        let p = read("app", &file, &dir.path().join("cache")).unwrap();
        let kept = as_git_diff(FIX);
        assert_eq!(p.sha256, crate::digest::sha256_hex(kept.as_bytes()));
        assert_eq!(
            p.kept,
            dir.path()
                .join("cache/try/patches")
                .join(format!("{}.patch", p.sha256))
        );
        assert_eq!(std::fs::read_to_string(&p.kept).unwrap(), kept);
        // The same content elsewhere is the same kept file.
        let other = dir.path().join("again.patch");
        std::fs::write(&other, FIX).unwrap();
        assert_eq!(
            read("app", &other, &dir.path().join("cache")).unwrap().kept,
            p.kept
        );
    }

    #[test]
    fn plain_unified_diffs_get_gits_headers() {
        let plain = "--- calc.orig/calc.c\t2026-11-27 04:00:00\n+++ calc/calc.c\t2026-11-27 04:01:00\n@@ -1 +1 @@\n-x\n+y\n--- /dev/null\n+++ b/new.c\n@@ -0,0 +1 @@\n+z\n";
        assert_eq!(
            as_git_diff(plain),
            "diff --git a/calc.c b/calc.c\n--- a/calc.c\n+++ b/calc.c\n@@ -1 +1 @@\n-x\n+y\n\
             diff --git a/new.c b/new.c\nnew file mode 100644\n--- /dev/null\n+++ b/new.c\n@@ -0,0 +1 @@\n+z\n"
        );
        let git = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+2\n";
        assert_eq!(as_git_diff(git), git);
        assert_eq!(
            git2::Diff::from_buffer(as_git_diff(plain).as_bytes())
                .unwrap()
                .deltas()
                .len(),
            2
        );
    }

    #[test]
    fn binary_empty_and_oversized_patches_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let bin = dir.path().join("bin.patch");
        std::fs::write(
            &bin,
            "diff --git a/x.bin b/x.bin\nindex 1..2 100644\nGIT binary patch\nliteral 3\nKcmZ?\n",
        )
        .unwrap();
        let e = read("app", &bin, &cache).unwrap_err().0;
        assert!(e.contains("bin.patch") && e.contains("binary patch"), "{e}");
        let nul = dir.path().join("nul.patch");
        std::fs::write(&nul, b"\x7fELF\0\0\0").unwrap();
        assert!(read("app", &nul, &cache).unwrap_err().0.contains("NUL"));
        let prose = dir.path().join("prose.patch");
        std::fs::write(&prose, "this fixes it, trust me\n").unwrap();
        let e = read("app", &prose, &cache).unwrap_err().0;
        assert!(
            e.contains("prose.patch") && e.contains("unified diff"),
            "{e}"
        );
        let big = dir.path().join("big.patch");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(200 << 20).unwrap();
        let e = read("app", &big, &cache).unwrap_err().0;
        assert!(e.contains("big.patch") && e.contains("larger"), "{e}");
        assert!(!cache.exists(), "nothing refused is kept");
    }
}
