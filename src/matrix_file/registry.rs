//! The `registry:` field (and `run --registry`): an image repository such as
//! `ghcr.io/org/rocmatrix` under which environment images are shared as
//! `<registry>/env:<hash>`. It names where images are kept, never what they
//! are, so it is not part of any environment hash.

/// A registry reference that is not one; the message says what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadRegistry(String);

/// Checks a registry reference: `host[:port]/path` or `path`, lower-case
/// components of letters, digits and `._-`, no tag and no digest.
pub fn parse_registry(text: &str) -> Result<String, BadRegistry> {
    let r = text.trim().trim_end_matches('/');
    let bad = |why: &str| {
        Err(BadRegistry(format!(
            "registry {text:?} {why}; want a repository such as ghcr.io/org/rocmatrix or 127.0.0.1:5000/rocmatrix"
        )))
    };
    if r.is_empty() {
        return bad("is empty");
    }
    if r.contains("://") {
        return bad("has a scheme");
    }
    if r.contains('@') {
        return bad("has a digest");
    }
    let mut parts = r.split('/');
    let first = parts.next().unwrap_or_default();
    let host_like =
        r.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let path: Vec<&str> = if host_like {
        let (host, port) = first.split_once(':').unwrap_or((first, ""));
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        {
            return bad("has an invalid host");
        }
        if !port.is_empty() && port.parse::<u16>().is_err() || first.ends_with(':') {
            return bad("has an invalid port");
        }
        parts.collect()
    } else {
        r.split('/').collect()
    };
    for p in &path {
        if p.is_empty()
            || !p
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
        {
            return bad(if p.contains(':') {
                "has a tag"
            } else {
                "has an invalid path component (lower-case letters, digits, `._-`)"
            });
        }
    }
    Ok(r.to_string())
}

#[cfg(test)]
mod tests {
    use super::parse_registry;

    #[test]
    fn accepts_repositories() {
        for ok in [
            "ghcr.io/org/rocmatrix",
            "127.0.0.1:5000/rocmatrix",
            "localhost/x",
            "org/x",
            "x/",
        ] {
            assert!(parse_registry(ok).is_ok(), "{ok}");
        }
        assert_eq!(parse_registry("reg:5000/a/").unwrap(), "reg:5000/a");
    }

    #[test]
    fn rejects_tags_digests_schemes() {
        for bad in [
            "",
            "https://ghcr.io/x",
            "ghcr.io/x:tag",
            "ghcr.io/x@sha256:00",
            "Org/X",
            "reg:port/x",
            "ghcr.io:/x",
        ] {
            let e = parse_registry(bad).unwrap_err().to_string();
            assert!(e.contains("want a repository"), "{bad}: {e}");
        }
    }
}
