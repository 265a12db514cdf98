//! Selection over a plan and a hand-made lock.

use std::collections::BTreeMap;

use super::*;
use crate::matrix_file::Spec;
use crate::plan::Plan;
use crate::store::lock::{
    BaseImage, BaseOrigin, EnvImage, Lock, LockedCell, LockedEnvironment, LockedPatch,
    LockedSource, PackageSource,
};

const MATRIX: &str = "name: m
matrix:
  suite: [bookworm, sid]
  gfx: [gfx900, gfx1030]
environment:
  family: debian
  base: 'debian:{{ matrix.suite }}'
  packages: ['{{ \"librocblas-dev\" if matrix.suite == \"sid\" else \"hipcc\" }}']
sources:
  - name: rocprim
    url: https://example.org/rocprim.git
    ref: develop
    patches: ['{{ \"fix.patch\" if matrix.gfx == \"gfx900\" else \"other.patch\" }}']
steps:
  - {name: build, run: 'bash scripts/build.sh {{ matrix.gfx }}'}
";

fn env(packages: &[(&str, &str, Option<&str>)]) -> LockedEnvironment {
    LockedEnvironment {
        family: "debian".into(),
        base: BaseImage {
            reference: "debian:sid".into(),
            id: "sha256:b".into(),
            origin: BaseOrigin::Pulled,
        },
        image: EnvImage {
            tag: "t".into(),
            id: "i".into(),
            reused: false,
            pulled: false,
            registry: None,
        },
        packages: packages
            .iter()
            .map(|(n, v, _)| (n.to_string(), v.to_string()))
            .collect(),
        sources: packages
            .iter()
            .filter_map(|(n, _, s)| {
                let source = PackageSource {
                    name: (*s)?.to_string(),
                    version: None,
                };
                Some((n.to_string(), source))
            })
            .collect(),
    }
}

/// The plan (over a directory with the patches and the script) and a
/// lock of it: bookworm installed hipcc and libamdhip64-5, sid
/// librocblas-dev, librocblas4 and libamdhip64-6; rocprim at `abc123…`.
fn fixture() -> (tempfile::TempDir, Plan, FoundLock) {
    let dir = tempfile::tempdir().unwrap();
    for f in ["fix.patch", "other.patch", "scripts/build.sh"] {
        let p = dir.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "x\n").unwrap();
    }
    let spec = Spec::parse(&dir.path().join("m.yaml"), MATRIX).unwrap();
    let plan = Plan::build(&spec, 100).unwrap();
    let mut environments = BTreeMap::new();
    let mut cells = BTreeMap::new();
    for c in &plan.cells {
        let sid = c.value("suite") == Some("sid");
        let e = match sid {
            true => env(&[
                ("librocblas-dev", "6.4.3-1", Some("rocblas")),
                ("librocblas4", "6.4.3-1", Some("rocblas")),
                ("libamdhip64-6:amd64", "6.4.3-5", Some("rocm-hipamd")),
                ("bash", "5.2", None),
            ]),
            false => env(&[
                ("hipcc", "5.2.3-12", Some("rocm-hipamd")),
                ("libamdhip64-5", "5.2.3-12", Some("rocm-hipamd")),
                ("bash", "5.2", None),
            ]),
        };
        environments.insert(c.environment_hash.clone(), e);
        let source = LockedSource {
            name: "rocprim".into(),
            url: "u".into(),
            reference: "develop".into(),
            commit: format!("abc123{}", "0".repeat(34)),
            patches: vec![LockedPatch {
                file: "fix.patch".into(),
                sha256: "s".into(),
            }],
        };
        let cell = LockedCell {
            environment: c.environment_hash.clone(),
            build: None,
            sources: vec![source],
        };
        cells.insert(c.id.clone(), cell);
    }
    let lock = Lock {
        lock_version: 1,
        rocmatrix_version: "0".into(),
        matrix_file: "m.yaml".into(),
        matrix_hash: "h".into(),
        environments,
        cells,
        builds: BTreeMap::new(),
    };
    let found = FoundLock {
        runs: vec!["runs/r1".into()],
        lock,
        tests: BTreeMap::new(),
    };
    (dir, plan, found)
}

