//! `--affected-by` against a real run's lock: three bookworm environments
//! (distro-info-data; expat, which pulls in libexpat1; libexpat1-dev,
//! which pulls in libexpat1 too) over a git source made here, patched in
//! one cell. A binary package pulled in as a dependency selects exactly the
//! two cells that installed it, the source package `expat` the cells of
//! each of its binaries, the `sources:` entry every cell until the lock
//! shows the commit, the patch its one cell; unknown names are exit 2; and
//! `run --affected-by` runs only what it selects, and its run store and
//! reports say what selected them.

use std::path::{Path, PathBuf};

use crate::harness::*;

fn matrix(dir: &Path, repo: &Path) -> PathBuf {
    write(
        dir,
        "m.yaml",
        &format!(
            r#"name: affected-fixture
matrix:
  part: [zones, tool, dev]
environment:
  base: debian:bookworm
  packages: ["{{% if matrix.part == 'tool' %}}expat{{% elif matrix.part == 'dev' %}}libexpat1-dev{{% else %}}distro-info-data{{% endif %}}"]
retries: 0
sources:
  - name: proj
    url: {}
    ref: main
    patches: ["{{{{ 'fix.patch' if matrix.part == 'dev' else '' }}}}"]
steps:
  - name: show
    run: cat /src/proj/VERSION
"#,
            repo.display()
        ),
    )
}

/// A repository of one commit, and `fix.patch` beside the matrix.
fn repo(dir: &Path) -> (PathBuf, String) {
    let repo = dir.join("proj");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("VERSION"), "1\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "one"]);
    std::fs::write(repo.join("VERSION"), "1 fixed\n").unwrap();
    let patch = git(&repo, &["diff"]);
    std::fs::write(dir.join("fix.patch"), patch + "\n").unwrap();
    git(&repo, &["checkout", "-q", "."]);
    (repo.clone(), git(&repo, &["rev-parse", "HEAD"]))
}

fn plan(m: &Path, out: &Path, extra: &[&str]) -> Ran {
    Rocmatrix::new()
        .arg("plan")
        .arg(m)
        .out(out)
        .arg("--affected-by")
        .args(extra)
        .run()
}

/// The affected cells a table names (the lines `cell: reason…`).
fn selected(o: &Ran) -> Vec<String> {
    o.stdout()
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(c, _)| c.to_string()))
        .filter(|c| ["zones", "tool", "dev"].contains(&c.as_str()))
        .collect()
}

fn line_of(o: &Ran, cell: &str) -> String {
    let out = o.stdout();
    out.lines()
        .find(|l| l.starts_with(&format!("{cell}: ")))
        .unwrap_or_else(|| panic!("no line for {cell}:\n{out}"))
        .to_string()
}

#[test]
fn affected_by_selects_from_a_real_lock() {
    let Some(_engine) = engine_or_skip("affected_by_selects_from_a_real_lock") else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let (proj, head) = repo(dir.path());
    let m = matrix(dir.path(), &proj);
    let out = dir.path().join("out");
    let (ran, run) = run_into(dir.path(), &m, "out", &[]);
    assert_eq!(ran.code(), 0, "{}", ran.context());
    // The lock knows libexpat1's source package.
    let lock: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("lock.json")).unwrap()).unwrap();
    let sources: Vec<&serde_json::Value> = lock["environments"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|e| e["sources"].get("libexpat1:amd64"))
        .collect();
    assert_eq!(sources.len(), 2, "{lock}");
    assert_eq!(sources[0]["name"], "expat");

    // A dependency: exactly the two environments that pulled it in.
    let o = plan(&m, &out, &["libexpat1"]);
    assert_eq!(o.code(), 0, "{}", o.context());
    assert_eq!(selected(&o), ["tool", "dev"], "{}", o.stdout());
    let tool = line_of(&o, "tool");
    assert!(
        tool.contains("installs libexpat1:amd64 ") && tool.contains("(src:expat) as a dependency"),
        "{tool}"
    );
    assert!(
        o.stdout()
            .contains("2 of 3 cells affected by libexpat1 (lock of "),
        "{}",
        o.stdout()
    );
    // The binary a matrix asks for: its one cell.
    assert_eq!(selected(&plan(&m, &out, &["expat"])), ["tool"]);

    // The source package: the cells of each of its binaries.
    let o = plan(&m, &out, &["src:expat"]);
    assert_eq!(selected(&o), ["tool", "dev"], "{}", o.stdout());
    assert!(
        line_of(&o, "tool").contains("installs expat "),
        "{}",
        o.stdout()
    );
    assert!(
        line_of(&o, "dev").contains("installs libexpat1-dev:amd64 "),
        "{}",
        o.stdout()
    );

    // The `sources:` entry: every cell, none once the lock has the commit.
    let o = plan(&m, &out, &["source:proj"]);
    assert_eq!(selected(&o), ["zones", "tool", "dev"], "{}", o.stdout());
    let o = plan(&m, &out, &[&format!("source:proj@{}", &head[..12])]);
    assert_eq!(o.code(), 0, "{}", o.context());
    assert!(
        o.stdout().contains("no cell is affected by source:proj@"),
        "{}",
        o.stdout()
    );
    // The patch: its one cell.
    let o = plan(&m, &out, &["file:fix.patch"]);
    assert_eq!(selected(&o), ["dev"], "{}", o.stdout());
    assert!(line_of(&o, "dev").ends_with("uses file:fix.patch (a patch of source proj)"));

    formats_carry_only_the_affected(&m, &out, &run);
    unknown_names_are_exit_2(&m, &out);
    run_runs_only_the_affected(&m, &out, &lock);
}

