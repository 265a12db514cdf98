//! The history across real runs (issues 35, 49): a matrix run six times whose
//! tests fail intermittently on one axis value, break at run 5 after a
//! change, and fail from the first run; each is told flaky (and where),
//! failing since run 5, known since run 1 — in SQLite by default and in a
//! real PostgreSQL server shared through a URL. Recording is idempotent,
//! concurrent recorders both land, and a corrupt, newer or unreachable
//! history costs the run nothing but one line (and never shows a password).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::postgres::{Postgres, PASSWORD};
use crate::harness::*;

/// The matrix, with the `Suite.Broken` test failing when `broken`.
fn matrix(dir: &Path, uniq: &str, broken: bool) -> PathBuf {
    let broken = if broken {
        r#"<failure message="wrong answer: 41"/>"#
    } else {
        ""
    };
    write(
        dir,
        "hist.yaml",
        &format!(
            r#"name: hist
matrix:
  gfx: [gfx1030, gfx1151]
environment:
  base: debian:bookworm
cache: [{{path: /cache, key: "hist-{{{{ matrix.gfx }}}}-{uniq}"}}]
steps:
  - name: test
    junit: [/work/junit/*.xml]
    run: |
      n=$(( $(cat /cache/n 2>/dev/null || echo 0) + 1 )); echo $n > /cache/n
      flaky=""
      if [ {{{{ matrix.gfx }}}} = gfx1151 ] && [ $((n % 3)) = 2 ]; then flaky='<failure message="queue never drained"/>'; fi
      broken='{broken}'
      mkdir -p /work/junit
      printf '<testsuite name="s" tests="4"><testcase classname="Suite" name="Flaky">%s</testcase><testcase classname="Suite" name="Broken">%s</testcase><testcase classname="Suite" name="Known"><failure message="no device"/></testcase><testcase classname="Suite" name="Steady"/></testsuite>\n' "$flaky" "$broken" > /work/junit/r.xml
"#
        ),
    )
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn history_tells_flaky_from_broken_in_sqlite_and_postgresql() {
    let test = "history_tells_flaky_from_broken_in_sqlite_and_postgresql";
    let Some(_engine) = engine_or_skip(test) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let uniq = format!("{}-{}", std::process::id(), label::value());
    let mut runs: Vec<PathBuf> = Vec::new();
    let mut last = None;
    for k in 1..=6 {
        let m = matrix(dir.path(), &uniq, k >= 5);
        let o = Rocmatrix::run_matrix(&m).progress_plain().out(&out).run();
        o.assert_code(1);
        assert!(
            o.stdout().contains("history: recorded run "),
            "{}",
            o.context()
        );
        // Its own store, from what it printed: two runs of one second have
        // ids that do not sort by time (the newest directory may be another's).
        let store = o
            .stdout()
            .lines()
            .find_map(|l| l.strip_prefix("run store: "))
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("no run store line: {}", o.context()));
        runs.push(store);
        last = Some(o);
    }
    let id = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
    let last = last.unwrap();
    let said = last.stdout();
    // The run says how its failures read against the history.
    assert!(
        said.contains(&format!(
            "Suite.Broken in gfx1030: failing since {}",
            id(&runs[4])
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "Suite.Known in gfx1030: known since {}",
            id(&runs[0])
        )),
        "{said}"
    );
    // Its report says the same beside each failing test, with the strip of
    // its last runs; each cell's card has its own strip.
    let summary = std::fs::read_to_string(runs[5].join("report/summary.md")).unwrap();
    assert!(
        summary.contains("## Failing tests across runs"),
        "{summary}"
    );
    let row = |test: &str, cell: &str| {
        summary
            .lines()
            .find(|l| l.starts_with(&format!("| {cell} | {test} |")))
            .unwrap_or_else(|| panic!("no row for {test} in {cell}: {summary}"))
            .to_string()
    };
    let broken = row("Suite.Broken", "gfx1030");
    assert!(
        broken.contains(&format!("failing since {}", id(&runs[4]))) && broken.contains("✓✓✓✓✗✗"),
        "{broken}"
    );
    assert!(
        broken.contains("changed since the run before: the cell's definition"),
        "{broken}"
    );
    let known = row("Suite.Known", "gfx1151");
    assert!(
        known.contains(&format!("known since {}", id(&runs[0]))) && known.contains("✗✗✗✗✗✗"),
        "{known}"
    );
    let html = std::fs::read_to_string(runs[5].join("report/index.html")).unwrap();
    assert!(html.contains(r#"<h2 id="history">Failing tests across runs</h2>"#));
    assert!(
        html.contains(r#"last runs: <span class="m fail""#),
        "each cell's card shows its last runs"
    );
    let page = std::fs::read_dir(runs[5].join("report/cells"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .find(|p| p.contains("gfx1030") && p.contains("Suite.Broken"))
        .expect("gfx1030's page");
    assert!(
        page.contains(&format!("failing since {}", id(&runs[4]))),
        "the cell page gives each failing test's history"
    );

    let history = || Rocmatrix::new().arg("history").arg("--out").arg(&out);
    // Runs in the order they started, to the millisecond.
    let listed = json(&history().arg("--json").run().assert_success().stdout());
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run"].as_str().unwrap())
        .collect();
    assert_eq!(ids, runs.iter().map(|r| id(r)).collect::<Vec<_>>());

    // Flaky only on gfx1151, and nothing else is flaky.
    let flaky = json(
        &history()
            .args(["flaky", "--json"])
            .run()
            .assert_success()
            .stdout(),
    );
    let flaky = flaky.as_array().unwrap();
    assert_eq!(flaky.len(), 1, "{flaky:#?}");
    assert_eq!(flaky[0]["test"], "Suite.Flaky");
    assert_eq!(flaky[0]["cell"], "gfx1151");
    assert_eq!(flaky[0]["where"], serde_json::json!(["gfx=gfx1151"]));
    assert_eq!(flaky[0]["failures"], 2);

    // --fail-on regression against a baseline does not count a test the
    // history knows as flaky: run 5 failed Suite.Flaky on gfx1151 (its
    // second stretch of failures: flaky) and broke Suite.Broken in both
    // cells, against run 4. (At run 2, Suite.Flaky's first failure, the
    // history could only call it new.)
    let judged = |history_off: bool| {
        let mut r = Rocmatrix::new()
            .arg("report")
            .arg(&runs[4])
            .arg("--baseline")
            .arg(&runs[3])
            .args(["--fail-on", "regression"]);
        if history_off {
            r = r.args(["--history", "off"]);
        }
        r.run()
    };
    let o = judged(false);
    o.assert_code(1);
    // Run 5 was recorded by its run: the report reads it back only.
    assert!(
        o.stdout().contains("history: had already recorded run "),
        "{}",
        o.context()
    );
    assert!(
        o.stdout().contains(
            "history: 1 flaky test not counted as regressions (flaky in the history): Suite.Flaky in gfx1151"
        ),
        "{}",
        o.context()
    );
    let off = judged(true);
    off.assert_code(1);
    assert!(
        !off.stdout().contains("not counted as regressions"),
        "{}",
        off.context()
    );

    let shown = history()
        .args(["show", "Suite.Broken", "--cell", "gfx=gfx1030"])
        .run()
        .assert_success()
        .stdout();
    assert!(shown.contains("✓✓✓✓✗✗"), "{shown}");
    assert!(shown.contains("wrong answer: 41"), "{shown}");

    // Recording is idempotent.
    let again = history().args(["import"]).arg(&runs[0]).run();
    again.assert_success();
    assert!(
        again.stdout().contains("already recorded"),
        "{}",
        again.context()
    );

    // Two recorders at once both land (WAL and a busy timeout).
    let shared = dir.path().join("shared.sqlite");
    let import = |some: &[PathBuf]| {
        Rocmatrix::new()
            .args(["history", "import"])
            .args(some)
            .arg("--history")
            .arg(&shared)
            .spawn()
    };
    let (a, b) = (import(&runs[..3]), import(&runs[3..]));
    for child in [a, b] {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let n = json(
        &Rocmatrix::new()
            .args(["history", "--json", "--history"])
            .arg(&shared)
            .run()
            .assert_success()
            .stdout(),
    );
    assert_eq!(n.as_array().unwrap().len(), 6);

    // A corrupt or newer history costs the report nothing but a line.
    let corrupt = dir.path().join("corrupt.sqlite");
    std::fs::write(&corrupt, vec![0x5a; 8192]).unwrap();
    let o = Rocmatrix::new()
        .arg("report")
        .arg(&runs[5])
        .arg("--history")
        .arg(&corrupt)
        .run();
    o.assert_code(1);
    assert!(
        o.stdout().contains("history: not recorded (")
            && o.stdout().contains("rocmatrix history import"),
        "{}",
        o.context()
    );
    assert!(runs[5].join("report/results.json").is_file());
    let newer = dir.path().join("newer.sqlite");
    let db = rusqlite::Connection::open(&newer).unwrap();
    db.execute_batch(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         INSERT INTO meta VALUES ('schema_version', '99');",
    )
    .unwrap();
    drop(db);
    let o = Rocmatrix::new()
        .arg("report")
        .arg(&runs[5])
        .arg("--history")
        .arg(&newer)
        .run();
    o.assert_code(1);
    assert!(
        o.stdout().contains("newer than the version"),
        "{}",
        o.context()
    );

    // PostgreSQL, shared by URL: the same verdicts; two recorders at once
    // on an empty database (the schema made once); no password shown.
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    pg.create_db("fleet");
    let url = pg.url("fleet");
    let on_pg = |args: &[&str]| {
        Rocmatrix::new()
            .args(["history"])
            .args(args)
            .env("ROCMATRIX_HISTORY", &url)
    };
    let a = on_pg(&["import"]).args(&runs[..3]).spawn();
    let b = on_pg(&["import"]).args(&runs[3..]).spawn();
    for child in [a, b] {
        let o = child.wait_with_output().unwrap();
        let text =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{text}");
        assert!(!text.contains(PASSWORD), "{text}");
    }
    let flaky_pg = json(&on_pg(&["flaky", "--json"]).run().assert_success().stdout());
    assert_eq!(flaky_pg.as_array().unwrap(), flaky, "the same verdicts");
    let listed = on_pg(&[]).run().assert_success().stdout();
    assert!(
        listed.contains("6 runs in postgres://postgres:***@127.0.0.1:"),
        "{listed}"
    );
    assert!(!listed.contains(PASSWORD), "{listed}");

    // A wrong password and an unreachable server: the report goes on, one
    // line says why, and the password given is not in it.
    for bad in [
        format!(
            "postgres://postgres:wrong-{PASSWORD}@127.0.0.1:{}/fleet",
            pg.port
        ),
        format!("postgres://postgres:{PASSWORD}@127.0.0.1:1/fleet"),
    ] {
        let o = Rocmatrix::new()
            .arg("report")
            .arg(&runs[5])
            .env("ROCMATRIX_HISTORY", &bad)
            .run();
        o.assert_code(1);
        let text = o.text();
        assert!(text.contains("history: not recorded ("), "{text}");
        assert!(!text.contains(PASSWORD), "{text}");
    }
}
