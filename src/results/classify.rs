//! Classification: failing tests whose text says why they could not pass
//! here become what they are — a test that needs a GPU, on a cell that was
//! given none, is skipped with that reason rather than failed. The built-in
//! rule knows HIP's no-device errors; a matrix adds its own (`classify:`).
//! A classified test keeps its original status and the rule that matched,
//! and every report counts and lists it as classified.

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::model::TestStatus;
use crate::matrix_file::{ClassifyAs, ClassifyRule, GpuCondition};

/// The reason the built-in rule gives.
pub const NO_GPU_REASON: &str = "needs a GPU (no device on this host)";
/// The built-in rule's name in reports.
pub const NO_GPU_RULE: &str = "built-in: HIP no-device errors";

/// What HIP and the ROCm libraries print when there is no GPU: the error's
/// name, its code 100 as gtest prints a failed `EXPECT_EQ(hipX(…), …)`
/// ("Which is: 100"), MIOpen's "No device", rocminfo's and hipInfo's words.
const NO_GPU_PATTERN: &str = r"(?x)
    hipErrorNoDevice
  | \bNo\ device\b
  | no\ ROCm-capable\ device
  | \bhip[A-Z]\w*\(.*\)\s*\n\s*Which\ is:\ 100\b
  | \bhip\w*\ (?:failed|returned|error)\W+(?:code\ )?100\b
";

/// How a test was classified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classified {
    /// The rule that matched: its pattern, or [`NO_GPU_RULE`].
    pub rule: String,
    pub reason: String,
    /// The status the test had before.
    pub was: TestStatus,
}

/// The rules of a run, compiled once.
pub struct Classifier {
    builtin: Regex,
    rules: Vec<(ClassifyRule, Regex)>,
}

impl Classifier {
    /// Compiles `rules` (validated when the matrix file was read; one that no
    /// longer compiles is left out).
    pub fn new(rules: &[ClassifyRule]) -> Classifier {
        Classifier {
            builtin: Regex::new(NO_GPU_PATTERN).unwrap_or_else(|_| Regex::new("$^").unwrap()),
            rules: rules
                .iter()
                .filter_map(|r| Regex::new(&r.pattern).ok().map(|re| (r.clone(), re)))
                .collect(),
        }
    }

    /// The first rule that reclassifies a failing test (status `was`) in a
    /// cell that had (`no_gpu` = false) or lacked a GPU: the matrix's rules
    /// in order over `text` (message, failure text and output), then the
    /// built-in one over `failure` (message and failure text only: a test's
    /// output can carry what other threads printed while it ran — MIOpen's
    /// background "No device" lines landed in an unrelated test's output).
    pub fn classify(
        &self,
        was: TestStatus,
        failure: &str,
        text: &str,
        no_gpu: bool,
    ) -> Option<(TestStatus, Classified)> {
        if !was.is_failure() {
            return None;
        }
        for (rule, re) in &self.rules {
            let applies = match rule.gpu {
                GpuCondition::Any => true,
                GpuCondition::None => no_gpu,
            };
            if applies && re.is_match(text) {
                let status = match rule.outcome {
                    ClassifyAs::Skipped => TestStatus::Skipped,
                    ClassifyAs::Xfail => TestStatus::Xfail,
                    ClassifyAs::Error => TestStatus::Error,
                };
                if status == was {
                    return None;
                }
                let c = Classified {
                    rule: rule.pattern.clone(),
                    reason: rule.reason.clone(),
                    was,
                };
                return Some((status, c));
            }
        }
        if no_gpu && self.builtin.is_match(failure) {
            let c = Classified {
                rule: NO_GPU_RULE.into(),
                reason: NO_GPU_REASON.into(),
                was,
            };
            return Some((TestStatus::Skipped, c));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_rule_needs_a_cell_without_gpu() {
        let c = Classifier::new(&[]);
        let miopen = "src/hip/handlehip.cpp:150: No device";
        let (s, why) = c
            .classify(TestStatus::Failed, miopen, miopen, true)
            .unwrap();
        assert_eq!(s, TestStatus::Skipped);
        assert_eq!(why.reason, NO_GPU_REASON);
        assert_eq!(why.was, TestStatus::Failed);
        assert!(c
            .classify(TestStatus::Failed, miopen, miopen, false)
            .is_none());
        let gtest = "Expected equality of these values:\n  hipMalloc(&ptr, 64)\n    Which is: 100\n  hipSuccess\n    Which is: 0";
        assert!(c.classify(TestStatus::Failed, gtest, gtest, true).is_some());
        // Another code, or the words in another sense, is a real failure.
        let other = gtest.replace("Which is: 100", "Which is: 2");
        assert!(c
            .classify(TestStatus::Failed, &other, &other, true)
            .is_none());
        assert!(c
            .classify(TestStatus::Passed, miopen, miopen, true)
            .is_none());
        // Another thread's "No device" in the output does not classify a
        // failure that says something else.
        let inliner = "include_inliner.cpp:58\n  Child(valid_src)\n    Which is: 127";
        let output = format!("{inliner}\nMIOpen Error: src/hip/handlehip.cpp:150: No device");
        assert!(c
            .classify(TestStatus::Failed, inliner, &output, true)
            .is_none());
    }

    #[test]
    fn matrix_rules_come_first_and_respect_when() {
        let rule = ClassifyRule {
            pattern: "Handle wasn't obtained".into(),
            outcome: ClassifyAs::Xfail,
            reason: "miopenCreate needs a GPU".into(),
            gpu: GpuCondition::None,
        };
        let c = Classifier::new(&[rule]);
        let text = "miopenCreate() failed: Handle wasn't obtained";
        let (s, why) = c.classify(TestStatus::Error, "", text, true).unwrap();
        assert_eq!(
            (s, why.rule.as_str()),
            (TestStatus::Xfail, "Handle wasn't obtained")
        );
        assert!(c.classify(TestStatus::Error, "", text, false).is_none());
    }
}