fn pick(changes: &[&str]) -> Result<Selection, AffectedError> {
    let (dir, plan, lock) = fixture();
    let items: Vec<String> = changes.iter().map(|s| s.to_string()).collect();
    let changes = change::parse_all(&items)?;
    select(&plan, changes, (Some(&lock), None), dir.path())
}

fn ids(s: &Selection) -> Vec<&str> {
    s.cells.iter().map(|c| c.cell.as_str()).collect()
}

#[test]
fn a_dependency_selects_the_environments_that_installed_it() {
    let s = pick(&["libamdhip64-6"]).unwrap();
    assert_eq!(ids(&s), ["sid.gfx900", "sid.gfx1030"]);
    assert_eq!(
        s.cells[0].reasons[0].to_string(),
        "installs libamdhip64-6:amd64 6.4.3-5 (src:rocm-hipamd) as a dependency"
    );
    let own = pick(&["bash"]).unwrap();
    assert_eq!(
        own.cells[0].reasons[0].to_string(),
        "installs bash 5.2 as a dependency"
    );
    let text = s.lines();
    assert!(
        text.ends_with("2 of 4 cells affected by libamdhip64-6 (lock of runs/r1)\n"),
        "{text}"
    );
    let asked = pick(&["librocblas-dev"]).unwrap();
    assert!(asked.cells[0].reasons[0].to_string().ends_with("asked for"));
}

#[test]
fn a_source_package_selects_every_binary_of_it() {
    let s = pick(&["src:rocm-hipamd"]).unwrap();
    assert_eq!(s.cells.len(), 4);
    let bookworm = &s
        .cells
        .iter()
        .find(|c| c.cell == "bookworm.gfx900")
        .unwrap()
        .reasons;
    assert_eq!(bookworm.len(), 2, "{bookworm:?}");
    assert_eq!(
        ids(&pick(&["src:rocblas"]).unwrap()),
        ["sid.gfx900", "sid.gfx1030"]
    );
    // A package without a recorded source is its own.
    assert_eq!(pick(&["src:bash"]).unwrap().cells.len(), 4);
}

#[test]
fn a_version_already_installed_affects_nothing() {
    let s = pick(&["libamdhip64-6=6.4.3-5"]).unwrap();
    assert!(s.cells.is_empty());
    assert!(s
        .lines()
        .starts_with("no cell is affected by libamdhip64-6=6.4.3-5: 0 of 4 cells"));
    assert_eq!(pick(&["libamdhip64-6=6.4.3-6"]).unwrap().cells.len(), 2);
}

#[test]
fn sources_and_files_select_their_cells() {
    assert_eq!(pick(&["source:rocprim"]).unwrap().cells.len(), 4);
    assert!(pick(&["source:rocprim@abc123"]).unwrap().cells.is_empty());
    assert_eq!(pick(&["source:rocprim@def456"]).unwrap().cells.len(), 4);
    let s = pick(&["file:fix.patch"]).unwrap();
    assert_eq!(ids(&s), ["bookworm.gfx900", "sid.gfx900"]);
    assert_eq!(
        s.cells[0].reasons[0].to_string(),
        "uses file:fix.patch (a patch of source rocprim)"
    );
    let s = pick(&["file:scripts/build.sh"]).unwrap();
    assert_eq!(s.cells.len(), 4);
    assert_eq!(
        s.cells[0].reasons[0].to_string(),
        "uses file:scripts/build.sh (step build names it)"
    );
}

#[test]
fn unknown_names_are_refused_by_name() {
    for (c, says) in [
        ("libamdhip64-7", "installed a package so named"),
        ("src:rocm-hipam", "built from a source so named"),
        ("source:rocfft", "it has: rocprim"),
        ("file:nope.patch", "no such file"),
    ] {
        let e = pick(&[c]).unwrap_err();
        assert!(e.is_usage());
        let text = e.to_string();
        assert!(text.contains(c) && text.contains(says), "{text}");
    }
}

