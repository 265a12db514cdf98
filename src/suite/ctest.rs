//! The CTest adapter: `ctest` in the step's build directory with the step's
//! label and regex filters and per-test timeout, writing CTest's own JUnit
//! (`--output-junit`, CTest ≥ 3.21). CTest runs each test in its own
//! process and enforces its own timeouts, so crash isolation is CTest's;
//! but its JUnit calls a timeout and a crash a plain failure, so the step's
//! report is written from CTest's cases with the verdicts its console lines
//! give ([`super::ctest_output`]): a timeout blamed on its test, a crash
//! named by its signal, as the gtest adapter reports them.

use super::{
    ctest_output, gtest_output, note, read_file, write_junit, Case, SuiteContext, SuiteError,
    SuiteOutcome,
};
use crate::engine::ExecOutcome;
use crate::plan::suite::Ctest;

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

/// Runs the ctest step `c`.
pub async fn run(
    cx: &SuiteContext<'_>,
    c: &Ctest,
    log: &super::Log<'_>,
) -> Result<SuiteOutcome, SuiteError> {
    let junit = format!("/tmp/rocmatrix-ctest/{}.xml", cx.slug);
    let argv = command(c, &junit);
    // `cd` rather than `--test-dir`, which CTest learnt only in 3.20.
    let script = format!(
        "mkdir -p /tmp/rocmatrix-ctest && cd {} && exec \"$@\"",
        crate::plan::ci::shell_quote(&c.dir)
    );
    let mut cmd = vec!["sh".to_string(), "-c".into(), script, "sh".into()];
    cmd.extend(argv);
    note(log, &format!("rocmatrix: ctest in {}\n", c.dir));
    let mut console = ctest_output::Results::default();
    let mut sink = |b: &[u8]| {
        console.feed(b);
        let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
        (*l)(b);
    };
    let outcome = cx
        .engine
        .exec(
            cx.container,
            cmd,
            cx.env.clone(),
            &mut sink,
            Some(cx.step_timeout),
        )
        .await?;
    if outcome == ExecOutcome::TimedOut {
        return Ok(SuiteOutcome {
            cases: Vec::new(),
            junit: None,
            step_timed_out: true,
            problem: None,
        });
    }
    let text = read_file(cx, &junit).await?;
    let cases: Option<Vec<Case>> = text.as_deref().and_then(gtest_output::parse_xml);
    let Some(mut cases) = cases else {
        let code = match outcome {
            ExecOutcome::Exited(c) => c,
            ExecOutcome::TimedOut => -1,
        };
        return Ok(SuiteOutcome {
            cases: Vec::new(),
            junit: None,
            step_timed_out: false,
            problem: Some(format!(
                "ctest exited with code {code} and wrote no readable JUnit (is CTest at least 3.21, and {} a build directory?)",
                c.dir
            )),
        });
    };
    console.refine(&mut cases, c.timeout_per_test);
    let path = cx.junit_dir.join("ctest.xml");
    let cases = write_junit(path.clone(), "ctest", cases).await?;
    Ok(SuiteOutcome {
        cases,
        junit: Some(path),
        step_timed_out: false,
        problem: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn command_line() {
        let c = Ctest {
            dir: "/work/build".into(),
            labels: Some("quick".into()),
            exclude_labels: None,
            regex: Some("^fft".into()),
            exclude_regex: None,
            timeout_per_test: Some(Duration::from_secs(90)),
            args: vec!["-j2".into()],
        };
        assert_eq!(
            command(&c, "/tmp/j.xml").join(" "),
            "ctest --output-on-failure --output-junit /tmp/j.xml -L quick -R ^fft --timeout 90 -j2"
        );
    }
}
