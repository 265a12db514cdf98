//! `rocmatrix report`: (re)build a run's reports, merge shard runs, or
//! report on plain directories of JUnit files.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::error::{Error, ExitCode, FailOn};
use crate::finish::Finish;
use crate::matrix_file::JunitFiles;
use crate::results::Source;

#[derive(Debug, Args)]
pub struct Judge {
    /// Classify regressions against this run directory or results.json.
    #[arg(long, value_name = "RUN_DIR|results.json")]
    pub baseline: Option<PathBuf>,
    /// What makes the exit code 1.
    #[arg(long, value_enum, default_value_t = FailOn::Failure)]
    pub fail_on: FailOn,
    /// One merged junit.xml, or junit/<cell>.xml per cell (default: the
    /// matrix file's `report.junit`, else merged).
    #[arg(long, value_enum, value_name = "FILES")]
    pub junit: Option<JunitFiles>,
    #[command(flatten)]
    pub history: super::history::HistoryOption,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub command: Option<ReportCommand>,
    /// The run directory (reports go to RUN/report/).
    #[arg(required = true)]
    pub run: Option<PathBuf>,
    #[command(flatten)]
    pub judge: Judge,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Merge shard runs of one plan into one report.
    Merge {
        /// The shard run directories.
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// Where the merged reports go.
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        judge: Judge,
    },
    /// Build reports from plain directories of JUnit files.
    Junit {
        /// Directories of JUnit files (*.xml, searched recursively).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Each DIR is one cell, named after the directory.
        #[arg(long)]
        cell_from_dir: bool,
        /// Where the reports go.
        #[arg(long, default_value = "report")]
        out: PathBuf,
        #[command(flatten)]
        judge: Judge,
    },
}

/// `--out DIR` must be a directory, or not exist yet.
fn out_dir(out: &std::path::Path) -> Result<(), Error> {
    match std::fs::metadata(out) {
        Ok(m) if !m.is_dir() => Err(Error::Usage(format!(
            "--out {}: is a file, not a directory; --out names the directory the reports \
             are written into (it is created when missing)",
            out.display()
        ))),
        _ => Ok(()),
    }
}

pub fn run(args: ReportArgs, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let (mut summary, judge, unrecorded) = match args.command {
        Some(ReportCommand::Merge { runs, out, judge }) => {
            out_dir(&out)?;
            let src = Source::runs(&runs)?;
            let (history, unrecorded) = recorder(&judge, &runs);
            let finish = Finish {
                baseline: judge.baseline.as_deref(),
                junit: judge.junit,
                history,
            };
            let built = crate::finish::source_into(src, &out, &finish)?;
            (built, judge, unrecorded)
        }
        Some(ReportCommand::Junit {
            dirs,
            cell_from_dir,
            out,
            judge,
        }) => {
            if !cell_from_dir {
                return Err(Error::Usage(
                    "report junit needs --cell-from-dir: each DIR is one cell, named after the directory"
                        .into(),
                ));
            }
            out_dir(&out)?;
            let src = Source::junit_dirs(&dirs)?;
            let finish = Finish {
                baseline: judge.baseline.as_deref(),
                junit: Some(judge.junit.unwrap_or_default()),
                history: None,
            };
            (crate::finish::source_into(src, &out, &finish)?, judge, None)
        }
        None => {
            let Some(run) = args.run else {
                return Err(Error::Usage("report needs a run directory".into()));
            };
            let judge = args.judge;
            let (history, unrecorded) = recorder(&judge, std::slice::from_ref(&run));
            let finish = Finish {
                baseline: judge.baseline.as_deref(),
                junit: judge.junit,
                history,
            };
            let built = crate::finish::run_store(&run, &finish)?;
            (built, judge, unrecorded)
        }
    };
    for w in &summary.warnings {
        tracing::warn!("{w}");
    }
    super::write_out(out, &summary.lines())?;
    if let Some(line) = unrecorded {
        super::write_out(out, &line)?;
    }
    super::write_out(out, &summary.history)?;
    if judge.fail_on == FailOn::Regression {
        super::write_out(out, &discount_flaky(&mut summary))?;
    }
    Ok(ExitCode::of_report(&summary, judge.fail_on))
}

/// Where the run stores `runs` are recorded: by default the history beside
/// them; a run directory that is not in a run root's `runs/` (a copy, an
/// artifact) only where `--history` says — else the line saying so.
fn recorder(
    judge: &Judge,
    runs: &[PathBuf],
) -> (Option<crate::history::past::Recorder>, Option<String>) {
    let Some(first) = runs.first() else {
        return (None, None);
    };
    match (&judge.history.history, crate::store::layout::root_of(first)) {
        (None, None) => (
            None,
            Some(format!(
                "history: not recorded: {} is not in a runs/ folder; give --history to record it\n",
                first.display()
            )),
        ),
        (_, root) => (
            Some(crate::history::past::Recorder {
                location: judge.history.location(&root.unwrap_or_default()),
                runs: runs.to_vec(),
            }),
            None,
        ),
    }
}

/// `--fail-on regression`: new failures that the history knows as flaky
/// are not counted; says which, in a line.
pub fn discount_flaky(summary: &mut crate::report::ReportSummary) -> String {
    let (Some(count), known) = (summary.regressions, &summary.flaky_regressions) else {
        return String::new();
    };
    if known.is_empty() {
        return String::new();
    }
    summary.regressions = Some(count.saturating_sub(known.len() as u64));
    format!(
        "history: {} not counted as regressions (flaky in the history): {}\n",
        crate::run::progress::count(known.len(), "flaky test"),
        known.join(", ")
    )
}
