//! `rocmatrix triage` and `run --baseline OLD --triage` on the real engine,
//! over a git repository made here that grows as a project does between
//! two nightly runs: the baseline runs at commit 4, then 36 more commits
//! land — commit 21 breaks `sum` (a new signature), commit 35 fixes
//! `product` (a signature that disappears), commit 13 does not build and
//! commits 31 and 32 fail with an unrelated error — and the next run at
//! commit 40 is triaged against the baseline without anyone naming an end.
//! Then: a second triage reuses every answer (nothing built, no probe
//! run), the history names the good end when no baseline is given, an
//! interrupted (SIGKILLed) triage resumes to the same answer, a budget
//! says what it left, and bad input gets a sentence, not a hang.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;

/// The first commit whose `sum` fails, the one that fixes `product`, the
/// one that does not build, the ones failing otherwise.
const SUM_BREAKS: u32 = 21;
const PRODUCT_FIXED: u32 = 35;
const UNBUILDABLE: u32 = 13;
const UNRELATED: [u32; 2] = [31, 32];
const BASE: u32 = 4;
const HEAD: u32 = 40;

/// The project as of commit `k`.
fn write_commit(repo: &Path, k: u32) {
    let build = if k == UNBUILDABLE {
        "#!/bin/sh\necho 'build.sh: line 2: syntax error near unexpected token' >&2\nexit 2\n"
            .to_string()
    } else {
        "#!/bin/sh\nset -e\nmkdir -p /work/out\ncp /src/proj/test.sh /work/out/\n".to_string()
    };
    let mut test = String::from("#!/bin/sh\n");
    if UNRELATED.contains(&k) {
        test.push_str("echo 'error: fixture database is locked' >&2\nexit 1\n");
    }
    let add = if k >= SUM_BREAKS { "4 + 7" } else { "4 + 6" };
    let mul = if k >= PRODUCT_FIXED {
        "2 \\* 5"
    } else {
        "2 \\* 6"
    };
    test.push_str(&format!(
        "if [ \"$1\" = sum ]; then got=$(expr {add}); if [ \"$got\" != 10 ]; then echo \"sum: FAILED: expected 10, got $got\"; exit 1; fi; fi\n\
         if [ \"$1\" = product ]; then got=$(expr {mul}); if [ \"$got\" != 10 ]; then echo \"product: FAILED: expected 10, got $got\"; exit 1; fi; fi\n\
         echo \"$1: ok\"\n"
    ));
    std::fs::write(repo.join("build.sh"), build).unwrap();
    std::fs::write(repo.join("test.sh"), test).unwrap();
    std::fs::write(repo.join("VERSION"), format!("{k}\n")).unwrap();
}

/// Commits `from..=to` onto `main`; `ids[k]` is commit k.
fn commit_range(repo: &Path, ids: &mut Vec<String>, from: u32, to: u32) {
    for k in from..=to {
        write_commit(repo, k);
        git(repo, &["add", "."]);
        git(repo, &["commit", "-qm", &format!("commit {k}")]);
        ids.push(git(repo, &["rev-parse", "HEAD"]));
    }
}

fn matrix(dir: &Path, repo: &Path, nonce: &str, name: &str) -> PathBuf {
    write(
        dir,
        &format!("{name}.yaml"),
        &format!(
            r#"name: {name}
matrix:
  part: [sum, product]
environment:
  family: debian
  base: "debian:bookworm"
  suite: bookworm
  env: {{TRIAGE_NONCE: "{nonce}"}}
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
    run: sh /work/out/test.sh {{{{ matrix.part }}}}
"#,
            repo.display()
        ),
    )
}

fn number(ids: &[String], id: &str) -> usize {
    ids.iter()
        .position(|x| x == id)
        .unwrap_or_else(|| panic!("{id} is no commit of the fixture"))
}

/// The triage item of the signature whose message contains `what`.
fn item<'a>(doc: &'a Value, what: &str) -> &'a Value {
    doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["signature"]["message"].as_str().unwrap().contains(what))
        .unwrap_or_else(|| panic!("no item for {what}: {doc}"))
}

