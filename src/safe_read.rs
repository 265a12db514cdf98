//! Opening files that someone else wrote: a matrix file from a pull request,
//! JUnit a test binary wrote, run-store files downloaded from CI, sysfs.
//!
//! * [`open_regular`] opens without blocking (`O_NONBLOCK`, so a named pipe
//!   with no writer cannot hang the open) and then checks with `fstat` that
//!   what it got is a regular file: FIFOs, devices (`/dev/zero`) and sockets
//!   are refused, also when a symlink points at them.
//! * [`read_bounded`] reads such a file whole, refusing one larger than a
//!   limit the caller names, without ever holding more than the limit.
//! * [`within`] resolves a path that a file names (a JUnit path in a
//!   run store's `cell.json`) against a root and refuses it when it, or a
//!   symlink on the way, leads out of that root.
//!
//! The errors are `std::io::Error`s (kind `InvalidInput` for what is
//! refused here) whose text says what was wrong; callers add the path.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Component, Path, PathBuf};

/// Opens `path` for reading if it is a regular file (after following
/// symlinks), without blocking on a FIFO.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)?;
    let ft = file.metadata()?.file_type();
    if !ft.is_file() {
        let what = if ft.is_fifo() {
            "a named pipe (FIFO)"
        } else if ft.is_char_device() {
            "a character device"
        } else if ft.is_block_device() {
            "a block device"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Err(refused(format!(
            "not a regular file but {what}; only regular files are read"
        )));
    }
    // Reads of a regular file never block; clear the flag anyway so the
    // file behaves as an ordinary one for whoever reads it.
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, with integer arguments only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

/// Reads the regular file `path` whole, refusing one of more than `limit`
/// bytes. `what` names the limit in the error (`"matrix files"`), `raise`
/// says how to raise it, if it can be raised (empty when not).
pub fn read_bounded(path: &Path, limit: u64, what: &str, raise: &str) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let size = file.metadata()?.len();
    if size > limit {
        return Err(too_large(size, limit, what, raise));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // The file may grow while it is read (or be a sysfs file that reports
    // size 4096 or 0): read at most one byte more than the limit.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64, limit, what, raise));
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_bounded_string(path: &Path, limit: u64, what: &str, raise: &str) -> io::Result<String> {
    let bytes = read_bounded(path, limit, what, raise)?;
    String::from_utf8(bytes).map_err(|e| refused(format!("not UTF-8: {e}")))
}

/// A one-value file of sysfs or procfs (a version, a name), trimmed: at
/// most 4 KiB, and `None` when it is missing, unreadable, too large or
/// empty — a fact that cannot be read is absent, never an error.
pub fn fact(path: &Path) -> Option<String> {
    let text = read_bounded_string(path, 4096, "fact files", "").ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// `root/rel`, if `rel` is a relative path that stays inside `root` — also
/// after following every symlink on the way. The file must exist.
pub fn within(root: &Path, rel: &Path) -> io::Result<PathBuf> {
    let lexical_ok = rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !lexical_ok || rel.as_os_str().is_empty() {
        return Err(refused(format!(
            "`{}` is not a relative path inside {}",
            rel.display(),
            root.display()
        )));
    }
    let real_root = root.canonicalize()?;
    let real = root.join(rel).canonicalize()?;
    if !real.starts_with(&real_root) {
        return Err(refused(format!(
            "`{}` leads out of {} (to {}) through a symlink",
            rel.display(),
            root.display(),
            real.display()
        )));
    }
    Ok(real)
}

/// An error for something refused here.
pub fn refused(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

fn too_large(size: u64, limit: u64, what: &str, raise: &str) -> io::Error {
    let sep = if raise.is_empty() { "" } else { "; " };
    refused(format!(
        "{} is larger than the limit for {what}, {}{sep}{raise}",
        human(size),
        human(limit)
    ))
}

/// `12 MiB`, `300 KiB`, `17 bytes`.
pub fn human(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 || bytes >= 16 << 20 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_fifos_devices_and_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("p");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open_regular(&fifo).unwrap_err();
        assert!(e.to_string().contains("named pipe"), "{e}");
        let e = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");

        std::fs::write(dir.path().join("f"), "12345").unwrap();
        assert_eq!(
            read_bounded(&dir.path().join("f"), 5, "x", "").unwrap(),
            b"12345"
        );
        let e = read_bounded(&dir.path().join("f"), 4, "tests", "raise it").unwrap_err();
        assert!(
            e.to_string().contains("limit for tests, 4 bytes; raise it"),
            "{e}"
        );

        let inner = dir.path().join("root");
        std::fs::create_dir(&inner).unwrap();
        std::fs::write(inner.join("ok"), "").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", inner.join("out")).unwrap();
        assert!(within(&inner, Path::new("ok")).is_ok());
        assert!(within(&inner, Path::new("out")).is_err());
        assert!(within(&inner, Path::new("../f")).is_err());
        assert!(within(&inner, Path::new("/etc/passwd")).is_err());
    }
}
