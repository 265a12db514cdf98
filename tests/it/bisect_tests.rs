//! `rocmatrix bisect` on the real engine, over a git repository made here:
//! 64 commits of a small shell project on `main` — commit 41 brings a
//! failing test, commit 23 does not build, commits 50–55 fail with an
//! unrelated error — and a branch `fix` of 8 more whose commit 69 fixes
//! the test. The first bad commit within ⌈log2 64⌉ + 2 probes, skips with
//! their own signatures, a second bisection that builds nothing, the fix
//! found with `--regress success`, ends refused when they are the wrong
//! way round, and an interrupted bisection resumed to the same answer.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;

/// The project as of commit `k`.
fn write_commit(repo: &Path, k: u32) {
    let broken = k == 23;
    let unrelated = (50..=55).contains(&k);
    let bad = (41..69).contains(&k);
    let build = if broken {
        "#!/bin/sh\necho 'build.sh: line 2: syntax error near unexpected token' >&2\nexit 2\n"
            .to_string()
    } else {
        "#!/bin/sh\nset -e\nmkdir -p /work/out\ncp /src/proj/test.sh /work/out/\necho built > /work/out/built\n".to_string()
    };
    let mut test = String::from("#!/bin/sh\n");
    if unrelated {
        test.push_str("echo 'error: fixture database is locked' >&2\nexit 1\n");
    }
    let add = if bad { "4 + 7" } else { "4 + 6" };
    test.push_str(&format!(
        "got=$(expr {add})\nif [ \"$got\" != 10 ]; then echo \"sum: FAILED: expected 10, got $got\"; exit 1; fi\necho 'sum: ok'\n"
    ));
    std::fs::write(repo.join("build.sh"), build).unwrap();
    std::fs::write(repo.join("test.sh"), test).unwrap();
    std::fs::write(repo.join("VERSION"), format!("{k}\n")).unwrap();
}

