//! One googletest process of a shard ([`BatchRun`]): the binary run with
//! its filter under the per-test and step watchdog, its output followed,
//! and its tests judged by its XML report when it ended normally, else by
//! its progress lines (the running test blamed, the rest run again).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::gtest::same_tests;
use super::gtest_output::{self, LineEnd, Listed, OutputFollower};
use super::process::{self, Ended};
use super::{
    note, signal_name, text_of, Case, CaseVerdict, Log, TestSuiteContext, TestSuiteError, MAX_READ,
};
use crate::plan::test_suite::Gtest;

/// Why the watchdog killed a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kill {
    /// This test ran past `timeout_per_test`.
    Test(String),
    /// The step ran past its timeout.
    Step,
}

/// One shard: its number (1-based; 0 when unsharded), and its variables.
pub(super) struct Shard {
    pub(super) number: usize,
    of: usize,
    env: Vec<String>,
}

impl Shard {
    /// Shard `i` (from 0) of `of`, with the step's variables and its GPU's.
    pub(super) fn new(cx: &TestSuiteContext<'_>, i: usize, of: usize) -> Shard {
        Shard {
            number: if of > 1 { i + 1 } else { 0 },
            of,
            env: cx
                .env
                .iter()
                .chain(cx.per_gpu.get(i).into_iter().flatten())
                .cloned()
                .collect(),
        }
    }

    pub(super) fn tag(&self) -> String {
        if self.number == 0 {
            String::new()
        } else {
            format!("[shard {}/{}] ", self.number, self.of)
        }
    }
}

/// `--gtest_filter=` naming each test of `batch`.
pub(super) fn filter_arg(batch: &[Listed]) -> String {
    let mut f = String::with_capacity(16 + batch.len() * 48);
    f.push_str("--gtest_filter=");
    for (i, t) in batch.iter().enumerate() {
        if i > 0 {
            f.push(':');
        }
        f.push_str(&t.suite);
        f.push('.');
        f.push_str(&t.name);
    }
    f
}

/// One process of a shard.
pub(super) struct BatchRun<'a> {
    pub(super) cx: &'a TestSuiteContext<'a>,
    pub(super) g: &'a Gtest,
    pub(super) bin: &'a str,
    pub(super) shard: &'a Shard,
    pub(super) xml: &'a str,
    pub(super) pidfile: &'a str,
    pub(super) per_test: Duration,
    pub(super) deadline: Instant,
}

/// How one process ran.
pub(super) struct ProcessRun {
    pub(super) ended: Ended<Kill>,
    pub(super) progress: OutputFollower,
    /// Its report, when it ended normally and wrote a complete one.
    pub(super) report: Option<Vec<Case>>,
}

/// What one process decided.
pub(super) struct Judged {
    pub(super) cases: Vec<Case>,
    /// Tests that did not run because the process died first.
    pub(super) rerun: Vec<Listed>,
    pub(super) step_timed_out: bool,
}

