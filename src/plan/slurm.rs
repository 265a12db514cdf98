//! Plans as Slurm job arrays: one array task per [`Job`](super::jobs::Job)
//! (a shard of the plan, or of a `--group-by` group), each running its
//! `rocmatrix run … [--shard K/N]` into a shard directory of its own, and
//! the `sbatch` script that holds them (`plan --format slurm`, and what
//! `run --executor slurm` submits).
//!
//! GPUs are Slurm's generic resources: a task asks `--gres=gpu[:TYPE]:N`,
//! N the most GPUs one of its cells leases, TYPE the cells' gfx (or `sm_`)
//! processor looked up in the matrix file's `ci.slurm.gres` table (a
//! site's gres type names are its own: `mi250`, `mi300x`). Every task of
//! one array asks for the same resources (sbatch has one request per
//! array), so tasks are grouped by their request ([`Array`]); a script
//! whose tasks need different GPUs asks for them per `sbatch` command line.

use std::collections::BTreeMap;

use super::ci::shell_quote;
use super::jobs::{CiLimits, Job};
use super::Plan;
use crate::matrix_file::GpuUse;

/// Slurm's default `MaxArraySize` is 1001: task ids 0–1000.
pub const SLURM: CiLimits = CiLimits {
    name: "Slurm (MaxArraySize 1001 by default)",
    max_jobs: 1000,
};

/// Where and how the array runs: the matrix file's `ci.slurm`, with the
/// command line over it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmSettings {
    pub partition: Option<String>,
    pub account: Option<String>,
    /// `--time`, as Slurm writes it (`90`, `1:30:00`, `1-00:00:00`).
    pub time: Option<String>,
    /// More `sbatch` arguments, one word each (`--qos=debug`).
    pub args: Vec<String>,
    /// gfx/sm processor → the site's gres type for it.
    pub gres: BTreeMap<String, String>,
}

/// One task's GPUs: `gpu[:TYPE]:COUNT`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gres {
    pub kind: Option<String>,
    pub count: u32,
}

impl std::fmt::Display for Gres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Some(k) => write!(f, "gpu:{k}:{}", self.count),
            None => write!(f, "gpu:{}", self.count),
        }
    }
}

/// Why a plan makes no array.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlurmError {
    #[error("cells {a} and {b} share array task {task} but need different GPUs ({ga} and {gb}): one task asks Slurm for one kind of GPU; use --group-by with the axis of the GPU target (e.g. --group-by gfx), or fewer cells per task (--shards)")]
    MixedGpus {
        task: usize,
        a: String,
        ga: String,
        b: String,
        gb: String,
    },
}

/// One array task: its 1-based index, its job, its GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub index: usize,
    pub job: Job,
    pub gres: Option<Gres>,
}

/// Tasks that ask for the same resources: one `sbatch --array`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Array {
    pub gres: Option<Gres>,
    pub tasks: Vec<usize>,
}

impl Array {
    /// `--array=1-3,5`: the task indices, runs of consecutive ones joined.
    pub fn spec(&self) -> String {
        index_ranges(&self.tasks)
    }
}

/// `1-3,5,7-8` for sorted `indices`.
pub fn index_ranges(indices: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let start = indices[i];
        let mut end = start;
        while i + 1 < indices.len() && indices[i + 1] == end + 1 {
            i += 1;
            end = indices[i];
        }
        parts.push(if end > start {
            format!("{start}-{end}")
        } else {
            start.to_string()
        });
        i += 1;
    }
    parts.join(",")
}

/// The GPU processor a cell's target names: `gfx90a` of `gfx90a:xnack-`.
pub fn processor(target: &str) -> &str {
    target.split(':').next().unwrap_or(target)
}

/// The array's tasks, one per job, with the GPUs each asks for.
pub fn tasks(plan: &Plan, jobs: &[Job], s: &SlurmSettings) -> Result<Vec<Task>, SlurmError> {
    let by_id: BTreeMap<&str, &super::Cell> =
        plan.cells.iter().map(|c| (c.id.as_str(), c)).collect();
    let mut out = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        let index = i + 1;
        let mut gres: Option<(Gres, &str)> = None;
        for id in &job.cell_ids {
            let Some(cell) = by_id.get(id.as_str()) else {
                continue;
            };
            let Some(g) = cell_gres(cell, s) else {
                continue;
            };
            gres = match gres {
                None => Some((g, id)),
                Some((have, first)) if have.kind != g.kind => {
                    return Err(SlurmError::MixedGpus {
                        task: index,
                        a: first.to_string(),
                        ga: have.to_string(),
                        b: id.clone(),
                        gb: g.to_string(),
                    })
                }
                Some((have, first)) => Some((
                    Gres {
                        kind: have.kind,
                        count: have.count.max(g.count),
                    },
                    first,
                )),
            };
        }
        out.push(Task {
            index,
            job: job.clone(),
            gres: gres.map(|(g, _)| g),
        });
    }
    Ok(out)
}

