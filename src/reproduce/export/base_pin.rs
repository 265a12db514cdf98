//! How a reproducer gets the run's base image ([`BasePin`]): by registry
//! digest, by image id, bootstrapped again from the Debian snapshot archive
//! at the run's Release (`make-base.sh`), or imported from the same tarball;
//! and the lines of `run.sh` and the README that say and check it.

use crate::image::{BaseImage, BaseOrigin};
use crate::store::lock::Bootstrap;

/// How the reproducer gets the base image the run had: never a registry's
/// image of the same name that merely happens to be there today.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BasePin {
    /// No lock: the matrix file's base, whatever it is today.
    Unpinned { reference: String },
    /// `FROM name@sha256:…`: the registry gives exactly the run's base.
    Digest(String),
    /// From a registry, but the engine knows no digest for it: `run.sh`
    /// pulls it if missing and stops unless its image id is the run's.
    Id { reference: String, id: String },
    /// Bootstrapped: `make-base.sh` makes it again from the Debian snapshot
    /// archive; `run.sh` stops unless the local image carries the
    /// bootstrap's suite and Release date.
    Bootstrap {
        reference: String,
        bootstrap: Bootstrap,
        /// The snapshot archive's timestamp for the Release date,
        /// `20261030T080801Z`.
        snapshot: Option<String>,
    },
    /// Imported from a root file system tarball: `run.sh` stops unless it
    /// was imported again under the run's name.
    Tarball {
        reference: String,
        tarball: String,
        sha256: String,
    },
}

impl BasePin {
    /// The name the Containerfile's `FROM` uses.
    pub fn reference(&self) -> &str {
        match self {
            BasePin::Digest(r) => r,
            BasePin::Unpinned { reference }
            | BasePin::Id { reference, .. }
            | BasePin::Bootstrap { reference, .. }
            | BasePin::Tarball { reference, .. } => reference,
        }
    }
}

/// The pin for the lock's `base` (none without a lock): by registry digest
/// when it came from a registry and the engine knows one, else by what made
/// it.
pub(super) fn base_pin(
    asked: &str,
    base: Option<&BaseImage>,
    digests: &dyn Fn(&str) -> Vec<String>,
) -> BasePin {
    let Some(base) = base else {
        return BasePin::Unpinned {
            reference: asked.to_string(),
        };
    };
    let reference = base.reference.clone();
    let bootstrapped = match &base.origin {
        BaseOrigin::Bootstrapped(b)
        | BaseOrigin::Present {
            bootstrapped: Some(b),
        }
        | BaseOrigin::Registry {
            bootstrapped: Some(b),
            ..
        } => Some(b.clone()),
        _ => None,
    };
    if let Some(b) = bootstrapped {
        return BasePin::Bootstrap {
            reference,
            snapshot: b.release_date.as_deref().and_then(snapshot_timestamp),
            bootstrap: b,
        };
    }
    if let BaseOrigin::Imported { tarball, sha256 } = &base.origin {
        return BasePin::Tarball {
            reference,
            tarball: tarball.clone(),
            sha256: sha256.clone(),
        };
    }
    let known = if base.id.is_empty() {
        Vec::new()
    } else {
        digests(&base.id)
    };
    match pick_digest(&reference, &known) {
        Some(d) => BasePin::Digest(format!("{reference}@{d}")),
        None => BasePin::Id {
            reference,
            id: base.id.clone(),
        },
    }
}

/// The `sha256:…` of the `RepoDigests` entry for `reference`'s repository
/// (`debian` for `debian:bookworm`; Podman's `docker.io/library/debian`
/// counts), else of the first one.
fn pick_digest(reference: &str, digests: &[String]) -> Option<String> {
    let repo = |r: &str| {
        let r = r.split('@').next().unwrap_or(r);
        // A tag is after the last `:` that follows the last `/`.
        let name = match r.rfind(':') {
            Some(i) if !r[i..].contains('/') => &r[..i],
            _ => r,
        };
        name.trim_start_matches("docker.io/")
            .trim_start_matches("library/")
            .to_string()
    };
    let split = |d: &String| {
        d.split_once('@')
            .filter(|(_, h)| h.starts_with("sha256:"))
            .map(|(n, h)| (n.to_string(), h.to_string()))
    };
    let all: Vec<(String, String)> = digests.iter().filter_map(split).collect();
    all.iter()
        .find(|(n, _)| repo(n) == repo(reference))
        .or(all.first())
        .map(|(_, h)| h.clone())
}

