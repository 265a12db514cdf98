//! Build stages (`build:`): keys and `build.*` values in the plan, bad
//! `build:` sections, and on the real engine: one build per key, reused by
//! a rerun, rebuilt only where a step changed, a failing build reported
//! once per key on each of its cells, and exports that run the build.

use std::path::Path;

use rocmatrix::matrix_file::Spec;
use rocmatrix::plan::Plan;
use serde_json::Value;

use crate::harness::*;

fn plan(text: &str) -> Plan {
    let s = Spec::parse(Path::new("m.yaml"), text).unwrap_or_else(|e| panic!("{e}"));
    Plan::build(&s, 4096).unwrap_or_else(|e| panic!("{e}"))
}

fn error(text: &str) -> String {
    match Spec::parse(Path::new("m.yaml"), text) {
        Ok(s) => match Plan::build(&s, 4096) {
            Ok(_) => panic!("expected an error for:\n{text}"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

const PLANNED: &str = "matrix:
  suite: [bookworm, sid]
  gfx: [gfx900, gfx1030, gfx1100]
  exclude:
    - {suite: sid, gfx: gfx900}
environment:
  base: 'debian:{{ matrix.suite }}'
build:
  per: [suite]
  steps:
    - name: configure
      run: cmake -DGPU_TARGETS='{{ build.gfx | join(\";\") }}' --suite={{ matrix.suite }}
steps:
  - name: test
    run: ctest
";

#[test]
fn cells_share_a_build_per_key_and_the_build_sees_its_cells_gfx_targets() {
    let p = plan(PLANNED);
    let keys: Vec<&str> = p.builds.iter().map(|b| b.key.as_str()).collect();
    assert_eq!(keys, ["bookworm", "sid"]);
    assert_eq!(
        p.builds[0].steps[0].run,
        "cmake -DGPU_TARGETS='gfx900;gfx1030;gfx1100' --suite=bookworm"
    );
    // sid has no gfx900 cell, so its build does not compile for it.
    assert_eq!(
        p.builds[1].steps[0].run,
        "cmake -DGPU_TARGETS='gfx1030;gfx1100' --suite=sid"
    );
    for c in &p.cells {
        assert_eq!(c.build.as_deref(), c.value("suite"), "cell {}", c.id);
    }
    // A build without `per` is one per environment; `matrix` holds the
    // keys that are equal in all of its cells (suite, here).
    let whole = plan(&PLANNED.replace("  per: [suite]\n", ""));
    let keys: Vec<&str> = whole.builds.iter().map(|b| b.key.as_str()).collect();
    assert_eq!(keys.len(), 2, "two environments, two builds: {keys:?}");
    assert!(keys.iter().all(|k| k.starts_with("all-")), "{keys:?}");
}

#[test]
fn a_changed_build_step_changes_the_hashes_of_the_cells_of_that_key_only() {
    let before = plan(PLANNED);
    let after = plan(&PLANNED.replace(
        "--suite={{ matrix.suite }}",
        "--suite={{ matrix.suite }}{% if matrix.suite == 'sid' %} -DNEW=1{% endif %}",
    ));
    for (b, a) in before.cells.iter().zip(&after.cells) {
        let changed = b.hash != a.hash;
        assert_eq!(changed, b.value("suite") == Some("sid"), "cell {}", b.id);
    }
    assert_eq!(before.builds[0].hash, after.builds[0].hash);
    assert_ne!(before.builds[1].hash, after.builds[1].hash);
    // Without `build:` the cells' hashes are what they always were.
    let plain = plan(&PLANNED.replace(
        "build:\n  per: [suite]\n  steps:\n    - name: configure\n      run: cmake -DGPU_TARGETS='{{ build.gfx | join(\";\") }}' --suite={{ matrix.suite }}\n",
        "",
    ));
    assert!(plain.builds.is_empty());
    assert!(plain.cells.iter().all(|c| c.build.is_none()));
    assert_ne!(plain.cells[0].hash, before.cells[0].hash);
}

#[test]
fn bad_build_sections_are_refused_with_their_place() {
    let e = error(&PLANNED.replace("per: [suite]", "per: [suite, rocm]"));
    assert!(
        e.contains("m.yaml:") && e.contains("`rocm` is no key of the matrix (keys: suite, gfx)"),
        "{e}"
    );
    let e = error(&PLANNED.replace("run: cmake", "gtest: {binary: /x}\n      run: cmake"));
    assert!(e.contains("tests belong in `steps:`"), "{e}");
    let e = error(&PLANNED.replace("run: cmake", "gpu: required\n      run: cmake"));
    assert!(e.contains("a build runs without one"), "{e}");
    let e = error(&PLANNED.replace("environment:\n  base: 'debian:{{ matrix.suite }}'\n", ""));
    assert!(e.contains("`build:` needs an `environment:`"), "{e}");
    // A build sees the `per` axes only: gfx varies among its cells.
    let e = error(&PLANNED.replace("--suite={{ matrix.suite }}", "--gfx={{ matrix.gfx }}"));
    assert!(
        e.contains("build.steps[0].run")
            && e.contains("rendering build bookworm")
            && e.contains("build.<key> (a list)"),
        "{e}"
    );
    let e = error(&format!(
        "{PLANNED}sources:\n  - name: lib\n    url: /tmp/{{{{ matrix.gfx }}}}\n"
    ));
    assert!(
        e.contains("build `bookworm`: cells bookworm.gfx900 and bookworm.gfx1030 check out different sources"),
        "{e}"
    );
}

/// The journal's events of one kind.
fn events(run: &Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(run.join("journal.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == kind)
        .collect()
}

fn builds_that_ran(run: &Path) -> Vec<String> {
    let mut keys: Vec<String> = events(run, "build_step_finished")
        .iter()
        .map(|e| e["build"].as_str().unwrap().to_string())
        .collect();
    keys.sort();
    keys
}

/// A matrix whose build writes the gfx targets and a stamp, and whose
/// cells check both; `nonce` keeps its snapshots this test's own.
fn staged(nonce: &str, extra: &str) -> String {
    format!(
        r#"name: staged
matrix:
  suite: [bookworm, trixie]
  gfx: [gfx900, gfx1030, gfx1100]
environment:
  family: debian
  base: "debian:{{{{ matrix.suite }}}}"
  suite: "{{{{ matrix.suite }}}}"
  # An environment image of this test's own: a locked rebuild of an equal
  # environment by another test would replace it (a new image id), and the
  # snapshots' names follow the image's id.
  env: {{STAGED_NONCE: "{nonce}"}}
retries: 0
build:
  per: [suite]
  steps:
    - name: compile
      run: |
        # {nonce}
        mkdir -p /work/build
        echo "{{{{ build.gfx | join(';') }}}}" > /work/build/targets
        echo "$ROCMATRIX_BUILD $ROCMATRIX_SUITE" > /work/build/who
        cat /proc/sys/kernel/random/uuid > /work/build/stamp
        {extra}
        : built
steps:
  - name: test
    run: |
      cat /work/build/targets /work/build/who /work/build/stamp
      grep -q "$ROCMATRIX_GFX" /work/build/targets
      [ "$(cat /work/build/who)" = "$ROCMATRIX_SUITE $ROCMATRIX_SUITE" ]
"#
    )
}

fn stamp(run: &Path, cell: &str) -> String {
    let log = std::fs::read_to_string(run.join("cells").join(cell).join("logs/01-test.log"))
        .unwrap_or_else(|e| panic!("{cell}: {e}"));
    log.lines().nth(2).unwrap_or_default().to_string()
}

const CELLS: [&str; 6] = [
    "bookworm.gfx900",
    "bookworm.gfx1030",
    "bookworm.gfx1100",
    "trixie.gfx900",
    "trixie.gfx1030",
    "trixie.gfx1100",
];

#[test]
fn builds_run_once_per_key_reruns_reuse_them_and_a_changed_step_rebuilds_its_key_for_real() {
    let Some(_engine) = engine_or_skip(
        "builds_run_once_per_key_reruns_reuse_them_and_a_changed_step_rebuilds_its_key_for_real",
    ) else {
        return;
    };
    bases::ensure("bookworm");
    bases::ensure("trixie");
    let dir = tempfile::tempdir().unwrap();
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let m = write(dir.path(), "staged.yaml", &staged(&nonce, ""));
    let run_once = |out: &str| {
        let o = Rocmatrix::run_matrix(&m)
            .progress_plain()
            .out(dir.path().join(out))
            .run();
        o.assert_success();
        o.run_store()
    };

    // First run: two builds for six cells, each cell on its suite's build.
    let first = run_once("first");
    assert_eq!(builds_that_ran(&first), ["bookworm", "trixie"]);
    for cell in CELLS {
        let c = cell_json(&first, cell);
        assert_eq!(c["status"], "passed", "{cell}: {c}");
        let suite = cell.split('.').next().unwrap();
        assert_eq!(c["build"], suite);
        assert!(
            c["image"].as_str().unwrap().starts_with("rocmatrix/build:"),
            "{c}"
        );
        let log = std::fs::read_to_string(first.join("cells").join(cell).join("logs/01-test.log"))
            .unwrap();
        assert!(log.starts_with("gfx900;gfx1030;gfx1100\n"), "{cell}: {log}");
    }
    assert_eq!(
        stamp(&first, "bookworm.gfx900"),
        stamp(&first, "bookworm.gfx1100")
    );
    assert_ne!(
        stamp(&first, "bookworm.gfx900"),
        stamp(&first, "trixie.gfx900")
    );
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(first.join("lock.json")).unwrap()).unwrap();
    for key in ["bookworm", "trixie"] {
        let b = &lock["builds"][key];
        assert!(docker::image_exists(b["snapshot"].as_str().unwrap()), "{b}");
        assert!(b["id"].as_str().unwrap().starts_with("sha256:"), "{b}");
    }
    assert_eq!(lock["cells"]["trixie.gfx1030"]["build"], "trixie");
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(first.join("builds/trixie/build.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["status"], "passed");
    assert_eq!(record["cells"].as_array().unwrap().len(), 3);

    // A rerun builds nothing and starts from the same snapshots.
    let second = run_once("second");
    assert!(builds_that_ran(&second).is_empty());
    let reused: Vec<bool> = events(&second, "build_finished")
        .iter()
        .map(|e| e["reused"].as_bool().unwrap())
        .collect();
    assert_eq!(reused, [true, true]);
    for cell in CELLS {
        assert_eq!(stamp(&second, cell), stamp(&first, cell), "{cell}");
    }

    // A step that changes for trixie only rebuilds trixie only.
    write(
        dir.path(),
        "staged.yaml",
        &staged(
            &nonce,
            "{% if matrix.suite == 'trixie' %}echo patched >> /work/build/who{% endif %}",
        ),
    );
    let m2 = dir.path().join("staged.yaml");
    let o = Rocmatrix::run_matrix(&m2)
        .progress_plain()
        .out(dir.path().join("third"))
        .run();
    // trixie's cells now fail their `who` check: the rebuilt snapshot is used.
    o.assert_code(1);
    let third = o.run_store();
    assert_eq!(builds_that_ran(&third), ["trixie"]);
    assert_eq!(
        stamp(&third, "bookworm.gfx1030"),
        stamp(&first, "bookworm.gfx1030")
    );
    assert_ne!(
        stamp(&third, "trixie.gfx1030"),
        stamp(&first, "trixie.gfx1030")
    );
    assert_eq!(cell_json(&third, "trixie.gfx900")["status"], "failed");
    assert_eq!(cell_json(&third, "bookworm.gfx900")["status"], "passed");

    // A shell in a cell starts from its build's snapshot.
    let o = Rocmatrix::new()
        .arg("shell")
        .arg(&first)
        .arg("trixie.gfx900")
        .run_with_input("cat /work/build/who /work/build/stamp\n");
    o.assert_success();
    assert_eq!(
        o.stdout(),
        format!("trixie trixie\n{}\n", stamp(&first, "trixie.gfx900"))
    );

    // An export of a cell runs its build, then its steps.
    let export = dir.path().join("export");
    Rocmatrix::new()
        .args(["export"])
        .arg(&first)
        .arg("bookworm.gfx1030")
        .arg(&export)
        .run()
        .assert_success();
    let containerfile = std::fs::read_to_string(export.join("Containerfile")).unwrap();
    assert!(
        containerfile.contains("COPY build /rocmatrix/build\nRUN ROCMATRIX_BUILD=bookworm ROCMATRIX_SUITE=bookworm ROCMATRIX_STEP=compile bash -eo pipefail /rocmatrix/build/01-compile.sh"),
        "{containerfile}"
    );
    let script = std::fs::read_to_string(export.join("build/01-compile.sh")).unwrap();
    assert!(script.contains("gfx900;gfx1030;gfx1100"), "{script}");
}

#[test]
fn a_failing_build_fails_each_of_its_cells_once_with_the_builds_log_for_real() {
    let Some(_engine) =
        engine_or_skip("a_failing_build_fails_each_of_its_cells_once_with_the_builds_log_for_real")
    else {
        return;
    };
    bases::ensure("bookworm");
    bases::ensure("trixie");
    let dir = tempfile::tempdir().unwrap();
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let failing = "if [ \"$ROCMATRIX_SUITE\" = trixie ]; then echo 'CMake Error: could not find HIP' >&2; exit 3; fi";
    let text = staged(&nonce, failing).replace("retries: 0", "retries: 2");
    let m = write(dir.path(), "failing.yaml", &text);
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path())
        .run();
    o.assert_code(1);
    let run = o.run_store();
    // The build ran once per key: a failing build is not retried.
    assert_eq!(builds_that_ran(&run), ["bookworm", "trixie"]);
    for cell in CELLS {
        let c = cell_json(&run, cell);
        if cell.starts_with("bookworm") {
            assert_eq!(c["status"], "passed", "{c}");
            continue;
        }
        assert_eq!(c["status"], "failed", "{c}");
        assert_eq!(
            c["reason"], "build `trixie` failed: step `compile`: exit code 3",
            "{c}"
        );
        assert_eq!(c["build"], "trixie");
        let steps = c["steps"].as_array().unwrap();
        assert_eq!(steps[0]["name"], "build: compile");
        assert_eq!(steps[0]["status"], "failed");
        let log = std::fs::read_to_string(
            run.join("cells")
                .join(cell)
                .join(steps[0]["log"].as_str().unwrap()),
        )
        .unwrap();
        assert!(log.contains("CMake Error: could not find HIP"), "{log}");
        assert_eq!(steps[1]["name"], "test");
        assert_eq!(steps[1]["status"], "skipped");
    }
    let summary = std::fs::read_to_string(run.join("report/summary.md")).unwrap();
    // "Why cells fail" names the build's error once, for its three cells.
    assert!(
        summary.contains("CMake Error: could not find HIP")
            && summary.contains("(step build: compile)")
            && summary.contains("trixie.gfx900, trixie.gfx1030, trixie.gfx1100"),
        "{summary}"
    );
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("lock.json")).unwrap()).unwrap();
    assert!(lock["builds"].get("trixie").is_none(), "{}", lock["builds"]);
    assert!(lock["builds"].get("bookworm").is_some());
}

#[test]
fn caches_keep_files_across_runs_in_builds_and_cells_until_pruned_for_real() {
    let Some(_engine) =
        engine_or_skip("caches_keep_files_across_runs_in_builds_and_cells_until_pruned_for_real")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    // A key of this test's own, so that no other run shares its volume.
    let key = format!("ccache-{}-{}", std::process::id(), dir.path().display());
    let text = format!(
        r#"name: cached
matrix:
  suite: [bookworm]
  gfx: [gfx900, gfx1100]
environment:
  base: "debian:{{{{ matrix.suite }}}}"
cache:
  - path: /root/.cache/ccache
    key: "{key}-{{{{ matrix.suite }}}}"
build:
  per: [suite]
  steps:
    - name: compile
      run: |
        : {key}
        echo "build saw: $(cat /root/.cache/ccache/log 2>/dev/null | tr '\n' ' ')"
        echo "build $(cat /proc/sys/kernel/random/uuid)" >> /root/.cache/ccache/log
steps:
  - name: test
    run: |
      echo "cell saw: $(cat /root/.cache/ccache/log | tr '\n' ' ')"
"#
    );
    let m = write(dir.path(), "cached.yaml", &text);
    // This test's own label too: the prune below touches only what it made.
    let mine = format!(
        "{},rocmatrix.test-cache={}",
        label::label(),
        std::process::id()
    );
    let run = |out: &str, matrix: &Path| {
        let o = Rocmatrix::run_matrix(matrix)
            .env("ROCMATRIX_LABEL", &mine)
            .progress_plain()
            .out(dir.path().join(out))
            .run();
        o.assert_success();
        o.run_store()
    };
    let build_log = |run: &Path| {
        let logs = run.join("builds/bookworm/logs");
        let log = std::fs::read_dir(&logs).unwrap().next().unwrap().unwrap();
        std::fs::read_to_string(log.path()).unwrap()
    };
    let cell_log = |run: &Path| {
        std::fs::read_to_string(run.join("cells/bookworm.gfx900/logs/01-test.log")).unwrap()
    };
    let first = run("first", &m);
    assert_eq!(build_log(&first).trim(), "build saw:");
    assert!(
        cell_log(&first).contains("cell saw: build "),
        "{}",
        cell_log(&first)
    );
    let volume = rocmatrix::plan::cache::volume_name(&format!("{key}-bookworm"));
    let listed = Rocmatrix::new()
        .env("ROCMATRIX_LABEL", &mine)
        .args(["images", "--caches"])
        .run();
    listed.assert_success();
    assert!(listed.stdout().contains(&volume), "{}", listed.stdout());

    // Run 2 builds again (the step changed) and sees what run 1 wrote.
    let m2 = write(
        dir.path(),
        "cached2.yaml",
        &text.replace("name: compile", "name: compile-again"),
    );
    let second = run("second", &m2);
    let saw = build_log(&second);
    assert!(saw.starts_with("build saw: build "), "{saw}");
    assert_eq!(saw.matches("build ").count(), 2, "{saw}");
    assert!(
        cell_log(&second).contains("cell saw: build "),
        "{}",
        cell_log(&second)
    );

    // Pruned, the cache is gone: the next build starts empty.
    let pruned = Rocmatrix::new()
        .env("ROCMATRIX_LABEL", &mine)
        .args(["images", "--prune", "--caches"])
        .arg("--out")
        .arg(dir.path().join("none"))
        .run();
    pruned.assert_success();
    assert!(
        pruned.stdout().contains(&format!("removed cache {volume}")),
        "{}",
        pruned.stdout()
    );
    let m3 = write(
        dir.path(),
        "cached3.yaml",
        &text.replace("name: compile", "name: compile-third"),
    );
    let third = run("third", &m3);
    assert_eq!(build_log(&third).trim(), "build saw:");
}
