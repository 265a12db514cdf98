//! `rocmatrix history`: the recorded runs; `history show TEST` one test's
//! outcome run after run in each cell, and what the history makes of it;
//! `history flaky` the tests that are flaky, and where; `history hosts`
//! the failures and flakes per host and GPU; `history import`
//! records run stores made before (or while the history was unreachable).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::error::{Error, ExitCode};
use crate::history::{self, record, History, Location};

/// Where the history is: `--history` / `ROCMATRIX_HISTORY`, else
/// `<out>/history.sqlite`.
#[derive(Debug, Clone, Args)]
pub struct HistoryOption {
    /// The history to record into and read: an SQLite file, a PostgreSQL
    /// URL (postgres://user:password@host/db), or `off` (default:
    /// history.sqlite under --out).
    #[arg(
        long,
        env = "ROCMATRIX_HISTORY",
        value_name = "PATH|URL|off",
        hide_env_values = true
    )]
    pub history: Option<String>,
}

impl HistoryOption {
    pub fn location(&self, out: &std::path::Path) -> Location {
        Location::resolve(self.history.as_deref(), out)
    }
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    pub command: Option<HistoryCommand>,
    /// Parent of `runs/`, where the default history.sqlite is.
    #[arg(long, default_value = crate::store::DEFAULT_OUT, value_name = "DIR", global = true)]
    pub out: PathBuf,
    /// The history: an SQLite file, a PostgreSQL URL (default:
    /// history.sqlite under --out).
    #[arg(
        long,
        env = "ROCMATRIX_HISTORY",
        value_name = "PATH|URL",
        hide_env_values = true,
        global = true
    )]
    pub history: Option<String>,
    /// JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// One test (`classname.name`) in every cell that ran it, run after run.
    Show {
        test: String,
        /// Only cells with these axis values (KEY=VALUE, repeatable).
        #[arg(long = "cell", value_name = "KEY=VALUE", value_parser = super::parse_label)]
        cells: Vec<(String, String)>,
    },
    /// Tests that are flaky, with their rate and where.
    Flaky,
    /// Each host and GPU of the last runs: cells, failures, flaky tests.
    Hosts {
        /// How many of the latest runs to count.
        #[arg(long, default_value_t = 20, value_name = "N")]
        last: usize,
    },
    /// Record run stores into the history (a run recorded already is skipped).
    Import {
        #[arg(required = true)]
        runs: Vec<PathBuf>,
    },
}

pub fn run(args: HistoryArgs, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let location = Location::resolve(args.history.as_deref(), &args.out);
    if let Some(HistoryCommand::Import { runs }) = &args.command {
        return import(&location, runs, out);
    }
    if let Location::Sqlite(p) = &location {
        if !p.exists() {
            return Err(Error::Usage(format!(
                "no history at {}: runs record into it as they finish, or `rocmatrix history import RUN…`",
                p.display()
            )));
        }
    }
    let mut h = open(&location)?;
    let text = match args.command {
        None => list(&mut h, args.json)?,
        Some(HistoryCommand::Show { test, cells }) => show(&mut h, &test, &cells, args.json)?,
        Some(HistoryCommand::Flaky) => flaky(&mut h, args.json)?,
        Some(HistoryCommand::Hosts { last }) => {
            let (tallies, runs) = history::hosts::tally(&mut h, last).map_err(db)?;
            if args.json {
                serde_json::to_string_pretty(&tallies).unwrap_or_default() + "\n"
            } else {
                history::hosts::lines(&tallies, runs)
            }
        }
        Some(HistoryCommand::Import { .. }) => unreachable!("handled above"),
    };
    super::write_out(out, &text)?;
    Ok(ExitCode::Success)
}

fn open(location: &Location) -> Result<History, Error> {
    Ok(History::open(location)?)
}

fn db(e: history::HistoryError) -> Error {
    Error::History(e)
}

fn import(location: &Location, runs: &[PathBuf], out: &mut dyn Write) -> Result<ExitCode, Error> {
    let mut h = open(location)?;
    let mut text = String::new();
    for dir in runs {
        let results = crate::analysis::regress::load_baseline(dir)?;
        let rec = record::of_run(&[dir.as_path()], &results)
            .map_err(|e| Error::Usage(format!("{}: {e}", dir.display())))?;
        let added = h.record(&rec).map_err(db)?;
        text.push_str(&format!(
            "{} run {} ({}, {} cells, {} non-passing tests)\n",
            if added {
                "recorded"
            } else {
                "already recorded:"
            },
            rec.run,
            record::time_of(rec.started_ms),
            rec.cells.len(),
            rec.tests.len()
        ));
    }
    super::write_out(out, &text)?;
    Ok(ExitCode::Success)
}