/// `20261030T080801Z` for a Release file's `Date:`, `Fri, 30 Oct 2026
/// 08:08:01 UTC`: the form snapshot.debian.org's archive URLs take.
fn snapshot_timestamp(date: &str) -> Option<String> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut w = date.split_whitespace();
    let mut first = w.next()?;
    if first.ends_with(',') {
        first = w.next()?;
    }
    let day: u32 = first.parse().ok()?;
    let month = w.next()?;
    let month = MONTHS.iter().position(|m| *m == month)? + 1;
    let year: u32 = w.next()?.parse().ok()?;
    let time: Vec<u32> = w
        .next()?
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let zone = w.next().unwrap_or("UTC");
    if time.len() != 3 || !matches!(zone, "UTC" | "GMT" | "+0000" | "Z") || !(1..=31).contains(&day)
    {
        return None;
    }
    Some(format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        time[0], time[1], time[2]
    ))
}

/// The snapshot archive's URL for a timestamp.
fn snapshot_url(timestamp: &str) -> String {
    format!("https://snapshot.debian.org/archive/debian/{timestamp}/")
}

/// The bootstrap command the run used, as a user types it.
fn debootstrap_command(b: &Bootstrap, root: &str, mirror: &str) -> String {
    format!(
        "debootstrap --variant=minbase {} {root} {mirror}",
        crate::plan::ci::shell_quote(&b.suite)
    )
}

