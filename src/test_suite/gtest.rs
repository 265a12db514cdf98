//! The googletest adapter.
//!
//! 1. Unsharded (no GPU lease, or one), the binary first runs as the binary
//!    alone would: one process, the step's own filter, `--gtest_output=xml:`,
//!    and no listing before it. When that process ends normally its XML
//!    judges every test it selected, so a suite of 30,000 tests costs one
//!    process start, not two.
//! 2. Otherwise every binary the step's `binary` glob names lists its tests
//!    (`--gtest_list_tests`, with the step's filter): before anything runs
//!    when the suite is sharded, or after the whole-suite process died, to
//!    name the tests it did not reach.
//! 3. Sharded, the tests are split the way googletest's sharding protocol
//!    splits them (test *k* to shard *k* mod *N*), one per leased GPU; each
//!    shard's processes see only their GPU. rocmatrix passes each process its
//!    tests by name instead of setting `GTEST_TOTAL_SHARDS`, so that a shard
//!    can go on after a crash with exactly the tests it has left.
//! 4. Named tests run in batches, one process per batch. When a process ends
//!    normally its XML judges the batch. When it dies (a signal, `exit()`, a
//!    per-test timeout), the progress lines judge the tests that finished,
//!    the test that was running is an `error` (signal or exit code, with its
//!    output) or a timeout, and the batch's other tests run again in a new
//!    process.
//!
//! Every listed test ends with exactly one outcome.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::gtest_output::{self, Listed, OutputFollower};
use super::gtest_process::{case_of, BatchRun, Shard};
use super::{
    note, signal_name, Case, CaseVerdict, Log, TestSuiteContext, TestSuiteError, TestSuiteOutcome,
    MAX_READ,
};
use crate::engine::ExecOutcome;
use crate::plan::test_suite::Gtest;

/// Bytes of `--gtest_filter` per process: one argument may not exceed
/// Linux's MAX_ARG_STRLEN (128 KiB), so a large suite runs in several batches.
const FILTER_BYTES: usize = 64 * 1024;
/// How long listing the tests may take at most.
const LIST_TIMEOUT: Duration = Duration::from_secs(600);
/// Where the adapter's files live in the container.
const DIR: &str = "/tmp/rocmatrix-gtest";
/// At least how long a listing made after the step's deadline may take.
const LATE_LIST: Duration = Duration::from_secs(30);

/// Numbers the report files: googletest writes none when a process ends
/// early, so a name must never be one an earlier process (of another
/// binary, step or shard) may have left.
static REPORTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A fresh report path for process `batch` of `shard`.
fn report_path(cx: &TestSuiteContext<'_>, shard: &Shard, batch: usize) -> String {
    let n = REPORTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{DIR}/{}-s{}-b{batch}-{n}.xml", cx.slug, shard.number)
}

/// Runs the gtest step `g`.
pub async fn run(
    cx: &TestSuiteContext<'_>,
    g: &Gtest,
    log: &Log<'_>,
) -> Result<TestSuiteOutcome, TestSuiteError> {
    let deadline = Instant::now() + cx.step_timeout;
    let binaries = if whole_first(cx, g) && is_plain_path(&g.binary) {
        // Nothing for a shell to expand: whether the file is there shows
        // when it runs (exit 126 or 127), and only then is it looked for.
        vec![g.binary.clone()]
    } else {
        resolve(cx, &g.binary).await?
    };
    if binaries.is_empty() {
        return Ok(no_binary(g));
    }
    let mut cases = Vec::new();
    let mut step_timed_out = false;
    for bin in &binaries {
        // With several binaries, suites are named after their binary too.
        let prefix = (binaries.len() > 1).then(|| format!("{}/", basename(bin)));
        // A binary after the step's time ran out is listed, its tests not run.
        let ran = if whole_first(cx, g) && Instant::now() < deadline {
            run_whole(cx, g, bin, deadline, log).await?
        } else {
            run_listed(cx, g, bin, deadline, log).await?
        };
        let (mut done, timed_out) = match ran {
            BinaryOutcome::Ran(done, timed_out) => (done, timed_out),
            BinaryOutcome::Unlisted(problem) => {
                cases.push(listing_error(bin, problem));
                continue;
            }
            BinaryOutcome::Missing => return Ok(no_binary(g)),
        };
        if g.rerun_failures > 0 {
            rerun_failures(cx, g, bin, &mut done, deadline, log).await?;
        }
        if let Some(spec) = cx.backtrace.filter(|b| b.on.is_some()) {
            super::crash_backtrace::add(cx, spec, bin, &mut done).await;
        }
        step_timed_out |= timed_out;
        if let Some(p) = &prefix {
            for c in &mut done {
                c.suite = format!("{p}{}", c.suite);
            }
        }
        cases.extend(done);
    }
    let path = cx.junit_dir.join("gtest.xml");
    let cases = super::write_junit(path.clone(), "gtest", cases).await?;
    Ok(TestSuiteOutcome {
        cases,
        junit: Some(path),
        step_timed_out,
        problem: None,
        package: None,
    })
}

