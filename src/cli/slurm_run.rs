//! `rocmatrix run FILE --executor slurm` and `run --resume DIR --executor
//! slurm`: the plan as one Slurm job array in the shared directory
//! `--slurm-dir` (src/cluster/), its shards merged into `DIR/report/`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::run::RunArgs;
use crate::cluster::state::{ArrayState, TaskState};
use crate::cluster::{controller, shards, ClusterError};
use crate::error::{Error, ExitCode};
use crate::matrix_file::Spec;
use crate::plan::jobs::{self, JobError, JobRequest, Runners};
use crate::plan::slurm;
use crate::plan::Plan;

/// Where the cells run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Executor {
    /// On this machine.
    #[default]
    Local,
    /// As a Slurm job array, one task per shard (docs/cluster.md).
    Slurm,
}

#[derive(Debug, Clone, Default, Args)]
pub struct ClusterArgs {
    /// Where the cells run: here, or as a Slurm job array (docs/cluster.md).
    #[arg(long, value_enum, default_value_t = Executor::Local)]
    pub executor: Executor,
    /// With --executor slurm: the directory on the cluster's shared file
    /// system that the tasks write their shards' run stores into, and the
    /// merged report goes (DIR/report/).
    #[arg(long, value_name = "DIR", default_value = "rocmatrix-slurm")]
    pub slurm_dir: PathBuf,
    /// With --executor slurm: N array tasks (shards of the plan, or of each
    /// --group-by group); default one per cell.
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// With --executor slurm: tasks of one combination of these axes'
    /// values each (e.g. gfx), so that each asks for one kind of GPU.
    #[arg(long, value_name = "AXIS,…", value_delimiter = ',')]
    pub group_by: Vec<String>,
    #[command(flatten)]
    pub slurm: super::plan::SlurmArgs,
}

impl ClusterArgs {
    pub fn is_local(&self) -> bool {
        self.executor == Executor::Local
    }
}

impl From<ClusterError> for Error {
    fn from(e: ClusterError) -> Self {
        if e.is_usage() {
            Error::Usage(e.to_string())
        } else {
            Error::Cluster(e)
        }
    }
}

