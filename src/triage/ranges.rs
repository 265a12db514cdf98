//! What moved between a baseline's lock and a run's, for one cell: the
//! sources whose commit moved — each a range of commits, counted and with
//! its first subjects (`gadget 8d6356a → 6caaf39 (36 commits)`) — and the
//! packages of its environment, the ones that matter (ROCm, LLVM, the
//! matrix's `report.packages`) first.

use std::path::Path;

use super::store::MovedSource;
use crate::store::lock::{Lock, LockedSource};

/// Subjects kept per moved source.
pub const SUBJECTS: usize = 8;

/// The largest range triage bisects by itself: past it, the range is
/// named and `rocmatrix bisect` is the way on.
pub const MAX_COMMITS: usize = 20_000;

/// Why a moved source's commits cannot be listed, in words.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

/// One source that moved in one cell: its entries in both locks.
#[derive(Debug, Clone)]
pub struct Moved {
    pub base: LockedSource,
    pub run: LockedSource,
}

/// The sources of `cell` whose commit differs between the two locks
/// (matched by name), in the run's order.
pub fn sources(base: &Lock, run: &Lock, cell: &str) -> Vec<Moved> {
    let (Some(b), Some(r)) = (base.cells.get(cell), run.cells.get(cell)) else {
        return Vec::new();
    };
    r.sources
        .iter()
        .filter_map(|now| {
            let was = b.sources.iter().find(|s| s.name == now.name)?;
            (was.commit != now.commit).then(|| Moved {
                base: was.clone(),
                run: now.clone(),
            })
        })
        .collect()
}

/// The commits of a moved source, oldest first, the baseline's commit
/// first: first-parent where the baseline's commit is on that chain, else
/// every commit. Errors are said in words (a force-pushed history, a
/// baseline commit that is not an ancestor).
pub fn commits(
    cache: &Path,
    m: &Moved,
) -> Result<(Vec<crate::source::range::RangeCommit>, bool), Unreadable> {
    let (name, url) = (&m.run.name, &m.run.url);
    let (from, to) = (&m.base.commit, &m.run.commit);
    let first = crate::source::range::commits(cache, name, url, from, to, true);
    let (range, first_parent) = match first {
        Ok(r) => (r, true),
        Err(e) if e.to_string().contains("first-parent chain") => (
            crate::source::range::commits(cache, name, url, from, to, false)
                .map_err(|e| Unreadable(e.to_string()))?,
            false,
        ),
        Err(e) => {
            let text = e.to_string();
            return Err(Unreadable(if text.contains("not found") {
                let which = if text.contains(from.as_str()) {
                    ("baseline's", from)
                } else {
                    ("run's", to)
                };
                format!(
                    "source {name}: the {} commit {} is no longer in the history of {url} \
                     (force-pushed or gone)",
                    which.0,
                    crate::digest::short(which.1)
                )
            } else {
                format!("source {name}: {text}")
            }));
        }
    };
    Ok((range.commits, first_parent))
}

/// The moved source as `triage.json` and the report name it.
pub fn describe(cache: &Path, m: &Moved) -> MovedSource {
    let mut out = MovedSource {
        name: m.run.name.clone(),
        url: m.run.url.clone(),
        from: m.base.commit.clone(),
        to: m.run.commit.clone(),
        commits: None,
        subjects: Vec::new(),
        error: None,
    };
    match commits(cache, m) {
        Ok((c, _)) => {
            out.commits = Some(c.len().saturating_sub(1));
            out.subjects = c
                .iter()
                .skip(1)
                .take(SUBJECTS)
                .map(|c| format!("{} {}", crate::digest::short(&c.id), c.subject))
                .collect();
        }
        Err(e) => out.error = Some(e.0),
    }
    out
}