/// `rerun_failures: N`: runs each failing test of `done` again, alone in
/// a process of its own (on the GPU its shard had), up to N times or until
/// it passes. A pass makes it flaky (its earlier runs kept as
/// `<flakyFailure>`s); otherwise the last run's failure stands, the earlier
/// ones kept as `<rerunFailure>`s. Reruns stop at the step's deadline.
async fn rerun_failures(
    cx: &TestSuiteContext<'_>,
    g: &Gtest,
    bin: &str,
    done: &mut [Case],
    deadline: Instant,
    log: &Log<'_>,
) -> Result<(), TestSuiteError> {
    let of = cx.per_gpu.len().max(1);
    let pidfile = format!("{DIR}/{}-rerun.pid", cx.slug);
    for case in done.iter_mut().filter(|c| c.verdict.is_failure()) {
        let test = Listed {
            suite: case.suite.clone(),
            name: case.name.clone(),
            param: case.param.clone(),
        };
        let shard = Shard::new(cx, case.shard.saturating_sub(1), of);
        for attempt in 1..=g.rerun_failures {
            if Instant::now() >= deadline {
                return Ok(());
            }
            note(
                log,
                &format!(
                    "{}rocmatrix: {bin}: running {} again ({attempt} of {})\n",
                    shard.tag(),
                    test.full(),
                    g.rerun_failures
                ),
            );
            let xml = report_path(cx, &shard, 0);
            let run = BatchRun {
                cx,
                g,
                bin,
                shard: &shard,
                xml: &xml,
                pidfile: &pidfile,
                per_test: g.timeout_per_test.unwrap_or(cx.step_timeout),
                deadline,
            };
            let judged = run.run(std::slice::from_ref(&test), log).await?;
            let Some(again) = judged.cases.into_iter().next() else {
                break;
            };
            if !case.fold_rerun(again) {
                break;
            }
        }
    }
    Ok(())
}

/// How one binary's tests went.
enum BinaryOutcome {
    /// Its tests in listing order, and whether the step timed out.
    Ran(Vec<Case>, bool),
    /// Why its tests could not be listed (with what it showed before that,
    /// if anything ran: see [`run_whole`]).
    Unlisted(String),
    /// The plain path named no executable file.
    Missing,
}

/// The step's outcome when its `binary` names no executable file.
fn no_binary(g: &Gtest) -> TestSuiteOutcome {
    TestSuiteOutcome {
        cases: Vec::new(),
        junit: None,
        step_timed_out: false,
        package: None,
        problem: Some(format!("no executable file matches `{}`", g.binary)),
    }
}

/// Whether `binary` is a path with nothing for a shell to expand.
fn is_plain_path(binary: &str) -> bool {
    !binary.is_empty()
        && binary
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b))
}

/// Whether a binary first runs whole, by the step's own filter: unsharded,
/// and not asked for disabled tests (those are skipped, not run, so the
/// process must name the tests it runs).
fn whole_first(cx: &TestSuiteContext<'_>, g: &Gtest) -> bool {
    cx.per_gpu.len() <= 1
        && !g
            .args
            .iter()
            .any(|a| a.starts_with("--gtest_also_run_disabled_tests"))
}

