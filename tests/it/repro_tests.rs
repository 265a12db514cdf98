//! Reproducibility against the real engine: locks, locked rebuilds, export,
//! shell, repro, and debug-LLVM snapshots kept by `images --prune`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::*;

const MATRIX: &str = r#"name: repro
matrix:
  case: [good, bad]
environment:
  base: debian:bookworm
  packages: [file]
steps:
  - name: build
    run: |
      echo built > /work/marker
      file /work/marker
  - name: test
    junit: [/work/out/*.xml]
    run: |
      mkdir -p /work/out
      if [ {{ matrix.case }} = bad ]; then
        printf '<testsuite name="s" tests="1" failures="1"><testcase classname="c" name="t"><failure message="wrong answer"/></testcase></testsuite>\n' > /work/out/r.xml
        echo "expected 42, got 41"
        exit 3
      fi
      printf '<testsuite name="s" tests="1"><testcase classname="c" name="t"/></testsuite>\n' > /work/out/r.xml
"#;

/// Runs `m` into a new store under `dir`: the output and the run directory.
fn run_matrix(dir: &Path, m: &Path, extra: &[&str]) -> (Ran, PathBuf) {
    let out = dir.join(format!(
        "out{}",
        std::fs::read_dir(dir).map(|r| r.count()).unwrap_or(0)
    ));
    let o = Rocmatrix::run_matrix(m)
        .progress_plain()
        .out(&out)
        .args(extra)
        .run();
    let run = o.run_store();
    (o, run)
}

/// The image an exported `run.sh` builds (`image=rocmatrix-repro/…`), removed
/// when the guard is dropped.
fn reproducer_image(repro: &Path) -> RemoveOnDrop {
    let script = std::fs::read_to_string(repro.join("run.sh")).unwrap();
    let tag = script
        .lines()
        .find_map(|l| l.strip_prefix("image="))
        .unwrap_or_else(|| panic!("run.sh names no image:\n{script}"));
    assert!(tag.starts_with("rocmatrix-repro/"), "{tag}");
    RemoveOnDrop(tag.trim_matches(['"', '\'']).to_string())
}

fn lock(run: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(run.join("lock.json")).unwrap()).unwrap()
}

#[test]
fn locks_match_across_runs_and_a_locked_rebuild_is_identical() {
    let Some(_engine) = engine_or_skip("locks_match_across_runs_and_a_locked_rebuild_is_identical")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "m.yaml", MATRIX);
    let (o1, run1) = run_matrix(dir.path(), &m, &[]);
    assert_eq!(o1.status.code(), Some(1), "{}", o1.stderr());
    let (_, run2) = run_matrix(dir.path(), &m, &[]);
    let (l1, l2) = (lock(&run1), lock(&run2));
    let envs = l1["environments"].as_object().unwrap();
    assert_eq!(envs.len(), 1);
    let (hash, env) = envs.iter().next().unwrap();
    let packages = env["packages"].as_object().unwrap();
    assert!(
        packages.contains_key("file") && packages.contains_key("bash"),
        "{packages:?}"
    );
    assert_eq!(
        l1["environments"][hash]["packages"],
        l2["environments"][hash]["packages"]
    );
    assert_eq!(l1["cells"], l2["cells"]);
    assert_eq!(env["base"]["reference"], "debian:bookworm");
    assert!(env["base"]["origin"]["how"].is_string());

    // A locked rebuild pins every package and says whether the set is identical.
    let lock_path = run1.join("lock.json");
    let (o3, run3) = run_matrix(dir.path(), &m, &["--locked", lock_path.to_str().unwrap()]);
    let out = o3.stdout();
    assert!(
        out.contains("rebuilt from the lock; the package set is identical"),
        "{out}\n{}",
        o3.stderr()
    );
    let built =
        std::fs::read_to_string(run3.join("images").join(format!("{}.log", &hash[..12]))).unwrap();
    assert!(
        built.contains("file="),
        "the image build pins versions: {built}"
    );

    // A lock naming versions that no longer exist fails and lists them all.
    let mut bad = l1.clone();
    bad["environments"][hash]["packages"]["file"] = "0.0-gone".into();
    bad["environments"][hash]["packages"]["libnothere1"] = "1.2-3".into();
    let bad_path = dir.path().join("bad-lock.json");
    std::fs::write(&bad_path, bad.to_string()).unwrap();
    let (o4, _) = run_matrix(dir.path(), &m, &["--locked", bad_path.to_str().unwrap()]);
    assert_eq!(o4.status.code(), Some(3), "{}", o4.stdout());
    let text = o4.text();
    assert!(
        text.contains("2 pinned versions are no longer obtainable"),
        "{text}"
    );
    assert!(
        text.contains("file=0.0-gone") && text.contains("libnothere1=1.2-3"),
        "{text}"
    );
}

#[test]
fn an_exported_reproducer_runs_with_the_docker_cli_and_fails_the_same_way() {
    let Some(_engine) =
        engine_or_skip("an_exported_reproducer_runs_with_the_docker_cli_and_fails_the_same_way")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "m.yaml", MATRIX);
    let (_, run) = run_matrix(dir.path(), &m, &[]);
    let repro = dir.path().join("repro-bad");
    Rocmatrix::new()
        .arg("export")
        .arg(&run)
        .arg("bad")
        .arg(&repro)
        .run()
        .assert_success();
    for f in [
        "Containerfile",
        "run.sh",
        "README.md",
        "steps/01-build.sh",
        "steps/02-test.sh",
    ] {
        assert!(repro.join(f).is_file(), "{f} missing");
    }
    let cf = std::fs::read_to_string(repro.join("Containerfile")).unwrap();
    assert!(
        cf.contains("file=") && cf.contains("FROM debian:bookworm"),
        "{cf}"
    );
    let readme = std::fs::read_to_string(repro.join("README.md")).unwrap();
    assert!(
        readme.contains("Outcome: **failed**") && readme.contains("expected 42, got 41"),
        "{readme}"
    );

    // Only the docker CLI: run it from another directory, as a user would.
    // run.sh builds an image that carries no test label: this test removes it.
    let _bad_image = reproducer_image(&repro);
    let o = Command::new("bash")
        .arg(repro.join("run.sh"))
        .current_dir("/")
        .output()
        .unwrap();
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(3), "{text}\n{}", stderr(&o));
    assert!(
        text.contains("=== 01-build: passed") && text.contains("=== 02-test: FAILED (exit 3)"),
        "{text}"
    );
    assert!(text.contains("expected 42, got 41"), "{text}");

    let good = dir.path().join("repro-good");
    Rocmatrix::new()
        .arg("export")
        .arg(&run)
        .arg("good")
        .arg(&good)
        .run()
        .assert_success();
    let _good_image = reproducer_image(&good);
    let o = Command::new("bash")
        .arg(good.join("run.sh"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("=== all steps done"));
}

#[test]
fn an_exported_reproducer_pins_its_base_and_refuses_another() {
    let Some(_engine) = engine_or_skip("an_exported_reproducer_pins_its_base_and_refuses_another")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    // A cell hash of its own: its reproducer's image is not the other
    // export test's.
    let m = write(
        dir.path(),
        "m.yaml",
        &MATRIX.replace("echo built", "echo built-on-the-pinned-base"),
    );
    let (_, run) = run_matrix(dir.path(), &m, &["--only", "case=good"]);
    let original = lock(&run);
    let hash = original["environments"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let export = |name: &str, base: serde_json::Value| {
        let mut l = original.clone();
        l["environments"][&hash]["base"] = base;
        std::fs::write(run.join("lock.json"), l.to_string()).unwrap();
        let to = dir.path().join(name);
        let o = Rocmatrix::new()
            .arg("export")
            .arg(&run)
            .arg("good")
            .arg(&to)
            .run();
        o.assert_success();
        (to, o.stdout())
    };
    let readme = |to: &Path| std::fs::read_to_string(to.join("README.md")).unwrap();
    let run_sh = |to: &Path| {
        Command::new("bash")
            .arg(to.join("run.sh"))
            .current_dir("/")
            .output()
            .unwrap()
    };

    // Bootstrapped by the run: the reproducer says how to make the same
    // base, and refuses a `debian:bookworm` that is another bootstrap (or a
    // registry's) instead of building on it.
    let (to, said) = export(
        "bootstrapped",
        serde_json::json!({"reference": "debian:bookworm", "id": "sha256:0", "origin": {
            "how": "bootstrapped", "suite": "bookworm", "mirror": "http://deb.debian.org/debian",
            "release_date": "Mon, 01 Jan 2024 00:00:00 UTC"}}),
    );
    assert!(said.contains("make-base.sh"), "{said}");
    let text = readme(&to);
    for part in [
        "`debootstrap --variant=minbase bookworm ROOT http://deb.debian.org/debian` at the suite's Release of Mon, 01 Jan 2024 00:00:00 UTC",
        "https://snapshot.debian.org/archive/debian/20240101T000000Z/",
    ] {
        assert!(text.contains(part), "{part:?} not in\n{text}");
    }
    let make = std::fs::read_to_string(to.join("make-base.sh")).unwrap();
    assert!(
        make.contains("snapshot=${SNAPSHOT:-20240101T000000Z}"),
        "{make}"
    );
    let o = run_sh(&to);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("run.sh: debian:bookworm here is not the base the run bootstrapped (bookworm at the Release of Mon, 01 Jan 2024 00:00:00 UTC): make it with ./make-base.sh"),
        "{}",
        stderr(&o)
    );
    assert!(!stdout(&o).contains("==="), "no step ran: {}", stdout(&o));

    // From a registry with no digest the engine knows: the image id is
    // checked, and another image of the same name is refused.
    let (to, _) = export(
        "pulled",
        serde_json::json!({"reference": "debian:bookworm",
            "id": format!("sha256:{}", "0".repeat(64)), "origin": {"how": "pulled"}}),
    );
    assert!(readme(&to).contains("the run's engine knew no registry digest for it"));
    assert!(!to.join("make-base.sh").exists());
    let o = run_sh(&to);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("another image of the same name"),
        "{}",
        stderr(&o)
    );

    // The run's own lock: the engine's debian:bookworm is the one it had.
    let (to, _) = export("own", original["environments"][&hash]["base"].clone());
    std::fs::write(run.join("lock.json"), original.to_string()).unwrap();
    let _image = reproducer_image(&to);
    let o = run_sh(&to);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
}

#[test]
fn shell_runs_piped_commands_and_snapshots_after_a_step() {
    let Some(_engine) = engine_or_skip("shell_runs_piped_commands_and_snapshots_after_a_step")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "m.yaml", MATRIX);
    let (_, run) = run_matrix(dir.path(), &m, &[]);
    let shell = |args: &[&str], input: &str| {
        Rocmatrix::new()
            .arg("shell")
            .arg(&run)
            .args(args)
            .run_with_input(input)
    };
    let o = shell(
        &["bad"],
        "echo cell=$ROCMATRIX_CELL case=$ROCMATRIX_CASE; pwd; ls /rocmatrix/steps; exit 5\n",
    );
    let out = o.stdout();
    o.assert_code(5);
    assert!(
        out.contains("cell=bad case=bad") && out.contains("/work") && out.contains("02-test.sh"),
        "{out}"
    );

    let o = shell(
        &["bad", "--after", "build", "--", "cat", "/work/marker"],
        "",
    );
    o.assert_success();
    assert_eq!(o.stdout().trim(), "built");
    assert!(
        o.stderr().contains("snapshot rocmatrix/snapshot:"),
        "{}",
        o.stderr()
    );
    let o = shell(
        &["bad", "--after", "build", "--", "cat", "/work/marker"],
        "",
    );
    assert!(o.stderr().contains("using snapshot"), "{}", o.stderr());

    let o = shell(&["nope"], "");
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stderr().contains("has no cell `nope`"), "{}", o.stderr());
    let run_id = run.file_name().unwrap().to_str().unwrap();
    assert!(containers_of(&format!("{run_id}-shell")).is_empty());
}

#[test]
fn repro_runs_a_cell_again_from_the_lock_and_compares() {
    let Some(_engine) = engine_or_skip("repro_runs_a_cell_again_from_the_lock_and_compares") else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    // An environment of its own: `--rebuild` below builds the image of the
    // lock's pins, which the locked rebuild of `locks_match_across_runs…`
    // (the same MATRIX) must build itself, whichever test runs first.
    let own = MATRIX.replace(
        "  packages: [file]\n",
        "  packages: [file]\n  env: {ROCMATRIX_TEST: repro}\n",
    );
    assert_ne!(own, MATRIX);
    let m = write(dir.path(), "m.yaml", &own);
    let (_, run) = run_matrix(dir.path(), &m, &["--only", "case=bad"]);
    let o = Rocmatrix::new()
        .arg("repro")
        .arg(&run)
        .arg("bad")
        .progress_plain()
        .out(dir.path().join("repro-out"))
        .run();
    let out = o.stdout();
    o.assert_success();
    assert!(
        out.contains("outcome matches: was failed (step `test`: exit code 3), now failed"),
        "{out}"
    );
    assert!(out.contains("package set is identical"), "{out}");

    // The run's own image is still in the engine with the lock's packages:
    // reused, nothing built, each fact said once.
    let (hash, env) = {
        let l = lock(&run);
        let (h, e) = l["environments"]
            .as_object()
            .unwrap()
            .iter()
            .next()
            .unwrap();
        (h.clone(), e.clone())
    };
    assert!(
        out.contains(&format!(
            "environment {}: reused the run's own image {} (sha256:{}), still in the engine; the package set is identical (",
            &hash[..12],
            env["image"]["tag"].as_str().unwrap(),
            &env["image"]["id"].as_str().unwrap()["sha256:".len()..][..12]
        )),
        "{out}"
    );
    assert_eq!(out.matches("package set is identical").count(), 1, "{out}");
    assert!(!o.stderr().contains("package set"), "{}", o.stderr());
    let again = o.run_store();
    assert_eq!(
        lock(&again)["environments"][&hash]["image"]["id"],
        env["image"]["id"]
    );
    assert!(
        !again
            .join("images")
            .join(format!("{}.log", &hash[..12]))
            .exists(),
        "nothing was built"
    );

    // --rebuild proves the lock rebuilds: every package pinned, said once.
    let o = Rocmatrix::new()
        .arg("repro")
        .arg(&run)
        .arg("bad")
        .arg("--rebuild")
        .progress_plain()
        .out(dir.path().join("repro-rebuild"))
        .run();
    let out = o.stdout();
    o.assert_success();
    assert_eq!(
        out.matches("rebuilt from the lock; the package set is identical")
            .count(),
        1,
        "{out}"
    );
    assert!(!out.contains("reused"), "{out}");
    assert!(!o.stderr().contains("package set"), "{}", o.stderr());
    let rebuilt = o.run_store();
    let built =
        std::fs::read_to_string(rebuilt.join("images").join(format!("{}.log", &hash[..12])))
            .unwrap_or_default();
    // The image of the lock's pins is built now, or was built by an earlier
    // locked build of the same lock (another test of this matrix may have
    // made it first): then its tag is reused.
    let reused = lock(&rebuilt)["environments"][&hash]["image"]["reused"] == true;
    assert!(
        built.contains("file=") || reused,
        "the rebuild pins versions: {built}"
    );

    // Checked, not assumed: a lock whose package set is not the image's
    // does not reuse it, and says why.
    let mut tampered = lock(&run);
    tampered["environments"][&hash]["packages"]["zz-not-in-the-image"] = "1.0".into();
    std::fs::write(run.join("lock.json"), tampered.to_string()).unwrap();
    let o = Rocmatrix::new()
        .arg("repro")
        .arg(&run)
        .arg("bad")
        .progress_plain()
        .out(dir.path().join("repro-tampered"))
        .run();
    assert!(
        o.stderr().contains(&format!(
            "environment {}: not reusing the run's own image: its package set differs from the lock's in 1 packages (- zz-not-in-the-image 1.0); rebuilding it from the lock",
            &hash[..12]
        )),
        "{}",
        o.stderr()
    );
    assert!(!o.stdout().contains("reused"), "{}", o.stdout());
}

#[test]
fn a_debug_llvm_snapshot_is_built_once_shared_and_kept_by_prune() {
    let Some(_engine) =
        engine_exclusive_or_skip("a_debug_llvm_snapshot_is_built_once_shared_and_kept_by_prune")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    // This test's images carry a label of their own beside the test run's,
    // and the prune is given only that: other tests' environment images may
    // be parents of snapshots a prune keeps (an LLVM tree's toolchain), and
    // the engine refuses to remove those.
    let ours_label = format!("rocmatrix.test-case=debug-prune-{}", std::process::id());
    let labels = format!("{},{ours_label}", label::label());
    let run_labelled = |m: &Path, name: &str| {
        let o = Rocmatrix::run_matrix(m)
            .env("ROCMATRIX_LABEL", &labels)
            .progress_plain()
            .out(dir.path().join(name))
            .run();
        let run = o.run_store();
        (o, run)
    };
    let m = write(
        dir.path(),
        "debug.yaml",
        "name: dbg\nmatrix:\n  gfx: [gfx900, gfx1030]\nenvironment:\n  base: debian:bookworm\n  llvm: debug\nsteps:\n  - name: gdb\n    run: gdb --version | head -n 1\n",
    );
    let (o, run) = run_labelled(&m, "out-debug");
    o.assert_success();
    let journal = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    let builds: Vec<&str> = journal
        .lines()
        .filter(|l| l.contains("\"event\":\"image_finished\""))
        .collect();
    assert_eq!(builds.len(), 1, "one image for both cells: {builds:?}");
    assert!(
        builds[0].contains("rocmatrix/snapshot:llvm-debug-"),
        "{}",
        builds[0]
    );
    let tag = serde_json::from_str::<serde_json::Value>(builds[0]).unwrap()["tag"]
        .as_str()
        .unwrap()
        .to_string();
    for cell in ["gfx900", "gfx1030"] {
        assert_eq!(cell_json(&run, cell)["image"], tag.as_str());
        assert!(cell_json(&run, cell)["steps"][0]["log_tail"]
            .as_str()
            .unwrap()
            .contains("GNU gdb"));
    }
    // An environment image of this test's own (its `env:` makes it one no
    // other test shares), for the prune to remove.
    let plain = write(
        dir.path(),
        "plain.yaml",
        &format!(
            "name: plain\nmatrix:\n  gfx: [gfx900]\nenvironment:\n  base: debian:bookworm\n  packages: [file]\n  env: {{ROCMATRIX_TEST: debug-prune-{}}}\nsteps:\n  - name: file\n    run: file --version\n",
            std::process::id()
        ),
    );
    run_labelled(&plain, "out-plain").0.assert_success();
    let env = ["rocmatrix.kind=env", ours_label.as_str()];
    let ours = docker::images_labelled(&env);
    assert_eq!(
        ours.len(),
        1,
        "the plain matrix's environment image: {ours:?}"
    );
    // Prune removes environment images and keeps the snapshot.
    let elsewhere = tempfile::tempdir().unwrap();
    let pruned = Rocmatrix::new()
        .args(["images", "--prune", "--label", &ours_label])
        .out(elsewhere.path())
        .run();
    pruned.assert_success();
    let listed = Rocmatrix::new()
        .arg("images")
        .run()
        .assert_success()
        .stdout();
    assert!(listed.contains(&tag), "{listed}");
    assert_eq!(
        docker::images_labelled(&env),
        Vec::<String>::new(),
        "{}\n{listed}",
        pruned.text()
    );
    // Compared by name: other tests' images pushed to a registry carry
    // names that contain ours (`127.0.0.1:…/rocmatrix/env:…`).
    let names: Vec<&str> = listed
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    for image in ours {
        assert!(!names.contains(&image.as_str()), "{image} kept: {listed}");
    }
    // A later run reuses it.
    let (o, _) = run_labelled(&m, "out-again");
    assert!(
        o.stderr().contains(&format!("reusing {tag}")),
        "{}",
        o.stderr()
    );
}

#[test]
fn a_built_images_package_list_is_remembered_by_its_image_id() {
    let Some(_engine) = engine_or_skip("a_built_images_package_list_is_remembered_by_its_image_id")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let m = write(
        dir.path(),
        "m.yaml",
        "name: pkgs-cached\nmatrix:\n  x: [a]\nenvironment:\n  base: debian:bookworm\n  packages: [file]\nsteps:\n  - name: s\n    run: 'true'\n",
    );
    let run = |out: &str| {
        let o = Rocmatrix::run_matrix(&m)
            .progress_plain()
            .env("ROCMATRIX_CACHE", &cache)
            .out(dir.path().join(out))
            .run();
        o.assert_success();
        lock(&o.run_store())
    };
    let first = run("one");
    let (_, env) = first["environments"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    let id = env["image"]["id"].as_str().unwrap();
    let listed = cache
        .join("packages")
        .join(format!("debian-{}.tsv", id.trim_start_matches("sha256:")));
    let text = std::fs::read_to_string(&listed).expect("the list is remembered");
    assert!(text.contains("file\t"), "{text}");
    // The second run takes the list from the cache, not from a container:
    // what the cache says is what its lock records.
    std::fs::write(&listed, format!("{text}zz-from-the-cache\t1.0\n")).unwrap();
    let second = run("two");
    let (_, env) = second["environments"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(env["packages"]["zz-from-the-cache"], "1.0");
    // A list that cannot be read back is made afresh.
    std::fs::write(&listed, "garbage").unwrap();
    let third = run("three");
    let (_, env) = third["environments"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert!(env["packages"]["file"].is_string());
    assert!(env["packages"].get("zz-from-the-cache").is_none());
}
