//! `autopkgtest: {source: NAME=VERSION}`: a Debian source package's name
//! and, when the matrix pins one, its version, checked as Debian policy
//! and dpkg's version parser have them, so that a typo is a matrix-file
//! error and not a cell that fails to fetch.

use std::path::Path;

use super::{SpecError, Template};

/// A source package named by a matrix: `rocm-hipamd` or
/// `rocm-hipamd=6.4.3-5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourcePin<'a> {
    pub name: &'a str,
    /// The version the matrix pins; `None`: the newest the index holds.
    pub version: Option<&'a str>,
}

/// Why a `source:` is not `NAME` or `NAME=VERSION`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourcePinError {
    #[error(
        "`{0}` is not a Debian source package name (lower-case letters, digits, `+`, `-` and `.`, \
         two characters at least, starting with a letter or digit); give `NAME` or `NAME=VERSION`"
    )]
    Name(String),
    #[error("`{pin}`: the version after `=` is empty; give `NAME=VERSION` or just `NAME`")]
    EmptyVersion { pin: String },
    #[error("`{version}` is not a Debian version ([EPOCH:]UPSTREAM[-REVISION]): {why}")]
    Version { version: String, why: &'static str },
}

/// Reads `NAME` or `NAME=VERSION` (surrounding spaces ignored).
pub fn parse_source(text: &str) -> Result<SourcePin<'_>, SourcePinError> {
    let text = text.trim();
    let (name, version) = match text.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (text, None),
    };
    if !is_source_name(name) {
        return Err(SourcePinError::Name(name.to_string()));
    }
    if let Some(v) = version {
        if v.is_empty() {
            return Err(SourcePinError::EmptyVersion {
                pin: text.to_string(),
            });
        }
        check_version(v).map_err(|why| SourcePinError::Version {
            version: v.to_string(),
            why,
        })?;
    }
    Ok(SourcePin { name, version })
}

/// A `source:` template as one cell rendered it, trimmed, or the error at
/// the template's position naming the field and the cell.
pub fn rendered(file: &Path, t: &Template, text: &str, cell: &str) -> Result<String, SpecError> {
    match parse_source(text) {
        Ok(_) => Ok(text.trim().to_string()),
        Err(e) => Err(SpecError::new(
            file,
            Some(t.pos),
            format!("{}: {e} (rendering cell {cell})", t.field),
        )),
    }
}

/// Debian policy 5.6.1: `[a-z0-9][a-z0-9+.-]+`.
fn is_source_name(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 2
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"+-.".contains(c))
}

/// dpkg's `parseversion` errors, and policy 5.6.12's "the upstream version
/// must start with a digit" (dpkg only warns of that; no archive accepts it).
fn check_version(v: &str) -> Result<(), &'static str> {
    if v.chars().any(char::is_whitespace) {
        return Err("it contains spaces");
    }
    let rest = match v.split_once(':') {
        Some((epoch, rest)) => {
            if epoch.is_empty() {
                return Err("the epoch before `:` is empty");
            }
            if !epoch.bytes().all(|c| c.is_ascii_digit()) || epoch.parse::<i32>().is_err() {
                return Err("the epoch before `:` is not a number");
            }
            rest
        }
        None => v,
    };
    let (upstream, revision) = match rest.rsplit_once('-') {
        Some((u, r)) => (u, Some(r)),
        None => (rest, None),
    };
    if revision == Some("") {
        return Err("the revision after the last `-` is empty");
    }
    if upstream.is_empty() {
        return Err("the upstream version is empty");
    }
    if !upstream.as_bytes()[0].is_ascii_digit() {
        return Err("the upstream version does not start with a digit");
    }
    if !upstream
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b".-+~:".contains(&c))
    {
        return Err("the upstream version has a character other than letters, digits and `.+~-:`");
    }
    if !revision
        .unwrap_or("")
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b".+~".contains(&c))
    {
        return Err("the revision has a character other than letters, digits and `.+~`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_pins() {
        fn ok(t: &str) -> SourcePin<'_> {
            parse_source(t).unwrap_or_else(|e| panic!("{t}: {e}"))
        }
        assert_eq!(
            ok("rocm-hipamd"),
            SourcePin {
                name: "rocm-hipamd",
                version: None
            }
        );
        for (text, name, version) in [
            ("rocm-hipamd=6.4.3-5", "rocm-hipamd", "6.4.3-5"),
            (" rocm-hipamd=5.7.1-7 ", "rocm-hipamd", "5.7.1-7"),
            ("ffmpeg=7:8.1.2-2", "ffmpeg", "7:8.1.2-2"),
            ("curl=8.23.0~rc3-1", "curl", "8.23.0~rc3-1"),
            ("dosbox=0.74-3-5", "dosbox", "0.74-3-5"),
            ("g++-14=14.2.0", "g++-14", "14.2.0"),
            ("libx=1:2.0:3-1", "libx", "1:2.0:3-1"),
        ] {
            assert_eq!(
                ok(text),
                SourcePin {
                    name,
                    version: Some(version)
                },
                "{text}"
            );
        }
        for (text, says) in [
            ("RocFFT", "`RocFFT` is not a Debian source package name"),
            ("r", "`r` is not a Debian source package name"),
            ("-x", "`-x` is not a Debian source package name"),
            ("rocm hipamd", "`rocm hipamd` is not"),
            ("=6.4.3-5", "`` is not a Debian source package name"),
            ("rocfft=", "the version after `=` is empty"),
            ("rocfft=6.4 -1", "it contains spaces"),
            ("rocfft=:6.4-1", "the epoch before `:` is empty"),
            ("rocfft=x:6.4-1", "the epoch before `:` is not a number"),
            ("rocfft=6.4-", "the revision after the last `-` is empty"),
            ("rocfft=1:-1", "the upstream version is empty"),
            ("rocfft=v6.4-1", "does not start with a digit"),
            ("rocfft=6.4_1-1", "the upstream version has a character"),
            ("rocfft=6.4-1_2", "the revision has a character"),
            ("rocfft=6.4=1", "the upstream version has a character"),
        ] {
            let e = parse_source(text).expect_err(text).to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