impl BatchRun<'_> {
    /// Runs `batch` in one process that names each of its tests.
    pub(super) async fn run(
        &self,
        batch: &[Listed],
        log: &Log<'_>,
    ) -> Result<Judged, TestSuiteError> {
        let ran = self.execute(Some(filter_arg(batch)), log).await?;
        Ok(match ran.report {
            Some(xml_cases) => self.judge_by_xml(batch, xml_cases, &ran.progress),
            None => self.judge_by_progress(batch, &ran.ended, &ran.progress),
        })
    }

    /// Runs the binary once with `filter` (else the step's own filter):
    /// how it ended, its progress lines, and its report when it ended
    /// normally and wrote a complete one.
    pub(super) async fn execute(
        &self,
        filter: Option<String>,
        log: &Log<'_>,
    ) -> Result<ProcessRun, TestSuiteError> {
        let mut argv = vec![self.bin.to_string()];
        argv.extend(filter.or_else(|| {
            self.g
                .filter
                .as_ref()
                .map(|f| format!("--gtest_filter={f}"))
        }));
        argv.push(format!("--gtest_output=xml:{}", self.xml));
        argv.extend(self.g.args.iter().cloned());
        let progress = Mutex::new(OutputFollower::default());
        let tag = self.shard.tag();
        let mut sink = |bytes: &[u8]| {
            let mut text = String::new();
            progress
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .feed(bytes, |line| {
                    text.push_str(&tag);
                    text.push_str(line);
                    text.push('\n');
                });
            if !text.is_empty() {
                note(log, &text);
            }
        };
        let watchdog = || {
            if Instant::now() >= self.deadline {
                return Some(Kill::Step);
            }
            let p = progress.lock().unwrap_or_else(|p| p.into_inner());
            match &p.running {
                Some((name, since)) if since.elapsed() > self.per_test => {
                    Some(Kill::Test(name.clone()))
                }
                _ => None,
            }
        };
        let mut ended = process::run_watched(
            self.cx.engine,
            self.cx.container,
            process::Process {
                argv: &argv,
                env: self.shard.env.clone(),
                pidfile: self.pidfile,
                then_read: Some((self.xml, MAX_READ)),
                attach: self.cx.backtrace.filter(|b| b.on_timeout),
            },
            &mut sink,
            &watchdog,
        )
        .await?;
        let mut progress = progress.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(last) = progress.flush() {
            note(log, &format!("{tag}{last}\n"));
        }
        let normal = ended.killed.is_none() && matches!(ended.exit, Some(0 | 1));
        // The report came back behind the output, in the same exec.
        let report = match ended.file.take() {
            Some(bytes) if normal => Some(text_of(bytes)),
            _ => None,
        };
        if !normal {
            note(log, &format!("{tag}rocmatrix: {}\n", describe(&ended)));
        }
        Ok(ProcessRun {
            report: report.as_deref().and_then(gtest_output::parse_xml),
            ended,
            progress,
        })
    }

    /// A process that ended normally: its XML judges every test.
    pub(super) fn judge_by_xml(
        &self,
        batch: &[Listed],
        xml: Vec<Case>,
        progress: &OutputFollower,
    ) -> Judged {
        // The report lists the batch in its own order: matched pairwise,
        // names are compared, not hashed (by name only when they differ).
        let in_step = same_tests(batch, &xml);
        let mut by_name: HashMap<String, Case> = HashMap::new();
        let mut pairwise = Vec::new();
        if in_step {
            pairwise = xml;
        } else {
            by_name = xml
                .into_iter()
                .map(|c| (format!("{}.{}", c.suite, c.name), c))
                .collect();
        }
        let mut pairwise = pairwise.into_iter();
        // What each test printed, looked up only for tests that did not pass.
        let mut outputs: Option<HashMap<&str, &str>> = None;
        let cases = batch
            .iter()
            .map(|t| {
                let found = if in_step {
                    pairwise.next()
                } else {
                    by_name.remove(&t.full())
                };
                let Some(mut c) = found else {
                    return case_of(
                        t,
                        CaseVerdict::Skipped {
                            message: "listed, but not in googletest's report".into(),
                        },
                        self.shard.number,
                    );
                };
                c.param = t.param.clone().or(c.param);
                c.shard = self.shard.number;
                if c.verdict == CaseVerdict::Passed {
                    return c;
                }
                let outputs = outputs.get_or_insert_with(|| {
                    progress
                        .finished
                        .iter()
                        .map(|f| (f.full.as_str(), f.output.as_str()))
                        .collect()
                });
                let output = outputs.get(t.full().as_str()).copied().unwrap_or("");
                // A failure's text is usually all it printed: keep the
                // output only when it says more.
                let said = match &c.verdict {
                    CaseVerdict::Failed { text, .. } => text.trim() == output.trim(),
                    _ => false,
                };
                if !said {
                    c.output = output.to_string();
                }
                c
            })
            .collect();
        Judged {
            cases,
            rerun: Vec::new(),
            step_timed_out: false,
        }
    }

    /// A process that died: the progress lines judge what finished, the
    /// running test takes the blame, the rest run again.
    pub(super) fn judge_by_progress(
        &self,
        batch: &[Listed],
        ended: &Ended<Kill>,
        progress: &OutputFollower,
    ) -> Judged {
        let finished: HashMap<&str, &gtest_output::Finished> = progress
            .finished
            .iter()
            .map(|f| (f.full.as_str(), f))
            .collect();
        let running = progress.running.as_ref().map(|(n, _)| n.as_str());
        let mut cases = Vec::new();
        let mut rerun = Vec::new();
        let mut blamed = false;
        for t in batch {
            let full = t.full();
            if let Some(f) = finished.get(full.as_str()) {
                cases.push(self.finished_case(t, f));
            } else if running == Some(full.as_str()) {
                let mut c = case_of(t, self.blame(ended), self.shard.number);
                c.output = progress.captured().to_string();
                if let Some(text) = &ended.hang {
                    with_hang(&mut c, text, self.cx.backtrace.map_or(32, |b| b.frames));
                }
                cases.push(c);
                blamed = true;
            } else {
                rerun.push(t.clone());
            }
        }
        let step_timed_out = ended.killed == Some(Kill::Step);
        if !blamed && !step_timed_out && !rerun.is_empty() {
            if progress.finished.is_empty() {
                // The process ran none of its tests: running them one by one
                // would only repeat that, once per test.
                let verdict = CaseVerdict::Error {
                    kind: "no-tests-ran".into(),
                    message: format!(
                        "the test process ran none of its tests ({})",
                        describe(ended)
                    ),
                };
                for t in rerun.drain(..) {
                    cases.push(case_of(&t, verdict.clone(), self.shard.number));
                }
            } else {
                // Died between tests: the next test is blamed, so that the
                // shard always moves on.
                let t = rerun.remove(0);
                let mut c = case_of(&t, self.blame(ended), self.shard.number);
                c.output = "(the process died before this test started)\n".to_string();
                cases.push(c);
            }
        }
        Judged {
            cases,
            rerun,
            step_timed_out,
        }
    }

    fn finished_case(&self, t: &Listed, f: &gtest_output::Finished) -> Case {
        let verdict = match f.end {
            LineEnd::Ok => CaseVerdict::Passed,
            LineEnd::Failed => CaseVerdict::Failed {
                message: super::first_lines(&f.output, 4096),
                text: f.output.clone(),
            },
            LineEnd::Skipped => CaseVerdict::Skipped {
                message: f.output.trim().to_string(),
            },
        };
        let mut c = case_of(t, verdict, self.shard.number);
        c.time = f.time;
        if f.end != LineEnd::Ok {
            c.output = f.output.clone();
        }
        c
    }

    /// The verdict for the test that was running when the process ended.
    fn blame(&self, ended: &Ended<Kill>) -> CaseVerdict {
        match &ended.killed {
            Some(Kill::Test(_)) => CaseVerdict::Timeout {
                secs: self.per_test.as_secs(),
            },
            Some(Kill::Step) => CaseVerdict::Error {
                kind: "step-timeout".into(),
                message: "the step timed out while this test ran".into(),
            },
            None => match ended.exit {
                Some(code) => match signal_name(code) {
                    Some(sig) => CaseVerdict::Error {
                        kind: sig.into(),
                        message: format!("killed by {sig} (exit status {code})"),
                    },
                    None => CaseVerdict::Error {
                        kind: "exit-code".into(),
                        message: format!(
                            "the test process exited with code {code} during this test"
                        ),
                    },
                },
                None => CaseVerdict::Error {
                    kind: "lost".into(),
                    message: "the test process's output did not end".into(),
                },
            },
        }
    }
}

