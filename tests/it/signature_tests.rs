//! Failure signatures and their axis attribution on real runs (real engine):
//! a failure that two axes decide together is attributed exactly, with the
//! boundary of the ordered axis named; failures without an axis pattern are
//! said to have none; merged shards mark signatures new or known against a
//! baseline.

use crate::harness::*;

/// Fails only for kind=yn and llvm ≤ 21; every failing cell's message has
/// its own temp path and pointer, so only normalisation makes it one.
const INTERACTING: &str = r#"name: sig-interacting
matrix:
  llvm: [15, 17, 21, 22]
  kind: [yn, plain]
environment:
  base: debian:bookworm
retries: 0
report:
  packages: [bash, "libc6*"]
steps:
  - name: assemble
    run: |
      echo "assembling with llvm {{ matrix.llvm }}"
      if [ {{ matrix.kind }} = yn ] && [ {{ matrix.llvm }} -lt 22 ]; then
        d=$(mktemp -d /tmp/xXXXXXX)
        echo "$d/k.s:31:23: error: invalid HSA metadata (at 0x$(printf %x $$)$RANDOM)"
        exit 1
      fi
"#;

/// Fails on a diagonal: every value of every axis passes once and fails once.
const DIAGONAL: &str = r#"name: sig-diagonal
matrix:
  a: [1, 2]
  b: [x, y]
environment:
  base: debian:bookworm
retries: 0
steps:
  - name: check
    run: |
      case {{ matrix.a }}{{ matrix.b }} in
        1x|2y) echo "Segmentation fault (core dumped) in worker $RANDOM"; exit 139 ;;
      esac
"#;

fn run_and_explain(name: &str, yaml: &str) -> Option<(serde_json::Value, String)> {
    let _engine = engine_or_skip(name)?;
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "m.yaml", yaml);
    let o = Rocmatrix::run_matrix(&m)
        .progress_plain()
        .args(["--jobs", "4"])
        .out(dir.path())
        .run();
    o.assert_code(1);
    let run = o.run_store();
    let doc = read_json(&run.join("report/results.json"));
    let explained = Rocmatrix::new().arg("explain").arg(&run).run();
    explained.assert_success();
    Some((doc, explained.stdout()))
}

#[test]
fn signature_of_two_interacting_axes_is_attributed_exactly_for_real() {
    let Some((doc, text)) = run_and_explain(
        "signature_of_two_interacting_axes_is_attributed_exactly_for_real",
        INTERACTING,
    ) else {
        return;
    };
    let sigs = doc["signatures"].as_array().unwrap();
    assert_eq!(sigs.len(), 1, "{sigs:#?}");
    let s = &sigs[0];
    assert_eq!(
        s["text"],
        "k.s:31:23: error: invalid HSA metadata (at <hex>)"
    );
    assert_eq!(s["count"], 3);
    assert_eq!(s["places"], serde_json::json!(["step assemble"]));
    let rule = "occurs exactly when llvm ≤ 21 and kind=yn (3 of 8 cells); passes from llvm=22";
    assert_eq!(s["attribution"]["text"], rule);
    assert_eq!(s["attribution"]["exact"], true);
    assert!(text.contains(rule), "{text}");
    assert!(text.contains("3 failures in 3 cells"), "{text}");
    // `report.packages` picks what the environment facts show, from the lock.
    let envs = doc["environments"].as_array().unwrap();
    assert_eq!(envs.len(), 1, "{envs:#?}");
    assert_eq!(envs[0]["base"], "debian:bookworm");
    assert_eq!(envs[0]["cells"].as_array().unwrap().len(), 8);
    let packages = envs[0]["packages"].as_object().unwrap();
    assert!(packages.contains_key("bash"), "{packages:?}");
    assert!(packages.contains_key("libc6"), "{packages:?}");
    assert!(!packages.contains_key("coreutils"), "{packages:?}");
}