#[test]
fn without_a_lock_every_cell_is_undescribed() {
    let (dir, plan, _) = fixture();
    let changes = change::parse_all(&["libanything".to_string()]).unwrap();
    let s = select(&plan, changes, (None, None), dir.path()).unwrap();
    assert_eq!(s.cells.len(), 4);
    assert!(s.cells[0].reasons[0]
        .to_string()
        .starts_with("no lock describes it"));
}

#[test]
fn a_lock_of_another_matrix_is_refused() {
    let out = tempfile::tempdir().unwrap();
    let e = lock::named(&["nope".into()], out.path(), "m").unwrap_err();
    assert!(e.to_string().starts_with("--lock nope: not a run"), "{e}");
    assert!(
        matches!(e, AffectedError::NotARun { .. }) && e.is_usage(),
        "{e}"
    );
    assert!(lock::newest(out.path(), "m").unwrap().is_none());
}

#[test]
fn a_later_run_of_some_cells_keeps_what_an_earlier_run_said_of_the_others() {
    let (dir, plan, whole) = fixture();
    let mut partial = whole.clone();
    partial.runs = vec!["runs/r2".into()];
    let sid: Vec<String> = plan
        .cells
        .iter()
        .filter(|c| c.value("suite") == Some("sid"))
        .map(|c| c.environment_hash.clone())
        .collect();
    partial.lock.environments.retain(|k, _| sid.contains(k));
    let bash = change::parse_all(&["bash".to_string()]).unwrap();
    let alone = select(&plan, bash, (Some(&partial), None), dir.path()).unwrap();
    assert_eq!(alone.cells.len(), 4);
    let bookworm = &alone.cells[0].reasons[0];
    assert!(bookworm
        .to_string()
        .contains("is new, or changed since the lock of runs/r2"));
    let changes = change::parse_all(&["hipcc".to_string()]).unwrap();
    assert!(partial.merge(whole.runs[0].clone(), whole.lock.clone()));
    assert!(!partial.merge("runs/r0".into(), whole.lock));
    assert_eq!(partial.describe(), "the locks of runs/r2 and 1 more run");
    let merged = select(&plan, changes, (Some(&partial), None), dir.path()).unwrap();
    assert_eq!(ids(&merged), ["bookworm.gfx900", "bookworm.gfx1030"]);
    assert!(merged.lines().contains("(locks of runs/r2 and 1 more)"));
}

#[test]
fn an_index_names_the_binaries_a_lock_lists_without_their_source() {
    let (dir, plan, mut lock) = fixture();
    // A lock of before sources were recorded.
    lock.lock
        .environments
        .values_mut()
        .for_each(|e| e.sources.clear());
    let index = index::Index::parse("Package: libamdhip64-6\nSource: rocm-hipamd\n\nPackage: libamdhip64-7\nSource: rocm-hipamd\n");
    let changes = change::parse_all(&["src:rocm-hipamd".to_string()]).unwrap();
    let s = select(&plan, changes.clone(), (Some(&lock), None), dir.path());
    assert!(s
        .unwrap_err()
        .to_string()
        .contains("name the binary packages"));
    let s = select(&plan, changes, (Some(&lock), Some(&index)), dir.path()).unwrap();
    assert_eq!(ids(&s), ["sid.gfx900", "sid.gfx1030"]);
    // Known to the index, installed nowhere: nothing selected, no error.
    let changes = change::parse_all(&["libamdhip64-7".to_string()]).unwrap();
    let s = select(&plan, changes, (Some(&lock), Some(&index)), dir.path()).unwrap();
    assert!(s.cells.is_empty());
    let changes = change::parse_all(&["libamdhip64-8".to_string()]).unwrap();
    let e = select(&plan, changes, (Some(&lock), Some(&index)), dir.path()).unwrap_err();
    assert!(e.to_string().ends_with(", nor does the index"), "{e}");
}

/// An `autopkgtest:` step installs its tests' dependencies when it runs,
/// so no lock lists them: a `src:` change selects the cells that test that
/// source package by their step, lock or not, and is known by it.
#[test]
fn a_source_package_selects_the_cells_running_its_autopkgtests() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name: m
matrix:
  package: [rocblas, rocsolver]
  gfx: [gfx900, gfx1030]
