//! CTest's console result lines, read as they stream: the one place CTest
//! says *why* a test failed. Its JUnit (`--output-junit`) writes a timeout,
//! a crash and a failed assertion alike, as `<failure message=""/>`
//! (CTest 3.25, checked); its console line says `***Timeout`,
//! `***Exception: SegFault` or `***Failed`:
//!
//! ```text
//! 2/6 Test #2: hangs_silently ...................***Timeout   2.00 sec
//! 3/6 Test #3: crashes ..........................***Exception: SegFault  0.01 sec
//! ```
//!
//! [`Results::refine`] turns the JUnit's failures into the verdicts the gtest
//! adapter gives: a timeout blamed on its test, a crash named by its signal.

use std::collections::HashMap;

use super::{Case, CaseVerdict};

/// How CTest's console line ended one test.
#[derive(Debug, Clone, PartialEq)]
pub enum ConsoleEnd {
    Passed,
    /// Killed at its timeout, after this many seconds.
    Timeout(f64),
    /// Ended by a signal or an exception: CTest's words (`SegFault`,
    /// `Child aborted`, `Illegal`, …).
    Exception(String),
    /// Any other word after `***` (`Failed`, `Not Run`, …).
    Other(String),
}

/// The result lines seen so far, by test name.
#[derive(Debug, Default)]
pub struct Results {
    partial: Vec<u8>,
    ends: HashMap<String, ConsoleEnd>,
}

impl Results {
    /// Feeds console bytes as they come.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        let Some(last) = memchr::memrchr(b'\n', &self.partial) else {
            // One unfinished line; a result line is short.
            if self.partial.len() > 64 * 1024 {
                self.partial.clear();
            }
            return;
        };
        let done: Vec<u8> = self.partial.drain(..=last).collect();
        for line in String::from_utf8_lossy(&done).lines() {
            if let Some((name, end)) = result_line(line) {
                self.ends.insert(name, end);
            }
        }
    }

    /// How the console said `name` ended.
    pub fn end_of(&self, name: &str) -> Option<&ConsoleEnd> {
        self.ends.get(name)
    }

    /// The JUnit's cases with each failure made what the console says it
    /// was; `per_test` is the step's `timeout_per_test`, if it gave one.
    pub fn refine(&self, cases: &mut [Case], per_test: Option<std::time::Duration>) {
        for case in cases {
            if !matches!(case.verdict, CaseVerdict::Failed { .. }) {
                continue;
            }
            // CTest writes a test's name as both its name and classname.
            match self.end_of(&case.name) {
                Some(ConsoleEnd::Timeout(after)) => {
                    let secs = per_test.map_or(after.round() as u64, |t| t.as_secs().max(1));
                    case.verdict = CaseVerdict::Timeout { secs };
                }
                Some(ConsoleEnd::Exception(what)) => {
                    let kind = signal_of(what).unwrap_or("exception");
                    case.verdict = CaseVerdict::Error {
                        kind: kind.into(),
                        message: format!("CTest: Exception: {what}"),
                    };
                }
                _ => {}
            }
        }
    }
}

/// `3/6 Test #3: name ....***Exception: SegFault  0.01 sec` → (name, end).
fn result_line(line: &str) -> Option<(String, ConsoleEnd)> {
    let rest = line.trim_start();
    let (count, rest) = rest.split_once(' ')?;
    let (done, total) = count.split_once('/')?;
    if !done.bytes().all(|b| b.is_ascii_digit()) || !total.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let rest = rest.trim_start().strip_prefix("Test")?.trim_start();
    let rest = rest.strip_prefix('#')?;
    let (_, rest) = rest.split_once(": ")?;
    let body = rest.trim_end().strip_suffix(" sec")?;
    // The elapsed time, then the result, then the name and its dots.
    let (head, secs) = body.trim_end().rsplit_once(' ')?;
    let secs: f64 = secs.parse().ok()?;
    let head = head.trim_end();
    let (name_part, end) = if let Some((name, word)) = head.split_once("***") {
        let word = word.trim();
        let end = if word == "Timeout" {
            ConsoleEnd::Timeout(secs)
        } else if let Some(what) = word.strip_prefix("Exception:") {
            ConsoleEnd::Exception(what.trim().to_string())
        } else {
            ConsoleEnd::Other(word.to_string())
        };
        (name, end)
    } else {
        let name = head.strip_suffix("Passed")?;
        (name, ConsoleEnd::Passed)
    };
    let name = name_part.trim_end().trim_end_matches('.').trim_end();
    (!name.is_empty()).then(|| (name.to_string(), end))
}