/// The test that hung gets what gdb saw: the stuck thread's functions
/// before its output (`rocmatrix: hung in spin ← work ← TestBody`, which
/// its failure's signature keeps), the frames after it under the
/// backtrace heading (which the signature leaves out).
fn with_hang(c: &mut Case, text: &str, frames: usize) {
    use crate::debugger::{attach, gdb_output::HEADING};
    let bt = attach::parse(text, frames, "");
    // JUnit readers keep the head of a test's output: the frames must
    // fit after what the test printed.
    if c.output.len() > 4096 {
        let cut = super::tail_start(&c.output, 4096);
        c.output = format!("… {}", &c.output[cut..]);
    }
    let stuck = attach::stuck_in(&bt, 3)
        .map(|s| format!("rocmatrix: hung in {s}\n"))
        .unwrap_or_default();
    let said = c.output.trim_end();
    c.output = format!(
        "{stuck}{said}{}\n\n{HEADING}\n{}\n",
        if said.is_empty() { "" } else { "\n" },
        bt.top(crate::store::record::TOP_FRAMES).join("\n")
    );
}

/// How a process ended, in words.
pub(super) fn describe(ended: &Ended<Kill>) -> String {
    match (&ended.killed, ended.exit) {
        (Some(Kill::Test(t)), _) => format!("{t} ran past its per-test timeout; process killed"),
        (Some(Kill::Step), _) => "the step ran past its timeout; process killed".into(),
        (None, Some(code)) => match signal_name(code) {
            Some(sig) => format!("the test process was killed by {sig} (exit status {code})"),
            None => format!("the test process exited with code {code} without a complete report"),
        },
        (None, None) => "the test process's output did not end".into(),
    }
}

pub(super) fn case_of(t: &Listed, verdict: CaseVerdict, shard: usize) -> Case {
    Case {
        suite: t.suite.clone(),
        name: t.name.clone(),
        param: t.param.clone(),
        verdict,
        time: None,
        output: String::new(),
        shard,
        reruns: Vec::new(),
    }
}