/// The GPUs one cell leases, as a gres request (none for a cell without).
pub fn cell_gres(cell: &super::Cell, s: &SlurmSettings) -> Option<Gres> {
    if !cell.wants_gpu() {
        return None;
    }
    let count = if cell.gpu.need == GpuUse::None {
        1
    } else {
        cell.gpu.count.at_least().max(1)
    };
    let kind = cell
        .gpu
        .target
        .as_deref()
        .and_then(|t| s.gres.get(processor(t)))
        .cloned();
    Some(Gres { kind, count })
}

/// The tasks grouped by what they ask for, in order of first appearance.
pub fn arrays(tasks: &[Task]) -> Vec<Array> {
    let mut out: Vec<Array> = Vec::new();
    for t in tasks {
        match out.iter_mut().find(|a| a.gres == t.gres) {
            Some(a) => a.tasks.push(t.index),
            None => out.push(Array {
                gres: t.gres.clone(),
                tasks: vec![t.index],
            }),
        }
    }
    out
}

/// What the script runs and where its tasks write.
#[derive(Debug, Clone)]
pub struct ScriptPaths {
    /// The rocmatrix binary the tasks run (`rocmatrix` on the PATH, or an
    /// absolute path).
    pub rocmatrix: String,
    /// The shared directory: task `K` writes its run store under
    /// `DIR/shards/K` and its output to `DIR/logs/K.out`.
    pub dir: String,
    /// More arguments for every task's `rocmatrix run` (`--registry REF`).
    pub run_args: Vec<String>,
}

impl Default for ScriptPaths {
    fn default() -> Self {
        ScriptPaths {
            rocmatrix: "rocmatrix".into(),
            dir: "rocmatrix-slurm".into(),
            run_args: Vec::new(),
        }
    }
}

/// The `sbatch` options every array of the plan shares, in order.
pub fn common_options(name: &str, s: &SlurmSettings, paths: &ScriptPaths) -> Vec<String> {
    let mut o = vec![
        format!(
            "--job-name=rocmatrix-{}",
            crate::matrix_file::cell_id::sanitize(name)
        ),
        format!("--output={}/logs/%a.out", paths.dir),
    ];
    if let Some(p) = &s.partition {
        o.push(format!("--partition={p}"));
    }
    if let Some(a) = &s.account {
        o.push(format!("--account={a}"));
    }
    if let Some(t) = &s.time {
        o.push(format!("--time={t}"));
    }
    o.extend(s.args.iter().cloned());
    o
}

/// The array job as an `sbatch` script. With one kind of request it is
/// submitted as it is (`sbatch FILE`); otherwise its header names the
/// `sbatch --array=… --gres=…` line for each group of tasks.
pub fn script(plan: &Plan, tasks: &[Task], s: &SlurmSettings, paths: &ScriptPaths) -> String {
    let arrays = arrays(tasks);
    let mut out = String::from("#!/bin/bash\n");
    out.push_str(&format!(
        "# Generated by `rocmatrix plan --format slurm` for {} ({} cells in {} array tasks).\n",
        plan.name,
        plan.cells.len(),
        tasks.len()
    ));
    out.push_str(&format!(
        "# Submit it from the directory of the matrix file, with {dir}/logs present:\n#   mkdir -p {dir}/logs\n",
        dir = paths.dir
    ));
    let single = arrays.len() == 1;
    if single {
        out.push_str("#   sbatch THIS-SCRIPT\n");
    } else {
        for a in &arrays {
            out.push_str(&format!(
                "#   sbatch --array={}{} THIS-SCRIPT\n",
                a.spec(),
                a.gres
                    .as_ref()
                    .map(|g| format!(" --gres={g}"))
                    .unwrap_or_default()
            ));
        }
    }
    out.push_str(&format!(
        "# Then merge the shards: {} report merge {}/shards/*/runs/* --out {}/report\n",
        paths.rocmatrix, paths.dir, paths.dir
    ));
    for o in common_options(&plan.name, s, paths) {
        out.push_str(&format!("#SBATCH {o}\n"));
    }
    if let [a] = arrays.as_slice() {
        out.push_str(&format!("#SBATCH --array={}\n", a.spec()));
        if let Some(g) = &a.gres {
            out.push_str(&format!("#SBATCH --gres={g}\n"));
        }
    }
    out.push_str(&body(tasks, paths));
    out
}

/// Set (by `run --resume DIR --executor slurm --rerun-failed`) in the
/// environment of a submission whose tasks resume their shards with
/// `--rerun-failed`.
pub const RERUN_FAILED_VAR: &str = "ROCMATRIX_RERUN_FAILED";

