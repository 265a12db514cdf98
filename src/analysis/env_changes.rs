//! What changed underneath: each environment of a run against the
//! baseline's environment of the same identity ([`super::facts::identity`]:
//! family, base, suites and the packages asked for — not the hash, which
//! changes whenever anything does) — packages added, removed and changed,
//! the base image and its suite's Release date, build snapshots and source
//! commits. Environments without a counterpart are new or gone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::image::packages::changes;
use crate::plan::glob::matches;
use crate::results::facts::{EnvironmentFacts, DEFAULT_PACKAGES};
use crate::results::model::Results;

/// How an environment compares with the baseline's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvState {
    Changed,
    Unchanged,
    /// In this run only.
    New,
    /// In the baseline only.
    Gone,
    /// One side recorded no package list (a results.json from before
    /// rocmatrix recorded them, or a run without a lock).
    Unknown,
}

/// One package that differs; `from` is the baseline's version, `to` this
/// run's (absent when added or removed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageChange {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Selected by `report.packages` (or the default ROCm/LLVM globs).
    #[serde(default)]
    pub important: bool,
}

impl PackageChange {
    /// `libllvm21 1:21.1.8-13 → 1:21.1.8-14`, `+tzdata 2026b`, `−tzdata 2025b`.
    pub fn text(&self) -> String {
        match (&self.from, &self.to) {
            (Some(a), Some(b)) => format!("{} {a} → {b}", self.name),
            (None, Some(b)) => format!("+{} {b}", self.name),
            (Some(a), None) => format!("−{} {a}", self.name),
            (None, None) => self.name.clone(),
        }
    }
}

/// Something else that changed: the base image, its Release date, a build
/// snapshot, a source commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueChange {
    pub what: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// A source that moved from one commit to another: its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Of such a source: the commits after `from` up to `to` (counted by
    /// the report from the source cache; absent where it could not read
    /// them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commits: Option<usize>,
    /// Their first subjects, oldest first (`6caaf39 Fix the queue`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
}

impl ValueChange {
    /// `base image sha256:a → sha256:b`, `source gadget 8d6356a… →
    /// 6caaf39… (36 commits)`.
    pub fn text(&self) -> String {
        let v = |s: &Option<String>| s.clone().unwrap_or_else(|| "none".into());
        let count = match self.commits {
            Some(1) => " (1 commit)".to_string(),
            Some(n) => format!(" ({n} commits)"),
            None => String::new(),
        };
        format!("{} {} → {}{count}", self.what, v(&self.from), v(&self.to))
    }
}

/// One environment against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentChange {
    pub state: EnvState,
    /// The environment hash (short) in this run; empty when gone.
    #[serde(default)]
    pub environment: String,
    /// The baseline's (short); empty when new.
    #[serde(default)]
    pub baseline_environment: String,
    pub identity: String,
    pub base: String,
    /// This run's cells in it (the baseline's when gone).
    pub cells: Vec<String>,
    /// The packages that matter first, then the rest, each by name.
    pub packages: Vec<PackageChange>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other: Vec<ValueChange>,
}

impl EnvironmentChange {
    /// How many package changes are of the packages that matter.
    pub fn important(&self) -> usize {
        self.packages.iter().filter(|p| p.important).count()
    }

    /// One line: the changes that matter and others up to `max` in all,
    /// then how many more.
    pub fn line(&self, max: usize) -> String {
        match self.state {
            EnvState::New => return "new environment (not in the baseline)".into(),
            EnvState::Gone => return "gone (only in the baseline)".into(),
            EnvState::Unknown => {
                return "unknown: the baseline or this run recorded no package list".into()
            }
            EnvState::Unchanged => return "unchanged".into(),
            EnvState::Changed => {}
        }
        let mut parts: Vec<String> = self.other.iter().map(ValueChange::text).collect();
        parts.extend(self.packages.iter().map(PackageChange::text));
        let more = parts.len().saturating_sub(max);
        parts.truncate(max);
        let mut s = parts.join(", ");
        if more > 0 {
            s.push_str(&format!(" and {more} more"));
        }
        s
    }
}

/// Compares every environment of `run` with the baseline's of the same
/// identity, in the run's order, then the baseline's gone ones.
pub fn compare(run: &Results, baseline: &Results) -> Vec<EnvironmentChange> {
    let globs: Vec<&str> = if run.report.packages.is_empty() {
        DEFAULT_PACKAGES.to_vec()
    } else {
        run.report.packages.iter().map(String::as_str).collect()
    };
    let mut used = vec![false; baseline.environments.len()];
    let mut out = Vec::new();
    for now in &run.environments {
        let found = baseline
            .environments
            .iter()
            .enumerate()
            .find(|(i, b)| !used[*i] && !now.identity.is_empty() && b.identity == now.identity);
        let Some((i, before)) = found else {
            out.push(alone(now, EnvState::New));
            continue;
        };
        used[i] = true;
        out.push(between(before, now, &globs));
    }
    for (i, before) in baseline.environments.iter().enumerate() {
        if !used[i] {
            out.push(alone(before, EnvState::Gone));
        }
    }
    out
}

