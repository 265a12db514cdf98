//! The ordered space a bisection searches: the values of one axis between
//! two of them, or the commits of a git source between two revisions —
//! oldest first, the old end first and the new end last.
//!
//! An axis's values come in the matrix file's order (include-only values
//! after the axis's own, in include order), or in version order when every
//! value is a number or a dotted version. Every other axis must be fixed
//! by `--only`: each point is exactly one cell. Values that select no cell
//! under `--only` (excluded combinations) are left out of the space.

use std::cmp::Ordering;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::judge::Regress;
use super::BisectError;
use crate::matrix_file::Spec;
use crate::plan::{Cell, Plan};

/// What is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The values of an axis.
    Axis,
    /// The commits of a git source.
    Git,
    /// Groups of the packages that moved between two locks
    /// ([`super::packages`]).
    Packages,
}

/// One point of the space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    /// The axis value, or the full commit id.
    pub value: String,
    /// The commit's subject (git only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

impl Point {
    /// How the point is shown: the value, or the commit's short id.
    pub fn label(&self, kind: Kind) -> String {
        match kind {
            Kind::Axis | Kind::Packages => self.value.clone(),
            Kind::Git => crate::digest::short(&self.value).to_string(),
        }
    }
}

/// The ordered points, the old end first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Space {
    pub kind: Kind,
    /// The axis, or the source's name.
    pub name: String,
    /// The source's URL (git only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether only the first-parent chain was taken (git only).
    #[serde(default)]
    pub first_parent: bool,
    pub points: Vec<Point>,
    /// Values of the axis between the ends that select no cell, left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// The moved packages and what the probes pin (packages only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<Box<super::packages::PackageSpace>>,
}

/// The one cell of `plan` selected by `only`, or why there is not one.
pub fn one_cell(plan: &Plan, only: &[(String, String)], what: &str) -> Result<Cell, BisectError> {
    let selected = plan
        .clone()
        .select(only)
        .map_err(|e| BisectError::Usage(format!("{what}: {e}")))?;
    match selected.cells.len() {
        1 => Ok(selected.cells[0].clone()),
        0 => Err(BisectError::Usage(format!("{what}: no cell"))),
        _ => {
            let varying: Vec<String> = selected
                .keys
                .iter()
                .filter(|k| {
                    let first = selected.cells[0].value(k);
                    selected.cells.iter().any(|c| c.value(k) != first)
                })
                .map(|k| {
                    let mut values: Vec<&str> = Vec::new();
                    for c in &selected.cells {
                        if let Some(v) = c.value(k) {
                            if !values.contains(&v) {
                                values.push(v);
                            }
                        }
                    }
                    format!("{k} ({})", values.join(", "))
                })
                .collect();
            Err(BisectError::Usage(format!(
                "{what}: {} cells, not one; fix the other axes with --only AXIS=VALUE: {}",
                selected.cells.len(),
                varying.join(", ")
            )))
        }
    }
}

/// Whether `v` is a number or a dotted version (`v` allowed in front).
pub fn is_version(v: &str) -> bool {
    let v = v.strip_prefix('v').unwrap_or(v);
    !v.is_empty()
        && v.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The values `axis` has among the cells of `plan`, in the order of the
/// matrix file, or in version order when all are versions.
pub fn axis_values(plan: &Plan, axis: &str) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    for c in &plan.cells {
        if let Some(v) = c.value(axis) {
            if !values.iter().any(|x| x == v) {
                values.push(v.to_string());
            }
        }
    }
    if values.iter().all(|v| is_version(v)) {
        values.sort_by(|a, b| crate::analysis::attribution::compare_versions(a, b));
    }
    values
}

