//! `rocmatrix explain RUN [--json]`: why the cells of a run fail — its
//! failure signatures and the axis values that separate their cells — on
//! the terminal, or as JSON.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::analysis::{collect, load_baseline, signature};
use crate::error::{Error, ExitCode};
use crate::report::{why, ReportError};
use crate::results::junit::Limits;
use crate::results::{NoSink, Source};

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A run directory, a report directory or a results.json.
    pub run: PathBuf,
    /// Print the signatures as JSON (the `signatures` of results.json).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ExplainArgs, out: &mut dyn Write) -> Result<ExitCode, Error> {
    // A run store is read afresh, so the answer never depends on a report
    // written by an older rocmatrix; anything else is a results.json.
    let results = if crate::store::layout::is_run(&args.run) {
        let src = Source::run(&args.run).map_err(ReportError::from)?;
        collect(&src, Limits::default(), &mut NoSink)
    } else {
        let mut r = load_baseline(&args.run).map_err(ReportError::from)?;
        if r.signatures.is_empty() {
            r.signatures = signature::find(&r);
        }
        r
    };
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&results.signatures).map_err(|e| Error::Io {
            path: args.run.clone(),
            source: e.into(),
        })?;
        s.push('\n');
        s
    } else {
        let mut text = why::explain(&results);
        // Where the run's new signatures started (`rocmatrix triage`).
        if let Ok(Some(t)) = crate::triage::store::load(&args.run) {
            text.push('\n');
            text.push_str(&crate::triage::report::text(&t));
        }
        text
    };
    super::write_out(out, &text)?;
    Ok(ExitCode::Success)
}