fn alone(e: &EnvironmentFacts, state: EnvState) -> EnvironmentChange {
    let (environment, baseline_environment) = match state {
        EnvState::Gone => (String::new(), e.environment.clone()),
        _ => (e.environment.clone(), String::new()),
    };
    EnvironmentChange {
        state,
        environment,
        baseline_environment,
        identity: e.identity.clone(),
        base: e.base.clone(),
        cells: e.cells.clone(),
        packages: Vec::new(),
        other: Vec::new(),
    }
}

fn between(before: &EnvironmentFacts, now: &EnvironmentFacts, globs: &[&str]) -> EnvironmentChange {
    let mut c = alone(now, EnvState::Unchanged);
    c.baseline_environment = before.environment.clone();
    if before.installed.is_empty() || now.installed.is_empty() {
        c.state = EnvState::Unknown;
        return c;
    }
    let important = |name: &str| globs.iter().any(|g| matches(g, name));
    let mut packages: Vec<PackageChange> = changes(&before.installed, &now.installed)
        .into_iter()
        .map(|(name, from, to)| PackageChange {
            important: important(&name),
            name,
            from,
            to,
        })
        .collect();
    packages.sort_by_key(|p| !p.important);
    c.packages = packages;
    let mut other = Vec::new();
    let mut value = |what: &str, a: Option<&String>, b: Option<&String>| {
        if a != b {
            other.push(ValueChange {
                what: what.to_string(),
                from: a.cloned(),
                to: b.cloned(),
                ..ValueChange::default()
            });
        }
    };
    value(
        "base image",
        Some(&before.base_id).filter(|s| !s.is_empty()),
        Some(&now.base_id).filter(|s| !s.is_empty()),
    );
    value(
        "suite Release date",
        before.release_date.as_ref(),
        now.release_date.as_ref(),
    );
    for (key, from, to) in changes(&before.builds, &now.builds) {
        other.push(ValueChange {
            what: format!("build {key}"),
            from,
            to,
            ..ValueChange::default()
        });
    }
    other.extend(source_changes(&before.sources, &now.sources));
    c.other = other;
    if !c.packages.is_empty() || !c.other.is_empty() {
        c.state = EnvState::Changed;
    }
    c
}