/// The points of `--axis AXIS --good G --bad B`: every value between the
/// ends that selects exactly one cell under `only`.
pub fn axis(
    plan: &Plan,
    axis: &str,
    only: &[(String, String)],
    good: &str,
    bad: &str,
    regress: Regress,
) -> Result<Space, BisectError> {
    if !plan.keys.iter().any(|k| k == axis) {
        return Err(BisectError::Usage(format!(
            "--axis {axis}: no such axis (axes: {})",
            plan.keys.join(", ")
        )));
    }
    if only.iter().any(|(k, _)| k == axis) {
        return Err(BisectError::Usage(format!(
            "--axis {axis} is searched; it cannot be fixed with --only too"
        )));
    }
    let values = axis_values(plan, axis);
    let index = |flag: &str, v: &str| {
        values.iter().position(|x| x == v).ok_or_else(|| {
            BisectError::Usage(format!(
                "{flag} {v}: `{axis}` has no such value (values, in order: {})",
                values.join(", ")
            ))
        })
    };
    let (g, b) = (index("--good", good)?, index("--bad", bad)?);
    if g == b {
        return Err(BisectError::Usage(format!(
            "--good and --bad are both {axis}={good}"
        )));
    }
    let (old, new) = ends_in_order(regress, g, b, good, bad, &format!("{axis}="), || {
        values.join(", ")
    })?;
    let mut points = Vec::new();
    let mut left_out = Vec::new();
    for v in &values[old..=new] {
        let mut with = only.to_vec();
        with.push((axis.to_string(), v.clone()));
        let what = format!("{axis}={v}");
        match one_cell(plan, &with, &what) {
            Ok(_) => points.push(Point {
                value: v.clone(),
                subject: None,
            }),
            Err(_) if v != good && v != bad && no_cell(plan, &with) => left_out.push(v.clone()),
            Err(e) => return Err(e),
        }
    }
    Ok(Space {
        kind: Kind::Axis,
        name: axis.to_string(),
        url: None,
        first_parent: false,
        points,
        left_out,
        packages: None,
    })
}

fn no_cell(plan: &Plan, only: &[(String, String)]) -> bool {
    plan.clone()
        .select(only)
        .map_or(true, |p| p.cells.is_empty())
}

/// `(old, new)` from the indices of the good and bad ends: with `error`
/// the good end is the older, with `success` the bad end; given the other
/// way round, a usage error says so.
fn ends_in_order(
    regress: Regress,
    good: usize,
    bad: usize,
    good_name: &str,
    bad_name: &str,
    prefix: &str,
    order: impl Fn() -> String,
) -> Result<(usize, usize), BisectError> {
    match (regress, good.cmp(&bad)) {
        (Regress::Error, Ordering::Less) => Ok((good, bad)),
        (Regress::Success, Ordering::Greater) => Ok((bad, good)),
        (Regress::Error, _) => Err(BisectError::Usage(format!(
            "the ends are the wrong way round: --good {prefix}{good_name} comes after --bad \
             {prefix}{bad_name} (order: {}); bisect looks for the first bad point after a good \
             one, so --good must be the older end — to find where the failure went away, \
             give --regress success",
            order()
        ))),
        (Regress::Success, _) => Err(BisectError::Usage(format!(
            "the ends are the wrong way round for --regress success: --bad {prefix}{bad_name} \
             must come before --good {prefix}{good_name} (order: {}); it looks for the first \
             good point after a bad one",
            order()
        ))),
    }
}

/// What `--source NAME --good G --bad B` asks for.
#[derive(Debug, Clone, Copy)]
pub struct GitEnds<'a> {
    /// The source's name in the matrix file.
    pub name: &'a str,
    pub good: &'a str,
    pub bad: &'a str,
    pub regress: Regress,
    /// Every commit of the range, not only its first-parent line.
    pub all_commits: bool,
}

