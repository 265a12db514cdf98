//! `triage.json` in a run directory: per signature that is new in the run
//! (or gone from it), the searches made and where the change is — the
//! line the report shows beside the signature. It is rewritten atomically
//! after every search, so an interrupted triage loses at most the probes
//! that were running (and those live on in their bisection's directory).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::TriageError;
use crate::bisect::judge::{Regress, Shown};

/// The version of `triage.json` this rocmatrix writes and reads.
pub const TRIAGE_VERSION: u32 = 1;

/// Whether a signature is new in the run or gone from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// New against the baseline: where did it start?
    New,
    /// The baseline's, gone now: where was it fixed?
    Gone,
}

/// What a search goes over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Over {
    /// The commits of a `sources:` entry that moved between the two locks.
    Source,
    /// The values of an ordered axis the signature's attribution names.
    Axis,
    /// The packages that moved (when nothing else did).
    Packages,
}

/// How a search (or a whole item) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// The change is between two probed points.
    Found,
    /// Its ends do not differ: the change is not in this input (the good
    /// end shows the signature too, say, when another source moved it).
    NotHere,
    /// The moved packages are named; narrowing them down was not possible.
    Listed,
    /// It could not be searched; `message` says why.
    CouldNot,
    /// The budget (or a signal) stopped it first; triage again to go on.
    Unfinished,
}

/// One point of a search's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct At {
    /// The axis value, or the full commit id.
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// One search: a bisection over an input, or the list of moved packages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Search {
    pub over: Over,
    /// The source's name, the axis, or `packages`.
    pub name: String,
    /// The end without the signature (a commit or a value).
    pub good: String,
    /// The end with it.
    pub bad: String,
    pub regress: Regress,
    /// Points in the range (commits, values), both ends included.
    #[serde(default)]
    pub points: usize,
    pub state: State,
    /// The first point in the new state (first bad; first good for a fix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<At>,
    /// The last point in the old state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<At>,
    /// Points that may be the first new one, when skips leave several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<At>,
    /// Probes the bisection made (all of them, ends included).
    #[serde(default)]
    pub probes: usize,
    /// Of those, made by this triage (0 when an earlier one answered).
    #[serde(default)]
    pub probes_now: usize,
    /// The bisection's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bisection: Option<String>,
    /// The bisection was an earlier one (of a triage or a `bisect`).
    #[serde(default)]
    pub reused: bool,
    /// The bisection's answer, or why there is none.
    pub message: String,
    /// The moved packages, the ones that matter first (`Over::Packages`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
}

/// One signature and its searches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub change: Change,
    pub signature: Shown,
    /// The cell it was triaged in.
    pub cell: String,
    /// The run its good (new) or bad (gone) end comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    pub searches: Vec<Search>,
    pub state: State,
    /// What the report shows beside the signature.
    pub line: String,
}

/// A source that moved between the baseline's lock and the run's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MovedSource {
    pub name: String,
    pub url: String,
    pub from: String,
    pub to: String,
    /// Commits after `from` up to `to` (first-parent where it can be).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commits: Option<usize>,
    /// The first of those commits' subjects, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    /// Why the commits could not be counted (a force-pushed history …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `triage.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Triage {
    pub triage_version: u32,
    pub rocmatrix_version: String,
    /// The run triaged (its id).
    pub run: String,
    /// The baseline as given, or `history` when the history chose it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// `--triage-budget` as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
    /// Sources that moved between the baseline and the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved: Vec<MovedSource>,
    pub items: Vec<Item>,
    /// What the budget left undone, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished: Vec<String>,
    pub started: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    /// Wall time of this triage, seconds.
    #[serde(default)]
    pub secs: f64,
}

impl Triage {
    /// The line beside the signature `id` (new in the run), if triaged.
    pub fn line_of(&self, id: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|i| i.change == Change::New && i.signature.id == id)
            .map(|i| i.line.as_str())
    }

    /// The gone signatures and their lines.
    pub fn gone(&self) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(|i| i.change == Change::Gone)
    }
}

/// The run's triage, if it has one.
pub fn load(run_dir: &Path) -> Result<Option<Triage>, TriageError> {
    let path = crate::store::layout::triage_of(run_dir);
    if !path.is_file() {
        return Ok(None);
    }
    let bytes = crate::safe_read::read_bounded(&path, 64 << 20, "triage files", "")
        .map_err(|e| TriageError::io(&path, e))?;
    let t: Triage = serde_json::from_slice(&bytes).map_err(|e| TriageError::Corrupt {
        path: path.clone(),
        message: e.to_string(),
    })?;
    if t.triage_version != TRIAGE_VERSION {
        return Err(TriageError::Usage(format!(
            "{}: triage.json version {} is not the supported version {TRIAGE_VERSION}",
            path.display(),
            t.triage_version
        )));
    }
    Ok(Some(t))
}

/// Writes the run's `triage.json` atomically.
pub fn save(run_dir: &Path, t: &Triage) -> Result<(), TriageError> {
    let path = crate::store::layout::triage_of(run_dir);
    let text = serde_json::to_vec_pretty(t).map_err(|e| TriageError::Corrupt {
        path: path.clone(),
        message: e.to_string(),
    })?;
    crate::store::write_atomic(&path, &text)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triage_json_round_trips_and_other_versions_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
        let mut t = Triage {
            triage_version: TRIAGE_VERSION,
            rocmatrix_version: "0".into(),
            run: "r".into(),
            baseline: Some("b".into()),
            budget: None,
            moved: vec![],
            items: vec![Item {
                change: Change::New,
                signature: Shown::plain("sum: FAILED"),
                cell: "c".into(),
                baseline: None,
                searches: vec![],
                state: State::CouldNot,
                line: "could not triage: x".into(),
            }],
            unfinished: vec![],
            started: "t".into(),
            finished: None,
            secs: 1.0,
        };
        save(dir.path(), &t).unwrap();
        let back = load(dir.path()).unwrap().unwrap();
        assert_eq!(back, t);
        let id = t.items[0].signature.id.clone();
        assert_eq!(back.line_of(&id), Some("could not triage: x"));
        let text = std::fs::read_to_string(crate::store::layout::triage_of(dir.path())).unwrap();
        assert!(text.contains("\"state\": \"could-not\""), "{text}");
        t.triage_version = 9;
        save(dir.path(), &t).unwrap();
        let e = load(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("version 9 is not the supported version 1"),
            "{e}"
        );
    }
}