/// Sources that moved, came or went. The facts key a source by its name
/// and the ref a cell asked for (`gadget (6caaf39…)`), so a source pinned
/// to a commit that the new run pins to another reads as one gone and one
/// new; where a name has exactly one ref on each side, it is one source
/// that moved: `source gadget 6caaf39… → 8d6356a…`, with both refs.
fn source_changes(
    before: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) -> Vec<ValueChange> {
    let name_of = |key: &str| key.split(" (").next().unwrap_or(key).to_string();
    let refs =
        |m: &BTreeMap<String, String>, name: &str| m.keys().filter(|k| name_of(k) == name).count();
    let mut out = Vec::new();
    // Name → (its key and commit before, its key and commit now).
    type Side = Option<(String, String)>;
    let mut moved: BTreeMap<String, (Side, Side)> = BTreeMap::new();
    for (key, from, to) in changes(before, now) {
        let name = name_of(&key);
        let one_each = refs(before, &name) == 1 && refs(now, &name) == 1;
        match (from, to) {
            (Some(f), None) if one_each => moved.entry(name).or_default().0 = Some((key, f)),
            (None, Some(t)) if one_each => moved.entry(name).or_default().1 = Some((key, t)),
            (from, to) => out.push(ValueChange {
                what: format!("source {key}"),
                // The same ref at another commit: it moved.
                source: (from.is_some() && to.is_some()).then_some(name),
                from,
                to,
                ..ValueChange::default()
            }),
        }
    }
    for (name, (was, is)) in moved {
        // `gadget (v1.2)` → `v1.2`; a ref that is its commit says nothing more.
        let named = |key: &str, commit: &str| {
            let r = key
                .strip_prefix(&name)
                .unwrap_or("")
                .trim()
                .trim_start_matches('(')
                .trim_end_matches(')')
                .to_string();
            (!r.is_empty() && !commit.starts_with(&r)).then_some(r)
        };
        match (was, is) {
            (Some((wk, w)), Some((ik, i))) => out.push(ValueChange {
                what: match (named(&wk, &w), named(&ik, &i)) {
                    (None, None) => format!("source {name}"),
                    (a, b) => format!(
                        "source {name} ({} → {})",
                        a.unwrap_or_else(|| crate::digest::short(&w).to_string()),
                        b.unwrap_or_else(|| crate::digest::short(&i).to_string())
                    ),
                },
                from: Some(w),
                to: Some(i),
                source: Some(name.clone()),
                ..ValueChange::default()
            }),
            (Some((wk, w)), None) => out.push(ValueChange {
                what: format!("source {wk}"),
                from: Some(w),
                ..ValueChange::default()
            }),
            (None, Some((ik, i))) => out.push(ValueChange {
                what: format!("source {ik}"),
                to: Some(i),
                ..ValueChange::default()
            }),
            (None, None) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(env: &str, identity: &str, pkgs: &[(&str, &str)]) -> EnvironmentFacts {
        EnvironmentFacts {
            environment: env.into(),
            base: "debian:sid".into(),
            cells: vec![format!("{env}.cell")],
            packages: BTreeMap::new(),
            identity: identity.into(),
            installed: pkgs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            base_id: "sha256:b".into(),
            release_date: None,
            builds: BTreeMap::new(),
            sources: BTreeMap::new(),
            source_urls: BTreeMap::new(),
        }
    }

    fn results(envs: Vec<EnvironmentFacts>) -> Results {
        let mut r: Results = serde_json::from_value(serde_json::json!({
            "version": 1, "name": "m", "runs": [], "keys": [], "report": {"rows": [], "columns": []}, "cells": []
        }))
        .unwrap();
        r.environments = envs;
        r
    }

    #[test]
    fn environments_are_matched_by_identity_and_packages_diffed() {
        let base = results(vec![
            facts(
                "aaa",
                "id1",
                &[("libllvm21", "1:21.1.8-13"), ("bash", "5.2"), ("gone", "1")],
            ),
            facts("bbb", "id2", &[("bash", "5.2")]),
            facts("ccc", "id3", &[("bash", "5.2")]),
        ]);
        let run = results(vec![
            facts(
                "xxx",
                "id1",
                &[
                    ("libllvm21", "1:21.1.8-14"),
                    ("bash", "5.3"),
                    ("added", "2"),
                ],
            ),
            facts("yyy", "id2", &[("bash", "5.2")]),
            facts("zzz", "id4", &[("bash", "5.2")]),
        ]);
        let c = compare(&run, &base);
        let states: Vec<EnvState> = c.iter().map(|c| c.state).collect();
        assert_eq!(
            states,
            [
                EnvState::Changed,
                EnvState::Unchanged,
                EnvState::New,
                EnvState::Gone
            ]
        );
        assert_eq!(c[0].baseline_environment, "aaa");
        assert_eq!(c[0].important(), 1);
        assert_eq!(
            c[0].line(10),
            "libllvm21 1:21.1.8-13 → 1:21.1.8-14, +added 2, bash 5.2 → 5.3, −gone 1"
        );
        assert_eq!(
            c[0].line(2),
            "libllvm21 1:21.1.8-13 → 1:21.1.8-14, +added 2 and 2 more"
        );
        assert_eq!(c[3].baseline_environment, "ccc");
        assert!(c[1].packages.is_empty());
    }

    #[test]
    fn a_side_without_a_package_list_is_unknown() {
        let base = results(vec![facts("aaa", "id1", &[])]);
        let run = results(vec![facts("xxx", "id1", &[("bash", "5.3")])]);
        assert_eq!(compare(&run, &base)[0].state, EnvState::Unknown);
    }

    #[test]
    fn a_source_pinned_to_another_commit_is_one_source_that_moved() {
        let map = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let old = "6caaf39aa1b2c3d4e5f60718293a4b5c6d7e8f90";
        let new = "8d6356a1b2c3d4e5f60718293a4b5c6d7e8f9012";
        let before = map(&[
            (&format!("gadget ({})", &old[..7]), old),
            ("tool (main)", "aaaa"),
        ]);
        let now = map(&[
            (&format!("gadget ({})", &new[..7]), new),
            ("tool (main)", "bbbb"),
        ]);
        let texts: Vec<String> = source_changes(&before, &now)
            .iter()
            .map(ValueChange::text)
            .collect();
        assert_eq!(
            texts,
            [
                "source tool (main) aaaa → bbbb".to_string(),
                format!("source gadget {old} → {new}"),
            ]
        );
        // Tags: the refs say which.
        let before = map(&[("gadget (v1.2)", old)]);
        let now = map(&[("gadget (v1.3)", new)]);
        assert_eq!(
            source_changes(&before, &now)[0].what,
            "source gadget (v1.2 → v1.3)"
        );
        // Two refs of one source on a side are not paired.
        let now = map(&[("gadget (v1.3)", new), ("gadget (v1.4)", old)]);
        assert_eq!(source_changes(&before, &now).len(), 3);
    }

    #[test]
    fn a_moved_source_is_named_for_its_commit_count() {
        let map = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let before = map(&[("tool (main)", "aaaa"), ("gone (main)", "cccc")]);
        let now = map(&[("tool (main)", "bbbb"), ("gadget (v1)", "dddd")]);
        let changes = source_changes(&before, &now);
        let named: Vec<(&str, Option<&str>)> = changes
            .iter()
            .map(|c| (c.what.as_str(), c.source.as_deref()))
            .collect();
        assert_eq!(
            named,
            [
                ("source gadget (v1)", None),
                ("source gone (main)", None),
                ("source tool (main)", Some("tool")),
            ]
        );
        let mut moved = changes[2].clone();
        moved.commits = Some(36);
        assert_eq!(moved.text(), "source tool (main) aaaa → bbbb (36 commits)");
        moved.commits = Some(1);
        assert!(moved.text().ends_with("(1 commit)"));
    }
}
