//! Expectations that keep themselves (`rocmatrix expect`): from the
//! history of a matrix's runs, the changes its `expect:` and `flaky:`
//! lists need — known failures to expect (with the run each started in),
//! flaky tests to list (with their rate and the axis values they are flaky
//! on), entries to drop because their tests passed in each of the last N
//! runs — as a reviewable unified diff, or written into the file in place.
//!
//! - [`findings`]: what the history says should change;
//! - [`edit`]: those changes as line edits found through the positioned
//!   YAML tree, their diff, and the text they make.

pub mod edit;
pub mod findings;

use std::path::{Path, PathBuf};

use crate::history::{History, HistoryError, Location};
use crate::matrix_file::{Spec, SpecError};

/// Why `expect` could not propose anything.
#[derive(Debug, thiserror::Error)]
pub enum ExpectError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(
        "no history at {0}: runs record into it as they finish (or `rocmatrix history import RUN…`); \
         give --out DIR or --history PATH|URL where the matrix's runs were recorded"
    )]
    NoHistory(PathBuf),
    #[error("expect reads the history, and --history off leaves none to read")]
    Off,
    #[error(
        "{location} has no run of matrix `{matrix}` (the `name:` of {file}); it has runs of: {known}"
    )]
    NoRuns {
        location: String,
        matrix: String,
        file: String,
        known: String,
    },
    #[error(
        "{file}:{line}: `{key}:` is written as a flow list (`[…]`); write it as a block list \
         (one `- ` entry after another) so that its entries can be edited in place"
    )]
    Flow {
        file: String,
        line: usize,
        key: String,
    },
    #[error("the proposed {0} would not validate ({1}); this is a bug in rocmatrix expect")]
    Invalid(String, SpecError),
    #[error(transparent)]
    History(#[from] HistoryError),
}

impl ExpectError {
    /// Bad input named on the command line (exit code 2), not a failing
    /// database (3).
    pub fn is_usage(&self) -> bool {
        !matches!(self, ExpectError::History(_) | ExpectError::Invalid(..))
    }
}

/// What `expect` proposes for one matrix file.
#[derive(Debug)]
pub struct Proposal {
    /// The unified diff; empty when nothing changes.
    pub diff: String,
    /// The file's text with the changes made.
    pub text: String,
    pub findings: findings::Findings,
    /// One line: what was read and what is proposed.
    pub summary: String,
}

/// Opens the history at `location` for reading; an SQLite file that is not
/// there is not created.
pub fn open(location: &Location) -> Result<History, ExpectError> {
    match location {
        Location::Off => return Err(ExpectError::Off),
        Location::Sqlite(p) if !p.exists() => return Err(ExpectError::NoHistory(p.clone())),
        _ => {}
    }
    Ok(History::open(location)?)
}

/// Proposes the changes of the matrix file `path` (whose text is `text`)
/// that its history in `history` calls for; `drop_after` is the number of
/// last runs an entry's tests must have passed in to be dropped.
pub fn propose(
    path: &Path,
    text: &str,
    history: &mut History,
    drop_after: usize,
) -> Result<Proposal, ExpectError> {
    let spec = Spec::parse(path, text)?;
    let runs = history.runs()?;
    if !runs.iter().any(|r| r.name == spec.name) {
        let mut names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        return Err(ExpectError::NoRuns {
            location: history.location().to_string(),
            matrix: spec.name.clone(),
            file: path.display().to_string(),
            known: if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            },
        });
    }
    let found = findings::find(&spec, history, drop_after)?;
    let root = crate::matrix_file::tree::parse(text)
        .map_err(|e| SpecError::new(path, Some(e.pos), e.message))?;
    let name = path.display().to_string();
    let doc = edit::Doc::new(&name, text, &root);
    let edits = doc.edits(&found)?;
    let new_text = doc.apply(&edits);
    if let Err(e) = Spec::parse(path, &new_text) {
        return Err(ExpectError::Invalid(path.display().to_string(), e));
    }
    let summary = summary(&spec.name, history.location(), &found, drop_after);
    Ok(Proposal {
        diff: doc.diff(&name, &edits),
        text: new_text,
        findings: found,
        summary,
    })
}

/// `expect: 4 runs of hist in out/history.sqlite: 1 known failure to
/// expect, 1 flaky test to list, 1 entry to drop`.
fn summary(matrix: &str, location: &Location, f: &findings::Findings, drop_after: usize) -> String {
    let count = crate::run::progress::count;
    let mut parts = Vec::new();
    let tests = |entries: &[findings::NewEntry]| {
        let mut t: Vec<&str> = entries
            .iter()
            .flat_map(|e| e.tests.iter().map(String::as_str))
            .collect();
        t.sort_unstable();
        t.dedup();
        t.len()
    };
    if !f.expect.is_empty() {
        parts.push(format!(
            "{} to expect",
            count(tests(&f.expect), "known failure")
        ));
    }
    if !f.flaky.is_empty() {
        parts.push(format!("{} to list", count(tests(&f.flaky), "flaky test")));
    }
    if !f.drops.is_empty() {
        parts.push(format!(
            "{} to drop or shorten",
            if f.drops.len() == 1 {
                "1 entry".to_string()
            } else {
                format!("{} entries", f.drops.len())
            }
        ));
    }
    let what = if parts.is_empty() {
        "nothing to change".to_string()
    } else {
        parts.join(", ")
    };
    let mut s = format!(
        "expect: {} of {matrix} in {location}: {what}",
        count(f.runs, "run")
    );
    if f.runs < drop_after {
        s.push_str(&format!(
            " (nothing is dropped before {drop_after} runs are recorded)"
        ));
    }
    for d in &f.drops {
        s.push_str(&format!("\n  {}: {}", d.what, d.why));
    }
    s
}
