//! The judge: a probe's verdict from its cell's outcome and the failure
//! signatures of its run, not from an exit code.
//!
//! A probe that shows the signature is **bad**; one that passes is
//! **good**; anything else — another signature, a failed build, a cell
//! skipped (exit 77), an infrastructure error, an environment that could
//! not be made, a timeout unless `--timeout-is bad` — is **skip**, kept
//! with what it showed instead.

use serde::{Deserialize, Serialize};

use super::search::State;
use crate::analysis::signature::{skeleton, Signature};
use crate::store::record::RunStatus;

/// Why a probe that failed with a signature other than the judged one
/// was skipped.
pub const OTHER_SIGNATURE: &str = "fails with another signature";

/// A probe's verdict, in the user's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeVerdict {
    /// It passed.
    Good,
    /// It showed the signature.
    Bad,
    /// Anything else: it could not be judged.
    Skip,
}

impl ProbeVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeVerdict::Good => "good",
            ProbeVerdict::Bad => "bad",
            ProbeVerdict::Skip => "skip",
        }
    }
}

/// What is searched for (`--regress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Regress {
    /// The first point that shows the signature (a regression).
    Error,
    /// The first point where the signature is gone (a fix).
    Success,
}

impl Regress {
    /// The search's state of a verdict: with `error` good points are old
    /// and bad ones new; with `success` the other way round.
    pub fn state(self, v: ProbeVerdict) -> State {
        match (self, v) {
            (_, ProbeVerdict::Skip) => State::Skip,
            (Regress::Error, ProbeVerdict::Good) | (Regress::Success, ProbeVerdict::Bad) => {
                State::Old
            }
            (Regress::Error, ProbeVerdict::Bad) | (Regress::Success, ProbeVerdict::Good) => {
                State::New
            }
        }
    }

    /// The verdict of the old end (and of the new end: the other one).
    pub fn old(self) -> ProbeVerdict {
        match self {
            Regress::Error => ProbeVerdict::Good,
            Regress::Success => ProbeVerdict::Bad,
        }
    }

    pub fn new_end(self) -> ProbeVerdict {
        match self {
            Regress::Error => ProbeVerdict::Bad,
            Regress::Success => ProbeVerdict::Good,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Regress::Error => "error",
            Regress::Success => "success",
        }
    }
}

/// What a timeout counts as (`--timeout-is`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TimeoutIs {
    Bad,
    Skip,
}

/// A signature as bisect.json keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shown {
    pub id: String,
    /// The normalised text.
    pub text: String,
    /// One failure's first line, as written.
    pub message: String,
}

impl Shown {
    pub fn of(s: &Signature) -> Shown {
        Shown {
            id: s.id.clone(),
            text: s.text.clone(),
            message: s.message.clone(),
        }
    }

    /// A pseudo-signature for what has no failure text (a timeout).
    pub fn plain(text: &str) -> Shown {
        Shown {
            id: crate::analysis::signature::id(text),
            text: text.to_string(),
            message: text.to_string(),
        }
    }
}

/// The signature a bisection judges by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "by", content = "value")]
pub enum Target {
    /// `--signature TEXT`: an id, or a substring of a signature's text or
    /// first line.
    Given(String),
    /// The signatures the bad end showed (compared with every number as
    /// `<n>`, as `--baseline` compares them).
    Learned(Vec<Shown>),
}

impl Target {
    pub fn matches(&self, s: &Shown) -> bool {
        match self {
            Target::Given(t) => {
                let t = t.trim();
                !t.is_empty() && (s.id == t || s.text.contains(t) || s.message.contains(t))
            }
            Target::Learned(known) => {
                let key = skeleton(&s.text);
                known
                    .iter()
                    .any(|k| k.id == s.id || skeleton(&k.text) == key)
            }
        }
    }

