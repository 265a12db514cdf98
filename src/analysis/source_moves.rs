//! How far each source that moved between a baseline and a run moved: the
//! commits from the baseline's commit to the run's, counted, with their
//! first subjects (`source gadget 8d6356a… → 6caaf39… (36 commits)`), read
//! from the source's mirror in the cache as the run's fetch left it — never
//! from the network, so a report of an old run does not wait on a remote.
//! A source whose mirror is not here, or whose commits no longer connect
//! (a force-push), keeps its plain `from → to`.

use std::path::Path;

use super::env_changes::{EnvironmentChange, ValueChange};
use crate::results::model::Results;

/// Subjects kept per moved source.
pub const SUBJECTS: usize = 8;

/// Counts the commits of every moved source of `changes`, finding each
/// source's URL among `run`'s environments.
pub fn count(changes: &mut [EnvironmentChange], run: &Results, cache: &Path) {
    for change in changes.iter_mut() {
        for v in change.other.iter_mut() {
            let Some(name) = v.source.clone() else {
                continue;
            };
            let Some(url) = run
                .environments
                .iter()
                .find_map(|e| e.source_urls.get(&name))
            else {
                continue;
            };
            range(v, cache, &name, url);
        }
    }
}

/// The first-parent chain when the baseline's commit is on it (a
/// mainline's merges), else every commit between.
fn range(v: &mut ValueChange, cache: &Path, name: &str, url: &str) {
    let (Some(from), Some(to)) = (v.from.as_deref(), v.to.as_deref()) else {
        return;
    };
    let read = |first_parent| {
        crate::source::range::commits_fetched(cache, name, url, from, to, first_parent)
    };
    let Ok(range) = read(true).or_else(|_| read(false)) else {
        return;
    };
    v.commits = Some(range.commits.len().saturating_sub(1));
    v.subjects = range
        .commits
        .iter()
        .skip(1)
        .take(SUBJECTS)
        .map(|c| format!("{} {}", crate::digest::short(&c.id), c.subject))
        .collect();
}
