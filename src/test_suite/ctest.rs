//! The CTest adapter: `ctest` in the step's build directory with the step's
//! label and regex filters and per-test timeout, writing CTest's own JUnit
//! (`--output-junit`, CTest ≥ 3.21). CTest runs each test in its own
//! process and enforces its own timeouts, so crash isolation is CTest's;
//! but its JUnit calls a timeout and a crash a plain failure, so the step's
//! report is written from CTest's cases with the verdicts its console lines
//! give ([`super::ctest_output`]): a timeout blamed on its test, a crash
//! named by its signal, as the gtest adapter reports them.

use super::{
    ctest_output, gtest_output, note, read_file, write_junit, Case, TestSuiteContext,
    TestSuiteError, TestSuiteOutcome,
};
use std::time::{Duration, Instant};

use crate::engine::ExecOutcome;
use crate::plan::test_suite::Ctest;

/// The `ctest` command line for `c`, writing JUnit to `junit`.
pub fn command(c: &Ctest, junit: &str) -> Vec<String> {
    let mut argv = vec![
        "ctest".to_string(),
        "--output-on-failure".into(),
        "--output-junit".into(),
        junit.into(),
    ];
    for (flag, v) in [
        ("-L", &c.labels),
        ("-LE", &c.exclude_labels),
        ("-R", &c.regex),
        ("-E", &c.exclude_regex),
    ] {
        if let Some(v) = v {
            argv.push(flag.into());
            argv.push(v.clone());
        }
    }
    if let Some(t) = c.timeout_per_test {
        argv.push("--timeout".into());
        argv.push(t.as_secs().max(1).to_string());
    }
    argv.extend(c.args.iter().cloned());
    argv
}

/// Runs the ctest step `c`; with `rerun_failures: N`, its failing tests
/// again through `ctest --rerun-failed`, up to N times while any fail.
pub async fn run(
    cx: &TestSuiteContext<'_>,
    c: &Ctest,
    log: &super::Log<'_>,
) -> Result<TestSuiteOutcome, TestSuiteError> {
    let deadline = Instant::now() + cx.step_timeout;
    note(log, &format!("rocmatrix: ctest in {}\n", c.dir));
    let junit = format!("{TMP}/{}.xml", cx.slug);
    let (outcome, console) = exec(cx, c, command(c, &junit), cx.step_timeout, log).await?;
    if outcome == ExecOutcome::TimedOut {
        return Ok(TestSuiteOutcome {
            cases: Vec::new(),
            junit: None,
            step_timed_out: true,
            problem: None,
            package: None,
        });
    }
    let Some(mut cases) = read_cases(cx, &junit, &console, c).await? else {
        let code = match outcome {
            ExecOutcome::Exited(c) => c,
            ExecOutcome::TimedOut => -1,
        };
        return Ok(TestSuiteOutcome {
            cases: Vec::new(),
            junit: None,
            step_timed_out: false,
            package: None,
            problem: Some(format!(
                "ctest exited with code {code} and wrote no readable JUnit (is CTest at least 3.21, and {} a build directory?)",
                c.dir
            )),
        });
    };
    rerun_failed(cx, c, &mut cases, deadline, log).await?;
    let path = cx.junit_dir.join("ctest.xml");
    let cases = write_junit(path.clone(), "ctest", cases).await?;
    Ok(TestSuiteOutcome {
        cases,
        junit: Some(path),
        step_timed_out: false,
        problem: None,
        package: None,
    })
}

/// Where CTest writes its JUnit in the container.
const TMP: &str = "/tmp/rocmatrix-ctest";

/// Runs `argv` (a `ctest` command line) in the build directory for at
/// most `timeout`, the log and the console parser fed as it prints.
async fn exec(
    cx: &TestSuiteContext<'_>,
    c: &Ctest,
    argv: Vec<String>,
    timeout: Duration,
    log: &super::Log<'_>,
) -> Result<(ExecOutcome, ctest_output::Results), TestSuiteError> {
    // `cd` rather than `--test-dir`, which CTest learnt only in 3.20.
    let script = format!(
        "mkdir -p {TMP} && cd {} && exec \"$@\"",
        crate::plan::ci::shell_quote(&c.dir)
    );
    let mut cmd = vec!["sh".to_string(), "-c".into(), script, "sh".into()];
    cmd.extend(argv);
    let mut console = ctest_output::Results::default();
    let mut sink = |b: &[u8]| {
        console.feed(b);
        let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
        (*l)(b);
    };
    let outcome = cx
        .engine
        .exec(cx.container, cmd, cx.env.clone(), &mut sink, Some(timeout))
        .await?;
    Ok((outcome, console))
}

/// CTest's JUnit at `junit`, with the verdicts its console lines give.
async fn read_cases(
    cx: &TestSuiteContext<'_>,
    junit: &str,
    console: &ctest_output::Results,
    c: &Ctest,
) -> Result<Option<Vec<Case>>, TestSuiteError> {
    let text = read_file(cx, junit).await?;
    let mut cases = text.as_deref().and_then(gtest_output::parse_xml);
    if let Some(cases) = cases.as_mut() {
        console.refine(cases, c.timeout_per_test);
    }
    Ok(cases)
}

/// `rerun_failures: N`: `ctest --rerun-failed` (CTest's own list of the
/// tests that failed last time) while any test fails, up to N times and
/// within the step's time. A test that then passes is flaky (its earlier
/// runs kept as `<flakyFailure>`s); one that fails every time keeps its
/// last failure, the earlier ones as `<rerunFailure>`s.
async fn rerun_failed(
    cx: &TestSuiteContext<'_>,
    c: &Ctest,
    cases: &mut [Case],
    deadline: Instant,
    log: &super::Log<'_>,
) -> Result<(), TestSuiteError> {
    for attempt in 1..=c.rerun_failures {
        let failing = cases.iter().filter(|k| k.verdict.is_failure()).count();
        let left = deadline.saturating_duration_since(Instant::now());
        if failing == 0 || left.is_zero() {
            break;
        }
        note(
            log,
            &format!(
                "rocmatrix: ctest --rerun-failed: {failing} failing test{} again ({attempt} of {})\n",
                if failing == 1 { "" } else { "s" },
                c.rerun_failures
            ),
        );
        let junit = format!("{TMP}/{}-rerun-{attempt}.xml", cx.slug);
        let mut argv = command(c, &junit);
        argv.insert(1, "--rerun-failed".into());
        let (outcome, console) = exec(cx, c, argv, left, log).await?;
        if outcome == ExecOutcome::TimedOut {
            break;
        }
        let Some(again) = read_cases(cx, &junit, &console, c).await? else {
            break;
        };
        super::rerun::fold_attempt(cases, again);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line() {
        let c = Ctest {
            dir: "/work/build".into(),
            labels: Some("quick".into()),
            exclude_labels: None,
            regex: Some("^fft".into()),
            exclude_regex: None,
            timeout_per_test: Some(Duration::from_secs(90)),
            rerun_failures: 0,
            args: vec!["-j2".into()],
        };
        assert_eq!(
            command(&c, "/tmp/j.xml").join(" "),
            "ctest --output-on-failure --output-junit /tmp/j.xml -L quick -R ^fft --timeout 90 -j2"
        );
    }
}
