//! `rocmatrix repro RUN CELL`: run one cell again from the run's lock and say
//! whether the outcome matches. The run's own environment image is reused
//! when the engine still has it with the lock's package set
//! (`src/run/repro.rs`); `--rebuild` makes it again from the lock.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::error::{Error, ExitCode, ReproOutcome};
use crate::image::network::NetworkChoice;
use crate::reproduce::load_cell;
use crate::reproduce::repro::{confirm, own_image};
use crate::run::progress::{self, ProgressMode};
use crate::run::runner::{self, RunRequest, RunSource};
use crate::run::{RunOptions, RunStore};
use crate::stop::signals::Interrupt;
use crate::store::record::RunManifest;
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
    /// Rebuild the environment from the lock's package versions even when
    /// the run's own image is still in the engine (proves the lock rebuilds).
    #[arg(long)]
    pub rebuild: bool,
    #[command(flatten)]
    pub gpus: super::GpuSource,
}

/// `repro`: one cell again from its lock, compared with its recorded
/// result. One piece: the image chosen, the cell run and compared, in the
/// order the command says them.
pub fn run(args: ReproArgs, cx: &super::Context, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let store = RunStore::open(&args.run, &args.out)?;
    let (manifest, cell, before, lock) = load_cell(&store, &args.cell)?;
    let before = before.ok_or_else(|| {
        Error::Usage(format!(
            "cell {} has no result in {} to compare with",
            args.cell,
            store.dir.display()
        ))
    })?;
    let owner = format!("{}-repro", manifest.run_id);
    let gpus = args.gpus.gate()?;
    let (own, report) = cx.runtime.block_on(async {
        let engine = cx.engine().await?;
        // The run's own image, when it is provably the lock's: then a run
        // without the lock lands on it (its recipe makes the same tag).
        let own = match (&lock, args.rebuild) {
            (Some(l), false) => match own_image(&engine, &cell, l, &owner).await {
                Ok(own) => Some(own),
                Err(why) => {
                    eprintln!(
                        "environment {}: not reusing the run's own image: {why}; rebuilding it from the lock",
                        crate::digest::short(&cell.environment_hash)
                    );
                    None
                }
            },
            _ => None,
        };
        let request = RunRequest {
            source: RunSource::New(Box::new(RunManifest {
                cells: vec![cell.clone()],
                selected_by: None,
                ..manifest
            })),
            out: args.out.clone(),
            options: options(own.is_some(), lock.as_ref()),
            listeners: vec![Arc::from(progress::listener(args.progress, 1))],
            gpus,
            judge: None,
        };
        let report = runner::run(&engine, request, Interrupt::install())
            .await
            .map_err(Error::from)?;
        Ok::<_, Error>((own, report))
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
    if let (Some(own), Some(lock)) = (&own, &lock) {
        let used = report.outcome.locked_envs.get(&own.environment);
        text.push_str(&confirm(own, used, lock));
        text.push('\n');
    }
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

/// How the cell runs again: alone, once, on the lock unless the run's own
/// image is reused (`reusing_own`).
fn options(reusing_own: bool, lock: Option<&crate::store::lock::Lock>) -> RunOptions {
    RunOptions {
        locked: if reusing_own {
            None
        } else {
            lock.cloned().map(Arc::new)
        },
        ..super::replanned_options(NetworkChoice::Auto)
    }
}
