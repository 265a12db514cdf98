//! `rocmatrix report`: (re)build a run's reports, merge shard runs, or
//! report on plain directories of JUnit files.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::error::{Error, ExitCode, FailOn};
use crate::report;
use crate::results::Source;
use crate::spec::JunitFiles;

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
    // The run stores a report is of, recorded into the history after it.
    let mut recorded: Vec<PathBuf> = Vec::new();
    let mut results_at: Option<PathBuf> = None;
    let (mut summary, judge) = match args.command {
        Some(ReportCommand::Merge { runs, out, judge }) => {
            out_dir(&out)?;
            let mut src = Source::runs(&runs)?;
            src.report.junit = judge.junit.unwrap_or(src.report.junit);
            let built = report::build(&src, &out, judge.baseline.as_deref())?;
            recorded = runs;
            results_at = Some(out);
            (built, judge)
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
            let mut src = Source::junit_dirs(&dirs)?;
            src.report.junit = judge.junit.unwrap_or_default();
            (report::build(&src, &out, judge.baseline.as_deref())?, judge)
        }
        None => {
            let Some(run) = args.run else {
                return Err(Error::Usage("report needs a run directory".into()));
            };
            let built =
                report::write_reports(&run, args.judge.baseline.as_deref(), args.judge.junit)?;
            results_at = Some(run.clone());
            recorded = vec![run];
            (built, args.judge)
        }
    };
    for w in &summary.warnings {
        tracing::warn!("{w}");
    }
    super::write_out(out, &summary.lines())?;
    if let (Some(at), Some(first)) = (results_at, recorded.first()) {
        // By default the history beside the run stores: a run directory
        // that is not in a run root's runs/ (a copy, an artifact) records
        // only where --history says.
        let location = match (&judge.history.history, crate::store::layout::root_of(first)) {
            (None, None) => None,
            (_, root) => Some(judge.history.location(&root.unwrap_or_default())),
        };
        match location {
            None => super::write_out(
                out,
                &format!(
                    "history: not recorded: {} is not in a runs/ folder; give --history to record it\n",
                    first.display()
                ),
            )?,
            Some(location) => {
                super::write_out(out, &record_history(&location, &recorded, &at))?;
                if judge.fail_on == FailOn::Regression {
                    let name = crate::results::regress::load_baseline(&at)
                        .map(|r| r.name)
                        .unwrap_or_default();
                    let text = discount_flaky(&mut summary, &location, &at, &name);
                    super::write_out(out, &text)?;
                }
            }
        }
    }
    Ok(ExitCode::of_report(&summary, judge.fail_on))
}

/// `--fail-on regression`: new failures that the history knows as flaky
/// are not counted; says which, in a line. Nothing changes without a
/// baseline's comparison or a usable history.
pub fn discount_flaky(
    summary: &mut crate::report::ReportSummary,
    location: &crate::history::Location,
    results_at: &std::path::Path,
    matrix: &str,
) -> String {
    let Some(count) = summary.regressions else {
        return String::new();
    };
    let Ok(Some(reg)) = crate::results::regress::regressions_of(results_at) else {
        return String::new();
    };
    let Ok(mut history) = crate::history::History::open(location) else {
        return String::new();
    };
    let Ok(flaky) = history.known_flaky(matrix) else {
        return String::new();
    };
    let known: Vec<String> = reg
        .of_class(crate::results::regress::Class::NewFailure)
        .filter(|c| flaky.contains(&(c.cell.clone(), c.display_name())))
        .map(|c| format!("{} in {}", c.display_name(), c.cell))
        .collect();
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

/// Records the run stores `runs` (whose report's results.json is under
/// `results_at`) into the history; one line when it cannot.
pub fn record_history(
    location: &crate::history::Location,
    runs: &[PathBuf],
    results_at: &std::path::Path,
) -> String {
    if *location == crate::history::Location::Off {
        return String::new();
    }
    match crate::results::regress::load_baseline(results_at) {
        Ok(results) => {
            let dirs: Vec<&std::path::Path> = runs.iter().map(PathBuf::as_path).collect();
            crate::history::record_and_describe(location, &dirs, &results)
        }
        Err(e) => format!("history: not recorded: the report's results could not be read: {e}\n"),
    }
}
