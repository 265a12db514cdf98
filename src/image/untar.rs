//! Unpacking tar archives that came out of a container, safely.
//!
//! A test in a container controls what it writes, so the archive is
//! untrusted: absolute paths, `..`, links that leave the target, device
//! files and oversized content are refused. Refusals are reported as
//! messages and the remaining entries are still unpacked.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Limits for one archive.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Total bytes of file content.
    pub max_total: u64,
    /// Number of entries.
    pub max_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_total: 512 * 1024 * 1024,
            max_entries: 100_000,
        }
    }
}

/// What an unpack did.
#[derive(Debug, Default)]
pub struct Unpacked {
    /// Files written, relative to the target.
    pub files: Vec<PathBuf>,
    /// Entries refused, in words.
    pub refused: Vec<String>,
}

/// Unpacks `archive` into `target` (which must exist).
pub fn unpack(
    archive: impl Read,
    target: &Path,
    limits: Limits,
    origin: &str,
) -> std::io::Result<Unpacked> {
    unpack_filtered(archive, target, limits, origin, None)
}

/// Like [`unpack`]; with `keep`, writes only the regular files for which it
/// holds and passes over every other entry silently.
pub fn unpack_filtered(
    archive: impl Read,
    target: &Path,
    limits: Limits,
    origin: &str,
    keep: Option<&dyn Fn(&Path) -> bool>,
) -> std::io::Result<Unpacked> {
    let mut u = Unpacker {
        target,
        limits,
        origin,
        total: 0,
        out: Unpacked::default(),
    };
    let mut ar = tar::Archive::new(archive);
    for (n, entry) in ar.entries()?.enumerate() {
        let mut entry = entry?;
        let shown = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if n >= limits.max_entries {
            u.out.refused.push(format!(
                "{origin}: more than {} entries; the rest is ignored",
                limits.max_entries
            ));
            break;
        }
        let Some(rel) = safe_relative(&shown) else {
            u.refuse(&shown, "absolute path or `..`");
            continue;
        };
        if let Some(keep) = keep {
            let kind = entry.header().entry_type();
            let regular = matches!(kind, tar::EntryType::Regular | tar::EntryType::Continuous);
            if !regular || !keep(&rel) {
                continue;
            }
        }
        u.entry(&mut entry, rel, &shown)?;
    }
    Ok(u.out)
}

/// One unpack under way: where it writes, how much it has written, and
/// what it did.
struct Unpacker<'a> {
    target: &'a Path,
    limits: Limits,
    origin: &'a str,
    /// Bytes of file content written so far.
    total: u64,
    out: Unpacked,
}

impl Unpacker<'_> {
    /// Notes that the entry `shown` was refused, and why.
    fn refuse(&mut self, shown: &str, why: impl std::fmt::Display) {
        self.out
            .refused
            .push(format!("{}: refused `{shown}`: {why}", self.origin));
    }

    /// Unpacks one entry at the safe relative path `rel`, by its type.
    fn entry<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        rel: PathBuf,
        shown: &str,
    ) -> std::io::Result<()> {
        match entry.header().entry_type() {
            tar::EntryType::Directory => std::fs::create_dir_all(self.target.join(&rel))?,
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse => {
                self.file(entry, rel, shown)?
            }
            kind @ (tar::EntryType::Symlink | tar::EntryType::Link) => {
                self.link(entry, kind, &rel, shown)
            }
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                self.refuse(shown, "a device or FIFO")
            }
            tar::EntryType::XGlobalHeader
            | tar::EntryType::XHeader
            | tar::EntryType::GNULongName
            | tar::EntryType::GNULongLink => {}
            other => self.refuse(shown, format!("entry type {other:?}")),
        }
        Ok(())
    }

    /// Writes a regular file, unless it would pass the size limit, land
    /// outside the target or write through a link.
    fn file<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        rel: PathBuf,
        shown: &str,
    ) -> std::io::Result<()> {
        let dest = self.target.join(&rel);
        let size = entry.header().size().unwrap_or(u64::MAX);
        if self.total.saturating_add(size) > self.limits.max_total {
            let max = self.limits.max_total;
            self.refuse(shown, format!("the archive exceeds {max} bytes"));
            return Ok(());
        }
        if let Some(parent) = dest.parent() {
            if !inside(self.target, parent) {
                self.refuse(shown, "its directory leaves the target");
                return Ok(());
            }
            std::fs::create_dir_all(parent)?;
        }
        if dest
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            self.refuse(shown, "would write through a link");
            return Ok(());
        }
        let mut f = std::fs::File::create(&dest)?;
        let copied = std::io::copy(&mut entry.take(size), &mut f)?;
        self.total += copied;
        self.out.files.push(rel);
        Ok(())
    }

    /// Notes a symbolic or hard link: refused when it leaves the target,
    /// otherwise skipped.
    fn link<R: Read>(
        &mut self,
        entry: &tar::Entry<'_, R>,
        kind: tar::EntryType,
        rel: &Path,
        shown: &str,
    ) {
        let link = entry
            .link_name()
            .ok()
            .flatten()
            .map(|l| l.to_string_lossy().into_owned())
            .unwrap_or_default();
        let base = if kind == tar::EntryType::Link {
            PathBuf::new()
        } else {
            rel.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        let stays = !Path::new(&link).is_absolute()
            && safe_relative(&base.join(&link).to_string_lossy()).is_some();
        if !stays {
            self.refuse(shown, format!("a link to `{link}` leaves the target"));
            return;
        }
        // Links inside the target add nothing a report needs; they are
        // listed, not created, so no later entry can write through one.
        self.out.refused.push(format!(
            "{}: skipped `{shown}`: a link to `{link}` (links are not copied)",
            self.origin
        ));
    }
}

