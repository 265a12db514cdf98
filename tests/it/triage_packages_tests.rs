//! Triage when only packages moved, against the real engine and Debian's
//! archive (issue 37): three small packages that bookworm-backports carries
//! newer than bookworm, one of which breaks the step. The run installs the
//! backports versions; the baseline is the same matrix rebuilt `--locked`
//! with the three at bookworm's versions. `triage` searches the three
//! groups by rebuilding the environment from locks that hold some at the
//! old versions, and names the one that brought the failure.

use serde_json::Value;

use crate::harness::*;

/// Three packages of no dependencies, in bookworm and newer in
/// bookworm-backports (checked against the archive in November 2026).
const PACKAGES: [&str; 3] = [
    "golang-github-dustin-go-humanize-dev",
    "golang-github-google-btree-dev",
    "golang-github-moby-patternmatcher-dev",
];

const MATRIX: &str = r#"name: moved-packages
matrix:
  part: [btree]
environment:
  base: debian:bookworm
  suites: [bookworm-backports]
  prefer: bookworm-backports
  packages: [golang-github-dustin-go-humanize-dev, golang-github-google-btree-dev, golang-github-moby-patternmatcher-dev]
steps:
  - name: test
    run: |
      v=$(dpkg-query -W -f='${Version}' golang-github-google-btree-dev)
      echo "btree $v"
      case $v in *bpo*) echo "btree $v breaks the ordered index"; exit 1;; esac
"#;

#[test]
fn only_packages_moved_and_triage_names_the_group_that_broke_the_step_for_real() {
    let Some(_engine) = engine_or_skip(
        "only_packages_moved_and_triage_names_the_group_that_broke_the_step_for_real",
    ) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "m.yaml", MATRIX);

    // The run: backports' versions; the step fails.
    let (now, run) = run_into(dir.path(), &m, "now", &[]);
    assert_eq!(now.code(), 1, "{}", now.context());
    let mut lock = read_json(&run.join("lock.json"));
    let env = lock["cells"]["btree"]["environment"]
        .as_str()
        .unwrap()
        .to_string();
    let image = lock["environments"][&env]["image"]["tag"]
        .as_str()
        .unwrap()
        .to_string();
    // bookworm's versions, as apt in the image sees them.
    let madison = docker::docker([
        "run",
        "--rm",
        "--label",
        &label::label(),
        &image,
        "sh",
        "-c",
        &format!(
            "apt-get update -qq >/dev/null 2>&1; apt-cache madison {}",
            PACKAGES.join(" ")
        ),
    ]);
    let listed = String::from_utf8_lossy(&madison.stdout).to_string();
    let mut old = Vec::new();
    for p in PACKAGES {
        let newest = lock["environments"][&env]["packages"][p]
            .as_str()
            .unwrap_or_else(|| panic!("{p} not in the lock"))
            .to_string();
        assert!(newest.contains("bpo"), "{p} {newest}: not from backports");
        let v = listed
            .lines()
            .filter(|l| l.split('|').next().map(str::trim) == Some(p))
            .filter_map(|l| l.split('|').nth(1).map(str::trim))
            .find(|v| *v != newest)
            .unwrap_or_else(|| panic!("no older {p}: {listed}"))
            .to_string();
        lock["environments"][&env]["packages"][p] = v.clone().into();
        old.push((p, v, newest));
    }
    let pinned = dir.path().join("older.json");
    std::fs::write(&pinned, lock.to_string()).unwrap();

    // The baseline: the same matrix, the three at bookworm's versions.
    let (before, base) = run_into(
        dir.path(),
        &m,
        "before",
        &["--locked", pinned.to_str().unwrap()],
    );
    assert_eq!(before.code(), 0, "{}", before.context());

    let o = Rocmatrix::new()
        .args(["triage", run.to_str().unwrap(), "--baseline"])
        .arg(&base)
        .progress_plain()
        .out(dir.path().join("now"))
        .run();
    eprintln!("{}", o.text());
    let doc = read_json(&run.join("triage.json"));
    let item = &doc["items"][0];
    let search = item["searches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["over"] == "packages")
        .unwrap_or_else(|| panic!("no package search: {doc:#}"));
    assert_eq!(search["state"], "found", "{doc:#}");
    let (_, v, newest) = &old[1];
    let group = format!("golang-github-google-btree-dev {v} → {newest}");
    assert_eq!(search["first"]["value"], group.as_str(), "{doc:#}");
    // Four points (none of the three, then each joining): at most
    // ⌈log2 4⌉ + 3 probes, the ends validated.
    let probes = search["probes"].as_u64().unwrap();
    assert!(probes <= 5, "{probes} probes: {doc:#}");
    assert!(
        o.stdout().contains(&format!("started with {group}")),
        "{}",
        o.stdout()
    );
    let again = Rocmatrix::new()
        .args(["triage", run.to_str().unwrap(), "--baseline"])
        .arg(&base)
        .out(dir.path().join("now"))
        .run();
    let doc = read_json(&run.join("triage.json"));
    let search = doc["items"][0]["searches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["over"] == "packages")
        .unwrap()
        .clone();
    assert_eq!(
        search["first"]["value"],
        group.as_str(),
        "{}",
        again.context()
    );
    assert_eq!(search["probes_now"], 0, "{}", again.context());

    // A baseline whose btree the archive no longer serves: the range is
    // the list, and says why.
    let gone = dir.path().join("gone/runs").join(base.file_name().unwrap());
    std::fs::create_dir_all(gone.parent().unwrap()).unwrap();
    let cp = std::process::Command::new("cp")
        .arg("-a")
        .arg(&base)
        .arg(&gone)
        .status()
        .unwrap();
    assert!(cp.success());
    let mut old_lock = read_json(&gone.join("lock.json"));
    old_lock["environments"][&env]["packages"][PACKAGES[1]] = "0.0.1-0rmx1".into();
    std::fs::write(gone.join("lock.json"), old_lock.to_string()).unwrap();
    let o = Rocmatrix::new()
        .args(["triage", run.to_str().unwrap(), "--baseline"])
        .arg(&gone)
        .progress_plain()
        .out(dir.path().join("now"))
        .run();
    let doc = read_json(&run.join("triage.json"));
    let item: &Value = &doc["items"][0];
    let line = item["line"].as_str().unwrap();
    assert!(
        line.starts_with("only packages moved: golang-github-")
            && line.contains("0.0.1-0rmx1")
            && line.ends_with(
                "(the baseline's versions are no longer served: the range is this list)"
            ),
        "{line}\n{}",
        o.context()
    );
}
