//! Matching changes against a plan's cells and a run's lock.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::index::Index;
use super::{Affected, AffectedError, Change, FoundLock, Reason, Selection};
use crate::plan::{Cell, Llvm, Plan, SourceRef, Step, TestSuite};
use crate::store::lock::LockedEnvironment;

/// The cells of `plan` that `changes` affect, with their reasons; files
/// are relative to `dir` (the matrix file's directory). A package, source
/// package, `sources:` entry or file that nothing knows (no lock, not
/// `index`) is an error.
pub fn select(
    plan: &Plan,
    changes: Vec<Change>,
    (lock, index): (Option<&FoundLock>, Option<&Index>),
    dir: &Path,
) -> Result<Selection, AffectedError> {
    let files = check(plan, &changes, (lock, index), dir)?;
    let mut by_env: HashMap<&str, Vec<Reason>> = HashMap::new();
    let mut cells = Vec::new();
    for cell in &plan.cells {
        let mut reasons = match changes.iter().any(Change::is_package) {
            true => by_env
                .entry(&cell.environment_hash)
                .or_insert_with(|| packages(cell, &changes, (lock, index)))
                .clone(),
            false => Vec::new(),
        };
        if changes.iter().any(Change::is_package) {
            reasons.extend(test_installs(cell, &changes, (lock, index)));
        }
        reasons.extend(sources(plan, cell, &changes, lock));
        reasons.extend(autopkgtests(cell, &changes));
        for file in &files {
            reasons.extend(uses(plan, cell, file));
        }
        if !reasons.is_empty() {
            cells.push(Affected {
                cell: cell.id.clone(),
                reasons,
            });
        }
    }
    Ok(Selection {
        changes,
        cells,
        total: plan.cells.len(),
        locks: lock.map(|l| l.runs.clone()).unwrap_or_default(),
        index: None,
    })
}