/// The path as a normalised relative path, or `None` if it is absolute or
/// climbs out with `..`.
fn safe_relative(path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in Path::new(path).components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Whether `path` (which may not exist yet) resolves inside `target`,
/// following links that already exist on disk.
fn inside(target: &Path, path: &Path) -> bool {
    let Ok(target) = target.canonicalize() else {
        return false;
    };
    let mut existing = path.to_path_buf();
    while !existing.exists() {
        if !existing.pop() {
            return false;
        }
    }
    existing
        .canonicalize()
        .is_ok_and(|p| p.starts_with(&target))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(entries: &[(&str, tar::EntryType, &[u8], Option<&str>)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, data, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            // Write the raw name so hostile names reach the archive unchanged.
            {
                let gnu = h.as_gnu_mut().unwrap();
                gnu.name[..name.len()].copy_from_slice(name.as_bytes());
            }
            if let Some(l) = link {
                h.set_link_name(l).unwrap();
            }
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn refuses_hostile_entries_and_keeps_good_ones() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let evil_abs = format!("{}/abs.xml", outside.path().display());
        let a = archive(&[
            (
                "junit/ok.xml",
                tar::EntryType::Regular,
                b"<testsuite/>",
                None,
            ),
            ("../escape.xml", tar::EntryType::Regular, b"x", None),
            (
                "junit/../../escape2.xml",
                tar::EntryType::Regular,
                b"x",
                None,
            ),
            (&evil_abs, tar::EntryType::Regular, b"x", None),
            (
                "junit/shadow.xml",
                tar::EntryType::Symlink,
                b"",
                Some("/etc/shadow"),
            ),
            (
                "junit/up.xml",
                tar::EntryType::Symlink,
                b"",
                Some("../../x"),
            ),
            ("junit/null", tar::EntryType::Char, b"", None),
        ]);
        let u = unpack(&a[..], t.path(), Limits::default(), "cell c").unwrap();
        assert_eq!(u.files, [PathBuf::from("junit/ok.xml")]);
        assert_eq!(
            std::fs::read(t.path().join("junit/ok.xml")).unwrap(),
            b"<testsuite/>"
        );
        let refused = u.refused.join("\n");
        for needle in [
            "`../escape.xml`",
            "escape2.xml",
            "abs.xml",
            "`/etc/shadow` leaves",
            "`../../x` leaves",
            "a device",
        ] {
            assert!(refused.contains(needle), "{needle} not in {refused}");
        }
        assert!(!t.path().parent().unwrap().join("escape.xml").exists());
        assert!(!outside.path().join("abs.xml").exists());
    }

    #[test]
    fn refuses_oversized_archives() {
        let t = tempfile::tempdir().unwrap();
        let big = vec![b'x'; 4096];
        let a = archive(&[
            ("a.xml", tar::EntryType::Regular, &big, None),
            ("b.xml", tar::EntryType::Regular, &big, None),
        ]);
        let limits = Limits {
            max_total: 6000,
            max_entries: 10,
        };
        let u = unpack(&a[..], t.path(), limits, "c").unwrap();
        assert_eq!(u.files.len(), 1);
        assert!(u.refused[0].contains("exceeds 6000 bytes"));
    }
}