fn found(item: &Value) -> &Value {
    item["searches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["state"] == "found")
        .unwrap_or_else(|| panic!("nothing found: {item}"))
}

fn log2_ceil(n: usize) -> usize {
    (usize::BITS - (n - 1).leading_zeros()) as usize
}

fn bisection_dirs(out: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(out.join("bisects"))
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn probe_runs(out: &Path) -> usize {
    bisection_dirs(out)
        .iter()
        .map(|d| std::fs::read_dir(d.join("runs")).map_or(0, |rd| rd.count()))
        .sum()
}

#[test]
fn run_triage_names_where_a_signature_started_and_where_another_was_fixed_for_real() {
    let Some(_engine) = engine_or_skip(
        "run_triage_names_where_a_signature_started_and_where_another_was_fixed_for_real",
    ) else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("proj");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let mut ids = vec![String::new()];
    commit_range(&repo, &mut ids, 1, BASE);
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let m = matrix(dir.path(), &repo, &nonce, "triage-fixture");
    let out = dir.path().join("out");

    // The baseline: `product` fails, `sum` passes.
    let o = Rocmatrix::run_matrix(&m).out(&out).run();
    o.assert_code(1);
    let baseline = o.run_store();

    // 36 commits later, the nightly run triages itself.
    commit_range(&repo, &mut ids, BASE + 1, HEAD);
    let t0 = Instant::now();
    let o = Rocmatrix::run_matrix(&m)
        .arg("--baseline")
        .arg(&baseline)
        .arg("--triage")
        .out(&out)
        .run();
    let first_secs = t0.elapsed().as_secs_f64();
    eprintln!("{}", o.text());
    o.assert_code(1);
    let run = o.run_store();
    let doc = read_json(&run.join("triage.json"));
    let points = (HEAD - BASE + 1) as usize;
    let bound = log2_ceil(points) + 3;

    let sum = item(&doc, "sum: FAILED");
    assert_eq!(sum["change"], "new", "{sum}");
    let s = found(sum);
    let first = s["first"]["value"].as_str().unwrap();
    assert_eq!(number(&ids, first), SUM_BREAKS as usize, "{sum}");
    assert_eq!(number(&ids, s["last"]["value"].as_str().unwrap()), 20);
    let sum_probes = s["probes"].as_u64().unwrap() as usize;
    assert!(sum_probes <= bound, "{sum_probes} probes > {bound}: {sum}");
    let line = format!(
        "started at {} \"commit {SUM_BREAKS}\" (range proj {}..{}, {sum_probes} probes)",
        &ids[SUM_BREAKS as usize][..12],
        &ids[BASE as usize][..12],
        &ids[HEAD as usize][..12]
    );
    assert_eq!(sum["line"], line.as_str(), "{sum}");
    assert!(o.stdout().contains(&line), "{}", o.stdout());

    let product = item(&doc, "product: FAILED");
    assert_eq!(product["change"], "gone", "{product}");
    let p = found(product);
    assert_eq!(
        number(&ids, p["first"]["value"].as_str().unwrap()),
        PRODUCT_FIXED as usize,
        "{product}"
    );
    let product_probes = p["probes"].as_u64().unwrap() as usize;
    assert!(
        product["line"]
            .as_str()
            .unwrap()
            .starts_with(&format!("fixed at {}", &ids[PRODUCT_FIXED as usize][..12])),
        "{product}"
    );
    // Skipped commits are skipped with what they showed; each search
    // takes at most ⌈log2 N⌉ + 2 probes plus one per skipped commit.
    let mut skipped = Vec::new();
    for search in [s, p] {
        let b = read_json(&Path::new(search["bisection"].as_str().unwrap()).join("bisect.json"));
        let mut skips = 0;
        for pr in b["probes"].as_array().unwrap() {
            let k = number(&ids, pr["value"].as_str().unwrap()) as u32;
            if k == UNBUILDABLE || UNRELATED.contains(&k) {
                assert_eq!(pr["verdict"], "skip", "commit {k}: {pr}");
                skipped.push(k);
            }
            if pr["verdict"] == "skip" {
                skips += 1;
            }
        }
        let n = search["probes"].as_u64().unwrap() as usize;
        assert!(
            n <= log2_ceil(points) + 2 + skips,
            "{n} probes, {skips} skipped: {b}"
        );
    }
    assert!(
        skipped.contains(&UNBUILDABLE),
        "the unbuildable commit was not probed: {skipped:?}"
    );
    eprintln!(
        "probes: sum {sum_probes}, product {product_probes} (bound {bound}), skipped {skipped:?}; {first_secs:.1} s for run + triage"
    );
    // The moved source reads as one move, counted.
    assert!(
        o.stdout().contains(&format!(
            "moved: proj {} → {} ({} commits)",
            &ids[BASE as usize][..7],
            &ids[HEAD as usize][..7],
            HEAD - BASE
        )),
        "{}",
        o.stdout()
    );
    // So does the report's "what changed" of the environment, with its
    // first subjects, without --triage's help.
    let results = read_json(&run.join("report/results.json"));
    let moved = results["regressions"]["environments"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["other"].as_array().cloned().unwrap_or_default())
        .find(|v| v["source"] == "proj")
        .unwrap_or_else(|| panic!("no moved source: {}", results["regressions"]));
    assert_eq!(moved["commits"], (HEAD - BASE) as u64, "{moved}");
    assert!(
        moved["subjects"][0]
            .as_str()
            .unwrap()
            .ends_with(&format!("commit {}", BASE + 1)),
        "{moved}"
    );
    let summary = std::fs::read_to_string(run.join("report/summary.md")).unwrap();
    assert!(
        summary.contains(&format!("({} commits)", HEAD - BASE)),
        "{summary}"
    );
    // The pages and explain show it beside the signature.
    assert!(
        summary.contains(&format!("↳ started at {}", &ids[SUM_BREAKS as usize][..12])),
        "{summary}"
    );
    assert!(summary.contains("Gone since the baseline"), "{summary}");
    let html = std::fs::read_to_string(run.join("report/index.html")).unwrap();
    assert!(
        html.contains("↳ started at"),
        "triage line missing from index.html"
    );
    let e = Rocmatrix::new().arg("explain").arg(&run).run();
    e.assert_success();
    assert!(e.stdout().contains(&line), "{}", e.stdout());
    // And in JSON, under the signature it is about.
    let e = Rocmatrix::new()
        .arg("explain")
        .arg(&run)
        .arg("--json")
        .run();
    e.assert_success();
    let sigs: serde_json::Value = serde_json::from_str(&e.stdout()).unwrap();
    assert!(
        sigs.as_array()
            .unwrap()
            .iter()
            .any(|s| s["triage"]["line"] == line.as_str() && s["triage"]["change"] == "new"),
        "{sigs}"
    );
    // The run's own results are its own.
    let results = read_json(&run.join("report/results.json"));
    assert_eq!(results["cells"].as_array().unwrap().len(), 2);

    // A second triage: every answer reused, no probe run, nothing built.
    let before = probe_runs(&out);
    let t0 = Instant::now();
    let o = Rocmatrix::new()
        .arg("triage")
        .arg(&run)
        .arg("--baseline")
        .arg(&baseline)
        .arg("--json")
        .out(&out)
        .run();
    let second_secs = t0.elapsed().as_secs_f64();
    o.assert_success();
    let again: Value = serde_json::from_str(&o.stdout()).unwrap();
    for i in again["items"].as_array().unwrap() {
        for s in i["searches"].as_array().unwrap() {
            assert_eq!(s["probes_now"], 0, "{s}");
            assert_eq!(s["reused"], true, "{s}");
        }
    }
    assert_eq!(probe_runs(&out), before, "a probe ran again");
    assert_eq!(
        number(
            &ids,
            found(item(&again, "sum: FAILED"))["first"]["value"]
                .as_str()
                .unwrap()
        ),
        SUM_BREAKS as usize
    );
    eprintln!("second triage: {second_secs:.1} s, 0 probes");

    // Without --baseline, the history names the good end: the baseline.
    let o = Rocmatrix::new().arg("triage").arg(&run).out(&out).run();
    eprintln!("{}", o.text());
    o.assert_success();
    assert!(
        o.stdout().contains(&format!(
            "started at {} \"commit {SUM_BREAKS}\"",
            &ids[SUM_BREAKS as usize][..12]
        )),
        "{}",
        o.stdout()
    );
    // And the signature gone since the run before it, fixed where the
    // baseline's triage found it.
    assert!(
        o.stdout()
            .contains(&format!("fixed at {}", &ids[PRODUCT_FIXED as usize][..12])),
        "{}",
        o.stdout()
    );
    assert_eq!(probe_runs(&out), before, "a probe ran again");

    // Bad input: a sentence and exit 2, the run untouched.
    let other = matrix(dir.path(), &repo, &nonce, "another-matrix");
    let o2 = Rocmatrix::run_matrix(&other)
        .arg("--only")
        .arg("part=sum")
        .out(dir.path().join("other"))
        .run();
    let other_run = o2.run_store();
    let o = Rocmatrix::new()
        .arg("triage")
        .arg(&run)
        .arg("--baseline")
        .arg(&other_run)
        .out(&out)
        .run();
    o.assert_code(2);
    assert!(
        o.stderr()
            .contains("is a run of the matrix 'another-matrix'"),
        "{}",
        o.stderr()
    );
    let o = Rocmatrix::new()
        .arg("triage")
        .arg(&run)
        .arg("--baseline")
        .arg(baseline.join("report/results.json"))
        .out(&out)
        .run();
    o.assert_code(2);
    assert!(o.stderr().contains("not a run directory"), "{}", o.stderr());
    let o = Rocmatrix::new()
        .arg("triage")
        .arg(&run)
        .args(["--triage-budget", "soon"])
        .out(&out)
        .run();
    o.assert_code(2);
    // A force-pushed baseline: its commit is gone from the history.
    let forced = dir.path().join("forced");
    copy_dir(&baseline, &forced);
    let lock = std::fs::read_to_string(forced.join("lock.json")).unwrap();
    std::fs::write(
        forced.join("lock.json"),
        lock.replace(&ids[BASE as usize], &"d".repeat(40)),
    )
    .unwrap();
    let o = Rocmatrix::new()
        .arg("triage")
        .arg(&run)
        .arg("--baseline")
        .arg(&forced)
        .out(&out)
        .run();
    eprintln!("{}", o.text());
    o.assert_success();
    assert!(
        o.stdout().contains("could not triage: source proj: the baseline's commit dddddddddddd is no longer in the history"),
        "{}",
        o.stdout()
    );
    let after = read_json(&run.join("report/results.json"));
    assert_eq!(after["cells"], results["cells"]);
}

#[test]
fn an_interrupted_triage_resumes_and_a_budget_says_what_it_left_for_real() {
    let Some(_engine) =
        engine_or_skip("an_interrupted_triage_resumes_and_a_budget_says_what_it_left_for_real")
    else {
        return;
    };
    bases::ensure("bookworm");
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("proj");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let mut ids = vec![String::new()];
    commit_range(&repo, &mut ids, 1, BASE);
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let m = matrix(dir.path(), &repo, &nonce, "triage-resume");
    let out = dir.path().join("out");
    let o = Rocmatrix::run_matrix(&m)
        .args(["--only", "part=sum"])
        .out(&out)
        .run();
    o.assert_success();
    let baseline = o.run_store();
    commit_range(&repo, &mut ids, BASE + 1, HEAD);
    let o = Rocmatrix::run_matrix(&m)
        .args(["--only", "part=sum"])
        .out(&out)
        .run();
    o.assert_code(1);
    let run = o.run_store();

    // A budget of 3 probes: stopped, and said.
    let o = Rocmatrix::new()
        .arg("triage")
        .arg(&run)
        .arg("--baseline")
        .arg(&baseline)
        .args(["--triage-budget", "3"])
        .out(&out)
        .run();
    eprintln!("{}", o.text());
    o.assert_success();
    assert!(o.stdout().contains("not finished: "), "{}", o.stdout());
    assert!(
        o.stdout().contains("triage budget was spent"),
        "{}",
        o.stdout()
    );
    let doc = read_json(&run.join("triage.json"));
    assert_eq!(item(&doc, "sum: FAILED")["state"], "unfinished", "{doc}");

    // Killed outright (SIGKILL) after one more probe is recorded.
    let mut child = Rocmatrix::new()
        .arg("triage")
        .arg(&run)
        .arg("--baseline")
        .arg(&baseline)
        .out(&out)
        .spawn();
    let probes = |out: &Path| -> usize {
        bisection_dirs(out)
            .iter()
            .filter_map(|d| std::fs::read_to_string(d.join("bisect.json")).ok())
            .filter_map(|t| serde_json::from_str::<Value>(&t).ok())
            .map(|d| d["probes"].as_array().map_or(0, |p| p.len()))
            .sum()
    };
    let t0 = Instant::now();
    while probes(&out) < 4 {
        assert!(
            t0.elapsed() < Duration::from_secs(900),
            "no fourth probe in 15 minutes"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("triage ended before it could be killed: {status}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    child.kill().unwrap();
    let _ = child.wait();
    let dirs = bisection_dirs(&out);
    assert_eq!(dirs.len(), 1, "{dirs:?}");

    let o = Rocmatrix::new()
        .arg("triage")
        .arg(&run)
        .arg("--baseline")
        .arg(&baseline)
        .out(&out)
        .run();
    eprintln!("{}", o.text());
    o.assert_success();
    assert!(
        o.stderr().contains("resuming an earlier bisection"),
        "{}",
        o.stderr()
    );
    assert_eq!(bisection_dirs(&out), dirs, "a second bisection was started");
    let doc = read_json(&run.join("triage.json"));
    let sum = item(&doc, "sum: FAILED");
    assert_eq!(
        number(&ids, found(sum)["first"]["value"].as_str().unwrap()),
        SUM_BREAKS as usize,
        "{sum}"
    );
    let n = found(sum)["probes"].as_u64().unwrap() as usize;
    assert!(
        n <= log2_ceil((HEAD - BASE + 1) as usize) + 3 + 1,
        "{n} probes: {sum}"
    );
}

/// The seed's question, asked by no one: a run of hsa-metadata-yn shows
/// "invalid HSA metadata" that its baseline (LLVM 22 only) did not; its
/// attribution names the `llvm` axis, and triage finds, with no end
/// given, that the failure is gone from LLVM 22 (last failing: 21).
#[test]
fn the_yn_failure_is_triaged_over_the_llvm_axis_its_attribution_names_for_real() {
    let Some(_engine) = engine_or_skip(
        "the_yn_failure_is_triaged_over_the_llvm_axis_its_attribution_names_for_real",
    ) else {
        return;
    };
    for suite in ["bookworm", "trixie", "sid"] {
        bases::ensure(suite);
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let m = Path::new(env!("CARGO_MANIFEST_DIR")).join("matrix/hsa-metadata-yn.yaml");
    let o = Rocmatrix::run_matrix(&m)
        .args(["--only", "llvm=22", "--only", "gfx=gfx900"])
        .out(&out)
        .run();
    o.assert_success();
    let baseline = o.run_store();
    let t0 = Instant::now();
    let o = Rocmatrix::run_matrix(&m)
        .args(["--only", "gfx=gfx900", "--triage", "--baseline"])
        .arg(&baseline)
        .out(&out)
        .run();
    let secs = t0.elapsed().as_secs_f64();
    eprintln!("{}", o.text());
    o.assert_code(1);
    let run = o.run_store();
    let doc = read_json(&run.join("triage.json"));
    let yn = item(&doc, "invalid HSA metadata");
    let s = found(yn);
    assert_eq!(s["over"], "axis", "{yn}");
    assert_eq!(s["name"], "llvm", "{yn}");
    assert_eq!(s["first"]["value"], "22", "{yn}");
    assert_eq!(s["last"]["value"], "21", "{yn}");
    let n = s["probes"].as_u64().unwrap();
    assert!(n <= 4, "{n} probes: {yn}");
    assert!(
        o.stdout()
            .contains("gone from llvm=22 (range llvm=15..22, ")
            && o.stdout().contains("last failing llvm=21"),
        "{}",
        o.stdout()
    );
    eprintln!("yn: {n} probes; run + triage {secs:.1} s");

    // A first run, with no baseline and no earlier run in its history (it
    // said "could not triage: the history holds no earlier run where cell
    // … ran without it"): the answer is in the run, where llvm=22 passed.
    let fresh = dir.path().join("fresh");
    let first = Rocmatrix::run_matrix(&m)
        .args(["--only", "gfx=gfx900"])
        .out(&fresh)
        .run();
    first.assert_code(1);
    let t = Rocmatrix::new()
        .arg("triage")
        .arg(first.run_store())
        .arg("--out")
        .arg(&fresh)
        .run();
    let said = t.text();
    assert!(!said.contains("could not triage"), "{said}");
    assert!(
        said.contains("gone from llvm=22 (range llvm=15..22, ")
            && said.contains("last failing llvm=21"),
        "{said}"
    );
}
