//! What a triage searches: the run's signatures that are new against the
//! baseline (and the baseline's that are gone), one cell each, and per
//! signature the searches its inputs call for —
//!
//! * every source of the cell whose commit moved between the two locks: its
//!   commits, the other sources held at the run's commits;
//! * an ordered axis that the signature's attribution names, between the
//!   cell's value and the nearest value where the same cell passed;
//! * the packages that moved, when no source did.
//!
//! Nothing here runs a probe; [`super::drive`] carries the plans out.

use std::path::{Path, PathBuf};

use super::ranges::{self, Moved};
use super::store::{Change, Over};
use super::TriageError;
use crate::analysis::signature::{skeleton, Seen, Signature};
use crate::bisect::judge::{Regress, Shown};
use crate::results::{CellVerdict, Results};
use crate::store::lock::Lock;
use crate::store::record::RunManifest;
use crate::store::RunStore;

/// A run as triage reads it.
pub struct RunSide {
    pub dir: PathBuf,
    pub manifest: RunManifest,
    /// Its lock; `None` for a run that has none (it did not finish).
    pub lock: Option<Lock>,
    pub results: Results,
}

/// Reads a run: its plan, lock and results (signatures found).
pub fn read(dir: &Path) -> Result<RunSide, TriageError> {
    let store = RunStore::open(dir, Path::new(crate::store::DEFAULT_OUT))?;
    let manifest = store.manifest()?;
    let lock_path = crate::store::layout::lock_of(&store.dir);
    let lock = if lock_path.is_file() {
        Some(Lock::load(&lock_path)?)
    } else {
        None
    };
    let source = crate::results::Source::run(&store.dir)?;
    let results = crate::analysis::collect(
        &source,
        crate::results::junit::Limits::default(),
        &mut crate::results::NoSink,
    );
    Ok(RunSide {
        dir: store.dir,
        manifest,
        lock,
        results,
    })
}

/// One search to make.
#[derive(Debug, Clone)]
pub struct Plan {
    pub over: Over,
    pub name: String,
    pub good: String,
    pub bad: String,
    pub regress: Regress,
    /// `--only` pairs that make the probes one cell.
    pub only: Vec<(String, String)>,
    /// Sources held at the run's commits.
    pub pins: Vec<(String, String)>,
    /// The commits between the ends, when known (git).
    pub points: usize,
    /// The moved packages (`Over::Packages`).
    pub packages: Vec<String>,
    /// Their groups, searched from the baseline's versions to the run's.
    pub package_space: Option<Box<crate::bisect::packages::PackageSpace>>,
    /// Why this search cannot be made (recorded, not run).
    pub could_not: Option<String>,
}

/// One signature to triage.
#[derive(Debug, Clone)]
pub struct Task {
    pub change: Change,
    pub signature: Shown,
    pub cell: String,
    pub baseline: Option<PathBuf>,
    pub plans: Vec<Plan>,
    /// Why nothing can be searched for it.
    pub could_not: Option<String>,
}

/// The run's signatures new against `base` and `base`'s gone from the
/// run, in the run's order, then the gone ones.
pub fn changed(run: &mut Results, base: &Results) -> (Vec<Signature>, Vec<Signature>) {
    let mut base = base.clone();
    if base.signatures.is_empty() && base.failing_cells() > 0 {
        base.signatures = crate::analysis::signature::find(&base);
    }
    crate::analysis::regress::compare_signatures(run, &base);
    let new = run
        .signatures
        .iter()
        .filter(|s| s.baseline == Some(Seen::New))
        .cloned()
        .collect();
    let now: std::collections::HashSet<String> =
        run.signatures.iter().map(|s| skeleton(&s.text)).collect();
    let gone = base
        .signatures
        .iter()
        .filter(|s| !now.contains(&skeleton(&s.text)))
        .cloned()
        .collect();
    (new, gone)
}

