//! The history's second pass (issue 49), on real runs: a test that breaks
//! at run 5 with nothing changed is failing since run 5 (not flaky), and
//! `--fail-on regression` fails from run 5 on; a test failing at runs 2,
//! 5 and 7 on one axis value is flaky there only; a test failing now and
//! then only on one host (a UTS namespace of another name) is flaky only
//! on that host. The counters live in cache volumes, as the history
//! tests' do: the matrix file never changes between runs.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

/// Two cells (`part: [a, b]`) counting their runs in a cache volume:
/// `net.broke_at_5` fails from run 5 on in both; `net.sometimes` fails at
/// the runs `flaky_at` names, only where `part=b` (`all` for both cells).
fn matrix(dir: &Path, uniq: &str, flaky_at: &str, flaky_where: &str) -> PathBuf {
    write(
        dir,
        "shape.yaml",
        &format!(
            r#"name: shape-{uniq}
matrix:
  part: [a, b]
environment:
  base: debian:bookworm
cache: [{{path: /cache, key: "shape-{{{{ matrix.part }}}}-{uniq}"}}]
steps:
  - name: test
    junit: [/work/junit/*.xml]
    run: |
      n=$(( $(cat /cache/n 2>/dev/null || echo 0) + 1 )); echo $n > /cache/n
      broke=""; if [ $n -ge 5 ]; then broke='<failure message="wrong answer"/>'; fi
      sometimes=""
      case " {flaky_at} " in *" $n "*)
        if [ {flaky_where} = all ] || [ {flaky_where} = {{{{ matrix.part }}}} ]; then
          sometimes='<failure message="queue never drained"/>'
        fi ;;
      esac
      mkdir -p /work/junit
      printf '<testsuite name="s" tests="3"><testcase classname="net" name="broke_at_5">%s</testcase><testcase classname="net" name="sometimes">%s</testcase><testcase classname="net" name="steady"/></testsuite>\n' "$broke" "$sometimes" > /work/junit/r.xml
"#
        ),
    )
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn store_of(o: &Ran) -> PathBuf {
    o.stdout()
        .lines()
        .find_map(|l| l.strip_prefix("run store: "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no run store line: {}", o.context()))
}

fn id(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn a_step_change_with_nothing_changed_is_failing_since_not_flaky() {
    let test = "a_step_change_with_nothing_changed_is_failing_since_not_flaky";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let uniq = format!("{}-{}", std::process::id(), label::value());
    let m = matrix(dir.path(), &uniq, "2 5 7", "b");
    let mut runs = Vec::new();
    for k in 1..=8 {
        let o = Rocmatrix::run_matrix(&m)
            .progress_plain()
            .out(&out)
            .args(["--fail-on", "regression"])
            .run();
        // Run 2: `sometimes` fails for the first time (new); runs 3 and 4:
        // it passed again (flaky), nothing is new; from run 5 on,
        // `broke_at_5` is new, then failing since run 5.
        let want = if k == 2 || k >= 5 { 1 } else { 0 };
        assert_eq!(o.code(), want, "run {k}: {}", o.context());
        if k >= 5 {
            assert!(
                o.stdout().contains("regressions in the history"),
                "run {k}: {}",
                o.context()
            );
        }
        runs.push(store_of(&o));
        if k == 1 {
            // Nothing failing yet: no empty table of failing tests.
            let summary = std::fs::read_to_string(runs[0].join("report/summary.md")).unwrap();
            assert!(!summary.contains("Failing tests across runs"), "{summary}");
        }
        if k == 5 {
            assert!(
                o.stdout().contains("net.broke_at_5 in a: new"),
                "run 5: {}",
                o.context()
            );
        }
        if k == 8 {
            let said = o.stdout();
            for cell in ["a", "b"] {
                assert!(
                    said.contains(&format!(
                        "net.broke_at_5 in {cell}: failing since {}",
                        id(&runs[4])
                    )),
                    "{said}"
                );
            }
            assert!(
                said.contains(
                    "nothing the matrix controls changed — host facts: none recorded changed"
                ),
                "{said}"
            );
            assert!(!said.contains("net.broke_at_5 in a: flaky"), "{said}");
        }
    }
    let summary = std::fs::read_to_string(runs[7].join("report/summary.md")).unwrap();
    let row = summary
        .lines()
        .find(|l| l.starts_with(r"| a | net.broke\_at\_5 |"))
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(
        row.contains(&format!("failing since {}", id(&runs[4]))) && row.contains("✓✓✓✓✗✗✗✗"),
        "{row}"
    );

    let history = || Rocmatrix::new().arg("history").arg("--out").arg(&out);
    let flaky = json(
        &history()
            .args(["flaky", "--json"])
            .run()
            .assert_success()
            .stdout(),
    );
    let flaky = flaky.as_array().unwrap();
    assert_eq!(flaky.len(), 1, "{flaky:#?}");
    assert_eq!(flaky[0]["test"], "net.sometimes");
    assert_eq!(flaky[0]["cell"], "b");
    assert_eq!(flaky[0]["failures"], 3);
    assert_eq!(flaky[0]["where"], serde_json::json!(["part=b"]));
    let shown = history()
        .args(["show", "net.broke_at_5", "--cell", "part=a"])
        .run()
        .assert_success()
        .stdout();
    assert!(shown.contains("✓✓✓✓✗✗✗✗"), "{shown}");
    assert!(shown.contains("failing since"), "{shown}");

    // expect --propose: broke_at_5 is a failure to expect, never a flaky
    // entry; `sometimes` is flaky where part=b.
    let proposed = Rocmatrix::new()
        .args(["expect"])
        .arg(&m)
        .args(["--propose", "--out"])
        .arg(&out)
        .run();
    proposed.assert_success();
    let diff = proposed.stdout();
    assert!(!diff.contains("net.broke_at_5: flaky"), "{diff}");
    assert!(diff.contains("tests: [net.broke_at_5]"), "{diff}");
    assert!(diff.contains("net.sometimes: flaky"), "{diff}");
}

#[test]
fn a_test_failing_now_and_then_only_on_one_host_is_flaky_only_there() {
    let test = "a_test_failing_now_and_then_only_on_one_host_is_flaky_only_there";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    if !have("unshare", &["--version"], test) {
        return;
    }
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let uniq = format!("h{}-{}", std::process::id(), label::value());
    // Runs alternate between node-a (odd) and node-b (even); `sometimes`
    // fails in both cells at runs 2 and 6, both on node-b.
    let m = matrix(dir.path(), &uniq, "2 6", "all");
    let mut runs = Vec::new();
    for k in 1..=6 {
        let host = if k % 2 == 1 { "node-a" } else { "node-b" };
        let o = Rocmatrix::on_host(host)
            .arg("run")
            .arg(&m)
            .progress_plain()
            .out(&out)
            .run();
        assert!(o.code() == 0 || o.code() == 1, "{}", o.context());
        let store = store_of(&o);
        let cell: Value = json(&std::fs::read_to_string(store.join("cells/a/cell.json")).unwrap());
        assert_eq!(cell["host"]["host"], host, "{cell:#}");
        assert!(cell["host"]["kernel"]
            .as_str()
            .is_some_and(|k| !k.is_empty()));
        runs.push(store);
    }
    let flaky = json(
        &Rocmatrix::new()
            .args(["history", "flaky", "--json", "--out"])
            .arg(&out)
            .run()
            .assert_success()
            .stdout(),
    );
    let flaky = flaky.as_array().unwrap();
    assert_eq!(flaky.len(), 2, "both cells: {flaky:#?}");
    for f in flaky {
        assert_eq!(f["test"], "net.sometimes");
        assert_eq!(f["where"], serde_json::json!([]), "no axis value: {f:#}");
        assert_eq!(f["where_host"], serde_json::json!(["host=node-b"]), "{f:#}");
    }
    let text = Rocmatrix::new()
        .args(["history", "flaky", "--out"])
        .arg(&out)
        .run()
        .assert_success()
        .stdout();
    assert!(text.contains("flaky only on host node-b"), "{text}");
    let hosts = Rocmatrix::new()
        .args(["history", "hosts", "--out"])
        .arg(&out)
        .run()
        .assert_success()
        .stdout();
    assert!(
        hosts.contains("node-a") && hosts.contains("node-b"),
        "{hosts}"
    );
    // The last report (run 6, on node-b) says where its cells ran.
    let html = std::fs::read_to_string(runs[5].join("report/index.html")).unwrap();
    assert!(
        html.contains("node-b"),
        "the environment section names the host"
    );
}
