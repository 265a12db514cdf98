//! `rocmatrix plan FILE`: print the cells a matrix expands to.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::error::{Error, ExitCode};
use crate::plan::{ci, Plan, Shard};
use crate::spec::{Spec, DEFAULT_MAX_CELLS};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// One row per cell, one column per axis.
    Table,
    /// The documented plan document (docs/plan-json.md).
    Json,
    /// `strategy.matrix` JSON for GitHub Actions, one entry per shard.
    Github,
    /// A GitLab child pipeline, one job per shard.
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
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
    /// Number of shards (jobs) for --format github|gitlab; default one per cell.
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
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
    let text = match args.format {
        Format::Table => table(&plan),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&plan.summary_json()).unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Github => {
            let n = ci::shard_count(&plan, args.shards, ci::GITHUB_MAX_JOBS, "GitHub Actions")
                .map_err(|e| Error::Usage(e.to_string()))?;
            ci::github(&plan, &args.file, &args.only, n) + "\n"
        }
        Format::Gitlab => {
            let n = ci::shard_count(&plan, args.shards, ci::GITLAB_MAX_JOBS, "GitLab")
                .map_err(|e| Error::Usage(e.to_string()))?;
            ci::gitlab(&plan, &args.file, &args.only, n)
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
    out.push_str(&format!(
        "{} cells, {} environments{}\n",
        plan.cells.len(),
        envs,
        plan.shard
            .map(|s| format!(", shard {s} of {} cells", plan.total_cells))
            .unwrap_or_default()
    ));
    out
}
