//! An environment built on a base that another, labelled invocation made
//! does not carry that invocation's `--label` labels: a sweep by them (a
//! CI job's cleanup, the test harness's) must not remove what later runs
//! built on the base. Last session a test run's sweep deleted a user run's
//! environment image this way, mid-run.

use crate::harness::*;

#[test]
fn an_environment_does_not_inherit_its_bases_makers_labels() {
    let test = "an_environment_does_not_inherit_its_bases_makers_labels";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    let debian = bases::ensure("bookworm");
    // A base as a labelled rocmatrix makes one: this test run's label, and
    // the list of its `--label` keys.
    let dir = tempfile::tempdir().unwrap();
    let base = docker::tag_for_run("rocmatrix-test/labelled-base");
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!(
            "FROM {debian}\nLABEL {}=\"{}\" rocmatrix.labels=\"{}\"\n",
            label::KEY,
            label::value(),
            label::KEY
        ),
    )
    .unwrap();
    let built = docker::docker(["build", "-q", "-t", &base, dir.path().to_str().unwrap()]);
    assert!(built.status.success(), "{}", stderr(&built));

    // Another invocation, labelled otherwise (as a user's CI job), builds
    // its environment on it.
    let m = write(
        dir.path(),
        "m.yaml",
        &format!(
            "name: labels\nmatrix:\n  case: [one]\nenvironment:\n  base: {base}\nsteps:\n  - name: t\n    run: \"true\"\n"
        ),
    );
    let o = Rocmatrix::run_matrix(&m)
        .unlabelled()
        .env("ROCMATRIX_LABEL", label::fixture_label())
        .progress_plain()
        .out(dir.path())
        .run();
    o.assert_success();
    let run = o.run_store();
    let manifest = read_json(&run.join("run.json"));
    let images = manifest["images"].as_object().unwrap();
    assert_eq!(images.len(), 1, "{manifest:#}");
    let tag = images.values().next().unwrap()["tag"].as_str().unwrap();
    let inspect = docker::docker(["image", "inspect", "-f", "{{json .Config.Labels}}", tag]);
    let labels: serde_json::Value = serde_json::from_str(&stdout(&inspect)).unwrap();
    assert_eq!(labels[label::KEY], "", "the base maker's label: {labels:#}");
    assert_eq!(
        labels[label::FIXTURE_KEY],
        label::value(),
        "the builder's own: {labels:#}"
    );
    assert_eq!(labels["rocmatrix.labels"], label::FIXTURE_KEY, "{labels:#}");
}
