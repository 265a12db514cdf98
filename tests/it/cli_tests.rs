//! The `rocmatrix` binary as a user runs it: output formats and exit codes.

use std::path::Path;

use crate::harness::{write, Ran, Rocmatrix};

fn run(args: &[&str]) -> Ran {
    Rocmatrix::new().args(args).run()
}

const MATRIX: &str = "name: demo
matrix:
  distro: [bookworm, trixie]
  rocm: [5.7, 6.0, 6.10]
  gfx: [gfx900, gfx1030]
  exclude:
    - distro: bookworm
      rocm: 6.10
environment:
  base: debian:{{ matrix.distro }}
  packages: [hipcc]
steps:
  - name: build
    run: hipcc --offload-arch={{ matrix.gfx }} x.hip
";

#[test]
fn plan_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "m.yaml", MATRIX);
    let o = run(&["plan", f.to_str().unwrap()]);
    assert!(o.status.success(), "{}", o.stderr());
    let out = o.stdout();
    assert!(out.contains("trixie.6.10.gfx1030"), "{out}");
    assert!(out.contains("10 cells, 2 environments"), "{out}");

    let o = run(&["plan", f.to_str().unwrap(), "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["name"], "demo");
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 10);
    assert_eq!(cells[0]["id"], "bookworm.5.7.gfx900");
    assert_eq!(cells[0]["values"]["rocm"], "5.7");
    assert_eq!(cells[9]["values"]["rocm"], "6.10");
    assert_eq!(cells[0]["environment"].as_str().unwrap().len(), 64);
    assert_eq!(cells[0]["hash"].as_str().unwrap().len(), 64);
}

#[test]
fn only_and_shards() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "m.yaml", MATRIX);
    let f = f.to_str().unwrap();
    let ids = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["plan", f, "--format", "json"];
        a.extend_from_slice(args);
        let o = run(&a);
        assert!(o.status.success(), "{}", o.stderr());
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        doc["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_string())
            .collect()
    };
    let only = ids(&[
        "--only",
        "gfx=gfx1030",
        "--only",
        "rocm=6.10",
        "--only",
        "rocm=5.7",
    ]);
    assert_eq!(
        only,
        [
            "bookworm.5.7.gfx1030",
            "trixie.5.7.gfx1030",
            "trixie.6.10.gfx1030"
        ]
    );

    let all = ids(&[]);
    let mut union = Vec::new();
    for k in 1..=3 {
        let part = ids(&["--shard", &format!("{k}/3")]);
        assert!((3..=4).contains(&part.len()), "{part:?}");
        union.extend(part);
    }
    assert_eq!(union, all);

    let o = run(&["plan", f, "--only", "gfx=gfx1100"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        o.stderr()
            .contains("no cell has gfx=gfx1100 (values: gfx900, gfx1030)"),
        "{}",
        o.stderr()
    );
    let o = run(&["plan", f, "--only", "gpu=gfx1100"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["plan", f, "--shard", "4/3"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn github_and_gitlab_formats() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "m.yaml", MATRIX);
    let f = f.to_str().unwrap();
    let o = run(&["plan", f, "--format", "github", "--shards", "4"]);
    assert!(o.status.success(), "{}", o.stderr());
    let out = o.stdout();
    assert_eq!(out.lines().count(), 1, "one line for $GITHUB_OUTPUT");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let inc = doc["include"].as_array().unwrap();
    assert_eq!(inc.len(), 4);
    assert_eq!(inc[1]["shard"], "2/4");
    assert_eq!(inc[1]["command"], format!("rocmatrix run {f} --shard 2/4"));
    let total: u64 = inc.iter().map(|e| e["cells"].as_u64().unwrap()).sum();
    assert_eq!(total, 10);

    let o = run(&["plan", f, "--format", "github", "--shards", "300"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stderr().contains("at most 256"), "{}", o.stderr());

    let o = run(&["plan", f, "--format", "gitlab", "--shards", "2"]);
    assert!(o.status.success(), "{}", o.stderr());
    let doc: serde_json::Value = rocmatrix::yaml::from_str(&o.stdout()).unwrap();
    let job = &doc["demo-2-of-2"];
    assert_eq!(
        job["script"][0].as_str().unwrap(),
        format!("rocmatrix run {f} --shard 2/2")
    );
    let o = run(&["plan", f, "--format", "gitlab", "--shards", "201"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stderr().contains("at most 200"), "{}", o.stderr());
}

#[test]
fn a_new_users_typos_point_at_the_line() {
    let dir = tempfile::tempdir().unwrap();
    // A typo in a key.
    let f = write(
        dir.path(),
        "typo.yaml",
        &MATRIX.replace("  packages:", "  pakages:"),
    );
    let o = run(&["validate", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = o.stderr();
    assert!(
        e.contains("typo.yaml:11:3: environment: unknown field `pakages`"),
        "{e}"
    );
    // A float-looking version survives as written and duplicates are caught.
    let f = write(
        dir.path(),
        "dup.yaml",
        &MATRIX.replace("[5.7, 6.0, 6.10]", "[5.7, 6.1, 6.10, 6.1]"),
    );
    let o = run(&["validate", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        o.stderr()
            .contains("dup.yaml:4:26: axis `rocm` lists `6.1` twice"),
        "{}",
        o.stderr()
    );
    // A misspelt template variable.
    let f = write(
        dir.path(),
        "tmpl.yaml",
        &MATRIX.replace("matrix.gfx }}", "matrix.gpu }}"),
    );
    let o = run(&["validate", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        o.stderr()
            .contains("tmpl.yaml:14:10: steps[0].run: undefined variable"),
        "{}",
        o.stderr()
    );
    // Good files validate.
    let ok = write(dir.path(), "ok.yaml", MATRIX);
    let o = run(&["validate", ok.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr());
    // A missing file is a usage error, not a panic.
    let o = run(&["validate", "/nonexistent.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stderr().contains("/nonexistent.yaml: cannot read"));
}

#[test]
fn shipped_matrices_validate() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("matrix");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            let o = run(&["validate", p.to_str().unwrap()]);
            assert!(o.status.success(), "{}: {}", p.display(), o.stderr());
            n += 1;
        }
    }
    assert!(n >= 2, "matrix/ has at least two example files");
}

/// `scripts/smoke` builds rocmatrix before its run: a first release build
/// takes minutes, and cargo's progress shows it is working (on stderr, so
/// that the run's own output stays apart). Issue 36: `--quiet` made it look
/// hung for ten minutes.
#[test]
fn smoke_script_shows_the_builds_progress() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(root.join("scripts/smoke")).unwrap();
    let builds: Vec<&str> = script
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("cargo build"))
        .collect();
    assert!(
        !builds.is_empty(),
        "scripts/smoke builds rocmatrix:\n{script}"
    );
    for b in builds {
        let words: Vec<&str> = b.split_whitespace().collect();
        assert!(
            !words.contains(&"--quiet") && !words.contains(&"-q"),
            "the build runs silent: {b}"
        );
        assert!(b.ends_with(">&2"), "cargo's output goes to stderr: {b}");
    }
}
