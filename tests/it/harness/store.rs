//! Run stores: the real ones a test run wrote (found under `--out`), crafted
//! ones written the way the runner does, and JUnit helpers.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The run directory under `out` (the newest, when there are several).
pub fn run_dir(out: &Path) -> PathBuf {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(out.join("runs"))
        .unwrap_or_else(|e| panic!("{}/runs: {e}", out.display()))
        .map(|e| e.unwrap().path())
        .collect();
    runs.sort();
    runs.pop().expect("a run directory")
}

pub fn cell_json(run: &Path, cell: &str) -> Value {
    let text = std::fs::read_to_string(run.join("cells").join(cell).join("cell.json"))
        .unwrap_or_else(|e| panic!("cell {cell}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// The step `name` of a `cell.json`.
pub fn step_of<'a>(cell: &'a Value, name: &str) -> &'a Value {
    cell["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step {name}: {cell}"))
}

/// The function of each frame of a backtrace's stop, innermost first.
pub fn frame_functions(stop: &Value) -> Vec<String> {
    stop["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap().to_string())
        .collect()
}

/// A cell of a crafted run.
pub struct CellSpec<'a> {
    pub id: &'a str,
    pub values: &'a [(&'a str, &'a str)],
    /// `None`: the cell has no cell.json (did not finish).
    pub status: Option<&'a str>,
    pub reason: Option<&'a str>,
    /// (file name under junit/, content)
    pub junit: Vec<(&'a str, String)>,
    pub log_tail: &'a str,
}

impl<'a> CellSpec<'a> {
    pub fn new(id: &'a str, values: &'a [(&'a str, &'a str)], status: &'a str) -> Self {
        CellSpec {
            id,
            values,
            status: Some(status),
            reason: None,
            junit: Vec::new(),
            log_tail: "",
        }
    }

    pub fn junit(mut self, name: &'a str, xml: impl Into<String>) -> Self {
        self.junit.push((name, xml.into()));
        self
    }
}

/// Writes a run store the way the runner does (plan.json, cells/*/cell.json).
#[allow(clippy::too_many_arguments)]
pub fn make_run(
    dir: &Path,
    run_id: &str,
    matrix_hash: &str,
    keys: &[&str],
    expect: Value,
    layout: (&[&str], &[&str]),
    shard: Option<&str>,
    cells: &[CellSpec],
) -> PathBuf {
    let run = dir.join(run_id);
    std::fs::create_dir_all(&run).unwrap();
    let plan_cells: Vec<Value> = cells
        .iter()
        .map(|c| {
            let values: serde_json::Map<String, Value> = c
                .values
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            json!({
                "id": c.id, "values": values, "environment": null,
                "environment_hash": "e".repeat(64), "steps": [],
                "gpu": {"need": "none", "count": 0, "target": null, "policy": "exact"},
                "hash": "c".repeat(64)
            })
        })
        .collect();
    let mut manifest = json!({
        "store_version": 1, "run_id": run_id, "rocmatrix_version": "0.1.0",
        "name": "smoke", "matrix_file": "matrix/smoke.yaml", "matrix_hash": matrix_hash,
        "keys": keys, "expect": expect,
        "report": {"rows": layout.0, "columns": layout.1},
        "cells": plan_cells
    });
    if let Some(s) = shard {
        manifest["shard"] = json!(s);
    }
    std::fs::write(
        run.join("plan.json"),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    for c in cells {
        let cdir = run.join("cells").join(c.id);
        std::fs::create_dir_all(cdir.join("junit")).unwrap();
        let mut junit = Vec::new();
        for (name, xml) in &c.junit {
            std::fs::write(cdir.join("junit").join(name), xml).unwrap();
            junit.push(format!("junit/{name}"));
        }
        let Some(status) = c.status else { continue };
        let values: serde_json::Map<String, Value> = c
            .values
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let record = json!({
            "id": c.id, "values": values, "hash": "c".repeat(64),
            "environment_hash": "e".repeat(64), "image": null,
            "status": status, "reason": c.reason,
            "started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:01:00Z",
            "duration_secs": 60.0, "attempts": 0,
            "steps": [{"name": "test", "status": status, "exit_code": if status == "passed" {0} else {1},
                       "duration_secs": 59.0, "log": "logs/01-test.log", "reason": c.reason,
                       "log_tail": c.log_tail}],
            "junit": junit, "messages": []
        });
        std::fs::write(
            cdir.join("cell.json"),
            serde_json::to_vec_pretty(&record).unwrap(),
        )
        .unwrap();
    }
    run
}

/// A GoogleTest-shaped file from (classname, name, status) triples, status one
/// of pass, fail, skip.
pub fn gtest_xml(cases: &[(&str, &str, &str)]) -> String {
    let mut s = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"0\" name=\"AllTests\">\n",
    );
    let mut suites: Vec<&str> = Vec::new();
    for (c, _, _) in cases {
        if !suites.contains(c) {
            suites.push(c);
        }
    }
    for suite in suites {
        s.push_str(&format!("  <testsuite name=\"{suite}\" tests=\"1\">\n"));
        for (c, raw, st) in cases.iter().filter(|(c, _, _)| *c == suite) {
            let n = raw
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;");
            match *st {
                "pass" => s.push_str(&format!(
                    "    <testcase name=\"{n}\" status=\"run\" result=\"completed\" time=\"0.01\" classname=\"{c}\" />\n"
                )),
                "fail" => s.push_str(&format!(
                    "    <testcase name=\"{n}\" status=\"run\" result=\"completed\" time=\"0.01\" classname=\"{c}\">\n      <failure message=\"t.cc:1&#x0A;{n} broke\" type=\"\"><![CDATA[t.cc:1\n{raw} broke]]></failure>\n    </testcase>\n"
                )),
                "skip" => s.push_str(&format!(
                    "    <testcase name=\"{n}\" status=\"run\" result=\"skipped\" time=\"0\" classname=\"{c}\">\n      <skipped message=\"t.cc:2: Skipped\"/>\n    </testcase>\n"
                )),
                "flaky" => s.push_str(&format!(
                    "    <testcase name=\"{n}\" time=\"0.01\" classname=\"{c}\">\n      <flakyFailure message=\"first try failed\" type=\"assert\"/>\n    </testcase>\n"
                )),
                other => panic!("status {other}"),
            }
        }
        s.push_str("  </testsuite>\n");
    }
    s.push_str("</testsuites>\n");
    s
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Validates `xml` against the committed Jenkins junit-10.xsd with xmllint.
pub fn assert_valid_junit(xml: &Path) {
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/junit-10.xsd");
    if !super::have("xmllint", &["--version"], "junit.xml schema check") {
        return;
    }
    let o = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&xsd)
        .arg(xml)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{} does not validate against junit-10.xsd:\n{}",
        xml.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/junit")
        .join(name)
}

/// `from` copied to `to` (which must not exist) with `cp -a`.
pub fn copy_dir(from: &Path, to: &Path) {
    let o = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", super::stderr(&o));
}
