//! The harness's promises about the engine: the test-run label reaches what
//! rocmatrix makes, pruning by it keeps a user's images, and the sweep removes
//! what a dead test run left and nothing else.

use std::process::Command;

use crate::harness::docker::{self, image_exists, image_labels, images_labelled, import_tiny};
use crate::harness::*;

#[test]
fn the_test_run_label_names_this_host_a_live_process_and_a_time() {
    let v = label::value();
    let (rest, time) = v.rsplit_once('-').unwrap();
    let (host, pid) = rest.rsplit_once('-').unwrap();
    assert_eq!(host, label::hostname(), "{v}");
    let pid: u32 = pid.parse().unwrap();
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "{v}: the pid is this process or scripts/test"
    );
    assert!(time.parse::<u64>().unwrap() > 1_600_000_000, "{v}");
    assert_eq!(label::label(), format!("rocmatrix.test-run={v}"));
}

/// The done condition of the test harness, in-process: an engine with a
/// user's environment image, its base and an unrelated image keeps all three
/// through a prune by the test-run label, which removes what the tests built.
#[test]
fn prune_by_the_test_label_keeps_a_users_images() {
    let test = "prune_by_the_test_label_keeps_a_users_images";
    let Some(_engine) = engine_exclusive_or_skip(test) else {
        return;
    };
    let base = bases::ensure("bookworm");
    let base_labels = image_labels(&base).unwrap();
    // Stand-ins for a user's images, without the test-run label (they carry
    // rocmatrix.test-fixture=<run> so that the cleanup finds them even if
    // this test dies before its guards drop).
    let fixture = label::fixture_label();
    let user_env = docker::tag_for_run("rocmatrix-it/user-env");
    let _user_env = import_tiny(&user_env, &["rocmatrix.kind=env", &fixture]);
    let unrelated = docker::tag_for_run("rocmatrix-it/unrelated");
    let _unrelated = import_tiny(&unrelated, &[&fixture]);

    // An environment image the tests build: it carries the test-run label.
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "m.yaml",
        &format!(
            "name: prune\nmatrix:\n  x: [a]\nenvironment:\n  base: {base}\n  setup: echo {} > /etc/prune-test\nsteps:\n  - name: s\n    run: cat /etc/prune-test\n",
            label::value()
        ),
    );
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .out(dir.path())
        .run();
    o.assert_success();
    let built = cell_json(&o.run_store(), "a")["image"]
        .as_str()
        .unwrap()
        .to_string();
    let labels = image_labels(&built).unwrap();
    assert_eq!(
        labels.get(label::KEY).map(String::as_str),
        Some(label::value()),
        "{built}: {labels:?}"
    );
    assert_eq!(
        labels.get("rocmatrix.kind").map(String::as_str),
        Some("env")
    );
    let listed = Rocmatrix::new()
        .unlabelled()
        .arg("images")
        .run()
        .assert_success()
        .stdout();
    assert!(
        listed.contains(&user_env) && listed.contains(&built),
        "both are environment images to rocmatrix: {listed}"
    );
    let ours = Rocmatrix::new()
        .arg("images")
        .run()
        .assert_success()
        .stdout();
    assert!(
        ours.contains(&built) && !ours.contains(&user_env),
        "with the label, `images` lists only the test run's: {ours}"
    );

    // A run store whose lock names the image keeps it from pruning ...
    let prune = |out: &std::path::Path| {
        Rocmatrix::new()
            .args(["images", "--prune", "--label", &label::label()])
            .out(out)
            .run()
    };
    let o = prune(dir.path());
    o.assert_success();
    assert!(image_exists(&built), "named by a lock: {}", o.context());
    // ... and without one, the prune by label removes it and nothing else.
    let elsewhere = tempfile::tempdir().unwrap();
    let o = prune(elsewhere.path());
    o.assert_success();
    assert!(o.stdout().contains(&built), "{}", o.context());
    assert!(!image_exists(&built), "{}", o.context());
    assert_eq!(
        images_labelled(&["rocmatrix.kind=env", &label::label()]),
        Vec::<String>::new()
    );
    for kept in [&user_env, &unrelated, &base] {
        assert!(image_exists(kept), "{kept} was removed: {}", o.context());
    }
    assert!(!o.stdout().contains(&user_env), "{}", o.context());
    assert_eq!(
        image_labels(&base).unwrap(),
        base_labels,
        "the base is as it was"
    );
    if bases::origin("bookworm") == Some(bases::Origin::Present) {
        assert!(
            !base_labels.contains_key(label::KEY),
            "a base that was there is not the tests'"
        );
    }
}

/// A pid that no process has (one that just exited).
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    pid
}

fn sweep(args: &[&str]) -> std::process::Output {
    let o = Command::new("bash")
        .arg(label::sweep_script())
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "sweep.sh {args:?}: {}", stderr(&o));
    o
}

/// Everything labelled `rocmatrix.test-run=VALUE`: container, image, volume, network.
fn made_for(value: &str) -> Vec<String> {
    let l = format!("label={}={value}", label::KEY);
    let mut all = Vec::new();
    for args in [
        vec!["ps", "-a", "-q", "--filter", &l],
        vec!["images", "-q", "--filter", &l],
        vec!["volume", "ls", "-q", "--filter", &l],
        vec!["network", "ls", "-q", "--filter", &l],
    ] {
        all.extend(stdout(&docker::docker(&args)).lines().map(str::to_string));
    }
    all
}

fn make_for(value: &str) {
    let l = format!("{}={value}", label::KEY);
    let tag = format!("rocmatrix-it/sweep:{value}");
    std::mem::forget(import_tiny(&tag, &[&l]));
    for args in [
        vec!["create", "--label", &l, &tag, "/marker"],
        vec!["volume", "create", "--label", &l],
        vec![
            "network",
            "create",
            "--label",
            &l,
            &format!("rocmatrix-it-{value}"),
        ],
    ] {
        let o = docker::docker(&args);
        assert!(o.status.success(), "docker {args:?}: {}", stderr(&o));
    }
    assert_eq!(made_for(value).len(), 4, "{value}");
}

#[test]
fn the_sweep_removes_what_a_dead_test_run_left_and_nothing_else() {
    let Some(_engine) =
        engine_or_skip("the_sweep_removes_what_a_dead_test_run_left_and_nothing_else")
    else {
        return;
    };
    let host = label::hostname();
    let dead = format!("{host}-{}-1700000000", dead_pid());
    let alive = format!("{host}-{}-1700000000", std::process::id());
    let elsewhere = format!("another-host-{}-1700000000", dead_pid());
    for v in [&dead, &alive, &elsewhere] {
        make_for(v);
    }
    let o = sweep(&["--dead", "--keep", label::value()]);
    assert!(
        stderr(&o).contains(&format!("test run {dead} is gone")),
        "{}",
        stderr(&o)
    );
    assert_eq!(made_for(&dead), Vec::<String>::new(), "{}", stderr(&o));
    assert_eq!(made_for(&alive).len(), 4, "a live run keeps its things");
    assert_eq!(
        made_for(&elsewhere).len(),
        4,
        "another host's pids mean nothing here"
    );
    sweep(&[&alive, &elsewhere]);
    assert_eq!(made_for(&alive), Vec::<String>::new());
    assert_eq!(made_for(&elsewhere), Vec::<String>::new());
}
