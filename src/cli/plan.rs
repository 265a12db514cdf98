//! `rocmatrix plan FILE`: print the cells a matrix expands to.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::affected::args as affected;
use crate::error::{Error, ExitCode};
use crate::matrix_file::{Spec, DEFAULT_MAX_CELLS};
use crate::plan::jobs::{self, CiLimits, JobError, JobRequest, Runners};
use crate::plan::k8s::{self, K8sSettings};
use crate::plan::slurm::{self, ScriptPaths, SlurmSettings};
use crate::plan::{ci, Plan, Shard};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// One row per cell, one column per axis.
    Table,
    /// The documented plan document (docs/plan-json.md).
    Json,
    /// `strategy.matrix` JSON for GitHub Actions, one entry per job.
    Github,
    /// A GitLab child pipeline, one job per job of the plan and a report job.
    Gitlab,
    /// An `sbatch` script: a Slurm job array, one task per job of the plan
    /// (docs/cluster.md).
    Slurm,
    /// Kubernetes Indexed Jobs, one index per job of the plan, one Job per
    /// kind of GPU (docs/cluster.md).
    K8s,
    /// The autopkgtest jobs as the ROCm team's debci workers take them:
    /// `ARCH+gfxNNNN SUITE SOURCE`, one line each (docs/autopkgtest.md).
    Debci,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The matrix file.
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Keep only cells with AXIS=VALUE (repeatable; values of one axis are alternatives).
    #[arg(long, value_name = "AXIS=VALUE", value_parser = super::parse_pair)]
    pub only: Vec<(String, String)>,
    /// Keep only shard K of N.
    #[arg(long, value_name = "K/N", conflicts_with = "group_by")]
    pub shard: Option<Shard>,
    /// Number of shards (jobs) for --format github|gitlab|slurm|k8s; default one per
    /// cell, or with --group-by one per group (then N shards of each group).
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// For --format github|gitlab|slurm|k8s: one job per distinct combination of these
    /// axes' values (e.g. gfx, or gfx,suite), so each job needs one kind of GPU.
    #[arg(long, value_name = "AXIS,…", value_delimiter = ',')]
    pub group_by: Vec<String>,
    /// Refuse matrices with more cells than this.
    #[arg(long, default_value_t = DEFAULT_MAX_CELLS)]
    pub max_cells: usize,
    #[command(flatten)]
    pub slurm: SlurmArgs,
    #[command(flatten)]
    pub affected: affected::PlanAffected,
}

/// Where a Slurm array runs: over the matrix file's `ci.slurm`.
#[derive(Debug, Clone, Default, Args)]
pub struct SlurmArgs {
    /// For Slurm: the partition (over `ci.slurm.partition`).
    #[arg(long, value_name = "NAME")]
    pub partition: Option<String>,
    /// For Slurm: the account charged (over `ci.slurm.account`).
    #[arg(long, value_name = "NAME")]
    pub account: Option<String>,
    /// For Slurm: each task's time limit, as sbatch takes it (over `ci.slurm.time`).
    #[arg(long, value_name = "TIME")]
    pub time: Option<String>,
    /// For Slurm: one more sbatch argument (repeatable; after `ci.slurm.args`).
    #[arg(long = "sbatch-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub sbatch_args: Vec<String>,
}

impl SlurmArgs {
    /// The matrix file's `ci.slurm`, with these flags over it.
    pub fn settings(&self, spec: &Spec) -> SlurmSettings {
        let mut s = slurm_settings(spec);
        if self.partition.is_some() {
            s.partition = self.partition.clone();
        }
        if self.account.is_some() {
            s.account = self.account.clone();
        }
        if self.time.is_some() {
            s.time = self.time.clone();
        }
        s.args.extend(self.sbatch_args.iter().cloned());
        s
    }
}

/// `ci.slurm` of the matrix file.
fn slurm_settings(spec: &Spec) -> SlurmSettings {
    let c = &spec.ci.slurm;
    SlurmSettings {
        partition: c.partition.clone(),
        account: c.account.clone(),
        time: c.time.clone(),
        args: c.args.clone(),
        gres: c.gres.clone(),
    }
}

/// `ci.k8s` of the matrix file.
fn k8s_settings(spec: &Spec) -> K8sSettings {
    let c = &spec.ci.k8s;
    K8sSettings {
        image: c.image.clone(),
        namespace: c.namespace.clone(),
        claim: c.claim.clone(),
        nodes: c.nodes.clone(),
    }
}

