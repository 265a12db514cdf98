//! `bisect.json`: a bisection's request, space, every probe in order and,
//! once found, the answer. It is rewritten atomically after each probe, so
//! an interrupted bisection resumes from it (`--resume DIR`). The probes'
//! runs are ordinary run stores under `runs/` beside it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::judge::{ProbeVerdict, Regress, Shown, Target, TimeoutIs};
use super::space::Space;
use super::BisectError;

/// The version of `bisect.json` this rocmatrix writes and reads.
pub const BISECT_VERSION: u32 = 1;

/// What was asked, enough to resume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub matrix_file: String,
    /// SHA-256 of the matrix file when the bisection started.
    pub matrix_hash: String,
    /// `--only` pairs.
    pub only: Vec<(String, String)>,
    /// The good end as given (a value or a revision).
    pub good: String,
    /// The bad end as given.
    pub bad: String,
    pub regress: Regress,
    /// `--signature`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    pub timeout_is: TimeoutIs,
    pub retries: u32,
    pub jobs: usize,
    /// Sources held at these commits on every probe (`NAME`, commit): a
    /// triage holds every other input at the new run's values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pins: Vec<(String, String)>,
}

/// One probe: one point run once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// 1, 2, … in the order they were started.
    pub n: usize,
    /// The point's index in the space.
    pub point: usize,
    /// The axis value, or the full commit id.
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// `good` (passed), `bad` (showed the signature) or `skip`.
    pub verdict: ProbeVerdict,
    /// The cell's status (`passed`, `failed`, …), or `not run`.
    pub status: String,
    /// Why, in words.
    pub why: String,
    /// The judged signature when bad; what it showed instead when skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Shown>,
    /// The probe's run store, relative to the bisection's directory.
    pub run: String,
    /// The cell id in that run.
    pub cell: String,
    pub started: String,
    pub secs: f64,
    /// The build stage the cell started from, if the matrix has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<ProbeBuild>,
    /// Whether this probe repeated an earlier probe of the point (`--retries`).
    #[serde(default)]
    pub retry: bool,
    /// Its outcome was an earlier probe's of the same content (another
    /// bisection's or triage's, `super::outcomes`): nothing ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

/// A probe's build stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeBuild {
    pub key: String,
    /// Its snapshot existed: nothing was built.
    pub reused: bool,
    pub snapshot: String,
}

/// How a bisection ended, as `bisect.json` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerOutcome {
    /// A first bad (or, with `--regress success`, first good) point between
    /// two probed points.
    Found,
    /// An end does not behave as claimed.
    WrongEnds,
    /// An end could not be probed at all.
    Infrastructure,
}

/// The answer, once found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub outcome: AnswerOutcome,
    /// In words.
    pub message: String,
    /// The last point in the old state (index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_old: Option<usize>,
    /// The first point in the new state (index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_new: Option<usize>,
    /// The points that may be the first new one, when skips leave several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<usize>,
    /// Points whose probes disagreed (`--retries`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaky: Vec<usize>,
    /// Commands that reproduce the two sides of the change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reproduce: Vec<String>,
}

/// `bisect.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bisection {
    pub bisect_version: u32,
    pub id: String,
    pub rocmatrix_version: String,
    pub request: Request,
    pub space: Space,
    /// What the probes are judged by: given, or learned from the bad end
    /// once it was probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    pub probes: Vec<Probe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    pub started: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
}

/// A bisection's directory: `<out>/bisects/<id>/`.
#[derive(Debug, Clone)]
pub struct BisectStore {
    pub dir: PathBuf,
}

impl BisectStore {
    pub fn create(out: &Path, id: &str) -> Result<BisectStore, BisectError> {
        let dir = out.join("bisects").join(id);
        std::fs::create_dir_all(dir.join("runs")).map_err(|e| BisectError::io(&dir, e))?;
        Ok(BisectStore { dir })
    }

