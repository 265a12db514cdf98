//! Rootless Podman: telling it from a rootful engine, and what its user's
//! `containers.conf` says about keeping that user's groups in containers.
//!
//! A rootless Podman service runs as an ordinary user and creates its
//! socket as that user; a rootful engine's socket belongs to root. So a
//! Podman answering on a Unix socket that root does not own is rootless,
//! run by the socket's owner (Podman 4.3's Docker-compatible `/info` does
//! not say so itself).
//!
//! In a rootless container the groups the Docker API adds (`GroupAdd`) are
//! groups of the container's user namespace, not the host's: they never
//! open a device node. The user's own supplementary groups (render, video)
//! reach the container only through crun's `run.oci.keep_original_groups`
//! annotation (`podman run --group-add keep-groups`), which the Docker API
//! cannot ask for per container; a service sets it for all of them with
//! `annotations = ["run.oci.keep_original_groups=1"]` in `[containers]` of
//! its `containers.conf`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{Address, Engine, Flavour};

/// The annotation that keeps the user's groups (crun only).
pub const KEEP_GROUPS: &str = "run.oci.keep_original_groups=1";

impl Engine {
    /// The uid of the user a rootless Podman service runs as, or `None`
    /// for Docker, a rootful Podman, or an engine not on a local socket.
    pub fn rootless_user(&self) -> Option<u32> {
        match (self.flavour, &self.address) {
            (Flavour::Podman, Address::Unix(socket)) => socket_owner(socket),
            _ => None,
        }
    }

    /// The engine's default OCI runtime (`crun`, `runc`), as `/info` says.
    pub async fn default_runtime(&self) -> Option<String> {
        self.docker.info().await.ok()?.default_runtime
    }
}

/// The owner of a socket, unless it is root.
fn socket_owner(socket: &Path) -> Option<u32> {
    let uid = std::fs::metadata(socket).ok()?.uid();
    (uid != 0).then_some(uid)
}

/// What the `containers.conf` files of a user say about keeping groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeepGroups {
    /// The file whose `annotations` (the last that sets them) add it.
    Set(PathBuf),
    /// No file adds it; these were read (those that exist).
    NotSet { read: Vec<PathBuf> },
    /// A file that could not be read as `containers.conf` (Podman refuses
    /// it too): where, and why.
    Unreadable(String),
}

/// Whether the `containers.conf` files Podman reads for a user with home
/// `home` add [`KEEP_GROUPS`] to every container. `root` is `/` but for
/// tests. Read in Podman's order (`/usr/share`, `/etc`, its `.d` drop-ins,
/// then the user's own and its drop-ins); the last file that sets
/// `annotations` decides. A `CONTAINERS_CONF` in the service's environment
/// is not visible from here.
pub fn keep_groups_configured(root: &Path, home: &Path) -> KeepGroups {
    let mut files = vec![
        root.join("usr/share/containers/containers.conf"),
        root.join("etc/containers/containers.conf"),
    ];
    files.extend(drop_ins(&root.join("etc/containers/containers.conf.d")));
    files.push(home.join(".config/containers/containers.conf"));
    files.extend(drop_ins(&home.join(".config/containers/containers.conf.d")));
    let mut decided: Option<(PathBuf, bool)> = None;
    let mut read = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        read.push(file.clone());
        match annotations_keep_groups(&text) {
            Ok(Some(keeps)) => decided = Some((file, keeps)),
            Ok(None) => {}
            Err(e) => return KeepGroups::Unreadable(format!("{}: {e}", file.display())),
        }
    }
    match decided {
        Some((file, true)) => KeepGroups::Set(file),
        _ => KeepGroups::NotSet { read },
    }
}

/// The `*.conf` files of a drop-in directory, in name order.
fn drop_ins(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "conf"))
        .collect();
    out.sort();
    out
}

/// Why a `containers.conf` could not be read: the line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct ConfError {
    pub line: usize,
    pub what: String,
}

/// Whether a `containers.conf`'s `[containers] annotations` hold
/// [`KEEP_GROUPS`]; `None` when the file does not set them.
///
/// Reads just that much TOML: table headers, and the `annotations` key of
/// `[containers]` as an array of basic or literal strings, which may span
/// lines and carry comments.
fn annotations_keep_groups(text: &str) -> Result<Option<bool>, ConfError> {
    let error = |n: usize, what: &str| ConfError {
        line: n + 1,
        what: what.to_string(),
    };
    let mut table = String::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let Some(end) = header.find(']') else {
                return Err(error(n, "unclosed table header"));
            };
            table = header[..end].trim().trim_matches('[').trim().to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if table != "containers" || key.trim() != "annotations" {
            continue;
        }
        let mut value = value.to_string();
        let strings = loop {
            match array_strings(&value) {
                Ok(Some(s)) => break s,
                Ok(None) => match lines.next() {
                    Some((_, more)) => {
                        value.push('\n');
                        value.push_str(more);
                    }
                    None => return Err(error(n, "annotations: unclosed list")),
                },
                Err(c) => {
                    return Err(error(
                        n,
                        &format!("annotations: not a list of strings (at `{c}`)"),
                    ))
                }
            }
        };
        return Ok(Some(strings.iter().any(|s| s.trim() == KEEP_GROUPS)));
    }
    Ok(None)
}

