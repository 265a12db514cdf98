//! The jobs of a CI plan: the plan's cells cut into groups (`--group-by`,
//! one distinct combination of the grouped axes' values each, so a job needs
//! one kind of GPU and builds only its own images), each group cut into
//! shards, and each job's runner labels rendered from the matrix file's
//! `ci:` section.
//!
//! A job runs `rocmatrix run FILE --only AXIS=VALUE… [--shard K/N]`, and
//! `run` selects, then shards, exactly as [`Plan::select`] and
//! [`Plan::shard`] do here, so the jobs' cells are the plan's cells, each
//! once.

use std::path::Path;

use super::ci::shell_quote;
use super::{render, Cell, Plan, Renderer, Shard};
use crate::matrix_file::{Spec, SpecError, Template};

/// What a CI system allows: its name for messages, and its job limit.
#[derive(Debug, Clone, Copy)]
pub struct CiLimits {
    pub name: &'static str,
    pub max_jobs: usize,
}

/// Which `ci:` list the jobs render: GitHub's `runs_on`, GitLab's `tags`,
/// or none (Slurm and Kubernetes ask for resources instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runners {
    RunsOn,
    Tags,
    None,
}

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct JobRequest {
    /// The `--only` filters the plan was selected with.
    pub only: Vec<(String, String)>,
    /// The `--group-by` axes, in the order given.
    pub group_by: Vec<String>,
    /// `--shards N`: shards of the plan, or of each group.
    pub shards: Option<usize>,
}

/// One job of the generated CI configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// A name unique among the jobs, usable as an artifact or job name:
    /// `2-of-4`, `gfx900`, `gfx900-sid-1-of-2`.
    pub name: String,
    /// The grouped axes' values (empty without `--group-by`).
    pub group: Vec<(String, String)>,
    /// The shard of the plan (without `--group-by`) or of the group.
    pub shard: Shard,
    /// How many cells the job runs.
    pub cells: usize,
    /// The ids of those cells, in plan order (what a Slurm task or a
    /// Kubernetes index asks GPUs for).
    pub cell_ids: Vec<String>,
    /// The shell command the job runs.
    pub command: String,
    /// The rendered `ci.runs_on` or `ci.tags`, as asked.
    pub runners: Vec<String>,
}

/// Why no jobs could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("--shards must be at least 1")]
    ZeroShards,
    #[error("--shards {asked}: {ci} runs at most {limit} jobs from one matrix; ask for {limit} or fewer (each shard then runs several cells)")]
    ShardsOverLimit {
        asked: usize,
        ci: String,
        limit: usize,
    },
    #[error("--group-by {axis}: `{axis}` is no axis of this matrix (axes: {})", axes.join(", "))]
    UnknownAxis { axis: String, axes: Vec<String> },
    #[error("--group-by {axis}: cell {cell} has no value for `{axis}` (an include entry adds it to other cells only), so no `--only {axis}=…` can select it; group by axes every cell has")]
    MissingValue { axis: String, cell: String },
    #[error("--group-by {group_by}{shards}: {jobs} jobs ({groups} groups), but {ci} runs at most {limit} jobs from one matrix; group by fewer axes{fewer}")]
    TooManyJobs {
        group_by: String,
        shards: String,
        jobs: usize,
        groups: usize,
        ci: String,
        limit: usize,
        fewer: String,
    },
    #[error("{0}")]
    Template(#[from] SpecError),
}

/// The jobs for `plan`, read from `spec` (whose `ci:` names the runners).
pub fn jobs(
    spec: &Spec,
    plan: &Plan,
    file: &Path,
    req: &JobRequest,
    ci: CiLimits,
    runners: Runners,
) -> Result<Vec<Job>, JobError> {
    check_shards(req, &ci)?;
    let groups = groups(plan, &req.group_by)?;
    let grouped = !req.group_by.is_empty();
    let counts = shard_counts(plan, &groups, req, &ci);
    let total: usize = counts.iter().sum();
    check_total(total, groups.len(), req, &ci)?;
    let templates: &[Template] = match runners {
        Runners::RunsOn => &spec.ci.runs_on,
        Runners::Tags => &spec.ci.tags,
        Runners::None => &[],
    };
    let mut renderer = Renderer::new(&spec.file);
    for t in templates {
        renderer.add(t)?;
    }
    // The user's filters on grouped axes are left out of the jobs' commands:
    // values of one axis are alternatives, so `--only gfx=a --only gfx=b
    // --only gfx=a` would select both.
    let kept_only: Vec<(String, String)> = req
        .only
        .iter()
        .filter(|(k, _)| !req.group_by.contains(k))
        .cloned()
        .collect();
    let mut out = Vec::with_capacity(total);
    for ((group, cells), total) in groups.iter().zip(counts) {
        for index in 1..=total {
            let shard = Shard { index, total };
            let mine = &cells[shard.range(cells.len())];
            let mut only = kept_only.clone();
            only.extend(group.iter().cloned());
            let name = job_name(group, shard, grouped);
            let runners = render_runners(spec, &renderer, templates, mine, &name, req)?;
            out.push(Job {
                command: command(file, &only, (!grouped || total > 1).then_some(shard)),
                name,
                group: group.clone(),
                shard,
                cells: mine.len(),
                cell_ids: mine.iter().map(|c| c.id.clone()).collect(),
                runners,
            });
        }
    }
    Ok(out)
}

