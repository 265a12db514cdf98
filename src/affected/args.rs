//! `--affected-by CHANGE…` and `--lock RUN` as `plan` and `run` take them
//! (and `plan`'s `--out`): the lock read, the plan narrowed to the cells
//! the changes affect, the CI jobs' commands that select them again.

use std::path::{Path, PathBuf};

use super::{AffectedError, Selection};
use crate::matrix_file::Spec;
use crate::plan::{jobs::Job, Plan};

#[derive(Debug, Clone, Default, clap::Args)]
pub struct AffectedArgs {
    /// Keep only the cells these changes can affect: PACKAGE[=VERSION],
    /// src:SOURCE[=VERSION], source:NAME[@COMMIT] (a `sources:` entry),
    /// file:PATH (a file of the matrix); several, or comma-separated
    /// (docs/affected.md).
    #[arg(long = "affected-by", value_name = "CHANGE", num_args = 1.., value_delimiter = ',')]
    pub affected_by: Vec<String>,
    /// With --affected-by: a run (directory or id) whose lock says what
    /// each cell installed and built from (repeatable: the first that
    /// describes a cell wins); default: the matrix's runs under --out,
    /// newest first.
    #[arg(long, value_name = "RUN", requires = "affected_by")]
    pub lock: Vec<PathBuf>,
    /// With --affected-by: an archive's package index (Debian's `Packages`
    /// file, uncompressed) that says which binaries each source builds.
    #[arg(long, value_name = "PACKAGES", requires = "affected_by")]
    pub index: Option<PathBuf>,
}

/// [`AffectedArgs`] and `plan`'s run root, where it finds the newest run.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanAffected {
    #[command(flatten)]
    pub changes: AffectedArgs,
    /// The run root whose newest run of the matrix --affected-by reads the
    /// lock of (`<out>/runs/<run-id>`).
    #[arg(long, default_value = crate::store::DEFAULT_OUT)]
    pub out: PathBuf,
}

impl PlanAffected {
    /// [`AffectedArgs::narrow`] under `--out`.
    pub fn narrow(
        &self,
        spec: &Spec,
        plan: Plan,
    ) -> Result<(Plan, Option<Selection>), AffectedError> {
        self.changes.narrow(spec, plan, &self.out)
    }
}

impl AffectedArgs {
    /// Whether `--affected-by` was given.
    pub fn on(&self) -> bool {
        !self.affected_by.is_empty()
    }

    /// `plan` narrowed to the affected cells, and the selection; the plan
    /// as it is without `--affected-by`.
    pub fn narrow(
        &self,
        spec: &Spec,
        mut plan: Plan,
        out: &Path,
    ) -> Result<(Plan, Option<Selection>), AffectedError> {
        if !self.on() {
            return Ok((plan, None));
        }
        let changes = super::change::parse_all(&self.affected_by)?;
        let lock = match self.lock.is_empty() {
            false => Some(super::lock::named(&self.lock, out, &spec.name)?),
            true => super::lock::newest(out, &spec.name)?,
        };
        let index = self
            .index
            .as_deref()
            .map(super::index::Index::load)
            .transpose()?;
        let dir = spec.file.parent().unwrap_or(Path::new("."));
        let mut selection = super::select(&plan, changes, (lock.as_ref(), index.as_ref()), dir)?;
        selection.index = self.index.clone();
        plan.cells.retain(|c| selection.contains(&c.id));
        Ok((plan, Some(selection)))
    }
}

/// CI jobs whose `rocmatrix run` selects the same cells again: with
/// ` --affected-by 'C1' 'C2' --lock RUN… [--index FILE]`, the runs whose
/// locks selected them and the index (which the job's machine needs to
/// have, at those paths).
pub fn commands(mut jobs: Vec<Job>, selection: Option<&Selection>) -> Vec<Job> {
    let Some(selection) = selection else {
        return jobs;
    };
    let quote = crate::plan::ci::shell_quote;
    let mut tail = String::from(" --affected-by");
    for c in &selection.changes {
        tail.push(' ');
        tail.push_str(&quote(&c.to_string()));
    }
    let locks = selection.locks.iter().map(|r| ("--lock", r));
    for (flag, path) in locks.chain(selection.index.iter().map(|i| ("--index", i))) {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        tail.push_str(&format!(" {flag} {}", quote(&path.display().to_string())));
    }
    jobs.iter_mut().for_each(|j| j.command.push_str(&tail));
    jobs
}

/// Says the selection on stderr when `machine` (a format whose stdout is
/// read by a machine: the table has it on stdout).
pub fn tell(selection: Option<&Selection>, machine: bool) {
    if machine {
        eprint!("{}", lines(selection));
    }
}

/// The selection's lines ([`Selection::lines`]); nothing without one.
pub fn lines(selection: Option<&Selection>) -> String {
    selection.map(Selection::lines).unwrap_or_default()
}

/// A `plan --format json` document with the selection as `affected`.
pub fn with_json(mut doc: serde_json::Value, selection: Option<&Selection>) -> serde_json::Value {
    if let Some(s) = selection {
        doc["affected"] = s.json();
    }
    doc
}
