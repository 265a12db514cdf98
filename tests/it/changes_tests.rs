//! What changed underneath, against the real engine: two runs of one matrix
//! whose environment differs by one package version. The baseline is the
//! same matrix rebuilt with `--locked` to a lock whose `tzdata` is the older
//! version Debian still serves beside the newest (bookworm-updates has
//! 2025b while bookworm has moved on), so exactly that package differs. A
//! test that fails on the newer zone data regresses; the report, results,
//! terminal and `diff` put the change next to it, and the other environment
//! shows none.

use std::path::Path;

use crate::harness::*;

const MATRIX: &str = r#"name: underneath
matrix:
  part: [zones, info]
environment:
  base: debian:bookworm
  suites: [bookworm-updates]
  packages: ["{{ 'tzdata' if matrix.part == 'zones' else 'distro-info-data' }}"]
steps:
  - name: test
    junit: [/work/out/*.xml]
    run: |
      mkdir -p /work/out
      v=$(dpkg-query -W -f='${Version}' tzdata 2>/dev/null || echo none)
      echo "tzdata $v"
      if [ {{ matrix.part }} = zones ] && dpkg --compare-versions "$v" ge 2026a; then
        printf '<testsuite name="zones" tests="1" failures="1"><testcase classname="zones" name="offsets"><failure message="zone data %s is newer than the tables"/></testcase></testsuite>\n' "$v" > /work/out/r.xml
        exit 1
      fi
      printf '<testsuite name="zones" tests="1"><testcase classname="zones" name="offsets"/></testsuite>\n' > /work/out/r.xml
"#;

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn one_package_version_apart_shows_next_to_its_regression_everywhere() {
    let Some(_engine) =
        engine_or_skip("one_package_version_apart_shows_next_to_its_regression_everywhere")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "m.yaml", MATRIX);

    // The run: the archive's newest tzdata.
    let (now, run) = run_into(dir.path(), &m, "now", &[]);
    assert_eq!(now.code(), 1, "{}", now.context());
    let mut lock = json(&run.join("lock.json"));
    let zones = lock["cells"]["zones"]["environment"]
        .as_str()
        .unwrap()
        .to_string();
    let newest = lock["environments"][&zones]["packages"]["tzdata"]
        .as_str()
        .expect("tzdata in the lock")
        .to_string();
    // The older version the archive still serves, as apt in the image sees it.
    let image = lock["environments"][&zones]["image"]["tag"]
        .as_str()
        .unwrap()
        .to_string();
    let madison = docker::docker([
        "run",
        "--rm",
        "--label",
        &label::label(),
        &image,
        "sh",
        "-c",
        "apt-get update -qq >/dev/null 2>&1; apt-cache madison tzdata",
    ]);
    let listed = String::from_utf8_lossy(&madison.stdout).to_string();
    let older = listed
        .lines()
        .filter_map(|l| l.split('|').nth(1).map(str::trim))
        .find(|v| *v != newest)
        .unwrap_or_else(|| panic!("only one tzdata version is served: {listed}"))
        .to_string();
    lock["environments"][&zones]["packages"]["tzdata"] = older.clone().into();
    let pinned = dir.path().join("older.json");
    std::fs::write(&pinned, lock.to_string()).unwrap();

    // The baseline: the same matrix, tzdata pinned one version back.
    let (before, base) = run_into(
        dir.path(),
        &m,
        "before",
        &["--locked", pinned.to_str().unwrap()],
    );
    assert_eq!(before.code(), 0, "{}", before.context());

    let change = format!("tzdata {older} → {newest}");
    let o = Rocmatrix::new()
        .args([
            "report",
            run.to_str().unwrap(),
            "--baseline",
            base.to_str().unwrap(),
        ])
        .run();
    assert_eq!(o.code(), 1, "{}", o.context());
    let out = o.stdout();
    assert!(
        out.lines().any(
            |l| l.contains("1 new failure in zones — part=zones changed: ") && l.contains(&change)
        ),
        "terminal:\n{out}"
    );
    assert!(!out.contains("part=info changed"), "{out}");

    let summary = std::fs::read_to_string(run.join("report/summary.md")).unwrap();
    let line = summary
        .lines()
        .find(|l| l.contains("**1 new failure in zones**"))
        .unwrap_or_else(|| panic!("summary.md:\n{summary}"));
    assert!(
        line.contains("**part=zones** (changed") && line.contains(&change),
        "{line}"
    );
    assert!(summary.contains("**part=info** (unchanged"), "{summary}");

    let html = std::fs::read_to_string(run.join("report/index.html")).unwrap();
    let item = html
        .lines()
        .find(|l| l.contains("1 new failure in zones"))
        .unwrap_or_else(|| panic!("index.html has no change next to the regression"));
    assert!(item.contains(&change), "{item}");

    let results = json(&run.join("report/results.json"));
    let envs = results["regressions"]["environments"].as_array().unwrap();
    let changed: Vec<&serde_json::Value> =
        envs.iter().filter(|e| e["state"] == "changed").collect();
    assert_eq!(changed.len(), 1, "{envs:?}");
    assert_eq!(changed[0]["cells"], serde_json::json!(["zones"]));
    assert_eq!(
        changed[0]["packages"],
        serde_json::json!([{"name": "tzdata", "from": older, "to": newest, "important": false}]),
        "exactly one package differs"
    );
    assert!(changed[0].get("other").is_none(), "{:?}", changed[0]);
    let info = envs
        .iter()
        .find(|e| e["cells"] == serde_json::json!(["info"]))
        .unwrap();
    assert_eq!(info["state"], "unchanged");
    assert_eq!(info["packages"], serde_json::json!([]));

    let d = Rocmatrix::new()
        .args(["diff", base.to_str().unwrap(), run.to_str().unwrap()])
        .run();
    d.assert_success();
    let text = d.stdout();
    assert!(text.contains("1 regression · new failure: 1"), "{text}");
    assert!(
        text.contains(&format!(
            "1 new failure in zones — part=zones changed: {change}"
        )),
        "{text}"
    );
    assert!(text.contains("  part=info: unchanged"), "{text}");
    let d = Rocmatrix::new()
        .args([
            "diff",
            base.to_str().unwrap(),
            run.to_str().unwrap(),
            "--fail-on",
            "regression",
        ])
        .run();
    assert_eq!(d.code(), 1, "{}", d.context());
}