/// `--shards N` within what the CI takes.
fn check_shards(req: &JobRequest, ci: &CiLimits) -> Result<(), JobError> {
    match req.shards {
        Some(0) => Err(JobError::ZeroShards),
        Some(n) if n > ci.max_jobs => Err(JobError::ShardsOverLimit {
            asked: n,
            ci: ci.name.to_string(),
            limit: ci.max_jobs,
        }),
        _ => Ok(()),
    }
}

/// How many shards each group gets.
fn shard_counts(plan: &Plan, groups: &[Group<'_>], req: &JobRequest, ci: &CiLimits) -> Vec<usize> {
    let grouped = !req.group_by.is_empty();
    // Without --group-by: as before, one shard per cell by default.
    // With it: one job per group by default, `--shards N` splits each.
    let counts: Vec<usize> = groups
        .iter()
        .map(|(_, cells)| {
            let len = cells.len().max(1);
            match req.shards {
                Some(n) => n.min(len),
                None if grouped => 1,
                None => len.min(ci.max_jobs),
            }
        })
        .collect();
    if let Some(n) = req
        .shards
        .filter(|n| !grouped && *n > plan.cells.len().max(1))
    {
        tracing::warn!(
            "--shards {n} is more than the {} cells; using {} shards",
            plan.cells.len(),
            plan.cells.len().max(1)
        );
    }
    counts
}

/// All the jobs within what the CI takes.
fn check_total(
    total: usize,
    groups: usize,
    req: &JobRequest,
    ci: &CiLimits,
) -> Result<(), JobError> {
    if total > ci.max_jobs {
        return Err(JobError::TooManyJobs {
            group_by: req.group_by.join(","),
            shards: req
                .shards
                .map(|n| format!(" --shards {n}"))
                .unwrap_or_default(),
            jobs: total,
            groups,
            ci: ci.name.to_string(),
            limit: ci.max_jobs,
            fewer: if req.shards.is_some_and(|n| n > 1) {
                " or ask for fewer shards".into()
            } else {
                String::new()
            },
        });
    }
    Ok(())
}

type Group<'a> = (Vec<(String, String)>, Vec<&'a Cell>);

/// The plan's cells by the values of `axes`, groups in order of first
/// appearance and cells in plan order; without axes, one group of all.
fn groups<'a>(plan: &'a Plan, axes: &[String]) -> Result<Vec<Group<'a>>, JobError> {
    for a in axes {
        if !plan.keys.contains(a) {
            return Err(JobError::UnknownAxis {
                axis: a.clone(),
                axes: plan.keys.clone(),
            });
        }
    }
    let mut out: Vec<Group> = Vec::new();
    let mut index: std::collections::HashMap<Vec<(String, String)>, usize> = Default::default();
    for c in &plan.cells {
        let mut key = Vec::with_capacity(axes.len());
        for a in axes {
            let v = c.value(a).ok_or_else(|| JobError::MissingValue {
                axis: a.clone(),
                cell: c.id.clone(),
            })?;
            key.push((a.clone(), v.to_string()));
        }
        match index.get(&key) {
            Some(&i) => out[i].1.push(c),
            None => {
                index.insert(key.clone(), out.len());
                out.push((key, vec![c]));
            }
        }
    }
    if out.is_empty() {
        out.push((Vec::new(), Vec::new()));
    }
    Ok(out)
}

fn job_name(group: &[(String, String)], shard: Shard, grouped: bool) -> String {
    let split = format!("{}-of-{}", shard.index, shard.total);
    if !grouped {
        return split;
    }
    let values: Vec<String> = group
        .iter()
        .map(|(_, v)| crate::matrix_file::cell_id::sanitize(v))
        .collect();
    let base = values.join("-");
    if shard.total > 1 {
        format!("{base}-{split}")
    } else {
        base
    }
}

/// `templates` rendered for the job's cells: one value for all of them, or
/// an error naming the template, the axis it varies with and the job.
fn render_runners(
    spec: &Spec,
    r: &Renderer,
    templates: &[Template],
    cells: &[&Cell],
    job: &str,
    req: &JobRequest,
) -> Result<Vec<String>, JobError> {
    let mut out = Vec::with_capacity(templates.len());
    for t in templates {
        let mut first: Option<(String, &Cell)> = None;
        for c in cells {
            let ctx = render::context(&c.values, &spec.vars, &c.id);
            let text = r.render(t, &ctx, &c.id)?.trim().to_string();
            match &first {
                None => first = Some((text, c)),
                Some((seen, other)) if *seen != text => {
                    return Err(varies(spec, t, job, req, (seen, other), (&text, c)).into())
                }
                Some(_) => {}
            }
        }
        if let Some((text, _)) = first.filter(|(t, _)| !t.is_empty()) {
            out.push(text);
        }
    }
    Ok(out)
}

