//! `rocmatrix triage RUN [--baseline OLD]` (and `run … --triage`):
//! arguments → [`crate::triage::Options`] → [`crate::triage::triage`];
//! `triage.json` is written into the run, the reports rebuilt to show it,
//! and its lines printed (or the whole of it with `--json`).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::error::{Error, ExitCode};
use crate::image::network::NetworkChoice;
use crate::matrix_file::DEFAULT_MAX_CELLS;
use crate::run::progress::ProgressMode;
use crate::stop::signals::Interrupt;
use crate::store::DEFAULT_OUT;
use crate::triage::{Budget, Options};

#[derive(Debug, Args)]
pub struct TriageArgs {
    /// The run to triage (its directory, or its id under --out).
    pub run: PathBuf,
    /// The run to compare with (a run directory: its lock names the good
    /// inputs). Default: per signature, the last run in the history where
    /// its cell did not show it.
    #[arg(long, value_name = "RUN_DIR")]
    pub baseline: Option<PathBuf>,
    #[command(flatten)]
    pub budget: BudgetArg,
    /// Print triage.json instead of the lines.
    #[arg(long)]
    pub json: bool,
    /// The run root (runs under `runs/`; bisections go under `bisects/`).
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    /// The probes' progress (on stderr).
    #[arg(long, value_enum, default_value_t = ProgressMode::Quiet)]
    pub progress: ProgressMode,
    /// Network for image builds: auto, bridge, host, or a network name.
    #[arg(long, default_value = "auto")]
    pub network: String,
    #[arg(long, default_value_t = DEFAULT_MAX_CELLS)]
    pub max_cells: usize,
    #[command(flatten)]
    pub gpus: super::GpuSource,
    #[command(flatten)]
    pub history: super::history::HistoryOption,
}

/// `--triage-budget`, shared with `run --triage`.
#[derive(Debug, Args, Clone)]
pub struct BudgetArg {
    /// Bound the triage: a number of probes (12) or a time (90s, 30m, 2h);
    /// what it leaves undone is said, and triaging again goes on.
    #[arg(long, value_name = "PROBES|TIME")]
    pub triage_budget: Option<String>,
}

impl BudgetArg {
    pub fn parse(&self) -> Result<Option<Budget>, Error> {
        self.triage_budget
            .as_deref()
            .map(Budget::parse)
            .transpose()
            .map_err(Error::from)
    }
}

/// What a triage needs besides the run and its baseline.
pub struct Setup<'a> {
    pub out: &'a Path,
    pub budget: &'a BudgetArg,
    pub progress: ProgressMode,
    pub network: &'a str,
    pub max_cells: usize,
    pub gpus: &'a super::GpuSource,
    pub history: crate::history::Location,
}

pub fn run(args: TriageArgs, cx: &super::Context, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let store = crate::store::RunStore::open(&args.run, &args.out)?;
    let root = store.root();
    let setup = Setup {
        out: &root,
        budget: &args.budget,
        progress: args.progress,
        network: &args.network,
        max_cells: args.max_cells,
        gpus: &args.gpus,
        history: args.history.location(&root),
    };
    let finished = cx.runtime.block_on(async {
        let interrupt = Interrupt::install();
        carry_out(cx, &store.dir, args.baseline.as_deref(), &setup, interrupt).await
    })?;
    // The pages show the lines beside the signatures.
    let finish = crate::finish::Finish {
        baseline: args.baseline.as_deref(),
        junit: None,
        history: Some(crate::history::past::Recorder {
            location: setup.history.clone(),
            runs: vec![store.dir.clone()],
        }),
    };
    if let Err(e) = crate::finish::run_store(&store.dir, &finish) {
        eprintln!("warning: the reports could not be rewritten: {e}");
    }
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&finished.triage)
            .map_err(|e| Error::io(&store.dir, e.into()))?;
        s.push('\n');
        s
    } else {
        crate::triage::report::text(&finished.triage)
    };
    super::write_out(out, &text)?;
    Ok(if finished.interrupted {
        ExitCode::Interrupted
    } else {
        ExitCode::Success
    })
}

/// Triage `run_dir` (for `triage` and `run --triage`).
pub async fn carry_out(
    cx: &super::Context<'_>,
    run_dir: &Path,
    baseline: Option<&Path>,
    setup: &Setup<'_>,
    interrupt: Interrupt,
) -> Result<crate::triage::drive::Finished, Error> {
    let budget = setup.budget.parse()?;
    let gate = setup.gpus.gate()?;
    let opts = Options {
        out: setup.out.to_path_buf(),
        bisect: crate::bisect::Options {
            out: setup.out.to_path_buf(),
            max_cells: setup.max_cells,
            run: super::replanned_options(NetworkChoice::parse(setup.network)),
            progress: setup.progress,
            gpus: gate,
            cache: crate::dirs::cache_dir(),
            probe_reports: super::probe_reports,
        },
        budget,
        budget_text: setup.budget.triage_budget.clone(),
        history: setup.history.clone(),
    };
    let engine = cx.engine().await?;
    let say = |line: &str| eprintln!("{line}");
    Ok(crate::triage::triage(&engine, run_dir, baseline, opts, interrupt, &say).await?)
}
