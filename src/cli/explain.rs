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
    /// Print the signatures as JSON (the `signatures` of results.json),
    /// each with its `triage` where the run was triaged.
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
    // Where the run's new signatures started (`rocmatrix triage`).
    let triage = crate::triage::store::load(&args.run).ok().flatten();
    let text = if args.json {
        let signatures = with_triage(&results.signatures, triage.as_ref());
        let mut s = serde_json::to_string_pretty(&signatures).map_err(|e| Error::Io {
            path: args.run.clone(),
            source: e.into(),
        })?;
        s.push('\n');
        s
    } else {
        let mut text = why::explain(&results);
        text.push_str(&where_ran(&results));
        if let Some(t) = &triage {
            text.push('\n');
            text.push_str(&crate::triage::report::text(t));
        }
        text
    };
    super::write_out(out, &text)?;
    Ok(ExitCode::Success)
}

/// Where the cells ran (their host facts), a line per host and its GPUs;
/// empty when no cell recorded it.
fn where_ran(results: &crate::results::Results) -> String {
    let hosts = crate::report::envs::hosts(results);
    if hosts.is_empty() {
        return String::new();
    }
    let mut s = String::from("\nWhere the cells ran:\n");
    for h in hosts {
        s.push_str(&format!("  {}: {}\n", h.host, h.cells));
    }
    s
}

/// The signatures as JSON, each new one that the run's triage searched
/// with that search (`triage`: its state, line and searches, as
/// `triage.json` has them). Gone signatures are not in the run: their fix
/// ranges are in `triage.json` and `rocmatrix triage RUN --json`.
fn with_triage(
    signatures: &[crate::analysis::signature::Signature],
    triage: Option<&crate::triage::store::Triage>,
) -> Vec<serde_json::Value> {
    signatures
        .iter()
        .map(|s| {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            let item = triage.and_then(|t| {
                t.items.iter().find(|i| {
                    i.change == crate::triage::store::Change::New && i.signature.id == s.id
                })
            });
            if let (Some(item), Some(map)) = (item, v.as_object_mut()) {
                map.insert(
                    "triage".into(),
                    serde_json::to_value(item).unwrap_or_default(),
                );
            }
            v
        })
        .collect()
}