/// The points of `--source NAME --good G --bad B`: the commits between
/// the ends, first-parent unless `all_commits`, read from the source's
/// mirror under `cache`.
pub fn git(
    spec: &Spec,
    cell: &Cell,
    ends: GitEnds<'_>,
    cache: &Path,
) -> Result<Space, BisectError> {
    let GitEnds {
        name,
        good,
        bad,
        regress,
        all_commits,
    } = ends;
    let Some(source) = cell.sources.iter().find(|s| s.name == name) else {
        let names: Vec<&str> = spec.sources.iter().map(|s| s.name.as_str()).collect();
        return Err(BisectError::Usage(format!(
            "--source {name}: the matrix file has no such source (sources: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )));
    };
    if !source.patches.is_empty() {
        tracing::info!(
            "source {name}: its {} patch(es) are applied on every commit probed",
            source.patches.len()
        );
    }
    let (from, to) = match regress {
        Regress::Error => (good, bad),
        Regress::Success => (bad, good),
    };
    let range = crate::source::range::commits(cache, name, &source.url, from, to, !all_commits);
    let range = match range {
        Ok(r) => r,
        Err(e) => {
            // Say so plainly when the ends are only the wrong way round.
            if crate::source::range::commits(cache, name, &source.url, to, from, !all_commits)
                .is_ok()
            {
                // The end given as the older is the newer: index 1.
                let (g, b) = match regress {
                    Regress::Error => (1, 0),
                    Regress::Success => (0, 1),
                };
                return Err(
                    ends_in_order(regress, g, b, good, bad, &format!("{name}@"), || {
                        "oldest first: git history".into()
                    })
                    .err()
                    .unwrap_or(BisectError::Usage(e.to_string())),
                );
            }
            return Err(BisectError::Usage(e.to_string()));
        }
    };
    Ok(Space {
        kind: Kind::Git,
        name: name.to_string(),
        url: Some(source.url.clone()),
        first_parent: !all_commits,
        points: range
            .commits
            .into_iter()
            .map(|c| Point {
                value: c.id,
                subject: Some(c.subject),
            })
            .collect(),
        left_out: Vec::new(),
        packages: None,
    })
}

/// The points of a search over the packages that moved ([`super::packages`]).
pub fn packages(space: super::packages::PackageSpace) -> Space {
    Space {
        kind: Kind::Packages,
        name: "packages".into(),
        url: None,
        first_parent: false,
        points: space
            .point_values()
            .into_iter()
            .map(|value| Point {
                value,
                subject: None,
            })
            .collect(),
        left_out: Vec::new(),
        packages: Some(Box::new(space)),
    }
}

/// `spec` with source `name` pinned to `commit` (every cell's).
pub fn pinned(spec: &Spec, name: &str, commit: &str) -> Spec {
    let mut spec = spec.clone();
    for s in spec.sources.iter_mut().filter(|s| s.name == name) {
        s.reference.source = commit.to_string();
    }
    spec
}

/// `spec` with every source named in `pins` pinned to its commit.
pub fn pinned_all(spec: &Spec, pins: &[(String, String)]) -> Spec {
    pins.iter()
        .fold(spec.clone(), |s, (name, commit)| pinned(&s, name, commit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Plan {
        let s = Spec::parse(Path::new("m.yaml"), text).unwrap_or_else(|e| panic!("{e}"));
        Plan::build(&s, 4096).unwrap_or_else(|e| panic!("{e}"))
    }

    const YN: &str = "matrix:
  llvm: ['17', '15', '22', '21']
  gfx: [gfx900, gfx1030]
  args: [yn, plain]
  exclude:
    - {llvm: '17', args: plain}
  include:
    - {llvm: '23', gfx: gfx900, args: yn}
steps:
  - name: a
    run: 'true'
";

    fn only(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn values(s: &Space) -> Vec<&str> {
        s.points.iter().map(|p| p.value.as_str()).collect()
    }

    #[test]
    fn versions_are_ordered_as_versions_with_include_only_values() {
        let p = plan(YN);
        assert_eq!(axis_values(&p, "llvm"), ["15", "17", "21", "22", "23"]);
        assert_eq!(axis_values(&p, "args"), ["yn", "plain"]);
        let o = only(&[("gfx", "gfx900"), ("args", "yn")]);
        let s = axis(&p, "llvm", &o, "15", "23", Regress::Error).unwrap();
        assert_eq!(values(&s), ["15", "17", "21", "22", "23"]);
        let s = axis(&p, "llvm", &o, "17", "21", Regress::Error).unwrap();
        assert_eq!(values(&s), ["17", "21"]);
    }

    #[test]
    fn excluded_values_are_left_out_and_unfixed_axes_refused() {
        let p = plan(YN);
        let s = axis(
            &p,
            "llvm",
            &only(&[("gfx", "gfx900"), ("args", "plain")]),
            "15",
            "21",
            Regress::Error,
        )
        .unwrap();
        assert_eq!(values(&s), ["15", "21"]);
        assert_eq!(s.left_out, ["17"]);
        let e = axis(
            &p,
            "llvm",
            &only(&[("gfx", "gfx900")]),
            "15",
            "22",
            Regress::Error,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("2 cells, not one") && e.contains("args (yn, plain)"),
            "{e}"
        );
    }

    #[test]
    fn ends_the_wrong_way_round_are_refused_with_the_way_out() {
        let p = plan(YN);
        let o = only(&[("gfx", "gfx900"), ("args", "yn")]);
        let e = axis(&p, "llvm", &o, "22", "15", Regress::Error)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("wrong way round") && e.contains("--regress success"),
            "{e}"
        );
        let s = axis(&p, "llvm", &o, "22", "15", Regress::Success).unwrap();
        assert_eq!(values(&s), ["15", "17", "21", "22"]);
        let e = axis(&p, "llvm", &o, "15", "22", Regress::Success)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--bad llvm=22 must come before"), "{e}");
        let e = axis(&p, "llvm", &o, "15", "16", Regress::Error)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--bad 16: `llvm` has no such value"), "{e}");
        let e = axis(&p, "cuda", &o, "15", "16", Regress::Error)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no such axis"), "{e}");
    }

    #[test]
    fn names_and_versions() {
        assert!(is_version("22") && is_version("6.4.3") && is_version("v1.2"));
        assert!(!is_version("sid") && !is_version("6.") && !is_version(""));
    }
}
