//! `rocmatrix plan FILE`: print the cells a matrix expands to.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::error::{Error, ExitCode};
use crate::plan::jobs::{self, CiLimits, JobError, JobRequest, Runners};
use crate::plan::{ci, Plan, Shard};
use crate::spec::{Spec, DEFAULT_MAX_CELLS};

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
    /// Number of shards (jobs) for --format github|gitlab; default one per
    /// cell, or with --group-by one per group (then N shards of each group).
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// For --format github|gitlab: one job per distinct combination of these
    /// axes' values (e.g. gfx, or gfx,suite), so each job needs one kind of GPU.
    #[arg(long, value_name = "AXIS,…", value_delimiter = ',')]
    pub group_by: Vec<String>,
    /// Refuse matrices with more cells than this.
    #[arg(long, default_value_t = DEFAULT_MAX_CELLS)]
    pub max_cells: usize,
}

pub fn run(args: PlanArgs, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let spec = Spec::load(&args.file)?;
    let mut plan = Plan::build(&spec, args.max_cells)?
        .select(&args.only)
        .map_err(|e| Error::Usage(e.to_string()))?;
    if let Some(s) = args.shard {
        plan = plan.shard(s);
    }
    if !args.group_by.is_empty() && matches!(args.format, Format::Table | Format::Json) {
        return Err(Error::Usage(
            "--group-by makes CI jobs: use it with --format github or --format gitlab".into(),
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
        jobs::jobs(&spec, &plan, &args.file, &req, limits, runners).map_err(|e| match e {
            JobError::Template(e) => Error::Spec(e),
            other => Error::Usage(other.to_string()),
        })
    };
    let text = match args.format {
        Format::Table => table(&plan),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&plan.summary_json()).unwrap_or_default();
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
    };
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