fn absolute_lossy(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

fn absolute(p: &Path) -> Result<PathBuf, Error> {
    std::path::absolute(p).map_err(|e| Error::io(p, e))
}

pub fn run(args: &RunArgs, cx: &super::Context, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let (dir, mut state) = match &args.resume {
        Some(dir) => {
            let dir = absolute(dir)?;
            let state = ArrayState::load(&dir)?;
            (dir, state)
        }
        None => {
            let dir = absolute(&args.cluster.slurm_dir)?;
            let (state, plan, registry) = prepare(args, &dir)?;
            let quiet = args.progress == crate::run::progress::ProgressMode::Quiet;
            let said = cx
                .runtime
                .block_on(environments(cx, args, &plan, &dir, registry, quiet))?;
            if !quiet {
                eprint!("{said}");
            }
            (dir, state)
        }
    };
    let todo: Vec<TaskState> = state
        .tasks
        .iter()
        .filter(|t| !t.cell_ids.is_empty() && shards::needs_run(&dir, t, args.rerun_failed))
        .cloned()
        .collect();
    let mut text = String::new();
    let mut interrupted = false;
    if !todo.is_empty() {
        let quiet = args.progress == crate::run::progress::ProgressMode::Quiet;
        let (jobs, followed) = cx.runtime.block_on(controller::execute(
            &dir,
            &mut state,
            &todo,
            quiet,
            args.rerun_failed,
        ))?;
        interrupted = followed.interrupted;
        text.push_str(&controller::mark(&dir, &state, &todo, &jobs, &followed)?);
    }
    let mut summary = shards::merge(
        &dir,
        &state,
        args.judge.baseline.as_deref(),
        args.judge.junit,
        &args.judge.history.location(&args.out),
    )?;
    for w in &summary.warnings {
        text.push_str(&format!("warning: {w}\n"));
    }
    text.push_str(&summary.lines());
    text.push_str(&format!(
        "report: {}\n",
        dir.join("report/index.html").display()
    ));
    text.push_str(&summary.history);
    if args.judge.fail_on == crate::error::FailOn::Regression {
        text.push_str(&super::report::discount_flaky(&mut summary));
    }
    let errors = shards::stores(&dir, &state)
        .iter()
        .map(|d| crate::store::RunStore { dir: d.clone() })
        .any(|s| {
            s.finished_cells().iter().any(|c| {
                s.cell_record(c)
                    .is_ok_and(|r| r.status == crate::store::record::RunStatus::Error)
            })
        });
    if interrupted {
        text.push_str(&format!(
            "interrupted: finish it with `rocmatrix run --resume {} --executor slurm`\n",
            dir.display()
        ));
    }
    super::write_out(out, &text)?;
    Ok(ExitCode::of_array(
        &summary,
        args.judge.fail_on,
        interrupted,
        errors,
    ))
}

/// The plan's environments, made here before the array goes out
/// ([`crate::cluster::prepare`]).
async fn environments(
    cx: &super::Context<'_>,
    args: &RunArgs,
    plan: &Plan,
    dir: &Path,
    registry: Option<String>,
    quiet: bool,
) -> Result<String, Error> {
    let locked = match &args.locked {
        Some(p) => Some(std::sync::Arc::new(crate::store::lock::Lock::load(p)?)),
        None => None,
    };
    let opts = crate::prepare::PrepareOptions {
        build_jobs: args
            .build_jobs
            .map_or_else(crate::prepare::default_build_jobs, |n| n as usize),
        network: crate::image::network::NetworkChoice::parse(&args.network),
        work_dir: crate::dirs::cache_dir().join("bootstrap"),
        locked,
        registry: args.registry.clone().or(registry),
    };
    let engine = cx.engine().await.map_err(|e| e.to_string());
    Ok(crate::cluster::prepare::environments(engine, plan, dir, opts, quiet).await?)
}

/// A new array: the plan, its tasks, the script and the state in `dir`;
/// with the plan and the matrix file's `registry:`.
fn prepare(args: &RunArgs, dir: &Path) -> Result<(ArrayState, Plan, Option<String>), Error> {
    let Some(file) = &args.file else {
        return Err(Error::Usage("give a matrix file or --resume DIR".into()));
    };
    if args.shard.is_some() {
        return Err(Error::Usage(
            "--executor slurm makes the shards itself: give --shards N, not --shard K/N".into(),
        ));
    }
    if ArrayState::path(dir).exists() {
        return Err(Error::Usage(format!(
            "{} holds an earlier array; finish it with `rocmatrix run --resume {} --executor slurm`, \
             or give another --slurm-dir",
            dir.display(),
            dir.display()
        )));
    }
    let file = absolute(file)?;
    let spec = Spec::load(&file)?;
    let plan = Plan::build(&spec, args.max_cells)?
        .select(&args.only)
        .map_err(|e| Error::Usage(e.to_string()))?;
    let (plan, selection) = args.affected.narrow(&spec, plan, &args.out)?;
    let c = &args.cluster;
    let req = JobRequest {
        only: args.only.clone(),
        group_by: c.group_by.clone(),
        shards: c.shards,
    };
    let jobs =
        jobs::jobs(&spec, &plan, &file, &req, slurm::SLURM, Runners::None).map_err(
            |e| match e {
                JobError::Template(e) => Error::Spec(e),
                other => Error::Usage(other.to_string()),
            },
        )?;
    let jobs = crate::affected::args::commands(jobs, selection.as_ref());
    let settings = c.slurm.settings(&spec);
    let state = controller::create(dir, &spec, &plan, &jobs, &settings, run_args(args))?;
    Ok((state, plan, spec.registry.clone()))
}

/// What every task's `rocmatrix run` gets from this command line.
fn run_args(args: &RunArgs) -> Vec<String> {
    let mut a = Vec::new();
    if let Some(r) = &args.registry {
        a.extend(["--registry".to_string(), r.clone()]);
    }
    if let Some(r) = args.retries {
        a.extend(["--retries".to_string(), r.to_string()]);
    }
    if let Some(j) = args.jobs {
        a.extend(["--jobs".to_string(), j.to_string()]);
    }
    if args.fail_fast {
        a.push("--fail-fast".into());
    }
    if let Some(n) = args.build_jobs {
        a.extend(["--build-jobs".to_string(), n.to_string()]);
    }
    if args.network != "auto" {
        a.extend(["--network".to_string(), args.network.clone()]);
    }
    if let Some(lock) = &args.locked {
        a.extend(["--locked".to_string(), absolute_lossy(lock)]);
    }
    if args.coverage {
        a.push("--coverage".into());
    }
    if args.max_cells != crate::matrix_file::DEFAULT_MAX_CELLS {
        a.extend(["--max-cells".to_string(), args.max_cells.to_string()]);
    }
    // Where the tasks find GPUs, when not the standard places.
    let g = &args.gpus;
    for (flag, value, default) in [
        ("--sysfs-root", &g.sysfs_root, "/sys"),
        ("--dev-root", &g.dev_root, "/dev"),
        ("--proc-root", &g.proc_root, "/proc"),
    ] {
        if value != Path::new(default) {
            a.extend([flag.to_string(), absolute_lossy(value)]);
        }
    }
    for d in &g.cdi_spec_dirs {
        a.extend(["--cdi-spec-dir".to_string(), absolute_lossy(d)]);
    }
    a
}
