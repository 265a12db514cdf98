//! `rocmatrix run FILE` and `rocmatrix run --resume RUN`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::affected::Selection;
use crate::error::{Error, ExitCode, RunExit};
use crate::image::network::NetworkChoice;
use crate::matrix_file::{Spec, DEFAULT_MAX_CELLS};
use crate::plan::Shard;
use crate::run::progress::{self, ProgressMode};
use crate::run::runner::{self, RunReport, RunRequest, RunSource};
use crate::run::{RunOptions, RunStore};
use crate::stop::signals::Interrupt;
use crate::store::record::RunManifest;
use crate::store::DEFAULT_OUT;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The matrix file (not needed with --resume).
    #[arg(required_unless_present = "resume")]
    pub file: Option<PathBuf>,
    /// Run the unfinished cells of an earlier run (its directory or id).
    #[arg(long, value_name = "RUN", conflicts_with_all = ["only", "shard", "affected_by"])]
    pub resume: Option<PathBuf>,
    /// With --resume: run the cells that failed, timed out or ran out of
    /// memory again too (resume alone reruns only those without a record and
    /// those the infrastructure broke, status `error`).
    #[arg(long, requires = "resume")]
    pub rerun_failed: bool,
    /// Keep only cells with AXIS=VALUE (repeatable).
    #[arg(long, value_name = "AXIS=VALUE", value_parser = super::parse_pair)]
    pub only: Vec<(String, String)>,
    /// Run only shard K of N.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
    /// Cells run in parallel (default: the number of cores, capped by the
    /// matrix file's max_parallel).
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Environments (base image and environment image) prepared in
    /// parallel (default: twice the cores, at least 2, at most 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub build_jobs: Option<u32>,
    /// Where run directories go (`<out>/runs/<run-id>`).
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// Network for image builds: auto (probe the bridge, else host), bridge, host, or a network name.
    #[arg(long, default_value = "auto")]
    pub network: String,
    /// Stop starting cells after the first failure (overrides the matrix file).
    #[arg(long)]
    pub fail_fast: bool,
    /// Extra attempts after infrastructure errors (overrides the matrix file).
    #[arg(long)]
    pub retries: Option<u32>,
    #[arg(long, default_value_t = DEFAULT_MAX_CELLS)]
    pub max_cells: usize,
    #[command(flatten)]
    pub gpus: super::GpuSource,
    #[command(flatten)]
    pub judge: super::report::Judge,
    /// Rebuild environments with the exact package versions of this lock.json.
    #[arg(long, value_name = "LOCK")]
    pub locked: Option<PathBuf>,
    /// Scan each environment image's libraries for offload code and add a
    /// gfx coverage table per environment to the HTML report.
    #[arg(long)]
    pub coverage: bool,
    /// Share environment images through this registry repository (e.g.
    /// ghcr.io/org/rocmatrix): pull `<REF>/env:<hash>` before building,
    /// push after; overrides the matrix file's `registry:`.
    #[arg(long, value_name = "REF", value_parser = crate::matrix_file::parse_registry)]
    pub registry: Option<String>,
    #[command(flatten)]
    pub cluster: super::slurm_run::ClusterArgs,
    /// After the run, find where each signature new against --baseline
    /// started (and each gone one was fixed): `rocmatrix triage` (without
    /// --baseline, the history names the good end).
    #[arg(long)]
    pub triage: bool,
    #[command(flatten)]
    pub triage_budget: super::triage::BudgetArg,
    #[command(flatten)]
    pub affected: crate::affected::args::AffectedArgs,
}