    /// A bisection's directory, or its id under `<out>/bisects/`.
    pub fn open(path: &Path, out: &Path) -> Result<BisectStore, BisectError> {
        for dir in [path.to_path_buf(), out.join("bisects").join(path)] {
            if crate::store::layout::bisect_state(&dir).is_file() {
                return Ok(BisectStore { dir });
            }
        }
        Err(BisectError::Usage(format!(
            "{} is not a bisection: no bisect.json there or under {}",
            path.display(),
            out.join("bisects").display()
        )))
    }

    pub fn load(&self) -> Result<Bisection, BisectError> {
        let path = crate::store::layout::bisect_state(&self.dir);
        let bytes = crate::safe_read::read_bounded(&path, 64 << 20, "bisect state files", "")
            .map_err(|e| BisectError::io(&path, e))?;
        let b: Bisection = serde_json::from_slice(&bytes).map_err(|e| BisectError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if b.bisect_version != BISECT_VERSION {
            return Err(BisectError::Usage(format!(
                "{}: bisect.json version {} is not the supported version {BISECT_VERSION}",
                path.display(),
                b.bisect_version
            )));
        }
        Ok(b)
    }

    pub fn save(&self, b: &Bisection) -> Result<(), BisectError> {
        let path = crate::store::layout::bisect_state(&self.dir);
        let text = serde_json::to_vec_pretty(b).map_err(|e| BisectError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        crate::store::write_atomic(&path, &text)?;
        Ok(())
    }

    /// Writes a text file of the bisection (its reports), atomically.
    pub fn write(&self, name: &str, text: &str) -> Result<(), BisectError> {
        crate::store::write_atomic(&self.dir.join(name), text.as_bytes())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::space::{Kind, Point};

    fn bisection(version: u32) -> Bisection {
        Bisection {
            bisect_version: version,
            id: "20261125-160158-601f".into(),
            rocmatrix_version: "0".into(),
            request: Request {
                matrix_file: "/m.yaml".into(),
                matrix_hash: "h".into(),
                only: vec![("gfx".into(), "gfx900".into())],
                good: "22".into(),
                bad: "15".into(),
                regress: Regress::Success,
                signature: None,
                timeout_is: TimeoutIs::Skip,
                retries: 0,
                jobs: 1,
                pins: vec![],
            },
            space: Space {
                kind: Kind::Axis,
                name: "llvm".into(),
                url: None,
                first_parent: false,
                points: ["15", "22"]
                    .map(|v| Point {
                        value: v.into(),
                        subject: None,
                    })
                    .to_vec(),
                left_out: vec![],
                packages: None,
            },
            target: Some(Target::Given("invalid HSA metadata".into())),
            probes: vec![],
            answer: None,
            started: "t".into(),
            finished: None,
        }
    }

    #[test]
    fn bisect_json_round_trips_and_other_versions_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = BisectStore::create(dir.path(), "b1").unwrap();
        assert!(store.dir.join("runs").is_dir());
        store.save(&bisection(BISECT_VERSION)).unwrap();
        let again = BisectStore::open(Path::new("b1"), dir.path()).unwrap();
        assert_eq!(again.load().unwrap(), bisection(BISECT_VERSION));
        let text = std::fs::read_to_string(crate::store::layout::bisect_state(&store.dir)).unwrap();
        assert!(
            text.contains(
                "\"target\": {\n    \"by\": \"given\",\n    \"value\": \"invalid HSA metadata\""
            ),
            "{text}"
        );
        store.save(&bisection(99)).unwrap();
        let e = store.load().unwrap_err().to_string();
        assert!(
            e.contains("version 99 is not the supported version 1"),
            "{e}"
        );
        let e = BisectStore::open(Path::new("nothing"), dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a bisection"), "{e}");
    }

    #[test]
    fn an_answers_outcome_is_spelled_in_bisect_json_as_before() {
        for (outcome, word) in [
            (AnswerOutcome::Found, "\"found\""),
            (AnswerOutcome::WrongEnds, "\"wrong-ends\""),
            (AnswerOutcome::Infrastructure, "\"infrastructure\""),
        ] {
            assert_eq!(serde_json::to_string(&outcome).unwrap(), word);
            assert_eq!(
                serde_json::from_str::<AnswerOutcome>(word).unwrap(),
                outcome
            );
        }
    }
}