/// `make-base.sh`: the base bootstrapped again, from the Debian snapshot
/// archive at the run's Release, checked, and imported under the run's name
/// with the labels `run.sh` checks.
pub(super) fn make_base_script(pin: &BasePin) -> String {
    let BasePin::Bootstrap {
        reference,
        bootstrap: b,
        snapshot,
    } = pin
    else {
        return String::new();
    };
    let q = crate::plan::ci::shell_quote;
    let want = b.release_date.clone().unwrap_or_default();
    format!(
        r#"#!/usr/bin/env bash
# Makes the base image {reference} as the run had it (made by `rocmatrix export`):
# the run bootstrapped it with
#   {run_cmd}
# at the suite's Release of {date}.
# This bootstraps {suite} again from the Debian snapshot archive at that time,
# checks that the Release is the run's, and imports it as {reference}.
# Needs root (debootstrap), debootstrap, tar and the docker CLI.
# SNAPSHOT=<timestamp> picks another snapshot (https://snapshot.debian.org/archive/debian/);
# MIRROR=<url> another mirror altogether.
set -eu
reference={qref}
suite={qsuite}
want={qwant}
snapshot=${{SNAPSHOT:-{stamp}}}
if [ -z "${{MIRROR:-}}" ] && [ -z "$snapshot" ]; then
  echo "make-base.sh: the run did not record the Release date of its bootstrap: set SNAPSHOT=<timestamp> or MIRROR=<url>" >&2
  exit 2
fi
mirror=${{MIRROR:-https://snapshot.debian.org/archive/debian/$snapshot/}}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase "$suite" "$root" "$mirror"
got=$(sed -n 's/^Date: *//p' "$root"/var/lib/apt/lists/*_Release "$root"/var/lib/apt/lists/*_InRelease 2>/dev/null | head -n 1)
if [ -n "$want" ] && [ "$got" != "$want" ]; then
  echo "make-base.sh: $mirror has the Release of $got, the run's was $want;" >&2
  echo "  pick the snapshot that has it (the list of the day is under https://snapshot.debian.org/archive/debian/) and run SNAPSHOT=<timestamp> $0" >&2
  exit 1
fi
tar --numeric-owner -C "$root" -c . | docker import \
  -c 'CMD ["bash"]' \
  -c "LABEL rocmatrix.kind=base" \
  -c "LABEL rocmatrix.base.suite=$suite" \
  -c "LABEL rocmatrix.base.mirror=$mirror" \
  -c "LABEL rocmatrix.base.release-date=\"$got\"" \
  - "$reference"
echo "make-base.sh: imported $reference ({suite} at the Release of $got)"
"#,
        run_cmd = debootstrap_command(b, "ROOT", &b.mirror),
        date = b.release_date.as_deref().unwrap_or("an unrecorded date"),
        suite = b.suite,
        qref = q(reference),
        qsuite = q(&b.suite),
        qwant = q(&want),
        stamp = snapshot.as_deref().unwrap_or(""),
    )
}

/// The lines of `run.sh` that make sure the base it builds on is the run's,
/// before `docker build` can pull a different image of the same name.
pub(super) fn base_check(pin: &BasePin) -> String {
    let q = crate::plan::ci::shell_quote;
    match pin {
        BasePin::Unpinned { .. } | BasePin::Digest(_) => String::new(),
        BasePin::Id { reference, id } => format!(
            r#"base={r}
want={id}
id=$(docker image inspect -f '{{{{.Id}}}}' "$base" 2>/dev/null) || {{ docker pull "$base" >&2 && id=$(docker image inspect -f '{{{{.Id}}}}' "$base"); }} || id=
if [ "${{id#sha256:}}" != "${{want#sha256:}}" ]; then
  echo "run.sh: the base image $base is ${{id:-not here}}, the run's was $want: another image of the same name; get the run's base and tag it $base (see README.md)" >&2
  exit 3
fi
"#,
            r = q(reference),
            id = q(id),
        ),
        BasePin::Bootstrap {
            reference,
            bootstrap: b,
            ..
        } => format!(
            r#"base={r}
want={want}
got=$(docker image inspect -f '{{{{ index .Config.Labels "rocmatrix.base.suite" }}}} {{{{ index .Config.Labels "rocmatrix.base.release-date" }}}}' "$base" 2>/dev/null) || got=
case "$got" in
  "$want"*) ;;
  *) echo "run.sh: $base here is not the base the run bootstrapped ({suite} at the Release of {date}): make it with ./make-base.sh (see README.md)" >&2
     exit 3 ;;
esac
"#,
            r = q(reference),
            want = q(format!("{} {}", b.suite, b.release_date.as_deref().unwrap_or("")).trim_end()),
            suite = b.suite,
            date = b.release_date.as_deref().unwrap_or("an unrecorded date"),
        ),
        BasePin::Tarball {
            reference,
            tarball,
            sha256,
        } => format!(
            r#"base={r}
if ! docker image inspect "$base" >/dev/null 2>&1; then
  echo "run.sh: the base image $base is not here: import the run's root file system (sha256 {sha256}) with: docker import -c 'CMD [\"bash\"]' {t} $base" >&2
  exit 3
fi
"#,
            r = q(reference),
            t = q(tarball),
        ),
    }
}

/// One Markdown line for the README: what the base is and how `run.sh`
/// gets it.
pub(super) fn base_line(pin: &BasePin) -> String {
    match pin {
        BasePin::Unpinned { reference } => format!(
            "`{reference}` as its registry gives it today (the run has no lock: not pinned)"
        ),
        BasePin::Digest(r) => format!(
            "`{r}`, pinned by the digest the registry gave the run (its tag may move; the digest does not)"
        ),
        BasePin::Id { reference, id } => format!(
            "`{reference}`, image id `{id}`; the run's engine knew no registry digest for it, so `run.sh` checks the id of the `{reference}` it finds (or pulls) and stops if it is another image"
        ),
        BasePin::Bootstrap {
            reference,
            bootstrap: b,
            snapshot,
        } => format!(
            "`{reference}`, bootstrapped by the run: `{cmd}` at the suite's Release of {date}. A registry's `{reference}` is another image: `run.sh` stops unless the local `{reference}` carries that suite and Release date, and `sudo ./make-base.sh` makes it with `{again}`{checks}",
            cmd = debootstrap_command(b, "ROOT", &b.mirror),
            date = b.release_date.as_deref().unwrap_or("an unrecorded date"),
            again = debootstrap_command(
                b,
                "ROOT",
                &snapshot
                    .as_deref()
                    .map(snapshot_url)
                    .unwrap_or_else(|| "$MIRROR".to_string())
            ),
            checks = if b.release_date.is_some() {
                " (the Debian snapshot archive at the Release date) and checks that the Release is the run's"
            } else {
                " (set `SNAPSHOT=` or `MIRROR=`: the run did not record the Release date)"
            },
        ),
        BasePin::Tarball {
            reference,
            tarball,
            sha256,
        } => format!(
            "`{reference}`, imported by the run from `{tarball}` (sha256 `{sha256}`); `run.sh` stops unless it is imported again under that name"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{base, bootstrap};
    use super::*;

    #[test]
    fn a_release_date_is_a_snapshot_timestamp() {
        assert_eq!(
            snapshot_timestamp("Fri, 30 Oct 2026 08:08:01 UTC").as_deref(),
            Some("20261030T080801Z")
        );
        assert_eq!(
            snapshot_timestamp("Sat, 1 Aug 2026 20:01:09 +0000").as_deref(),
            Some("20260801T200109Z")
        );
        for bad in [
            "",
            "Fri, 30 Foo 2026 08:08:01 UTC",
            "Fri, 30 Oct 2026 08:08 UTC",
            "Fri, 30 Oct 2026 08:08:01 CET",
        ] {
            assert_eq!(snapshot_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_registry_base_is_pinned_by_its_digest() {
        let d = |_: &str| {
            vec![
                "127.0.0.1:5000/base@sha256:aa".to_string(),
                "debian@sha256:bb".to_string(),
            ]
        };
        for origin in [
            BaseOrigin::Pulled,
            BaseOrigin::Present { bootstrapped: None },
        ] {
            assert_eq!(
                base_pin("debian:bookworm", Some(&base(origin)), &d),
                BasePin::Digest("debian:bookworm@sha256:bb".into())
            );
        }
        // Podman's names count; another repository only when it is the only one.
        assert_eq!(
            pick_digest(
                "debian:bookworm",
                &["docker.io/library/debian@sha256:cc".into()]
            ),
            Some("sha256:cc".into())
        );
        assert_eq!(
            pick_digest("localhost:5000/x:1", &["other@sha256:dd".into()]),
            Some("sha256:dd".into())
        );
        // No digest known: the reproducer checks the image id.
        let none = |_: &str| Vec::new();
        let pin = base_pin("debian:bookworm", Some(&base(BaseOrigin::Pulled)), &none);
        assert_eq!(
            pin,
            BasePin::Id {
                reference: "debian:bookworm".into(),
                id: "sha256:1d".into()
            }
        );
        let script = base_check(&pin);
        assert!(script.contains("want=sha256:1d"), "{script}");
        assert!(
            script.contains("another image of the same name"),
            "{script}"
        );
    }

    #[test]
    fn a_bootstrapped_base_says_how_to_make_it_and_is_checked() {
        let never =
            |_: &str| -> Vec<String> { panic!("a bootstrapped base has no registry digest") };
        let b = bootstrap(Some("Fri, 30 Oct 2026 08:08:01 UTC"));
        for origin in [
            BaseOrigin::Bootstrapped(b.clone()),
            BaseOrigin::Present {
                bootstrapped: Some(b.clone()),
            },
        ] {
            let pin = base_pin("debian:sid", Some(&base(origin)), &never);
            assert_eq!(
                pin,
                BasePin::Bootstrap {
                    reference: "debian:bookworm".into(),
                    bootstrap: b.clone(),
                    snapshot: Some("20261030T080801Z".into())
                }
            );
            let line = base_line(&pin);
            for part in [
                "bootstrapped by the run: `debootstrap --variant=minbase sid ROOT http://deb.debian.org/debian` at the suite's Release of Fri, 30 Oct 2026 08:08:01 UTC",
                "`sudo ./make-base.sh` makes it with `debootstrap --variant=minbase sid ROOT https://snapshot.debian.org/archive/debian/20261030T080801Z/`",
            ] {
                assert!(line.contains(part), "{part:?} not in {line}");
            }
            let check = base_check(&pin);
            assert!(
                check.contains("want='sid Fri, 30 Oct 2026 08:08:01 UTC'"),
                "{check}"
            );
            assert!(check.contains("make it with ./make-base.sh"), "{check}");
            let make = make_base_script(&pin);
            assert!(
                make.contains("snapshot=${SNAPSHOT:-20261030T080801Z}"),
                "{make}"
            );
            assert!(
                make.contains("want='Fri, 30 Oct 2026 08:08:01 UTC'"),
                "{make}"
            );
        }
        // No Release date recorded: no snapshot to name, and the script says so.
        let pin = base_pin(
            "debian:sid",
            Some(&base(BaseOrigin::Bootstrapped(bootstrap(None)))),
            &never,
        );
        assert!(base_line(&pin).contains("set `SNAPSHOT=` or `MIRROR=`"));
        assert!(make_base_script(&pin).contains("snapshot=${SNAPSHOT:-}"));
    }
}