/// The outcome that stands for a binary whose tests could not be listed.
fn listing_error(bin: &str, problem: String) -> Case {
    Case {
        suite: basename(bin).to_string(),
        name: "(listing tests)".into(),
        param: None,
        verdict: CaseVerdict::Error {
            kind: "listing".into(),
            message: problem,
        },
        time: None,
        output: String::new(),
        shard: 0,
        reruns: Vec::new(),
    }
}

/// Runs one binary whole, in one process by the step's own filter, as the
/// binary alone would run. A complete report judges every test; when the
/// process died, the tests are listed then, its progress lines judge what
/// it reached, and the rest go on in batches.
async fn run_whole(
    cx: &TestSuiteContext<'_>,
    g: &Gtest,
    bin: &str,
    deadline: Instant,
    log: &Log<'_>,
) -> Result<BinaryOutcome, TestSuiteError> {
    let shard = Shard::new(cx, 0, 1);
    let xml = report_path(cx, &shard, 1);
    let pidfile = format!("{DIR}/{}-s0.pid", cx.slug);
    note(
        log,
        &format!("rocmatrix: {bin}: process 1: every test the filter selects\n"),
    );
    let run = BatchRun {
        cx,
        g,
        bin,
        shard: &shard,
        xml: &xml,
        pidfile: &pidfile,
        per_test: g.timeout_per_test.unwrap_or(cx.step_timeout),
        deadline,
    };
    let ran = run.execute(None, log).await?;
    if let Some(report) = ran.report {
        let listing = listed_from_report(&report);
        let (tests, mut cases) = split_disabled(listing.clone());
        cases.extend(run.judge_by_xml(&tests, report, &ran.progress).cases);
        note(
            log,
            &format!("rocmatrix: {bin}: {} tests reported\n", listing.len()),
        );
        return Ok(BinaryOutcome::Ran(in_order(&listing, cases), false));
    }
    let nothing_ran = ran.progress.finished.is_empty() && ran.progress.running.is_none();
    if nothing_ran && ran.ended.killed.is_none() && matches!(ran.ended.exit, Some(126 | 127)) {
        // The shell could not start it: is it there at all?
        if resolve(cx, bin).await?.is_empty() {
            return Ok(BinaryOutcome::Missing);
        }
    }
    let listed = match list(cx, g, bin, deadline).await? {
        Ok(l) => l,
        Err(problem) => {
            // What process 1 showed stands; the tests it did not reach
            // cannot be named.
            let reached = reached_tests(&ran.progress);
            let judged = run.judge_by_progress(&reached, &ran.ended, &ran.progress);
            if judged.cases.is_empty() {
                return Ok(BinaryOutcome::Unlisted(problem));
            }
            let mut cases = judged.cases;
            cases.push(listing_error(bin, problem));
            return Ok(BinaryOutcome::Ran(cases, judged.step_timed_out));
        }
    };
    note(
        log,
        &format!(
            "rocmatrix: {bin}: {} tests listed, to go on after process 1\n",
            listed.len()
        ),
    );
    let (tests, mut cases) = split_disabled(listed.clone());
    let judged = run.judge_by_progress(&tests, &ran.ended, &ran.progress);
    cases.extend(judged.cases);
    let timed_out = if judged.step_timed_out {
        cases.extend(not_run(judged.rerun, 0));
        true
    } else {
        if !judged.rerun.is_empty() {
            note_rerun(log, &shard, judged.rerun.len());
        }
        let (more, t) = run_shard(cx, g, bin, (judged.rerun, 2), &shard, deadline, log).await?;
        cases.extend(more);
        t
    };
    Ok(BinaryOutcome::Ran(in_order(&listed, cases), timed_out))
}

/// The tests a process's progress lines show finished or running, in order.
fn reached_tests(progress: &OutputFollower) -> Vec<Listed> {
    let running = progress.running.as_ref().map(|(n, _)| n.as_str());
    let names = progress.finished.iter().map(|f| f.full.as_str());
    names
        .chain(running)
        .map(|full| {
            // Suite and test names hold no `.`: the first one splits them.
            let (suite, name) = full.split_once('.').unwrap_or((full, ""));
            Listed {
                suite: suite.to_string(),
                name: name.to_string(),
                param: None,
            }
        })
        .collect()
}