fn list(h: &mut History, json: bool) -> Result<String, Error> {
    let runs = h.runs().map_err(db)?;
    if json {
        let v: Vec<serde_json::Value> = runs
            .iter()
            .map(|r| {
                serde_json::json!({
                    "run": r.run, "started": record::time_of(r.started_ms),
                    "started_ms": r.started_ms, "matrix": r.name, "sources": r.sources,
                })
            })
            .collect();
        return Ok(serde_json::to_string_pretty(&v).unwrap_or_default() + "\n");
    }
    let mut s = format!("{:<28} {:<22} {}\n", "run", "started", "matrix");
    for r in &runs {
        s.push_str(&format!(
            "{:<28} {:<22} {}\n",
            r.run,
            record::time_of(r.started_ms),
            r.name
        ));
    }
    s.push_str(&format!("{} runs in {}\n", runs.len(), h.location()));
    Ok(s)
}

fn show(
    h: &mut History,
    test: &str,
    cells: &[(String, String)],
    json: bool,
) -> Result<String, Error> {
    let runs = h.runs().map_err(db)?;
    let found: Vec<_> = h
        .follow(Some(test))
        .map_err(db)?
        .into_iter()
        .filter(|t| cells.iter().all(|(k, v)| t.axes.get(k) == Some(v)))
        .collect();
    if found.is_empty() {
        return Err(Error::Usage(format!(
            "{test}: no failure of it is recorded{} (the history keeps passing tests by hash, \
             so a test that never failed is not found by name)",
            if cells.is_empty() {
                ""
            } else {
                " in those cells"
            }
        )));
    }
    let latest = runs.len().saturating_sub(1);
    if json {
        let v: Vec<serde_json::Value> = found
            .iter()
            .map(|t| {
                serde_json::json!({
                    "matrix": t.matrix, "cell": t.cell, "axes": &*t.axes, "test": t.test,
                    "verdict": history::describe(t, &runs, latest),
                    "runs": t.points.iter().map(|p| serde_json::json!({
                        "run": runs[p.run].run, "outcome": p.obs.word(),
                        "mark": p.obs.mark().to_string(),
                    })).collect::<Vec<_>>(),
                    "signature": t.signature, "message": t.message,
                })
            })
            .collect();
        return Ok(serde_json::to_string_pretty(&v).unwrap_or_default() + "\n");
    }
    let mut s = String::new();
    for t in &found {
        let strip: String = t.points.iter().map(|p| p.obs.mark()).collect();
        s.push_str(&format!(
            "{} in {} ({}): {}  {}\n",
            t.test,
            t.cell,
            t.matrix,
            strip,
            history::describe(t, &runs, latest)
        ));
        if !t.message.is_empty() {
            s.push_str(&format!("  last failure: {}\n", t.message));
        }
    }
    s.push_str("(oldest run first: ✓ passed, ✗ failed, ~ passed on a rerun, · not run)\n");
    Ok(s)
}

fn flaky(h: &mut History, json: bool) -> Result<String, Error> {
    let all = h.follow(None).map_err(db)?;
    let places = history::flaky_places(&all);
    let place = |t: &history::TestHistory| {
        places
            .get(&(t.matrix.clone(), t.test.clone()))
            .cloned()
            .unwrap_or_default()
    };
    // Each flaky test with its failures, runs and why.
    let flaky: Vec<_> = all
        .iter()
        .filter_map(|t| match &t.verdict {
            history::verdict::HistoryVerdict::Flaky {
                failures,
                runs,
                why,
            } => Some((t, *failures, *runs, *why)),
            _ => None,
        })
        .collect();
    if json {
        let v: Vec<serde_json::Value> = flaky
            .iter()
            .map(|&(t, failures, runs, why)| {
                serde_json::json!({
                    "matrix": t.matrix, "test": t.test, "cell": t.cell, "axes": &*t.axes,
                    "failures": failures, "runs": runs, "why": why,
                    "where": place(t).axes, "where_host": place(t).host,
                })
            })
            .collect();
        return Ok(serde_json::to_string_pretty(&v).unwrap_or_default() + "\n");
    }
    let mut s = String::new();
    for &(t, failures, runs, why) in &flaky {
        let strip: String = t.points.iter().map(|p| p.obs.mark()).collect();
        s.push_str(&format!(
            "{} in {}: {failures} of {runs} runs failed ({why}) {strip}",
            t.test, t.cell
        ));
        let p = place(t);
        if !p.is_empty() {
            s.push_str(&format!("; flaky {}", p.words()));
        }
        s.push('\n');
    }
    s.push_str(&format!(
        "{} flaky of {} followed (a test in a cell, through every run of the cell)\n",
        crate::run::progress::count(flaky.len(), "test"),
        all.len()
    ));
    Ok(s)
}