fn formats_carry_only_the_affected(m: &Path, out: &Path, run: &Path) {
    let o = plan(m, out, &["libexpat1", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&o.stdout()).unwrap();
    let ids: Vec<&str> = doc["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["tool", "dev"]);
    assert_eq!(doc["affected"]["of"], 3);
    assert_eq!(doc["affected"]["cells"].as_array().unwrap().len(), 2);
    let o = plan(m, out, &["libexpat1", "--format", "github"]);
    assert_eq!(o.code(), 0, "{}", o.context());
    let jobs: serde_json::Value = serde_json::from_str(&o.stdout()).unwrap();
    let jobs = jobs["include"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    let command = jobs[0]["command"].as_str().unwrap();
    assert!(
        command.contains("--affected-by libexpat1 --lock ")
            && command.contains(&run.display().to_string()),
        "{command}"
    );
    assert!(
        o.stderr().contains("2 of 3 cells affected"),
        "{}",
        o.stderr()
    );
}

fn unknown_names_are_exit_2(m: &Path, out: &Path) {
    for (change, says) in [
        ("libexpat2", "libexpat2"),
        ("src:expatt", "src:expatt"),
        ("source:nope", "no `sources:` entry"),
        ("file:nope.patch", "no such file"),
        ("no;such", "not a package name"),
    ] {
        let o = plan(m, out, &[change]);
        assert_eq!(o.code(), 2, "{change}: {}", o.context());
        assert!(o.stderr().contains(says), "{change}: {}", o.stderr());
    }
    let o = plan(m, out, &["expat", "--lock", "/nonexistent"]);
    assert_eq!(o.code(), 2, "{}", o.context());
    let many: Vec<String> = (0..5000).map(|i| format!("p{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let o = plan(m, out, &many);
    assert_eq!(o.code(), 2, "{}", o.context());
    assert!(
        o.stderr().contains("5000 changes; at most 1024"),
        "{}",
        o.stderr()
    );
}

fn run_runs_only_the_affected(m: &Path, out: &Path, lock: &serde_json::Value) {
    let o = Rocmatrix::run_matrix(m)
        .progress_plain()
        .out(out)
        .args(["--affected-by", "expat"])
        .run();
    assert_eq!(o.code(), 0, "{}", o.context());
    assert!(
        o.stderr().contains("tool: installs expat "),
        "{}",
        o.stderr()
    );
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(o.run_store().join("plan.json")).unwrap())
            .unwrap();
    let cells = plan["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{plan}");
    // The run keeps what selected it, and its reports say so.
    let selected = &plan["selected_by"];
    assert_eq!(selected["changes"], serde_json::json!(["expat"]), "{plan}");
    assert_eq!(selected["of"], 3, "{plan}");
    assert_eq!(selected["cells"][0]["id"], "tool", "{plan}");
    let report = o.run_store().join("report");
    let summary = std::fs::read_to_string(report.join("summary.md")).unwrap();
    let line = "1 of 3 cells, selected by --affected-by expat (lock of ";
    assert!(summary.contains(line), "{summary}");
    assert!(summary.contains("- **tool**: installs expat "), "{summary}");
    let index = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(index.contains(line), "{index}");
    let results = std::fs::read_to_string(report.join("results.json")).unwrap();
    assert!(results.contains("\"selected_by\""), "{results}");
    // The version the lock has: nothing new, nothing to run.
    let tool = lock["cells"]["tool"]["environment"].as_str().unwrap();
    let version = lock["environments"][tool]["packages"]["expat"]
        .as_str()
        .unwrap();
    let o = Rocmatrix::run_matrix(m)
        .out(out)
        .args(["--affected-by", &format!("expat={version}")])
        .run();
    assert_eq!(o.code(), 0, "{}", o.context());
    assert!(o.stdout().contains("nothing to run"), "{}", o.stdout());
}