/// The tests a report names, as a listing would name them.
fn listed_from_report(report: &[Case]) -> Vec<Listed> {
    report
        .iter()
        .map(|c| Listed {
            suite: c.suite.clone(),
            name: c.name.clone(),
            param: c.param.clone(),
        })
        .collect()
}

/// Splits off the disabled tests, each skipped as googletest skips it.
fn split_disabled(listed: Vec<Listed>) -> (Vec<Listed>, Vec<Case>) {
    let mut run = Vec::with_capacity(listed.len());
    let mut skipped = Vec::new();
    for t in listed {
        if t.is_disabled() {
            let message = "disabled (DISABLED_ prefix)".to_string();
            skipped.push(case_of(&t, CaseVerdict::Skipped { message }, 0));
        } else {
            run.push(t);
        }
    }
    (run, skipped)
}

/// The outcomes in `listing`'s order (one per listed test that has one).
fn in_order(listing: &[Listed], cases: Vec<Case>) -> Vec<Case> {
    if same_tests(listing, &cases) {
        return cases;
    }
    let mut by_name: HashMap<String, Case> = cases
        .into_iter()
        .map(|c| (format!("{}.{}", c.suite, c.name), c))
        .collect();
    listing
        .iter()
        .filter_map(|t| by_name.remove(&t.full()))
        .collect()
}

/// Whether `cases` are the tests of `listing`, one each, in its order.
pub(super) fn same_tests(listing: &[Listed], cases: &[Case]) -> bool {
    cases.len() == listing.len()
        && listing
            .iter()
            .zip(cases)
            .all(|(t, c)| t.suite == c.suite && t.name == c.name)
}

/// Lists one binary's tests, shards them and runs each shard's tests by
/// name; returns them in listing order.
async fn run_listed(
    cx: &TestSuiteContext<'_>,
    g: &Gtest,
    bin: &str,
    deadline: Instant,
    log: &Log<'_>,
) -> Result<BinaryOutcome, TestSuiteError> {
    let listed = match list(cx, g, bin, deadline).await? {
        Ok(l) => l,
        Err(problem) => return Ok(BinaryOutcome::Unlisted(problem)),
    };
    note(
        log,
        &format!("rocmatrix: {bin}: {} tests listed\n", listed.len()),
    );
    let shards = cx.per_gpu.len().max(1);
    let (tests, mut cases) = split_disabled(listed.clone());
    let mut parts: Vec<Vec<Listed>> = vec![Vec::new(); shards];
    for (k, t) in tests.into_iter().enumerate() {
        parts[k % shards].push(t);
    }
    let runs = parts.into_iter().enumerate().map(|(i, tests)| {
        let shard = Shard::new(cx, i, shards);
        async move { run_shard(cx, g, bin, (tests, 1), &shard, deadline, log).await }
    });
    let mut timed_out = false;
    for r in futures_util::future::join_all(runs).await {
        let (done, t) = r?;
        timed_out |= t;
        cases.extend(done);
    }
    Ok(BinaryOutcome::Ran(in_order(&listed, cases), timed_out))
}

/// Runs a shard's `tests` by name, a batch per process (numbered from
/// `first`), until each has an outcome.
async fn run_shard(
    cx: &TestSuiteContext<'_>,
    g: &Gtest,
    bin: &str,
    (tests, first): (Vec<Listed>, usize),
    shard: &Shard,
    deadline: Instant,
    log: &Log<'_>,
) -> Result<(Vec<Case>, bool), TestSuiteError> {
    let mut remaining: VecDeque<Listed> = tests.into();
    let mut cases = Vec::new();
    let per_test = g.timeout_per_test.unwrap_or(cx.step_timeout);
    let pidfile = format!("{DIR}/{}-s{}.pid", cx.slug, shard.number);
    for batch_no in first.. {
        if remaining.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            cases.extend(not_run(remaining.drain(..), shard.number));
            return Ok((cases, true));
        }
        let batch = take_batch(&mut remaining);
        let xml = report_path(cx, shard, batch_no);
        note(
            log,
            &format!(
                "{}rocmatrix: process {batch_no}: {} tests\n",
                shard.tag(),
                batch.len()
            ),
        );
        let run = BatchRun {
            cx,
            g,
            bin,
            shard,
            xml: &xml,
            pidfile: &pidfile,
            per_test,
            deadline,
        };
        let judged = run.run(&batch, log).await?;
        cases.extend(judged.cases);
        if judged.step_timed_out {
            let left = judged.rerun.into_iter().chain(remaining.drain(..));
            cases.extend(not_run(left, shard.number));
            return Ok((cases, true));
        }
        if !judged.rerun.is_empty() {
            note_rerun(log, shard, judged.rerun.len());
        }
        for t in judged.rerun.into_iter().rev() {
            remaining.push_front(t);
        }
    }
    Ok((cases, false))
}