pub fn run(args: PlanArgs, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let spec = Spec::load(&args.file)?;
    let plan = super::plan_of(&spec, args.max_cells, None)?
        .select(&args.only)
        .map_err(|e| Error::Usage(e.to_string()))?;
    let (mut plan, selection) = args.affected.narrow(&spec, plan)?;
    if let Some(s) = args.shard {
        plan = plan.shard(s);
    }
    if !args.group_by.is_empty()
        && matches!(args.format, Format::Table | Format::Json | Format::Debci)
    {
        return Err(Error::Usage(
            "--group-by makes CI jobs: use it with --format github, gitlab, slurm or k8s".into(),
        ));
    }
    let ci_jobs = |limits: CiLimits, runners: Runners| -> Result<Vec<jobs::Job>, Error> {
        let mut group_by: Vec<String> = Vec::new();
        for a in &args.group_by {
            if !group_by.contains(a) {
                group_by.push(a.clone());
            }
        }
        let req = JobRequest {
            only: args.only.clone(),
            group_by,
            shards: args.shards,
        };
        let jobs =
            jobs::jobs(&spec, &plan, &args.file, &req, limits, runners).map_err(|e| match e {
                JobError::Template(e) => Error::Spec(e),
                other => Error::Usage(other.to_string()),
            })?;
        Ok(affected::commands(jobs, selection.as_ref()))
    };
    let text = match args.format {
        Format::Table => table(&plan) + &affected::lines(selection.as_ref()),
        Format::Json => {
            let doc = affected::with_json(plan.summary_json(), selection.as_ref());
            let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Github => {
            let jobs = ci_jobs(ci::GITHUB, Runners::RunsOn)?;
            ci::github(&jobs, !args.group_by.is_empty()) + "\n"
        }
        Format::Gitlab => {
            let jobs = ci_jobs(ci::GITLAB, Runners::Tags)?;
            ci::gitlab(&plan.name, plan.cells.len(), &jobs)
        }
        Format::Slurm => {
            let jobs = ci_jobs(slurm::SLURM, Runners::None)?;
            let settings = args.slurm.settings(&spec);
            let tasks =
                slurm::tasks(&plan, &jobs, &settings).map_err(|e| Error::Usage(e.to_string()))?;
            slurm::script(&plan, &tasks, &settings, &ScriptPaths::default())
        }
        Format::K8s => {
            let jobs = ci_jobs(k8s::K8S, Runners::None)?;
            k8s::manifests(&plan, &jobs, &k8s_settings(&spec))
                .map_err(|e| Error::Usage(e.to_string()))?
        }
        Format::Debci => crate::plan::debci::render(&plan.cells),
    };
    affected::tell(selection.as_ref(), !matches!(args.format, Format::Table));
    super::write_out(out, &text)?;
    Ok(ExitCode::Success)
}

/// The most key columns the table shows; the JSON formats have them all.
/// Include entries can add a key each, and a table of thousands of columns
/// over thousands of cells is neither readable nor small.
const TABLE_MAX_KEYS: usize = 32;

fn table(plan: &Plan) -> String {
    let shown = &plan.keys[..plan.keys.len().min(TABLE_MAX_KEYS)];
    let mut header: Vec<String> = vec!["cell".into()];
    header.extend(shown.iter().cloned());
    header.push("env".into());
    let staged = !plan.builds.is_empty();
    if staged {
        header.push("build".into());
    }
    let rows: Vec<Vec<String>> = plan
        .cells
        .iter()
        .map(|c| {
            let mut row = vec![c.id.clone()];
            let values: std::collections::HashMap<&str, &str> = c
                .values
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            row.extend(
                shown
                    .iter()
                    .map(|k| values.get(k.as_str()).copied().unwrap_or("-").to_string()),
            );
            row.push(c.environment_hash[..12].to_string());
            if staged {
                row.push(c.build.clone().unwrap_or_else(|| "-".into()));
            }
            row
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, v) in widths.iter_mut().zip(r) {
            *w = (*w).max(v.chars().count());
        }
    }
    let line = |cols: &[String]| -> String {
        let mut s = cols
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(&header);
    for r in &rows {
        out.push_str(&line(r));
    }
    if plan.keys.len() > shown.len() {
        out.push_str(&format!(
            "({} more keys not shown; --format json has them all)\n",
            plan.keys.len() - shown.len()
        ));
    }
    let envs = plan.environments().len();
    let builds = plan
        .builds
        .iter()
        .filter(|b| plan.cells.iter().any(|c| c.build.as_ref() == Some(&b.key)))
        .count();
    out.push_str(&format!(
        "{} cells, {} environments{}{}\n",
        plan.cells.len(),
        envs,
        if staged {
            format!(", {builds} builds")
        } else {
            String::new()
        },
        plan.shard
            .map(|s| format!(", shard {s} of {} cells", plan.total_cells))
            .unwrap_or_default()
    ));
    out
}
