//! `rocmatrix try RUN --patch NAME=FILE…`: the cells RUN failed (or every
//! cell, `--all`) run again with the patches applied to their sources, in
//! a run store of their own whose report compares against RUN, and a table
//! of what the patches did to each cell (`crate::trial`).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::analysis::load_baseline;
use crate::error::{Error, ExitCode};
use crate::image::network::NetworkChoice;
use crate::report::ReportError;
use crate::run::progress::{self, ProgressMode};
use crate::run::runner::{self, RunRequest, RunSource};
use crate::run::{RunOptions, RunStore};
use crate::stop::signals::Interrupt;
use crate::store::trial::{TrialChange, TrialFile, TrialPatch, TRIAL_VERSION};
use crate::store::DEFAULT_OUT;
use crate::trial::{apply, compare, patch, select, TrialError};

#[derive(Debug, Args)]
pub struct TryArgs {
    /// The run to try the patches against (its directory, or its id under --out).
    pub run: PathBuf,
    /// A patch (unified diff) for the `sources:` entry NAME (repeatable;
    /// they apply in the order given, after the matrix's own patches).
    #[arg(long = "patch", value_name = "NAME=FILE", required = true, value_parser = parse_patch)]
    pub patches: Vec<(String, PathBuf)>,
    /// Try every cell of the run, not only the failing ones.
    #[arg(long)]
    pub all: bool,
    /// Keep only cells with AXIS=VALUE (repeatable).
    #[arg(long, value_name = "AXIS=VALUE", value_parser = super::parse_pair)]
    pub only: Vec<(String, String)>,
    /// Where run directories go (`<out>/runs/<run-id>`).
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// Cells run in parallel (default: the number of cores).
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Network for image builds: auto, bridge, host, or a network name.
    #[arg(long, default_value = "auto")]
    pub network: String,
    #[command(flatten)]
    pub gpus: super::GpuSource,
}

fn parse_patch(s: &str) -> Result<(String, PathBuf), super::BadArg> {
    match s.split_once('=') {
        Some((name, file)) if !name.is_empty() && !file.is_empty() => {
            Ok((name.to_string(), PathBuf::from(file)))
        }
        _ => Err(super::BadArg(format!("`{s}` is not NAME=FILE"))),
    }
}

fn usage(e: TrialError) -> Error {
    Error::Usage(e.0)
}

pub fn run(args: TryArgs, cx: &super::Context, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let store = RunStore::open(&args.run, &args.out)?;
    let manifest = store.manifest()?;
    let before = load_baseline(&store.dir).map_err(ReportError::from)?;
    let cache = crate::dirs::cache_dir();
    let patches = args
        .patches
        .iter()
        .map(|(name, file)| patch::read(name, file, &cache))
        .collect::<Result<Vec<_>, _>>()
        .map_err(usage)?;
    let ask = select::Selection {
        all: args.all,
        only: &args.only,
    };
    let cells = select::cells(&manifest, &before, &ask).map_err(usage)?;
    let tried = apply::patched(&manifest, &cells, &patches).map_err(usage)?;
    apply::check_applies(&tried, &patches, &crate::source::Sources::new(&cache)).map_err(usage)?;

    let request = RunRequest {
        source: RunSource::New(Box::new(tried)),
        out: args.out.clone(),
        options: options(&args),
        listeners: vec![Arc::from(progress::listener(args.progress, cells.len()))],
        gpus: args.gpus.gate()?,
        judge: Some(Arc::new(crate::results::judge::ByTests::new())),
    };
    let report = cx.runtime.block_on(async {
        let engine = cx.engine().await?;
        runner::run(&engine, request, Interrupt::install())
            .await
            .map_err(Error::from)
    })?;
    let dir = &report.store.dir;
    // The try's own report, against RUN; a try is not recorded into the
    // history: its cells ran on a patched source, not the matrix's.
    let finish = crate::finish::Finish {
        baseline: Some(&store.dir),
        ..crate::finish::Finish::reports_only()
    };
    let written = crate::finish::run_store(dir, &finish)?;
    let after = load_baseline(dir).map_err(ReportError::from)?;
    let rows = compare::rows(&cells, &before, &after, &report.outcome.not_run);
    TrialFile {
        try_version: TRIAL_VERSION,
        against_run: manifest.run_id.clone(),
        against_dir: store.dir.display().to_string(),
        patches: patches
            .iter()
            .map(|p| TrialPatch {
                source: p.source.clone(),
                file: p.given.display().to_string(),
                sha256: p.sha256.clone(),
            })
            .collect(),
        cells: rows.clone(),
    }
    .write(dir)?;
    let mut text = compare::text(&rows, &after);
    text.push_str(&format!(
        "{}try run: {}\nreport: {}\n",
        written.lines(),
        dir.display(),
        dir.join("report/index.html").display()
    ));
    let code = if report.outcome.interrupted {
        text.push_str(&format!(
            "interrupted: finish it with `rocmatrix run --resume {}`\n",
            dir.display()
        ));
        ExitCode::Interrupted
    } else if rows.iter().any(|r| r.change == TrialChange::NewlyFailing) {
        ExitCode::TestFailure
    } else if rows.iter().any(|r| r.change == TrialChange::Error)
        || !report.outcome.image_errors.is_empty()
    {
        ExitCode::Infrastructure
    } else {
        ExitCode::Success
    };
    for e in &report.outcome.image_errors {
        text.push_str(&format!("image error: {e}\n"));
    }
    super::write_out(out, &text)?;
    Ok(code)
}

/// How the cells run: as `run` would, without a lock (the run's own
/// environment images are found by their hash).
fn options(args: &TryArgs) -> RunOptions {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    RunOptions {
        jobs: args.jobs.unwrap_or(cores).max(1),
        ..super::replanned_options(NetworkChoice::parse(&args.network))
    }
}
