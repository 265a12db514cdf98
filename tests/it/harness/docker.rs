//! The docker CLI, for what tests check or make in the engine themselves.

use std::collections::BTreeMap;
use std::process::{Command, Output};

/// `docker ARGS…`, run to the end.
pub fn docker<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run docker: {e}"))
}

/// Whether the engine has an image of this reference or id.
pub fn image_exists(reference: &str) -> bool {
    docker(["image", "inspect", "--format", "{{.Id}}", reference])
        .status
        .success()
}

/// An image's labels, or `None` when the engine has no such image.
pub fn image_labels(reference: &str) -> Option<BTreeMap<String, String>> {
    let o = docker([
        "image",
        "inspect",
        "--format",
        "{{json .Config.Labels}}",
        reference,
    ]);
    if !o.status.success() {
        return None;
    }
    let labels: Option<BTreeMap<String, String>> =
        serde_json::from_slice(&o.stdout).unwrap_or_default();
    Some(labels.unwrap_or_default())
}

/// Images carrying every one of `labels` (`KEY=VALUE` or `KEY`): their
/// `repository:tag`s, or ids where they have none.
pub fn images_labelled(labels: &[&str]) -> Vec<String> {
    let mut args = vec![
        "images".to_string(),
        "--format".into(),
        "{{.ID}} {{.Repository}}:{{.Tag}}".into(),
    ];
    for l in labels {
        args.push("--filter".into());
        args.push(format!("label={l}"));
    }
    let mut refs: Vec<String> = super::stdout(&docker(&args))
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(id, r)| if r.contains("<none>") { id } else { r }.to_string())
        .collect();
    refs.sort();
    refs.dedup();
    refs
}

/// Containers of run `run_id`, running or not.
pub fn containers_of(run_id: &str) -> Vec<String> {
    let o = docker([
        "ps",
        "-a",
        "-q",
        "--filter",
        &format!("label=rocmatrix.run={run_id}"),
    ]);
    super::stdout(&o).lines().map(str::to_string).collect()
}

/// An image a test made that carries no test-run label (a reproducer built
/// by `run.sh`, a stand-in for a user's image): removed when this is
/// dropped, the test passing or not.
pub struct RemoveOnDrop(pub String);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        // `--no-prune`: the untagged layers under the image may be another
        // test's build cache at this moment (a concurrent `docker build`
        // that just said "Using cache" fails if its parent layer goes); the
        // harness's sweep removes them by label at the end.
        let o = docker(["rmi", "--no-prune", &self.0]);
        let err = super::stderr(&o);
        if !o.status.success() && !err.contains("No such image") {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "could not remove {}: {err}", self.0);
        }
    }
}

/// A tag for things this test run makes: `repository:<run value>`.
pub fn tag_for_run(repository: &str) -> String {
    let t: String = super::label::value()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{repository}:{t}")
}

/// Imports a one-file image (no base, no parent, nothing to inherit) as
/// `tag` with `labels` (`KEY=VALUE`); removed when the guard is dropped.
pub fn import_tiny(tag: &str, labels: &[&str]) -> RemoveOnDrop {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("marker"), tag).unwrap();
    let tar = dir.path().join("image.tar");
    let o = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .output()
        .unwrap();
    assert!(o.status.success(), "tar: {}", super::stderr(&o));
    let mut args = vec!["import".to_string()];
    for l in labels {
        args.push("--change".into());
        args.push(format!("LABEL {l}"));
    }
    args.push(tar.to_string_lossy().into_owned());
    args.push(tag.to_string());
    let o = docker(&args);
    assert!(o.status.success(), "docker import: {}", super::stderr(&o));
    RemoveOnDrop(tag.to_string())
}