    /// In words, for the output.
    pub fn describe(&self) -> String {
        match self {
            Target::Given(t) => format!("`{t}`"),
            Target::Learned(v) => v
                .iter()
                .map(|s| format!("{} \"{}\"", s.id, s.text))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// What a probe's run showed about its one cell.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// The cell's status; `None` when the cell did not run.
    pub status: Option<RunStatus>,
    /// The cell's reason, or why it did not run.
    pub reason: Option<String>,
    /// The signatures of its failures.
    pub signatures: Vec<Shown>,
    /// Whether the cell's build stage failed.
    pub build_failed: bool,
}

/// A probe's verdict and the signature behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    pub verdict: ProbeVerdict,
    /// The judged signature when bad; what it showed instead when skipped.
    pub signature: Option<Shown>,
    /// Why, in words: "shows the signature", "another failure", …
    pub why: String,
}

/// Judges one probe against `target`.
pub fn judge(obs: &Observation, target: &Target, timeout_is: TimeoutIs) -> Judgement {
    let skip = |why: String, signature: Option<Shown>| Judgement {
        verdict: ProbeVerdict::Skip,
        signature,
        why,
    };
    let first = obs.signatures.first().cloned();
    let Some(status) = obs.status else {
        return skip(
            format!(
                "not run: {}",
                obs.reason.as_deref().unwrap_or("no reason recorded")
            ),
            first,
        );
    };
    if obs.build_failed {
        return skip(
            format!(
                "its build failed{}",
                obs.reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
            first,
        );
    }
    match status {
        RunStatus::Passed => Judgement {
            verdict: ProbeVerdict::Good,
            signature: None,
            why: "passed".into(),
        },
        RunStatus::Error => skip(
            format!(
                "infrastructure error: {}",
                obs.reason.as_deref().unwrap_or("no reason recorded")
            ),
            first,
        ),
        RunStatus::Skipped => skip("the cell skipped itself (exit 77)".into(), first),
        RunStatus::Timeout => {
            let shown = Shown::plain("timeout");
            match timeout_is {
                TimeoutIs::Bad => Judgement {
                    verdict: ProbeVerdict::Bad,
                    signature: Some(shown),
                    why: "timed out (--timeout-is bad)".into(),
                },
                TimeoutIs::Skip => skip("timed out".into(), Some(shown)),
            }
        }
        RunStatus::Failed | RunStatus::Oom => {
            if let Some(s) = obs.signatures.iter().find(|s| target.matches(s)) {
                Judgement {
                    verdict: ProbeVerdict::Bad,
                    signature: Some(s.clone()),
                    why: "shows the signature".into(),
                }
            } else {
                skip(
                    match &first {
                        Some(_) => OTHER_SIGNATURE.into(),
                        None => "fails without a signature".into(),
                    },
                    first,
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(text: &str) -> Shown {
        Shown::plain(text)
    }

    fn failed(texts: &[&str]) -> Observation {
        Observation {
            status: Some(RunStatus::Failed),
            reason: Some("step test failed".into()),
            signatures: texts.iter().map(|t| sig(t)).collect(),
            build_failed: false,
        }
    }

    #[test]
    fn verdicts_follow_the_signature_not_the_exit_code() {
        let target = Target::Given("invalid HSA metadata".into());
        let t = TimeoutIs::Skip;
        let cases: Vec<(Observation, ProbeVerdict)> = vec![
            (
                Observation {
                    status: Some(RunStatus::Passed),
                    ..Default::default()
                },
                ProbeVerdict::Good,
            ),
            (
                failed(&["k.s:<n>:<n>: error: invalid HSA metadata"]),
                ProbeVerdict::Bad,
            ),
            (
                failed(&["error: fixture database is locked"]),
                ProbeVerdict::Skip,
            ),
            (failed(&[]), ProbeVerdict::Skip),
            (
                Observation {
                    build_failed: true,
                    ..failed(&["k.s:<n>:<n>: error: invalid HSA metadata"])
                },
                ProbeVerdict::Skip,
            ),
            (
                Observation {
                    status: Some(RunStatus::Error),
                    reason: Some("engine went away".into()),
                    ..Default::default()
                },
                ProbeVerdict::Skip,
            ),
            (
                Observation {
                    status: Some(RunStatus::Skipped),
                    ..Default::default()
                },
                ProbeVerdict::Skip,
            ),
            (
                Observation {
                    status: None,
                    reason: Some("image build failed".into()),
                    ..Default::default()
                },
                ProbeVerdict::Skip,
            ),
            (
                Observation {
                    status: Some(RunStatus::Timeout),
                    ..Default::default()
                },
                ProbeVerdict::Skip,
            ),
        ];
        for (i, (obs, want)) in cases.iter().enumerate() {
            assert_eq!(judge(obs, &target, t).verdict, *want, "case {i}: {obs:?}");
        }
        let timeout = Observation {
            status: Some(RunStatus::Timeout),
            ..Default::default()
        };
        assert_eq!(
            judge(&timeout, &target, TimeoutIs::Bad).verdict,
            ProbeVerdict::Bad
        );
    }

    #[test]
    fn a_skip_keeps_what_it_showed_instead() {
        let target = Target::Given("FAILED".into());
        let j = judge(
            &failed(&["error: fixture database is locked"]),
            &target,
            TimeoutIs::Skip,
        );
        assert_eq!(j.verdict, ProbeVerdict::Skip);
        assert_eq!(
            j.signature.unwrap().text,
            "error: fixture database is locked"
        );
    }

    #[test]
    fn learned_signatures_match_with_other_numbers_given_ones_by_id_or_text() {
        let bad_end = sig("test.sh:31: sum: FAILED: expected 10, got 11");
        let learned = Target::Learned(vec![bad_end.clone()]);
        assert!(learned.matches(&sig("test.sh:33: sum: FAILED: expected 10, got 12")));
        assert!(!learned.matches(&sig("test.sh:33: product: FAILED")));
        assert!(Target::Given(bad_end.id.clone()).matches(&bad_end));
        assert!(Target::Given("sum: FAILED".into()).matches(&bad_end));
        assert!(!Target::Given("  ".into()).matches(&bad_end));
    }

    #[test]
    fn regress_success_turns_the_states_round() {
        assert_eq!(Regress::Error.state(ProbeVerdict::Good), State::Old);
        assert_eq!(Regress::Error.state(ProbeVerdict::Bad), State::New);
        assert_eq!(Regress::Success.state(ProbeVerdict::Bad), State::Old);
        assert_eq!(Regress::Success.state(ProbeVerdict::Good), State::New);
        assert_eq!(Regress::Success.state(ProbeVerdict::Skip), State::Skip);
        assert_eq!(Regress::Success.old(), ProbeVerdict::Bad);
    }
}
