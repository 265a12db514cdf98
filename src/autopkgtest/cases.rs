//! autopkgtest's verdicts as JUnit test cases: one per test (classname the
//! source package, name the test), and the googletest cases a test left in
//! its artifacts under `PACKAGE/TEST/SUITE`.
//!
//! - `PASS` passes (`PASS (superficial)` too; the words are in its output);
//! - `FAIL …` fails with autopkgtest's words as the message and its detail
//!   lines (`badpkg: …`) and the test's stderr as the text;
//! - `SKIP …` is skipped with autopkgtest's words, followed by the first
//!   line the test printed on stdout, else on stderr (rocm-test-launcher's
//!   reason) when it ran;
//! - `FLAKY …` is flaky: a pass with the failure as a `<flakyFailure>`;
//! - a test autopkgtest never judged is an error (`not-run`), and a stanza
//!   it would have refused the whole run over fails with `file:line`.

use std::path::Path;

use super::control::Stanza;
use super::summary::{Line, Word};
use crate::test_suite::{Case, CaseVerdict};

/// The most of a test's stdout or stderr kept in its case.
const OUTPUT_BYTES: usize = 16 * 1024;

/// The cases of one step, in the order autopkgtest reported them.
pub struct Judged {
    package: String,
    cases: Vec<Case>,
}

impl Judged {
    pub fn new(package: &str) -> Judged {
        Judged {
            package: package.to_string(),
            cases: Vec::new(),
        }
    }

    pub fn into_cases(self) -> Vec<Case> {
        self.cases
    }

    /// One case per summary line; the test's output read from `out`
    /// (autopkgtest's output directory, copied to the host).
    pub fn add_summary(&mut self, lines: &[Line], out: &Path) {
        for l in lines {
            let stdout = read_tail(&out.join(format!("{}-stdout", l.name)));
            let stderr = read_tail(&out.join(format!("{}-stderr", l.name)));
            let verdict = verdict(l, &stdout, &stderr);
            let mut output = format!("autopkgtest: {}\n", l.text());
            if !l.detail.is_empty() {
                output.push_str(&l.detail);
                output.push('\n');
            }
            for (what, text) in [("stdout", &stdout), ("stderr", &stderr)] {
                if !text.is_empty() {
                    output.push_str(&format!("--- {what}\n{text}\n"));
                }
            }
            let (verdict, reruns) = match verdict {
                // FLAKY: autopkgtest ignores the failure; JUnit's flaky.
                v @ CaseVerdict::Failed { .. } if l.verdict == Word::Flaky => {
                    (CaseVerdict::Passed, vec![v])
                }
                v => (v, Vec::new()),
            };
            self.cases.push(Case {
                suite: self.package.clone(),
                name: l.name.clone(),
                param: None,
                verdict,
                time: None,
                output,
                shard: 0,
                reruns,
            });
        }
    }

    /// The tests of kept stanzas that the summary does not name.
    pub fn not_run(&mut self, names: &[Vec<String>], keep: &[bool], why: &str) {
        for (n, _) in names.iter().zip(keep).filter(|(_, k)| **k) {
            for name in n {
                if !self.cases.iter().any(|c| &c.name == name) {
                    let case = super::not_judged(&self.package, name, why.to_string());
                    self.cases.push(case);
                }
            }
        }
    }

    /// The tests of stanzas left out of the run: failed, with the reason.
    pub fn bad_stanzas(
        &mut self,
        stanzas: &[Stanza],
        names: &[Vec<String>],
        missing: &[Option<String>],
    ) {
        for ((s, n), m) in stanzas.iter().zip(names).zip(missing) {
            let Some(message) = why_left_out(s, m) else {
                continue;
            };
            for name in n {
                self.cases.push(Case {
                    suite: self.package.clone(),
                    name: name.clone(),
                    param: None,
                    verdict: CaseVerdict::Failed {
                        message: format!("erroneous package: {message}"),
                        text: "autopkgtest stops the whole run at such a stanza; rocmatrix left it out and ran the others".into(),
                    },
                    time: None,
                    output: String::new(),
                    shard: 0,
                    reruns: Vec::new(),
                });
            }
        }
    }

