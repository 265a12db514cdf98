//! The writer against quick-junit on random reports: every string drawn
//! from plain text, markup characters, line breaks, tabs, ANSI escapes,
//! control and non-ASCII characters.

use super::oracle::{quick_junit_case, quick_junit_text, test_case};
use super::*;

/// A small deterministic generator (an LCG), so a failure repeats.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn string(&mut self) -> String {
        const PIECES: [&str; 22] = [
            "a",
            "Suite",
            "/",
            " ",
            "0",
            "<",
            ">",
            "&",
            "\"",
            "'",
            "\n",
            "\t",
            "\r",
            "\u{1b}[31m",
            "\u{1b}[0m",
            "\u{7}",
            "\u{0}",
            "ä",
            "\u{85}",
            "\u{7f}",
            "🙂",
            "x.cc:3",
        ];
        let plain = self.below(3) == 0;
        let n = self.below(12);
        (0..n)
            .map(|_| match plain {
                true => PIECES[self.below(3) as usize],
                false => PIECES[self.below(PIECES.len() as u64) as usize],
            })
            .collect()
    }

    fn maybe(&mut self) -> Option<String> {
        (self.below(3) != 0).then(|| self.string())
    }

    fn time(&mut self) -> Option<f64> {
        // Whole milliseconds and a bit: never a tie between two roundings.
        (self.below(4) != 0).then(|| self.below(100_000) as f64 / 1000.0 + 0.000_123)
    }
}

/// An earlier run: error, message, type, text.
type DrawnRun = (bool, Option<String>, Option<String>, Option<String>);
/// A suite: name, properties, time, cases.
type DrawnSuite = (String, Vec<(String, String)>, Option<f64>, Vec<Drawn>);

/// Owned strings a [`CaseOut`] borrows.
struct Drawn {
    name: String,
    classname: Option<String>,
    time: Option<f64>,
    properties: Vec<(String, String)>,
    system_out: Option<String>,
    status: u64,
    runs: Vec<DrawnRun>,
}

fn drawn(d: &mut Draw) -> Drawn {
    let runs = (0..1 + d.below(3))
        .map(|_| (d.below(2) == 0, d.maybe(), d.maybe(), d.maybe()))
        .collect();
    Drawn {
        name: d.string(),
        classname: d.maybe(),
        time: d.time(),
        properties: (0..d.below(3)).map(|_| (d.string(), d.string())).collect(),
        system_out: (d.below(4) == 0).then(|| d.string()),
        status: d.below(3),
        runs,
    }
}

fn with_case<T>(x: &Drawn, f: impl FnOnce(&CaseOut) -> T) -> T {
    let properties: Vec<(&str, &str)> = x
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let runs: Vec<Run> = x
        .runs
        .iter()
        .map(|(error, m, k, t)| Run {
            error: *error,
            message: m.as_deref(),
            kind: k.as_deref(),
            text: t.as_deref(),
        })
        .collect();
    let status = match x.status {
        0 => Status::Success { flaky: &runs[1..] },
        1 => Status::NonSuccess {
            run: runs[0],
            reruns: &runs[1..],
        },
        _ => Status::Skipped {
            message: runs[0].message,
            kind: runs[0].kind,
        },
    };
    f(&CaseOut {
        name: &x.name,
        classname: x.classname.as_deref(),
        time: x.time,
        properties: &properties,
        status,
        system_out: x.system_out.as_deref(),
    })
}

#[test]
fn every_test_case_is_written_as_quick_junit_writes_it() {
    let mut d = Draw(0x5eed);
    for i in 0..3000 {
        let x = drawn(&mut d);
        let (got, want) = with_case(&x, |c| {
            let mut got = String::new();
            push_case(&mut got, c);
            (got, quick_junit_case(test_case(c)).unwrap())
        });
        assert_eq!(got, want, "case {i}");
    }
}

#[test]
fn whole_reports_are_written_as_quick_junit_writes_them() {
    let mut d = Draw(42);
    for i in 0..200 {
        let name = d.string();
        let mut report = quick_junit::Report::new(name.as_str());
        let mut suites = Vec::new();
        let drawn_suites: Vec<DrawnSuite> = (0..d.below(4))
            .map(|_| {
                let cases = (0..1 + d.below(4)).map(|_| drawn(&mut d)).collect();
                (
                    d.string(),
                    (0..d.below(3)).map(|_| (d.string(), d.string())).collect(),
                    d.time(),
                    cases,
                )
            })
            .collect();
        let (mut tests, mut skipped, mut failures, mut errors) = (0, 0, 0, 0);
        for (suite_name, properties, time, cases) in &drawn_suites {
            let mut suite = quick_junit::TestSuite::new(suite_name.as_str());
            let mut text = String::new();
            for x in cases {
                with_case(x, |c| {
                    push_case(&mut text, c);
                    suite.add_test_case(test_case(c));
                });
            }
            for (k, v) in properties {
                suite.add_property(quick_junit::Property::new(k.as_str(), v.as_str()));
            }
            suite.time = time.map(std::time::Duration::from_secs_f64);
            let props: Vec<(&str, &str)> = properties
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            tests += suite.tests as u64;
            skipped += suite.skipped as u64;
            failures += suite.failures as u64;
            errors += suite.errors as u64;
            let head = SuiteHead {
                name: suite_name,
                tests: suite.tests as u64,
                skipped: suite.skipped as u64,
                errors: suite.errors as u64,
                failures: suite.failures as u64,
                time: *time,
                properties: &props,
            };
            let mut one = String::new();
            push_suite_start(&mut one, &head);
            one.push_str(&text);
            one.push_str(SUITE_END);
            suites.push(one);
            report.add_test_suite(suite);
        }
        let mut got = String::new();
        push_report_start(
            &mut got,
            &ReportHead {
                name: &name,
                tests,
                skipped: Some(skipped),
                failures,
                errors,
                time: None,
            },
        );
        for s in &suites {
            got.push_str(s);
        }
        got.push_str(REPORT_END);
        assert_eq!(got, quick_junit_text(&report).unwrap(), "report {i}");
    }
}

#[test]
fn strings_with_nothing_to_clean_are_not_copied() {
    assert!(matches!(clean("Suite/Case.0 <&>\n"), Cow::Borrowed(_)));
    assert_eq!(clean("a\u{1b}[31mred\u{1b}[0m\u{7}"), "ared");
}
