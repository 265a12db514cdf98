//! What `--affected-by` names: a binary package, a source package, a
//! `sources:` entry of the matrix or a file of the matrix's own, each read
//! from its one word and bounded before anything is looked up.

use super::AffectedError;

/// The most changes one `--affected-by` list may name.
pub const MAX_CHANGES: usize = 1024;
/// The most bytes one change may have (a path of the matrix is the longest).
pub const MAX_CHANGE_LEN: usize = 1024;
/// The most bytes of a name or a version (Debian's longest are under 100).
const MAX_NAME: usize = 256;

/// One change a cell may be affected by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `libamdhip64-6` or `libamdhip64-6=6.4.3-6`: a binary package (at the
    /// version it now has).
    Package {
        name: String,
        version: Option<String>,
    },
    /// `src:rocm-hipamd[=6.4.3-6]`: every binary package built from it.
    SourcePackage {
        name: String,
        version: Option<String>,
    },
    /// `source:rocprim[@<commit>]`: a `sources:` entry of the matrix.
    Source {
        name: String,
        commit: Option<String>,
    },
    /// `file:patches/fix.patch`: a file of the matrix's own, relative to
    /// the matrix file's directory (a patch, a script a step names).
    File(String),
}

impl Change {
    /// Whether the change is a package's (it needs a lock to be matched).
    pub fn is_package(&self) -> bool {
        matches!(self, Change::Package { .. } | Change::SourcePackage { .. })
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = |sep: &str, v: &Option<String>| match v {
            Some(v) => format!("{sep}{v}"),
            None => String::new(),
        };
        match self {
            Change::Package { name, version } => write!(f, "{name}{}", at("=", version)),
            Change::SourcePackage { name, version } => write!(f, "src:{name}{}", at("=", version)),
            Change::Source { name, commit } => write!(f, "source:{name}{}", at("@", commit)),
            Change::File(path) => write!(f, "file:{path}"),
        }
    }
}

/// Parses every change of the list, in order, duplicates dropped. A list
/// longer than [`MAX_CHANGES`], or a change longer than
/// [`MAX_CHANGE_LEN`], is refused before any is read.
pub fn parse_all(items: &[String]) -> Result<Vec<Change>, AffectedError> {
    if items.len() > MAX_CHANGES {
        return Err(AffectedError::TooMany {
            count: items.len(),
            max: MAX_CHANGES,
        });
    }
    let mut out: Vec<Change> = Vec::with_capacity(items.len());
    for item in items {
        let change = parse(item)?;
        if !out.contains(&change) {
            out.push(change);
        }
    }
    if out.is_empty() {
        return Err(bad(
            "",
            "name a package, src:PACKAGE, source:NAME or file:PATH",
        ));
    }
    Ok(out)
}

/// Parses one change.
pub fn parse(item: &str) -> Result<Change, AffectedError> {
    if item.len() > MAX_CHANGE_LEN {
        return Err(AffectedError::TooLong {
            start: shown(item),
            len: item.len(),
            max: MAX_CHANGE_LEN,
        });
    }
    let text = item.trim();
    if let Some(rest) = text.strip_prefix("src:") {
        let (name, version) = split(rest, '=');
        return Ok(Change::SourcePackage {
            name: package_name(item, name, false)?,
            version: version.map(|v| version_of(item, v)).transpose()?,
        });
    }
    if let Some(rest) = text.strip_prefix("source:") {
        let (name, commit) = split(rest, '@');
        return Ok(Change::Source {
            name: source_name(item, name)?,
            commit: commit.map(|c| commit_of(item, c)).transpose()?,
        });
    }
    if let Some(path) = text.strip_prefix("file:") {
        return file_of(item, path).map(Change::File);
    }
    let (name, version) = split(text, '=');
    Ok(Change::Package {
        name: package_name(item, name, true)?,
        version: version.map(|v| version_of(item, v)).transpose()?,
    })
}

fn split(s: &str, sep: char) -> (&str, Option<&str>) {
    match s.split_once(sep) {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    }
}