/// The script's commands: pick the task's `rocmatrix run`, resume the
/// shard's run store when an earlier attempt left one.
fn body(tasks: &[Task], paths: &ScriptPaths) -> String {
    let mut b = String::from("set -euo pipefail\n");
    b.push_str(
        "task=${SLURM_ARRAY_TASK_ID:?this script is a Slurm job array: submit it with sbatch}\n",
    );
    b.push_str("case $task in\n");
    for t in tasks {
        let cmd = t
            .job
            .command
            .strip_prefix("rocmatrix ")
            .unwrap_or(&t.job.command);
        b.push_str(&format!("  {}) set -- {cmd} ;;\n", t.index));
    }
    b.push_str(
        "  *) echo \"rocmatrix: no array task $task in this script\" >&2; exit 2 ;;\nesac\n",
    );
    let extra: String = paths
        .run_args
        .iter()
        .map(|a| format!(" {}", shell_quote(a)))
        .collect();
    b.push_str(&format!(
        "out={}/shards/$task\n\
         # A shard run that an earlier attempt left: finish it (cells without a\n\
         # record, and those the infrastructure broke, run again; with\n\
         # ${var} set, the failed ones too). The array is one run: its\n\
         # merged report records it, the tasks record nothing of their own.\n\
         for store in \"$out\"/runs/*/; do\n  \
           if [ -d \"$store\" ]; then\n    \
             exec {rm} run --resume \"$store\" ${{{var}:+--rerun-failed}} --out \"$out\" --history off --progress plain{extra}\n  \
           fi\n\
         done\n\
         exec {rm} \"$@\" --out \"$out\" --history off --progress plain{extra}\n",
        shell_quote(&paths.dir),
        rm = shell_quote(&paths.rocmatrix),
        var = RERUN_FAILED_VAR,
    ));
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix_file::Spec;
    use crate::plan::jobs::{jobs, JobRequest, Runners};
    use std::path::Path;

    const MATRIX: &str = "name: m
matrix:
  gfx: [gfx90a, gfx942, gfx1100]
  os: [a, b]
gpu: {need: required, target: '{{ matrix.gfx }}', count: 2}
steps:
  - {name: s, run: 'true'}
";

    fn make(group_by: &[&str], shards: Option<usize>) -> (Plan, Result<Vec<Task>, SlurmError>) {
        let spec = Spec::parse(Path::new("m.yaml"), MATRIX).unwrap();
        let plan = Plan::build(&spec, 100).unwrap();
        let req = JobRequest {
            only: Vec::new(),
            group_by: group_by.iter().map(|s| s.to_string()).collect(),
            shards,
        };
        let jobs = jobs(
            &spec,
            &plan,
            Path::new("m.yaml"),
            &req,
            SLURM,
            Runners::None,
        )
        .unwrap();
        let s = SlurmSettings {
            gres: [("gfx90a", "mi250"), ("gfx942", "mi300x")]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            ..Default::default()
        };
        let t = tasks(&plan, &jobs, &s);
        (plan, t)
    }

    #[test]
    fn gres_types_come_from_the_table_and_tasks_group_by_them() {
        let (plan, t) = make(&["gfx"], Some(2));
        let t = t.unwrap();
        assert_eq!(t.len(), 6);
        assert_eq!(t[0].gres.as_ref().unwrap().to_string(), "gpu:mi250:2");
        assert_eq!(t[2].gres.as_ref().unwrap().to_string(), "gpu:mi300x:2");
        // No type for gfx1100 in the table: any GPU.
        assert_eq!(t[5].gres.as_ref().unwrap().to_string(), "gpu:2");
        let arrays = arrays(&t);
        assert_eq!(arrays.len(), 3);
        assert_eq!(arrays[1].spec(), "3-4");
        let text = script(
            &plan,
            &t,
            &SlurmSettings::default(),
            &ScriptPaths::default(),
        );
        assert!(
            text.contains("#   sbatch --array=3-4 --gres=gpu:mi300x:2 THIS-SCRIPT"),
            "{text}"
        );
        assert!(!text.contains("#SBATCH --array"), "{text}");
        assert!(
            text.contains("  3) set -- run m.yaml --only gfx=gfx942 --shard 1/2 ;;"),
            "{text}"
        );
    }

    #[test]
    fn a_task_of_two_gpu_kinds_is_refused_naming_the_cells() {
        let (_, t) = make(&[], Some(2));
        let err = t.unwrap_err().to_string();
        assert!(
            err.contains("cells gfx90a.a and gfx942.a share array task 1"),
            "{err}"
        );
        assert!(err.contains("--group-by"), "{err}");
    }

    #[test]
    fn index_ranges_join_runs() {
        assert_eq!(index_ranges(&[1, 2, 3, 5, 7, 8]), "1-3,5,7-8");
        assert_eq!(index_ranges(&[4]), "4");
    }
}