/// The repository; returns it and the commit ids, `ids[k]` for commit k
/// (1–72; 65–72 on `fix`).
fn fixture(root: &Path) -> (PathBuf, Vec<String>) {
    let repo = root.join("proj");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let mut ids = vec![String::new()];
    for k in 1..=72u32 {
        if k == 65 {
            git(&repo, &["checkout", "-qb", "fix"]);
        }
        write_commit(&repo, k);
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-qm", &format!("commit {k}")]);
        ids.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    git(&repo, &["checkout", "-q", "main"]);
    (repo, ids)
}

fn matrix(dir: &Path, repo: &Path, nonce: &str) -> PathBuf {
    write(
        dir,
        "m.yaml",
        &format!(
            r#"name: bisect-fixture
matrix:
  suite: [bookworm]
environment:
  family: debian
  base: "debian:{{{{ matrix.suite }}}}"
  suite: "{{{{ matrix.suite }}}}"
  env: {{BISECT_NONCE: "{nonce}"}}
retries: 0
sources:
  - name: proj
    url: {}
    ref: main
build:
  steps:
    - name: build
      run: sh /src/proj/build.sh
steps:
  - name: test
    run: sh /work/out/test.sh
"#,
            repo.display()
        ),
    )
}

fn bisection(out: &Path) -> (PathBuf, Value) {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out.join("bisects"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let doc = read_json(&dirs[0].join("bisect.json"));
    (dirs[0].clone(), doc)
}

/// The commit number of a probe or point value.
fn number(ids: &[String], id: &str) -> usize {
    ids.iter()
        .position(|x| x == id)
        .unwrap_or_else(|| panic!("{id} is no commit of the fixture"))
}

fn probes(doc: &Value) -> &Vec<Value> {
    doc["probes"].as_array().unwrap()
}

fn first_new(doc: &Value, ids: &[String]) -> usize {
    let i = doc["answer"]["first_new"].as_u64().expect("an answer") as usize;
    number(ids, doc["space"]["points"][i]["value"].as_str().unwrap())
}

fn bisect(m: &Path, out: &Path, extra: &[&str]) -> Ran {
    Rocmatrix::new()
        .arg("bisect")
        .arg(m)
        .args(["--source", "proj"])
        .args(extra)
        .out(out)
        .run()
}

#[test]
fn bisect_names_the_first_bad_commit_skips_what_it_cannot_judge_and_builds_nothing_twice_for_real()
{
    let Some(_engine) = engine_or_skip(
        "bisect_names_the_first_bad_commit_skips_what_it_cannot_judge_and_builds_nothing_twice_for_real",
    ) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let (repo, ids) = fixture(dir.path());
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let m = matrix(dir.path(), &repo, &nonce);
    let ends = ["--good", &ids[1], "--bad", &ids[64]];

    // The first bisection: commit 41, within ⌈log2 64⌉ + 2 probes.
    let out1 = dir.path().join("first");
    let o = bisect(&m, &out1, &ends);
    o.assert_success();
    eprintln!("{}", o.text());
    let (_, doc) = bisection(&out1);
    assert_eq!(first_new(&doc, &ids), 41, "{doc}");
    let n = probes(&doc).len();
    assert!(n <= 6 + 2, "{n} probes: {doc}");
    assert!(
        o.stdout()
            .contains(&format!("first bad: {} commit 41", &ids[41][..12])),
        "{}",
        o.stdout()
    );
    assert!(o.stdout().contains("last good: "), "{}", o.stdout());
    assert!(
        o.stdout().contains("sum: FAILED: expected 10, got 11"),
        "{}",
        o.stdout()
    );
    assert!(
        o.stdout().contains("reproduce: rocmatrix repro "),
        "{}",
        o.stdout()
    );
    for p in probes(&doc) {
        let k = number(&ids, p["value"].as_str().unwrap());
        let want = if k == 23 || (50..=55).contains(&k) {
            "skip"
        } else if k >= 41 {
            "bad"
        } else {
            "good"
        };
        assert_eq!(p["verdict"], want, "commit {k}: {p}");
        assert_eq!(p["build"]["reused"], false, "commit {k}: {p}");
    }
    let (bisect_dir, _) = bisection(&out1);
    assert!(bisect_dir.join("bisect.md").is_file());
    assert!(bisect_dir.join("bisect.html").is_file());

    // A second identical bisection builds nothing.
    let out2 = dir.path().join("second");
    let o = bisect(&m, &out2, &ends);
    o.assert_success();
    let (_, doc2) = bisection(&out2);
    assert_eq!(first_new(&doc2, &ids), 41);
    assert_eq!(probes(&doc2).len(), n);
    for p in probes(&doc2) {
        assert_eq!(p["build"]["reused"], true, "{p}");
    }
    assert!(
        o.stdout()
            .contains(&format!("builds reused by {n} of {n} probes")),
        "{}",
        o.stdout()
    );

    // Four at a time: commits 51 and 53 are probed, and skipped with
    // their own signature; commit 41 all the same.
    let out3 = dir.path().join("kary");
    let o = bisect(&m, &out3, &[&ends[..], &["--jobs", "4"]].concat());
    o.assert_success();
    eprintln!("{}", o.text());
    let (_, doc3) = bisection(&out3);
    assert_eq!(first_new(&doc3, &ids), 41);
    let unrelated: Vec<&Value> = probes(&doc3)
        .iter()
        .filter(|p| (50..=55).contains(&number(&ids, p["value"].as_str().unwrap())))
        .collect();
    assert!(!unrelated.is_empty(), "{doc3}");
    for p in unrelated {
        assert_eq!(p["verdict"], "skip", "{p}");
        assert_eq!(
            p["signature"]["message"], "error: fixture database is locked",
            "{p}"
        );
    }
    assert!(
        o.stdout()
            .contains("warning: the failure changes inside the range"),
        "{}",
        o.stdout()
    );

    // Commit 23 does not build: between commits 1 and 45 it is the first
    // point probed, a skip that names its build; its neighbour is next.
    let out4 = dir.path().join("broken");
    let o = bisect(
        &m,
        &out4,
        &[
            "--good",
            &ids[1],
            "--bad",
            &ids[45],
            "--signature",
            "sum: FAILED",
        ],
    );
    o.assert_success();
    eprintln!("{}", o.text());
    let (_, doc4) = bisection(&out4);
    assert_eq!(first_new(&doc4, &ids), 41);
    let broken: Vec<&Value> = probes(&doc4)
        .iter()
        .filter(|p| number(&ids, p["value"].as_str().unwrap()) == 23)
        .collect();
    assert_eq!(broken.len(), 1, "{doc4}");
    assert_eq!(broken[0]["verdict"], "skip", "{}", broken[0]);
    assert!(
        broken[0]["why"].as_str().unwrap().contains("build failed"),
        "{}",
        broken[0]
    );
    assert!(probes(&doc4).len() <= 6 + 2 + 1, "{doc4}");

    // The fix, on branch `fix`: the first good commit after a bad one.
    let out5 = dir.path().join("fix");
    let o = bisect(
        &m,
        &out5,
        &["--bad", &ids[60], "--good", "fix", "--regress", "success"],
    );
    o.assert_success();
    eprintln!("{}", o.text());
    let (_, doc5) = bisection(&out5);
    assert_eq!(first_new(&doc5, &ids), 69, "{doc5}");
    assert!(
        o.stdout()
            .contains(&format!("first good: {} commit 69", &ids[69][..12])),
        "{}",
        o.stdout()
    );

    // Ends the wrong way round: refused before anything runs (2), or once
    // the good end shows the signature (1).
    let out6 = dir.path().join("wrong");
    let o = bisect(&m, &out6, &["--good", &ids[64], "--bad", &ids[1]]);
    o.assert_code(2);
    assert!(
        o.stderr().contains("wrong way round") && o.stderr().contains("--regress success"),
        "{}",
        o.text()
    );
    let o = bisect(
        &m,
        &out6,
        &["--bad", "fix", "--good", &ids[60], "--regress", "success"],
    );
    o.assert_code(2);
    assert!(
        o.stderr()
            .contains("the ends are the wrong way round for --regress success"),
        "{}",
        o.text()
    );
    let o = bisect(&m, &out6, &["--good", &ids[45], "--bad", &ids[64]]);
    o.assert_code(1);
    assert!(
        o.stdout().contains(&format!(
            "the ends do not behave as claimed: --good {} shows the signature too",
            &ids[45][..12]
        )),
        "{}",
        o.text()
    );
}

#[test]
fn an_interrupted_bisection_resumes_to_the_same_answer_for_real() {
    let Some(_engine) =
        engine_or_skip("an_interrupted_bisection_resumes_to_the_same_answer_for_real")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let (repo, ids) = fixture(dir.path());
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let m = matrix(dir.path(), &repo, &nonce);
    let out = dir.path().join("out");
    let mut child = Rocmatrix::new()
        .arg("bisect")
        .arg(&m)
        .args(["--source", "proj", "--good", &ids[1], "--bad", &ids[64]])
        .out(&out)
        .spawn();
    // Interrupt it once three probes are recorded.
    let t0 = Instant::now();
    loop {
        let recorded = std::fs::read_dir(out.join("bisects"))
            .ok()
            .and_then(|mut rd| rd.next())
            .and_then(|e| std::fs::read_to_string(e.unwrap().path().join("bisect.json")).ok())
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .map(|d| probes(&d).len())
            .unwrap_or(0);
        if recorded >= 3 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(900),
            "no third probe in 15 minutes"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("bisect ended before it could be interrupted: {status}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("--resume"), "{}", stdout(&o));
    let (bisect_dir, doc) = bisection(&out);
    assert!(doc["answer"].is_null(), "{doc}");
    let before = probes(&doc).len();

    let o = Rocmatrix::new()
        .arg("bisect")
        .arg("--resume")
        .arg(&bisect_dir)
        .out(&out)
        .run();
    o.assert_success();
    let (_, doc) = bisection(&out);
    assert_eq!(first_new(&doc, &ids), 41, "{doc}");
    assert!(probes(&doc).len() >= before);
    assert!(probes(&doc).len() <= 6 + 2, "{doc}");
}

/// An axis of 16 numbers (and a 17th that only an include brings, with a
/// key of its own): the cell fails from n=11 on, n=6 fails otherwise, and
/// n=14 hangs past its step's timeout.
fn axis_matrix(dir: &Path, nonce: &str) -> PathBuf {
    let values: Vec<String> = (1..=16).map(|n| format!("'{n}'")).collect();
    write(
        dir,
        "axis.yaml",
        &format!(
            r#"name: bisect-axis
matrix:
  n: [{}]
  flavour: [plain, fancy]
  include:
    - {{n: '17', flavour: plain, extra: 'yes'}}
environment:
  base: "debian:bookworm"
  env: {{BISECT_NONCE: "{nonce}"}}
retries: 0
steps:
  - name: check
    timeout: 4s
    run: |
      n={{{{ matrix.n }}}}
      if [ "$n" = 14 ]; then sleep 60; fi
      if [ "$n" = 6 ]; then echo "error: no space left on device" >&2; exit 1; fi
      if [ "$n" -ge 11 ]; then echo "check: FAILED: n=$n is too large"; exit 1; fi
      echo "n=$n is fine"
"#,
            values.join(", ")
        ),
    )
}

#[test]
fn an_axis_bisection_orders_numbers_as_versions_and_skips_the_odd_value_for_real() {
    let Some(_engine) = engine_or_skip(
        "an_axis_bisection_orders_numbers_as_versions_and_skips_the_odd_value_for_real",
    ) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let m = axis_matrix(dir.path(), &nonce);
    let run = |out: &str, extra: &[&str]| {
        let out = dir.path().join(out);
        let o = Rocmatrix::new()
            .arg("bisect")
            .arg(&m)
            .args(["--axis", "n", "--only", "flavour=plain"])
            .args(extra)
            .out(&out)
            .run();
        (o, out)
    };
    // 1..17 (17 only from the include): the first bad is 11.
    let (o, out) = run("one", &["--good", "1", "--bad", "17"]);
    o.assert_success();
    eprintln!("{}", o.text());
    let (_, doc) = bisection(&out);
    let points: Vec<&str> = doc["space"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["value"].as_str().unwrap())
        .collect();
    assert_eq!(points.len(), 17, "{points:?}");
    assert_eq!(points[..3], ["1", "2", "3"]);
    assert!(
        o.stdout().contains("last good: 10\nfirst bad: 11\n"),
        "{}",
        o.stdout()
    );
    assert!(probes(&doc).len() <= 4 + 2, "{doc}");

    // Two at a time, and every judged point probed twice: the same answer,
    // nothing flaky, and 6 probed as a skip with its own signature.
    let (o, out) = run(
        "two",
        &[
            "--good",
            "1",
            "--bad",
            "12",
            "--jobs",
            "2",
            "--retries",
            "1",
        ],
    );
    o.assert_success();
    eprintln!("{}", o.text());
    let (_, doc) = bisection(&out);
    assert!(o.stdout().contains("first bad: 11\n"), "{}", o.stdout());
    assert!(!o.stdout().contains("flaky"), "{}", o.stdout());
    let judged: Vec<&Value> = probes(&doc)
        .iter()
        .filter(|p| p["verdict"] != "skip")
        .collect();
    for p in &judged {
        let again = probes(&doc)
            .iter()
            .filter(|q| q["point"] == p["point"])
            .count();
        assert_eq!(again, 2, "{p}");
    }
    // 7 passes: an end that does not behave as claimed stops it at once.
    let (o, out) = run(
        "six",
        &["--good", "5", "--bad", "7", "--signature", "check: FAILED"],
    );
    o.assert_code(1);
    let (_, doc) = bisection(&out);
    assert_eq!(probes(&doc).len(), 1, "{doc}");
    assert!(
        o.stdout()
            .contains("the ends do not behave as claimed: --bad 7 passes"),
        "{}",
        o.stdout()
    );
    // Between 1 and 11, 6 is the middle: probed, skipped with its own
    // signature, and its neighbour tried next.
    let (o, out) = run(
        "skip",
        &["--good", "1", "--bad", "11", "--signature", "check: FAILED"],
    );
    o.assert_success();
    let (_, doc) = bisection(&out);
    assert!(o.stdout().contains("first bad: 11\n"), "{}", o.stdout());
    let six: Vec<&Value> = probes(&doc).iter().filter(|p| p["value"] == "6").collect();
    assert_eq!(six.len(), 1, "{doc}");
    assert_eq!(six[0]["verdict"], "skip", "{}", six[0]);
    assert_eq!(
        six[0]["signature"]["message"],
        "error: no space left on device"
    );
    assert!(
        o.stdout()
            .contains("skipped 6: fails with another signature"),
        "{}",
        o.stdout()
    );
    // A hang: skipped by default, so 14 cannot be the bad end; with
    // --timeout-is bad it is one.
    let (o, _) = run("hang", &["--good", "10", "--bad", "14"]);
    o.assert_code(1);
    assert!(
        o.stdout()
            .contains("--bad 14 does not show the signature (timed out)"),
        "{}",
        o.stdout()
    );
    let (o, out) = run(
        "hang-bad",
        &[
            "--good",
            "10",
            "--bad",
            "14",
            "--timeout-is",
            "bad",
            "--signature",
            "check: FAILED",
        ],
    );
    o.assert_success();
    assert!(o.stdout().contains("first bad: 11\n"), "{}", o.stdout());
    let (_, doc) = bisection(&out);
    assert_eq!(probes(&doc)[0]["status"], "timeout", "{doc}");
    assert_eq!(probes(&doc)[0]["verdict"], "bad", "{doc}");

    // An axis left free is refused, naming it.
    let o = Rocmatrix::new()
        .arg("bisect")
        .arg(&m)
        .args(["--axis", "n", "--good", "1", "--bad", "12"])
        .out(dir.path().join("free"))
        .run();
    o.assert_code(2);
    assert!(
        o.stderr().contains("flavour (plain, fancy)"),
        "{}",
        o.stderr()
    );
}

/// The seed's question: which clang stopped rejecting kernel arguments
/// named N and Y? Debian's clang 15, 17 and 21 reject them, 22 does not.
#[test]
fn the_yn_axis_names_llvm_22_as_the_first_good_for_real() {
    let Some(_engine) = engine_or_skip("the_yn_axis_names_llvm_22_as_the_first_good_for_real")
    else {
        return;
    };
    for suite in ["bookworm", "trixie", "sid"] {
        bases::ensure(suite);
    }
    let dir = tempfile::tempdir().unwrap();
    let m = Path::new(env!("CARGO_MANIFEST_DIR")).join("matrix/hsa-metadata-yn.yaml");
    let o = Rocmatrix::new()
        .arg("bisect")
        .arg(&m)
        .args([
            "--axis",
            "llvm",
            "--bad",
            "15",
            "--good",
            "22",
            "--regress",
            "success",
        ])
        .args(["--only", "args=yn", "--only", "gfx=gfx900"])
        .out(dir.path())
        .run();
    eprintln!("{}", o.text());
    o.assert_success();
    assert!(
        o.stdout().contains("last bad: 21\nfirst good: 22\n"),
        "{}",
        o.stdout()
    );
    assert!(
        o.stdout().contains("error: invalid HSA metadata"),
        "{}",
        o.stdout()
    );
    let (_, doc) = bisection(dir.path());
    assert_eq!(probes(&doc).len(), 4, "{doc}");
}