/// A cell's `--only` pairs: every axis value it has.
fn only_of(results: &Results, cell: &str) -> Vec<(String, String)> {
    results
        .cell(cell)
        .map(|c| {
            c.values
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The searches of a new signature (`Change::New`: good = baseline, bad =
/// run) or a gone one (`Change::Gone`: bad = baseline, good = run).
pub fn task(change: Change, sig: &Signature, run: &RunSide, base: &RunSide, cache: &Path) -> Task {
    let other = match change {
        Change::New => &base.results,
        Change::Gone => &run.results,
    };
    let cell = cell_of(sig, other);
    let mut t = Task {
        change,
        signature: Shown::of(sig),
        cell: cell.clone(),
        baseline: Some(base.dir.clone()),
        plans: Vec::new(),
        could_not: None,
    };
    if change == Change::New {
        t.plans.extend(pinned_axis_plan(sig, run, &cell));
    }
    if other.cell(&cell).is_none() {
        if t.plans.is_empty() {
            t.could_not = Some(format!(
                "the {} has no cell {cell}: nothing to compare it with",
                match change {
                    Change::New => "baseline",
                    Change::Gone => "run",
                }
            ));
        }
        return t;
    }
    let (Some(run_lock), Some(base_lock)) = (&run.lock, &base.lock) else {
        if t.plans.is_empty() {
            t.could_not = Some(format!(
                "{} has no lock.json: its inputs are not known",
                if run.lock.is_none() {
                    run.dir.display()
                } else {
                    base.dir.display()
                }
            ));
        }
        return t;
    };
    let run_cell = run_lock.cells.get(&cell);
    let base_cell = base_lock.cells.get(&cell);
    let run_sources = run_cell.map(|c| c.sources.len()).unwrap_or(0);
    let base_sources = base_cell.map(|c| c.sources.len()).unwrap_or(0);
    if run_sources > 0 && base_sources == 0 {
        t.could_not = Some(format!(
            "the baseline's lock.json records no source commits for cell {cell}: \
             the good end of its sources is not known"
        ));
        return t;
    }
    let only = only_of(&run.results, &cell);
    let moved = ranges::sources(base_lock, run_lock, &cell);
    for m in &moved {
        t.plans
            .push(source_plan(change, m, run_lock, &cell, &only, cache));
    }
    if moved.is_empty() {
        t.plans.extend(packages_plan(
            change,
            (run, base),
            (run_lock, base_lock),
            &cell,
            &only,
        ));
    }
    if t.plans.is_empty() {
        t.could_not = Some(format!(
            "nothing moved between the baseline and this run for cell {cell} (the same \
             sources and packages): a flaky failure, or a cause outside the lock"
        ));
    }
    t
}

/// The cell a signature is searched in: the first of its cells that the
/// other run has too, else its first.
fn cell_of(sig: &Signature, other: &Results) -> String {
    sig.cells
        .iter()
        .find(|c| other.cell(c).is_some())
        .or_else(|| sig.cells.first())
        .cloned()
        .unwrap_or_default()
}

/// The search along an ordered axis its attribution names, within the run
/// (from the nearest value where the cell passed in it), with the sources
/// held where the run had them; `None` when no ordered axis is named. It
/// needs no baseline: a first run's triage asks it alone.
pub fn pinned_axis_plan(sig: &Signature, run: &RunSide, cell: &str) -> Option<Plan> {
    let mut p = axis_plan(sig, &run.results, cell)?;
    p.pins = run
        .lock
        .as_ref()
        .and_then(|l| l.cells.get(cell))
        .map(|c| {
            c.sources
                .iter()
                .map(|s| (s.name.clone(), s.commit.clone()))
                .collect()
        })
        .unwrap_or_default();
    Some(p)
}

/// The packages that moved between the two locks (`run`'s first), when
/// some did: listed, and searched in groups from the baseline's versions
/// to the run's (the signature new: its start; gone: its fix).
fn packages_plan(
    change: Change,
    (run, base): (&RunSide, &RunSide),
    (run_lock, base_lock): (&Lock, &Lock),
    cell: &str,
    only: &[(String, String)],
) -> Option<Plan> {
    let important = &run.manifest.report.packages;
    let packages = ranges::packages(base_lock, run_lock, cell, important);
    let matters = ranges::matters(important);
    let space = crate::bisect::packages::space(base_lock, run_lock, cell, |n| matters(n));
    (!packages.is_empty()).then(|| Plan {
        over: Over::Packages,
        name: "packages".into(),
        good: base.dir.display().to_string(),
        bad: run.dir.display().to_string(),
        regress: match change {
            Change::New => Regress::Error,
            Change::Gone => Regress::Success,
        },
        only: only.to_vec(),
        pins: Vec::new(),
        points: space
            .as_ref()
            .map_or(packages.len(), |s| s.groups.len() + 1),
        packages,
        package_space: space.map(Box::new),
        could_not: None,
    })
}

/// The search over a moved source's commits.
fn source_plan(
    change: Change,
    m: &Moved,
    run_lock: &Lock,
    cell: &str,
    only: &[(String, String)],
    cache: &Path,
) -> Plan {
    let (good, bad, regress) = match change {
        Change::New => (m.base.commit.clone(), m.run.commit.clone(), Regress::Error),
        Change::Gone => (
            m.run.commit.clone(),
            m.base.commit.clone(),
            Regress::Success,
        ),
    };
    let pins = run_lock
        .cells
        .get(cell)
        .map(|c| {
            c.sources
                .iter()
                .filter(|s| s.name != m.run.name)
                .map(|s| (s.name.clone(), s.commit.clone()))
                .collect()
        })
        .unwrap_or_default();
    let mut plan = Plan {
        over: Over::Source,
        name: m.run.name.clone(),
        good,
        bad,
        regress,
        only: only.to_vec(),
        pins,
        points: 0,
        packages: Vec::new(),
        package_space: None,
        could_not: None,
    };
    match ranges::commits(cache, m) {
        Ok((commits, _)) => {
            plan.points = commits.len();
            if commits.len() > ranges::MAX_COMMITS {
                plan.could_not = Some(format!(
                    "source {}: the range {}..{} holds {} commits, more than the {} triage \
                     bisects by itself; bisect it with `rocmatrix bisect --source {} --good {} \
                     --bad {}`",
                    m.run.name,
                    crate::digest::short(&m.base.commit),
                    crate::digest::short(&m.run.commit),
                    commits.len() - 1,
                    ranges::MAX_COMMITS,
                    m.run.name,
                    plan.good,
                    plan.bad
                ));
            }
        }
        Err(e) => plan.could_not = Some(e.0),
    }
    plan
}

/// The search over an ordered axis that the signature's attribution
/// names: from the cell's value to the nearest value where the cell with
/// the same other values passed in this run.
fn axis_plan(sig: &Signature, results: &Results, cell: &str) -> Option<Plan> {
    let values_of = |axis: &str| -> Vec<String> {
        let mut v: Vec<String> = results
            .cells
            .iter()
            .filter_map(|c| c.values.get(axis).cloned())
            .collect();
        v.sort_by(|a, b| crate::analysis::attribution::compare_versions(a, b));
        v.dedup();
        v
    };
    let me = results.cell(cell)?;
    for p in &sig.attribution.predicates {
        let axis = &p.axis;
        let values = values_of(axis);
        if values.len() < 2 || !values.iter().all(|v| crate::bisect::space::is_version(v)) {
            continue;
        }
        let bad = me.values.get(axis)?.clone();
        let at = values.iter().position(|v| *v == bad)?;
        // The other values held: those every value of the axis has a cell
        // with (`suite`, which an include sets from `llvm`, is not one).
        let with = |c: &crate::results::CellResult, v: &str| {
            c.values.get(axis).map(String::as_str) == Some(v)
        };
        let fixed: Vec<(String, String)> = me
            .values
            .iter()
            .filter(|(k, x)| {
                *k != axis
                    && values.iter().all(|v| {
                        results
                            .cells
                            .iter()
                            .any(|c| with(c, v) && c.values.get(*k) == Some(*x))
                    })
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // The cell with the axis at `v` and the held values the same.
        let passes = |v: &str| {
            results.cells.iter().any(|c| {
                with(c, v)
                    && fixed.iter().all(|(k, x)| c.values.get(k) == Some(x))
                    && c.verdict() == CellVerdict::Passed
            })
        };
        let mut nearest: Option<usize> = None;
        for (i, v) in values.iter().enumerate() {
            if passes(v) && nearest.is_none_or(|n| i.abs_diff(at) < n.abs_diff(at)) {
                nearest = Some(i);
            }
        }
        let good_at = nearest?;
        let only = fixed.clone();
        return Some(Plan {
            over: Over::Axis,
            name: axis.clone(),
            good: values[good_at].clone(),
            bad,
            regress: if good_at < at {
                Regress::Error
            } else {
                Regress::Success
            },
            only,
            pins: Vec::new(),
            points: at.abs_diff(good_at) + 1,
            packages: Vec::new(),
            package_space: None,
            could_not: None,
        });
    }
    None
}