/// A package's name as package managers spell them (Debian's, RPM's,
/// Arch's, Gentoo's atoms without a category): letters, digits, `+ . _ -`;
/// a binary package may carry its architecture (`libfoo:amd64`).
fn package_name(item: &str, name: &str, binary: bool) -> Result<String, AffectedError> {
    let (base, arch) = match (binary, name.split_once(':')) {
        (true, Some((b, a))) => (b, Some(a)),
        _ => (name, None),
    };
    let word = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+._-".contains(c))
    };
    if name.len() > MAX_NAME || !word(base) || arch.is_some_and(|a| !word(a)) {
        return Err(bad(item, "not a package name (letters, digits, `+ . _ -`)"));
    }
    Ok(name.to_string())
}

fn version_of(item: &str, v: &str) -> Result<String, AffectedError> {
    let ok = v.len() <= MAX_NAME
        && v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+~:_-".contains(c));
    match ok {
        true => Ok(v.to_string()),
        false => Err(bad(item, "not a package version (it starts with a digit)")),
    }
}

fn source_name(item: &str, name: &str) -> Result<String, AffectedError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    match ok {
        true => Ok(name.to_string()),
        false => Err(bad(item, "not the name of a `sources:` entry")),
    }
}

fn commit_of(item: &str, c: &str) -> Result<String, AffectedError> {
    match (4..=64).contains(&c.len()) && c.chars().all(|c| c.is_ascii_hexdigit()) {
        true => Ok(c.to_ascii_lowercase()),
        false => Err(bad(item, "not a commit (4 to 64 hex digits)")),
    }
}

fn file_of(item: &str, path: &str) -> Result<String, AffectedError> {
    let path = path.strip_prefix("./").unwrap_or(path);
    match !path.is_empty() && !path.chars().any(char::is_control) {
        true => Ok(path.to_string()),
        false => Err(bad(item, "not a path")),
    }
}

fn bad(item: &str, why: &str) -> AffectedError {
    AffectedError::Bad {
        change: shown(item),
        why: why.to_string(),
    }
}

/// A change as an error shows it: its first 60 characters.
pub(super) fn shown(item: &str) -> String {
    let mut s: String = item.chars().take(60).collect();
    if s.len() < item.len() {
        s.push('…');
    }
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> Change {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn reads_each_kind() {
        assert_eq!(
            one("libamdhip64-6=6.4.3-6"),
            Change::Package {
                name: "libamdhip64-6".into(),
                version: Some("6.4.3-6".into())
            }
        );
        assert_eq!(
            one("src:rocm-hipamd"),
            Change::SourcePackage {
                name: "rocm-hipamd".into(),
                version: None
            }
        );
        assert_eq!(
            one("source:rocprim@ABCDEF12"),
            Change::Source {
                name: "rocprim".into(),
                commit: Some("abcdef12".into())
            }
        );
        assert_eq!(
            one("file:./patches/fix.patch"),
            Change::File("patches/fix.patch".into())
        );
        assert_eq!(one("hipcc:amd64").to_string(), "hipcc:amd64");
        assert_eq!(
            one("src:llvm-toolchain-21=1:21.1.5-1").to_string(),
            "src:llvm-toolchain-21=1:21.1.5-1"
        );
    }

    #[test]
    fn refuses_what_no_manager_names() {
        for s in [
            "",
            "src:",
            "-rf",
            "a b",
            "src:x:amd64",
            "x=",
            "x=abc",
            "source:",
            "source:r@xyz",
            "file:",
            "libfoo;rm",
        ] {
            assert!(matches!(parse(s), Err(AffectedError::Bad { .. })), "{s:?}");
        }
    }

    #[test]
    fn bounds_the_list_and_each_name() {
        let many: Vec<String> = (0..MAX_CHANGES + 1).map(|i| format!("p{i}")).collect();
        assert!(matches!(
            parse_all(&many),
            Err(AffectedError::TooMany { .. })
        ));
        let huge = "a".repeat(1 << 20);
        let e = parse(&huge).unwrap_err();
        assert!(matches!(e, AffectedError::TooLong { .. }));
        assert!(e.to_string().len() < 300, "{e}");
        let long = "a".repeat(MAX_NAME + 1);
        assert!(parse(&long).is_err());
        let two = parse_all(&["a".into(), "a".into(), "src:a".into()]).unwrap();
        assert_eq!(two.len(), 2);
        assert!(parse_all(&[]).is_err());
    }
}
