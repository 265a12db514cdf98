//! The packages installed in an image, listed inside a container with the
//! family profile's command (dpkg-query, rpm -qa, pacman -Q, qlist), and
//! remembered per image id so that a run with its images already built
//! starts no container to list them again.

use std::collections::BTreeMap;

use super::{Family, ImageError};
use crate::engine::{ContainerSpec, Engine, EngineError};
use crate::store::lock::PackageSource;

/// An image's packages, `name → version`, and their source packages where
/// the family's list says them (dpkg's) and the lock records them.
#[derive(Debug, Default)]
pub struct Installed {
    pub versions: BTreeMap<String, String>,
    pub sources: BTreeMap<String, PackageSource>,
}

/// Every package installed in `image` ([`Installed`]). An image
/// without the family's package manager (a root file system made by hand, a
/// vendor's prebuilt image) has no package list: it is locked by its image
/// digest alone, and the second value says so.
pub async fn installed(
    engine: &Engine,
    family: &Family,
    image: &str,
    owner: &str,
) -> Result<(Installed, Option<String>), ImageError> {
    let spec = ContainerSpec {
        name: format!(
            "rocmatrix-{owner}-pkgs-{}",
            &crate::digest::sha256_hex(image.as_bytes())[..12]
        ),
        image: image.to_string(),
        labels: crate::engine::labels::owner_labels(owner, "packages"),
        ..Default::default()
    };
    let id = engine.start_container(&spec).await?;
    let listed = engine
        .exec_capture(&id, &["sh", "-c", family.list_packages()])
        .await;
    let _ = engine.remove_container(&id).await;
    let (code, out) = listed?;
    // 127: the shell found no such command.
    if code == 127 {
        let note = format!(
            "{image} has no package manager (`{}` not found): locked by its image digest alone",
            family.list_packages()
        );
        return Ok((Installed::default(), Some(note)));
    }
    if code != 0 {
        return Err(EngineError::failed(
            format!("listing packages in {image}"),
            format!("`{}` exited {code}: {}", family.list_packages(), out.trim()),
        )
        .into());
    }
    Ok((listing(&out), None))
}

/// Cached package lists are at most this large.
const CACHE_LIMIT: u64 = 16 * 1024 * 1024;

/// [`installed`], remembered in the cache directory under the image's id:
/// an image id is the hash of the image's content, so the same id always
/// has the same packages. A list that cannot be read back is made afresh,
/// and so is one written before the family's list named source packages.
pub async fn installed_cached(
    engine: &Engine,
    family: &Family,
    image: &str,
    image_id: &str,
    owner: &str,
) -> Result<(Installed, Option<String>), ImageError> {
    let path = cache_path(&family.profile.family, image_id);
    let with_sources = family.list_packages().contains("${source:");
    if let Some(p) = &path {
        if let Ok(text) =
            crate::safe_read::read_bounded_string(p, CACHE_LIMIT, "a package list", "")
        {
            let listed = listing(&text);
            let stale = with_sources && !text.lines().any(|l| l.split('\t').count() >= 4);
            if !listed.versions.is_empty() && !stale {
                return Ok((listed, None));
            }
        }
    }
    let (listed, note) = installed(engine, family, image, owner).await?;
    if let (Some(p), None, false) = (&path, &note, listed.versions.is_empty()) {
        // A cache: when it cannot be written, the next run lists again.
        let _ = write_cache(p, &listed);
    }
    Ok((listed, note))
}

/// `<cache>/packages/<family>-<id hex>.tsv`; none for an id that is not a
/// plain digest.
fn cache_path(family: &str, image_id: &str) -> Option<std::path::PathBuf> {
    let hex = image_id.strip_prefix("sha256:").unwrap_or(image_id);
    let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    (hex.len() == 64 && plain(hex) && plain(family)).then(|| {
        crate::dirs::cache_dir()
            .join("packages")
            .join(format!("{family}-{hex}.tsv"))
    })
}

fn write_cache(path: &std::path::Path, listed: &Installed) -> Result<(), crate::store::StoreError> {
    let text: String = listed
        .versions
        .iter()
        .map(|(n, v)| match listed.sources.get(n) {
            Some(s) => format!(
                "{n}\t{v}\t{}\t{}\n",
                s.name,
                s.version.as_deref().unwrap_or(v)
            ),
            None => format!("{n}\t{v}\n"),
        })
        .collect();
    crate::store::write_atomic(path, text.as_bytes())
}

/// Parses `name<TAB>version[<TAB>source<TAB>source version]` lines.
pub fn listing(text: &str) -> Installed {
    let sources = text.lines().filter_map(|l| {
        let c: Vec<&str> = l.split('\t').map(str::trim).collect();
        let s = PackageSource::recorded(c.first()?, c.get(1)?, c.get(2)?, c.get(3).unwrap_or(&""));
        Some((c[0].to_string(), s?))
    });
    Installed {
        versions: parse(text),
        sources: sources.collect(),
    }
}

/// Parses `name<TAB>version` lines; other lines and columns are ignored.
pub fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let mut cols = l.split('\t');
            let (name, version) = (cols.next()?.trim(), cols.next()?.trim());
            (!name.is_empty() && !version.is_empty())
                .then(|| (name.to_string(), version.to_string()))
        })
        .collect()
}

/// The keys whose values differ between two maps (package sets, say), in
/// key order: (key, value before, value after), absent where a side lacks it.
pub fn changes(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Vec<(String, Option<String>, Option<String>)> {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| (k.clone(), before.get(k).cloned(), after.get(k).cloned()))
        .collect()
}

/// Differences between two package sets, one line each: removed and changed
/// packages, then added ones.
pub fn diff(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    let all = changes(before, after);
    let gone_or_changed = all.iter().filter_map(|(name, v, w)| match (v, w) {
        (Some(v), None) => Some(format!("- {name} {v}")),
        (Some(v), Some(w)) => Some(format!("~ {name} {v} -> {w}")),
        _ => None,
    });
    let added = all.iter().filter_map(|(name, v, w)| match (v, w) {
        (None, Some(w)) => Some(format!("+ {name} {w}")),
        _ => None,
    });
    gone_or_changed.chain(added).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_diffs() {
        let a = parse("bash\t5.2.15-2+b2\nhipcc:amd64\t5.2.3-12\n\ngarbage\n");
        assert_eq!(a.len(), 2);
        assert_eq!(a["hipcc:amd64"], "5.2.3-12");
        let b = parse("bash\t5.2.15-2+b3\ngdb\t13.1-3\n");
        assert_eq!(
            diff(&a, &b),
            [
                "~ bash 5.2.15-2+b2 -> 5.2.15-2+b3",
                "- hipcc:amd64 5.2.3-12",
                "+ gdb 13.1-3"
            ]
        );
    }

    #[test]
    fn keeps_source_packages_that_differ() {
        let l = listing(concat!(
            "libamdhip64-6:amd64\t6.4.3-5+b1\trocm-hipamd\t6.4.3-5\n",
            "bash\t5.2.15-2\tbash\t5.2.15-2\nhipcc\t5.7.1-3\n",
        ));
        assert_eq!(l.versions["libamdhip64-6:amd64"], "6.4.3-5+b1");
        assert_eq!(l.versions["hipcc"], "5.7.1-3");
        let hip = &l.sources["libamdhip64-6:amd64"];
        assert_eq!(
            (hip.name.as_str(), hip.version.as_deref()),
            ("rocm-hipamd", Some("6.4.3-5"))
        );
        assert_eq!(l.sources.len(), 1, "{:?}", l.sources);
    }
}
