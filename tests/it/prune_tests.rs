//! `images --prune` keeps what other runs on this machine still need
//! (issue 36): the locked images of a run root other than the one the
//! prune runs from, and the images a running run holds; and it still
//! removes an image once no run root names it.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::*;

/// A one-cell matrix whose environment differs by `which` (its own image).
fn matrix(dir: &Path, which: &str, step: &str) -> std::path::PathBuf {
    write(
        dir,
        &format!("{which}.yaml"),
        &format!(
            "name: prune-{which}\nmatrix:\n  case: [{which}]\nenvironment:\n  base: debian:bookworm\n  \
             env: {{PRUNE_TEST: {which}}}\nsteps:\n  - name: step\n    run: {step}\n"
        ),
    )
}

/// The environment image a run's cell ran in.
fn image_of(run: &Path, cell: &str) -> String {
    cell_json(run, cell)["image"].as_str().unwrap().to_string()
}

#[test]
fn prune_keeps_other_run_roots_locked_images_and_a_running_runs_image() {
    let test = "prune_keeps_other_run_roots_locked_images_and_a_running_runs_image";
    let Some(_engine) = engine_exclusive_or_skip(test) else {
        return;
    };
    bases::ensure("bookworm");
    // One machine's record of run roots, shared by every invocation here.
    let state = tempfile::tempdir().unwrap();
    let with_state = |r: Rocmatrix| r.env("ROCMATRIX_STATE", state.path());
    let root_a = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();

    // A run in one directory ...
    let m = matrix(root_a.path(), "a", "true");
    let o = with_state(Rocmatrix::run_matrix(&m))
        .progress_plain()
        .current_dir(root_a.path())
        .run();
    o.assert_success();
    let image_a = image_of(&run_dir(&root_a.path().join(".rocmatrix")), "a");
    assert!(docker::image_exists(&image_a));

    // ... and a prune from another: the first run's locked image stays.
    let pruned = with_state(Rocmatrix::new())
        .args(["images", "--prune", "--label", &label::label()])
        .current_dir(elsewhere.path())
        .run();
    pruned.assert_success();
    assert!(docker::image_exists(&image_a), "{}", pruned.context());
    assert!(
        pruned
            .stderr()
            .contains(&format!("kept env {image_a}: named by "))
            && pruned.stderr().contains("lock.json"),
        "{}",
        pruned.context()
    );
    let listed = with_state(Rocmatrix::new())
        .arg("images")
        .current_dir(elsewhere.path())
        .run();
    let row = listed
        .stdout()
        .lines()
        .find(|l| l.contains(&image_a))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(row.contains("named by "), "{}", listed.context());

    // A run still running holds its image against a concurrent prune.
    let root_b = tempfile::tempdir().unwrap();
    let m = matrix(root_b.path(), "b", "sleep 40");
    let mut running = with_state(Rocmatrix::run_matrix(&m))
        .progress_plain()
        .current_dir(root_b.path())
        .spawn();
    let t0 = Instant::now();
    let held = loop {
        let listed = with_state(Rocmatrix::new())
            .arg("images")
            .current_dir(elsewhere.path())
            .run();
        if let Some(row) = listed
            .stdout()
            .lines()
            // Its environment image: the run holds its base first, while
            // the environment is made (a row that sorts before it).
            .find(|l| l.starts_with("env ") && l.contains("held by a running run"))
        {
            break row.split_whitespace().nth(1).unwrap().to_string();
        }
        if t0.elapsed() > Duration::from_secs(300) || running.try_wait().unwrap().is_some() {
            let _ = running.kill();
            panic!("the running run never held an image: {}", listed.context());
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let pruned = with_state(Rocmatrix::new())
        .args(["images", "--prune", "--label", &label::label()])
        .current_dir(elsewhere.path())
        .run();
    assert!(
        pruned.stderr().contains(&format!(
            "kept env {held}: held by a running run (pid {})",
            running.id()
        )),
        "{}",
        pruned.context()
    );
    assert!(docker::image_exists(&held));
    assert!(running.wait().unwrap().success());

    // Once no run root names it, the image goes.
    drop(root_a);
    let pruned = with_state(Rocmatrix::new())
        .args(["images", "--prune", "--label", &label::label()])
        .current_dir(elsewhere.path())
        .run();
    pruned.assert_success();
    assert!(!docker::image_exists(&image_a), "{}", pruned.context());
    assert!(
        docker::image_exists(&held),
        "B's finished run names it: {}",
        pruned.context()
    );
}

/// An environment image with a snapshot built on it (the engine's parent
/// and child): one `images --prune --snapshots` removes both. The engine
/// refuses to remove the environment while the snapshot is there, and the
/// environment sorts first, so it is tried again once the snapshot went.
#[test]
fn prune_removes_an_image_and_the_one_built_on_it_in_one_go() {
    let test = "prune_removes_an_image_and_the_one_built_on_it_in_one_go";
    let Some(_engine) = engine_exclusive_or_skip(test) else {
        return;
    };
    let id = std::process::id();
    let case = format!("rocmatrix.test-case=prune-layers-{id}");
    let dir = tempfile::tempdir().unwrap();
    // The classic builder, as rocmatrix's own builds (BuildKit records no
    // parent image).
    let build = |tag: &str, containerfile: &str| {
        write(dir.path(), "Containerfile", containerfile);
        let o = std::process::Command::new("docker")
            .env("DOCKER_BUILDKIT", "0")
            .args(["build", "-q", "-f"])
            .arg(dir.path().join("Containerfile"))
            .args(["-t", tag])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let (env, snapshot) = (
        format!("rocmatrix/env:prune-layers-{id}"),
        format!("rocmatrix/snapshot:prune-layers-{id}"),
    );
    build(
        &env,
        &format!(
            "FROM scratch\nLABEL rocmatrix.kind=env {case} {}\nCOPY Containerfile /env\n",
            label::label()
        ),
    );
    build(
        &snapshot,
        &format!("FROM {env}\nLABEL rocmatrix.kind=snapshot\nCOPY Containerfile /snapshot\n"),
    );
    let parent = docker::docker(["image", "inspect", "--format", "{{.Parent}}", &snapshot]);
    assert!(
        !String::from_utf8_lossy(&parent.stdout).trim().is_empty(),
        "the snapshot has a parent image"
    );
    let elsewhere = tempfile::tempdir().unwrap();
    // Without --snapshots the snapshot stays, and so does what it is
    // built on, with the reason.
    let kept = Rocmatrix::new()
        .args(["images", "--prune", "--label", &case])
        .out(elsewhere.path())
        .run();
    kept.assert_success();
    assert!(
        kept.stderr().contains(&format!("kept env {env}: "))
            && kept.stderr().contains("an image built on it is kept")
            && kept.stderr().contains("`--snapshots` removes too"),
        "{}",
        kept.context()
    );
    assert!(docker::image_exists(&env) && docker::image_exists(&snapshot));
    let pruned = Rocmatrix::new()
        .args(["images", "--prune", "--snapshots", "--label", &case])
        .out(elsewhere.path())
        .run();
    pruned.assert_success();
    for (kind, tag) in [("env", &env), ("snapshot", &snapshot)] {
        assert!(
            pruned.stdout().contains(&format!("removed {kind} {tag} (")),
            "{}",
            pruned.context()
        );
        assert!(!docker::image_exists(tag), "{tag}: {}", pruned.context());
    }
    assert!(!pruned.stderr().contains("kept"), "{}", pruned.context());
}
