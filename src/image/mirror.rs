//! The Debian mirror the host's apt uses, read from its sources lists
//! (one-line `.list` files and deb822 `.sources` files).

use std::path::Path;

/// Used when the host's apt names no Debian mirror.
pub const FALLBACK_MIRROR: &str = "http://deb.debian.org/debian";

/// The first Debian archive URI (not the security archive) in the host's
/// apt configuration under `etc_apt`, else [`FALLBACK_MIRROR`].
pub fn host_mirror(etc_apt: &Path) -> String {
    let mut files = vec![etc_apt.join("sources.list")];
    if let Ok(rd) = std::fs::read_dir(etc_apt.join("sources.list.d")) {
        let mut more: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        more.sort();
        files.extend(more);
    }
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let uris = if f.extension().is_some_and(|e| e == "sources") {
            deb822_uris(&text)
        } else {
            one_line_uris(&text)
        };
        if let Some(u) = uris.into_iter().find(|u| is_debian_archive(u)) {
            return u.trim_end_matches('/').to_string();
        }
    }
    FALLBACK_MIRROR.to_string()
}

fn is_debian_archive(uri: &str) -> bool {
    let u = uri.trim_end_matches('/');
    (u.starts_with("http://") || u.starts_with("https://") || u.starts_with("file:"))
        && u.ends_with("/debian")
}

fn one_line_uris(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("deb ") || l.starts_with("deb\t"))
        .filter_map(|l| {
            let mut words = l.split_whitespace().skip(1);
            let mut w = words.next()?;
            if w.starts_with('[') {
                // Options: `[arch=amd64 signed-by=…]`.
                while !w.ends_with(']') {
                    w = words.next()?;
                }
                w = words.next()?;
            }
            Some(w.to_string())
        })
        .collect()
}

fn deb822_uris(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n") {
        let types = field(stanza, "Types").unwrap_or_default();
        if !types.split_whitespace().any(|t| t == "deb") {
            continue;
        }
        if let Some(uris) = field(stanza, "URIs") {
            out.extend(uris.split_whitespace().map(str::to_string));
        }
    }
    out
}

fn field(stanza: &str, name: &str) -> Option<String> {
    stanza.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_formats() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sources.list.d")).unwrap();
        std::fs::write(
            d.path().join("sources.list.d/debian.sources"),
            "Types: deb\n# comment\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\nTypes: deb deb-src\nURIs: http://mirror.example/debian/\nSuites: bookworm\n",
        )
        .unwrap();
        assert_eq!(host_mirror(d.path()), "http://mirror.example/debian");
        std::fs::write(
            d.path().join("sources.list"),
            "# x\ndeb [arch=amd64 signed-by=/k.gpg] http://ftp.example/debian bookworm main\n",
        )
        .unwrap();
        assert_eq!(host_mirror(d.path()), "http://ftp.example/debian");
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(host_mirror(empty.path()), FALLBACK_MIRROR);
    }
}