/// The strings of a TOML array of strings, or `None` while `text` has not
/// closed it yet; the error says what is not a list of strings.
fn array_strings(text: &str) -> Result<Option<Vec<String>>, char> {
    let mut chars = text.trim_start().chars();
    match chars.next() {
        Some('[') => {}
        other => return Err(other.unwrap_or(' ')),
    }
    let mut out = Vec::new();
    while let Some(c) = chars.next() {
        match c {
            ']' => return Ok(Some(out)),
            '"' | '\'' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => return Ok(None),
                        Some(q) if q == c => break,
                        Some('\\') if c == '"' => s.extend(chars.next()),
                        Some(ch) => s.push(ch),
                    }
                }
                out.push(s);
            }
            '#' => {
                // A comment runs to the end of its line.
                for ch in chars.by_ref() {
                    if ch == '\n' {
                        break;
                    }
                }
            }
            c if c == ',' || c.is_whitespace() => {}
            other => return Err(other),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_are_read_from_the_containers_table() {
        let keeps =
            "[containers]\nannotations = [\n  \"a=b\",\n  \"run.oci.keep_original_groups=1\",\n]\n";
        assert_eq!(annotations_keep_groups(keeps), Ok(Some(true)));
        let other = "[containers]\nannotations = [\"a=b\"]\n";
        assert_eq!(annotations_keep_groups(other), Ok(Some(false)));
        let elsewhere = "[engine]\nannotations = [\"run.oci.keep_original_groups=1\"]\n";
        assert_eq!(annotations_keep_groups(elsewhere), Ok(None));
        assert!(annotations_keep_groups("[containers]\nannotations = 1\n").is_err());
        assert!(annotations_keep_groups("[containers\n").is_err());
        let commented =
            "[containers]\nannotations = [ # why\n  'run.oci.keep_original_groups=1', # crun\n]\n";
        assert_eq!(annotations_keep_groups(commented), Ok(Some(true)));
        assert!(annotations_keep_groups("[containers]\nannotations = [\"a\"\n").is_err());
    }

    #[test]
    fn the_last_file_that_sets_annotations_decides() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home/u");
        let etc = root.path().join("etc/containers");
        std::fs::create_dir_all(etc.join("containers.conf.d")).unwrap();
        std::fs::create_dir_all(home.join(".config/containers")).unwrap();
        assert_eq!(
            keep_groups_configured(root.path(), &home),
            KeepGroups::NotSet { read: vec![] }
        );
        std::fs::write(
            etc.join("containers.conf.d/50-gpu.conf"),
            "[containers]\nannotations = [\"run.oci.keep_original_groups=1\"]\n",
        )
        .unwrap();
        assert_eq!(
            keep_groups_configured(root.path(), &home),
            KeepGroups::Set(etc.join("containers.conf.d/50-gpu.conf"))
        );
        // The user's own file replaces the list, without it.
        let own = home.join(".config/containers/containers.conf");
        std::fs::write(&own, "[containers]\nannotations = [\"x=y\"]\n").unwrap();
        assert!(matches!(
            keep_groups_configured(root.path(), &home),
            KeepGroups::NotSet { read } if read.len() == 2
        ));
        std::fs::write(&own, "[engine]\nruntime = \"crun\"\n").unwrap();
        assert!(matches!(
            keep_groups_configured(root.path(), &home),
            KeepGroups::Set(_)
        ));
        std::fs::write(&own, "[containers]\n\nannotations = \"x\"\n").unwrap();
        assert_eq!(
            keep_groups_configured(root.path(), &home),
            KeepGroups::Unreadable(format!(
                "{}: line 3: annotations: not a list of strings (at `\"`)",
                own.display()
            ))
        );
    }

    #[test]
    fn a_root_owned_socket_is_not_rootless() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        assert_eq!(socket_owner(&sock), (me != 0).then_some(me));
        assert_eq!(socket_owner(&dir.path().join("missing")), None);
    }
}