#[test]
fn failures_without_an_axis_pattern_say_so_for_real() {
    let Some((doc, text)) =
        run_and_explain("failures_without_an_axis_pattern_say_so_for_real", DIAGONAL)
    else {
        return;
    };
    let sigs = doc["signatures"].as_array().unwrap();
    assert_eq!(sigs.len(), 1, "{sigs:#?}");
    let s = &sigs[0];
    assert_eq!(s["text"], "Segmentation fault (core dumped) in worker <n>");
    assert_eq!(s["count"], 2);
    assert_eq!(s["attribution"]["exact"], false);
    assert_eq!(s["attribution"]["predicates"], serde_json::json!([]));
    let said = "no axis pattern: occurs in 2 of 4 cells that ran it";
    assert!(
        s["attribution"]["text"].as_str().unwrap().starts_with(said),
        "{s:#}"
    );
    assert!(text.contains(said), "{text}");
}

/// A baseline and a later version of one matrix: the segfault on a=1 is in
/// both (with other worker numbers), the out-of-memory error on a=2 is new,
/// the assertion on b=y is gone.
fn versioned(now: bool) -> String {
    let (later, earlier) = if now {
        (
            r#"2x) echo "error: out of memory allocating $RANDOM bytes at 0x$(printf %x $$)"; exit 1 ;;"#,
            "",
        )
    } else {
        (
            "",
            r#"*y) echo "check.cpp:12: Assertion 'ready' failed."; exit 134 ;;"#,
        )
    };
    format!(
        r#"name: sig-versions
matrix:
  a: [1, 2]
  b: [x, y]
environment:
  base: debian:bookworm
retries: 0
steps:
  - name: check
    run: |
      case {{{{ matrix.a }}}}{{{{ matrix.b }}}} in
        1*) echo "Segmentation fault (core dumped) in worker $RANDOM"; exit 139 ;;
        {later}
        {earlier}
      esac
"#
    )
}

#[test]
fn merged_shards_mark_signatures_new_or_known_against_a_baseline_for_real() {
    let name = "merged_shards_mark_signatures_new_or_known_against_a_baseline_for_real";
    let Some(_engine) = engine_or_skip(name) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let before = write(dir.path(), "before.yaml", &versioned(false));
    let o = Rocmatrix::run_matrix(&before)
        .progress_plain()
        .args(["--jobs", "4"])
        .out(dir.path())
        .run();
    o.assert_code(1);
    let baseline = o.run_store();
    let now = write(dir.path(), "now.yaml", &versioned(true));
    let shards: Vec<_> = ["1/2", "2/2"]
        .iter()
        .map(|s| {
            let o = Rocmatrix::run_matrix(&now)
                .progress_plain()
                .args(["--jobs", "2", "--shard", s])
                .out(dir.path())
                .run();
            o.run_store()
        })
        .collect();
    let merged = dir.path().join("merged");
    let o = Rocmatrix::new()
        .args(["report", "merge"])
        .args(&shards)
        .arg("--out")
        .arg(&merged)
        .arg("--baseline")
        .arg(&baseline)
        .run();
    o.assert_code(1);
    let doc = read_json(&merged.join("results.json"));
    let seen: Vec<(String, String)> = doc["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["text"].as_str().unwrap().to_string(),
                s["baseline"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    assert_eq!(
        seen.len(),
        2,
        "signatures over both shards, merged: {seen:?}"
    );
    assert!(
        seen.contains(&(
            "Segmentation fault (core dumped) in worker <n>".into(),
            "known".into()
        )),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|(t, b)| t.starts_with("error: out of memory allocating") && b == "new"),
        "{seen:?}"
    );
    assert_eq!(
        doc["regressions"]["signatures"],
        serde_json::json!({"new": 1, "known": 1, "gone": 1})
    );
    let md = std::fs::read_to_string(merged.join("summary.md")).unwrap();
    assert!(
        md.contains("Against the baseline: 1 new, 1 known, 1 gone."),
        "{md}"
    );
    assert!(md.contains("🆕 **new** · error: out of memory"), "{md}");
    let html = std::fs::read_to_string(merged.join("index.html")).unwrap();
    assert!(
        html.contains(
            r#"<span class="badge new">new</span> <span class="msg">error: out of memory"#
        ),
        "{html}"
    );
}