/// Tests skipped because the step ran out of time before they ran.
fn not_run(tests: impl IntoIterator<Item = Listed>, shard: usize) -> Vec<Case> {
    tests
        .into_iter()
        .map(|t| {
            let message = "not run: the step timed out".to_string();
            case_of(&t, CaseVerdict::Skipped { message }, shard)
        })
        .collect()
}

/// The log line for tests that go on in a new process.
fn note_rerun(log: &Log<'_>, shard: &Shard, n: usize) {
    note(
        log,
        &format!(
            "{}rocmatrix: {n} tests of this process did not run; continuing in a new process\n",
            shard.tag()
        ),
    );
}

/// Takes tests from the front of `remaining` while their names fit the filter.
fn take_batch(remaining: &mut VecDeque<Listed>) -> Vec<Listed> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    while let Some(t) = remaining.front() {
        let len = t.suite.len() + t.name.len() + 2;
        if !batch.is_empty() && bytes + len > FILTER_BYTES {
            break;
        }
        bytes += len;
        batch.extend(remaining.pop_front());
    }
    batch
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The executables `glob` names in the container, in order.
async fn resolve(cx: &TestSuiteContext<'_>, glob: &str) -> Result<Vec<String>, TestSuiteError> {
    let script = format!(
        "for f in {glob}; do if [ -f \"$f\" ] && [ -x \"$f\" ]; then printf '%s\\n' \"$f\"; fi; done; true"
    );
    let (_, out) = cx
        .engine
        .exec_capture(cx.container, &["sh", "-c", &script])
        .await?;
    Ok(out
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

/// `--gtest_list_tests`: the tests, or why they could not be listed. It may
/// take the step's time left (at most [`LIST_TIMEOUT`]), and [`LATE_LIST`]
/// when a listing comes after the step's deadline.
async fn list(
    cx: &TestSuiteContext<'_>,
    g: &Gtest,
    bin: &str,
    deadline: Instant,
) -> Result<Result<Vec<Listed>, String>, TestSuiteError> {
    let limit = LIST_TIMEOUT.min(
        deadline
            .saturating_duration_since(Instant::now())
            .max(LATE_LIST),
    );
    let mut argv = vec![bin.to_string(), "--gtest_list_tests".to_string()];
    if let Some(f) = &g.filter {
        argv.push(format!("--gtest_filter={f}"));
    }
    argv.extend(g.args.iter().cloned());
    let mut out = Vec::new();
    let outcome = cx
        .engine
        .exec(
            cx.container,
            argv,
            cx.env.clone(),
            &mut |b: &[u8]| {
                if out.len() < MAX_READ {
                    out.extend_from_slice(b);
                }
            },
            Some(limit),
        )
        .await?;
    let text = String::from_utf8_lossy(&out);
    let tail = super::last_lines(&text, 20);
    Ok(match outcome {
        ExecOutcome::Exited(0) => Ok(gtest_output::parse_listing(&text)),
        ExecOutcome::Exited(code) => Err(format!(
            "{bin} --gtest_list_tests: {}\n{tail}",
            match signal_name(code) {
                Some(sig) => format!("killed by {sig}"),
                None => format!("exit code {code}"),
            }
        )),
        ExecOutcome::TimedOut => Err(format!(
            "{bin} --gtest_list_tests did not finish in {} s",
            limit.as_secs()
        )),
    })
}