pub fn run(args: RunArgs, cx: &super::Context, out: &mut dyn Write) -> Result<ExitCode, Error> {
    if !args.cluster.is_local() {
        if args.triage {
            // Triage probes one run store; an array leaves one per shard.
            return Err(Error::Usage(
                "--triage is not supported with --executor slurm yet: the array leaves one run \
                 store per shard (DIR/shards/*/runs/); run `rocmatrix triage` on the shard whose \
                 signature you want triaged"
                    .into(),
            ));
        }
        return super::slurm_run::run(&args, cx, out);
    }
    let (source, settings) = source(&args)?;
    let total = match &source {
        RunSource::New(m) => m.cells.len(),
        RunSource::Resume { store, .. } => store.manifest()?.cells.len(),
    };
    if args.affected.on() && total == 0 {
        super::write_out(out, "nothing to run\n")?;
        return Ok(ExitCode::Success);
    }
    let listener: Arc<dyn crate::run::events::Listener> =
        Arc::from(progress::listener(args.progress, total));
    let gate = args.gpus.gate()?;
    // Every CDI device a cell names must exist before anything starts.
    if let RunSource::New(manifest) = &source {
        for cell in &manifest.cells {
            gate.cdi
                .check(&cell.gpu.cdi)
                .map_err(|e| Error::Usage(format!("cell {}: {e}", cell.id)))?;
        }
    }
    let request = RunRequest {
        source,
        out: args.out.clone(),
        options: options(&args, settings)?,
        listeners: vec![listener],
        gpus: gate,
        // Each cell judged by its tests as it finishes, as the report will.
        judge: Some(Arc::new(crate::results::judge::ByTests::new())),
    };
    // A bad budget is refused before anything runs.
    args.triage_budget.parse()?;
    let (report, triaged) = cx.runtime.block_on(async {
        let interrupt = Interrupt::install();
        let engine = cx.engine().await?;
        let report = runner::run(&engine, request, interrupt.clone())
            .await
            .map_err(Error::from)?;
        let triaged = match args.triage && !report.outcome.interrupted {
            true => Some(triage(&args, cx, &report, interrupt).await),
            false => None,
        };
        Ok::<_, Error>((report, triaged))
    })?;
    let (mut text, code) = finish_and_judge(
        &report,
        &args.judge,
        &args.judge.history.location(&args.out),
    );
    let code = match triaged {
        Some(Ok(t)) => {
            text.push_str(&crate::triage::report::text(&t.triage));
            if t.interrupted {
                ExitCode::Interrupted
            } else {
                code
            }
        }
        // The run's own results stand; the triage says why it did not.
        Some(Err(e)) => {
            text.push_str(&format!("could not triage: {e}\n"));
            code
        }
        None => code,
    };
    super::write_out(out, &text)?;
    Ok(code)
}

/// `--triage`: the finished run triaged against its baseline, before its
/// reports are written (they show the triage's lines).
async fn triage(
    args: &RunArgs,
    cx: &super::Context<'_>,
    report: &RunReport,
    interrupt: Interrupt,
) -> Result<crate::triage::drive::Finished, Error> {
    let root = report.store.root();
    let setup = super::triage::Setup {
        out: &root,
        budget: &args.triage_budget,
        progress: crate::run::progress::ProgressMode::Quiet,
        network: &args.network,
        max_cells: args.max_cells,
        gpus: &args.gpus,
        history: args.judge.history.location(&args.out),
    };
    super::triage::carry_out(
        cx,
        &report.store.dir,
        args.judge.baseline.as_deref(),
        &setup,
        interrupt,
    )
    .await
}

/// What the matrix file (or the command line over it) says about running.
struct Settings {
    fail_fast: bool,
    retries: u32,
    max_parallel: Option<usize>,
    registry: Option<String>,
}