/// A package's name without its architecture (`libfoo:amd64`).
fn bare(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

/// A `file:` change: as given, its path, and (read once) its canonical
/// path and the SHA-256 of its text (for the debug LLVM's patches).
struct FileChange {
    shown: String,
    path: PathBuf,
    canonical: Option<PathBuf>,
    sha256: Option<String>,
}

impl FileChange {
    fn new(shown: &str, path: PathBuf) -> FileChange {
        let text = crate::plan::patch_file::read_text(&path).ok();
        FileChange {
            shown: shown.to_string(),
            canonical: std::fs::canonicalize(&path).ok(),
            sha256: text.map(|t| crate::digest::sha256_hex(t.as_bytes())),
            path,
        }
    }

    /// Whether `p` (a patch's path) is this file.
    fn is(&self, p: &str) -> bool {
        let p = Path::new(p);
        p == self.path
            || (self.canonical.is_some() && std::fs::canonicalize(p).ok() == self.canonical)
    }
}

/// Refuses names nothing knows; gives each file change with its path.
fn check(
    plan: &Plan,
    changes: &[Change],
    (lock, index): (Option<&FoundLock>, Option<&Index>),
    dir: &Path,
) -> Result<Vec<FileChange>, AffectedError> {
    let mut files = Vec::new();
    for c in changes {
        let why = match c {
            // Without a lock nothing can be checked, and every cell is
            // selected (none is described).
            Change::Package { .. } | Change::SourcePackage { .. } => {
                let in_index = index.map(|i| match c {
                    Change::Package { name, .. } => i.has_binary(bare(name)),
                    Change::SourcePackage { name, .. } => i.has_source(name),
                    _ => true,
                });
                let tested = match c {
                    Change::SourcePackage { name, .. } => tests_of(plan).contains(name.as_str()),
                    _ => false,
                };
                match (lock.map(|l| unknown_package(c, l)), in_index) {
                    _ if tested => None,
                    (_, Some(true)) | (Some(None), _) | (None, None) => None,
                    (Some(Some(why)), Some(false)) => Some(format!("{why}, nor does the index")),
                    (Some(Some(why)), None) => Some(why),
                    (None, Some(false)) => Some("the index lists no package so named".into()),
                }
            }
            Change::Source { name, .. } => {
                let names = source_names(plan);
                let list: Vec<&str> = names.iter().copied().collect();
                (!names.contains(name.as_str())).then(|| {
                    let list = words(&list);
                    format!("no `sources:` entry of the matrix is named so (it has: {list})")
                })
            }
            Change::File(f) => {
                let path = std::path::absolute(dir.join(f)).unwrap_or_else(|_| dir.join(f));
                let why = (!path.exists()).then(|| format!("no such file: {}", path.display()));
                files.push(FileChange::new(f, path));
                why
            }
        };
        if let Some(why) = why {
            return Err(AffectedError::Unknown {
                change: c.to_string(),
                why,
            });
        }
    }
    Ok(files)
}

/// Why no environment of the lock knows package change `c`, if none does.
fn unknown_package(c: &Change, l: &FoundLock) -> Option<String> {
    let envs = || l.lock.environments.values();
    let run = l.describe();
    match c {
        Change::Package { name, .. } => {
            let named = |p: &String| p == name || bare(p) == name;
            let known = envs().any(|e| e.packages.keys().any(named))
                || l.tests.values().any(|t| t.keys().any(named));
            (!known).then(|| {
                format!(
                    "no environment {run} describes installed a package so named, nor did a test"
                )
            })
        }
        Change::SourcePackage { name, .. } => {
            let built =
                |e: &LockedEnvironment, p: &String| e.source_of(p).is_some_and(|(s, _)| s == name);
            if envs().any(|e| e.packages.keys().any(|p| built(e, p))) {
                return None;
            }
            // A lock of before sources were recorded knows them by name only.
            let hint = match envs().all(|e| e.sources.is_empty()) {
                true => " (it records no source packages: name the binary packages)",
                false => "",
            };
            Some(format!(
                "no package {run} lists is built from a source so named{hint}"
            ))
        }
        _ => None,
    }
}

fn words(list: &[&str]) -> String {
    match list.is_empty() {
        true => "none".to_string(),
        false => list.join(", "),
    }
}

/// Every source name the plan's cells, builds and LLVM trees use.
fn source_names(plan: &Plan) -> BTreeSet<&str> {
    let cells = plan
        .cells
        .iter()
        .flat_map(|c| c.sources.iter().chain(llvm_tree(c)));
    let builds = plan.builds.iter().flat_map(|b| &b.sources);
    cells.chain(builds).map(|s| s.name.as_str()).collect()
}

fn llvm_tree(cell: &Cell) -> Option<&SourceRef> {
    match cell.environment.as_ref().map(|e| &e.llvm) {
        Some(Llvm::Source(s)) => s.tree.as_deref(),
        _ => None,
    }
}

/// The package changes' reasons for the cell's environment.
fn packages(
    cell: &Cell,
    changes: &[Change],
    (lock, index): (Option<&FoundLock>, Option<&Index>),
) -> Vec<Reason> {
    let env = lock.and_then(|l| l.lock.environments.get(&cell.environment_hash));
    let Some(env) = env else {
        let why = match lock {
            Some(l) => format!(
                "its environment {} is new, or changed since {}",
                crate::digest::short(&cell.environment_hash),
                l.describe()
            ),
            None => "no run of this matrix has a lock yet".to_string(),
        };
        return vec![Reason::Undescribed { why }];
    };
    let asked: BTreeSet<&str> = cell
        .environment
        .iter()
        .flat_map(|e| &e.packages)
        .filter_map(|p| p.split(['=', ' ', '\t']).next())
        .map(bare)
        .collect();
    let mut out = Vec::new();
    for (pkg, version) in &env.packages {
        let Some((source, source_version)) = env.source_of(pkg) else {
            continue;
        };
        let hit = changes.iter().any(|c| match c {
            Change::Package { name, version: v } => {
                (pkg == name || bare(pkg) == name) && v.as_ref() != Some(version)
            }
            Change::SourcePackage { name, version: v } => {
                let built = source == name || index.is_some_and(|i| i.builds(name, bare(pkg)));
                built && v.as_deref() != Some(source_version)
            }
            _ => false,
        });
        if hit {
            out.push(Reason::Installs {
                package: pkg.clone(),
                version: version.clone(),
                source: source.to_string(),
                asked: asked.contains(bare(pkg)),
            });
        }
    }
    out
}

/// The package changes' reasons among what the cell's autopkgtests
/// installed when they ran (in no lock): a package by its name, a source
/// package by the index or by any environment of the lock that installed
/// the same binary. A source's version is compared with the binary's,
/// which is the same but for binary-only uploads.
fn test_installs(
    cell: &Cell,
    changes: &[Change],
    (lock, index): (Option<&FoundLock>, Option<&Index>),
) -> Vec<Reason> {
    let Some(l) = lock else {
        return Vec::new();
    };
    let env = l.lock.environments.get(&cell.environment_hash);
    let installed = l.tests.get(&cell.id).into_iter().flatten();
    let mut out = Vec::new();
    for (pkg, version) in installed {
        if env.is_some_and(|e| e.packages.contains_key(pkg)) {
            continue; // its environment's reason says it
        }
        let lock_source = (l.lock.environments.values())
            .find_map(|e| e.source_of(pkg))
            .map(|(s, _)| s.to_string());
        let source = changes.iter().find_map(|c| match c {
            Change::Package { name, version: v } => ((pkg == name || bare(pkg) == name)
                && v.as_ref() != Some(version))
            .then(|| lock_source.clone().unwrap_or_else(|| bare(pkg).to_string())),
            Change::SourcePackage { name, version: v } => {
                let built = lock_source.as_deref() == Some(name.as_str())
                    || index.is_some_and(|i| i.builds(name, bare(pkg)));
                (built && v.as_ref() != Some(version)).then(|| name.clone())
            }
            _ => None,
        });
        if let Some(source) = source {
            out.push(Reason::TestInstalls {
                package: pkg.clone(),
                version: version.clone(),
                source,
            });
        }
    }
    out
}

/// The `sources:` changes' reasons: the cell's checkout, its build chain's,
/// its LLVM tree; not where the lock says it already ran that commit.
fn sources(plan: &Plan, cell: &Cell, changes: &[Change], lock: Option<&FoundLock>) -> Vec<Reason> {
    let chain = cell.build_chain(&plan.builds);
    let mut out = Vec::new();
    for c in changes {
        let Change::Source { name, commit } = c else {
            continue;
        };
        let ran = |locked: Option<&str>| {
            commit
                .as_deref()
                .is_some_and(|c| locked.is_some_and(|l| l.starts_with(c)))
        };
        let own = cell
            .sources
            .iter()
            .chain(llvm_tree(cell))
            .any(|s| &s.name == name);
        let locked_cell = lock.and_then(|l| l.lock.cells.get(&cell.id));
        let locked = locked_cell
            .and_then(|lc| lc.sources.iter().find(|s| &s.name == name))
            .map(|s| s.commit.as_str());
        if own && !ran(locked) {
            out.push(Reason::BuildsFrom {
                source: name.clone(),
                commit: locked.map(String::from),
                build: None,
            });
        }
        for b in chain
            .iter()
            .filter(|b| b.sources.iter().any(|s| &s.name == name))
        {
            let locked = lock
                .and_then(|l| l.lock.builds.get(&b.key))
                .and_then(|lb| lb.sources.iter().find(|s| &s.name == name))
                .map(|s| s.commit.as_str());
            if !ran(locked) {
                out.push(Reason::BuildsFrom {
                    source: name.clone(),
                    commit: locked.map(String::from),
                    build: Some(b.key.clone()),
                });
            }
        }
    }
    out
}

/// The source package an `autopkgtest:` step runs the tests of, with the
/// step's name (a pinned `source: NAME=VERSION` by its name).
fn tested(cell: &Cell) -> impl Iterator<Item = (&str, &str)> {
    cell.steps.iter().filter_map(|step| match &step.suite {
        Some(TestSuite::Autopkgtest(a)) => {
            let pin = crate::matrix_file::source_pin::parse_source(a.source.as_deref()?).ok()?;
            Some((pin.name, step.name.as_str()))
        }
        _ => None,
    })
}

/// Every source package the plan's `autopkgtest:` steps test.
fn tests_of(plan: &Plan) -> BTreeSet<&str> {
    plan.cells
        .iter()
        .flat_map(|c| tested(c).map(|(s, _)| s))
        .collect()
}

/// The `src:` changes' reasons from the cell's `autopkgtest:` steps: a
/// step testing the source package is affected by any upload of it (what
/// version it tested is in its step log, not in the lock).
fn autopkgtests(cell: &Cell, changes: &[Change]) -> Vec<Reason> {
    let mut out = Vec::new();
    for (source, step) in tested(cell) {
        let named = changes
            .iter()
            .any(|c| matches!(c, Change::SourcePackage { name, .. } if name == source));
        if named {
            out.push(Reason::Tests {
                source: source.to_string(),
                step: step.to_string(),
            });
        }
    }
    out
}

/// How the cell uses the file.
fn uses(plan: &Plan, cell: &Cell, file: &FileChange) -> Vec<Reason> {
    let chain = cell.build_chain(&plan.builds);
    let (shown, path) = (file.shown.as_str(), file.path.as_path());
    let reason = |how: String| Reason::Uses {
        file: shown.to_string(),
        how,
    };
    let mut out = Vec::new();
    let checkouts = cell.sources.iter().map(|s| (s, None));
    let built = chain
        .iter()
        .flat_map(|b| b.sources.iter().map(|s| (s, Some(b.key.as_str()))));
    for (s, build) in checkouts.chain(built) {
        let in_build = build.map(|b| format!(" in build {b}")).unwrap_or_default();
        if s.patches.iter().any(|p| file.is(p)) {
            out.push(reason(format!("a patch of source {}{in_build}", s.name)));
        } else if Path::new(&s.url).is_absolute() && path.starts_with(&s.url) {
            out.push(reason(format!("in the local source {}{in_build}", s.name)));
        }
    }
    let steps = cell.steps.iter().map(|s| (s, None));
    let built = chain
        .iter()
        .flat_map(|b| b.steps.iter().map(|s| (s, Some(b.key.as_str()))));
    for (step, build) in steps.chain(built) {
        if names(step, shown) {
            let in_build = build.map(|b| format!(" of build {b}")).unwrap_or_default();
            out.push(reason(format!("step {}{in_build} names it", step.name)));
        }
    }
    if let Some(env) = &cell.environment {
        if env.setup.as_deref().is_some_and(|s| s.contains(shown)) {
            out.push(reason("the environment's setup names it".into()));
        }
        if llvm_patch(&env.llvm, file.sha256.as_deref()) {
            out.push(reason("a patch of the environment's LLVM".into()));
        }
    }
    out
}

fn names(step: &Step, shown: &str) -> bool {
    step.run.contains(shown)
}

/// Whether the file (its text's SHA-256) is one of the debug LLVM's
/// patches.
fn llvm_patch(llvm: &Llvm, sha256: Option<&str>) -> bool {
    match (llvm, sha256) {
        (Llvm::Source(s), Some(sha)) => s.patches.iter().any(|p| p.sha256 == sha),
        _ => false,
    }
}
