//! `rocmatrix bisect MATRIX --axis AXIS|--source NAME --good X --bad Y` and
//! `rocmatrix bisect --resume DIR`: arguments → a [`Begin`] and probe
//! options → [`crate::bisect::bisect`]; the exit code from
//! [`ExitCode::of_bisect`].

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::bisect::judge::{Regress, TimeoutIs};
use crate::bisect::store::Request;
use crate::bisect::{Begin, Options, What};
use crate::error::{Error, ExitCode};
use crate::image::network::NetworkChoice;
use crate::matrix_file::DEFAULT_MAX_CELLS;
use crate::run::progress::ProgressMode;
use crate::stop::signals::Interrupt;
use crate::store::DEFAULT_OUT;

#[derive(Debug, Args)]
pub struct BisectArgs {
    /// The matrix file (not needed with --resume).
    #[arg(required_unless_present = "resume")]
    pub file: Option<PathBuf>,
    /// Resume an interrupted bisection (its directory, or its id under
    /// <out>/bisects).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["file", "axis", "source", "good", "bad", "only", "signature"])]
    pub resume: Option<PathBuf>,
    /// Search the values of this axis (in the matrix file's order, or
    /// version order when all are versions).
    #[arg(long, value_name = "AXIS", conflicts_with = "source", required_unless_present_any = ["resume", "source"])]
    pub axis: Option<String>,
    /// Search the commits of this git source between --good and --bad.
    #[arg(long, value_name = "NAME")]
    pub source: Option<String>,
    /// The end that does not show the signature (a value, or a revision).
    #[arg(long, value_name = "VALUE|REV", required_unless_present = "resume")]
    pub good: Option<String>,
    /// The end that shows it.
    #[arg(long, value_name = "VALUE|REV", required_unless_present = "resume")]
    pub bad: Option<String>,
    /// With --source: every commit of the range, not only the first-parent chain.
    #[arg(long, requires = "source")]
    pub all_commits: bool,
    /// Fix every other axis: AXIS=VALUE (repeatable).
    #[arg(long, value_name = "AXIS=VALUE", value_parser = super::parse_pair)]
    pub only: Vec<(String, String)>,
    /// Judge by this signature: its id (`explain --json`) or a piece of its
    /// text. Default: the signatures the bad end shows.
    #[arg(long, value_name = "TEXT")]
    pub signature: Option<String>,
    /// error: the first point that shows the signature; success: the first
    /// point where it is gone (a fix; --bad is then the older end).
    #[arg(long, value_enum, default_value_t = Regress::Error)]
    pub regress: Regress,
    /// What a probe that times out counts as.
    #[arg(long, value_enum, default_value_t = TimeoutIs::Skip)]
    pub timeout_is: TimeoutIs,
    /// Probe each judged point N more times; points whose probes disagree
    /// are flaky and skipped.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub retries: u32,
    /// Probe K points at once (a k-ary search).
    #[arg(long, short, default_value_t = 1, value_name = "K")]
    pub jobs: usize,
    /// Where bisections go (`<out>/bisects/<id>`).
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
}

pub fn run(args: BisectArgs, cx: &super::Context, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let begin = begin(&args)?;
    let gate = args.gpus.gate()?;
    let opts = Options {
        out: args.out.clone(),
        max_cells: args.max_cells,
        run: super::replanned_options(NetworkChoice::parse(&args.network)),
        progress: args.progress,
        gpus: gate,
        cache: crate::dirs::cache_dir(),
        probe_reports: super::probe_reports,
    };
    let say = |line: &str| eprintln!("{line}");
    let finished = cx.runtime.block_on(async {
        let interrupt = Interrupt::install();
        let engine = cx.engine().await?;
        crate::bisect::bisect(&engine, begin, opts, interrupt, &say)
            .await
            .map_err(Error::from)
    })?;
    let text = crate::bisect::report::text(&finished.bisection, &finished.store);
    super::write_out(out, &text)?;
    Ok(ExitCode::of_bisect(
        finished.interrupted,
        finished.bisection.answer.as_ref().map(|a| a.outcome),
    ))
}

/// A new bisection from the arguments, or the one to resume.
fn begin(args: &BisectArgs) -> Result<Begin, Error> {
    if let Some(dir) = &args.resume {
        return Ok(Begin::Resume(dir.clone()));
    }
    let (Some(file), Some(good), Some(bad)) = (&args.file, &args.good, &args.bad) else {
        return Err(Error::Usage(
            "give a matrix file, --good and --bad, or --resume DIR".into(),
        ));
    };
    let what = match (&args.axis, &args.source) {
        (Some(a), None) => What::Axis(a.clone()),
        (None, Some(s)) => What::Source {
            name: s.clone(),
            all_commits: args.all_commits,
        },
        _ => {
            return Err(Error::Usage(
                "give one of --axis AXIS or --source NAME".into(),
            ))
        }
    };
    if args.jobs == 0 {
        return Err(Error::Usage("--jobs must be at least 1".into()));
    }
    Ok(Begin::New {
        matrix: file.clone(),
        what,
        request: Request {
            matrix_file: String::new(),
            matrix_hash: String::new(),
            only: args.only.clone(),
            good: good.clone(),
            bad: bad.clone(),
            regress: args.regress,
            signature: args.signature.clone(),
            timeout_is: args.timeout_is,
            retries: args.retries,
            jobs: args.jobs,
            pins: Vec::new(),
        },
    })
}