impl MovedSource {
    /// `gadget 8d6356a → 6caaf39 (36 commits)`.
    pub fn text(&self) -> String {
        let short = |s: &str| s[..s.len().min(7)].to_string();
        let count = match (self.commits, &self.error) {
            (Some(1), _) => " (1 commit)".to_string(),
            (Some(n), _) => format!(" ({n} commits)"),
            (None, Some(_)) => " (history not readable)".to_string(),
            (None, None) => String::new(),
        };
        format!(
            "{} {} → {}{count}",
            self.name,
            short(&self.from),
            short(&self.to)
        )
    }
}

/// Whether a package is one that matters: it matches one of the report's
/// `packages:` globs, or of the default ones when none are given.
pub fn matters(important: &[String]) -> impl Fn(&str) -> bool + '_ {
    let globs: Vec<&str> = if important.is_empty() {
        crate::results::facts::DEFAULT_PACKAGES.to_vec()
    } else {
        important.iter().map(String::as_str).collect()
    };
    move |n: &str| globs.iter().any(|g| crate::plan::glob::matches(g, n))
}

/// The packages of `cell`'s environment that differ, each as `name from →
/// to` (`+name v`, `−name v`), the ones matching `important` globs first.
pub fn packages(base: &Lock, run: &Lock, cell: &str, important: &[String]) -> Vec<String> {
    let env = |l: &Lock| {
        l.cells
            .get(cell)
            .and_then(|c| l.environments.get(&c.environment))
            .map(|e| e.packages.clone())
    };
    let (Some(before), Some(now)) = (env(base), env(run)) else {
        return Vec::new();
    };
    let matters = matters(important);
    // Moved and added packages in name order, then removed ones.
    let changes = crate::image::packages::changes(&before, &now);
    let (kept, removed): (Vec<_>, Vec<_>) = changes.into_iter().partition(|(_, _, v)| v.is_some());
    let mut out: Vec<(bool, String)> = kept
        .into_iter()
        .chain(removed)
        .filter_map(|(name, w, v)| {
            let text = match (w, v) {
                (Some(w), Some(v)) => format!("{name} {w} → {v}"),
                (None, Some(v)) => format!("+{name} {v}"),
                (Some(w), None) => format!("−{name} {w}"),
                (None, None) => return None,
            };
            Some((matters(&name), text))
        })
        .collect();
    out.sort_by_key(|(m, _)| !*m);
    out.into_iter().map(|(_, s)| s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_and_added_packages_come_before_removed_ones_the_important_first() {
        let lock = |packages: &[(&str, &str)]| -> Lock {
            serde_json::from_value(serde_json::json!({
                "lock_version": 1, "rocmatrix_version": "0", "matrix_file": "m", "matrix_hash": "h",
                "environments": {"e": {"family": "debian",
                    "base": {"reference": "debian:sid", "id": "b", "origin": {"how": "pulled"}},
                    "image": {"tag": "t", "id": "i", "reused": false},
                    "packages": packages.iter().map(|(n, v)| (n.to_string(), v.to_string()))
                        .collect::<std::collections::BTreeMap<_, _>>()}},
                "cells": {"c": {"environment": "e"}},
            }))
            .unwrap()
        };
        let base = lock(&[
            ("a", "1"),
            ("b", "1"),
            ("libamdhip64-6", "6.4.1"),
            ("zz", "1"),
        ]);
        let run = lock(&[
            ("a", "2"),
            ("c", "1"),
            ("libamdhip64-6", "6.4.3"),
            ("zz", "1"),
        ]);
        assert_eq!(
            packages(&base, &run, "c", &["libamdhip64*".to_string()]),
            ["libamdhip64-6 6.4.1 → 6.4.3", "a 1 → 2", "+c 1", "−b 1"]
        );
    }

    #[test]
    fn a_moved_source_reads_as_one_move_with_its_commit_count() {
        let m = MovedSource {
            name: "gadget".into(),
            url: "u".into(),
            from: "8d6356a0000".into(),
            to: "6caaf390000".into(),
            commits: Some(36),
            subjects: vec![],
            error: None,
        };
        assert_eq!(m.text(), "gadget 8d6356a → 6caaf39 (36 commits)");
    }
}