environment:
  family: debian
  base: 'debian:sid'
steps:
  - name: autopkgtest
    autopkgtest:
      source: '{{ matrix.package }}'
";
    let spec = Spec::parse(&dir.path().join("m.yaml"), text).unwrap();
    let plan = Plan::build(&spec, 100).unwrap();
    let (_, _, lock) = fixture();
    let changes = change::parse_all(&["src:rocsolver=6.4.3-2".to_string()]).unwrap();
    let s = select(&plan, changes, (Some(&lock), None), dir.path()).unwrap();
    // The lock is of another plan: every cell is undescribed; only the
    // rocsolver cells run its tests.
    let testing: Vec<&str> = s
        .cells
        .iter()
        .filter(|c| c.reasons.iter().any(|r| matches!(r, Reason::Tests { .. })))
        .map(|c| c.cell.as_str())
        .collect();
    assert_eq!(testing, ["rocsolver.gfx900", "rocsolver.gfx1030"]);
    let lines = s.lines();
    assert!(
        lines.contains("runs the autopkgtests of src:rocsolver (step autopkgtest)"),
        "{lines}"
    );
    // Neither the lock nor a step knows it: still an error.
    let changes = change::parse_all(&["src:rocsparse".to_string()]).unwrap();
    assert!(select(&plan, changes, (Some(&lock), None), dir.path()).is_err());
}

/// The kept flagship run: the sid hipsolver and rocsolver cells' tests
/// installed librocblas4 6.4.4-4 when they ran (autopkgtest's own lists);
/// no lock has it. The binary selects exactly those six cells; the source,
/// through an index that says rocblas builds it, selects them beside the
/// cells running rocblas's own tests.
#[test]
fn what_a_cells_autopkgtests_installed_selects_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = Spec::load(&root.join("matrix/debian-autopkgtest.yaml")).unwrap();
    let plan = Plan::build(&spec, 10_000).unwrap();
    let run = root.join("tests/fixtures/debian-autopkgtest/run");
    let found = lock::named(&[run], root, &spec.name).unwrap();
    let dir = root.join("matrix");
    let pick = |change: &str, index: Option<&index::Index>| {
        let changes = change::parse_all(&[change.to_string()]).unwrap();
        select(&plan, changes, (Some(&found), index), &dir).unwrap()
    };
    let by_tests = |s: &Selection| -> Vec<String> {
        let installed =
            |a: &&Affected| (a.reasons.iter()).any(|r| matches!(r, Reason::TestInstalls { .. }));
        s.cells
            .iter()
            .filter(installed)
            .map(|a| a.cell.clone())
            .collect()
    };
    let s = pick("librocblas4", None);
    let mut want: Vec<String> = ["hipsolver", "rocsolver"]
        .iter()
        .flat_map(|p| ["gfx1030", "gfx1100", "gfx90a"].map(|g| format!("sid.{g}.{p}")))
        .collect();
    want.sort();
    let mut got = by_tests(&s);
    got.sort();
    assert_eq!(got, want);
    assert_eq!(s.cells.len(), 6, "{}", s.lines());
    assert!(
        s.lines().contains(
            "sid.gfx1030.rocsolver: its autopkgtests installed librocblas4 6.4.4-4 when they ran"
        ),
        "{}",
        s.lines()
    );
    // The version it ran with selects nothing of it.
    assert!(by_tests(&pick("librocblas4=6.4.4-4", None)).is_empty());
    let index = index::Index::parse("Package: librocblas4\nSource: rocblas\nVersion: 6.4.4-4\n\n");
    let s = pick("src:rocblas", Some(&index));
    assert_eq!(by_tests(&s).len(), 6, "{}", s.lines());
    assert_eq!(s.cells.len(), 12, "{}", s.lines());
    assert!(s
        .lines()
        .contains("installed librocblas4 6.4.4-4 (src:rocblas) when they ran"));
}
