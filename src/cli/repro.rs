//! `rocmatrix repro RUN CELL`: run one cell again from the run's lock and say
//! whether the outcome matches.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::error::{Error, ExitCode, ReproOutcome};
use crate::image::network::NetworkChoice;
use crate::run::export::load_cell;
use crate::run::progress::{self, ProgressMode};
use crate::run::runner::{self, RunRequest, RunSource};
use crate::run::signals::Interrupt;
use crate::run::{RunOptions, RunStore};
use crate::store::DEFAULT_OUT;

#[derive(Debug, Args)]
pub struct ReproArgs {
    /// The run (its directory, or its id under --out).
    pub run: PathBuf,
    /// The cell id.
    pub cell: String,
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    #[command(flatten)]
    pub gpus: super::GpuSource,
}

pub fn run(args: ReproArgs, cx: &super::Context, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let store = RunStore::open(&args.run, &args.out)?;
    let (mut manifest, cell, before, lock) = load_cell(&store, &args.cell)?;
    let before = before.ok_or_else(|| {
        Error::Usage(format!(
            "cell {} has no result in {} to compare with",
            args.cell,
            store.dir.display()
        ))
    })?;
    manifest.cells = vec![cell];
    let request = RunRequest {
        source: RunSource::Replan(Box::new(manifest)),
        out: args.out.clone(),
        options: RunOptions {
            jobs: 1,
            build_jobs: crate::run::default_build_jobs(),
            fail_fast: false,
            retries: 1,
            network: NetworkChoice::Auto,
            work_dir: crate::dirs::cache_dir().join("bootstrap"),
            locked: lock.map(Arc::new),
            coverage: false,
            registry: None,
        },
        listeners: vec![Arc::from(progress::listener(args.progress, 1))],
        gpus: args.gpus.gate()?,
    };
    let report = cx.runtime.block_on(async {
        let engine = cx.engine().await?;
        runner::run(&engine, request, Interrupt::install())
            .await
            .map_err(Error::from)
    })?;
    if report.outcome.interrupted {
        return Ok(ExitCode::of_repro(ReproOutcome::Interrupted));
    }
    let Some(after) = report.records.first() else {
        let why = report
            .outcome
            .not_run
            .first()
            .map(|(_, r)| r.clone())
            .unwrap_or_default();
        super::write_out(out, &format!("the cell did not run again: {why}\n"))?;
        return Ok(ExitCode::of_repro(ReproOutcome::NotRun));
    };
    let describe = |r: &crate::store::record::CellRecord| {
        format!(
            "{}{}",
            r.status.as_str(),
            r.reason
                .as_ref()
                .map(|x| format!(" ({x})"))
                .unwrap_or_default()
        )
    };
    let mut text = String::new();
    for c in &report.outcome.lock_checks {
        text.push_str(c);
        text.push('\n');
    }
    let same = before.status == after.status && before.reason == after.reason;
    text.push_str(&format!(
        "{}: was {}, now {}\nnew run: {}\n",
        if same {
            "outcome matches"
        } else {
            "outcome differs"
        },
        describe(&before),
        describe(after),
        report.store.dir.display()
    ));
    super::write_out(out, &text)?;
    Ok(ExitCode::of_repro(if same {
        ReproOutcome::Same
    } else {
        ReproOutcome::Differs
    }))
}
