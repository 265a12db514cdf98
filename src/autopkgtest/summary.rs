//! autopkgtest's `--summary-file`, read into one verdict per test.
//!
//! Each line is `NAME<padding>VERDICT[ WORDS]` with VERDICT one of `PASS`,
//! `FAIL`, `SKIP`, `FLAKY` (autopkgtest 5.28 to 6.0): `passes  PASS`,
//! `fails  FAIL non-zero exit status 1`, `skips  SKIP exit status 77 and
//! marked as skippable`, `flaky  FLAKY non-zero exit status 1`,
//! `superficial  PASS (superficial)`. Lines that are not (`blame: /tree`,
//! `badpkg: Test dependencies are unsatisfiable…`) belong to the test
//! before them. autopkgtest 6.0 writes a test it skipped before running
//! anything (a restriction the testbed cannot meet, an unknown field) twice;
//! the first line is kept.

/// What autopkgtest said of one test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub name: String,
    pub verdict: Word,
    /// The words after the verdict (`non-zero exit status 1`), maybe empty.
    pub words: String,
    /// Lines that followed it (`badpkg: …`), joined by `\n`.
    pub detail: String,
}

impl Line {
    /// The line as autopkgtest wrote it, padding aside:
    /// `fails FAIL non-zero exit status 1`.
    pub fn text(&self) -> String {
        let mut t = format!("{} {}", self.name, self.verdict.as_str());
        if !self.words.is_empty() {
            t.push(' ');
            t.push_str(&self.words);
        }
        t
    }
}

/// autopkgtest's verdict words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    Pass,
    Fail,
    Skip,
    Flaky,
}

impl Word {
    pub fn as_str(self) -> &'static str {
        match self {
            Word::Pass => "PASS",
            Word::Fail => "FAIL",
            Word::Skip => "SKIP",
            Word::Flaky => "FLAKY",
        }
    }

    fn parse(s: &str) -> Option<Word> {
        Some(match s {
            "PASS" => Word::Pass,
            "FAIL" => Word::Fail,
            "SKIP" => Word::Skip,
            "FLAKY" => Word::Flaky,
            _ => return None,
        })
    }
}

/// The summary's verdicts in order, one per test name.
pub fn parse(text: &str) -> Vec<Line> {
    let mut lines: Vec<Line> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // Whether the last verdict line was a repeat (its detail is dropped too).
    let mut repeat = false;
    for raw in text.lines() {
        let mut parts = raw.split_whitespace();
        let (Some(name), Some(second)) = (parts.next(), parts.next()) else {
            append_detail(&mut lines, raw, repeat);
            continue;
        };
        let Some(verdict) = Word::parse(second).filter(|_| !name.ends_with(':')) else {
            append_detail(&mut lines, raw, repeat);
            continue;
        };
        repeat = !seen.insert(name.to_string());
        if repeat {
            continue;
        }
        let words = raw
            .trim_start()
            .strip_prefix(name)
            .map(|r| r.trim_start())
            .and_then(|r| r.strip_prefix(second))
            .unwrap_or("")
            .trim()
            .to_string();
        lines.push(Line {
            name: name.to_string(),
            verdict,
            words,
            detail: String::new(),
        });
    }
    lines
}

fn append_detail(lines: &mut [Line], raw: &str, repeat: bool) {
    let raw = raw.trim();
    if raw.is_empty() || repeat {
        return;
    }
    if let Some(last) = lines.last_mut() {
        if !last.detail.is_empty() {
            last.detail.push('\n');
        }
        last.detail.push_str(raw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// autopkgtest 6.0's summary of tests/it/data/autopkgtest/restrictions
    /// and of the bad tree (in part), as it wrote them.
    const SUMMARY: &str = "\
breaks               SKIP Test restriction \"breaks-testbed\" requires testbed capability \"revert-full-system\"
in-machine           SKIP Test restriction \"isolation-machine\" requires testbed capability \"isolation-machine\"
breaks               SKIP Test restriction \"breaks-testbed\" requires testbed capability \"revert-full-system\"
in-machine           SKIP Test restriction \"isolation-machine\" requires testbed capability \"isolation-machine\"
passes               PASS
fails                FAIL non-zero exit status 1
stderr-fails         FAIL stderr: a warning on stderr
skips                SKIP exit status 77 and marked as skippable
flaky                FLAKY non-zero exit status 1
superficial          PASS (superficial)
uninstallable        FAIL badpkg
blame: /bad2
badpkg: Test dependencies are unsatisfiable. A common reason is that your testbed is out of date.
never-ends           FAIL timed out
";

    #[test]
    fn reads_every_verdict_once() {
        let l = parse(SUMMARY);
        let names: Vec<&str> = l.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "breaks",
                "in-machine",
                "passes",
                "fails",
                "stderr-fails",
                "skips",
                "flaky",
                "superficial",
                "uninstallable",
                "never-ends"
            ]
        );
        assert_eq!(l[2].verdict, Word::Pass);
        assert_eq!(l[2].words, "");
        assert_eq!(l[3].text(), "fails FAIL non-zero exit status 1");
        assert_eq!(l[4].words, "stderr: a warning on stderr");
        assert_eq!(l[6].verdict, Word::Flaky);
        assert_eq!(l[7].words, "(superficial)");
        assert_eq!(l[8].words, "badpkg");
        assert!(l[8]
            .detail
            .starts_with("blame: /bad2\nbadpkg: Test dependencies are unsatisfiable"));
        assert_eq!(l[0].detail, "");
        assert_eq!(l[9].words, "timed out");
    }
}