/// CTest's word for a signal, as the gtest adapter names it.
fn signal_of(what: &str) -> Option<&'static str> {
    Some(match what {
        "SegFault" => "SIGSEGV",
        "Child aborted" => "SIGABRT",
        "Illegal" => "SIGILL",
        "Numerical" => "SIGFPE",
        "Bus error" => "SIGBUS",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CTest 3.25.1's console, as it printed it for tests/it/suite_tests.rs's
    /// project (`--timeout 2`).
    const CONSOLE: &str = "Test project /tmp/ct/build
    Start 1: passes
1/6 Test #1: passes ...........................   Passed    0.00 sec
    Start 2: hangs_silently
2/6 Test #2: hangs_silently ...................***Timeout   2.00 sec

    Start 3: crashes
3/6 Test #3: crashes ..........................***Exception: SegFault  0.01 sec
about to crash

    Start 4: fails
4/6 Test #4: fails ............................***Failed    0.00 sec
    Start 5: a_name_longer_than_the_dots_CTest_pads_with_reaching_past_them
5/6 Test #5: a_name_longer_than_the_dots_CTest_pads_with_reaching_past_them ...***Timeout   2.01 sec
  Start 6: after
6/6 Test #6: after ............................   Passed    0.00 sec

33% tests passed, 4 tests failed out of 6
";

    fn failed(name: &str) -> Case {
        Case {
            suite: name.into(),
            name: name.into(),
            param: None,
            verdict: CaseVerdict::Failed {
                message: String::new(),
                text: String::new(),
            },
            time: None,
            output: String::new(),
            shard: 0,
            reruns: Vec::new(),
        }
    }

    #[test]
    fn result_lines_are_read_however_the_console_is_cut() {
        for size in [1, 7, 64, CONSOLE.len()] {
            let mut r = Results::default();
            for chunk in CONSOLE.as_bytes().chunks(size) {
                r.feed(chunk);
            }
            assert_eq!(r.end_of("passes"), Some(&ConsoleEnd::Passed));
            assert_eq!(r.end_of("hangs_silently"), Some(&ConsoleEnd::Timeout(2.0)));
            assert_eq!(
                r.end_of("crashes"),
                Some(&ConsoleEnd::Exception("SegFault".into()))
            );
            assert_eq!(r.end_of("fails"), Some(&ConsoleEnd::Other("Failed".into())));
            assert_eq!(
                r.end_of("a_name_longer_than_the_dots_CTest_pads_with_reaching_past_them"),
                Some(&ConsoleEnd::Timeout(2.01))
            );
            assert_eq!(r.end_of("after"), Some(&ConsoleEnd::Passed));
            assert_eq!(r.end_of("about"), None);
        }
    }

    #[test]
    fn failures_become_timeouts_and_crashes_as_the_console_says() {
        let mut r = Results::default();
        r.feed(CONSOLE.as_bytes());
        let mut cases = vec![
            failed("hangs_silently"),
            failed("crashes"),
            failed("fails"),
            failed("unknown"),
        ];
        r.refine(&mut cases, Some(std::time::Duration::from_secs(2)));
        assert_eq!(cases[0].verdict, CaseVerdict::Timeout { secs: 2 });
        assert_eq!(
            cases[1].verdict,
            CaseVerdict::Error {
                kind: "SIGSEGV".into(),
                message: "CTest: Exception: SegFault".into()
            }
        );
        assert!(matches!(cases[2].verdict, CaseVerdict::Failed { .. }));
        assert!(matches!(cases[3].verdict, CaseVerdict::Failed { .. }));
    }
}