/// The cells to run — a new plan of a matrix file, or an earlier run to
/// resume — and the settings that come with them.
fn source(args: &RunArgs) -> Result<(RunSource, Settings), Error> {
    match (&args.resume, &args.file) {
        (Some(run), _) => Ok((
            RunSource::Resume {
                store: RunStore::open(run, &args.out)?,
                rerun_failed: args.rerun_failed,
            },
            Settings {
                fail_fast: args.fail_fast,
                retries: args.retries.unwrap_or(1),
                max_parallel: None,
                registry: None,
            },
        )),
        (None, Some(file)) => {
            let spec = Spec::load(file)?;
            // LLVM trees at their commits now, or the lock's (--locked).
            let lock = match &args.locked {
                Some(p) => Some(crate::store::lock::Lock::load(p)?),
                None => None,
            };
            let plan = super::plan_of(&spec, args.max_cells, lock.as_ref())?
                .select(&args.only)
                .map_err(|e| Error::Usage(e.to_string()))?;
            let (mut plan, selection) = args.affected.narrow(&spec, plan, &args.out)?;
            eprint!("{}", crate::affected::args::lines(selection.as_ref()));
            if let Some(s) = args.shard {
                plan = plan.shard(s);
            }
            let settings = Settings {
                fail_fast: spec.fail_fast || args.fail_fast,
                retries: args.retries.unwrap_or(spec.retries),
                max_parallel: spec.max_parallel,
                registry: spec.registry.clone(),
            };
            let mut manifest = RunManifest::planned(&spec, &plan);
            manifest.selected_by = selection.as_ref().map(Selection::recorded);
            Ok((RunSource::New(Box::new(manifest)), settings))
        }
        (None, None) => Err(Error::Usage("give a matrix file or --resume RUN".into())),
    }
}

/// The scheduler's options: jobs (default: the cores, at most the matrix
/// file's `max_parallel`), retries, network, the lock to rebuild from.
fn options(args: &RunArgs, settings: Settings) -> Result<RunOptions, Error> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    Ok(RunOptions {
        jobs: args
            .jobs
            .unwrap_or(cores)
            .min(settings.max_parallel.unwrap_or(usize::MAX))
            .max(1),
        build_jobs: args
            .build_jobs
            .map(|n| n as usize)
            .unwrap_or_else(crate::run::default_build_jobs),
        fail_fast: settings.fail_fast,
        retries: settings.retries,
        network: NetworkChoice::parse(&args.network),
        work_dir: crate::dirs::cache_dir().join("bootstrap"),
        locked: match &args.locked {
            Some(p) => Some(Arc::new(crate::store::lock::Lock::load(p)?)),
            None => None,
        },
        coverage: args.coverage,
        registry: args.registry.clone().or(settings.registry),
    })
}

/// Finishes the run (its reports written, the run recorded into the
/// history: `src/finish/`) and judges it: the summary table, the reports'
/// line and the exit code. The reports judge tests against `expect:` and
/// the baseline; the run itself knows about interruptions and
/// infrastructure errors. With `--fail-on regression`, new failures the
/// history knows as flaky are not counted.
fn finish_and_judge(
    report: &RunReport,
    judge: &super::report::Judge,
    history: &crate::history::Location,
) -> (String, ExitCode) {
    let mut text = crate::finish::summary::table(report);
    let finish = crate::finish::Finish {
        baseline: judge.baseline.as_deref(),
        junit: judge.junit,
        history: Some(crate::history::past::Recorder {
            location: history.clone(),
            runs: vec![report.store.dir.clone()],
        }),
    };
    let code = match crate::finish::run_store(&report.store.dir, &finish) {
        Ok(mut r) => {
            text.push_str(&format!(
                "{}report: {}\n",
                r.lines(),
                crate::store::layout::report_of(&report.store.dir)
                    .join("index.html")
                    .display()
            ));
            for w in &r.warnings {
                text.push_str(&format!("warning: {w}\n"));
            }
            text.push_str(&r.history);
            if judge.fail_on == crate::error::FailOn::Regression {
                text.push_str(&super::report::discount_flaky(&mut r));
            }
            RunExit::of(report, Some(&r), judge.fail_on)
        }
        Err(e) => {
            text.push_str(&format!("the reports could not be written: {e}\n"));
            RunExit::of(report, None, judge.fail_on)
        }
    };
    text.push_str(&code.line());
    text.push('\n');
    (text, code.code)
}