    /// The gtest adapter's run of launched test `name` (`gtest: adapter`):
    /// its cases join the report under `PACKAGE/NAME/`, and the test's own
    /// case, passed by autopkgtest, fails when the run failed (flaky when
    /// its stanza says `flaky`, as autopkgtest would have it).
    pub fn adapted(&mut self, name: &str, flaky: bool, a: super::launcher::Adapted) {
        if let Some(c) = self.cases.iter_mut().find(|c| c.name == name) {
            c.output.push_str(&a.note);
            c.output.push('\n');
            if let Some((message, text)) = a.failure {
                let failed = CaseVerdict::Failed { message, text };
                if flaky {
                    c.reruns.push(failed);
                } else {
                    c.verdict = failed;
                }
            }
        }
        for mut c in a.cases {
            c.suite = format!("{}/{name}/{}", self.package, c.suite);
            self.cases.push(c);
        }
    }

    /// Whether test `name` passed by autopkgtest's verdict.
    pub fn passed(&self, name: &str) -> bool {
        self.cases
            .iter()
            .any(|c| c.name == name && c.verdict == CaseVerdict::Passed && c.reruns.is_empty())
    }

    /// googletest XML reports found under `out/artifacts/`: each joins the
    /// report under the test that wrote it, told by the test's output
    /// naming the file, else the one test that ran and was not skipped.
    pub fn artifacts(&mut self, out: &Path) {
        let mut found = Vec::new();
        collect_xml(&out.join("artifacts"), 0, &mut found);
        found.sort();
        let ran: Vec<String> = self
            .cases
            .iter()
            .filter(|c| {
                !matches!(
                    c.verdict,
                    CaseVerdict::Skipped { .. } | CaseVerdict::Error { .. }
                )
            })
            .map(|c| c.name.clone())
            .collect();
        for path in found {
            let Ok(text) = crate::safe_read::read_bounded_string(
                &path,
                256 * 1024 * 1024,
                "a googletest report",
                "",
            ) else {
                continue;
            };
            let Some(cases) = crate::test_suite::gtest_output::parse_xml(&text) else {
                continue;
            };
            let file = path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            let owner = self
                .cases
                .iter()
                .find(|c| c.output.contains(&file))
                .map(|c| c.name.clone())
                .or_else(|| (ran.len() == 1).then(|| ran[0].clone()))
                .unwrap_or_else(|| "artifacts".into());
            for mut c in cases {
                c.suite = format!("{}/{owner}/{}", self.package, c.suite);
                self.cases.push(c);
            }
        }
    }
}

/// A summary line's verdict, before FLAKY is made flaky.
fn verdict(l: &Line, stdout: &str, stderr: &str) -> CaseVerdict {
    match l.verdict {
        Word::Pass => CaseVerdict::Passed,
        Word::Skip => {
            // rocm-test-launcher says why on stdout; a test's stderr may
            // hold a compiler's warnings first.
            let said = first_line(stdout).or_else(|| first_line(stderr));
            let message = match said {
                Some(s) if l.words.starts_with("exit status 77") => format!("{}: {s}", l.words),
                _ => l.words.clone(),
            };
            CaseVerdict::Skipped { message }
        }
        Word::Fail | Word::Flaky => {
            let mut text = l.detail.clone();
            if !stderr.is_empty() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(stderr);
            }
            CaseVerdict::Failed {
                message: l.words.clone(),
                text,
            }
        }
    }
}

fn first_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|l| !l.is_empty())
}

/// The last [`OUTPUT_BYTES`] of a host file, if it is there.
fn read_tail(path: &Path) -> String {
    let Ok(bytes) = crate::safe_read::read_bounded(path, 64 * 1024 * 1024, "a test's output", "")
    else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let start = crate::test_suite::tail_start(&text, OUTPUT_BYTES);
    text[start..].trim_end().to_string()
}

/// `.xml` files under `dir`, a few levels deep.
fn collect_xml(dir: &Path, depth: usize, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(t) = e.file_type() else { continue };
        let p = e.path();
        if t.is_dir() && depth < 4 {
            collect_xml(&p, depth + 1, out);
        } else if t.is_file() && p.extension().is_some_and(|x| x == "xml") {
            out.push(p);
        }
    }
}

/// Why a stanza was left out of the run (`debian/tests/control:5:
/// debian/tests/x does not exist`), if it was (`missing`: the first test
/// file it names that the tree lacks).
fn why_left_out(s: &Stanza, missing: &Option<String>) -> Option<String> {
    match (&s.problem, missing) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(m)) => Some(format!("debian/tests/control:{}: {m}", s.line)),
        (None, None) => None,
    }
}

/// Why each stanza left out of the run was, in control-file order.
pub fn left_out(stanzas: &[Stanza], missing: &[Option<String>]) -> Vec<String> {
    stanzas
        .iter()
        .zip(missing)
        .filter_map(|(s, m)| why_left_out(s, m))
        .collect()
}
