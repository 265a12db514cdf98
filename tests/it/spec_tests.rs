//! Matrix files: GitHub Actions' documented examples, values kept as written,
//! and bad input that must be reported with file, line and column.

use std::path::Path;

use rocmatrix::matrix_file::{expand, Spec, SpecError};
use rocmatrix::plan::Plan;

fn spec(text: &str) -> Spec {
    Spec::parse(Path::new("m.yaml"), text).unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> SpecError {
    match Spec::parse(Path::new("m.yaml"), text) {
        Ok(s) => match Plan::build(&s, 4096) {
            Ok(_) => panic!("expected an error for:\n{text}"),
            Err(e) => e,
        },
        Err(e) => e,
    }
}

/// Combinations as `k=v` strings, for compact assertions.
fn combos(text: &str) -> Vec<String> {
    let s = spec(text);
    expand(&s, 4096)
        .unwrap()
        .iter()
        .map(|c| {
            c.values
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

// --- GitHub Actions documentation examples ("Running variations of jobs in a workflow")

#[test]
fn github_example_single_dimension() {
    assert_eq!(
        combos("matrix:\n  version: [10, 12, 14]\n"),
        ["version=10", "version=12", "version=14"]
    );
}

#[test]
fn github_example_multi_dimension_first_axis_outermost() {
    assert_eq!(
        combos("matrix:\n  os: [ubuntu-22.04, ubuntu-20.04]\n  version: [10, 12, 14]\n"),
        [
            "os=ubuntu-22.04,version=10",
            "os=ubuntu-22.04,version=12",
            "os=ubuntu-22.04,version=14",
            "os=ubuntu-20.04,version=10",
            "os=ubuntu-20.04,version=12",
            "os=ubuntu-20.04,version=14",
        ]
    );
}

#[test]
fn github_example_expanding_and_adding_configurations() {
    let text = "matrix:
  fruit: [apple, pear]
  animal: [cat, dog]
  include:
    - color: green
    - color: pink
      animal: cat
    - fruit: apple
      shape: circle
    - fruit: banana
    - fruit: banana
      animal: cat
";
    assert_eq!(
        combos(text),
        [
            "fruit=apple,animal=cat,color=pink,shape=circle",
            "fruit=apple,animal=dog,color=green,shape=circle",
            "fruit=pear,animal=cat,color=pink",
            "fruit=pear,animal=dog,color=green",
            "fruit=banana",
            "fruit=banana,animal=cat",
        ]
    );
}

#[test]
fn github_example_extending_specific_configurations() {
    let text = "matrix:
  os: [windows-latest, ubuntu-latest]
  node: [14, 16]
  include:
    - os: windows-latest
      node: 16
      npm: 6
";
    assert_eq!(
        combos(text),
        [
            "os=windows-latest,node=14",
            "os=windows-latest,node=16,npm=6",
            "os=ubuntu-latest,node=14",
            "os=ubuntu-latest,node=16",
        ]
    );
}

#[test]
fn github_example_adding_configurations() {
    let text = "matrix:
  os: [macos-latest, windows-latest, ubuntu-latest]
  version: [12, 14, 16]
  include:
    - os: windows-latest
      version: 17
";
    let c = combos(text);
    assert_eq!(c.len(), 10);
    assert_eq!(c[9], "os=windows-latest,version=17");
}

#[test]
fn github_example_only_include() {
    let text = "matrix:
  include:
    - site: production
      datacenter: site-a
    - site: staging
      datacenter: site-b
";
    assert_eq!(
        combos(text),
        [
            "site=production,datacenter=site-a",
            "site=staging,datacenter=site-b"
        ]
    );
}

#[test]
fn github_example_excluding_matrix_configurations() {
    let text = "matrix:
  os: [macos-latest, windows-latest]
  version: [12, 14, 16]
  environment: [staging, production]
  exclude:
    - os: macos-latest
      version: 12
      environment: production
    - os: windows-latest
      version: 16
";
    let c = combos(text);
    assert_eq!(c.len(), 9);
    assert!(!c.contains(&"os=macos-latest,version=12,environment=production".to_string()));
    assert!(!c
        .iter()
        .any(|x| x.starts_with("os=windows-latest,version=16")));
}

#[test]
fn include_can_overwrite_values_added_by_an_earlier_include_but_not_axis_values() {
    let text = "matrix:
  os: [linux]
  include:
    - cc: gcc
    - cc: clang
    - os: windows
      cc: msvc
";
    assert_eq!(combos(text), ["os=linux,cc=clang", "os=windows,cc=msvc"]);
}

#[test]
fn include_is_never_merged_into_a_combination_another_include_created() {
    let text = "matrix:
  os: [linux]
  include:
    - os: mac
    - os: mac
      extra: yes
";
    assert_eq!(combos(text), ["os=linux", "os=mac", "os=mac,extra=yes"]);
}

// --- values as written

#[test]
fn axis_values_are_kept_exactly_as_written() {
    let s = spec("matrix:\n  rocm: [5.7, 6.0, 6.10, 1e3, 0x10, yes, ~x, '07']\n");
    assert_eq!(
        s.axes[0].values,
        ["5.7", "6.0", "6.10", "1e3", "0x10", "yes", "~x", "07"]
    );
    let plan = Plan::build(&s, 10).unwrap();
    let ids: Vec<&str> = plan.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        ["5.7", "6.0", "6.10", "1e3", "0x10", "yes", "-x", "07"]
    );
}

#[test]
fn include_and_vars_values_are_kept_as_written() {
    let s = spec(
        "matrix:\n  include:\n    - rocm: 6.10\nvars:\n  v: 1.10\nsteps:\n  - name: s\n    run: echo {{ matrix.rocm }} {{ vars.v }}\n",
    );
    let plan = Plan::build(&s, 10).unwrap();
    assert_eq!(plan.cells[0].steps[0].run, "echo 6.10 1.10");
}

// --- cells

#[test]
fn cell_ids_are_readable_unique_and_stable() {
    let text = "matrix:
  distro: [debian-sid]
  rocm: ['6.4']
  gfx: [gfx1030, gfx1100]
  include:
    - distro: debian-sid
      rocm: '6.4'
      gfx: gfx1030
      extra: x
    - distro: 'debian sid'
      rocm: '6.4'
      gfx: gfx1030
";
    let plan = Plan::build(&spec(text), 100).unwrap();
    let ids: Vec<&str> = plan.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids[1], "debian-sid.6.4.gfx1100");
    // `debian sid` sanitizes to the same id as `debian-sid`: both get a suffix
    // derived from their own values only.
    assert_eq!(ids.len(), 3);
    assert!(ids[0].starts_with("debian-sid.6.4.gfx1030-"), "{ids:?}");
    assert!(ids[2].starts_with("debian-sid.6.4.gfx1030-"), "{ids:?}");
    assert_ne!(ids[0], ids[2]);
    let again = Plan::build(&spec(text), 100).unwrap();
    assert_eq!(plan.cells, again.cells);
    // Disambiguation is deterministic and depends on the cell's own values.
    let text2 = "matrix:\n  distro: [debian-sid, 'debian sid']\n";
    let p2 = Plan::build(&spec(text2), 10).unwrap();
    assert_ne!(p2.cells[0].id, p2.cells[1].id);
    assert!(p2.cells[0].id.starts_with("debian-sid-"));
    for c in &p2.cells {
        assert!(c
            .id
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "._+-~".contains(ch)));
    }
}

#[test]
fn hashes_follow_what_decides_the_outcome() {
    let base = "matrix:
  gfx: [gfx900, gfx1030]
environment:
  base: debian:{{ vars.suite }}
  packages: [hipcc]
vars:
  suite: trixie
steps:
  - name: build
    run: hipcc --offload-arch={{ matrix.gfx }}
";
    let a = Plan::build(&spec(base), 10).unwrap();
    // Same environment for both gfx values, different cell hashes.
    assert_eq!(a.cells[0].environment_hash, a.cells[1].environment_hash);
    assert_ne!(a.cells[0].hash, a.cells[1].hash);
    assert_eq!(a.environments().len(), 1);
    // Changing a step changes the cell hash but not the environment hash.
    let b = Plan::build(&spec(&base.replace("hipcc --", "hipcc -O2 --")), 10).unwrap();
    assert_eq!(a.cells[0].environment_hash, b.cells[0].environment_hash);
    assert_ne!(a.cells[0].hash, b.cells[0].hash);
    // Changing the environment changes both.
    let c = Plan::build(&spec(&base.replace("[hipcc]", "[hipcc, rocminfo]")), 10).unwrap();
    assert_ne!(a.cells[0].environment_hash, c.cells[0].environment_hash);
    assert_ne!(a.cells[0].hash, c.cells[0].hash);
}

// --- bad input: every error names file, line and column

fn assert_points_at(e: &SpecError, line: usize, needle: &str) {
    let shown = e.to_string();
    assert!(shown.starts_with("m.yaml:"), "{shown}");
    assert_eq!(e.pos.map(|p| p.line), Some(line), "{shown}");
    assert!(shown.contains(needle), "`{needle}` not in: {shown}");
}

#[test]
fn unknown_key_is_named_with_its_position() {
    let e = err("name: x\nmatrix:\n  a: [1]\nsteps:\n  - name: a\n    rn: echo\n");
    assert_points_at(&e, 6, "unknown field `rn`");
    assert_eq!(e.pos.unwrap().col, 5);
    let e = err("name: x\nmatrix:\n  a: [1]\nstepz: []\n");
    assert_points_at(&e, 4, "unknown field `stepz`");
    let e = err("matrix:\n  a: [1]\nenvironment:\n  base: x\n  pakages: [y]\n");
    assert_points_at(&e, 5, "unknown field `pakages`");
}

#[test]
fn empty_axis_is_an_error() {
    assert_points_at(&err("matrix:\n  gfx: []\n"), 2, "axis `gfx` is empty");
}

#[test]
fn duplicate_axis_value_is_an_error() {
    let e = err("matrix:\n  rocm:\n    - 6.0\n    - 6.1\n    - 6.0\n");
    assert_points_at(&e, 5, "lists `6.0` twice");
    // 6.1 and 6.10 are different values.
    spec("matrix:\n  rocm: [6.1, 6.10]\n");
}

#[test]
fn exclude_key_naming_no_axis_is_an_error() {
    let e = err("matrix:\n  gfx: [a]\n  exclude:\n    - gpx: a\n");
    assert_points_at(&e, 4, "`gpx`, which is no axis");
}

#[test]
fn undefined_template_variable_is_an_error_at_its_line() {
    let text = "matrix:\n  gfx: [gfx900]\nsteps:\n  - name: build\n    run: |\n      echo start\n      hipcc --offload-arch={{ matrix.gxf }}\n";
    let e = err(text);
    assert_points_at(&e, 7, "undefined variable");
    assert!(e.to_string().contains("steps[0].run"));
    assert!(e.to_string().contains("gfx900"), "names the cell: {e}");
    let e = err("matrix:\n  a: [1]\nsteps:\n  - name: s\n    run: echo {{ vars.nope }}\n");
    assert_points_at(&e, 5, "undefined variable");
}

#[test]
fn template_syntax_error_is_reported() {
    let e = err("matrix:\n  a: [1]\nsteps:\n  - name: s\n    run: echo {{ matrix.a \n");
    assert_points_at(&e, 5, "steps[0].run");
}

#[test]
fn too_many_cells_is_an_error() {
    let s = spec("matrix:\n  a: [1, 2, 3, 4]\n  b: [1, 2, 3, 4]\n");
    let e = expand(&s, 15).unwrap_err();
    assert!(
        e.to_string().contains("16 cells, more than --max-cells 15"),
        "{e}"
    );
    assert_eq!(expand(&s, 16).unwrap().len(), 16);
    // A huge product is refused without enumerating it.
    let axis = "[a, b, c, d, e, f, g, h, i, j]";
    let text: String = (0..20).map(|i| format!("  x{i}: {axis}\n")).collect();
    let e = expand(&spec(&format!("matrix:\n{text}")), 4096).unwrap_err();
    assert!(e.to_string().contains("more than --max-cells"), "{e}");
}

#[test]
fn bad_yaml_never_panics_and_has_a_position() {
    for text in [
        "",
        "- a\n- b\n",
        "matrix: [1, 2\n",
        "matrix:\n  a: {b: c}\n",
        "matrix:\n  a: [{b: c}]\n",
        "matrix:\n  include: [a]\n",
        "matrix:\n  include:\n    - a: [1]\n",
        "matrix:\n  a: 1\n",
        "matrix: 3\n",
        "name: [x]\nmatrix:\n  a: [1]\n",
        "\t\tmatrix",
        "matrix:\n  a: [1]\ntimeout: 5 minutes\n",
        "matrix:\n  a: [1]\nsteps:\n  - name: a\n    run: x\n  - name: a\n    run: y\n",
        "matrix:\n  a: [1]\nsteps:\n  - name: a\n    run: x\n    gpu: maybe\n",
        "matrix:\n  a: [1]\nreport:\n  rows: [b]\n",
        "matrix:\n  a: [1]\nreport:\n  junit: per-suite\n",
        "matrix:\n  a: [1]\nexpect:\n  - cells: {b: 1}\n    reason: r\n",
        "matrix:\n  a: [1]\nenvironment:\n  base: x\n  llvm: fast\n",
        "matrix: {}\n",
    ] {
        let e = err(text);
        assert!(e.to_string().starts_with("m.yaml"), "{e}");
    }
}

#[test]
fn suite_steps_and_classify_rules_are_validated_with_positions() {
    let base = "matrix:\n  a: [x]\nsteps:\n";
    let e = err(&format!("{base}  - name: nothing\n    timeout: 5m\n"));
    assert!(
        e.to_string()
            .contains("has nothing to run: give `run`, `gtest`, `ctest` or `autopkgtest`"),
        "{e}"
    );
    assert!(e.to_string().contains("m.yaml:4:"), "{e}");
    let e = err(&format!(
        "{base}  - name: both\n    gtest: {{binary: /t}}\n    ctest: {{dir: /b}}\n"
    ));
    assert!(
        e.to_string().contains("give `gtest` or `ctest`, not both"),
        "{e}"
    );
    // autopkgtest: one of source and path (both only as templates that a
    // cell renders one of), and not beside another suite.
    for step in [
        "autopkgtest: {source: rocfft, path: /src/rocfft}",
        "autopkgtest: {}",
    ] {
        let e = err(&format!("{base}  - name: a\n    {step}\n"));
        assert!(e.to_string().contains("m.yaml:5:"), "{e}");
        assert!(e.to_string().contains("give one of them"), "{e}");
    }
    let e = err(&format!(
        "{base}  - name: a\n    gtest: {{binary: /t}}\n    autopkgtest: {{source: rocfft}}\n"
    ));
    assert!(e.to_string().contains("not two"), "{e}");
    let e = err(&format!(
        "{base}  - name: a\n    autopkgtest: {{source: rocfft, flavour: x}}\n"
    ));
    assert!(e.to_string().contains("flavour"), "{e}");
    let e = err(&format!(
        "{base}  - name: t\n    gtest: {{binary: /t, timeout_per_test: soon}}\n"
    ));
    assert!(
        e.to_string().contains("steps[0].gtest.timeout_per_test") || e.to_string().contains("soon"),
        "{e}"
    );
    let e = err(&format!(
        "{base}  - name: t\n    run: 'true'\nclassify:\n  - match: '('\n    as: skipped\n    reason: r\n"
    ));
    assert!(e.to_string().contains("not a regular expression"), "{e}");
    assert!(e.to_string().contains("m.yaml:7:"), "{e}");
    let e = err(&format!(
        "{base}  - name: t\n    run: 'true'\nclassify:\n  - match: x\n    as: ignored\n    reason: r\n"
    ));
    assert!(e.to_string().contains("skipped, xfail or error"), "{e}");
    let e = err(&format!(
        "{base}  - name: t\n    run: 'true'\ngpu:\n  count: many\n"
    ));
    assert!(e.to_string().contains("a number or `all`"), "{e}");

    let s = spec(&format!(
        "{base}  - name: t\n    gtest:\n      binary: /usr/libexec/*/miopen_gtest\n      filter: 'CPU_*'\n      timeout_per_test: 5m\n\
         gpu:\n  count: all\nclassify:\n  - match: \"Handle wasn't obtained\"\n    as: xfail\n    reason: needs a GPU\n    when: {{gpu: none}}\n"
    ));
    assert_eq!(s.gpu.count, rocmatrix::matrix_file::GpuCount::All);
    assert_eq!(
        s.classify[0].gpu,
        rocmatrix::matrix_file::GpuCondition::None
    );
    match &s.steps[0].suite {
        Some(rocmatrix::matrix_file::TestSuiteTemplate::Gtest(g)) => {
            assert_eq!(
                g.timeout_per_test,
                Some(std::time::Duration::from_secs(300))
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn report_junit_files_are_merged_unless_asked_per_cell() {
    use rocmatrix::matrix_file::JunitFiles;
    assert_eq!(spec("matrix:\n  a: [1]\n").report.junit, JunitFiles::Merged);
    let s = spec("matrix:\n  a: [1]\nreport:\n  junit: per-cell\n");
    assert_eq!(s.report.junit, JunitFiles::PerCell);
    let e = err("matrix:\n  a: [1]\nreport:\n  junit: per-suite\n").to_string();
    assert!(e.contains("m.yaml:4:") && e.contains("per-cell"), "{e}");
}

#[test]
fn rerun_failures_is_a_steps_own_or_the_matrix_files_default() {
    use rocmatrix::matrix_file::TestSuiteTemplate;
    let s = spec(
        "matrix:\n  a: [1]\nrerun_failures: 2\nsteps:\n  - name: g\n    gtest:\n      binary: /t\n  \
         - name: c\n    ctest:\n      dir: /b\n      rerun_failures: 0\n  - name: own\n    gtest:\n      binary: /u\n      rerun_failures: 3\n",
    );
    let reruns: Vec<u32> = s
        .steps
        .iter()
        .map(|st| match &st.suite {
            Some(TestSuiteTemplate::Gtest(g)) => g.rerun_failures,
            Some(TestSuiteTemplate::Ctest(c)) => c.rerun_failures,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(reruns, [2, 0, 3]);
    let e = err("matrix:\n  a: [1]\nrerun_failures: 99\nsteps:\n  - name: g\n    gtest:\n      binary: /t\n")
        .to_string();
    assert!(
        e.contains("m.yaml:3:") && e.contains("at most 10 reruns"),
        "{e}"
    );
}

#[test]
fn a_run_step_reruns_only_with_junit_and_a_suite_step_under_its_suite() {
    let s = spec(
        "matrix:\n  a: [1]\nrerun_failures: 2\nsteps:\n  - name: j\n    run: t\n    junit: [o.xml]\n  \
         - name: plain\n    run: make\n  - name: own\n    run: t\n    junit: [o.xml]\n    rerun_failures: 1\n",
    );
    let reruns: Vec<u32> = s.steps.iter().map(|st| st.rerun_failures).collect();
    assert_eq!(
        reruns,
        [2, 0, 1],
        "the default reaches run: steps with junit: only"
    );
    let e = err("matrix:\n  a: [1]\nsteps:\n  - name: s\n    run: make\n    rerun_failures: 2\n")
        .to_string();
    assert!(
        e.contains("m.yaml:6:") && e.contains("give the step `junit:`"),
        "{e}"
    );
    let e = err(
        "matrix:\n  a: [1]\nsteps:\n  - name: g\n    gtest:\n      binary: /t\n    rerun_failures: 2\n",
    )
    .to_string();
    assert!(e.contains("gtest.rerun_failures"), "{e}");
}
