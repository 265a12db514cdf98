//! autopkgtest's exit status as the verdict on the package, in debci's
//! words (debci's `Debci::Job.status`): what britney and ci.debian.net
//! would say of the same run.
//!
//! | exit | verdict | autopkgtest(1) says |
//! | --- | --- | --- |
//! | 0, 2 | pass | all applicable tests passed; at least one was skipped |
//! | 4, 6 | fail | at least one test failed |
//! | 8 | neutral | no tests in this package, or all non-superficial tests were skipped |
//! | 12, 14 | badpkg | erroneous package |
//! | 16, other | tmpfail | testbed failure; unexpected failure |
//!
//! rocmatrix adds what it knows beside the status: a stanza it left out
//! (autopkgtest would have refused the whole package over it: badpkg), a
//! launched test whose googletest binary failed in the gtest adapter
//! (fail), how many of the tests were only superficial.

use super::summary::{Line, Word};
use crate::store::record::{PackageOutcome, PackageVerdict};

/// What autopkgtest's exit status means, as autopkgtest(1) says it.
fn meaning(exit: i64) -> (PackageVerdict, String) {
    use PackageVerdict as V;
    let (v, words) = match exit {
        0 => (V::Pass, "all applicable tests passed"),
        2 => (
            V::Pass,
            "at least one test was skipped (or at least one flaky test failed)",
        ),
        4 => (V::Fail, "at least one test failed"),
        6 => (
            V::Fail,
            "at least one test failed and at least one test was skipped",
        ),
        8 => (
            V::Neutral,
            "no tests in this package or all non-superficial tests were skipped",
        ),
        12 => (V::Badpkg, "erroneous package"),
        14 => (V::Badpkg, "erroneous package and at least one test skipped"),
        16 => (V::Tmpfail, "testbed failure"),
        _ => (V::Tmpfail, "unexpected autopkgtest exit status"),
    };
    (v, words.to_string())
}

/// What rocmatrix knows of one step's run beside autopkgtest's status.
pub struct Seen<'a> {
    /// autopkgtest's exit status; `None` when it did not run (every
    /// stanza was left out).
    pub exit: Option<i64>,
    /// Its summary's lines.
    pub lines: &'a [Line],
    /// Why each stanza left out of the run was (`debian/tests/control:5:
    /// …`), in control-file order.
    pub left_out: &'a [String],
    /// Launched tests the gtest adapter ran whose googletest cases failed
    /// (not counting a `flaky` test's failure, which autopkgtest ignores).
    pub adapter_failed: usize,
}

/// The package's verdict from what was seen.
pub fn judge(seen: &Seen) -> PackageOutcome {
    let (mut verdict, mut words) = match seen.exit {
        Some(code) => meaning(code),
        None => (
            PackageVerdict::Badpkg,
            "autopkgtest did not run: every stanza of debian/tests/control was erroneous".into(),
        ),
    };
    if let Some(first) = seen.left_out.first() {
        verdict = verdict.max(PackageVerdict::Badpkg);
        let more = match seen.left_out.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        words.push_str(&format!(
            "; erroneous package: {first}{more} (autopkgtest refuses the whole package over it; rocmatrix left it out and ran the rest)"
        ));
    }
    if seen.adapter_failed > 0 {
        verdict = verdict.max(PackageVerdict::Fail);
        words.push_str(&format!(
            "; {} launched test(s) failed in rocmatrix's gtest adapter",
            seen.adapter_failed
        ));
    }
    let superficial = seen
        .lines
        .iter()
        .filter(|l| l.verdict == Word::Pass && l.words == "(superficial)")
        .count();
    if superficial > 0 {
        words.push_str(&format!(
            "; {superficial} of {} tests superficial",
            seen.lines.len()
        ));
    }
    PackageOutcome {
        verdict,
        exit: seen.exit,
        meaning: words,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, verdict: Word, words: &str) -> Line {
        Line {
            name: name.into(),
            verdict,
            words: words.into(),
            detail: String::new(),
        }
    }

    #[test]
    fn exit_statuses_are_debcis_words() {
        for (exit, word) in [
            (0, "pass"),
            (2, "pass"),
            (4, "fail"),
            (6, "fail"),
            (8, "neutral"),
            (12, "badpkg"),
            (14, "badpkg"),
            (16, "tmpfail"),
            (20, "tmpfail"),
        ] {
            let seen = Seen {
                exit: Some(exit),
                lines: &[],
                left_out: &[],
                adapter_failed: 0,
            };
            assert_eq!(judge(&seen).verdict.as_str(), word, "exit {exit}");
        }
    }

    #[test]
    fn superficial_tests_are_counted_and_left_out_stanzas_make_it_badpkg() {
        let lines = [
            line("a", Word::Pass, "(superficial)"),
            line("b", Word::Pass, ""),
        ];
        let left = ["debian/tests/control:5: debian/tests/x does not exist".to_string()];
        let got = judge(&Seen {
            exit: Some(0),
            lines: &lines,
            left_out: &left,
            adapter_failed: 0,
        });
        assert_eq!(got.verdict, PackageVerdict::Badpkg);
        assert_eq!(got.exit, Some(0));
        assert!(
            got.meaning.contains("1 of 2 tests superficial"),
            "{}",
            got.meaning
        );
        assert!(got.meaning.contains("control:5"), "{}", got.meaning);
    }
}
