//! `rocmatrix diff OLD NEW`: what changed from one run to another — test
//! outcomes (new failures, fixed, …), what changed underneath each
//! environment (packages, base, builds, sources) and the gfx targets
//! libraries gained and lost. Each side is a run directory, a report
//! directory or a results.json.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::analysis::regress::{compare_signatures, Class};
use crate::analysis::{compare, load_baseline};
use crate::error::{Error, ExitCode, FailOn};
use crate::report::changes_view;
use crate::report::ReportError;

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The earlier run (the baseline): a run directory, a report directory
    /// or a results.json.
    pub old: PathBuf,
    /// The later run.
    pub new: PathBuf,
    /// List every package change, not only the first of each environment.
    #[arg(long)]
    pub all_packages: bool,
    /// Print the comparison as JSON (results.json's `regressions`).
    #[arg(long)]
    pub json: bool,
    /// What makes the exit code 1: `regression` (the new run regressed),
    /// `failure` (the new run has failing cells); by default nothing.
    #[arg(long, value_enum, default_value_t = FailOn::Never)]
    pub fail_on: FailOn,
}

pub fn run(args: DiffArgs, out: &mut dyn Write) -> Result<ExitCode, Error> {
    let old = load_baseline(&args.old).map_err(ReportError::from)?;
    let mut new = load_baseline(&args.new).map_err(ReportError::from)?;
    let mut reg = compare(&new, &old, &args.old.display().to_string(), None);
    reg.signatures = compare_signatures(&mut new, &old);
    let count = reg.regression_count();
    let bad = match args.fail_on {
        FailOn::Regression => count > 0,
        FailOn::Failure => new.failing_cells() > 0,
        FailOn::Never => false,
    };
    let code = if bad {
        ExitCode::TestFailure
    } else {
        ExitCode::Success
    };
    if args.json {
        let mut s = serde_json::to_string_pretty(&reg).unwrap_or_default();
        s.push('\n');
        super::write_out(out, &s)?;
        return Ok(code);
    }
    let mut s = format!(
        "{} → {}\n{count} regression{}",
        args.old.display(),
        args.new.display(),
        if count == 1 { "" } else { "s" }
    );
    for c in Class::ALL {
        if reg.count(c) > 0 {
            s.push_str(&format!(" · {}: {}", c.label(), reg.count(c)));
        }
    }
    s.push_str(&format!(
        " · signatures: {} new, {} known, {} gone\n",
        reg.signatures.new, reg.signatures.known, reg.signatures.gone
    ));
    for c in &reg.cells {
        let class = c.class.as_str();
        let v = |x: &Option<String>| x.clone().unwrap_or_else(|| "–".into());
        s.push_str(&format!(
            "cell {} {class}: {} → {}\n",
            c.cell,
            v(&c.from),
            v(&c.to)
        ));
    }
    for class in [Class::NewFailure, Class::Fixed] {
        for t in reg.of_class(class).take(50) {
            s.push_str(&format!(
                "{} {}: {}\n",
                class.label(),
                t.cell,
                t.display_name()
            ));
        }
    }
    let envs = changes_view::environments(&new, &reg);
    if !envs.is_empty() {
        s.push_str("environments:\n");
    }
    for e in &envs {
        let head = e.head();
        if args.all_packages && e.state == "changed" {
            s.push_str(&format!("  {head} changed:\n"));
            for a in &e.all {
                s.push_str(&format!("    {a}\n"));
            }
        } else if e.state == "changed" {
            s.push_str(&format!("  {head} changed: {}\n", e.line));
        } else {
            s.push_str(&format!("  {head}: {}\n", e.state));
        }
    }
    if !reg.coverage.is_empty() {
        s.push_str("gfx coverage:\n");
        for c in &reg.coverage {
            s.push_str(&format!("  {}\n", c.line()));
        }
    }
    super::write_out(out, &s)?;
    Ok(code)
}
