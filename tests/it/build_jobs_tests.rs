//! Environments prepared side by side (`--build-jobs`) on the real engine:
//! a matrix of three environments builds them at once (the journal shows
//! each `image_started` before the others' `image_finished`), and the same
//! matrix built one at a time (`--build-jobs 1`) gives the same images,
//! environment hashes and lock.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::harness::docker::tag_for_run;
use crate::harness::*;

/// Three environments on sid, one small package each; `nonce` makes this
/// test run's images its own.
fn matrix(nonce: &str) -> String {
    format!(
        r#"name: build-jobs
matrix:
  tool: [hello, sl, figlet]
environment:
  family: debian
  base: "debian:sid"
  suite: sid
  packages: ["{{{{ matrix.tool }}}}"]
  env:
    BUILD_JOBS_NONCE: "{nonce}"
retries: 0
steps:
  - name: installed
    run: dpkg -s {{{{ matrix.tool }}}} >/dev/null
"#
    )
}

/// A finished run: its lock's environments and its journal's image events
/// (`started`/`finished`, environment) in journal order.
struct Run {
    environments: BTreeMap<String, Value>,
    events: Vec<(String, String)>,
}

fn run(dir: &Path, matrix: &Path, name: &str, build_jobs: &str) -> Run {
    let o = Rocmatrix::run_matrix(matrix)
        .progress_plain()
        .args(["--build-jobs", build_jobs])
        .out(dir.join(name))
        .run();
    o.assert_success();
    let store = o.run_store();
    let lock = read_json(&store.join("lock.json"));
    let environments: BTreeMap<String, Value> =
        serde_json::from_value(lock["environments"].clone()).unwrap();
    assert_eq!(environments.len(), 3, "{lock:#}\n{}", o.context());
    for env in environments.values() {
        assert_eq!(
            env["image"]["reused"],
            Value::Bool(false),
            "the image was not built in this run: {env:#}\n{}",
            o.context()
        );
    }
    let journal = std::fs::read_to_string(store.join("journal.jsonl")).unwrap();
    let events = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|e| {
            let kind = match e["event"].as_str()? {
                "image_started" => "started",
                "image_finished" => "finished",
                _ => return None,
            };
            Some((kind.to_string(), e["environment"].as_str()?.to_string()))
        })
        .collect();
    Run {
        environments,
        events,
    }
}

/// Whether some environment's image starts while another's is in the works.
fn overlapping(events: &[(String, String)]) -> bool {
    let mut busy = 0;
    for (kind, _) in events {
        match kind.as_str() {
            "started" if busy > 0 => return true,
            "started" => busy += 1,
            _ => busy -= 1,
        }
    }
    false
}

#[test]
fn environments_build_side_by_side_into_the_images_and_lock_of_a_sequential_build() {
    let Some(_engine) = engine_or_skip(
        "environments_build_side_by_side_into_the_images_and_lock_of_a_sequential_build",
    ) else {
        return;
    };
    bases::ensure("sid");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "m.yaml", &matrix(&tag_for_run("x")));

    let side_by_side = run(dir.path(), &m, "side-by-side", "3");
    let _images: Vec<RemoveOnDrop> = side_by_side
        .environments
        .values()
        .map(|e| RemoveOnDrop(e["image"]["tag"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(side_by_side.events.len(), 6, "{:?}", side_by_side.events);
    assert!(
        overlapping(&side_by_side.events),
        "the environments were prepared one after another: {:?}",
        side_by_side.events
    );

    // The same environments again, one at a time, from scratch.
    for e in side_by_side.environments.values() {
        docker::docker(["rmi", "-f", e["image"]["tag"].as_str().unwrap()]);
    }
    let sequential = run(dir.path(), &m, "sequential", "1");
    assert_eq!(sequential.events.len(), 6, "{:?}", sequential.events);
    assert!(
        !overlapping(&sequential.events),
        "--build-jobs 1 prepared environments at once: {:?}",
        sequential.events
    );

    // Same environment hashes, image tags, bases and package sets.
    assert_eq!(
        side_by_side.environments.keys().collect::<Vec<_>>(),
        sequential.environments.keys().collect::<Vec<_>>()
    );
    for (hash, a) in &side_by_side.environments {
        let b = &sequential.environments[hash];
        for field in ["family", "base", "packages"] {
            assert_eq!(a[field], b[field], "environment {hash}: {field} differs");
        }
        assert_eq!(a["image"]["tag"], b["image"]["tag"], "environment {hash}");
        assert!(
            a["packages"].as_object().is_some_and(|p| !p.is_empty()),
            "{a:#}"
        );
    }
}

#[test]
fn overlap_is_read_from_the_order_of_the_image_events() {
    let ev = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(k, e)| (k.to_string(), e.to_string()))
            .collect()
    };
    assert!(!overlapping(&ev(&[
        ("started", "a"),
        ("finished", "a"),
        ("started", "b"),
        ("finished", "b"),
    ])));
    assert!(overlapping(&ev(&[
        ("started", "a"),
        ("started", "b"),
        ("finished", "a"),
        ("finished", "b"),
    ])));
}