fn varies(
    spec: &Spec,
    t: &Template,
    job: &str,
    req: &JobRequest,
    (a, ca): (&str, &Cell),
    (b, cb): (&str, &Cell),
) -> SpecError {
    let differ: Vec<&str> = ca
        .values
        .iter()
        .filter(|(k, v)| !req.group_by.contains(k) && cb.value(k) != Some(v.as_str()))
        .map(|(k, _)| k.as_str())
        .collect();
    let named: Vec<&str> = differ
        .iter()
        .copied()
        .filter(|k| {
            [
                format!("matrix.{k}"),
                format!("matrix['{k}']"),
                format!("matrix[\"{k}\"]"),
            ]
            .iter()
            .any(|p| t.source.contains(p.as_str()))
        })
        .collect();
    let axes = if named.is_empty() { differ } else { named };
    let axes_text = axes
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let grouped = if req.group_by.is_empty() {
        "the jobs are not grouped (no --group-by)".to_string()
    } else {
        format!("the jobs are grouped by {} only", req.group_by.join(","))
    };
    spec.error_at(
        t.pos,
        format!(
            "{}: `{}` renders `{a}` for cell {} but `{b}` for cell {}, both in job `{job}`: \
             it varies with axis {axes_text}, and {grouped}; add {} to --group-by, \
             or leave it out of the template",
            t.field,
            t.source,
            ca.id,
            cb.id,
            axes.join(",")
        ),
    )
}

/// `rocmatrix run FILE [--only K=V]… [--shard K/N]`, quoted for sh.
fn command(file: &Path, only: &[(String, String)], shard: Option<Shard>) -> String {
    let mut cmd = format!("rocmatrix run {}", shell_quote(&file.display().to_string()));
    for (k, v) in only {
        cmd.push_str(&format!(" --only {}", shell_quote(&format!("{k}={v}"))));
    }
    if let Some(s) = shard {
        cmd.push_str(&format!(" --shard {s}"));
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    const MATRIX: &str = "name: m
matrix:
  suite: [bookworm, sid]
  gfx: [gfx900, gfx1030, gfx1100]
  exclude: [{suite: sid, gfx: gfx900}]
  include: [{suite: sid, gfx: gfx1151, extra: yes}]
steps:
  - {name: s, run: 'true'}
ci:
  runs_on: [rocm, '{{ matrix.gfx }}']
";

    fn make(req: &JobRequest) -> Result<Vec<Job>, JobError> {
        let spec = Spec::parse(Path::new("m.yaml"), MATRIX).unwrap();
        let plan = Plan::build(&spec, 100).unwrap();
        jobs(
            &spec,
            &plan,
            Path::new("m.yaml"),
            req,
            super::super::ci::GITHUB,
            Runners::RunsOn,
        )
    }

    fn by(axes: &[&str], shards: Option<usize>) -> JobRequest {
        JobRequest {
            only: Vec::new(),
            group_by: axes.iter().map(|a| a.to_string()).collect(),
            shards,
        }
    }

    #[test]
    fn groups_in_order_of_first_appearance_and_split_within() {
        let jobs = make(&by(&["gfx"], Some(2))).unwrap();
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        // gfx900 has one cell (sid excluded), so one shard and no --shard.
        assert_eq!(
            names,
            [
                "gfx900",
                "gfx1030-1-of-2",
                "gfx1030-2-of-2",
                "gfx1100-1-of-2",
                "gfx1100-2-of-2",
                "gfx1151"
            ]
        );
        assert_eq!(jobs[0].command, "rocmatrix run m.yaml --only gfx=gfx900");
        assert_eq!(
            jobs[2].command,
            "rocmatrix run m.yaml --only gfx=gfx1030 --shard 2/2"
        );
        assert_eq!(jobs[2].runners, ["rocm", "gfx1030"]);
        assert_eq!(jobs.iter().map(|j| j.cells).sum::<usize>(), 6);
    }

    #[test]
    fn without_group_by_jobs_are_shards_of_the_plan() {
        // Default: one shard per cell, each with its own runner.
        let jobs = make(&by(&[], None)).unwrap();
        assert_eq!(jobs.len(), 6);
        assert_eq!(jobs[5].command, "rocmatrix run m.yaml --shard 6/6");
        assert_eq!(jobs[5].runners, ["rocm", "gfx1151"]);
        // Three shards of two targets each: the runner template varies.
        let err = make(&by(&[], Some(3))).unwrap_err().to_string();
        assert!(err.starts_with("m.yaml:10:19:"), "{err}");
        assert!(err.contains("ci.runs_on[1]"), "{err}");
        assert!(err.contains("both in job `1-of-3`"), "{err}");
        assert!(err.contains("axis `gfx`"), "{err}");
    }

    #[test]
    fn an_include_only_key_cannot_be_grouped_on() {
        let err = make(&by(&["extra"], None)).unwrap_err();
        assert!(
            matches!(&err, JobError::MissingValue { axis, cell } if axis == "extra" && cell == "bookworm.gfx900"),
            "{err}"
        );
        assert_eq!(
            make(&by(&["gfx"], Some(0))).unwrap_err(),
            JobError::ZeroShards
        );
    }
}
